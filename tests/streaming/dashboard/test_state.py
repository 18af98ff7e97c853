"""What the dashboard makes of the checker's messages: one alert per id and run, retractions, acknowledgements,
tiles, names as plain text, and bounds on what it keeps."""

from __future__ import annotations

from typing import Any

from graphs.common.safe_text import printable
from streaming.checker.streams import RESEND_ALERTS
from streaming.dashboard.state import MAX_STREAMS, DashboardState
from streaming.messages import Alert, MissingSteps, Retraction, Status, StepEvent
from streaming.next_steps import allowed_next
from streaming.session_verdict import no_verdict_text
from streaming.step_names import MAX_CONFLICTS
from streaming.transport import SILENT_S
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
    state.take_dirty_tiles(1.0)
    view.apply(alert(probability=0.55, video_time=12.0))
    [update] = state.apply(alert(probability=0.97, video_time=12.5, event_timestamp=101.0), 2.0)
    assert view.apply(alert(probability=0.97, video_time=12.5, event_timestamp=101.0))
    assert update["type"] == "update" and update["alert"]["id"] == shown["alert"]["id"]
    assert update["alert"]["probability"] == 0.97 == view.alerts[-1][1].probability
    assert update["alert"]["video_time"] == 12.5
    assert state.take_dirty_tiles(2.0)[0]["last_alert"]["probability"] == 0.97
    assert state.apply(alert(probability=0.97, replayed=True), 3.0) == []  # a re-send that repeats it
    # A restarted checker's rebuilt copy knows no video time: the card kept "video time unknown" and lost its picture.
    state.apply(alert(probability=0.97, replayed=True, video_time=None), 3.5)
    assert [a["video_time"] for a in state.snapshot(3.5)["alerts"]] == [12.5]
    assert [a["probability"] for a in state.snapshot(3.0)["alerts"]] == [0.97]
    retraction = Retraction("cam0", 1, 101.0, "cam0#0", "aaaaaaaaaaaa", 2, "boil_water", 0, 1, "fill_kettle")
    state.apply(retraction, 4.0)
    assert state.snapshot(5.0)["alerts"][0]["retracted"] is not None


def test_an_alert_after_its_retraction_is_a_new_mistake_in_the_view_and_on_the_dashboard() -> None:
    # The early alert at a position withdrawn, then the step confirmed there is a mistake too: the checker sends its
    # alert with the same id. The dashboard dropped it (a retraction ended the id for good), so a real mistake never
    # showed; the view kept it marked retracted and ignored its own retraction later.
    state, view = DashboardState(), ViewState()
    early = alert(index=1, step=4, step_name="add_teabag")
    withdrawn = Retraction("cam0", 2, 101.0, "cam0#1", "aaaaaaaaaaaa", 4, "add_teabag", 1, 2, "boil_water")
    confirmed = alert(index=1, event_timestamp=102.0)  # boil_water before fill_kettle, at the same position
    [first] = state.apply(early, 1.0)
    state.apply(withdrawn, 2.0)
    [second] = state.apply(confirmed, 3.0)
    assert second["type"] == "alert" and second["alert"]["id"] != first["alert"]["id"]
    assert second["alert"]["step_name"] == "boil_water" and second["alert"]["retracted"] is None
    assert [(a["step_name"], a["retracted"] is None) for a in state.snapshot(3.0)["alerts"]] == [
        ("boil_water", True), ("add_teabag", False)]  # newest first
    assert view.apply(early) and view.apply(withdrawn) and view.apply(confirmed)  # each one news
    assert view.alerts[-1][1].step_name == "boil_water" and "cam0#1" not in view.retracted["cam0"]
    rebuilt = alert(index=1, event_timestamp=102.5, replayed=True, video_time=None)  # e.g. after a restart
    view.apply(StepEvent(stream_id="cam0", seq=5, timestamp=102.0, run="aaaaaaaaaaaa", step=4, step_name="add_teabag",
                         start=10.0, end=12.0, confidence=0.9, index=1))
    view.apply(withdrawn)
    view.apply(rebuilt)
    assert view.alerts[-1][1].video_time is None  # neither the withdrawn add_teabag alert's 12.5 nor its step's span
    assert ("cam0", "aaaaaaaaaaaa", 1) not in view.alert_video
    # And a retraction of it after that (a session started over) ends it, in both.
    again = Retraction("cam0", 4, 103.0, "cam0#1", "aaaaaaaaaaaa", 2, "boil_water", 1, None, None)
    assert state.apply(again, 4.0)[0]["alert"]["id"] == second["alert"]["id"] and view.apply(again)
    assert "cam0#1" in view.retracted["cam0"]


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
    assert state.snapshot(3.0)["alerts"][0]["acked_at"] == 2.0  # a page that opens later sees it


