"""The live terminal view: a state dataclass fed with messages, and a pure function state -> rich renderable.

`ViewState.apply` folds one received message into the state (alerts de-duplicated by their stable
``alert_id`` within their detector ``session``, so a restarted checker's re-sent alerts show once and a
new session's alerts, whose ids start over, show too); `render` draws it; the loop in
`streaming.viewer` decides when to refresh. `jsonl_line` is the ``--jsonl`` form of a message.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphs.task_graph import TaskGraph
from streaming.messages import Alert, KeyStepEvent, Message, Status, encode

ALERT_LOG: int = 12  # alerts kept on screen
EVENT_LOG: int = 8  # recent key-steps kept on screen


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
    events: deque[tuple[float, KeyStepEvent]] = field(default_factory=lambda: deque(maxlen=EVENT_LOG))
    # stream id -> (its latest session, the alert ids seen in that session): alert ids restart with every
    # session, and keeping only the latest session's bounds the set by the session's history.
    alert_ids: dict[str, tuple[str, set[str]]] = field(default_factory=dict)
    malformed: int = 0

    def apply(self, message: Message, received_at: float | None = None) -> bool:
        """Fold one message into the state.

        Args:
            message: a message from the checker's output.
            received_at: wall time of arrival (for the log); the message's timestamp if None.

        Returns:
            True if the message was new (an alert seen before in its session returns False).
        """
        when = message.timestamp if received_at is None else received_at
        if isinstance(message, Alert):
            session, seen = self.alert_ids.get(message.stream_id, ("", set()))
            if session != message.session:
                session, seen = message.session, set()
                self.alert_ids[message.stream_id] = (session, seen)
            if message.alert_id in seen:
                return False
            seen.add(message.alert_id)
            self.alerts.append((when, message))
            self.names.setdefault(message.step, message.step_name)
            return True
        if isinstance(message, KeyStepEvent):
            self.events.append((when, message))
            self.names.setdefault(message.step, message.step_name)
            return True
        if isinstance(message, Status):
            self.streams[message.stream_id] = message
            return True
        return False

    def name(self, step: int | None) -> str:
        """Readable name of a step (``-`` for none)."""
        if step is None:
            return "-"
        return self.names.get(step, str(step))


def graph_names(graph: TaskGraph) -> dict[int, str]:
    """Step id -> name map of a task graph, for `ViewState.names`."""
    return dict(zip(graph.step_ids, graph.step_names, strict=True))


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int((t % 1) * 1000):03d}"


def render(state: ViewState) -> RenderableType:
    """Draw the state: a table of streams, the alert log and the recent key-steps.

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
    mistaken = {(a.stream_id, a.session, a.step) for _, a in state.alerts}
    for sid, row in sorted(state.streams.items()):
        done = Text(", ").join(
            Text(state.name(s), style="bold red" if (sid, row.session, s) in mistaken else "green") for s in row.done
        )
        streams.add_row(
            sid + (" (ended)" if row.ended else ""),
            state.name(row.current),
            done if row.done else "-",
            ", ".join(state.name(s) for s in row.allowed) or "-",
            f"{row.fps:.1f}",
            str(row.frames),
            str(row.dropped),
            Text(str(row.alerts), style="bold red" if row.alerts else ""),
        )
    if not state.streams:
        streams.add_row("waiting for streams...", "", "", "", "", "", "", "")

    alerts = Table(title="alerts", expand=True, title_style="bold red")
    for col in ("time", "stream", "mistake", "missing pre-conditions"):
        alerts.add_column(col)
    for when, alert in state.alerts:
        missing = ", ".join(alert.missing_names) or ("not in the task graph" if alert.undefined else "-")
        alerts.add_row(_clock(when), alert.stream_id, Text(alert.step_name, style="bold red"), missing)
    if not state.alerts:
        alerts.add_row("-", "-", "no mistakes so far", "")

    events = Table(title="recent key-steps", expand=True)
    for col in ("time", "stream", "key-step", "video time", "confidence"):
        events.add_column(col)
    for when, ev in state.events:
        events.add_row(
            _clock(when), ev.stream_id, ev.step_name, f"{ev.start:.1f}-{ev.end:.1f} s", f"{ev.confidence:.2f}"
        )

    parts: list[RenderableType] = [streams, alerts, events]
    if state.malformed:
        parts.append(Text(f"{state.malformed} malformed messages dropped", style="yellow"))
    return Group(*parts)


def jsonl_line(message: Message) -> str:
    """One JSON line for ``--jsonl``: the message's wire payload (version, kind and fields)."""
    return encode(message)[1].decode("utf-8")
