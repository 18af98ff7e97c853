"""The all-in-one ``stream-detect`` run: checker, one detector and the view, on loopback, from one command.

The checker runs in a child process (`streaming.checker.process`), bound to free loopback ports unless
``--bind`` / ``--publish`` say otherwise; the detector, built as ``stream-detect detector`` builds it
(`streaming.detector.wiring.build_pipeline`), runs in a thread of this process; the viewer (`streaming.view.client`:
rich Live, or ``--jsonl`` lines) runs in the main thread, subscribed to the checker's output, and hands every message
to the output sinks (``--webhook``: each alert POSTed, `streaming.detector.webhook`). Everything the user got wrong
(video, graph, detector, port) is refused before any frame is read, in one line, exit status 2.

The run watches its parts: if the checker process dies, the view fails, or the checker does not confirm the end
of the stream, it stops with one `RunError` line (exit status 1) and never reports success: alerts may be missing.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import TextIO

import zmq
from rich.console import Console
from rich.live import Live
from rich.text import Text

from graphs.common.errors import InputError, RunError, output_full
from graphs.common.interrupts import stop_for
from graphs.common.safe_text import count_of
from streaming.checker.config import CheckerConfig
from streaming.checker.core import CheckerCore
from streaming.checker.process import CHECKER_START_TIMEOUT_S, CheckerProcess
from streaming.detector.alert_frames import DEFAULT_KEEP
from streaming.detector.config import DetectorConfig, StreamSource
from streaming.detector.loading import check_measured_rates, load_parts, open_videos
from streaming.detector.publisher import EventPublisher
from streaming.detector.sinks import Sink
from streaming.detector.streams import DetectorStats, FrameObserver
from streaming.detector.webhook import WebhookConfig, webhook_sinks
from streaming.detector.wiring import Pipeline, PipelineConfig, build_pipeline
from streaming.local_checker import CheckerLink
from streaming.messages import Status
from streaming.overlay import FrameAnnotator, OverlayWriter
from streaming.service_log import ServiceLog
from streaming.view.client import Viewer
from streaming.view.state import ViewState, graph_names

FREE_LOOPBACK_PORT = "tcp://127.0.0.1:0"  # the checker's default endpoints here: any free port on loopback
END_TIMEOUT_S = 5.0  # after the detector ends, longest wait for the checker to report the stream ended
JOIN_TIMEOUT_S = 5.0  # longest wait for the detector thread to finish its last heartbeats
PROGRESS_EVERY_S = 0.5  # the status line on standard error, when the view is not drawn there (`progress_on_stderr`)
STOP_REPORT_S = 3.0  # after Ctrl-C or SIGTERM, longest wait for the checker's end report of the stopped stream


@dataclass(frozen=True)
class RunConfig:
    """One all-in-one ``stream-detect`` run; each part is the config its own component validates.

    Args:
        source: the video, graph, detector and backbone.
        detector: stream id, threads and heartbeat period; its ``connect`` is replaced by the endpoint the
            checker child bound. Its ``curve`` keys serve the view too (one process, one client identity).
        checker: the checker's endpoints (default: free loopback ports).
        jsonl: print JSON lines instead of the live view.
        annotate_out: write the video with what the system saw drawn over it to this ``.mp4`` (None: no file).
        preview: show the same in a window (needs a display and an OpenCV with a GUI).
        webhook: POST every alert there (None: nowhere); the run ends with its summary line on stderr
            (`streaming.detector.webhook.webhook_sinks`, as ``checker`` and ``view`` do).
        alert_frames: write the frame of each announced or confirmed key-step under this folder, for the dashboard
            (`streaming.detector.alert_frames`; None: none).
        alert_frames_keep: files kept per stream there.
    """

    source: StreamSource
    detector: DetectorConfig = field(default_factory=DetectorConfig)
    checker: CheckerConfig = field(default_factory=lambda: CheckerConfig(FREE_LOOPBACK_PORT, FREE_LOOPBACK_PORT))
    jsonl: bool = False
    annotate_out: str | None = None
    preview: bool = False
    webhook: WebhookConfig | None = None
    alert_frames: str | None = None
    alert_frames_keep: int = DEFAULT_KEEP


def run_all(config: RunConfig, out: TextIO | None = None, console: Console | None = None,
            log: ServiceLog | None = None) -> int:
    """The default ``stream-detect`` command: checker process, detector thread, viewer, on loopback.

    Args:
        config: the run's settings.
        out: where ``--jsonl`` lines go (None: ``sys.stdout`` as it is at the call, not at import).
        console: rich console of the live view (a new stdout console if None).
        log: the run's warnings and notes (the command's is queued, `streaming.service_log.queued_log`: a stderr
            that takes nothing holds neither the detector's thread nor the view); None: written at each call.

    Returns:
        Exit status (0: the stream ended normally and the checker confirmed it).

    Raises:
        InputError: bad input, a checker that does not answer, or a stream that ended with an error.
        RunError: the checker process died, the view failed, or the end of the stream was never confirmed.
    """
    log = log or ServiceLog("stream-detect")
    drawn = config.annotate_out is not None or config.preview
    source = config.source  # the overlay is checked before the stream, and never over a file the run reads
    read = [p for p in (source.video, source.graph, source.detector, source.backbone) if p is not None]
    overlay = OverlayWriter(config.annotate_out, 1.0, config.preview, inputs=read) if drawn else None
    parts = load_parts(config.source, config.detector.threads, log.warning)
    assert parts.graph is not None
    check_measured_rates(parts.checkpoint, config.source.detector, config.checker.checking.kind,
                         config.detector.default_rates)
    # A bad video is refused before the checker starts.
    readers = open_videos([config.source], parts.checkpoint, log.warning)
    state = ViewState(names=graph_names(parts.graph))
    sinks: list[Callable[[str], Sink]] = []
    observers: list[Callable[[str], FrameObserver]] = []
    annotator = None
    if overlay is not None:
        # The frames are drawn with what a checker beside the detector answers, at the frame that caused it.
        overlay.fps = parts.checkpoint.fps
        link = CheckerLink(CheckerCore(parts.graph, checking=config.checker.checking), keep=False)
        annotator = FrameAnnotator(overlay, link, parts.checkpoint)
        seen = annotator.seen
        sinks.append(lambda _: link)
        observers.append(lambda _: seen)
    pipeline_config = PipelineConfig((config.source,), config.detector, alert_frames=config.alert_frames,
                                     alert_frames_keep=config.alert_frames_keep)
    ctx = zmq.Context()
    try:
        with (
            CheckerProcess(config.source.graph, config.checker) as checker,
            webhook_sinks(config.webhook, log) as webhooks,  # its summary line at the end
            Viewer(
                ctx, checker.alerts_endpoint, state, config.jsonl, out or sys.stdout, curve=config.detector.curve,
                sinks=webhooks, sink_log=log.warning,
            ) as viewer,
            build_pipeline(
                replace(pipeline_config, detector=replace(config.detector, connect=checker.events_endpoint)),
                parts=parts, readers=readers, sinks=sinks, observers=observers, ctx=ctx, warn=log.warning,
            ) as pipeline,
            overlay if overlay is not None else contextlib.nullcontext(),
        ):
            alive = checker_alive(checker)
            # The view's verdict on a recording too short for any step says so, not that the detector may be wrong:
            # its detector is in this process, the segmenter with it.
            stream = pipeline.streams[0]
            state.shortest_step = stream.segmenter.config.shortest_step(stream.checkpoint.class_step_ids)
            await_subscription(viewer, stream.events, alive=alive)
            thread = DetectorThread(pipeline)
            view_console = None if config.jsonl else (console or Console())
            try:
                with thread, progress_on_stderr(viewer.state, view_console is None or not view_console.is_terminal,
                                                config.jsonl) as tick:
                    done = shown_to_the_end(viewer, thread)
                    watch(viewer, lambda: tick() and alive() and done(), view_console,
                          stopped(viewer, thread, checker.process.is_alive))
            except KeyboardInterrupt:
                # A camera's session only ends this way, and the docs treat the stop as its end: the annotated video
                # keeps what was shown. A detector still running after its join could still write: discarded then.
                if annotator is not None and not thread.is_alive():
                    annotator.finish()
                    annotator.overlay.stopped()
                elif annotator is not None and annotator.overlay.path is not None:
                    log(f"stream-detect: discarded the annotated video {annotator.overlay.path}: the detector was "
                        "still drawing on it when the run stopped")
                raise
            stats = thread.result()
            if annotator is not None:
                annotator.finish()
    except KeyboardInterrupt:
        if overlay is not None and overlay.kept:  # said before the interrupt's own line, which ends the output
            log(f"stream-detect: kept the annotated video {overlay.path}: the {overlay.frames} frames shown before "
                "the stop")
        raise
    finally:
        for reader in readers:
            reader.close()
        ctx.destroy(linger=0)
    if stats is not None and stats.error:
        raise InputError(stats.error)
    return 0


@contextlib.contextmanager
def progress_on_stderr(state: ViewState, redirected: bool, jsonl: bool) -> Iterator[Callable[[], bool]]:
    """While the view is not drawn on a terminal (``--jsonl``, or standard output sent to a file), a status line on
    standard error when that is a terminal: frames read and alerts so far. The run showed nothing there until it
    ended (a long video looked hung), while every other command draws its progress on standard error.

    Yields:
        A tick to call from the view's loop (returns True, so it can lead a predicate); it redraws at most every
        `PROGRESS_EVERY_S`.
    """
    # A terminal for real, not one rich is told of (TTY_COMPATIBLE, for a log that keeps progress bars): the line is
    # for a person watching, and only a terminal erases it.
    if not redirected or not stderr_is_a_terminal():
        yield lambda: True
        return
    stderr = Console(stderr=True)
    where = "JSON lines go" if jsonl else "the view goes"
    next_at = [0.0]
    # Standard output is left alone: rich's default would route it through this console, onto the terminal. Drawn
    # only by `tick`, from the view's loop: a refresh thread could draw it again after a stop's last line.
    with Live(Text(f"stream-detect: starting; {where} to standard output"), console=stderr, transient=True,
              redirect_stdout=False, auto_refresh=False) as live:

        def tick() -> bool:
            now = time.monotonic()
            if now >= next_at[0]:
                next_at[0] = now + PROGRESS_EVERY_S
                frames = sum(row.frames for row in state.streams.values())
                alerts = sum(row.alerts for row in state.streams.values())
                live.update(Text(f"stream-detect: {count_of(frames, 'frame')} read, {count_of(alerts, 'alert')} so "
                                 f"far; {where} to standard output"), refresh=True)
            return True

        yield tick


def stderr_is_a_terminal() -> bool:
    """Whether standard error is a terminal: False when it is closed (``2>&-``: ``sys.stderr`` is None) or broken."""
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (OSError, ValueError):  # ValueError: a stream closed by the caller
        return False


def checker_alive(checker: CheckerProcess) -> Callable[[], bool]:
    """A check to call in every wait on the checker: true while its process lives.

    Args:
        checker: the checker child process.

    Returns:
        A predicate that returns True, or raises `RunError` naming the exit status once the process has ended.
    """

    def alive() -> bool:
        if checker.process.is_alive():
            return True
        raise RunError(f"the checker process ended unexpectedly (exit status {checker.process.exitcode}); "
                       "alerts from then on are missing")

    return alive


def watch(
    viewer: Viewer,
    done: Callable[[], bool],
    console: Console | None,
    wind_down: Callable[[], Callable[[], bool]] | None = None,
) -> None:
    """Run the view until ``done()``; a view that fails ends the run as a `RunError`, never as a frozen screen.

    Args:
        viewer: the view of the checker's output.
        done: when to stop (it may raise `RunError` itself: a dead checker).
        console: the live view's console; None for JSON lines.
        wind_down: what the view waits for after Ctrl-C or SIGTERM (`Viewer.loop`, `stopped`).

    Raises:
        RunError: the view failed (its error, in one line), or ``done`` raised it.
    """
    try:
        viewer.loop(done, console, wind_down)
    except (RunError, InputError, BrokenPipeError):  # a reader gone (| head): the command ends quietly
        raise
    except Exception as err:  # whatever broke the view, the run must say it failed rather than exit 0 or hang
        if output_full(err):  # said by the command's own line: "cannot write the output: No space left on device"
            raise
        if console is not None and isinstance(err, OSError) and err.errno == errno.EIO:
            # The terminal closed (a window, an ssh session): its SIGHUP may not have come yet. The run stops as
            # that SIGHUP stops it, annotated video kept and exit status 129, not as a failure of the view.
            raise stop_for(signal.SIGHUP) from None
        raise RunError(f"the live view failed ({type(err).__name__}: {err})") from err


def await_subscription(
    viewer: Viewer,
    events: EventPublisher,
    timeout_s: float = CHECKER_START_TIMEOUT_S,
    alive: Callable[[], bool] = lambda: True,
) -> None:
    """Send heartbeats until the viewer hears the checker's status for this stream.

    PUB/SUB connections are made asynchronously (the ZeroMQ "slow joiner"): without this the first
    messages of a fast file run could leave before both hops are connected.

    Args:
        viewer: subscribed to the checker's output.
        events: publishes to the checker's input.
        timeout_s: longest wait.
        alive: checked at every try; it raises (`checker_alive`) once the checker is gone.

    Raises:
        InputError: no status came back within ``timeout_s``, naming the checker's output endpoint.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        events.heartbeat(None, 0, 0, 0.0)
        for message in viewer.pump(50):
            if isinstance(message, Status) and message.stream_id == events.stream_id:
                return
    endpoint = viewer.receiver.sock.getsockopt_string(zmq.LAST_ENDPOINT)
    raise InputError(f"the checker at {endpoint} does not answer within {timeout_s:g} s")


