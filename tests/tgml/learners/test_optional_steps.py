"""Training stores which steps the training executions show to be optional, in the graph file."""

from __future__ import annotations

import json
from pathlib import Path

from graphs.task_graph import load_graph
from tgml.tgml_cli import main


def test_a_step_most_executions_skip_is_saved_as_optional(tmp_path: Path) -> None:
    # "add milk" (2) is in 1 execution of 10; "boil water" (1) and "pour" (3) are in all of them.
    runs = [[1, 2, 3]] + [[1, 3]] * 9
    annotations = {
        "annotations": {f"v{k}": {"scenario": "tea", "recording_id": f"v{k}",
                                  "segments": [{"step_id": s} for s in run]} for k, run in enumerate(runs)},
        "taxonomy": {"tea": {"1": {"name": "boil water", "id": 1}, "2": {"name": "add milk", "id": 2},
                             "3": {"name": "pour", "id": 3}}},
    }
    source = tmp_path / "ann.json"
    source.write_text(json.dumps(annotations))
    out = tmp_path / "tea.json"
    assert main(["train", "--annotations", str(source), "--scenario", "tea", "--out", str(out), "--epochs", "100",
                 "--quiet"]) == 0
    saved = json.loads(out.read_text())
    assert saved["version"] == 2 and [s["optional"] for s in saved["steps"]] == [0.0, 1.0, 0.0]
    assert load_graph(out).optional_steps == (2,)
