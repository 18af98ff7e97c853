"""Key-step sequences as positions in a taxonomy: the one check that every step id of a training or query sequence is
one the taxonomy (or graph) holds, and its one error line.

Every learner and query that reads sequences of step ids turns them into matrix positions first; each once did it
with a dictionary of its own and its own wording of an unknown id. The ids are looked up together, vectorised.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from graphs.common.errors import InputError


def step_positions(sequences: Iterable[Sequence[int]], step_ids: Sequence[int], where: str = "sequence",
                   holder: str = "the taxonomy") -> list[np.ndarray]:
    """Each sequence's steps as their positions in ``step_ids`` (``step_ids[p[j]] == seq[j]``), order and repeats kept.

    Args:
        sequences: key-step id sequences.
        step_ids: the known ids, in matrix order (distinct).
        where: what a sequence is called in the error line (``"training sequence"``).
        holder: what holds the known ids, in the error line (``"the taxonomy"``, ``"the graph"``).

    Returns:
        One int64 array per sequence.

    Raises:
        InputError: ``"{where} {k}: step id {s} is not in {holder}"``, for the first sequence ``k`` holding an
            unknown id ``s`` (its first such id).
    """
    runs = [_ids(seq, k, where, holder) for k, seq in enumerate(sequences)]
    ids = np.asarray([int(s) for s in step_ids], dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    known = ids[order]
    ends = np.cumsum([len(run) for run in runs], dtype=np.int64)  # where each sequence ends in ``flat``
    flat = np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64)
    slot = np.minimum(np.searchsorted(known, flat), max(len(known) - 1, 0))
    found = (known[slot] == flat) if len(known) else np.zeros(len(flat), dtype=bool)
    if not found.all():
        first = int(np.flatnonzero(~found)[0])
        k = int(np.searchsorted(ends, first, side="right"))
        raise InputError(f"{where} {k}: step id {int(flat[first])} is not in {holder}")
    return np.split(order[slot].astype(np.int64), ends[:-1]) if runs else []


def _ids(seq: Sequence[int], k: int, where: str, holder: str) -> np.ndarray:
    """One sequence's ids as int64; an id beyond int64 is one no taxonomy holds."""
    try:
        return np.asarray([int(s) for s in seq], dtype=np.int64)
    except OverflowError:
        huge = next(int(s) for s in seq if not np.iinfo(np.int64).min <= int(s) <= np.iinfo(np.int64).max)
        raise InputError(f"{where} {k}: step id {huge} is not in {holder}") from None


def first_occurrences(positions: np.ndarray) -> np.ndarray:
    """The positions with every repeat after a step's first occurrence left out, in order."""
    _, first = np.unique(positions, return_index=True)
    return positions[np.sort(first)]
