"""The terminal view: rendered to a fixed-size capture console, checked as text."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import zmq
from rich.console import Console

from graphs.task_graph import load_graph
from streaming.demo.procedure import DEMO_EXECUTIONS
from streaming.detector_service import EventPublisher
from streaming.messages import Alert, CheckerHealth, MissingSteps, Status, StepEvent, run_of
from streaming.transport import Publisher, bind, connect
from streaming.view import ViewState, graph_names, jsonl_line, render
from streaming.viewer import Viewer, run_view
from tests.hostile_text import HOSTILE_NAMES, assert_shown_safely
from tests.streaming.helpers import running_checker, tea_graph, wait_for


def draw(state: ViewState, width: int = 140) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(render(state))
    return console.export_text()


def alert(replayed: bool = False) -> Alert:
    return Alert("kitchen", 7, 1.0, "kitchen#1", "s", 2, "boil_water", 1, (1,), ("fill_kettle",), False, 0.9, replayed,
                 1, "fill_kettle", 1.0, "binary")


def status(run: str = "s", done: tuple[int, ...] = (3, 2), allowed: tuple[int, ...] = (1, 4), **fields: Any) -> Status:
    """A status of stream ``kitchen``; any other field can be set."""
    values: dict[str, Any] = {
        "stream_id": "kitchen", "seq": 3, "timestamp": 1.0, "run": run, "done": done, "allowed": allowed,
        "current": 2, "alerts": 1, "frames": 250, "dropped": 4, "fps": 29.7, "gaps": 0, "ended": False, "lost": False,
        "allowed_scores": (0.0,) * len(allowed), "rule": "binary",
    }
    return Status(**(values | fields))


def test_view_shows_streams_alerts_and_recent_steps() -> None:
    state = ViewState(names={1: "fill_kettle", 2: "boil_water", 3: "get_cup", 4: "add_teabag"})
    state.apply(status())
    state.apply(StepEvent("kitchen", 4, 1.2, 2, "boil_water", 4.0, 7.5, 0.93, 1, run="s"))
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
    assert line["kind"] == "alert" and line["version"] == 2 and line["missing_names"] == ["fill_kettle"]


def test_a_new_session_on_the_same_stream_shows_its_own_alerts(tmp_path: Path) -> None:
    # Alert ids restart with every detector session ("kitchen#1" again); the view and --jsonl used to
    # drop the second run's alert as a re-send of the first one's. Viewers tell runs apart by `run`, a digest of the
    # session: the session token itself never reaches them.
    out = io.StringIO()
    with running_checker(tmp_path) as (ctx, service, _thread):
        viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=True, out=out)
        sock = connect(ctx, zmq.PUB, service.events_endpoint)
        for run in ("first", "second"):
            events = EventPublisher(Publisher(sock), "kitchen", session=run)
            assert wait_for(
                lambda run=run: (row := viewer.state.streams.get("kitchen")) is not None and row.run == run_of(run),
                10.0,
                lambda events=events: (events.heartbeat(None, 0, 0, 0.0), viewer.pump(20)),
            )
            for step in DEMO_EXECUTIONS["mistake"][:2]:
                events.keystep(step, "x", 0.0, 1.0, 0.9)
            assert wait_for(
                lambda: viewer.state.streams["kitchen"].alerts == 1 and len(viewer.state.streams["kitchen"].done) == 2,
                10.0,
                lambda: viewer.pump(20),
            )
        viewer.pump(50)
        printed = [json.loads(line) for line in out.getvalue().splitlines()]
        alerts = [(m["run"], m["alert_id"]) for m in printed if m["kind"] == "alert"]
        assert alerts == [(run_of("first"), "kitchen#1"), (run_of("second"), "kitchen#1")]
        assert [a.run for _, a in viewer.state.alerts] == [run_of("first"), run_of("second")]
        assert "first" not in out.getvalue() and "second" not in out.getvalue()  # no session token in any line
        viewer.close()
        sock.close()


def test_only_the_current_sessions_mistakes_are_drawn_red() -> None:
    state = ViewState(names={1: "fill_kettle", 2: "boil_water"})
    state.apply(alert())  # session "s": boil_water before fill_kettle
    state.apply(status("t", (1, 2), (), seq=9, timestamp=2.0, alerts=0))  # a new, correct run
    console = Console(width=140, record=True, file=io.StringIO(), color_system="standard")
    console.print(render(state).renderables[0])  # the streams table
    table = console.export_text(styles=True)
    assert "\x1b[32mboil_water" in table and "\x1b[1;31m" not in table  # green, as a correct step


def test_jsonl_view_reports_a_checker_it_cannot_understand() -> None:
    # Every message of a checker speaking another wire version is dropped; the --jsonl view printed nothing at
    # all, so it looked exactly like an idle checker.
    ctx = zmq.Context()
    out, err = io.StringIO(), io.StringIO()
    stop = threading.Event()
    try:
        pub, endpoint = bind(ctx, zmq.PUB, "tcp://127.0.0.1:0")
        body = json.loads(jsonl_line(alert()))
        body["version"] = 3

        def publish() -> None:
            while not stop.wait(0.02):
                pub.send_multipart([b"alert/kitchen", json.dumps(body).encode()])

        sender = threading.Thread(target=publish, daemon=True)
        sender.start()
        deadline = time.monotonic() + 10.0
        try:
            run_view(endpoint, None, jsonl=True, out=out, err=err,
                     done=lambda: "dropping" in err.getvalue() or time.monotonic() > deadline)
        finally:
            stop.set()
            sender.join(5.0)
    finally:
        ctx.destroy(linger=0)
    lines = err.getvalue().splitlines()
    assert lines[0] == f"view: dropping malformed messages from {endpoint} (first: unsupported version 3 " \
                       "(this program speaks 2))"
    assert lines[-1].startswith("view: ") and "malformed messages dropped (last: unsupported version 3" in lines[-1]
    assert out.getvalue() == ""


def test_names_from_a_graph_file_are_drawn_as_plain_text(tmp_path: Path) -> None:
    # A step name holding "[/]" raised MarkupError inside the live display; escape sequences reached the terminal.
    graph = tea_graph()
    data = graph.to_dict()
    for step, name in zip(data["steps"], HOSTILE_NAMES, strict=False):
        step["name"] = name
    (tmp_path / "g.json").write_text(json.dumps(data))
    state = ViewState(names=graph_names(load_graph(tmp_path / "g.json")))
    state.apply(status(done=(1, 2, 3), allowed=(4, 5, 6), current=2))
    assert_shown_safely(draw(state, width=400), HOSTILE_NAMES[:6])


def test_names_and_ids_from_the_wire_are_drawn_and_printed_as_plain_text(ctx: zmq.Context) -> None:
    # A checker (or anything publishing where a viewer connects) is the third source of names.
    pub, endpoint = bind(ctx, zmq.PUB, "tcp://127.0.0.1:0")
    out = io.StringIO()
    viewer = Viewer(ctx, endpoint, ViewState(), jsonl=True, out=out)
    hostile = [Alert("kitchen", k, 1.0, f"kitchen#{k}", "r", k, name, k, (99,), (name,), False, 0.9, False,
                     99, name, 0.5, "binary")
               for k, name in enumerate(HOSTILE_NAMES)]
    hostile += [StepEvent("kitchen", 50, 1.0, 7, HOSTILE_NAMES[2], 0.0, 1.0, 0.5, 0, run="r")]
    hostile += [MissingSteps("kitchen", 51, 1.0, "kitchen#end", "r", (98, 99), HOSTILE_NAMES[:2], False)]
    hostile += [status("r", done=(0, 1), allowed=(7,), current=3)]
    assert wait_for(lambda: len(viewer.state.alerts) == len(HOSTILE_NAMES) and viewer.state.events
                    and viewer.state.missing, 10.0,
                    lambda: ([Publisher(pub).send(m) for m in hostile], viewer.pump(20)))
    text = draw(viewer.state, width=600)
    assert_shown_safely(text, HOSTILE_NAMES[-len(viewer.state.alerts) :])
    assert_shown_safely(text.split("never done")[1], HOSTILE_NAMES[:2])  # the ended session's report
    printed = out.getvalue()
    assert all(ord(c) < 128 and (c == "\n" or c.isprintable()) for c in printed)  # JSON escapes every other char
    names = {json.loads(line).get("step_name") for line in printed.splitlines()}
    assert set(HOSTILE_NAMES) <= names
    viewer.close()


def test_a_lost_stream_and_what_the_checker_refused_are_shown() -> None:
    state = ViewState(names={1: "fill_kettle"})
    state.apply(status(lost=True))
    state.apply(CheckerHealth("checker", 0, 1.0, 3, 1, 500, 4, 2, 1, 7, 9, 0))
    text = draw(state, width=300)
    assert "kitchen (lost)" in text
    assert "checker: 3 streams (1 lost), 1 idle evicted" in text
    assert "2 over the stream limit, 7 with a step not in the task graph, 9 over a stream's budget, 4 malformed" in text


def test_allowed_steps_are_shown_likeliest_first_with_their_probability_and_the_rule() -> None:
    state = ViewState(names={1: "fill_kettle", 3: "get_cup", 4: "add_teabag"})
    state.apply(status(done=(3,), allowed=(4, 1), allowed_scores=(0.51, 0.41), rule="weighted"))
    text = draw(state)
    assert "add_teabag 0.51, fill_kettle 0.41" in text
    assert "likeliest first, future-step probability by the weighted rule" in text
    # A graph without weights: the binary rule, which gives steps that do not follow the last one no probability.
    state.apply(status(done=(3,), allowed=(4, 1), allowed_scores=(1.0, 0.0), rule="binary", seq=4))
    text = draw(state)
    assert "add_teabag 1.00, fill_kettle" in text and "fill_kettle 0" not in text
    assert "by the binary rule" in text


def test_an_alert_shows_the_missing_step_most_likely_forgotten_with_its_score() -> None:
    state = ViewState()
    state.apply(Alert("kitchen", 7, 1.0, "kitchen#1", "s", 5, "pour_water", 1, (2, 4), ("boil_water", "add_teabag"),
                      False, 0.9, False, 4, "add_teabag", 0.826, "weighted"))
    state.apply(Alert("kitchen", 8, 1.0, "kitchen#2", "s", 7, "wash_up", 2, (), (), True, 0.9, False,
                      None, None, None, "weighted"))
    text = draw(state, width=160)
    assert "likely forgotten" in text and "add_teabag 0.83" in text
    assert "not in the task graph" in text  # the undefined step: nothing forgotten, nothing scored


def report(run: str = "s", replayed: bool = False, **fields: Any) -> MissingSteps:
    values: dict[str, Any] = {
        "stream_id": "kitchen", "seq": 9, "timestamp": 3.0, "missing_id": "kitchen#end", "run": run,
        "missing": (4, 6), "missing_names": ("add_teabag", "add_milk"), "replayed": replayed,
    }
    return MissingSteps(**(values | fields))


def test_the_steps_an_ended_session_never_did_are_shown_once_per_run() -> None:
    state = ViewState(names={6: "add_milk"})
    assert "never done" not in draw(state)  # no table until a session ends without a step
    assert state.apply(report())
    assert not state.apply(report(replayed=True))  # the periodic re-send
    assert state.apply(report("t", missing=(6,), missing_names=()))  # the next run: its names did not fit
    text = draw(state)
    assert "never done (session ended)" in text
    assert "add_teabag, add_milk" in text and text.count("add_milk") == 2  # the view names what did not fit


def test_jsonl_prints_statuses_when_the_procedure_changes_and_each_report_once(tmp_path: Path) -> None:
    out = io.StringIO()
    with running_checker(tmp_path) as (ctx, service, _thread):
        viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=True, out=out)
        sock = connect(ctx, zmq.PUB, service.events_endpoint)
        events = EventPublisher(Publisher(sock), "kitchen")
        assert wait_for(lambda: "kitchen" in viewer.state.streams, 10.0,
                        lambda: (events.heartbeat(None, 0, 0, 0.0), viewer.pump(20)))
        for frames in range(1, 4):  # the detector's counters change, the procedure does not
            events.heartbeat(3, frames, 0, 30.0)
        for step in DEMO_EXECUTIONS["missing"][:2]:
            events.keystep(step, "x", 0.0, 1.0, 0.9)
        events.heartbeat(None, 9, 0, 30.0, ended=True)
        assert wait_for(lambda: viewer.state.streams["kitchen"].ended, 10.0, lambda: viewer.pump(20))
        resent: list[MissingSteps] = []  # the periodic re-send of the report (every 0.5 s)
        assert wait_for(lambda: bool(resent), 10.0, lambda: resent.extend(
            m for m in viewer.pump(20) if isinstance(m, MissingSteps) and m.replayed))
        printed = [json.loads(line) for line in out.getvalue().splitlines()]
        rows = [(m["done"], m["allowed"], m["allowed_scores"], m["ended"]) for m in printed if m["kind"] == "status"]
        assert rows == [
            ([], [1, 3], [0.5, 0.5], False),
            ([3], [4, 1], [1.0, 0.0], False),
            ([3, 1], [2, 4], [1.0, 0.0], False),
            ([3, 1], [2, 4], [1.0, 0.0], True),
        ]
        missing = [m for m in printed if m["kind"] == "missing"]
        assert [(m["missing"], m["missing_names"]) for m in missing] == [([2, 4, 5, 6], ["boil_water", "add_teabag",
                                                                                          "pour_water", "add_milk"])]
        viewer.close()
        sock.close()


def test_a_malformed_report_on_the_wire_is_dropped_counted_and_the_next_one_shown(ctx: zmq.Context) -> None:
    pub, endpoint = bind(ctx, zmq.PUB, "tcp://127.0.0.1:0")
    viewer = Viewer(ctx, endpoint, ViewState(), jsonl=False)
    assert wait_for(lambda: "kitchen" in viewer.state.streams, 10.0,  # connected: nothing sent later is lost
                    lambda: (Publisher(pub).send(status()), viewer.pump(20)))
    good = json.loads(jsonl_line(report()))
    for body in (good | {"missing": [4, "six"]}, good | {"missing_id": "kitchen#1"}, good | {"version": 1}, good):
        pub.send_multipart([b"missing/kitchen", json.dumps(body).encode()])
    assert wait_for(lambda: bool(viewer.state.missing), 10.0, lambda: viewer.pump(20))
    assert viewer.receiver.stats.malformed == 3 and [r.missing for _, r in viewer.state.missing] == [(4, 6)]
    assert "3 malformed messages dropped" in draw(viewer.state)
    viewer.close()
