"""Which checker a stream gets: chosen by name from one table (`graphs.checker_settings.CHECKERS`), in every command."""

from __future__ import annotations

import pytest

from graphs.checker import PreconditionChecker
from graphs.checker_settings import CHECKERS, DEFAULT_CHECKER, CheckerEntry, CheckerSettings, checker_entry
from graphs.common.errors import InputError
from graphs.order_rules import LATE_STEP, ORDER_RULES
from graphs.probabilistic_checker import ProbabilisticChecker
from tests.graphs.test_probabilistic_checker import tea


def test_every_checker_of_the_table_is_built_by_its_name_and_answers_a_step() -> None:
    assert DEFAULT_CHECKER in CHECKERS and CheckerSettings().kind == DEFAULT_CHECKER
    built = {name: CheckerSettings(name).new(tea()) for name in CHECKERS}
    assert isinstance(built["binary"], PreconditionChecker)
    assert isinstance(built["probabilistic"], ProbabilisticChecker)
    for name, checker in built.items():
        verdict = checker.observe(2)  # boil before fill: every checker names fill as missing
        assert verdict.is_mistake and 1 in verdict.missing, name
        assert checker.done == (2,) and len(checker.history) == 1
        assert set(CHECKERS[name].order_rules) <= set(ORDER_RULES) and CHECKERS[name].summary


def test_a_checker_added_to_the_table_is_chosen_by_name_with_no_other_change(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = CheckerEntry("strict-order", "graphs.checker_settings:binary_checker", "a test's checker",
                         order_rules=(LATE_STEP,))
    monkeypatch.setitem(CHECKERS, entry.name, entry)
    checker = CheckerSettings("strict-order", order_rule=LATE_STEP).new(tea())
    assert isinstance(checker, PreconditionChecker) and checker.late_step
    with pytest.raises(InputError, match="--order-rule precondition needs --checker probabilistic or binary"):
        CheckerSettings("strict-order")


def test_an_unknown_checker_is_one_line_naming_the_option_and_the_choices() -> None:
    with pytest.raises(InputError) as refused:
        CheckerSettings("psychic")
    assert str(refused.value) == "--checker 'psychic': not one of the 2 known (probabilistic, binary)"
    with pytest.raises(InputError, match=r"^--method 'x': not one of the 2 known \(probabilistic, binary\)$"):
        checker_entry("x", "--method")


def test_an_order_rule_the_checker_does_not_apply_is_refused_naming_the_checkers_that_do() -> None:
    with pytest.raises(InputError) as refused:
        CheckerSettings("probabilistic", order_rule=LATE_STEP)
    line = str(refused.value)
    assert line.startswith("--order-rule late-step needs --checker binary: the probabilistic checker")
    assert "\n" not in line
