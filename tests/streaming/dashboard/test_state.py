"""What the dashboard makes of the checker's messages: one alert per id and run, retractions, acknowledgements,
tiles, names as plain text, and bounds on what it keeps."""

from __future__ import annotations

from typing import Any

from graphs.common.safe_text import printable
from streaming.dashboard.state import MAX_STREAMS, DashboardState
from streaming.messages import Alert, MissingSteps, Retraction, Status
from streaming.view.state import ViewState
from tests.hostile_text import HOSTILE_NAMES


def alert(index: int = 0, run: str = "aaaaaaaaaaaa", stream: str = "cam0", **fields: Any) -> Alert:
    values: dict[str, Any] = {
        "stream_id": stream, "seq": index, "timestamp": 100.0 + index, "alert_id": f"{stream}#{index}", "run": run,
        "step": 2, "step_name": "boil_water", "index": index, "missing": (1,), "missing_names": ("fill_kettle",),
        "undefined": False, "event_timestamp": 99.0, "replayed": False, "forgotten": 1,
        "forgotten_name": "fill_kettle", "forgotten_score": 1.0, "rule": "weighted", "probability": 0.9,
        "video_time": 12.5,
    }  # fmt: skip
    return Alert(**(values | fields))


def status(stream: str = "cam0", run: str = "aaaaaaaaaaaa", timestamp: float = 100.0, **fields: Any) -> Status:
    values: dict[str, Any] = {
        "stream_id": stream, "seq": 0, "timestamp": timestamp, "run": run, "done": (3, 2), "allowed": (4, 1),
        "current": 4, "alerts": 1, "frames": 50, "dropped": 0, "fps": 5.0, "gaps": 0, "ended": False, "lost": False,
        "allowed_scores": (0.6, 0.4), "rule": "weighted", "detector_ms": 1.5,
    }  # fmt: skip
    return Status(**(values | fields))


def test_an_alert_is_shown_once_per_run_and_again_for_a_new_run() -> None:
    state = DashboardState(names={1: "fill_kettle", 2: "boil_water"})
    first = state.apply(alert(), 1.0)
    assert [e["type"] for e in first] == ["alert"] and first[0]["alert"]["missing_names"] == ["fill_kettle"]
    assert state.apply(alert(replayed=True), 2.0) == []  # a re-send
    assert state.apply(alert(event_timestamp=101.0), 2.0) == []  # the early alert, confirmed
    again = state.apply(alert(run="bbbbbbbbbbbb"), 3.0)  # a new detector run: its ids start over
    assert again and again[0]["alert"]["id"] != first[0]["alert"]["id"]


def test_the_copy_of_an_alert_received_last_wins_as_in_the_terminal_view() -> None:
    # The early alert (evidence as of the step's start) and its confirmation (the whole segment's) may differ: the
    # dashboard kept the first copy, 0.55, while the terminal view of the same checker showed the confirmation's 0.97.
    state, view = DashboardState(), ViewState()
    state.apply(status(), 0.5)
    [shown] = state.apply(alert(probability=0.55, video_time=12.0), 1.0)
    state.take_dirty_tiles()
    view.apply(alert(probability=0.55, video_time=12.0))
    [update] = state.apply(alert(probability=0.97, video_time=12.5, event_timestamp=101.0), 2.0)
    assert view.apply(alert(probability=0.97, video_time=12.5, event_timestamp=101.0))
    assert update["type"] == "update" and update["alert"]["id"] == shown["alert"]["id"]
    assert update["alert"]["probability"] == 0.97 == view.alerts[-1][1].probability
    assert update["alert"]["video_time"] == 12.5
    assert state.take_dirty_tiles()[0]["last_alert"]["probability"] == 0.97
    assert state.apply(alert(probability=0.97, replayed=True), 3.0) == []  # a re-send that repeats it
    assert [a["probability"] for a in state.snapshot()["alerts"]] == [0.97]
    retraction = Retraction("cam0", 1, 101.0, "cam0#0", "aaaaaaaaaaaa", 2, "boil_water", 0, 1, "fill_kettle")
    state.apply(retraction, 4.0)
    assert state.apply(alert(probability=0.5, replayed=True), 5.0) == []  # a retraction ends it
    assert state.snapshot()["alerts"][0]["retracted"] is not None


