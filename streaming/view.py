"""The live terminal view: a state dataclass fed with messages, and a pure function state -> rich renderable.

`ViewState.apply` folds one received message into the state (alerts de-duplicated by their stable
``alert_id`` within their detector ``run``, so a restarted checker's re-sent alerts show once and a
new run's alerts, whose ids start over, show too; end-of-session reports likewise, once per run); `render` draws it;
the loop in `streaming.viewer` decides when to refresh. `jsonl_line` is the ``--jsonl`` form of a message.

Every name and id on screen is untrusted text (graph files, detector checkpoints, the wire): `render` shows each
as `rich.text.Text` made `printable`, never as markup, so ``[/]`` is shown as written and an escape sequence is
shown escaped instead of reaching the terminal. JSON lines are safe as they are: JSON writes every control and
non-ASCII character as an escape.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphs.limits import MAX_STEPS
from graphs.safe_text import printable
from graphs.task_graph import TaskGraph
from streaming.messages import Alert, CheckerHealth, Message, MissingSteps, Retraction, Status, StepEvent, encode

ALERT_LOG: int = 12  # alerts kept on screen
EVENT_LOG: int = 8  # recent key-steps kept on screen
MAX_VIEW_STREAMS: int = 256  # streams kept in the view (the checker tracks as many); the least recent one goes


@dataclass
class ViewState:
    """Everything the terminal view draws.

    Args:
        names: step id -> readable name (from the task graph); unknown ids are shown as numbers.
    """

    names: dict[int, str] = field(default_factory=dict)
    # The latest `Status` per stream is the row itself: every field the table shows is on it.
    streams: dict[str, Status] = field(default_factory=dict)
    alerts: deque[tuple[float, Alert]] = field(default_factory=lambda: deque(maxlen=ALERT_LOG))
    events: deque[tuple[float, StepEvent]] = field(default_factory=lambda: deque(maxlen=EVENT_LOG))
    # stream id -> (its latest run, the alert ids seen in that run): alert ids restart with every
    # run, and keeping only the latest run's bounds the set by the run's history.
    alert_ids: dict[str, tuple[str, set[str]]] = field(default_factory=dict)
    # End-of-session reports, and the run each stream was last reported for (a report is re-sent until its stream
    # starts a new run).
    missing: deque[tuple[float, MissingSteps]] = field(default_factory=lambda: deque(maxlen=ALERT_LOG))
    reported: dict[str, str] = field(default_factory=dict)
    # Early alerts retracted, per stream: id -> the retraction (kept with the alert ids of the same run).
    retracted: dict[str, dict[str, Retraction]] = field(default_factory=dict)
    malformed: int = 0
    health: CheckerHealth | None = None  # the checker's latest counts of what it refused

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
        if isinstance(message, Alert):
            run, seen = self.alert_ids.get(message.stream_id, ("", set()))
            if run != message.run:
                run, seen = message.run, set()
                self.alert_ids[message.stream_id] = (run, seen)
                self.retracted.pop(message.stream_id, None)
            if message.alert_id in seen:
                return False
            seen.add(message.alert_id)
            self.alerts.append((when, message))
            self._learn_name(message.step, message.step_name)
            return True
        if isinstance(message, Retraction):
            run, seen = self.alert_ids.get(message.stream_id, ("", set()))
            known = self.retracted.setdefault(message.stream_id, {})
            if run != message.run or message.alert_id not in seen or message.alert_id in known:
                return False  # an alert this view never showed, or already shown as retracted
            known[message.alert_id] = message
            return True
        if isinstance(message, MissingSteps):
            if self.reported.get(message.stream_id) == message.run:
                return False
            if message.stream_id not in self.reported and len(self.reported) >= MAX_VIEW_STREAMS:
                del self.reported[next(iter(self.reported))]  # the stream reported first: a bound on peers' ids
            self.reported[message.stream_id] = message.run
            self.missing.append((when, message))
            return True
        if isinstance(message, StepEvent):
            self.events.append((when, message))
            self._learn_name(message.step, message.step_name)
            return True
        if isinstance(message, Status):
            previous = self.streams.get(message.stream_id)
            if previous is None and len(self.streams) >= MAX_VIEW_STREAMS:
                oldest = min(self.streams.values(), key=lambda row: row.timestamp).stream_id
                del self.streams[oldest]
                self.alert_ids.pop(oldest, None)
                self.retracted.pop(oldest, None)
            self.streams[message.stream_id] = message
            return previous is None or _procedure(previous) != _procedure(message)
        if isinstance(message, CheckerHealth):
            self.health = message
            return True
        return False

    def _learn_name(self, step: int, name: str) -> None:
        if len(self.names) < 2 * MAX_STEPS:  # a bound on what a peer can make the view remember
            self.names.setdefault(step, name)

    def name(self, step: int | None) -> str:
        """Readable name of a step (``-`` for none)."""
        if step is None:
            return "-"
        return self.names.get(step, str(step))


def _procedure(row: Status) -> tuple[object, ...]:
    """What a status says about the procedure (not the detector's counters): when it changes, the status is news."""
    return (row.run, row.done, row.allowed, row.allowed_scores, row.rule, row.alerts, row.ended, row.lost)


def graph_names(graph: TaskGraph) -> dict[int, str]:
    """Step id -> name map of a task graph, for `ViewState.names`."""
    return dict(zip(graph.step_ids, graph.step_names, strict=True))


def _clock(t: float) -> str:
    try:
        return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int((t % 1) * 1000):03d}"
    except (OverflowError, OSError, ValueError):  # a timestamp beyond what the platform's clock functions take
        return "--:--:--.---"


