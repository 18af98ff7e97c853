"""The detector's evidence that each key-step was done, and its calibrated meaning.

The probabilistic checker (`graphs.probabilistic_checker`) needs, for every key-step, how strongly the detector's
output says it was done, including evidence that never reached the segmenter's confirmation, and how likely the
detection it is checking is real. Both come from here (docs/method.md, "The probabilistic checker").

**Done evidence.** With ``p_s(t)`` the detector's probability of step ``s`` at frame ``t`` (one-hot for label input)
and ``n`` frames the evidence window ``W`` (by default the segmenter's confirmation length ``min_duration``; a
calibration may choose a longer one, as the PREGO replay's, chosen on training data, does)::

    x_s(t) = max_{t' <= t} (1/n) * sum_{tau = t'-n+1}^{t'} p_s(tau)                      (E1)

the strongest stretch of ``W`` seconds of ``s`` seen so far, in [0, 1]: near 1 for a step seen clearly for ``W``
seconds, in between for one glimpsed in flicker or below the confirmation threshold, 0 for one never seen. A window
longer than the confirmation tells a step really done from one the labels flicker to: alternating with another
step, it reaches about its share of the frames, not 1.

**Detection evidence.** A segment (or a provisional onset) of mean probability ``c`` lasting ``d`` seconds::

    y = c * min(1, d / W)                                                                 (E2)

so a short, low-confidence detection carries little weight.

**Calibration** (`recognition.evidence_calibration`, on validation videos at training time) turns both into
probabilities with per-step logistic curves::

    q_s(x, u) = sigmoid(a_s + b * x + e * u - beta)   even-odds P(s done | evidence)         (E3)
    r_s(y, z) = sigmoid(c_s + d * y + g * z)          P(a detection of s with evidence y is real) (E4)

``z = min(1, D / W)`` is the detection's duration ``D`` against the evidence window ``W`` of (E1): (E2) stops
growing at the confirmation length, so without ``z`` a step held at confidence 0.6 for 3 s is scored like a 0.6 s
fragment of it (``g = 0`` in a model calibrated before ``z`` was measured).

``u = logit(p_done_s)`` is the detector's own done-state output just before the step (a detector trained with a
done head, `recognition.model.done_targets`: "has ``s`` been done by now?", which the scene and the GRU's memory answer
far better than whether the step's action was caught); ``e = 0`` for a detector without one.

``beta`` is the log-odds of "done" among the calibration pairs, removed so that ``q_s / (1 - q_s)`` is the likelihood
ratio ``P(x | done) / P(x | not done)`` and the checker can apply its own prior. The measured per-step miss rate
and false-detection rate are kept beside the curves (they are what a user reads; the curves are what the checker
uses). `recording_evidence` computes for a whole recorded stream what `EvidenceReporter` sends live.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Final

import numpy as np

from graphs.checker import StepEvidence
from graphs.common.errors import InputError
from graphs.common.settings_files import Bound, as_written, check_settings, json_kind
from graphs.limits import STEP_ID_RULE, is_step_id

EVIDENCE_FORMAT: Final = 1  # the version of `EvidenceModel.to_dict`
# A step's evidence is recorded again only when it grew by this much: at most 1 / BREAKPOINT_STEP records per step
# and stream, and a lookup is off by less than this.
BREAKPOINT_STEP: Final = 0.005
# Frames of done-state outputs a stream keeps to look up at a segment's start (at 5 fps, 13 minutes: longer than a
# key-step lasts).
STATE_HISTORY: Final = 4096
# What applies when a detector's checkpoint holds no measured rates (trained before they were measured): a detector
# that misses one step in five and whose confirmed detections are wrong one time in ten.
DEFAULT_MISS_RATE: Final = 0.2
DEFAULT_FALSE_RATE: Final = 0.1

MAX_WINDOW_S: Final = 600.0  # the longest evidence window, in seconds (ten minutes of a step)
# The calibrations clip the share of "done" pairs (and of real detections) to [DONE_SHARE_CLIP, 1 - DONE_SHARE_CLIP]
# before taking its log-odds: ``done_base`` is within +-ln(999) = 6.91.
DONE_SHARE_CLIP: Final = 1e-3
MAX_DONE_BASE: Final = 7.0
# The largest slope or intercept a curve may have. The fit is penalised (`recognition.evidence_calibration.RIDGE`,
# 1e-3 per squared coefficient) from an objective of n ln 2 at zero, so a fitted coefficient is at most
# sqrt(2 n ln 2 / 1e-3): 1e6 takes 7e8 calibration pairs, far past any validation split. Real curves give 5 to 30
# (the shipped detector 16; nearly separable pairs 15-30; adversarial pairs 0.001 apart, a few thousand), and a
# log-odds of 40 is already a probability of 1 in float64. The evidence is in [0, 1] (the done-state logit within
# +-9.3), so a sum of terms stays finite.
MAX_COEFFICIENT: Final = 1e6
SLOPE: Final = Bound(0, MAX_COEFFICIENT)  # the fit keeps slopes non-negative: more evidence never means less
INTERCEPT: Final = Bound(-MAX_COEFFICIENT, MAX_COEFFICIENT)
RATE: Final = Bound(0, 1)
COUNT: Final = Bound(0, 2**63 - 1)


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def window_frames(window_s: float, fps: float) -> int:
    """``n`` of formula (E1): the evidence window of ``window_s`` seconds in frames at ``fps``, at least one.

    The one conversion the live reporter, the recorded replay and the calibration share: a window one frame longer
    in one of them would score the detector on evidence the checker never sees.
    """
    return max(1, round(window_s * fps))


def window_evidence(probs: np.ndarray, window: int) -> np.ndarray:
    """Formula (E1) over a whole recording: the running maximum of ``window``-frame means.

    Args:
        probs: ``(T, C)`` per-frame class probabilities (or one-hot labels).
        window: ``n``, frames of the confirmation length (>= 1). The first ``n - 1`` frames are averaged over ``n``
            too: a stream that has just started has not yet shown a whole stretch.

    Returns:
        ``(T, C)`` ``x[t, s]``: the evidence of class ``s`` after frame ``t``.
    """
    p = np.asarray(probs, dtype=np.float64)
    csum = np.cumsum(p, axis=0)  # (T, C)
    lagged = np.zeros_like(csum)
    lagged[window:] = csum[:-window]
    means = (csum - lagged) / window
    return np.maximum.accumulate(means, axis=0)


def detection_evidence(confidence: float, duration_s: float, window_s: float) -> float:
    """Formula (E2): the evidence one detection carries, from its mean probability and duration."""
    return float(np.clip(confidence, 0.0, 1.0) * min(1.0, max(duration_s, 0.0) / window_s))


def duration_evidence(duration_s: float, window_s: float) -> float:
    """``z`` of formula (E4): a detection's duration against the evidence window, in [0, 1]."""
    return float(min(1.0, max(duration_s, 0.0) / window_s))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    # exp(-z) overflows to inf for z below about -709 (a checkpoint's coefficients are only checked finite), which
    # gives the right 0 but printed numpy's RuntimeWarning on stderr: a line no JSON log reader expects.
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-z))


