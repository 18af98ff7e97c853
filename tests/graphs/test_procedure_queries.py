"""The five procedure questions, checked against small graphs whose answers are worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphs import InputError, TaskGraph, load_graph, save_graph
from graphs.procedure_queries import (
    ProcedureQueries,
    batched_log_likelihoods,
    global_optionality,
    learn_optional_scores,
    local_optionality,
    optionality,
    sequence_log_likelihoods,
    single_precondition_probability,
    step_probabilities,
)
from graphs.task_graph import EDGE_PROBABILITY_WEIGHTS

# Weighted example: key-steps A=1, B=2, C=3 (ids 1, 2, 3), nodes S=0 .. E=4. Z[i, j]: j is a pre-condition of i.
#   A <- S 1.0;  B <- S 0.2, A 0.8;  C <- A 0.5, B 0.5;  E <- A 0.2, B 0.2, C 0.6
# Column sums over the key-steps (A, B, C), the column's own step left out (END is no key-step):
#   S: 1.0 + 0.2 = 1.2   A: 0.8 + 0.5 = 1.3   B: 0.5   C: 0
# so P(K_i | K_p) = Z[i, p] / column sum:
#   P(B|A) = 0.8/1.3 = 0.6154  P(C|A) = 0.5/1.3 = 0.3846  P(C|B) = 0.5/0.5 = 1
# END's row, asked only at the end of a procedure, is among everything that can follow (END too):
#   P(E|A) = 0.2/1.5 = 0.1333  P(E|B) = 0.2/0.7 = 0.2857  P(E|C) = 0.6/0.6 = 1
Z = np.array([
    [0.0, 0.0, 0.0, 0.0, 0.0],
    [1.0, 0.0, 0.0, 0.0, 0.0],
    [0.2, 0.8, 0.0, 0.0, 0.0],
    [0.0, 0.5, 0.5, 0.0, 0.0],
    [0.0, 0.2, 0.2, 0.6, 0.0],
])
CHAIN = np.zeros((5, 5), dtype=bool)
CHAIN[[1, 2, 3, 4], [0, 1, 2, 3]] = True  # A <- S, B <- A, C <- B, E <- C


def weighted_graph(optional: list[float] | None = None) -> TaskGraph:
    return TaskGraph((1, 2, 3), ("a", "b", "c"), CHAIN, Z,
                     optional_scores=None if optional is None else np.array(optional))


def test_single_precondition_probability_matches_the_hand_computed_table() -> None:
    q = single_precondition_probability(Z)
    assert q[[2, 3, 4], 1] == pytest.approx([0.8 / 1.3, 0.5 / 1.3, 0.2 / 1.5])
    assert q[[3, 4, 4], [2, 2, 3]] == pytest.approx([1.0, 2 / 7, 1.0])
    assert q[1, 0] == pytest.approx(1 / 1.2)
    assert not q[0].any()  # nothing is followed by START


def test_previous_key_steps_are_ranked_by_p_of_the_step_given_each_one() -> None:
    answer = ProcedureQueries(weighted_graph()).previous(3)
    assert answer.rule == "weighted"
    assert answer.steps == (2, 1)  # B 1 before A 0.3846; START is not a key-step
    assert answer.scores == pytest.approx((1.0, 0.5 / 1.3))


def test_a_step_is_never_its_own_previous_step() -> None:
    looped = Z.copy()
    looped[3, 3] = 0.4  # Count-Based weights count repeats, so a step can follow itself
    answer = ProcedureQueries(TaskGraph((1, 2, 3), ("a", "b", "c"), CHAIN, looped)).previous(3)
    assert 3 not in answer.steps and answer.steps == (2, 1)


def test_mistake_score_adds_the_probabilities_of_the_pre_conditions_not_done() -> None:
    queries = ProcedureQueries(weighted_graph())
    assert queries.mistake(3, [1]).value == pytest.approx(1.0)  # B not done: P(C|B)
    assert queries.mistake(3, []).value == pytest.approx(0.5 / 1.3 + 1.0)  # neither A nor B
    assert queries.mistake(3, [1, 2]).value == 0.0
    assert queries.mistake(99, [1]).value == 1.0  # unknown to the graph: counted as a mistake


def test_missing_scores_each_step_not_done_by_how_much_the_current_one_needs_it() -> None:
    queries = ProcedureQueries(weighted_graph())
    answer = queries.missing(3, [1])
    assert answer.steps == (2,) and answer.scores == pytest.approx((1.0,))
    assert queries.missing(3, [2, 1, 2]).steps == ()  # repeats in the history are harmless


def test_missing_at_the_end_finds_a_step_forgotten_mid_way_through_the_steps_that_needed_it() -> None:
    # B forgotten, A and C done: the askers are A, C and END; P(C|B) = 1 beats P(E|B) = 0.2857.
    answer = ProcedureQueries(weighted_graph()).missing_at_end([1, 3])
    assert answer.steps == (2,) and answer.scores == pytest.approx((1.0,))
    # A stored optionality of 0.75 for B scales it by 1 - 0.75.
    answer = ProcedureQueries(weighted_graph([0.0, 0.75, 0.0])).missing_at_end([1, 3])
    assert answer.scores == pytest.approx((0.25,))


def test_future_steps_are_the_tgml_step_probabilities_given_everything_done() -> None:
    # H = {S, A}: mass Σ_{j∈H} Z[h, j] is B 0.2 + 0.8 = 1.0, C 0.5, E 0.2; total 1.7.
    probability = step_probabilities(Z, np.array([True, True, False, False, False]))
    assert probability == pytest.approx([0, 0, 1 / 1.7, 0.5 / 1.7, 0.2 / 1.7])
    answer = ProcedureQueries(weighted_graph()).future(1, [])
    assert answer.steps == (2, 3) and answer.scores == pytest.approx((1 / 1.7, 0.5 / 1.7))


def test_optionality_mixes_the_stored_global_score_with_the_local_one() -> None:
    # Before C with J = {A}: P(E|J) = 0.2/1.7, P(C|J) = 0.5/1.7, so O_l = 0.2 / (0.2 + 0.5) = 0.2857.
    done = np.array([True, True, False, False, False])
    assert local_optionality(Z, 3, done) == pytest.approx(2 / 7)
    assert optionality(0.5, 2 / 7) == pytest.approx(0.7 * 0.5 + 0.3 * 2 / 7)
    queries = ProcedureQueries(weighted_graph([0.0, 0.0, 0.5]))
    assert queries.optional(3, [1]).value == pytest.approx(0.7 * 0.5 + 0.3 * 2 / 7)
    assert queries.optional(3).value == 0.5  # no history: the global score alone


def test_sequence_likelihood_is_the_product_of_tgml_step_probabilities() -> None:
    # <S,A,B,C,E>: A 1.0/1.2, B 1.0/1.7, C (0.5+0.5)/(1.0+0.4), E 1.0/1.0  -> 0.35014
    # <S,A,C,E>:   A 1.0/1.2, C 0.5/1.7, E (0.2+0.6)/(1.0 [B] + 0.8 [E]) -> 0.10893
    loglik = sequence_log_likelihoods(Z, [[1, 2, 3], [1, 3]])
    assert np.exp(loglik) == pytest.approx([1 / 1.2 * 1 / 1.7 * 1 / 1.4, 1 / 1.2 * 0.5 / 1.7 * 0.8 / 1.8], rel=1e-4)


def test_global_optionality_weighs_the_likelihood_ratio_by_the_step_frequency() -> None:
    # B is in one execution of k+1 (fr = 1/(k+1)); it looks optional in <A,B,C> when
    # P(A,C)(1 - fr) > P(A,B,C) fr, i.e. 0.10893 k > 0.35014: false for k = 3, true for k = 4.
    # A and C are in every execution (fr = 1): never optional.
    assert global_optionality(Z, [[1, 2, 3]] + [[1, 3]] * 3) == pytest.approx([0, 0, 0])
    assert global_optionality(Z, [[1, 2, 3]] + [[1, 3]] * 4) == pytest.approx([0, 1, 0])


def test_learned_optional_scores_are_stored_in_the_graph_file(tmp_path: Path) -> None:
    graph = learn_optional_scores(weighted_graph(), [[1, 2, 2, 3]] + [[1, 3]] * 4)  # repeats: first occurrence
    save_graph(graph, tmp_path / "g.json")
    loaded = load_graph(tmp_path / "g.json")
    assert loaded.optional_steps == (2,)
    with pytest.raises(InputError, match="step id 7 is not in the graph"):
        learn_optional_scores(weighted_graph(), [[1, 7]])


# Binary example: A=1, B=2, C=3, D=4; A <- S, B <- A, C <- A, D <- {A, C}, E <- {B, D} (nodes S=0 .. E=5).
def binary_graph(optional: list[float] | None = None) -> TaskGraph:
    adj = np.zeros((6, 6), dtype=bool)
    for step, required in [(1, 0), (2, 1), (3, 1), (4, 1), (4, 3), (5, 2), (5, 4)]:
        adj[step, required] = True
    return TaskGraph((1, 2, 3, 4), ("a", "b", "c", "d"), adj,
                     optional_scores=None if optional is None else np.array(optional))


def test_binary_rules_answer_from_the_pre_conditions() -> None:
    queries = ProcedureQueries(binary_graph())
    assert queries.rule == "binary"
    previous = queries.previous(4)
    assert previous.rule == "binary" and previous.steps == (1, 3) and previous.scores == (0.5, 0.5)
    assert queries.previous(1).steps == ()  # START only
    assert queries.mistake(4, [1, 2]).value == 0.5  # C unmet of |pre(D)| = 2
    assert queries.mistake(1, []).value == 0.0  # START is always done
    assert queries.missing(4, [1, 2]).steps == (3,)
    missing = queries.missing(4, [])
    assert missing.steps == (1, 3) and missing.scores == (0.5, 0.5)  # each 1/|unmet|
    assert queries.missing_at_end([1, 2, 4]).steps == (3,)  # D needed C


def test_binary_future_prefers_successors_with_fewer_unmet_pre_conditions() -> None:
    # After A (H = {S, A}) the successors of A are B, C, D: |succ| = 3; D still needs C.
    # Raw scores B 1/3, C 1/3, D 1/(3+1) = 1/4; sum 11/12; normalised B = C = 4/11, D = 3/11.
    answer = ProcedureQueries(binary_graph()).future(1, [])
    assert answer.steps == (2, 3, 4) and answer.scores == pytest.approx((4 / 11, 4 / 11, 3 / 11))
    # B done already: |succ(A)| still counts it (3), C scores 1/3 and D 1/(3+1), normalised 4/7 and 3/7 (counting
    # only the successors left, 1/2 and 1/3, gave 3/5 and 2/5).
    answer = ProcedureQueries(binary_graph()).future(1, [2])
    assert answer.steps == (3, 4) and answer.scores == pytest.approx((4 / 7, 3 / 7))


def test_future_before_the_first_step_asks_what_follows_start() -> None:
    # A live stream before its first key-step: START is the step just done. Binary: A is START's only successor.
    assert ProcedureQueries(binary_graph()).future(None, []).steps == (1,)
    # Weighted, H = {S}: mass A 1.0, B 0.2 (C and E need A or B); total 1.2.
    answer = ProcedureQueries(weighted_graph()).future(None, [])
    assert answer.steps == (1, 2) and answer.scores == pytest.approx((1 / 1.2, 0.2 / 1.2))


def test_optional_without_weights_falls_back_to_the_stored_score_and_says_so() -> None:
    answer = ProcedureQueries(binary_graph([0.0, 0.9, 0.0, 0.0])).optional(2, [1])
    assert answer.rule == "binary" and answer.value == 0.9  # no local term without weights
    assert ProcedureQueries(binary_graph()).optional(2, [1]).value == 0.0  # nothing stored: required


def test_an_old_version_1_file_without_weights_answers_every_question(tmp_path: Path) -> None:
    data = binary_graph().to_dict()
    data["version"] = 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    queries = ProcedureQueries(load_graph(path))
    assert queries.rule == "binary" and queries.optional(4, [1, 3]).value == 0.0
    assert queries.missing_at_end([1, 3, 4]).steps == (2,)  # END needed B


def _noisy_and_graph() -> TaskGraph:
    # a(1), b(2), c(3): c needs a (θ 0.9) and maybe b (0.5), b rarely needs a (0.2); binary graph a -> b -> c.
    theta = np.zeros((5, 5))
    theta[3, 1], theta[3, 2], theta[2, 1] = 0.9, 0.5, 0.2
    adj = np.zeros((5, 5), dtype=bool)
    adj[1, 0] = adj[2, 1] = adj[3, 2] = adj[4, 3] = True
    return TaskGraph((1, 2, 3), ("a", "b", "c"), adj, theta, info={"weights": EDGE_PROBABILITY_WEIGHTS})


def test_per_edge_probabilities_answer_with_the_noisy_and_rule() -> None:
    graph = _noisy_and_graph()
    assert graph.row_softmax_weights is None and graph.edge_probability_weights is not None
    queries = ProcedureQueries(graph)
    assert queries.rule == "weighted"
    previous = queries.previous(3)
    assert previous.steps == (1, 2) and previous.scores == pytest.approx((0.9, 0.5))  # θ[c, ·]
    # mistake = 1 − Π over pre-conditions not done of (1 − θ): 1 − 0.1 · 0.5, then 1 − 0.5 once a is done
    assert queries.mistake(3, []).value == pytest.approx(0.95)
    assert queries.mistake(3, [1]).value == pytest.approx(0.5)
    assert queries.mistake(3, [1, 2]).value == pytest.approx(0.0)
    missing = queries.missing(3, [2])
    assert missing.steps == (1,) and missing.scores == pytest.approx((0.9,))
    # future after a: ready(b) = 1 (its only pre-condition a is done), ready(c) = 1 − θ[c, b] = 0.5 -> 2/3, 1/3
    after_a = queries.future(1, [])
    assert after_a.steps == (2, 3) and after_a.scores == pytest.approx((2 / 3, 1 / 3))
    # at the start: ready(a) = 1, ready(b) = 0.8, ready(c) = 0.1 · 0.5 = 0.05, normalised over 1.85
    start = queries.future(None, [])
    assert start.steps == (1, 2, 3) and start.scores == pytest.approx((1 / 1.85, 0.8 / 1.85, 0.05 / 1.85))
    # END is not in the noisy-AND model: the end-of-procedure question reads the binary graph, and says so
    end = queries.missing_at_end([1, 2])
    assert (end.rule, end.steps) == ("binary", (3,))


def test_an_edge_probability_of_one_gives_finite_answers() -> None:
    graph = _noisy_and_graph()
    assert graph.weights is not None  # a noisy-AND graph has its edge probabilities
    theta = graph.weights.copy()
    theta[3, 1] = 1.0
    queries = ProcedureQueries(TaskGraph(graph.step_ids, graph.step_names, graph.adjacency, theta,
                                         info=graph.info))
    assert queries.mistake(3, []).value == pytest.approx(1.0)
    assert queries.future(None, []).score(3) == pytest.approx(0.0)
    assert ProcedureQueries(TaskGraph((1, 2), ("a", "b"), np.zeros((4, 4), dtype=bool), np.zeros((4, 4)))).rule \
        == "weighted"  # weights without the edge-probability mark are a row-softmax


def test_likelihoods_in_batches_of_bounded_memory_equal_one_call() -> None:
    """The leave-one-out executions of the optionality score hold D·L² positions; they are scored in batches."""
    rng = np.random.default_rng(3)
    n = 12
    weights = rng.random((n + 2, n + 2))
    sequences = [rng.permutation(np.arange(1, n + 1))[: rng.integers(1, n + 1)] for _ in range(40)]
    whole = sequence_log_likelihoods(weights, sequences)
    for cells in (1, 50, 700, 1 << 30):  # one execution a call, a few, many, all in one
        np.testing.assert_allclose(batched_log_likelihoods(sequence_log_likelihoods, weights, sequences, cells),
                                   whole, rtol=1e-12)
    assert batched_log_likelihoods(sequence_log_likelihoods, weights, []).shape == (0,)
