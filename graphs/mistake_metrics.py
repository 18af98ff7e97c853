"""PREGO mistake-detection metrics (docs/method.md): per-class F1 for "correct" and "mistake", and their mean.

Labels and predictions are pooled over all videos: label 1 marks the last (mistaken) step of
each test video, 0 the steps before it; a prediction of 1 means the checker raised an alert. A test video without a
mistake (a correct execution kept whole) is labelled 0 throughout: it contributes correct steps only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from graphs.precision_recall import mean_of_measured, precision_recall_f1


@dataclass(frozen=True)
class ClassScores:
    """True precision, recall and F1 of one class (in percent; None: nothing to count)."""

    precision: float | None
    recall: float | None
    f1: float | None


@dataclass(frozen=True)
class MistakeScores:
    """The PREGO table row: Avg F1 and per-class scores (percent), plus the counts behind them."""

    avg_f1: float | None
    correct: ClassScores
    mistake: ClassScores
    n_steps: int
    n_videos: int

    def to_dict(self) -> dict:
        """Plain-JSON form."""
        return asdict(self)


def protocol_labels(length: int, has_mistake: bool = True) -> np.ndarray:
    """Ground truth of one PREGO test video: every step correct but the last (the PREGO protocol, docs/method.md).

    Args:
        length: number of key-steps of the video.
        has_mistake: False for a correct video kept whole, whose steps are all correct.

    Returns:
        int array ``(length,)``: ``[0] * (length - 1) + [1]``, or all zeros without a mistake.
    """
    labels = np.zeros(length, dtype=np.int8)
    if length and has_mistake:
        labels[-1] = 1
    return labels


def _class_scores(truth: np.ndarray, pred: np.ndarray, positive: int) -> ClassScores:
    """True precision, recall and F1 (percent) of class ``positive`` (1: mistake, 0: correct) over the pooled labels."""
    tp = int(np.sum((pred == positive) & (truth == positive)))
    scores = precision_recall_f1(tp, int(np.sum(pred == positive)), int(np.sum(truth == positive)))
    return ClassScores(*scores.in_percent())


def mistake_scores(
    per_video: Iterable[Sequence[bool] | np.ndarray], has_mistake: Sequence[bool] | None = None
) -> MistakeScores:
    """Score alerts of several videos under the PREGO protocol.

    Args:
        per_video: for each test video, the checker's alert flags, one per key-step.
        has_mistake: for each video, whether its last step is the mistake (None: every video's is, the protocol's
            test sets); a video marked False is a correct execution and all its steps are labelled correct.

    Returns:
        Pooled per-class scores and Avg F1 (the mean of the two class F1s; None when a class has no label).
    """
    preds: list[np.ndarray] = []
    truths: list[np.ndarray] = []
    for k, flags in enumerate(per_video):
        flags = np.asarray(flags, dtype=np.int8)
        preds.append(flags)
        truths.append(protocol_labels(len(flags), True if has_mistake is None else bool(has_mistake[k])))
    if has_mistake is not None and len(has_mistake) != len(preds):
        raise ValueError(f"has_mistake has {len(has_mistake)} entries for {len(preds)} videos")
    pred = np.concatenate(preds) if preds else np.zeros(0, np.int8)
    truth = np.concatenate(truths) if truths else np.zeros(0, np.int8)
    correct = _class_scores(truth, pred, 0)
    mistake = _class_scores(truth, pred, 1)
    return MistakeScores(mean_of_measured((correct.f1, mistake.f1)), correct, mistake, int(len(pred)), len(preds))
