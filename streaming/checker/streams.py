"""The streams the checker follows: what it keeps for each, and their life cycle.

A stream is born with its first message, starts over with a new session (or a history that disagrees), is marked
lost when silent for the stream timeout, and is freed `FORGET_AFTER` timeouts after it ended or was lost, or
evicted (the longest idle first) when a new stream needs its slot; a live stream is never evicted. ``seq`` only
counts gaps: a sender whose ``seq`` jumps (or starts over) is followed, never frozen.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from graphs.checker import NO_EVIDENCE, StepEvidence, StepVerdict
from graphs.checker_settings import StepChecker
from streaming.checker.refusals import StreamLimit
from streaming.messages import Alert, Heartbeat, KeyStepEvent, MissingSteps, run_of

RESEND_ALERTS: Final = 32  # most recent alerts per stream re-sent with every periodic status, and per replay
FORGET_AFTER: Final = 12  # an ended or lost stream is freed after this many stream timeouts (60 s by default)
# Early alerts a stream may hold unconfirmed at once: a detector announces the step being done, rarely more than a
# few; onsets with ever longer `before` lists could otherwise grow one stream's state without bound.
MAX_EARLY: Final = 64
SEQ_WINDOW: Final = 1024  # a seq this close behind the last one is a duplicate; farther, the sender started over


@dataclass
class StreamState:
    """What the checker keeps for one stream."""

    session: str
    checker: StepChecker
    last_heard: float  # monotonic time of the last message served (`heard`)
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
    stopped: bool = False  # it ended because its detector was stopped, not at its source's end (the last heartbeat's)
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
    # Positions of the history whose step is not in the graph, ascending: skipped (never checked), so the checker's
    # own history is the session's without them. One such key-step is refused; the session goes on.
    skipped: list[int] = field(default_factory=list)
    misnamed: bool = False  # its detector named a step otherwise than the graph: said once (`CheckerCore.on_keystep`)

    @property
    def run(self) -> str:
        """What viewers call this detector run (`run_of` its session: never the token)."""
        return run_of(self.session)

    @property
    def idle(self) -> bool:
        """Ended or lost: the stream may be evicted for a new one."""
        return self.ended or self.lost

    served: int = 0  # messages of its session served (`heard`): a message that changed it was not ignored

    def heard(self, now: float, hop_ms: float) -> None:
        """A key-step, heartbeat or onset of the stream's session was served at ``now`` (monotonic), ``hop_ms`` after
        it was sent: the hop its status shows. Only a served message sets it: a refused or ignored one (any peer can
        stamp any time) says nothing of the stream's hop."""
        self.last_heard = now
        self.served += 1
        self.latency["hop_ms"] = hop_ms

    def next_seq(self) -> int:
        """The ``seq`` of the stream's next outgoing message (one counter for every kind the checker sends)."""
        self.seq_out += 1
        return self.seq_out - 1

    def verdict(self, index: int) -> StepVerdict | None:
        """The checker's verdict on the step at ``index`` of the session's history (None: skipped, not in the graph)."""
        if not self.skipped:
            return self.checker.history[index]
        before = bisect_left(self.skipped, index)
        if before < len(self.skipped) and self.skipped[before] == index:
            return None
        return self.checker.history[index - before]

    def continues(self, message: KeyStepEvent | Heartbeat) -> bool:
        """Whether the message's history extends what the stream applied (same session, an agreeing prefix)."""
        n = len(self.applied)
        return self.session == message.session and message.history[:n] == self.applied

    def count_gaps(self, seq: int, late: bool = False) -> None:
        """Count the numbers a session's ``seq`` skipped (its sender numbers every message of the stream, whatever
        its kind, with one counter).

        Args:
            seq: the message's ``seq`` (the message is in this stream's session).
            late: the message was not applied before (not a duplicate): one behind ``heard_seq`` was counted as
                skipped when a later one arrived first (a replay served after the onsets of its poll).
        """
        ahead = seq - self.heard_seq
        if 0 < ahead < SEQ_WINDOW:
            self.gaps += ahead - 1
        elif -SEQ_WINDOW < ahead < 0:
            if late and self.gaps:
                self.gaps -= 1
            return
        self.heard_seq = seq  # ahead, or a jump of SEQ_WINDOW or more either way: the sender started over


class StreamTable:
    """The streams by id, within a bound on their number, with their life cycle.

    Args:
        max_streams: most streams tracked at once; an idle stream gives its place to a new one.
        timeout_s: a stream silent this long is lost.
        monotonic: the clock of life cycles.
    """

    def __init__(self, max_streams: int, timeout_s: float, monotonic: Callable[[], float]) -> None:
        self.states: dict[str, StreamState] = {}
        self.max_streams = max_streams
        self.timeout_s = timeout_s
        self.monotonic = monotonic

    def cost(self, message: KeyStepEvent | Heartbeat) -> int:
        """How many history items applying the message would observe."""
        state = self.states.get(message.stream_id)
        if state is None or not state.continues(message):
            return len(message.history)
        return len(message.history) - len(state.applied)

    def make_room(self, stream_id: str) -> tuple[str, StreamState] | None:
        """Free a slot for a new stream: evict the idle stream that has waited longest, never a live one.

        Returns:
            The stream evicted and its last state, or None when a slot was free.

        Raises:
            StreamLimit: every slot is taken by a live stream.
        """
        if len(self.states) < self.max_streams:
            return None
        idle = [(state.last_heard, sid) for sid, state in self.states.items() if state.idle]
        if not idle:
            raise StreamLimit(f"{stream_id}: all {self.max_streams} stream slots are taken by live streams")
        evicted = min(idle)[1]
        return evicted, self.states.pop(evicted)

    def expire(self, now: float) -> tuple[list[str], list[tuple[str, StreamState]]]:
        """Free each idle stream silent for `FORGET_AFTER` timeouts, and mark lost each live one silent for one.

        Args:
            now: the monotonic time.

        Returns:
            ``(lost, freed)``: the streams marked lost now (each owes its viewers a status), and those freed with
            their last states.
        """
        lost: list[str] = []
        freed: list[tuple[str, StreamState]] = []
        for sid, state in list(self.states.items()):
            silent = now - state.last_heard
            if state.idle and silent > FORGET_AFTER * self.timeout_s:
                freed.append((sid, self.states.pop(sid)))
            elif not state.idle and silent > self.timeout_s:
                state.lost = True
                lost.append(sid)
        return lost, freed
