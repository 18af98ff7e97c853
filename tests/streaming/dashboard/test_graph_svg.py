"""The dashboard's drawing of the task graph: made from any step names, and a word when there is none."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from graphs.task_graph import TaskGraph
from streaming.dashboard.graph_svg import graph_svg


def odd_graph() -> TaskGraph:
    adj = np.zeros((4, 4), bool)
    adj[1, 0] = adj[2, 1] = adj[3, 2] = True
    return TaskGraph((1, 2), ("pour \x1b[2J water", "stir \\"), adj, scenario="odd")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_a_step_named_with_control_characters_is_still_drawn() -> None:
    # An escape character reached Graphviz's SVG, which no XML parser reads: the page lost its drawing without a word.
    said: list[str] = []
    svg = graph_svg(odd_graph(), said.append)
    assert svg is not None and said == []
    texts = [t.text or "" for t in ET.fromstring(svg).iter() if t.tag.endswith("text")]
    assert any("\\x1b[2J" in t for t in texts) and "2: stir \\" in texts


def test_without_graphviz_the_dashboard_says_why_there_is_no_drawing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH that holds no dot
    said: list[str] = []
    assert graph_svg(odd_graph(), said.append) is None
    assert said == ["Graphviz (dot) is not installed: the page lists the steps and their pre-conditions as text"]
