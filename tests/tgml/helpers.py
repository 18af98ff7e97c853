"""Shared helpers of the tgml tests: plain, one-sequence-at-a-time definitions the vectorised code is checked against.

Import them as ``from tests.tgml.helpers import ...`` (pytest runs with ``--import-mode=importlib``).
"""

from __future__ import annotations

from collections.abc import Sequence


def last_occurrence(sequence: Sequence[int]) -> tuple[int, ...]:
    """``BACAD -> BCAD``: a repeat moves the step to its latest position (the last-occurrence part of TGML's
    augmented training set)."""
    return tuple(reversed(dict.fromkeys(reversed(sequence))))
