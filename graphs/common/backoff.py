"""Waits that grow: the one rule for retrying something that keeps failing."""

from __future__ import annotations

# Past this many doublings every wait is the cap anyway: the exponent stays small however long the failures go on.
MAX_DOUBLINGS: int = 30


def capped_doubling(first_s: float, doublings: int, cap_s: float) -> float:
    """``min(first_s * 2**doublings, cap_s)``: the wait after ``doublings`` failures in a row (0: the first wait).

    Args:
        first_s: the first wait, seconds.
        doublings: how many times it has doubled (negative counts as 0).
        cap_s: the longest wait, seconds.
    """
    return min(first_s * 2.0 ** min(max(doublings, 0), MAX_DOUBLINGS), cap_s)
