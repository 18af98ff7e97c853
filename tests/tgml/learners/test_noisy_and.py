"""The noisy-AND learner: its likelihood, the steps with several pre-conditions it must keep, its settings."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from graphs import procedure_queries
from graphs.checker import PreconditionChecker, precondition_violations
from graphs.common.errors import InputError
from graphs.common.settings_files import as_written
from graphs.procedure_queries import log_not_required
from graphs.task_graph import END, START, Node
from streaming.demo.procedure import PRECONDITIONS, SCENARIO, STEP_IDS
from tgml.bench import prego
from tgml.learners.do.train import build_training_set
from tgml.learners.noisy_and import train as noisy_and_train
from tgml.learners.noisy_and.config import NoisyAndConfig
from tgml.learners.noisy_and.loss import (
    edge_probabilities,
    log_not_required_of_scores,
    log_readiness,
    step_log_likelihood,
)
from tgml.learners.noisy_and.train import order_rows, train_noisy_and
from tgml.learners.registry import learner, resolve_learner
from tgml.learners.result import learn_from_annotations

REPO = Path(__file__).resolve().parents[3]

# The sandwich: close_sandwich needs BOTH spread_butter and add_cheese; pour_juice fits anywhere.
BREAD, BUTTER, CHEESE, CLOSE, JUICE = 1, 2, 3, 4, 5
SANDWICH_IDS = [BREAD, BUTTER, CHEESE, CLOSE, JUICE]
SANDWICH_NAMES = ["take_bread", "spread_butter", "add_cheese", "close_sandwich", "pour_juice"]
SANDWICH_NEEDS = {BREAD: (), BUTTER: (BREAD,), CHEESE: (BREAD,), CLOSE: (BUTTER, CHEESE), JUICE: ()}


def valid_orders(needs: dict[int, tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Every order of the steps that respects the pre-conditions."""
    return [p for p in itertools.permutations(needs) if all(p.index(r) < p.index(s) for s in needs for r in needs[s])]


SANDWICH_ORDERS = valid_orders(SANDWICH_NEEDS)


# -- the likelihood -----------------------------------------------------------------------------------------------
def test_readiness_is_the_product_over_steps_not_done() -> None:
    scores = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    theta = edge_probabilities(scores).numpy()
    unseen = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    got = log_readiness(log_not_required_of_scores(scores), unseen).exp().numpy()
    for t, h in itertools.product(range(2), range(4)):
        expected = np.prod([1 - theta[h, j] for j in range(4) if unseen[t, j] == 1])
        assert got[t, h] == pytest.approx(expected, rel=1e-5)
    assert np.all(np.diag(theta) == 0)  # a step is never its own pre-condition


