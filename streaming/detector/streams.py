"""One detector stream from the moment its frame has class probabilities (`DetectorStream`): the segmenter, the
messages it publishes, its statistics and stage latencies. The frame loop (`streaming.detector.loop`) reads the
frames and runs the models for every stream at once, then hands each stream its frame (`DetectorStream.took`,
`DetectorStream.deliver`)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from graphs.common.errors import InputError
from recognition.checkpoint import DetectorCheckpoint
from recognition.model import overflow_cause
from recognition.segmenter import OnlineSegmenter, OnsetEvent, SegmenterConfig, SegmentEvent
from streaming.detector.config import DetectorConfig
from streaming.detector.loading import evidence_reporter, live_segmenter_config
from streaming.detector.publisher import EventPublisher
from streaming.readers import Frame, VideoReader
from streaming.stage_latency import DETECTOR_STAGES, StageWindow
from streaming.transport import MIN_STREAM_TIMEOUT_S

if TYPE_CHECKING:
    from streaming.detector.batching import BatchedExtractor

FPS_WINDOW_S = 1.0  # the reported frame rate averages over about this long
# Fewer frames give a run no rate worth stating: its time runs from the stream's start, so the wait for the first frame
# and the model's first call weigh as much as a frame interval (a 1-frame source of a 5 fps stream read "55.7 fps").
MIN_RATE_FRAMES = 5

FrameObserver = Callable[[Frame, np.ndarray, np.ndarray], None]  # (frame, its features (F,), its probabilities (C,))


@dataclass
class DetectorStats:
    """What a detector run did."""

    frames: int = 0
    dropped: int = 0
    events: int = 0
    seconds: float = 0.0
    error: str = ""
    # The frames counted by the last heartbeat sent: all a checker can know of. A stream that went quiet before its
    # source failed sends no last heartbeat (`DetectorStream.quiet`), so the checker never hears of the frames after.
    reported: int = 0

    @property
    def fps(self) -> float:
        """Average frames per second over the run."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @property
    def measured_fps(self) -> float | None:
        """`fps` where it means something: None under `MIN_RATE_FRAMES` frames."""
        return self.fps if self.frames >= MIN_RATE_FRAMES and self.seconds > 0 else None


