"""The detector process: reader -> features -> MiniROAD ``step`` -> online segmenter -> key-step events.

`Detector` runs the per-frame loop; `EventPublisher` owns what goes on the wire for one stream: the
session token, the per-stream ``seq``, and the confirmed-step ``history`` every `KeyStepEvent` and
`Heartbeat` carries (so a restarted checker rebuilds the stream from the next message).

The wiring every detector stream shares (``stream-detect detector`` and the all-in-one run): `open_stream`
loads and cross-checks what a `StreamSource` names and opens its video, before any frame is read;
`publishing_detector` connects a `Detector` to its checker; `run_detector` runs it to the end.
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
import zmq

from graphs.common.errors import InputError
from graphs.common.options import check_threads
from graphs.common.safe_text import printable
from graphs.task_graph import TaskGraph, load_graph
from recognition.checkpoint import DetectorCheckpoint, load_detector
from recognition.evidence import (
    DEFAULT_FALSE_RATE,
    DEFAULT_MISS_RATE,
    EvidenceModel,
    EvidenceReporter,
)
from recognition.model import FastStepper, MiniROAD
from recognition.motion import MotionHistory
from recognition.segmenter import OnlineSegmenter, OnsetEvent, SegmenterConfig, SegmenterOverrides, SegmentEvent
from streaming.alert_modes import DEFAULT_ALERT_ON, DEFAULT_ONSET_FRAMES, check_alert_on
from streaming.curve_keys import CurveClient
from streaming.demo.paths import is_demo_video, resolve_video
from streaming.devices import DEVICES, resolve_device
from streaming.extractors import FeatureExtractor, make_extractor
from streaming.messages import MAX_HISTORY, STREAM_ID_RULE, Heartbeat, KeyStepEvent, KeyStepOnset, is_stream_id
from streaming.readers import Frame, ReaderConfig, VideoReader, open_reader, source_identity
from streaming.stage_latency import DETECTOR_STAGES, StageWindow
from streaming.transport import (
    CONNECT_WAIT_S,
    DEFAULT_EVENTS_ENDPOINT,
    HEARTBEAT_S,
    POLL_MS,
    Publisher,
    check_endpoint,
    connect,
)

FINAL_LINGER_MS = 1000  # on shutdown, queued final messages get this long to leave (then dropped)
FINAL_REPEATS = 3  # the last heartbeat is sent this many times, FINAL_GAP_S apart
FINAL_GAP_S = HEARTBEAT_S / 5  # whatever the heartbeat period, so stopping takes (FINAL_REPEATS - 1) * 0.1 s
FPS_WINDOW_S = 1.0  # the reported frame rate averages over about this long
READER_JOIN_S = 2.0  # on shutdown, longest wait for each reader thread of a `MultiDetector`
EVIDENCE_DECIMALS = 4  # evidence on the wire: 2048 steps' take at most 20 KiB, so a message always fits


@dataclass(frozen=True)
class DetectorConfig:
    """Settings of one detector stream.

    Args:
        stream_id: name of the stream on the wire (1-64 of ``[A-Za-z0-9_.:-]``).
        connect: the checker's events endpoint.
        heartbeat_s: seconds between heartbeats.
        threads: torch intra-op threads for the model.
        max_frames: stop after this many frames (0: until the source ends).
        connect_wait_s: `run_detector` refuses to start if the checker does not answer within this long.
        alert_on: ``"onset"`` (the default): announce each key-step provisionally too (`KeyStepOnset`), so that the
            checker can alert before it ends; ``"end"``: publish confirmed key-steps only.
        segmenter: command-line changes to the checkpoint's segmenter settings.
        curve: this detector's CURVE keys and the checker's public key (``--curve-server``, ``--curve-secret``);
            None: no CURVE (a checker on loopback, or one started with ``--insecure``).
        default_rates: a checkpoint without measured miss and false-detection rates sends evidence calibrated with
            `recognition.evidence.DEFAULT_MISS_RATE` and `DEFAULT_FALSE_RATE` (``--default-rates``); without it, such
            a checkpoint sends no evidence.
    """

    stream_id: str = "cam0"
    connect: str = DEFAULT_EVENTS_ENDPOINT
    heartbeat_s: float = HEARTBEAT_S
    threads: int = 1
    max_frames: int = 0
    connect_wait_s: float = CONNECT_WAIT_S
    alert_on: str = DEFAULT_ALERT_ON
    segmenter: SegmenterOverrides = field(default_factory=SegmenterOverrides)
    curve: CurveClient | None = None
    default_rates: bool = False

    def __post_init__(self) -> None:
        check_alert_on(self.alert_on)
        if not is_stream_id(self.stream_id):
            raise InputError(f"--stream-id {self.stream_id!r}: use {STREAM_ID_RULE}")
        check_threads(self.threads)
        check_endpoint(self.connect, "--connect", peer=True)
        if not self.heartbeat_s > 0:
            raise InputError(f"DetectorConfig.heartbeat_s = {self.heartbeat_s} must be > 0")
        if self.max_frames < 0:
            raise InputError(f"DetectorConfig.max_frames = {self.max_frames} must be >= 0")
        if not self.connect_wait_s > 0:
            raise InputError(f"DetectorConfig.connect_wait_s = {self.connect_wait_s} must be > 0")


class EventPublisher:
    """Publishes one stream's key-step events and heartbeats with seq numbers and the full history.

    A message carries at most `MAX_HISTORY` key-steps, so a stream that confirms more (a camera left
    running for days) starts a new session with an empty history; the checker starts the stream over,
    as for a restarted detector.

    Args:
        publisher: a connected PUB `Publisher`.
        stream_id: the stream's name.
        clock: wall clock for timestamps.
        session: token of this run (random if None); a new one tells the checker to start over.
        evidence: the stream's evidence (`recognition.evidence`), fed every frame with `frame`; None: the messages
            carry no evidence, and the checker takes the confirmed steps as certain.
    """

    def __init__(
        self,
        publisher: Publisher,
        stream_id: str,
        clock: Callable[[], float] = time.time,
        session: str | None = None,
        evidence: EvidenceReporter | None = None,
    ) -> None:
        self.publisher = publisher
        self.stream_id = stream_id
        self.clock = clock
        self.session = session or secrets.token_hex(6)
        self.history: list[int] = []
        self.seq = 0
        self.evidence = evidence

    def frame(self, probs: np.ndarray) -> None:
        """Take one frame's class probabilities ``(C,)`` into the evidence (nothing is sent)."""
        if self.evidence is not None:
            self.evidence.update(probs)

    def _evidence(self, start_frame: int | None) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """``(evidence_steps, evidence)`` of a message: as it stood before ``start_frame`` (None: now), rounded for
        the wire; empty without evidence."""
        if self.evidence is None:
            return (), ()
        steps, q = self.evidence.done_now() if start_frame is None else self.evidence.done_before(start_frame)
        return steps, tuple(round(v, EVIDENCE_DECIMALS) for v in q)

    def _real(self, step: int, confidence: float, frames: int) -> float:
        if self.evidence is None:
            return 1.0
        return round(self.evidence.real(step, confidence, frames), EVIDENCE_DECIMALS)

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq - 1

    def keystep(
        self,
        step: int,
        name: str,
        start: float,
        end: float,
        confidence: float,
        start_frame: int | None = None,
        frames: int = 0,
    ) -> KeyStepEvent:
        """Record a confirmed key-step and publish it.

        Args:
            step: key-step id.
            name: its name.
            start: segment start (video seconds).
            end: segment end (video seconds).
            confidence: mean probability over the segment.
            start_frame: the segment's first frame (the evidence sent is as it stood before it); None: now.
            frames: the segment's length in frames (for the probability that it is real).

        Returns:
            The message sent.
        """
        if len(self.history) >= MAX_HISTORY:
            self.session = secrets.token_hex(6)
            self.history = []
        self.history.append(int(step))
        evidence_steps, evidence = self._evidence(start_frame)
        message = KeyStepEvent(
            stream_id=self.stream_id,
            seq=self._next_seq(),
            timestamp=self.clock(),
            session=self.session,
            step=int(step),
            step_name=name[:256],
            start=float(start),
            end=max(float(end), float(start)),
            confidence=float(min(max(confidence, 0.0), 1.0)),
            index=len(self.history) - 1,
            history=tuple(self.history),
            real=self._real(step, confidence, frames),
            evidence_steps=evidence_steps,
            evidence=evidence,
        )
        self.publisher.send(message)
        return message

    def onset(self, event: OnsetEvent, name: str) -> KeyStepOnset:
        """Publish a provisional key-step (or its withdrawal); the history does not change.

        Args:
            event: the segmenter's announcement.
            name: the step's name.

        Returns:
            The message sent.
        """
        evidence_steps, evidence = self._evidence(event.start_frame)
        message = KeyStepOnset(
            stream_id=self.stream_id,
            seq=self._next_seq(),
            timestamp=self.clock(),
            session=self.session,
            history=tuple(self.history),
            step=int(event.step),
            step_name=name[:256],
            start=max(float(event.start), 0.0),
            confidence=float(min(max(event.confidence, 0.0), 1.0)),
            index=len(self.history) + len(event.before),
            before=tuple(int(s) for s in event.before),
            withdrawn=event.withdrawn,
            real=self._real(event.step, event.confidence, event.frame - event.start_frame + 1),
            evidence_steps=evidence_steps,
            evidence=evidence,
        )
        self.publisher.send(message)
        return message

    def heartbeat(
        self,
        current: int | None,
        frames: int,
        dropped: int,
        fps: float,
        ended: bool = False,
        latency: Mapping[str, float] | None = None,
    ) -> Heartbeat:
        """Publish a heartbeat with stream statistics and the history.

        Args:
            current: step being seen now (None for background).
            frames: frames processed.
            dropped: frames dropped by the source.
            fps: recent processing rate.
            ended: this is the stream's last message.
            latency: mean milliseconds per frame of each detector stage since the last heartbeat, by field name
                (``decode_ms``, ..., `streaming.stage_latency.StageWindow.take`); None: all 0.

        Returns:
            The message sent.
        """
        evidence_steps, evidence = self._evidence(None)
        message = Heartbeat(
            stream_id=self.stream_id,
            seq=self._next_seq(),
            timestamp=self.clock(),
            session=self.session,
            history=tuple(self.history),
            current=current,
            frames=int(frames),
            dropped=int(dropped),
            fps=float(fps),
            ended=ended,
            evidence_steps=evidence_steps,
            evidence=evidence,
            **(latency or {}),
        )
        self.publisher.send(message)
        return message


