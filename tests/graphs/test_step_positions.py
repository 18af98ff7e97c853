"""Sequences of step ids as taxonomy positions (`graphs.step_positions`): what every learner and query reads, and
the one line that names a sequence holding an id the taxonomy does not."""

from __future__ import annotations

import numpy as np
import pytest

from graphs import InputError
from graphs.step_positions import first_occurrences, step_positions


def test_each_step_becomes_its_position_in_the_taxonomy_order_and_repeats_kept() -> None:
    runs = step_positions([[5, 3, 5], [], [7]], [7, 5, 3])
    assert [run.tolist() for run in runs] == [[1, 2, 1], [], [0]]
    assert step_positions([], [7, 5]) == []


def test_first_occurrences_keep_each_step_where_it_first_came() -> None:
    assert first_occurrences(np.array([2, 1, 2, 0, 1])).tolist() == [2, 1, 0]


@pytest.mark.parametrize(("sequences", "step_ids", "line"), [
    ([[1], [2, 9, 8]], [1, 2], "training sequence 1: step id 9 is not in the taxonomy"),
    ([[1]], [], "training sequence 0: step id 1 is not in the taxonomy"),
    ([[], [2**70]], [1], f"training sequence 1: step id {2**70} is not in the taxonomy"),
])
def test_an_unknown_id_names_its_sequence_and_the_id(sequences: list[list[int]], step_ids: list[int],
                                                     line: str) -> None:
    with pytest.raises(InputError) as err:
        step_positions(sequences, step_ids, "training sequence")
    assert str(err.value) == line
