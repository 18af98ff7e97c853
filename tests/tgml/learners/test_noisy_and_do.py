"""The noisy-and-do combination: each learner's evidence on the scale of its own cut, one rule, one threshold."""

from __future__ import annotations

import numpy as np
import pytest

from graphs.checker import PreconditionChecker
from graphs.common.errors import InputError
from graphs.postprocess import present_steps
from tests.tgml.learners.test_noisy_and import (
    BREAD,
    BUTTER,
    CHEESE,
    CLOSE,
    SANDWICH_IDS,
    SANDWICH_NAMES,
    SANDWICH_ORDERS,
)
from tgml.learners.do.config import DOConfig
from tgml.learners.do.ensemble import EnsembleConfig, train_ensemble
from tgml.learners.noisy_and.config import NoisyAndConfig
from tgml.learners.noisy_and.train import train_noisy_and
from tgml.learners.noisy_and_do.combination import (
    CombinationConfig,
    combine_evidence,
    combined_adjacency,
    combined_graph,
    evidence_ratios,
)

# Three key-steps a, b, c (layout START, a, b, c, END). noisy-AND is sure that b needs a; DO that c needs a.
A, B, C = 1, 2, 3


def hand_made_ratios() -> np.ndarray:
    theta = np.zeros((5, 5))
    theta[B, A] = 0.99  # r_AND = 0.99 / 0.9 = 1.1
    theta[C, A] = 0.45  # r_AND = 0.5: half the noisy-AND cut
    do_mean = np.zeros((5, 5))
    do_mean[C, A] = 0.8  # r_DO = 0.8 * 3 = 2.4
    do_mean[B, A] = 0.2  # r_DO = 0.6
    return evidence_ratios(theta, 0.9, do_mean, threshold_steps=3)


def test_each_learner_is_measured_against_its_own_cut() -> None:
    ratios = hand_made_ratios()
    assert ratios[0, B, A] == pytest.approx(1.1) and ratios[0, C, A] == pytest.approx(0.5)
    assert ratios[1, C, A] == pytest.approx(2.4) and ratios[1, B, A] == pytest.approx(0.6)


def test_rules_are_the_geometric_mean_the_minimum_and_the_maximum() -> None:
    ratios = hand_made_ratios()
    assert combine_evidence(ratios, "geometric")[B, A] == pytest.approx(np.sqrt(1.1 * 0.6))
    assert combine_evidence(ratios, "geometric")[C, A] == pytest.approx(np.sqrt(0.5 * 2.4))
    assert combine_evidence(ratios, "both")[C, A] == pytest.approx(0.5)
    assert combine_evidence(ratios, "either")[B, A] == pytest.approx(1.1)


@pytest.mark.parametrize(("rule", "threshold", "b_needs_a", "c_needs_a"), [
    ("either", 1.0, True, True),  # the union of the two graphs
    ("both", 1.0, False, False),  # they agree on no edge
    ("both", 0.55, True, False),  # min(1.1, 0.6) = 0.6 passes, min(0.5, 2.4) = 0.5 does not
    ("geometric", 1.0, False, True),  # sqrt(0.66) = 0.81 < 1 <= sqrt(1.2) = 1.10: strong DO evidence outweighs
    ("either", 2.0, False, True),  # only DO's 2.4 passes a doubled threshold
])
def test_an_edge_is_kept_when_the_combined_ratio_reaches_the_threshold(
    rule: str, threshold: float, b_needs_a: bool, c_needs_a: bool
) -> None:
    adjacency, _ = combined_adjacency(hand_made_ratios(), np.ones(3, dtype=bool), CombinationConfig(rule, threshold))
    assert bool(adjacency[B, A]) is b_needs_a and bool(adjacency[C, A]) is c_needs_a


@pytest.mark.parametrize(("field", "value"), [("rule", "mean"), ("threshold", 0.0), ("threshold", float("nan"))])
def test_bad_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(InputError, match=f"CombinationConfig.{field}"):
        CombinationConfig(**{field: value})  # type: ignore[arg-type]


def test_sandwich_union_keeps_both_preconditions_of_closing() -> None:
    rng = np.random.default_rng(3)
    executions = [SANDWICH_ORDERS[k] for k in rng.integers(len(SANDWICH_ORDERS), size=30)]
    noisy_and = train_noisy_and(executions, SANDWICH_IDS, SANDWICH_NAMES, NoisyAndConfig()).graph
    do_ensemble = train_ensemble(executions, SANDWICH_IDS, SANDWICH_NAMES, DOConfig(epochs=100, augment=False),
                                 EnsembleConfig(size=3), seed=0)
    present = present_steps(SANDWICH_IDS, executions)
    graph = combined_graph(noisy_and, do_ensemble, present, CombinationConfig("either", 1.0))
    assert graph.preconditions(CLOSE) >= {BUTTER, CHEESE}
    assert graph.info["method"] == "noisy-and-do" and graph.row_softmax_weights is None

    checker = PreconditionChecker(graph)
    for step in (BREAD, BUTTER):
        assert not checker.observe(step).is_mistake
    verdict = checker.observe(CLOSE)  # the cheese is still missing
    assert verdict.is_mistake and CHEESE in verdict.missing
