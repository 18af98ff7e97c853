"""How many pre-conditions a graph may have learned by coincidence: too few executions for the steps they share.

Two key-steps done in no set order come out in the same order in all ``n`` executions with chance ``2^(1-n)``
(either order, each ``2^-n``), and a learner then reads that order as a pre-condition. Over the ``P`` pairs of steps
that every execution has, about ``P * 2^(1-n)`` pre-conditions are expected by coincidence when none of the pairs has
a set order. That count is the principled "too few executions": it grows with the steps and halves with each
execution, where a fixed count of executions fits one procedure's size only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

# An expected count of 0.5 or more rounds to at least one coincidental pre-condition.
COINCIDENCE_LIMIT: Final = 0.5


@dataclass(frozen=True)
class CoincidentOrders:
    """The pre-conditions a set of executions may show by coincidence.

    Attributes:
        executions: how many executions (``n``).
        pairs: pairs of key-steps that every execution has (``P``).
        expected: ``P * 2^(1-n)``, the pre-conditions expected by coincidence if no pair had a set order.
        executions_needed: the fewest executions that bring ``expected`` under `COINCIDENCE_LIMIT` (same ``P``).
    """

    executions: int
    pairs: int
    expected: float
    executions_needed: int

    @property
    def too_few(self) -> bool:
        """True when at least one coincidental pre-condition is expected (``expected >= COINCIDENCE_LIMIT``)."""
        return self.executions < self.executions_needed


def coincident_orders(sequences: Sequence[Sequence[int]]) -> CoincidentOrders:
    """The coincidental pre-conditions expected from ``sequences``: ``P * 2^(1-n)`` (module docstring).

    Args:
        sequences: the key-step id sequences learned from, one per execution (repeats allowed).

    Returns:
        ``n``, ``P``, the expected count, and the executions that bring it under `COINCIDENCE_LIMIT`. ``P`` counts
        the pairs of steps in every sequence only: a pair some execution lacks is seen in order fewer times, so the
        count is a floor.
    """
    n = len(sequences)
    shared = set.intersection(*(set(s) for s in sequences)) if sequences else set()
    pairs = len(shared) * (len(shared) - 1) // 2
    # P * 2^(1-m) < L  <=>  2P/L < 2^m: the fewest such m is the bit length of floor(2P/L) (4P for L = 1/2, exact).
    needed = int(2 * pairs / COINCIDENCE_LIMIT).bit_length()
    return CoincidentOrders(n, pairs, pairs * 2.0 ** (1 - n), needed)
