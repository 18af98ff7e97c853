"""Training a task graph with Direct Optimization: configuration, determinism, recovery, early stopping."""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from graphs.annotations import load_annotations
from graphs.checker import precondition_violations
from graphs.common.errors import InputError
from graphs.common.settings_files import as_written
from graphs.mistake_metrics import mistake_scores
from graphs.task_graph import END, START, TaskGraph, load_graph, save_graph
from tgml.learners.do.config import DOConfig
from tgml.learners.do.early_stop import EarlyStopping
from tgml.learners.do.train import train_do
from tgml.learners.registry import learner
from tgml.learners.result import learn_from_annotations
from tgml.sequence_accuracy import sequence_accuracy

A, B, C, D, X = 10, 11, 12, 13, 14
IDS = [A, B, C, D, X]
NAMES = ["add water", "boil", "pour", "grab cup", "never done"]
# A before B before C; D anywhere; X never happens.
CHAIN = [p for p in itertools.permutations([A, B, C, D]) if p.index(A) < p.index(B) < p.index(C)]


@pytest.mark.parametrize(
    ("field", "value"),
    [("beta", -1.0), ("epochs", 0), ("lr", 0.0), ("seed", -3), ("early_stop", "sa-threshold:2"),
     ("early_stop", "sometimes"), ("beta_schedule", "cosine"), ("augment", "yes"), ("epochs", 2.5),
     ("edge_threshold", "1/(n+1)")],
)
def test_config_rejects_bad_values_naming_field_and_value(field: str, value: object) -> None:
    with pytest.raises(InputError, match=re.escape(f"DOConfig.{field} = {as_written(value)}")):
        DOConfig(**{field: value})  # type: ignore[arg-type]  # ill-typed on purpose: the config's own checks are tested


def test_edge_threshold_rules_cut_where_documented() -> None:
    # 12 key-steps: the method's 1/n, the authors' code 1/(n+2) (the S..E block), our 1/N (the whole n+4 matrix).
    cuts = {rule: DOConfig(edge_threshold=rule).threshold_steps(12) for rule in ("1/n", "1/(n+2)", "1/N")}
    assert cuts == {"1/n": 12, "1/(n+2)": 14, "1/N": 16}


def test_config_file_sets_fields_and_flags_override(tmp_path: Path) -> None:
    path = tmp_path / "do.toml"
    path.write_text('epochs = 77\nearly_stop = "sa-plateau"\naugment = true\n')
    config = learner("do").config_file(path, epochs=12, seed=None)
    assert (config.epochs, config.early_stop, config.augment, config.seed) == (12, "sa-plateau", True, 42)
    path.write_text("epoch = 3\n")
    with pytest.raises(InputError, match="setting 'epoch': not one of"):
        learner("do").config_file(path)


def test_repo_configs_are_valid() -> None:
    configs = sorted((Path(__file__).resolve().parents[3] / "configs").glob("do-*.toml"))
    assert configs, "configs/do-*.toml missing"
    for path in configs:
        learner("do").config_file(path)


def test_learns_a_chain_and_removes_unseen_steps() -> None:
    result = train_do(CHAIN, IDS, NAMES, DOConfig(epochs=150), scenario="tea")
    graph = result.graph
    assert set(graph.edges()) == {(A, START), (B, A), (C, B), (D, START), (END, C), (END, D)}
    assert graph.removed_steps == (X,)
    assert graph.weights is not None and graph.weights.shape == (7, 7)
    assert result.sequence_accuracy == pytest.approx(1.0)
    assert graph.info["config"]["epochs"] == 150 and graph.info["removed_steps"] == [X]


def test_same_seed_gives_identical_graph_and_other_seed_other_weights(tmp_path: Path) -> None:
    config = DOConfig(epochs=40, augment=True, seed=3)
    seqs = [[A, B, A, C, D], [A, D, B, C, B], [D, A, B, C]]
    one = train_do(seqs, IDS, NAMES, config)
    two = train_do(seqs, IDS, NAMES, config)
    other = train_do(seqs, IDS, NAMES, dataclasses.replace(config, seed=4))
    assert one.graph.weights is not None and two.graph.weights is not None and other.graph.weights is not None
    assert np.array_equal(one.graph.weights, two.graph.weights)
    assert np.array_equal(one.graph.adjacency, two.graph.adjacency)
    assert not np.array_equal(one.graph.weights, other.graph.weights)
    save_graph(one.graph, tmp_path / "g.json")
    again = load_graph(tmp_path / "g.json")
    assert again.weights is not None
    assert again.edges() == one.graph.edges() and np.allclose(again.weights, one.graph.weights)


