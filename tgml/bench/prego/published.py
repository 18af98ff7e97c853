"""The published PREGO figures (Seminara et al. 2024) that every benchmark table is printed beside."""

from __future__ import annotations

from typing import Final

PUBLISHED: Final[dict[str, dict[str, dict[str, tuple[float, float, float]]]]] = {
    "assembly101-o": {
        "gt": {
            "prego": (39.4, 32.6, 46.3),
            "count-based": (26.5, 9.9, 43.1),
            "msg2": (56.1, 63.9, 48.2),
            "tgt-text": (62.8, 69.8, 55.7),
            "do": (75.9, 90.2, 61.6),
        },
        "pred": {
            "prego": (32.5, 23.1, 41.8),
            "count-based": (23.0, 2.1, 43.8),
            "msg2": (46.2, 59.1, 33.2),
            "tgt-text": (53.0, 67.8, 38.2),
            "do": (53.5, 78.9, 28.1),
        },
    },
    "epic-tent-o": {
        "gt": {
            "prego": (32.1, 45.0, 19.1),
            "count-based": (57.7, 93.2, 22.2),
            "msg2": (54.1, 92.9, 15.4),
            "tgt-text": (64.1, 93.8, 34.5),
            "do": (58.3, 93.5, 23.1),
        },
        "pred": {
            "prego": (29.4, 41.6, 17.2),
            "count-based": (44.8, 67.0, 22.7),
            "msg2": (45.2, 67.5, 22.9),
            "tgt-text": (43.8, 69.5, 18.2),
            "do": (46.5, 69.3, 23.7),
        },
    },
}


def published_best(dataset: str, mode: str) -> float:
    """Best published Avg F1 of a column of the published table (the figure to beat)."""
    return max(row[0] for row in PUBLISHED[dataset][mode].values())