class DetectorStream:
    """One stream of a detector from the moment its frame has class probabilities: the segmenter, the events and
    heartbeats it publishes, its statistics and its stage latencies. The loops that read frames and run the models
    (`streaming.detector.loop.FrameLoop`, for one stream or many) hand each frame over (`took`, `deliver`).

    Args:
        reader: the stream's open video reader (delivers frames at the checkpoint's fps).
        checkpoint: the detector's description (class ids and names, fps).
        events: where confirmed key-steps and heartbeats go.
        config: heartbeat period and limits.
        segmenter_config: segmenter durations (default: the checkpoint's, changed by ``config.segmenter``).
        clock: monotonic clock for rates and heartbeats.
        observe: also called with ``(stage, seconds)`` for every frame and stage (the metrics); None: nothing.
        on_frame: called for every frame with its features and class probabilities, once they are known (the
            overlay, the alert frames, ``eval``'s clock); None: nothing.
    """

    def __init__(
        self,
        reader: VideoReader,
        checkpoint: DetectorCheckpoint,
        events: EventPublisher,
        config: DetectorConfig,
        segmenter_config: SegmenterConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        observe: Callable[[str, float], None] | None = None,
        on_frame: FrameObserver | None = None,
    ) -> None:
        self.reader = reader
        self.checkpoint = checkpoint
        self.events = events
        self.config = config
        segmenter_config = segmenter_config or live_segmenter_config(checkpoint, config.segmenter, config.alert_on)
        self.segmenter = OnlineSegmenter(segmenter_config, checkpoint.class_step_ids)
        if events.evidence is None:
            events.evidence = evidence_reporter(checkpoint, segmenter_config, config.default_rates)
        self.onsets = config.alert_on == "onset"
        self.sent: set[int] = set()  # key-steps sent so far (with ``config.once``, never sent again)
        self.names = {s: n for s, n in zip(checkpoint.class_step_ids, checkpoint.class_names, strict=True)}
        self.clock = clock
        self.stats = DetectorStats()
        self.stages = StageWindow(DETECTOR_STAGES, observe)
        self.ended = False  # its source ended (or it was stopped, or the run failed), its last heartbeat went out
        # The run was stopped before its source ended (`FrameLoop.run`): its last heartbeats say so, and viewers tell
        # a camera stopped by hand from a recording that played to its end.
        self.stopped = False
        self.failed = False  # the run failed before its source ended: its last heartbeats do not end the session
        self.on_frame = on_frame
        self._window: deque[float] = deque()  # recent frame times, for the reported rate
        self._fps = 0.0
        self._t0 = self._last_beat = 0.0
        self._measured: dict[str, float] = {}  # each stage's last measured milliseconds (`_latency`)

    @property
    def stream_id(self) -> str:
        """The stream's name on the wire."""
        return self.events.stream_id

    @property
    def read_enough(self) -> bool:
        """The reader has delivered ``config.max_frames`` frames (never, with 0)."""
        return bool(self.config.max_frames) and self.reader.frames >= self.config.max_frames

    def start(self) -> None:
        """The stream's first heartbeat: the checker knows it from now on."""
        self._t0 = self._last_beat = self.clock()
        self.events.heartbeat(None, 0, 0, 0.0)
        self.stats.reported = 0

    @property
    def quiet(self) -> bool:
        """The stream is no longer heard as live: its source gave no frame, or it sent no heartbeat for
        `MIN_STREAM_TIMEOUT_S` (a camera or stream retried after it stopped delivering), so a checker may have marked
        it lost. Anything it sends then (a heartbeat that does not say ``ended``, the step under way flushed with its
        heartbeat) shows it live again for a checker's ``--stream-timeout``."""
        return not self.reader.frames or self.clock() - self._last_beat >= MIN_STREAM_TIMEOUT_S

    @property
    def source_failed(self) -> bool:
        """Its source failed (damaged, lost after its reopen attempts, never opened)."""
        return bool(self.stats.error or self.reader.error)

    def took(self, frame: Frame) -> None:
        """The model loop took the frame: its ``decode`` stage ends (from its arrival at the reader)."""
        if frame.arrived:
            self.stages.add("decode", time.monotonic() - frame.arrived)

    def deliver(self, frame: Frame, features: np.ndarray, probs: np.ndarray) -> None:
        """A frame's features ``(F,)`` and the detector's outputs (``(C,)`` class probabilities, then ``(C,)`` done
        states with a done head): segment, count, publish; a heartbeat before a key-step to send, else if due."""
        classes = probs[: self.checkpoint.config.num_classes]
        if self.on_frame is not None:
            self.on_frame(frame, features, classes)
        started = time.perf_counter()
        try:
            events = self.segmenter.update_events(classes)
            if not np.isfinite(probs).all():  # the done head's states, which only the evidence reads
                raise InputError(f"segmenter: frame {self.stats.frames} has non-finite done states")
        except InputError as err:  # the detector's output went NaN or infinite: say on which source, and why
            raise InputError(f"{self.reader.source.spec}: {err} ({overflow_cause(features)})") from None
        # Only a finite frame reaches the evidence: one NaN there made every later heartbeat unbuildable, so a stream
        # whose detector measured its rates sent no last heartbeat when its output went NaN (one without rates did).
        self.events.frame(probs)
        # Before any heartbeat, which carries the stage times: this frame's segmenter is in the next one sent.
        self.stages.add("segmenter", time.perf_counter() - started)
        self.stats.frames += 1
        now = self.clock()
        window = self._window
        window.append(now)
        while window and now - window[0] > FPS_WINDOW_S:
            window.popleft()
        if self._sends_a_step(events):
            self._heartbeat(now)
            self._publish(events)
            return
        self._publish(events)
        if now - self._last_beat >= self.config.heartbeat_s:
            self._heartbeat(now)

    def _sends_a_step(self, events: list[SegmentEvent | OnsetEvent]) -> bool:
        """Whether `_publish` will send a key-step of ``events``: it goes out after a fresh heartbeat, since the
        checker's status that follows the step repeats the latest heartbeat's counters, which lagged (``frames`` 0
        after the first steps of a ``--fast`` run, whose frames outrun the heartbeat's wall-clock period)."""
        return any(isinstance(seg, SegmentEvent) and not self._repeat(seg) for seg in events)

    def _repeat(self, seg: SegmentEvent | OnsetEvent) -> bool:
        """With ``--once``, a step sent already: a later run of it is the detector's repeat, not the person's."""
        return self.config.once and seg.step in self.sent

    def _heartbeat(self, now: float) -> None:
        self._last_beat = now
        window = self._window
        if len(window) > 1:
            self._fps = (len(window) - 1) / (window[-1] - window[0])
        active = self.segmenter.active
        self.events.heartbeat(active[0] if active else None, self.stats.frames, self.reader.dropped, self._fps,
                              latency=self._latency())
        self.stats.reported = self.stats.frames

    def _latency(self) -> dict[str, float]:
        """The stages' milliseconds since the last heartbeat, the last measured ones where a stage has none since:
        an ended stream's last heartbeats, sent again to a checker that came back, are all that checker hears of it,
        and their zeros showed as 0 ms on its status."""
        latency = self.stages.take()
        self._measured.update((name, ms) for name, ms in latency.items() if ms)
        return {name: ms or self._measured.get(name, 0.0) for name, ms in latency.items()}

    def flush(self) -> None:
        """The source ended: publish what the segmenter still holds (after a fresh heartbeat, as `deliver` does)."""
        events = self.segmenter.flush_events()
        if self._sends_a_step(events):
            self._heartbeat(self.clock())
        self._publish(events)

    def settle(self) -> None:
        """Fill in the run's statistics (time, drops, the reader's error); the stream takes no more frames."""
        self.stats.seconds = self.clock() - self._t0
        self.stats.dropped = self.reader.dropped
        self.stats.error = self.stats.error or self.reader.error
        self.ended = True

    def last_heartbeat(self) -> None:
        """One of the `streaming.detector.loop.FINAL_REPEATS` heartbeats that say the stream ended (after `settle`).

        A source that failed (a video damaged part-way), or a run that failed before the source's end (its
        ``failed``: a backbone that raised, the detector's output gone NaN, on this stream or another), ends the
        stream, not the session: these heartbeats then do not say ``ended``, so the checker makes no end report
        naming the steps after the failure never done, and a viewer gives the session no verdict (the checker marks
        the stream lost after its ``--stream-timeout``).

        Those heartbeats are sent only while the stream is still heard as live (not `quiet`): a source that never gave
        a frame (a camera dead from the start), or a camera or stream lost mid-run and given up after its reopen
        attempts, has been silent meanwhile and is told by that silence, which the checker marks lost; a heartbeat
        then, not ``ended``, brought it back as live for a ``--stream-timeout``. So are the repeats, and the heartbeats
        sent again to a checker back later: to it they would be a new live stream.
        """
        ended = not self.stats.error and not self.failed
        if not ended and self.quiet:
            return
        # The session's rate, not the last second's: what the view leaves on an ended row is read as the run's
        # (the window's jitter showed 5.5 fps at the end of a 5 fps stream).
        self.events.heartbeat(None, self.stats.frames, self.stats.dropped, self.stats.fps or self._fps,
                              ended=ended, latency=self._latency(), stopped=ended and self.stopped)
        self.stats.reported = self.stats.frames

    def _publish(self, events: list[SegmentEvent | OnsetEvent]) -> None:
        for seg in events:
            if self._repeat(seg):
                continue
            if isinstance(seg, OnsetEvent):
                onset = once_onset(seg, self.sent) if self.config.once else seg
                if self.onsets and onset is not None:
                    self.events.onset(onset, self.names.get(seg.step, str(seg.step)))
                continue
            self.events.keystep(
                seg.step, self.names.get(seg.step, str(seg.step)), seg.start, seg.end, seg.confidence,
                seg.start_frame, seg.end_frame - seg.start_frame,
            )
            self.sent.add(seg.step)
            self.stats.events += 1