class DetectorThread:
    """A one-stream pipeline run in a thread; what it returned or raised comes back to the thread that asks (`result`).

    On leaving the ``with`` block the detector is asked to stop (its last heartbeat still goes out) and the
    thread is joined for at most `JOIN_TIMEOUT_S`: a Ctrl-C in the viewer stops the detector too. Left on an error
    (the view failed, the checker died), the detector's run fails instead: its session ends cut short, not stopped.

    Args:
        pipeline: a built pipeline of one stream, not started.
    """

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.stream_id = pipeline.streams[0].stream_id
        self.stop = threading.Event()
        self._outcome: list[DetectorStats | BaseException] = []
        # Not a daemon: one still in torch (the warm-up) when the interpreter finalises aborts the process
        # (`streaming.detector.loop.READER_JOIN_S`); told to stop, it ends after that pass.
        self._thread = threading.Thread(target=self._work, name="detector", daemon=False)

    def _work(self) -> None:
        try:
            self._outcome.append(self.pipeline.run(self.stop)[0])
        except BaseException as err:  # handed to the main thread by `result`, never lost in this one
            self._outcome.append(err)

    def is_alive(self) -> bool:
        """Whether the detector is still running."""
        return self._thread.is_alive()

    def result(self) -> DetectorStats | None:
        """The run's statistics (None if it has not finished); re-raises what the detector raised."""
        outcome = self._outcome[0] if self._outcome else None
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def __enter__(self) -> DetectorThread:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if isinstance(error, Exception) and not isinstance(error, BrokenPipeError):
            # The view failed or the checker died (a reader gone, `| head`, is the user's stop): the session is cut
            # short as by a failure of the detector, never ended as one the person stopped. A reason of its own, not
            # ``error``: raised in the detector's thread too, that would rewrite the traceback the command may print.
            self.pipeline.loop.fail(RunError(f"cut short: {type(error).__name__} beside the detector"))
        self.stop.set()
        self._thread.join(JOIN_TIMEOUT_S)