def test_a_tile_shows_state_steps_next_steps_last_alert_and_latencies() -> None:
    state = DashboardState(names={1: "fill_kettle", 2: "boil_water", 3: "get_cup", 4: "add_teabag"})
    state.apply(alert(), 1.0)
    state.apply(status(), 1.0)
    [tile] = state.take_dirty_tiles(1.0)
    assert (tile["state"], tile["current"], tile["last_done"], tile["done"]) == ("live", "add_teabag", "boil_water", 2)
    # add_teabag is being done now: not "next", as in the terminal view (the dashboard listed it first, at 60 %)
    assert tile["allowed"] == [{"step": 1, "name": "fill_kettle", "probability": 0.4}]
    assert [(a["step"], a["probability"]) for a in tile["allowed"]] == allowed_next(status())
    assert tile["last_alert"]["step_name"] == "boil_water" and tile["latency_ms"]["detector_ms"] == 1.5
    assert tile["fps"] == 5.0 and tile["heard"] == 1.0
    state.apply(status(timestamp=100.5), 2.0)  # the periodic re-send: nothing changed
    assert state.take_dirty_tiles(2.0) == []
    state.apply(status(lost=True, timestamp=101.0), 3.0)
    [lost] = state.take_dirty_tiles(3.0)
    # what a lost stream said last is old news: no step being done now, no frame rate; since when it is lost
    assert (lost["state"], lost["current"], lost["fps"], lost["since"]) == ("lost", None, None, 3.0)
    state.apply(status(ended=True, timestamp=102.0), 4.0)
    state.apply(MissingSteps("cam0", 5, 102.0, "cam0#end", "aaaaaaaaaaaa", (6,), ("add_milk",), False, (1.0,)), 4.0)
    [ended] = state.take_dirty_tiles(4.0)
    assert ended["state"] == "ended" and ended["never_done"] == ["add_milk"] and ended["allowed"] == []


def test_a_session_that_recognised_nothing_lists_no_step_never_done_and_says_why_as_the_view_does() -> None:
    # The tile said "session ended; never done: <every step>" where the terminal view gives no verdict.
    state = DashboardState(names={6: "add_milk"})
    state.apply(status(ended=True, done=(), alerts=0, current=None, frames=41), 4.0)
    state.apply(MissingSteps("cam0", 5, 102.0, "cam0#end", "aaaaaaaaaaaa", (6,), ("add_milk",), False, (1.0,)), 4.0)
    [ended] = state.take_dirty_tiles(4.0)
    assert ended["never_done"] is None
    assert ended["no_verdict"] == no_verdict_text(41) and ended["no_verdict"].startswith("no key-step recognised in 41")


def test_a_stream_whose_status_stops_coming_is_no_longer_shown_live() -> None:
    # A restarted checker forgets a stream whose detector went away meanwhile: its tile said LIVE for ever.
    state = DashboardState(names={4: "add_teabag"})
    state.apply(status(), 10.0)
    state.apply(status(stream="cam1", ended=True), 10.0)
    state.apply(status(stream="cam2", lost=True), 10.0)
    assert {t["stream"]: t["state"] for t in state.take_dirty_tiles(10.0)} == {
        "cam0": "live", "cam1": "ended", "cam2": "lost"}
    state.apply(status(stream="cam2", lost=True, timestamp=101.0), 11.0)  # the checker still re-sends cam2
    assert state.take_dirty_tiles(10.0 + SILENT_S - 0.1) == []  # a re-send or two missed: no news
    tiles = {t["stream"]: t for t in state.take_dirty_tiles(10.0 + SILENT_S)}
    assert set(tiles) == {"cam0"}  # an ended stream stays ended; cam2 was heard at 11.0
    assert (tiles["cam0"]["state"], tiles["cam0"]["heard"], tiles["cam0"]["current"], tiles["cam0"]["fps"]) == (
        "silent", 10.0, None, None)
    assert state.take_dirty_tiles(11.0 + SILENT_S)[0]["stream"] == "cam2"  # a lost one the checker let go too
    assert [t["state"] for t in state.snapshot(30.0)["tiles"]] == ["silent", "ended", "silent"]
    state.apply(status(timestamp=130.0), 30.0)  # it speaks again (a restarted detector took the stream over)
    assert [(t["stream"], t["state"]) for t in state.take_dirty_tiles(30.0)] == [("cam0", "live")]


