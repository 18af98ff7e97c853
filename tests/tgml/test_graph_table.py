"""The terminal table of ``tgml show``: steps by execution level with what each requires."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console

from graphs.task_graph import TaskGraph, load_graph, save_graph
from tests.hostile_text import HOSTILE_NAMES, assert_shown_safely
from tgml.graph_table import terminal_view


def shown(graph: TaskGraph, width: int = 100) -> str:
    """The table as a terminal of ``width`` columns shows it."""
    console = Console(width=width)
    with console.capture() as captured:
        console.print(terminal_view(graph))
    return captured.get()


def test_terminal_view_lists_steps_by_level_with_requirements() -> None:
    # S=0, boil=1, steep=2, spare=3 (never seen: isolated), E=4
    adj = np.zeros((5, 5), bool)
    adj[1, 0] = adj[2, 1] = adj[4, 2] = True
    text = shown(TaskGraph((7, 8, 9), ("boil water", "steep tea", "spare step"), adj, scenario="tea"))
    assert "tea" in text and "3 steps" in text and "1 removed" in text
    lines = text.splitlines()
    boil = next(i for i, line in enumerate(lines) if "boil water" in line)
    steep = next(i for i, line in enumerate(lines) if "steep" in line)
    assert boil < steep and "START" in lines[boil]
    assert "not seen in training" in next(line for line in lines if "spare step" in line)


def test_terminal_view_marks_optional_steps_and_says_when_none_were_learned() -> None:
    adj = np.zeros((4, 4), bool)
    adj[1, 0] = adj[2, 1] = adj[3, 2] = True  # S <- milk? <- serve <- E
    learned = TaskGraph((1, 2), ("add_sugar", "serve"), adj, scenario="tea", optional_scores=np.array([0.8, 0.0]))
    text = shown(learned)
    assert "0.80 optional" in next(line for line in text.splitlines() if "add_sugar" in line)
    assert "optional" not in next(line for line in text.splitlines() if "serve" in line)
    assert "every step is required" in shown(TaskGraph((1, 2), ("add_sugar", "serve"), adj, scenario="tea"))


def test_names_from_a_graph_file_are_shown_as_plain_text(tmp_path: Path) -> None:
    # A step name holding rich markup raised MarkupError; escape sequences reached the terminal raw.
    n = len(HOSTILE_NAMES)
    adj = np.zeros((n + 2, n + 2), bool)
    adj[1 : n + 1, 0] = True
    adj[n + 1, 1 : n + 1] = True
    save_graph(TaskGraph(tuple(range(n)), HOSTILE_NAMES, adj, scenario="\x1b[2J[/]"), tmp_path / "g.json")
    text = shown(load_graph(tmp_path / "g.json"), width=300)
    assert_shown_safely(text, (*HOSTILE_NAMES, "\x1b[2J[/]"))


def test_pre_conditions_are_named_with_their_ids() -> None:
    # "requires 2, 4" sent a reader up the table to look each id up; the steps have names.
    adj = np.zeros((6, 6), bool)
    adj[1, 0] = adj[2, 0] = adj[3, 1] = adj[3, 2] = adj[4, 3] = adj[5, 4] = True  # S <- {kettle, cup} <- pour <- milk
    graph = TaskGraph((1, 3, 5, 6), ("fill_kettle", "get_cup", "pour_water", "add_milk"), adj, scenario="tea")
    rows = {cells[3]: cells[4] for line in shown(graph).splitlines()
            if len(cells := [c.strip() for c in line.split("│")]) > 5}
    assert rows["fill_kettle"] == "START"
    assert rows["pour_water"] == "fill_kettle (1), get_cup (3)"
    assert rows["END"] == "add_milk (6)"
