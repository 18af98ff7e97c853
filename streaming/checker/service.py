"""The checker's sockets and loop around a `CheckerCore`: the ``stream-detect checker`` service.

Input: `KeyStepEvent` / `Heartbeat` / `KeyStepOnset` from any number of detectors on a bound SUB socket
(subscribed to `streaming.messages.INPUT_TOPICS`).
Output (bound XPUB socket, which sends as a PUB does): an `Alert` for each key-step done before its
pre-conditions, a `StepEvent` for every new key-step, and a `Status` per stream on every change; every status
period (`streaming.transport.HEARTBEAT_S` by default) each stream's status and its most recent alerts are re-sent
(``replayed=True``) for late or reconnecting viewers, with one `CheckerHealth` (`streaming.checker.schedule`). A new
subscription is greeted at once (within `WELCOME_GAP_S` of the last greeting) with a `CheckerHealth`: a viewer
subscribed to it knows from then on that it misses nothing.

With CURVE (``CheckerConfig.curve``) both sockets are CURVE servers and a ZAP authenticator lets in only the clients
whose public keys are in the client folder. Refused handshakes are counted (``denied``) by a monitor on each socket,
whatever refused them: ZAP, another checker's key, a client without CURVE. The folder is read again
when it changes; a key removed from it makes the checker re-open both sockets, so every client connects again and a
revoked one is refused (the Clone pattern makes the re-connection cost nothing). Binding beyond loopback without
CURVE is refused unless ``CheckerConfig.insecure``. The viewers' socket is re-opened the same way when their
subscriptions cost more than it lets them (`streaming.transport.Publisher.flood`): libzmq keeps them for as long as a
connection lasts, and bounds neither their number nor their distinct prefixes. A re-open that cannot make its sockets
(peers holding idle connections at its ports past the process's limit of open files) never ends the run: the checker
keeps its streams and goes on without them, trying again (`REOPEN_RETRY_FIRST_S`, doubling to `REOPEN_RETRY_MAX_S`)
until they open, with one line as they close and one as they are back.

Besides its socket, every message it publishes goes to the sinks it was built with (`streaming.detector.sinks.Sink`,
``send(message)``), but for the periodic re-sends: ``--webhook`` POSTs each alert and retraction the first time this
checker sends it, an alert it rebuilt from a history included (`streaming.detector.webhook.WebhookSink`). A
sink must return at once (the webhook only queues: its requests run in a thread of their own), so a slow, failing or
hanging receiver never delays the checker's loop. The sinks are one `streaming.detector.sinks.Fanout`: a sink that
raises on a message is counted and logged, and the checker, its socket and the other sinks go on.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import zmq

from graphs.common.backoff import capped_doubling
from graphs.common.errors import InputError
from graphs.common.safe_text import count_of, printable
from graphs.task_graph import TaskGraph
from streaming.checker.budget import STREAM_BUDGET
from streaming.checker.config import CheckerConfig
from streaming.checker.core import CheckerCore
from streaming.checker.refusals import LOG_EVERY_S, Unsendable
from streaming.checker.schedule import SNAPSHOT_POLL_MS
from streaming.checker.streams import RESEND_ALERTS
from streaming.curve_keys import ClientKeys, start_authenticator
from streaming.detector.sinks import Fanout, Sink
from streaming.messages import INPUT_TOPICS, Alert, Message, MessageError, MissingSteps, Retraction, encode
from streaming.service_log import LogLine
from streaming.transport import (
    POLL_MS,
    EndpointInUse,
    HandshakeCounter,
    IpcFile,
    Publisher,
    Receiver,
    bind,
    ipc_file,
    remove_ipc_file,
    subscribe,
)

if TYPE_CHECKING:
    from zmq.auth.thread import ThreadAuthenticator

# Shortest time between two greetings of new subscribers: a peer subscribing in a loop gets one `CheckerHealth` per
# gap, not one per subscription.
WELCOME_GAP_S: Final = 0.05
# Re-binding an endpoint just closed may find it busy for a moment (libzmq lets a listener go in its I/O thread: a
# few ms, most first tries at an ipc:// path): it is tried again REOPEN_GAP_S later, on a later turn of the loop, for
# up to REOPEN_BUSY_S before the re-open counts as failed and is said. Never waited for in the loop: streams are
# served meanwhile.
REOPEN_GAP_S: Final = 0.02
REOPEN_BUSY_S: Final = 2.0
# After a re-open that could not make its sockets, the next try: 0.1 s, doubled up to 1 s. Each try that fails costs a
# few system calls, and handles come back as soon as the peers holding them let go.
REOPEN_RETRY_FIRST_S: Final = 0.1
REOPEN_RETRY_MAX_S: Final = 1.0
# Alerts handed to the sinks that a rebuilt copy must not hand again, per stream slot: a stream rebuilds at most
# RESEND_ALERTS of them at once (`streaming.checker.core`), so each slot's newest are remembered.
SENT_PER_STREAM: Final = 2 * RESEND_ALERTS


@dataclass
class _Closed:
    """Sockets the checker closed to re-open and could not open again yet (`CheckerService.reopen`)."""

    why: str  # what closed them: "a client key was revoked", "a subscription flood"
    since: float  # monotonic
    both: bool  # the detectors' socket too (else the viewers' alone)
    tries: int = 1
    next_try: float = 0.0
    # Whether it counts as a failed re-open (`CheckerService.reopen_failed`), and may be said: not while its only
    # failures are an endpoint still busy within REOPEN_BUSY_S of the closing (the old listener not let go yet).
    failed: bool = False
    busy_tries: int = 0  # of ``tries``, those within that time (the backoff starts after them)
    # What its last line said, (both, error) (None: no line yet, and its end is said only after one).
    told: tuple[bool, str] | None = None

    @property
    def failed_tries(self) -> int:
        """The tries that failed, those of a port busy within REOPEN_BUSY_S of the closing left out."""
        return self.tries - self.busy_tries


class CheckerWatcher(Protocol):
    """What watches a checker from outside (the metrics endpoint: `streaming.metrics.CheckerMetrics`)."""

    def observe(self, stage: str, seconds: float) -> None:
        """One message's (``hop``) or alert's (``alert_out``) time in a stage."""

    def sent(self, message: Alert | Retraction) -> None:
        """An alert or a retraction went out for the first time (live, or an alert rebuilt from a history)."""

    def watch(self, service: CheckerService) -> None:
        """Follow this checker's counts from now on."""


