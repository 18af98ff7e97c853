"""Simulated recognition noise on the *training* videos: what the probabilistic checker's settings are chosen on.

There is no recognised output of the PREGO training videos, so the checker's settings (`checker_selection`) are
chosen on recogniser output simulated from the training annotations, never on the test split.

**Per-frame label streams** (`annotation_labels`). A training video's segments, in file order, become labels at
``fps`` frames per second: segment ``k`` covers ``[start_k, min(end_k, start_{k+1}))`` (an overlapping segment is cut
where the next one starts) and gaps between segments are dropped, as in the PREGO frames files, which label every
frame with a key-step and have no background class.

**Label noise** (`LabelNoise`, `noisy_labels`), the errors an online recogniser makes on such a stream. Each segment
draws one *confusable partner*: the step before it (probability `PARTNER_PREVIOUS`), the step after it
(`PARTNER_NEXT`), otherwise a random other key-step. Then, in this order:

- **lag**: the previous segment's label runs on into the segment for an exponential time of mean ``lag_s`` (an
  online model is late to see a new step; a short step can vanish entirely);
- **confusion**: with probability ``confuse`` the whole segment is recognised as its partner;
- **flicker**: bursts of the partner's label, of geometric length with mean ``burst_s``, cover a share ``flicker``
  of the segment's frames: the prediction alternates between two steps, as MiniROAD's does on EPIC-Tent-O.

`NOISE_LEVELS` names three levels, light to heavy; a choice must hold across all of them.

**PREGO-like items** (`mistake_streams`; `mistake_sequences` for key-step sequences): a real prefix of a held-out
training video (its first ``k`` segments, repeats kept), then one mistaken step lasting as long as segment ``k`` did,
the stream cut right after it, as the PREGO test videos are. The mistake is, as in
`tgml.bench.prego.selection.synthetic_slips`, with probability ``slip_rate`` a key-step not done yet drawn from the
recogniser's vocabulary (the steps of the training videos), else a later step of the same video not done yet (an
order mistake). The last confirmed step is scored as the mistake.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from graphs.common.errors import InputError
from graphs.common.files import read_json
from graphs.common.settings_files import as_written

# The partner a segment is confused with: the step before it, the step after it, or any other (the remainder).
PARTNER_PREVIOUS: Final = 0.4
PARTNER_NEXT: Final = 0.3


@dataclass(frozen=True)
class TimedVideo:
    """One annotated training video with its segments' times.

    Attributes:
        video: the recording key.
        steps: key-step id per segment, file order.
        start_s: start of each segment in seconds.
        end_s: end of each segment in seconds.
    """

    video: str
    steps: tuple[int, ...]
    start_s: tuple[float, ...]
    end_s: tuple[float, ...]


def load_timed_videos(path: str | Path, scenario: str, seconds_per_unit: float) -> list[TimedVideo]:
    """The videos of one scenario of an annotation file, with their segments' times.

    Args:
        path: annotation JSON (``{"annotations": {video: {"scenario", "segments": [...]}}}``).
        scenario: the scenario whose videos are read.
        seconds_per_unit: seconds per unit of ``start_time`` / ``end_time`` (EPIC-Tent-O: milliseconds, 0.001).

    Returns:
        The videos in file order (those with no segment left out).

    Raises:
        InputError: naming the file, video and field of a missing or non-numeric time.
    """
    data = read_json(path, "annotation file")
    videos = data.get("annotations") if isinstance(data, dict) else None
    if not isinstance(videos, dict):
        raise InputError(f"{path}: expected an object with 'annotations'")
    out = []
    for name, record in videos.items():
        if not isinstance(record, dict) or record.get("scenario") != scenario:
            continue
        segments = record.get("segments")
        if not isinstance(segments, list):
            raise InputError(f"{path}: video {name!r}: 'segments' must be a list")
        fields: dict[str, list[float]] = {"step_id": [], "start_time": [], "end_time": []}
        for k, segment in enumerate(segments):
            for key, values in fields.items():
                value = segment.get(key) if isinstance(segment, dict) else None
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                    raise InputError(f"{path}: video {name!r}: segments[{k}].{key} = {as_written(value)}"
                                     " is not a number")
                values.append(value)
        if fields["step_id"]:
            out.append(TimedVideo(str(name), tuple(int(s) for s in fields["step_id"]),
                                  tuple(t * seconds_per_unit for t in fields["start_time"]),
                                  tuple(t * seconds_per_unit for t in fields["end_time"])))
    return out


def segment_frames(video: TimedVideo, fps: float) -> np.ndarray:
    """Frames of each segment in the label stream (see the module docstring), at least one each.

    Returns:
        int ``(n,)``: segment ``k`` lasts ``[start_k, min(end_k, start_{k+1}))``, in frames.
    """
    start = np.asarray(video.start_s, dtype=np.float64)
    end = np.asarray(video.end_s, dtype=np.float64)
    stop = np.minimum(end, np.r_[start[1:], np.inf])
    return np.maximum(1, np.round((stop - start) * fps)).astype(np.int64)


def annotation_labels(video: TimedVideo, fps: float) -> np.ndarray:
    """The per-frame label stream of an annotated video (module docstring): ``(T,)`` key-step ids."""
    return np.repeat(np.asarray(video.steps, dtype=np.int64), segment_frames(video, fps))


@dataclass(frozen=True)
class LabelNoise:
    """One level of simulated recognition noise (module docstring).

    Attributes:
        name: what the level is called in tables.
        confuse: probability that a whole segment is recognised as its partner, in [0, 1].
        flicker: share of a segment's frames showing the partner's label in bursts, in [0, 1).
        burst_s: mean length of a flicker burst, seconds (> 0).
        lag_s: mean time the previous label runs on into a segment, seconds (>= 0).
    """

    name: str
    confuse: float
    flicker: float
    burst_s: float
    lag_s: float

    def __post_init__(self) -> None:
        def fail(field: str, why: str) -> None:
            raise InputError(f"LabelNoise.{field} = {as_written(getattr(self, field))}: {why}")

        if not 0.0 <= self.confuse <= 1.0:
            fail("confuse", "must lie in [0, 1]")
        if not 0.0 <= self.flicker < 1.0:
            fail("flicker", "must lie in [0, 1)")
        if not self.burst_s > 0:
            fail("burst_s", "must be > 0")
        if not self.lag_s >= 0:
            fail("lag_s", "must be >= 0")


NOISE_LEVELS: Final = (
    LabelNoise("light", confuse=0.05, flicker=0.05, burst_s=1.0, lag_s=0.5),
    LabelNoise("medium", confuse=0.1, flicker=0.15, burst_s=1.5, lag_s=1.0),
    LabelNoise("heavy", confuse=0.2, flicker=0.3, burst_s=2.0, lag_s=2.0),
)


def _geometric_frames(rng: np.random.Generator, mean_frames: float, size: int) -> np.ndarray:
    """Geometric lengths (>= 1 frame) of the given mean."""
    return rng.geometric(1.0 / max(mean_frames, 1.0), size=size)


def _flicker_frames(segment_of: np.ndarray, noise: LabelNoise, fps: float, rng: np.random.Generator) -> np.ndarray:
    """Frames covered by flicker bursts: clean gaps and bursts alternate over the whole stream, each burst kept
    inside the segment it starts in (a share ``flicker`` of the frames on average).

    Args:
        segment_of: ``(T,)`` the segment index of each frame.
        noise: the level.
        fps: frames per second.
        rng: noise generator.

    Returns:
        bool ``(T,)``.
    """
    total = len(segment_of)
    if noise.flicker == 0 or total == 0:
        return np.zeros(total, dtype=bool)
    burst_mean = noise.burst_s * fps
    gap_mean = burst_mean * (1.0 - noise.flicker) / noise.flicker
    count = int(total / (burst_mean + gap_mean)) * 2 + 8  # twice the expected number of bursts, and some
    bursts = _geometric_frames(rng, burst_mean, count)
    burst_start = np.cumsum(_geometric_frames(rng, gap_mean, count) + bursts) - bursts  # (count,)
    keep = burst_start < total
    burst_start, bursts = burst_start[keep], bursts[keep]
    if not len(burst_start):
        return np.zeros(total, dtype=bool)
    frame = np.arange(total)
    latest = np.searchsorted(burst_start, frame, side="right") - 1  # (T,) the last burst begun by each frame
    begun = latest >= 0
    latest = np.maximum(latest, 0)
    inside = begun & (frame < burst_start[latest] + bursts[latest])
    return inside & (segment_of[burst_start[latest]] == segment_of)


def noisy_labels(
    labels: np.ndarray, noise: LabelNoise, step_ids: Sequence[int], fps: float, rng: np.random.Generator
) -> np.ndarray:
    """A recogniser's per-frame output simulated from annotated labels (module docstring).

    Args:
        labels: ``(T,)`` annotated key-step ids per frame.
        noise: the noise level.
        step_ids: the recogniser's vocabulary (partners are drawn from it).
        fps: frames per second of ``labels``.
        rng: noise generator.

    Returns:
        ``(T,)`` recognised key-step ids.
    """
    labels = np.asarray(labels, dtype=np.int64)
    total = len(labels)
    if total == 0:
        return labels.copy()
    vocab = np.unique(np.asarray(step_ids, dtype=np.int64))
    change = np.flatnonzero(np.diff(labels)) + 1
    starts = np.r_[0, change]  # (n,) first frame of each segment
    lengths = np.diff(np.r_[starts, total])
    steps = labels[starts]
    n = len(starts)
    # Partners: previous / next segment's step, or a random other step of the vocabulary.
    previous = np.r_[steps[:1], steps[:-1]]
    following = np.r_[steps[1:], steps[-1:]]
    shift = rng.integers(1, max(len(vocab), 2), size=n)
    other = vocab[(np.searchsorted(vocab, steps) + shift) % len(vocab)]
    u = rng.random(n)
    partner = np.where(u < PARTNER_PREVIOUS, previous, np.where(u < PARTNER_PREVIOUS + PARTNER_NEXT, following, other))
    partner = np.where(partner == steps, other, partner)  # the first / last segment has no neighbour on one side
    segment_of = np.repeat(np.arange(n), lengths)  # (T,)
    out = labels.copy()
    # Flicker: the partner's label in bursts.
    in_burst = _flicker_frames(segment_of, noise, fps, rng)
    out[in_burst] = partner[segment_of[in_burst]]
    # Confusion: whole segments recognised as their partner.
    confused = rng.random(n) < noise.confuse
    out[confused[segment_of]] = partner[segment_of[confused[segment_of]]]
    # Lag: the previous segment's (recognised) label runs on into the next one.
    if noise.lag_s > 0 and n > 1:
        lag = np.minimum(np.round(rng.exponential(noise.lag_s * fps, size=n)).astype(np.int64), lengths)
        lag[0] = 0
        offset = np.arange(total) - starts[segment_of]
        late = offset < lag[segment_of]
        carried = out[np.maximum(starts - 1, 0)]  # (n,) the label of the frame before each segment
        out[late] = carried[segment_of[late]]
    return out


def _mistake_cuts(
    steps: np.ndarray, vocab: np.ndarray, per_video: int, rng: np.random.Generator, slip_rate: float
) -> list[tuple[int, int]]:
    """``(k, mistake)`` draws for one video: keep its first ``k`` segments, then do ``mistake`` (module docstring)."""
    cuts = [k for k in range(1, len(steps)) if not np.isin(vocab, steps[:k]).all()]  # some step left to do
    out: list[tuple[int, int]] = []
    for _ in range(per_video if cuts else 0):
        k = int(rng.choice(cuts))
        not_done = vocab[~np.isin(vocab, steps[:k])]
        later = np.asarray([s for s in dict.fromkeys(steps[k + 1 :].tolist()) if s not in steps[:k]], dtype=np.int64)
        pool = not_done if (slip_rate > 0 and rng.random() < slip_rate) or not len(later) else later
        out.append((k, int(rng.choice(pool))))
    return out


def _check_slip_rate(slip_rate: float) -> None:
    if not 0.0 <= slip_rate <= 1.0:
        raise InputError(f"slip rate {slip_rate} is outside [0, 1]")


def mistake_streams(
    videos: Sequence[TimedVideo], vocabulary: Sequence[int], fps: float, per_video: int, seed: int,
    slip_rate: float = 0.5,
) -> list[np.ndarray]:
    """PREGO-like annotated label streams from held-out training videos (module docstring), before any noise.

    Args:
        videos: held-out training videos.
        vocabulary: the key-steps a recogniser trained on the other videos knows (random slips are drawn from it).
        fps: frames per second.
        per_video: items drawn per video (a video with fewer than two segments gives none).
        seed: cut positions and mistakes.
        slip_rate: share of random-slip mistakes, in [0, 1].

    Returns:
        ``(T_i,)`` label streams whose last segment is the mistake.
    """
    _check_slip_rate(slip_rate)
    rng = np.random.default_rng(seed)
    vocab = np.asarray(sorted(set(int(s) for s in vocabulary)), dtype=np.int64)
    items: list[np.ndarray] = []
    for video in videos:
        steps = np.asarray(video.steps, dtype=np.int64)
        frames = segment_frames(video, fps)
        for k, mistake in _mistake_cuts(steps, vocab, per_video, rng, slip_rate):
            labels = np.repeat(steps[: k + 1], frames[: k + 1])
            labels[len(labels) - frames[k] :] = mistake  # the mistake takes segment k's time
            items.append(labels)
    return items


def mistake_sequences(
    sequences: Sequence[Sequence[int]], vocabulary: Sequence[int], per_video: int, seed: int, slip_rate: float = 0.5
) -> list[tuple[int, ...]]:
    """`mistake_streams` for key-step sequences: a real prefix of a held-out training video (repeats kept, as in the
    PREGO test videos), then one mistaken step.

    Args:
        sequences: held-out training sequences.
        vocabulary: the key-steps the recogniser knows.
        per_video: items per video.
        seed: cut positions and mistakes.
        slip_rate: share of random-slip mistakes, in [0, 1].

    Returns:
        Key-step sequences whose last step is the mistake.
    """
    _check_slip_rate(slip_rate)
    rng = np.random.default_rng(seed)
    vocab = np.asarray(sorted(set(int(s) for s in vocabulary)), dtype=np.int64)
    items: list[tuple[int, ...]] = []
    for sequence in sequences:
        steps = np.asarray(sequence, dtype=np.int64)
        items.extend((*(int(s) for s in steps[:k]), mistake)
                     for k, mistake in _mistake_cuts(steps, vocab, per_video, rng, slip_rate))
    return items


def noisy_streams(
    streams: Sequence[np.ndarray], noise: LabelNoise, vocabulary: Sequence[int], fps: float, seed: int
) -> list[np.ndarray]:
    """`noisy_labels` of every stream, with one generator seeded by ``seed``."""
    rng = np.random.default_rng(seed)
    return [noisy_labels(s, noise, vocabulary, fps, rng) for s in streams]


def noise_table(levels: Sequence[LabelNoise]) -> list[Mapping[str, float | str]]:
    """The levels as plain rows (for a settings file and the docs)."""
    return [{"name": lv.name, "confuse": lv.confuse, "flicker": lv.flicker, "burst_s": lv.burst_s,
             "lag_s": lv.lag_s} for lv in levels]
