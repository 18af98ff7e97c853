"""Shared helpers of the streaming tests: the demo task graph, polling with a deadline, test videos and streams."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import cv2
import numpy as np
import pyte
import zmq

from graphs.task_graph import END, START, TaskGraph
from streaming.checker.config import CheckerConfig
from streaming.checker.service import CheckerService
from streaming.demo.procedure import PRECONDITIONS, SCENARIO, STEP_IDS, STEP_NAMES, name_of
from streaming.messages import Heartbeat, KeyStepEvent, Message, Status, decode
from streaming.transport import connect, subscribe

STREAM_DETECT = [sys.executable, "-m", "streaming.stream_detect_cli"]  # the command, run as a child process
MISTAKE_STEP = 2  # boil_water: the one step of DEMO_EXECUTIONS["mistake"] done before its pre-condition (fill_kettle)


class KeptMessages:
    """A detector sink that keeps every message it is sent (build_pipeline's ``sinks``)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def send(self, message: Message) -> None:
        self.messages.append(message)

    def keysteps(self) -> list[KeyStepEvent]:
        """The key-steps among them, in order."""
        return [m for m in self.messages if isinstance(m, KeyStepEvent)]


def tea_graph() -> TaskGraph:
    """The demo procedure's ground-truth graph (see `streaming.demo.procedure`)."""
    nodes = [START, *STEP_IDS, END]
    index = {n: i for i, n in enumerate(nodes)}
    adj = np.zeros((len(nodes), len(nodes)), dtype=bool)
    needed: set[int] = set()
    for step, reqs in PRECONDITIONS.items():
        for req in reqs or (START,):
            adj[index[step], index[req]] = True
        needed.update(reqs)
    for step in STEP_IDS:
        if step not in needed:
            adj[index[END], index[step]] = True
    return TaskGraph(STEP_IDS, STEP_NAMES, adj, scenario=SCENARIO)


def weighted_tea_graph() -> TaskGraph:
    """`tea_graph` with row-softmax weights (as Direct Optimization learns them), so the checker's procedure questions
    use the weighted rule. Before anything else, ``add_teabag`` is likelier than ``fill_kettle`` (START weighs 0.2 in
    fill_kettle's row), and ``pour_water`` follows ``add_teabag`` more surely than ``boil_water`` (which ``add_milk``
    follows too)."""
    binary = tea_graph()
    nodes = binary.nodes
    size = len(nodes)
    weights = np.full((size, size), 0.02)
    weights[0] = 0.0  # nothing precedes START
    weights[:, -1] = 0.0  # nothing requires END
    np.fill_diagonal(weights, 0.0)
    strong = {(1, START): 0.2, (2, 1): 1.0, (3, START): 1.0, (4, 3): 1.0, (5, 2): 0.3, (5, 4): 0.6, (6, 5): 1.0,
              (6, 2): 0.5, (END, 6): 1.0}
    for (step, required), value in strong.items():
        weights[nodes.index(step), nodes.index(required)] += value
    weights[1:] /= weights[1:].sum(axis=1, keepdims=True)
    return TaskGraph(binary.step_ids, binary.step_names, binary.adjacency, weights, binary.scenario)


def keystep(history: tuple[int, ...] = (1, 3, 5), seq: int = 0, **fields: Any) -> KeyStepEvent:
    """The event a detector sends when it confirms ``history[-1]``, a demo step (the one way tests build one).

    Args:
        history: every key-step confirmed so far in the session, the new one last; ``step`` and ``index``
            are taken from it.
        seq: the message sequence number.
        fields: any other field to set (``stream_id``, ``session``, ``timestamp``, ``start``, ...), or to break.

    Returns:
        The event; unless given: stream ``cam0``, session ``s``, sent at 1.5 s, the step's demo name, a segment
        from 1.0 to 2.0 s with confidence 0.8.
    """
    values: dict[str, Any] = {
        "stream_id": "cam0", "seq": seq, "timestamp": 1.5, "session": "s", "step": history[-1],
        "step_name": name_of(history[-1]), "start": 1.0, "end": 2.0, "confidence": 0.8,
        "index": len(history) - 1, "history": history,
    }
    return KeyStepEvent(**(values | fields))


def beat(stream: str = "cam0", seq: int = 0, history: tuple[int, ...] = (), **fields: Any) -> Heartbeat:
    """A heartbeat of a demo stream (session ``s``, nothing current, not ended), any field replaceable."""
    values: dict[str, Any] = {
        "stream_id": stream, "seq": seq, "timestamp": 1.0, "session": "s", "history": history, "current": None,
        "frames": 10, "dropped": 0, "fps": 10.0, "ended": False,
    }
    return Heartbeat(**(values | fields))


@contextmanager
def running_checker(tmp_path: Path, sinks: Sequence[Any] = (), graph: TaskGraph | None = None,
                    log: list[str] | None = None, **config: Any
                    ) -> Iterator[tuple[zmq.Context, CheckerService, threading.Thread]]:
    """A `CheckerService` on `tea_graph`, at ipc endpoints under ``tmp_path``, served by a thread for the block.

    Args:
        tmp_path: folder for the ipc socket files.
        sinks: where the checker also hands what it publishes (`streaming.detector.sinks.Sink`).
        graph: its task graph (None: `tea_graph`).
        log: a list its log lines are added to (None: the service's own log, stderr).
        config: further `CheckerConfig` fields (``max_streams=1``).

    Yields:
        ``(ctx, service, thread)``; on exit the thread is stopped (joined for at most 5 s) and ``ctx`` destroyed.
    """
    ctx = zmq.Context()
    stop = threading.Event()
    kept = None if log is None else lambda line, *_args, **_fields: log.append(line)
    service = CheckerService(graph or tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out",
                                                                 **config), ctx, log=kept, sinks=sinks)
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield ctx, service, thread
    finally:
        stop.set()
        thread.join(5)
        ctx.destroy(linger=0)


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port held, never listened on: every connection to it is refused for the block's length.

    A port released before use is free for the next bind: the OS once gave a test's HTTP receiver the port its
    "nobody listens" webhook had just let go, and the receiver counted that webhook's POSTs as its own (4, not 2).
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0, step: Callable[[], object] | None = None) -> bool:
    """Call ``step`` repeatedly until ``predicate()`` holds or the deadline passes.

    The loop rests 10 ms between tries, ``step`` or not: a step that publishes (a heartbeat until a stream shows up)
    called back to back queued thousands of messages ahead of a slow, loaded service, and what a test sent next waited
    behind them past its own deadline.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if step is not None:
            step()
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def write_noise_video(path: Path, frames: int = 60, size: tuple[int, int] = (64, 48), fourcc: str = "mp4v") -> Path:
    """Write a 30 fps video of random noise (every frame is large and unlike the last) with OpenCV.

    Args:
        path: the video to write (``.mp4``, or ``.avi`` / ``.mkv`` with another ``fourcc``).
        frames: how many frames.
        size: ``(width, height)``.
        fourcc: the codec.
    """
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*fourcc), 30.0, size)
    assert writer.isOpened()
    rng = np.random.default_rng(0)
    for _ in range(frames):
        writer.write(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
    writer.release()
    return path


def write_damaged_video(path: Path, frames: int = 240, at: tuple[float, float] = (0.6, 0.7)) -> Path:
    """Write a noise video (`write_noise_video`), then zero part of its frame data.

    The container (``moov``, written last) stays intact, so the file opens and its first frames
    decode; decoding fails in the zeroed part, as for a file damaged on disk or in transfer. decord's
    decoder thread reads ahead, so it may fail frames before the damage (timing-dependent); the default
    damage starts well after its first batch, which it then usually decodes.

    Args:
        path: the ``.mp4`` to write.
        frames: frames in the video.
        at: the zeroed part, as fractions of the frame data.
    """
    write_noise_video(path, frames)
    data = bytearray(path.read_bytes())
    end = data.find(b"moov")
    assert end > 0
    start, stop = int(end * at[0]), int(end * at[1])
    data[start:stop] = bytes(stop - start)
    path.write_bytes(bytes(data))
    return path


def write_truncated_video(path: Path, frames: int = 120) -> Path:
    """Write a noise video (`write_noise_video`) whose container states its length up front, then cut off its second
    half, as a copy or a recording that stopped part way leaves it.

    An ``.avi`` (MJPG) keeps its frame count in its header, an ``.mkv`` (XVID) its duration; both still open, and
    their first half decodes. (An mp4's ``moov``, written last, goes with the cut: that file no longer opens.)

    Args:
        path: the ``.avi`` or ``.mkv`` to write.
        frames: frames written before the cut.
    """
    write_noise_video(path, frames, fourcc="MJPG" if path.suffix == ".avi" else "XVID")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


class StalledStream:
    """An HTTP MJPEG stream on 127.0.0.1 that goes silent: a network camera whose link hangs.

    The first client gets ``frames`` JPEG frames, then nothing, its connection held open; every later
    client is disconnected at once (the camera is gone). Use it as a context manager; ``url`` is its address.

    Args:
        frames: frames sent before the stall.
    """

    def __init__(self, frames: int = 5) -> None:
        jpegs = [cv2.imencode(".jpg", np.full((48, 64, 3), 40 * k % 256, np.uint8))[1].tobytes() for k in range(frames)]
        self._parts = [
            b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n%s\r\n" % (len(j), j) for j in jpegs
        ]
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}/stream.mjpg"
        self._clients: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            if self._clients:
                client.close()
                continue
            self._clients.append(client)
            client.settimeout(1.0)
            client.recv(4096)  # the request
            client.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: multipart/x-mixed-replace; boundary=frame\r\n\r\n")
            client.sendall(b"".join(self._parts))

    def __enter__(self) -> StalledStream:
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5.0)
        for sock in (*self._clients, self._server):
            sock.close()


@contextmanager
def silent_server() -> Iterator[int]:
    """A loopback TCP server that accepts every connection and never sends a byte (a camera whose link hangs)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for sock in (*held, server):
            sock.close()


def status_heard(ctx: zmq.Context, endpoint: str, stream: str, over: threading.Event, timeout_s: float,
                 accept: Callable[[Status], bool] = lambda _status: True) -> bool:
    """Listen to a checker's output as a second viewer would, until a `status` of ``stream`` that ``accept``s comes
    (True), ``over`` is set or ``timeout_s`` pass (False): what tests wait on to act mid-run (kill or freeze the
    checker once the detector's frames reach it)."""
    sub = subscribe(connect(ctx, zmq.SUB, endpoint), (f"status/{stream}".encode(),))
    deadline = time.monotonic() + timeout_s
    try:
        while not over.is_set() and time.monotonic() < deadline:
            if sub.poll(50):
                message = decode(sub.recv_multipart())
                if isinstance(message, Status) and message.stream_id == stream and accept(message):
                    return True
        return False
    finally:
        sub.close(linger=0)


def drain_terminal(master: int, idle_s: float = 60.0) -> tuple[threading.Thread, bytearray]:
    """Read a pseudo-terminal's master end in a thread as it is written (a full terminal buffer would stall the
    program drawing into it), until its other end closes or nothing comes for ``idle_s``.

    Returns:
        The reading thread (join it once the program is done) and the bytes read so far.
    """
    received = bytearray()

    def read() -> None:
        while select.select([master], [], [], idle_s)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end closed: all was read
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader, received


def screen_of(drawn: bytes, columns: int, rows: int) -> list[str]:
    """The lines a terminal ``columns`` x ``rows`` shows after ``drawn``, its scrollback first: what a person sees,
    not the bytes that drew it (pyte's VT100 emulator)."""
    screen = pyte.HistoryScreen(columns, rows, history=100_000)
    pyte.ByteStream(screen).feed(drawn)
    scrolled = ["".join(line[x].data for x in range(columns)) for line in screen.history.top]
    return [line.rstrip() for line in scrolled + screen.display]


@contextmanager
def checker_with_few_files(
    *options: str, limit: int = 64
) -> Iterator[tuple[subprocess.Popen[str], list[str], str, str]]:
    """A ``stream-detect checker --demo`` process on free loopback ports, under a limit of ``limit`` open files, its
    stderr lines gathered as they come. Yields ``(process, lines, --bind endpoint, --publish endpoint)`` once it
    serves; it gets SIGTERM on the way out (the caller checks how it ended)."""
    import resource

    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    checker = subprocess.Popen([*STREAM_DETECT, "checker", "--demo", "--bind", "tcp://127.0.0.1:0", "--publish",
                                "tcp://127.0.0.1:0", *options], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, preexec_fn=few_files)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(checker.stderr or ()), daemon=True)
    reader.start()
    try:
        assert wait_for(lambda: any("viewers to" in line for line in lines), 60), lines
        bound, published = re.findall(r"tcp://127\.0\.0\.1:\d+", lines[0])
        yield checker, lines, bound, published
    finally:
        checker.terminate()
        checker.wait(timeout=60)
        reader.join(timeout=10)


@contextmanager
def demo_checker_process(bound: str, published: str, stderr: int, *options: str) -> Iterator[subprocess.Popen[bytes]]:
    """A ``stream-detect checker --demo`` process on endpoints known before it starts (its stderr, ``stderr``, may
    never say them), with more ``options``; SIGTERM on the way out, unless it ended."""
    process = subprocess.Popen([*STREAM_DETECT, "checker", "--demo", "--bind", bound, "--publish", published,
                                *options], stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def full_pipe() -> tuple[int, int]:
    """A pipe already full, as one whose reader stopped reading: the next write to it blocks (a stderr that takes
    nothing)."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write, b"." * 4096)
    os.set_blocking(write, True)
    return read, write
