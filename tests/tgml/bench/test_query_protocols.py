"""The offline protocols of the procedure questions and their metrics, on small worked examples."""

from __future__ import annotations

import numpy as np
import pytest

from graphs.procedure_queries import ProcedureQueries
from graphs.task_graph import TaskGraph
from tgml.bench.query_protocols import (
    DeletionTrial,
    always_before,
    average_precision,
    best_threshold,
    deletion_trials,
    f1_at,
    first_occurrences,
    future_hits,
    ground_truth_needs,
    missing_items,
    ready_step_hits,
    top_k_hit,
)


def chain() -> TaskGraph:
    """1 <- START, 2 <- 1, 3 <- 2, 4 <- 3, END <- 4 (no weights: the binary rules answer)."""
    adj = np.zeros((6, 6), dtype=bool)
    adj[[1, 2, 3, 4, 5], [0, 1, 2, 3, 4]] = True
    return TaskGraph((1, 2, 3, 4), ("a", "b", "c", "d"), adj)


def test_average_precision_lets_tied_items_enter_together() -> None:
    # Thresholds 0.9: 1 of 1 right (P 1, R 0.5); 0.8 (two tied): 2 of 3 (P 2/3, R 1); 0.1 adds no recall.
    # AP = 0.5 * 1 + 0.5 * 2/3 = 83.33 %.
    assert average_precision(np.array([0.9, 0.8, 0.8, 0.1]), np.array([1, 0, 1, 0])) == pytest.approx(250 / 3)
    assert average_precision(np.array([0.8, 0.9, 0.8, 0.1]), np.array([0, 1, 1, 0])) == pytest.approx(250 / 3)
    # One class only: no ranking can be told from another.
    assert average_precision(np.array([0.3, 0.1]), np.array([1, 1])) is None
    assert average_precision(np.array([0.3, 0.1]), np.array([0, 0])) is None


def test_threshold_is_the_f1_best_cut_moved_half_way_to_the_next_score() -> None:
    # Cuts at the positive scores: 0.9 gives P 1, R 0.5 (F1 0.67); 0.6 gives P 1, R 1 (F1 1). Next lower score
    # 0.5: threshold (0.6 + 0.5) / 2 = 0.55.
    scores, labels = np.array([0.9, 0.6, 0.5, 0.2]), np.array([1, 1, 0, 0], dtype=bool)
    assert best_threshold(scores, labels) == pytest.approx(0.55)
    assert f1_at(scores, labels, 0.55) == pytest.approx((100.0, 100.0, 100.0))
    assert f1_at(scores, labels, 0.3) == pytest.approx((200 / 3, 100.0, 80.0))
    # A zero score never says yes: nothing answered, so no precision; the positive item is missed (recall, F1 0).
    assert f1_at(np.array([0.0, 0.0]), np.array([1, 0], dtype=bool), 0.0) == (None, 0.0, 0.0)
    assert best_threshold(np.array([0.4]), np.array([True])) == pytest.approx(0.2)  # nothing lower: half of it


def test_top_k_hit_breaks_ties_at_random_in_expectation() -> None:
    scores = np.array([0.5, 0.5, 0.5, 0.1])
    assert top_k_hit(scores, 0, 1) == pytest.approx(1 / 3)
    assert top_k_hit(scores, 0, 3) == 1.0
    assert top_k_hit(scores, 3, 3) == 0.0 and top_k_hit(scores, 3, 4) == 1.0


def test_each_step_is_deleted_once_and_the_first_step_that_needed_it_is_found() -> None:
    needs = ground_truth_needs(chain())
    trials = deletion_trials((1, 2, 3, 4), needs)
    assert trials[1] == DeletionTrial(2, (1, 3, 4), 1)  # 3 needed 2, and is at position 1 once 2 is gone
    assert trials[3] == DeletionTrial(4, (1, 2, 3), None)  # nothing after 4 needed it
    assert first_occurrences([4, 1, 4, 2]) == (4, 1, 2)


def test_missing_items_ask_at_the_end_and_at_the_step_that_needed_the_deleted_one() -> None:
    queries = ProcedureQueries(chain())
    at_end, at_need = missing_items(queries, DeletionTrial(2, (1, 3, 4), 1))
    assert at_end.labels.tolist() == [True] and at_end.scores.tolist() == [1.0]  # only 2 is not done
    assert at_need is not None
    # Asked at 3 with history (1,): candidates 2 and 4; 3's unmet pre-condition is 2.
    assert at_need.labels.tolist() == [True, False] and at_need.scores.tolist() == [1.0, 0.0]


def test_future_hits_rank_the_next_step_among_those_not_done() -> None:
    # Binary rule on the chain: after 1 the only successor left is 2, so top-1 is right at every step.
    assert future_hits(ProcedureQueries(chain()), (1, 2, 3, 4)).tolist() == [[1.0, 1.0]] * 3
    # The perfect-graph reference ranks the ready steps first: on a chain exactly one is ready.
    assert ready_step_hits(chain(), (1, 2, 3, 4)).tolist() == [[1.0, 1.0]] * 3


def test_always_before_needs_every_execution_holding_both_to_agree() -> None:
    needs = always_before([(1, 2, 3), (1, 3, 2), (2, 1, 3)])
    assert needs(3, 1)  # 1 came before 3 three times out of three
    assert not needs(2, 1)  # 2 came first once
    assert not needs(3, 2)
    assert not always_before([(1, 2)])(2, 1)  # seen together once only: not enough
