"""Key-step sequence pre-processing (docs/method.md) and the "observed-before" rows of the vectorised loss.

Sequences are packed into one flat array so that de-duplication and row building are a handful of numpy
operations over all sequences at once, never a Python loop over positions. De-duplication is expressed as a
*keep mask* over the raw positions: for every (sequence, step) pair exactly one occurrence is kept.

- first occurrence (``BACAD -> BACD``): keep the earliest occurrence;
- last occurrence (``BACAD -> BCAD``): keep the latest;
- random (part (c) of the augmentation): walking the sequence, each repeat moves the step to its later
  position with probability 0.5, i.e. keep the latest occurrence among the first one and the repeats whose
  coin came up "move".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PackedSequences:
    """Integer sequences concatenated into flat arrays.

    Attributes:
        steps: int64 ``(P,)`` node index of every position of every sequence.
        sequence: int64 ``(P,)`` which sequence each position belongs to.
        first_of_group: bool ``(P,)`` true at the first occurrence of its step in its sequence.
        group: int64 ``(P,)`` dense id of the (sequence, step) pair of each position.
        n_sequences: number of sequences.
    """

    steps: np.ndarray
    sequence: np.ndarray
    first_of_group: np.ndarray
    group: np.ndarray
    n_sequences: int

    @property
    def n_groups(self) -> int:
        """Number of distinct (sequence, step) pairs = total length after de-duplication."""
        return int(self.group.max()) + 1 if self.group.size else 0


def pack(sequences: Sequence[Sequence[int]]) -> PackedSequences:
    """Pack sequences of non-negative node indices into flat arrays.

    Args:
        sequences: the sequences (repeats allowed).

    Returns:
        `PackedSequences` with the grouping used by every de-duplication.
    """
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    steps = np.fromiter((x for s in sequences for x in s), dtype=np.int64, count=int(lengths.sum()))
    sequence = np.repeat(np.arange(len(sequences), dtype=np.int64), lengths)
    width = int(steps.max()) + 1 if steps.size else 1
    key = sequence * width + steps
    _, first_index, group = np.unique(key, return_index=True, return_inverse=True)
    first = np.zeros(steps.shape, dtype=bool)
    first[first_index] = True
    return PackedSequences(steps, sequence, first, group.astype(np.int64), len(sequences))


def keep_latest_candidate(packed: PackedSequences, move: np.ndarray) -> np.ndarray:
    """Keep, per (sequence, step), the latest position among the first occurrence and the positions in ``move``.

    Args:
        packed: the packed sequences.
        move: bool ``(P,)``, true where a repeat moves the step to this (later) position.

    Returns:
        bool ``(P,)`` keep mask with exactly one true position per (sequence, step).
    """
    candidate = np.flatnonzero(packed.first_of_group | move)
    chosen = np.full(packed.n_groups, -1, dtype=np.int64)
    np.maximum.at(chosen, packed.group[candidate], candidate)  # every group has its first occurrence
    keep = np.zeros(packed.steps.shape, dtype=bool)
    keep[chosen] = True
    return keep


def first_occurrence_mask(packed: PackedSequences) -> np.ndarray:
    """Keep mask of first-occurrence de-duplication (``BACAD -> BACD``)."""
    return keep_latest_candidate(packed, np.zeros(packed.steps.shape, dtype=bool))


def last_occurrence_mask(packed: PackedSequences) -> np.ndarray:
    """Keep mask of last-occurrence de-duplication (``BACAD -> BCAD``)."""
    return keep_latest_candidate(packed, np.ones(packed.steps.shape, dtype=bool))


def random_dedup_mask(packed: PackedSequences, rng: np.random.Generator) -> np.ndarray:
    """Keep mask of the per-epoch random de-duplication (augmentation part (c)).

    Args:
        packed: the packed raw sequences.
        rng: seeded generator; one coin per position is drawn.

    Returns:
        bool ``(P,)`` keep mask: each repeat moves its step to the later position with probability 0.5.
    """
    return keep_latest_candidate(packed, np.less(rng.random(packed.steps.shape[0]), 0.5))


def first_occurrence(sequence: Sequence[int]) -> tuple[int, ...]:
    """``BACAD -> BACD``: drop later repeats (docs/method.md)."""
    return tuple(dict.fromkeys(sequence))


@dataclass(frozen=True)
class ObservedRows:
    """The loss rows of a set of de-duplicated sequences (docs/method.md, vectorised form).

    Attributes:
        observed: float32 ``(R, N)`` 0/1 matrix ``M``: ``M[r, j] = 1`` iff node ``j`` was seen before row ``r``.
        targets: int64 ``(R,)`` the node ``y_t`` at each row.
        sequence: int64 ``(R,)`` the sequence each row comes from.
    """

    observed: np.ndarray
    targets: np.ndarray
    sequence: np.ndarray


def observed_rows(packed: PackedSequences, keep: np.ndarray, rows_at: np.ndarray, n_nodes: int) -> ObservedRows:
    """Build ``M`` for the kept positions of every sequence with one cumulative sum.

    Args:
        packed: packed sequences.
        keep: bool ``(P,)`` keep mask (one occurrence per step and sequence).
        rows_at: bool ``(P,)`` positions that contribute a loss row (e.g. S..E, not the auxiliary nodes).
        n_nodes: ``N``, the number of columns.

    Returns:
        `ObservedRows` for the kept positions where ``rows_at`` holds, in sequence order.
    """
    kept = np.flatnonzero(keep)
    steps = packed.steps[kept]
    seq = packed.sequence[kept]
    onehot = np.zeros((kept.size, n_nodes), dtype=np.float32)
    onehot[np.arange(kept.size), steps] = 1.0
    # Exclusive prefix sum inside each sequence: global inclusive cumsum, minus the row itself, minus
    # everything accumulated before the sequence started.
    inclusive = np.cumsum(onehot, axis=0)
    starts = np.flatnonzero(np.r_[True, seq[1:] != seq[:-1]])
    before_start = inclusive[starts] - onehot[starts]
    run = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, kept.size]))
    observed = inclusive - onehot - before_start[run]
    select = rows_at[kept]
    return ObservedRows(observed[select], steps[select], seq[select])
