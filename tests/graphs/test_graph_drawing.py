"""Drawing task graphs: DOT text, images through Graphviz when installed."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from graphs.common.errors import InputError
from graphs.graph_drawing import to_dot, write_rendering
from graphs.task_graph import TaskGraph


def tea() -> TaskGraph:
    # S=0, boil=1, steep=2, spare=3 (never seen: isolated), E=4
    adj = np.zeros((5, 5), bool)
    adj[1, 0] = adj[2, 1] = adj[4, 2] = True
    return TaskGraph((7, 8, 9), ("boil water", 'steep "tea"', "spare step"), adj, scenario="tea")


def test_dot_draws_edges_in_execution_order_and_marks_removed_steps() -> None:
    dot = to_dot(tea())
    assert dot.startswith("digraph task_graph {") and dot.rstrip().endswith("}")
    assert '"START" -> "k7";' in dot and '"k7" -> "k8";' in dot and '"k8" -> "END";' in dot
    assert '\\"tea\\"' in dot  # quotes in names are escaped
    assert "k9" in dot and "dashed" in dot


def test_write_dot_file_and_reject_unknown_format(tmp_path: Path) -> None:
    out = write_rendering(tea(), tmp_path / "tea.dot")
    assert out.read_text() == to_dot(tea())
    with pytest.raises(InputError, match="unknown output format"):
        write_rendering(tea(), tmp_path / "tea.jpeg2")
    with pytest.raises(InputError, match="tea.dot: cannot write the rendering: .*is a file, not a folder"):
        write_rendering(tea(), out / "tea.dot")  # a parent that is a file


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_svg_through_graphviz(tmp_path: Path) -> None:
    out = write_rendering(tea(), tmp_path / "tea.svg")
    assert "<svg" in out.read_text()


def test_image_without_graphviz_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Skipped where Graphviz was installed, as CI has it: the error a user without Graphviz gets never ran there.
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH that holds no dot
    with pytest.raises(InputError, match="Graphviz 'dot' is not installed"):
        write_rendering(tea(), tmp_path / "tea.png")


def awkward() -> TaskGraph:
    adj = np.zeros((4, 4), bool)
    adj[1, 0] = adj[2, 1] = adj[3, 2] = True
    return TaskGraph((1, 2), ("ends in a backslash \\", "escape \x1b[31m red"), adj, scenario="odd")


def test_names_ending_in_a_backslash_or_holding_controls_stay_inside_their_label() -> None:
    dot = to_dot(awkward())
    # the backslash doubled (it would otherwise escape the closing quote), the control character written visibly
    assert '"k1" [label="1: ends in a backslash \\\\"];' in dot
    assert "\x1b" not in dot and "\\\\x1b[31m" in dot


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_graphviz_draws_awkward_names_as_xml_a_parser_reads(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    drawing = ET.parse(write_rendering(awkward(), tmp_path / "odd.svg"))
    texts = [t.text for t in drawing.iter() if t.tag.endswith("text")]
    assert "1: ends in a backslash \\" in texts and any("\\x1b[31m" in (t or "") for t in texts)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_graphviz_refusing_its_input_is_said_in_its_own_last_line() -> None:
    # The error line carried a Python list ("['Error: ...']"); the dashboard's copy of the call had a time limit,
    # this one none.
    from graphs.graph_drawing import dot_said, run_dot

    done = run_dot(str(shutil.which("dot")), "digraph { a -> ", "svg")
    assert done.returncode != 0
    said = dot_said(done)
    assert said.startswith("Error: ") and len(said) <= 200
