"""MSGI and MSG² baselines: pre-conditions found by a greedy search over "eligibility" vectors.

MSGI (Sohn et al., "Meta Reinforcement Learning with Autonomous Inference of Subtask Dependencies", ICLR 2020)
and MSG² (Jang et al., "Multimodal Subtask Graph Generation from Instructional Videos", Findings of ACL 2023)
infer, for every key-step ``k``, the set of steps that must be done before it from positive examples only: each
occurrence of ``k`` in a training execution gives an eligibility vector ``e`` (1 for the steps done before it).
The TGML paper (Seminara et al., NeurIPS 2024) compares with both as the authors' code builds them:

1. Executions are reduced to first occurrences and duplicate executions are dropped. Only steps that occur are
   nodes; the others get no edge (the checker flags them).
2. For each node ``k``, a greedy search grows a candidate set ``D`` one step at a time, always adding the step
   that raises the objective most (ties: the lowest taxonomy id). With ``c[k, d]`` = number of ``k``'s
   eligibility vectors in which ``d`` was done, ``E[k]`` = their number, and ``|D|`` the set size:

   - MSGI, accuracy objective (Jang et al. Eq. 6, after Sohn et al.): ``f(D) = Σ_{d∈D} c[k, d] − α|D|``;
   - MSG², precision objective (Jang et al. Eq. 7, and Eq. 8 with ``α > 0``):
     ``f(D) = Σ_{d∈D} c[k, d] / (E[k]·|D|) − α|D|`` (0 instead of the ratio while the sum is 0).

   The search adds steps until no candidate scores above −1; the pre-conditions of ``k`` are the steps whose
   addition reached the best score seen (all of them on a tie), kept only if that score is at least ``1/n``.
   Greedy order is by decreasing ``c[k, ·]``, so the search is a sort and a cumulative sum per row.
3. Two-step cycles are resolved by keeping the edge of the node whose best score is higher. On equal scores the
   reference keeps the edge of whichever node networkx's ``simple_cycles`` lists first, an order set by its
   cycle search (see `cycle_listing_rank`); it is reproduced here so that the graphs match the reference's. If
   the graph is still cyclic, or has more edges than a DAG over its nodes can have, ``α`` grows by 0.001 and the
   search runs again: the first ``α`` of that grid that gives a DAG wins.
4. Transitive reduction; a step without pre-condition requires START, and END requires every step that nothing
   requires.

All ``α`` of a chunk of the grid are searched at once: numpy over ``(α, k, position)`` arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

import numpy as np

from graphs.common.errors import InputError
from graphs.common.settings_files import check_settings
from graphs.postprocess import attach_start_end, transitive_reduction
from graphs.step_positions import step_positions
from graphs.task_graph import TaskGraph

OBJECTIVES: Final = {"msgi": "accuracy", "msg2": "precision"}
ALPHA_STEP: Final = 0.001
_ALPHA_CHUNK: Final = 200  # alphas searched per batch: (200, m, m) arrays stay small even for m = 86


@dataclass(frozen=True)
class EligibilitySearchConfig:
    """Settings of the MSGI / MSG² search.

    Args:
        objective: ``"accuracy"`` (MSGI) or ``"precision"`` (MSG²).
        unique_executions: drop duplicate first-occurrence executions before counting (the authors' code does).
    """

    objective: str = "precision"
    unique_executions: bool = True

    BOUNDS: ClassVar[Mapping[str, tuple[str, ...]]] = {"objective": tuple(OBJECTIVES.values())}

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class EligibilityCounts:
    """What the greedy search needs from the training executions.

    Attributes:
        nodes: taxonomy ids of the steps that occur, sorted (the search's candidate order).
        done_before: int ``(m, m)``; ``[k, d]`` = eligibility vectors of ``nodes[k]`` in which ``nodes[d]`` was done.
        vectors: int ``(m,)`` eligibility vectors of each node (executions containing it).
        first_seen: int ``(m,)`` rank of each node by first appearance in the executions (cycle tie-break).
    """

    nodes: np.ndarray
    done_before: np.ndarray
    vectors: np.ndarray
    first_seen: np.ndarray


def eligibility_counts(executions: Sequence[Sequence[int]], unique: bool = True) -> EligibilityCounts:
    """Count, for every pair of steps, how often one was done before the other (step 1 of the module docstring).

    Args:
        executions: key-step id sequences (repeats allowed: only first occurrences count).
        unique: drop duplicate executions (after first-occurrence reduction).

    Returns:
        The `EligibilityCounts`.
    """
    reduced = [tuple(dict.fromkeys(int(s) for s in seq)) for seq in executions]
    reduced = [seq for seq in reduced if seq]
    if unique:
        reduced = list(dict.fromkeys(reduced))
    if not reduced:
        raise InputError("eligibility search: no non-empty training execution")
    appearance = list(dict.fromkeys(s for seq in reduced for s in seq))
    nodes = np.array(sorted(appearance), dtype=np.int64)
    index = {int(s): i for i, s in enumerate(nodes)}
    position = np.full((len(reduced), len(nodes)), -1, dtype=np.int64)  # (executions, m), -1 = absent
    for e, seq in enumerate(reduced):
        position[e, [index[s] for s in seq]] = np.arange(len(seq))
    present = position >= 0
    # before[e, k, d]: in execution e, d was done before k (both present).
    before = present[:, :, None] & present[:, None, :] & (position[:, None, :] < position[:, :, None])
    first_seen = np.empty(len(nodes), dtype=np.int64)
    first_seen[[index[s] for s in appearance]] = np.arange(len(nodes))
    return EligibilityCounts(nodes, before.sum(axis=0), present.sum(axis=0), first_seen)


def greedy_preconditions(
    counts: EligibilityCounts, objective: str, alphas: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """The greedy search of every node, for several ``α`` at once (step 2 of the module docstring).

    Args:
        counts: the training counts.
        objective: ``"accuracy"`` or ``"precision"``.
        alphas: float ``(A,)`` penalties per added step.
        threshold: minimum best score for a node to keep pre-conditions (``1/n``).

    Returns:
        ``(edges, best)``: bool ``(A, m, m)``, ``edges[a, k, d]`` iff ``d`` is a pre-condition of ``k``; float
        ``(A, m)`` best score of each node (−inf when it keeps none).
    """
    m = len(counts.nodes)
    order = np.argsort(-counts.done_before, axis=1, kind="stable")  # (m, m): greedy order, ties by id
    gains = np.take_along_axis(counts.done_before, order, axis=1)  # (m, m)
    total = np.cumsum(gains, axis=1)  # (m, m): Σ c over the first j+1 added steps
    size = np.arange(1, m + 1, dtype=np.float64)  # (m,): |D| after each addition
    if objective == "accuracy":
        base = total.astype(np.float64)
    else:
        ratio = total / (counts.vectors[:, None] * size[None, :])
        base = np.where(total > 0, ratio, 0.0)
    scores = base[None] - alphas[:, None, None] * size[None, None, :]  # (A, m, m)
    # The search stops at the first addition whose best candidate scores -1 or less; later ones never happen.
    reached = np.cumprod(scores > -1.0, axis=2).astype(bool)  # (A, m, m)
    live = np.where(reached, scores, -np.inf)
    best = live.max(axis=2)  # (A, m)
    chosen = reached & (live == best[:, :, None]) & (best[:, :, None] >= threshold)  # (A, m, positions)
    edges = np.zeros((len(alphas), m, m), dtype=bool)
    rows = np.broadcast_to(np.arange(m)[None, :, None], chosen.shape)
    cols = np.broadcast_to(order[None], chosen.shape)
    layer = np.broadcast_to(np.arange(len(alphas))[:, None, None], chosen.shape)
    edges[layer[chosen], rows[chosen], cols[chosen]] = True
    edges[:, np.arange(m), np.arange(m)] = False  # a step is never its own pre-condition
    best = np.where(edges.any(axis=2), best, -np.inf)
    return edges, best


def resolve_two_cycles(edges: np.ndarray, best: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Break every two-step cycle ``k ⇄ d`` by keeping the edge of the node with the higher best score.

    Args:
        edges: bool ``(A, m, m)`` pre-condition edges.
        best: float ``(A, m)`` best score of each node.
        rank: int ``(m,)`` or ``(A, m)``: on equal scores the node of lower rank keeps its edge.

    Returns:
        bool ``(A, m, m)`` without two-step cycles (a copy).
    """
    mutual = edges & np.swapaxes(edges, 1, 2)  # (A, m, m)
    rank = np.broadcast_to(rank, best.shape)  # (A, m)
    earlier = rank[:, :, None] < rank[:, None, :]  # (A, m, m): k is listed before d
    # k keeps "k requires d" when its score is higher, or equal and k is listed first.
    keeps = (best[:, :, None] > best[:, None, :]) | ((best[:, :, None] == best[:, None, :]) & earlier)
    return edges & ~(mutual & ~keeps)


def cycle_listing_rank(edges: np.ndarray, nodes: np.ndarray, first_seen: np.ndarray) -> np.ndarray:
    """Which node of each two-step cycle networkx's ``simple_cycles`` names first, as the reference sees it.

    The reference enumerates the cycles of its pre-condition graph (nodes added by first appearance, each node's
    pre-conditions by increasing id) and keeps, on a score tie, the edge of the cycle's first node. networkx's
    search repeatedly takes a strongly connected component, lists every cycle through one of its nodes ``v``
    (starting at ``v``) and deletes ``v``: the node of a pair deleted first is named first. Only that order of
    deletion is replayed here (no cycle is enumerated), with the same networkx calls, so set iteration order
    agrees with the reference's.

    Args:
        edges: bool ``(m, m)`` pre-condition edges of one ``α``, before any cycle is resolved.
        nodes: int ``(m,)`` taxonomy ids (the reference's node labels: they decide set iteration order).
        first_seen: int ``(m,)`` first-appearance rank of each node.

    Returns:
        int ``(m,)`` deletion rank (nodes never deleted rank ``m``).
    """
    import networkx as nx

    rows = np.argsort(first_seen)
    graph = nx.DiGraph(
        (int(nodes[k]), int(nodes[d])) for k in rows for d in np.flatnonzero(edges[k]) if d != k
    )
    components = [c for c in nx.strongly_connected_components(graph) if len(c) >= 2]
    index = {int(s): i for i, s in enumerate(nodes)}
    rank = np.full(len(nodes), len(nodes), dtype=np.int64)
    for position in range(len(nodes)):  # each pass deletes one node
        if not components:
            break
        component = components.pop()
        view = graph.subgraph(component)
        node = next(iter(component))
        rank[index[node]] = position
        graph.remove_node(node)
        components.extend(c for c in nx.strongly_connected_components(view) if len(c) >= 2)
    return rank


def is_acyclic(edges: np.ndarray) -> np.ndarray:
    """Which of a batch of graphs have no cycle, by repeated squaring of the reachability matrix.

    Args:
        edges: bool ``(A, m, m)``.

    Returns:
        bool ``(A,)``.
    """
    # Distinct graphs only: consecutive alphas of the grid mostly give the same edges.
    flat = np.packbits(edges.reshape(len(edges), -1), axis=1)
    distinct, inverse = np.unique(flat, axis=0, return_inverse=True)
    size = edges.shape[-1]
    reach = np.unpackbits(distinct, axis=1, count=size * size).reshape(-1, size, size).astype(np.float32)
    # After t squarings reach covers paths of up to 2**t edges; entries stay small integers (exact in float32).
    for _ in range(int(np.ceil(np.log2(max(size, 2)))) + 1):
        reach = ((reach + reach @ reach) > 0).astype(np.float32)
    acyclic = ~np.asarray(np.diagonal(reach, axis1=1, axis2=2).any(axis=1))
    return acyclic[inverse.ravel()]


def search_alpha(counts: EligibilityCounts, objective: str, threshold: float) -> tuple[np.ndarray, float]:
    """Raise ``α`` over the grid 0, 0.001, 0.002, ... until the pre-condition graph is a DAG (step 3).

    Args:
        counts: the training counts.
        objective: ``"accuracy"`` or ``"precision"``.
        threshold: minimum best score (``1/n``).

    Returns:
        ``(edges, alpha)``: bool ``(m, m)`` acyclic pre-condition edges and the ``α`` that gave them.
    """
    m = len(counts.nodes)
    # Above the largest achievable score no node keeps a pre-condition: the empty graph ends the search.
    ceiling = float(counts.done_before.max()) if objective == "accuracy" else 1.0
    steps = int(np.ceil((ceiling + 1.0) / ALPHA_STEP)) + 1
    grid = np.concatenate([[0.0], np.cumsum(np.full(steps, ALPHA_STEP))])  # accumulated like `alpha += 0.001`
    for start in range(0, len(grid), _ALPHA_CHUNK):
        alphas = grid[start : start + _ALPHA_CHUNK]
        edges, best = greedy_preconditions(counts, objective, alphas, threshold)
        # The reference gives up on a graph with more edges than a DAG can have before resolving any cycle.
        small = edges.sum(axis=(1, 2)) <= m * (m - 1) / 2
        mutual = edges & np.swapaxes(edges, 1, 2)
        tied = (mutual & (best[:, :, None] == best[:, None, :])).any(axis=(1, 2))  # needs the reference's order
        resolved = resolve_two_cycles(edges, best, counts.first_seen)
        fits = small & ~tied & is_acyclic(resolved)
        for a in np.flatnonzero(small):  # in grid order: the first α that gives a DAG wins
            if tied[a]:
                rank = cycle_listing_rank(edges[a], counts.nodes, counts.first_seen)
                resolved[a] = resolve_two_cycles(edges[a : a + 1], best[a : a + 1], rank)[0]
                if is_acyclic(resolved[a : a + 1])[0]:
                    return resolved[a], float(alphas[a])
            elif fits[a]:
                return resolved[a], float(alphas[a])
    raise AssertionError("unreachable: the largest alpha of the grid leaves no edge")


def eligibility_search_graph(
    sequences: Sequence[Sequence[int]],
    step_ids: Sequence[int],
    step_names: Sequence[str],
    config: EligibilitySearchConfig | None = None,
    scenario: str = "",
) -> TaskGraph:
    """The MSGI (accuracy) or MSG² (precision) task graph of some training executions.

    Args:
        sequences: raw key-step id sequences (repeats allowed).
        step_ids: taxonomy ids in matrix order.
        step_names: their names.
        config: objective and execution de-duplication.
        scenario: procedure name stored in the graph.

    Returns:
        The binary DAG (no weights); ``info`` holds the objective and the ``α`` the search settled on.
    """
    config = config or EligibilitySearchConfig()
    step_positions(sequences, step_ids, "training sequence")  # refuses an unknown id
    counts = eligibility_counts(sequences, config.unique_executions)
    edges, alpha = search_alpha(counts, config.objective, 1.0 / len(step_ids))
    position = {int(s): i + 1 for i, s in enumerate(step_ids)}  # TaskGraph layout: START, K_1..K_n, END
    rows = np.array([position[int(s)] for s in counts.nodes], dtype=np.int64)
    adjacency = np.zeros((len(step_ids) + 2, len(step_ids) + 2), dtype=bool)
    adjacency[np.ix_(rows, rows)] = edges
    present = np.isin(np.asarray(step_ids, dtype=np.int64), counts.nodes)
    adjacency = attach_start_end(transitive_reduction(adjacency), present)
    name = next(method for method, objective in OBJECTIVES.items() if objective == config.objective)
    info = {"method": name, "objective": config.objective, "alpha": alpha,
            "unique_executions": config.unique_executions, "n_sequences": len(sequences)}
    return TaskGraph(tuple(step_ids), tuple(step_names), adjacency, None, scenario, info)