def test_early_stopping_rules_stop_before_the_epoch_limit() -> None:
    plateau = train_do(CHAIN, IDS, NAMES, DOConfig(epochs=500, early_stop="sa-plateau"))
    assert plateau.epochs_run < 500
    assert plateau.graph.info["epochs_run"] == plateau.epochs_run
    threshold = train_do(CHAIN, IDS, NAMES, DOConfig(epochs=500, early_stop="sa-threshold:0.5"))
    assert threshold.epochs_run < plateau.epochs_run


def test_early_stopping_decisions() -> None:
    rule = EarlyStopping("sa-plateau", plateau_min=0.95, patience=3)
    history = [0.5, 0.96, 0.97, 0.97, 0.96, 0.97]
    assert [rule.update(e, sa) for e, sa in enumerate(history, 1)] == [False] * 5 + [True]
    low = EarlyStopping("sa-plateau", plateau_min=0.95, patience=2)
    assert not any(low.update(e, 0.9) for e in range(1, 10))  # never above 0.95: never stops
    threshold = EarlyStopping("sa-threshold:0.8")
    assert [threshold.update(e, sa) for e, sa in enumerate([0.7, 0.8, 0.81], 1)] == [False, False, True]


def test_sequence_accuracy_scores_positions_as_specified() -> None:
    # Nodes S=0, K1=1, K2=2, E=3. K2 requires K1 and S; E requires K2.
    adj = np.zeros((4, 4), bool)
    adj[1, 0] = adj[2, 0] = adj[2, 1] = adj[3, 2] = True
    # Sequence <S, K2, K1, E>: S -> 1; K2 sees {S}: 1/2; K1 sees {S, K2}: 1; E sees all: 1.
    observed = np.array([[0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 1, 0], [1, 1, 1, 0]])
    targets = np.array([0, 2, 1, 3])
    assert sequence_accuracy(adj, observed, targets, np.zeros(4, int)) == pytest.approx(3.5 / 4)
    # A step with no pre-condition after something was seen scores 0.
    adj[1, 0] = False
    assert sequence_accuracy(adj, observed, targets, np.zeros(4, int)) == pytest.approx(2.5 / 4)


def test_linear_beta_schedule_hook() -> None:
    config = DOConfig(beta=0.5, epochs=11, beta_schedule="linear:0.0")
    assert [config.beta_at(e) for e in (1, 6, 11)] == pytest.approx([0.0, 0.25, 0.5])
    assert DOConfig(beta=0.005).beta_at(7) == 0.005


def test_unknown_step_and_empty_input_are_input_errors() -> None:
    with pytest.raises(InputError, match="step id 99 is not in the taxonomy"):
        train_do([[A, 99]], IDS, NAMES, DOConfig(epochs=1))
    with pytest.raises(InputError, match="no usable sequence"):
        train_do([], IDS, NAMES, DOConfig(epochs=1))
    with pytest.raises(InputError, match="no usable sequence"):
        train_do([[], []], IDS, NAMES, DOConfig(epochs=1))


def test_trains_on_real_epic_tent_with_augmentation(data_dir: Path) -> None:
    result = learn_from_annotations(train_do, data_dir / "epic-tent-o" / "train.json", "epic-tent",
                                    DOConfig(epochs=60, augment=True, relaxed=True))
    graph = result.graph
    assert graph.n_steps == 12 and graph.scenario == "epic-tent"
    assert graph.removed_steps == ()
    # Every step's chain of pre-conditions leads back to START.
    nx_graph = graph.to_networkx()
    assert all(START in nx.descendants(nx_graph, s) for s in graph.step_ids)
    assert 0.5 < result.sequence_accuracy <= 1.0


def test_assembly_unseen_steps_are_removed(data_dir: Path) -> None:
    result = learn_from_annotations(train_do, data_dir / "assembly101-o" / "train.json", "assembly101",
                                    DOConfig(epochs=5, augment=True))
    expected = {5, 6, 7, 10, 11, 16, 17, 22, 23, 24, 27, 30, 34, 35, 36, 41, 46, 47, 50, 51, 52, 53, 66, 70, 71,
                78, 85}
    assert set(result.graph.removed_steps) == expected


def test_epic_tent_seed_42_graph_reproduces_the_published_gt_mode_figures(
    epic_graph: TaskGraph, data_dir: Path
) -> None:
    # The published DO figures on EPIC-Tent-O, GT mode, seed 42: Avg F1 58.3 (correct 93.5, mistake 23.1).
    test = load_annotations(data_dir / "epic-tent-o" / "test.json", check_times=False)
    scores = mistake_scores(precondition_violations(epic_graph, v.steps) for v in test.videos.values())
    assert scores.avg_f1 == pytest.approx(58.3, abs=0.05)
    assert scores.correct.f1 == pytest.approx(93.5, abs=0.05) and scores.mistake.f1 == pytest.approx(23.1, abs=0.05)
