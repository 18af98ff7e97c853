"""The coincidental pre-conditions `tgml train` warns of: P * 2^(1-n) over the pairs of steps every execution has."""

from __future__ import annotations

from tgml.coincidence import coincident_orders


def test_one_execution_makes_every_pair_of_its_steps_a_possible_coincidence() -> None:
    one = coincident_orders([[1, 2, 3, 4]])
    assert (one.executions, one.pairs, one.expected, one.too_few) == (1, 6, 6.0, True)
    assert one.executions_needed == 5  # 6 / 2^4 = 0.375 < 0.5, 6 / 2^3 = 0.75 is not


def test_only_the_pairs_every_execution_has_are_counted_and_repeats_do_not_add_pairs() -> None:
    # Step 4 is missing from the second execution and step 1 is repeated: steps 1-3 make 3 pairs.
    counted = coincident_orders([[1, 2, 3, 4, 1], [3, 2, 1], [2, 1, 3, 4]])
    assert (counted.pairs, counted.expected, counted.executions_needed) == (3, 0.75, 4)


def test_the_warning_starts_exactly_where_the_expected_count_reaches_one_half() -> None:
    # 1 pair: 2 executions expect 1/2 (warned), 3 expect 1/4.
    assert coincident_orders([[1, 2]] * 2).too_few
    assert not coincident_orders([[1, 2]] * 3).too_few
    # Executions with no two steps in common show no order to learn by coincidence.
    assert not coincident_orders([[1], [1]]).too_few
    assert not coincident_orders([[1, 2], [3, 4]]).too_few
