"""Choosing the order rule of ``tgml bench-mistakes`` on the 194 graph-generation recordings only
(``tgml bench-mistakes --select``; docs/mistakes-benchmark.md).

Those recordings hold no order error, so order errors are made, the way CaptainCook4D's annotators tag them: K-fold
cross-validation over each procedure's recordings; a graph is learned from the training folds, and each held-out
recording is scored as it is (every step correct) and in ``moves`` variants where one step is moved to another
position. A moved step breaks the order of a pair when the published ground-truth graph orders the two steps (one
requires the other, directly or not) and the move inverts them; both steps of every broken pair are tagged Order Error
(the annotators write "performed before X" on the early one and "performed after Y" on the late one). A move that
breaks no pair tags nothing. The rule with the best pooled Avg F1 is chosen; the 190 test recordings are never read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from graphs.common.errors import InputError
from graphs.order_rules import ORDER_RULES, order_flags
from graphs.precision_recall import measured
from graphs.task_graph import TaskGraph
from tgml.bench.captaincook import Procedure
from tgml.bench.mistake_bench import Counts
from tgml.bench.process_pool import run_jobs
from tgml.learners.registry import DEFAULT_LEARNER, learner

DEFAULT_FOLDS: Final = 4
DEFAULT_MOVES: Final = 3
# Far above any use; a bound at all because each fold learns a graph and each move scores a variant: --moves
# 9223372036854775807 looped for ever, and --folds that size asked numpy for a list of that many folds.
MAX_FOLDS: Final = 1000
MAX_MOVES: Final = 1000


@dataclass(frozen=True)
class SelectionConfig:
    """The cross-validation.

    Attributes:
        method: the learner whose graphs are checked (default: `tgml train`'s).
        folds: folds over each procedure's recordings.
        moves: moved-step variants of each held-out recording.
        seed: seeds the folds, the moves and the learner.
        rules: the candidate rules.
        workers: worker processes for learning.
    """

    method: str = DEFAULT_LEARNER
    folds: int = DEFAULT_FOLDS
    moves: int = DEFAULT_MOVES
    seed: int = 42
    rules: tuple[str, ...] = ORDER_RULES
    workers: int = 1

    def __post_init__(self) -> None:
        learner(self.method)
        if not 2 <= self.folds <= MAX_FOLDS:
            raise InputError(f"--folds {self.folds}: expected an integer in 2..{MAX_FOLDS}")
        if not 1 <= self.moves <= MAX_MOVES:
            raise InputError(f"--moves {self.moves}: expected an integer in 1..{MAX_MOVES}")


def ordered_pairs(reference: TaskGraph) -> set[tuple[int, int]]:
    """``(a, b)`` for every pair of steps the reference graph orders: ``a`` must come before ``b`` (``b`` requires
    ``a``, directly or through other steps)."""
    import networkx as nx

    graph = reference.to_networkx()  # edges point from a step to what it requires
    steps = set(reference.step_ids)
    return {(int(a), int(b)) for b in steps for a in nx.descendants(graph, b) if a in steps}


def moved_item(sequence: Sequence[int], source: int, target: int, pairs: set[tuple[int, int]]
               ) -> tuple[tuple[int, ...], np.ndarray]:
    """Move the step at ``source`` to position ``target``; tag both steps of every pair the move inverts.

    Args:
        sequence: a correct execution (step ids in order).
        source: index of the step to move.
        target: its index after the move.
        pairs: the reference order (`ordered_pairs`).

    Returns:
        ``(moved sequence, bool labels per position)``.
    """
    steps = list(sequence)
    step = steps.pop(source)
    steps.insert(target, step)
    low, high = min(source, target), max(source, target)
    jumped = set(sequence[low + 1 : high + 1] if target > source else sequence[low:high])
    broken = {j for j in jumped if ((j, step) in pairs and target < source) or ((step, j) in pairs and target > source)}
    tagged = broken | ({step} if broken else set())
    return tuple(steps), np.array([s in tagged for s in steps], dtype=bool)


def _fold_graph(method: str, procedure: Procedure, train: tuple[tuple[int, ...], ...], seed: int) -> dict[str, Any]:
    """Worker job: the graph of one training fold, as file content."""
    entry = learner(method)
    config = entry.with_seed(entry.config(None), seed)
    result = entry.learn(train, procedure.step_ids, procedure.step_names, config, procedure.scenario)
    return result.graph.to_dict()


def cross_validate(procedures: Sequence[Procedure], config: SelectionConfig, progress: bool = False
                   ) -> list[dict[str, Any]]:
    """Score every candidate rule on the held-out graph-generation recordings.

    Args:
        procedures: the procedures (their error-free graph-generation recordings and ground-truth graphs).
        config: the cross-validation.
        progress: rich progress bar on stderr.

    Returns:
        One row per rule, best first: ``{"rule", "avg_f1", "mistake_f1", "correct_f1", "items", "tagged"}``.
    """
    rng = np.random.default_rng(config.seed)
    jobs, held_out = [], []
    for procedure in procedures:
        order = rng.permutation(len(procedure.sequences))
        folds = np.array_split(order, config.folds)
        for fold in folds:
            held = set(fold.tolist())
            train = tuple(s for k, s in enumerate(procedure.sequences) if k not in held)
            if not train or not held:
                continue
            jobs.append((config.method, procedure, train, config.seed))
            held_out.append([procedure.sequences[k] for k in sorted(held)])
    learned = run_jobs(_fold_graph, jobs, config.workers, "[bold]cross-validation", progress)
    counts = {rule: Counts() for rule in config.rules}
    items = 0
    for (_, procedure, _, _), content, sequences in zip(jobs, learned, held_out, strict=True):
        graph = TaskGraph.from_dict(content)
        pairs = ordered_pairs(procedure.ground_truth)
        for sequence in sequences:
            variants = [(tuple(sequence), np.zeros(len(sequence), dtype=bool))]
            for _ in range(config.moves if len(sequence) > 1 else 0):
                source, target = rng.choice(len(sequence), size=2, replace=False)
                variants.append(moved_item(sequence, int(source), int(target), pairs))
            for steps, truth in variants:
                items += 1
                for rule in config.rules:
                    flags = order_flags(graph, steps, rule)
                    counts[rule] += Counts(steps=len(steps), order_errors=int(truth.sum()), alerts=int(flags.sum()),
                                           caught=int((flags & truth).sum()))
    rows = []
    for rule, total in counts.items():
        metrics = total.metrics()
        # Every held-out recording gets moved steps: the items hold both classes, so the Avg F1 is measured.
        rows.append({"rule": rule, "avg_f1": measured(metrics["avg_f1"], "bench-mistakes --select"),
                     "mistake_f1": metrics["mistake_f1"],
                     "correct_f1": metrics["correct_f1"], "items": items, "tagged": total.order_errors})
    return sorted(rows, key=lambda r: -r["avg_f1"])
