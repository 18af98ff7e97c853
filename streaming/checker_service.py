"""The checker process: one `graphs.PreconditionChecker` per stream, alerts and status out.

Input: `KeyStepEvent` / `Heartbeat` from any number of detectors on a bound SUB socket.
Output (bound PUB socket): an `Alert` for each key-step done before its pre-conditions, every new
`KeyStepEvent` forwarded once, and a `Status` per stream on every change; every `HEARTBEAT_S` each
stream's status and its most recent alerts are re-sent (``replayed=True``) for late or reconnecting
viewers.

Restart safety (Clone pattern): every incoming message carries the stream's full confirmed-step
history. `CheckerCore` applies only the part of the history it has not applied yet, so a lost or
duplicated message changes nothing, and a freshly started checker rebuilds each stream with the very
same checker object (observing the history in order), re-sending the alerts of the steps it had not
seen (``replayed=True``) with their stable ``alert_id`` so viewers de-duplicate them. A missing
``seq`` is counted as a gap; it costs no state.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import zmq

from graphs.checker import PreconditionChecker
from graphs.errors import InputError
from graphs.task_graph import START, TaskGraph
from streaming.messages import Alert, Heartbeat, KeyStepEvent, Message, Status
from streaming.transport import (
    DEFAULT_ALERTS_ENDPOINT,
    DEFAULT_EVENTS_ENDPOINT,
    HEARTBEAT_S,
    POLL_MS,
    Publisher,
    Receiver,
    bind,
    subscribe,
)

RESEND_ALERTS = 32  # most recent alerts per stream re-sent with every periodic status


@dataclass(frozen=True)
class CheckerConfig:
    """Settings of the checker process.

    Args:
        bind_events: endpoint detectors connect to (SUB, bound).
        bind_alerts: endpoint viewers connect to (PUB, bound).
        status_period_s: how often each stream's status is re-sent even without change.
        max_streams: most streams tracked at once (a bound on memory from untrusted peers); when full, the
            earliest-tracked stream that has ended makes room for a new one.
    """

    bind_events: str = DEFAULT_EVENTS_ENDPOINT
    bind_alerts: str = DEFAULT_ALERTS_ENDPOINT
    status_period_s: float = HEARTBEAT_S
    max_streams: int = 256

    def __post_init__(self) -> None:
        if not self.status_period_s > 0:
            raise InputError(f"CheckerConfig.status_period_s = {self.status_period_s} must be > 0")
        if self.max_streams < 1:
            raise InputError(f"CheckerConfig.max_streams = {self.max_streams} must be >= 1")


@dataclass
class StreamState:
    """What the checker keeps for one stream."""

    session: str
    checker: PreconditionChecker
    last_seq: int = -1
    gaps: int = 0
    alerts: int = 0
    current: int | None = None
    frames: int = 0
    dropped: int = 0
    fps: float = 0.0
    ended: bool = False
    seq_out: int = 0
    last_snapshot: float = 0.0  # when the periodic snapshot last went out (not touched by on-change statuses)
    forwarded: set[int] = field(default_factory=set)
    recent_alerts: deque[Alert] = field(default_factory=lambda: deque(maxlen=RESEND_ALERTS))


class CheckerCore:
    """The checker's logic without sockets: messages in, messages out.

    Args:
        graph: the task graph every stream is checked against.
        clock: wall clock for outgoing timestamps (a constructor argument so tests can fix it).
        max_streams: most streams tracked at once; an ended stream gives its place to a new one.
    """

    def __init__(self, graph: TaskGraph, clock: Callable[[], float] = time.time, max_streams: int = 256) -> None:
        self.graph = graph
        self.clock = clock
        self.max_streams = max_streams
        self.streams: dict[str, StreamState] = {}
        self.refused = 0  # messages from streams beyond max_streams (shown by CheckerService.summary)

    def handle(self, message: Message) -> list[Message]:
        """Apply one incoming message.

        Args:
            message: a `KeyStepEvent` or `Heartbeat` (other kinds are ignored).

        Returns:
            Messages to publish: alerts for newly applied steps, the forwarded event if new, a status.
        """
        if not isinstance(message, KeyStepEvent | Heartbeat):
            return []
        state = self.streams.get(message.stream_id)
        if state is None and len(self.streams) >= self.max_streams:
            # A long-running checker sees many detector runs; those that ended must not fill it for good.
            ended = next((sid for sid, s in self.streams.items() if s.ended), None)
            if ended is None:
                self.refused += 1
                return []
            del self.streams[ended]
        if state is None or state.session != message.session:
            state = self._start_over(message, state)
        if message.seq <= state.last_seq:
            return []  # old or duplicated: its history is a prefix of what was applied
        applied = tuple(v.step for v in state.checker.history)
        if tuple(message.history[: len(applied)]) != applied:
            # Within a session the history only grows; one that disagrees cannot be continued, so the stream
            # starts over exactly as for a new session (counters and re-sent alerts included).
            state = self._start_over(message, state)
        if state.last_seq >= 0:
            state.gaps += message.seq - state.last_seq - 1
        state.last_seq = message.seq
        # Alerts go out first: they are what a person waits for.
        out: list[Message] = list(self._apply_history(message.stream_id, state, message))
        if isinstance(message, KeyStepEvent) and message.index not in state.forwarded:
            state.forwarded.add(message.index)
            out.append(message)
        if isinstance(message, Heartbeat):
            state.current, state.frames, state.dropped = message.current, message.frames, message.dropped
            state.fps, state.ended = message.fps, message.ended
        out.append(self.status(message.stream_id))
        return out

    def _start_over(self, message: KeyStepEvent | Heartbeat, previous: StreamState | None) -> StreamState:
        """A fresh state for the message's stream; outgoing ``seq`` keeps counting so viewers see no reset."""
        state = StreamState(
            message.session,
            PreconditionChecker(self.graph),
            seq_out=previous.seq_out if previous else 0,
            last_snapshot=self.clock(),
        )
        self.streams[message.stream_id] = state
        return state

    def _apply_history(self, stream_id: str, state: StreamState, message: KeyStepEvent | Heartbeat) -> list[Alert]:
        """Observe the part of the message's history not applied yet (a prefix of it is, see `handle`)."""
        history = message.history
        alerts: list[Alert] = []
        live_index = message.index if isinstance(message, KeyStepEvent) else -1
        for index in range(len(state.checker.history), len(history)):
            verdict = state.checker.observe(history[index])
            if not verdict.is_mistake:
                continue
            state.alerts += 1
            alerts.append(
                alert := Alert(
                    stream_id=stream_id,
                    seq=self._next_seq(state),
                    timestamp=self.clock(),
                    alert_id=f"{stream_id}#{index}",
                    session=state.session,
                    step=verdict.step,
                    step_name=self._name(verdict.step),
                    index=index,
                    missing=tuple(int(m) for m in verdict.missing if m != START),
                    missing_names=tuple(self._name(m) for m in verdict.missing if m != START),
                    undefined=verdict.undefined,
                    event_timestamp=message.timestamp,
                    replayed=index != live_index,
                )
            )
            state.recent_alerts.append(alert)
        return alerts

    def status(self, stream_id: str) -> Status:
        """The current `Status` message of a stream (also used for the periodic re-send)."""
        state = self.streams[stream_id]
        return Status(
            stream_id=stream_id,
            seq=self._next_seq(state),
            timestamp=self.clock(),
            session=state.session,
            done=state.checker.done,
            allowed=state.checker.allowed_next(),
            current=state.current,
            alerts=state.alerts,
            frames=state.frames,
            dropped=state.dropped,
            fps=state.fps,
            gaps=state.gaps,
            ended=state.ended,
        )

    def periodic(self, period_s: float) -> list[Alert | Status]:
        """The periodic snapshot of every stream whose last snapshot is older than ``period_s``.

        Each due stream's most recent alerts (`RESEND_ALERTS`, ``replayed=True``, same ``alert_id``) and
        its status: a viewer that joined late, or reconnected to a restarted checker, catches up
        (the snapshot half of the Clone pattern); consumers de-duplicate alerts by ``alert_id``.
        The period runs on its own clock: the status sent on every change does not postpone it, or a
        busy stream (a heartbeat every period) would never re-send the alert a slow-joining viewer missed.

        Args:
            period_s: re-send period in seconds.

        Returns:
            Messages to publish.
        """
        now = self.clock()
        out: list[Alert | Status] = []
        for sid, state in list(self.streams.items()):
            if now - state.last_snapshot < period_s:
                continue
            state.last_snapshot = now
            out.extend(
                replace(a, seq=self._next_seq(state), timestamp=now, replayed=True) for a in state.recent_alerts
            )
            out.append(self.status(sid))
        return out

    def _name(self, node: int | str) -> str:
        try:
            return self.graph.name_of(node)
        except ValueError:
            return f"step {node}"

    @staticmethod
    def _next_seq(state: StreamState) -> int:
        state.seq_out += 1
        return state.seq_out - 1


