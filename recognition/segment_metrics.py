"""Segment-level key-step recognition scores, as the action-segmentation literature reports them.

- **F1@k** (Lea et al., 2017; the MS-TCN protocol): a recognised segment is a true positive when its overlap (IoU)
  with a not-yet-matched annotated segment of the same step, the one it overlaps most, is at least ``k``; every other
  recognised segment is a false positive, every annotated segment left unmatched a false negative.
  F1 = 2 TP / (2 TP + FP + FN). Counts add up over videos (the total is computed from the summed counts); without an
  annotated segment the F1 is not measured (None, `graphs.precision_recall`).
- **Edit score**: ``100 * (1 - Levenshtein(recognised, annotated) / max(len))`` over the two step-label sequences: it
  rewards the right steps in the right order, whatever their timing.

Background is not a segment here: both lists hold key-steps only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphs.precision_recall import precision_recall_f1

IOU_THRESHOLDS = (0.10, 0.25, 0.50)


@dataclass(frozen=True)
class TimedSegment:
    """One key-step segment: step id and time span in seconds."""

    step: int
    start: float
    end: float


@dataclass(frozen=True)
class MatchCounts:
    """True positives, false positives and false negatives at one IoU threshold."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    def __add__(self, other: MatchCounts) -> MatchCounts:
        return MatchCounts(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn)

    @property
    def f1(self) -> float | None:
        """2 TP / (2 TP + FP + FN), the harmonic mean of precision and recall; None when there was no segment to find
        (`graphs.precision_recall`)."""
        return precision_recall_f1(self.tp, self.tp + self.fp, self.tp + self.fn).f1


def iou_matrix(predicted: Sequence[TimedSegment], annotated: Sequence[TimedSegment]) -> np.ndarray:
    """Temporal IoU of every recognised segment with every annotated one (0 across different steps).

    Args:
        predicted: recognised segments.
        annotated: ground-truth segments.

    Returns:
        ``(len(predicted), len(annotated))`` array in [0, 1].
    """
    p = np.array([(s.start, s.end, s.step) for s in predicted], dtype=np.float64).reshape(-1, 3)
    g = np.array([(s.start, s.end, s.step) for s in annotated], dtype=np.float64).reshape(-1, 3)
    inter = np.clip(np.minimum(p[:, None, 1], g[None, :, 1]) - np.maximum(p[:, None, 0], g[None, :, 0]), 0, None)
    union = np.maximum(p[:, None, 1], g[None, :, 1]) - np.minimum(p[:, None, 0], g[None, :, 0])
    iou = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    return np.where(p[:, None, 2] == g[None, :, 2], iou, 0.0)


def segment_matches(
    predicted: Sequence[TimedSegment], annotated: Sequence[TimedSegment], threshold: float
) -> MatchCounts:
    """F1@threshold counts of one video (each annotated segment matches at most one recognised segment).

    Args:
        predicted: recognised segments, in time order.
        annotated: ground-truth segments.
        threshold: the IoU a match needs (0.1, 0.25, 0.5 in the literature).

    Returns:
        TP, FP and FN.
    """
    iou = iou_matrix(predicted, annotated)
    used = np.zeros(len(annotated), dtype=bool)
    tp = 0
    for row in iou:  # one pass over segments, in order: the protocol's greedy matching
        best = int(np.argmax(row)) if row.size else -1
        if best >= 0 and row[best] >= threshold and not used[best]:
            used[best] = True
            tp += 1
    return MatchCounts(tp, len(predicted) - tp, len(annotated) - tp)


def levenshtein(a: Sequence[int], b: Sequence[int]) -> int:
    """Edit distance (insertions, deletions, substitutions) between two label sequences, one numpy row at a time."""
    row = np.arange(len(b) + 1)
    target = np.asarray(b)
    for i, label in enumerate(a, start=1):
        substitute = row[:-1] + (target != label)
        new = np.empty_like(row)
        new[0] = i
        new[1:] = np.minimum(row[1:] + 1, substitute)
        # Insertions chain along the row: a running minimum of (cost - position) does them all at once.
        new = np.minimum.accumulate(new - np.arange(len(row))) + np.arange(len(row))
        row = new
    return int(row[-1])


def edit_score(predicted: Sequence[int], annotated: Sequence[int]) -> float:
    """Edit score in percent: ``100 * (1 - Levenshtein / max(len(predicted), len(annotated)))`` (100 for two empties).

    Args:
        predicted: recognised step ids in order.
        annotated: annotated step ids in order.
    """
    longest = max(len(predicted), len(annotated))
    return 100.0 * (1.0 - levenshtein(predicted, annotated) / longest) if longest else 100.0