class CheckerService:
    """The checker's sockets and loop around a `CheckerCore`.

    Args:
        graph: the task graph.
        config: endpoints and periods.
        ctx: ZeroMQ context (a new one if None).
        log: called with one line per refusal reason (rate-limited); None: no log, the counts only.
        metrics: the metrics endpoint's counters and histograms (``--metrics``); None: none.
        sinks: also handed every message published, in order (``--webhook``); each must return at once.
    """

    def __init__(
        self,
        graph: TaskGraph,
        config: CheckerConfig,
        ctx: zmq.Context | None = None,
        log: LogLine | None = None,
        metrics: CheckerWatcher | None = None,
        sinks: Sequence[Sink] = (),
    ) -> None:
        self.config = config
        # A sink that raises is counted and logged there (`Fanout`), as the checker's refusals are logged.
        self.sinks = Fanout(sinks, log=lambda line: self.core.refusals.log_refusal("sink_failed", self.sinks.failed,
                                                                                     line))
        self.core = CheckerCore(
            graph, max_streams=config.max_streams, stream_timeout_s=config.stream_timeout_s, log=log,
            checking=config.checking,
        )
        self.metrics = metrics
        self.log = log
        # Re-opens that could not make their sockets (each retried until they opened); an endpoint busy for less than
        # REOPEN_BUSY_S after its closing is not one (`_Closed.failed`).
        self.reopen_failed = 0
        self._closed: _Closed | None = None  # sockets waiting to open again
        self._said_closed_at = -math.inf  # when a re-open's failure was last logged (at most every LOG_EVERY_S)
        self._deaf_since: float | None = None  # while the detectors' socket is closed: up to when streams were held
        self._polled_at = time.monotonic()  # when the messages being served were received (for alert_out)
        # (stream, run, alert id, step) of the alerts handed to the sinks, oldest first, bounded: a stream freed or
        # evicted, or whose history disagreed, is rebuilt when it speaks again, and its alerts, POSTed and counted
        # already, went out rebuilt and were POSTed and counted again (`send`).
        self._sent: OrderedDict[tuple[str, str, str, int], None] = OrderedDict()
        self._sent_limit = SENT_PER_STREAM * config.max_streams
        self.ctx = ctx or zmq.Context.instance()
        self.keys: ClientKeys | None = None
        self.authenticator: ThreadAuthenticator | None = None
        if config.curve is not None:  # the ZAP handler first: a CURVE socket bound without one lets everyone in
            self.keys = ClientKeys(config.curve.clients, config.curve.extra_clients, log=log)
            self.authenticator = start_authenticator(self.ctx, self.keys)
        try:
            pub, sub = self._bind(config.bind_alerts, config.bind_events)
            with _closed_on_error(pub, sub):
                handshakes = _count_handshakes(pub, sub)
        except BaseException:  # a socket libzmq could not make (a ZMQError) too: the ZAP thread ran on
            self._stop_authenticator()
            raise
        self.alerts_endpoint = pub.getsockopt_string(zmq.LAST_ENDPOINT)
        self.events_endpoint = sub.getsockopt_string(zmq.LAST_ENDPOINT)
        self._ipc_files = self._bound_files()  # removed at close: libzmq leaves them behind
        self.publisher = Publisher(pub, guard=True)  # viewers' subscriptions are bounded: `reopen_publish`
        # The stream budget is applied by topic before decoding too: a flood from one stream costs no JSON parsing.
        self.receiver = Receiver(sub, topic_budget=STREAM_BUDGET, by_sender=config.curve is not None)
        self.handshakes = handshakes
        self.receiver.wake_on((), [counter.monitor for counter in self.handshakes])
        self._welcome_due = False
        self._last_welcome = float("-inf")
        if metrics is not None:
            self.core.observe = metrics.observe
            metrics.watch(self)

    def _bind(self, alerts: str, events: str, again: bool = False) -> tuple[zmq.Socket, zmq.Socket]:
        """Bind the output, then the input (so the forwarded first event cannot be published before it exists);
        ``again``: at the endpoints bound before (`streaming.transport.bind`)."""
        curve = self.config.curve
        pub, _ = bind(self.ctx, zmq.XPUB, alerts, "--publish", curve=curve, again=again)
        with _closed_on_error(pub):  # the second may find no file handle left for its socket (a ZMQError)
            sub, _ = bind(self.ctx, zmq.SUB, events, "--bind", curve=curve, again=again)
            with _closed_on_error(sub):
                return pub, subscribe(sub, INPUT_TOPICS)

    def watch_peers(self, malformed: int, over_budget: int) -> None:
        """After a poll: log what the receiver dropped, count refused handshakes, and greet new subscribers.

        Args:
            malformed: the receiver's malformed count before the poll.
            over_budget: the receiver's over-budget count before the poll.
        """
        stats, core = self.receiver.stats, self.core
        publishing = not self.publisher.sock.closed  # closed: waiting to open again (`retry_reopen`)
        arrived = publishing and self.publisher.new_subscribers() > 0
        # Before a flood re-opens the --publish socket: its monitor goes with it, and what it holds unread with it.
        for counter in self.handshakes:
            if counter.monitor.closed:
                continue
            for why in counter.refused():
                core.counts["denied"] += 1
                core.log_refusal("denied", core.counts["denied"], f"a handshake on {counter.endpoint}: {why}")
        foreign = self.publisher.take_foreign()
        if foreign:
            stats.malformed += foreign
            stats.last_error = "a message sent up the --publish socket, which takes only subscriptions"
        flooded = publishing and self.publisher.flood is not None
        if flooded:  # one refusal per flood: its messages were read, not decoded
            stats.malformed += 1
            stats.last_error = str(self.publisher.flood)
        if stats.malformed > malformed:
            core.log_refusal("malformed", stats.malformed, stats.last_error)
        if stats.over_budget > over_budget:
            core.log_refusal("over_budget", core.counts["over_budget"] + stats.over_budget,
                             f"a stream sent more than {STREAM_BUDGET} messages in one poll")
        if flooded:  # after its refusal's line: a re-open that fails says so in a line of its own
            self.reopen_publish()
        self._welcome_due = self._welcome_due or arrived
        now = core.monotonic()
        if self._welcome_due and now - self._last_welcome >= WELCOME_GAP_S:
            self._welcome_due, self._last_welcome = False, now
            self.send([core.health(stats)])

    def reload_keys(self) -> None:
        """Follow the client folder (at most every `streaming.curve_keys.KEY_RELOAD_S`); when a key was removed,
        re-open both sockets so that every client handshakes again and a revoked one is refused."""
        if self.keys is not None and self.keys.reload():
            self.reopen()

    def reopen(self) -> None:
        """Close both sockets and bind them again at the same endpoints; clients re-connect by themselves. Sockets
        that cannot be made again are tried again later (`retry_reopen`)."""
        if not self.receiver.sock.closed:  # the old sockets' refusals
            self.watch_peers(self.receiver.stats.malformed, self.receiver.stats.over_budget)
        self._close_sockets()
        self._open_again("a client key was revoked")

    def reopen_publish(self) -> None:
        """Close the viewers' socket and bind it again at the same endpoint, after its peers' subscriptions went past
        what the checker lets them cost (`streaming.transport.Publisher.flood`): libzmq keeps each peer's
        subscriptions for as long as its connection lasts and can drop no single one, so every viewer is cut off
        and connects again by itself (greeted, and brought up to date by the periodic re-sends). The detectors'
        socket stays as it is. A socket that cannot be made again is tried again later (`retry_reopen`).
        """
        self.receiver.wake_on([self.handshakes[0].monitor], [])  # a poll on a closed socket fails
        self.handshakes[0].close()
        self.publisher.sock.close()
        self._open_again("a subscription flood")

    def retry_reopen(self) -> None:
        """Try again to open the sockets a re-open could not make, once their next try is due (every loop turn)."""
        closed = self._closed
        if closed is not None and self.core.monotonic() >= closed.next_try:
            self._open_again(closed.why)

    @property
    def sockets_closed(self) -> bool:
        """Whether sockets a re-open could not make are waiting to be tried again (nothing sent or received there)."""
        return self._closed is not None

    def _open_again(self, why: str) -> None:
        """Bind the closed sockets again (both, or the viewers' alone), once; when they cannot be made, go on without
        them until the next try (`retry_reopen`, from a later turn of the loop).

        One bind, never a wait: the first try of a re-open once slept up to 2 s (100 tries 20 ms apart) while its
        endpoint was busy, the loop held meanwhile: no message served, no stream's silence judged.

        A peer can cause this: idle connections held open at the checker's ports past its limit of open files leave
        no handle for a new socket or its monitor, and a subscription flood then re-opens the --publish socket. The
        run ended there, its streams' state lost with it; now nothing but the sockets' own traffic stops meanwhile
        (with the viewers' socket alone closed, the detectors are still served and alerts still reach the sinks).

        Args:
            why: what closed them, for the log.
        """
        both = self.receiver.sock.closed
        curve = self.config.curve
        try:
            if both:
                pub, sub = self._bind(self.alerts_endpoint, self.events_endpoint, again=True)
                with _closed_on_error(pub, sub):
                    handshakes = _count_handshakes(pub, sub)
                self.receiver.replace_socket(sub)
            else:
                pub, _ = bind(self.ctx, zmq.XPUB, self.alerts_endpoint, "--publish", curve=curve, again=True)
                with _closed_on_error(pub):
                    handshakes = (HandshakeCounter(pub), self.handshakes[1])
        except (zmq.ZMQError, InputError) as err:
            self._not_opened(why, both, err)
            return
        self.publisher.replace_socket(pub)
        self._replace_handshakes(handshakes)
        self._ipc_files = self._bound_files()  # bound again: new files
        closed, self._closed = self._closed, None
        # Said once a line said they could not open: that line may be an earlier closing's (the viewers' socket alone,
        # then a key revoked), this one never counted as failed (its port busy for a moment only).
        if closed is not None and closed.told is not None and self.log is not None:
            seconds = self.core.monotonic() - closed.since
            failed = closed.failed_tries
            self.log(f"checker: {self._endpoints(both)} open again after {seconds:.1f} s closed"
                     + (f" ({count_of(failed, 'failed attempt')})" if failed else "")
                     + "; clients connect again by themselves",
                     level="info", endpoints=self._endpoints(both), seconds=round(seconds, 3), tries=failed)

    def _not_opened(self, why: str, both: bool, err: zmq.ZMQError | InputError) -> None:
        """A re-open could not make its sockets: the next try is scheduled, and it is logged, at most one line every
        `LOG_EVERY_S` however often a peer makes them close. A closing that came too soon after the last line is said
        once that time has passed, and one whose tries now fail for another reason (another program took the port),
        or that now holds the detectors' socket too, is said again: the last line must not leave the log telling of
        handles, of detectors served, or of sockets open again, while the checker waits for ever."""
        now = self.core.monotonic()
        closed = self._closed
        # A key revoked while the viewers' socket alone waited closes the detectors' too: another re-open that failed,
        # and a line that said the detectors were still served must not be the last word.
        if closed is None or (both and not closed.both):
            closed = self._closed = _Closed(why, now, both, told=None if closed is None else closed.told)
        else:
            closed.tries += 1
        if not closed.failed and isinstance(err, EndpointInUse) and now - closed.since < REOPEN_BUSY_S:
            # Most likely its own listener, not let go yet: tried again soon, on a later turn.
            closed.busy_tries += 1
            closed.next_try = now + REOPEN_GAP_S
            return
        if not closed.failed:
            closed.failed = True
            self.reopen_failed += 1
        closed.next_try = now + capped_doubling(REOPEN_RETRY_FIRST_S, closed.failed_tries - 1, REOPEN_RETRY_MAX_S)
        error = _why_not(err)
        if closed.told == (both, error) or now - self._said_closed_at < LOG_EVERY_S or self.log is None:
            return
        self._said_closed_at, closed.told = now, (both, error)
        meanwhile = ("nothing is received or sent until they open" if both
                     else "viewers get nothing until it opens (detectors are still served)")
        again = f"; {self.reopen_failed} times so far" if self.reopen_failed > 1 else ""
        # The tries of a port busy right after the closing are not failures (the old listener not let go yet), nor
        # said as such: 94 of them made a first line read "94 failed attempts".
        lasted = (f"; closed for {now - closed.since:.1f} s, {count_of(closed.failed_tries, 'failed attempt')}"
                  if closed.failed_tries > 1 else "")
        self.log(f"checker: could not open {self._endpoints(both)} again after {closed.why} ({error}); {meanwhile}, "
                 f"its streams and alerts are kept, and it tries again every {REOPEN_RETRY_MAX_S:g} s at most{again}"
                 f"{lasted}",
                 endpoints=self._endpoints(both), why=closed.why, error=error, count=self.reopen_failed,
                 tries=closed.failed_tries)

    def _endpoints(self, both: bool) -> str:
        return f"{self.events_endpoint} and {self.alerts_endpoint}" if both else self.alerts_endpoint

    def _replace_handshakes(self, handshakes: tuple[HandshakeCounter, HandshakeCounter]) -> None:
        """Count the refusals of re-opened sockets, their monitors waking the loop (`Receiver.wake_on`)."""
        self.receiver.wake_on([c.monitor for c in self.handshakes], [c.monitor for c in handshakes])
        self.handshakes = handshakes

    def run(self, stop: threading.Event | None = None, until: Callable[[CheckerCore], bool] | None = None) -> None:
        """Serve until ``stop`` is set or ``until(core)`` is true; every wait is bounded by `POLL_MS`.

        Args:
            stop: set it (from another thread or a signal handler) to end the loop.
            until: optional predicate checked after every poll.
        """
        stop = stop or threading.Event()
        try:
            while not stop.is_set():
                wait_ms = SNAPSHOT_POLL_MS if self.core.snapshot_pending or self._welcome_due else POLL_MS
                before = (self.receiver.stats.malformed, self.receiver.stats.over_budget)
                # Closed sockets are tried again on time, not after the longest wait (the viewers' alone: detectors
                # are served meanwhile).
                wait_s = min(wait_ms / 1000, max(0.0, self._next_try() - self.core.monotonic()))
                if self.receiver.sock.closed:  # a re-open that could not make it: nothing to poll until the next try
                    stop.wait(wait_s)
                    messages = []
                else:
                    messages = self.receiver.poll(math.ceil(wait_s * 1000))
                self._polled_at = time.monotonic()
                self.core.serve(messages, emit=self.send)
                self.watch_peers(*before)
                self.reload_keys()
                self.retry_reopen()
                self._hold_streams()
                self.send(self.core.periodic(self.config.status_period_s, self.receiver.stats), resent=True)
                if until is not None and until(self.core):
                    break
        finally:
            self.close()

    def _hold_streams(self) -> None:
        """While the detectors' socket is closed the checker hears no stream, and that silence is its own: each
        stream's last message is moved on by the time it was closed (each loop turn), so none is taken for lost for
        it, nor freed 12 stream timeouts later with its early alerts retracted to the sinks."""
        now = self.core.monotonic()  # the clock `CheckerCore.periodic` expires streams by
        if self._deaf_since is not None:
            for state in self.core.streams.values():
                state.last_heard += now - self._deaf_since
        self._deaf_since = now if self.receiver.sock.closed else None

    def _next_try(self) -> float:
        return math.inf if self._closed is None else self._closed.next_try

    def send(self, messages: list[Message], resent: bool = False) -> None:
        """Publish messages, and hand each to the sinks; one that cannot be encoded is counted (``unsendable``), goes
        nowhere, and the rest still go out.

        Args:
            messages: what to publish.
            resent: they come from `CheckerCore.periodic`, whose ``replayed`` alerts and end reports are copies for
                late viewers: those go to the socket only. An alert that `CheckerCore.serve` rebuilt from a history
                is ``replayed`` too, but no receiver had it (its step came while this checker was down, or its
                message was lost or dropped): the sinks and the metrics take it as the alert going out, unless this
                checker handed them that alert already (`_first_time`: a stream freed or evicted and back).

        While the viewers' socket waits to be opened again (`retry_reopen`), messages go to the sinks alone (encoded
        all the same, and refused as when it is open): the periodic re-sends bring the viewers up to date once it is
        back.
        """
        publishing = not self.publisher.sock.closed
        for message in messages:
            # Encoded whether or not the socket is open: a message the wire refuses reaches no sink either, and is
            # counted the same way (with the socket closed it once went to the webhook and the metrics).
            try:
                frames = encode(message)
            except MessageError as err:
                self.core.refuse(Unsendable(f"{message.stream_id}: {err}"))
                continue
            if publishing:
                self.publisher.send_encoded(frames)
            if resent and isinstance(message, Alert | MissingSteps) and message.replayed:
                continue
            if not self._first_time(message):
                continue
            self.sinks.send(message)
            if isinstance(message, Alert | Retraction):
                self._alert_out(message)

    def _first_time(self, message: Message) -> bool:
        """Whether the sinks and the metrics take a message: not an alert rebuilt from a history that this checker
        handed them already (a stream it freed or evicted, or whose history disagreed, then rebuilt: the same alert,
        to every receiver a duplicate). A retraction opens its alert's id again (docs/wire-format.md): an alert
        rebuilt there after it is new."""
        if isinstance(message, Retraction):
            for step in (message.step, message.confirmed):
                if step is not None:
                    self._sent.pop((message.stream_id, message.run, message.alert_id, step), None)
            return True
        if not isinstance(message, Alert):
            return True
        key = (message.stream_id, message.run, message.alert_id, message.step)
        if message.replayed and key in self._sent:
            return False
        self._sent[key] = None
        self._sent.move_to_end(key)
        while len(self._sent) > self._sent_limit:
            self._sent.popitem(last=False)
        return True

    def _alert_out(self, message: Alert | Retraction) -> None:
        """An alert or retraction left for the first time: counted in the metrics and, when it went out live, its
        ``alert_out`` time in its stream's status and the metrics (a rebuilt alert's cause came long before)."""
        if self.metrics is not None:
            self.metrics.sent(message)
        if isinstance(message, Alert) and message.replayed:
            return
        seconds = time.monotonic() - self._polled_at
        state = self.core.streams.get(message.stream_id)
        if state is not None:
            state.latency["alert_out_ms"] = round(1000 * seconds, 3)
        if self.metrics is not None:
            self.metrics.observe("alert_out", seconds)

    def summary_counts(self) -> dict[str, int]:
        """The numbers of `summary`, by name (the fields of its JSON log line)."""
        stats, core = self.receiver.stats, self.core
        counts = core.counts
        return {
            "received": stats.received, "streams": len(core.streams),
            "lost": sum(state.lost for state in core.streams.values()), "stream_limit": counts["stream_limit"],
            "evicted": counts["evicted"], "unknown_step": counts["unknown_step"],
            "over_budget": counts["over_budget"] + stats.over_budget, "unsendable": counts["unsendable"],
            "stream_taken": counts["stream_taken"], "denied": counts["denied"], "malformed": stats.malformed,
            "sink_failed": self.sinks.failed, "reopen_failed": self.reopen_failed,
        }  # fmt: skip

    def summary(self) -> str:
        """One line on what the checker took in and turned away, for the end of a run.

        Refused and malformed messages are otherwise silent (the wire has no place for them but the
        `CheckerHealth` viewers get), so a person who started a checker learns here that a detector was turned
        away or spoke garbage.
        """
        n = self.summary_counts()
        line = (
            f"checker: {count_of(n['received'], 'message')} received, {count_of(n['streams'], 'stream')} tracked "
            f"({n['lost']} lost); "
            f"{n['stream_limit']} refused (over the {self.core.max_streams}-stream limit), "
            f"{n['evicted']} idle streams evicted, {n['unknown_step']} unknown step, "
            f"{n['over_budget']} over budget, {n['unsendable']} unsendable, "
            f"{n['stream_taken']} on a stream id another live detector holds, "
            f"{n['denied']} handshakes refused, {n['malformed']} malformed dropped"
            + (f", {n['sink_failed']} failed in a sink" if n["sink_failed"] else "")
            + (f", {count_of(n['reopen_failed'], 'socket re-open')} failed and retried" if n["reopen_failed"] else "")
        )
        last_error = self.receiver.stats.last_error
        return printable(line + (f" (last: {last_error})" if last_error else ""))

    def close(self) -> None:
        """Close both sockets (LINGER 0: never blocks) and remove their ``ipc://`` files, then stop the
        authenticator."""
        self._close_sockets()
        for file in self._ipc_files:
            remove_ipc_file(file)
        self._stop_authenticator()

    def _bound_files(self) -> list[IpcFile | None]:
        return [ipc_file(self.alerts_endpoint), ipc_file(self.events_endpoint)]

    def _close_sockets(self) -> None:
        for counter in self.handshakes:
            counter.close()
        self.publisher.sock.close()
        self.receiver.sock.close()

    def _stop_authenticator(self) -> None:
        if self.authenticator is not None:
            self.authenticator.stop()
            self.authenticator = None


