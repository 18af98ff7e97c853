"""Sequence pre-processing (docs/method.md): first/last occurrence, random re-de-duplication, observed-before rows."""

from __future__ import annotations

from collections import Counter

import numpy as np

from tests.tgml.helpers import last_occurrence
from tgml.sequences import (
    first_occurrence,
    first_occurrence_mask,
    last_occurrence_mask,
    observed_rows,
    pack,
    random_dedup_mask,
)

B, A, C, D = 1, 0, 2, 3


def test_first_and_last_occurrence_follow_the_spec_examples() -> None:
    assert first_occurrence([B, A, C, A, D]) == (B, A, C, D)  # BACAD -> BACD
    assert last_occurrence([B, A, C, A, D]) == (B, C, A, D)  # BACAD -> BCAD


def test_vectorised_masks_agree_with_the_plain_definitions() -> None:
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 6, size=int(rng.integers(1, 12))).tolist() for _ in range(50)]
    packed = pack(seqs)
    bounds = np.cumsum([len(s) for s in seqs])[:-1]
    for mask, plain in ((first_occurrence_mask(packed), first_occurrence), (last_occurrence_mask(packed),
                                                                          last_occurrence)):
        parts = np.split(np.where(mask, packed.steps, -1), bounds)
        assert [tuple(p[p >= 0].tolist()) for p in parts] == [plain(s) for s in seqs]


def test_random_dedup_moves_each_repeat_later_with_probability_half() -> None:
    packed = pack([[A, B, A, C, A]])
    rng = np.random.default_rng(1)
    counts = Counter(tuple(packed.steps[random_dedup_mask(packed, rng)].tolist()) for _ in range(4000))
    # A kept at position 4 if the last coin says "move" (1/2), at 2 if only the middle one does (1/4), else at 0.
    assert set(counts) == {(A, B, C), (B, A, C), (B, C, A)}
    assert abs(counts[(B, C, A)] / 4000 - 0.5) < 0.03
    assert abs(counts[(B, A, C)] / 4000 - 0.25) < 0.03
    assert abs(counts[(A, B, C)] / 4000 - 0.25) < 0.03


def test_random_dedup_keeps_every_step_once_and_is_reproducible() -> None:
    seqs = [[0, 1, 0, 2, 1, 3], [4, 4, 4], [5]]
    packed = pack(seqs)
    one = random_dedup_mask(packed, np.random.default_rng(7))
    two = random_dedup_mask(packed, np.random.default_rng(7))
    assert np.array_equal(one, two)
    kept = packed.steps[one]
    assert sorted(kept.tolist()) == [0, 1, 2, 3, 4, 5]


def test_observed_rows_mark_what_was_seen_before_each_position() -> None:
    packed = pack([[0, 1, 0, 2], [3, 1]])
    rows = observed_rows(packed, first_occurrence_mask(packed), np.ones(6, bool), n_nodes=4)
    assert rows.targets.tolist() == [0, 1, 2, 3, 1]
    assert rows.sequence.tolist() == [0, 0, 0, 1, 1]
    expected = np.array([[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]], np.float32)
    assert np.array_equal(rows.observed, expected)