def test_training_and_a_learned_graph_compute_the_same_log_not_required() -> None:
    # The loss takes log(1 - θ) from the free scores, a learned graph's queries from its edge probabilities.
    scores = torch.randn(5, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 4
    from_scores = log_not_required_of_scores(scores).numpy()
    from_theta = log_not_required(edge_probabilities(scores).numpy())
    np.testing.assert_allclose(from_scores, from_theta, rtol=1e-9, atol=1e-12)


def test_binary_graph_gives_the_exact_uniform_among_ready_probability() -> None:
    # a -> b (b needs a); c free. After nothing is done, a and c are ready: each has probability 1/2; b has ~0.
    big = 30.0
    scores = torch.full((3, 3), -big)
    scores[1, 0] = big
    unseen = torch.ones(3, 3)
    candidates = torch.ones(3, 3)
    targets = torch.tensor([0, 2, 1])
    log_ready = log_readiness(log_not_required_of_scores(scores), unseen)
    log_p = step_log_likelihood(log_ready, targets, candidates, noise=0.0)
    assert log_p[:2].exp().tolist() == pytest.approx([0.5, 0.5], abs=1e-6)
    assert log_p[2].item() < -25


def test_noise_mixes_in_a_uniform_choice_among_the_steps_still_to_do() -> None:
    big = 30.0
    scores = torch.full((3, 3), -big)
    scores[1, 0] = big  # b needs a, yet b is done first: impossible without noise
    unseen, candidates = torch.ones(1, 3), torch.ones(1, 3)
    log_ready = log_readiness(log_not_required_of_scores(scores), unseen)
    noisy = step_log_likelihood(log_ready, torch.tensor([1]), candidates, noise=0.1)
    assert noisy.exp().item() == pytest.approx(0.1 / 3, rel=1e-4)


def test_last_step_of_an_execution_has_probability_one_and_finite_gradients() -> None:
    scores = torch.zeros(3, 3, requires_grad=True)
    unseen = torch.tensor([[0.0, 0.0, 1.0]])
    candidates = torch.tensor([[0.0, 0.0, 1.0]])  # one step left to do: it is done for sure
    log_ready = log_readiness(log_not_required_of_scores(scores), unseen)
    log_p = step_log_likelihood(log_ready, torch.tensor([2]), candidates, 0.01)
    log_p.sum().backward()
    assert log_p.item() == pytest.approx(0.0, abs=1e-6)
    assert scores.grad is not None and torch.isfinite(scores.grad).all()


def test_rows_cover_every_position_and_only_the_steps_an_execution_contains() -> None:
    first = build_training_set([[0, 2, 0, 1], [2, 1]], [0, 1, 2, 3], augment=False).sa_rows
    rows = order_rows(first, n_steps=4)  # step 3 never occurs; the repeat of 0 is dropped
    assert rows.n_executions == 2
    assert rows.present.tolist() == [True, True, True, False]
    assert rows.weights.sum() == 5  # 3 first occurrences + 2
    for unseen, target, cand in zip(rows.unseen, rows.targets, rows.candidates, strict=True):
        assert cand[target] == 1 and unseen[target] == 1
        assert cand[3] == 0  # a step the execution skips never competes
        assert np.all(cand <= unseen)


# -- steps with several pre-conditions ------------------------------------------------------------------------------
def test_sandwich_keeps_both_preconditions_and_closing_before_the_cheese_is_flagged() -> None:
    rng = np.random.default_rng(3)
    executions = [SANDWICH_ORDERS[k] for k in rng.integers(len(SANDWICH_ORDERS), size=30)]
    graph = train_noisy_and(executions, SANDWICH_IDS, SANDWICH_NAMES, NoisyAndConfig()).graph
    assert graph.preconditions(CLOSE) == {BUTTER, CHEESE}
    assert graph.preconditions(BUTTER) == graph.preconditions(CHEESE) == {BREAD}
    assert graph.preconditions(JUICE) == {START} and graph.preconditions(END) == {CLOSE, JUICE}

    checker = PreconditionChecker(graph)
    for step in (BREAD, JUICE, BUTTER):
        assert not checker.observe(step).is_mistake
    verdict = checker.observe(CLOSE)  # the cheese is still missing
    assert verdict.is_mistake and verdict.missing == (CHEESE,)
    assert precondition_violations(graph, (BREAD, CHEESE, BUTTER, CLOSE)).tolist() == [False] * 4


def test_demo_pour_water_keeps_both_of_its_preconditions() -> None:
    result = learn_from_annotations(train_noisy_and, REPO / "streaming" / "demo" / "demo_annotations.json", SCENARIO,
                                    NoisyAndConfig())
    graph = result.graph
    for step in STEP_IDS:
        expected: set[Node] = set(PRECONDITIONS[step]) or {START}
        assert graph.preconditions(step) == expected, step
    assert graph.info["method"] == "noisy-and" and result.sequence_accuracy == 1.0


def test_an_occasional_swapped_step_does_not_remove_a_precondition_a_habit_of_it_does() -> None:
    executions = [SANDWICH_ORDERS[k % len(SANDWICH_ORDERS)] for k in range(40)]
    executions[7] = (BREAD, BUTTER, CLOSE, CHEESE, JUICE)  # one execution of 40 closes before the cheese
    graph = train_noisy_and(executions, SANDWICH_IDS, SANDWICH_NAMES, NoisyAndConfig()).graph
    assert graph.preconditions(CLOSE) == {BUTTER, CHEESE}
    for k in range(0, 40, 5):  # 8 of 40: the cheese is not a pre-condition of closing
        executions[k] = (BREAD, BUTTER, CLOSE, CHEESE, JUICE)
    graph = train_noisy_and(executions, SANDWICH_IDS, SANDWICH_NAMES, NoisyAndConfig()).graph
    assert graph.preconditions(CLOSE) == {BUTTER}


def test_a_step_done_without_another_does_not_require_it() -> None:
    # Optional milk: coffee is always after milk when milk is done, but half the executions skip milk.
    coffee, milk, cup = 1, 2, 3
    executions = [(cup, milk, coffee), (cup, coffee), (milk, cup, coffee), (cup, coffee)] * 5
    graph = train_noisy_and(executions, [coffee, milk, cup], ["coffee", "milk", "cup"], NoisyAndConfig()).graph
    assert graph.preconditions(coffee) == {cup}


def test_unseen_steps_are_removed_and_weights_are_edge_probabilities() -> None:
    graph = train_noisy_and([(1, 2), (1, 2)], [1, 2, 9], ["a", "b", "never"], NoisyAndConfig(epochs=50)).graph
    assert graph.info["removed_steps"] == [9] and graph.preconditions(9) == frozenset()
    assert graph.weights is not None and graph.weights.min() >= 0 and graph.weights.max() <= 1
    assert graph.info["weights"].startswith("edge probabilities")
    assert graph.weights[graph.index(2), graph.index(1)] >= 0.9


def test_a_long_procedure_keeps_the_preconditions_of_its_early_steps() -> None:
    # 60 steps in a chain, 10 executions, 4 of them with two neighbours swapped. Started at θ = 0.5, an early step's
    # readiness was 2^-59: the noise term swamped it, and the first half of the chain lost its pre-conditions.
    n = 60
    rng = np.random.default_rng(0)
    executions = []
    for k in range(10):
        order = list(range(1, n + 1))
        if k < 4:
            i = int(rng.integers(n - 1))
            order[i], order[i + 1] = order[i + 1], order[i]
        executions.append(tuple(order))
    graph = train_noisy_and(executions, list(range(1, n + 1)), [f"s{i}" for i in range(1, n + 1)],
                            NoisyAndConfig()).graph
    without = [step for step in range(1, n + 1) if not graph.preconditions(step) - {START}]
    assert without == [1]


def test_assembly101_o_steps_keep_preconditions_with_the_default_settings(data_dir: Path) -> None:
    # Its 86 key-steps started every step's readiness at 2^-85: the default settings learned no pre-condition at all
    # (loss 39.6) while the printed sequence accuracy read 0.894.
    result = learn_from_annotations(train_noisy_and, data_dir / "assembly101-o" / "train.json", "assembly101",
                                    NoisyAndConfig())
    graph = result.graph
    with_one = [step for step in graph.step_ids if graph.preconditions(step) - {START}]
    assert len(with_one) >= 10 and result.final_loss < 10


def test_same_seed_same_graph() -> None:
    a = train_noisy_and(SANDWICH_ORDERS, SANDWICH_IDS, SANDWICH_NAMES, NoisyAndConfig(epochs=40)).graph
    b = train_noisy_and(SANDWICH_ORDERS, SANDWICH_IDS, SANDWICH_NAMES, NoisyAndConfig(epochs=40)).graph
    assert a.weights is not None and b.weights is not None
    assert np.array_equal(a.weights, b.weights) and a.edges() == b.edges()


def test_refuses_sequences_it_cannot_learn_from() -> None:
    with pytest.raises(InputError, match="step id 7 is not in the taxonomy"):
        train_noisy_and([(1, 7)], [1, 2], ["a", "b"], NoisyAndConfig())
    with pytest.raises(InputError, match="no usable sequence"):
        train_noisy_and([(), ()], [1, 2], ["a", "b"], NoisyAndConfig())
    with pytest.raises(InputError, match="2 step ids and 1 step names"):
        train_noisy_and([(1, 2)], [1, 2], ["a"], NoisyAndConfig())


# -- settings ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value"),
    [("edge_cost", -1.0), ("noise", 1.0), ("cut", 0.0), ("cut", 1.0), ("epochs", 0), ("lr", float("nan")),
     ("seed", -1), ("relaxed", "yes"), ("epochs", 2.5), ("noise", True)],
)
def test_config_rejects_bad_values_naming_field_and_value(field: str, value: object) -> None:
    with pytest.raises(InputError, match=re.escape(f"NoisyAndConfig.{field} = {as_written(value)}")):
        NoisyAndConfig(**{field: value})  # type: ignore[arg-type]  # ill-typed on purpose: the config's checks are tested


