"""The dashboard's link to the checker: a ZeroMQ SUB socket read by a thread, its messages handed to the web loop.

A client of the wire format like any other (`docs/wire-format.md`): it connects a SUB socket to the checker's
``--publish`` endpoint (CURVE when given keys, as `stream-detect view`), subscribes to what the page shows
(`TOPICS`) and decodes what arrives with `streaming.messages.decode` (the socket limits of `streaming.transport`);
what it cannot decode is dropped and counted. ZeroMQ reconnects by itself, so a checker that is not there yet, or
restarts, needs nothing here but patience: the checker greets every subscription and then speaks every 0.5 s, so a
feed that heard nothing for `SILENT_S` says so (`FeedStatus.connected`), and the page shows it.

A stream's status arrives after every key-step and heartbeat the checker applies and again every 0.5 s, and the page
shows only the latest: the thread keeps the newest raw status of each stream and decodes it once every
`STATUS_EVERY_S` (a status replaced by a newer one before then is dropped undecoded, as the checker drops a stream's
messages over its budget). It is handed over with the time it was received, not decoded, since the dashboard tells
a stream the checker stopped re-sending by that time. Everything else (alerts, retractions, end-of-session reports,
the checker's counts) is decoded as it arrives, with `streaming.messages.decode`, which checks every field; what it
refuses is counted and skipped. Under 100 streams at 10 key-steps a second this decodes one status in seven.

The thread hands over what it decoded in batches of (message, arrival time) pairs (`deliver`, called from the
thread: the server passes each batch to its event loop). It waits while more than `MAX_PENDING` messages wait for
the loop, so a loop that falls behind makes ZeroMQ queue (and at its high-water mark drop, as for any slow
subscriber) rather than the dashboard's memory grow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import zmq

from graphs.common.errors import InputError
from graphs.common.safe_text import printable
from streaming.curve_keys import CurveClient
from streaming.messages import Message, MessageError
from streaming.transport import (
    MAX_FRAMES,
    POLL_MS,
    VIEW_RECV_HWM,
    HandshakeWatch,
    ReceiveStats,
    connect_watched,
    decode_frames,
    gone_silent,
    queued_messages,
    subscribe,
)

TOPICS: Final = (b"alert/", b"retraction/", b"missing/", b"status/", b"checker/")
MAX_PENDING: Final = 20_000  # decoded messages waiting for the web loop before the reader thread waits
STATUS_EVERY_S: Final = 0.5  # each stream's newest status is decoded this often (the page's tiles move as often)
STATUS_TOPIC: Final = b"status/"
MAX_HELD: Final = 1024  # streams whose newest status waits undecoded (four times the checker's MAX_STREAMS)

Received = list[tuple[Message, float]]  # decoded messages, each with the wall time it arrived


@dataclass(frozen=True)
class FeedStatus:
    """How the link to the checker is doing, for the page.

    Attributes:
        endpoint: the checker's ``--publish`` endpoint.
        connected: a message arrived within the last `SILENT_S` seconds.
        last_heard: wall time of the latest message (None: never).
        malformed: messages the dashboard could not decode (dropped, counted).
        last_error: why the latest of them was dropped.
        refused: the checker refused this dashboard's handshake (its CURVE key), in one line; None if not.
    """

    endpoint: str
    connected: bool
    last_heard: float | None
    malformed: int
    last_error: str
    refused: str | None


class CheckerFeed:
    """Reads a checker's output in a thread and hands the decoded messages to ``deliver``.

    Args:
        endpoint: the checker's ``--publish`` endpoint.
        deliver: called from the reader thread with each non-empty batch of decoded messages, each with its arrival
            time.
        curve: this dashboard's CURVE keys and the checker's public key; None: no CURVE.
        log: called with one line on a refused handshake (once per reason).
        clock: wall clock.
        option: the option ``endpoint`` came from, named in errors.
    """

    def __init__(
        self,
        endpoint: str,
        deliver: Callable[[Received], None],
        curve: CurveClient | None = None,
        log: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
        option: str = "--connect",
    ) -> None:
        self.endpoint = endpoint
        self.deliver = deliver
        self.curve = curve
        self.log = log
        self.clock = clock
        self.ctx = zmq.Context()
        sock, self._watch = connect_watched(self.ctx, zmq.SUB, endpoint, option, VIEW_RECV_HWM, curve)
        self._sock = subscribe(sock, TOPICS)
        self._poller = zmq.Poller()
        self._poller.register(self._sock, zmq.POLLIN)
        self.stats = ReceiveStats()
        self._held: dict[bytes, tuple[list[bytes], float]] = {}  # status topic -> its newest frames, arrival time
        self._stop = threading.Event()
        self._room = threading.Condition()
        self._pending = 0
        self._last_heard: float | None = None
        self._refused: str | None = None
        self._thread = threading.Thread(target=self._run, name="dashboard-feed", daemon=True)

    def start(self) -> None:
        """Start reading."""
        self._thread.start()

    def taken(self, count: int) -> None:
        """The web loop took ``count`` delivered messages (called from the loop): room for more."""
        with self._room:
            self._pending -= count
            self._room.notify()

    def status(self) -> FeedStatus:
        """The link's state now."""
        stats = self.stats
        heard = self._last_heard
        connected = heard is not None and not gone_silent(heard, self.clock())
        return FeedStatus(self.endpoint, connected, heard, stats.malformed, printable(stats.last_error)[:200],
                          self._refused)  # fmt: skip

    def _run(self) -> None:
        try:
            next_status = time.monotonic() + STATUS_EVERY_S
            while not self._stop.is_set():
                self._check_handshakes(self._watch)
                wait_ms = max(0, min(POLL_MS, int(1000 * (next_status - time.monotonic()))))
                messages = self._receive(wait_ms)
                if time.monotonic() >= next_status:
                    messages.extend(self._decode_held())
                    next_status = time.monotonic() + STATUS_EVERY_S
                if not messages:
                    continue
                with self._room:
                    while self._pending > MAX_PENDING and not self._stop.is_set():
                        self._room.wait(0.1)
                    self._pending += len(messages)
                self.deliver(messages)
        finally:
            self._watch.close()
            self._sock.close()

    def _receive(self, wait_ms: int) -> Received:
        """What arrived within ``wait_ms`` (`queued_messages`: at most `RECV_BATCH` messages or `RECV_BUDGET_S` of
        receiving), decoded; statuses are held instead (`_decode_held`)."""
        out: Received = []
        for frames, count, _ in queued_messages(self._poller, self._sock, wait_ms):
            now = self._last_heard = self.clock()
            self._refused = None
            if (count <= MAX_FRAMES and frames[0].startswith(STATUS_TOPIC)
                    and (frames[0] in self._held or len(self._held) < MAX_HELD)):
                self._held[frames[0]] = (frames, now)
            else:
                self._decode(frames, count, now, out)
        return out

    def _decode_held(self) -> Received:
        """Each stream's newest status, decoded, with the time it arrived."""
        out: Received = []
        for frames, arrived in self._held.values():
            self._decode(frames, len(frames), arrived, out)
        self._held.clear()
        return out

    def _decode(self, frames: list[bytes], count: int, arrived: float, out: Received) -> None:
        try:
            out.append((decode_frames(frames, count), arrived))
            self.stats.received += 1
        except MessageError as err:
            self.stats.malformed += 1
            self.stats.last_error = str(err)

    def _check_handshakes(self, watch: HandshakeWatch) -> None:
        try:
            watch.check()
        except InputError as refusal:  # the checker does not let this key in: say so, keep trying (keys can change)
            text = printable(str(refusal))
            if text != self._refused and self.log is not None:
                self.log(f"dashboard: {text}")
            self._refused = text

    def close(self) -> None:
        """Stop the thread and close the socket."""
        self._stop.set()
        with self._room:
            self._room.notify_all()
        if self._thread.is_alive():
            self._thread.join(5.0)
        self.ctx.destroy(linger=0)
