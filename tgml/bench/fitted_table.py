"""A rich table that never cuts a figure: drawn as a table where its figures fit whole, else as lines.

Squeezed into a narrow terminal, rich shrinks every column until the table fits and cuts what still does not
(``53…``, ``100…``), or wraps a cell at its spaces (``57.7 ±`` / ``0.6``). `FittedTable` draws a table the first of
three ways that keeps every figure whole:

1. as it is, when its natural width fits;
2. with its right-justified columns (the figures) at least as wide as their widest cell and header word, and the
   left-justified ones (the names) none narrower than its longest word, the room left going to what would wrap:
   headers and names wrap between words;
3. as lines (`table_lines`): the title, a line per row (``name, name: header figure, header figure, ...``) wrapped
   between figures, never inside one (`wrap_words`), and the caption.

A log or a pipe gets the whole table when the caller prints it on `graphs.common.consoles.table_console`, wide
enough for the first way.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterator
from typing import Final

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

from graphs.common.consoles import UNWRAPPED  # the width a table is measured at for its natural width
from graphs.common.safe_text import HANG, wrap_words

_KEEP: Final = "\u00a0"  # joins the words of one figure and its header while wrapping (textwrap breaks ASCII spaces)


def _plain(cell: RenderableType | None) -> str:
    """A cell, header, title or caption as plain text (markup read as rich would); only text is supported."""
    if cell is None:
        return ""
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return Text.from_markup(cell).plain
    raise TypeError(f"FittedTable: cells must be str or Text, got {type(cell).__name__}")


def _header(column: Column) -> str:
    """A column's header on one line: a header broken at a hyphen rejoined, at a space respaced."""
    return " ".join(_plain(column.header).replace("-\n", "-").split())


def _longest_word(texts: list[str]) -> int:
    """The widest word of ``texts``, a line's indent counted with its first word (rich keeps it)."""
    return max((cell_len(word) for text in texts for line in text.splitlines()
                for word in re.findall(r"^\s*\S+|\S+", line)), default=1)


def _widest_line(texts: list[str]) -> int:
    return max((cell_len(line) for text in texts for line in text.splitlines()), default=1)


def _is_figure(column: Column) -> bool:
    return column.justify == "right"


def _with_widths(table: Table, widths: list[int]) -> Table:
    """A copy of ``table`` whose columns are exactly ``widths`` wide (content, padding not counted)."""
    fixed = copy.copy(table)
    fixed.columns = [dataclasses.replace(column, width=width, min_width=None, max_width=None)
                     for column, width in zip(table.columns, widths, strict=True)]
    return fixed


def narrowed(table: Table, width: int, console: Console, options: ConsoleOptions) -> Table | None:
    """``table`` drawn ``width`` wide without breaking a figure or a word (the module's second way), or None when it
    cannot be.

    Args:
        table: a table whose right-justified columns hold figures, its cells text.
        width: the columns it may take, borders and padding included.
        console: the console it is drawn on.
        options: the console's options.

    Returns:
        A copy with every column's width set, or None.
    """
    least, most = [], []
    for column in table.columns:
        cells = [_plain(cell) for cell in column.cells]
        if _is_figure(column):
            least.append(max(_widest_line(cells), _longest_word([_header(column)])))
            most.append(max(least[-1], _widest_line([_header(column)])))
        else:
            least.append(_longest_word([_header(column), *cells]))
            most.append(max(least[-1], _widest_line([_header(column), *cells])))
    need = console.measure(_with_widths(table, least), options=options.update_width(UNWRAPPED)).maximum
    if need > width:
        return None
    spare, widths = width - need, list(least)
    # The room left goes to the names and headers that would wrap, the shortest shortfall first: a short name
    # ("pred +") is whole before a long one is.
    for k in sorted(range(len(widths)), key=lambda k: most[k] - least[k]):
        more = min(spare, most[k] - least[k])
        widths[k] += more
        spare -= more
    return _with_widths(table, widths)


def table_lines(table: Table, width: int) -> list[Text]:
    """``table`` as lines of at most ``width`` (a longer figure stays whole): the title; a line per row, its leading
    left-justified cells first (``do (n=2), gt *:``), then each non-empty cell after its header, wrapped between
    cells; the caption.

    Args:
        table: a table of text cells.
        width: the columns a line may take.

    Returns:
        One `Text` per line, in the row's style.
    """
    lines = [Text(line, style=table.title_style or "table.title") for line in wrap_words(_plain(table.title), width)]
    columns = table.columns
    leading = next((k for k, column in enumerate(columns) if _is_figure(column)), len(columns))
    cells = [[_plain(cell) for cell in column.cells] for column in columns]
    for r, row in enumerate(table.rows):
        texts = [cells[k][r] for k in range(len(columns))]
        indent = texts[0][: len(texts[0]) - len(texts[0].lstrip())] if texts else ""
        names = ", ".join(" ".join(text.split()) for text in texts[:leading] if text.strip())
        figures = [" ".join([_header(columns[k]), *texts[k].split()]).strip() for k in range(leading, len(columns))
                   if texts[k].strip()]
        units = [unit.replace(" ", _KEEP) + ("," if n < len(figures) - 1 else "") for n, unit in enumerate(figures)]
        text = indent + " ".join([names + (":" if names and units else ""), *units]).strip()
        lines += [Text(line.replace(_KEEP, " "), style=row.style or "") for line in
                  wrap_words(text, width, indent + HANG)]
    lines += [Text(line, style=table.caption_style or "table.caption") for line in
              wrap_words(_plain(table.caption), width, "")]
    return lines


class FittedTable:
    """A rich renderable: ``table`` as itself, narrowed (`narrowed`) or as lines (`table_lines`), whichever first
    keeps every figure whole at the width it is drawn.

    Args:
        table: the table; its right-justified columns hold figures, every cell is text.
    """

    def __init__(self, table: Table) -> None:
        self.table = table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.renderables(console, options)

    def renderables(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        """What is drawn at ``options.max_width``: the table, a narrowed copy, or its lines."""
        width = options.max_width
        if console.measure(self.table, options=options.update_width(UNWRAPPED)).maximum <= width:
            yield self.table
            return
        narrow = narrowed(self.table, width, console, options)
        if narrow is not None:
            yield narrow
            return
        yield from table_lines(self.table, width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table)
