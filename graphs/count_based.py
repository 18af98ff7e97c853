"""Count-Based baseline: the transition-count task graph of Ashutosh et al. ("Video-Mined Task Graphs for
Keystep Recognition"), built as the TGML paper's baseline (Seminara et al., NeurIPS 2024).

How the graph is made (numpy + networkx, no gradient):

1. ``counts[a, b]`` = how often key-step ``b`` directly follows ``a`` in a training sequence written
   ``<S, y_1, ..., y_m, E>``; the paper's baseline keeps repeated steps (its de-duplication never fires), so
   that is the default here too.
2. ``P = counts`` row-normalised (probability of the next step given the current one) and the pre-condition
   score ``C[a, x] = P[a, x] / Σ_a' P[a', x]`` (how much of ``x``'s incoming mass comes from ``a``).
3. Every node gets the pre-condition(s) of maximal score (ties kept).
4. Cycles are broken by dropping their least likely transition (``P``); a step left without pre-condition
   gets its best-scoring one that keeps the graph acyclic, a step nothing depends on gets its most likely
   successor that keeps it acyclic; then remaining orphans hang from ``S`` / ``E`` and the graph is
   transitively reduced.

Steps never seen in training are not nodes: at test time they have no pre-condition and count as mistakes
(the PREGO protocol, docs/method.md). The weights saved with the graph are the scores ``C`` in the
`TaskGraph` layout (``weights[x, a] = C[a, x]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from graphs.common.settings_files import check_settings
from graphs.step_positions import first_occurrences, step_positions
from graphs.task_graph import TaskGraph

if TYPE_CHECKING:  # networkx loads in the functions that run a graph algorithm: its import costs 0.1 s
    import networkx as nx  # that every command reading this module's settings would pay

METHOD_NAME: Final = "count-based"


@dataclass(frozen=True)
class CountBasedConfig:
    """Settings of the Count-Based baseline.

    Args:
        first_occurrence: drop repeated key-steps before counting (``BACAD -> BACD``). The published baseline
            counts the raw sequences (False).
    """

    first_occurrence: bool = False

    def __post_init__(self) -> None:
        check_settings(self)  # its one setting is true or false: no BOUNDS


def transition_counts(
    sequences: Sequence[Sequence[int]], step_ids: Sequence[int], first_occurrence: bool = False
) -> np.ndarray:
    """Count direct transitions in ``<S, y..., E>`` sequences (step 1 of the module docstring).

    Args:
        sequences: key-step id sequences; ids outside ``step_ids`` raise `InputError`.
        step_ids: taxonomy ids ``K_1..K_n`` in matrix order.
        first_occurrence: keep only the first occurrence of each step.

    Returns:
        int ``(n+2, n+2)`` matrix in ``START, K_1..K_n, END`` order, ``[a, b]`` = #times ``b`` follows ``a``.
    """
    n = len(step_ids)
    sources: list[np.ndarray] = []
    for positions in step_positions(sequences, step_ids, "training sequence"):
        if first_occurrence:
            positions = first_occurrences(positions)
        sources.append(np.concatenate([[0], positions + 1, [n + 1]]))  # START, K_1..K_n, END
    counts = np.zeros((n + 2, n + 2), dtype=np.int64)
    if sources:
        path = np.concatenate([s[:-1] for s in sources]), np.concatenate([s[1:] for s in sources])
        np.add.at(counts, path, 1)
    return counts


def transition_probabilities(counts: np.ndarray) -> np.ndarray:
    """Row-normalise transition counts into ``P(next = b | current = a)``; rows without data stay zero."""
    totals = counts.sum(axis=1, keepdims=True).astype(np.float64)
    return np.divide(counts, totals, out=np.zeros(counts.shape, dtype=np.float64), where=totals > 0)


def precondition_scores(probabilities: np.ndarray) -> np.ndarray:
    """Column-normalise transition probabilities: ``C[a, x] = P[a, x] / Σ_a' P[a', x]`` (zero columns stay zero)."""
    totals = probabilities.sum(axis=0, keepdims=True)
    return np.divide(probabilities, totals, out=np.zeros_like(probabilities), where=totals > 0)


def _acyclic_with(graph: nx.DiGraph, u: int, v: int) -> bool:
    """Add edge ``u -> v`` and keep it if the graph stays a DAG (the reference's greedy repair)."""
    import networkx as nx

    graph.add_edge(u, v)
    if nx.is_directed_acyclic_graph(graph):
        return True
    graph.remove_edge(u, v)
    return False


def count_based_adjacency(counts: np.ndarray) -> np.ndarray:
    """The binary Count-Based DAG from transition counts (steps 2-4 of the module docstring).

    Args:
        counts: ``(n+2, n+2)`` transition counts, ``START..END`` order.

    Returns:
        bool ``(n+2, n+2)`` in `TaskGraph` layout: ``[x, a]`` iff ``a`` is a pre-condition of ``x``.
    """
    import networkx as nx

    size = counts.shape[0]
    start, end = 0, size - 1
    prob = transition_probabilities(counts)
    score = precondition_scores(prob)
    present = (counts.sum(axis=0) + counts.sum(axis=1)) > 0
    present[[start, end]] = True
    # Node order matters for the greedy repairs below: START, steps by first use in training, END.
    seen_order = [int(i) for i in np.flatnonzero(present) if i not in (start, end)]
    order = [start, *seen_order, end]
    rank = {node: k for k, node in enumerate(order)}

    # "before" orientation while building: a -> x means a comes before (is a pre-condition of) x.
    graph = nx.DiGraph()
    for x in order:
        graph.add_node(x)
        column = score[:, x]
        best = column.max()
        if best > 0:
            graph.add_edges_from((int(a), x) for a in np.flatnonzero(column == best))

    for listed in nx.simple_cycles(graph.copy()):
        if len(listed) == 1:
            graph.remove_edges_from([(listed[0], listed[0])])
            continue
        # The reference compares the consecutive pairs of the listed cycle only (not the closing edge), so the
        # result depends on where the listing starts; we start it at the node added last, which is independent
        # of the networkx version and reproduces the published EPIC-Tent-O figures exactly.
        first = max(range(len(listed)), key=lambda k: rank[listed[k]])
        cycle = listed[first:] + listed[:first]
        pairs = list(zip(cycle[:-1], cycle[1:], strict=True))
        weights = np.array([prob[a, b] for a, b in pairs])
        if weights.min() < 1.0:
            a, b = pairs[int(np.argmin(weights))]
            if graph.has_edge(a, b):
                graph.remove_edge(a, b)
    # Whatever survived (cycles of certain transitions) is cut at its weakest edge, closing edge included.
    while True:
        try:
            cycle_edges = nx.find_cycle(graph)
        except nx.NetworkXNoCycle:
            break
        graph.remove_edge(*min(cycle_edges, key=lambda e: prob[e[0], e[1]]))

    def by_score(values: np.ndarray) -> list[int]:
        candidates = [int(i) for i in np.flatnonzero(values > 0) if int(i) in rank]
        return sorted(candidates, key=lambda i: (-values[i], rank[i]))

    for x in order:
        if x != start and graph.in_degree(x) == 0:
            for a in by_score(score[:, x]):
                if a != x and _acyclic_with(graph, a, x):
                    break
    for x in order:
        if x != end and graph.out_degree(x) == 0:
            for b in by_score(prob[x]):
                if b != x and _acyclic_with(graph, x, b):
                    break
    for x in order:
        if x not in (start, end):
            if graph.in_degree(x) == 0:
                graph.add_edge(start, x)
            if graph.out_degree(x) == 0:
                graph.add_edge(x, end)
    reduced = nx.transitive_reduction(graph)
    adjacency = np.zeros((size, size), dtype=bool)
    for a, x in reduced.edges():
        adjacency[x, a] = True
    return adjacency


def count_based_graph(
    sequences: Sequence[Sequence[int]],
    step_ids: Sequence[int],
    step_names: Sequence[str],
    config: CountBasedConfig | None = None,
    scenario: str = "",
) -> TaskGraph:
    """Build the Count-Based task graph from training sequences.

    Args:
        sequences: raw key-step id sequences of the training videos (repeats kept).
        step_ids: taxonomy ids in matrix order.
        step_names: their names.
        config: baseline settings (defaults reproduce the published baseline).
        scenario: procedure name stored with the graph.

    Returns:
        The binary DAG, with the pre-condition scores as weights.
    """
    config = config or CountBasedConfig()
    counts = transition_counts(sequences, step_ids, config.first_occurrence)
    adjacency = count_based_adjacency(counts)
    weights = precondition_scores(transition_probabilities(counts)).T
    info = {"method": METHOD_NAME, "first_occurrence": config.first_occurrence, "n_sequences": len(sequences)}
    return TaskGraph(tuple(step_ids), tuple(step_names), adjacency, weights, scenario, info)