def _text(value: object, style: str = "") -> Text:
    """A table cell that shows ``value`` as written: never read as markup, controls and escapes made visible."""
    return Text(printable(value), style=style)


def _missing(alert: Alert, state: ViewState) -> Text:
    """The missing pre-conditions of an alert; those whose names did not fit the message are named by the view."""
    if not alert.missing:
        return _text("not in the task graph" if alert.undefined else "-")
    names = list(alert.missing_names) + [state.name(s) for s in alert.missing[len(alert.missing_names) :]]
    return _text(", ".join(names))


def _likely_next(row: Status, state: ViewState) -> Text:
    """The allowed steps of a stream, likeliest first, each with its future-step probability when it has one."""
    parts = [
        state.name(step) + (f" {score:.2f}" if score > 0 else "")
        for step, score in zip(row.allowed, row.allowed_scores, strict=True)
    ]
    return _text(", ".join(parts) or "-")


def _forgotten(alert: Alert) -> Text:
    """The missing step most likely forgotten, with its score (``-`` when the alert has none)."""
    if alert.forgotten_name is None or alert.forgotten_score is None:
        return _text("-")
    return _text(f"{alert.forgotten_name} {alert.forgotten_score:.2f}", "bold")


def _health(health: CheckerHealth) -> Text | None:
    """One line on what the checker turned away, or None when it turned nothing away and no stream is lost."""
    refused = [
        (health.stream_limit, "over the stream limit"),
        (health.unknown_step, "with a step not in the task graph"),
        (health.over_budget, "over a stream's budget"),
        (health.malformed, "malformed"),
        (health.unsendable, "unsendable"),
    ]
    parts = [f"{count} {what}" for count, what in refused if count]
    if not parts and not health.lost_streams and not health.evicted and not health.denied:
        return None
    line = f"checker: {health.streams} streams ({health.lost_streams} lost), {health.evicted} idle evicted"
    line += f"; messages refused: {', '.join(parts)}" if parts else ""
    line += f"; {health.denied} handshakes refused (key not allowed)" if health.denied else ""
    return Text(line, style="yellow")


