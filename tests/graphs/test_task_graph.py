"""The task graph file: what users save, load, share with other tools, and what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphs import END, START, InputError, PreconditionChecker, TaskGraph, load_graph, save_graph
from graphs.task_graph import EDGE_PROBABILITY_WEIGHTS
from streaming.stream_detect_cli import main as stream_detect_main
from tests.cli_errors import cli_error
from tgml.tgml_cli import main as tgml_main


def test_round_trip_keeps_names_ids_weights_and_edges(tmp_path: Path, tent_graph: TaskGraph) -> None:
    save_graph(tent_graph, tmp_path / "g.json")
    loaded = load_graph(tmp_path / "g.json")
    assert loaded.step_ids == tent_graph.step_ids
    assert loaded.step_names == tent_graph.step_names
    assert loaded.scenario == "tent" and loaded.info == {"method": "test"}
    np.testing.assert_array_equal(loaded.adjacency, tent_graph.adjacency)
    assert loaded.weights is not None and tent_graph.weights is not None
    np.testing.assert_allclose(loaded.weights, tent_graph.weights)


def test_file_lists_preconditions_by_step_id_readable_without_this_package(
    tmp_path: Path, tent_graph: TaskGraph
) -> None:
    save_graph(tent_graph, tmp_path / "g.json")
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["format"] == "task-graph" and data["version"] == 2
    pairs = {(e["step"], e["requires"]) for e in data["edges"]}
    assert pairs == {(10, "START"), (13, "START"), (11, 10), (11, 13), (12, 11), ("END", 12)}
    assert data["steps"][0] == {"id": 10, "name": "unpack"}


def test_optional_scores_are_saved_per_step_and_read_back(tmp_path: Path, tent_graph: TaskGraph) -> None:
    scores = np.array([0.0, 0.25, 0.0, 0.75, 0.0])
    graph = TaskGraph(tent_graph.step_ids, tent_graph.step_names, tent_graph.adjacency, tent_graph.weights,
                      optional_scores=scores)
    save_graph(graph, tmp_path / "g.json")
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["steps"][3] == {"id": 13, "name": "open_bag", "optional": 0.75}
    loaded = load_graph(tmp_path / "g.json")
    np.testing.assert_array_equal(loaded.optional_scores, scores)
    assert loaded.optional_steps == (13,)  # above 0.5; 0.25 is not optional


def test_a_step_without_an_optional_field_is_required(tmp_path: Path, tent_graph: TaskGraph) -> None:
    data = tent_graph.to_dict()
    assert all("optional" not in step for step in data["steps"])  # never learned: no field written
    data["steps"][1]["optional"] = 1
    loaded = load_graph(_write(tmp_path, data))
    np.testing.assert_array_equal(loaded.optional_scores, [0, 1, 0, 0, 0])
    assert loaded.optional_steps == (11,)


def test_version_1_files_are_still_read_with_every_step_required(tmp_path: Path, tent_graph: TaskGraph) -> None:
    data = tent_graph.to_dict()
    data["version"] = 1
    loaded = load_graph(_write(tmp_path, data))
    assert loaded.optional_scores is None and loaded.optional_steps == ()
    np.testing.assert_array_equal(loaded.adjacency, tent_graph.adjacency)


def test_preconditions_and_what_the_checker_finds_unmet(tent_graph: TaskGraph) -> None:
    assert tent_graph.preconditions(11) == {10, 13}
    assert tent_graph.preconditions(10) == {START}
    checker = PreconditionChecker(tent_graph)
    assert checker.observe(10).missing == ()  # START is always done
    assert checker.observe(11).missing == (13,)
    assert tent_graph.preconditions(99) == frozenset()  # unknown step: nothing defined


def test_isolated_steps_are_reported_as_removed() -> None:
    adj = np.zeros((4, 4), dtype=bool)
    adj[1, 0] = adj[3, 1] = True  # step 5 needs START, END needs 5; step 6 has no edge at all
    graph = TaskGraph((5, 6), ("a", "b"), adj)
    assert graph.removed_steps == (6,)


def test_to_networkx_has_step_to_requirement_edges(tent_graph: TaskGraph) -> None:
    nxg = tent_graph.to_networkx()
    assert nxg.has_edge(11, 10) and not nxg.has_edge(10, 11)
    assert nxg.nodes[12]["name"] == "stake"


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["edges"].append({"step": 10, "requires": 12}), "cycle"),
        (lambda d: d["edges"].append({"step": 10, "requires": 77}), "edges[6].requires = 77"),
        (lambda d: d["edges"].append({"step": 10, "requires": 10}), "its own pre-condition"),
        (lambda d: d["edges"].append({"step": START, "requires": 10}), "START cannot"),
        (lambda d: d["edges"].append({"step": 10, "requires": END}), "requires END"),
        (lambda d: d["steps"].append({"id": 10, "name": "again"}), "step id 10 appears twice"),
        (lambda d: d.update(version=99), "unsupported version 99"),
        (lambda d: d.update(version=True), "unsupported version true"),
        (lambda d: d["edges"].append({"step": [10], "requires": 12}), "edges[6].step = [10] is not a step"),
        (lambda d: d["edges"].append({"step": 10, "requires": {"id": 12}}), 'edges[6].requires = {"id": 12}'),
        (lambda d: d.update(weights=[[0.0]]), "weights have shape"),
        (lambda d: d.pop("steps"), "'steps'"),
        (lambda d: d["steps"][2].update(optional=1.5), "steps[2].optional = 1.5 is not a number in [0, 1]"),
        (lambda d: d["steps"][0].update(optional=True), "steps[0].optional = true is not a number"),
        (lambda d: d["steps"][4].update(optional="yes"), 'steps[4].optional = "yes" is not a number'),
        (lambda d: d["steps"][1].update(optional=None), "steps[1].optional = null is not a number"),
        (lambda d: (d.update(version=1), d["steps"][0].update(optional=0.5)), "steps[0].optional needs version 2"),
        # A blank name showed as a blank row in tgml show, and a repeated edge was taken without a word.
        (lambda d: d["steps"][1].update(name=""), "the name of step 11 is empty; every step needs a name"),
        (lambda d: d["steps"][3].update(name=" \t "), "the name of step 13 holds no visible character"),
        # Each shows as nothing: zero-width and ideographic spaces, a Hangul filler, the braille blank, a lone
        # variation selector and a combining grapheme joiner.
        *[(lambda d, name=name: d["steps"][0].update(name=name), "the name of step 10 holds no visible character")
          for name in ("\u200b\u3000", "\u3164", "\u2800", "\ufe0f", "\u034f")],
        (lambda d: d["edges"].append(dict(d["edges"][2])),
         "edges[6] repeats edges[2] (step 11 requires 13); each pre-condition of a step is listed once"),
        (lambda d: d["edges"].insert(1, {"requires": "START", "step": 10}), "edges[1] repeats edges[0] (step 10 "
         "requires START)"),
    ],
)
def test_malformed_cyclic_or_inconsistent_files_fail_with_one_line(
    tmp_path: Path, mutate, message: str, tent_graph: TaskGraph
) -> None:
    data = tent_graph.to_dict()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as err:
        load_graph(path)
    text = str(err.value)
    assert message in text and str(path) in text and "\n" not in text


def test_a_blank_step_name_is_refused_by_every_command_that_reads_the_graph(
    tmp_path: Path, tent_graph: TaskGraph, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tent_graph.to_dict()
    data["steps"][2]["name"] = "   "
    path = _write(tmp_path, data)
    expected = f"error: {path}: the name of step 12 holds no visible character; every step needs a name"
    assert cli_error(tgml_main, ["show", str(path)], capsys).startswith(expected)
    assert cli_error(tgml_main, ["eval", "--pred", str(path), "--gt", str(path)], capsys).startswith(expected)
    assert cli_error(stream_detect_main, ["--video", "demo", "--fast", "--jsonl", "--graph", str(path)],
                     capsys).startswith(expected.replace("error: ", "error: --graph ", 1))  # the option named too


def test_a_graph_is_never_built_with_a_name_that_shows_nothing(tent_graph: TaskGraph) -> None:
    # So no learner writes a graph that the loader would then refuse.
    names = ("unpack", "spread", "\n", "open_bag", "never_seen")
    with pytest.raises(InputError, match=r"task graph: the name of step 12 holds no visible character"):
        TaskGraph(tent_graph.step_ids, names, tent_graph.adjacency)
    assert TaskGraph(tent_graph.step_ids, (" unpack", "spread", "stake", "open bag", "never seen"),
                     tent_graph.adjacency).step_names[0] == " unpack"  # visible text with spaces around is a name


def test_saving_onto_a_folder_is_a_one_line_error(tmp_path: Path, tent_graph: TaskGraph) -> None:
    (tmp_path / "g.json").mkdir()
    with pytest.raises(InputError, match=r"g.json: is a folder, not a regular file; refusing to replace"):
        save_graph(tent_graph, tmp_path / "g.json")


def test_invalid_json_and_missing_file_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="invalid JSON at line 1"):
        load_graph(_write(tmp_path, "{not json"))
    with pytest.raises(InputError, match="not found"):
        load_graph(tmp_path / "missing.json")


def test_optional_scores_of_the_wrong_shape_or_range_are_refused(tent_graph: TaskGraph) -> None:
    parts = (tent_graph.step_ids, tent_graph.step_names, tent_graph.adjacency)
    with pytest.raises(InputError, match=r"optional scores have shape \(2,\), expected \(5,\)"):
        TaskGraph(*parts, optional_scores=np.array([0.1, 0.2]))
    with pytest.raises(InputError, match="optional score of step 12 is not a number in"):
        TaskGraph(*parts, optional_scores=np.array([0.1, 0.2, np.nan, 0.0, 0.0]))


def test_a_json_file_that_is_no_graph_is_named_as_such(tmp_path: Path) -> None:
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["a"], "test": ["b"]}))
    with pytest.raises(InputError, match=r"split\.json: this looks like a split file \(.*\), not a task graph"):
        load_graph(split)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"name": "x"}))  # none of the project's files: the field it lacks
    with pytest.raises(InputError, match=r"other\.json: not a task-graph file \(no 'format' field"):
        load_graph(other)


def test_execution_levels_are_networkx_topological_generations() -> None:
    # The DAG check of every loaded graph and the levels of `tgml show` come from execution_levels, not networkx.
    import networkx as nx

    from graphs.task_graph import execution_levels

    rng = np.random.default_rng(0)
    for _ in range(200):
        m = int(rng.integers(1, 25))
        order = rng.permutation(m)
        adjacency = np.triu(rng.random((m, m)) < rng.random(), 1)[np.ix_(order, order)]  # a DAG, shuffled
        requirement_to_step = nx.DiGraph()
        requirement_to_step.add_nodes_from(range(m))
        requirement_to_step.add_edges_from((int(j), int(i)) for i, j in zip(*np.nonzero(adjacency), strict=True))
        expected = {n: d for d, layer in enumerate(nx.topological_generations(requirement_to_step)) for n in layer}
        assert execution_levels(adjacency).tolist() == [expected[n] for n in range(m)]
        if m >= 2:
            a, b = (int(v) for v in rng.choice(m, 2, replace=False))
            cyclic = adjacency.copy()
            cyclic[a, b] = cyclic[b, a] = True
            assert (execution_levels(cyclic) < 0).any()


@pytest.mark.parametrize(("kind", "value", "refused"), [
    (None, -5.0, True), (None, 7.0, True), (None, 1.0 + 1e-9, False),
    (EDGE_PROBABILITY_WEIGHTS, 1.5, True),
    ("combined evidence r[step, requires] (1 = each learner's own edge cut)", 7.0, False),  # a range of its own
])
def test_weights_read_as_probabilities_outside_0_1_are_refused_naming_the_cell(
    tmp_path: Path, tent_graph: TaskGraph, kind: str | None, value: float, refused: bool
) -> None:
    # The next-step scores of a file whose weight was edited to -5 changed from 0.75/0.25 to 0.51/0.49, silently.
    n = tent_graph.n_steps + 2
    weights = np.full((n, n), 0.5)
    weights[1, 2] = value
    info = {} if kind is None else {"weights": kind}
    path = tmp_path / "g.json"
    data = TaskGraph(tent_graph.step_ids, tent_graph.step_names, tent_graph.adjacency, weights, tent_graph.scenario,
                     info).to_dict()
    path.write_text(json.dumps(data))
    if refused:
        cell = rf"g\.json: weights\[1\]\[2\] = {value:g} is not a probability in \[0, 1\]"
        with pytest.raises(InputError, match=cell):
            load_graph(path)
    else:
        read = load_graph(path).weights
        assert read is not None and read[1, 2] == pytest.approx(value)


def test_captaincook4ds_error_annotations_given_as_a_graph_are_named_as_such(tmp_path: Path) -> None:
    # A list: "expected a JSON object", while --annotations and --split named the same file.
    path = tmp_path / "error_annotations.json"
    path.write_text(json.dumps([{"recording_id": "1_1", "activity_id": 1, "step_annotations": []}]))
    with pytest.raises(InputError) as refused:
        load_graph(path)
    assert str(refused.value) == (f"{path}: this looks like CaptainCook4D's error annotations (tgml "
                                  "captaincook-labels writes an annotation file from them), not a task graph (tgml "
                                  "train writes them)")
