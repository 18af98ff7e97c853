"""Procedure-understanding queries on a task graph: previous, optional, mistaken, missing and future key-steps.

Seminara et al. ("Differentiable Task Graph Learning", NeurIPS 2024) answer five questions about an ongoing
procedure from a learned graph, given the key-step ``K_i`` just done and the set ``J`` of steps done before it:

1. which key-steps are *previous* to ``K_i`` (its pre-conditions), with scores;
2. is ``K_i`` *optional*;
3. how likely is ``K_i`` a *procedural mistake* (done before its pre-conditions);
4. which key-steps are *missing* for ``K_i``, with scores;
5. which key-steps come *next* (future), with probabilities.

Two rules answer them. With the learned weights (the graph before post-processing, saved with most graphs)
the weighted rule applies: the paper's formulas for a row-softmax ``Z`` (DO, TGT), and their noisy-AND
counterparts for per-edge probabilities ``θ`` (the noisy-AND learner, whose model says ``θ[i, j]`` is the
probability that ``K_j`` is a pre-condition of ``K_i``). With a binary graph only (a file without weights) the
binary rules do. Every answer says which rule produced it.

The optional question is the one the binary graph cannot answer: its weighted form needs ``Z``. Without weights
the answer falls back to the optionality learned at training time and stored per step in the graph file
(``TaskGraph.optional_scores``, or "required" when the file has none), and says so (``rule == "binary"``). A
fallback rather than an error, because a live checker must keep working with an older or hand-written graph,
and because stored per-step flags are exactly what the paper uses for the binary graphs it compares with (their
optional flags came from a separate source, not from the graph).

Matrices use the `TaskGraph` layout: nodes ``START, K_1..K_n, END`` (indices ``0..n+1``), ``Z[i, j]`` the
weight of "node ``j`` is a pre-condition of node ``i``". The math lives in small pure functions over index
arrays; `ProcedureQueries` maps step ids to indices, picks the rule and is what a live checker holds.
Numpy only (ground floor).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np

from graphs.common.errors import InputError
from graphs.step_positions import first_occurrences, step_positions
from graphs.task_graph import OPTIONAL_THRESHOLD, TaskGraph

Rule = Literal["weighted", "binary"]

ALPHA: Final = 0.7  # weight of the global optionality against the local one (the paper's value)
EPS: Final = 1e-6  # added to Z before logarithms, as in the TGML loss
UNDEFINED_MISTAKE: Final = 1.0  # a step the graph knows nothing about counts as a mistake (PREGO protocol)


# -- the TGML probabilities ---------------------------------------------------------------------------------
def single_precondition_probability(weights: np.ndarray) -> np.ndarray:
    """``Q[i, p] = P(K_i | K_p, Z) = Z[i, p] / Σ_{h ≠ p} Z[h, p]``: how likely ``K_i`` comes next if only ``K_p``
    was done. The paper's score for "``K_p`` is a previous key-step of ``K_i``" and the building block of the
    mistake and missing scores (the paper's Ego-Exo4D questions).

    For a key-step ``K_i`` the sum runs over the key-steps ``h`` other than ``K_p``, as the paper defines it: the
    question is which key-step comes next, and END is none (with END in the sum, a step that often ends a procedure
    had every one of its successors' scores lowered). The row of END, which only the end-of-procedure missing
    question asks (`weighted_missing_at_end`), is a probability among everything that can follow ``K_p``, END
    included, so that it stays at most 1. A column whose sum is zero gives zeros.

    Args:
        weights: float ``(n+2, n+2)`` weights ``Z``.

    Returns:
        float ``(n+2, n+2)``; row START is zero (START never follows).
    """
    z = np.asarray(weights, dtype=np.float64)
    size = z.shape[0]
    diagonal = np.where((np.arange(size) > 0) & (np.arange(size) < size - 1), np.diagonal(z), 0.0)
    steps = z[1:-1].sum(axis=0) - diagonal  # (n+2,) per column p: Σ over key-steps h ≠ p
    q = np.divide(z, steps, out=np.zeros_like(z), where=steps > 0)
    following = steps + z[-1]  # END can follow too
    q[-1] = np.divide(z[-1], following, out=np.zeros(size), where=following > 0)
    q[0] = 0.0
    return q


def step_probabilities(weights: np.ndarray, done: np.ndarray) -> np.ndarray:
    """TGML step probability of every node not yet done (the paper's future key-step score):
    ``P(K_f | H, Z) = Σ_{j∈H} Z[f, j] / Σ_{h∉H} Σ_{j∈H} Z[h, j]``.

    Args:
        weights: float ``(n+2, n+2)`` weights ``Z``.
        done: bool ``(n+2,)`` the set ``H`` (START is always counted as done).

    Returns:
        float ``(n+2,)``: probabilities over the nodes not in ``H`` (END included), zero for the others; all
        zero when the weights give the candidates no mass.
    """
    z = np.asarray(weights, dtype=np.float64)
    seen = np.asarray(done, dtype=bool).copy()
    seen[0] = True
    mass = np.where(seen, 0.0, z[:, seen].sum(axis=1))  # (n+2,) Σ_{j∈H} Z[h, j] for h ∉ H
    total = mass.sum()
    return mass / total if total > 0 else mass


def sequence_log_likelihoods(weights: np.ndarray, sequences: Sequence[Sequence[int] | np.ndarray]) -> np.ndarray:
    """Log-likelihood of whole executions under the TGML model: ``log P(y) = Σ_t log P(y_t | J_t, Z)`` over
    ``y = <S, y_1..y_m, E>`` (END is the last target), with ``eps`` added to ``Z`` before the logs.

    Vectorised over all positions of all sequences: ``M`` marks what was seen before each position and
    ``F = M (Z + eps)ᵀ`` gives every numerator ``F[t, y_t]`` and denominator ``Σ_h (1 − M[t, h]) F[t, h]``.

    Args:
        weights: float ``(n+2, n+2)`` weights ``Z``.
        sequences: executions as key-step *indices* ``1..n`` (no repeats, no START/END).

    Returns:
        float ``(len(sequences),)``.
    """
    z = np.asarray(weights, dtype=np.float64) + EPS
    size = z.shape[0]
    if not sequences:
        return np.zeros(0)
    lengths = np.array([len(s) + 1 for s in sequences])  # + END
    targets = np.concatenate([np.r_[np.asarray(s, dtype=np.int64), size - 1] for s in sequences])  # (R,)
    owner = np.repeat(np.arange(len(sequences)), lengths)  # (R,)
    one_hot = np.zeros((len(targets), size))
    one_hot[np.arange(len(targets)), targets] = 1.0
    before = np.cumsum(one_hot, axis=0) - one_hot  # (R, N) everything seen earlier in the packed array
    first_row = np.r_[0, np.cumsum(lengths)[:-1]]
    observed = before - before[first_row][owner]  # (R, N) only this sequence's earlier steps
    observed[:, 0] = 1.0  # START
    f = observed @ z.T  # (R, N): F[t, h] = Σ_j Z[h, j] M[t, j]
    numerator = f[np.arange(len(targets)), targets]
    denominator = ((1.0 - observed) * f).sum(axis=1)
    return np.bincount(owner, weights=np.log(numerator) - np.log(denominator), minlength=len(sequences))


# -- the five queries, weighted rule ------------------------------------------------------------------------
# (weights, executions as key-step indices 1..n) -> log-likelihood of each execution.
LogLikelihoods = Callable[[np.ndarray, Sequence[Sequence[int] | np.ndarray]], np.ndarray]

# Positions x nodes that one likelihood call may hold (each of its float64 (positions, nodes) matrices: 32 MiB). The
# leave-one-out executions of `global_optionality` hold D·L² positions: at 400 steps an unbounded call needed 23 GB.
LIKELIHOOD_BATCH_CELLS: Final = 1 << 22


def batched_log_likelihoods(
    log_likelihoods: LogLikelihoods, weights: np.ndarray, sequences: Sequence[Sequence[int] | np.ndarray],
    cells: int | None = None,
) -> np.ndarray:
    """``log_likelihoods(weights, sequences)``, called on consecutive batches of about ``cells`` positions × nodes
    (default `LIKELIHOOD_BATCH_CELLS`).

    Each execution's likelihood is its own sum, so the batches change the memory a call holds, not the result; a
    set that fits in one batch is one call, as before. A batch may hold only empty executions.
    """
    if not sequences:
        return np.zeros(0)
    cells = LIKELIHOOD_BATCH_CELLS if cells is None else cells
    size = np.asarray(weights).shape[0]
    cost = (np.array([len(s) for s in sequences], dtype=np.int64) + 1) * size  # + END's position
    batch = (np.cumsum(cost) - cost) // max(int(cells), 1)  # (len,) non-decreasing batch index
    starts = np.flatnonzero(np.r_[True, batch[1:] != batch[:-1]])
    ends = np.r_[starts[1:], len(sequences)]
    parts = [log_likelihoods(weights, sequences[int(a):int(b)]) for a, b in zip(starts, ends, strict=True)]
    return np.concatenate(parts)


def global_optionality(
    weights: np.ndarray,
    sequences: Sequence[Sequence[int] | np.ndarray],
    log_likelihoods: LogLikelihoods = sequence_log_likelihoods,
) -> np.ndarray:
    """Global optionality ``O_g`` of every key-step, from the training executions (the paper's global score).

    For an execution ``y`` containing ``K_i``, with ``fr`` the fraction of executions that contain ``K_i``:
    ``O_y = P(y − K_i)(1 − fr) / (P(y − K_i)(1 − fr) + P(y) fr)``, the posterior that ``y`` would be just as
    plausible without ``K_i``; ``K_i`` looks optional in ``y`` when ``O_y > 0.5``. ``O_g(K_i)`` is the fraction
    of the executions containing ``K_i`` where it does. A step in every execution (``fr = 1``) gets 0; one in
    none gets 0 too (nothing says it may be skipped). Computed in log space.

    Args:
        weights: float ``(n+2, n+2)`` weights ``Z``.
        sequences: executions as key-step indices ``1..n``, first occurrences only.
        log_likelihoods: ``P(y)`` of the model the weights belong to (default DO's TGML likelihood; a learner
            with another parametrisation of the weights passes its own).

    Returns:
        float ``(n,)`` in [0, 1], key-steps in matrix order.
    """
    n = np.asarray(weights).shape[0] - 2
    runs = [np.asarray(s, dtype=np.int64) for s in sequences if len(s)]
    if not runs:
        return np.zeros(n)
    contains = np.zeros((len(runs), n + 2), dtype=bool)
    for d, run in enumerate(runs):
        contains[d, run] = True
    frequency = contains.mean(axis=0)  # (n+2,)
    # Every execution, then every execution with one of its steps left out.
    variants = [np.delete(run, t) for run in runs for t in range(len(run))]
    loglik = batched_log_likelihoods(log_likelihoods, weights, runs + variants)
    whole, without = loglik[: len(runs)], loglik[len(runs):]
    owner = np.repeat(np.arange(len(runs)), [len(r) for r in runs])
    removed = np.concatenate(runs)
    with np.errstate(divide="ignore"):  # fr = 1 gives log 0 = -inf: never optional, as intended
        skip = without + np.log1p(-frequency[removed])
        keep = whole[owner] + np.log(frequency[removed])
    votes = np.bincount(removed, weights=(skip > keep).astype(np.float64), minlength=n + 2)
    counts = contains.sum(axis=0)
    scores = np.divide(votes, counts, out=np.zeros(n + 2), where=counts > 0)
    return scores[1:-1]


def local_optionality(weights: np.ndarray, step: int, done: np.ndarray) -> float:
    """Local optionality ``O_l`` of ``K_i`` right now: the likelihood of the prefix with ``K_i`` replaced by END
    (finishing now), against the prefix continued by ``K_i``.

    The prefix ``J`` is shared by both, so its likelihood cancels and what is left is
    ``P(E | J, Z) / (P(E | J, Z) + P(K_i | J, Z))``, a number in [0, 1] like ``O_g`` (the raw prefix
    likelihood shrinks with every step and could not be mixed with a fraction).

    Args:
        weights: float ``(n+2, n+2)`` weights ``Z``.
        step: index of ``K_i``.
        done: bool ``(n+2,)`` the set ``J`` of steps done before it.

    Returns:
        ``O_l``; 0 when the weights give neither END nor ``K_i`` any mass.
    """
    seen = np.asarray(done, dtype=bool).copy()
    seen[step] = False
    probability = step_probabilities(weights, seen)
    end, here = probability[-1], probability[step]
    return float(end / (end + here)) if end + here > 0 else 0.0


def optionality(global_score: float, local_score: float, alpha: float = ALPHA) -> float:
    """The paper's optionality ``O(K_i) = α O_g(K_i) + (1 − α) O_l(K_i)`` (α = 0.7); optional above 0.5."""
    return alpha * global_score + (1.0 - alpha) * local_score


def weighted_mistake(q: np.ndarray, step: int, done: np.ndarray) -> float:
    """Procedural-mistake score ``Σ_p 1(K_p ∉ J) P(K_i | K_p, Z)`` over the key-steps ``K_p ≠ K_i``.

    Args:
        q: ``single_precondition_probability(Z)``.
        step: index of ``K_i``.
        done: bool ``(n+2,)`` the set ``J``.

    Returns:
        The score (not bounded by 1: it adds one probability per pre-condition not met).
    """
    return float(weighted_missing(q, step, done).sum())


def weighted_missing(q: np.ndarray, step: int, done: np.ndarray) -> np.ndarray:
    """Missing-step scores ``1(K_m ∉ J) P(K_i | K_m, Z)`` for every key-step ``K_m ≠ K_i``.

    Args:
        q: ``single_precondition_probability(Z)``.
        step: index of ``K_i``.
        done: bool ``(n+2,)`` the set ``J``.

    Returns:
        float ``(n+2,)``; zero for START, END, ``K_i`` and the steps in ``J``.
    """
    candidate = _key_steps(len(done)) & ~np.asarray(done, dtype=bool)
    candidate[step] = False
    return np.where(candidate, q[step], 0.0)


def weighted_missing_at_end(q: np.ndarray, done: np.ndarray) -> np.ndarray:
    """Missing-step scores when the procedure ends: the missing score of each ``K_m ∉ J`` for every step that
    was done and for END, keeping the largest, ``max_{i ∈ J ∪ {E}} 1(K_m ∉ J) P(K_i | K_m, Z)``.

    The paper asks the missing question for the current step; at the end the current step is END, whose own
    pre-conditions are only the last steps, so a step forgotten mid-way is found through the steps that needed
    it (what a live checker asking the question at every step has seen).

    Args:
        q: ``single_precondition_probability(Z)``.
        done: bool ``(n+2,)`` the set ``J`` of steps done.

    Returns:
        float ``(n+2,)``; zero for START, END and the steps in ``J``.
    """
    seen = np.asarray(done, dtype=bool)
    askers = seen.copy()
    askers[0] = False
    askers[-1] = True
    candidate = _key_steps(len(seen)) & ~seen
    return np.where(candidate, q[askers].max(axis=0), 0.0)


def _key_steps(size: int) -> np.ndarray:
    """Bool ``(size,)`` over the nodes ``START, K_1..K_n, END``: True at the key-steps, False at START and END."""
    mask = np.ones(size, dtype=bool)
    mask[[0, size - 1]] = False
    return mask


# -- the weighted rule for per-edge probabilities (noisy-AND graphs) -----------------------------------------
# θ[i, j] is the probability that K_j is a pre-condition of K_i, edges independent (tgml.learners.noisy_and.loss); a
# step is ready when all its pre-conditions are done, so the paper's questions become products over the steps not done.
def log_not_required(theta: np.ndarray) -> np.ndarray:
    """``log(1 − θ)``: the log-probability that ``K_j`` is *not* a pre-condition of ``K_i``, for every pair (computed
    once per graph; θ = 1 is held just below 1, whose log would be −∞).

    Args:
        theta: float ``(n+2, n+2)`` edge probabilities (START / END rows and columns 0).

    Returns:
        float ``(n+2, n+2)``, at most 0.
    """
    return np.log1p(-np.clip(np.asarray(theta, dtype=np.float64), 0.0, 1.0 - 1e-12))


def readiness(log_free: np.ndarray, done: np.ndarray) -> np.ndarray:
    """Probability that each node is ready given the steps done: ``ready(h) = Π_{j ∉ H} (1 − θ[h, j])``, as
    ``exp(log(1 − θ) · 1(j ∉ H))``.

    Args:
        log_free: `log_not_required` of the edge probabilities (or some of its rows).
        done: bool ``(n+2,)`` the set ``H``.

    Returns:
        float, one per row of ``log_free``, in [0, 1].
    """
    return np.exp(log_free @ (~np.asarray(done, dtype=bool)).astype(np.float64))


def edge_probability_future(log_free: np.ndarray, done: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Next-step probability of the noisy-AND model: the next step is drawn uniformly among the ready ones, so
    ``P(K_f | H) = ready(f) / Σ_h ready(h)`` over the candidates (which steps an execution still holds is unknown
    online, so every key-step not done and seen in training is one).

    Args:
        log_free: `log_not_required` of the edge probabilities.
        done: bool ``(n+2,)`` the set ``H`` (the current step included).
        candidates: bool ``(n+2,)`` the steps that may come next.

    Returns:
        float ``(n+2,)``, zero outside the candidates; all zero when no candidate can be ready.
    """
    ready = np.where(candidates, readiness(log_free, done), 0.0)
    total = ready.sum()
    return ready / total if total > 0 else ready


def edge_probability_mistake(log_free: np.ndarray, step: int, done: np.ndarray) -> float:
    """Mistake score ``1 − ready(K_i) = 1 − Π_{p ∉ J} (1 − θ[i, p])``: the probability that some pre-condition of
    ``K_i`` is not done (START always is); ``log_free`` is `log_not_required` of the edge probabilities."""
    seen = np.asarray(done, dtype=bool).copy()
    seen[[0, step]] = True
    return float(1.0 - readiness(log_free[step : step + 1], seen)[0])


def edge_probability_missing(theta: np.ndarray, step: int, done: np.ndarray) -> np.ndarray:
    """Missing-step scores ``1(K_m ∉ J) θ[i, m]``: the probability that ``K_m``, not done, is a pre-condition of
    ``K_i``.

    Returns:
        float ``(n+2,)``; zero for START, END, ``K_i`` and the steps in ``J``.
    """
    candidate = _key_steps(len(done)) & ~np.asarray(done, dtype=bool)
    candidate[step] = False
    return np.where(candidate, np.asarray(theta, dtype=np.float64)[step], 0.0)


# -- the binary rules ----------------------------------------------------------------------------------------
def binary_previous(adjacency: np.ndarray, step: int) -> np.ndarray:
    """Previous key-steps from a binary graph: the pre-conditions of ``K_i``, each scored ``1/|pre(K_i)|``
    (START is not a key-step and is left out of both).

    Returns:
        float ``(n+2,)``.
    """
    required = np.asarray(adjacency, dtype=bool)[step] & _key_steps(len(adjacency))
    return required / required.sum() if required.any() else required.astype(np.float64)


def binary_mistake(adjacency: np.ndarray, step: int, done: np.ndarray) -> float:
    """Mistake score from a binary graph: ``Σ_{p ∈ pre(K_i)} 1(K_p ∉ J) / |pre(K_i)|`` (START is always done).

    A step without any pre-condition (not learned, or removed in training) scores `UNDEFINED_MISTAKE`, as the
    online mistake-detection protocol counts it.
    """
    required = np.asarray(adjacency, dtype=bool)[step]
    if not required.any():
        return UNDEFINED_MISTAKE
    seen = np.asarray(done, dtype=bool).copy()
    seen[0] = True
    return float((required & ~seen).sum() / required.sum())


def binary_missing(adjacency: np.ndarray, step: int, done: np.ndarray) -> np.ndarray:
    """Missing steps from a binary graph: the unmet pre-conditions of ``K_i``, each scored ``1/|unmet|``.

    Returns:
        float ``(n+2,)``.
    """
    seen = np.asarray(done, dtype=bool).copy()
    seen[0] = True
    unmet = np.asarray(adjacency, dtype=bool)[step] & ~seen
    return unmet / unmet.sum() if unmet.any() else unmet.astype(np.float64)


def binary_missing_at_end(adjacency: np.ndarray, done: np.ndarray) -> np.ndarray:
    """Missing steps at the end from a binary graph: the unmet pre-conditions of every step done and of END,
    each scored ``1/|unmet|`` (the binary counterpart of `weighted_missing_at_end`).

    Returns:
        float ``(n+2,)``.
    """
    adj = np.asarray(adjacency, dtype=bool)
    seen = np.asarray(done, dtype=bool).copy()
    seen[0] = True
    askers = seen.copy()
    askers[0] = False
    askers[-1] = True
    unmet = adj[askers].any(axis=0) & ~seen
    return unmet / unmet.sum() if unmet.any() else unmet.astype(np.float64)


def binary_future(adjacency: np.ndarray, step: int, done: np.ndarray) -> np.ndarray:
    """Future key-steps from a binary graph: with ``H = J ∪ {K_i}``, each successor ``K_f ∉ H`` of ``K_i`` (a
    key-step that has ``K_i`` as pre-condition) scores ``1 / (|succ(K_i)| + |pre(K_f) − H|)``, then the scores
    are normalised to sum to 1 (fewer unmet pre-conditions: more likely next).

    Args:
        adjacency: bool ``(n+2, n+2)``.
        step: index of ``K_i``.
        done: bool ``(n+2,)`` the set ``J``.

    Returns:
        float ``(n+2,)``; all zero when ``K_i`` has no successor left.
    """
    adj = np.asarray(adjacency, dtype=bool)
    history = np.asarray(done, dtype=bool).copy()
    history[[0, step]] = True
    every = adj[:, step] & _key_steps(len(adj))  # succ(K_i), done or not: the formula's |succ(K_i)| counts them all
    successors = every & ~history
    if not successors.any():
        return np.zeros(len(adj))
    unmet = (adj & ~history).sum(axis=1)  # (n+2,) |pre(K_f) − H|
    raw = np.where(successors, 1.0 / (every.sum() + unmet), 0.0)
    return raw / raw.sum()


# -- answers for step ids ------------------------------------------------------------------------------------
def rank_steps(scores: np.ndarray, step_ids: Sequence[int]) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """``(steps, scores)``: the ids of ``step_ids`` scoring above 0, highest first (ties in ``step_ids`` order),
    and their scores.

    Args:
        scores: float ``(n,)``, one per step of ``step_ids``.
        step_ids: the step ids, in the order of ``scores``.
    """
    order = np.argsort(-scores, kind="stable")
    order = order[scores[order] > 0]
    return tuple(step_ids[k] for k in order), tuple(float(scores[k]) for k in order)


@dataclass(frozen=True)
class RankedSteps:
    """Key-steps with scores, highest first (ties in graph order); steps scoring 0 are left out.

    Attributes:
        rule: ``"weighted"`` (the learned weights) or ``"binary"`` (the binary graph only).
        steps: step ids, best first.
        scores: their scores, same order.
    """

    rule: Rule
    steps: tuple[int, ...]
    scores: tuple[float, ...]

    def score(self, step: int) -> float:
        """Score of one step (0 when it is not listed)."""
        return self.scores[self.steps.index(step)] if step in self.steps else 0.0

    def top(self, k: int) -> tuple[int, ...]:
        """The ``k`` best steps."""
        return self.steps[:k]


@dataclass(frozen=True)
class StepScore:
    """A single score about one step, and the rule that gave it."""

    rule: Rule
    value: float


class ProcedureQueries:
    """The five questions for one task graph, asked with step ids (what a live checker holds, with the history).

    Uses the weighted rule when the graph has weights: the paper's formulas for a row-softmax
    (`TaskGraph.row_softmax_weights`: DO's, TGT's) and their noisy-AND forms for per-edge probabilities
    (`TaskGraph.edge_probability_weights`); the binary rule otherwise (``rule`` says which).
    ``history`` arguments are the step ids done before the current step, in any order, repeats allowed; ids the
    graph does not know are ignored there.

    Args:
        graph: the task graph (its weights, binary pre-conditions and stored optionality scores).
    """

    def __init__(self, graph: TaskGraph) -> None:
        self.graph = graph
        self._weights = graph.row_softmax_weights
        self._theta = graph.edge_probability_weights
        self._log_free = log_not_required(self._theta) if self._theta is not None else None
        self.rule: Rule = "weighted" if self._weights is not None or self._theta is not None else "binary"
        self._q = single_precondition_probability(self._weights) if self._weights is not None else None
        size = graph.n_steps + 2
        self._learned = np.ones(size, dtype=bool)  # steps that were seen in training (the others are removed)
        self._learned[[graph.index(s) for s in graph.removed_steps]] = False
        self._global = np.zeros(graph.n_steps) if graph.optional_scores is None else graph.optional_scores
        self._position = {s: k + 1 for k, s in enumerate(graph.step_ids)}

    @property
    def step_ids(self) -> tuple[int, ...]:
        """The graph's key-steps, in matrix order."""
        return self.graph.step_ids

    # -- helpers ------------------------------------------------------------------------------------------
    def _index(self, step: int) -> int | None:
        return self._position.get(step)

    def _done(self, history: Iterable[int]) -> np.ndarray:
        """The steps done, bool ``(n+2,)`` over the nodes: START and each step of ``history`` (an unknown id: START)."""
        done = np.zeros(self.graph.n_steps + 2, dtype=bool)
        done[0] = True
        done[[self._position.get(s, 0) for s in history]] = True  # an unknown id marks START, already done
        return done

    def _ranked(self, scores: np.ndarray, rule: Rule | None = None) -> RankedSteps:
        """The key-steps (``scores`` in node order, START and END dropped) as `rank_steps` orders them."""
        return RankedSteps(rule or self.rule, *rank_steps(scores[1:-1], self.graph.step_ids))

    def _empty(self) -> RankedSteps:
        return RankedSteps(self.rule, (), ())

    # -- the queries --------------------------------------------------------------------------------------
    def previous(self, step: int) -> RankedSteps:
        """Key-steps that come before ``step`` (its pre-conditions), scored ``P(K_i | K_p, Z)``, the edge
        probability ``θ[i, p]``, or ``1/|pre(K_i)|`` (binary)."""
        i = self._index(step)
        if i is None:
            return self._empty()
        scores = self._q if self._q is not None else self._theta
        if scores is None:
            return self._ranked(binary_previous(self.graph.adjacency, i))
        others = _key_steps(len(scores))
        others[i] = False  # weights that count repeats (Count-Based) may link a step to itself
        return self._ranked(np.where(others, scores[i], 0.0))

    def optional(self, step: int, history: Iterable[int] | None = None) -> StepScore:
        """Optionality of ``step`` (optional above 0.5).

        Weighted: ``α O_g + (1 − α) O_l`` with the stored ``O_g`` and, given the ``history``, the local
        ``O_l`` (without a history only ``O_g``). Edge probabilities (END is not in their model, so no local
        term) and binary (no weights): the stored ``O_g`` alone; 0 (required) when the file stores none, and for
        a step the graph does not know.
        """
        i = self._index(step)
        if i is None:
            return StepScore(self.rule, 0.0)
        stored = float(self._global[i - 1])
        if self._weights is None or history is None:
            return StepScore(self.rule, stored)
        local = local_optionality(self._weights, i, self._done(history))
        return StepScore(self.rule, optionality(stored, local))

    def mistake(self, step: int, history: Iterable[int]) -> StepScore:
        """Procedural-mistake score of ``step`` done after ``history``; a step unknown to the graph or removed
        in training scores `UNDEFINED_MISTAKE` under both rules."""
        i = self._index(step)
        if i is None or not self._learned[i]:
            return StepScore(self.rule, UNDEFINED_MISTAKE)
        done = self._done(history)
        if self._q is not None:
            return StepScore(self.rule, weighted_mistake(self._q, i, done))
        if self._log_free is not None:
            return StepScore(self.rule, edge_probability_mistake(self._log_free, i, done))
        return StepScore(self.rule, binary_mistake(self.graph.adjacency, i, done))

    def missing(self, step: int, history: Iterable[int]) -> RankedSteps:
        """Key-steps missing for ``step`` done after ``history``; steps removed in training are never missing."""
        i = self._index(step)
        if i is None:
            return self._empty()
        done = self._done(history)
        if self._q is not None:
            scores = weighted_missing(self._q, i, done)
        elif self._theta is not None:
            scores = edge_probability_missing(self._theta, i, done)
        else:
            scores = binary_missing(self.graph.adjacency, i, done)
        return self._ranked(np.where(self._learned, scores, 0.0))

    def missing_at_end(self, history: Iterable[int]) -> RankedSteps:
        """Key-steps missing when the procedure ends after ``history``: the end-of-procedure missing score
        times ``1 − O_g`` (a step the training executions often skip is less likely forgotten).

        Edge probabilities use the binary rule here and say so: END is not in their model, so only the binary
        graph (where post-processing makes END need the last steps) knows what the procedure must end with.
        """
        done = self._done(history)
        if self._q is None:
            scores = binary_missing_at_end(self.graph.adjacency, done)
        else:
            scores = weighted_missing_at_end(self._q, done)
        required = np.r_[0.0, 1.0 - self._global, 0.0]
        rule: Rule = "weighted" if self._q is not None else "binary"
        return self._ranked(np.where(self._learned, scores * required, 0.0), rule)

    def future(self, step: int | None, history: Iterable[int]) -> RankedSteps:
        """Key-steps likely next after ``step`` (done after ``history``), with their probabilities.

        Weighted: the TGML step probability given ``H = history ∪ {step}`` (END takes the rest of the mass and
        is not listed), or with edge probabilities the noisy-AND next-step probability over the steps not done
        (`edge_probability_future`). Binary: the normalised successor scores. ``step`` None: nothing done yet,
        START is the step just done (a live stream before its first key-step).
        """
        done = self._done(history)
        i = 0 if step is None else self._index(step)
        if i is not None:
            done[i] = True
        if self._log_free is not None:
            candidates = _key_steps(len(done)) & ~done & self._learned
            return self._ranked(edge_probability_future(self._log_free, done, candidates))
        if self._weights is None:
            if i is None:
                return self._empty()
            return self._ranked(binary_future(self.graph.adjacency, i, done))
        probability = step_probabilities(self._weights, done)
        return self._ranked(np.where(_key_steps(len(done)), probability, 0.0))


def learn_optional_scores(
    graph: TaskGraph, sequences: Iterable[Sequence[int]], log_likelihoods: LogLikelihoods = sequence_log_likelihoods
) -> TaskGraph:
    """The graph with its global optionality scores learned from the training executions.

    Args:
        graph: a graph with weights (the TGML likelihood needs them).
        sequences: the training executions as step ids, repeats allowed (first occurrences are used).
        log_likelihoods: likelihood of executions under the graph's weights (`global_optionality`).

    Returns:
        A copy of ``graph`` with ``optional_scores`` set (`global_optionality`).
    """
    if graph.weights is None:
        raise InputError("optional steps: the graph has no weights, so the likelihood of executions is unknown")
    runs = [(first_occurrences(positions) + 1).tolist()  # the matrix's rows: START first
            for positions in step_positions(sequences, graph.step_ids, "optional steps: sequence", "the graph")]
    scores = global_optionality(graph.weights, runs, log_likelihoods)
    return TaskGraph(graph.step_ids, graph.step_names, graph.adjacency, graph.weights, graph.scenario, graph.info,
                     scores)


__all__ = [
    "ALPHA",
    "OPTIONAL_THRESHOLD",
    "ProcedureQueries",
    "RankedSteps",
    "StepScore",
    "batched_log_likelihoods",
    "binary_future",
    "binary_missing",
    "binary_missing_at_end",
    "binary_mistake",
    "binary_previous",
    "edge_probability_future",
    "edge_probability_missing",
    "edge_probability_mistake",
    "global_optionality",
    "learn_optional_scores",
    "local_optionality",
    "log_not_required",
    "optionality",
    "readiness",
    "sequence_log_likelihoods",
    "single_precondition_probability",
    "step_probabilities",
    "weighted_missing",
    "weighted_missing_at_end",
    "weighted_mistake",
]
