"""The terminal view: rendered to a fixed-size capture console, checked as text."""

from __future__ import annotations

import io
import json

from rich.console import Console

from streaming.messages import Alert, KeyStepEvent, Status
from streaming.view import ViewState, jsonl_line, render


def draw(state: ViewState) -> str:
    console = Console(width=140, record=True, file=io.StringIO(), color_system=None)
    console.print(render(state))
    return console.export_text()


def alert(replayed: bool = False) -> Alert:
    return Alert("kitchen", 7, 1.0, "kitchen#1", "s", 2, "boil_water", 1, (1,), ("fill_kettle",), False, 0.9, replayed)


def test_view_shows_streams_alerts_and_recent_steps() -> None:
    state = ViewState(names={1: "fill_kettle", 2: "boil_water", 3: "get_cup", 4: "add_teabag"})
    state.apply(Status("kitchen", 3, 1.0, "s", (3, 2), (1, 4), 2, 1, 250, 4, 29.7, 0, False))
    state.apply(KeyStepEvent("kitchen", 1, 1.0, "s", 2, "boil_water", 4.0, 7.5, 0.93, 1, (3, 2)))
    state.apply(alert())
    text = draw(state)
    assert "kitchen" in text and "29.7" in text and "250" in text
    assert "get_cup, boil_water" in text  # done, in order
    assert "fill_kettle, add_teabag" in text  # allowed next
    assert "missing pre-conditions" in text and "fill_kettle" in text
    assert "4.0-7.5 s" in text and "0.93" in text


def test_re_sent_alerts_are_shown_once() -> None:
    state = ViewState()
    assert state.apply(alert())
    assert not state.apply(alert(replayed=True))  # a restarted checker re-sends it with the same id
    assert len(state.alerts) == 1
    assert draw(state).count("boil_water") == 1


def test_empty_view_says_it_is_waiting_and_counts_malformed() -> None:
    state = ViewState(malformed=3)
    text = draw(state)
    assert "waiting for streams" in text and "no mistakes so far" in text
    assert "3 malformed messages dropped" in text


def test_jsonl_line_is_the_wire_payload() -> None:
    line = json.loads(jsonl_line(alert()))
    assert line["kind"] == "alert" and line["version"] == 1 and line["missing_names"] == ["fill_kettle"]
