"""The live chain on one recorded stream of per-second features, in-process, with the live product's objects.

Second by second: the detector's live stepper (`recognition.model.FastStepper`, the GRU state carried from second to
second) gives the class probabilities and done states; the evidence reporter (`recognition.evidence.EvidenceReporter`,
what a detector stream sends beside each key-step) takes them; the online segmenter
(`recognition.segmenter.OnlineSegmenter`) confirms key-steps; each confirmed key-step goes, with the evidence as it
stood before its first second, to the stream's pre-condition checker (`graphs.checker_settings.CheckerSettings.new`:
the object the live checker and ``prego-bench`` run). At the end the checker names the required steps never done, with
the evidence at the end (the live ``missing`` report). This is what ``stream-detect`` computes for a feature file,
minus the ZeroMQ hops between the detector and the checker processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import torch

from graphs.checker import NO_EVIDENCE, StepEvidence
from graphs.checker_settings import CheckerSettings
from graphs.order_rules import required_steps
from graphs.task_graph import TaskGraph
from recognition.evidence import EvidenceModel, EvidenceReporter
from recognition.model import FastStepper, finite_outputs
from recognition.segmenter import OnlineSegmenter, SegmenterConfig, SegmentEvent

# The causal mean a step's peak evidence is taken over (`step_peaks`): DERIVATION.md's linear probe gains 4 mAP points
# from a 5 s causal mean at one feature a second.
PEAK_WINDOW_S: Final = 5.0


def causal_means(probs: np.ndarray, frames: int) -> np.ndarray:
    """``m(t) = (1/W_t) sum_{u=t-W_t+1..t} p_u`` with ``W_t = min(frames, t + 1)``: each frame's mean over the last
    ``frames`` frames (fewer at the start), using nothing after it.

    Args:
        probs: ``(T, C)`` class probabilities.
        frames: the window, in frames (at least 1).

    Returns:
        ``(T, C)`` float64 means.
    """
    csum = np.concatenate([np.zeros((1, probs.shape[1])), np.cumsum(probs, axis=0, dtype=np.float64)])
    t = np.arange(1, len(probs) + 1)
    lo = np.maximum(t - frames, 0)
    return (csum[t] - csum[lo]) / (t - lo)[:, None]


def peak_frames(fps: float) -> int:
    """`PEAK_WINDOW_S` in frames at ``fps``: the one conversion the end report and the ceiling's scores share."""
    return max(1, round(PEAK_WINDOW_S * fps))


def step_peaks(probs: np.ndarray, class_step_ids: Sequence[int | None], fps: float) -> dict[int, float]:
    """Per key-step class, ``max_t (1/W) sum_{u=t-W+1..t} p_u`` with ``W = PEAK_WINDOW_S * fps`` frames (fewer at
    the start, `causal_means`): how clearly the stream ever showed the step, using only frames up to the end of the
    stream.

    Args:
        probs: ``(T, C)`` class probabilities.
        class_step_ids: class -> step id (None: background).
        fps: frames per second.

    Returns:
        step id -> peak (0 for an empty stream).
    """
    if len(probs) == 0:
        return {int(s): 0.0 for s in class_step_ids if s is not None}
    peak = causal_means(probs, peak_frames(fps)).max(axis=0)
    return {int(s): float(peak[c]) for c, s in enumerate(class_step_ids) if s is not None}


@dataclass(frozen=True)
class LiveAlert:
    """One alert of the checker.

    Attributes:
        step: the step alerted (done before a pre-condition).
        missing: the pre-conditions it names.
        time: seconds from the stream's start at which it went out (the second that confirmed the step has ended).
        probability: how likely the checker finds it right.
        index: position of the step among the recognised ones.
        retracted: withdrawn later (never, for an alert on a confirmed key-step).
    """

    step: int
    missing: tuple[int, ...]
    time: float
    probability: float
    index: int
    retracted: bool = False


@dataclass(frozen=True)
class DetectorRun:
    """What the detector side of the chain sent for one recording: the confirmed key-steps with their evidence.

    Attributes:
        outputs: ``(T, outputs)`` the stepper's per-second outputs (class probabilities, then done states).
        recognised: the confirmed key-steps, in the order the segmenter emitted them.
        confirmed_at: per key-step, the second (from the start) at whose end the segmenter confirmed it.
        evidence: per key-step, the evidence sent with it (as it stood before its first second).
        end_evidence: the evidence at the end (the last heartbeat's).
        peaks: step id -> its peak over the stream of the causal `PEAK_WINDOW_S` mean of its probability
            (`step_peaks`), known at the end of the stream.
    """

    outputs: np.ndarray
    recognised: tuple[SegmentEvent, ...]
    confirmed_at: tuple[float, ...]
    evidence: tuple[StepEvidence, ...]
    end_evidence: StepEvidence
    peaks: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ChainRun:
    """What the chain did on one recording.

    Attributes:
        outputs: ``(T, outputs)`` the stepper's per-second outputs (class probabilities, then done states).
        recognised: the confirmed key-steps, in the order the segmenter emitted them.
        alerts: the checker's alerts.
        never_done: ``(step, P(skipped))`` of the required steps named never done at the end.
    """

    outputs: np.ndarray
    recognised: tuple[SegmentEvent, ...]
    alerts: tuple[LiveAlert, ...]
    never_done: tuple[tuple[int, float], ...]


