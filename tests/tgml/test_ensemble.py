"""``do-ensemble``: averaged DO seeds as one ordinary task graph, and its selection on training data only."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from graphs import InputError, PreconditionChecker
from graphs.postprocess import present_steps
from graphs.task_graph import load_graph
from tests.cli_errors import cli_error
from tgml.bench import prego
from tgml.bench import prego_bench_cli as bench_cli
from tgml.bench.prego.selection import synthetic_slips
from tgml.ensemble import (
    EnsembleConfig,
    SelectionConfig,
    average_weights,
    cross_validate_ensemble,
    ensemble_graph,
    member_seeds,
    train_ensemble,
)


@pytest.fixture(scope="module")
def do_settings() -> dict:
    return {**prego.load_method_settings("epic-tent-o")["do"], "epochs": 20, "early_stop": "none"}


def test_member_seeds_of_different_runs_never_overlap() -> None:
    assert member_seeds(1, 5) == (5, 6, 7, 8, 9)
    runs = [set(member_seeds(seed, 5)) for seed in range(1, 6)]
    assert sum(len(r) for r in runs) == len(set().union(*runs)) == 25


def test_average_of_row_distributions_is_a_row_distribution() -> None:
    rng = np.random.default_rng(0)
    mats = [rng.random((6, 6)) for _ in range(3)]
    mats = [m / m.sum(axis=1, keepdims=True) for m in mats]
    mean = average_weights(mats)
    np.testing.assert_allclose(mean.sum(axis=1), 1.0)
    np.testing.assert_allclose(mean, (mats[0] + mats[1] + mats[2]) / 3)
    with pytest.raises(InputError, match="no member weights"):
        average_weights([])


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"size": 0}, "size"), ({"threshold_scale": -1.0}, "threshold_scale"), ({"threshold_scale": float("nan")}, "")],
)
def test_ensemble_config_errors_name_the_field(changes: dict, field: str) -> None:
    with pytest.raises(InputError, match=f"EnsembleConfig.{field}"):
        EnsembleConfig(**changes)


def test_ensemble_is_the_post_processed_mean_of_its_members(epic: prego.BenchData, do_settings: dict) -> None:
    config = EnsembleConfig(size=3, threshold_scale=2.0)
    graph = train_ensemble(epic, do_settings, seed=1, config=config)
    members = [prego.build_do(epic, do_settings, s) for s in member_seeds(1, 3)]
    assert graph.weights is not None
    np.testing.assert_allclose(graph.weights, np.mean([m.weights for m in members], axis=0))
    assert graph.info["member_seeds"] == [3, 4, 5] and graph.info["threshold"] == 1 / 24
    # An ordinary binary DAG: the live checker takes it unchanged.
    assert nx.is_directed_acyclic_graph(nx.DiGraph(graph.adjacency.astype(int)))
    # Every step of a training video is a node with pre-conditions (never "undefined" to the checker).
    assert not any(v.undefined for v in PreconditionChecker.replay(graph, epic.train[0]).history)


def test_one_member_at_scale_one_is_plain_do(epic: prego.BenchData, do_settings: dict) -> None:
    single = train_ensemble(epic, do_settings, seed=2, config=EnsembleConfig(size=1, threshold_scale=1.0))
    do = prego.build_do(epic, do_settings, member_seeds(2, 1)[0])
    np.testing.assert_array_equal(single.adjacency, do.adjacency)


def test_combining_graphs_of_another_taxonomy_is_refused(epic: prego.BenchData, do_settings: dict) -> None:
    graph = prego.build_do(epic, do_settings, 1)
    other = replace(graph, step_ids=tuple(s + 100 for s in graph.step_ids))
    present = present_steps(epic.step_ids, epic.train)
    with pytest.raises(InputError, match="different taxonomies"):
        ensemble_graph([graph, other], present, EnsembleConfig())


def test_slip_items_end_with_an_order_mistake_or_a_step_not_done_yet() -> None:
    order = [5, 6, 7, 8, 9]
    taxonomy = list(range(20))
    items = synthetic_slips([[5, 6, 6, 7, 8, 9]], taxonomy, per_video=200, seed=0, slip_rate=0.5)
    assert len(items) == 200
    early = 0
    for item in items:
        prefix, last = list(item[:-1]), item[-1]
        assert prefix == order[: len(prefix)] and last not in prefix
        early += last in order and order.index(last) > len(prefix)
    assert 80 < early < 160  # both kinds occur (slips can also land on a later step of the video)
    only_order = synthetic_slips([order], taxonomy, per_video=50, seed=1, slip_rate=0.0)
    assert all(item[-1] in order[len(item) :] for item in only_order)
    with pytest.raises(InputError, match="slip rate"):
        synthetic_slips([order], taxonomy, 1, 0, slip_rate=2.0)


def test_selection_reads_training_videos_only(epic: prego.BenchData) -> None:
    # Without test or recognised sequences the search runs the same: it cannot have used them.
    train_only = prego.BenchData(epic.name, epic.scenario, epic.step_ids, epic.step_names, epic.train, {})
    config = SelectionConfig(folds=3, epochs=(15,), scales=(1.0, 2.0), sizes=(1, 2), workers=1)
    settings = prego.load_method_settings("epic-tent-o")["do"]
    rows = cross_validate_ensemble(train_only, replace_epochs(settings, 30), config, progress=False)
    assert len(rows) == 2 * 2 * 2  # (15 epochs, SA early stopping) x sizes x scales
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    assert {r["early_stop"] for r in rows} == {"none", "sa-threshold:0.97"}
    assert all(0 <= r["clean"] <= 100 and r["score"] == (r["clean"] + r["noisy"]) / 2 for r in rows)
    with pytest.raises(InputError, match="--folds 99"):
        cross_validate_ensemble(train_only, settings, replace(config, folds=99), progress=False)
    with pytest.raises(InputError, match="SelectionConfig.sizes"):
        SelectionConfig(sizes=(0,))


def replace_epochs(settings: dict, epochs: int) -> dict:
    return {**settings, "epochs": epochs}


def test_benchmark_runs_the_ensemble_from_the_settings_file(data_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "epic.toml"
    config.write_text('[do-ensemble]\nepochs = 15\nearly_stop = "none"\nthreshold_scale = 2.0\nensemble_size = 2\n')
    bench = prego.BenchConfig(
        data_dir,
        datasets=("epic-tent-o",),
        methods=("do-ensemble",),
        seeds=(1, 2),
        workers=1,
        config_files={"epic-tent-o": config},
        save_graphs=tmp_path / "graphs",
    )
    result = prego.run_benchmark(bench, progress=False)
    entry = result["results"]["epic-tent-o"]["pred"]["do-ensemble"]
    assert [run["seed"] for run in entry["per_seed"]] == [1, 2] and entry["published"] is None
    saved = load_graph(tmp_path / "graphs" / "epic-tent-o-do-ensemble-seed2.json")
    assert saved.info["method"] == "do-ensemble" and saved.info["member_seeds"] == [4, 5]


def test_shipped_settings_define_the_ensemble_for_both_datasets() -> None:
    for dataset in prego.DATASETS:
        settings = prego.load_method_settings(dataset)["do-ensemble"]
        assert settings["ensemble_size"] >= 1 and settings["threshold_scale"] > 0


def test_select_command_prints_the_best_ensemble(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["select", "--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "do-ensemble", "--folds", "2"]
    argv += ["--epochs", "10", "--scales", "1", "--sizes", "2", "--no-early-stop", "--workers", "1", "--quiet"]
    assert bench_cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "best: epochs = 10, early_stop = none, size = 2, threshold_scale = 1" in out
    err = cli_error(bench_cli.main, [*argv[:-4], "--sizes", "two"], capsys)
    assert err.startswith("error: --sizes 'two': expected comma-separated numbers")
