"""The rich terminal table of a task graph that ``tgml show`` prints.

One row per node, grouped by execution level (START on level 0, then every step once all its
pre-conditions are on earlier levels), with the pre-conditions each step requires. The DOT/Graphviz
drawing stays in `graphs.graph_drawing`; this table lives above the ground floor because it needs rich.
Names come from the graph file, which is not trusted: every cell is `rich.text.Text` made `printable`, never markup.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphs.annotations import read_left_out
from graphs.common.safe_text import first_few, printable
from graphs.task_graph import END, START, TaskGraph, execution_levels


def terminal_view(graph: TaskGraph) -> Group:
    """A rich renderable: one table row per step, grouped by execution level, with its pre-conditions.

    Args:
        graph: the task graph.

    Returns:
        A rich `Group` (title line + table) ready for ``console.print``.
    """
    level = dict(zip(graph.nodes, execution_levels(graph.adjacency).tolist(), strict=True))
    removed = set(graph.removed_steps)
    table = Table(show_lines=False, header_style="bold")
    table.add_column("level", justify="right")
    table.add_column("id", justify="right")
    table.add_column("step")
    table.add_column("requires")
    scores = graph.optional_scores
    if scores is not None:
        table.add_column("optional", justify="right")
    optional = set(graph.optional_steps)
    order = sorted(graph.nodes, key=lambda node: (node in removed, level[node], graph.index(node)))
    for node in order:
        cells: list[RenderableType]
        style = "dim" if node in removed else "bold" if node in (START, END) else ""
        name = Text(printable(graph.name_of(node)), style=style)
        if node in removed:
            cells = [Text("-"), Text(str(node)), name, Text("not seen in training", "dim")]
        else:
            needs = sorted(graph.preconditions(node), key=graph.index)
            req = ", ".join(_named(graph, x) for x in needs) if needs else "-"
            cells = [Text(str(level[node])), Text("" if node in (START, END) else str(node)), name, Text(req)]
        if scores is not None:
            cells.append(_optional_cell(graph, node, optional))
        table.add_row(*cells)
    method = graph.info.get("method", "")
    head = Text.assemble(
        (printable(graph.scenario or "task graph"), "bold cyan"),
        f"  {graph.n_steps} steps, {len(graph.edges())} edges",
        f", {len(removed)} removed" if removed else "",
        f"  ({printable(method)})" if method else "",
    )
    lines: list[RenderableType] = [head, table]
    if "left_out" in graph.info:
        lines.append(Text(printable(left_out_summary(graph.info["left_out"])), style="yellow"))
    if scores is None:
        note = Text("no optionality stored in this file: every step is required", style="dim")
    else:
        note = Text(
            "optional: how likely the step may be left out (0: always needed; above 0.5, optional): the share of the "
            "training executions holding it that the graph finds as likely without it",
            style="dim",
        )
    return Group(*lines, note)


def _named(graph: TaskGraph, node: int | str) -> str:
    """A pre-condition as its name with its id (``fill_kettle (1)``): ids alone sent the reader up the table to look
    each one up, and the id still tells apart two steps of one name and matches the ``id`` column and the file."""
    return printable(graph.name_of(node)) if node == START else f"{printable(graph.name_of(node))} ({node})"


NAMES_SHOWN = 8  # executions named in the left-out line; the rest are counted


def left_out_summary(left_out: Any) -> str:
    """One line saying which executions a graph was not learned from (its file's ``info["left_out"]``).

    Args:
        left_out: ``{"mistakes": [names], "excluded": [names]}`` as `graphs.annotations.TrainingSelection` records it;
            it comes from a file, so anything else is described as unreadable rather than trusted.

    Returns:
        E.g. ``left out 1 execution with an annotated mistake (video_11); --include-mistakes keeps them``.
    """
    record = read_left_out(left_out)
    if record is None:
        return "left out: (unreadable record)"
    parts = []
    for key, why in (("mistakes", "with an annotated mistake"), ("excluded", "named by --exclude-videos")):
        names = list(record[key])
        if names:
            parts.append(f"{len(names)} execution{'s' if len(names) != 1 else ''} {why} "
                         f"({first_few(names, NAMES_SHOWN)})")
    if not parts:
        return "left out no execution"
    hint = ""
    if record["mistakes"]:
        hint = "; --include-mistakes keeps them" if len(parts) == 1 else "; --include-mistakes keeps the mistaken ones"
    return f"left out {' and '.join(parts)}{hint}"


def _optional_cell(graph: TaskGraph, node: int | str, optional: set[int]) -> Text:
    """The optionality score of a step (two decimals), marked when the step counts as optional."""
    if node in (START, END) or graph.optional_scores is None:
        return Text("")
    value = float(graph.optional_scores[graph.index(int(node)) - 1])  # matrix index 0 is START
    return Text(f"{value:.2f} optional", style="yellow") if node in optional else Text(f"{value:.2f}")