def check_detector_matches_graph(
    checkpoint: DetectorCheckpoint, graph: TaskGraph, detector: str, graph_path: str, ignore_names: bool = False
) -> list[str]:
    """Refuse a detector that does not speak of the graph's key-steps: other step ids, names or scenario.

    Step ids must be exactly the graph's (the checker refuses any other id, so nothing overrides that). Then each
    step's name in the checkpoint is compared with the graph's, and the scenarios when both record one (checkpoints
    written before they recorded it have none): a graph whose ``boil_water`` became ``cut_bread`` would otherwise
    run with the detector's idea of step 2 and alert in the graph's words.

    Args:
        checkpoint: the detector's description.
        graph: the task graph.
        detector: detector path (named in the error).
        graph_path: graph path (named in the error).
        ignore_names: run despite differing names or scenarios (``--ignore-names``); they come back as a warning.

    Returns:
        Warnings to show (the differences ``ignore_names`` let through), empty when everything agrees.

    Raises:
        InputError: the step ids differ, or (without ``ignore_names``) a name or the scenario does, listing every
            differing step in one line.
    """
    classes = {s for s in checkpoint.class_step_ids if s is not None}
    steps = set(graph.step_ids)
    if classes != steps:
        extra, missing = sorted(classes - steps), sorted(steps - classes)
        parts = []
        if extra:
            parts.append(f"classes {extra} are not key-steps of {graph_path}")
        if missing:
            parts.append(f"key-steps {missing} of {graph_path} are not among its classes")
        pairs = zip(checkpoint.class_step_ids, checkpoint.class_names, strict=True)
        known = [(s, n) for s, n in pairs if s is not None]  # the background class has no step
        graph_steps = list(zip(graph.step_ids, graph.step_names, strict=True))
        raise InputError(f"--detector {detector} and --graph {graph_path} are not for the same procedure: "
                         + "; ".join(parts) + f" (the detector: {procedure_summary(checkpoint.scenario, known)}; "
                         f"the graph: {procedure_summary(graph.scenario, graph_steps)})")
    differences = name_differences(checkpoint, graph)
    if not differences:
        return []
    listed = "; ".join(differences)
    if not ignore_names:
        raise InputError(f"--detector {detector} and --graph {graph_path} name different steps: {listed} "
                         "(retrain the detector on this procedure, or run anyway with --ignore-names)")
    return [f"--ignore-names: --detector {detector} and --graph {graph_path} name different steps ({listed}); "
            "alerts use the graph's names"]


