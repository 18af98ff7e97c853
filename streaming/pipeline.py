"""Wiring for the ``stream-detect`` commands: the all-in-one run, the checker child process, the viewer loop.

All-in-one (`run_all`): the checker runs in a child process (its own interpreter, so its latency
does not share a GIL with the detector), bound to free loopback ports unless ``--bind`` says
otherwise; the detector runs in a thread of this process and the viewer (rich Live, or ``--jsonl``
lines) in the main thread, subscribed to the checker's output. Everything the user got wrong
(video, graph, detector, port) is checked before any frame is read and ends in one line, exit 2.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import zmq
from rich.console import Console
from rich.live import Live

from graphs.errors import InputError
from graphs.task_graph import TaskGraph, load_graph
from streaming.checker_service import CheckerConfig, run_checker
from streaming.messages import Alert, KeyStepEvent, Message, Status
from streaming.transport import POLL_MS, Receiver, check_detector_options, connect, subscribe
from streaming.view import ViewState, jsonl_line, render

if TYPE_CHECKING:
    from streaming.detector_service import EventPublisher  # the detector floor (torch) loads only when used

CHECKER_START_TIMEOUT_S = 30.0  # longest wait for the checker child to bind its sockets
END_TIMEOUT_S = 5.0  # after the detector ends, longest wait for the checker to report the stream ended
REFRESH_HZ = 8  # terminal view refreshes per second


@dataclass(frozen=True)
class RunConfig:
    """One all-in-one ``stream-detect`` run.

    Args:
        video: the ``--video`` value (``demo``, ``demo:correct``, camera, URL or file).
        graph: task graph file.
        detector: detector checkpoint.
        backbone: TorchScript backbone (if the detector needs one).
        stream_id: stream name.
        bind_events: checker input endpoint (port 0: a free one).
        bind_alerts: checker output endpoint (port 0: a free one).
        realtime: pace files to the wall clock.
        jsonl: print JSON lines instead of the live view.
        reader: file reader name (``auto``, ``decord``, ``opencv``).
        threads: torch threads of the detector.
    """

    video: str
    graph: str
    detector: str
    backbone: str | None = None
    stream_id: str = "cam0"
    bind_events: str = "tcp://127.0.0.1:0"
    bind_alerts: str = "tcp://127.0.0.1:0"
    realtime: bool = True
    jsonl: bool = False
    reader: str = "auto"
    threads: int = 1

    def __post_init__(self) -> None:
        check_detector_options(self.stream_id, self.threads)


def _checker_child(graph_path: str, config: CheckerConfig, pipe: Connection) -> None:
    """Entry point of the checker child process: report the bound endpoints (or the error), then serve.

    It serves until the parent asks (SIGTERM) or is gone: a parent that is killed outright (SIGKILL, or a
    signal it does not handle) cannot ask, and the checker would otherwise hold its ports forever.
    """
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the checker stops
    parent = mp.parent_process()
    orphaned = (lambda _core: not parent.is_alive()) if parent is not None else None
    try:
        run_checker(graph_path, config, ready=lambda events, alerts: pipe.send(("ready", events, alerts)), stop=stop,
                    until=orphaned)
    except InputError as err:
        pipe.send(("error", str(err)))


class CheckerProcess:
    """The checker in a child process (spawned, so it works the same on every platform).

    Args:
        graph_path: task graph file.
        config: endpoints.
    """

    def __init__(self, graph_path: str, config: CheckerConfig) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_checker_child, args=(graph_path, config, child), daemon=True)
        self.process.start()
        child.close()
        if not parent.poll(CHECKER_START_TIMEOUT_S):
            self.stop()
            raise InputError(f"the checker did not start within {CHECKER_START_TIMEOUT_S:.0f} s")
        reply = parent.recv()
        if reply[0] == "error":
            self.process.join(2.0)
            raise InputError(reply[1])
        self.events_endpoint: str = reply[1]
        self.alerts_endpoint: str = reply[2]

    def stop(self) -> None:
        """Ask the checker to stop (SIGTERM), then kill it if it does not within 2 s."""
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(2.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(2.0)


class Viewer:
    """Subscribes to a checker's output and shows it (rich Live) or prints JSON lines.

    Args:
        ctx: ZeroMQ context.
        endpoint: the checker's alerts endpoint.
        state: the view state (holds step names from the graph).
        jsonl: print ``keystep`` and ``alert`` messages as JSON lines to ``out`` instead of drawing.
        out: where JSON lines go.
        warn: called once, with the reason, when the first malformed message is dropped (JSON lines have
            no screen to count them on: a checker speaking another wire version would otherwise look idle).
    """

    def __init__(
        self,
        ctx: zmq.Context,
        endpoint: str,
        state: ViewState,
        jsonl: bool,
        out: TextIO = sys.stdout,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.receiver = Receiver(subscribe(connect(ctx, zmq.SUB, endpoint, "--connect")))
        self.endpoint = endpoint
        self.state = state
        self.jsonl = jsonl
        self.out = out
        self.warn = warn

    def pump(self, timeout_ms: int = POLL_MS) -> list[Message]:
        """Take what arrived (waiting up to ``timeout_ms``), fold it into the state, print JSON lines."""
        messages = self.receiver.poll(timeout_ms)
        now = time.time()
        for message in messages:
            new = self.state.apply(message, now)
            if self.jsonl and new and isinstance(message, KeyStepEvent | Alert):
                print(jsonl_line(message), file=self.out, flush=True)
        stats = self.receiver.stats
        if stats.malformed and not self.state.malformed and self.warn is not None:
            self.warn(f"view: dropping malformed messages from {self.endpoint} (first: {stats.last_error})")
        self.state.malformed = stats.malformed
        return messages

    def loop(self, done: Callable[[], bool], console: Console | None = None) -> None:
        """Pump until ``done()``; with a console, redraw the live view `REFRESH_HZ` times a second."""
        if self.jsonl or console is None:
            while not done():
                self.pump()
            return
        with Live(render(self.state), console=console, refresh_per_second=REFRESH_HZ, transient=False) as live:
            next_draw = 0.0
            while not done():
                self.pump(int(1000 / REFRESH_HZ))
                if time.monotonic() >= next_draw:
                    live.update(render(self.state))
                    next_draw = time.monotonic() + 1.0 / REFRESH_HZ
            live.update(render(self.state))

    def close(self) -> None:
        """Close the socket."""
        self.receiver.sock.close()


def graph_names(graph: TaskGraph) -> dict[int, str]:
    """Step id -> name map for the view."""
    return dict(zip(graph.step_ids, graph.step_names, strict=True))


def resolve_video(video: str) -> str:
    """Map ``demo`` / ``demo:<name>`` to the cached demo video file (rendered on first use); else unchanged."""
    if video == "demo" or video.startswith("demo:"):
        from streaming.demo.synthetic_video import demo_video

        return str(demo_video(video.partition(":")[2] if ":" in video else "mistake")[0])
    return video


def run_all(config: RunConfig, out: TextIO = sys.stdout, console: Console | None = None) -> int:
    """The default ``stream-detect`` command: checker process, detector thread, viewer, on loopback.

    Args:
        config: the run's settings.
        out: where ``--jsonl`` lines go.
        console: rich console of the live view (a new stdout console if None).

    Returns:
        Exit status (0: the stream ended normally).
    """
    from streaming.detector_service import (
        Detector,
        DetectorConfig,
        DetectorStats,
        EventPublisher,
        check_detector_matches_graph,
        load_detector_for_stream,
    )
    from streaming.readers import ReaderConfig, open_reader
    from streaming.transport import Publisher

    # Everything the user gave is checked before anything starts.
    graph = load_graph(config.graph)
    model, checkpoint, extractor = load_detector_for_stream(config.detector, config.backbone, config.threads)
    check_detector_matches_graph(checkpoint, graph, config.detector, config.graph)
    video = resolve_video(config.video)
    reader = open_reader(video, ReaderConfig(fps=checkpoint.fps, reader=config.reader, realtime=config.realtime))
    checker = None
    ctx = zmq.Context()
    viewer = None
    try:
        checker = CheckerProcess(config.graph, CheckerConfig(config.bind_events, config.bind_alerts))
        viewer = Viewer(ctx, checker.alerts_endpoint, ViewState(names=graph_names(graph)), config.jsonl, out)
        det_config = DetectorConfig(stream_id=config.stream_id, connect=checker.events_endpoint, threads=config.threads)
        sock = connect(ctx, zmq.PUB, checker.events_endpoint)
        events = EventPublisher(Publisher(sock), config.stream_id)
        detector = Detector(reader, extractor, model, checkpoint, events, det_config)
        await_subscription(viewer, events)
        stop = threading.Event()
        outcome: list[DetectorStats | BaseException] = []  # what the detector thread ended with

        def work() -> None:
            try:
                outcome.append(detector.run(stop))
            except BaseException as err:  # reported by the main thread, never lost in a thread
                outcome.append(err)

        thread = threading.Thread(target=work, name="detector", daemon=True)
        thread.start()
        ended_at: list[float] = []

        def done() -> bool:
            row = viewer.state.streams.get(config.stream_id)
            if row is not None and row.ended and not thread.is_alive():
                return True
            if not thread.is_alive():
                if not ended_at:
                    ended_at.append(time.monotonic())
                return time.monotonic() - ended_at[0] > END_TIMEOUT_S
            return False

        try:
            viewer.loop(done, None if config.jsonl else (console or Console()))
        except KeyboardInterrupt:
            stop.set()
            thread.join(5.0)
            raise
        thread.join(5.0)
        sock.close()
        ended = outcome[0] if outcome else None
        if isinstance(ended, BaseException):
            raise ended
        if ended is not None and ended.error:
            raise InputError(ended.error)
        return 0
    finally:
        reader.close()
        if viewer is not None:
            viewer.close()
        if checker is not None:
            checker.stop()
        ctx.destroy(linger=0)


def await_subscription(viewer: Viewer, events: EventPublisher, timeout_s: float = CHECKER_START_TIMEOUT_S) -> None:
    """Send heartbeats until the viewer hears the checker's status for this stream.

    PUB/SUB connections are made asynchronously (the ZeroMQ "slow joiner"): without this the first
    messages of a fast file run could leave before both hops are connected.

    Args:
        viewer: subscribed to the checker's output.
        events: publishes to the checker's input.
        timeout_s: longest wait.

    Raises:
        InputError: no status came back within ``timeout_s``, naming the checker's output endpoint.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events.heartbeat(None, 0, 0, 0.0)
        for message in viewer.pump(50):
            if isinstance(message, Status) and message.stream_id == events.stream_id:
                return
    endpoint = viewer.receiver.sock.getsockopt_string(zmq.LAST_ENDPOINT)
    raise InputError(f"the checker at {endpoint} does not answer within {timeout_s:g} s")


