"""The order rules over a recording (pre-condition, and pre-condition + late step) and the steps never done."""

from __future__ import annotations

import numpy as np
import pytest

from graphs import InputError, TaskGraph, precondition_violations
from graphs.checker import PreconditionChecker
from graphs.order_rules import LATE_STEP, PRECONDITION, never_done, order_flags, required_steps


def test_the_precondition_rule_is_the_live_checkers(tent_graph: TaskGraph) -> None:
    for sequence in ([10, 13, 11, 12], [11, 10, 13, 12], [12, 11, 10], [10, 11, 11, 13, 99]):
        assert order_flags(tent_graph, sequence, PRECONDITION).tolist() == \
            precondition_violations(tent_graph, sequence).tolist()


def test_a_swap_of_two_dependent_steps_flags_both_under_the_late_step_rule(tent_graph: TaskGraph) -> None:
    # spread (11) needs open_bag (13): done the other way round, spread is early and open_bag late.
    sequence = [10, 11, 13, 12]
    assert order_flags(tent_graph, sequence, PRECONDITION).tolist() == [False, True, False, False]
    assert order_flags(tent_graph, sequence, LATE_STEP).tolist() == [False, True, True, False]
    assert PreconditionChecker.replay(tent_graph, [10, 11], late_step=True).verdict(13).late_for == (11,)
    assert order_flags(tent_graph, [10, 13, 11, 12], LATE_STEP).tolist() == [False] * 4  # in order: nothing


def test_a_step_late_for_a_step_that_was_skipped_is_not_flagged(tent_graph: TaskGraph) -> None:
    # stake (12) needs spread (11), which was never done: unpack coming after stake is no late step.
    assert order_flags(tent_graph, [12, 10], LATE_STEP).tolist() == [True, False]


def test_an_unknown_rule_is_refused(tent_graph: TaskGraph) -> None:
    with pytest.raises(InputError, match="--order-rule 'lenient'"):
        order_flags(tent_graph, [10], "lenient")


def test_never_done_names_the_required_steps_left_out_in_graph_order(tent_graph: TaskGraph) -> None:
    assert required_steps(tent_graph) == (10, 11, 12, 13)  # never_seen (14) was removed in training
    assert never_done(tent_graph, [12, 10]) == (11, 13)
    assert never_done(tent_graph, [10, 11, 12, 13, 13]) == ()
    # The tent graph lists its steps by id: a graph whose order is not the ids' tells graph order from sorting.
    chain = np.zeros((5, 5), dtype=bool)
    chain[[1, 2, 3, 4], [0, 1, 2, 3]] = True  # START <- 30 <- 10 <- 20 <- END
    reordered = TaskGraph((30, 10, 20), ("lay", "stake", "tie"), chain)
    assert never_done(reordered, []) == (30, 10, 20) and never_done(reordered, [10]) == (30, 20)
