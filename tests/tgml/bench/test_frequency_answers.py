"""The graph-free reference of ``tgml bench-queries``: every answer from counts, checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from graphs.procedure_queries import UNDEFINED_MISTAKE
from tgml.bench.frequency_answers import FrequencyAnswers, came_before, first_positions, transition_counts

# Steps 10, 20, 30, 40 (40 never done). Three executions; the second repeats 10 (first occurrences count).
EXECUTIONS = [(10, 20, 30), (20, 10, 10), (10, 30)]
STEPS = (10, 20, 30, 40)


def test_counts_are_first_occurrences() -> None:
    runs = [[0, 1, 2], [1, 0, 0], [0, 2]]  # the second execution repeats 10 (index 0)
    positions = first_positions(runs, 4)
    assert positions[1].tolist() == [1.0, 0.0, np.inf, np.inf]  # 10 first done at position 1, not 2
    before = came_before(positions)
    # 20 came before 10 in one of the three executions holding 10; 10 before 20 in one of the two holding 20
    assert before[0, 1] == pytest.approx(1 / 3) and before[1, 0] == pytest.approx(1 / 2)
    assert before[2].tolist() == [1.0, 0.5, 0.0, 0.0] and before[3].tolist() == [0.0] * 4
    follows = transition_counts([[0, 1, 2], [1, 0], [0, 2]], 4)  # each step once, as the answers feed it
    assert follows[0].tolist() == [2.0, 1.0, 0.0, 0.0]  # first steps: 10 twice, 20 once
    assert follows[1].tolist() == [0.0, 1.0, 1.0, 0.0]  # after 10: 20 once, 30 once
    # 10 done again after 20: 20 did not come before 10, and 30 (not the repeat) followed 20.
    answers = FrequencyAnswers([(10, 20, 10, 30)], STEPS)
    assert answers.previous(10).steps == () and answers.previous(20).steps == (10,)
    assert answers.future(20, []).steps[0] == 30


def test_every_question_is_answered_from_the_counts() -> None:
    answers = FrequencyAnswers(EXECUTIONS, STEPS)
    assert answers.previous(30).steps == (10, 20) and answers.previous(30).scores == pytest.approx((1.0, 0.5))
    assert answers.optional(20).value == pytest.approx(1 / 3) and answers.optional(40).value == 1.0
    assert answers.optional(99).value == 0.0
    # 30 done after 20 only: 10, which always came before 30, is not done
    assert answers.mistake(30, [20]).value == 1.0 and answers.mistake(30, [10]).value == 0.5
    assert answers.mistake(40, []).value == UNDEFINED_MISTAKE  # never seen in training
    missing = answers.missing(30, [20])
    assert missing.steps == (10,) and missing.scores == (1.0,)
    at_end = answers.missing_at_end([10])
    assert at_end.steps == (20, 30) and at_end.scores == pytest.approx((2 / 3, 2 / 3))
    # after 10 (nothing else done): 20 and 30 each followed it once; ties broken by how often a step occurs
    after = answers.future(10, [])
    assert after.steps == (20, 30) and after.scores[0] == after.scores[1] > 1.0
    assert answers.future(None, []).steps[0] == 10  # the usual first step
    assert answers.future(99, []).steps == ()
