"""What the live terminal view knows: a state dataclass fed with the checker's messages, one at a time.

`ViewState.apply` folds one received message into the state (alerts de-duplicated by their stable ``alert_id``
within their detector ``run``, so a restarted checker's re-sent alerts show once and a new run's alerts, whose ids
start over, show too; the copy received last wins, so a confirmation's probability replaces the early alert's, and
``seq`` is never compared: a restarted checker's numbers start over; end-of-session reports once per run).
Drawing it is `streaming.view.render`'s; receiving the messages and deciding when to redraw is
`streaming.view.client`'s. Every collection is bounded: a peer cannot make the view remember without limit.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from graphs.task_graph import TaskGraph
from streaming.checker.config import MAX_STREAMS
from streaming.messages import Alert, CheckerHealth, Message, MissingSteps, Retraction, Status, StepEvent
from streaming.next_steps import JustLeft, just_left
from streaming.step_names import StepNames, named_steps
from streaming.transport import FORGET_S, answering_start, gone_silent, let_go

ALERT_LOG: int = 12  # alerts kept on screen
EVENT_LOG: int = 8  # recent key-steps kept on screen
ENDED_LOG: int = 8  # ended sessions whose rows were let go that keep their verdict line
MAX_VIEW_STREAMS: int = MAX_STREAMS  # streams kept in the view (the checker tracks as many); the least recent goes


@dataclass
class ViewState:
    """Everything the terminal view draws.

    Args:
        names: step id -> readable name (from the task graph); unknown ids are shown as numbers.
    """

    names: dict[int, str] = field(default_factory=dict)
    # The latest `Status` per stream is the row itself: every field the table shows is on it.
    streams: dict[str, Status] = field(default_factory=dict)
    # stream -> the step that has just stopped being under way, its key-step on its way (`streaming.next_steps`)
    left: dict[str, JustLeft] = field(default_factory=dict)
    alerts: deque[tuple[float, Alert]] = field(default_factory=lambda: deque(maxlen=ALERT_LOG))
    events: deque[tuple[float, StepEvent]] = field(default_factory=lambda: deque(maxlen=EVENT_LOG))
    # stream id -> (its latest run, the alert ids seen in that run): alert ids restart with every
    # run, and keeping only the latest run's bounds the set by the run's history.
    alert_ids: dict[str, tuple[str, set[str]]] = field(default_factory=dict)
    # End-of-session reports, and each stream's latest one (a report is re-sent until its stream starts a new run):
    # kept past the stream's row, as its alert ids are, so that a report of the same run sent again is no news.
    missing: deque[tuple[float, MissingSteps]] = field(default_factory=lambda: deque(maxlen=ALERT_LOG))
    reported: dict[str, MissingSteps] = field(default_factory=dict)
    # The last rows of ended sessions whose rows were let go (`forget_gone`, or over `MAX_VIEW_STREAMS`), with when
    # their status last came, the oldest first: their verdict lines stay, as their alerts and reports stay in the log.
    ended: dict[str, tuple[float, Status]] = field(default_factory=dict)
    # (stream, run, index) of a shown alert -> the video seconds of its confirmed key-step (start, end).
    alert_video: dict[tuple[str, str, int], tuple[float, float]] = field(default_factory=dict)
    # Early alerts retracted, per stream: id -> the retraction (kept with the alert ids of the same run).
    retracted: dict[str, dict[str, Retraction]] = field(default_factory=dict)
    malformed: int = 0
    health: CheckerHealth | None = None  # the checker's latest counts of what it refused
    # The person stopped the streams this view runs (Ctrl-C in `stream-detect run`): their sessions end cut short, so
    # their verdicts say "stopped" and what was "not done by then", not "ended" and "never done".
    stopped: bool = False
    # (stream, run) of the sessions that had ended when the person stopped them (`stopped`): a recording that played to
    # its end before the Ctrl-C was not cut short by it.
    ended_before_stop: frozenset[tuple[str, str]] = frozenset()
    # (stream, run) of the sessions whose detector was stopped (their status said ``stopped``), the oldest first: their
    # reports are told apart from those of sessions that ended after the stream's row went to a new run, or went.
    stopped_runs: dict[tuple[str, str], None] = field(default_factory=dict)
    # The frames of the shortest step the segmenter of the detector this view runs can confirm (`stream-detect run`:
    # one process), for the verdict of a session too short for any step; None: not known (a view apart from its
    # detector: the segmenter's settings are not on the wire).
    shortest_step: int | None = None
    # Whether the checker still speaks (it sends every HEARTBEAT_S), wall times: a view on a checker that died, or
    # that restarted and forgot a stream whose detector had gone, showed the last status as live for ever.
    endpoint: str = ""  # the checker's output, as the view was told it
    listening_since: float | None = None  # when the view began to listen (None: the state is not fed by a socket)
    heard: float | None = None  # when the latest message arrived
    now: float = 0.0  # the time the drawing is for (the receiving loop sets it)
    status_heard: dict[str, float] = field(default_factory=dict)  # stream -> when its latest status arrived
    forget_s: float = FORGET_S  # `forget_gone`
    # Since when the checker has answered without a silence of `SILENT_S` (set by `apply`): only that time counts
    # towards `forget_s`.
    answering_since: float | None = None
    steps: StepNames = field(init=False)  # the names shown: the --graph's, until the checker names a step

    def __post_init__(self) -> None:
        self.steps = StepNames(self.names)

    @property
    def name_conflicts(self) -> dict[int, tuple[str, str]]:
        """step -> (the --graph's name, the checker's): the view was given another graph than the checker's."""
        return self.steps.conflicts

    def apply(self, message: Message, received_at: float | None = None) -> bool:
        """Fold one message into the state.

        Args:
            message: a message from the checker's output.
            received_at: wall time of arrival (for the log); the message's timestamp if None.

        Returns:
            True if the message was new: an alert or report seen before in its run, and a status that changes
            nothing but the detector's counters (``current``, frames, rate, gaps), return False.
        """
        when = message.timestamp if received_at is None else received_at
        self.answering_since = answering_start(self.answering_since, self.heard, when)
        self.heard = when
        if isinstance(message, Alert):
            run, seen = self.alert_ids.get(message.stream_id, ("", set()))
            if run != message.run:
                run, seen = message.run, set()
                if message.stream_id not in self.alert_ids and len(self.alert_ids) >= MAX_VIEW_STREAMS:
                    # Kept past its row (`forget_gone`), so bounded on its own: a stream without a row goes first.
                    old = next((sid for sid in self.alert_ids if sid not in self.streams), next(iter(self.alert_ids)))
                    del self.alert_ids[old]
                    self.retracted.pop(old, None)
                self.alert_ids[message.stream_id] = (run, seen)
                self.retracted.pop(message.stream_id, None)
            if message.alert_id in seen:
                # An alert after its retraction opens it again: another step began at that position (an early
                # alert withdrawn, then another one's). The copy received last wins, so its next retraction counts.
                reopened = self.retracted.get(message.stream_id, {}).pop(message.alert_id, None) is not None
                if reopened:  # the withdrawn step's span is not this mistake's
                    self.alert_video.pop(step_position(message), None)
                return self._update_alert(message, reopened) or reopened
            seen.add(message.alert_id)
            self.alerts.append((when, message))
            self._learn_names(message)
            shown = {step_position(a) for _, a in self.alerts}
            self.alert_video = {key: span for key, span in self.alert_video.items() if key in shown}
            for _, ev in self.events:  # in --alert-on end mode the key-step comes first
                if step_position(ev) == step_position(message):
                    self.alert_video[step_position(ev)] = (ev.start, ev.end)
            return True
        if isinstance(message, Retraction):
            run, seen = self.alert_ids.get(message.stream_id, ("", set()))
            known = self.retracted.get(message.stream_id, {})
            if run != message.run or message.alert_id not in seen or message.alert_id in known:
                return False  # an alert this view never showed, or already shown as retracted
            self.retracted.setdefault(message.stream_id, known)[message.alert_id] = message
            self._learn_names(message)
            return True
        if isinstance(message, MissingSteps):
            previous_report = self.reported.get(message.stream_id)
            if previous_report is not None and previous_report.run == message.run:
                return False
            if previous_report is None and len(self.reported) >= MAX_VIEW_STREAMS:
                # A bound on peers' ids: a stream without a row goes first, else the one reported first.
                old = next((sid for sid in self.reported if sid not in self.streams), next(iter(self.reported)))
                del self.reported[old]
            self.reported[message.stream_id] = message
            self.missing.append((when, message))
            self._learn_names(message)
            return True
        if isinstance(message, StepEvent):
            self.events.append((when, message))
            self._learn_names(message)
            if any(step_position(a) == step_position(message) for _, a in self.alerts):
                self.alert_video[step_position(message)] = (message.start, message.end)
            return True
        if isinstance(message, Status):
            previous = self.streams.get(message.stream_id)
            if previous is None and len(self.streams) >= MAX_VIEW_STREAMS:
                # Heard longest ago, by this view's clock: a peer's own timestamps cannot choose which stream goes.
                self._drop(min(self.streams, key=lambda sid: self.status_heard.get(sid, 0.0)))
            self.streams[message.stream_id] = message
            self.status_heard[message.stream_id] = when
            left = just_left(message, previous, self.left.pop(message.stream_id, None), when)
            if left is not None:
                self.left[message.stream_id] = left
            if message.stopped and (message.stream_id, message.run) not in self.stopped_runs:
                self.stopped_runs[(message.stream_id, message.run)] = None
                while len(self.stopped_runs) > MAX_VIEW_STREAMS:  # far more than the reports the view keeps
                    del self.stopped_runs[next(iter(self.stopped_runs))]
            self.ended.pop(message.stream_id, None)  # back: its row says it again
            return previous is None or _procedure(previous) != _procedure(message)
        if isinstance(message, CheckerHealth):
            self.health = message
            return True
        return False

    def _drop(self, stream_id: str) -> None:
        """Forget a stream's row; an ended session's keeps its verdict line (`ended`).

        Its alert ids and end report stay (bounded on their own, in `apply`): its alerts and report are still in the
        log, and a stream back in the same run (a detector whose link was down for 10 minutes, its last heartbeat
        reaching a restarted checker) has them sent again, which then showed each again as news."""
        row, heard = self.streams.pop(stream_id, None), self.status_heard.pop(stream_id, None)
        self.left.pop(stream_id, None)
        if row is not None and row.ended and not row.lost:
            self.ended[stream_id] = (row.timestamp if heard is None else heard, row)
            while len(self.ended) > ENDED_LOG:
                del self.ended[next(iter(self.ended))]

    def forget_gone(self) -> list[str]:
        """Forget the rows whose status has not come for `forget_s` while the checker answers (at ``now``); a view
        not fed by a socket (``listening_since`` None), or whose checker is silent, forgets nothing: it cannot tell
        a stream the checker let go from a link that is down. Only the time since the checker answers again counts:
        after a longer outage every row went at its first message, before it had re-sent the streams it holds.

        Returns:
            The streams forgotten.
        """
        if self.listening_since is None or self.silent() or self.answering_since is None:
            return []
        gone = let_go(self.status_heard, self.answering_since, self.now, self.forget_s)
        for sid in gone:
            self._drop(sid)
        return gone

    def shows(self, alert: Alert) -> bool:
        """Whether ``alert`` (its run and id) is shown already, and not as retracted: a copy of it then updates it,
        where `apply` of an alert not shown, or shown retracted, tells of a mistake."""
        run, seen = self.alert_ids.get(alert.stream_id, ("", set()))
        retracted = self.retracted.get(alert.stream_id, {})
        return run == alert.run and alert.alert_id in seen and alert.alert_id not in retracted

    def _update_alert(self, message: Alert, reopened: bool = False) -> bool:
        """A later copy of a shown alert: the copy received last wins (docs/wire-format.md, which copy of an alert
        wins), in place. Returns whether it says something new (a re-send that repeats it does not).

        ``reopened``: the shown one was retracted, so this is another mistake, which keeps nothing of it (its video
        time was the withdrawn step's)."""
        for i, (when, shown) in enumerate(self.alerts):
            if (shown.stream_id, shown.run, shown.alert_id) == (message.stream_id, message.run, message.alert_id):
                self.alerts[i] = (when, message if reopened else message.over(shown))
                return shown.says() != message.says()
        return False  # scrolled off the log: nothing shown to update

    def _learn_names(self, message: Message) -> None:
        for step, name in named_steps(message):
            self.steps.learn(step, name)

    def silent(self) -> bool:
        """The checker has said nothing for `SILENT_S` (or nothing at all since the view began to listen)."""
        since = self.heard if self.heard is not None else self.listening_since
        return since is not None and gone_silent(since, self.now)

    def stale(self, stream_id: str) -> bool:
        """A stream that has not ended and whose status the checker stopped re-sending `SILENT_S` ago: its
        detector, or the checker, is gone, and the row is what it was then. A lost one too (the checker re-sends a
        lost stream's status while it holds it): a restarted checker forgot it, as the dashboard's "no word" says."""
        row, heard = self.streams.get(stream_id), self.status_heard.get(stream_id)
        return (row is not None and not row.ended and heard is not None
                and self.listening_since is not None and gone_silent(heard, self.now))

    def name(self, step: int | None) -> str:
        """Readable name of a step (``-`` for none)."""
        if step is None:
            return "-"
        return self.steps.name(step)


def step_position(message: Alert | StepEvent) -> tuple[str, str, int]:
    """Where a step is in the procedure: its stream, run and index in the run's history (an alert's and its key-step's
    are equal)."""
    return message.stream_id, message.run, message.index




def _procedure(row: Status) -> tuple[object, ...]:
    """What a status says about the procedure (not the detector's counters): when it changes, the status is news."""
    return (row.run, row.done, row.allowed, row.allowed_scores, row.rule, row.alerts, row.ended, row.lost)


def graph_names(graph: TaskGraph) -> dict[int, str]:
    """Step id -> name map of a task graph, for `ViewState.names`."""
    return dict(zip(graph.step_ids, graph.step_names, strict=True))