def test_a_retraction_marks_its_alert_once() -> None:
    state = DashboardState()
    [event] = state.apply(alert(), 1.0)
    retraction = Retraction("cam0", 1, 101.0, "cam0#0", "aaaaaaaaaaaa", 2, "boil_water", 0, 1, "fill_kettle")
    [retracted] = state.apply(retraction, 2.0)
    assert retracted["type"] == "retraction" and retracted["alert"]["id"] == event["alert"]["id"]
    assert retracted["alert"]["retracted"] == {"confirmed": "fill_kettle", "at": 2.0}
    assert state.apply(retraction, 3.0) == []
    other_run = Retraction("cam0", 1, 101.0, "cam0#0", "cccccccccccc", 2, "boil_water", 0, None, None)
    assert state.apply(other_run, 3.0) == []  # an alert this dashboard never showed


def test_an_acknowledgement_is_remembered_once_and_anything_else_is_ignored() -> None:
    state = DashboardState()
    [event] = state.apply(alert(), 1.0)
    serial = event["alert"]["id"]
    for bad in ("1", None, True, 1.0, -1, 10**30, {"id": 1}):
        assert state.acknowledge(bad, 2.0) is None
    acked = state.acknowledge(serial, 2.0)
    assert acked is not None and acked["alert"]["acked_at"] == 2.0
    assert state.acknowledge(serial, 3.0) is None
    assert state.snapshot()["alerts"][0]["acked_at"] == 2.0  # a page that opens later sees it


def test_a_tile_shows_state_steps_next_steps_last_alert_and_latencies() -> None:
    state = DashboardState(names={1: "fill_kettle", 2: "boil_water", 3: "get_cup", 4: "add_teabag"})
    state.apply(alert(), 1.0)
    state.apply(status(), 1.0)
    [tile] = state.take_dirty_tiles()
    assert (tile["state"], tile["current"], tile["last_done"], tile["done"]) == ("live", "add_teabag", "boil_water", 2)
    assert tile["allowed"] == [{"step": 4, "name": "add_teabag", "probability": 0.6},
                               {"step": 1, "name": "fill_kettle", "probability": 0.4}]
    assert tile["last_alert"]["step_name"] == "boil_water" and tile["latency_ms"]["detector_ms"] == 1.5
    state.apply(status(timestamp=100.5), 2.0)  # the periodic re-send: nothing changed
    assert state.take_dirty_tiles() == []
    state.apply(status(lost=True, timestamp=101.0), 3.0)
    assert [t["state"] for t in state.take_dirty_tiles()] == ["lost"]
    state.apply(status(ended=True, timestamp=102.0), 4.0)
    state.apply(MissingSteps("cam0", 5, 102.0, "cam0#end", "aaaaaaaaaaaa", (6,), ("add_milk",), False, (1.0,)), 4.0)
    [ended] = state.take_dirty_tiles()
    assert ended["state"] == "ended" and ended["never_done"] == ["add_milk"]


def test_hostile_names_are_sent_as_printable_text() -> None:
    state = DashboardState(names={3: "<script>alert(1)</script>\x1b[2J"})
    [event] = state.apply(alert(step_name=HOSTILE_NAMES[2], missing_names=(HOSTILE_NAMES[3],)), 1.0)
    shown = event["alert"]
    assert shown["step_name"] == printable(HOSTILE_NAMES[2]) and "\x1b" not in shown["step_name"]
    assert shown["missing_names"] == [printable(HOSTILE_NAMES[3])]
    assert state.name(3) == "<script>alert(1)</script>\\x1b[2J"  # the page sets it as text: shown, never run


def test_what_the_dashboard_keeps_is_bounded() -> None:
    state = DashboardState(max_alerts=10)
    for index in range(50):
        state.apply(alert(index=index), float(index))
    assert len(state.alerts) == len(state.by_id) == 10
    assert [a["id"] for a in state.snapshot()["alerts"]] == list(range(50, 40, -1))  # the newest, newest first
    for index in range(50):  # the checker re-sends its recent alerts: a forgotten one does not come back
        assert state.apply(alert(index=index, replayed=True), 60.0) == []
    for n in range(MAX_STREAMS + 20):
        state.apply(status(stream=f"cam{n}", timestamp=float(n)), float(n))
    assert len(state.streams) == MAX_STREAMS and "cam0" not in state.streams  # the one silent longest went
