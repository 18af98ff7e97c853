"""The webhook sink (``--webhook URL``): each alert, and each retraction of one, POSTed as JSON to a URL.

It is offered where alerts are seen: ``stream-detect checker`` (every alert the checker publishes), ``stream-detect
view`` and the all-in-one run (every alert the view receives). The copies the checker re-sends every status period for
late viewers (``replayed: true``) are not POSTed, so a receiver gets each alert once (and a second time, same
``alert_id``, when an early alert is confirmed or retracted), at least once: a try that failed is sent again as it
was, and a receiver that took it in but answered too late gets the same body again (docs/live-pipeline.md). An
alert the checker rebuilds from a history (its step came while the checker restarted, or its message was lost) is
``replayed`` too but new to every receiver: the checker's sink POSTs it (``rebuilt``), after every live alert and
retraction queued (`WebhookSink.later`), and a view's cannot tell it from a re-send and does not.

The body is the message as the wire carries it (`streaming.messages.encode_payload`: ``{"version": ..., "kind":
"alert", "stream_id": ..., ...}``), with ``Content-Type: application/json``. Any 2xx answer is a delivery; anything
else (an error status, a redirect, a refused connection, no whole answer within ``timeout_s``) is tried again after
``backoff_s``, doubled each time, ``retries`` times, then counted as failed and logged (bounded: `BackgroundSink`).
``timeout_s`` bounds each try as a whole (connect, send, status line, headers and the first `BODY_CAP` bytes of the
body, the rest never read): a receiver that trickles its answer a byte at a time, or sends one without end, costs one
failed try, never a thread held for ever nor memory without bound.
The requests run in the sink's own thread behind a bounded queue, so a receiver that is slow, down or hanging never
slows the frame loop or the view: its alerts wait in the queue, and once it is full new ones are dropped and counted.

Requests go through the standard library (`urllib.request`), which honours the usual ``http_proxy`` /
``https_proxy`` / ``no_proxy`` variables and verifies HTTPS certificates.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import io
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from graphs.common.errors import InputError
from streaming.detector.sinks import DEFAULT_QUEUE, BackgroundSink
from streaming.messages import Alert, Message, Retraction, encode_payload
from streaming.service_log import ServiceLog

SCHEMES = ("http", "https")
BODY_CAP = 4096  # bytes of an answer's body read, and no more: the status says all; reading a little spares the
# receiver a reset connection when its answer is short
# Characters of a failed try's reason kept for the log: http.client quotes a status line it cannot read whole (up to
# 64 KiB, chosen by the receiver), and the failure line, JSON's "last" field too, quoted it for every failed alert.
MAX_REASON = 200


@dataclass(frozen=True)
class WebhookConfig:
    """Where and how alerts are POSTed.

    Args:
        url: the receiver, ``http://`` or ``https://`` with a host (a ``user:password@`` in it is sent as HTTP Basic
            authentication: `credentials`).
        timeout_s: longest wait for one answer.
        retries: tries after the first one fails.
        backoff_s: wait before the first retry, doubled before each next one.
        capacity: alerts queued at most while the receiver is slow (the newest are dropped beyond it).
    """

    url: str
    timeout_s: float = 2.0
    retries: int = 3
    backoff_s: float = 0.5
    capacity: int = DEFAULT_QUEUE

    def __post_init__(self) -> None:
        check_webhook_url(self.url)
        if not self.timeout_s > 0:
            raise InputError(f"WebhookConfig.timeout_s = {self.timeout_s} must be > 0")
        if self.retries < 0:
            raise InputError(f"WebhookConfig.retries = {self.retries} must be >= 0")
        if not self.backoff_s >= 0:
            raise InputError(f"WebhookConfig.backoff_s = {self.backoff_s} must be >= 0")
        if self.capacity < 1:
            raise InputError(f"WebhookConfig.capacity = {self.capacity} must be >= 1")


def check_webhook_url(url: str) -> str:
    """Refuse a ``--webhook`` value that is not an http(s) URL with a host.

    Returns:
        The URL.

    Raises:
        InputError: one line naming the option and what is wrong, the URL's password shown as ``***`` (`masked`).
    """
    shown, secret = masked(url)
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises on a port that is not a number or out of range
    except ValueError as err:
        reason = str(err)
        # urllib's reason may quote part of the URL (the "port" it read in a password holding a '/'): left out then
        if secret and any(piece in reason for piece in re.split(r"[/?#@:\[\]]", secret) if piece):
            raise InputError(f"--webhook {shown!r}: not a URL") from None
        raise InputError(f"--webhook {shown!r}: not a URL ({reason})") from None
    if parts.scheme not in SCHEMES:
        raise InputError(f"--webhook {shown!r}: use an http:// or https:// URL")
    if not parts.hostname:
        raise InputError(f"--webhook {shown!r}: the URL names no host")
    if port == 0:
        raise InputError(f"--webhook {shown!r}: port 0 is not a port a server listens on")
    odd = next((c for c in url if c.isspace() or not c.isprintable() or not c.isascii()), None)
    if odd is not None:  # urllib would refuse every request to it, one alert after the other
        raise InputError(f"--webhook {shown!r}: holds {odd!r}; a URL holds no spaces, control or non-ASCII characters "
                         "(percent-encode them: a space is %20)")
    return url


_AUTHORITY = re.compile(r"(?P<head>[^/?#]*//)?")  # "scheme://", if any, before what may be "user:password@host"


def masked(url: str) -> tuple[str, str]:
    """A ``--webhook`` value as error lines show it: a password in it as ``***``, as log lines show it (`credentials`).

    Works on any string, a URL or not (urllib's parser raises on some that hold a password: a bad port, a bad IPv6
    host), and takes the password to run up to the last ``@``, so that one holding a ``/``, ``?`` or ``#`` that the
    user did not percent-encode is hidden whole: an error line may show more as ``***`` than urllib would have read as
    the password, never less. So a URL with no password but an ``@`` in its path or query after ``host:port``
    (``host:99999/notify?to=ops@example.org``) is shown with that stretch hidden too: which of the two a text is
    cannot be told (``user:2024/pw@host`` has the same shape), and a password must never show.

    Returns:
        ``(the value as shown, the password hidden or "")``.
    """
    head = _AUTHORITY.match(url)
    start = head.end() if head else 0
    userinfo, at, rest = url[start:].rpartition("@")
    user, colon, secret = userinfo.partition(":")
    if not at or not colon:
        return url, ""
    return f"{url[:start]}{user}:***@{rest}", secret


def credentials(url: str) -> tuple[str, str | None, str]:
    """A URL's user name and password (``https://user:secret@host/...``) as HTTP Basic authentication.

    urllib sends no credentials written into a URL (it took ``user:secret@host`` for the host name), so the sink sends
    them in an ``Authorization`` header to the URL without them, and its log lines show the password as ``***``.

    Returns:
        ``(the URL requested, the Authorization header's value or None, the URL as log lines show it)``.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, None, url
    host = parts.netloc.rpartition("@")[2]
    user, password = urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    shown = f"{parts.username}:***@{host}" if parts.password is not None else f"{parts.username}@{host}"
    return (urllib.parse.urlunsplit(parts._replace(netloc=host)), f"Basic {token}",
            urllib.parse.urlunsplit(parts._replace(netloc=shown)))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: a 3xx answer is a failed delivery (``HTTP 302``), counted and logged.

    urllib's own handler follows a 301/302/303 answer to a POST as a GET without the body, to whatever host the
    answer names: the alert would be lost while the 2xx answer to that GET counted it delivered.
    """

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class _Deadline:
    """When the request under way must be over (`WebhookSink`'s ``timeout_s`` after it started).

    urllib's ``timeout`` bounds each read from the socket, not the request: a receiver sending one byte a second held
    an alert (and the sink's thread) for ever, never retried, never counted. Every connect, send and read of the
    request waits at most what is left of it instead; no thread watches over it.
    """

    def __init__(self) -> None:
        self._end = 0.0

    def start(self, timeout_s: float) -> None:
        """A request starts now: it has ``timeout_s`` in all."""
        self._end = time.monotonic() + timeout_s

    def left(self) -> float:
        """Seconds left, > 0.

        Raises:
            TimeoutError: none left (a failed try, as urllib's own timeout is).
        """
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        return left


class _DeadlineReader(io.RawIOBase):
    """A socket's reading end (``socket.makefile``'s) whose every read waits at most what is left of the request."""

    def __init__(self, raw: socket.SocketIO, sock: socket.socket, deadline: _Deadline) -> None:
        super().__init__()
        self._raw, self._sock, self._deadline = raw, sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        self._sock.settimeout(self._deadline.left())
        return self._raw.readinto(buffer)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()  # the socket's own count of open files: the last one closed closes the socket
        super().close()


class _DeadlineSocket:
    """A connection's socket as http.client uses it (``sendall``, ``makefile``, ``close``), bounded by the request's
    deadline; anything else goes to the socket itself."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock, self._deadline = sock, deadline

    def sendall(self, data: Any) -> None:
        self._sock.settimeout(self._deadline.left())  # since Python 3.5 the timeout bounds the whole sendall
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb", *args: object, **kwargs: object) -> io.BufferedReader:
        if mode != "rb":
            raise ValueError(f"a webhook request's socket is only read from, not opened {mode!r}")
        return io.BufferedReader(_DeadlineReader(self._sock.makefile("rb", buffering=0), self._sock, self._deadline))

    def close(self) -> None:
        self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _BoundedConnection(http.client.HTTPConnection):
    """An HTTP connection whose connect, sends and reads (the answer's too) all end by one `_Deadline`."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline
        self._create_connection = self._open_socket

    def _open_socket(self, address: tuple[str, int], timeout: float | None, source: Any = None) -> socket.socket:
        # urllib's ``timeout`` is the whole request's: the connect gets what is left of it
        sock = socket.create_connection(address, self._deadline.left(), source)
        try:
            sock.settimeout(self._deadline.left())  # an HTTPS handshake comes next, one operation bounded by this
        except BaseException:
            sock.close()
            raise
        return sock

    def connect(self) -> None:
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self._deadline)


class _BoundedHTTPSConnection(_BoundedConnection, http.client.HTTPSConnection):
    """`_BoundedConnection` over TLS: the handshake is bounded by what is left after the connect."""


class _BoundedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_BoundedConnection, deadline=self._deadline), req)


class _BoundedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_BoundedHTTPSConnection, deadline=self._deadline), req)


class WebhookSink(BackgroundSink[Message]):
    """POSTs every `Alert` and `Retraction` it is sent to ``config.url``, from its own thread (see the module).

    Attributes (besides `BackgroundSink`'s ``delivered``, ``failed``, ``dropped``):
        attempts: requests made, retries included.

    Args:
        config: the URL and the retry policy.
        log: where failure lines go (bounded; None: stderr).
        rebuilt: POST ``replayed`` alerts too: for a sender that hands the sink no periodic re-send (the checker), so
            that a ``replayed`` alert is one rebuilt from a history, which no receiver had.
        log_fields: ``log`` takes the values a line names as keywords (`BackgroundSink`).
    """

    def __init__(
        self, config: WebhookConfig, log: Callable[..., None] | None = None, rebuilt: bool = False,
        log_fields: bool = False,
    ) -> None:
        self.config = config
        self.rebuilt = rebuilt
        self.attempts = 0
        self._stopping = threading.Event()
        self._deadline = _Deadline()  # one request at a time: the sink's thread makes them all
        self._opener = urllib.request.build_opener(_NoRedirect, _BoundedHTTPHandler(self._deadline),
                                                   _BoundedHTTPSHandler(self._deadline))
        self._target, authorization, shown = credentials(config.url)
        self._headers = {"Content-Type": "application/json"}
        if authorization is not None:
            self._headers["Authorization"] = authorization
        super().__init__(self._post, f"webhook {shown}", config.capacity, log, log_fields=log_fields)

    def accepts(self, message: Message) -> bool:
        """Alerts and retractions only, as they go out live (a ``replayed`` alert only with ``rebuilt``)."""
        if isinstance(message, Alert):
            return self.rebuilt or not message.replayed
        return isinstance(message, Retraction)

    def later(self, message: Message) -> bool:
        """A rebuilt alert waits behind every live alert and retraction: a restarted checker rebuilds up to 32 alerts
        of every stream, most of them POSTed by its predecessor, and a new mistake queued behind them came seconds
        late, or was dropped from a full queue."""
        return isinstance(message, Alert) and message.replayed

    def _post(self, message: Message) -> None:
        body = encode_payload(message)
        wait = self.config.backoff_s
        why = ""
        for attempt in range(self.config.retries + 1):
            if attempt and self._stopping.wait(wait):
                # the receiver's own answer first: "closed" alone hid an HTTP 500 when the run ended mid-retries
                raise RuntimeError(f"{why} after {attempt} {'try' if attempt == 1 else 'tries'}; the run ended "
                                   "before the next")
            if attempt:
                wait *= 2
            self.attempts += 1
            request = urllib.request.Request(self._target, data=body, method="POST", headers=self._headers)
            self._deadline.start(self.config.timeout_s)
            try:
                with self._opener.open(request, timeout=self.config.timeout_s) as answer:
                    answer.read(BODY_CAP)  # an endless body once filled memory at 2 GB a second
                    if 200 <= answer.status < 300:
                        return
                    why = f"HTTP {answer.status}"
            except urllib.error.HTTPError as err:
                err.close()  # its body unread: the socket goes now, not whenever the error is collected
                why = f"HTTP {err.code}"
            except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as err:
                # HTTPException: an answer that is not HTTP (a header line without end, a body cut short) is a failed
                # try like any other, retried, not a failure outright
                reason = getattr(err, "reason", err)
                why = _shortened(str(reason) or type(reason).__name__)
        tries = self.config.retries + 1
        raise RuntimeError(f"{why} after {tries} {'try' if tries == 1 else 'tries'}")

    def close(self) -> None:
        """Stop retrying; what is queued is still tried once each, for at most the base class's wait."""
        self._stopping.set()
        super().close()


def _shortened(reason: str) -> str:
    """A failed try's reason as the log shows it: at most `MAX_REASON` characters of it, saying so when cut."""
    if len(reason) <= MAX_REASON:
        return reason
    return f"{reason[:MAX_REASON]}... ({len(reason)} characters)"


@contextlib.contextmanager
def webhook_sinks(
    webhook: str | WebhookConfig | None, log: ServiceLog, rebuilt: bool = False
) -> Iterator[list[WebhookSink]]:
    """A command's ``--webhook``: the sink (none without one) for the block, closed after it with a summary line.

    Every command that offers ``--webhook`` (``checker``, ``view``, the all-in-one run) goes through here, so each
    ends the same way: ``webhook URL: N delivered, M not delivered, K dropped (queue full)``, a warning if anything
    did not get through. The URL is checked before the block runs, so a command refuses it before it binds or loads
    anything; a block that ends on bad input (an `InputError`) before any alert reached the sink prints no summary,
    so the ``error:`` line stays the only one.

    Args:
        webhook: ``--webhook``'s URL, or its config, or None.
        log: the command's log: failures as they happen (``warning: ...``, bounded), and the summary at the end.
        rebuilt: the sink's ``rebuilt`` (the checker's: `WebhookSink`).

    Yields:
        ``[sink]``, or ``[]`` without a webhook.
    """
    if webhook is None:
        yield []
        return
    sink = WebhookSink(WebhookConfig(webhook) if isinstance(webhook, str) else webhook, log=log.warning,
                       rebuilt=rebuilt, log_fields=True)
    refused = False
    try:
        yield [sink]
    except InputError:
        refused = not sink.received
        raise
    finally:
        sink.close()
        if not refused:
            counts = sink.summary_counts()
            (log.warning if sink.lost() else log)(sink.summary(counts), **counts)
