"""Per-frame mean average precision, the standard online action detection score (as MiniROAD reports it).

Every frame of every test video is one sample; for each class, frames are ranked by the
detector's score for that class and the (non-interpolated) average precision is taken against the
frames labelled with it. mAP is the mean over classes that occur in the test frames, background
excluded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def average_precision(scores: np.ndarray, positives: np.ndarray) -> np.ndarray:
    """Average precision of every class, all classes at once.

    ``AP_c = (1 / P_c) Σ_k precision_c@k · [frame k is positive]`` with frames sorted by descending score.
    Frames with equal scores are one threshold (as in scikit-learn's ``average_precision_score``): each
    gets the precision after the whole tie, so the value does not depend on the order of the frames.

    Args:
        scores: ``(N, C)`` per-frame class scores (probabilities or logits).
        positives: ``(N, C)`` bool, true where the frame belongs to the class.

    Returns:
        ``(C,)`` AP per class; NaN for a class with no positive frame.
    """
    n = len(scores)
    order = np.argsort(-scores, axis=0, kind="stable")  # (N, C): frame ranks per class
    ranked = np.take_along_axis(scores, order, axis=0)  # (N, C) descending
    hits = np.take_along_axis(positives.astype(np.float64), order, axis=0)  # (N, C)
    cum_hits = np.cumsum(hits, axis=0)
    ranks = np.arange(1, n + 1, dtype=np.float64)[:, None]  # (N, 1)
    precision = cum_hits / ranks  # (N, C)
    # Row where each row's tie group ends (the next row has another score): backward running minimum.
    tie_end = np.ones(ranked.shape, dtype=bool)
    tie_end[:-1] = ranked[1:] != ranked[:-1]
    rows = np.broadcast_to(np.arange(n)[:, None], ranked.shape)
    group_end = np.minimum.accumulate(np.where(tie_end, rows, n)[::-1], axis=0)[::-1]  # (N, C)
    precision_at_hit = np.take_along_axis(precision, group_end, axis=0) * hits
    n_pos = hits.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_pos > 0, precision_at_hit.sum(axis=0) / n_pos, np.nan)


def frame_map(scores: np.ndarray, targets: np.ndarray, background: Sequence[int] = (0,)) -> tuple[float, np.ndarray]:
    """Per-frame mAP over classes, background excluded.

    Args:
        scores: ``(N, C)`` per-frame scores.
        targets: ``(N, C)`` one-hot (or multi-hot) targets, or ``(N,)`` class indices.
        background: class indices left out of the mean.

    Returns:
        ``(mAP, ap_per_class)``: the mean over non-background classes that have positives, and
        ``(C,)`` AP per class (NaN where undefined).
    """
    scores = np.asarray(scores, dtype=np.float64)
    targets = np.asarray(targets)
    if targets.ndim == 1:
        positives = np.zeros(scores.shape, dtype=bool)
        positives[np.arange(len(targets)), targets.astype(np.int64)] = True
    else:
        positives = targets > 0
    ap = average_precision(scores, positives)
    keep = np.ones(scores.shape[1], dtype=bool)
    keep[list(background)] = False
    valid = ap[keep & ~np.isnan(ap)]
    return (float(valid.mean()) if valid.size else float("nan")), ap