def test_config_file_and_settings_table(tmp_path: Path) -> None:
    path = tmp_path / "na.toml"
    path.write_text("edge_cost = 1.0\ncut = 0.8\n")
    config = learner("noisy-and").config_file(path, seed=7, noise=None)
    assert (config.edge_cost, config.cut, config.seed, config.noise) == (1.0, 0.8, 7, NoisyAndConfig().noise)
    path.write_text("beta = 0.1\n")
    with pytest.raises(InputError, match=re.escape(f"{path}: setting 'beta': not one of")):
        learner("noisy-and").config_file(path)
    assert learner("noisy-and").config({"cut": 0.5}, seed=3, epochs=9) == NoisyAndConfig(cut=0.5, seed=3, epochs=9)
    with pytest.raises(InputError, match="setting 'seed': not one of"):
        learner("noisy-and").config({"seed": 1}, seed=3)


@pytest.mark.parametrize(
    ("method", "given", "expected"),
    [(None, set(), "noisy-and"), (None, {"epochs", "seed", "relaxed"}, "noisy-and"), (None, {"cut"}, "noisy-and"),
     (None, {"beta"}, "do"), (None, {"early_stop", "epochs"}, "do"), ("do", {"epochs"}, "do"),
     ("noisy-and", {"noise"}, "noisy-and")],
)
def test_resolve_method(method: str | None, given: set[str], expected: str) -> None:
    assert resolve_learner(method, given) == expected


