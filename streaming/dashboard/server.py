"""The dashboard's web server (aiohttp): the page, its WebSocket push channel, the task graph and alert pictures.

One event loop serves every page. `Hub` holds the `DashboardState` and the open pages: a new alert, retraction,
acknowledgement or ended session is pushed to every page at once; changed tiles every `TILE_PUSH_S`; the checker's link
state every `STATUS_PUSH_S`, and before the tiles when the checker was lost or is back. Each page has its own bounded
send queue (`PageQueue`): a page that reads too slowly loses its queued updates and gets one fresh snapshot instead
(memory stays bounded), and a page whose socket accepts nothing for `SEND_TIMEOUT_S` is closed (its script reconnects).
Sending to one page never waits for another.

The log (stderr, the one thing a log collector sees) says when the checker stops answering and when it answers again,
one line each (`Hub.watch_link`), and each step whose name the checker gives otherwise than ``--graph``, once.

Routes (every one behind `streaming.dashboard.access.Gate`: the token when one is set, the Host check without):
``/`` the page, ``/static/app.js`` and ``/static/style.css``, ``/ws`` the push channel (the page sends
``{"type": "ack", "id": N}`` back), ``/graph.svg`` the task graph, ``/frames/N`` alert N's picture, ``/api/state`` the
snapshot as JSON (for scripts).

aiohttp is the optional ``dashboard`` extra: it is imported where it is used, never when this module is imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from graphs.common.errors import InputError, print_stderr, require_extra
from graphs.common.interrupts import Interrupted
from graphs.common.options import is_decimal_digits
from graphs.common.safe_text import clock_text, printable
from streaming.curve_keys import CurveClient
from streaming.dashboard.access import COOKIE, BindAddress, Gate
from streaming.dashboard.feed import CheckerFeed, FeedStatus, Received
from streaming.dashboard.state import DashboardState
from streaming.frame_names import frame_name
from streaming.transport import gone_silent

TILE_PUSH_S: Final = 0.5  # changed tiles go out at most this often (the checker re-sends every status every 0.5 s)
STATUS_PUSH_S: Final = 1.0  # the checker link's state and counts
PAGE_QUEUE: Final = 512  # messages waiting for one page; beyond, its queue is dropped for one snapshot
SEND_TIMEOUT_S: Final = 10.0  # a page whose socket takes nothing for this long is closed
MAX_PAGES: Final = 200  # open WebSockets; more are refused (503)
# A connection that has not sent a whole request this long after it opened (or after its last answer) is closed:
# aiohttp's keep-alive timer, which runs from the connection's start, so a request trickled a header at a time is
# bounded too. A page's WebSocket, once open, is not concerned (its own bound: SEND_TIMEOUT_S).
REQUEST_TIMEOUT_S: Final = 15.0
CLOSE_TIMEOUT_S: Final = 2.0  # how long closing waits for a page's answer (a frozen page never answers)
WS_MAX_MESSAGE: Final = 4096  # bytes a page may send in one WebSocket message (an acknowledgement is ~30)
MAX_FRAME_BYTES: Final = 16 * 1024 * 1024  # an alert picture larger than this is not served
# The page's icon too: without one every browser asked for /favicon.ico, a 404 in the console on each visit.
STATIC_FILES: Final = {"app.js": "text/javascript", "style.css": "text/css", "favicon.svg": "image/svg+xml"}
SECURITY_HEADERS: Final = {
    # Nothing from elsewhere, no inline script or style, no framing by another site.
    "Content-Security-Policy": "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; "
                               "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
                               "form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}  # fmt: skip
UNAUTHORIZED: Final = "401: unauthorized\n"
REQUEST_LOG_GAP_S: Final = 10.0  # after the first, at most one line this often about requests aiohttp refused


class RequestErrors(logging.Handler):
    """aiohttp's log of requests it could not handle, as one counted line at most every `REQUEST_LOG_GAP_S`.

    aiohttp answers a malformed request (a header line over its limit, too many headers, a bad chunk) with 400 and
    logs it with a traceback: anyone who reaches the port could fill the log, and under ``--log-format json`` those
    lines are not JSON. Here each becomes at most one line, naming the peer and the reason, and those in between
    are counted in the next.

    Args:
        log: where a line goes (None: a ``warning:`` line on stderr).
        monotonic: the clock (tests step it).
    """

    def __init__(self, log: Callable[[str], None] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        super().__init__(logging.DEBUG)
        self._log = log or (lambda line: print_stderr(f"warning: {line}"))
        self._monotonic = monotonic
        self._unsaid = 0
        self._next_line = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        """Count the record; say it when the last line is old enough."""
        if record.levelno < logging.WARNING:  # aiohttp's debug lines (non-HTTP traffic at a first request)
            return
        self._unsaid += 1
        now = self._monotonic()
        if now < self._next_line:
            return
        error = record.exc_info[1] if record.exc_info else None
        reason = f"{type(error).__name__}: {error}" if error is not None else record.getMessage()
        reason = printable(" ".join(reason.split()))  # one line: aiohttp's reasons span lines and quote the peer
        since = f" ({self._unsaid} since the last line)" if self._unsaid > 1 else ""
        what = (f"a request from {record.args[0]} could not be handled" if isinstance(record.args, tuple)
                and record.args else f"the web server: {record.msg}")
        self._log(f"dashboard: {what}{since}: {reason[:200]}")
        self._unsaid, self._next_line = 0, now + REQUEST_LOG_GAP_S


# The errors asyncio reports when a listening socket's accept() finds the process out of a resource (file handles
# above all), once per attempt: the only loop errors rate-limited, the rest are defects and keep their traceback.
OUT_OF_RESOURCES: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def out_of_resources(context: dict[str, Any]) -> bool:
    """Whether an event-loop error is the process running out of file handles or memory (`OUT_OF_RESOURCES`)."""
    error = context.get("exception")
    return isinstance(error, OSError) and error.errno in OUT_OF_RESOURCES


def loop_error_record(context: dict[str, Any]) -> logging.LogRecord:
    """An error the event loop reports (its exception handler's ``context``) as a record for `RequestErrors`.

    When file handles run out (idle connections held open by a client), asyncio reports ``socket.accept() out of
    system resource`` with a traceback for every attempt, about 500 lines a second: 170 MB of log a minute."""
    error = context.get("exception")
    exc_info = (type(error), error, error.__traceback__) if isinstance(error, BaseException) else None
    return logging.makeLogRecord({"msg": str(context.get("message", "error")), "levelno": logging.ERROR,
                                  "levelname": "ERROR", "exc_info": exc_info})


def request_logger(handler: RequestErrors) -> logging.Logger:
    """A logger of its own for aiohttp's request errors, sending them to ``handler`` alone (not the root logger's
    handlers; made outside the logging registry, so each server's goes with it)."""
    logger = logging.Logger(f"{__name__}.requests", logging.DEBUG)
    logger.addHandler(handler)
    logger.propagate = False
    return logger


def require_aiohttp() -> None:
    """Refuse, in one line naming the extra to install, when aiohttp is missing.

    Raises:
        InputError: the ``dashboard`` extra is not installed.
    """
    require_extra("aiohttp", "dashboard", "stream-detect dashboard")


@dataclass(frozen=True)
class DashboardConfig:
    """Everything the dashboard serves from.

    Attributes:
        checker: the checker's ``--publish`` endpoint.
        address: where the web server listens.
        token: the access token (None: loopback only, no token).
        names: step id -> name, from the task graph (empty: learned from the messages).
        svg: the task graph drawn (`streaming.dashboard.graph_svg`), or None.
        steps: the graph's steps and pre-conditions as text (the page's list when there is no drawing).
        alert_frames: folder of the detector's alert pictures (``--alert-frames``), or None.
        curve: this dashboard's CURVE keys and the checker's public key, or None.
        graph_source: where ``names`` came from, as the log names it (``--graph tea.json``; empty: none).
        checker_option: the option ``checker`` was given by, named in errors (``--connect``, or its old name).
        request_timeout_s: `REQUEST_TIMEOUT_S`.
    """

    checker: str
    address: BindAddress
    token: str | None = None
    names: dict[int, str] = field(default_factory=dict)
    svg: str | None = None
    steps: tuple[dict[str, Any], ...] = ()
    alert_frames: Path | None = None
    curve: CurveClient | None = None
    graph_source: str = ""
    checker_option: str = "--connect"
    request_timeout_s: float = REQUEST_TIMEOUT_S


class PageQueue:
    """What is waiting to be sent to one page: bounded; on overflow, dropped for one fresh snapshot.

    Args:
        limit: messages kept before the queue is dropped.
    """

    def __init__(self, limit: int = PAGE_QUEUE) -> None:
        self.limit = limit
        self.items: deque[str] = deque()
        self.resync = True  # a new page starts with a snapshot
        self.wake = asyncio.Event()
        self.wake.set()
        self.skipped = 0  # times this page fell behind

    def offer(self, text: str) -> None:
        """Queue one message (already JSON text, shared by every page)."""
        if len(self.items) >= self.limit:
            self.items.clear()
            self.resync = True
            self.skipped += 1
        elif not self.resync:
            self.items.append(text)
        self.wake.set()


class Hub:
    """The state and the open pages; every method runs on the event loop.

    Args:
        config: the dashboard's settings.
        clock: wall clock.
        warn: writes one ``warning:`` line (None: on stderr).
        say: writes one plain log line (None: on stderr).
    """

    def __init__(self, config: DashboardConfig, clock: Callable[[], float] = time.time,
                 warn: Callable[[str], None] | None = None, say: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.clock = clock
        self.warn = warn or (lambda line: print_stderr(f"warning: {line}"))
        self.say = say or print_stderr
        self.state = DashboardState(names=dict(config.names), frames=config.alert_frames is not None)
        self.pages: set[PageQueue] = set()
        self.feed: CheckerFeed | None = None
        self.dropped_pages = 0  # pages closed because they stopped reading
        self.skipped = 0  # times a page fell behind and was sent a snapshot instead of its queue
        self.listening_since: float | None = None  # when the feed started (None: not yet)
        self._said_silent = False  # the checker-silent warning went out, and not yet that it answers again
        self._link_sent: bool | None = None  # whether the link pages were last sent said the checker is connected

    def take(self, messages: Received) -> None:
        """Fold a batch from the checker (each message with its arrival time) in and push what every page must
        know now."""
        for message, received in messages:
            for event in self.state.apply(message, received):
                if event["type"] == "name_conflict":
                    self.warn(self._conflict_line(event))
                self.broadcast(event)
        if self.feed is not None:
            self.feed.taken(len(messages))

    def _conflict_line(self, event: dict[str, Any]) -> str:
        graph = self.config.graph_source or "the --graph"
        return printable(f"dashboard: {graph} names step {event['step']} {event['graph_name']!r}, the checker "
                         f"calls it {event['checker_name']!r}: is this the checker's graph? (the checker's names are "
                         "shown, a step it has not named yet by its number, and the graph is not marked)")

    def feed_status(self) -> FeedStatus:
        """The link to the checker now (a feed never started: not connected, nothing heard)."""
        if self.feed is not None:
            return self.feed.status()
        return FeedStatus(self.config.checker, False, None, 0, "", None)

    def watch_link(self) -> None:
        """Say in the log, once, that the checker stopped answering (or never answered within `SILENT_S` of the
        start), and once that it answers again: the page shows the link, a log collector sees only this."""
        status = self.feed_status()
        now = self.clock()
        if status.connected:
            if self._said_silent:
                self._said_silent = False
                self.say(printable(f"dashboard: the checker at {status.endpoint} answers again"))
            return
        started = self.listening_since
        if self._said_silent or (status.last_heard is None and (started is None or not gone_silent(started, now))):
            return
        self._said_silent = True
        if status.last_heard is None:
            why = "nothing heard from it yet: is it running, and is this its --publish endpoint?"
        else:
            why = f"last heard {clock_text(status.last_heard)}"
        refused = f"; it refused this dashboard: {status.refused}" if status.refused else ""
        self.warn(printable(f"dashboard: the checker at {status.endpoint} is not answering ({why}{refused}); "
                            "streams are shown as unknown until it answers"))

    def broadcast(self, event: dict[str, Any]) -> None:
        """Send one event to every open page."""
        if not self.pages:
            return
        text = json.dumps(event, separators=(",", ":"))
        for page in self.pages:
            page.offer(text)

    def acknowledge(self, alert_id: object) -> None:
        """A page acknowledged an alert: remember it and tell every page."""
        event = self.state.acknowledge(alert_id, self.clock())
        if event is not None:
            self.broadcast(event)

    def push_tiles(self) -> None:
        """Send the tiles that changed since the last push (a stream gone silent, or the checker link lost or back,
        changes a tile too), after the streams whose tiles the dashboard dropped, and after the link when the checker
        was lost or is back: on its own timer, the header said "connected" above tiles already UNKNOWN for up to a
        second (and "not answering" above LIVE ones)."""
        status = self.feed_status()
        now, connected = self.clock(), status.connected
        if connected != self._link_sent:
            self.push_link(status)
        self.state.forget_gone(now, connected)
        gone = self.state.take_gone()
        if gone:
            self.broadcast({"type": "gone", "streams": gone})
        tiles = self.state.take_dirty_tiles(now, connected)
        if tiles:
            self.broadcast({"type": "tiles", "tiles": tiles})

    def push_link(self, status: FeedStatus | None = None) -> None:
        """Send every page the checker link's state (``status``: as read now if None) and the counts."""
        event = self.link(status)
        self._link_sent = event["connected"]
        self.broadcast(event)

    def link(self, status: FeedStatus | None = None) -> dict[str, Any]:
        """The checker link's state (``status``: as read now if None), the checker's counts and the dashboard's own,
        for the page."""
        status = status or self.feed_status()
        return {
            "type": "link",
            "endpoint": status.endpoint,
            "connected": status.connected,
            "last_heard": status.last_heard,
            "refused": status.refused,
            "malformed": status.malformed,
            "last_error": status.last_error,
            "health": self.state.health_json(),
            "pages": len(self.pages),
            "skipped": self.skipped + sum(page.skipped for page in self.pages),
            "dropped_pages": self.dropped_pages,
            "forgotten_open": self.state.forgotten_open,
            "now": self.clock(),
        }

    def snapshot_text(self) -> str:
        """The snapshot a page gets first (and after falling behind), as JSON text."""
        status = self.feed_status()  # one reading for the tiles and the header
        snapshot = self.state.snapshot(self.clock(), status.connected)
        snapshot["link"] = self.link(status)
        snapshot["graph"] = {"svg": self.config.svg is not None, "steps": list(self.config.steps)}
        return json.dumps(snapshot, separators=(",", ":"))

    def frame_path(self, alert_id: int) -> Path | None:
        """The picture of alert ``alert_id`` in ``--alert-frames``, if the file is there, inside that folder.

        The path is made from the alert the dashboard holds (its stream id and video time), as the detector names
        its files; a stream id such as ``..`` would lead out of the folder, so the resolved path must lie inside it.
        """
        folder = self.config.alert_frames
        record = self.state.by_id.get(alert_id)
        if folder is None or record is None or record.alert.video_time is None:
            return None
        # The detector's own rule: a video time the wire allows but no file can be named for (1e306) has no picture.
        name = frame_name(record.alert.video_time)
        if name is None:
            return None
        root = folder.resolve()
        try:
            path = (root / quote(record.alert.stream_id, safe="") / name).resolve()
            if not path.is_relative_to(root) or path.parent.parent != root or not path.is_file():
                return None
            if path.stat().st_size > MAX_FRAME_BYTES:
                return None
        except OSError:
            return None
        return path


def _static(name: str) -> bytes:
    return resources.files("streaming.dashboard").joinpath("static", name).read_bytes()


def build_app(hub: Hub) -> Any:
    """The aiohttp application: routes, the access check, security headers.

    Args:
        hub: the state and pages it serves.

    Returns:
        An ``aiohttp.web.Application``.
    """
    from aiohttp import WSCloseCode, WSMsgType, web

    gate = Gate(hub.config.token)
    index = _static("index.html")
    files = {name: _static(name) for name in STATIC_FILES}
    sockets: set[web.WebSocketResponse] = set()  # the open pages' push channels, closed when the dashboard stops

    def plain(status: int, text: str) -> web.Response:
        return web.Response(status=status, text=text, content_type="text/plain")

    @web.middleware
    async def guard(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        if not gate.host_ok(request.headers.get("Host")):
            response: web.StreamResponse = plain(421, "421: this dashboard answers only to 127.0.0.1 or localhost\n")
        elif gate.token is not None and request.path == "/" and "token" in request.query:
            # First visit with the token in the address: a session cookie, then the address without it.
            if gate.token_ok(request.query.get("token")):
                response = web.Response(status=303, headers={"Location": "/"})
                assert gate.cookie is not None
                response.set_cookie(COOKIE, gate.cookie, httponly=True, samesite="Strict", path="/")
            else:
                response = plain(401, UNAUTHORIZED)
        elif not gate.allowed(request.headers.get("Authorization"), request.cookies.get(COOKIE)):
            response = plain(401, UNAUTHORIZED)
            response.headers["WWW-Authenticate"] = 'Bearer realm="dashboard"'
        else:
            try:
                response = await handler(request)
            except web.HTTPException as err:  # 404 and friends: plain text, with the same headers
                response = plain(err.status, f"{err.status}: {err.reason}\n")
        if not response.prepared:  # a WebSocket has sent its headers already
            response.headers.update(SECURITY_HEADERS)
        return response

    async def page(request: web.Request) -> web.Response:
        return web.Response(body=index, content_type="text/html", charset="utf-8")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in files:
            raise web.HTTPNotFound()
        return web.Response(body=files[name], content_type=STATIC_FILES[name], charset="utf-8")

    async def graph(request: web.Request) -> web.Response:
        if hub.config.svg is None:
            raise web.HTTPNotFound()
        return web.Response(text=hub.config.svg, content_type="image/svg+xml", charset="utf-8")

    async def frame(request: web.Request) -> web.StreamResponse:
        text = request.match_info["id"]
        # ASCII digits only: int() refuses "²" (a 500 without the security headers).
        path = hub.frame_path(int(text)) if is_decimal_digits(text) and len(text) < 19 else None
        if path is None:
            raise web.HTTPNotFound()
        return web.FileResponse(path, headers={"Content-Type": "image/jpeg"})

    async def api_state(request: web.Request) -> web.Response:
        return web.Response(text=hub.snapshot_text(), content_type="application/json")

    async def socket(request: web.Request) -> web.StreamResponse:
        if not gate.origin_ok(request.headers.get("Origin"), request.headers.get("Host")):
            return plain(403, "403: the push channel serves this dashboard's own page only\n")
        if len(hub.pages) >= MAX_PAGES:
            return plain(503, "503: too many open pages\n")
        # No per-message compression: it would compress every push once per page, on the one event loop.
        ws = web.WebSocketResponse(heartbeat=20.0, max_msg_size=WS_MAX_MESSAGE, compress=False,
                                   timeout=CLOSE_TIMEOUT_S)
        await ws.prepare(request)
        sockets.add(ws)
        queue = PageQueue()
        hub.pages.add(queue)
        writer = asyncio.create_task(_write(ws, queue))
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    body = json.loads(message.data)
                except (ValueError, RecursionError):  # "[[[...": deeper than the parser goes
                    continue  # a page speaks only JSON; anything else is ignored, never fatal
                if isinstance(body, dict) and body.get("type") == "ack":
                    hub.acknowledge(body.get("id"))
        finally:
            sockets.discard(ws)
            hub.pages.discard(queue)
            hub.skipped += queue.skipped
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
        return ws

    async def _write(ws: web.WebSocketResponse, queue: PageQueue) -> None:
        try:
            while not ws.closed:
                await queue.wake.wait()
                queue.wake.clear()
                while not ws.closed:
                    if queue.resync:
                        queue.resync = False
                        queue.items.clear()
                        text = hub.snapshot_text()
                    elif queue.items:
                        text = queue.items.popleft()
                    else:
                        break
                    async with asyncio.timeout(SEND_TIMEOUT_S):
                        await ws.send_str(text)
        except (TimeoutError, ConnectionError):
            hub.dropped_pages += 1
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 1.0)

    async def headed(_request: web.Request, response: web.StreamResponse) -> None:
        # What escapes `guard` (a defect in a handler, which aiohttp answers with its own 500 and logs) gets the
        # headers too: an alert at video time 1e306 once made such a 500, without them.
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)

    async def close_pages(_app: web.Application) -> None:
        # Run as the dashboard stops, before aiohttp waits for the open requests: a page's push channel ends only
        # when closed, so without this each open page held Ctrl-C up for CLOSE_TIMEOUT_S, was then cancelled and
        # closed for as long again (4 s of silence), and the page saw a broken connection instead of "going away".
        # A page that does not answer the close in time is left to aiohttp's own bounded wait.
        closing = [ws.close(code=WSCloseCode.GOING_AWAY, message=b"dashboard stopping") for ws in list(sockets)]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), CLOSE_TIMEOUT_S)

    app = web.Application(middlewares=[guard], client_max_size=WS_MAX_MESSAGE)
    app.on_response_prepare.append(headed)
    app.on_shutdown.append(close_pages)
    app.add_routes([
        web.get("/", page),
        web.get("/static/{name}", static),
        web.get("/graph.svg", graph),
        web.get("/frames/{id}", frame),
        web.get("/api/state", api_state),
        web.get("/ws", socket),
    ])  # fmt: skip
    return app


