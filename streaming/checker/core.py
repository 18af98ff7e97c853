"""The checker's logic without sockets: one handler per kind of detector message, messages out.

Restart safety (Clone pattern): every incoming message carries the stream's full confirmed-step history.
`CheckerCore` applies only the part of the history it has not applied yet, so a lost or duplicated message changes
nothing, and a freshly started checker rebuilds each stream with the very same checker object (observing the history
in order), re-sending the alerts of the steps it had not seen (``replayed=True``) with their stable ``alert_id`` so
viewers de-duplicate them. A missing ``seq`` is counted as a gap (a sender numbers all its messages of a stream with
one counter, onsets included); it costs no state.

No message stops the checker, and none may cost it much (peers are not trusted): a message the checker will not
apply raises a named `Refused` error, counted by name (`streaming.checker.refusals`); a key-step whose step is not in
the graph is refused alone (counted once, skipped in every later history of its session: one bad message never
silences a stream); the work of one poll is
shared among streams (`streaming.checker.budget`); a replayed history is applied in one go and sends one status and
at most `RESEND_ALERTS` of the alerts it rebuilds (the rest are counted in the status). A session that ends (its
detector's last heartbeat, or a new session on the stream) gets a `MissingSteps` report; a lost stream is not an
ended session and is never reported, not even when it is freed: its detector died without saying so, and the steps
it did not report may have been done while nobody watched.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable

from graphs.checker import NO_EVIDENCE, StepEvidence
from graphs.checker_settings import CheckerSettings
from graphs.common.safe_text import count_of
from graphs.task_graph import TaskGraph
from streaming.checker.budget import PollBudget
from streaming.checker.changes import StreamChanges
from streaming.checker.config import MAX_STREAMS, STREAM_TIMEOUT_S
from streaming.checker.outputs import Outputs
from streaming.checker.refusals import OverBudget, Refusals, Refused, StreamTaken, UnknownStep, Unsendable
from streaming.checker.schedule import Snapshots
from streaming.checker.streams import FORGET_AFTER, MAX_EARLY, RESEND_ALERTS, SEQ_WINDOW, StreamState, StreamTable
from streaming.messages import (
    MAX_HISTORY,
    MAX_LATENCY_MS,
    CheckerHealth,
    Heartbeat,
    KeyStepEvent,
    KeyStepOnset,
    Message,
    MessageError,
    MissingSteps,
    Status,
)
from streaming.service_log import LogLine
from streaming.stage_latency import DETECTOR_STAGES, latency_field
from streaming.transport import ReceiveStats

DETECTOR_LATENCY = tuple(latency_field(stage) for stage in DETECTOR_STAGES)  # a heartbeat's, kept per stream


def _evidence(message: KeyStepEvent | KeyStepOnset | Heartbeat) -> StepEvidence:
    """The detector's evidence a message brings (`graphs.checker.StepEvidence`)."""
    real = message.real if isinstance(message, KeyStepEvent | KeyStepOnset) else 1.0
    return StepEvidence.of(message.evidence_steps, message.evidence, real)