def procedure_summary(scenario: str | None, steps: Iterable[tuple[int, str]], shown: int = 3) -> str:
    """A procedure in a few words for an error line: its scenario and its first steps.

    Args:
        scenario: the scenario recorded in the file (None: none recorded).
        steps: ``(step id, name)`` pairs in file order.
        shown: how many steps to name.

    Returns:
        Text like ``"scenario 'demo-tea', steps 1 fill_kettle, 2 boil_water, 3 get_cup, ... (6 in all)"``.
    """
    steps = list(steps)
    named = ", ".join(f"{step} {name}" for step, name in steps[:shown])
    more = f", ... ({len(steps)} in all)" if len(steps) > shown else ""
    where = f"scenario {scenario!r}" if scenario else "no scenario recorded"
    return f"{where}, steps {named}{more}"


def name_differences(checkpoint: DetectorCheckpoint, graph: TaskGraph) -> list[str]:
    """How a detector and a graph with the same step ids disagree: the scenario, then each step whose name differs.

    Args:
        checkpoint: the detector's description (its class names, its scenario if recorded).
        graph: the task graph.

    Returns:
        One phrase per difference, in graph order (``"step 2 is 'boil_water' in the detector, 'cut_bread' in the
        graph"``); empty when they agree.
    """
    found = []
    if checkpoint.scenario and graph.scenario and checkpoint.scenario != graph.scenario:
        found.append(f"scenario {checkpoint.scenario!r} in the detector, {graph.scenario!r} in the graph")
    named = {s: n for s, n in zip(checkpoint.class_step_ids, checkpoint.class_names, strict=True) if s is not None}
    for step, name in zip(graph.step_ids, graph.step_names, strict=True):
        if named[step] != name:
            found.append(f"step {step} is {named[step]!r} in the detector, {name!r} in the graph")
    return found


