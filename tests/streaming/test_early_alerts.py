"""Early alerts (``--alert-on onset``): the checker alerts on an announced step and retracts what is not confirmed."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from graphs.checker_settings import CheckerSettings
from streaming.checker.core import CheckerCore
from streaming.checker.streams import MAX_EARLY
from streaming.demo.procedure import STEP_IDS, name_of
from streaming.messages import (
    Alert,
    KeyStepOnset,
    MessageError,
    MissingSteps,
    Retraction,
    Status,
    decode,
    encode,
    run_of,
)
from streaming.view.render import render
from streaming.view.state import ViewState
from tests.streaming.helpers import beat, keystep, tea_graph

BOIL, FILL, GET_CUP = 2, 1, 3  # boil_water needs fill_kettle


def onset(history: tuple[int, ...], step: int, seq: int, before: tuple[int, ...] = (), **fields: Any) -> KeyStepOnset:
    """The announcement a detector sends for ``step`` after ``history`` (and ``before``, not confirmed yet)."""
    values: dict[str, Any] = {
        "stream_id": "cam0", "seq": seq, "timestamp": 1.5, "session": "s", "history": history, "step": step,
        "step_name": name_of(step) if step in STEP_IDS else str(step), "start": 3.0, "confidence": 0.9,
        "index": len(history) + len(before),
        "before": before, "withdrawn": False,
    }
    return KeyStepOnset(**(values | fields))


def served(core: CheckerCore, *messages: Any) -> list[Any]:
    """What the checker sends for each message, as the wire delivers it."""
    return [out for m in messages for out in core.serve([decode(encode(m))])]


def test_an_announced_step_done_too_early_is_alerted_before_it_is_confirmed() -> None:
    core = CheckerCore(tea_graph())
    early = served(core, keystep((GET_CUP,), 0), onset((GET_CUP,), BOIL, 1))
    assert [(a.step, a.alert_id) for a in early if isinstance(a, Alert)] == [(BOIL, "cam0#1")]
    later = served(core, keystep((GET_CUP, BOIL), 2))
    # Confirmed as announced: the confirmed alert repeats the id (viewers show one), nothing is retracted.
    assert [a.alert_id for a in later if isinstance(a, Alert)] == ["cam0#1"]
    assert not [m for m in later if isinstance(m, Retraction)]


def test_a_step_too_unsure_at_its_announcement_is_alerted_when_its_run_is_announced_again_as_stable() -> None:
    # The probabilistic checker weighs how likely the run is real: two frames of boil_water are not enough to alert,
    # the same run announced again once it lasted min_duration is (the segmenter's stable announcement), long
    # before its segment is confirmed.
    core = CheckerCore(tea_graph(), checking=CheckerSettings("probabilistic"))
    first = served(core, keystep((GET_CUP,), 0), onset((GET_CUP,), BOIL, 1, real=0.2))
    assert not [m for m in first if isinstance(m, Alert)]
    again = served(core, onset((GET_CUP,), BOIL, 2, real=0.95))
    (alert,) = [m for m in again if isinstance(m, Alert)]
    assert (alert.step, alert.alert_id) == (BOIL, "cam0#1") and alert.probability >= 0.5
    assert not [m for m in served(core, onset((GET_CUP,), BOIL, 3, real=0.99)) if isinstance(m, Alert)]  # once


def test_an_early_alert_is_retracted_when_another_step_is_confirmed_in_its_place() -> None:
    core = CheckerCore(tea_graph())
    served(core, keystep((GET_CUP,), 0), onset((GET_CUP,), BOIL, 1))
    out = served(core, keystep((GET_CUP, FILL), 2))
    (retraction,) = [m for m in out if isinstance(m, Retraction)]
    assert (retraction.alert_id, retraction.step, retraction.confirmed_name) == ("cam0#1", BOIL, "fill_kettle")


def test_a_withdrawn_announcement_retracts_its_alert_and_a_step_announced_in_order_raises_none() -> None:
    core = CheckerCore(tea_graph())
    served(core, keystep((GET_CUP,), 0))
    out = served(core, onset((GET_CUP,), BOIL, 1), onset((GET_CUP,), BOIL, 2, withdrawn=True))
    assert [type(m).__name__ for m in out] == ["Alert", "Retraction"]
    assert out[1].confirmed is None
    # fill_kettle still open before boil_water: the announcement counts it as done, so boil_water is in order.
    assert served(core, onset((GET_CUP,), BOIL, 3, before=(FILL,))) == []


def test_an_onset_whose_position_does_not_follow_its_history_is_refused_on_the_wire() -> None:
    with pytest.raises(MessageError, match="onset.index"):
        onset((GET_CUP,), BOIL, 1, index=5)


def test_the_view_shows_a_retracted_alert_struck_out_with_the_step_confirmed_instead() -> None:
    core = CheckerCore(tea_graph())
    state = ViewState()
    for m in served(core, keystep((GET_CUP,), 0), onset((GET_CUP,), BOIL, 1), keystep((GET_CUP, FILL), 2)):
        state.apply(m)
    # Colours on, so that the capture holds the style: a plain capture shows the same text struck out or not.
    console = Console(width=300, record=True, file=io.StringIO(), color_system="standard")
    console.print(render(state))
    text = console.export_text(styles=True)
    assert "retracted: fill_kettle was confirmed there instead: the alert no longer holds" in text
    assert "\x1b[2;9mboil_water" in text  # dim and struck out (SGR 2 and 9)


def test_an_onset_of_a_step_not_in_the_graph_is_refused_counted_and_the_next_one_served() -> None:
    core = CheckerCore(tea_graph())
    served(core, keystep((GET_CUP,), 0))
    assert served(core, onset((GET_CUP,), 42, 1)) == []
    assert core.counts["unknown_step"] == 1
    assert [type(m).__name__ for m in served(core, onset((GET_CUP,), BOIL, 2))] == ["Alert"]


def test_onsets_share_the_streams_seq_and_are_no_gap() -> None:
    # The detector numbers onsets, key-steps and heartbeats with one counter: every onset used to count as a gap.
    core = CheckerCore(tea_graph())
    out = served(core, keystep((GET_CUP,), 0), onset((GET_CUP,), BOIL, 1), onset((GET_CUP,), BOIL, 2, withdrawn=True),
                 keystep((GET_CUP, FILL), 3))
    assert [m.gaps for m in out if isinstance(m, Status)][-1] == 0
    out = served(core, onset((GET_CUP, FILL), BOIL, 6), keystep((GET_CUP, FILL, BOIL), 7))  # 4 and 5 never came
    assert [m.gaps for m in out if isinstance(m, Status)][-1] == 2


def test_a_replay_served_after_an_onset_of_its_poll_is_no_gap() -> None:
    # A key-step that applies many steps at once is served after the onsets of its poll; it came, it is no gap.
    core = CheckerCore(tea_graph())
    served(core, keystep((GET_CUP,), 0))
    history = (GET_CUP, *[FILL] * 100)
    out = core.serve([keystep(history, 1), onset(history, BOIL, 2)])
    assert [m.gaps for m in out if isinstance(m, Status)][-1] == 0
    longer = (*history, *[FILL] * 100)  # and one superseded by a later one of its poll: it came too
    out = core.serve([keystep(longer, 3), onset(longer, BOIL, 4), keystep((*longer, BOIL), 5)])
    assert [m.gaps for m in out if isinstance(m, Status)][-1] == 0


def test_an_early_alert_is_retracted_when_its_stream_starts_over() -> None:
    # A history that disagrees within the session, or a new session after the old one went silent: the stream starts
    # over and the announced step can no longer be confirmed. Its alert stood for ever in every view.
    core = CheckerCore(tea_graph())
    served(core, keystep((GET_CUP,), 0), onset((GET_CUP,), BOIL, 1))
    out = served(core, keystep((FILL, BOIL), 2))
    (retraction,) = [m for m in out if isinstance(m, Retraction)]
    assert (retraction.alert_id, retraction.step, retraction.confirmed) == ("cam0#1", BOIL, None)
    assert out.index(retraction) < min(i for i, m in enumerate(out) if isinstance(m, Status))
    now = [0.0]
    core = CheckerCore(tea_graph(), monotonic=lambda: now[0])
    served(core, keystep((GET_CUP,), 0), onset((GET_CUP,), BOIL, 1))
    now[0] += 60.0  # the detector died unheard; a new one takes the stream
    out = served(core, keystep((GET_CUP,), 0, session="t"))
    assert [(m.alert_id, m.run) for m in out if isinstance(m, Retraction)] == [("cam0#1", run_of("s"))]


def test_a_stream_holds_a_bounded_number_of_unconfirmed_early_alerts_the_rest_refused_and_counted() -> None:
    # Onsets with ever longer `before` lists raised 2,026 early alerts on one stream, all kept (2.3 MB; 600 MB over
    # 256 streams).
    core = CheckerCore(tea_graph())
    served(core, keystep((GET_CUP,), 0))
    out = served(core, *(onset((GET_CUP,), BOIL, 1 + k, before=(GET_CUP,) * k) for k in range(MAX_EARLY + 10)))
    assert len([m for m in out if isinstance(m, Alert)]) == MAX_EARLY == len(core.streams["cam0"].early)
    assert core.counts["over_budget"] == 10
    # Confirmed, the steps are checked as ever: the held alerts are settled, and room is made again.
    served(core, keystep((GET_CUP, FILL), MAX_EARLY + 20))
    assert len(core.streams["cam0"].early) < MAX_EARLY


def test_an_early_alert_is_retracted_when_its_lost_stream_is_freed_or_evicted() -> None:
    # The detector died between the announcement and the confirmation: once the checker forgets the stream (freed
    # after a long silence, or evicted for a new stream), nothing can confirm the step, and the alert stood for ever.
    now = [0.0]
    core = CheckerCore(tea_graph(), monotonic=lambda: now[0])
    served(core, keystep((GET_CUP,), 0), onset((GET_CUP,), BOIL, 1))
    now[0] += 10.0
    assert not [m for m in core.periodic(1.0) if isinstance(m, Retraction)]  # lost: it may still come back
    now[0] += 100.0
    assert [m.alert_id for m in core.periodic(1.0) if isinstance(m, Retraction)] == ["cam0#1"]  # freed
    now[0] = 0.0
    core = CheckerCore(tea_graph(), monotonic=lambda: now[0], max_streams=1)
    served(core, keystep((GET_CUP,), 0), onset((GET_CUP,), BOIL, 1))
    now[0] += 10.0
    core.periodic(1.0)
    out = served(core, keystep((GET_CUP,), 0, stream_id="cam1"))  # takes the lost stream's slot
    assert [(m.stream_id, m.alert_id) for m in out if isinstance(m, Retraction)] == [("cam0", "cam0#1")]


def test_onsets_keep_their_stream_live_and_none_raises_an_alert_on_a_lost_one() -> None:
    # A detector announcing steps was taken for lost after --stream-timeout (onsets did not count as its messages),
    # and an onset to a lost stream raised a live alert while the stream still said "lost".
    now = [0.0]
    core = CheckerCore(tea_graph(), monotonic=lambda: now[0], stream_timeout_s=5.0)
    served(core, keystep((GET_CUP,), 0))
    for seq in range(1, 8):  # one announcement a second, for 7 s: no heartbeat, no key-step
        now[0] = float(seq)
        served(core, onset((GET_CUP,), FILL, seq))
        core.periodic(0.0)
    assert not core.streams["cam0"].lost
    now[0] = 20.0
    core.periodic(0.0)
    assert core.streams["cam0"].lost
    assert not [m for m in served(core, onset((GET_CUP,), BOIL, 8)) if isinstance(m, Alert)]
    assert core.streams["cam0"].lost  # its next heartbeat or key-step brings it back, with its history


def test_a_session_that_ended_changes_nothing_when_it_speaks_again() -> None:
    # The same session sent a key-step after its end: the stream came back to life and its end report, re-sent as
    # it was, named a step the session had done since.
    core = CheckerCore(tea_graph())
    served(core, keystep((GET_CUP,), 0))
    [report] = [m for m in core.handle(beat(seq=1, history=(GET_CUP,), ended=True)) if not isinstance(m, Status)]
    assert isinstance(report, MissingSteps) and FILL in report.missing
    assert served(core, keystep((GET_CUP, FILL), 2)) == []
    assert served(core, onset((GET_CUP,), BOIL, 3)) == []
    assert core.streams["cam0"].ended and core.streams["cam0"].applied == (GET_CUP,)


def test_an_early_alert_withdrawn_for_another_mistake_at_its_position_is_retracted_before_that_alert() -> None:
    # pour_water announced at position 1, boil_water confirmed there, a mistake too: the checker sent boil_water's
    # alert, then the retraction of the same id, so every view showed the real mistake as withdrawn.
    core, view = CheckerCore(tea_graph()), ViewState()
    POUR = 5
    sent = served(core, keystep((GET_CUP,), 0), onset((GET_CUP,), POUR, 1), keystep((GET_CUP, BOIL), 2))
    about = [(type(m).__name__, m.step) for m in sent if isinstance(m, Alert | Retraction)]
    assert about == [("Alert", POUR), ("Retraction", POUR), ("Alert", BOIL)]
    retraction, confirmed = [m for m in sent if isinstance(m, Alert | Retraction)][1:]
    assert retraction.seq < confirmed.seq and retraction.alert_id == confirmed.alert_id == "cam0#1"
    for message in sent:
        view.apply(message)
    standing = [a for _, a in view.alerts if a.alert_id not in view.retracted.get("cam0", {})]
    assert [a.step for a in standing] == [BOIL]