def test_no_tile_is_live_while_the_checker_is_not_answering() -> None:
    state = DashboardState()
    state.apply(status(), 10.0)
    state.apply(status(stream="cam1", ended=True), 10.0)
    state.apply(status(stream="cam2", lost=True), 10.0)
    state.take_dirty_tiles(10.0)
    down = state.take_dirty_tiles(10.5, connected=False)
    assert {t["stream"]: t["state"] for t in down} == {"cam0": "unknown", "cam2": "unknown"}  # cam1 stays ended
    assert all(t["current"] is None and t["heard"] == 10.0 for t in down)
    assert state.take_dirty_tiles(11.0, connected=False) == []  # said once
    assert [t["state"] for t in state.snapshot(11.0, connected=False)["tiles"]] == ["unknown", "ended", "unknown"]
    state.apply(status(timestamp=101.0), 11.5)
    state.apply(status(stream="cam2", lost=True, timestamp=101.0), 11.5)
    assert {t["stream"]: t["state"] for t in state.take_dirty_tiles(11.5)} == {"cam0": "live", "cam2": "lost"}


def test_raised_is_when_the_alert_was_raised_and_re_sent_only_when_no_live_copy_came() -> None:
    # "raised" showed the latest copy's send time ("raised 17:46:01 (re-sent)", "acknowledged 17:45:45"), and every
    # alert read "(re-sent)" once a re-send had come, though the dashboard had received it live.
    state = DashboardState()
    [event] = state.apply(alert(timestamp=100.0, event_timestamp=99.0), 100.0)
    assert (event["alert"]["raised"], event["alert"]["replayed"]) == (99.0, False)
    state.acknowledge(event["alert"]["id"], 101.0)
    assert state.apply(alert(timestamp=110.0, event_timestamp=99.0, replayed=True), 110.0) == []
    [shown] = state.snapshot(110.0)["alerts"]
    assert (shown["raised"], shown["replayed"], shown["acked_at"]) == (99.0, False, 101.0)

    late = DashboardState()  # started after the alert: it learns of it from the checker's re-sends
    [event] = late.apply(alert(timestamp=120.0, event_timestamp=99.0, replayed=True), 120.0)
    assert (event["alert"]["raised"], event["alert"]["replayed"]) == (99.0, True)
    # the early alert's confirmation comes live: not a re-send any more, and still raised at the onset
    [update] = late.apply(alert(timestamp=121.0, event_timestamp=104.0, replayed=False), 121.0)
    assert update["type"] == "update" and (update["alert"]["raised"], update["alert"]["replayed"]) == (99.0, False)