async def serve(
    hub: Hub,
    ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
    log: Callable[[str], None] | None = None,
) -> None:
    """Listen, connect to the checker and serve until ``stop`` is set.

    Args:
        hub: the state and pages.
        ready: called with the page's address once the server listens (the real port when 0 was asked).
        stop: set it to end (default: never).
        log: one line per refused checker handshake, and about requests that could not be handled
            (`RequestErrors`) (None: the hub's ``warn``).

    Raises:
        InputError: the address is taken or cannot be bound (before anything else starts).
    """
    from aiohttp import web

    log = log or hub.warn
    address = hub.config.address
    errors = RequestErrors(log)
    runner = web.AppRunner(build_app(hub), access_log=None, handle_signals=False, shutdown_timeout=CLOSE_TIMEOUT_S,
                           logger=request_logger(errors), keepalive_timeout=hub.config.request_timeout_s)
    await runner.setup()
    site = web.TCPSite(runner, address.host, address.port, backlog=128)
    where = str(address)
    try:
        await site.start()
    except OSError as err:
        await runner.cleanup()
        if err.errno == errno.EADDRINUSE:
            raise InputError(f"--bind {where}: address already in use (another program is using it: pick another "
                             "port)") from None
        raise InputError(f"--bind {where}: cannot listen ({err.strerror or err})") from None
    loop = asyncio.get_running_loop()
    before = loop.get_exception_handler()
    exhausted = RequestErrors(log)  # its own limiter: a burst of bad requests must not hide it, nor it them

    def on_loop_error(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if out_of_resources(context):
            exhausted.emit(loop_error_record(context))
        elif before is not None:
            before(loop, context)
        else:  # any other error is a defect: it keeps asyncio's own report, traceback included
            loop.default_exception_handler(context)

    loop.set_exception_handler(on_loop_error)

    def deliver(messages: Received) -> None:  # from the feed's thread
        loop.call_soon_threadsafe(hub.take, messages)

    feed = CheckerFeed(hub.config.checker, deliver, hub.config.curve, log, hub.clock, hub.config.checker_option)
    hub.feed = feed
    stop = stop or asyncio.Event()
    try:
        hub.listening_since = hub.clock()
        feed.start()
        port = runner.addresses[0][1]
        host = f"[{address.host}]" if ":" in address.host else address.host
        if ready is not None:
            ready(f"http://{host}:{port}/")
        next_status = 0.0
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TILE_PUSH_S)
            hub.push_tiles()
            hub.watch_link()
            if time.monotonic() >= next_status:
                hub.push_link()
                next_status = time.monotonic() + STATUS_PUSH_S
    finally:
        await asyncio.get_running_loop().run_in_executor(None, feed.close)
        await runner.cleanup()
        loop.set_exception_handler(before)