@pytest.mark.parametrize(
    ("method", "given", "fragment"),
    [(None, {"beta", "cut"}, "belong to different learners"), ("do", {"edge_cost"}, "does not apply to --method do"),
     ("noisy-and", {"augment"}, "belongs to do")],
)
def test_resolve_method_refuses_settings_of_the_other_learner(method: str | None, given: set[str],
                                                              fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        resolve_learner(method, given)


# -- the benchmark builder ----------------------------------------------------------------------------------------
def test_benchmark_builder_learns_from_the_training_split_only(epic: prego.BenchData) -> None:
    settings = {"edge_cost": 0.5, "noise": 0.1, "cut": 0.9, "relaxed": True}
    graph = prego.build_graph("noisy-and", epic, settings, seed=1, epochs=60)
    assert graph.step_ids == epic.step_ids and graph.scenario == epic.scenario
    assert graph.info["config"]["epochs"] == 60 and graph.info["train_sequences"] == len(epic.train)
    scores = prego.evaluate_graph(graph, prego.mode_sequences(epic, "gt"))
    assert scores.avg_f1 is not None and 0 < scores.avg_f1 <= 100
    with pytest.raises(InputError, match="setting 'ensemble_size': not one of"):
        prego.build_graph("noisy-and", epic, {"ensemble_size": 5}, seed=1)



def test_repo_noisy_and_configs_are_valid() -> None:
    configs = sorted((REPO / "configs").glob("noisy-and-*.toml"))
    assert [p.name for p in configs] == ["noisy-and-assembly101-o.toml", "noisy-and-epic-tent-o.toml"]
    for path in configs:
        assert learner("noisy-and").config_file(path).relaxed is True  # PREGO graphs use the relaxed rule, like DO's


def test_a_step_most_executions_skip_is_stored_as_optional() -> None:
    executions = [(BREAD, BUTTER, CHEESE, CLOSE)] * 9 + [(BREAD, CHEESE, BUTTER, CLOSE, JUICE)]  # juice in 1 of 10
    graph = train_noisy_and(executions, SANDWICH_IDS, SANDWICH_NAMES, NoisyAndConfig()).graph
    assert graph.optional_steps == (JUICE,)
    assert graph.optional_scores is not None and graph.optional_scores.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0]


def test_optional_scores_are_the_same_when_the_likelihoods_come_in_small_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The leave-one-out executions are scored in batches of bounded memory; a batch holding only the empty variant of
    # a one-step run crashed the noisy-AND likelihood (IndexError).
    executions = [*SANDWICH_ORDERS * 4, (BREAD,)]
    calls: list[int] = []
    original = noisy_and_train.execution_log_likelihoods

    def counted(*args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(noisy_and_train, "execution_log_likelihoods", counted)
    whole = train_noisy_and(executions, SANDWICH_IDS, SANDWICH_NAMES, NoisyAndConfig(epochs=40)).graph
    assert len(calls) == 1  # a training set this small: one call, as before the batches
    monkeypatch.setattr(procedure_queries, "LIKELIHOOD_BATCH_CELLS", 1)  # one execution a call
    batched = train_noisy_and(executions, SANDWICH_IDS, SANDWICH_NAMES, NoisyAndConfig(epochs=40)).graph
    assert len(calls) > 2
    assert batched.optional_scores is not None and whole.optional_scores is not None
    np.testing.assert_allclose(batched.optional_scores, whole.optional_scores)
