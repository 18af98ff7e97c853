"""Post-processing of learned TGML weights into a binary pre-condition DAG (docs/method.md, steps 1-6).

All matrices use the task-graph layout ``START, K_1..K_n, END`` (size ``n+2``); ``adj[i, j]`` means node ``j``
is a pre-condition of node ``i``. The steps, in the order of the reference evaluation:

1. key-steps never seen in training are removed (rows and columns zeroed);
2. keep ``Z[i, j] >= 1/n`` (``n`` = number of key-steps of the taxonomy);
3. while cycles exist, remove the lowest-weight edge of a cycle;
4. "relaxed" (optional): a key-step with exactly two pre-conditions, one of them START, keeps only START;
5. a key-step with no pre-condition gets ``K -> START``; one that nothing depends on gets ``END -> K``;
6. transitive reduction.

Numpy and networkx only (ground floor: never torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from graphs.common.errors import InputError

if TYPE_CHECKING:  # networkx loads in the functions that run a graph algorithm: its import costs 0.1 s
    import networkx as nx  # that every command reading this module's settings would pay


def _check_square(weights: np.ndarray, present: np.ndarray) -> int:
    """Validate shapes and return the number of key-steps ``n``."""
    if weights.ndim != 2 or weights.shape[0] != weights.shape[1] or weights.shape[0] < 3:
        raise InputError(f"post-processing: weights must be a square (n+2)x(n+2) matrix, got shape {weights.shape}")
    n = weights.shape[0] - 2
    if present.shape != (n,):
        raise InputError(f"post-processing: 'present' has shape {present.shape}, expected ({n},)")
    return n


def present_steps(step_ids: Sequence[int], sequences: Sequence[Sequence[int]]) -> np.ndarray:
    """bool ``(n,)``: key-steps that occur in the training sequences (the others leave the graph, step 1)."""
    return np.isin(np.asarray(step_ids), np.fromiter((s for seq in sequences for s in seq), dtype=np.int64))


def remove_unseen(weights: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Post-processing step 1: zero the rows and columns of key-steps never seen in training.

    Args:
        weights: float ``(n+2, n+2)`` learned weights.
        present: bool ``(n,)``, true for key-steps that occur in the training sequences.

    Returns:
        A copy of ``weights`` with the absent key-steps' rows and columns set to 0.
    """
    keep = np.concatenate([[True], np.asarray(present, dtype=bool), [True]])
    out = np.array(weights, dtype=np.float64, copy=True)
    out[~keep, :] = 0.0
    out[:, ~keep] = 0.0
    return out


def threshold_edges(weights: np.ndarray, n_steps: int) -> np.ndarray:
    """Post-processing step 2: keep edges whose weight is at least ``1/n``; the diagonal is never an edge.

    Args:
        weights: float ``(n+2, n+2)``.
        n_steps: ``n``, the number of key-steps of the taxonomy.

    Returns:
        bool ``(n+2, n+2)`` adjacency.
    """
    adj = np.asarray(weights) >= 1.0 / n_steps
    np.fill_diagonal(adj, False)
    return adj


def scaled_threshold_steps(n_steps: int, scale: float) -> int:
    """The ``n'`` of a scaled edge cut ``1/n'``: ``n' = round(n * scale)``, at least 1 (``scale = 1``: 1/n).

    The one rule behind the ``threshold_scale`` of our ``do-cv`` / ``do-ensemble`` graphs and of the
    cross-validation that chooses it, so the scale chosen is the scale applied.
    """
    return max(1, round(n_steps * scale))


def _to_digraph(adj: np.ndarray, weights: np.ndarray | None = None) -> nx.DiGraph:
    """The networkx graph of ``adj``: a node a row, an edge ``i -> j`` per ``adj[i, j]`` (weight ``weights[i, j]``)."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(range(adj.shape[0]))
    rows, cols = np.nonzero(adj)
    if weights is None:
        graph.add_edges_from(zip(rows.tolist(), cols.tolist(), strict=True))
    else:
        graph.add_weighted_edges_from(zip(rows.tolist(), cols.tolist(), weights[rows, cols].tolist(), strict=True))
    return graph


def _from_digraph(graph: nx.DiGraph, size: int) -> np.ndarray:
    """Bool ``(size, size)`` adjacency of ``graph``: True at ``[i, j]`` per edge ``i -> j`` (`_to_digraph` undone)."""
    adj = np.zeros((size, size), dtype=bool)
    edges = np.asarray(list(graph.edges()), dtype=np.int64).reshape(-1, 2)
    adj[edges[:, 0], edges[:, 1]] = True
    return adj


def break_cycles(adj: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Post-processing step 3: while a cycle exists, drop its lowest-weight edge (closing edge included).

    Cycles are found one at a time with networkx (depth-first, deterministic for a given matrix), so the
    cost stays polynomial even for the dense graphs of early training; every removal breaks at least the
    cycle it was found in, so the loop ends with a DAG.

    Args:
        adj: bool ``(n+2, n+2)`` adjacency.
        weights: float ``(n+2, n+2)`` weights used to pick the edge to drop.

    Returns:
        bool acyclic adjacency (a copy).
    """
    import networkx as nx

    graph = _to_digraph(adj, weights)
    while True:
        try:
            cycle = nx.find_cycle(graph)
        except nx.NetworkXNoCycle:
            break
        # min() keeps the first of equal-weight edges, so ties break deterministically in cycle order.
        u, v = min(((u, v) for u, v, *_ in cycle), key=lambda e: graph.edges[e]["weight"])
        graph.remove_edge(u, v)
    return _from_digraph(graph, adj.shape[0])


