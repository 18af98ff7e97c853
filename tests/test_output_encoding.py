"""Standard output that cannot encode every character (a legacy locale: ``LANG=en_US.ISO-8859-1``, or
``PYTHONIOENCODING=ascii``) and a step named ``faire_bouillir_l’eau``: the name is shown escaped, the command goes on.

Python's stdout is strict about its encoding (its stderr escapes): ``tgml show`` ended in a traceback, and the live
view of ``stream-detect`` ended mid-run with ``error: the live view failed (UnicodeEncodeError ...)``, exit status 1,
at the first frame that showed the step. Each command runs as a real process with that output encoding.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphs.task_graph import TaskGraph, load_graph, save_graph
from streaming.demo.paths import default_demo_paths

NAME = "faire_bouillir_l’eau_☕"  # the demo's boil_water, named with two characters ASCII and Latin-1 lack
ESCAPED = "faire_bouillir_l\\u2019eau_\\u2615"


@pytest.fixture
def french_graph(tmp_path: Path) -> Path:
    graph = load_graph(default_demo_paths()[0])
    names = [NAME if name == "boil_water" else name for name in graph.step_names]
    path = tmp_path / "tea.json"
    save_graph(TaskGraph(graph.step_ids, tuple(names), graph.adjacency, graph.weights, graph.scenario), path)
    return path


def run_with_output_encoding(encoding: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": encoding, "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, encoding=encoding,
                          errors="strict", env=env, timeout=300)  # fmt: skip


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_tgml_show_escapes_a_name_its_output_cannot_encode(french_graph: Path, encoding: str) -> None:
    done = run_with_output_encoding(encoding, "tgml.tgml_cli", "show", str(french_graph))
    assert done.returncode == 0, done.stderr[-2000:]
    assert ESCAPED in done.stdout


def test_the_live_view_escapes_a_name_its_output_cannot_encode_and_runs_to_the_end(french_graph: Path) -> None:
    detector = str(default_demo_paths()[1])
    done = run_with_output_encoding("ascii", "streaming.stream_detect_cli", "--video", "demo", "--fast", "--graph",
                                    str(french_graph), "--detector", detector, "--ignore-names")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "error:" not in done.stderr
    assert f"cam0 ended: 1 mistake ({ESCAPED} before fill_kettle), nothing missing" in done.stdout
