"""The view follows the wire's rules on copies of one alert (docs/wire-format.md): the copy received last wins, and a
restarted checker's numbers, which start over, never hold its copies back."""

from __future__ import annotations

from dataclasses import replace

from streaming.messages import Alert, encode_payload
from streaming.view.state import ViewState


def early_alert() -> Alert:
    """The early alert on boil_water (its onset), with the detector's evidence as of the run's start."""
    return Alert("kitchen", 40, 1.0, "kitchen#1", "6f9a8ee8045d", 2, "boil_water", 1, (1,), ("fill_kettle",), False,
                 0.9, False, 1, "fill_kettle", 1.0, "weighted", probability=0.61, video_time=4.4)


def test_the_copy_received_last_wins_and_a_plain_re_send_is_no_news() -> None:
    state = ViewState()
    assert state.apply(early_alert())
    confirmed = replace(early_alert(), seq=41, event_timestamp=1.5, probability=0.98)
    assert state.apply(confirmed)  # the confirmation says something new: its probability
    assert [a.probability for _, a in state.alerts] == [0.98]
    assert not state.apply(replace(confirmed, seq=50, replayed=True))  # a re-send repeats it
    # A restarted checker's seq starts over: its rebuilt copy comes with a lower number, and is the newest all the same.
    rebuilt = replace(confirmed, seq=2, replayed=True, video_time=None, probability=1.0)
    assert state.apply(rebuilt)
    # It wins, but it knows no video time: the one shown stays (it went blank on every screen at a checker restart).
    assert [(a.seq, a.probability, a.video_time) for _, a in state.alerts] == [(2, 1.0, 4.4)]
    assert '"probability":1.0' in encode_payload(rebuilt).decode()