def relax_start_pairs(adj: np.ndarray) -> np.ndarray:
    """Post-processing step 4, "relaxed": a step whose only pre-conditions are START and one other keeps START only.

    Args:
        adj: bool ``(n+2, n+2)`` adjacency.

    Returns:
        bool adjacency (a copy).
    """
    out = np.array(adj, dtype=bool, copy=True)
    inner = out[1:-1]  # key-step rows only; END is not a key-step
    relax = (inner.sum(axis=1) == 2) & inner[:, 0]
    inner[relax, 1:] = False
    return out


def attach_start_end(adj: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Post-processing step 5: ``K -> START`` for key-steps with no pre-condition, ``END -> K`` for those nothing needs.

    Removed (absent) key-steps get neither.

    Args:
        adj: bool ``(n+2, n+2)`` adjacency.
        present: bool ``(n,)`` key-steps kept in the graph.

    Returns:
        bool adjacency (a copy).
    """
    out = np.array(adj, dtype=bool, copy=True)
    present = np.asarray(present, dtype=bool)
    steps = np.arange(1, out.shape[0] - 1)
    no_pre = present & ~out[1:-1].any(axis=1)
    out[steps[no_pre], 0] = True
    # Dependents are looked up after the START edges were added: those never create a dependent of K.
    no_dependent = present & ~out[:, 1:-1].any(axis=0)
    out[-1, steps[no_dependent]] = True
    return out


def transitive_reduction(adj: np.ndarray) -> np.ndarray:
    """Post-processing step 6: drop every edge implied by a longer path (networkx transitive reduction).

    Args:
        adj: bool acyclic ``(n+2, n+2)`` adjacency.

    Returns:
        bool reduced adjacency. A cyclic input is returned unchanged (only happens in the training-time
        Sequence Accuracy graph before cycle breaking starts).
    """
    import networkx as nx

    graph = _to_digraph(adj)
    if not nx.is_directed_acyclic_graph(graph):
        return np.array(adj, dtype=bool, copy=True)
    return _from_digraph(nx.transitive_reduction(graph), adj.shape[0])


def transitive_closure(adj: np.ndarray) -> np.ndarray:
    """Reachability over an adjacency: ``closure[i, j]`` iff a path of one or more edges leads from ``i`` to ``j``
    (node ``j`` precedes ``i``, directly or through other pre-conditions; networkx transitive closure, the twin of
    `transitive_reduction`).

    Args:
        adj: bool ``(m, m)`` adjacency.

    Returns:
        bool ``(m, m)`` closure.
    """
    import networkx as nx

    adj = np.asarray(adj, dtype=bool)
    return _from_digraph(nx.transitive_closure(_to_digraph(adj), reflexive=False), adj.shape[0])


def observed_preconditions(adj: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """The pre-conditions of ``adj`` that ``observed`` orders the same way, START and END attached again::

        A'[i, j] = A[i, j] and C[i, j]        i, j key-steps, C the transitive closure of ``observed``   (O1)

    then step 5 (`attach_start_end`) over the key-steps ``adj`` keeps. ``adj`` is a graph learned from annotated
    executions; ``observed`` one learned from the key-steps a detector recognised in other executions: a
    pre-condition stays only where the detector, too, is seen to put it first (`tgml.bench.live.observed`). A
    subset of a transitively reduced DAG's edges is acyclic and reduced in turn.

    Args:
        adj: bool ``(n+2, n+2)`` adjacency.
        observed: bool ``(n+2, n+2)`` adjacency over the same nodes.

    Returns:
        bool ``(n+2, n+2)`` adjacency.
    """
    adj = np.asarray(adj, dtype=bool)
    if np.shape(observed) != adj.shape:
        raise InputError(f"observed graph: shape {np.shape(observed)}, expected {adj.shape}")
    present = np.asarray(adj[1:-1].any(axis=1) | adj[:, 1:-1].any(axis=0))  # (n,) key-steps the graph keeps
    out = np.zeros_like(adj)
    out[1:-1, 1:-1] = adj[1:-1, 1:-1] & transitive_closure(np.asarray(observed, dtype=bool)[1:-1, 1:-1])
    return attach_start_end(out, present)


def binarize(
    weights: np.ndarray,
    present: np.ndarray,
    relaxed: bool,
    *,
    threshold_steps: int | None = None,
    cycles: bool = True,
    relax_after_attach: bool = False,
) -> np.ndarray:
    """Learned weights -> binary pre-condition DAG, post-processing steps 1-6 (docs/method.md) in the reference order.

    Args:
        weights: float ``(n+2, n+2)`` learned weights, layout ``START, K_1..K_n, END``.
        present: bool ``(n,)``, key-steps seen in training (the others are removed).
        relaxed: apply step 4.
        threshold_steps: ``n`` used in the ``1/n`` threshold; defaults to the number of key-steps.
        cycles: apply step 3 (the training-time SA graph skips it in the first epochs).
        relax_after_attach: swap steps 4 and 5, as the training-time Sequence Accuracy graph does.

    Returns:
        bool ``(n+2, n+2)`` adjacency (a DAG whenever ``cycles`` is true).
    """
    weights = np.asarray(weights, dtype=np.float64)
    present = np.asarray(present, dtype=bool)
    n = _check_square(weights, present)
    w = remove_unseen(weights, present)
    adj = threshold_edges(w, threshold_steps or n)
    if cycles:
        adj = break_cycles(adj, w)
    if relax_after_attach:
        adj = attach_start_end(adj, present)
        if relaxed:
            adj = relax_start_pairs(adj)
    else:
        if relaxed:
            adj = relax_start_pairs(adj)
        adj = attach_start_end(adj, present)
    return transitive_reduction(adj)