_freeze_lock = threading.Lock()
_freezers = 0  # checkers of this process serving with their set-up frozen (`_freeze_setup`)
_thaw_at_end = False  # whether the last of them unfreezes: not when the process had frozen objects of its own


def _freeze_setup() -> None:
    """Freeze what the process holds (`gc.freeze`) as a checker starts serving.

    ``gc.freeze`` is one switch for the whole process: the first of two checkers of one process to stop unfroze the
    other's set-up, and a checker stopping inside a program that had frozen its own heap (before a fork, as the gc
    docs advise) unfroze that program's too. The last checker to stop unfreezes (`_thaw_setup`), and only when
    nothing was frozen before the first one froze.
    """
    global _freezers, _thaw_at_end
    with _freeze_lock:
        if _freezers == 0:
            _thaw_at_end = gc.get_freeze_count() == 0
        _freezers += 1
        gc.freeze()


def _thaw_setup() -> None:
    """The end of `_freeze_setup`, as a checker stops: a checker run inside another program (a test) leaves a heap
    it found unfrozen as it found it."""
    global _freezers
    with _freeze_lock:
        _freezers -= 1
        if _freezers == 0 and _thaw_at_end:
            gc.unfreeze()


@contextlib.contextmanager
def _closed_on_error(*socks: zmq.Socket) -> Iterator[None]:
    """Close ``socks`` if the block raises, and remove the ``ipc://`` files they bound: a re-open that failed
    half-way (no file handle left for its next socket or monitor) left the sockets it had made open, each holding
    file handles, and the listeners their ports, in a process that had just run out of handles; and libzmq leaves a
    closed socket's file behind, so a checker whose --bind path was in use kept its --publish file in the folder."""
    try:
        yield
    except BaseException:
        files = [ipc_file(sock.getsockopt_string(zmq.LAST_ENDPOINT)) for sock in socks]
        for sock in socks:
            sock.close()
        for file in files:
            remove_ipc_file(file)
        raise


