"""Seed ensembles: averaged DO seeds as one ordinary task graph."""

from __future__ import annotations

from dataclasses import replace

import networkx as nx
import numpy as np
import pytest

from graphs import InputError, PreconditionChecker
from graphs.common.options import MAX_SEED, is_seed
from graphs.postprocess import present_steps
from graphs.task_graph import TaskGraph
from tgml.bench import prego
from tgml.learners.do.config import DOConfig
from tgml.learners.do.ensemble import EnsembleConfig, average_weights, ensemble_graph, member_seeds, train_ensemble
from tgml.learners.registry import learner


@pytest.fixture(scope="module")
def do_settings() -> dict:
    return {**prego.load_method_settings("epic-tent-o")["do"], "epochs": 20, "early_stop": "none"}


@pytest.fixture(scope="module")
def do_training(do_settings: dict) -> DOConfig:
    """The members' training settings: the benchmark's DO settings (each member sets its own seed)."""
    return learner("do").config(do_settings, seed=0)


def ensemble_of(data: prego.BenchData, training: DOConfig, config: EnsembleConfig, seed: int) -> TaskGraph:
    """The ensemble of a benchmark dataset's training split."""
    return train_ensemble(data.train, data.step_ids, data.step_names, training, config, seed, data.scenario)


def test_member_seeds_of_different_runs_never_overlap() -> None:
    assert member_seeds(1, 5) == (5, 6, 7, 8, 9)
    runs = [set(member_seeds(seed, 5)) for seed in range(1, 6)]
    assert sum(len(r) for r in runs) == len(set().union(*runs)) == 25
    # Every seed a user may give has members that are seeds too: --seed 858993459 and up ran past 2^32 - 1 and
    # were refused naming DOConfig.seed, a field the user never typed.
    assert all(is_seed(s) for seed in (858993459, MAX_SEED) for s in member_seeds(seed, 5))


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


def test_ensemble_is_the_post_processed_mean_of_its_members(
    epic: prego.BenchData, do_settings: dict, do_training: DOConfig
) -> None:
    config = EnsembleConfig(size=3, threshold_scale=2.0)
    graph = ensemble_of(epic, do_training, config, seed=1)
    members = [prego.build_graph("do", epic, do_settings, s) for s in member_seeds(1, 3)]
    member_weights = [m.weights for m in members if m.weights is not None]
    assert graph.weights is not None and len(member_weights) == len(members)
    np.testing.assert_allclose(graph.weights, np.mean(member_weights, axis=0))
    assert graph.info["member_seeds"] == [3, 4, 5] and graph.info["threshold"] == 1 / 24
    # An ordinary binary DAG: the live checker takes it unchanged.
    assert nx.is_directed_acyclic_graph(nx.DiGraph(graph.adjacency.astype(int)))
    # Every step of a training video is a node with pre-conditions (never "undefined" to the checker).
    assert not any(v.undefined for v in PreconditionChecker.replay(graph, epic.train[0]).history)


def test_one_member_at_scale_one_is_plain_do(
    epic: prego.BenchData, do_settings: dict, do_training: DOConfig
) -> None:
    single = ensemble_of(epic, do_training, EnsembleConfig(size=1, threshold_scale=1.0), seed=2)
    do = prego.build_graph("do", epic, do_settings, member_seeds(2, 1)[0])
    np.testing.assert_array_equal(single.adjacency, do.adjacency)


def test_combining_graphs_of_another_taxonomy_is_refused(epic: prego.BenchData, do_settings: dict) -> None:
    graph = prego.build_graph("do", epic, do_settings, 1)
    other = replace(graph, step_ids=tuple(s + 100 for s in graph.step_ids))
    present = present_steps(epic.step_ids, epic.train)
    with pytest.raises(InputError, match="different taxonomies"):
        ensemble_graph([graph, other], present, EnsembleConfig())
