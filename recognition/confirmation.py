"""How long a run must last to be confirmed as a key-step, chosen for a detector on its validation videos.

The online segmenter confirms a run of one class once it has lasted ``min_duration`` seconds
(`recognition.segmenter`). Its default, 0.5 s, suits steps of a few seconds seen at 5 frames a second: two frames.
Features imported at one or two vectors a second make it one vector, and steps there last tens of seconds to
minutes: every one-vector flicker of the detector became a confirmed step (58-85 % of the detections false on
CaptainCook4D features at 2 a second), each a chance of a false alarm.

``recognition-train`` therefore chooses the confirmation length among `CANDIDATES_S`, on the validation videos only,
where the default is a single frame (below 3 frames a second: there it confirms nothing):

- a candidate may take at most `STEP_SHARE` of the median annotated step of those videos (a confirmation that eats
  most of a step delays every alert by it and cuts the short steps), and candidates that round to the same number
  of frames are one;
- a candidate ``d`` longer than the default also says what a step of such a procedure is: a run shorter than
  ``d / 2`` between two runs of one class is that class's flicker (``min_run``: the run goes on through it), and a
  run shorter than ``d`` is no step of its own (``class_min_duration``, every class: no clean short step). At one
  vector a second the default ``min_run`` of 0.1 s is below one vector, so every one-second blip inside a step
  split it in three and was itself confirmed;
- the chosen one gives the best key-step F1@50 (`recognition.segment_metrics`) of the confirmed segments against
  the annotated ones, summed over the videos; a tie goes to the shorter (its alerts come sooner).

At video rates, and on steps of a few seconds, only the default is a candidate: detectors of such footage are
trained as before. The wait before a segment is emitted anyway (``max_delay``) stays at least twice the
confirmation, as the segmenter requires.

Why not at video rates too: on the camera-like footage of `benchmarks/alert_quality.py` (5 frames a second, steps of
2-6 s, median 4.1-4.6 s on the validation videos) the rule chose 1 s for each of three detectors (validation F1@50
63.0 -> 89.5, 70.6 -> 92.3, 54.8 -> 81.0), and on the held-out videos the same weights gave key-step F1@50
47.6 -> 69.1, but the probabilistic checker's mistake F1 69.8 -> 63.5 (one mistake of 12 fewer caught), the same
0.17 false alarms per video, and its median latency 1.91 -> 2.53 s. There the segments improved and the alerts,
which the default 0.5 s had been set for, did not.

Measured on the 46 validation recordings of `tgml bench-live`'s 18 folds (CaptainCook4D, one vector a second,
training recordings only; F1@50 pooled): the default 14.6 (2,251 segments confirmed for 592 annotated); ``d`` of
3 s 16.9, 6 s 22.8, 10 s 29.1 alone, and 20.0, 27.0, 33.7 with the flicker and no-short-step rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

import numpy as np

from recognition.evidence_calibration import annotated_runs
from recognition.segment_metrics import MatchCounts, TimedSegment, segment_matches
from recognition.segmenter import SegmenterConfig, segment_outputs

CANDIDATES_S: Final = (0.5, 1.0, 2.0, 3.0, 6.0, 10.0)
STEP_SHARE: Final = 0.25
IOU: Final = 0.5


@dataclass(frozen=True)
class ConfirmationChoice:
    """The segmenter settings chosen, and what each candidate scored.

    Attributes:
        config: the segmenter settings with the chosen ``min_duration`` (and ``max_delay`` at least twice it).
        f1: F1@50 in percent per candidate ``min_duration`` (None: no annotated step to find), in the order tried;
            empty when only the default was a candidate.
        median_step_s: the median annotated step of the validation videos, in seconds (None: none annotated).
    """

    config: SegmenterConfig
    f1: dict[float, float | None]
    median_step_s: float | None

    @property
    def said(self) -> bool:
        """Whether the trainer's output gives `summary`: candidates were scored, or the default was kept though it is
        a single frame (steps too short for a longer one at a vector or two a second: the user reading the
        manual's "it prints the choice" was told nothing)."""
        return bool(self.f1) or self.config.frames(self.config.min_duration) <= 1

    def summary(self) -> str:
        """One line for the trainer's output: the length chosen, and why."""
        if not self.f1:
            why = ("no annotated step on the validation videos" if self.median_step_s is None else
                   f"the validation videos' median step, {self.median_step_s:.1f} s, leaves no longer one to try "
                   f"(one must fit in {STEP_SHARE:.0%} of it, its half spanning two frames or more)")
            return (f"segmenter: a key-step is confirmed after {self.config.min_duration:g} s, the default, a single "
                    f"frame at {self.config.fps:g} a second: {why}")
        scores = ", ".join(f"{s:g} s {'-' if f is None else f'{f:.1f}'}" for s, f in self.f1.items())
        median = "" if self.median_step_s is None else f"; median step {self.median_step_s:.1f} s"
        return (f"segmenter: a key-step is confirmed after {self.config.min_duration:g} s, chosen on the validation "
                f"videos by key-step F1@50 ({scores}{median})")


def annotated_segments(targets: np.ndarray, fps: float, class_step_ids: Sequence[int | None]) -> list[TimedSegment]:
    """The annotated key-step segments of per-frame targets (their largest entry is the label; runs of background
    classes are left out), in seconds: the calibration's runs (`recognition.evidence_calibration.annotated_runs`)."""
    steps = {c: s for c, s in enumerate(class_step_ids) if s is not None}
    background = set(range(len(class_step_ids))) - steps.keys()
    return [TimedSegment(steps[c], start / fps, end / fps)
            for c, start, end in annotated_runs(np.asarray(targets).argmax(axis=1), background)]


def candidate_durations(base: SegmenterConfig, median_step_s: float | None) -> list[float]:
    """The confirmation lengths worth trying: the default, then, where the default is a single frame, each of
    `CANDIDATES_S` no longer than `STEP_SHARE` of the median step whose half spans two frames or more, one per number
    of frames."""
    if base.frames(base.min_duration) > 1:  # the default confirms over several frames already
        return [base.min_duration]
    limit = STEP_SHARE * median_step_s if median_step_s is not None else base.min_duration
    seen = {base.frames(base.min_duration)}
    tried = [base.min_duration]
    for seconds in CANDIDATES_S:
        frames = base.frames(seconds)
        # A flicker rule (half the candidate) of one frame absorbs no blip: such a candidate is only the default
        # without clean short steps.
        if seconds > base.min_duration and seconds <= limit and frames not in seen and base.frames(seconds / 2) > 1:
            seen.add(frames)
            tried.append(seconds)
    return tried


def confirmation_config(base: SegmenterConfig, seconds: float, classes: int) -> SegmenterConfig:
    """``base`` with a confirmation of ``seconds`` (longer than its own), its flicker rule (``min_run``: half of it),
    no clean short step of any of ``classes`` (see the module docstring), and early announcements (``--alert-on
    onset``, the live default) only once a run has outlasted the flicker rule: announced after the default 2 frames
    (2 s at one vector a second), runs that the flicker rule then dropped were withdrawn and their alerts retracted
    (7 alerts, 5 retracted on 3 test recordings with the binary checker; at half the confirmation 3, 1)."""
    return replace(base, min_duration=seconds, min_run=seconds / 2, max_delay=max(base.max_delay, 2 * seconds),
                   class_min_duration=(seconds,) * classes, onset_frames=base.frames(seconds / 2))


def confirmed_f1(
    outputs: Mapping[str, np.ndarray], annotated: Mapping[str, Sequence[TimedSegment]], config: SegmenterConfig,
    class_step_ids: Sequence[int | None],
) -> float | None:
    """F1@50 (percent) of the segments the segmenter confirms on each video's outputs, counts summed over videos.

    Args:
        outputs: ``{video: probs (T, C) or (T, 2C)}``; columns past ``C`` (done states) are not read.
        annotated: ``{video: its annotated segments}`` (`annotated_segments`, the same for every candidate).
        config: the segmenter settings.
        class_step_ids: class -> step id (None: background).
    """
    classes = len(class_step_ids)
    counts = MatchCounts()
    for name, probs in outputs.items():
        found = [TimedSegment(e.step, e.start, e.end)
                 for e in segment_outputs(np.asarray(probs)[:, :classes], config, class_step_ids)]
        counts += segment_matches(found, annotated[name], IOU)
    f1 = counts.f1
    return None if f1 is None else 100.0 * f1


def choose_confirmation(
    validation: Mapping[str, tuple[np.ndarray, np.ndarray]], class_step_ids: Sequence[int | None],
    base: SegmenterConfig,
) -> ConfirmationChoice:
    """Choose the segmenter's ``min_duration`` on validation outputs (see the module docstring).

    Args:
        validation: ``{video: (probs (T, C) or (T, 2C), targets (T, C))}``, the trainer's causal outputs and targets.
        class_step_ids: class -> step id (None: background).
        base: the settings the other fields come from (the defaults at the detector's fps).

    Returns:
        The `ConfirmationChoice`; ``base`` itself when only its ``min_duration`` is a candidate.
    """
    annotated = {name: annotated_segments(targets, base.fps, class_step_ids)
                 for name, (_, targets) in validation.items()}
    steps = [s.end - s.start for segments in annotated.values() for s in segments]
    median = float(np.median(steps)) if steps else None
    tried = candidate_durations(base, median)
    if len(tried) == 1:
        return ConfirmationChoice(base, {}, median)
    outputs = {name: probs for name, (probs, _) in validation.items()}
    configs = [base] + [confirmation_config(base, s, len(class_step_ids)) for s in tried[1:]]
    f1 = {s: confirmed_f1(outputs, annotated, c, class_step_ids) for s, c in zip(tried, configs, strict=True)}
    best = max(range(len(tried)), key=lambda i: (f1[tried[i]] or 0.0, -i))  # a tie: the shorter
    return ConfirmationChoice(configs[best], f1, median)
