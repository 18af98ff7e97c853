"""CaptainCook4D benchmark: real data loading and edge orientation, a short run, the command and its errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from graphs.edge_metrics import compare_graphs
from graphs.postprocess import binarize, present_steps
from graphs.task_graph import END, START, TaskGraph
from tests.cli_errors import cli_error
from tgml.bench.captaincook import DEFAULT_CONFIG, captaincook_table, load_procedures, mean_ci90, run_benchmark
from tgml.learners.do.ensemble import member_seeds
from tgml.learners.do.train import train_do
from tgml.tgml_cli import main


def test_loads_24_procedures_with_ground_truth_matched_by_name(data_dir: Path) -> None:
    procedures = load_procedures(data_dir / "captaincook4d")
    assert len(procedures) == 24
    assert sum(len(p.sequences) for p in procedures) == 194
    coffee = next(p for p in procedures if p.scenario == "coffee")
    assert coffee.step_ids == tuple(range(56, 72))  # taxonomy ids, not the ground truth's 1..16
    by_name = dict(zip(coffee.step_names, coffee.step_ids, strict=True))
    bloom = by_name["Wait-Wait about 30 seconds for the coffee to bloom. (You will see small bubbles or foam on "
                    "the coffee grounds during this step.)"]
    wet = by_name["Pour-Pour a small amount of water into the filter to wet the grounds"]
    # Ground-truth edge [2, 1] = "wet the grounds before waiting for the bloom": the bloom requires wetting.
    assert wet in coffee.ground_truth.preconditions(bloom)
    assert bloom not in coffee.ground_truth.preconditions(wet)
    for p in procedures:
        gt = p.ground_truth
        assert not gt.preconditions(START) and gt.preconditions(END)
        assert any(START in gt.preconditions(s) for s in gt.step_ids)


def test_short_benchmark_run_scores_and_summarises(data_dir: Path) -> None:
    config = dataclasses.replace(DEFAULT_CONFIG, epochs=80)
    result = run_benchmark(data_dir / "captaincook4d", [42, 43], config, ["ramen", "tomatomozzarellasalad"])
    assert len(result.runs) == 4 and {r.seed for r in result.runs} == {42, 43}
    summary = result.summary()
    assert 60.0 < summary["f1"]["mean"] <= 100.0 and summary["f1"]["ci90"] >= 0.0
    console = Console(width=120)
    with console.capture() as captured:
        console.print(captaincook_table(result))
    rendered = captured.get()
    assert "ramen" in rendered and "published DO" in rendered and "87.8" in rendered
    payload = result.to_dict()
    assert payload["published_do"]["f1"] == 87.8 and len(payload["runs"]) == 4


def test_default_is_the_spec_threshold() -> None:
    assert DEFAULT_CONFIG.edge_threshold == "1/n" and DEFAULT_CONFIG.early_stop == "sa-plateau"


def test_ensemble_scores_the_post_processed_mean_of_its_members(data_dir: Path) -> None:
    config = dataclasses.replace(DEFAULT_CONFIG, epochs=60, early_stop="none")
    procedure = load_procedures(data_dir / "captaincook4d", ["coffee"])[0]
    result = run_benchmark(data_dir / "captaincook4d", [3], config, ["coffee"], ensemble=2)
    assert len(result.runs) == 1 and result.to_dict()["ensemble"] == 2
    members = [train_do(procedure.sequences, procedure.step_ids, procedure.step_names,
                                dataclasses.replace(config, seed=s), "coffee").graph for s in member_seeds(3, 2)]
    assert members[0].weights is not None and members[1].weights is not None
    mean = (members[0].weights + members[1].weights) / 2
    adjacency = binarize(mean, present_steps(procedure.step_ids, procedure.sequences), relaxed=False)
    expected = compare_graphs(TaskGraph(procedure.step_ids, procedure.step_names, adjacency), procedure.ground_truth)
    assert result.runs[0].scores == expected


def test_confidence_interval_uses_student_t() -> None:
    mean, half = mean_ci90(np.array([[80.0], [82.0], [84.0], [86.0], [88.0]]))
    assert mean[0] == pytest.approx(84.0)
    assert half[0] == pytest.approx(2.132 * np.std([80, 82, 84, 86, 88], ddof=1) / np.sqrt(5))
    assert mean_ci90(np.array([[1.0]]))[1][0] == 0.0


def test_bench_command_writes_json(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cc.json"
    assert main(["bench-captaincook", "--data", str(data_dir / "captaincook4d"), "--seeds", "1", "--procedures",
                 "spicedhotchocolate", "--epochs", "60", "--workers", "1", "--json", str(out), "--quiet"]) == 0
    assert "spicedhot" in capsys.readouterr().out  # long names may be shortened on an 80-column console
    saved = json.loads(out.read_text())
    assert saved["version"] == 2 and list(saved["methods"]) == ["do"]
    do = saved["methods"]["do"]
    assert do["seeds"] == [42] and do["runs"][0]["scenario"] == "spicedhotchocolate"
    assert do["published_do"]["f1"] == 87.8 and do["published"]["f1"] == 87.8


def test_bench_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "data folder not found" in cli_error(main, ["bench-captaincook", "--data", str(tmp_path / "nowhere"),
                                                      "--quiet"], capsys)

    # A procedure whose only video has an erroneous segment has no usable sequence.
    (tmp_path / "ground_truth_task_graphs").mkdir()
    ann = {"annotations": {"v": {"scenario": "tea", "recording_id": "v",
                                 "segments": [{"step_id": 1, "has_errors": True}]}},
           "taxonomy": {"tea": {"1": {"name": "boil", "id": 1}}}}
    (tmp_path / "task_graph_generation_annotations.json").write_text(json.dumps(ann))
    err = cli_error(main, ["bench-captaincook", "--data", str(tmp_path), "--workers", "1", "--quiet"], capsys)
    assert "'tea'" in err and "no usable" in err
