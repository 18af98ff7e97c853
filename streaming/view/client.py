"""The view's client loop: subscribe to a checker's output, fold it into a `ViewState`, draw it or print JSON lines.

`streaming.view.state` holds the state and `streaming.view.render` the pure drawing function; this module owns the
socket and decides when to redraw (rich Live, `REFRESH_HZ` times a second, from this loop only: rich's own refresh
thread is off, so a drawing error surfaces here instead of silently freezing the screen). `run_view` is the
``stream-detect view`` command; the all-in-one run (`streaming.all_in_one`) shows its stream with the same `Viewer`.

The view itself is a sink (`View`, one ``send(message)``, `streaming.detector.sinks.Sink`) of the checker's output:
the `Viewer` hands each message it receives to its sinks, the view first, then the others (``--webhook``), and a
checker in the same process can be handed a `View` directly (`streaming.checker.service.CheckerService` ``sinks``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TextIO

import zmq
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from graphs.common.interrupts import stop_for
from graphs.common.safe_text import printable
from graphs.task_graph import load_graph
from streaming.curve_keys import CurveClient
from streaming.detector.sinks import Fanout, JsonLinesSink, Sink
from streaming.messages import Alert, Message, MissingSteps, Retraction, Status, StepEvent
from streaming.service_log import ServiceLog
from streaming.transport import POLL_MS, VIEW_RECV_HWM, Receiver, connect_watched, gone_silent, subscribe
from streaming.view.render import NewsMessage, name_conflict_text, news_line, render, silent_text
from streaming.view.state import ViewState, graph_names

REFRESH_HZ = 8  # terminal view refreshes per second
# The next redraw waits at least this many times as long as the last one worked (its CPU time): drawing takes at
# most a quarter of a core however many rows the view holds. At 8 a second, redrawing 256 streams took 70 % of a
# core and rising with every row (benchmarks/churn_soak.py), while messages waited behind each drawing.
DRAW_GAP = 3.0
PLAIN_WIDTH = 400  # the widest a final view printed to a file or pipe may be (tables as wide as their contents)


def on_a_tty(console: Console) -> bool:
    """Whether a console's file is a terminal now. Asked of the file itself, not of rich's ``is_terminal``, which
    ``FORCE_COLOR`` or ``TTY_COMPATIBLE`` hold true whatever it is; a file with no descriptor (a string buffer) is
    none."""
    try:
        return os.isatty(console.file.fileno())
    except (OSError, ValueError, AttributeError):
        return False


def live_frame(view: Group) -> Group:
    """A frame of the live view as drawn while it runs: the view, then an empty line.

    The cursor stays where a frame ends. At the end of a table's border as wide as the terminal, the ``^C`` a terminal
    echoes there went on a line of its own, and the next frame, drawn from as many lines up as the last one had, began
    a line lower: the view's title stood twice above its last frame. On the empty line the echo (or a key typed) is
    erased with the frame.
    """
    return Group(view, Text(""))


class View:
    """The view as a sink of the checker's output: each message folded into a `ViewState` and, with ``jsonl``,
    printed as one JSON line when it is new (``step``, ``alert`` and ``missing`` messages once each, and a stream's
    ``status`` when what it says about the procedure changes).

    Args:
        state: the view state (holds step names from the graph).
        jsonl: print JSON lines to ``out``.
        out: where JSON lines go (None: ``sys.stdout`` as it is at each call).
    """

    def __init__(self, state: ViewState, jsonl: bool = False, out: TextIO | None = None) -> None:
        self.state = state
        kinds = [kind.KIND for kind in (StepEvent, Alert, Retraction, MissingSteps, Status)]
        self.lines = JsonLinesSink(out, kinds) if jsonl else None
        # The new key-steps, alerts, retractions and reports with their arrival, kept only for a terminal that cannot
        # redraw (`Viewer.loop` sets it and prints each as a line).
        self.news: deque[tuple[float, NewsMessage]] | None = None

    def send(self, message: Message, received_at: float | None = None) -> None:
        """Fold one message into the state (``received_at``: its wall time of arrival, now if None)."""
        when = time.time() if received_at is None else received_at
        news = message if isinstance(message, StepEvent | Alert | Retraction | MissingSteps) else None
        # An alert already told is news again only once retracted (reopened): its updates (the step's whole span, a
        # firmer probability) would read as a second mistake, and the last frame shows them.
        if isinstance(news, Alert) and self.state.shows(news):
            news = None
        new = self.state.apply(message, when)
        if self.lines is not None and new:
            self.lines.send(message)
        if self.news is not None and news is not None and new:
            self.news.append((when, news))


class Viewer:
    """Subscribes to a checker's output and shows it (rich Live) or prints JSON lines (its `View`).

    Use it as a context manager, or call `close`.

    Args:
        ctx: ZeroMQ context.
        endpoint: the checker's alerts endpoint.
        state: the view state (holds step names from the graph).
        jsonl: print JSON lines to ``out`` instead of drawing: ``step``, ``alert`` and ``missing`` messages once
            each, and a stream's ``status`` when what it says about the procedure changes.
        out: where JSON lines go.
        warn: called once, with the reason, when the first malformed message is dropped (JSON lines have
            no screen to count them on: a checker speaking another wire version would otherwise look idle).
        curve: this viewer's CURVE keys and the checker's public key; None: no CURVE.
        sinks: also handed every message received, after the view (`streaming.detector.sinks.Sink`: the webhook);
            one that raises is counted and logged (`streaming.detector.sinks.Fanout`), and the view goes on.
        sink_log: where that failure's line goes: a service's log (its format, its writer thread); None: a
            ``warning:`` line written on stderr at once, from the view's loop.

    Raises:
        InputError: from `pump`, once the checker refuses the viewer's handshake (its key is not allowed, the wrong
            checker key, CURVE on one side only): a refused viewer would otherwise wait forever on an empty screen.
    """

    def __init__(
        self,
        ctx: zmq.Context,
        endpoint: str,
        state: ViewState,
        jsonl: bool,
        out: TextIO = sys.stdout,
        warn: Callable[[str], None] | None = None,
        curve: CurveClient | None = None,
        sinks: Sequence[Sink] = (),
        sink_log: Callable[[str], None] | None = None,
    ) -> None:
        sock, self.handshakes = connect_watched(ctx, zmq.SUB, endpoint, "--connect", VIEW_RECV_HWM, curve)
        self.receiver = Receiver(subscribe(sock))
        self.endpoint = endpoint
        self.view = View(state, jsonl, out)
        self.state = state
        self.jsonl = jsonl
        self.warn = warn
        # After the view; one that raises is counted and logged, the view goes on. Logged through the service's log:
        # written on stderr from this loop, a stderr that takes nothing froze the view at a sink's first failure.
        self.sinks = Fanout(sinks, log=sink_log)
        self._pending: deque[Message] = deque()  # taken off the socket, not yet handed on (`pump`)
        state.endpoint, state.listening_since = endpoint, time.time()
        state.now = state.listening_since
        self._said_silent = False  # the warning that the checker is silent went out, and not yet that it is back
        self._said_names: set[int] = set()  # steps whose name conflict was warned of
        self.changed = True  # something to draw since the last drawing (`loop`)
        self.winding_down = False  # stopping: an interrupt came, the wind-down runs (`_pump_until`)

    def pump(self, timeout_ms: int = POLL_MS) -> list[Message]:
        """Take what arrived (waiting up to ``timeout_ms``) and hand each message to the sinks, the view first.

        An interrupt (Ctrl-C, SIGTERM) raised while a batch is handed on leaves the rest of it queued, and the next
        pump (the wind-down's: `loop`) hands it on before it takes more: taken off the socket, it would otherwise be
        lost. Returns the messages this call handed on.
        """
        self.handshakes.check()
        if not self._pending:
            self._pending.extend(self.receiver.poll(timeout_ms))
        messages: list[Message] = []
        now = time.time()
        while self._pending:
            message = self._pending.popleft()  # first: the one an interrupt cuts short is not handed on twice
            messages.append(message)
            self.view.send(message, now)
            self.sinks.send(message)
        self.state.now = now
        forgotten = self.state.forget_gone()
        self.changed = self.changed or bool(messages) or bool(forgotten)
        self._say_link()
        stats = self.receiver.stats
        if stats.malformed and not self.state.malformed and self.warn is not None:
            self.warn(printable(f"view: dropping malformed messages from {self.endpoint} (first: {stats.last_error})"))
        self.state.malformed = stats.malformed
        return messages

    def _say_link(self) -> None:
        """Warn (JSON lines have no screen) once when the checker falls silent and once when it speaks again, and
        once per step whose name the checker gives otherwise than the view's --graph."""
        if self.warn is None:
            return
        state = self.state
        if state.silent() and not self._said_silent:
            self._said_silent = True
            self.warn(printable(f"view: {silent_text(state)}; waiting for it"))
        elif self._said_silent and not state.silent():
            self._said_silent = False
            self.warn(printable(f"view: the checker at {self.endpoint} answers again"))
        for step, (mine, theirs) in state.name_conflicts.items():
            if step not in self._said_names:
                self._said_names.add(step)
                self.warn(printable(name_conflict_text(step, mine, theirs)))

    def loop(
        self,
        done: Callable[[], bool],
        console: Console | None = None,
        wind_down: Callable[[], Callable[[], bool]] | None = None,
    ) -> None:
        """Pump until ``done()``; with a console, redraw the live view `REFRESH_HZ` times a second.

        A console that is not a terminal (stdout sent to a file or a pipe) gets the final view once, at the end (also
        on Ctrl-C), its tables as wide as their contents so that no name is cut.

        Args:
            done: when to stop.
            console: the live view's console; None for JSON lines.
            wind_down: on Ctrl-C or SIGTERM, called once; the view goes on (drawing, printing JSON lines) until the
                predicate it returns holds, then the interrupt goes on. A live camera's session ends only this way,
                and its end report (the steps never done, the verdict) comes after the stop: without a wind-down the
                view closed before it arrived. A second interrupt more than `graphs.common.interrupts.REPEAT_S`
                after the first ends the wind-down at once (one sooner is the same request sent twice); a failure
                during the wind-down (a pipe whose reader the same Ctrl-C stopped) leaves the interrupt as it was.
        """
        if self.jsonl or console is None:
            self._pump_until(done, lambda: None, wind_down, POLL_MS)
            return
        if console.is_dumb_terminal:
            self._tell_news_until(done, console, wind_down)
            return
        if not console.is_terminal:
            try:
                self._pump_until(done, lambda: None, wind_down, POLL_MS)
            finally:
                narrow = console.width
                console.width = max(narrow, PLAIN_WIDTH)  # only a cap: fitted tables are as wide as they need
                try:
                    console.print(render(self.state, fit=True, closing=True))
                finally:
                    console.width = narrow
            return
        on_tty = on_a_tty(console)  # a terminal that stops being one has closed (not a pipe FORCE_COLOR draws into)
        # The terminal's height read at each drawing, as its width is (rich's console size): a resize shows at the
        # next one.
        with Live(live_frame(render(self.state, height=console.height)), console=console, auto_refresh=False,
                  transient=False) as live:
            next_draw = [0.0]

            drawn_second = [0]

            def draw() -> None:
                if time.monotonic() < next_draw[0]:
                    return
                if on_tty and not on_a_tty(console):
                    # The terminal closed (a window, an ssh session): rich then draws nothing, without a word, and a
                    # view with no controlling terminal is never sent the SIGHUP that would stop it. It stops as
                    # that SIGHUP does; once stopping, the wind-down goes on undrawn (a second stop would cut it
                    # short, and with it the annotated video the run keeps).
                    if self.winding_down:
                        return
                    raise stop_for(signal.SIGHUP)
                # An idle view redraws once a second (its stale marks go by the second), not REFRESH_HZ times.
                second = int(self.state.now)
                if self.changed or second != drawn_second[0]:
                    # The drawing's own work (this thread's CPU time), not its wall time: a terminal that held the
                    # output (Ctrl-S, a stopped ssh window) or a suspended job made one drawing as long as the hold,
                    # and nothing, new alerts included, was drawn for three times as long again.
                    began = time.thread_time()
                    live.update(live_frame(render(self.state, height=console.height)), refresh=True)
                    self.changed, drawn_second[0] = False, second
                    work = time.thread_time() - began
                    next_draw[0] = time.monotonic() + max(1.0 / REFRESH_HZ, DRAW_GAP * work)

            try:
                self._pump_until(done, draw, wind_down, int(1000 / REFRESH_HZ))
            finally:  # also on Ctrl-C: Live prints its last frame whole as it stops, and the closing order ends
                # it with the outcome; without the empty line, which Live's own line after it would double
                live.update(render(self.state, closing=True), refresh=True)

    def _tell_news_until(
        self, done: Callable[[], bool], console: Console, wind_down: Callable[[], Callable[[], bool]] | None
    ) -> None:
        """`loop` on a terminal that cannot move its cursor (``TERM=dumb``: an editor's shell, a serial console),
        where rich's live view draws nothing until it stops: each key-step, alert, retraction and end of session as
        a line when it comes, then the last frame whole."""
        news: deque[tuple[float, NewsMessage]] = deque()
        self.view.news = news

        def tell(final: bool = False) -> None:
            while news:
                if not final and not self._told_whole(*news[0]):
                    return  # the lines after it wait too: they are told in the order they came
                console.print(news_line(*news.popleft(), self.state), overflow="fold")

        try:
            self._pump_until(done, tell, wind_down, POLL_MS)
        finally:
            tell(final=True)
            console.print(render(self.state, closing=True))

    def _told_whole(self, when: float, message: NewsMessage) -> bool:
        """Whether the line of ``message`` (received at ``when``) can be told now. An end report's says whether its
        session ended or was stopped, which only the run's status tells, and the checker sends it after the report:
        when the two came in different reads, the line said "never done" of a session the person cut short. So a
        report waits for its run's status to end it (or for a status of a later run, or the stream's row to go), at
        most `SILENT_S`: the checker sends the status right after the report."""
        if not isinstance(message, MissingSteps):
            return True
        row = self.state.streams.get(message.stream_id)
        return (row is not None and (row.run != message.run or row.ended)
                or gone_silent(when, self.state.now))

    def _pump_until(
        self,
        done: Callable[[], bool],
        draw: Callable[[], None],
        wind_down: Callable[[], Callable[[], bool]] | None,
        timeout_ms: int,
    ) -> None:
        """Pump and draw until ``done()``; on an interrupt, through the wind-down first (`loop`)."""
        try:
            while not done():
                self.pump(timeout_ms)
                draw()
        except KeyboardInterrupt as stop:
            if wind_down is None:
                raise
            # The streams this view runs end because the person stopped them, unless every one had ended already.
            self.state.stopped = any(not row.ended for row in self.state.streams.values())
            state = self.state
            state.ended_before_stop = frozenset(
                [(sid, row.run) for sid, row in state.streams.items() if row.ended]
                + [(sid, row.run) for sid, (_, row) in state.ended.items()]
                + [(report.stream_id, report.run) for _, report in state.missing])  # sent as its session ended
            self.winding_down = True
            try:
                over = wind_down()
                while not over():
                    self.pump(timeout_ms)
                    draw()
            except Exception:  # best effort: a reader gone with the same Ctrl-C must not take the interrupt's place
                raise stop from None
            raise

    def close(self) -> None:
        """Close the socket."""
        self.handshakes.close()
        self.receiver.sock.close()

    def __enter__(self) -> Viewer:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def run_view(
    endpoint: str,
    graph_path: str | None,
    jsonl: bool,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    done: Callable[[], bool] = lambda: False,
    curve: CurveClient | None = None,
    log: Callable[..., None] | None = None,
    sinks: Sequence[Sink] = (),
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
        curve: this viewer's CURVE keys and the checker's public key (``--curve-server``, ``--curve-secret``).
        log: writes the malformed-message notes as warnings (``--log-format``, a `streaming.service_log.ServiceLog`);
            None: plain lines on ``err``.
        sinks: also handed every message received (``--webhook``).

    Returns:
        Exit status.
    """
    names = graph_names(load_graph(graph_path)) if graph_path else {}
    ctx = zmq.Context()

    def warn(line: str) -> None:
        if isinstance(log, ServiceLog):  # "warning: view: ..." as the dashboard's and the checker's warnings read
            log.warning(line)
        elif log is not None:
            log(line, "warning")
        else:
            print(line, file=err, flush=True)

    console = None if jsonl else Console()
    # No screen that redraws (JSON lines, a terminal that cannot move its cursor): a silent checker is said in a line.
    said = jsonl or (console is not None and console.is_dumb_terminal)
    def sink_failed(line: str) -> None:
        # A warning line, as the sink's failure was before the log took it (and is in the one-command run's view):
        # the text format's "warning: " prefix, level warning in JSON.
        if isinstance(log, ServiceLog):
            log.warning(f"view: {line}")
        else:
            warn(f"warning: view: {line}")

    viewer = Viewer(ctx, endpoint, ViewState(names=names), jsonl, out, warn=warn if said else None, curve=curve,
                    sinks=sinks, sink_log=sink_failed)
    try:
        viewer.loop(done, console)
    finally:
        stats = viewer.receiver.stats
        if stats.malformed:
            warn(printable(f"view: {stats.malformed} malformed messages dropped (last: {stats.last_error})"))
        viewer.close()
        ctx.destroy(linger=0)
    return 0
