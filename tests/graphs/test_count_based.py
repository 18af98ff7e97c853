"""Count-Based baseline: the transition-count graph, and its published PREGO figures on the real data."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from graphs import START, InputError, precondition_violations
from graphs.annotations import load_annotations
from graphs.count_based import (
    CountBasedConfig,
    count_based_graph,
    precondition_scores,
    transition_counts,
    transition_probabilities,
)
from graphs.mistake_metrics import mistake_scores


def test_counts_include_start_and_end_and_keep_repeats() -> None:
    counts = transition_counts([[7, 8, 8], [7, 9]], step_ids=[7, 8, 9])
    # layout START, 7, 8, 9, END
    assert counts[0, 1] == 2  # both start with 7
    assert counts[2, 2] == 1  # 8 -> 8 repeat kept, as in the published baseline
    assert counts[2, 4] == 1 and counts[3, 4] == 1
    assert transition_counts([[7, 8, 8]], [7, 8, 9], first_occurrence=True)[2, 2] == 0


def test_scores_are_normalised_probabilities() -> None:
    counts = transition_counts([[1, 2], [2, 1], [1, 2]], step_ids=[1, 2])
    prob = transition_probabilities(counts)
    np.testing.assert_allclose(prob.sum(axis=1)[:-1], 1.0)  # END has no successor
    score = precondition_scores(prob)
    np.testing.assert_allclose(score.sum(axis=0)[1:], 1.0)  # START has no predecessor


def test_graph_is_a_dag_that_follows_the_dominant_order() -> None:
    graph = count_based_graph([[1, 2, 3]] * 3 + [[1, 3, 2]], [1, 2, 3, 4], ["a", "b", "c", "never"])
    assert nx.is_directed_acyclic_graph(graph.to_networkx())
    assert graph.preconditions(1) == {START}
    assert graph.preconditions(2) == {1}
    assert graph.removed_steps == (4,)  # never seen in training: a mistake at test time
    assert precondition_violations(graph, [1, 2, 3, 4]).tolist() == [False, False, False, True]
    assert precondition_violations(graph, [2]).tolist() == [True]


def test_unknown_training_step_and_bad_setting_are_reported() -> None:
    with pytest.raises(InputError, match="step id 5"):
        transition_counts([[1, 5]], [1, 2])
    with pytest.raises(InputError, match="first_occurrence"):
        CountBasedConfig(first_occurrence="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("dataset", "scenario", "gt", "pred"),
    [("epic-tent-o", "epic-tent", 57.7, 44.8), ("assembly101-o", "assembly101", 26.5, 23.0)],
)
def test_published_figures_are_reproduced(data_dir: Path, dataset: str, scenario: str, gt: float, pred: float) -> None:
    train = load_annotations(data_dir / dataset / "train.json", check_times=False)
    test = load_annotations(data_dir / dataset / "test.json", check_times=False)
    ids, names = train.steps_of(scenario)
    graph = count_based_graph([v.steps for v in train.scenario_videos(scenario)], ids, names)
    gt_score = mistake_scores(precondition_violations(graph, v.steps) for v in test.scenario_videos(scenario))
    recognised = json.loads((data_dir / "prego-miniroad" / f"{dataset}_segments.json").read_text())
    pred_score = mistake_scores(precondition_violations(graph, r["pred"]) for r in recognised.values())
    assert gt_score.avg_f1 is not None and pred_score.avg_f1 is not None  # None: nothing to count
    assert abs(gt_score.avg_f1 - gt) <= 2.0
    assert abs(pred_score.avg_f1 - pred) <= 2.0
