"""The published LLM graphs: read over a procedure's taxonomy with the right orientation, their figures, bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphs.common.errors import InputError
from graphs.llm_graphs import LLM_FOLDER, llm_adjacency, llm_graph_path, llm_task_graph
from graphs.task_graph import END, START


@pytest.fixture(scope="module")
def procedures(data_dir: Path) -> dict:
    from tgml.bench.captaincook import load_procedures

    return {p.scenario: p for p in load_procedures(data_dir / "captaincook4d")}


def test_coffee_graph_orientation(data_dir: Path, procedures: dict) -> None:
    coffee = procedures["coffee"]
    graph = llm_task_graph(llm_graph_path(data_dir / "captaincook4d" / LLM_FOLDER, "coffee"), coffee.step_ids,
                           coffee.step_names, "coffee")
    by_name = dict(zip(coffee.step_names, coffee.step_ids, strict=True))
    boil = by_name["Boil-Boil the water. (While the water is boiling, assemble the filter cone)"]
    transfer = by_name["transfer-transfer water to a kettle"]
    measure = by_name["Measure-Measure 12 ounces of cold water"]
    # The file lists "64_Boil...;1" then "70_transfer..." : boiling needs the water in the kettle.
    assert transfer in graph.preconditions(boil) and measure in graph.preconditions(transfer)
    assert graph.preconditions(measure) == frozenset({START}) and graph.preconditions(END)
    assert graph.info["method"] == "llm"


def test_all_24_score_the_published_row(data_dir: Path, procedures: dict) -> None:
    from graphs.edge_metrics import edge_scores

    folder = data_dir / "captaincook4d" / LLM_FOLDER
    scores = [edge_scores(llm_adjacency(llm_graph_path(folder, s), p.step_ids, p.step_names, s),
                          p.ground_truth.adjacency) for s, p in procedures.items()]
    # dtype float: a None (nothing to count) becomes NaN, which fails the comparison below as it should.
    mean = np.mean(np.array([[x.precision, x.recall, x.f1] for x in scores], dtype=float), axis=0)
    assert mean == pytest.approx([52.9, 57.4, 55.0], abs=0.05)  # published 53.0 / 57.4 / 54.9


def test_a_cyclic_llm_graph_is_read_as_written_but_is_no_task_graph(data_dir: Path, procedures: dict) -> None:
    ramen = procedures["ramen"]
    path = llm_graph_path(data_dir / "captaincook4d" / LLM_FOLDER, "ramen")
    adjacency = llm_adjacency(path, ramen.step_ids, ramen.step_names, "ramen")
    assert (adjacency & adjacency.T).any()  # the model wrote a two-step cycle
    with pytest.raises(InputError, match=r"graph_ramen\.adjlist: .*cycle"):
        llm_task_graph(path, ramen.step_ids, ramen.step_names, "ramen")


def test_bad_files(tmp_path: Path) -> None:
    ids, names = (1, 2), ("Boil-Boil water", "Pour-Pour water")
    with pytest.raises(InputError, match="graph_tea.adjlist: LLM task graph of procedure 'tea' not found"):
        llm_adjacency(llm_graph_path(tmp_path, "tea"), ids, names, "tea")
    path = tmp_path / "graph_tea.adjlist"
    path.write_text("# comment\n7_Pour-Pour water;1\n9_Boil-Boil milk;{}\n")
    with pytest.raises(InputError, match="node '9_Boil-Boil milk' matches no step of procedure 'tea'"):
        llm_adjacency(path, ids, names, "tea")
    path.write_text("7_Pour-Pour water;x\n")
    with pytest.raises(InputError, match="not a ';'-delimited multi-line adjacency list"):
        llm_adjacency(path, ids, names, "tea")
    path.write_text("7_Pour-Pour water;1\n8_Pour-Pour water;{}\n")
    with pytest.raises(InputError, match="name the same step"):
        llm_adjacency(path, ids, names, "tea")


def test_tgml_eval_scores_an_llm_graph_file(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli_errors import cli_error
    from tgml.tgml_cli import main

    folder, gt = data_dir / "captaincook4d" / LLM_FOLDER, data_dir / "captaincook4d" / "ground_truth_task_graphs"
    assert main(["eval", "--pred", str(folder / "graph_ramen.adjlist"), "--gt", str(gt / "ramen.json")]) == 0
    assert "precision 47.8  recall 55.0  F1 51.2" in capsys.readouterr().out  # the cyclic one, scored as written
    err = cli_error(main, ["eval", "--pred", str(folder / "graph_ramen.adjlist"), "--gt", str(gt / "coffee.json")],
                    capsys)
    assert "matches no step of procedure 'coffee'" in err


@pytest.mark.parametrize("text", ["", "# only comments\n# START;0\n"])
def test_an_adjacency_list_without_an_edge_is_refused_not_scored_0_of_0(tmp_path: Path, text: str) -> None:
    path = tmp_path / "graph_tea.adjlist"
    path.write_text(text)
    with pytest.raises(InputError, match="graph_tea.adjlist: no edge"):
        llm_adjacency(path, [1, 2], ["Boil-Boil water", "Pour-Pour water"], "tea")
