"""The live terminal view drawn: a pure function from a `ViewState` (`streaming.view.state`) to a rich renderable.

`render` draws the state; the loop in `streaming.view.client` decides when to refresh (``--jsonl`` prints the
messages instead, `streaming.detector.sinks.JsonLinesSink`).

What the view promises a reader: every stream that ended gets a one-line verdict (its mistakes, the steps it never
did, or "correct"); an alert shows where in the video its step was (the confirmed key-step's video time, matched by
run and position); "allowed next" never lists the step being done now, and an ended stream has none; columns keep
their widths from one refresh to the next (fixed-format columns have a minimum width, names share the rest), and
names fold onto a second line instead of being cut. Below `NARROW_WIDTH` columns the alert log leaves out its wall
clock, the streams table its frame counts and rate, and both share the width among their names by their longest
words, so that ``boil_water`` is not folded into ``boil_w`` / ``ater`` (their columns then move when longer names
arrive); below `COMPACT_WIDTH` the streams, the alert log, the latencies and the recent key-steps are lines instead
of tables, and so is any of them whose table would fold a word of its names (long names, as CaptainCook4D's).
``fit=True`` draws tables as wide as their contents, for output that is not a terminal. A live frame fits the
terminal's height: the header, the health line and the newest alerts stay on screen, the streams' rows take the
lines left (the live streams with an alert first, `stream_order`), and those that do not fit are summed up in one row;
short of lines, the alert log's caption goes first, then the streams' rows, then the oldest alerts and reports of
steps never done, each log's summed up in a row at its top (`_Fitted`).

Every name and id on screen is untrusted text (graph files, detector checkpoints, the wire): `render` shows each
as `rich.text.Text` made `printable`, never as markup, so ``[/]`` is shown as written and an escape sequence is
shown escaped instead of reaching the terminal. JSON lines are safe as they are: JSON writes every control and
non-ASCII character as an escape.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from rich._ratio import ratio_distribute  # what rich's tables share their width with
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Column, Table
from rich.text import Text

from graphs.common.safe_text import clock_text, count_of, printable
from streaming.messages import Alert, CheckerHealth, MissingSteps, Retraction, Status, StepEvent
from streaming.next_steps import allowed_next, waiting_on
from streaming.session_verdict import (
    EndTone,
    SessionVerdict,
    ended_text,
    nothing_recognised,
    retraction_reason,
    session_verdict,
    step_names,
)
from streaming.stage_latency import STAGES, latency_field
from streaming.view.state import ViewState, step_position

# Minimum widths of the fixed-format columns, so that a table keeps its shape as values come and go.
CLOCK_WIDTH: int = len("00:00:00")
VIDEO_WIDTH: int = len("100.0-100.0 s")
NUMBER_WIDTH: int = 6
NARROW_WIDTH: int = 100  # below it the alert log leaves out its wall clock, the streams table its frame counts,
# and their names share the width by need
WIDEST_TABLE: int = 160  # a table is stretched to the terminal's width up to this, and past it only when its contents
# would take more lines at this width: at 200 columns the key-step column was 150 characters of blanks and each
# latency sat 20 columns right of its stage's name
COMPACT_WIDTH: int = 60  # below it the streams, the alert log, the latencies and the recent key-steps are lines, not
# tables: six bordered columns left the names of a 50-column terminal one character wide
STREAM_ROOM: int = len("cam0 (ended)")  # the stream column `NARROW_WIDTH` and `COMPACT_WIDTH` were set with
HANG: int = 2  # the indent of what belongs to an entry above it in the line layouts (`Hanging`'s wrapped lines)
WORD_WIDTH: int = 24  # the longest word a column of names widens itself for: a longer one folds
ENDED_MARK: str = " (ended)"
PROBABILITY_HEADER: str = "P mistake"
ALERTS_CAPTION: str = (
    "P mistake: the checker's probability that this step was done before a pre-condition, from the detector's "
    "evidence (it alerts from --alert-threshold; 1.00 with --checker binary). likely forgotten: the missing "
    "pre-condition the task graph most often puts before this step; 'graph' is that tie's strength in the graph "
    "(its missing-step score), the same for every person, not a probability of this alert."
)
LOST_MARK: str = " (lost)"
STALE_MARK: str = " (stale)"
STOPPED_MARK: str = " (stopped)"  # a session the person stopped, as its verdict says (`ViewState.stopped`)
# The most lines a stream's "done" or "allowed next" cell may take: a row of a recipe's twenty steps wrapped in a narrow
# column would push the alert log below an 80x24 terminal's bottom, where the live view is cut.
LIST_LINES: int = 3
END_STYLES: dict[EndTone, str] = {"no verdict": "yellow", "partly seen": "yellow", "correct": "bold green",
                                  "mistaken": "bold red"}


def _text(value: object, style: str = "") -> Text:
    """A table cell that shows ``value`` as written: never read as markup, controls and escapes made visible."""
    return Text(printable(value), style=style)


def _names(ids: tuple[int, ...], names: tuple[str, ...], state: ViewState) -> list[str]:
    """The names of steps a message lists; those whose names did not fit the message are named by the view."""
    return step_names(ids, names, state.name)


def _span(start: float, end: float) -> str:
    """A stretch of video, in seconds."""
    return f"{start:.1f}-{end:.1f} s"


def _missing(alert: Alert, state: ViewState) -> Text:
    """The missing pre-conditions of an alert (under the late-step rule: the steps that needed it, done already)."""
    if not alert.missing and alert.late_for:
        return _text("done after " + ", ".join(state.name(s) for s in alert.late_for) + ", which needed it")
    if not alert.missing:
        return _text("not in the task graph" if alert.undefined else "-")
    return _text(", ".join(_names(alert.missing, alert.missing_names, state)))


@dataclass(frozen=True)
class NameList:
    """Step names in a table cell, as many as fit in `LIST_LINES` lines of the column's width; the rest counted.

    ``keep="last"`` keeps the newest names (a stream's done steps: ``+4 earlier, pour_water, add_milk``),
    ``keep="first"`` the first (the allowed steps, likeliest first: ``boil_water 0.80, +3 more``). A column as wide
    as its contents (``fit``) shows every name on one line.
    """

    names: tuple[Text, ...]
    keep: Literal["first", "last"]
    tails: tuple[str, ...] = ()  # per name, what follows it and is never cut (an allowed step's probability)

    @cached_property
    def longest_word(self) -> int:
        """The longest word of its names (asked by each table's width check: counted once, not per ask)."""
        return max((len(word) for name in self.names for word in name.plain.split()), default=1)

    def _entry(self, k: int, chars: int | None) -> Text:
        name = self.names[k] if chars is None else Text.assemble(self.names[k][:chars], "…")
        return Text.assemble(name, self.tails[k]) if self.tails else name

    def _shown(self, count: int, chars: int | None = None) -> Text:
        """The names with all but ``count`` of them replaced by their number; with ``chars``, the one name kept
        (``count`` 1) cut to that many characters and an ellipsis, its tail kept."""
        left = len(self.names) - count
        kept = [self._entry(k, chars) for k in (range(left, len(self.names)) if self.keep == "last" else range(count))]
        if self.keep == "last":
            parts = ([_text(f"+{left} earlier")] if left else []) + kept
        else:
            parts = kept + ([_text(f"+{left} more")] if left else [])
        return Text(", ").join(parts)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        # Every name shown, measured as plain text: joining 2048 styled names (a status may list that many) only to
        # measure them took a third of a frame.
        tails = self.tails or ("",) * len(self.names)
        plain = ", ".join(name.plain + tail for name, tail in zip(self.names, tails, strict=True))
        return Measurement.get(console, options, Text(plain))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        width = max(options.max_width, 1)

        def fits(count: int, chars: int | None = None) -> bool:
            return len(self._shown(count, chars).wrap(console, width, overflow="fold")) <= LIST_LINES

        # A status may list 2048 steps and the view redraws 8 times a second: no more names than the lines could
        # hold (each takes 3 characters at least, with its ", "), and the count found by bisection, not one by one.
        low, high = 0, min(len(self.names), LIST_LINES * width // 3 + 1)
        if fits(high):
            low = high
        while high - low > 1:  # fits(low) or low == 0; not fits(high)
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        if low == 0 and self.names:
            # Not even one name whole (CaptainCook4D's run to a sentence): the newest done or the likeliest next step
            # is the one a person reads the cell for, so it is kept, cut short, rather than a bare "+1 more".
            longest = len((self.names[-1] if self.keep == "last" else self.names[0]).plain)
            cut, over = 0, longest
            while over - cut > 1:  # fits(1, cut) or cut == 0; not fits(1, over)
                middle = (cut + over) // 2
                cut, over = (middle, over) if fits(1, middle) else (cut, middle)
            if cut >= 1:
                yield self._shown(1, cut)
                return
        yield self._shown(low)


@dataclass(frozen=True)
class Hanging:
    """One entry of a line layout, its wrapped lines indented under its first: a continuation at the margin read as a
    new entry (a 64-character stream id's ``1 alert`` alone on the next line)."""

    text: Text

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.text)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        # All lines wrapped to the indented width: the first one gives up the indent too, but no word moves twice.
        lines = self.text.wrap(console, max(options.max_width - HANG, 1), overflow="fold")
        for k, line in enumerate(lines):
            yield Text.assemble(" " * HANG, line) if k else line


def _names_cell(names: list[Text], keep: Literal["first", "last"], tails: tuple[str, ...] = ()) -> NameList | Text:
    return NameList(tuple(names), keep, tails) if names else _text("-")


def _likely_next(row: Status, state: ViewState) -> NameList | Text:
    """The allowed steps of a stream (`streaming.next_steps.allowed_next`, the rule the dashboard shares), each
    with its future-step probability when it has one; ``after <step now>`` when every step left waits on the one
    under way (a bare ``-`` read as "nothing can follow"); ``-`` for none (an ended stream)."""
    left = state.left.get(row.stream_id)
    shown = allowed_next(row, left)
    if (under_way := waiting_on(row, left)) is not None:
        return _text(f"after {state.name(under_way)}")
    return _names_cell([_text(state.name(step)) for step, _ in shown], "first", tuple(map(_chance, shown)))


def _chance(shown: tuple[int, float]) -> str:
    """An allowed step's probability after its name: none for a step the rule gives none, and ``<0.01``, not
    ``0.00``, for one under half a hundredth: both read as "it cannot come next", yet the step is allowed."""
    score = shown[1]
    if score <= 0:
        return ""
    return " <0.01" if score < 0.005 else f" {score:.2f}"


def _video_time(alert: Alert, state: ViewState) -> Text:
    """Where in the video the alerted step was: its confirmed key-step's span; for an early alert the step's start
    (``from 12.4 s``, or ``now`` from an older checker); ``-`` when neither is known (an alert rebuilt from history)."""
    span = state.alert_video.get(step_position(alert))
    if span is not None:
        return _text(_span(*span))
    if alert.video_time is not None:
        return _text(f"from {alert.video_time:.1f} s")
    row = state.streams.get(alert.stream_id)
    being_done = (
        row is not None and row.run == alert.run and not row.ended and row.current == alert.step
        and len(row.done) <= alert.index
    )
    return _text("now" if being_done else "-")


def _forgotten(alert: Alert) -> Text:
    """The missing step most likely forgotten, with its score labelled as the graph's (``add_teabag (graph 0.83)``;
    ``-`` when the alert has none): beside the alert's own probability, a bare number reads as a second one. In
    brackets, not after a comma: a narrow column wraps at the space, and ``add_teabag,`` is a word longer than the
    name."""
    if alert.forgotten_name is None or alert.forgotten_score is None:
        return _text("-")
    return Text.assemble(_text(alert.forgotten_name, "bold"), _text(f" (graph {alert.forgotten_score:.2f})"))


def _standing_alerts(stream_id: str, row: Status, state: ViewState) -> list[Alert]:
    """The alerts shown for a stream's current run and not retracted, in the order of their steps."""
    return list(_session(stream_id, row, state).mistakes)


def _session(stream_id: str, row: Status, state: ViewState) -> SessionVerdict:
    """The verdict of a stream's current run from what the view holds (`streaming.session_verdict`: the rule
    ``stream-detect eval`` counts by)."""
    return session_verdict((a for _, a in state.alerts if a.stream_id == stream_id),
                           state.retracted.get(stream_id, {}).values(), state.reported.get(stream_id), row.run)


def verdict(stream_id: str, row: Status, state: ViewState) -> Text | None:
    """One line on how a stream's session went, once it ended: its mistakes and the required steps it never did.

    The rule is `streaming.session_verdict`'s, the one ``stream-detect eval`` counts by: a retracted alert is no
    mistake of the session.

    Args:
        stream_id: the stream.
        row: its latest status.
        state: the alerts, retractions and end-of-session reports to draw on.

    Returns:
        ``cam0 ended: correct (no mistake, nothing missing)``, ``cam0 ended: 1 mistake (boil_water before
        fill_kettle), nothing missing``, ``cam0 ended: no mistake; never done: add_milk``; a line saying a lost
        stream, or one in which no key-step was recognised, gets no verdict; None while the stream runs.
    """
    if state.stale(stream_id) and not state.silent():  # a silent checker is said once, for every stream
        heard = state.status_heard[stream_id]
        # Lost when last heard: most often the checker let it go (an operator read "restarted" and looked for who had
        # restarted it); a live one, a checker restarted meanwhile.
        why = ("the checker lets a lost stream go 12 times its --stream-timeout after it fell silent, and a restarted "
               "one forgets it" if row.lost else "a restarted checker forgets a stream whose detector has gone")
        return _text(f"{stream_id} stale: the checker has said nothing of it since {clock_text(heard)} ({why}), so no "
                     "verdict", "yellow")
    if row.lost:
        return _text(f"{stream_id} lost: its detector went silent before ending its session, so no verdict", "yellow")
    if not row.ended:
        return None
    stopped = _stopped(row, state)
    ended = "stopped" if stopped else "ended"  # a session the person cut short is judged so far only
    # The status counts the alerts this view missed (it joined late, or its log dropped them).
    line, tone = ended_text(_session(stream_id, row, state), state.name, recognised=len(row.done),
                            steps=len(state.names), frames=row.frames, counted=row.alerts, stopped=stopped,
                            shortest=state.shortest_step)
    return _text(f"{stream_id} {ended}: {line}", END_STYLES[tone])


def _stopped(row: Status, state: ViewState) -> bool:
    """Whether a session that ended was cut short: its detector was stopped (its status says so, whoever stopped
    it), or the person stopped the streams this view runs while it had not ended."""
    return row.stopped or _cut_by_the_person(row.stream_id, row.run, state)


def _cut_by_the_person(stream_id: str, run: str, state: ViewState) -> bool:
    return state.stopped and (stream_id, run) not in state.ended_before_stop


def _health(health: CheckerHealth) -> Text | None:
    """One line on what the checker turned away, or None when it turned nothing away and no stream is lost."""
    refused = [
        (health.stream_limit, "over the stream limit"),
        (health.unknown_step, "with a step not in the task graph"),
        (health.over_budget, "over a stream's budget (their steps come again in the stream's next message)"),
        (health.malformed, "malformed"),
        (health.unsendable, "unsendable"),
        (health.stream_taken, "on a stream id another live detector holds"),
    ]
    parts = [f"{count} {what}" for count, what in refused if count]
    if not parts and not health.lost_streams and not health.evicted and not health.denied:
        return None
    line = f"checker: {count_of(health.streams, 'stream')} ({health.lost_streams} lost), {health.evicted} idle evicted"
    line += f"; messages refused: {', '.join(parts)}" if parts else ""
    line += f"; {health.denied} handshakes refused" if health.denied else ""
    return Text(line, style="yellow")


@dataclass(frozen=True)
class _Layout:
    """How the tables size their columns: fixed-format ones at least as wide as their widest value, names sharing
    the rest of the width (or, with ``fit``, every column as wide as its contents)."""

    fit: bool
    stream_width: int  # the longest stream id the view knows

    def below(self, width: int, limit: int) -> bool:
        """Whether a table drawn ``width`` wide gives way to the narrow layout of ``limit`` (never with ``fit``).

        A stream id longer than ``cam0`` takes its excess out of the width first: the limits were set with ids like
        ``cam0 (ended)`` (`STREAM_ROOM`), and at 80 columns a 64-character id (the wire allows it) left every other
        column a letter wide, a table 40 lines high. The mark is counted whether a stream has ended yet or not, so
        that the layout does not change when one does (`STOPPED_MARK`, two characters longer, comes with the last
        frame of a stopped run only: it takes them from the name columns rather than move the limits).
        """
        taken = max(self.stream_width + len(ENDED_MARK), STREAM_ROOM)
        return width - taken < limit - STREAM_ROOM and not self.fit

    def table(self, title: str, title_style: str = "", earlier: Text | None = None) -> Table:
        """A table titled ``title``; ``earlier``, the row that sums up the rows a live frame had no room for, on the
        line under the title: the log is drawn the oldest first, and what came before its rows goes above them."""
        if earlier is None:
            return Table(title=title, title_style=title_style or None, expand=not self.fit)
        return Table(title=Text.assemble((title, title_style), "\n", earlier), expand=not self.fit)

    def stream(self, table: Table, mark: int = 0) -> None:
        """The stream column, ``mark`` characters wider for the longest mark shown (`_stream_mark`)."""
        width = self.stream_width + mark
        table.add_column("stream", min_width=max(width, len("stream")), overflow="fold")

    @staticmethod
    def fixed(table: Table, name: str, width: int, right: bool = False) -> None:
        table.add_column(name, min_width=max(width, len(name)), no_wrap=True, justify="right" if right else "left")

    @staticmethod
    def names(table: Table, name: str, ratio: int) -> None:
        """A column of step names: it takes its ``ratio`` of the width the fixed-format columns leave."""
        table.add_column(name, ratio=ratio, overflow="fold")  # a long name goes on, on the next line: never cut

    @staticmethod
    def whole_words(table: Table, first: str) -> None:
        """Once the rows are in: the column headed ``first`` at least as wide as its longest word, and the other
        columns of names sharing the rest in proportion to theirs (each word counted up to `WORD_WIDTH`).

        Rich wraps at spaces and folds a longer word where the column ends: ``boil_w`` / ``ater`` reads as two
        names, and fixed ratios gave a column of long names as little as one of short ones. Shares alone are not
        enough: one long pre-condition's name took the mistake's column down with it, hence its minimum (a ratio
        column's ``width`` is the least rich gives it when it shares the width out).
        """
        for column in table.columns:
            if column.ratio is None:
                continue
            longest = min(_longest_word(column), WORD_WIDTH)
            column.ratio = longest
            if column.header == first:
                column.width = longest


def _plain_texts(column: Column) -> list[str]:
    """A column's header and text cells as plain strings (its `NameList` cells left out)."""
    return [text.plain if isinstance(text, Text) else text for text in (column.header, *column.cells)
            if isinstance(text, Text | str)]


def _longest_word(column: Column) -> int:
    """The longest word of a column's header and cells (of each name of a `NameList`)."""
    lists = [cell.longest_word for cell in column.cells if isinstance(cell, NameList)]
    return max([len(word) for text in _plain_texts(column) for word in text.split()] + lists, default=1)


def _widest_value(column: Column) -> int:
    """The widest header or cell of a column, whole (a fixed-format column never wraps them)."""
    return max((len(text) for text in _plain_texts(column)), default=0)


def _folds_a_word(table: Table, width: int) -> bool:
    """Whether rich, drawing ``table`` ``width`` wide, would give a column of names less room than its longest word
    (``boil_wa`` / ``ter``), or could not fit its fixed-format columns at all (the latencies' numbers, cut).

    Shared out as rich shares it: each fixed-format column as wide as its widest value, the columns of names the rest
    by their ratios (`rich._ratio.ratio_distribute`, the function rich's tables call), each at least its set width;
    every cell padded by one on each side, every column edged. Counted here rather than by laying the table out,
    which took a quarter of a frame at 2048 steps.
    """
    pad = 2
    names = [column for column in table.columns if column.ratio is not None]
    fixed = sum(max(column.min_width or 0, column.width or 0, _widest_value(column)) + pad
                for column in table.columns if column.ratio is None)
    room = width - (len(table.columns) + 1) - fixed
    least = [(column.width or 1) + pad for column in names]
    if room < sum(least):
        return True
    if not names:  # numbers only, all of them fitting
        return False
    shares = ratio_distribute(room, [column.ratio or 1 for column in names], least)
    return any(share - pad < _longest_word(column) for share, column in zip(shares, names, strict=True))


def _layout(state: ViewState, fit: bool) -> _Layout:
    ids = {*state.streams, *(a.stream_id for _, a in state.alerts), *(e.stream_id for _, e in state.events),
           *(r.stream_id for _, r in state.missing)}
    return _Layout(fit, max((len(printable(sid)) for sid in ids), default=0))


def _mistaken(state: ViewState) -> set[tuple[str, str, int]]:
    """``(stream, run, step)`` of every step alerted as done too early."""
    return {(a.stream_id, a.run, a.step) for _, a in state.alerts}


def _done_cell(sid: str, row: Status, state: ViewState, mistaken: set[tuple[str, str, int]]) -> NameList | Text:
    """A stream's done steps, newest last; those alerted as done too early (`_mistaken`) in red."""
    return _names_cell([_text(state.name(s), "bold red" if (sid, row.run, s) in mistaken else "green")
                        for s in row.done], "last")


def _stream_mark(sid: str, row: Status, state: ViewState) -> str:
    if state.stale(sid):  # before lost: a lost stream whose status stopped coming is one the checker forgot
        return STALE_MARK
    if row.lost:
        return LOST_MARK
    if row.ended:
        return STOPPED_MARK if _stopped(row, state) else ENDED_MARK
    return ""


def _now_cell(sid: str, row: Status, state: ViewState) -> Text:
    """The step being done now: none on a stream that is lost or stale, whose last status said it long ago."""
    return _text("-" if row.lost or state.stale(sid) else state.name(row.current))


def name_conflict_text(step: int, mine: str, theirs: str) -> str:
    """The view's graph names a step otherwise than the checker does."""
    return (f"view: step {step} is {mine!r} in the view's --graph but {theirs!r} at the checker: is --graph the "
            "checker's graph? (the checker's names are shown; a step it has not named yet, by its number)")


def silent_text(state: ViewState) -> str:
    """The checker is not answering (`ViewState.silent`): since when."""
    since = "nothing heard yet: is it running there?" if state.heard is None else \
        f"last heard {clock_text(state.heard)}; what is shown may be out of date"
    return f"checker at {state.endpoint} not answering ({since})"


def _link_lines(state: ViewState) -> list[Text]:
    """Lines on what the view may not show right: the checker silent, or given other names by --graph."""
    lines = []
    if state.silent():
        lines.append(_text(silent_text(state), "bold red"))
    if state.name_conflicts:
        step, (mine, theirs) = next(iter(state.name_conflicts.items()))
        more = len(state.name_conflicts) - 1
        lines.append(_text(name_conflict_text(step, mine, theirs).removeprefix("view: ")
                           + (f"; {count_of(more, 'other step')} too" if more else ""), "yellow"))
    return lines


def _stream_alerts(sid: str, row: Status, state: ViewState) -> int:
    """The status counts confirmed mistakes; an early alert is in the log (and counted here) before that."""
    return max(row.alerts, len(_standing_alerts(sid, row, state)))


StreamKind = Literal["live", "lost", "ended", "stale"]
# The groups of the streams' rows, in the order they are listed, after the live streams with an alert
# (`stream_order`); also the order the row that sums up the streams not shown counts them in (`more_streams`).
STREAM_KINDS: tuple[StreamKind, ...] = ("live", "lost", "ended", "stale")


def stream_kind(sid: str, row: Status, state: ViewState) -> StreamKind:
    """How a stream stands, as its row's mark says (`_stream_mark`): stale before lost, a stopped session ended."""
    if state.stale(sid):
        return "stale"
    if row.lost:
        return "lost"
    return "ended" if row.ended else "live"


def stream_order(state: ViewState) -> list[str]:
    """The streams in the order the view lists them: the live ones with an alert, the other live ones, then the lost,
    the ended and the stale ones (`STREAM_KINDS`), by id within each group.

    A terminal without room for every row keeps the first ones: those an operator acts on, not the ``(stale)`` rows
    of a flood of ids a peer made up. By id within a group, a row moves only when its stream's standing changes, not
    from one redraw to the next.
    """
    def rank(sid: str) -> tuple[int, str]:
        row = state.streams[sid]
        kind = stream_kind(sid, row, state)
        if kind == "live" and _stream_alerts(sid, row, state):
            return 0, sid
        return 1 + STREAM_KINDS.index(kind), sid

    return sorted(state.streams, key=rank)


def more_streams(state: ViewState, hidden: Sequence[str], listed: bool) -> Text:
    """The one row that sums up the streams a terminal has no room for, by kind: ``+ 37 more streams (2 live,
    35 stale)``; ``streams: 41 (...), no room to list them`` where no row fits (``listed`` false)."""
    counts = Counter(stream_kind(sid, state.streams[sid], state) for sid in hidden)
    kinds = ", ".join(f"{counts[kind]} {kind}" for kind in STREAM_KINDS if counts[kind])
    if listed:
        return Text(f"+ {count_of(len(hidden), 'more stream')} ({kinds})", style="yellow")
    return Text(f"streams: {len(hidden)} ({kinds}), no room to list them on this terminal", style="yellow")


def _verdict_lines(state: ViewState, shown: Sequence[str]) -> list[Text]:
    """The verdict lines of the streams ``shown``, in their order."""
    return [line for sid in shown if (line := verdict(sid, state.streams[sid], state)) is not None]


def _rule_caption(state: ViewState, label: str = "allowed next") -> str | None:
    """What the ``label`` column lists; the query names its rule: without row-softmax weights the binary rule orders
    the allowed steps."""
    rules = sorted({row.rule for row in state.streams.values()})
    if not rules:
        return None
    return (f"{label}: likeliest first (the step being done now left out), future-step probability by the "
            f"{'/'.join(rules)} rule")


def _stream_lines(state: ViewState, width: int, shown: Sequence[str]) -> Group:
    """The streams as lines, for a terminal too narrow for their table (its five headers folded a letter apart):
    each stream's id, step now and alerts on one line, its done and allowed next steps indented below."""
    lines: list[RenderableType] = [Text("streams", style="bold")]
    if not state.streams:
        lines.append(Text("waiting for streams...", style="dim"))
    mistaken = _mistaken(state)
    for sid in shown:
        row = state.streams[sid]
        alerts = _stream_alerts(sid, row, state)
        count = count_of(alerts, "alert")
        lines.append(Hanging(Text.assemble(_text(sid + _stream_mark(sid, row, state),
                                                 "yellow" if row.lost or state.stale(sid) else "bold"), ": now ",
                                           _now_cell(sid, row, state), "; ",
                                           _text(count, "bold red" if alerts else ""))))
        lists = Table.grid(padding=(0, 1))
        labels = (" " * HANG + "done", " " * HANG + "next")  # indented under the stream's id, as its wrapped part
        # Widths given, not measured: measuring a list joins every name, 2048 of them in a status.
        lists.add_column(no_wrap=True, width=len(labels[0]))
        lists.add_column(overflow="fold", width=max(1, width - len(labels[0]) - 1))
        lists.add_row(Text(labels[0]), _done_cell(sid, row, state, mistaken))
        lists.add_row(Text(labels[1]), _likely_next(row, state))
        lines.append(lists)
    caption = _rule_caption(state, "next")
    if caption is not None:
        lines.append(Text(caption, style="dim"))
    return Group(*lines)


def _streams_table(state: ViewState, layout: _Layout, width: int, lines: bool, shown: Sequence[str]) -> RenderableType:
    """The rows of the streams ``shown`` (`stream_order`, or its first ones where the terminal has no room for all);
    ``width`` below `NARROW_WIDTH` leaves out the frame counts and rate (the wire's ``status`` and
    `stream-detect view --jsonl` keep them), and the names share the width by need; below `COMPACT_WIDTH` a line
    each (`_stream_lines`), and where ``lines``."""
    if lines:
        return _stream_lines(state, width, shown)
    streams = layout.table("streams")
    # room for " (ended)" only once a stream has one: an 80-column terminal has none to spare for it before
    layout.stream(streams, mark=max((len(_stream_mark(sid, row, state)) for sid, row in state.streams.items()),
                                    default=0))
    layout.names(streams, "now", 2)
    layout.names(streams, "done", 4)
    layout.names(streams, "allowed next", 3)
    # Narrow, three columns of numbers left the names 2 characters: "boil_water" came out as "bo" / "il" / "_w"...
    counts = not layout.below(width, NARROW_WIDTH)
    for col in ("fps", "frames", "dropped", "alerts") if counts else ("alerts",):
        layout.fixed(streams, col, NUMBER_WIDTH if col != "fps" else len("100.0"), right=True)
    mistaken = _mistaken(state)
    for sid in shown:
        row = state.streams[sid]
        alerts = _stream_alerts(sid, row, state)
        gone = row.lost or state.stale(sid)
        numbers = [_text("-" if gone else f"{row.fps:.1f}"), _text(row.frames), _text(row.dropped)] if counts else []
        streams.add_row(
            _text(sid + _stream_mark(sid, row, state), "yellow" if gone else ""),
            _now_cell(sid, row, state),
            _done_cell(sid, row, state, mistaken),
            _likely_next(row, state),
            *numbers,
            _text(alerts, "bold red" if alerts else ""),
        )
    if not state.streams:
        # said under the table, not in its stream column: 22 characters there left "allowed next" 2 columns wide
        streams.caption = "waiting for streams..."
    if not counts or _folds_a_word(streams, width):  # wide, the names share by fixed ratios while no word folds
        layout.whole_words(streams, first="now")
    caption = _rule_caption(state)
    if caption is not None:
        streams.caption = caption
    return streams


def _latency_rows(state: ViewState) -> dict[str, Status]:
    """The streams that report a per-stage latency."""
    return {sid: row for sid, row in sorted(state.streams.items())
            if any(getattr(row, latency_field(stage)) for stage in STAGES)}  # fmt: skip


def _latency_table(rows: dict[str, Status], layout: _Layout, width: int, lines: bool) -> RenderableType:
    """Each stream's latest per-stage latencies (``rows``: the detector's means since its previous heartbeat, the
    checker's latest hop and alert); below `COMPACT_WIDTH` a line per stream, and where its numbers would not all
    fit (`_ByWidth`)."""
    if lines:
        return Group(Text("latency per stage, ms", style="bold"), *(
            Hanging(Text.assemble(_text(sid), ": ", ", ".join(f"{stage.replace('_', ' ')} "
                                                              f"{getattr(row, latency_field(stage)):.1f}"
                                                              for stage in STAGES)))
            for sid, row in rows.items()))
    table = layout.table("latency per stage, ms")
    layout.stream(table)
    for stage in STAGES:
        layout.fixed(table, stage.replace("_", " "), NUMBER_WIDTH, right=True)
    for sid, row in rows.items():
        table.add_row(_text(sid), *(_text(f"{getattr(row, latency_field(stage)):.1f}") for stage in STAGES))
    return table


class _ByWidth:
    """A table drawn for the width it is given (``build(width, lines)``), as lines (``lines`` true) below
    `COMPACT_WIDTH` and wherever the table would fold a word of its names or cut a value (`_folds_a_word`): at 60
    columns CaptainCook4D's sentences got a 7-character column, ``slicing`` / ``-Contin`` / ``ue``, where lines keep
    every word whole."""

    def __init__(self, build: Callable[[int, bool], RenderableType], layout: _Layout) -> None:
        self.build = build
        self.layout = layout
        self._choices: dict[int, tuple[int, RenderableType, list[list[Segment]] | None]] = {}  # one frame's

    def _drawn(self, width: int) -> RenderableType:
        lines = self.layout.below(width, COMPACT_WIDTH)
        drawn = self.build(width, lines)
        if lines or self.layout.fit or not isinstance(drawn, Table):
            return drawn
        return self.build(width, True) if _folds_a_word(drawn, width) else drawn

    def _chosen(self, console: Console, options: ConsoleOptions
                ) -> tuple[int, RenderableType, list[list[Segment]] | None]:
        """``(width, drawing, its lines)``: the console's width, or `WIDEST_TABLE` where that is narrower and the
        drawing's rows no taller there (a wrapped name keeps the full width; ``fit`` tables are as wide as their
        contents anyway). The lines are those drawn to choose (None where there was nothing to choose)."""
        width = options.max_width
        if width not in self._choices:
            drawn = self._drawn(width)
            if self.layout.fit or width <= WIDEST_TABLE:
                self._choices[width] = width, drawn, None
            else:
                capped = self._drawn(WIDEST_TABLE)
                full, narrow = (console.render_lines(d, options.update_width(w), pad=False)
                                for d, w in ((drawn, width), (capped, WIDEST_TABLE)))
                taller = _rows_height(console, options, capped, narrow) > _rows_height(console, options, drawn, full)
                self._choices[width] = (width, drawn, full) if taller else (WIDEST_TABLE, capped, narrow)
        return self._choices[width]

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        width, drawn, _ = self._chosen(console, options)
        return Measurement.get(console, options.update_width(width), drawn)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType | Segment]:
        _, drawn, lines = self._chosen(console, options)
        if lines is None:
            yield drawn
            return
        for line in lines:  # drawn already, to choose: not drawn again
            yield from line
            yield Segment.line()


def _rows_height(console: Console, options: ConsoleOptions, drawn: RenderableType, lines: list[list[Segment]]) -> int:
    """The lines of ``drawn`` (drawn as ``lines``) but a table's caption: prose wraps anywhere without harm, a name in
    a cell does not."""
    if not isinstance(drawn, Table) or drawn.caption is None or not lines:
        return len(lines)
    table_width = Segment.get_line_length(lines[0]) if drawn.title is None else max(map(Segment.get_line_length,
                                                                                         lines))
    caption = console.render_lines(drawn.caption, options.update_width(table_width), pad=False)
    return len(lines) - len(caption)


def _alerts_table(state: ViewState, layout: _Layout, width: int, lines: bool, kept: int | None = None,
                  caption: bool = True) -> RenderableType:
    """The alert log, the oldest first; ``width`` below `NARROW_WIDTH` leaves out the wall clock (the video time places
    the alert). With ``kept``, only the newest ``kept`` alerts, the earlier ones summed up in a row above them
    (`earlier_rows`); without ``caption``, no caption.

    Without an alert it is one line: an empty table and the caption that explains its numbers took 14 of an 80x24
    terminal's lines.
    """
    if not state.alerts:
        counted = sum(row.alerts for row in state.streams.values())
        if counted:  # the view joined late or its log dropped them: "no mistakes" would contradict the verdicts
            return Text.assemble(("alerts: ", "bold"), f"none received by this view (the checker counted {counted})")
        over = bool(state.streams) and all(row.ended for row in state.streams.values())
        return Text.assemble(("alerts: ", "bold"), "no mistakes" if over else "no mistakes so far")
    log = list(state.alerts)
    cut = len(log) - (len(log) if kept is None else kept)
    hidden = [alert for _, alert in log[:cut]]
    earlier = earlier_rows([alert.stream_id for alert in hidden], "alert",
                           sum(state.retracted.get(alert.stream_id, {}).get(alert.alert_id) is not None
                               for alert in hidden))
    if lines or cut == len(log):  # an empty table's borders and header tell nothing
        return _alert_lines(state, log[cut:], earlier, caption)
    alerts = layout.table("alerts", "bold red", earlier)
    clock = not layout.below(width, NARROW_WIDTH)
    if clock:
        layout.fixed(alerts, "time", CLOCK_WIDTH)
    # Narrow, the column is as wide as its widest span, not the widest a span could be: the names need the room.
    layout.fixed(alerts, "video time", VIDEO_WIDTH if clock else 0)
    layout.stream(alerts)
    layout.names(alerts, "mistake", 2)
    layout.names(alerts, "missing pre-conditions", 3)
    layout.names(alerts, "likely forgotten", 2)
    layout.fixed(alerts, PROBABILITY_HEADER, len("1.00"), right=True)
    # Two numbers on a row, of two kinds: a newcomer cannot guess which is which, so each is labelled and the caption
    # says once, under the table, what each means.
    if caption:
        alerts.caption = ALERTS_CAPTION
        alerts.caption_justify = "left"
    for when, alert in log[cut:]:
        withdrawn = state.retracted.get(alert.stream_id, {}).get(alert.alert_id)
        at = [_text(clock_text(when))] if clock else []
        if withdrawn is not None:  # an early alert taken back: shown struck out, with why
            # Its video time stays: the same step may be alerted again later, and only the time tells the two apart.
            alerts.add_row(*at, _video_time(alert, state), _text(alert.stream_id), _text(alert.step_name, "strike dim"),
                           _withdrawn(withdrawn), _text(""), _text(""))
            continue
        alerts.add_row(*at, _video_time(alert, state), _text(alert.stream_id), _text(alert.step_name, "bold red"),
                       _missing(alert, state), _forgotten(alert), _text(f"{alert.probability:.2f}"))
    if not clock or _folds_a_word(alerts, width):  # names kept whole matter more than columns that never move
        layout.whole_words(alerts, first="mistake")
    return alerts


def _withdrawn(retraction: Retraction) -> Text:
    """Why an alert was retracted, beside its step's name (so not naming it again: `retraction_reason`)."""
    return _text(f"retracted: {retraction_reason(retraction, named=False)}", "yellow")


def _alert_lines(state: ViewState, shown: Iterable[tuple[float, Alert]], earlier: Text | None, caption: bool) -> Group:
    """The alert log as lines, for a terminal too narrow for its table: each alert's video time, stream, step and
    missing pre-conditions on one line (wrapped whole), its likely forgotten step and probability indented below;
    ``shown``: the alerts drawn, ``earlier`` the row summing up those before them."""
    lines: list[RenderableType] = [Text("alerts", style="bold red"), *([earlier] if earlier is not None else [])]
    for _, alert in shown:
        where = Text.assemble(_video_time(alert, state), " ", _text(alert.stream_id), " ")
        withdrawn = state.retracted.get(alert.stream_id, {}).get(alert.alert_id)
        if withdrawn is not None:
            lines.append(Hanging(Text.assemble(where, _text(alert.step_name, "strike dim"), " ",
                                               _withdrawn(withdrawn))))
            continue
        # "before" only where it reads so: a late-step alert or one without pre-conditions says what it is itself
        lines.append(Hanging(Text.assemble(where, _text(alert.step_name, "bold red"),
                                           " before " if alert.missing else ": ", _missing(alert, state))))
        # Indented as a whole (wrapped, its second line started at the margin like a new alert), the probability
        # first (last, it was folded apart at 50 columns: "P" / "mistake 1.00").
        probability = _text(f"{PROBABILITY_HEADER} {alert.probability:.2f}")
        lines.append(Padding(Text.assemble(probability, "; likely forgotten ", _forgotten(alert)), (0, 0, 0, HANG)))
    if caption:
        lines.append(Text(ALERTS_CAPTION, style="dim"))
    return Group(*lines)


NewsMessage = StepEvent | Alert | Retraction | MissingSteps  # what a terminal that cannot redraw is told line by line


def news_line(when: float, message: NewsMessage, state: ViewState) -> Text:
    """One line saying what just happened, for a terminal that cannot redraw (``TERM=dumb``): rich's live view draws
    nothing there until it stops, so without these lines an alert showed only once the run was over.

    Args:
        when: wall time the message arrived.
        message: a new key-step, alert, retraction or end-of-session report (`ViewState.apply` said it was new).
        state: the view's state (step names, the alerted step's span in the video).

    Returns:
        The line, starting with the clock and the stream.
    """
    head = Text.assemble(_text(clock_text(when)), " ", _text(message.stream_id), " ")
    if isinstance(message, StepEvent):
        return Text.assemble(head, "key-step ", _text(message.step_name, "bold"), " ",
                             _text(f"{_span(message.start, message.end)}, confidence {message.confidence:.2f}"))
    if isinstance(message, Alert):
        return Text.assemble(head, _text("MISTAKE ", "bold red"), _text(message.step_name, "bold red"),
                             " before " if message.missing else ": ", _missing(message, state), " (",
                             _video_time(message, state), f"; {PROBABILITY_HEADER} {message.probability:.2f})")
    if isinstance(message, Retraction):
        # Where the withdrawn alert was in the video: the same step may be alerted again, and the time tells which.
        shown = next((alert for _, alert in state.alerts if (alert.stream_id, alert.run, alert.alert_id)
                      == (message.stream_id, message.run, message.alert_id)), None)
        where = (" (", _video_time(shown, state), ")") if shown is not None else ()
        return Text.assemble(head, "alert on ", _text(message.step_name), *where, " ",
                             _withdrawn(message))
    names = _never_done_names(message, state) or "none"
    title = _never_done_title(state, [message]).split(" (")[0]
    return Text.assemble(head, _text(f"session over; {title}: "), _text(names))


def _nothing_recognised(row: Status) -> bool:
    """An ended session that confirmed no key-step and raised no alert: `verdict` gives it none."""
    return row.ended and nothing_recognised(len(row.done), row.alerts)


def _judged_reports(state: ViewState) -> list[tuple[float, MissingSteps]]:
    """The end reports of the steps never done that the view shows: not those of a session in which nothing was
    recognised, whose verdict line says there is none (the report would name steps never done beside it, often
    every step, the checker weighing the detector's silence)."""
    def shown(report: MissingSteps) -> bool:
        row = state.streams.get(report.stream_id)
        return row is None or row.run != report.run or not _nothing_recognised(row)
    return [(when, report) for when, report in state.missing if shown(report)]


def _never_done_names(report: MissingSteps, state: ViewState) -> str:
    """The steps an ended session never did."""
    names = _names(report.missing, report.missing_names, state)
    # A step the session confirmed can still be named: the checker weighs how clearly it was done, not the
    # confirmation (docs/method.md); said, so the "done" list and this one do not seem to contradict each other.
    row = state.streams.get(report.stream_id)
    done = set(row.done) if row is not None and row.run == report.run else set()
    return ", ".join(f"{name} (recognised, but judged not done: P never done {p:.2f})" if step in done else name
                     for step, name, p in zip(report.missing, names, report.probabilities, strict=True))


def _never_done_title(state: ViewState, reports: Iterable[MissingSteps]) -> str:
    stopped = {_report_stopped(report, state) for report in reports}
    if stopped == {True}:
        return "not done by the stop (session stopped)"
    if stopped == {True, False}:  # each row's stream says which (`_never_done_stream`)
        return MIXED_NEVER_DONE
    return "never done (session ended)"


MIXED_NEVER_DONE: str = "not done (sessions ended or stopped)"


def _never_done_stream(report: MissingSteps, state: ViewState, mixed: bool) -> str:
    """A row's stream, marked stopped or ended where the table holds both: the stream's row and verdict line are its
    latest run's, so a session stopped before its camera started again (a row of its own) is told apart only here."""
    if not mixed:
        return report.stream_id
    return report.stream_id + (STOPPED_MARK if _report_stopped(report, state) else ENDED_MARK)


def _report_stopped(report: MissingSteps, state: ViewState) -> bool:
    """Whether the session an end report is of was stopped (`_stopped`), as its run's status said: by the time the
    table is drawn, the stream's row may be a new run's."""
    key = (report.stream_id, report.run)
    return key in state.stopped_runs or _cut_by_the_person(*key, state)


def _never_done_table(state: ViewState, reports: list[tuple[float, MissingSteps]], layout: _Layout, width: int,
                      lines: bool, kept: int | None = None) -> RenderableType:
    """The steps ended sessions never did (``reports``, `_judged_reports`); below `COMPACT_WIDTH` a line each. With
    ``kept``, only the newest ``kept`` reports, the earlier ones summed up in a row under the title (`earlier_rows`).
    """
    title = _never_done_title(state, (r for _, r in reports))  # of them all: it does not change as rows go
    mixed = title == MIXED_NEVER_DONE
    cut = len(reports) - (len(reports) if kept is None else kept)
    earlier = earlier_rows([report.stream_id for _, report in reports[:cut]], "session")
    shown = reports[cut:]
    if lines or not shown:  # an empty table's borders and header tell nothing
        return Group(Text(title, style="bold red"), *([earlier] if earlier is not None else []), *(
            Hanging(Text.assemble(_text(clock_text(when)), " ", _text(_never_done_stream(report, state, mixed)), ": ",
                                  _text(_never_done_names(report, state), "bold red")))
            for when, report in shown))
    never = layout.table(title, "bold red", earlier)
    layout.fixed(never, "time", CLOCK_WIDTH)
    layout.stream(never, len(STOPPED_MARK) if mixed else 0)
    layout.names(never, "key-steps", 1)  # the title says ended or stopped: "missing" misread a stop
    for when, report in shown:
        never.add_row(_text(clock_text(when)), _text(_never_done_stream(report, state, mixed)),
                      _text(_never_done_names(report, state), "bold red"))
    return never


def earlier_rows(streams: Sequence[str], noun: str, retracted: int = 0) -> Text | None:
    """The one row that sums up the earlier rows of a log a live frame has no room for, by stream, the most first:
    ``+ 5 earlier alerts (cam0 3, cam1 2; 1 of them retracted)``, ``+ 2 earlier sessions (cam0, cam1)``; None where
    none was left out. One line, cut with an ellipsis: a long list of ids would take the lines the newest rows were
    left out to make room for."""
    if not streams:
        return None
    counts = Counter(streams).most_common()
    parts: list[Text | str] = [f"+ {count_of(len(streams), 'earlier ' + noun)} ("]
    for k, (sid, count) in enumerate(counts):
        parts += [", " if k else "", _text(sid), f" {count}" if count > 1 else ""]
    parts.append(f"; {retracted} of them retracted)" if retracted else ")")
    return Text.assemble(*parts, style="yellow", no_wrap=True, overflow="ellipsis")


def _events_table(state: ViewState, layout: _Layout, width: int, lines: bool) -> RenderableType:
    """The recent key-steps; below `COMPACT_WIDTH` a line each."""
    if lines:
        return Group(Text("recent key-steps: clock, stream, key-step, video time, confidence", style="bold"), *(
            Hanging(Text.assemble(_text(clock_text(when)), " ", _text(ev.stream_id), " ", _text(ev.step_name, "bold"),
                                  " ", _text(_span(ev.start, ev.end)), " ", _text(f"{ev.confidence:.2f}")))
            for when, ev in state.events))
    events = layout.table("recent key-steps")
    layout.fixed(events, "time", CLOCK_WIDTH)
    layout.stream(events)
    layout.names(events, "key-step", 1)
    layout.fixed(events, "video time", VIDEO_WIDTH)
    layout.fixed(events, "confidence", len("confidence"), right=True)
    for when, ev in state.events:
        events.add_row(_text(clock_text(when)), _text(ev.stream_id), _text(ev.step_name),
                       _text(_span(ev.start, ev.end)), _text(f"{ev.confidence:.2f}"))
    return events


@dataclass(frozen=True)
class _Outcome:
    """The alert log, then the steps ended sessions never did (``reports``, `_judged_reports`; shown once a session
    has ended without some required step), as a frame draws them: whole, or as a live frame short of lines keeps them
    (`parts`)."""

    state: ViewState
    layout: _Layout
    reports: list[tuple[float, MissingSteps]]

    @property
    def rows(self) -> int:
        """The rows of both logs."""
        return len(self.state.alerts) + len(self.reports)

    @property
    def captioned(self) -> bool:
        """Whether the alert log has a caption to leave out (`parts`): an empty log is one line."""
        return bool(self.state.alerts)

    def _kept(self, newest: int) -> tuple[int, int]:
        """How many of the alerts and of the reports are among the ``newest`` rows of the two logs, by arrival."""
        arrived = sorted([(when, 0) for when, _ in self.state.alerts] + [(when, 1) for when, _ in self.reports],
                         key=lambda row: row[0])
        alerts = sum(1 for _, log in arrived[len(arrived) - newest:] if log == 0) if newest > 0 else 0
        return alerts, max(newest, 0) - alerts

    def parts(self, newest: int | None = None, caption: bool = True) -> list[RenderableType]:
        """The logs' drawings: with ``newest``, only the newest rows of the two together (a log drawn the oldest
        first, its earlier rows summed up in a row at its top: the alert that just fired is the one an operator
        looks for, and the last to go); without ``caption``, the alert log without its caption."""
        alerts, reports = (None, None) if newest is None else self._kept(newest)
        parts: list[RenderableType] = [_ByWidth(
            lambda width, lines: _alerts_table(self.state, self.layout, width, lines, alerts, caption), self.layout)]
        if self.reports:
            parts.append(_ByWidth(lambda width, lines: _never_done_table(self.state, self.reports, self.layout, width,
                                                                        lines, reports), self.layout))
        return parts


@dataclass(frozen=True)
class _Fitted:
    """The live frame fitted to a terminal ``height`` lines high, so that the alert that just fired is on screen
    however many streams and alerts the view holds. The lines on the link (``links``) and the health line
    (``health``) are always drawn; what is left goes first to the outcome, then to the streams' rows; what comes
    after (``rest``: the earlier verdicts, the latencies, the recent key-steps) is drawn only while the screen has
    room, and cut at its bottom.

    Where the room is short, the first to go is the alert log's caption (what its columns mean, the same at every
    redraw), then the streams' rows, `stream_order`'s last first, and their verdict lines, those left out summed up in
    one row (`more_streams`: alone where not even one row fits), then the outcome's oldest rows (`_Outcome.parts`),
    each log's summed up in one row at its top. Read at each redraw, as the width is.
    """

    state: ViewState
    layout: _Layout
    height: int
    links: list[RenderableType]
    health: list[RenderableType]
    outcome: _Outcome
    rest: list[RenderableType]

    def _section(self, console: Console, options: ConsoleOptions, order: list[str], count: int
                 ) -> tuple[list[list[Segment]], list[list[Segment]]]:
        """The lines of the first ``count`` streams' rows (and the row summing up the others), and of their verdicts."""
        shown = order[:count]
        parts: list[RenderableType] = []
        if count or not order:  # no stream yet: the table says it waits for them
            parts.append(_ByWidth(lambda width, lines: _streams_table(self.state, self.layout, width, lines, shown),
                                  self.layout))
        if count < len(order):
            parts.append(more_streams(self.state, order[count:], listed=count > 0))
        return _lines_of(console, options, parts), _lines_of(console, options, _verdict_lines(self.state, shown))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        order = stream_order(self.state)
        links, health = _lines_of(console, options, self.links), _lines_of(console, options, self.health)
        room = self.height - 1 - len(links) - len(health)  # less the empty line under the frame (`client.live_frame`)
        drawn: dict[int, tuple[list[list[Segment]], list[list[Segment]]]] = {}

        def lines(count: int) -> int:  # each count drawn once, whichever search asks for it
            if count not in drawn:
                drawn[count] = self._section(console, options, order, count)
            return len(drawn[count][0]) + len(drawn[count][1])

        outcome = _lines_of(console, options, self.outcome.parts())
        count = most_that_fit(len(order), room - len(outcome), lines)
        if count < len(order) and self.outcome.captioned:
            bare = _lines_of(console, options, self.outcome.parts(caption=False))
            more = most_that_fit(len(order), room - len(bare), lines, {k: lines(k) for k in drawn})
            if more > count or lines(count) > room - len(outcome):
                outcome, count = bare, more
        if lines(count) > room - len(outcome):  # not even the streams' summary beside every alert: older rows go
            tried = {self.outcome.rows: outcome}  # every row, drawn: its lines guide the first guess

            def outcome_lines(newest: int) -> int:
                tried[newest] = _lines_of(console, options, self.outcome.parts(newest, caption=False))
                return len(tried[newest])

            newest = most_that_fit(self.outcome.rows, room - lines(count), outcome_lines,
                                   {self.outcome.rows: len(outcome)})
            outcome = tried[newest] if newest in tried else _lines_of(console, options,
                                                                       self.outcome.parts(newest, caption=False))
        table, verdicts = drawn[count]  # drawn by the test of its height above
        screen = [*table, *links, *verdicts, *health, *outcome]
        for part in self.rest:  # once past the bottom, the rest is not drawn: Live would cut it off
            if len(screen) > self.height:
                break
            screen.extend(_lines_of(console, options, [part]))
        for line in screen:
            yield from line
            yield Segment.line()


def most_that_fit(count: int, room: int, lines: Callable[[int], int], drawn: dict[int, int] | None = None) -> int:
    """The most of ``count`` rows whose drawing, ``lines(rows)`` lines high, fits in ``room`` lines; 0 where not one
    does (or none is to fit). ``drawn``: rows -> lines of counts drawn already, not asked again.

    Each count tried is drawn, and a redraw comes 8 times a second: all of them are tried only where they may fit (a
    row takes a line at least, under a title and a header, so ``room`` rows never fit), then the first guesses come
    from the lines the counts tried took (rows of a group are alike), the last by bisection, which bounds the tries
    where rows differ.
    """
    taken: dict[int, int] = dict(drawn or {})  # rows -> lines, of the counts tried
    if count < room or count in taken:
        if count not in taken:
            taken[count] = lines(count)
        if taken[count] <= room:
            return count
    low, high = 0, min(count, max(room, 0))  # low is 0 or fits; high does not
    for rows, height in taken.items():  # the counts drawn already bound the search
        if height <= room and low < rows < high:
            low = rows
        elif height > room and low < rows < high:
            high = rows
    guesses = 2
    while high - low > 1:
        guess = (low + high) // 2
        if guesses and high in taken:  # along the line through the counts tried (0 rows: 0 lines, for want of one)
            guesses -= 1
            base = taken.get(low, 0)
            guess = low + int((room - base) * (high - low) / max(taken[high] - base, 1))
            guess = min(max(guess, low + 1), high - 1)
        taken[guess] = lines(guess)
        low, high = (guess, high) if taken[guess] <= room else (low, guess)
    return low


def _lines_of(console: Console, options: ConsoleOptions, parts: Iterable[RenderableType]) -> list[list[Segment]]:
    """The lines ``parts`` take one under the other, as a `Group` of them draws them."""
    return [line for part in parts for line in console.render_lines(part, options, pad=False)]


def render(state: ViewState, fit: bool = False, closing: bool = False, height: int | None = None) -> Group:
    """Draw the state: a table of streams and a verdict line per ended stream, the alert log, the steps ended sessions
    never did, the verdicts of the last ended sessions whose rows were let go, the streams' latency per stage, the
    recent key-steps. The streams are listed in `stream_order`: the live ones with an alert first.

    The live view is cut at the terminal's bottom, so while it runs the outcome comes first: the alerts right after
    the streams, and an 80x24 terminal still shows the mistakes; with ``height``, the streams' rows take only the
    lines the rest leaves them (`_Fitted`): a flood of made-up stream ids pushed the alerts below the cut; and where
    the alerts alone are taller than the screen, their caption goes, then the oldest of them: drawn last, the alert
    that had just fired fell below the cut. The view's last frame is printed whole and the terminal keeps its bottom,
    so there (``closing``) the outcome comes last: the key-steps and latencies, then the alerts, the steps never done
    and a verdict line per ended stream.

    Args:
        state: what to show.
        fit: size every table to its contents instead of the console's width (for output that is not a terminal:
            printed on a wide console, no name is cut).
        closing: the view's last frame, printed once as the view stops (its session over, or interrupted).
        height: the terminal's lines, for a live frame (not with ``closing`` or ``fit``, which are printed whole):
            the header, the health line and the newest alerts then stay on screen, the streams' rows that do not fit
            summed up in one row, and so are the oldest alerts where even those do not. None: every row.

    Returns:
        A rich renderable (no side effects: the caller prints or refreshes it).
    """
    layout = _layout(state, fit)
    logs = _Outcome(state, layout, _judged_reports(state))
    context: list[RenderableType] = []
    rows = _latency_rows(state)
    if rows:  # where each stream's time goes: a slow stage shows without a metrics server
        context.append(_ByWidth(lambda width, lines: _latency_table(rows, layout, width, lines), layout))
    context.append(_ByWidth(lambda width, lines: _events_table(state, layout, width, lines), layout))
    # What the checker turned away (a camera on a taken stream id, a refused key) is seen nowhere else while the view
    # runs: it goes under the streams, not after the key-steps, below a terminal's cut.
    health: list[RenderableType] = [line] if state.health is not None and (line := _health(state.health)) else []
    if state.malformed:
        health.append(Text(f"{state.malformed} malformed messages dropped", style="yellow"))
    # Sessions whose rows were let go: their verdicts stay with the log of what happened, after the alerts and the
    # steps never done (above them, they pushed the mistakes off an 80x24 terminal), the time their status last came
    # first.
    earlier = [Text.assemble(_text(clock_text(heard)), " ", line) for sid, (heard, row) in state.ended.items()
               if (line := verdict(sid, row, state)) is not None]
    if height is not None and not closing and not fit:
        return Group(_Fitted(state, layout, height, list(_link_lines(state)), health, logs, [*earlier, *context]))
    outcome = logs.parts()
    order = stream_order(state)
    streams = _ByWidth(lambda width, lines: _streams_table(state, layout, width, lines, order), layout)
    verdicts = _link_lines(state) + _verdict_lines(state, order)
    if closing:
        return Group(streams, *context, *health, *outcome, *earlier, *verdicts)
    return Group(streams, *verdicts, *health, *outcome, *earlier, *context)