def run_dashboard(config: DashboardConfig, ready: Callable[[str], None] | None = None,
                  warn: Callable[[str], None] | None = None, say: Callable[[str], None] | None = None) -> int:
    """The ``stream-detect dashboard`` command: serve until SIGINT, SIGTERM or SIGHUP.

    Args:
        config: the settings.
        ready: called with the page's address once it listens.
        warn: writes one ``warning:`` line (a refused handshake, a checker not answering, a --graph naming a step
            otherwise than the checker); None: on stderr.
        say: writes one plain log line (the checker answering again); None: on stderr.

    Returns:
        Exit status (0); a signal ends it as `graphs.common.interrupts.Interrupted`.

    Raises:
        InputError: aiohttp is missing, or the address is taken.
    """
    require_aiohttp()
    received: list[int] = []

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def stopping(signum: int) -> None:
            received.append(signum)
            stop.set()

        # SIGHUP too (a closed terminal, a dropped ssh session): it stopped the loop from Python's handler instead,
        # so the pages were cut off (1006) rather than told the dashboard was going away.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) is not signal.SIG_IGN:  # a background job's ignored SIGINT stays ignored
                loop.add_signal_handler(signum, stopping, signum)
        await serve(Hub(config, warn=warn, say=say), ready, stop)

    serving = main()
    try:
        asyncio.run(serving)
    finally:
        # A signal that lands while asyncio makes its loop (before a handler of its own is installed) stops the run
        # before the coroutine ever started: left to the garbage collector, it then printed "RuntimeWarning:
        # coroutine ... was never awaited" after the interrupt's line. Closing one that ran is a no-op.
        serving.close()
    if received:
        raise Interrupted(received[0])
    return 0
