"""A detector stream under ``--once``: an announcement (`KeyStepOnset`) names the place in the history its key-step
will take, counting only the steps that will be sent, not the repeats ``--once`` drops."""

from __future__ import annotations

from recognition.segmenter import OnsetEvent
from streaming.detector.streams import once_onset


def onset(step: int, before: tuple[int, ...] = ()) -> OnsetEvent:
    return OnsetEvent(step=step, start=12.0, confidence=0.8, frame=60, before=before, start_frame=58)


def test_a_step_before_the_announced_one_that_is_a_repeat_is_not_counted_in_its_place() -> None:
    # open_box, take_part sent; open_box seen again (a repeat, never sent) and still open when fix_part is
    # announced: the onset said index = 2 + 1, its key-step came at 2, and the checker dropped the early alert.
    assert once_onset(onset(2, before=(0,)), sent={0, 1}) == onset(2)
    assert once_onset(onset(2, before=(0, 3)), sent={0, 1}) == onset(2, before=(3,))
    assert once_onset(onset(2, before=(3, 3)), sent={0}) == onset(2, before=(3,))  # the second run of 3 repeats


def test_an_announcement_whose_step_will_be_a_repeat_is_not_sent() -> None:
    assert once_onset(onset(1), sent={0, 1}) is None
    assert once_onset(onset(1, before=(1, 2)), sent={0}) is None  # confirmed before it: it repeats that


def test_an_announcement_of_new_steps_goes_out_as_it_is() -> None:
    first = onset(2, before=(1,))
    assert once_onset(first, sent={0}) is first
