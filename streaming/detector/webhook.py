"""The webhook sink (``--webhook URL``): each alert, and each retraction of one, POSTed as JSON to a URL.

It is offered where alerts are seen: ``stream-detect checker`` (every alert the checker publishes live), ``stream-detect
view`` and the all-in-one run (every alert the view receives). Only what goes out live is POSTed: the copies the
checker re-sends every status period for late viewers (``replayed: true``) are not, so a receiver gets each alert once
(and a second time, same ``alert_id``, when an early alert is confirmed or retracted).

The body is the message as the wire carries it (`streaming.messages.encode_payload`: ``{"version": ..., "kind":
"alert", "stream_id": ..., ...}``), with ``Content-Type: application/json``. Any 2xx answer is a delivery; anything
else (an error status, a redirect, a refused connection, no answer within ``timeout_s``) is tried again after
``backoff_s``, doubled each time, ``retries`` times, then counted as failed and logged (bounded: `BackgroundSink`).
The requests run in the sink's own thread behind a bounded queue, so a receiver that is slow, down or hanging never
slows the frame loop or the view: its alerts wait in the queue, and once it is full new ones are dropped and counted.

Requests go through the standard library (`urllib.request`), which honours the usual ``http_proxy`` /
``https_proxy`` / ``no_proxy`` variables and verifies HTTPS certificates.
"""

from __future__ import annotations

import base64
import contextlib
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from graphs.common.errors import InputError
from streaming.detector.sinks import DEFAULT_QUEUE, BackgroundSink
from streaming.messages import Alert, Message, Retraction, encode_payload
from streaming.service_log import ServiceLog

SCHEMES = ("http", "https")


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
        InputError: one line naming the option and what is wrong.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises on a port that is not a number or out of range
    except ValueError as err:
        raise InputError(f"--webhook {url!r}: not a URL ({err})") from None
    if parts.scheme not in SCHEMES:
        raise InputError(f"--webhook {url!r}: use an http:// or https:// URL")
    if not parts.hostname:
        raise InputError(f"--webhook {url!r}: the URL names no host")
    if port == 0:
        raise InputError(f"--webhook {url!r}: port 0 is not a port a server listens on")
    odd = next((c for c in url if c.isspace() or not c.isprintable() or not c.isascii()), None)
    if odd is not None:  # urllib would refuse every request to it, one alert after the other
        raise InputError(f"--webhook {url!r}: holds {odd!r}; a URL holds no spaces, control or non-ASCII characters "
                         "(percent-encode them: a space is %20)")
    return url


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


class WebhookSink(BackgroundSink[Message]):
    """POSTs every `Alert` and `Retraction` it is sent to ``config.url``, from its own thread (see the module).

    Attributes (besides `BackgroundSink`'s ``delivered``, ``failed``, ``dropped``):
        attempts: requests made, retries included.

    Args:
        config: the URL and the retry policy.
        log: where failure lines go (bounded; None: stderr).
    """

    def __init__(self, config: WebhookConfig, log: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.attempts = 0
        self._stopping = threading.Event()
        self._opener = urllib.request.build_opener(_NoRedirect)
        self._target, authorization, shown = credentials(config.url)
        self._headers = {"Content-Type": "application/json"}
        if authorization is not None:
            self._headers["Authorization"] = authorization
        super().__init__(self._post, f"webhook {shown}", config.capacity, log)

    def accepts(self, message: Message) -> bool:
        """Alerts and retractions only, as they go out live (not the re-sent ``replayed`` copies)."""
        return isinstance(message, Retraction) or (isinstance(message, Alert) and not message.replayed)

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
            try:
                with self._opener.open(request, timeout=self.config.timeout_s) as answer:
                    answer.read()
                    if 200 <= answer.status < 300:
                        return
                    why = f"HTTP {answer.status}"
            except urllib.error.HTTPError as err:
                why = f"HTTP {err.code}"
            except (urllib.error.URLError, OSError, ValueError) as err:
                reason = getattr(err, "reason", err)
                why = str(reason) or type(reason).__name__
        raise RuntimeError(f"{why} after {self.config.retries + 1} tries")

    def close(self) -> None:
        """Stop retrying; what is queued is still tried once each, for at most the base class's wait."""
        self._stopping.set()
        super().close()


@contextlib.contextmanager
def webhook_sinks(webhook: str | WebhookConfig | None, log: ServiceLog) -> Iterator[list[WebhookSink]]:
    """A command's ``--webhook``: the sink (none without one) for the block, closed after it with a summary line.

    Every command that offers ``--webhook`` (``checker``, ``view``, the all-in-one run) goes through here, so each
    ends the same way: ``webhook URL: N delivered, M not delivered, K dropped (queue full)``, a warning if anything
    did not get through. The URL is checked before the block runs, so a command refuses it before it binds or loads
    anything; a block that ends on bad input (an `InputError`) before any alert reached the sink prints no summary,
    so the ``error:`` line stays the only one.

    Args:
        webhook: ``--webhook``'s URL, or its config, or None.
        log: the command's log: failures as they happen (``warning: ...``, bounded), and the summary at the end.

    Yields:
        ``[sink]``, or ``[]`` without a webhook.
    """
    if webhook is None:
        yield []
        return
    sink = WebhookSink(WebhookConfig(webhook) if isinstance(webhook, str) else webhook, log=log.warning)
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