def test_a_step_the_checker_names_otherwise_than_the_graph_is_said_once_and_its_name_shown() -> None:
    # Given another graph than the checker's, the dashboard marked "attach_legs" for a "boil_water" alert, silently.
    state = DashboardState(names={1: "unbox_parts", 2: "attach_legs", 4: "add_teabag"})
    events = state.apply(alert(), 1.0)  # boil_water (2) before fill_kettle (1)
    conflicts = [e for e in events if e["type"] == "name_conflict"]
    assert conflicts == [
        {"type": "name_conflict", "step": 2, "graph_name": "attach_legs", "checker_name": "boil_water"},
        {"type": "name_conflict", "step": 1, "graph_name": "unbox_parts", "checker_name": "fill_kettle"},
    ]
    assert [e["type"] for e in events][-1] == "alert"
    # A step the checker has not named yet shows its id: the graph's names are wrong for its steps.
    assert (state.name(2), state.name(1), state.name(4)) == ("boil_water", "fill_kettle", "4")
    assert [e["type"] for e in state.apply(alert(index=1), 2.0)] == ["alert"]  # said once per step
    assert [c["step"] for c in state.snapshot(2.0)["name_conflicts"]] == [2, 1]  # for a page that opens later
    learned = DashboardState()  # no --graph: names learned from the wire are not a graph to contradict
    learned.apply(alert(), 1.0)
    assert [e["type"] for e in learned.apply(alert(index=1, step_name="boil"), 2.0)] == ["alert"]
    assert learned.name_conflicts == {}
    many = DashboardState(names={step: f"graph_{step}" for step in range(MAX_CONFLICTS + 10)})
    for n, steps in enumerate((range(0, MAX_CONFLICTS // 2), range(MAX_CONFLICTS // 2, MAX_CONFLICTS + 10))):
        many.apply(MissingSteps(f"cam{n}", 5, 102.0, f"cam{n}#end", "aaaaaaaaaaaa", tuple(steps),
                                tuple(f"s{s}" for s in steps), False, (1.0,) * len(steps)), 4.0)  # fmt: skip
    assert len(many.name_conflicts) == MAX_CONFLICTS  # bounded, whatever a peer sends


def report(stream: str = "cam0", run: str = "aaaaaaaaaaaa", replayed: bool = False) -> MissingSteps:
    return MissingSteps(stream, 5, 102.0, f"{stream}#end", run, (6,), ("add_milk",), replayed, (1.0,))


def test_an_ended_session_and_its_end_report_outlive_its_tile_once_each_bounded() -> None:
    # The end report went with the tile, some 11 minutes after the session ended: a supervisor who looked later never
    # learned that a step was forgotten.
    state = DashboardState(names={6: "add_milk"}, max_finished=3)
    state.apply(status(), 1.0)
    # The checker sends the report before the ended status: the session is listed from the report, then completed.
    [event] = state.apply(report(), 2.0)
    assert event["type"] == "finished" and event["session"]["never_done"] == ["add_milk"]
    [event] = state.apply(status(ended=True, alerts=2), 2.5)
    assert event["session"] | {"run": None} == {
        "stream": "cam0", "run": None, "ended": 2.0, "seen_end": True, "stopped": False, "done": 2, "last_done": "2",
        "alerts": 2, "never_done": ["add_milk"], "no_verdict": None}
    assert state.apply(status(ended=True, alerts=2), 3.0) == [] and state.apply(report(replayed=True), 3.0) == []
    state.forget_s, state.answering_since = 10.0, 0.0
    state.forget_gone(20.0, connected=True)
    assert state.snapshot(20.0)["tiles"] == [] and state.take_gone() == ["cam0"]
    [kept] = state.snapshot(20.0)["finished"]  # for a page that opens later
    assert kept["stream"] == "cam0" and kept["never_done"] == ["add_milk"] and kept["ended"] == 2.0
    # Back in the same run (the checker re-sends what it holds): listed once.
    assert state.apply(report(replayed=True), 21.0) == [] and state.apply(status(ended=True, alerts=2), 21.0) == []
    # Known only from re-sends (this dashboard started later): said so. Every step done: no report, an entry still.
    [late] = state.apply(status(stream="cam1", ended=True), 22.0)
    assert late["session"]["seen_end"] is False and late["session"]["never_done"] is None
    # Nothing recognised: no verdict, as on the tile and in the view.
    state.apply(status(stream="cam2", done=(), alerts=0, frames=41), 23.0)
    state.apply(report(stream="cam2"), 23.0)
    [blank] = state.apply(status(stream="cam2", ended=True, done=(), alerts=0, frames=41), 23.5)
    assert blank["session"]["never_done"] is None and blank["session"]["no_verdict"] == no_verdict_text(41)
    # A session ended by the next one starting on its stream: its report alone, without an ended status.
    state.apply(report(stream="cam3", run="cccccccccccc"), 24.0)
    assert [(s["stream"], s["never_done"]) for s in state.snapshot(24.0)["finished"]] == [
        ("cam3", ["add_milk"]), ("cam2", None), ("cam1", None)]  # newest first, bounded: cam0 went
    assert state.snapshot(24.0)["max_finished"] == 3


def test_a_finished_session_whose_detector_was_stopped_says_so_as_its_tile_did() -> None:
    # The list said "ended" of a camera stopped by hand, as the tile had before it learned to say "stopped".
    state = DashboardState(names={6: "add_milk"})
    state.apply(status(), 1.0)
    state.apply(report(), 2.0)
    [event] = state.apply(status(ended=True, stopped=True), 2.5)
    assert event["session"]["stopped"] is True and event["session"]["never_done"] == ["add_milk"]


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
    assert [a["id"] for a in state.snapshot(50.0)["alerts"]] == list(range(50, 40, -1))  # the newest, newest first
    for index in range(50):  # the checker re-sends its recent alerts: a forgotten one does not come back
        assert state.apply(alert(index=index, replayed=True), 60.0) == []
    # One run's alert ids: a 4,096-step run brought as many, kept for ever, in each of 256 streams (about 150 MB).
    for index in range(50, 4096):
        state.apply(alert(index=index), float(index))
    _, ids = state.seen["cam0"]
    assert len(ids) <= 10 + 2 * RESEND_ALERTS
    for index in range(4096 - RESEND_ALERTS, 4096):  # the checker's re-sends of its newest: nothing new
        assert state.apply(alert(index=index, replayed=True), 5000.0) == []
    for n in range(MAX_STREAMS + 20):
        state.apply(status(stream=f"cam{n}", timestamp=float(n)), float(n))
    assert len(state.streams) == MAX_STREAMS and "cam0" not in state.streams  # the one silent longest went
    # and the pages are told, or each open page kept every tile it was ever sent
    assert state.take_gone() == [f"cam{n}" for n in range(20)] and state.take_gone() == []


def test_alerts_no_longer_kept_and_never_dealt_with_are_still_counted() -> None:
    # The header's "not acknowledged" counted the kept alerts only: alerts nobody looked at left it as newer ones
    # pushed them out, and a supervisor read the count as dealt with.
    state = DashboardState(max_alerts=3)
    for index in range(3):
        state.apply(alert(index=index), float(index))
    state.acknowledge(state.alerts[0].id, 3.0)  # acknowledged, then pushed out: dealt with
    retraction = Retraction("cam0", 1, 101.0, "cam0#1", "aaaaaaaaaaaa", 2, "boil_water", 1, 1, "fill_kettle")
    state.apply(retraction, 3.0)  # retracted, then pushed out: nothing to deal with
    for index in range(3, 7):
        state.apply(alert(index=index), float(index))
    assert state.forgotten_open == 2  # alerts 2 and 3: pushed out, neither acknowledged nor retracted
    assert state.snapshot(8.0)["forgotten_open"] == 2


def test_a_lost_stream_lists_the_step_it_was_last_seen_doing_among_those_still_to_come() -> None:
    # Its screens say no step is being done now ("-"), yet that step was left out of "allowed next" without a word.
    assert allowed_next(status()) == [(1, 0.4)]  # live: add_teabag (4) is now, not next
    assert allowed_next(status(lost=True)) == [(4, 0.6), (1, 0.4)]
    state = DashboardState(names={1: "fill_kettle", 4: "add_teabag"})
    state.apply(status(lost=True), 1.0)
    [tile] = state.take_dirty_tiles(1.0)
    assert tile["current"] is None and [a["name"] for a in tile["allowed"]] == ["add_teabag", "fill_kettle"]


def test_a_finished_session_pushed_out_is_not_listed_again_by_the_checker_s_re_sends() -> None:
    # The checker re-sends every stream it holds each 0.5 s, for a minute after each ended: with more ended sessions
    # held than the list keeps, each re-send of one pushed out listed it again as the newest, "ended" at that moment,
    # and pushed out another, which the next re-send listed again: every page got a "finished" event per re-send and
    # the list's order and times churned until the checker let the streams go.
    state = DashboardState(names={6: "add_milk"}, max_finished=2)
    for k, stream in enumerate(("cam0", "cam1", "cam2")):
        state.apply(status(stream=stream), 1.0 + k)
        state.apply(report(stream=stream), 2.0 + k)
        state.apply(status(stream=stream, ended=True), 2.5 + k)
    listed = [(s["stream"], s["ended"]) for s in state.snapshot(10.0)["finished"]]
    assert listed == [("cam2", 4.0), ("cam1", 3.0)]
    for stream in ("cam0", "cam1", "cam2"):  # the checker's re-sends
        assert state.apply(report(stream=stream, replayed=True), 10.0) == []
        assert state.apply(status(stream=stream, ended=True), 10.0) == []
    assert [(s["stream"], s["ended"]) for s in state.snapshot(10.0)["finished"]] == listed


def test_a_session_that_ended_while_the_checker_was_out_of_reach_is_said_heard_of_late() -> None:
    # The link to the checker down while the session ended: back, the checker's re-sent status was taken for the run
    # turning ended before this dashboard's eyes, and the list said "ended" at the moment the link came back, with no
    # "or before (re-sent)"; with the re-sent report first, it said it. Which came first decided.
    for first_report in (False, True):
        state = DashboardState(names={6: "add_milk"})
        state.apply(status(), 1.0)
        state.apply(status(), 1.5)
        back = 1.5 + SILENT_S + 30.0  # the link came back
        if first_report:
            state.apply(report(replayed=True), back)
        [event] = state.apply(status(ended=True), back + 0.1)
        if not first_report:
            state.apply(report(replayed=True), back + 0.2)
        assert event["session"]["seen_end"] is False, first_report
    # Heard turning ended as it happened (its status comes every 0.5 s): said so.
    state = DashboardState()
    state.apply(status(), 1.0)
    [event] = state.apply(status(ended=True), 1.5)
    assert event["session"]["seen_end"] is True
