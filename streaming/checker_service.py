"""The checker process: one `graphs.PreconditionChecker` per stream, alerts and status out.

Input: `KeyStepEvent` / `Heartbeat` / `KeyStepOnset` from any number of detectors on a bound SUB socket
(subscribed to `streaming.messages.INPUT_TOPICS`).
Output (bound XPUB socket, which sends as a PUB does): an `Alert` for each key-step done before its
pre-conditions, a `StepEvent` for every new key-step, and a `Status` per stream on every change; every
`HEARTBEAT_S` each stream's status and its most recent alerts are re-sent (``replayed=True``) for late or
reconnecting viewers, with one `CheckerHealth`. A new subscription is greeted at once (within `WELCOME_GAP_S` of
the last greeting) with a `CheckerHealth`: a viewer subscribed to it knows from then on that it misses nothing.

Beyond the binary pre-condition check, the graph's procedure questions (`graphs.procedure_queries`): each alert names
its missing pre-condition most likely forgotten (the missing-step score), each status orders the allowed steps by
their future-step probability, and a session that ends (its detector's last heartbeat, or a new session on the
stream) gets a `MissingSteps` report of the required steps it never did, re-sent with the snapshots like alerts.
A lost stream is not an ended session and is never reported, not even when it is freed: its detector died without
saying so, and the steps it did not report may have been done while nobody watched.

Restart safety (Clone pattern): every incoming message carries the stream's full confirmed-step
history. `CheckerCore` applies only the part of the history it has not applied yet, so a lost or
duplicated message changes nothing, and a freshly started checker rebuilds each stream with the very
same checker object (observing the history in order), re-sending the alerts of the steps it had not
seen (``replayed=True``) with their stable ``alert_id`` so viewers de-duplicate them. A missing
``seq`` is counted as a gap (a sender numbers all its messages of a stream with one counter, onsets included); it
costs no state.

No message stops the checker, and none may cost it much (peers are not trusted):

- a message the checker will not apply raises a named `Refused` error (`UnknownStep`, `StreamLimit`,
  `OverBudget`); `CheckerCore.serve` counts it by name, logs it (rate-limited) and serves the next one. The counts
  are in the summary line and in every `CheckerHealth`;
- the work of one message is bounded: a replayed history (a new session, a restarted checker) is applied in one go
  and sends one status and at most `RESEND_ALERTS` of the alerts it rebuilds (the rest are counted in the status);
- each poll, a stream gets at most `STREAM_BUDGET` messages, and all replays together at most `REPLAY_BUDGET`
  history items, served to the stream that has waited longest first; a message cheaper than `CHEAP_ITEMS` new
  items (what a live stream sends) is never held back by a replay. What is dropped is sent again: every detector
  message carries the whole history;
- streams have a life cycle: one silent for ``stream_timeout_s`` is marked lost, and an ended or lost stream is
  freed after `FORGET_AFTER` timeouts, or evicted (the longest idle first) when a new stream needs its slot; a live
  stream is never evicted;
- ``seq`` only counts gaps: a sender whose ``seq`` jumps (or starts over) is followed, never frozen.

With CURVE (``CheckerConfig.curve``) both sockets are CURVE servers and a ZAP authenticator lets in only the clients
whose public keys are in the client folder. Refused handshakes are counted (``denied``) by a monitor on each socket,
whatever refused them: ZAP, another checker's key, a client without CURVE. The folder is read again
when it changes; a key removed from it makes the checker re-open both sockets, so every client connects again and a
revoked one is refused (the Clone pattern makes the re-connection cost nothing). Binding beyond loopback without
CURVE is refused unless ``CheckerConfig.insecure``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar, Final, Protocol

import zmq

from graphs.checker import NO_EVIDENCE, PreconditionChecker, StepEvidence, StepVerdict
from graphs.checker_settings import CheckerSettings
from graphs.common.errors import InputError, RunError
from graphs.common.safe_text import printable
from graphs.probabilistic_checker import ProbabilisticChecker
from graphs.procedure_queries import ProcedureQueries
from graphs.task_graph import START, TaskGraph
from streaming.curve_keys import ClientKeys, CurveServer, start_authenticator
from streaming.messages import (
    CHECKER_STREAM,
    INPUT_TOPICS,
    MAX_LATENCY_MS,
    Alert,
    CheckerHealth,
    Heartbeat,
    KeyStepEvent,
    KeyStepOnset,
    Message,
    MessageError,
    MissingSteps,
    Retraction,
    Status,
    StepEvent,
    run_of,
)
from streaming.stage_latency import DETECTOR_STAGES, latency_field
from streaming.transport import (
    DEFAULT_ALERTS_ENDPOINT,
    DEFAULT_EVENTS_ENDPOINT,
    HEARTBEAT_S,
    POLL_MS,
    HandshakeCounter,
    Publisher,
    Receiver,
    ReceiveStats,
    bind,
    check_endpoint,
    check_exposure,
    subscribe,
)

if TYPE_CHECKING:
    from zmq.auth.thread import ThreadAuthenticator

RESEND_ALERTS: Final = 32  # most recent alerts per stream re-sent with every periodic status, and per replay
STREAM_TIMEOUT_S: Final = 5.0  # a stream silent this long is lost (10 heartbeats missed)
MAX_STREAM_TIMEOUT_S: Final = 3600.0
FORGET_AFTER: Final = 12  # an ended or lost stream is freed after this many stream timeouts (60 s by default)
STREAM_BUDGET: Final = 8  # messages one stream may have served per poll (a detector sends about one)
CHEAP_ITEMS: Final = 64  # a message that applies at most this many new history items is served at once
REPLAY_BUDGET: Final = 4096  # history items all replays of one poll may apply together: one full history (~10 ms)
SEQ_WINDOW: Final = 1024  # a seq this close behind the last one is a duplicate; farther, the sender started over
# Messages one periodic call may re-send; streams left over are due at the next call, which comes within
# SNAPSHOT_POLL_MS. A live key-step waits for at most one such slice (32 messages, about 1 ms), where 512 in one go
# held the loop for 20-50 ms, the whole p99 of 100 streams at 10 key-steps a second.
SNAPSHOT_BUDGET: Final = 32
SNAPSHOT_POLL_MS: Final = 1
LOG_EVERY_S: Final = 10.0  # at most one log line per refusal reason this often (a flood must not flood the log)
# Shortest time between two greetings of new subscribers: a peer subscribing in a loop gets one `CheckerHealth` per
# gap, not one per subscription.
WELCOME_GAP_S: Final = 0.05
REOPEN_TRIES: Final = 100  # re-binding an endpoint just closed may find it busy for a moment: tries, REOPEN_GAP_S apart
REOPEN_GAP_S: Final = 0.02
# Answers of `_likely_next` kept, for histories of at most NEXT_CACHE_ITEMS steps (a real session's are far shorter;
# the bound keeps a hostile peer's long histories from filling memory: at most about 16 MiB).
NEXT_CACHE: Final = 1024
NEXT_CACHE_ITEMS: Final = 256
SCORE_DECIMALS: Final = 4  # scores on the wire: 2048 of them take at most 14 KiB, so a status always fits


class Refused(Exception):
    """A message the checker will not apply; ``reason`` names the counter it is counted under."""

    reason: ClassVar[str] = ""


class UnknownStep(Refused):
    """The message names a step id that is not in the task graph (a detector for another procedure)."""

    reason = "unknown_step"


class StreamLimit(Refused):
    """Every stream slot is taken by a stream that is not idle: the new stream is turned away."""

    reason = "stream_limit"


class OverBudget(Refused):
    """The stream used its share of this poll; its next message, which carries the whole history, is served."""

    reason = "over_budget"


class Unsendable(Refused):
    """An output could not be encoded (a defect: by construction every output fits the wire)."""

    reason = "unsendable"


DETECTOR_LATENCY: Final = tuple(latency_field(stage) for stage in DETECTOR_STAGES)  # a heartbeat's, kept per stream
# CheckerCore.counts keys; "denied" (refused handshakes) is counted by `CheckerService` from its sockets' monitors.
COUNTED: Final = ("stream_limit", "evicted", "unknown_step", "over_budget", "unsendable", "denied")


@dataclass(frozen=True)
class CheckerConfig:
    """Settings of the checker process.

    Args:
        bind_events: endpoint detectors connect to (SUB, bound).
        bind_alerts: endpoint viewers connect to (PUB, bound).
        status_period_s: how often each stream's status is re-sent even without change.
        max_streams: most streams tracked at once (a bound on memory from untrusted peers); when full, the idle
            (ended or lost) stream that has waited longest makes room for a new one.
        stream_timeout_s: a stream with no message for this long is marked lost (``--stream-timeout``); it is
            freed after `FORGET_AFTER` times as long.
        curve: the checker's keys and client folder (``--curve-secret``, ``--curve-clients``); None: no CURVE.
        insecure: bind beyond loopback without CURVE (``--insecure``); refused otherwise.
        checking: which pre-condition checker each stream gets (``--checker``, ``--alert-threshold``).
    """

    bind_events: str = DEFAULT_EVENTS_ENDPOINT
    bind_alerts: str = DEFAULT_ALERTS_ENDPOINT
    status_period_s: float = HEARTBEAT_S
    max_streams: int = 256
    stream_timeout_s: float = STREAM_TIMEOUT_S
    curve: CurveServer | None = None
    insecure: bool = False
    checking: CheckerSettings = field(default_factory=CheckerSettings)

    def __post_init__(self) -> None:
        if not self.status_period_s > 0:
            raise InputError(f"CheckerConfig.status_period_s = {self.status_period_s} must be > 0")
        if self.max_streams < 1:
            raise InputError(f"CheckerConfig.max_streams = {self.max_streams} must be >= 1")
        check_endpoint(self.bind_events, "--bind")  # now, before a run loads models or renders the demo video
        check_endpoint(self.bind_alerts, "--publish")
        for endpoint, option in ((self.bind_events, "--bind"), (self.bind_alerts, "--publish")):
            check_exposure(endpoint, option, self.curve is not None, self.insecure)
        lowest = 2 * HEARTBEAT_S  # one lost heartbeat must not mark a live stream lost
        if not lowest <= self.stream_timeout_s <= MAX_STREAM_TIMEOUT_S:  # also refuses NaN
            raise InputError(f"--stream-timeout {self.stream_timeout_s}: must be {lowest:g}..{MAX_STREAM_TIMEOUT_S:g}"
                             f" seconds (at least two heartbeat periods)")


@dataclass
class StreamState:
    """What the checker keeps for one stream."""

    session: str
    checker: PreconditionChecker | ProbabilisticChecker
    last_heard: float  # monotonic time of the last message applied
    applied: tuple[int, ...] = ()  # the history applied so far (the last message's history: a prefix check is ==)
    last_seq: int = -1  # seq of the last key-step or heartbeat applied: one at or just behind it is a duplicate
    heard_seq: int = -1  # the highest seq heard from the session, of any kind: a jump past it is a gap
    gaps: int = 0
    alerts: int = 0
    current: int | None = None
    frames: int = 0
    dropped: int = 0
    fps: float = 0.0
    ended: bool = False
    lost: bool = False
    seq_out: int = 0
    last_snapshot: float = 0.0  # when the periodic snapshot last went out (not touched by on-change statuses)
    forwarded: set[int] = field(default_factory=set)
    recent_alerts: deque[Alert] = field(default_factory=lambda: deque(maxlen=RESEND_ALERTS))
    allowed: tuple[tuple[int, ...], tuple[float, ...]] = ((), ())  # allowed steps, likeliest first; probabilities
    report: MissingSteps | None = None  # the session's end report, once sent (re-sent with the snapshots)
    early: dict[int, Alert] = field(default_factory=dict)  # early alerts (on an onset) not confirmed yet, by index
    # (steps observed, done) as of the last status: it only changes when a step is observed, and a stream's status
    # goes out with every message it sends.
    progress: tuple[int, tuple[int, ...]] = (-1, ())
    latency: dict[str, float] = field(default_factory=dict)  # the status's <stage>_ms fields (`stage_latency`)
    evidence_now: StepEvidence = NO_EVIDENCE  # the last heartbeat's evidence: what the end-of-session report reads

    @property
    def run(self) -> str:
        """What viewers call this detector run (`run_of` its session: never the token)."""
        return run_of(self.session)

    @property
    def idle(self) -> bool:
        """Ended or lost: the stream may be evicted for a new one."""
        return self.ended or self.lost


class CheckerCore:
    """The checker's logic without sockets: messages in, messages out.

    Args:
        graph: the task graph every stream is checked against.
        clock: wall clock for outgoing timestamps and the periodic snapshot (an argument so tests can fix it).
        max_streams: most streams tracked at once; an idle stream gives its place to a new one.
        stream_timeout_s: a stream silent this long is lost.
        monotonic: the clock of stream life cycles.
        log: called with a line for each kind of refusal (first occurrence, then every `LOG_EVERY_S`).
        checking: which pre-condition checker each stream gets.
    """

    def __init__(
        self,
        graph: TaskGraph,
        clock: Callable[[], float] = time.time,
        max_streams: int = 256,
        stream_timeout_s: float = STREAM_TIMEOUT_S,
        monotonic: Callable[[], float] = time.monotonic,
        log: Callable[[str], None] | None = None,
        checking: CheckerSettings | None = None,
    ) -> None:
        self.graph = graph
        self.checking = checking or CheckerSettings()
        self.clock = clock
        self.max_streams = max_streams
        self.stream_timeout_s = stream_timeout_s
        self.monotonic = monotonic
        self.log = log
        self.streams: dict[str, StreamState] = {}
        self.counts: Counter[str] = Counter({name: 0 for name in COUNTED})
        self.last_refusal = ""
        self._steps = frozenset(graph.step_ids)
        self._names = dict(zip(graph.step_ids, graph.step_names, strict=True))
        self.queries = ProcedureQueries(graph)
        # The allowed steps and their probabilities depend only on the last step and the set done, which cameras
        # running one procedure share: answered once per state (`_likely_next`), up to `NEXT_CACHE` states.
        self._next_cache: OrderedDict[tuple[int | None, frozenset[int]], tuple[tuple[int, ...], tuple[float, ...]]]
        self._next_cache = OrderedDict()
        skipped = set(graph.optional_steps) | set(graph.removed_steps)
        self._required = tuple(s for s in graph.step_ids if s not in skipped)  # what an ended session must have done
        self._waiting: dict[str, float] = {}  # stream -> when its replay was first deferred
        self._logged: dict[str, float] = {}
        self._last_health = float("-inf")
        self._health_seq = 0
        self.snapshot_pending = False  # the last periodic call left due streams for the next (see SNAPSHOT_POLL_MS)
        self.observe: Callable[[str, float], None] | None = None  # called with ("hop", seconds) per message (metrics)

    @property
    def refused(self) -> int:
        """Messages refused at the stream limit."""
        return self.counts["stream_limit"]

    # -- one poll -----------------------------------------------------------------------------
    def serve(
        self, messages: Iterable[Message], emit: Callable[[list[Message]], None] | None = None
    ) -> list[Message]:
        """Apply one poll's messages with each stream's budget; a refused message is counted and skipped.

        Messages that apply at most `CHEAP_ITEMS` new steps are served in arrival order. Replays (more new steps)
        are held to the end: a later message of the same stream supersedes an earlier one (it carries the whole
        history), and they share `REPLAY_BUDGET`, the stream that has waited longest first; a replay over budget
        is dropped (counted as ``over_budget``) and served from the stream's next message.

        Args:
            messages: the messages of one poll, in arrival order.
            emit: if given, called with each message's outputs as soon as they are built (the service publishes
                them at once: the first key-step of a large poll does not wait for the last one to be applied).

        Returns:
            Messages to publish (none with ``emit``: they went to it).
        """
        out: list[Message] = []
        put = out.extend if emit is None else emit
        taken: Counter[str] = Counter()
        replays: dict[str, tuple[int, KeyStepEvent | Heartbeat]] = {}
        for arrival, message in enumerate(messages):
            if not isinstance(message, KeyStepEvent | Heartbeat | KeyStepOnset):
                continue
            sid = message.stream_id
            taken[sid] += 1
            if isinstance(message, KeyStepOnset):  # an early alert is as urgent as a live step: served in order
                if taken[sid] > STREAM_BUDGET:
                    self.refuse(OverBudget(f"{sid}: more than {STREAM_BUDGET} messages in one poll"))
                else:
                    put(self._guarded(message))
                continue
            if taken[sid] > STREAM_BUDGET:
                self.refuse(OverBudget(f"{sid}: more than {STREAM_BUDGET} messages in one poll"))
            elif sid in replays or self._cost(message) > CHEAP_ITEMS:
                if sid in replays:  # taken in, and superseded by this one (which carries its history): not a gap
                    self._superseded(replays[sid][1])
                replays[sid] = (arrival, message)
            else:
                put(self._guarded(message))
        budget = REPLAY_BUDGET
        never = float("inf")
        waited_longest_first = sorted(replays.items(), key=lambda kv: (self._waiting.get(kv[0], never), kv[1][0]))
        for sid, (_arrival, message) in waited_longest_first:
            cost = self._cost(message)
            if cost > budget:
                if sid not in self._waiting and len(self._waiting) < 2 * self.max_streams:
                    self._waiting[sid] = self.monotonic()
                self.refuse(OverBudget(f"{sid}: replay of {cost} steps deferred to a later poll"))
                continue
            budget -= cost
            self._waiting.pop(sid, None)
            put(self._guarded(message))
        return out

    def _guarded(self, message: KeyStepEvent | Heartbeat | KeyStepOnset) -> list[Message]:
        """`handle` (or `onset`), with a refusal or an unencodable output counted and logged instead of raised."""
        # Clocks of two machines: 0 when the detector's runs ahead of ours, capped where it lags by hours.
        hop = min(max(self.clock() - message.timestamp, 0.0), MAX_LATENCY_MS / 1000)
        if self.observe is not None:
            self.observe("hop", hop)
        state = self.streams.get(message.stream_id)
        if state is not None:
            state.latency["hop_ms"] = round(1000 * hop, 3)
        try:
            return self.onset(message) if isinstance(message, KeyStepOnset) else self.handle(message)
        except Refused as err:
            self.refuse(err)
        except MessageError as err:  # an output the wire refuses: a defect, contained to this message
            self.refuse(Unsendable(f"{message.stream_id}: {err}"))
        return []

    def refuse(self, err: Refused) -> None:
        """Count a refused message under its reason, remember it, and log it (rate-limited per reason)."""
        self.counts[err.reason] += 1
        self.last_refusal = f"{err.reason}: {err}"
        self.log_refusal(err.reason, self.counts[err.reason], str(err))

    def log_refusal(self, reason: str, count: int, detail: str) -> None:
        """Log a refusal: the first of its reason at once, then at most one line per reason every `LOG_EVERY_S`.

        Args:
            reason: the counter's name (``malformed``, ``denied``, or a `Refused` reason).
            count: the counter's value now.
            detail: what was refused, and why.
        """
        now = self.monotonic()
        if self.log is not None and now - self._logged.get(reason, float("-inf")) >= LOG_EVERY_S:
            self._logged[reason] = now
            self.log(f"checker: refused ({reason}, {count} so far): {printable(detail)}")

    def _cost(self, message: KeyStepEvent | Heartbeat) -> int:
        """How many history items applying the message would observe."""
        state = self.streams.get(message.stream_id)
        if state is None or not self._continues(state, message):
            return len(message.history)
        return len(message.history) - len(state.applied)

    def _superseded(self, message: KeyStepEvent | Heartbeat) -> None:
        """Count a message that a later one of its poll replaced as heard (its seq is no gap)."""
        state = self.streams.get(message.stream_id)
        if state is not None and state.session == message.session:
            self._count_gaps(state, message.seq, late=message.seq > state.last_seq)

    @staticmethod
    def _count_gaps(state: StreamState, seq: int, late: bool = False) -> None:
        """Count the numbers a session's ``seq`` skipped (its sender numbers every message of the stream, whatever
        its kind, with one counter).

        Args:
            state: the stream, in the message's session.
            seq: the message's ``seq``.
            late: the message was not applied before (not a duplicate): one behind ``heard_seq`` was counted as
                skipped when a later one arrived first (a replay served after the onsets of its poll).
        """
        ahead = seq - state.heard_seq
        if 0 < ahead < SEQ_WINDOW:
            state.gaps += ahead - 1
        elif -SEQ_WINDOW < ahead < 0:
            if late and state.gaps:
                state.gaps -= 1
            return
        state.heard_seq = seq  # ahead, or a jump of SEQ_WINDOW or more either way: the sender started over

    @staticmethod
    def _continues(state: StreamState, message: KeyStepEvent | Heartbeat) -> bool:
        """Whether the message's history extends what the stream applied (same session, an agreeing prefix)."""
        n = len(state.applied)
        return state.session == message.session and message.history[:n] == state.applied

    # -- one message --------------------------------------------------------------------------
    def handle(self, message: Message) -> list[Message]:
        """Apply one incoming message.

        Args:
            message: a `KeyStepEvent` or `Heartbeat` (other kinds are ignored).

        Returns:
            Messages to publish: alerts for newly applied steps (the live one, and at most `RESEND_ALERTS`
            rebuilt ones), the `StepEvent` if new, one status.

        Raises:
            UnknownStep: the message names a step that is not in the graph (nothing is changed).
            StreamLimit: a new stream, and no idle stream to evict (nothing is changed).
        """
        if not isinstance(message, KeyStepEvent | Heartbeat):
            return []
        sid = message.stream_id
        state = self.streams.get(sid)
        if state is not None and state.session == message.session:
            behind = state.last_seq - message.seq
            if 0 <= behind < SEQ_WINDOW:
                return []  # old or duplicated: its history is a prefix of what was applied
        continues = state is not None and self._continues(state, message)
        new = message.history[len(state.applied) :] if continues and state is not None else message.history
        self._check_steps(message, new)
        if state is None:
            self._make_room(sid)
        out: list[Message] = []
        if state is None or not continues:
            if state is not None and state.session != message.session:
                out += self._end_session(sid, state)  # a new session ends the old one
            # A new session, or a history that disagrees within one (it only grows, so it cannot be continued):
            # the stream starts over, counters and re-sent alerts included.
            state = self._start_over(message, state)
        else:
            self._count_gaps(state, message.seq, late=message.seq > state.last_seq)
        state.last_seq = message.seq
        state.last_heard = self.monotonic()
        state.lost = False
        # Alerts go out first: they are what a person waits for.
        out += self._apply_history(sid, state, message, len(state.applied))
        out += self._settle_early(sid, state, ended=isinstance(message, Heartbeat) and message.ended)
        if isinstance(message, KeyStepEvent) and message.index not in state.forwarded:
            state.forwarded.add(message.index)
            out.append(self._step_event(state, message))
        if isinstance(message, KeyStepEvent) and state.current == message.step:
            state.current = None  # its segment ended when it was confirmed; the next heartbeat says what is seen now
        if isinstance(message, Heartbeat):
            state.current, state.frames, state.dropped = message.current, message.frames, message.dropped
            state.fps, state.ended = message.fps, message.ended
            state.evidence_now = _evidence(message)
            state.latency.update((name, getattr(message, name)) for name in DETECTOR_LATENCY)
            if message.ended:
                out += self._end_session(sid, state)
        out.append(self.status(sid))  # after the report: a viewer that stops at "ended" has seen it
        return out

    def onset(self, message: KeyStepOnset) -> list[Message]:
        """Alert at once on a key-step announced before it ends, if it is done too early; retract on a withdrawal.

        The step is checked as if the steps confirmed so far and ``before`` were done, without changing the stream:
        only its confirmed `KeyStepEvent` does. An onset that does not continue what the stream applied (another
        session, a history the checker has not caught up with) is left alone: nothing sure can be said about it.

        Args:
            message: the detector's announcement or withdrawal.

        Returns:
            The early alert, or the retraction of one, or nothing.

        Raises:
            UnknownStep: the onset names a step that is not in the graph.
        """
        sid = message.stream_id
        state = self.streams.get(sid)
        if state is None or state.session != message.session:
            return []
        self._count_gaps(state, message.seq)
        if message.history != state.applied:
            return []
        if set(message.before) - self._steps or message.step not in self._steps:
            raise UnknownStep(f"{sid}: onset names a step that is not in the task graph")
        if message.withdrawn:
            early = state.early.get(message.index)
            if early is None or early.step != message.step:
                return []
            del state.early[message.index]
            return [self._retraction(state, early, None)]
        if message.index in state.early:
            return []
        # The stream's checker holds the history; the onset brings the detector's evidence as of its run's start.
        verdict = state.checker.verdict(message.step, message.before, _evidence(message))
        if not verdict.is_mistake:
            return []
        before = set(message.history) | set(message.before)
        alert = self._alert(sid, state, message, message.index, replayed=False, before=before, verdict=verdict)
        state.early[message.index] = alert
        return [alert]

    def _settle_early(self, stream_id: str, state: StreamState, ended: bool) -> list[Message]:
        """Retract each early alert whose position was confirmed as another step (or never, at the end), or as the
        same step that the checker, with the evidence of the whole segment, no longer finds a mistake."""
        out: list[Message] = []
        for index in sorted(state.early):
            if index < len(state.applied):
                early = state.early.pop(index)
                confirmed = state.applied[index]
                if confirmed != early.step or not state.checker.history[index].is_mistake:
                    out.append(self._retraction(state, early, confirmed))
            elif ended:
                out.append(self._retraction(state, state.early.pop(index), None))
        return out

    def _retraction(self, state: StreamState, early: Alert, confirmed: int | None) -> Retraction:
        return Retraction(
            stream_id=early.stream_id,
            seq=self._next_seq(state),
            timestamp=self.clock(),
            alert_id=early.alert_id,
            run=state.run,
            step=early.step,
            step_name=early.step_name,
            index=early.index,
            confirmed=confirmed,
            confirmed_name=None if confirmed is None else self._name(confirmed),
        )

    def _check_steps(self, message: KeyStepEvent | Heartbeat, new: tuple[int, ...]) -> None:
        unknown = set(new) - self._steps
        if isinstance(message, Heartbeat) and message.current is not None and message.current not in self._steps:
            unknown.add(message.current)
        if unknown:
            raise UnknownStep(f"{message.stream_id}: step {min(unknown)} is not in the task graph")

    def _make_room(self, stream_id: str) -> None:
        """Free a slot for a new stream: evict the idle stream that has waited longest, never a live one."""
        if len(self.streams) < self.max_streams:
            return
        idle = [(state.last_heard, sid) for sid, state in self.streams.items() if state.idle]
        if not idle:
            raise StreamLimit(f"{stream_id}: all {self.max_streams} stream slots are taken by live streams")
        del self.streams[min(idle)[1]]
        self.counts["evicted"] += 1

    def _start_over(self, message: KeyStepEvent | Heartbeat, previous: StreamState | None) -> StreamState:
        """A fresh state for the message's stream; outgoing ``seq`` keeps counting so viewers see no reset."""
        state = StreamState(
            message.session,
            self.checking.new(self.graph),
            last_heard=self.monotonic(),
            seq_out=previous.seq_out if previous else 0,
            last_snapshot=self.clock(),
            heard_seq=message.seq,
        )
        state.allowed = self._likely_next(state.checker, ())
        self.streams[message.stream_id] = state
        return state

    def _end_session(self, stream_id: str, state: StreamState) -> list[MissingSteps]:
        """The end report of a session that ended (once per session): the required steps it never did.

        Returns:
            ``[report]``, or ``[]`` when the session did every required step, was reported already, or is lost (a
            lost detector died unheard: what it did not report may have been done, so nothing is named).
        """
        if state.report is not None or state.lost:
            return []
        # Steps outside `_required` (optional, or removed in training) are never missing.
        never = state.checker.never_done(self._required, state.evidence_now)
        if not never:
            return []
        missing = tuple(s for s, _ in never)
        state.report = MissingSteps(
            stream_id=stream_id,
            seq=self._next_seq(state),
            timestamp=self.clock(),
            missing_id=f"{stream_id}#end",
            run=state.run,
            missing=missing,
            missing_names=tuple(self._name(s) for s in missing),
            replayed=False,
            probabilities=tuple(round(p, SCORE_DECIMALS) for _, p in never),
        ).fitted()
        return [state.report]

    def _likely_next(
        self, checker: PreconditionChecker | ProbabilisticChecker, history: tuple[int, ...]
    ) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """The allowed steps, likeliest next first, with their future-step probabilities (ties in graph order).

        The probability is the procedure question's (`ProcedureQueries.future`) given the step done last and
        everything done; before the first step, START counts as the step just done.

        Args:
            checker: the stream's checker, which has observed ``history``.
            history: the stream's history (a set of it is what the question reads: a replay repeats steps).
        """
        key = (history[-1] if history else None, frozenset(history))
        answer = self._next_cache.get(key)
        if answer is not None:
            self._next_cache.move_to_end(key)
            return answer
        future = self.queries.future(key[0], key[1])
        probability = dict(zip(future.steps, future.scores, strict=True))
        allowed = sorted(checker.allowed_next(), key=lambda s: -probability.get(s, 0.0))  # stable: graph order
        answer = tuple(allowed), tuple(round(probability.get(s, 0.0), SCORE_DECIMALS) for s in allowed)
        if len(history) <= NEXT_CACHE_ITEMS:
            self._next_cache[key] = answer
        if len(self._next_cache) > NEXT_CACHE:
            self._next_cache.popitem(last=False)
        return answer

    def _apply_history(
        self, stream_id: str, state: StreamState, message: KeyStepEvent | Heartbeat, first: int
    ) -> list[Alert]:
        """Observe ``message.history[first:]`` (the part not applied yet) and build the alerts to send.

        A replay (many new steps at once) is coalesced: every mistake is counted, but only the live step's alert
        and the `RESEND_ALERTS` most recent rebuilt ones are built and sent.
        """
        history = message.history
        live = message.index if isinstance(message, KeyStepEvent) else -1
        observe = state.checker.observe
        # Only the live step comes with the detector's evidence; a step rebuilt from history (a lost message, a
        # restarted checker) is taken as confirmed with certainty.
        evidence = _evidence(message) if isinstance(message, KeyStepEvent) else NO_EVIDENCE
        mistakes = [index for index in range(first, len(history))
                    if observe(history[index], evidence if index == live else NO_EVIDENCE).is_mistake]
        if first < len(history):
            state.allowed = self._likely_next(state.checker, history)
        state.applied = history
        state.alerts += len(mistakes)
        sent = [index for index in mistakes if index != live][-RESEND_ALERTS:]
        if live in mistakes:
            sent = sorted([*sent, live])
        alerts = []
        before: set[int] = set()  # the steps done before each alert's step, grown alert by alert
        done_to = 0
        for index in sent:
            before.update(history[done_to:index])
            done_to = index
            alerts.append(self._alert(stream_id, state, message, index, replayed=index != live, before=before))
        state.recent_alerts.extend(alerts)
        return alerts

    def _alert(
        self,
        stream_id: str,
        state: StreamState,
        message: KeyStepEvent | Heartbeat | KeyStepOnset,
        index: int,
        replayed: bool,
        before: set[int],
        verdict: StepVerdict | None = None,
    ) -> Alert:
        verdict = verdict or state.checker.history[index]  # an early alert's verdict is not in the history yet
        missing = tuple(int(m) for m in verdict.missing if m != START)
        forgotten, score = self._forgotten(verdict.step, missing, before)
        live = isinstance(message, KeyStepEvent | KeyStepOnset) and message.index == index
        return Alert(
            stream_id=stream_id,
            seq=self._next_seq(state),
            timestamp=self.clock(),
            alert_id=f"{stream_id}#{index}",
            run=state.run,
            step=verdict.step,
            step_name=self._name(verdict.step),
            index=index,
            missing=missing,
            missing_names=tuple(self._name(m) for m in missing),
            undefined=verdict.undefined,
            event_timestamp=message.timestamp,
            replayed=replayed,
            forgotten=forgotten,
            forgotten_name=None if forgotten is None else self._name(forgotten),
            forgotten_score=score,
            rule=self.queries.rule,
            probability=round(min(1.0, max(0.0, verdict.probability)), SCORE_DECIMALS),
            video_time=message.start if live and isinstance(message, KeyStepEvent | KeyStepOnset) else None,
            late_for=verdict.late_for,
        ).fitted()

    def _forgotten(
        self, step: int, missing: tuple[int, ...], before: set[int]
    ) -> tuple[int, float] | tuple[None, None]:
        """The missing pre-condition most likely forgotten: the highest missing-step score
        (`ProcedureQueries.missing`, given the steps done before), the first in graph order on a tie.

        Args:
            step: the step done too early.
            missing: its pre-conditions not done (graph order).
            before: the steps done before it.

        Returns:
            ``(step id, score)``, or ``(None, None)`` when none of them scores above 0.
        """
        if not missing:
            return None, None
        ranked = self.queries.missing(step, before)
        score = dict(zip(ranked.steps, ranked.scores, strict=True))
        best = max(missing, key=lambda m: score.get(m, 0.0))
        if score.get(best, 0.0) <= 0.0:
            return None, None
        return best, round(score[best], SCORE_DECIMALS)

    def _step_event(self, state: StreamState, message: KeyStepEvent) -> StepEvent:
        """The viewers' copy of a key-step: the graph's name for it, and neither the session token nor the history."""
        return StepEvent(
            stream_id=message.stream_id,
            seq=self._next_seq(state),
            timestamp=self.clock(),
            run=state.run,
            step=message.step,
            step_name=self._name(message.step),
            start=message.start,
            end=message.end,
            confidence=message.confidence,
            index=message.index,
        )

    def status(self, stream_id: str) -> Status:
        """The current `Status` message of a stream (also used for the periodic re-send)."""
        state = self.streams[stream_id]
        if state.progress[0] != len(state.checker.history):
            state.progress = (len(state.checker.history), state.checker.done)
        return Status(
            stream_id=stream_id,
            seq=self._next_seq(state),
            timestamp=self.clock(),
            run=state.run,
            done=state.progress[1],
            allowed=state.allowed[0],
            current=state.current,
            alerts=state.alerts,
            frames=state.frames,
            dropped=state.dropped,
            fps=state.fps,
            gaps=state.gaps,
            ended=state.ended,
            lost=state.lost,
            allowed_scores=state.allowed[1],
            rule=self.queries.rule,
            **state.latency,
        )

    # -- time ---------------------------------------------------------------------------------
    def periodic(self, period_s: float, stats: ReceiveStats | None = None) -> list[Message]:
        """Stream life cycles, and the periodic snapshot of every stream whose last one is older than ``period_s``.

        A stream silent for the stream timeout is marked lost (its status goes out at once); an ended or lost
        stream silent for `FORGET_AFTER` timeouts is freed. Each due stream's most recent alerts (`RESEND_ALERTS`,
        ``replayed=True``, same ``alert_id``) and its status go out: a viewer that joined late, or reconnected to a
        restarted checker, catches up (the snapshot half of the Clone pattern); consumers de-duplicate alerts by
        ``alert_id``. The period runs on its own clock: the status sent on every change does not postpone it, or a
        busy stream (a heartbeat every period) would never re-send the alert a slow-joining viewer missed. One call
        sends at most `SNAPSHOT_BUDGET` messages, the streams that waited longest first; the others stay due for the
        next call (``snapshot_pending``: the service polls again within `SNAPSHOT_POLL_MS`), so 256 streams of 32 alerts
        never stall the loop in one go. An ended session's `MissingSteps` report is re-sent with its stream's alerts.
        One `CheckerHealth` goes out per period.

        Args:
            period_s: re-send period in seconds.
            stats: the receiver's counts, for the `CheckerHealth`.

        Returns:
            Messages to publish.
        """
        now = self.clock()
        idle_now = self.monotonic()
        out: list[Message] = []
        budget = SNAPSHOT_BUDGET
        self.snapshot_pending = False
        for sid, state in sorted(self.streams.items(), key=lambda item: item[1].last_snapshot):
            silent = idle_now - state.last_heard
            if state.idle and silent > FORGET_AFTER * self.stream_timeout_s:
                del self.streams[sid]
                continue
            if not state.idle and silent > self.stream_timeout_s:
                state.lost = True
                out.append(self.status(sid))
            if now - state.last_snapshot < period_s:
                continue
            if budget <= 0:
                self.snapshot_pending = True
                continue
            resent: list[Alert | MissingSteps] = [*state.recent_alerts, *([state.report] if state.report else [])]
            budget -= len(resent) + 1
            state.last_snapshot = now
            out.extend(replace(m, seq=self._next_seq(state), timestamp=now, replayed=True) for m in resent)
            out.append(self.status(sid))
        for sid, since in list(self._waiting.items()):
            if idle_now - since > FORGET_AFTER * self.stream_timeout_s:
                del self._waiting[sid]
        if now - self._last_health >= period_s:
            self._last_health = now
            out.append(self.health(stats or ReceiveStats()))
        return out

    def health(self, stats: ReceiveStats) -> CheckerHealth:
        """The checker's counts as a `CheckerHealth` message.

        Args:
            stats: the receiver's counts (received, malformed).

        Returns:
            The message (``seq`` counts the checker's own health messages).
        """
        self._health_seq += 1
        counts = {name: self.counts[name] for name in COUNTED}
        return CheckerHealth(
            stream_id=CHECKER_STREAM,
            seq=self._health_seq - 1,
            timestamp=self.clock(),
            streams=len(self.streams),
            lost_streams=sum(state.lost for state in self.streams.values()),
            received=stats.received,
            malformed=stats.malformed,
            **(counts | {"over_budget": counts["over_budget"] + stats.over_budget}),
        )

    def _name(self, node: int | str) -> str:
        return self._names.get(node, str(node)) if isinstance(node, int) else str(node)

    @staticmethod
    def _next_seq(state: StreamState) -> int:
        state.seq_out += 1
        return state.seq_out - 1


