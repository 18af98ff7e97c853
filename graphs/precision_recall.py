"""Precision, recall and F1 from counts, with one convention for a figure over nothing.

Every score of the project that counts hits (edges of a graph, alerts of the checker, recognised segments, answers to
procedure questions) is computed here, so that the same emptiness reads the same everywhere. A figure whose
denominator is zero measured nothing: it is None ("not measured": ``-`` in a table, ``null`` in JSON), never 0 or
1, which would read as a result:

- precision = TP / predicted: None when nothing was predicted;
- recall = TP / actual: None when there was nothing to find;
- F1 = 2 P R / (P + R): None when there was nothing to find; 0 when there was and nothing was predicted (every item
  missed), or when nothing predicted was right.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

import numpy as np

from graphs.common.errors import InputError

NOT_MEASURED: Final = "-"  # how a table shows a figure over nothing


class Scores(NamedTuple):
    """Precision, recall and F1 (fractions, or percent from `in_percent`); None where nothing was counted."""

    precision: float | None
    recall: float | None
    f1: float | None

    def in_percent(self) -> Scores:
        """The same scores times 100."""
        return Scores(*(None if value is None else 100 * value for value in self))


def share(part: int, whole: int) -> float | None:
    """``part / whole``, None when ``whole`` is 0 (a precision without a prediction, a recall without a positive)."""
    return part / whole if whole else None


def f1_of(precision: float | None, recall: float | None) -> float | None:
    """``2 P R / (P + R)``: None without a recall (nothing to find); 0 without a precision (nothing predicted) or when
    both are 0."""
    if recall is None:
        return None
    if precision is None or precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def precision_recall_f1(true_positives: int, predicted: int, actual: int) -> Scores:
    """Precision, recall and F1 of counts, under the convention of the module docstring.

    Args:
        true_positives: items both predicted and actual.
        predicted: items predicted positive.
        actual: items actually positive.

    Returns:
        `Scores` as fractions in [0, 1], None where nothing was counted.
    """
    precision, recall = share(true_positives, predicted), share(true_positives, actual)
    return Scores(precision, recall, f1_of(precision, recall))


def mean_of_measured(values: Sequence[float | None]) -> float | None:
    """The mean of figures that are all measured, else None (an average over a figure that measured nothing)."""
    if not values or any(value is None for value in values):
        return None
    return sum(value for value in values if value is not None) / len(values)


def mean_and_std(rows: Sequence[Sequence[float | None]]) -> tuple[list[float | None], list[float | None]]:
    """Per column, the mean and population standard deviation over the rows (one row per seed).

    Args:
        rows: figures, one row per seed, the same columns in every row.

    Returns:
        ``(means, stds)``, one per column; None for a column where some row measured nothing.
    """
    table = np.array(rows, dtype=np.float64)  # (rows, columns); None -> NaN, which no measured figure is
    gaps = np.isnan(table).sum(axis=0) > 0  # (columns,)
    means, stds = table.mean(axis=0).tolist(), table.std(axis=0).tolist()
    return ([None if gap else m for m, gap in zip(means, gaps.tolist(), strict=True)],
            [None if gap else d for d, gap in zip(stds, gaps.tolist(), strict=True)])


def measured(value: float | None, what: str) -> float:
    """A figure the caller counted items for by construction (both classes of synthetic mistakes, the START and END
    edges of every graph): an error naming ``what`` if it measured nothing after all."""
    if value is None:
        raise InputError(f"{what}: nothing to count (no item of a class), so this figure cannot be measured")
    return value


def shown(value: float | None, spec: str = ".1f") -> str:
    """A figure formatted for a table, `NOT_MEASURED` for a figure over nothing."""
    return NOT_MEASURED if value is None else format(value, spec)