def state_logit(state: np.ndarray) -> np.ndarray:
    """``u = logit(p_done)`` of formula (E3), the probabilities clipped to [1e-4, 1 - 1e-4] (a saturated output is
    strong evidence, never infinite)."""
    p = np.clip(np.asarray(state, dtype=np.float64), 1e-4, 1.0 - 1e-4)
    return np.log(p / (1.0 - p))


@dataclass(frozen=True)
class EvidenceModel:
    """The calibration of a detector's evidence (formulas E3, E4), stored in its checkpoint.

    Attributes:
        step_ids: the key-steps the curves are for, in the detector's class order (background left out).
        window_s: ``W``, the confirmation length the evidence is measured over, in seconds.
        done_intercepts: ``a_s`` per step.
        done_slope: ``b``.
        done_base: ``beta``, the log-odds of "done" among the calibration pairs.
        state_slope: ``e``, the weight of the done-state output (0 without a done head).
        real_intercepts: ``c_s`` per step.
        real_slope: ``d``.
        miss_rates: per step, the share of its annotated segments that no confirmed detection of it overlapped.
        false_rates: per step, the share of its confirmed detections not on an annotated segment of it.
        source: ``"validation"`` (measured on the videos named in ``videos``) or ``"default"``.
        videos: the validation videos the rates were measured on.
        pairs: calibration pairs behind (E3); detections: detections behind (E4).
        detection_window_s: ``W`` of (E2), when it differs from the (E1) window ``window_s`` (None: the same). A
            detector's done evidence looks over a longer window than its confirmation, so that a burst of a step
            shorter than that does not count as the step done, while (E2) keeps the confirmation's window, so that
            an alert need not wait for a long detection.
        real_duration_slope: ``g`` of (E4), the weight of the detection's duration ``z = min(1, D / window_s)``
            (0: not measured).
    """

    step_ids: tuple[int, ...]
    window_s: float
    done_intercepts: tuple[float, ...]
    done_slope: float
    done_base: float
    real_intercepts: tuple[float, ...]
    real_slope: float
    miss_rates: tuple[float, ...]
    false_rates: tuple[float, ...]
    source: str = "validation"
    videos: tuple[str, ...] = ()
    pairs: int = 0
    detections: int = 0
    state_slope: float = 0.0
    detection_window_s: float | None = None
    real_duration_slope: float = 0.0

    # What each number may be (`check_settings`; the per-step tuples by `PER_STEP_BOUNDS`). The windows are bounded
    # as the training config bounds them: the live trackers hold a ring of window x fps rows, and a checkpoint edited
    # to 1e9 s asked for 261 GiB of it. The curves' coefficients only had to be finite: a slope of 1e308 made every
    # probability NaN (inf - inf) and the run ended with status 0.
    BOUNDS: ClassVar[Mapping[str, Bound | tuple[str, ...]]] = {
        "window_s": Bound(0, MAX_WINDOW_S, open_low=True, note="seconds"),
        "done_slope": SLOPE, "done_base": Bound(-MAX_DONE_BASE, MAX_DONE_BASE), "real_slope": SLOPE,
        "state_slope": SLOPE, "real_duration_slope": SLOPE,
        "source": ("validation", "default"), "pairs": COUNT, "detections": COUNT,
        "detection_window_s": Bound(0, MAX_WINDOW_S, open_low=True, note="seconds; or null: window_s"),
    }
    PER_STEP_BOUNDS: ClassVar[Mapping[str, Bound]] = {
        "done_intercepts": INTERCEPT, "real_intercepts": INTERCEPT, "miss_rates": RATE, "false_rates": RATE,
    }

    def __post_init__(self) -> None:
        k = len(self.step_ids)
        for name, allowed in self.PER_STEP_BOUNDS.items():
            values = getattr(self, name)
            if len(values) != k:
                raise InputError(f"evidence model: {name} has {len(values)} values for {k} steps")
            for i, v in enumerate(values):
                number = isinstance(v, int | float) and not isinstance(v, bool)
                if not number or not math.isfinite(v) or not allowed.holds(v):
                    raise InputError(f"evidence model: {name}[{i}] = {as_written(v)}: expected {allowed.rule(False)}")
        try:
            check_settings(self)
        except InputError as err:  # named as the checkpoint's field, as the messages above are
            raise InputError(f"evidence model: {str(err).removeprefix('EvidenceModel.')}") from None

    def done_probabilities(self, x: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
        """Formula (E3): even-odds ``q_s`` of every step, in `step_ids` order.

        Args:
            x: ``(..., K)`` action evidence (E1).
            state: ``(..., K)`` the done-state outputs ``p_done`` (probabilities), or None without a done head.
        """
        z = np.asarray(self.done_intercepts) + self.done_slope * np.asarray(x, dtype=np.float64) - self.done_base
        if state is not None and self.state_slope:
            z = z + self.state_slope * state_logit(state)
        return _sigmoid(z)

    @property
    def detection_window(self) -> float:
        """``W`` of formula (E2), in seconds."""
        return self.window_s if self.detection_window_s is None else float(self.detection_window_s)

    def real_probability(self, step_index: int, y: float, duration_s: float = 0.0) -> float:
        """Formula (E4): the probability that a detection of ``step_ids[step_index]`` with evidence ``y`` (E2),
        lasting ``duration_s`` seconds so far, is real."""
        z = self.real_intercepts[step_index] + self.real_slope * y
        if self.real_duration_slope:
            z += self.real_duration_slope * duration_evidence(duration_s, self.window_s)
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        # exp of a number <= 0 only, on either side: a checkpoint's coefficients are only checked finite, and
        # math.exp(800) raises where numpy's gives inf.
        e = math.exp(z)
        return e / (1.0 + e)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (``format`` EVIDENCE_FORMAT), as stored in a checkpoint."""
        return {"format": EVIDENCE_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: object, where: str = "evidence model") -> EvidenceModel:
        """Read `to_dict`'s form back, every field checked.

        Raises:
            InputError: naming ``where`` and what is wrong.
        """
        if not isinstance(data, Mapping):
            raise InputError(f"{where}: expected an object, got {json_kind(data)}")
        if data.get("format") != EVIDENCE_FORMAT:
            raise InputError(f"{where}: format {as_written(data.get('format'))} is not {EVIDENCE_FORMAT}")
        fields = {k: v for k, v in data.items() if k != "format"}
        tuples = ("step_ids", "done_intercepts", "real_intercepts", "miss_rates", "false_rates", "videos")
        try:
            for name in tuples:
                value = fields.get(name, ())
                if not isinstance(value, list | tuple):
                    raise InputError(f"{name} must be a list")
                fields[name] = tuple(value)
            # A checker settings file's 10**30 ended prego-bench in numpy's OverflowError (a checkpoint's evidence
            # names its classes' steps, checked apart).
            bad = next((s for s in fields["step_ids"] if not is_step_id(s)), None)
            if bad is not None:
                raise InputError(f"step_ids: {as_written(bad, 30)} is not a step id ({STEP_ID_RULE})")
            if not all(isinstance(v, str) for v in fields["videos"]):
                raise InputError("videos must be names")
            return cls(**fields)
        except TypeError as err:
            raise InputError(f"{where}: {err}") from None
        except InputError as err:  # the checks above, and the model's own (which name it "evidence model")
            raise InputError(f"{where}: {str(err).removeprefix('evidence model: ')}") from None

    @classmethod
    def default(cls, step_ids: Sequence[int], window_s: float) -> EvidenceModel:
        """The model that applies without measured rates: `DEFAULT_MISS_RATE` and `DEFAULT_FALSE_RATE` for every step.

        The curves pass through the two points these rates give: ``x = 0`` (never seen) has the likelihood ratio
        ``m / (1 - f)`` and ``x = 1`` (seen clearly) ``(1 - m) / f``; a detection with ``y = 1`` is real with
        probability ``1 - f``, one with ``y = 0`` with probability ``f``.
        """
        m, f = DEFAULT_MISS_RATE, DEFAULT_FALSE_RATE
        low, high = _logit(m / (m + 1 - f)), _logit((1 - m) / (1 - m + f))
        k = len(step_ids)
        return cls(tuple(int(s) for s in step_ids), float(window_s), (low,) * k, high - low, 0.0,
                   (_logit(f),) * k, _logit(1 - f) - _logit(f), (m,) * k, (f,) * k, source="default")


def step_rows(model: EvidenceModel) -> dict[int, int]:
    """Step id -> its row in the calibration's per-step tuples, for `detection_real`."""
    return {s: i for i, s in enumerate(model.step_ids)}


def detection_real(model: EvidenceModel, rows: Mapping[int, int], step: int, y: float, duration_s: float) -> float:
    """Formula (E4) for a detection of ``step`` with evidence ``y`` (E2) lasting ``duration_s`` seconds, or 1.0 for a
    step the calibration has no curve for.

    The one rule the live reporter, the recorded replay and the sequence replay share: a step left out of the
    calibration (none of its detections measured) is taken as certain, as a detector without evidence reports it.

    Args:
        rows: `step_rows` of ``model``.
    """
    k = rows.get(step)
    return 1.0 if k is None else model.real_probability(k, y, duration_s)


def step_columns(model: EvidenceModel, class_step_ids: Sequence[int | None]) -> list[int]:
    """The detector class of each step of a calibration, in `EvidenceModel.step_ids` order.

    Raises:
        InputError: a step of the calibration is no class of the detector.
    """
    index = {s: c for c, s in enumerate(class_step_ids) if s is not None}
    missing = [s for s in model.step_ids if s not in index]
    if missing:
        raise InputError(f"evidence model: step {missing[0]} is not a class of the detector")
    return [index[s] for s in model.step_ids]


class EvidenceTracker:
    """Formula (E1) online, one frame at a time, and looked up at any past frame (a segment's start); with a done
    head, its outputs of the last `STATE_HISTORY` frames too.

    Each step's evidence only grows, so it is kept as its breakpoints: a record each time it has grown by
    `BREAKPOINT_STEP`, at most ``1 / BREAKPOINT_STEP`` records per step.

    Args:
        num_classes: ``C``, the detector's classes.
        window: ``n``, frames of the confirmation length.
    """

    def __init__(self, num_classes: int, window: int) -> None:
        if window < 1:
            raise InputError(f"evidence window {window}: must be >= 1 frame")
        self.num_classes = num_classes
        self._states: np.ndarray | None = None  # (STATE_HISTORY, C) done-state outputs, a ring; None: no done head
        self.window = window
        self._ring = np.zeros((window, num_classes), dtype=np.float64)
        self._sum = np.zeros(num_classes, dtype=np.float64)
        self._best = np.zeros(num_classes, dtype=np.float64)
        self._recorded = np.zeros(num_classes, dtype=np.float64)
        self._frames: list[list[int]] = [[] for _ in range(num_classes)]  # per class: frames of its breakpoints
        self._values: list[list[float]] = [[] for _ in range(num_classes)]
        self.frame = 0  # frames seen

    def update(self, outputs: np.ndarray) -> None:
        """Take one frame's outputs: ``(C,)`` class probabilities, then ``(C,)`` done states with a done head."""
        probs = outputs[: self.num_classes]
        if len(outputs) > self.num_classes:
            if self._states is None:
                self._states = np.zeros((STATE_HISTORY, self.num_classes), dtype=np.float64)
            self._states[self.frame % STATE_HISTORY] = outputs[self.num_classes :]
        slot = self.frame % self.window
        self._sum += probs - self._ring[slot]
        self._ring[slot] = probs
        np.maximum(self._best, self._sum / self.window, out=self._best)
        grown = np.flatnonzero(self._best - self._recorded >= BREAKPOINT_STEP)
        for c in grown.tolist():  # rare: a class's evidence grows by 0.005 at most 200 times per stream
            self._frames[c].append(self.frame)
            self._values[c].append(float(self._best[c]))
            self._recorded[c] = self._best[c]
        self.frame += 1

    def before(self, frame: int, classes: Sequence[int]) -> np.ndarray:
        """Evidence of ``classes`` as it stood before ``frame`` (after frame ``frame - 1``).

        Args:
            frame: a frame index (a segment's first frame).
            classes: class indexes.

        Returns:
            ``(len(classes),)`` evidence values (to within `BREAKPOINT_STEP`).
        """
        out = np.zeros(len(classes), dtype=np.float64)
        for i, c in enumerate(classes):
            k = bisect.bisect_left(self._frames[c], frame)
            if k:
                out[i] = self._values[c][k - 1]
        return out

    def now(self, classes: Sequence[int]) -> np.ndarray:
        """Evidence of ``classes`` after the last frame."""
        return self._best[np.asarray(classes, dtype=np.int64)].copy()

    def state_before(self, frame: int, classes: Sequence[int]) -> np.ndarray | None:
        """The done-state outputs of ``classes`` at frame ``frame - 1`` (the oldest kept, for a frame longer ago than
        `STATE_HISTORY`; nothing done, before the first frame); None without a done head."""
        if self._states is None:
            return None
        if frame <= 0:
            return np.zeros(len(classes), dtype=np.float64)
        row = max(frame - 1, self.frame - STATE_HISTORY)
        return self._states[row % STATE_HISTORY, np.asarray(classes, dtype=np.int64)].copy()


class EvidenceReporter:
    """What a detector stream sends about its evidence: a tracker and the checkpoint's calibration together.

    Args:
        model: the calibration (`EvidenceModel`), measured or default.
        class_step_ids: the detector's class -> step id map (None: background).
        fps: frames per second of the stream.
    """

    def __init__(self, model: EvidenceModel, class_step_ids: Sequence[int | None], fps: float) -> None:
        self.model = model
        self.classes = step_columns(model, class_step_ids)
        self._rows = step_rows(model)
        self.window = window_frames(model.window_s, fps)
        self.fps = fps
        self.tracker = EvidenceTracker(len(class_step_ids), self.window)

    def update(self, outputs: np.ndarray) -> None:
        """Take one frame's outputs (class probabilities, then done states with a done head)."""
        self.tracker.update(outputs)

    def done_before(self, frame: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """``(steps, q)``: formula (E3) for every step, with the evidence as it stood before ``frame``."""
        q = self.model.done_probabilities(self.tracker.before(frame, self.classes),
                                          self.tracker.state_before(frame, self.classes))
        return self.model.step_ids, tuple(float(v) for v in q)

    def done_now(self) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """``(steps, q)``: formula (E3) for every step, with the evidence so far."""
        q = self.model.done_probabilities(self.tracker.now(self.classes),
                                          self.tracker.state_before(self.tracker.frame, self.classes))
        return self.model.step_ids, tuple(float(v) for v in q)

    def real(self, step: int, confidence: float, frames: int) -> float:
        """Formula (E4) for a detection of ``step`` of mean probability ``confidence`` lasting ``frames`` frames."""
        duration_s = frames / self.fps
        evidence = detection_evidence(confidence, duration_s, self.model.detection_window)
        return detection_real(self.model, self._rows, step, evidence, duration_s)


def recording_evidence(
    probs: np.ndarray,
    starts: Sequence[int],
    detections: Sequence[tuple[int, float, int]],
    model: EvidenceModel,
    class_step_ids: Sequence[int | None],
    fps: float,
) -> list[StepEvidence]:
    """What `EvidenceReporter` sends with each detection, for a whole recorded stream at once (offline replays).

    Args:
        probs: ``(T, C)`` per-frame class probabilities (one-hot rows for label input), or ``(T, 2C)`` with the done
            states after them.
        starts: first frame of each detection.
        detections: ``(step, confidence, frames)`` of each detection, parallel to ``starts``.
        model: the calibration.
        class_step_ids: class -> step id (None: background).
        fps: frames per second.

    Returns:
        Per detection: formula (E3) for every step with the evidence (E1) as it stood before its first frame, and
        formula (E4) for the detection.
    """
    columns = step_columns(model, class_step_ids)
    window = window_frames(model.window_s, fps)
    outputs = np.asarray(probs)
    x = window_evidence(outputs[:, columns], window)  # (T, K)
    frames = np.asarray(starts, dtype=np.int64)
    before = np.where((frames > 0)[:, None], x[np.maximum(frames - 1, 0)], 0.0)  # (E, K)
    states = None
    if outputs.shape[1] > len(class_step_ids):  # a done head: its outputs at the frame before each detection
        done = outputs[:, len(class_step_ids) + np.asarray(columns)]  # (T, K)
        states = np.where((frames > 0)[:, None], done[np.maximum(frames - 1, 0)], 0.0)
    q = model.done_probabilities(before, states)  # (E, K)
    rows = step_rows(model)
    out = []
    for (step, confidence, length), done in zip(detections, q.tolist(), strict=True):
        real = detection_real(model, rows, step, detection_evidence(confidence, length / fps, model.detection_window),
                              length / fps)
        out.append(StepEvidence(dict(zip(model.step_ids, done, strict=True)), real))
    return out