def render(state: ViewState) -> RenderableType:
    """Draw the state: a table of streams, the alert log, the steps ended sessions never did, the recent key-steps.

    Args:
        state: what to show.

    Returns:
        A rich renderable (no side effects: the caller prints or refreshes it).
    """
    streams = Table(title="streams", expand=True)
    for col in ("stream", "now", "done", "allowed next", "fps", "frames", "dropped", "alerts"):
        if col in ("done", "allowed next"):
            streams.add_column(col, ratio=1)
        else:
            streams.add_column(col, no_wrap=True, justify="right" if col in ("fps", "frames", "dropped") else "left")
    mistaken = {(a.stream_id, a.run, a.step) for _, a in state.alerts}
    for sid, row in sorted(state.streams.items()):
        done = Text(", ").join(
            _text(state.name(s), "bold red" if (sid, row.run, s) in mistaken else "green") for s in row.done
        )
        mark = " (lost)" if row.lost else " (ended)" if row.ended else ""
        streams.add_row(
            _text(sid + mark, "yellow" if row.lost else ""),
            _text(state.name(row.current)),
            done if row.done else _text("-"),
            _likely_next(row, state),
            _text(f"{row.fps:.1f}"),
            _text(row.frames),
            _text(row.dropped),
            _text(row.alerts, "bold red" if row.alerts else ""),
        )
    if not state.streams:
        streams.add_row(_text("waiting for streams..."), *(_text("") for _ in range(7)))
    rules = sorted({row.rule for row in state.streams.values()})
    if rules:  # the query names its rule: without row-softmax weights the binary rule orders the allowed steps
        streams.caption = f"allowed next: likeliest first, future-step probability by the {'/'.join(rules)} rule"

    alerts = Table(title="alerts", expand=True, title_style="bold red")
    for col in ("time", "stream", "mistake", "missing pre-conditions", "likely forgotten"):
        alerts.add_column(col)
    for when, alert in state.alerts:
        withdrawn = state.retracted.get(alert.stream_id, {}).get(alert.alert_id)
        if withdrawn is not None:  # an early alert whose step was not confirmed: shown struck out, with why
            instead = "no step" if withdrawn.confirmed_name is None else withdrawn.confirmed_name
            alerts.add_row(_text(_clock(when)), _text(alert.stream_id), _text(alert.step_name, "strike dim"),
                           _text(f"retracted: it was {instead}", "yellow"), _text(""))
            continue
        alerts.add_row(_text(_clock(when)), _text(alert.stream_id), _text(alert.step_name, "bold red"),
                       _missing(alert, state), _forgotten(alert))
    if not state.alerts:
        alerts.add_row(_text("-"), _text("-"), _text("no mistakes so far"), _text(""), _text(""))

    events = Table(title="recent key-steps", expand=True)
    for col in ("time", "stream", "key-step", "video time", "confidence"):
        events.add_column(col)
    for when, ev in state.events:
        events.add_row(
            _text(_clock(when)), _text(ev.stream_id), _text(ev.step_name), _text(f"{ev.start:.1f}-{ev.end:.1f} s"),
            _text(f"{ev.confidence:.2f}"),
        )

    parts: list[RenderableType] = [streams, alerts]
    if state.missing:  # shown once a session has ended without some required step
        never = Table(title="never done (session ended)", expand=True, title_style="bold red")
        for col in ("time", "stream", "missing key-steps"):
            never.add_column(col)
        for when, report in state.missing:
            names = list(report.missing_names) + [state.name(s) for s in report.missing[len(report.missing_names) :]]
            never.add_row(_text(_clock(when)), _text(report.stream_id), _text(", ".join(names), "bold red"))
        parts.append(never)
    parts.append(events)
    health = _health(state.health) if state.health is not None else None
    if health is not None:
        parts.append(health)
    if state.malformed:
        parts.append(Text(f"{state.malformed} malformed messages dropped", style="yellow"))
    return Group(*parts)


def jsonl_line(message: Message) -> str:
    """One JSON line for ``--jsonl``: the message's wire payload (version, kind and fields)."""
    return encode(message)[1].decode("utf-8")
