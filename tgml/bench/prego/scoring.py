"""Scoring a task graph on PREGO test sequences (the PREGO protocol) and aggregating the figures over seeds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from graphs.checker import precondition_violations
from graphs.mistake_metrics import MistakeScores, mistake_scores
from graphs.precision_recall import mean_and_std
from graphs.task_graph import TaskGraph

METRIC_KEYS: Final = (
    "avg_f1",
    "correct_f1",
    "correct_precision",
    "correct_recall",
    "mistake_f1",
    "mistake_precision",
    "mistake_recall",
)



def evaluate_graph(
    graph: TaskGraph, sequences: Iterable[Sequence[int]], has_mistake: Sequence[bool] | None = None
) -> MistakeScores:
    """Score test sequences online with the pre-condition checker and pool them (the PREGO protocol, docs/method.md).

    Args:
        graph: the binary task graph.
        sequences: one key-step sequence per test video, its last step the mistake.
        has_mistake: per sequence, whether it ends with a mistake (None: all do); a correct video kept whole
            contributes correct steps only.

    Returns:
        Avg F1 and per-class true P/R/F1.
    """
    return mistake_scores((precondition_violations(graph, seq) for seq in sequences), has_mistake)


def flat_metrics(scores: MistakeScores) -> dict[str, float | None]:
    """The seven table figures of one evaluation (`METRIC_KEYS`; None: nothing to count, `graphs.precision_recall`)."""
    return {
        "avg_f1": scores.avg_f1,
        "correct_f1": scores.correct.f1,
        "correct_precision": scores.correct.precision,
        "correct_recall": scores.correct.recall,
        "mistake_f1": scores.mistake.f1,
        "mistake_precision": scores.mistake.precision,
        "mistake_recall": scores.mistake.recall,
    }


def aggregate(runs: Sequence[Mapping[str, float | None]]) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Mean and population std over seeds of each metric.

    Args:
        runs: one `flat_metrics` dict per seed.

    Returns:
        ``(mean, std)`` keyed like `METRIC_KEYS`; None for a metric some seed did not measure.
    """
    mean, std = mean_and_std([[run[k] for k in METRIC_KEYS] for run in runs])
    return dict(zip(METRIC_KEYS, mean, strict=True)), dict(zip(METRIC_KEYS, std, strict=True))