def once_onset(onset: OnsetEvent, sent: AbstractSet[int]) -> OnsetEvent | None:
    """An announcement under ``--once``, as its key-step will be sent: None when that will be a repeat (its step
    sent already, or confirmed among the steps before it); else without the steps before it that will be dropped as
    repeats, since the onset's place in the history (`KeyStepOnset.index`: the history, then ``before``) counts only
    the steps that will be sent, and the checker drops an onset whose place its confirmation does not take.

    Args:
        onset: the segmenter's announcement.
        sent: the steps the stream has sent.
    """
    seen, before = set(sent), []
    for step in onset.before:
        if step not in seen:
            before.append(step)
            seen.add(step)
    if onset.step in seen:
        return None
    return onset if len(before) == len(onset.before) else replace(onset, before=tuple(before))


class StreamWatcher(Protocol):
    """What watches a detector's streams from outside (the metrics endpoint: `streaming.metrics.DetectorMetrics`)."""

    def observer(self, stream_id: str) -> Callable[[str, float], None]:
        """The function the stream calls with ``(stage, seconds)`` for each frame."""

    def watch(self, streams: Sequence[DetectorStream], batches: BatchedExtractor | None = None) -> None:
        """Follow these streams (their readers' counts, their statistics) and the frame loop's batches (the shapes
        first seen after start-up) from now on."""
