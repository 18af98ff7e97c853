"""Sequence Accuracy (SA, docs/method.md): how well a binary graph explains the training sequences.

For each sequence (with S and E) and each position ``i``, with ``pred(y_i)`` the binary pre-conditions of
``y_i`` and ``seen`` the nodes before it: 1 if nothing precedes and ``pred`` is empty; ``|seen ∩ pred| / |pred|``
if both are non-empty; 0 otherwise. SA is the mean over positions, then over sequences.
"""

from __future__ import annotations

import numpy as np


def sequence_accuracy(adjacency: np.ndarray, observed: np.ndarray, targets: np.ndarray, sequence: np.ndarray) -> float:
    """SA of a graph on pre-built rows (one per position of every sequence), vectorised.

    Args:
        adjacency: bool ``(m, m)``; ``adjacency[i, j]`` iff ``j`` is a pre-condition of ``i``.
        observed: 0/1 ``(R, m)``: nodes seen before each position (same layout).
        targets: int ``(R,)`` node at each position.
        sequence: int ``(R,)`` sequence of each row (ids ``0..D-1``, every id present).

    Returns:
        SA in [0, 1].
    """
    pred = np.asarray(adjacency, dtype=bool)[targets]  # (R, m)
    seen = np.asarray(observed) > 0  # (R, m)
    n_pred = pred.sum(axis=1)
    n_seen = seen.sum(axis=1)
    hit = (pred & seen).sum(axis=1)
    score = np.where(
        (n_pred == 0) & (n_seen == 0),
        1.0,
        np.where((n_pred > 0) & (n_seen > 0), hit / np.maximum(n_pred, 1), 0.0),
    )
    per_sequence = np.bincount(sequence, weights=score) / np.bincount(sequence)
    return float(per_sequence.mean())
