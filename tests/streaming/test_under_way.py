"""The step under way, as the checker tells every screen: a real segmenter's decisions, sent as the detector sends
them, through a real checker to a real viewer (`tests.streaming.under_way`)."""

from __future__ import annotations

from pathlib import Path

from streaming.messages import Status
from tests.streaming.under_way import BACKGROUND, frames, statuses_shown

GET_CUP, FILL_KETTLE = 3, 1  # steps of the tea graph with no pre-condition


def first_done(statuses: list[Status], done: tuple[int, ...]) -> int:
    return next(i for i, row in enumerate(statuses) if row.done == done)


def test_a_step_begun_again_after_a_short_one_stays_under_way_when_the_steps_before_are_confirmed(
    tmp_path: Path,
) -> None:
    # get_cup, a short fill_kettle, get_cup again: when the second get_cup is stable the detector sends a heartbeat
    # naming it, then the key-steps of the first get_cup and of fill_kettle. The checker took get_cup's key-step for
    # the end of the get_cup under way and said nothing was, until the next heartbeat (half a second).
    statuses = statuses_shown(tmp_path, frames((GET_CUP, 8), (FILL_KETTLE, 3), (GET_CUP, 8)))
    both = first_done(statuses, (GET_CUP, FILL_KETTLE))
    assert [row.current for row in statuses[both - 2: both + 1]] == [GET_CUP] * 3, statuses[both - 2: both + 1]


def test_a_short_step_between_background_is_under_way_while_its_confirmation_waits(tmp_path: Path) -> None:
    # Background, fill_kettle for 0.3 s (shorter than a stable run), background: fill_kettle is a clean short step,
    # confirmed once the background after it is stable (0.5 s later). Meanwhile nothing was said to be under way, and
    # no screen ever showed fill_kettle being done.
    statuses = statuses_shown(tmp_path, frames((BACKGROUND, 8), (FILL_KETTLE, 3), (BACKGROUND, 12)))
    done = first_done(statuses, (FILL_KETTLE,))
    assert FILL_KETTLE in [row.current for row in statuses[:done]], statuses[:done]
    assert statuses[done].current is None and statuses[-1].current is None  # once confirmed, background again

