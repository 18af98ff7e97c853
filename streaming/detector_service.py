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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import zmq

from graphs.errors import InputError
from graphs.options import check_threads
from graphs.safe_text import printable
from graphs.task_graph import TaskGraph, load_graph
from recognition.checkpoint import DetectorCheckpoint, load_detector
from recognition.evidence import (
    DEFAULT_FALSE_RATE,
    DEFAULT_MISS_RATE,
    EvidenceModel,
    EvidenceReporter,
    evidence_model_of,
)
from recognition.model import FastStepper, MiniROAD
from recognition.segmenter import OnlineSegmenter, OnsetEvent, SegmenterConfig, SegmenterOverrides, SegmentEvent
from streaming.alert_modes import DEFAULT_ALERT_ON, DEFAULT_ONSET_FRAMES, check_alert_on
from streaming.curve_keys import CurveClient
from streaming.demo.paths import resolve_video
from streaming.devices import DEVICES, resolve_device
from streaming.extractors import FeatureExtractor, make_extractor
from streaming.messages import MAX_HISTORY, STREAM_ID_RULE, Heartbeat, KeyStepEvent, KeyStepOnset, is_stream_id
from streaming.readers import Frame, ReaderConfig, VideoReader, open_reader
from streaming.transport import CONNECT_WAIT_S, DEFAULT_EVENTS_ENDPOINT, HEARTBEAT_S, Publisher, check_endpoint, connect

FINAL_LINGER_MS = 1000  # on shutdown, queued final messages get this long to leave (then dropped)
FINAL_REPEATS = 3  # the last heartbeat is sent this many times, FINAL_GAP_S apart
FINAL_GAP_S = HEARTBEAT_S / 5  # whatever the heartbeat period, so stopping takes (FINAL_REPEATS - 1) * 0.1 s
FPS_WINDOW_S = 1.0  # the reported frame rate averages over about this long
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

    def heartbeat(self, current: int | None, frames: int, dropped: int, fps: float, ended: bool = False) -> Heartbeat:
        """Publish a heartbeat with stream statistics and the history.

        Args:
            current: step being seen now (None for background).
            frames: frames processed.
            dropped: frames dropped by the source.
            fps: recent processing rate.
            ended: this is the stream's last message.

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
    probabilities out.

    Args:
        model: the detector in eval mode, on its device.
    """

    def __init__(self, model: MiniROAD) -> None:
        self.model = model
        self.state = model.init_state(1)  # (1, 1, H) on the model's device
        self.device = self.state.device

    @torch.inference_mode()
    def step(self, x_t: torch.Tensor) -> torch.Tensor:
        """One frame in, that frame's class probabilities out.

        Args:
            x_t: ``(F,)`` or ``(1, F)`` features of the newest frame.

        Returns:
            ``(1, C)`` probabilities on the CPU.
        """
        probs, self.state = self.model.step(x_t.reshape(1, -1).to(self.device, torch.float32), self.state)
        return probs.cpu()


def make_stepper(model: MiniROAD) -> FastStepper | ModelStepper:
    """The live stepper for a detector: the allocation-free `FastStepper` on the CPU, `ModelStepper` elsewhere."""
    on_cpu = next(model.parameters()).device.type == "cpu"
    return FastStepper(model) if on_cpu else ModelStepper(model)


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