class CheckerService:
    """The checker's sockets and loop around a `CheckerCore`.

    Args:
        graph: the task graph.
        config: endpoints and periods.
        ctx: ZeroMQ context (a new one if None).
    """

    def __init__(self, graph: TaskGraph, config: CheckerConfig, ctx: zmq.Context | None = None) -> None:
        self.config = config
        self.core = CheckerCore(graph, max_streams=config.max_streams)
        self.ctx = ctx or zmq.Context.instance()
        # Bind the output first so the forwarded first event cannot be published before it exists.
        pub, self.alerts_endpoint = bind(self.ctx, zmq.PUB, config.bind_alerts, "--publish")
        try:
            sub, self.events_endpoint = bind(self.ctx, zmq.SUB, config.bind_events, "--bind")
        except InputError:
            pub.close()
            raise
        self.publisher = Publisher(pub)
        self.receiver = Receiver(subscribe(sub, (b"keystep/", b"heartbeat/")))

    def run(self, stop: threading.Event | None = None, until: Callable[[CheckerCore], bool] | None = None) -> None:
        """Serve until ``stop`` is set or ``until(core)`` is true; every wait is bounded by `POLL_MS`.

        Args:
            stop: set it (from another thread or a signal handler) to end the loop.
            until: optional predicate checked after every poll.
        """
        stop = stop or threading.Event()
        try:
            while not stop.is_set():
                for message in self.receiver.poll(POLL_MS):
                    for out in self.core.handle(message):
                        self.publisher.send(out)
                for periodic in self.core.periodic(self.config.status_period_s):
                    self.publisher.send(periodic)
                if until is not None and until(self.core):
                    break
        finally:
            self.close()

    def summary(self) -> str:
        """One line on what the checker took in and turned away, for the end of a run.

        Refused and malformed messages are otherwise silent (the wire has no place for them), so a
        person who started a checker learns here that a detector was turned away or spoke garbage.
        """
        stats = self.receiver.stats
        line = (
            f"checker: {stats.received} messages received, {len(self.core.streams)} streams tracked; "
            f"{self.core.refused} refused (over the {self.core.max_streams}-stream limit), "
            f"{stats.malformed} malformed dropped"
        )
        return line + (f" (last: {stats.last_error})" if stats.last_error else "")

    def close(self) -> None:
        """Close both sockets (LINGER 0: never blocks)."""
        self.publisher.sock.close()
        self.receiver.sock.close()


def run_checker(
    graph_path: str,
    config: CheckerConfig,
    ready: Callable[[str, str], None] | None = None,
    stop: threading.Event | None = None,
    report: Callable[[str], None] | None = None,
    until: Callable[[CheckerCore], bool] | None = None,
) -> None:
    """Load a graph and serve until interrupted (the ``stream-detect checker`` command and child process).

    Args:
        graph_path: task graph JSON file.
        config: endpoints and periods.
        ready: called with ``(events_endpoint, alerts_endpoint)`` once both sockets are bound.
        stop: set it to end the loop (the child process sets it on SIGTERM).
        report: called with `CheckerService.summary` when the checker stops, Ctrl-C included.
        until: optional predicate checked after every poll; true ends the loop (see `CheckerService.run`).
    """
    from graphs.task_graph import load_graph

    service = CheckerService(load_graph(graph_path), config)
    try:  # a Ctrl-C right after ``ready`` must still close the sockets and report
        if ready is not None:
            ready(service.events_endpoint, service.alerts_endpoint)
        service.run(stop, until)
    finally:
        service.close()
        if report is not None:
            report(service.summary())