def _evidence(message: KeyStepEvent | KeyStepOnset | Heartbeat) -> StepEvidence:
    """The detector's evidence a message brings (`graphs.checker.StepEvidence`)."""
    real = message.real if isinstance(message, KeyStepEvent | KeyStepOnset) else 1.0
    return StepEvidence.of(message.evidence_steps, message.evidence, real)


class CheckerWatcher(Protocol):
    """What watches a checker from outside (the metrics endpoint: `streaming.metrics.CheckerMetrics`)."""

    def observe(self, stage: str, seconds: float) -> None:
        """One message's (``hop``) or alert's (``alert_out``) time in a stage."""

    def sent(self, message: Alert | Retraction) -> None:
        """An alert or a retraction went out live."""

    def watch(self, service: CheckerService) -> None:
        """Follow this checker's counts from now on."""


class CheckerService:
    """The checker's sockets and loop around a `CheckerCore`.

    Args:
        graph: the task graph.
        config: endpoints and periods.
        ctx: ZeroMQ context (a new one if None).
        log: called with one line per kind of refusal (rate-limited); None: no log, the counts only.
        metrics: the metrics endpoint's counters and histograms (``--metrics``); None: none.
    """

    def __init__(
        self,
        graph: TaskGraph,
        config: CheckerConfig,
        ctx: zmq.Context | None = None,
        log: Callable[[str], None] | None = None,
        metrics: CheckerWatcher | None = None,
    ) -> None:
        self.config = config
        self.core = CheckerCore(
            graph, max_streams=config.max_streams, stream_timeout_s=config.stream_timeout_s, log=log,
            checking=config.checking,
        )
        self.metrics = metrics
        self._polled_at = time.monotonic()  # when the messages being served were received (for alert_out)
        self.ctx = ctx or zmq.Context.instance()
        self.keys: ClientKeys | None = None
        self.authenticator: ThreadAuthenticator | None = None
        if config.curve is not None:  # the ZAP handler first: a CURVE socket bound without one lets everyone in
            self.keys = ClientKeys(config.curve.clients, config.curve.extra_clients, log=log)
            self.authenticator = start_authenticator(self.ctx, self.keys)
        try:
            pub, sub = self._bind(config.bind_alerts, config.bind_events)
        except InputError:
            self._stop_authenticator()
            raise
        self.alerts_endpoint = pub.getsockopt_string(zmq.LAST_ENDPOINT)
        self.events_endpoint = sub.getsockopt_string(zmq.LAST_ENDPOINT)
        self.publisher = Publisher(pub)
        # The stream budget is applied by topic before decoding too: a flood from one stream costs no JSON parsing.
        self.receiver = Receiver(sub, topic_budget=STREAM_BUDGET)
        self.handshakes = (HandshakeCounter(pub), HandshakeCounter(sub))
        self._welcome_due = False
        self._last_welcome = float("-inf")
        if metrics is not None:
            self.core.observe = metrics.observe
            metrics.watch(self)

    def _bind(self, alerts: str, events: str) -> tuple[zmq.Socket, zmq.Socket]:
        """Bind the output, then the input (so the forwarded first event cannot be published before it exists)."""
        curve = self.config.curve
        pub, _ = bind(self.ctx, zmq.XPUB, alerts, "--publish", curve=curve)
        try:
            sub, _ = bind(self.ctx, zmq.SUB, events, "--bind", curve=curve)
        except InputError:
            pub.close()
            raise
        return pub, subscribe(sub, INPUT_TOPICS)

    def watch_peers(self, malformed: int, over_budget: int) -> None:
        """After a poll: log what the receiver dropped, count refused handshakes, and greet new subscribers.

        Args:
            malformed: the receiver's malformed count before the poll.
            over_budget: the receiver's over-budget count before the poll.
        """
        stats, core = self.receiver.stats, self.core
        if stats.malformed > malformed:
            core.log_refusal("malformed", stats.malformed, stats.last_error)
        if stats.over_budget > over_budget:
            core.log_refusal("over_budget", core.counts["over_budget"] + stats.over_budget,
                             f"a stream sent more than {STREAM_BUDGET} messages in one poll")
        for counter in self.handshakes:
            for why in counter.refused():
                core.counts["denied"] += 1
                core.log_refusal("denied", core.counts["denied"], f"a handshake on {counter.endpoint}: {why}")
        arrived = self.publisher.new_subscribers() > 0
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
        """Close both sockets and bind them again at the same endpoints; clients re-connect by themselves.

        Raises:
            RunError: an endpoint could not be bound again (another process took the port meanwhile).
        """
        self.watch_peers(self.receiver.stats.malformed, self.receiver.stats.over_budget)  # the old sockets' refusals
        self._close_sockets()
        for _ in range(REOPEN_TRIES):
            try:
                pub, sub = self._bind(self.alerts_endpoint, self.events_endpoint)
                break
            except InputError:  # libzmq releases a closed listener asynchronously
                time.sleep(REOPEN_GAP_S)
        else:
            raise RunError(f"could not bind {self.events_endpoint} and {self.alerts_endpoint} again after a client key "
                           "was revoked")
        self.publisher.sock = pub
        self.receiver.replace_socket(sub)
        self.handshakes = (HandshakeCounter(pub), HandshakeCounter(sub))

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
                messages = self.receiver.poll(wait_ms)
                self._polled_at = time.monotonic()
                self.core.serve(messages, emit=self.send)
                self.watch_peers(*before)
                self.reload_keys()
                self.send(self.core.periodic(self.config.status_period_s, self.receiver.stats))
                if until is not None and until(self.core):
                    break
        finally:
            self.close()

    def send(self, messages: list[Message]) -> None:
        """Publish messages; one that cannot be encoded is counted (``unsendable``) and the rest still go out."""
        for message in messages:
            try:
                self.publisher.send(message)
            except MessageError as err:
                self.core.refuse(Unsendable(f"{message.stream_id}: {err}"))
                continue
            if isinstance(message, Retraction) or (isinstance(message, Alert) and not message.replayed):
                self._alert_out(message)

    def _alert_out(self, message: Alert | Retraction) -> None:
        """An alert or retraction left: its ``alert_out`` time, in its stream's status and the metrics."""
        seconds = time.monotonic() - self._polled_at
        state = self.core.streams.get(message.stream_id)
        if state is not None:
            state.latency["alert_out_ms"] = round(1000 * seconds, 3)
        if self.metrics is not None:
            self.metrics.observe("alert_out", seconds)
            self.metrics.sent(message)

    def summary(self) -> str:
        """One line on what the checker took in and turned away, for the end of a run.

        Refused and malformed messages are otherwise silent (the wire has no place for them but the
        `CheckerHealth` viewers get), so a person who started a checker learns here that a detector was turned
        away or spoke garbage.
        """
        stats, core = self.receiver.stats, self.core
        counts = core.counts
        lost = sum(state.lost for state in core.streams.values())
        line = (
            f"checker: {stats.received} messages received, {len(core.streams)} streams tracked ({lost} lost); "
            f"{counts['stream_limit']} refused (over the {core.max_streams}-stream limit), "
            f"{counts['evicted']} idle streams evicted, {counts['unknown_step']} unknown step, "
            f"{counts['over_budget'] + stats.over_budget} over budget, {counts['unsendable']} unsendable, "
            f"{counts['denied']} handshakes refused, {stats.malformed} malformed dropped"
        )
        return printable(line + (f" (last: {stats.last_error})" if stats.last_error else ""))

    def close(self) -> None:
        """Close both sockets (LINGER 0: never blocks), then stop the authenticator."""
        self._close_sockets()
        self._stop_authenticator()

    def _close_sockets(self) -> None:
        for counter in self.handshakes:
            counter.close()
        self.publisher.sock.close()
        self.receiver.sock.close()

    def _stop_authenticator(self) -> None:
        if self.authenticator is not None:
            self.authenticator.stop()
            self.authenticator = None


