"""The online pre-condition check of the PREGO protocol, as the benchmark and the live pipeline use it."""

from __future__ import annotations

import numpy as np

from graphs import END, START, PreconditionChecker, TaskGraph, precondition_violations
from graphs.mistake_metrics import mistake_scores


def test_correct_order_raises_no_alert(tent_graph: TaskGraph) -> None:
    flags = precondition_violations(tent_graph, [10, 13, 11, 12])
    assert flags.tolist() == [False, False, False, False]


def test_step_before_one_of_its_preconditions_is_a_mistake_naming_what_is_missing(tent_graph: TaskGraph) -> None:
    checker = PreconditionChecker(tent_graph)
    assert not checker.observe(10).is_mistake
    verdict = checker.observe(11)  # open_bag (13) not done yet
    assert verdict.is_mistake and verdict.missing == (13,) and not verdict.undefined


def test_flagged_step_still_counts_as_done_for_later_steps(tent_graph: TaskGraph) -> None:
    # spread is a mistake (bag not opened) but stake only needs spread, which the protocol records as seen.
    assert precondition_violations(tent_graph, [10, 11, 12]).tolist() == [False, True, False]


def test_a_verdict_asked_ahead_is_what_observing_would_say_and_records_nothing(tent_graph: TaskGraph) -> None:
    # The live checker asks it for a step announced before it ends, with the steps still to be confirmed before it.
    checker = PreconditionChecker(tent_graph)
    checker.observe(10)
    for step, before in [(11, ()), (11, (13,)), (11, (14, 99)), (12, (13, 11)), (99, (13,))]:
        assert checker.verdict(step, before) == PreconditionChecker.replay(tent_graph, [10, *before]).observe(step)
    assert checker.done == (10,) and len(checker.history) == 1


def test_step_unknown_to_the_graph_is_a_mistake_and_is_not_recorded(tent_graph: TaskGraph) -> None:
    checker = PreconditionChecker(tent_graph)
    verdict = checker.observe(99)
    assert verdict.is_mistake and verdict.undefined
    assert checker.done == ()


def test_step_removed_in_training_is_a_mistake_every_time(tent_graph: TaskGraph) -> None:
    assert tent_graph.removed_steps == (14,)
    assert precondition_violations(tent_graph, [10, 14, 13, 14]).tolist() == [False, True, False, True]


def test_undefined_step_does_not_satisfy_a_later_requirement() -> None:
    # 11 has no pre-condition of its own (undefined), so observing it is a mistake and is not recorded as done:
    # 12, which needs 11, is flagged as well (the reference evaluation's behaviour).
    idx = {START: 0, 11: 1, 12: 2, END: 3}
    adj = np.zeros((4, 4), dtype=bool)
    adj[idx[12], idx[11]] = adj[idx[END], idx[12]] = True
    graph = TaskGraph((11, 12), ("a", "b"), adj)
    assert precondition_violations(graph, [11, 12]).tolist() == [True, True]


def test_start_counts_as_always_done(tent_graph: TaskGraph) -> None:
    assert precondition_violations(tent_graph, [13]).tolist() == [False]


def test_repeated_step_is_checked_again(tent_graph: TaskGraph) -> None:
    assert precondition_violations(tent_graph, [10, 10, 13, 11, 11]).tolist() == [False] * 5


def test_reset_and_replay_rebuild_the_same_state(tent_graph: TaskGraph) -> None:
    checker = PreconditionChecker.replay(tent_graph, [10, 13])
    assert checker.done == (10, 13)
    assert checker.allowed_next() == (11,)
    checker.reset()
    assert checker.done == () and checker.observe(11).missing == (10, 13)


def test_whole_sequence_score_matches_stepwise_observation(tent_graph: TaskGraph) -> None:
    sequence = [13, 12, 99, 10, 11, 14, 12]
    checker = PreconditionChecker(tent_graph)
    stepwise = [checker.observe(s).is_mistake for s in sequence]
    assert precondition_violations(tent_graph, sequence).tolist() == stepwise


def test_protocol_score_of_a_perfect_detector(tent_graph: TaskGraph) -> None:
    # Each test video ends with its mistake; a detector that flags exactly the last steps gets 100 / 100.
    videos = [[10, 13, 11, 14], [13, 10, 12]]  # 14 removed -> mistake; 12 before 11 -> mistake
    flags = [precondition_violations(tent_graph, v) for v in videos]
    scores = mistake_scores(flags)
    assert [f.tolist() for f in flags] == [[False, False, False, True], [False, False, True]]
    assert scores.avg_f1 == 100.0
