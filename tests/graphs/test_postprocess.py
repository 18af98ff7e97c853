"""Post-processing of learned weights into a binary DAG (the six steps of the reference evaluation)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from graphs.common.errors import InputError
from graphs.postprocess import (
    attach_start_end,
    binarize,
    break_cycles,
    observed_preconditions,
    relax_start_pairs,
    remove_unseen,
    threshold_edges,
    transitive_closure,
    transitive_reduction,
)

# Layout S=0, K1..K4 = 1..4, E=5.
S, K1, K2, K3, K4, E = range(6)


def adjacency(*edges: tuple[int, int], size: int = 6) -> np.ndarray:
    adj = np.zeros((size, size), bool)
    for a, b in edges:
        adj[a, b] = True
    return adj


def edges_of(adj: np.ndarray) -> set[tuple[int, int]]:
    return {(int(a), int(b)) for a, b in zip(*np.nonzero(adj), strict=True)}


def test_remove_unseen_zeroes_rows_and_columns() -> None:
    w = np.full((6, 6), 0.3)
    out = remove_unseen(w, np.array([True, False, True, True]))
    assert not out[K2].any() and not out[:, K2].any()
    assert out[K1, K3] == 0.3 and w[K2, K1] == 0.3  # input untouched


def test_threshold_keeps_weights_at_least_one_over_n() -> None:
    w = np.zeros((6, 6))
    w[K2, K1] = 0.25  # exactly 1/n for n = 4: kept
    w[K3, K1] = 0.2499
    w[K1, K1] = 0.9  # never a self edge
    assert edges_of(threshold_edges(w, 4)) == {(K2, K1)}


def test_break_cycles_drops_the_lowest_weight_edge_of_each_cycle() -> None:
    w = np.zeros((6, 6))
    w[K1, K2], w[K2, K3], w[K3, K1] = 0.9, 0.2, 0.8  # 3-cycle, K2 -> K3 weakest
    w[K4, K3], w[K3, K4] = 0.5, 0.6  # 2-cycle, K4 -> K3 weakest
    adj = w > 0
    out = break_cycles(adj, w)
    assert nx.is_directed_acyclic_graph(nx.DiGraph(list(edges_of(out))))
    assert edges_of(adj) - edges_of(out) == {(K2, K3), (K4, K3)}


def test_relaxed_rule_keeps_only_start_when_start_is_one_of_two() -> None:
    adj = adjacency((K1, S), (K1, K2), (K3, S), (K3, K1), (K3, K2), (E, S), (E, K1))
    out = relax_start_pairs(adj)
    assert edges_of(out) == {(K1, S), (K3, S), (K3, K1), (K3, K2), (E, S), (E, K1)}  # END is not a key-step


def test_attach_start_end_skips_removed_steps() -> None:
    adj = adjacency((K2, K1))
    out = attach_start_end(adj, np.array([True, True, True, False]))
    assert edges_of(out) == {(K2, K1), (K1, S), (K3, S), (E, K2), (E, K3)}


def test_transitive_reduction_drops_implied_edges() -> None:
    adj = adjacency((K3, K2), (K2, K1), (K3, K1), (K1, S), (K2, S))
    assert edges_of(transitive_reduction(adj)) == {(K3, K2), (K2, K1), (K1, S)}


def test_transitive_closure_reaches_through_any_number_of_steps() -> None:
    chain = adjacency((K4, K3), (K3, K2), (K2, K1))
    assert edges_of(transitive_closure(chain)) == {(K4, K3), (K4, K2), (K4, K1), (K3, K2), (K3, K1), (K2, K1)}
    assert not transitive_closure(np.zeros((6, 6), bool)).any()


def test_a_precondition_is_kept_where_the_observed_graph_orders_the_pair_too() -> None:
    # Learned: K2 and K3 require K1, K4 requires K3. Observed: K1 before K2 before K3 (K3 needs K1 through K2), and
    # K4 before K3 (the reverse of the learned order).
    learned = adjacency((K2, K1), (K3, K1), (K4, K3), (K1, S), (E, K2), (E, K4))
    observed = adjacency((K2, K1), (K3, K2), (K3, K4), (K1, S), (K4, S), (E, K3))
    out = observed_preconditions(learned, observed)
    # K2 <- K1 kept (an edge), K3 <- K1 kept (a path), K4 <- K3 dropped (reversed): K4 then starts from START and
    # nothing needs K3 any more, so END requires it.
    assert edges_of(out) == {(K2, K1), (K3, K1), (K1, S), (K4, S), (E, K2), (E, K3), (E, K4)}
    assert nx.is_directed_acyclic_graph(nx.DiGraph(list(edges_of(out))))


def test_nothing_observed_keeps_no_precondition_and_a_removed_step_stays_removed() -> None:
    learned = adjacency((K2, K1), (K3, K2), (K1, S), (E, K3))  # K4 removed (never seen in training)
    out = observed_preconditions(learned, np.zeros((6, 6), bool))
    assert edges_of(out) == {(K1, S), (K2, S), (K3, S), (E, K1), (E, K2), (E, K3)}
    with pytest.raises(InputError, match="observed graph"):
        observed_preconditions(learned, np.zeros((5, 5), bool))


def test_binarize_end_to_end_gives_a_rooted_dag() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        w = rng.dirichlet(np.ones(6), size=6)
        w[S] = 0  # START has no pre-condition; nothing requires END
        w[:, E] = 0
        present = rng.random(4) < 0.8
        adj = binarize(w, present, relaxed=bool(rng.integers(2)))
        graph = nx.DiGraph(list(edges_of(adj)))
        assert nx.is_directed_acyclic_graph(graph)
        for k in np.flatnonzero(present) + 1:
            assert nx.has_path(graph, int(k), S) and nx.has_path(graph, E, int(k))
        for k in np.flatnonzero(~present) + 1:
            assert not adj[k].any() and not adj[:, k].any()


def test_binarize_rejects_bad_shapes() -> None:
    with pytest.raises(InputError, match="present"):
        binarize(np.zeros((6, 6)), np.ones(3, bool), relaxed=False)
    with pytest.raises(InputError, match="square"):
        binarize(np.zeros((6, 5)), np.ones(4, bool), relaxed=False)
