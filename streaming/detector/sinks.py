"""Where a detector's messages go: anything with one ``send(message)`` is a `Sink`.

The sinks of the house:
- the ZeroMQ publisher to the checker (`streaming.transport.Publisher`);
- a checker in the same process (`streaming.local_checker.CheckerLink`: ``eval`` and ``--annotate-out``);
- JSON lines (`JsonLinesSink`), one message a line (the view's ``--jsonl``);
- a webhook (`streaming.detector.webhook.WebhookSink`, ``--webhook URL``): each alert POSTed as JSON;
- the alert frames (`streaming.detector.alert_frames.AlertFrames`, ``--alert-frames DIR``): the frame that confirmed
  each key-step, as a JPEG, for the dashboard.

Sinks are handed to the pipeline when it is built (`streaming.detector.wiring.build_pipeline`), never patched onto a
running detector. `Fanout` sends one message to several. A sink that talks to the outside world (the webhook, the
frame files) does its work in its own thread behind a bounded queue (`BackgroundSink`): a slow or dead receiver costs
the frame loop one ``put`` that never waits, and what is dropped is counted.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, Generic, Protocol, TextIO, TypedDict, TypeVar

from graphs.common.errors import print_stderr
from streaming.messages import Message, encode_payload
from streaming.transport import HandshakeRefused

DEFAULT_QUEUE = 256  # messages a background sink holds before it drops the newest (counted)
STOP_WAIT_S = 5.0  # on close, longest wait for a background sink to finish what it holds
WAKE_S = 0.5  # a background sink's thread looks this often whether it was closed while its queue was full
LOG_EVERY = 100  # a failing sink is logged the first time, then once every this many failures
T = TypeVar("T")


class Sink(Protocol):
    """Takes one message at a time; must return quickly (the frame loop calls it)."""

    def send(self, message: Message) -> None:
        """Take one message."""


class Fanout:
    """Sends each message to several sinks, in order (the first is usually the checker's socket).

    A sink that raises on a message (a defect of that sink) is counted (``failed``) and logged, the first time and
    then every `LOG_EVERY` failures, and the others still get the message: one sink never stops a camera's stream.
    A closed standard output is not a sink's defect but the end of its reader (``| head``), and is raised; so is the
    checker's refusal of this client (`HandshakeRefused`: its key revoked), the end of the run.

    Args:
        sinks: where every message goes.
        log: where a failure's line goes (None: a ``warning:`` line on stderr).
    """

    def __init__(self, sinks: Sequence[Sink], log: Callable[[str], None] | None = None) -> None:
        self.sinks = list(sinks)
        self.failed = 0
        self._log = log or (lambda line: print_stderr(f"warning: {line}"))

    def send(self, message: Message) -> None:
        """Send to every sink, the first first."""
        for sink in self.sinks:
            try:
                sink.send(message)
            except (BrokenPipeError, HandshakeRefused):
                raise
            except Exception as err:  # any defect of one sink: counted and logged, never fatal to the stream
                self.failed += 1
                if self.failed == 1 or self.failed % LOG_EVERY == 0:
                    self._log(f"{type(sink).__name__} failed on a {message.kind} message ({self.failed} so far): "
                              f"{err}")


def combine(sinks: Sequence[Sink], warn: Callable[[str], None] | None = None) -> Sink:
    """One sink for several: the sink itself when there is one, else a `Fanout` whose failure lines go to ``warn``
    (None: a ``warning:`` line on stderr; a service gives its log, whose writer no full stderr holds)."""
    return sinks[0] if len(sinks) == 1 else Fanout(sinks, log=warn)


class JsonLinesSink:
    """Writes each message as one line of JSON (the wire's own payload, `streaming.messages.encode_payload`).

    Args:
        out: where the lines go (None: ``sys.stdout`` as it is at each call).
        kinds: message kinds to write (``"keystep"``, ``"alert"``, ...); empty: all.
    """

    def __init__(self, out: TextIO | None = None, kinds: Sequence[str] = ()) -> None:
        self.out = out
        self.kinds = frozenset(kinds)

    def send(self, message: Message) -> None:
        """Write the message's line and flush."""
        if self.kinds and message.KIND not in self.kinds:
            return
        out = self.out or sys.stdout
        out.write(encode_payload(message).decode("utf-8") + "\n")
        out.flush()


class SinkCounts(TypedDict):
    """What a `BackgroundSink` did with the messages it took (`BackgroundSink.summary`)."""

    delivered: int
    failed: int
    dropped: int
    queued: int
    unanswered: int


NOW: Final = 0
LATER: Final = 1


class _Lanes(queue.Queue[tuple[int, T | None]]):
    """A queue of two lanes, each item put as ``(lane, item)``: ``get`` takes the `NOW` lane's oldest first, and the
    `LATER` lane's only when the other is empty (`queue.Queue` keeps the locking; these four are its storage)."""

    def _init(self, maxsize: int) -> None:
        self.lanes: tuple[deque[tuple[int, T | None]], deque[tuple[int, T | None]]] = (deque(), deque())

    def _qsize(self) -> int:
        return len(self.lanes[NOW]) + len(self.lanes[LATER])

    def _put(self, item: tuple[int, T | None]) -> None:
        self.lanes[item[0]].append(item)

    def _get(self) -> tuple[int, T | None]:
        return (self.lanes[NOW] or self.lanes[LATER]).popleft()

    def later_size(self) -> int:
        """Items waiting in the `LATER` lane."""
        with self.mutex:
            return len(self.lanes[LATER])

    def put_now(self, item: T) -> bool:
        """Queue ``item`` in the `NOW` lane without waiting; a full queue makes room by turning away its newest `LATER`
        item (never the end mark).

        Returns:
            Whether a `LATER` item was turned away for it.

        Raises:
            queue.Full: the queue is full of `NOW` items (or ends with the end mark): nothing was queued.
        """
        with self.not_full:
            turned_away = False
            if 0 < self.maxsize <= self._qsize():
                later = self.lanes[LATER]
                if not later or later[-1][1] is None:
                    raise queue.Full
                later.pop()
                turned_away = True
            self._put((NOW, item))
            if not turned_away:
                self.unfinished_tasks += 1
            self.not_empty.notify()
            return turned_away


class BackgroundSink(Generic[T]):
    """A sink whose work (``deliver``) runs in its own thread, behind a queue of at most ``capacity`` items.

    ``send`` never waits: a full queue drops the message and counts it (``dropped``). A message the sink takes as
    one that can wait (``later``) is delivered after every other queued, holds at most half the queue, and gives its
    place to a live one that finds the queue full (the newest of them is dropped): a burst of them (a restarted
    checker's rebuilt alerts) never delays, nor takes the room of, what comes live. One it takes as handed over
    ``again`` after a failure (an alert frame's picture) was counted then, and counts again only once delivered.
    What ``deliver`` fails on is counted too (``failed``), and reported through ``log`` for the first `log_limit`
    failures, then once every `log_every`: a receiver that is down for hours writes a bounded log. ``close`` lets the
    thread finish what it holds (at most ``stop_wait_s``).

    Attributes:
        received: messages it took (``accepts``), whatever became of them.
        delivered, failed, dropped: those delivered, those ``deliver`` failed on, those a full queue turned away.
        stop_wait_s: on close, longest wait for the thread to finish what it holds (`STOP_WAIT_S`).

    Args:
        deliver: does the work for one message; returns normally when it succeeded, raises when it did not.
        name: the thread's name, and the prefix of its log lines.
        capacity: queue length.
        log: where failure lines go (None: stderr as a ``warning:`` line).
        log_limit: failures logged one by one before the log thins out.
        log_every: after that, one line per this many failures.
        failed_as: what a failure is, in the log line (``"picture(s) not written"`` for files written to disk).
        log_fields: ``log`` takes the values a line names as keywords (a `streaming.service_log.ServiceLog`'s
            ``warning``), for the ``fields`` of ``--log-format json``: ``failed`` and ``last`` on a failure line,
            ``dropped`` on a queue-full one. False: ``log`` gets the line alone.
    """

    def __init__(
        self,
        deliver: Callable[[T], None],
        name: str,
        capacity: int = DEFAULT_QUEUE,
        log: Callable[..., None] | None = None,
        log_limit: int = 5,
        log_every: int = LOG_EVERY,
        failed_as: str = "message(s) not delivered",
        log_fields: bool = False,
    ) -> None:
        self._deliver = deliver
        self._log_fields = log_fields
        self.name = name
        self.failed_as = failed_as
        self._queue: _Lanes[T] = _Lanes(maxsize=capacity)
        self._later_room = max(1, capacity // 2)
        self._log = log or (lambda line: print_stderr(f"warning: {line}"))
        self._log_limit = log_limit
        self._log_every = log_every
        self.received = 0
        self.delivered = 0
        self.failed = 0
        self.dropped = 0
        self.stop_wait_s = STOP_WAIT_S
        self._lock = threading.Lock()
        self._closed = False
        self._stop_queued = 0  # 1 once close has queued the end mark, which `pending` must not count as a message
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def accepts(self, message: T) -> bool:
        """Whether this sink wants the message at all (all, unless a subclass says otherwise)."""
        return True

    def later(self, message: T) -> bool:
        """Whether the message can wait behind every other (none, unless a subclass says otherwise)."""
        return False

    def again(self, message: T) -> bool:
        """Whether the message was handed over before and its delivery failed (none, unless a subclass says
        otherwise): it was counted then, taken and failed, so a try again is counted only when it is delivered, and
        a failure line says how many messages failed, not how many tries."""
        return False

    def send(self, message: T) -> None:
        """Queue the message for the thread; a full queue drops it (counted)."""
        if self._closed or not self.accepts(message):
            return
        again = self.again(message)
        if not again:
            with self._lock:
                self.received += 1
        try:
            if not self.later(message):
                # At a full queue a live message takes the place of the newest that can wait: with a capacity of 1,
                # half the queue is all of it, and a rebuilt alert there had the new mistake after it dropped.
                if self._queue.put_now(message):
                    self._count_drop()
                return
            if self._queue.later_size() >= self._later_room:
                raise queue.Full
            self._queue.put_nowait((LATER, message))
        except queue.Full:
            if not again:  # failed already: counted as such
                self._count_drop()

    def _count_drop(self) -> None:
        """One message more turned away by a full queue: counted, and logged the first time and every `log_every`."""
        with self._lock:
            self.dropped += 1
            dropped = self.dropped
        if dropped == 1 or dropped % self._log_every == 0:
            self._say(f"{self.name}: queue full, {dropped} message(s) dropped so far", dropped=dropped)

    def _work(self) -> None:
        while True:
            try:
                _, message = self._queue.get(timeout=WAKE_S)
            except queue.Empty:
                # `close` could not queue its end mark behind a full queue: the thread stops once it has drained it,
                # instead of waiting on an empty queue for ever (one thread lost per sink and run).
                if self._closed:
                    return
                continue
            if message is None:
                return
            try:
                self._deliver(message)
            except Exception as err:  # a receiver's failure is counted and logged, never the pipeline's
                if self.again(message):
                    continue  # its first failure was counted and logged
                with self._lock:
                    self.failed += 1
                    failed = self.failed
                if failed <= self._log_limit or failed % self._log_every == 0:
                    self._say(f"{self.name}: {failed} {self.failed_as} so far (last: {err})", failed=failed,
                              last=str(err))
            else:
                with self._lock:
                    self.delivered += 1

    def _say(self, line: str, **fields: object) -> None:
        """One line to ``log``, with the values it names where ``log`` takes them (``log_fields``)."""
        if self._log_fields:
            self._log(line, **fields)
        else:
            self._log(line)

    def pending(self) -> int:
        """Messages queued and not yet taken by the thread (the end mark `close` queues behind them is not one)."""
        return max(0, self._queue.qsize() - self._stop_queued)

    def warn(self, line: str) -> None:
        """Say ``line`` where this sink's failures go (its ``log``)."""
        self._log(line)

    def lost(self) -> int:
        """Messages that did not get through, or not yet: failed, dropped, still queued or still being delivered."""
        with self._lock:
            return self.received - self.delivered

    def summary_counts(self) -> SinkCounts:
        """The numbers of `summary`, by name (the fields of its JSON log line)."""
        with self._lock:
            received, delivered, failed, dropped = self.received, self.delivered, self.failed, self.dropped
        queued = self.pending()
        unanswered = max(0, received - delivered - failed - dropped - queued)
        return SinkCounts(delivered=delivered, failed=failed, dropped=dropped, queued=queued, unanswered=unanswered)

    def summary(self, counts: SinkCounts | None = None) -> str:
        """One line on what it did, for the end of a run: delivered, not delivered, dropped (and still queued, and
        the one ``deliver`` still held when ``close`` stopped waiting: a hanging receiver's, counted nowhere else).
        ``counts``: `summary_counts` as taken for the same line's fields (None: taken now)."""
        n = counts or self.summary_counts()
        return (f"{self.name}: {n['delivered']} delivered, {n['failed']} not delivered, {n['dropped']} dropped (queue "
                "full)" + (f", {n['queued']} still queued" if n["queued"] else "")
                + (f", {n['unanswered']} unanswered" if n["unanswered"] else ""))

    def close(self) -> None:
        """Stop taking messages; the thread finishes what it holds, for at most ``stop_wait_s``."""
        if self._closed:
            return
        self._closed = True
        try:
            self._queue.put((LATER, None), timeout=self.stop_wait_s)  # behind everything queued
        except queue.Full:
            return
        self._stop_queued = 1
        self._thread.join(self.stop_wait_s)

    def __enter__(self) -> BackgroundSink[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