class ModelStepper:
    """`MiniROAD.step` carrying the GRU state from frame to frame, on the model's device (the CUDA path).

    Same interface as `recognition.model.FastStepper`, which serves the CPU: one frame's features in, its class
    probabilities out (`step`), or one frame of each of several streams at once (`step_rows`).

    Args:
        model: the detector in eval mode, on its device.
        streams: how many streams the state holds.
    """

    def __init__(self, model: MiniROAD, streams: int = 1) -> None:
        self.model = model
        self.state = model.init_state(streams)  # (1, K, H) on the model's device
        self.device = self.state.device
        lag, width = model.config.motion_lag, model.config.input_dim
        self.motion = MotionHistory(lag, width, streams, self.device) if lag else None

    @torch.inference_mode()
    def step(self, x_t: torch.Tensor) -> torch.Tensor:
        """One frame of the first stream in, that frame's class probabilities out.

        Args:
            x_t: ``(F,)`` or ``(1, F)`` features of the newest frame.

        Returns:
            ``(1, C)`` probabilities on the CPU.
        """
        return self.step_rows(x_t.reshape(1, -1), torch.zeros(1, dtype=torch.long))

    @torch.inference_mode()
    def step_rows(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """One frame of each of ``m`` streams in, one batched step over their state rows, their probabilities out.

        Args:
            x: ``(m, F)`` features, row ``i`` the newest frame of stream ``rows[i]``.
            rows: ``(m,)`` int64 distinct stream rows.

        Returns:
            ``(m, C)`` probabilities on the CPU.
        """
        rows = rows.to(self.device)
        inputs = x.to(self.device, torch.float32)
        if self.motion is not None:  # the features beside their change (recognition.motion, formula M)
            inputs = self.motion.push_rows(inputs, rows)
        probs, self.state[:, rows] = self.model.step(inputs, self.state[:, rows])
        return probs.cpu()


def make_stepper(model: MiniROAD, streams: int = 1) -> FastStepper | ModelStepper:
    """The live stepper for a detector of ``streams`` streams: the allocation-free `FastStepper` on the CPU,
    `ModelStepper` elsewhere."""
    on_cpu = next(model.parameters()).device.type == "cpu"
    return FastStepper(model, streams=streams) if on_cpu else ModelStepper(model, streams)


@dataclass
class DetectorStats:
    """What a detector run did."""

    frames: int = 0
    dropped: int = 0
    events: int = 0
    seconds: float = 0.0
    error: str = ""

    @property
    def fps(self) -> float:
        """Average frames per second over the run."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0


class DetectorStream:
    """One stream of a detector from the moment its frame has class probabilities: the segmenter, the events and
    heartbeats it publishes, its statistics and its stage latencies. The loops that read frames and run the models
    (`Detector` for one stream, `MultiDetector` for several) hand each frame over (`took`, `deliver`).

    Args:
        reader: the stream's open video reader (delivers frames at the checkpoint's fps).
        checkpoint: the detector's description (class ids and names, fps).
        events: where confirmed key-steps and heartbeats go.
        config: heartbeat period and limits.
        segmenter_config: segmenter durations (default: the checkpoint's, changed by ``config.segmenter``).
        clock: monotonic clock for rates and heartbeats.
        observe: also called with ``(stage, seconds)`` for every frame and stage (the metrics); None: nothing.
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
        self.names = {s: n for s, n in zip(checkpoint.class_step_ids, checkpoint.class_names, strict=True)}
        self.clock = clock
        self.stats = DetectorStats()
        self.stages = StageWindow(DETECTOR_STAGES, observe)
        self.ended = False  # its source ended (or it was stopped), its last heartbeat went out
        self.on_event: Callable[[KeyStepEvent], None] | None = None
        # Called for every frame with its features (F,) and class probabilities (C,), once they are known.
        self.on_frame: Callable[[Frame, np.ndarray, np.ndarray], None] | None = None
        self._window: deque[float] = deque()  # recent frame times, for the reported rate
        self._fps = 0.0
        self._t0 = self._last_beat = 0.0

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

    def took(self, frame: Frame) -> None:
        """The model loop took the frame: its ``decode`` stage ends (from its arrival at the reader)."""
        if frame.arrived:
            self.stages.add("decode", time.monotonic() - frame.arrived)

    def deliver(self, frame: Frame, features: np.ndarray, probs: np.ndarray) -> None:
        """A frame's features ``(F,)`` and the detector's outputs (``(C,)`` class probabilities, then ``(C,)`` done
        states with a done head): segment, publish, count, heartbeat if due."""
        classes = probs[: self.checkpoint.config.num_classes]
        if self.on_frame is not None:
            self.on_frame(frame, features, classes)
        started = time.perf_counter()
        self.events.frame(probs)
        self._publish(self.segmenter.update_events(classes))
        self.stages.add("segmenter", time.perf_counter() - started)
        self.stats.frames += 1
        now = self.clock()
        window = self._window
        window.append(now)
        while window and now - window[0] > FPS_WINDOW_S:
            window.popleft()
        if now - self._last_beat >= self.config.heartbeat_s:
            self._last_beat = now
            if len(window) > 1:
                self._fps = (len(window) - 1) / (window[-1] - window[0])
            active = self.segmenter.active
            self.events.heartbeat(active[0] if active else None, self.stats.frames, self.reader.dropped, self._fps,
                                  latency=self.stages.take())

    def flush(self) -> None:
        """The source ended: publish what the segmenter still holds."""
        self._publish(self.segmenter.flush_events())

    def settle(self) -> None:
        """Fill in the run's statistics (time, drops, the reader's error); the stream takes no more frames."""
        self.stats.seconds = self.clock() - self._t0
        self.stats.dropped = self.reader.dropped
        self.stats.error = self.stats.error or self.reader.error
        self.ended = True

    def last_heartbeat(self) -> None:
        """One of the `FINAL_REPEATS` heartbeats that say the stream ended (after `settle`)."""
        self.events.heartbeat(None, self.stats.frames, self.stats.dropped, self._fps or self.stats.fps, ended=True,
                              latency=self.stages.take())

    def _publish(self, events: list[SegmentEvent | OnsetEvent]) -> None:
        for seg in events:
            if isinstance(seg, OnsetEvent):
                if self.onsets:
                    self.events.onset(seg, self.names.get(seg.step, str(seg.step)))
                continue
            message = self.events.keystep(
                seg.step, self.names.get(seg.step, str(seg.step)), seg.start, seg.end, seg.confidence,
                seg.start_frame, seg.end_frame - seg.start_frame,
            )
            self.stats.events += 1
            if self.on_event is not None:
                self.on_event(message)


class Detector(DetectorStream):
    """The per-frame loop of one stream: read a frame, its features, one MiniROAD step, the segmenter.

    Args:
        reader: an open video reader (delivers frames at the checkpoint's fps).
        extractor: the feature extractor the checkpoint names.
        model: the MiniROAD detector (eval mode).
        checkpoint: its description (class ids and names, fps).
        events: where confirmed key-steps and heartbeats go.
        config: heartbeat period and limits.
        segmenter_config: segmenter durations (default: the checkpoint's, changed by ``config.segmenter``).
        clock: monotonic clock for rates and heartbeats.
        observe: called with ``(stage, seconds)`` for every frame and stage (the metrics); None: nothing.
    """

    def __init__(
        self,
        reader: VideoReader,
        extractor: FeatureExtractor,
        model: MiniROAD,
        checkpoint: DetectorCheckpoint,
        events: EventPublisher,
        config: DetectorConfig,
        segmenter_config: SegmenterConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        observe: Callable[[str, float], None] | None = None,
    ) -> None:
        checkpoint.check_features(extractor.dim, source=f"feature extractor {extractor.name!r}")
        super().__init__(reader, checkpoint, events, config, segmenter_config, clock, observe)
        self.extractor = extractor
        self.stepper = make_stepper(model)

    def run(self, stop: threading.Event | None = None) -> DetectorStats:
        """Process frames until the source ends, ``max_frames`` is reached or ``stop`` is set.

        Args:
            stop: set it to end the stream early (a final heartbeat is still sent).

        Returns:
            Run statistics.
        """
        stop = stop or threading.Event()
        torch.set_num_threads(self.config.threads)
        self.start()
        try:
            while not stop.is_set() and not self.read_enough:
                frame = self.reader.read()
                if frame is None:
                    break
                self.took(frame)
                started = time.perf_counter()
                feats = self.extractor(frame.image[None])  # (1, F)
                stepped = time.perf_counter()
                probs = self.stepper.step(torch.from_numpy(feats))[0].numpy()  # (outputs,)
                self.stages.add("features", stepped - started)
                self.stages.add("detector", time.perf_counter() - stepped)
                self.deliver(frame, feats[0], probs)
            self.flush()
        finally:
            self.settle()
            for k in range(FINAL_REPEATS):
                if k:
                    time.sleep(FINAL_GAP_S)
                self.last_heartbeat()
        return self.stats


class MultiDetector:
    """Several streams through one feature extractor and one MiniROAD, each stream with its own GRU state row,
    segmenter, session and statistics.

    Each stream's reader runs in its own thread and hands over one frame at a time; the model loop takes every frame
    that is ready, extracts their features as one batch and steps their GRU state rows at once
    (`recognition.model.FastStepper.step_rows`). It never waits for a stream: a batch is whatever is ready when the
    loop is free, so a stalled or failed source holds back no other, and batches grow by themselves when the loop
    falls behind (continuous batching). A stream whose source ends (or fails, after its reader's reconnect attempts)
    is flushed and sends its last heartbeats while the others go on.

    Args:
        streams: the streams, with distinct stream ids.
        extractor: the feature extractor the checkpoint names.
        model: the MiniROAD detector (eval mode).
        checkpoint: its description.
        threads: torch intra-op threads of the model loop.
    """

    def __init__(
        self,
        streams: list[DetectorStream],
        extractor: FeatureExtractor,
        model: MiniROAD,
        checkpoint: DetectorCheckpoint,
        threads: int = 1,
    ) -> None:
        checkpoint.check_features(extractor.dim, source=f"feature extractor {extractor.name!r}")
        ids = [s.stream_id for s in streams]
        if not streams or len(set(ids)) != len(ids):
            raise InputError(f"MultiDetector: give streams with distinct ids, got {ids}")
        self.streams = streams
        self.extractor = extractor
        self.stepper = make_stepper(model, len(streams))
        self.threads = threads
        self._cond = threading.Condition()
        self._ready: list[Frame | None] = [None] * len(streams)  # the frame each reader thread handed over
        self._read_out = [False] * len(streams)  # the reader thread has ended
        self._halt = threading.Event()
        self._finals: list[tuple[float, DetectorStream]] = []  # last heartbeats still to repeat, with when

    def run(self, stop: threading.Event | None = None) -> list[DetectorStats]:
        """Process every stream until each source ends or reaches ``max_frames``, or ``stop`` is set.

        Args:
            stop: set it to end every stream (each still sends its last heartbeats).

        Returns:
            Each stream's statistics, in the order of ``streams``.
        """
        stop = stop or threading.Event()
        torch.set_num_threads(self.threads)
        readers = [threading.Thread(target=self._read, args=(i,), name=f"read-{s.stream_id}", daemon=True)
                   for i, s in enumerate(self.streams)]  # fmt: skip
        for stream in self.streams:
            stream.start()
        for thread in readers:
            thread.start()
        try:
            while not stop.is_set() and not all(s.ended for s in self.streams):
                taken, finished = self._take(self._wait_s())
                if taken:
                    self._process(taken)
                for i in finished:
                    self._end(self.streams[i])
                self._repeat_finals(time.monotonic())
            for stream in self.streams:
                if not stream.ended:  # stopped: what its segmenter holds is published, as at the end of a file
                    self._end(stream)
        finally:
            self._halt.set()
            for stream in self.streams:
                stream.reader.interrupt()
            with self._cond:
                self._cond.notify_all()
            for thread in readers:
                thread.join(READER_JOIN_S)
            for stream in self.streams:
                if not stream.ended:  # an error stopped the loop: the stream ends without its open segment
                    self._end(stream, flush=False)
            while self._finals:
                time.sleep(max(0.0, self._finals[0][0] - time.monotonic()))
                self._repeat_finals(time.monotonic())
        return [s.stats for s in self.streams]

    def _wait_s(self) -> float:
        """How long the loop may wait for a frame: until the next repeated last heartbeat is due, at most a poll."""
        due = min((when for when, _ in self._finals), default=float("inf"))
        return min(POLL_MS / 1000, max(0.0, due - time.monotonic()))

    def _read(self, i: int) -> None:
        """Reader thread of stream ``i``: read a frame, wait until the previous one was taken, hand it over."""
        stream = self.streams[i]
        try:
            while not self._halt.is_set() and not stream.read_enough:
                frame = stream.reader.read()
                if frame is None:
                    break
                with self._cond:
                    while self._ready[i] is not None and not self._halt.is_set():
                        self._cond.wait(POLL_MS / 1000)
                    self._ready[i] = frame
                    self._cond.notify_all()
        except Exception as err:  # a reader that raises ends its stream with the reason, never the others
            stream.stats.error = f"--video {stream.reader.source.spec}: {str(err).strip()[:160] or repr(err)}"
        finally:
            with self._cond:
                self._read_out[i] = True
                self._cond.notify_all()

    def _take(self, timeout_s: float) -> tuple[list[tuple[int, Frame]], list[int]]:
        """Wait up to ``timeout_s`` for a frame, then take every frame that is ready.

        Returns:
            ``(taken, finished)``: ``(stream index, frame)`` pairs, and the streams whose reader ended with nothing
            left to take.
        """
        with self._cond:
            if not any(f is not None for f in self._ready) and not self._finished():
                self._cond.wait(timeout_s)
            taken = [(i, f) for i, f in enumerate(self._ready) if f is not None]
            for i, _ in taken:
                self._ready[i] = None
            if taken:
                self._cond.notify_all()
            return taken, self._finished()

    def _finished(self) -> list[int]:
        """Streams whose reader ended and whose last frame was taken, not ended yet (call with the lock held)."""
        return [i for i, s in enumerate(self.streams) if self._read_out[i] and self._ready[i] is None and not s.ended]

    def _process(self, taken: list[tuple[int, Frame]]) -> None:
        """One batch: the frames' features, one step of their streams' state rows, then each stream's segmenter."""
        for i, frame in taken:
            self.streams[i].took(frame)
        started = time.perf_counter()
        feats = self._features([frame.image for _, frame in taken])  # (m, F)
        stepped = time.perf_counter()
        rows = torch.tensor([i for i, _ in taken], dtype=torch.long)
        probs = self.stepper.step_rows(torch.from_numpy(feats), rows).numpy()  # (m, outputs)
        done = time.perf_counter()
        for j, (i, frame) in enumerate(taken):
            stream = self.streams[i]
            stream.stages.add("features", stepped - started)
            stream.stages.add("detector", done - stepped)
            stream.deliver(frame, feats[j], probs[j])

    def _features(self, images: list[np.ndarray]) -> np.ndarray:
        """Features of frames from several sources: one batch per frame size (cameras need not agree)."""
        shapes = [image.shape for image in images]
        if len(set(shapes)) == 1:
            return self.extractor(np.stack(images))
        out = np.empty((len(images), self.extractor.dim), dtype=np.float32)
        for shape in set(shapes):
            group = [j for j, other in enumerate(shapes) if other == shape]
            out[group] = self.extractor(np.stack([images[j] for j in group]))
        return out

    def _end(self, stream: DetectorStream, flush: bool = True) -> None:
        """A stream's source ended (or the run stops): flush it, send its last heartbeat and schedule the repeats."""
        if flush:
            stream.flush()
        stream.settle()
        stream.last_heartbeat()
        now = time.monotonic()
        self._finals += [(now + k * FINAL_GAP_S, stream) for k in range(1, FINAL_REPEATS)]
        self._finals.sort(key=lambda item: item[0])

    def _repeat_finals(self, now: float) -> None:
        while self._finals and self._finals[0][0] <= now:
            _, stream = self._finals.pop(0)
            stream.last_heartbeat()


def evidence_reporter(
    checkpoint: DetectorCheckpoint, segmenter: SegmenterConfig, default_rates: bool
) -> EvidenceReporter | None:
    """What a stream of this detector reports about its evidence (None: nothing, the checkpoint measured no rates).

    Args:
        checkpoint: the detector (its ``evidence``, measured by ``recognition-train``).
        segmenter: the stream's segmenter settings (the default calibration's window is its ``min_duration``).
        default_rates: without measured rates, use the default ones (``--default-rates``).
    """
    model = checkpoint.evidence
    if model is None and default_rates:
        steps = [s for s in checkpoint.class_step_ids if s is not None]
        model = EvidenceModel.default(steps, segmenter.min_duration)
    return None if model is None else EvidenceReporter(model, checkpoint.class_step_ids, checkpoint.fps)


def check_measured_rates(checkpoint: DetectorCheckpoint, detector: str, checker: str, default_rates: bool) -> None:
    """Refuse to run the probabilistic checker on a detector whose miss and false-detection rates were never measured,
    unless the user accepts the defaults (``--default-rates``).

    Raises:
        InputError: one line naming the file, the defaults that ``--default-rates`` applies, and the other ways out.
    """
    if checker != "probabilistic" or default_rates or checkpoint.evidence is not None:
        return
    raise InputError(
        f"{detector}: holds no measured miss and false-detection rates, which the probabilistic checker needs "
        f"(retrain it with recognition-train, which measures them on a validation split); or run with "
        f"--checker binary, or with --default-rates to assume a miss rate of {DEFAULT_MISS_RATE:.0%} and a "
        f"false-detection rate of {DEFAULT_FALSE_RATE:.0%} for every step"
    )


def print_warning(line: str) -> None:
    """Show a warning as one ``warning: ...`` line on stderr (names made printable)."""
    print(printable(f"warning: {line}"), file=sys.stderr, flush=True)


def segmenter_config_of(checkpoint: DetectorCheckpoint) -> SegmenterConfig:
    """The segmenter settings a checkpoint asks for (``info["segmenter"]``), at its fps; defaults otherwise.

    Args:
        checkpoint: the detector's description.

    Returns:
        The validated segmenter config.
    """
    settings = checkpoint.info.get("segmenter") or {}
    if not isinstance(settings, dict):
        raise InputError(f"detector checkpoint: info.segmenter must be an object, got {settings!r}")
    try:
        return SegmenterConfig(fps=checkpoint.fps, **settings)
    except TypeError as err:
        raise InputError(f"detector checkpoint: bad info.segmenter ({err})") from None


def live_segmenter_config(
    checkpoint: DetectorCheckpoint, overrides: SegmenterOverrides, alert_on: str = "end"
) -> SegmenterConfig:
    """The segmenter settings a stream runs with: the checkpoint's, changed by the command line.

    With ``alert_on="onset"`` a key-step must be announced, so a config without ``onset_frames`` gets
    `DEFAULT_ONSET_FRAMES`; with ``"end"`` nothing is announced (``onset_frames`` 0).

    Args:
        checkpoint: the detector's description.
        overrides: ``--threshold``, ``--min-frames``, ``--onset-frames``.
        alert_on: ``"end"`` or ``"onset"``.

    Returns:
        The validated settings.
    """
    config = overrides.apply(segmenter_config_of(checkpoint))
    if alert_on == "onset" and config.onset_frames == 0:
        return replace(config, onset_frames=DEFAULT_ONSET_FRAMES)
    if alert_on == "end":
        return replace(config, onset_frames=0)
    return config


def load_detector_for_stream(
    detector_path: str | Path, backbone: str | Path | None, threads: int = 1, device: str = "auto"
) -> tuple[MiniROAD, DetectorCheckpoint, FeatureExtractor]:
    """Load a detector checkpoint and the feature extractor it names, checked against each other.

    Args:
        detector_path: checkpoint file.
        backbone: TorchScript backbone file (for checkpoints trained on TorchScript features).
        threads: torch threads.
        device: ``"auto"`` (CUDA when torch sees one), ``"cpu"`` or ``"cuda"``, for the detector and the extractor.

    Returns:
        ``(model, checkpoint, extractor)``.
    """
    torch.set_num_threads(threads)
    model, checkpoint = load_detector(detector_path, resolve_device(device))
    extractor = make_extractor(checkpoint.feature_extractor, backbone, device)
    checkpoint.check_features(extractor.dim, source=f"--detector {detector_path}")
    return model, checkpoint, extractor


@dataclass(frozen=True)
class StreamSource:
    """What one detector stream reads, as the command line names it (checked by `open_stream`).

    Args:
        video: the ``--video`` value: ``demo`` / ``demo:<name>``, a camera, a URL or a file.
        graph: task graph file; the detector's key-step classes must be exactly its key-steps.
        detector: detector checkpoint file.
        backbone: TorchScript backbone file, for detectors trained on its features.
        reader: how to read the video; its ``fps`` is replaced by the detector's rate.
        device: where the extractor and the detector run: ``"auto"`` (CUDA when torch sees one), ``"cpu"``, ``"cuda"``.
        ignore_names: run even if the detector and the graph name the steps differently (``--ignore-names``).
    """

    video: str
    graph: str
    detector: str
    backbone: str | None = None
    reader: ReaderConfig = field(default_factory=lambda: ReaderConfig(realtime=True))
    device: str = "auto"
    ignore_names: bool = False

    def __post_init__(self) -> None:
        for name in ("video", "graph", "detector"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InputError(f"StreamSource.{name} = {value!r} must name a source or a file")
        if self.device not in DEVICES:
            raise InputError(f"--device {self.device!r}: choose one of {', '.join(DEVICES)}")


@dataclass
class OpenedStreams:
    """Everything a detector needs for its streams, loaded once, checked against each other, every video open.

    Attributes:
        graph: the task graph.
        model: the MiniROAD detector (eval mode).
        checkpoint: its description.
        extractor: the feature extractor the checkpoint names.
        readers: the open videos, one per source, delivering frames at the detector's rate.
    """

    graph: TaskGraph
    model: MiniROAD
    checkpoint: DetectorCheckpoint
    extractor: FeatureExtractor
    readers: list[VideoReader]


@dataclass
class OpenedStream:
    """Everything one detector stream needs (`OpenedStreams` of one source).

    Attributes:
        graph: the task graph.
        model: the MiniROAD detector (eval mode).
        checkpoint: its description.
        extractor: the feature extractor the checkpoint names.
        reader: the open video, delivering frames at the detector's rate.
    """

    graph: TaskGraph
    model: MiniROAD
    checkpoint: DetectorCheckpoint
    extractor: FeatureExtractor
    reader: VideoReader


def stream_ids_for(videos: Sequence[str], stream_ids: Sequence[str] = ()) -> tuple[str, ...]:
    """Each ``--video`` source's stream id, checked: one source per stream, one stream per source.

    Args:
        videos: the ``--video`` values, in order.
        stream_ids: the ``--stream-id`` values, one per video in the same order; none: ``cam0``, ``cam1``, ...

    Returns:
        The stream ids, in the order of ``videos``.

    Raises:
        InputError: a count that differs from the videos', an id that is not a stream id, two sources with one id,
            or one source given twice (the same file, camera, URL or demo video).
    """
    ids = tuple(stream_ids) or tuple(f"cam{k}" for k in range(len(videos)))
    if len(ids) != len(videos):
        raise InputError(f"--stream-id is given {len(ids)} times for {len(videos)} --video sources: give one per "
                         "--video, in the same order (or none: cam0, cam1, ...)")
    seen_ids: dict[str, str] = {}
    seen_sources: dict[tuple[str, object], str] = {}
    for video, sid in zip(videos, ids, strict=True):
        if not is_stream_id(sid):
            raise InputError(f"--stream-id {sid!r}: use {STREAM_ID_RULE}")
        if sid in seen_ids:
            raise InputError(f"--stream-id {sid} is given to two sources (--video {seen_ids[sid]} and --video "
                             f"{video}): each stream needs its own id")
        seen_ids[sid] = video
        key = ("demo", video.partition(":")[2] or "mistake") if is_demo_video(video) else source_identity(video)
        if key in seen_sources:
            raise InputError(f"--video {video} is given twice (streams {seen_sources[key]} and {sid}): each source "
                             "feeds one stream")
        seen_sources[key] = sid
    return ids


def open_streams(
    sources: Sequence[StreamSource], threads: int = 1, warn: Callable[[str], None] = print_warning
) -> OpenedStreams:
    """Load the graph and the detector once, check them against each other, then open every video.

    Every mistake in what the user named (a graph that is not a DAG, a detector whose classes or step names are not
    the graph's, an unopenable video) is refused here, before any frame is read.

    Args:
        sources: the streams' videos; the graph, detector, backbone and device are the first source's (the command
            line gives them once for all).
        threads: torch threads of the detector.
        warn: called with each warning (names that differ, let through by ``ignore_names``).

    Returns:
        The opened streams (their readers are the caller's to close; if one video cannot be opened, those opened
        before it are closed).
    """
    first = sources[0]
    graph = load_graph(first.graph)
    model, checkpoint, extractor = load_detector_for_stream(first.detector, first.backbone, threads, first.device)
    for line in check_detector_matches_graph(checkpoint, graph, first.detector, first.graph, first.ignore_names):
        warn(line)
    readers: list[VideoReader] = []
    try:
        for source in sources:
            readers.append(open_reader(resolve_video(source.video), replace(source.reader, fps=checkpoint.fps)))
    except BaseException:
        for reader in readers:
            reader.close()
        raise
    return OpenedStreams(graph, model, checkpoint, extractor, readers)


def open_stream(source: StreamSource, threads: int = 1, warn: Callable[[str], None] = print_warning) -> OpenedStream:
    """`open_streams` of one source.

    Returns:
        The opened stream (its reader is the caller's to close).
    """
    opened = open_streams([source], threads, warn)
    return OpenedStream(opened.graph, opened.model, opened.checkpoint, opened.extractor, opened.readers[0])


class StreamWatcher(Protocol):
    """What watches a detector's streams from outside (the metrics endpoint: `streaming.metrics.DetectorMetrics`)."""

    def observer(self, stream_id: str) -> Callable[[str, float], None]:
        """The function the stream calls with ``(stage, seconds)`` for each frame."""

    def watch(self, streams: Sequence[DetectorStream]) -> None:
        """Follow these streams (their readers' counts, their statistics) from now on."""


@contextmanager
def checker_publisher(ctx: zmq.Context, config: DetectorConfig) -> Iterator[Publisher]:
    """A PUB socket connected to the checker at ``config.connect``; on exit its last messages get `FINAL_LINGER_MS`.

    Raises:
        InputError: no checker answered at ``config.connect`` within ``config.connect_wait_s``.
    """
    sock = connect(ctx, zmq.PUB, config.connect, wait_s=config.connect_wait_s, curve=config.curve)
    try:
        yield Publisher(sock)
    finally:
        sock.setsockopt(zmq.LINGER, FINAL_LINGER_MS)
        sock.close()


@contextmanager
def publishing_detector(
    reader: VideoReader,
    model: MiniROAD,
    checkpoint: DetectorCheckpoint,
    extractor: FeatureExtractor,
    config: DetectorConfig,
    ctx: zmq.Context,
) -> Iterator[Detector]:
    """A `Detector` connected to the checker at ``config.connect``; on exit its socket and the reader close.

    Args:
        reader: an open reader (closed on exit, also when no checker answers).
        model / checkpoint / extractor: what `load_detector_for_stream` returned (loaded once, checked already).
        config: stream id, endpoint, limits.
        ctx: ZeroMQ context.

    Yields:
        The detector, not started yet (call its ``run``).

    Raises:
        InputError: no checker answered at ``config.connect`` within ``config.connect_wait_s``.
    """
    try:
        with checker_publisher(ctx, config) as publisher:
            yield Detector(reader, extractor, model, checkpoint, EventPublisher(publisher, config.stream_id), config)
    finally:
        reader.close()


def run_detectors(
    readers: Sequence[VideoReader],
    model: MiniROAD,
    checkpoint: DetectorCheckpoint,
    extractor: FeatureExtractor,
    config: DetectorConfig,
    stream_ids: Sequence[str],
    stop: threading.Event | None = None,
    ctx: zmq.Context | None = None,
    watcher: StreamWatcher | None = None,
) -> list[DetectorStats]:
    """Run detector streams publishing to one checker through one socket (the ``stream-detect detector`` command).

    One stream runs in the `Detector` loop, as it always has; several share the extractor and the model in a
    `MultiDetector`.

    Args:
        readers: the open readers, one per stream (closed on return).
        model / checkpoint / extractor: what `open_streams` loaded (once, checked already).
        config: endpoint, limits and settings every stream shares (its ``stream_id`` is replaced by each stream's).
        stream_ids: each reader's stream id (`stream_ids_for`).
        stop: set to end early.
        ctx: ZeroMQ context.
        watcher: the metrics, told about every stream and each frame's stage times; None: nothing.

    Returns:
        Each stream's statistics, in the order of ``readers``.

    Raises:
        InputError: no checker answered at ``config.connect`` within ``config.connect_wait_s``.
    """
    try:
        with checker_publisher(ctx or zmq.Context.instance(), config) as publisher:
            streams: list[DetectorStream] = []
            for reader, sid in zip(readers, stream_ids, strict=True):
                parts = (checkpoint, EventPublisher(publisher, sid), replace(config, stream_id=sid))
                observe = watcher.observer(sid) if watcher is not None else None
                if len(readers) == 1:
                    streams.append(Detector(reader, extractor, model, *parts, observe=observe))
                else:
                    streams.append(DetectorStream(reader, *parts, observe=observe))
            if watcher is not None:
                watcher.watch(streams)
            if isinstance(streams[0], Detector):
                return [streams[0].run(stop)]
            return MultiDetector(streams, extractor, model, checkpoint, config.threads).run(stop)
    finally:
        for reader in readers:
            reader.close()


def run_detector(
    reader: VideoReader,
    model: MiniROAD,
    checkpoint: DetectorCheckpoint,
    extractor: FeatureExtractor,
    config: DetectorConfig,
    stop: threading.Event | None = None,
    ctx: zmq.Context | None = None,
) -> DetectorStats:
    """Run one detector stream publishing to a checker (`run_detectors` of one reader).

    Args:
        reader: an open reader (closed on return).
        model / checkpoint / extractor: what `load_detector_for_stream` returned (loaded once, checked already).
        config: stream id, endpoint, limits.
        stop: set to end early.
        ctx: ZeroMQ context.

    Returns:
        Run statistics.

    Raises:
        InputError: no checker answered at ``config.connect`` within ``config.connect_wait_s``.
    """
    return run_detectors([reader], model, checkpoint, extractor, config, [config.stream_id], stop, ctx)[0]