def stepper_outputs(stepper: FastStepper, features: np.ndarray, where: str) -> np.ndarray:
    """The detector's live stepper over a stream, one second at a time (reset first: the stream starts from zeros).

    Args:
        stepper: the fold's detector.
        features: ``(T, D)`` the recording's per-second features.
        where: its features file, named when the outputs are not finite.

    Returns:
        ``(T, outputs)`` its per-second outputs (class probabilities, then done states).

    Raises:
        InputError: an output is not finite (`recognition.model.finite_outputs`).
    """
    stepper.reset()
    x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
    outputs = np.zeros((len(x), stepper.config.outputs), dtype=np.float32)
    for t in range(len(x)):
        outputs[t] = stepper.step(x[t])[0].numpy()
    return finite_outputs(outputs, features, where)


def segment_outputs(
    outputs: np.ndarray,
    class_step_ids: Sequence[int | None],
    segmenter: SegmenterConfig,
    evidence: EvidenceModel | None,
    once: bool = False,
) -> DetectorRun:
    """The rest of the detector side over the stepper's per-second outputs, one second at a time: evidence reporter,
    online segmenter (the stepper never depends on them, so its outputs can be computed, or cached, first).

    Args:
        outputs: ``(T, outputs)`` the stepper's per-second outputs.
        class_step_ids: the detector's class -> step id (None: background).
        segmenter: the segmenter settings.
        evidence: the detector's evidence calibration (None: key-steps are sent without evidence).
        once: a key-step already confirmed in this stream is not sent again (the recipe's steps are done once; live,
            `stream-detect --once`).

    Returns:
        The `DetectorRun`.
    """
    seg = OnlineSegmenter(segmenter, class_step_ids)
    reporter = EvidenceReporter(evidence, class_step_ids, segmenter.fps) if evidence is not None else None
    classes = len(class_step_ids)
    recognised: list[SegmentEvent] = []
    confirmed_at: list[float] = []
    sent: list[StepEvidence] = []
    seen: set[int] = set()

    def confirm(event: SegmentEvent, second: int) -> None:
        if once and event.step in seen:
            return
        seen.add(event.step)
        ev = NO_EVIDENCE
        if reporter is not None:
            steps, q = reporter.done_before(event.start_frame)
            ev = StepEvidence.of(steps, q, reporter.real(event.step, event.confidence,
                                                          event.end_frame - event.start_frame))
        recognised.append(event)
        confirmed_at.append((second + 1) / segmenter.fps)
        sent.append(ev)

    for t in range(len(outputs)):
        if reporter is not None:
            reporter.update(outputs[t])
        for event in seg.update(outputs[t, :classes]):
            confirm(event, t)
    for event in seg.flush():
        confirm(event, len(outputs) - 1)
    end = StepEvidence.of(*reporter.done_now()) if reporter is not None else NO_EVIDENCE
    return DetectorRun(outputs, tuple(recognised), tuple(confirmed_at), tuple(sent), end,
                       step_peaks(outputs[:, :classes], class_step_ids, segmenter.fps))


def check_stream(
    run: DetectorRun, graph: TaskGraph, checking: CheckerSettings, done_level: float | None = None
) -> ChainRun:
    """The checker side: each confirmed key-step, in the order sent, with its evidence, to a fresh checker of the
    stream; at the end the required steps it finds never done (the live ``missing`` report).

    Args:
        run: what the detector side sent.
        graph: the task graph.
        checking: which checker (probabilistic by default, as live).
        done_level: None: the checker names the steps never done. A number: a required step is named never done
            when its peak evidence over the stream (`DetectorRun.peaks`) stays below it, whether or not the
            segmenter confirmed it (its ``P(skipped)`` reported as ``1 - peak``).

    Returns:
        The `ChainRun`.
    """
    checker = checking.new(graph)
    alerts: list[LiveAlert] = []
    for index, (event, at, ev) in enumerate(zip(run.recognised, run.confirmed_at, run.evidence, strict=True)):
        verdict = checker.observe(event.step, ev)
        if verdict.is_mistake:
            missing = tuple(int(m) for m in verdict.missing if isinstance(m, int))
            alerts.append(LiveAlert(event.step, missing, at, float(verdict.probability), index))
    if done_level is None:
        never = [(int(s), float(p)) for s, p in checker.never_done(required_steps(graph), run.end_evidence)]
    else:
        never = [(s, 1.0 - run.peaks.get(s, 0.0)) for s in required_steps(graph) if run.peaks.get(s, 0.0) < done_level]
    return ChainRun(run.outputs, run.recognised, tuple(alerts), tuple(never))
