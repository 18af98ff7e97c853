"""The probabilistic checker on recognised key-step sequences (PREGO PRED mode): evidence (S1), its calibration on
perturbed training sequences, and the perturbation that says which recognised step is real."""

from __future__ import annotations

import numpy as np
import pytest

from graphs.checker import precondition_violations
from graphs.checker_settings import CheckerSettings
from graphs.common.errors import InputError
from graphs.task_graph import TaskGraph
from tgml.bench.perturb import aligned_perturbation, perturb_sequence
from tgml.bench.prego.sequence_evidence import (
    calibrate_sequence_evidence,
    probabilistic_flags,
    seen_before,
    sequence_evidence,
)


def _chain() -> TaskGraph:
    """1 <- 2 <- 3 <- 4: each step needs the one before it (1 needs START)."""
    adj = np.zeros((6, 6), dtype=bool)
    for k in range(1, 5):
        adj[k, k - 1] = True  # step k needs the node before it
    adj[5, 4] = True
    return TaskGraph((1, 2, 3, 4), ("a", "b", "c", "d"), adj)


def test_seen_before_marks_steps_recognised_earlier() -> None:
    x = seen_before([3, 1, 3, 2], [1, 2, 3])
    assert x.tolist() == [[0, 0, 0], [0, 0, 1], [1, 0, 1], [1, 0, 1]]


def test_the_aligned_perturbation_is_the_ablations_and_says_where_each_step_came_from() -> None:
    classes = np.arange(10)
    sequence = (1, 2, 3, 4, 5, 6, 7, 8)
    for seed in range(20):
        noisy, source, real = aligned_perturbation(sequence, 0.4, classes, np.random.default_rng(seed))
        assert noisy == perturb_sequence(sequence, 0.4, classes, np.random.default_rng(seed))
        kept = [s for s, r in zip(noisy, real, strict=True) if r]
        assert kept == [sequence[j] for j in source[real]]  # a real step is the original one at its source
        assert list(source) == sorted(source)
    same, source, real = aligned_perturbation(sequence, 0.0, classes, np.random.default_rng(0))
    assert same == sequence and source.tolist() == list(range(8)) and real.all()


def test_calibration_says_an_unseen_step_was_probably_not_done() -> None:
    sequences = [tuple(range(12))] * 30
    model = calibrate_sequence_evidence(sequences, (0.1, 0.3), list(range(20)), seed=0)
    q_unseen, q_seen = model.done_probabilities(np.array([0.0, 1.0]).reshape(2, 1) * np.ones((2, 20)))[:, 5]
    assert q_unseen < 0.5 < q_seen
    # The share of recognised steps that are real: the perturbation replaces or inserts about 2/3 of its hits.
    assert model.false_rates[0] == pytest.approx(2 / 3 * 0.2, abs=0.04)
    assert len(set(model.real_intercepts)) == 1  # one detection probability for every step
    with pytest.raises(InputError, match="rates"):
        calibrate_sequence_evidence(sequences, (0.0,), list(range(20)), seed=0)


def test_each_recognised_step_carries_the_evidence_before_it() -> None:
    model = calibrate_sequence_evidence([tuple(range(6))] * 20, (0.2,), list(range(6)), seed=1)
    evidence = sequence_evidence([0, 2, 1], model)
    assert evidence[0].done[0] < 0.5 and evidence[1].done[0] > 0.5 and evidence[2].done[2] > 0.5
    assert evidence[2].done[1] < 0.5
    assert evidence[0].real < 1.0 and sequence_evidence([99], model)[0].real == 1.0  # 99: no curve, taken as real


def test_without_evidence_the_probabilistic_flags_are_the_binary_ones_merged() -> None:
    graph = _chain()
    sequence = [1, 3, 4, 3, 2]
    binary = precondition_violations(graph, sequence).tolist()
    merged = probabilistic_flags(graph, sequence, CheckerSettings("probabilistic"), None).tolist()
    assert binary == [False, True, False, True, False]
    assert merged == [False, True, False, False, False]  # 2 missing was alerted once: the repeat of 3 stays quiet
