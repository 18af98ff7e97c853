"""`FittedTable`: a table of figures drawn whole at any width, as a table, narrowed, or as lines."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.table import Table

from tgml.bench.fitted_table import FittedTable, table_lines

FIGURES = ("57.7 ± 0.6", "100.0 ± 0.0", "13.3 ± 2.0")


def scores_table(figures: tuple[str, ...] = FIGURES, columns: int = 7) -> Table:
    """A results table as the benchmarks print them: names on the left, a figure in every right-justified cell."""
    table = Table(title="PREGO online mistake detection — epic-tent-o (mean ± std over seeds)",
                  caption="–: not published.", caption_justify="left")
    table.add_column("method")
    table.add_column("mode")
    for k in range(columns):
        table.add_column(f"Metric {k} F1", justify="right")
    for figure in figures:
        table.add_row("tgt-text, published only", "pred +", *[figure] * columns)
    table.add_row("  published", "gt *", *["–"] * columns, style="dim")
    return table


def drawn(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


@pytest.mark.parametrize("width", [40, 80, 100, 120, 150, 200])
def test_no_figure_is_cut_or_split_at_any_width(width: int) -> None:
    text = drawn(FittedTable(scores_table()), width)
    assert "…" not in text
    for figure in FIGURES:  # each one whole on one line, in every row and column
        assert sum(line.count(figure) for line in text.splitlines()) == 7
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    assert "–: not published." in " ".join(text.split())


def test_a_table_that_fits_is_drawn_as_it_is() -> None:
    table = scores_table()
    assert drawn(FittedTable(table), 200) == drawn(table, 200)


def test_a_table_slightly_too_wide_wraps_names_and_headers_between_words_only() -> None:
    table = scores_table()
    natural = max(len(line.rstrip()) for line in drawn(table, 300).splitlines())
    text = drawn(FittedTable(table), natural - 10)
    assert "┃" in text and "│ tgt-text," in text  # still a table; the long name wrapped at its space
    assert "│   published" in text  # an indented name keeps its indent whole
    assert "pred +" in text  # the short name kept whole: the room went to the smallest shortfall first


def test_too_narrow_a_terminal_gets_a_line_per_row_each_figure_after_its_header() -> None:
    lines = [line.plain for line in table_lines(scores_table(columns=3), 80)]
    assert lines[0] == "PREGO online mistake detection — epic-tent-o (mean ± std over seeds)"
    assert lines[1:3] == ["tgt-text, published only, pred +: Metric 0 F1 57.7 ± 0.6,",
                          "  Metric 1 F1 57.7 ± 0.6, Metric 2 F1 57.7 ± 0.6"]
    assert lines[-2] == "  published, gt *: Metric 0 F1 –, Metric 1 F1 –, Metric 2 F1 –"  # its indent kept
    assert lines[-1] == "–: not published."


def test_headers_broken_over_lines_are_rejoined_and_empty_cells_left_out() -> None:
    table = Table(title="t")
    table.add_column("question, metric")
    table.add_column("Ego-\nExo4D*", justify="right")
    table.add_column("DO\nbinary", justify="right")
    table.add_row("future, F1", "", "88.5")
    assert [line.plain for line in table_lines(table, 80)] == ["t", "future, F1: DO binary 88.5"]