def run_view(
    endpoint: str,
    graph_path: str | None,
    jsonl: bool,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    done: Callable[[], bool] = lambda: False,
) -> int:
    """The ``stream-detect view`` command: show a checker's output until interrupted.

    Malformed messages are dropped and counted (on screen in the live view); with ``jsonl`` the first
    one is also reported on ``err`` at once, and a count ends the run if there were any.

    Args:
        endpoint: the checker's alerts endpoint.
        graph_path: optional graph file, for step names.
        jsonl: print JSON lines instead of the live view.
        out: where JSON lines go.
        err: where the malformed-message notes go.
        done: the view ends once it returns true (default: never, until interrupted).

    Returns:
        Exit status.
    """
    names = graph_names(load_graph(graph_path)) if graph_path else {}
    ctx = zmq.Context()

    def warn(line: str) -> None:
        print(line, file=err, flush=True)

    viewer = Viewer(ctx, endpoint, ViewState(names=names), jsonl, out, warn=warn if jsonl else None)
    try:
        viewer.loop(done, None if jsonl else Console())
    finally:
        stats = viewer.receiver.stats
        if stats.malformed:
            warn(f"view: {stats.malformed} malformed messages dropped (last: {stats.last_error})")
        viewer.close()
        ctx.destroy(linger=0)
    return 0


def default_demo_paths() -> tuple[Path, Path]:
    """The bundled demo graph and demo detector shipped in ``streaming/demo/``."""
    here = Path(__file__).resolve().parent / "demo"
    return here / "demo_graph.json", here / "demo_detector.pt"
