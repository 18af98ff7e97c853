"""The detector put together in one place: `build_pipeline(config)`.

Every command that runs a detector builds it here: ``stream-detect detector`` (`streaming.stream_detect_cli`), the
all-in-one run (`streaming.all_in_one`), ``stream-detect eval`` (`streaming.offline.eval_run`) and the benchmarks
(``benchmarks/stream_latency.py``, ``benchmarks/multi_stream.py``). A pipeline is:

    sources -> readers (one thread each: decode, prepare) -> FrameLoop (batched features, one MiniROAD step for
    every stream) -> DetectorStream (segmenter) -> EventPublisher -> sinks

The sinks of each stream are handed in when it is built: the checker's ZeroMQ socket (``config.publish``), the alert
frames (``config.alert_frames``) and whatever the caller adds (`SinkFactory`: a checker in the same process, JSON
lines, ...); so are the frame observers (`ObserverFactory`: the overlay, ``eval``'s clock). Nothing is patched onto a
running detector.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
import zmq

from graphs.common.errors import InputError, RunError
from recognition.checkpoint import DetectorCheckpoint
from recognition.model import MiniROAD
from recognition.segmenter import SegmenterConfig
from streaming.detector.alert_frames import DEFAULT_KEEP, AlertFrames
from streaming.detector.config import DetectorConfig, StreamSource
from streaming.detector.loading import (
    LoadedParts,
    load_parts,
    open_videos,
    print_warning,
    refuse_unused_default_rates,
    stream_ids_for,
)
from streaming.detector.loop import FrameLoop
from streaming.detector.publisher import EventPublisher
from streaming.detector.sinks import Sink, combine
from streaming.detector.streams import DetectorStats, DetectorStream, FrameObserver, StreamWatcher
from streaming.extractors import FeatureExtractor
from streaming.readers import Frame, VideoReader
from streaming.transport import HandshakeRefused, Publisher, connect_waiting

FINAL_LINGER_MS = 1000  # on shutdown, queued final messages get this long to leave (then dropped)

SinkFactory = Callable[[str], Sink]  # a stream id -> that stream's sink
ObserverFactory = Callable[[str], FrameObserver]  # a stream id -> that stream's frame observer


@dataclass(frozen=True)
class PipelineConfig:
    """One detector pipeline: what it reads, how each stream runs, where its messages go.

    Args:
        sources: the videos (their graph, detector, backbone and device are the first one's).
        detector: endpoint, threads, limits and settings every stream shares (``stream_id``: the stream's, when
            there is one source and no ``stream_ids``).
        stream_ids: each source's stream id; empty: ``detector.stream_id`` for one source, for several
            `streaming.detector.loading.default_stream_ids` (feature files' own names, else ``cam0``, ``cam1``, ...).
        publish: connect to the checker at ``detector.connect`` and publish there (False: only the sinks the caller
            hands in, as ``eval`` does).
        alert_frames: the ``--alert-frames`` folder (None: none written).
        alert_frames_keep: files kept per stream there.
    """

    sources: tuple[StreamSource, ...] = ()
    detector: DetectorConfig = field(default_factory=DetectorConfig)
    stream_ids: tuple[str, ...] = ()
    publish: bool = True
    alert_frames: str | None = None
    alert_frames_keep: int = DEFAULT_KEEP

    def ids(self, count: int) -> tuple[str, ...]:
        """The stream ids of ``count`` streams (checked)."""
        if not self.stream_ids and count == 1:
            return (self.detector.stream_id,)
        videos = [s.video for s in self.sources] or [f"stream{k}" for k in range(count)]
        return stream_ids_for(videos, self.stream_ids)


class Pipeline:
    """A built detector: its streams, its frame loop, and everything it opened (closed by `close`).

    Attributes:
        parts: the graph, model, checkpoint and extractor.
        streams: one per source, in order.
        loop: the frame loop over all of them.
    """

    def __init__(self, parts: LoadedParts, streams: list[DetectorStream], loop: FrameLoop, stack: ExitStack,
                 publisher: Publisher | None = None) -> None:
        self.parts = parts
        self.streams = streams
        self.loop = loop
        self._stack = stack
        self._publisher = publisher

    @property
    def late_shapes(self) -> int:
        """Batch shapes the backbone met for the first time after start-up (0 when the warm-up covered them)."""
        return self.loop.batches.late_shapes

    def run(self, stop: threading.Event | None = None,
            ended: Callable[[DetectorStream], None] | None = None) -> list[DetectorStats]:
        """Run every stream to its end, or until ``stop`` is set; each stream's statistics in order. ``ended`` is
        called with each stream as it ends (`FrameLoop.run`)."""
        return self.loop.run(stop, ended)

    def checker_gone(self, stopped: bool = False) -> InputError | RunError | None:
        """Why what the streams sent last went unchecked, as the error the run ends with (None: the checker is
        there, or nothing is published): its connection was cut and had not come back (`RunError`, exit status 1),
        or a checker back with this client's key revoked (`streaming.transport.HandshakeRefused`, exit status 2, as
        when it comes mid-run). The checker never answers a detector otherwise, so these are the failures of the
        checker a detector can see (docs/live-pipeline.md). ``stopped``: the run was stopped (Ctrl-C, SIGTERM,
        SIGHUP), so its streams' last heartbeats, which say so, are among what went unchecked."""
        watch = self._publisher.watch if self._publisher is not None else None
        if watch is None:
            return None
        try:
            watch.check(running=True)  # the events that came since the last message sent
        except HandshakeRefused as refused:  # said after the streams' lines, as the run's error
            return refused
        if watch.lost_at is None:
            return None
        when = time.strftime("%H:%M:%S", time.localtime(watch.lost_at))
        if stopped:
            return RunError(f"--connect {watch.endpoint}: the checker went away at {when} and had not answered again "
                            "when the run was stopped: what the streams sent since, their stop included, was not "
                            "checked")
        return RunError(f"--connect {watch.endpoint}: the checker went away at {when} and had not answered again "
                        "when the run ended: what the streams sent since was not checked")

    def close(self) -> None:
        """Close the readers, the checker's socket and every sink that holds a thread or a file."""
        self._stack.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def checker_publisher(ctx: zmq.Context, config: DetectorConfig) -> Iterator[Publisher]:
    """A PUB socket connected to the checker at ``config.connect``; on exit its last messages get `FINAL_LINGER_MS`.

    Its handshakes stay watched: a checker that refuses this client later (its key revoked) ends the run with the
    refusal (`streaming.transport.HandshakeRefused`).

    Raises:
        InputError: no checker answered at ``config.connect`` within ``config.connect_wait_s``.
    """
    sock, watch = connect_waiting(ctx, zmq.PUB, config.connect, "--connect", config.connect_wait_s, curve=config.curve)
    try:
        yield Publisher(sock, watch)
    finally:
        watch.close()
        sock.setsockopt(zmq.LINGER, FINAL_LINGER_MS)
        sock.close()


def observe_all(observers: Sequence[FrameObserver]) -> FrameObserver | None:
    """One frame observer calling several in order (None for none)."""
    if not observers:
        return None
    if len(observers) == 1:
        return observers[0]

    def each(frame: Frame, features: np.ndarray, probs: np.ndarray) -> None:
        for observer in observers:
            observer(frame, features, probs)

    return each


def build_pipeline(
    config: PipelineConfig,
    *,
    parts: LoadedParts | None = None,
    readers: Sequence[VideoReader] | None = None,
    sinks: Sequence[SinkFactory] = (),
    observers: Sequence[ObserverFactory] = (),
    segmenter: SegmenterConfig | None = None,
    watcher: StreamWatcher | None = None,
    ctx: zmq.Context | None = None,
    warn: Callable[[str], None] = print_warning,
) -> Pipeline:
    """Load, check, open and wire a detector (see the module); nothing is read yet.

    Every mistake in what the user named is refused here, before any frame is read, and whatever was opened before
    it is closed again.

    Args:
        config: the pipeline's settings.
        parts: the graph, model, checkpoint and extractor, loaded already (``eval`` loads them once for every video);
            None: loaded from ``config.sources``.
        readers: the open readers, one per stream (then the pipeline closes them); None: each source's video opened.
        sinks: per stream, more sinks after the checker's socket.
        observers: per stream, frame observers (after the alert frames').
        segmenter: the segmenter settings of every stream (default: the checkpoint's, changed by the command line).
        watcher: the metrics, told about every stream, each frame's stage times and the loop's batches.
        ctx: ZeroMQ context (default: the process's).
        warn: called with each warning (names that differ, let through by ``ignore_names``; alert frames not
            written; a sink that fails; the readers' own, of the readers it opens).

    Returns:
        The pipeline (call ``run``; ``close`` it, or use it as a context manager).

    Raises:
        InputError: bad input, or no checker answered at ``config.detector.connect`` within its wait.
    """
    stack = ExitStack()
    try:
        # The outputs first: a folder that cannot be written is refused before any model loads or checker answers.
        # Its failures are warnings of the run's own log (JSON lines with --log-format json), not stray stderr lines.
        frames = stack.enter_context(AlertFrames(config.alert_frames, config.alert_frames_keep, log=warn)) \
            if config.alert_frames is not None else None
        if readers is not None:
            for reader in readers:
                stack.callback(reader.close)
        if parts is None:
            if not config.sources:
                raise InputError("build_pipeline: give the sources, or the parts and the readers")
            parts = load_parts(config.sources[0], config.detector.threads, warn)
            # A detector apart checks no rates (it has no checker option): here, before a video opens or a checker
            # is waited for. Parts loaded by the caller were checked there (`check_measured_rates`).
            refuse_unused_default_rates(parts.checkpoint, config.sources[0].detector, config.detector.default_rates)
        if readers is None:
            readers = open_videos(config.sources, parts.checkpoint, warn)
            for reader in readers:
                stack.callback(reader.close)
        ids = config.ids(len(readers))
        if len(ids) != len(readers):
            raise InputError(f"build_pipeline: {len(ids)} stream ids for {len(readers)} readers")
        publisher: Publisher | None = None
        if config.publish:
            publisher = stack.enter_context(checker_publisher(ctx or zmq.Context.instance(), config.detector))
        streams: list[DetectorStream] = []
        for reader, sid in zip(readers, ids, strict=True):
            own: list[Sink] = [publisher] if publisher is not None else []
            seen: list[FrameObserver] = []
            if frames is not None:
                shots = frames.for_stream(sid)
                own.append(shots)
                seen.append(shots.seen)
            own += [make(sid) for make in sinks]
            seen += [make(sid) for make in observers]
            if not own:
                raise InputError("build_pipeline: the messages go nowhere (no checker, no sink)")
            observe = watcher.observer(sid) if watcher is not None else None
            streams.append(DetectorStream(reader, parts.checkpoint, EventPublisher(combine(own, warn), sid),
                                          replace(config.detector, stream_id=sid), segmenter, observe=observe,
                                          on_frame=observe_all(seen)))
        loop = FrameLoop(streams, parts.extractor, parts.model, parts.checkpoint, config.detector.threads,
                         config.detector.batch_sizes, warn,
                         rejoined=publisher.rejoined if publisher is not None else None)
        if watcher is not None:
            watcher.watch(streams, loop.batches)
    except BaseException:
        stack.close()
        raise
    return Pipeline(parts, streams, loop, stack, publisher)


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
    """Run detector streams publishing to one checker through one socket: `build_pipeline` over open readers.

    Args:
        readers: the open readers, one per stream (closed on return).
        model / checkpoint / extractor: loaded once, checked already.
        config: endpoint, limits and settings every stream shares (its ``stream_id`` is replaced by each stream's).
        stream_ids: each reader's stream id (`stream_ids_for`).
        stop: set to end early.
        ctx: ZeroMQ context.
        watcher: the metrics; None: nothing.

    Returns:
        Each stream's statistics, in the order of ``readers``.

    Raises:
        InputError: no checker answered at ``config.connect`` within ``config.connect_wait_s``.
    """
    parts = LoadedParts(None, model, checkpoint, extractor)  # no graph: the checker holds it
    pipeline_config = PipelineConfig(detector=config, stream_ids=tuple(stream_ids))
    with build_pipeline(pipeline_config, parts=parts, readers=readers, watcher=watcher, ctx=ctx) as pipeline:
        return pipeline.run(stop)


def run_detector(
    reader: VideoReader,
    model: MiniROAD,
    checkpoint: DetectorCheckpoint,
    extractor: FeatureExtractor,
    config: DetectorConfig,
    stop: threading.Event | None = None,
    ctx: zmq.Context | None = None,
) -> DetectorStats:
    """Run one detector stream publishing to a checker (`run_detectors` of one reader)."""
    return run_detectors([reader], model, checkpoint, extractor, config, [config.stream_id], stop, ctx)[0]

