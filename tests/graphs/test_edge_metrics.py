"""Edge precision/recall/F1 between task graphs, including CaptainCook4D ground-truth files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphs.common.errors import InputError
from graphs.edge_metrics import compare_graphs, edge_scores, evaluate_files, load_reference_graph
from graphs.task_graph import END, START, TaskGraph, save_graph
from tests.cli_errors import cli_error
from tgml.tgml_cli import main as tgml_main


def chain(ids: tuple[int, ...], names: tuple[str, ...]) -> TaskGraph:
    """A chain START -> steps in increasing id -> END, stored in the given matrix order."""
    index = {node: k for k, node in enumerate((START, *ids, END))}
    adj = np.zeros((len(ids) + 2, len(ids) + 2), bool)
    order = [START, *sorted(ids), END]
    for before, after in zip(order, order[1:], strict=False):
        adj[index[after], index[before]] = True
    return TaskGraph(ids, names, adj, scenario="tea")


def test_scores_count_edges() -> None:
    pred = np.zeros((4, 4), bool)
    gt = np.zeros((4, 4), bool)
    pred[1, 0] = pred[2, 1] = pred[3, 1] = True
    gt[1, 0] = gt[2, 1] = gt[3, 2] = gt[2, 0] = True
    s = edge_scores(pred, gt)
    assert (s.true_positives, s.predicted, s.expected) == (2, 3, 4)
    assert s.precision == pytest.approx(200 / 3) and s.recall == pytest.approx(50.0)
    assert s.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5) * 100)
    assert edge_scores(np.zeros((4, 4), bool), gt).f1 == 0.0


def test_compare_aligns_graphs_by_step_id_not_matrix_order() -> None:
    a = chain((10, 20, 30), ("a", "b", "c"))
    b = chain((30, 10, 20), ("c", "a", "b"))
    assert compare_graphs(a, b).f1 == 100.0
    with pytest.raises(InputError, match="different steps"):
        compare_graphs(a, chain((10, 20, 40), ("a", "b", "d")))
    # Same ids, other names: another procedure's graph, scored by id alone before (F1 88.9 on a researcher's data).
    with pytest.raises(InputError, match='step 20 is "b" in the predicted graph and "stake" in the ground truth'):
        compare_graphs(a, chain((10, 20, 30), ("a", "stake", "c")))


def test_captaincook_file_is_read_by_name_with_before_after_orientation(tmp_path: Path) -> None:
    pred = chain((10, 20, 30), ("a", "b", "c"))
    # Ground-truth ids differ from ours; [x, y] means x happens before y.
    gt = {"steps": {"0": "START", "1": "c", "2": "a", "3": "b", "4": "END"},
          "edges": [[0, 2], [2, 3], [3, 1], [1, 4]]}
    path = tmp_path / "tea.json"
    path.write_text(json.dumps(gt))
    ref = load_reference_graph(path, pred)
    assert ref.preconditions(20) == {10} and ref.preconditions(10) == {START} and ref.preconditions(END) == {30}
    save_graph(pred, tmp_path / "pred.json")
    assert evaluate_files(tmp_path / "pred.json", path).f1 == 100.0


def test_captaincook_file_with_unknown_step_name(tmp_path: Path) -> None:
    path = tmp_path / "tea.json"
    path.write_text(json.dumps({"steps": {"0": "START", "1": "zzz", "2": "END"}, "edges": []}))
    with pytest.raises(InputError, match="'zzz' is not a step"):
        load_reference_graph(path, chain((10, 20, 30), ("a", "b", "c")))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"steps": {}, "edges": []}, "at least START and END"),
        ({"steps": {"0": "START", "1": "a", "2": "b", "3": "c", "4": "END"}, "edges": [[0, 1], [True, 2]]},
         r"edges\[1\] must be a pair of step ids"),
        ({"steps": {"0": "START", "1": "a", "2": "b", "3": "c", "4": "a", "5": "END"}, "edges": [[0, 1], [3, 4]]},
         r"tea.json: step name 'a' appears twice in .*tea.json, so steps cannot be matched"),
        # a cycle, and a self-loop: said as "task graph: ...", no file named
        ({"steps": {"0": "START", "1": "a", "2": "b", "3": "c", "4": "END"}, "edges": [[1, 2], [2, 1]]},
         r"tea.json: pre-conditions form a cycle"),
        ({"steps": {"0": "START", "1": "a", "2": "b", "3": "c", "4": "END"}, "edges": [[1, 1]]},
         r"tea.json: step 10 is its own pre-condition"),
        # The task-graph file's rules: a 100,000-character name (on END, whose name is never used) was read.
        ({"steps": {"0": "START", "1": "a", "2": "b", "3": "c", "4": "E" * 100_000}, "edges": [[0, 1]]},
         r"tea.json: the name of step 4 is 100000 characters long; at most 512$"),
        ({"steps": {"0": "START", "1": "a", "2": " ", "3": "c", "4": "END"}, "edges": []},
         r"tea.json: the name of step 2 holds no visible character; every step needs a name"),
        ({"steps": {"0": "START", "1": "a", "2": "b", "3": "c", "4": "END"}, "edges": [[0, 1], [1, 2], [0, 1]]},
         r"tea.json: edges\[2\] = \[0, 1\] repeats edges\[0\] \(step 1 requires step 0\); each pre-condition"),
    ],
    ids=["no-steps", "boolean-step-id", "repeated-name", "cycle", "self-loop", "long-name", "blank-name",
         "repeated-edge"],
)
def test_malformed_captaincook_file_is_one_line(tmp_path: Path, content: dict, message: str) -> None:
    path = tmp_path / "tea.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InputError, match=message):
        load_reference_graph(path, chain((10, 20, 30), ("a", "b", "c")))


@pytest.mark.parametrize(
    ("steps", "fault"),
    [({"0": "START", "1": "a", "2": "a", "3": "END"}, "two steps are named 'a'"),
     ({"0": "START", "1": "a", "2": "b" * 513, "3": "END"}, "the name of step 2 is 513 characters long; at most 512")],
    ids=["repeated-name", "long-name"],
)
def test_tgml_show_names_the_captaincook_file_at_fault(tmp_path: Path, steps: dict, fault: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # Said as "task graph: ...", without the file.
    path = tmp_path / "tea.json"
    path.write_text(json.dumps({"steps": steps, "edges": [[0, 1]]}))
    assert cli_error(tgml_main, ["show", str(path)], capsys).startswith(f"error: {path}: {fault}")


def test_missing_ground_truth_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_reference_graph(tmp_path / "none.json", chain((10, 20, 30), ("a", "b", "c")))