class Detector:
    """The per-frame loop of one stream.

    Args:
        reader: an open video reader (delivers frames at the checkpoint's fps).
        extractor: the feature extractor the checkpoint names.
        model: the MiniROAD detector (eval mode).
        checkpoint: its description (class ids and names, fps).
        events: where confirmed key-steps and heartbeats go.
        config: heartbeat period and limits.
        segmenter_config: segmenter durations (default: the checkpoint's, changed by ``config.segmenter``).
        clock: monotonic clock for rates and heartbeats.
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
    ) -> None:
        checkpoint.check_features(extractor.dim, source=f"feature extractor {extractor.name!r}")
        self.reader = reader
        self.extractor = extractor
        self.stepper = make_stepper(model)
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
        self.on_event: Callable[[KeyStepEvent], None] | None = None
        # Called for every frame with its features (F,) and class probabilities (C,), once they are known.
        self.on_frame: Callable[[Frame, np.ndarray, np.ndarray], None] | None = None

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

    def run(self, stop: threading.Event | None = None) -> DetectorStats:
        """Process frames until the source ends, ``max_frames`` is reached or ``stop`` is set.

        Args:
            stop: set it to end the stream early (a final heartbeat is still sent).

        Returns:
            Run statistics.
        """
        stop = stop or threading.Event()
        torch.set_num_threads(self.config.threads)
        t0 = last_beat = self.clock()
        window: deque[float] = deque()  # recent frame times, for the reported rate
        fps = 0.0
        self.events.heartbeat(None, 0, 0, 0.0)
        try:
            while not stop.is_set():
                if self.config.max_frames and self.stats.frames >= self.config.max_frames:
                    break
                frame = self.reader.read()
                if frame is None:
                    break
                feats = self.extractor(frame.image[None])  # (1, F)
                probs = self.stepper.step(torch.from_numpy(feats))[0].numpy()  # (C,)
                if self.on_frame is not None:
                    self.on_frame(frame, feats[0], probs)
                self.events.frame(probs)
                self._publish(self.segmenter.update_events(probs))
                self.stats.frames += 1
                now = self.clock()
                window.append(now)
                while window and now - window[0] > FPS_WINDOW_S:
                    window.popleft()
                if now - last_beat >= self.config.heartbeat_s:
                    last_beat = now
                    if len(window) > 1:
                        fps = (len(window) - 1) / (window[-1] - window[0])
                    active = self.segmenter.active
                    self.events.heartbeat(active[0] if active else None, self.stats.frames, self.reader.dropped, fps)
            self._publish(self.segmenter.flush_events())
        finally:
            self.stats.seconds = self.clock() - t0
            self.stats.dropped = self.reader.dropped
            self.stats.error = self.reader.error
            final_fps = fps or self.stats.fps
            for k in range(FINAL_REPEATS):
                if k:
                    time.sleep(FINAL_GAP_S)
                self.events.heartbeat(None, self.stats.frames, self.stats.dropped, final_fps, ended=True)
        return self.stats


def evidence_reporter(
    checkpoint: DetectorCheckpoint, segmenter: SegmenterConfig, default_rates: bool
) -> EvidenceReporter | None:
    """What a stream of this detector reports about its evidence (None: nothing, the checkpoint measured no rates).

    Args:
        checkpoint: the detector (its ``info["evidence"]``, measured by ``recognition-train``).
        segmenter: the stream's segmenter settings (the default calibration's window is its ``min_duration``).
        default_rates: without measured rates, use the default ones (``--default-rates``).
    """
    model = evidence_model_of(checkpoint.info, "detector checkpoint")
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
    if checker != "probabilistic" or default_rates or evidence_model_of(checkpoint.info, detector) is not None:
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
class OpenedStream:
    """Everything one detector stream needs, loaded, checked against each other, and its video open.

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


def open_stream(source: StreamSource, threads: int = 1, warn: Callable[[str], None] = print_warning) -> OpenedStream:
    """Load the graph and the detector, check them against each other, then open the video.

    Every mistake in what the user named (a graph that is not a DAG, a detector whose classes or step names are not
    the graph's, an unopenable video) is refused here, before any frame is read.

    Args:
        source: the stream's video, graph, detector and backbone.
        threads: torch threads of the detector.
        warn: called with each warning (names that differ, let through by ``ignore_names``).

    Returns:
        The opened stream (its reader is the caller's to close).
    """
    graph = load_graph(source.graph)
    model, checkpoint, extractor = load_detector_for_stream(source.detector, source.backbone, threads, source.device)
    for line in check_detector_matches_graph(checkpoint, graph, source.detector, source.graph, source.ignore_names):
        warn(line)
    reader = open_reader(resolve_video(source.video), replace(source.reader, fps=checkpoint.fps))
    return OpenedStream(graph, model, checkpoint, extractor, reader)


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
    sock = None
    try:
        sock = connect(ctx, zmq.PUB, config.connect, wait_s=config.connect_wait_s, curve=config.curve)
        yield Detector(reader, extractor, model, checkpoint, EventPublisher(Publisher(sock), config.stream_id), config)
    finally:
        if sock is not None:
            sock.setsockopt(zmq.LINGER, FINAL_LINGER_MS)
            sock.close()
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
    """Run one detector stream publishing to a checker (the ``stream-detect detector`` command).

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
    with publishing_detector(reader, model, checkpoint, extractor, config, ctx or zmq.Context.instance()) as detector:
        return detector.run(stop)
