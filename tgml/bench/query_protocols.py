"""Offline protocols for the five procedure questions, on held-out executions (scores, labels and metrics).

Each protocol turns one held-out execution (or a ground-truth graph) into scored items with 0/1 labels, asked
through the calls of `graphs.procedure_queries.ProcedureQueries` (`Answering`), so any graph learner, and the
graph-free `tgml.bench.frequency_answers.FrequencyAnswers`, can be measured the same way:

- *missing*: one step ``m`` is deleted from a correct execution; the question is asked at the end
  (`ProcedureQueries.missing_at_end`) and at the first later step that needed ``m`` (`ProcedureQueries.missing`).
  Items are the key-steps not done at that point, labelled 1 for ``m``.
- *mistake*: each step of an execution scored online (`ProcedureQueries.mistake`) against given labels.
- *future*: at each step, the next new step of the execution ranked among the steps not done yet.
- *previous*: every (step, other step) pair, labelled by the ground-truth graph's pre-conditions.
- *optional*: each step of an execution scored online, labelled by whether some correct execution skips it.

Metrics: average precision over pooled items, F1 at a threshold chosen on training data, top-k accuracy with
ties broken at random (in expectation). Numpy only; no training here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import numpy as np

from graphs.eligibility_search import eligibility_counts
from graphs.precision_recall import Scores, measured, precision_recall_f1
from graphs.task_graph import START, TaskGraph

TOP_K: Final = (1, 3)

# needs(step, deleted): does ``step`` need ``deleted`` to have been done first? (ground truth or a proxy)
Needs = Callable[[int, int], bool]


class Ranked(Protocol):
    """Steps with scores, best first (`graphs.procedure_queries.RankedSteps`)."""

    @property
    def steps(self) -> tuple[int, ...]: ...

    @property
    def scores(self) -> tuple[float, ...]: ...


class Scored(Protocol):
    """One score (`graphs.procedure_queries.StepScore`)."""

    @property
    def value(self) -> float: ...


class Answering(Protocol):
    """What answers the five questions for the protocols (`graphs.procedure_queries.ProcedureQueries`)."""

    @property
    def step_ids(self) -> tuple[int, ...]: ...

    def previous(self, step: int) -> Ranked: ...

    def optional(self, step: int, history: Iterable[int] | None = None) -> Scored: ...

    def mistake(self, step: int, history: Iterable[int]) -> Scored: ...

    def missing(self, step: int, history: Iterable[int]) -> Ranked: ...

    def missing_at_end(self, history: Iterable[int]) -> Ranked: ...

    def future(self, step: int | None, history: Iterable[int]) -> Ranked: ...


@dataclass(frozen=True)
class Items:
    """Scored yes/no items, pooled over questions asked.

    Attributes:
        scores: float ``(k,)``.
        labels: bool ``(k,)``.
    """

    scores: np.ndarray
    labels: np.ndarray

    @staticmethod
    def join(parts: Sequence[Items]) -> Items:
        """All items of several parts in one."""
        if not parts:
            return Items(np.zeros(0), np.zeros(0, dtype=bool))
        return Items(np.concatenate([p.scores for p in parts]), np.concatenate([p.labels for p in parts]))


# -- metrics --------------------------------------------------------------------------------------------------
def average_precision(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """Average precision in percent: ``Σ_k (R_k − R_{k−1}) P_k`` over the distinct score thresholds, highest
    first (tied items enter together, so a tie is neither rewarded nor punished by its order).

    Returns:
        AP in percent; None when the items are all of one class (nothing to find, or nothing to tell apart:
        every ranking would score 100).
    """
    from recognition.metrics import average_precision as per_class_ap  # the one AP, ties as one threshold

    labels = np.asarray(labels, dtype=bool)
    if labels.all() or not labels.any():
        return None
    return float(100 * per_class_ap(np.asarray(scores, dtype=np.float64)[:, None], labels[:, None])[0])


def predict(scores: np.ndarray, threshold: float) -> np.ndarray:
    """The yes/no answers: items scoring at least ``threshold`` and above 0 (a zero score never says yes)."""
    scores = np.asarray(scores)
    return (scores >= threshold) & (scores > 0)


def f1_at(scores: np.ndarray, labels: np.ndarray, threshold: float) -> Scores:
    """Precision, recall, F1 (percent) of the answers `predict` gives at ``threshold``.

    Returns:
        `graphs.precision_recall.Scores`: None where nothing was counted (no yes answer, no positive label).
    """
    predicted = predict(scores, threshold)
    labels = np.asarray(labels, dtype=bool)
    return precision_recall_f1(int((predicted & labels).sum()), int(predicted.sum()), int(labels.sum())).in_percent()


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The threshold with the best F1 on these (training) items, placed half-way to the next lower score.

    Every distinct positive score is tried as a cut; among equal F1 the lowest cut wins. The cut is then moved
    half-way down to the next lower score seen (or to half of it), so that a held-out item scoring a little
    lower than the training items is still counted.

    Returns:
        The threshold; 0 (anything above zero) when there is no positive item or none scores above 0.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=bool)
    cuts = np.unique(scores[labels & (scores > 0)])
    if not len(cuts):
        return 0.0
    # Each cut is a positive item's score: it answers yes to that item, so every F1 here is measured.
    f1 = np.array([measured(f1_at(scores, labels, cut).f1, "best_threshold") for cut in cuts])
    chosen = float(cuts[int(np.flatnonzero(f1 == f1.max())[0])])
    lower = scores[(scores < chosen) & (scores > 0)]
    return (chosen + float(lower.max())) / 2 if len(lower) else chosen / 2


def top_k_hit(candidate_scores: np.ndarray, target: int, k: int) -> float:
    """Probability that the target is among the ``k`` best candidates when ties are broken at random.

    Args:
        candidate_scores: float ``(c,)``.
        target: index of the right answer in ``candidate_scores``.
        k: how many guesses.

    Returns:
        A number in [0, 1].
    """
    value = candidate_scores[target]
    better = int((candidate_scores > value).sum())
    tied = int((candidate_scores == value).sum())  # the target included
    return float(np.clip((k - better) / tied, 0.0, 1.0))


# -- protocols ------------------------------------------------------------------------------------------------
def first_occurrences(sequence: Sequence[int]) -> tuple[int, ...]:
    """``BACAD -> BACD``: the questions see each step once, when it is first done."""
    return tuple(dict.fromkeys(int(s) for s in sequence))


def _items(answer: Ranked, candidates: Sequence[int], positive: int) -> Items:
    by_step = dict(zip(answer.steps, answer.scores, strict=True))
    scores = np.array([by_step.get(s, 0.0) for s in candidates])
    return Items(scores, np.array([s == positive for s in candidates], dtype=bool))


@dataclass(frozen=True)
class DeletionTrial:
    """A correct execution with one step deleted.

    Attributes:
        deleted: the step taken out.
        steps: the execution without it.
        need_at: position in ``steps`` of the first later step that needed ``deleted``; None if none did.
    """

    deleted: int
    steps: tuple[int, ...]
    need_at: int | None


def deletion_trials(execution: Sequence[int], needs: Needs) -> list[DeletionTrial]:
    """One trial per step of a (first-occurrence) execution: that step deleted.

    Args:
        execution: a correct execution, each step once.
        needs: ``needs(step, deleted)`` says whether ``step`` needed ``deleted`` first.

    Returns:
        The trials, in execution order of the deleted step.
    """
    trials = []
    for position, deleted in enumerate(execution):
        steps = tuple(execution[:position]) + tuple(execution[position + 1:])
        need_at = next((t for t in range(position, len(steps)) if needs(steps[t], deleted)), None)
        trials.append(DeletionTrial(deleted, steps, need_at))
    return trials


def missing_items(queries: Answering, trial: DeletionTrial) -> tuple[Items, Items | None]:
    """The missing question of one deletion trial, asked at the end and at the first step that needed the step.

    Returns:
        ``(at_end, at_need)``: items over the key-steps not done at that point (labelled 1 for the deleted one);
        ``at_need`` is None when no later step needed it.
    """
    steps = queries.step_ids
    done = set(trial.steps)
    at_end = _items(queries.missing_at_end(trial.steps), [s for s in steps if s not in done], trial.deleted)
    if trial.need_at is None:
        return at_end, None
    current, history = trial.steps[trial.need_at], trial.steps[: trial.need_at]
    seen = {*history, current}
    answer = queries.missing(current, history)
    return at_end, _items(answer, [s for s in steps if s not in seen], trial.deleted)


def mistake_items(queries: Answering, sequence: Sequence[int], labels: Sequence[bool] | np.ndarray) -> Items:
    """Each step of ``sequence`` scored online (history = the steps before it), with the given labels."""
    scores = np.array([queries.mistake(step, sequence[:t]).value for t, step in enumerate(sequence)])
    return Items(scores, np.asarray(labels, dtype=bool))


def future_hits(queries: Answering, execution: Sequence[int], ks: Sequence[int] = TOP_K) -> np.ndarray:
    """Rank the next step at every position of a (first-occurrence) execution but the last.

    The candidates are the key-steps not done yet (the current one excluded); the answer is the next step.

    Returns:
        float ``(len(execution) - 1, len(ks))``: the top-k hit of each position.
    """
    hits = np.zeros((max(len(execution) - 1, 0), len(ks)))
    for t in range(len(execution) - 1):
        history, current, target = execution[:t], execution[t], execution[t + 1]
        seen = {*history, current}
        candidates = [s for s in queries.step_ids if s not in seen]
        items = _items(queries.future(current, history), candidates, target)
        where = int(np.flatnonzero(items.labels)[0])
        hits[t] = [top_k_hit(items.scores, where, k) for k in ks]
    return hits


def previous_items(queries: Answering, ground_truth: TaskGraph, ancestors: bool = False) -> Items:
    """Every ordered pair (step, other step): scored by the previous question, labelled 1 when the other step is
    a pre-condition of the step in the ground-truth graph (both graphs over the same step ids).

    Args:
        queries: the graph asked.
        ground_truth: the reference graph.
        ancestors: label every step that must come earlier (pre-conditions of pre-conditions too), not only the
            direct pre-conditions.
    """
    import networkx as nx

    parts = []
    reachable = ground_truth.to_networkx() if ancestors else None
    for step in queries.step_ids:
        candidates = [s for s in queries.step_ids if s != step]
        direct = ground_truth.preconditions(step)
        truth = (nx.descendants(reachable, step) if reachable is not None else direct) - {START}
        answer = queries.previous(step)
        by_step = dict(zip(answer.steps, answer.scores, strict=True))
        parts.append(Items(np.array([by_step.get(s, 0.0) for s in candidates]),
                           np.array([s in truth for s in candidates], dtype=bool)))
    return Items.join(parts)


def optional_items(queries: Answering, execution: Sequence[int], optional: set[int]) -> Items:
    """Each step of a (first-occurrence) execution scored online by the optional question, labelled 1 when the
    step is in ``optional`` (skipped by some correct execution of the procedure)."""
    scores = np.array([queries.optional(step, execution[:t]).value for t, step in enumerate(execution)])
    return Items(scores, np.array([s in optional for s in execution], dtype=bool))


def ready_step_hits(ground_truth: TaskGraph, execution: Sequence[int], ks: Sequence[int] = TOP_K) -> np.ndarray:
    """A reference for the future question: what a perfect graph can say. At every position the steps whose
    ground-truth pre-conditions are all done are ranked in random order (in expectation), the others after.

    Returns:
        float ``(len(execution) - 1, len(ks))`` like `future_hits`.
    """
    hits = np.zeros((max(len(execution) - 1, 0), len(ks)))
    for t in range(len(execution) - 1):
        done = {START, *execution[: t + 1]}
        candidates = [s for s in ground_truth.step_ids if s not in done]
        ready = np.array([float(ground_truth.preconditions(s) <= done) for s in candidates])
        target = candidates.index(execution[t + 1])
        hits[t] = [top_k_hit(ready, target, k) for k in ks]
    return hits


def always_before(executions: Sequence[Sequence[int]], min_together: int = 2) -> Needs:
    """A stand-in for "needed" where no ground-truth graph exists: ``a`` is needed by ``b`` when ``a`` came before
    ``b`` in every given execution holding both, and at least ``min_together`` executions hold both.

    Args:
        executions: training executions (first occurrences), never the held-out one.
        min_together: executions that must show the pair.

    Returns:
        ``needs(step, deleted)``.
    """
    if not any(len(run) for run in executions):
        return lambda step, deleted: False
    counts = eligibility_counts(executions, unique=False)
    index = {int(s): i for i, s in enumerate(counts.nodes)}
    before = counts.done_before  # [k, d]: executions where d came before k
    together = before + before.T  # both present: one came before the other

    def needs(step: int, deleted: int) -> bool:
        k, d = index.get(step), index.get(deleted)
        return k is not None and d is not None and bool(min_together <= together[k, d] == before[k, d])

    return needs


def ground_truth_needs(graph: TaskGraph) -> Needs:
    """``needs(step, deleted)``: ``deleted`` is a pre-condition of ``step`` in the ground-truth graph."""
    return lambda step, deleted: deleted in graph.preconditions(step)
