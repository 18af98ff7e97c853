"""Noise ablation of the PREGO benchmark: how mistake detection degrades with recognition errors.

Each test key-step is perturbed with probability ``p``: the current (last, mistaken) step is replaced by another
random class; each previous step is either replaced by another class, deleted, or preceded by an inserted random
class (one of the three, equally likely). The label layout is unchanged: the last step remains the mistake.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphs.common.errors import InputError

REPLACE, DELETE, INSERT = 0, 1, 2


def rate_seed(base_seed: int, rate: float) -> int:
    """Fixed noise seed of one rate, so adding or removing other rates never changes its perturbation."""
    return base_seed * 1000 + round(rate * 100)


def perturb_sequence(
    sequence: Sequence[int], rate: float, classes: np.ndarray, rng: np.random.Generator
) -> tuple[int, ...]:
    """Perturb one key-step sequence (see the module docstring).

    Args:
        sequence: key-step ids, last one the mistake; ids must be in ``classes``.
        rate: perturbation probability ``p`` per step.
        classes: int ``(C,)`` the taxonomy's step ids (C >= 2).
        rng: noise generator.

    Returns:
        The perturbed sequence (never empty: the current step is always kept).
    """
    return aligned_perturbation(sequence, rate, classes, rng)[0]


def aligned_perturbation(
    sequence: Sequence[int], rate: float, classes: np.ndarray, rng: np.random.Generator
) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """`perturb_sequence` (the same draws, the same result) and where each perturbed step came from.

    Args:
        sequence: key-step ids; ids must be in ``classes``.
        rate: perturbation probability ``p`` per step.
        classes: int ``(C,)`` the taxonomy's step ids (C >= 2).
        rng: noise generator.

    Returns:
        ``(perturbed, source, real)``: ``source (m',)`` the index in ``sequence`` of the step each perturbed step
        stands at (an inserted step: the step it precedes), ``real (m',)`` true where the perturbed step is the
        original one (neither inserted nor replaced).
    """
    lookup = {int(c): i for i, c in enumerate(classes)}
    idx = np.array([lookup[int(s)] for s in sequence], dtype=np.int64)  # (m,) class indices
    m, n = len(idx), len(classes)
    hit = rng.random(m) < rate
    op = rng.integers(0, 3, size=m)
    op[-1] = REPLACE  # the current step is only ever replaced
    # A shift in [1, n) modulo n always lands on a different class.
    replaced = (idx + rng.integers(1, n, size=m)) % n
    inserted = rng.integers(0, n, size=m)
    value = np.where(hit & (op == REPLACE), replaced, idx)
    keep = ~(hit & (op == DELETE))
    add = hit & (op == INSERT)
    # Interleave [inserted_k, value_k] per position and keep the slots that exist.
    slots = np.stack([inserted, value], axis=1).reshape(-1)  # (2m,)
    present = np.stack([add, keep], axis=1).reshape(-1)
    source = np.repeat(np.arange(m), 2)[present]
    real = np.stack([np.zeros(m, dtype=bool), ~(hit & (op == REPLACE))], axis=1).reshape(-1)[present]
    return tuple(int(c) for c in classes[slots[present]]), source, real


def perturb_sequences(
    sequences: Sequence[Sequence[int]], rate: float, step_ids: Sequence[int], seed: int
) -> list[tuple[int, ...]]:
    """Perturb every test sequence at one rate with a fixed seed.

    Args:
        sequences: test key-step sequences.
        rate: perturbation probability in [0, 1].
        step_ids: taxonomy ids (the random classes are drawn from them).
        seed: noise seed (see `rate_seed`).

    Returns:
        The perturbed sequences, same order.
    """
    if not 0.0 <= rate <= 1.0:
        raise InputError(f"perturbation rate {rate} is outside [0, 1]")
    classes = np.asarray(step_ids, dtype=np.int64)
    if len(classes) < 2:
        raise InputError("perturbation needs a taxonomy of at least two key-steps")
    rng = np.random.default_rng(seed)
    return [perturb_sequence(seq, rate, classes, rng) for seq in sequences]