def run_checker(
    graph_path: str,
    config: CheckerConfig,
    ready: Callable[[str, str], None] | None = None,
    stop: threading.Event | None = None,
    report: Callable[[str], None] | None = None,
    until: Callable[[CheckerCore], bool] | None = None,
    log: Callable[[str], None] | None = None,
    metrics: CheckerWatcher | None = None,
) -> None:
    """Load a graph and serve until interrupted (the ``stream-detect checker`` command and child process).

    Args:
        graph_path: task graph JSON file.
        config: endpoints and periods.
        ready: called with ``(events_endpoint, alerts_endpoint)`` once both sockets are bound.
        stop: set it to end the loop (the child process sets it on SIGTERM).
        report: called with `CheckerService.summary` when the checker stops, Ctrl-C included.
        until: optional predicate checked after every poll; true ends the loop (see `CheckerService.run`).
        log: called with a line per kind of refused message (rate-limited).
        metrics: the metrics endpoint's counters and histograms (``--metrics``); None: none.
    """
    from graphs.task_graph import load_graph

    service = CheckerService(load_graph(graph_path), config, log=log, metrics=metrics)
    try:  # a Ctrl-C right after ``ready`` must still close the sockets and report
        if ready is not None:
            ready(service.events_endpoint, service.alerts_endpoint)
        service.run(stop, until)
    finally:
        service.close()
        if report is not None:
            report(service.summary())