class CheckerCore:
    """The checker's logic without sockets: messages in, messages out.

    Args:
        graph: the task graph every stream is checked against.
        clock: wall clock for outgoing timestamps and the periodic snapshot (an argument so tests can fix it).
        max_streams: most streams tracked at once; an idle stream gives its place to a new one.
        stream_timeout_s: a stream silent this long is lost.
        monotonic: the clock of stream life cycles.
        log: called with a line for each refusal reason (first occurrence, then every `LOG_EVERY_S`), and for each
            stream state change (`streaming.checker.changes`: new, restarted, ended, lost, back, freed, evicted;
            at most `CHANGE_LINES` per `LOG_EVERY_S`).
        checking: which pre-condition checker each stream gets.
    """

    def __init__(
        self,
        graph: TaskGraph,
        clock: Callable[[], float] = time.time,
        max_streams: int = MAX_STREAMS,
        stream_timeout_s: float = STREAM_TIMEOUT_S,
        monotonic: Callable[[], float] = time.monotonic,
        log: LogLine | None = None,
        checking: CheckerSettings | None = None,
    ) -> None:
        self.graph = graph
        self.checking = checking or CheckerSettings()
        self.clock = clock
        self.monotonic = monotonic
        self.table = StreamTable(max_streams, stream_timeout_s, monotonic)
        self.refusals = Refusals(monotonic, log)
        self.changes = StreamChanges(monotonic, log)
        self.outputs = Outputs(graph, clock)
        self.snapshots = Snapshots(self.outputs.status)
        self.budget = PollBudget(self.table.cost, self._superseded, self.refuse, monotonic, max_streams)
        self._steps = frozenset(graph.step_ids)
        self.observe: Callable[[str, float], None] | None = None  # called with ("hop", seconds) per message (metrics)
        # The hop of the message being served, which `StreamState.heard` records once it is served.
        self._hop_ms = 0.0

    @property
    def streams(self) -> dict[str, StreamState]:
        """The streams tracked, by id."""
        return self.table.states

    @property
    def max_streams(self) -> int:
        """Most streams tracked at once."""
        return self.table.max_streams

    @property
    def counts(self) -> Counter[str]:
        """Refusals by reason (`streaming.checker.refusals.COUNTED`)."""
        return self.refusals.counts

    @property
    def last_refusal(self) -> str:
        """``"<reason>: <detail>"`` of the last refused message."""
        return self.refusals.last

    @property
    def refused(self) -> int:
        """Messages refused at the stream limit."""
        return self.counts["stream_limit"]

    @property
    def snapshot_pending(self) -> bool:
        """The last periodic call left due streams for the next (`streaming.checker.schedule.SNAPSHOT_POLL_MS`)."""
        return self.snapshots.pending

    def refuse(self, err: Refused) -> None:
        """Count a refused message under its reason, and log it (rate-limited)."""
        self.refusals.refuse(err)

    def log_refusal(self, reason: str, count: int, detail: str) -> None:
        """Log a refusal counted elsewhere (`Refusals.log_refusal`)."""
        self.refusals.log_refusal(reason, count, detail)

    # -- one poll -----------------------------------------------------------------------------
    def serve(
        self, messages: Iterable[Message], emit: Callable[[list[Message]], None] | None = None
    ) -> list[Message]:
        """Apply one poll's messages within its budget (`PollBudget.admit`); a refused message is counted and skipped.

        Args:
            messages: the messages of one poll, in arrival order.
            emit: if given, called with each message's outputs as soon as they are built (the service publishes
                them at once: the first key-step of a large poll does not wait for the last one to be applied).

        Returns:
            Messages to publish (none with ``emit``: they went to it).
        """
        out: list[Message] = []
        put = out.extend if emit is None else emit
        for message in self.budget.admit(messages):
            put(self._guarded(message))
        return out

    def _guarded(self, message: KeyStepEvent | Heartbeat | KeyStepOnset) -> list[Message]:
        """`handle`, with a refusal or an unencodable output counted and logged instead of raised."""
        # Clocks of two machines: 0 when the detector's runs ahead of ours, capped where it lags by hours.
        hop = min(max(self.clock() - message.timestamp, 0.0), MAX_LATENCY_MS / 1000)
        self._hop_ms = round(1000 * hop, 3)
        state = self.streams.get(message.stream_id)
        served_before = -1 if state is None else state.served
        out: list[Message] = []
        try:
            out = self.onset(message) if isinstance(message, KeyStepOnset) else self.handle(message)
        except Refused as err:
            self.refuse(err)
        except MessageError as err:  # an output the wire refuses: a defect, contained to this message
            self.refuse(Unsendable(f"{message.stream_id}: {err}"))
        # Only a served message is measured (`StreamState.heard`): an intruder's, stamped at time 0 and refused or
        # ignored, once set a live stream's hop to an hour and fed the histogram.
        now = self.streams.get(message.stream_id)
        if self.observe is not None and now is not None and (now is not state or now.served != served_before):
            self.observe("hop", hop)
        return out

    def _superseded(self, message: KeyStepEvent | Heartbeat) -> None:
        """Count a message that a later one of its poll replaced as heard (its seq is no gap)."""
        state = self.streams.get(message.stream_id)
        if state is not None and state.session == message.session:
            state.count_gaps(message.seq, late=message.seq > state.last_seq)

    # -- one message --------------------------------------------------------------------------
    def handle(self, message: Message) -> list[Message]:
        """Apply one incoming key-step or heartbeat (other kinds are ignored: an onset goes to `onset`).

        Returns:
            Messages to publish: alerts for newly applied steps (the live one, and at most `RESEND_ALERTS`
            rebuilt ones), the `StepEvent` if new, the session's end report if it ended, one status.

        Raises:
            UnknownStep: a heartbeat's ``current`` is not in the graph (nothing is changed). A history item that is
                not in the graph refuses nothing but itself: it is counted once and skipped, and the session goes on.
            StreamLimit: a new stream, and no idle stream to evict (nothing is changed).
            StreamTaken: another session is live on the stream id (nothing is changed).
        """
        if isinstance(message, KeyStepEvent):
            return self.on_keystep(message)
        if isinstance(message, Heartbeat):
            return self.on_heartbeat(message)
        return []

    def on_keystep(self, message: KeyStepEvent) -> list[Message]:
        """A confirmed key-step: its alert (if done too early), the viewers' copy of it, the stream's status."""
        taken = self._take(message)
        if taken is None:
            return []
        state, out = taken
        self._check_name(message, state)
        if message.index not in state.forwarded and message.step in self._steps:
            state.forwarded.add(message.index)
            out.append(self.outputs.step_event(state, message))
        # The step under way is the heartbeats' word alone: a detector sends one just before each key-step, saying
        # what is under way once it is confirmed. Clearing it here when it was the confirmed step's cleared the
        # step begun again right after a short one (A, b, A: the heartbeat says A, then A's and b's key-steps come)
        # until the next heartbeat.
        out.append(self.outputs.status(message.stream_id, state))
        return out

    def _check_name(self, message: KeyStepEvent, state: StreamState) -> None:
        """Say, once a session, that its detector names a step otherwise than the graph: a detector of another
        procedure whose step ids the graph has too (its boil_water checked as the graph's add_coins) raises alerts in
        the graph's words that mean nothing. The all-in-one run refuses such a pair before it starts
        (`streaming.detector.loading.detector_for_graph`); a checker apart hears of it only here. Its steps
        are still checked, by id, as the wire format says."""
        if state.misnamed or message.step not in self._steps or not message.step_name:
            return
        name = self.outputs.name(message.step)
        if message.step_name == name:
            return
        state.misnamed = True
        self.changes(message.stream_id, "misnamed", f"its detector calls step {message.step} {message.step_name!r}, "
                     f"the task graph {name!r}: a detector of another procedure? its steps are checked as the graph's")

    def on_heartbeat(self, message: Heartbeat) -> list[Message]:
        """Liveness and statistics (and the history): the stream's status, and its end report on the last one."""
        taken = self._take(message)
        if taken is None:
            return []
        state, out = taken
        out += self._settle_early(state, ended=message.ended)
        newly_ended = message.ended and not state.ended
        state.current, state.frames, state.dropped = message.current, message.frames, message.dropped
        state.fps, state.ended, state.stopped = message.fps, message.ended, message.stopped
        state.evidence_now = _evidence(message)
        # 0 means no frame went through the stage since the last heartbeat (the ended ones): the view keeps showing
        # the last measured latency instead of a row of zeros.
        state.latency.update((name, getattr(message, name)) for name in DETECTOR_LATENCY if getattr(message, name))
        if message.ended:
            out += self._end_session(message.stream_id, state)
        if newly_ended:
            never = len(state.report.missing) if state.report is not None else 0
            # Key-steps the graph does not hold are refused one by one, counted with every stream's; the end line
            # said "ended (12 key-steps, ...)" of a session whose detector of another procedure had 87 refused.
            skipped = f" ({len(state.skipped)} not in the task graph)" if state.skipped else ""
            # A camera stopped by hand is not a recording played to its end: the log says which, as viewers do.
            change, undone = ("stopped", "not done by the stop") if message.stopped else ("ended", "never done")
            self.changes(message.stream_id, change, f"{count_of(len(state.applied), 'key-step')}{skipped}, "
                         f"{count_of(state.alerts, 'alert')}, {count_of(never, 'required step')} {undone}")
        out.append(self.outputs.status(message.stream_id, state))  # after the report: "ended" comes last
        return out

    def _take(self, message: KeyStepEvent | Heartbeat) -> tuple[StreamState, list[Message]] | None:
        """Bring the stream up to the message's history: the alerts of the steps new to it (first: they are what a
        person waits for), after the old session's end report if the message starts a new one.

        Returns:
            The stream's state and the messages so far, or None for an old or duplicated message (its history is a
            prefix of what was applied), or one of a session that has ended.
        """
        sid = message.stream_id
        state = self.streams.get(sid)
        if state is not None and state.session == message.session:
            behind = state.last_seq - message.seq
            if 0 <= behind < SEQ_WINDOW:
                return None
            if state.ended:
                # Its end was reported once (the `missing` report, re-sent as is): a session that spoke again after
                # it was brought back to life, and that report went stale, naming steps since done.
                return None
        continues = state is not None and state.continues(message)
        if state is not None and state.session != message.session and not state.idle:
            silent = self.monotonic() - state.last_heard >= self.table.timeout_s
            # A session at MAX_HISTORY is full: its detector went on in a new one (`EventPublisher.keystep`).
            if not silent and len(state.applied) < MAX_HISTORY:
                raise StreamTaken(f"{sid}: another detector session is live on this stream id (a second detector "
                                  f"given the same --stream-id?); refused until that one ends or is silent for "
                                  f"{self.table.timeout_s:g} s")
            # Silent that long it is lost, whether or not `StreamTable.expire` has said so yet (a restarted
            # detector's first message can come first): its detector died unheard, so it gets no end report.
            if silent and not state.lost:
                self.changes(sid, "lost", f"silent {self.table.timeout_s:g} s")
            state.lost = state.lost or silent
        self._check_current(message)
        out: list[Message] = []
        if state is None:
            evicted = self.table.make_room(sid)
            if evicted is not None:
                self.counts["evicted"] += 1
                self.changes(evicted[0], "evicted", f"idle; its slot went to the new stream {sid}")
                out += self._settle_early(evicted[1], ended=True)  # a lost stream's announced steps, never confirmed
        if state is None or not continues:
            previous = state
            if previous is not None:
                # The steps it announced can no longer be confirmed: their early alerts are withdrawn, as at a
                # session's end (a viewer kept them standing, and the new state's alert ids start over).
                out += self._settle_early(previous, ended=True)
            if previous is not None and previous.session != message.session:
                out += self._end_session(sid, previous)  # a new session ends the old one
            elif previous is not None:
                out += self._withdraw_diverged(sid, previous, message.history)
            # A new session, or a history that disagrees within one (it only grows, so it cannot be continued):
            # the stream starts over, counters and re-sent alerts included.
            state = self._start_over(message, previous)
            if previous is None:
                self.changes(sid, "new", f"run {state.run}")
            elif previous.session != message.session:
                self.changes(sid, "restarted", f"a new detector session, run {state.run}")
            elif previous.lost:
                self.changes(sid, "back", f"silent {self.monotonic() - previous.last_heard:.0f} s")
        else:
            state.count_gaps(message.seq, late=message.seq > state.last_seq)
            if state.lost:
                self.changes(sid, "back", f"silent {self.monotonic() - state.last_heard:.0f} s")
        state.last_seq = message.seq
        state.heard(self.monotonic(), self._hop_ms)
        state.lost = False
        out += self._apply_history(sid, state, message, len(state.applied))
        return state, out

    def onset(self, message: KeyStepOnset) -> list[Message]:
        """Alert at once on a key-step announced before it ends, if it is done too early; retract on a withdrawal.

        The step is checked as if the steps confirmed so far and ``before`` were done, without changing the stream:
        only its confirmed `KeyStepEvent` does. An onset that does not continue what the stream applied (another
        session, a history the checker has not caught up with) is left alone: nothing sure can be said about it.

        Returns:
            The early alert, or the retraction of one, or nothing.

        Raises:
            UnknownStep: the onset names a step that is not in the graph.
            OverBudget: the stream holds `MAX_EARLY` early alerts not confirmed yet.
        """
        sid = message.stream_id
        state = self.streams.get(sid)
        if state is None or state.session != message.session or state.ended or state.lost:
            return []  # a lost stream comes back with its next heartbeat or key-step, which bring its history
        state.count_gaps(message.seq)
        if message.history != state.applied:
            return []
        if set(message.before) - self._steps or message.step not in self._steps:
            raise UnknownStep(f"{sid}: onset names a step that is not in the task graph")
        if message.withdrawn:
            early = state.early.get(message.index)
            if early is None or early.step != message.step:
                return []  # an alert it never raised: ignored
            state.heard(self.monotonic(), self._hop_ms)  # served: it keeps the stream live, as each one below
            del state.early[message.index]
            return [self.outputs.retraction(state, early, None)]
        if message.index in state.early:
            return []  # announced again: ignored
        if len(state.early) >= MAX_EARLY:  # before the verdict, which costs more; its step is checked when confirmed
            raise OverBudget(f"{sid}: already holds {MAX_EARLY} early alerts of steps not confirmed yet")
        state.heard(self.monotonic(), self._hop_ms)
        # The stream's checker holds the history; the onset brings the detector's evidence as of its run's start.
        verdict = state.checker.verdict(message.step, message.before, _evidence(message))
        if not verdict.is_mistake:
            return []
        before = set(self._known(state, message.history)) | set(message.before)
        alert = self.outputs.alert(sid, state, message, message.index, replayed=False, before=before, verdict=verdict)
        state.early[message.index] = alert
        return [alert]

    def _settle_early(self, state: StreamState, ended: bool) -> list[Message]:
        """Retract each early alert whose position was confirmed as another step (or never, at the end), or as the
        same step that the checker, with the evidence of the whole segment, no longer finds a mistake."""
        out: list[Message] = []
        for index in sorted(state.early):
            if index < len(state.applied):
                early = state.early.pop(index)
                verdict = state.verdict(index)
                if verdict is None:  # confirmed as a step the graph does not know: none it can name
                    out.append(self.outputs.retraction(state, early, None))
                elif verdict.step != early.step or not verdict.is_mistake:
                    out.append(self.outputs.retraction(state, early, verdict.step))
            elif ended:
                out.append(self.outputs.retraction(state, state.early.pop(index), None))
        return out

    def _withdraw_diverged(self, sid: str, previous: StreamState, history: tuple[int, ...]) -> list[Message]:
        """Withdraw the alerts of a session's history from where a new history of the same session departs from it.

        The run stays the same, so viewers kept such an alert standing for ever, though the checker no longer held it
        (its status counted 0 alerts). What the new history holds at those positions is checked anew, and its alerts
        come after these (an alert after its retraction opens the id again: docs/wire-format.md).
        """
        applied = previous.applied
        same = next((i for i, (a, b) in enumerate(zip(applied, history, strict=False)) if a != b),
                    min(len(applied), len(history)))
        out: list[Message] = []
        for index in range(same, len(applied)):
            verdict = previous.verdict(index)
            if verdict is not None and verdict.is_mistake:
                now = history[index] if index < len(history) else None
                out.append(self.outputs.withdrawal(sid, previous, index, verdict.step, now))
        return out

    def _check_current(self, message: KeyStepEvent | Heartbeat) -> None:
        """Refuse a heartbeat whose ``current`` step is not in the graph (the next heartbeat is served as usual)."""
        if isinstance(message, Heartbeat) and message.current is not None and message.current not in self._steps:
            raise UnknownStep(f"{message.stream_id}: current step {message.current} is not in the task graph")

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
        state.allowed = self.outputs.likely_next(state.checker, ())
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
        state.report = self.outputs.missing_steps(stream_id, state)
        return [] if state.report is None else [state.report]

    def _apply_history(
        self, stream_id: str, state: StreamState, message: KeyStepEvent | Heartbeat, first: int
    ) -> list[Message]:
        """Observe ``message.history[first:]`` (the part not applied yet) and build the alerts to send, after the
        retractions of the early alerts its steps settle (`_settle_early`).

        Those go first: an early alert withdrawn because another step was confirmed at its position has the id of
        that step's alert, and viewers take the copy received last; sent after the confirmed step's alert, the
        retraction withdrew a real mistake in every view.

        A replay (many new steps at once) is coalesced: every mistake is counted, but only the live step's alert
        and the `RESEND_ALERTS` most recent rebuilt ones are built and sent.
        """
        history = message.history
        live = message.index if isinstance(message, KeyStepEvent) else -1
        observe = state.checker.observe
        # Only the live step comes with the detector's evidence; a step rebuilt from history (a lost message, a
        # restarted checker) is taken as confirmed with certainty.
        evidence = _evidence(message) if isinstance(message, KeyStepEvent) else NO_EVIDENCE
        unknown = [index for index in range(first, len(history)) if history[index] not in self._steps]
        for index in unknown:  # refused once, whichever message brings it first; the session goes on without it
            state.skipped.append(index)
            self.refuse(UnknownStep(f"{stream_id}: step {history[index]} (history[{index}]) is not in the task "
                                    "graph; skipped"))
        mistakes = [index for index in range(first, len(history)) if history[index] in self._steps
                    and observe(history[index], evidence if index == live else NO_EVIDENCE).is_mistake]
        if first < len(history):
            state.allowed = self.outputs.likely_next(state.checker, self._known(state, history))
        state.applied = history
        settled = self._settle_early(state, ended=False)
        state.alerts += len(mistakes)
        sent = [index for index in mistakes if index != live][-RESEND_ALERTS:]
        if live in mistakes:
            sent = sorted([*sent, live])
        alerts = []
        before: set[int] = set()  # the steps done before each alert's step, grown alert by alert
        done_to = 0
        for index in sent:
            before.update(s for s in history[done_to:index] if not state.skipped or s in self._steps)
            done_to = index
            alerts.append(self.outputs.alert(stream_id, state, message, index, replayed=index != live, before=before))
        state.recent_alerts.extend(alerts)
        return [*settled, *alerts]

    def _known(self, state: StreamState, history: tuple[int, ...]) -> tuple[int, ...]:
        """The history without its skipped steps (those not in the graph): what the procedure questions read."""
        return tuple(s for s in history if s in self._steps) if state.skipped else history

    # -- time ---------------------------------------------------------------------------------
    def periodic(self, period_s: float, stats: ReceiveStats | None = None) -> list[Message]:
        """What time brings: streams expire (`StreamTable.expire`: a stream marked lost sends its status at once),
        due snapshots are re-sent (`Snapshots.due`), and one `CheckerHealth` goes out per period.

        Args:
            period_s: re-send period in seconds.
            stats: the receiver's counts, for the `CheckerHealth`.

        Returns:
            Messages to publish.
        """
        now = self.clock()
        idle_now = self.monotonic()
        lost, freed = self.table.expire(idle_now)
        for sid in lost:
            self.changes(sid, "lost", f"silent {self.table.timeout_s:g} s")
        out: list[Message] = []
        for sid, state in freed:
            self.changes(sid, "freed", f"idle {FORGET_AFTER * self.table.timeout_s:g} s")
            out += self._settle_early(state, ended=True)  # a lost stream's announced steps, never confirmed
        self.changes.flush()
        self.refusals.flush()
        out += [self.status(sid) for sid in lost]
        out += self.snapshots.due(self.streams, now, period_s)
        self.budget.forget_waiting(idle_now, FORGET_AFTER * self.table.timeout_s)
        if self.snapshots.health_due(now, period_s):
            out.append(self.health(stats or ReceiveStats()))
        return out

    def status(self, stream_id: str) -> Status:
        """The current `Status` message of a stream (`Outputs.status`; it takes the stream's next ``seq``)."""
        return self.outputs.status(stream_id, self.streams[stream_id])

    def health(self, stats: ReceiveStats) -> CheckerHealth:
        """The checker's counts as a `CheckerHealth` message (`Outputs.health`)."""
        return self.outputs.health(self.streams, self.counts, stats)