def stopped(
    viewer: Viewer, thread: DetectorThread, checker_running: Callable[[], bool]
) -> Callable[[], Callable[[], bool]]:
    """The wind-down of a run stopped by Ctrl-C or SIGTERM (`Viewer.loop`): the detector is told to stop, which
    ends its session with a last heartbeat, and the view waits for the checker's end report of the stream (the
    steps never done, the verdict), at most `STOP_REPORT_S`, and not once the checker is gone (killed, or out of
    memory: no report will come). A SIGTERM sent to the whole process group, as ``timeout`` and systemd do, reaches
    the checker child too, which serves on for `streaming.checker.process.TERM_GRACE_S`, longer than this wait.

    Args:
        viewer: the view of the checker's output.
        thread: the detector publishing the stream.
        checker_running: whether the checker process still runs.

    Returns:
        Called on the interrupt: stops the detector and returns the predicate that ends the wait.
    """

    def wind_down() -> Callable[[], bool]:
        thread.stop.set()
        deadline = time.monotonic() + STOP_REPORT_S

        def over() -> bool:
            row = viewer.state.streams.get(thread.stream_id)
            reported = not thread.is_alive() and row is not None and row.ended
            return reported or not checker_running() or time.monotonic() > deadline

        return over

    return wind_down


def shown_to_the_end(viewer: Viewer, thread: DetectorThread) -> Callable[[], bool]:
    """When the view of a detector's stream may close.

    Args:
        viewer: the view of the checker's output.
        thread: the detector publishing the stream.

    Returns:
        A predicate: true once the detector has finished and the checker reported the stream ended (or, when its
        source failed, which ends no session, reported the frame count of its last heartbeat sent). If that report has
        not come `END_TIMEOUT_S` after the detector finished, it raises `RunError`: the checker's last alerts may be
        missing, and the run must not end as a success. What the detector raised is raised here.
    """
    stream_id = thread.stream_id
    finished_at: list[float] = []

    def done() -> bool:
        if thread.is_alive():
            return False
        row = viewer.state.streams.get(stream_id)
        stats = thread.result()
        # A failed source's stream is done once the checker reports the frames its last heartbeat counted: one that
        # went quiet before the failure (a camera retried in vain) sends no last heartbeat, so never its later frames.
        failed_heard = stats is not None and bool(stats.error) and row is not None and row.frames >= stats.reported
        if row is not None and (row.ended or failed_heard):
            return True
        if not finished_at:
            finished_at.append(time.monotonic())
        if time.monotonic() - finished_at[0] > END_TIMEOUT_S:
            raise RunError(f"the checker did not confirm the end of stream {stream_id} within {END_TIMEOUT_S:g} s; "
                           "its last alerts may be missing")
        return False

    return done
