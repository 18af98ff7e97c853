"""Online segmenter: a causal stream of per-frame class probabilities (or labels) -> key-step segments.

The detector labels every frame; a key-step is a *run* of frames with one label. Recognisers
flicker: a label changes for a few frames and comes back. The segmenter turns the frame stream
into confirmed segment events ``(step, start, end, confidence)`` with three rules, all stated in
seconds of video so that they mean the same at any frame rate:

1. **Flicker (``min_run``, default 0.1 s).** A run shorter than this is below the time scale of a
   deliberate hand action (and of one feature snippet): it never becomes a step. If the label
   before and after it agree, the run around it simply continues (``A A b A A`` is one ``A``).
2. **Confirmation (``min_duration``, default 0.5 s).** A run that lasts this long is *stable*: the
   recogniser committed to it, so it is confirmed as a step (or as background).
3. **Clean short runs.** A run between ``min_run`` and ``min_duration`` is ambiguous on its own. It
   is accepted as a step when it stands alone between two stable runs (or a stable run and the
   start/end of the stream): a single clean change there means the recogniser really saw a short
   step. Two or more short runs in a row are a *flicker cluster*: evidence that the recogniser is
   unsure, so none of them is a step; if the stable runs on both sides have the same label, the
   cluster is absorbed into that one segment.

Background frames (the class whose step id is None, or ``config.background`` for label input)
end a segment but are never emitted as a key-step.

**Delay.** A segment is emitted when it is *complete*: once the stable run after it (after a
possible clean short run) is confirmed. On clean input that is at most ``2 * min_duration`` after
the segment's last frame (a short run of < ``min_duration`` then ``min_duration`` of the next
step). Inside a flicker cluster the decision waits, but never longer than ``max_delay`` (default
2 s, the horizon in which feedback about a just-finished step is still useful) after the segment's
last frame: then the segment is emitted as it stands and the cluster is judged without it. A lone
short run waiting for the stable run that would make it a clean short step is bound the same way.

**Per-class confirmation (``class_min_duration``, default None: off).** Steps of one procedure last from seconds to
minutes; one confirmation length either lets a long step be confirmed from a few seconds of a detector that runs
ahead of the person, or cuts a short step. With a length per class, a run of class ``c`` is stable once it has
lasted ``class_min_duration[c]``, and a shorter run of ``c`` is never a step of its own: not even a clean short one
(an announcement of it is withdrawn). Flicker and the delay bound are unchanged.

**Unsure frames (``threshold``, default 0).** With probability input, a frame whose most likely class
scores below ``threshold`` is read as background: a step is built from confident frames only.

**Provisional key-steps (``onset_frames``, default 0: off).** Waiting for a step to end is too late for a
warning that should come before the harm (pouring water that has not boiled). With ``onset_frames = n``, a run
of a key-step that has lasted ``n`` frames is announced at once as an `OnsetEvent`, before it ends, with the
steps the segmenter will confirm before it (``before``: the segment still open before it). The announcement is
provisional: the run normally becomes the confirmed segment of the same step (its
`SegmentEvent` follows); if it turns out to be flicker, or part of another segment, a withdrawal
(``OnsetEvent.withdrawn``) follows instead. Once the run is stable (it has lasted ``min_duration``) it is announced
again every `REPEAT_S` seconds while it lasts (``OnsetEvent.repeated``), with its confidence so far: a checker that
weighs how likely a detection is real can then alert during the step rather than after it.
`OnlineSegmenter.update_events` / `flush_events` return both kinds in the order they happen; `update` / `flush`
return the confirmed segments only.

Times are in seconds from the first frame fed: frame ``i`` covers ``[i / fps, (i + 1) / fps)``.

Example::

    seg = OnlineSegmenter(SegmenterConfig(fps=30.0))
    for probs in stream:                  # (C,) per frame
        for event in seg.update(probs):
            checker.observe(event.step)
    for event in seg.flush():
        checker.observe(event.step)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np

from graphs.common.errors import InputError
from graphs.common.options import MAX_FPS
from graphs.common.safe_text import unknown_name
from graphs.common.settings_files import (
    Bound,
    as_written,
    check_settings,
    check_values,
    json_kind,
    mark_defaults,
    on_the_given,
)
from graphs.limits import MAX_STEP_ID

if TYPE_CHECKING:  # the segmenter runs on numpy: a command that only replays labels loads no torch
    import torch

MAX_SEGMENTER_SECONDS: Final = 86_400.0  # a day: no wait or run of a key-step is longer
MAX_ONSET_FRAMES: Final = int(MAX_SEGMENTER_SECONDS * MAX_FPS)  # a day's run at the highest frame rate
# An announced run is announced again this often while it lasts, once stable (`OnsetEvent.repeated`): as often as a
# detector's heartbeat, so a checker weighing how sure the run is can alert within half a second of being sure.
REPEAT_S: Final = 0.5
_NEVER: Final = 1 << 62  # a run length no run reaches


@dataclass(frozen=True)
class SegmenterConfig:
    """Settings of the online segmenter; durations are in seconds of video.

    Attributes:
        fps: frames per second of the incoming stream.
        min_duration: a run of one label lasting this long is confirmed on its own.
        min_run: runs shorter than this are flicker and never a step.
        max_delay: longest wait, after a segment's last frame, before it is emitted anyway.
        background: class index of background for label input without ``class_step_ids``;
            None when the input has no background class.
        switch_margin: with probability input, a frame leaves the current label only when another
            class beats it by this much (hysteresis against near-ties).
        threshold: with probability input, a frame whose most likely class scores below this is read as
            background (0: every frame counts); needs a background class.
        onset_frames: announce a key-step provisionally (`OnsetEvent`) once its run has lasted this many
            frames; 0 announces nothing.
        class_min_duration: per class index, the seconds a run of that class must last to be confirmed, and the
            shortest a step of that class can be (no clean short step of it; each >= ``min_run``; ``max_delay`` at
            least twice the longest); None: ``min_duration`` for every class, with clean short steps. A label
            beyond the tuple uses ``min_duration`` and may be a clean short step.
    """

    fps: float
    min_duration: float = 0.5
    min_run: float = 0.1
    max_delay: float = 2.0
    background: int | None = 0
    switch_margin: float = 0.1
    threshold: float = 0.0
    onset_frames: int = 0
    class_min_duration: tuple[float, ...] | None = None

    # What each number may be (`check_settings`, docs/recognition.md's table). A run, a wait or an announcement
    # longer than a day is no key-step (1e308 s overflowed the conversion to frames), and the frame rate is the one
    # every reader and checkpoint allows.
    BOUNDS: ClassVar[Mapping[str, Bound]] = {
        "fps": Bound(0, MAX_FPS, open_low=True),
        "min_duration": Bound(0, MAX_SEGMENTER_SECONDS, open_low=True, note="seconds"),
        "min_run": Bound(0, MAX_SEGMENTER_SECONDS, note="seconds; 0: off"),
        "max_delay": Bound(0, MAX_SEGMENTER_SECONDS, open_low=True, note="seconds"),
        "background": Bound(0, MAX_STEP_ID, note="a class index; none: no background class"),
        "switch_margin": Bound(0, 1, open_high=True),
        "threshold": Bound(0, 1, open_high=True, note="0: off"),
        "onset_frames": Bound(0, MAX_ONSET_FRAMES, note="0: off"),
    }

    def __post_init__(self) -> None:
        check_settings(self)
        # Pairs: each says what the other field must be too, so that a command names the field the user set when
        # the one checked kept its default (`graphs.common.settings_files.naming_the_flags`).
        check_values(self, (
            ("min_duration", self.min_duration >= self.min_run, f"a number >= min_run ({self.min_run:g})",
             "min_run", f"a number <= min_duration ({self.min_duration:g})"),
            ("max_delay", self.max_delay >= 2 * self.min_duration,
             f"a number >= {2 * self.min_duration:g}, twice min_duration ({self.min_duration:g}), so that a clean "
             "short step is never cut",
             "min_duration", f"a number <= {self.max_delay / 2:g}, half of max_delay ({self.max_delay:g}), so that a "
                             "clean short step is never cut"),
        ))
        if self.class_min_duration is not None:
            self._check_class_min_duration(self.class_min_duration)

    def _check_class_min_duration(self, durations: object) -> None:
        where = "SegmenterConfig.class_min_duration"
        if not isinstance(durations, tuple) or not durations:
            raise InputError(f"{where} = {as_written(durations)}"
                             ": must be a non-empty list of seconds per class, or None")
        for c, value in enumerate(durations):
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise InputError(f"{where}[{c}] = {as_written(value)}: must be a finite number")
            if not self.min_run <= value <= MAX_SEGMENTER_SECONDS or value <= 0:
                raise InputError(f"{where}[{c}] = {as_written(value)}"
                                 f": must be > 0, >= min_run ({self.min_run}) and at most "
                                 f"{MAX_SEGMENTER_SECONDS:g} seconds")
        if self.max_delay < 2 * max(durations):
            raise InputError(f"SegmenterConfig.max_delay = {as_written(self.max_delay)}: must be >= 2 * the longest "
                             f"class_min_duration ({2 * max(durations)}) so that a clean short step is never cut")

    def frames(self, seconds: float) -> int:
        """Duration in whole frames (at least one)."""
        return max(1, round(seconds * self.fps))

    def shortest_step(self, class_step_ids: Sequence[int | None] | None = None) -> int:
        """The frames of the shortest step the segmenter can confirm: a clean short run (``min_run``, at least one
        frame: a recording of that many frames of one step is confirmed at its end); with ``class_min_duration`` and
        ``class_step_ids``, the shortest length of a step class (background classes, step id None, are no steps).
        A recording shorter than this cannot hold a recognised step, whatever the detector.

        Args:
            class_step_ids: step id per detector class, None marking background; None: labels, any of which may be
                beyond ``class_min_duration`` and so a clean short step.
        """
        short = self.frames(self.min_run) if self.min_run > 0 else 1
        if self.class_min_duration is None or class_step_ids is None:
            return short
        lengths = [self.frames(d) for d, step in zip(self.class_min_duration, class_step_ids, strict=False)
                   if step is not None]
        return min(lengths, default=short)


@dataclass(frozen=True)
class SegmenterOverrides:
    """Command-line changes to a detector's segmenter settings (None: keep the checkpoint's value).

    Args:
        threshold: ``--threshold``, the probability below which a frame is read as background, in [0, 1).
        min_frames: ``--min-frames``, the frames a key-step must last to be confirmed (>= 1).
        onset_frames: ``--onset-frames``, the frames after which a key-step is announced provisionally (>= 1: a
            run with ``--alert-on onset`` announces, one with ``end`` never does, whatever this says).
    """

    threshold: float | None = None
    min_frames: int | None = None
    onset_frames: int | None = None

    def __post_init__(self) -> None:
        if self.threshold is not None and (
            isinstance(self.threshold, bool) or not isinstance(self.threshold, int | float)
            or not 0 <= self.threshold < 1
        ):
            raise InputError(f"--threshold {self.threshold!r}: must be a probability in [0, 1)")
        for flag, value in (("--min-frames", self.min_frames), ("--onset-frames", self.onset_frames)):
            # Bounded as the config's onset_frames is: 10^12 was refused as a class's field the user never wrote.
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 1 <= value <= MAX_ONSET_FRAMES):
                raise InputError(f"{flag} {value!r}: must be an integer in 1..{MAX_ONSET_FRAMES}")

    def apply(self, config: SegmenterConfig) -> SegmenterConfig:
        """``config`` with these changes (``min_frames`` becomes ``min_duration`` at the config's fps).

        Args:
            config: the checkpoint's settings.

        Returns:
            The validated settings to run with.
        """
        changes: dict[str, Any] = {}
        if self.threshold is not None:
            changes["threshold"] = float(self.threshold)
        if self.min_frames is not None:
            seconds = self.min_frames / config.fps
            # Named as typed, not as the config's min_duration or max_delay (twice it) it becomes.
            if 2 * seconds > MAX_SEGMENTER_SECONDS:
                raise InputError(f"--min-frames {self.min_frames}: {seconds:g} s at the detector's {config.fps:g} "
                                 f"frames a second; a key-step is confirmed within {MAX_SEGMENTER_SECONDS / 2:g} s "
                                 f"(and emitted within twice that)")
            # The other durations follow, so that any --min-frames the flag accepts makes a valid config.
            changes |= {"min_duration": seconds, "min_run": min(config.min_run, seconds),
                        "max_delay": max(config.max_delay, 2 * seconds)}
            if config.class_min_duration is not None:  # a length per class too: the flag's, for every step
                changes["class_min_duration"] = (seconds,) * len(config.class_min_duration)
            if config.onset_frames > self.min_frames:  # a stored announcement no later than the new confirmation
                changes["onset_frames"] = self.min_frames
        if self.onset_frames is not None:
            changes["onset_frames"] = self.onset_frames
        if self.threshold and config.background is None:
            raise InputError("--threshold needs a detector with a background class")
        return replace(config, **changes)


@dataclass(frozen=True)
class SegmentEvent:
    """One confirmed key-step segment.

    Attributes:
        step: the key-step id (the taxonomy id from ``class_step_ids``; the label itself when the
            segmenter was built without them).
        start: start time in seconds.
        end: end time in seconds (exclusive).
        confidence: mean probability of the step over the segment's frames (1.0 for label input).
        class_index: the detector class (equals ``step`` without ``class_step_ids``).
        start_frame: first frame index.
        end_frame: one past the last frame index.
    """

    step: int
    start: float
    end: float
    confidence: float
    class_index: int = -1
    start_frame: int = 0
    end_frame: int = 0


@dataclass(frozen=True)
class OnsetEvent:
    """A key-step seen for ``onset_frames`` frames, announced before it ends: provisional (see the module docstring).

    Attributes:
        step: the key-step id (as `SegmentEvent.step`).
        start: start time of its run in seconds.
        confidence: mean probability of the step over the run so far.
        frame: the frame whose arrival announced it (or withdrew it).
        before: steps the segmenter has yet to confirm before this one, in order (the segment still open before
            it, and a clean short step between them).
        withdrawn: true on the withdrawal of an earlier announcement of the same run: it will not be confirmed as
            a key-step of its own (flicker, or absorbed into another segment).
        class_index: the detector class.
        start_frame: first frame of its run.
        repeated: a later announcement of the same run, once it is stable (it will be confirmed, normally as this
            step) and every `REPEAT_S` while it lasts: its confidence and length say more than the first one's did.
    """

    step: int
    start: float
    confidence: float
    frame: int
    before: tuple[int, ...] = ()
    withdrawn: bool = False
    class_index: int = -1
    start_frame: int = 0
    repeated: bool = False


@dataclass
class _Run:
    """A maximal stretch of frames with one label."""

    label: int
    start: int
    length: int
    conf_sum: float
    conf_frames: int

    @property
    def end(self) -> int:
        return self.start + self.length


class OnlineSegmenter:
    """Causal segmenter, fed one frame at a time (see the module docstring for the rules).

    Args:
        config: durations and background handling.
        class_step_ids: optional step id per detector class, None marking background classes;
            without it labels are step ids and ``config.background`` names the background label.
    """

    def __init__(self, config: SegmenterConfig, class_step_ids: Sequence[int | None] | None = None) -> None:
        self.config = config
        self.class_step_ids = None if class_step_ids is None else tuple(class_step_ids)
        if self.class_step_ids is not None:
            self._background = {c for c, s in enumerate(self.class_step_ids) if s is None}
        else:
            self._background = set() if config.background is None else {config.background}
        self._min_run = config.frames(config.min_run) if config.min_run > 0 else 0
        self._min_len = config.frames(config.min_duration)
        # Per class, the frames a run must last to be stable (`SegmenterConfig.class_min_duration`); none: _min_len.
        self._class_min_len = tuple(config.frames(d) for d in config.class_min_duration or ())
        if self.class_step_ids is not None and self._class_min_len and (
            len(self._class_min_len) != len(self.class_step_ids)
        ):
            raise InputError(f"SegmenterConfig.class_min_duration has {len(self._class_min_len)} entries for a "
                             f"detector of {len(self.class_step_ids)} classes")
        self._max_delay = config.frames(config.max_delay)
        self._repeat_frames = max(config.onset_frames, config.frames(REPEAT_S))
        # Unsure frames (below the threshold) become this background class.
        self._unsure = min(self._background) if self._background else None
        if config.threshold > 0 and self._unsure is None:
            raise InputError(f"SegmenterConfig.threshold = {config.threshold}: needs a background class to read "
                             "unsure frames as")
        self.reset()

    # -- state -----------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the stream; the next frame is time 0."""
        self._frame = 0
        self._run: _Run | None = None
        self._committed: _Run | None = None  # last stable segment, not emitted yet
        self._run_is_committed = False  # the open run continues the committed segment
        self._pending: list[_Run] = []  # closed short runs after the committed segment
        # Announced runs (with their onset) until each is confirmed or withdrawn: a short run announced before the
        # next one is, is decided only when a later run becomes stable.
        self._announced: list[tuple[_Run, OnsetEvent]] = []
        self._onset_done: _Run | None = None  # the last run an onset was decided for (announced or not)
        self._repeat_at = _NEVER  # run length (frames) at which the announced open run is next announced again

    @property
    def active(self) -> tuple[int, float] | None:
        """The step in progress as ``(step, start seconds)``, or None (background/unsure).

        A step stays in progress after its last frame until its segment is emitted, while the run after it is not
        stable yet: that run may still be flicker the step resumes after. Clearing it there left the step neither
        under way nor emitted for the whole confirmation delay (seconds at one frame a second), so the checker's
        screens offered the step just done as the next one and showed nothing under way.

        So does a lone short run after background (or at the start) while it waits to be a clean short step: it is
        emitted once the run after it is stable, as a stable step is, and until then it was never shown under way
        at all. It stops being so, unemitted, if another short run follows (a flicker cluster), as a withdrawn
        announcement does.
        """
        committed = self._committed
        if committed is not None and committed.label not in self._background:
            return self._step_of(committed.label), committed.start / self.config.fps
        if self._run_is_committed or len(self._pending) != 1:
            return None
        short = self._pending[0]
        if short.label in self._background or not self._may_be_a_step(short):
            return None
        return self._step_of(short.label), short.start / self.config.fps

    # -- input -----------------------------------------------------------------------------------
    def update(
        self, probs_or_label: int | np.integer | np.ndarray | torch.Tensor | Sequence[float]
    ) -> list[SegmentEvent]:
        """Feed the next frame; only the confirmed segments come back (`update_events` adds the onsets).

        Args:
            probs_or_label: as for `update_events`.

        Returns:
            Segments confirmed by this frame (usually none, sometimes one or two).
        """
        return _segments(self.update_events(probs_or_label))

    def update_events(
        self, probs_or_label: int | np.integer | np.ndarray | torch.Tensor | Sequence[float]
    ) -> list[SegmentEvent | OnsetEvent]:
        """Feed the next frame.

        Args:
            probs_or_label: the frame's class probabilities ``(C,)`` (or ``(1, C)``), or its class label: an
                int, or a 0-d integer array or tensor such as ``probs.argmax()``.

        Returns:
            Segments confirmed by this frame and, with ``onset_frames``, provisional announcements and withdrawals,
            in the order they happen.

        Raises:
            InputError: non-finite probabilities, or not one frame's probabilities (another shape, or
                another number of classes than ``class_step_ids`` has).
        """
        if isinstance(probs_or_label, int | np.integer):
            return self._feed(int(probs_or_label), 1)
        raw = probs_or_label.detach().cpu().numpy() if hasattr(probs_or_label, "detach") else probs_or_label  # a tensor
        raw = np.asarray(raw)
        if raw.ndim == 0 and np.issubdtype(raw.dtype, np.integer):
            # A label as a 0-d array/tensor (probs.argmax()) used to be read as one probability: label 0 forever.
            return self._feed(int(raw), 1)
        probs = np.asarray(raw, dtype=np.float64)
        if probs.ndim == 2 and probs.shape[0] == 1:
            probs = probs[0]
        if probs.ndim != 1 or probs.size < 2:
            raise InputError(
                f"segmenter: frame {self._frame}: expected one frame's class probabilities (C,) or an integer "
                f"label, got an array of shape {raw.shape}"
            )
        self._check_frames(probs[None])
        label = self._label(probs, int(np.argmax(probs)))
        return self._feed(label, 1, float(probs[label]))

    def update_frames(self, probs: np.ndarray) -> list[SegmentEvent]:
        """Feed ``T`` frames at once (an offline replay of a recording): the segments ``T`` calls of `update` give.

        The frames are checked and their most probable classes found once, for all of them; only the hysteresis,
        which depends on the label before, goes frame by frame.

        Args:
            probs: ``(T, C)`` class probabilities.

        Raises:
            InputError: as `update_events`, naming the first frame at fault.
        """
        p = np.asarray(probs, dtype=np.float64)
        if p.ndim != 2 or p.shape[1] < 2:
            raise InputError(f"segmenter: frame {self._frame}: expected frames of class probabilities (T, C), got an "
                             f"array of shape {np.shape(probs)}")
        self._check_frames(p)
        events: list[SegmentEvent | OnsetEvent] = []
        for row, best in zip(p, p.argmax(axis=1).tolist(), strict=True):
            label = self._label(row, best)
            events += self._feed(label, 1, float(row[label]))
        return _segments(events)

    def _check_frames(self, probs: np.ndarray) -> None:
        """Refuse ``(T, C)`` probabilities of another number of classes than the detector's, or a frame holding a
        non-finite value (the first such frame named, counted from the frames fed so far)."""
        if self.class_step_ids is not None and probs.shape[1] != len(self.class_step_ids):
            raise InputError(f"segmenter: frame {self._frame} has {probs.shape[1]} probabilities for a detector of "
                             f"{len(self.class_step_ids)} classes")
        bad = np.flatnonzero(~np.isfinite(probs).all(axis=1))
        if bad.size:
            raise InputError(f"segmenter: frame {self._frame + int(bad[0])} has empty or non-finite probabilities")

    def _label(self, probs: np.ndarray, best: int) -> int:
        """The label of a frame whose most probable class is ``best``: unsure when ``best`` scores below the
        threshold; else near-ties keep the open run's label instead of flipping back and forth (hysteresis), when
        that label clears the threshold too, so a hand-over between two steps is never read as neither."""
        unsure, threshold = self._unsure, self.config.threshold
        if unsure is not None and probs[best] < threshold:
            return unsure
        run = self._run
        if (
            run is not None
            and best != run.label
            and run.label < probs.size
            and probs[run.label] + self.config.switch_margin >= probs[best]
            and (run.label == unsure or probs[run.label] >= threshold)
        ):
            return run.label
        return best

    def update_run(self, label: int, length: int, confidence: float = 1.0) -> list[SegmentEvent]:
        """Feed ``length`` consecutive frames with the same label (same result as feeding them one by one).

        Args:
            label: class label of the frames.
            length: number of frames (>= 1).
            confidence: per-frame probability of the label.

        Returns:
            Segments confirmed within these frames (onsets are left out: `update_events` gives them).
        """
        return _segments(self._feed(label, length, confidence))

    def _feed(self, label: int, length: int, confidence: float = 1.0) -> list[SegmentEvent | OnsetEvent]:
        """`update_run` with the onsets: every decision, in order."""
        if length < 1:
            raise InputError(f"segmenter: run length {length} must be >= 1")
        if self.class_step_ids is not None and not 0 <= label < len(self.class_step_ids):
            raise InputError(f"segmenter: label {label} is not a class of the detector")
        events: list[SegmentEvent | OnsetEvent] = []
        if self._run is None or label != self._run.label:
            self._start_run(label, confidence, events)
            self._after_frame(events)
            length -= 1
        while length > 0:
            take = min(length, self._frames_to_next_decision())
            run = self._run
            assert run is not None
            run.length += take
            run.conf_sum += confidence * take
            run.conf_frames += take
            self._frame += take
            length -= take
            self._after_frame(events)
        return events

    def flush(self) -> list[SegmentEvent]:
        """End of stream: emit whatever the last frames complete, then reset.

        Returns:
            The remaining segments, in time order.
        """
        return _segments(self.flush_events())

    def flush_events(self) -> list[SegmentEvent | OnsetEvent]:
        """`flush`, with the withdrawal of an announced run that the end of the stream leaves unconfirmed.

        Returns:
            The remaining segments in time order, then the withdrawal if any.
        """
        events: list[SegmentEvent | OnsetEvent] = []
        run = self._run
        if run is not None and not self._run_is_committed and run.length >= self._min_run:
            self._pending.append(run)
        if self._committed is not None:
            self._emit(self._committed, events)
        if len(self._pending) == 1:  # the end of the stream brackets a clean short run
            self._emit(self._pending[0], events)
        self._pending, self._committed, self._run = [], None, None
        self._check_withdrawn(events)
        self.reset()
        return events

    # -- rules -----------------------------------------------------------------------------------
    def _start_run(self, label: int, confidence: float, events: list[SegmentEvent | OnsetEvent]) -> None:
        """Close the open run and open one for ``label`` at the current frame."""
        old = self._run
        frame = self._frame
        self._frame += 1
        if old is not None and not self._run_is_committed:
            if old.length >= self._min_run:
                self._pending.append(old)
            else:
                # Flicker: if the label before it comes back, that earlier run simply continues.
                before = self._pending[-1] if self._pending else None
                if before is not None and before.end == old.start and before.label == label:
                    self._pending.pop()
                    before.length += old.length + 1
                    before.conf_sum += confidence
                    before.conf_frames += 1
                    self._run = before
                    return
                committed = self._committed
                if (
                    not self._pending
                    and committed is not None
                    and committed.end == old.start
                    and committed.label == label
                ):
                    committed.length += old.length + 1
                    committed.conf_sum += confidence
                    committed.conf_frames += 1
                    self._run = committed
                    self._run_is_committed = True
                    return
        self._run_is_committed = False
        self._run = _Run(label, frame, 1, confidence, 1)

    def _frames_to_next_decision(self) -> int:
        """How many more frames of the open run can pass before a rule may fire."""
        run = self._run
        assert run is not None
        far = 1 << 62
        to_stable = far if self._run_is_committed else max(1, self._stable_len(run.label) - run.length)
        to_timeout = far
        waiting = self._waiting()
        if waiting is not None:
            to_timeout = max(1, waiting.end + self._max_delay - self._frame)
        to_onset = far
        if self.config.onset_frames:
            wanted = self._repeat_at if self._onset_done is run else self.config.onset_frames
            to_onset = max(1, wanted - run.length)
        return min(to_stable, to_timeout, to_onset)

    def _stable_len(self, label: int) -> int:
        """Frames a run of ``label`` must last to be stable."""
        return self._class_min_len[label] if label < len(self._class_min_len) else self._min_len

    def _waiting(self) -> _Run | None:
        """The oldest finished segment whose emission waits on what follows, if any.

        That is the committed segment while the stream has left it, else a lone short run after it (a
        candidate clean short step waiting for the next stable run). Both are bound by ``max_delay``.
        """
        if self._run_is_committed:
            return None
        if self._committed is not None:
            return self._committed
        return self._pending[0] if len(self._pending) == 1 else None

    def _after_frame(self, events: list[SegmentEvent | OnsetEvent]) -> None:
        """Apply confirmation and the delay bound after the newest frame, then the onset rules."""
        self._settle(events)
        if self.config.onset_frames:
            self._check_withdrawn(events)
            self._check_onset(events)

    def _settle(self, events: list[SegmentEvent | OnsetEvent]) -> None:
        """Confirmation and the delay bound after the newest frame."""
        run = self._run
        assert run is not None
        if not self._run_is_committed and run.length >= self._stable_len(run.label):
            self._confirm(run, events)
            return
        # Waited long enough inside flicker: the segment is over as it stands. The committed segment goes
        # first; a lone short run after it (which would be a clean short step if a stable run came) is then
        # bound by the same delay, and the flicker after it is judged without it.
        while (waiting := self._waiting()) is not None and self._frame - waiting.end >= self._max_delay:
            self._emit(waiting, events)
            if waiting is self._committed:
                self._committed = None
            else:
                self._pending = []

    def _check_onset(self, events: list[SegmentEvent | OnsetEvent]) -> None:
        """Announce the open run once it has lasted ``onset_frames`` frames (each run is decided once); announce an
        announced run again (``repeated``) once it is stable, every `REPEAT_S` while it lasts."""
        run = self._run
        if run is not None and self._onset_done is run:
            if self._run_is_committed and self._committed is run and run.length >= self._repeat_at:
                self._announce_again(run, events)
            return
        if run is None or run.length < self.config.onset_frames:
            return
        self._onset_done = run
        self._repeat_at = _NEVER  # until it is announced: a background run is never announced again
        if run.label in self._background:
            return
        committed, pending = self._committed, self._pending
        if not self._run_is_committed and committed is not None and committed.label == run.label and pending:
            return  # the open step resuming after flicker: the cluster will be absorbed into it, nothing new starts
        before: list[int] = []
        if not self._run_is_committed:
            # What `_confirm` will emit when this run becomes stable: the committed segment, a clean short step.
            ahead = ([committed] if committed is not None else []) + (pending if len(pending) == 1 else [])
            before = [self._step_of(r.label) for r in ahead if r.label not in self._background]
        fps = self.config.fps
        conf = run.conf_sum / run.conf_frames if run.conf_frames else 0.0
        event = OnsetEvent(self._step_of(run.label), run.start / fps, conf, self._frame - 1, tuple(before), False,
                           run.label, run.start)
        self._announced.append((run, event))
        events.append(event)
        self._repeat_at = run.length + self._repeat_frames

    def _announce_again(self, run: _Run, events: list[SegmentEvent | OnsetEvent]) -> None:
        """The announced ``run`` is stable and still open: say it again with its confidence and length so far, so
        that a checker that weighs how sure a detection is can alert before the segment ends. Everything before it
        is confirmed by now (``before`` is empty)."""
        first = next((event for announced, event in self._announced if announced is run), None)
        if first is None:  # not announced itself (the step resumed after flicker): nothing to repeat
            self._repeat_at = _NEVER
            return
        self._repeat_at = run.length + self._repeat_frames
        conf = run.conf_sum / run.conf_frames if run.conf_frames else 0.0
        events.append(replace(first, confidence=conf, frame=self._frame - 1, before=(), repeated=True))

    def _check_withdrawn(self, events: list[SegmentEvent | OnsetEvent]) -> None:
        """Withdraw each announced run the segmenter no longer holds: it will never be confirmed."""
        if not self._announced:
            return
        held = [self._run, self._committed, *self._pending]
        kept = []
        for run, event in self._announced:
            if any(run is h for h in held):
                kept.append((run, event))
            else:
                events.append(replace(event, frame=max(self._frame - 1, 0), withdrawn=True))
        self._announced = kept

    def _confirm(self, run: _Run, events: list[SegmentEvent | OnsetEvent]) -> None:
        """``run`` just became stable: settle the segment before it and the short runs between."""
        pending, committed = self._pending, self._committed
        self._pending = []
        if committed is not None and len(pending) >= 2 and committed.label == run.label:
            # A flicker cluster inside one step: absorb it, the step goes on.
            committed.length = run.end - committed.start
            committed.conf_sum += run.conf_sum
            committed.conf_frames += run.conf_frames
            self._run = committed
            self._run_is_committed = True
            return
        if committed is not None:
            self._emit(committed, events)
        if len(pending) == 1:
            self._emit(pending[0], events)
        self._committed = run
        self._run_is_committed = True

    def _step_of(self, label: int) -> int:
        if self.class_step_ids is None:
            return label
        step = self.class_step_ids[label]
        assert step is not None
        return step

    def _may_be_a_step(self, run: _Run) -> bool:
        """``run`` is long enough for its class to be a step (a run shorter than its class's length never is)."""
        return not (run.label < len(self._class_min_len) and run.length < self._class_min_len[run.label])

    def _emit(self, run: _Run, events: list[SegmentEvent | OnsetEvent]) -> None:
        if not self._may_be_a_step(run):
            return  # shorter than its class's length: no step (announced, it is withdrawn once no longer held)
        # Confirmed as announced: its segment says so, no withdrawal will follow.
        self._announced = [(r, e) for r, e in self._announced if r is not run]
        if run.label in self._background:
            return
        fps = self.config.fps
        conf = run.conf_sum / run.conf_frames if run.conf_frames else 0.0
        events.append(
            SegmentEvent(self._step_of(run.label), run.start / fps, run.end / fps, conf, run.label, run.start, run.end)
        )


def detector_segmenter_config(
    settings: object, fps: float, class_step_ids: Sequence[int | None], where: str
) -> SegmenterConfig:
    """The segmenter settings a detector stores (a checkpoint's ``info.segmenter``: every field but ``fps``, which
    is the detector's), checked against its classes when it is read, not when a stream starts.

    Args:
        settings: the stored object; None (or nothing stored) gives the defaults.
        fps: the detector's frames per second.
        class_step_ids: step id per detector class, None for background classes.
        where: how errors name the stored object (``"det.pt: info.segmenter"``).

    Returns:
        The validated config.

    Raises:
        InputError: naming the field as the file stores it (``<where>.background = -1: ... or null``): the user
            never wrote this module's class, and a stored None reads ``null``.
    """
    try:
        config = _stored_config(settings, fps, where)
        OnlineSegmenter(config, class_step_ids)  # what only the classes can refuse: per-class lengths, threshold
    except InputError as err:
        # A check of two durations names the one stored when the other is not (a hand-edited or partial object):
        # "info.segmenter.min_duration = 0.5: ..." named a key the file does not hold.
        stored = set(settings) if isinstance(settings, dict) else set()
        message = mark_defaults(str(on_the_given(err, stored)), {f.name for f in fields(SegmenterConfig)} - stored)
        raise InputError(message.replace("SegmenterConfig.", f"{where}.", 1).replace("or None", "or null")) from None
    classes = len(class_step_ids)
    if config.background is not None and config.background >= classes:
        # A label stream's background (class_step_ids says which classes are background on a detector): an index
        # beyond the classes is a damaged or hand-edited file, not a setting.
        raise InputError(f"{where}.background = {config.background}: must be a class index of the detector "
                         f"(0..{classes - 1}) or null")
    return config


def stored_settings(config: SegmenterConfig) -> dict[str, Any]:
    """What a detector stores of its segmenter's settings (``info.segmenter``): every field but ``fps``, the
    detector's own; `detector_segmenter_config` reads it back."""
    return {f.name: getattr(config, f.name) for f in fields(SegmenterConfig) if f.name != "fps"}


def _stored_config(settings: object, fps: float, where: str) -> SegmenterConfig:
    """`SegmenterConfig` of stored settings: an object of its fields other than ``fps``."""
    if settings is None:
        return SegmenterConfig(fps=fps)
    if not isinstance(settings, dict):
        raise InputError(f"{where} must be an object, got {json_kind(settings)}")
    known = sorted(f.name for f in fields(SegmenterConfig) if f.name != "fps")
    unknown = [key for key in settings if key not in known]  # a list: a key of None is unknown too
    if "fps" in unknown:
        raise InputError(f"{where}.fps = {as_written(settings['fps'], 40)}: not a segmenter setting (the segmenter "
                         f"runs at the detector's fps, {fps:g})")
    if unknown:
        raise InputError(unknown_name(f"{where}: setting", str(unknown[0]), known, None))
    durations = settings.get("class_min_duration")
    if isinstance(durations, list):  # a JSON or hand-edited file's list is the tuple torch keeps
        settings = {**settings, "class_min_duration": tuple(durations)}
    return SegmenterConfig(fps=fps, **settings)


def _segments(events: list[SegmentEvent | OnsetEvent]) -> list[SegmentEvent]:
    """The confirmed segments among a segmenter's events."""
    return [e for e in events if isinstance(e, SegmentEvent)]


def run_length_encode(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split a label sequence into runs.

    Args:
        labels: ``(T,)`` integer labels.

    Returns:
        ``(run_labels, run_lengths)``, both ``(R,)``.
    """
    labels = np.asarray(labels).reshape(-1)
    if labels.size == 0:
        return labels.astype(np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])  # (R,)
    lengths = np.diff(np.r_[starts, labels.size])
    return labels[starts].astype(np.int64), lengths.astype(np.int64)


def segment_labels(
    labels: Iterable[int] | np.ndarray,
    config: SegmenterConfig,
    class_step_ids: Sequence[int | None] | None = None,
) -> list[SegmentEvent]:
    """Run the online segmenter over a recorded label stream (run by run, same result as frame by frame).

    Args:
        labels: per-frame labels in time order.
        config: segmenter settings.
        class_step_ids: optional class -> step id map (see `OnlineSegmenter`).

    Returns:
        All segment events, in the order the online segmenter emits them.
    """
    seg = OnlineSegmenter(config, class_step_ids)
    run_labels, run_lengths = run_length_encode(
        np.fromiter(labels, dtype=np.int64) if not isinstance(labels, np.ndarray) else labels
    )
    events: list[SegmentEvent] = []
    for label, length in zip(run_labels.tolist(), run_lengths.tolist(), strict=True):
        events.extend(seg.update_run(label, length))
    events.extend(seg.flush())
    return events


def segment_outputs(
    probs: np.ndarray, config: SegmenterConfig, class_step_ids: Sequence[int | None] | None = None
) -> list[SegmentEvent]:
    """The confirmed segments the online segmenter makes of a recorded output stream, as live.

    One-hot rows (label input) are fed run by run (`segment_labels`), which gives the same events frame by frame
    would: hysteresis never holds a label at 0 against one at 1.

    Args:
        probs: ``(T, C)`` class probabilities (or one-hot labels), in time order.
        config: segmenter settings.
        class_step_ids: class -> step id (None: background).

    Returns:
        The segment events, in the order they are emitted.
    """
    if np.all((probs == 0.0) | (probs == 1.0)) and np.all(probs.sum(axis=1) == 1.0):
        return segment_labels(probs.argmax(axis=1), config, class_step_ids)
    run = OnlineSegmenter(config, class_step_ids)
    return run.update_frames(probs) + run.flush()