def _count_handshakes(pub: zmq.Socket, sub: zmq.Socket) -> tuple[HandshakeCounter, HandshakeCounter]:
    """A `HandshakeCounter` on each of two sockets just bound; if the second cannot be made, the first is closed
    before the error goes on (its monitor socket would be left open)."""
    first = HandshakeCounter(pub)
    try:
        return first, HandshakeCounter(sub)
    except BaseException:
        first.close()
        raise


def _why_not(err: zmq.ZMQError | InputError) -> str:
    """Why a re-open could not make its sockets, for its log line: the error, and for a process out of file handles
    (sockets and monitors each take one), who used them up."""
    if isinstance(err, InputError):
        return str(err)
    hint = "; connections held open at its ports used up the process's file handles (ulimit -n)" if (
        err.errno in (errno.EMFILE, errno.ENFILE)) else ""
    return f"{err.strerror}{hint}"


def run_checker(
    graph_path: str,
    config: CheckerConfig,
    ready: Callable[[str, str], None] | None = None,
    stop: threading.Event | None = None,
    report: Callable[..., None] | None = None,
    until: Callable[[CheckerCore], bool] | None = None,
    log: LogLine | None = None,
    metrics: CheckerWatcher | None = None,
    sinks: Sequence[Sink] = (),
) -> None:
    """Load a graph and serve until interrupted (the ``stream-detect checker`` command and child process).

    Args:
        graph_path: task graph JSON file.
        config: endpoints and periods.
        ready: called with ``(events_endpoint, alerts_endpoint)`` once both sockets are bound.
        stop: set it to end the loop (from another thread or a signal handler).
        report: called with `CheckerService.summary` and, as keywords, its numbers (`summary_counts`) when the
            checker stops, Ctrl-C included.
        until: optional predicate checked after every poll; true ends the loop (see `CheckerService.run`).
        log: called with a line per refusal reason (rate-limited).
        metrics: the metrics endpoint's counters and histograms (``--metrics``); None: none.
        sinks: also handed every message published (``--webhook``).
    """
    from graphs.task_graph import load_graph

    service = CheckerService(load_graph(graph_path), config, log=log, metrics=metrics, sinks=sinks)
    # Everything set up so far (the modules, the graph, the sockets) lives as long as the checker: out of the cyclic
    # collector's way, a full collection no longer walks it. Once every few seconds under 100 streams one took 22-38
    # ms, every key-step meanwhile waiting (benchmarks/checker_load.py: p99 8-32 ms, 3.7-8.1 ms frozen).
    _freeze_setup()
    try:  # a Ctrl-C right after ``ready`` must still close the sockets and report
        if ready is not None:
            ready(service.events_endpoint, service.alerts_endpoint)
        service.run(stop, until)
    finally:
        _thaw_setup()
        service.close()
        if report is not None:
            report(service.summary(), **service.summary_counts())
