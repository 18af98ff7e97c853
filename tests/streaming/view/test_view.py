"""The terminal view: rendered to a fixed-size capture console, checked as text."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import re
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from rich.console import Console

from graphs.checker_settings import CheckerSettings
from graphs.task_graph import load_graph
from streaming.checker.config import CheckerConfig
from streaming.checker.core import CheckerCore
from streaming.checker.service import CheckerService
from streaming.demo.paths import default_demo_paths
from streaming.demo.procedure import DEMO_EXECUTIONS, name_of
from streaming.detector import DetectorConfig, DetectorStream, EventPublisher, load_detector_for_stream
from streaming.messages import (
    WIRE_VERSION,
    Alert,
    CheckerHealth,
    Heartbeat,
    KeyStepOnset,
    Message,
    MissingSteps,
    Retraction,
    Status,
    StepEvent,
    decode,
    encode,
    encode_payload,
    run_of,
)
from streaming.readers import Frame, ReaderConfig, open_reader
from streaming.session_verdict import SessionVerdict, no_verdict_text, verdict_text
from streaming.transport import SILENT_S, Publisher, bind, connect
from streaming.view.client import Viewer, run_view
from streaming.view.render import PROBABILITY_HEADER, WIDEST_TABLE, news_line, render
from streaming.view.state import ENDED_LOG, ViewState, graph_names
from tests.hostile_text import HOSTILE_NAMES, assert_shown_safely
from tests.streaming.helpers import (
    STREAM_DETECT,
    keystep,
    refused_port,
    running_checker,
    tea_graph,
    wait_for,
    write_noise_video,
)


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
    caption = " ".join(text.split())
    assert "P mistake: the checker's probability that this step was done before a pre-condition" in caption


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


def test_a_jsonl_line_is_the_wire_payload() -> None:
    line = json.loads(encode_payload(alert()))
    assert line["kind"] == "alert" and line["version"] == WIRE_VERSION and line["missing_names"] == ["fill_kettle"]


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

            def on_this_run(run: str = run) -> bool:
                return (row := viewer.state.streams.get("kitchen")) is not None and row.run == run_of(run)

            def beat(events: EventPublisher = events) -> None:
                events.heartbeat(None, 0, 0, 0.0)
                viewer.pump(20)

            assert wait_for(on_this_run, 10.0, beat)
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
        body = json.loads(encode_payload(alert()))
        body["version"] = WIRE_VERSION + 1

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
    assert lines[0] == f"view: dropping malformed messages from {endpoint} (first: unsupported version " \
                       f"{WIRE_VERSION + 1} (this program speaks {WIRE_VERSION}))"
    assert lines[-1].startswith("view: ")
    assert f"malformed messages dropped (last: unsupported version {WIRE_VERSION + 1}" in lines[-1]
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
    hostile: list[Message] = [
        Alert("kitchen", k, 1.0, f"kitchen#{k}", "r", k, name, k, (99,), (name,), False, 0.9, False, 99, name, 0.5,
              "binary")
        for k, name in enumerate(HOSTILE_NAMES)
    ]
    hostile += [StepEvent("kitchen", 50, 1.0, 7, HOSTILE_NAMES[2], 0.0, 1.0, 0.5, 0, run="r")]
    hostile += [MissingSteps("kitchen", 51, 1.0, "kitchen#end", "r", (98, 99), HOSTILE_NAMES[:2], False, (1.0, 1.0))]
    hostile += [status("r", done=(0, 1), allowed=(7,), current=3)]
    def send_all() -> None:
        for message in hostile:
            Publisher(pub).send(message)
        viewer.pump(20)

    assert wait_for(lambda: bool(len(viewer.state.alerts) == len(HOSTILE_NAMES) and viewer.state.events
                                 and viewer.state.missing), 10.0, send_all)
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
    # Over budget is no loss (a detector message carries the whole history): said, since a user read it as one.
    assert ("2 over the stream limit, 7 with a step not in the task graph, 9 over a stream's budget (their steps "
            "come again in the stream's next message), 4 malformed") in text



def test_a_camera_the_checker_turns_away_shows_on_a_terminal_full_of_streams() -> None:
    # A second detector given a live stream id was refused 44 times, which the docs send the operator to the view's
    # health line to see; that line came after the latencies and the recent key-steps, below the cut of a 200x50
    # terminal holding five streams, so the refused camera showed nowhere while the view ran.
    from rich.live_render import LiveRender

    state = ViewState(graph_names(tea_graph()))
    for k, sid in enumerate(("annex", "bench", "door", "kitchen", "pantry")):
        state.apply(status(stream_id=sid, run=f"r{k}", done=(3, 2, 1, 4, 5), ended=k != 3, decode_ms=1.0,
                           features_ms=10.0, detector_ms=0.6, segmenter_ms=0.2, hop_ms=0.8))
    state.apply(alert())
    for k in range(8):
        state.apply(StepEvent("kitchen", 10 + k, 2.0, 3, "add_tea", float(k), k + 1.0, 0.9, k, run="s"))
    state.apply(CheckerHealth("checker", 0, 1.0, 5, 0, 500, 0, 0, 0, 0, 0, 0, 0, 44))
    console = Console(width=120, height=30, record=True, file=io.StringIO(), color_system=None)
    console.print(LiveRender(render(state), vertical_overflow="ellipsis"))
    screen = console.export_text()
    assert "44 on a stream id another live detector holds" in screen
    assert "P mistake" in screen  # the alert log still comes before it

def test_on_a_wide_terminal_tables_stop_stretching_unless_their_names_need_the_room() -> None:
    # At 200 columns every table was stretched across the terminal: the key-step column 150 blanks wide, each
    # latency 20 columns right of its stage's name.
    state = ViewState(graph_names(tea_graph()))
    state.apply(status(decode_ms=1.0, features_ms=10.0, detector_ms=0.6, segmenter_ms=0.2, hop_ms=0.8))
    state.apply(StepEvent("kitchen", 10, 2.0, 3, "get_cup", 0.0, 1.0, 0.9, 0, run="s"))
    for width in (200, 300):
        assert {len(line) for line in draw(state, width=width).splitlines() if line[:1] in "┏│└"} == {WIDEST_TABLE}
    # A name that would wrap at that width keeps the terminal's width, on one line.
    long_name = "stir the mixture gently with a wooden spoon until every lump of flour has dissolved " * 2
    state.apply(StepEvent("kitchen", 11, 2.0, 3, long_name.strip(), 1.0, 2.0, 0.9, 1, run="s"))
    text = draw(state, width=300)
    assert long_name.strip() in text and max(len(line) for line in text.splitlines()) > WIDEST_TABLE


def test_allowed_steps_are_shown_likeliest_first_with_their_probability_and_the_rule() -> None:
    state = ViewState(names={1: "fill_kettle", 3: "get_cup", 4: "add_teabag"})
    state.apply(status(done=(3,), allowed=(4, 1), allowed_scores=(0.51, 0.41), rule="weighted"))
    text = draw(state, width=200)
    assert "add_teabag 0.51, fill_kettle 0.41" in text
    assert "likeliest first (the step being done now left out), future-step probability by the weighted rule" in text
    # A graph without weights: the binary rule, which gives steps that do not follow the last one no probability.
    state.apply(status(done=(3,), allowed=(4, 1), allowed_scores=(1.0, 0.0), rule="binary", seq=4))
    text = draw(state, width=200)
    assert "add_teabag 1.00, fill_kettle" in text and "fill_kettle 0" not in text
    assert "by the binary rule" in text


def test_an_alert_shows_the_missing_step_most_likely_forgotten_with_its_score() -> None:
    state = ViewState()
    state.apply(Alert("kitchen", 7, 1.0, "kitchen#1", "s", 5, "pour_water", 1, (2, 4), ("boil_water", "add_teabag"),
                      False, 0.9, False, 4, "add_teabag", 0.826, "weighted"))
    state.apply(Alert("kitchen", 8, 1.0, "kitchen#2", "s", 7, "wash_up", 2, (), (), True, 0.9, False,
                      None, None, None, "weighted"))
    text = draw(state, width=160)
    assert "likely forgotten" in text and "add_teabag (graph 0.83)" in text
    assert "not in the task graph" in text  # the undefined step: nothing forgotten, nothing scored


def test_an_alert_row_labels_its_two_numbers_and_the_caption_says_what_each_is() -> None:
    # "fill_kettle 1.00" beside "0.69" read as two probabilities of one thing: each is labelled now.
    state = ViewState()
    state.apply(Alert("kitchen", 7, 1.0, "kitchen#1", "s", 2, "boil_water", 1, (1,), ("fill_kettle",), False, 0.9,
                      False, 1, "fill_kettle", 1.0, "weighted", probability=0.69))
    text = draw(state, width=300)
    header = next(line for line in text.splitlines() if "missing pre-conditions" in line)
    assert "likely forgotten" in header and "P mistake" in header
    (row,) = [line for line in text.splitlines() if "boil_water" in line and "fill_kettle" in line]
    cells = [cell.strip() for cell in row.split("│")]
    assert "fill_kettle (graph 1.00)" in cells and cells[-2] == "0.69"
    caption = " ".join(text.split())
    assert ("P mistake: the checker's probability that this step was done before a pre-condition, from the "
            "detector's evidence") in caption
    assert "'graph' is that tie's strength in the graph (its missing-step score), the same for every person, " \
           "not a probability of this alert" in caption


def test_a_retracted_alert_says_what_was_confirmed_instead_and_that_it_no_longer_holds() -> None:
    shown = {}
    for case, confirmed in (("other", (FILL, "fill_kettle")), ("same", (BOIL, "boil_water")), ("none", (None, None))):
        state = ViewState()
        state.apply(Alert("cam0", 3, 1.0, "cam0#1", "r", BOIL, "boil_water", 1, (FILL,), ("fill_kettle",), False,
                          0.9, False, 1, "fill_kettle", 1.0, "binary"))
        state.apply(Retraction("cam0", 4, 2.0, "cam0#1", "r", BOIL, "boil_water", 1, *confirmed))
        console = Console(width=400, record=True, file=io.StringIO(), color_system=None)
        console.print(render(state, fit=True))  # every cell on one line, as printed to a file
        shown[case] = console.export_text()
    assert "retracted: fill_kettle was confirmed there instead: the alert no longer holds" in shown["other"]
    # Not "its pre-conditions look done" alone: on a real recording the step's own detection was what lost weight.
    assert ("retracted: it was confirmed, but with the whole step seen a mistake is no longer likely enough (its "
            "own detection doubted, or its pre-conditions seen done): the alert no longer holds") in shown["same"]
    assert ("retracted: it was not confirmed there (its announcement was withdrawn, the session ended or its "
            "stream started over first, or a step outside the task graph came instead): the alert no longer holds"
            ) in shown["none"]
    # The step's name is in its own column: the reason says "it" (CaptainCook4D's names are sentences, wrapped twice).
    assert all(line.count("boil_water") <= 1 for text in shown.values() for line in text.splitlines())


def test_a_retracted_alert_keeps_its_video_time_in_the_table() -> None:
    # On a real recording (CaptainCook4D 16_26) an early alert on a step was retracted and the same step alerted again
    # 44 s later: the table showed the retracted row at "-", so nothing told which of the two had been withdrawn.
    state = ViewState()
    state.apply(Alert("cam0", 3, 1.0, "cam0#1", "r", BOIL, "boil_water", 1, (FILL,), ("fill_kettle",), False,
                      0.9, False, 1, "fill_kettle", 1.0, "binary", video_time=172.0))
    state.apply(Retraction("cam0", 4, 2.0, "cam0#1", "r", BOIL, "boil_water", 1, BOIL, "boil_water"))
    state.apply(Alert("cam0", 5, 3.0, "cam0#3", "r", BOIL, "boil_water", 3, (FILL,), ("fill_kettle",), False,
                      0.9, False, 1, "fill_kettle", 1.0, "binary", video_time=216.0))
    for width in (300, 160):  # the wide table, and the width of a common terminal
        text = draw(state, width=width)
        (withdrawn,) = [line for line in text.splitlines() if "retracted:" in line]
        assert "from 172.0 s" in withdrawn
        assert "from 216.0 s" in text
    # A terminal that cannot redraw is told the retraction as a line: it names the same video time.
    retraction = Retraction("cam0", 4, 2.0, "cam0#1", "r", BOIL, "boil_water", 1, BOIL, "boil_water")
    assert "alert on boil_water (from 172.0 s) retracted: " in news_line(2.0, retraction, state).plain


def report(run: str = "s", replayed: bool = False, **fields: Any) -> MissingSteps:
    values: dict[str, Any] = {
        "stream_id": "kitchen", "seq": 9, "timestamp": 3.0, "missing_id": "kitchen#end", "run": run,
        "missing": (4, 6), "missing_names": ("add_teabag", "add_milk"), "replayed": replayed,
        "probabilities": (1.0, 1.0),
    }
    return MissingSteps(**(values | fields))


def test_the_steps_an_ended_session_never_did_are_shown_once_per_run() -> None:
    state = ViewState(names={6: "add_milk"})
    assert "never done" not in draw(state)  # no table until a session ends without a step
    assert state.apply(report())
    assert not state.apply(report(replayed=True))  # the periodic re-send
    # The next run: its names did not fit.
    assert state.apply(report("t", missing=(6,), missing_names=(), probabilities=(1.0,)))
    text = draw(state)
    assert "never done (session ended)" in text
    assert "add_teabag, add_milk" in text and text.count("add_milk") == 2  # the view names what did not fit


def test_a_step_recognised_yet_named_never_done_is_said_to_be_both() -> None:
    # The probabilistic checker weighs how clearly a step was done, not its confirmation: a step in the "done" list
    # may be named never done at the end, which looked like a contradiction on screen.
    state = ViewState(names={4: "add_teabag", 6: "add_milk"})
    state.apply(status(done=(6,), ended=True))
    state.apply(report(probabilities=(0.9, 0.56)))
    text = " ".join(draw(state).split())
    assert "add_teabag, add_milk (recognised, but judged not done: P never done 0.56)" in text


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
            ([3, 1], [], [], True),  # an ended session has no next step
        ]
        missing = [m for m in printed if m["kind"] == "missing"]
        assert [(m["missing"], m["missing_names"]) for m in missing] == [([2, 4, 5, 6], ["boil_water", "add_teabag",
                                                                                          "pour_water", "add_milk"])]
        viewer.close()
        sock.close()


def test_a_malformed_report_on_the_wire_is_dropped_counted_and_the_next_one_shown(ctx: zmq.Context) -> None:
    pub, endpoint = bind(ctx, zmq.PUB, "tcp://127.0.0.1:0")
    viewer = Viewer(ctx, endpoint, ViewState(), jsonl=False)

    def send_and_pump() -> None:
        Publisher(pub).send(status())
        viewer.pump(20)

    assert wait_for(lambda: "kitchen" in viewer.state.streams, 10.0, send_and_pump)  # connected: none lost after
    good = json.loads(encode_payload(report()))
    for body in (good | {"missing": [4, "six"]}, good | {"missing_id": "kitchen#1"}, good | {"version": 1}, good):
        pub.send_multipart([b"missing/kitchen", json.dumps(body).encode()])
    assert wait_for(lambda: bool(viewer.state.missing), 10.0, lambda: viewer.pump(20))
    assert viewer.receiver.stats.malformed == 3 and [r.missing for _, r in viewer.state.missing] == [(4, 6)]
    assert "3 malformed messages dropped" in draw(viewer.state)
    viewer.close()


class CtrlCOnce:
    """A sink during whose first ``missing`` report the user presses Ctrl-C (the signal handler raises there)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def send(self, message: Message) -> None:
        if isinstance(message, MissingSteps):
            self.seen.append(message.missing_id)
            if len(self.seen) == 1:
                raise KeyboardInterrupt


def test_an_interrupt_while_a_batch_is_handed_on_loses_none_of_the_rest(ctx: zmq.Context) -> None:
    # The rest of a batch taken off the socket was dropped with the interrupt, and the wind-down that waits for the
    # session's end report (`Viewer.loop`) could miss the report itself.
    pub, endpoint = bind(ctx, zmq.PUB, "inproc://reports")  # inproc: what is sent is queued at once, one batch
    sink = CtrlCOnce()
    viewer = Viewer(ctx, endpoint, ViewState(), jsonl=False, sinks=[sink])

    def send_and_pump() -> None:
        Publisher(pub).send(status())
        viewer.pump(20)

    assert wait_for(lambda: "kitchen" in viewer.state.streams, 10.0, send_and_pump)  # connected: none lost after
    for camera in ("cam0", "cam1", "cam2"):  # three sessions end at once
        Publisher(pub).send(report(stream_id=camera, missing_id=f"{camera}#end"))
    with pytest.raises(KeyboardInterrupt):
        viewer.pump(1000)
    handed = viewer.pump(0)  # nothing new: what the interrupt cut short
    assert [m.missing_id for m in handed if isinstance(m, MissingSteps)] == ["cam1#end", "cam2#end"]
    assert sink.seen == ["cam0#end", "cam1#end", "cam2#end"]  # each once: none handed on twice
    assert [r.missing_id for _, r in viewer.state.missing] == ["cam0#end", "cam1#end", "cam2#end"]
    viewer.close()


# -- a session as the checker reports it: the view fed what a real `CheckerCore` sends -------------------------------

FILL, BOIL, GET_CUP = 1, 2, 3


class Session:
    """A detector session on stream cam0 sent through a real checker core; the view gets what the checker sends."""

    def __init__(self, stream: str = "cam0") -> None:
        self.stream = stream
        self.core = CheckerCore(tea_graph())
        self.state = ViewState(names=graph_names(tea_graph()))
        self.history: tuple[int, ...] = ()
        self.seq = 0

    def send(self, message: Message) -> None:
        for out in self.core.serve([decode(encode(message))]):
            self.state.apply(out)

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def heartbeat(self, current: int | None = None, ended: bool = False, stopped: bool = False) -> None:
        self.send(Heartbeat(self.stream, self._next(), 1.0, "s", self.history, current, 10 * self.seq, 0, 5.0, ended,
                            stopped=stopped))

    def announce(self, step: int, start: float) -> None:
        """The segmenter's early announcement (``--alert-on onset``), then the detector still seeing the step."""
        self.send(KeyStepOnset(self.stream, self._next(), 1.0, "s", self.history, step, name_of(step), start, 0.9,
                               len(self.history), (), False))
        self.heartbeat(current=step)

    def confirm(self, step: int, start: float, end: float) -> None:
        self.history += (step,)
        self.send(keystep(self.history, self._next(), start=start, end=end, stream_id=self.stream))

    def run(self, steps: tuple[int, ...], early: bool = False, stopped: bool = False) -> None:
        """Each step confirmed 4 s after the last (announced first when ``early``), then the end of the session (its
        detector ``stopped`` before its source's end)."""
        self.heartbeat()
        for k, step in enumerate(steps):
            if early:
                self.announce(step, 4.0 * k)
            self.confirm(step, 4.0 * k, 4.0 * k + 3.5)
        self.heartbeat(ended=True, stopped=stopped)


def test_an_ended_stream_gets_a_verdict_line_naming_its_mistakes_and_the_steps_it_never_did() -> None:
    verdicts = {}
    for execution in ("mistake", "correct", "missing"):
        session = Session()
        session.run(DEMO_EXECUTIONS[execution])
        verdicts[execution] = draw(session.state)
    assert "cam0 ended: 1 mistake (boil_water before fill_kettle), nothing missing" in verdicts["mistake"]
    assert "cam0 ended: correct (no mistake, nothing missing)" in verdicts["correct"]
    assert "cam0 ended: no mistake; never done: add_milk" in verdicts["missing"]
    assert "no mistakes so far" not in verdicts["correct"] and "alerts: no mistakes" in verdicts["correct"]
    # While it runs, a stream has no verdict and the alert log says "so far".
    session = Session()
    session.heartbeat()
    session.confirm(GET_CUP, 0.0, 3.5)
    text = draw(session.state)
    assert "ended:" not in text and "no mistakes so far" in text


def test_a_verdict_counts_mistakes_it_cannot_name_and_never_counts_a_retracted_one() -> None:
    session = Session()
    session.run((5, 6, BOIL, 4))  # pour_water first, then boil_water without fill_kettle, add_teabag without get_cup
    verdict = ("cam0 ended: 3 mistakes (pour_water before boil_water, add_teabag; boil_water before fill_kettle; "
               "add_teabag before get_cup); never done: fill_kettle, get_cup")
    assert verdict in draw(session.state, width=300)
    session.state.alerts.popleft()  # one the view never got (it joined late): counted from the status
    assert ("cam0 ended: 3 mistakes (boil_water before fill_kettle; add_teabag before get_cup; and 1 more)"
            in draw(session.state, width=300))
    session.state.alerts.clear()  # none of them: counted, and said to be unseen, not "(; and 3 more)"
    text = draw(session.state, width=300)
    assert "cam0 ended: 3 mistakes (their alerts not received by this view); never done" in text
    assert "alerts: none received by this view (the checker counted 3)" in text  # not "no mistakes" beside it
    # An early alert on boil_water, then fill_kettle confirmed in its place: retracted, and the session is correct.
    session = Session()
    session.heartbeat()
    session.confirm(GET_CUP, 0.0, 3.5)
    session.announce(BOIL, 4.0)
    session.confirm(FILL, 4.0, 7.5)
    session.run((BOIL, 4, 5, 6))
    text = draw(session.state, width=300)
    assert "retracted: fill_kettle was confirmed there instead: the alert no longer holds" in text
    assert "cam0 ended: correct (no mistake, nothing missing)" in text


def test_a_mistake_alerted_at_each_detection_is_named_once_with_how_often() -> None:
    # The binary checker alerts every detection of a step done too early: the verdict read "2 mistakes (boil_water
    # before fill_kettle; boil_water before fill_kettle)".
    session = Session()
    session.core = CheckerCore(tea_graph(), checking=CheckerSettings("binary"))
    session.run((GET_CUP, BOIL, BOIL, FILL))
    text = draw(session.state, width=300)
    assert "cam0 ended: 2 mistakes (boil_water before fill_kettle [twice]); never done" in text
    session = Session()
    session.core = CheckerCore(tea_graph(), checking=CheckerSettings("binary"))
    session.run((GET_CUP, BOIL, BOIL, BOIL, FILL))
    session.state.alerts.popleft()  # one the view never got: counted beyond the ones it names
    text = draw(session.state, width=300)
    assert "cam0 ended: 3 mistakes (boil_water before fill_kettle [twice]; and 1 more)" in text


def test_no_verdict_counts_one_frame_in_the_singular() -> None:
    # A one-row feature file (stream-detect --features) ended "no key-step recognised in 1 frames".
    assert no_verdict_text(1).startswith("no key-step recognised in 1 frame, so no verdict")
    assert no_verdict_text(41).startswith("no key-step recognised in 41 frames, so no verdict")


def test_a_session_in_which_nothing_was_recognised_gets_no_verdict_not_correct() -> None:
    # A new user's undertrained detector confirmed nothing, and the view called the session correct.
    session = Session()
    session.heartbeat()
    session.heartbeat(ended=True)
    text = draw(session.state, width=300)
    assert "cam0 ended: no key-step recognised in" in text and "so no verdict" in text
    assert "ended: correct" not in text and "ended: no mistake" not in text
    # The checker's end report names every required step never done; shown beside "no verdict" it said the opposite.
    assert session.state.missing and "never done" not in text
    # A second stream that did recognise steps keeps its report.
    other = Session("cam1")
    other.state = session.state
    other.run(DEMO_EXECUTIONS["missing"])
    text = draw(session.state, width=300)
    assert "never done (session ended)" in text and "add_milk" in text and "cam0 ended: no key-step" in text


def test_a_view_apart_from_its_detector_blames_no_detector_for_a_session_it_cannot_size() -> None:
    # The segmenter's shortest step is not on the wire: a view (or a dashboard) apart from its detector asked "is the
    # detector trained for this procedure and this view?" of a 1-frame session no detector could have recognised a
    # step in. It asks only of a recording long enough for a step.
    state = ViewState(names={1: "fill_kettle"})
    state.apply(status(done=(), alerts=0, ended=True, frames=1))
    shown = " ".join(draw(state, width=300).split())
    assert ("kitchen ended: no key-step recognised in 1 frame, so no verdict (if the recording was long enough for a "
            "step: is the detector trained for this procedure and this view?)") in shown, shown


def test_a_correct_verdict_says_how_few_steps_were_recognised() -> None:
    # A new user's detector saw 1 step of 9 and the probabilistic checker, unsure of the rest, named none missing:
    # "correct (no mistake, nothing missing)" read as a fact.
    state = ViewState(names={1: "fill_kettle", 2: "boil_water", 3: "get_cup", 4: "add_teabag"})
    state.apply(status(done=(3,), alerts=0, ended=True))
    assert ("kitchen ended: correct (no mistake, nothing missing), but only 1 of the graph's 4 key-steps recognised"
            in draw(state, width=300))
    state.apply(status(done=(3, 1, 2, 4), alerts=0, ended=True, seq=4))
    assert "kitchen ended: correct (no mistake, nothing missing)\n" in draw(state, width=300) + "\n"
    assert "but only" not in draw(state, width=300)


def test_a_lost_stream_is_said_to_have_no_verdict() -> None:
    state = ViewState()
    state.apply(status(lost=True))
    assert "kitchen lost: its detector went silent before ending its session, so no verdict" in draw(state)


def stream_row(text: str, stream: str = "cam0") -> list[str]:
    """The cells of a stream's row in the streams table (stream, now, done, allowed next, fps, ...)."""
    (line,) = [line for line in text.splitlines() if line.startswith(f"│ {stream}")][:1]
    return [cell.strip() for cell in line.strip("│").split("│")]


def test_allowed_next_leaves_out_the_step_being_done_and_an_ended_stream_has_none() -> None:
    session = Session()
    session.heartbeat()
    session.confirm(GET_CUP, 0.0, 3.5)
    session.confirm(FILL, 4.0, 7.5)
    session.heartbeat(current=BOIL)
    assert session.state.streams["cam0"].allowed == (BOIL, 4)  # the checker lists the step under way ...
    now, allowed = stream_row(draw(session.state))[1:4:2]
    assert (now, allowed) == ("boil_water", "add_teabag")  # ... the view does not: it is now, not next
    session.heartbeat()  # nothing under way, and no key-step of boil_water with the heartbeat it left with ...
    assert stream_row(draw(session.state, width=200))[3] == "add_teabag"  # ... yet: it may be on its way
    session.heartbeat()  # a later heartbeat, still without it: boil_water was not confirmed, both are next again
    assert stream_row(draw(session.state, width=200))[3] == "boil_water 1.00, add_teabag"
    session.confirm(BOIL, 8.0, 9.0)
    session.confirm(4, 9.5, 10.0)
    session.heartbeat(current=5)  # pour_water under way, and every step left needs it: a bare "-" read as "none"
    assert stream_row(draw(session.state, width=200))[3] == f"after {session.state.name(5)}"
    session.heartbeat(ended=True)  # stops before add_milk: its report names it, and nothing is "next" any more
    assert session.state.streams["cam0"].allowed == ()  # the checker says so (docs/wire-format.md) ...
    assert stream_row(draw(session.state))[:4:3] == ["cam0 (ended)", "-"]  # ... and so does the view


def test_a_step_just_ended_is_shown_under_way_not_next_while_the_one_after_it_is_confirmed(
        ctx: zmq.Context, tmp_path: Path) -> None:
    # A key-step is confirmed once the run after it is stable: at one feature vector a second, seconds after it ended.
    # Meanwhile the detector's heartbeats said no step was under way, its history did not hold the step yet, and
    # the view showed "-" as now and offered the step just done as next. A real detector stream (the demo's
    # checkpoint, fed one class a frame) and a real checker on loopback; the stream's clock moves a heartbeat a frame.
    _, checkpoint, _ = load_detector_for_stream(default_demo_paths()[1], None)
    reader = open_reader(str(write_noise_video(tmp_path / "clip.mp4")), ReaderConfig(fps=checkpoint.fps))
    stop = threading.Event()
    service = CheckerService(tea_graph(), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"), ctx)
    serving = threading.Thread(target=service.run, args=(stop,), daemon=True)
    serving.start()
    clock = [0.0]
    detector = EventPublisher(Publisher(connect(ctx, zmq.PUB, service.events_endpoint)), "cam0")
    stream = DetectorStream(reader, checkpoint, detector, DetectorConfig(), clock=lambda: clock[0])
    viewer = Viewer(ctx, service.alerts_endpoint, ViewState(names=graph_names(tea_graph())), jsonl=False)
    frame = Frame(np.zeros((48, 64, 3), dtype=np.uint8), 0, 0.0)  # what the model saw: not looked at again

    def see(step: int) -> None:
        """One frame of ``step``, then the view once the checker's status of that frame has come."""
        probs = np.zeros(len(checkpoint.class_step_ids), dtype=np.float32)
        probs[checkpoint.class_step_ids.index(step)] = 1.0
        clock[0] += 1.0
        stream.deliver(frame, np.zeros(1, dtype=np.float32), probs)
        frames = stream.stats.frames
        assert wait_for(lambda: viewer.state.streams["cam0"].frames == frames, step=lambda: viewer.pump(0))

    def start_and_pump() -> None:
        stream.start()
        viewer.pump(0)

    try:
        assert wait_for(lambda: "cam0" in viewer.state.streams, step=start_and_pump)
        for _ in range(5):
            see(GET_CUP)
        assert stream_row(draw(viewer.state, width=200))[1:4] == ["get_cup", "-", "fill_kettle 0.50"]  # under way
        confirming = stream.segmenter.config.frames(stream.segmenter.config.min_duration) - 1
        for _ in range(confirming):  # fill_kettle begins; get_cup is confirmed once fill_kettle is stable
            see(FILL)
            now, done, allowed = stream_row(draw(viewer.state, width=200))[1:4]
            assert (now, done) == ("get_cup", "-") and "get_cup" not in allowed, (now, done, allowed)
        see(FILL)
        assert wait_for(lambda: viewer.state.streams["cam0"].done == (GET_CUP,), step=lambda: viewer.pump(0))
        now, done, allowed = stream_row(draw(viewer.state, width=200))[1:4]
        assert (now, done) == ("fill_kettle", "get_cup") and "get_cup" not in allowed, (now, done, allowed)
    finally:
        viewer.close()
        reader.close()
        stop.set()
        serving.join(5)


def test_an_alert_shows_where_in_the_video_its_step_was() -> None:
    for early in (False, True):
        session = Session()
        session.heartbeat()
        session.confirm(GET_CUP, 0.0, 3.5)
        if early:  # the alert comes before the step is confirmed: it shows where the step began
            session.announce(BOIL, 4.0)
            (alert_row,) = [row for row in draw(session.state).splitlines() if "boil_water" in row and "│ from" in row]
            assert "│ from 4.0 s " in alert_row
            assert stream_row(draw(session.state))[-1] == "1"  # counted with the log, before the checker counts it
        session.confirm(BOIL, 4.0, 7.5)
        alert_rows = draw(session.state).split("missing pre-conditions")[1].split("recent key-steps")[0].splitlines()
        (alert_row,) = [row for row in alert_rows if "boil_water" in row]
        assert "4.0-7.5 s" in alert_row, (early, alert_row)


def test_tables_keep_their_column_widths_as_values_come_and_go() -> None:
    def borders(text: str) -> dict[str, tuple[int, ...]]:
        """Where the column borders of each table's header are, by the table's title (the line above it)."""
        lines = text.splitlines()
        return {lines[k - 1].strip(): tuple(j for j, c in enumerate(line) if c in "┳┓")
                for k, line in enumerate(lines) if line.startswith("┏")}  # fmt: skip

    session = Session()
    session.heartbeat()
    first = borders(draw(session.state, width=110))
    assert "alerts" not in first  # no alert yet: one line says so
    session.confirm(GET_CUP, 0.0, 3.5)
    session.announce(BOIL, 4.0)
    session.confirm(BOIL, 4.0, 7.5)
    with_alert = borders(draw(session.state, width=110))
    for _ in range(200):
        session.heartbeat(current=4)  # frames grow to 4 digits
    shown = borders(draw(session.state, width=110))
    assert first["streams"] == with_alert["streams"] == shown["streams"]
    assert with_alert["alerts"] == shown["alerts"]
    assert first["recent key-steps"] == shown["recent key-steps"]


def test_a_view_printed_to_a_file_shows_every_name_in_full_once_at_the_end(ctx: zmq.Context) -> None:
    pub, endpoint = bind(ctx, zmq.PUB, "tcp://127.0.0.1:0")
    long_name = "pour_the_boiled_water_slowly_over_the_teabag_in_the_cup"
    viewer = Viewer(ctx, endpoint, ViewState(names={2: "boil_water", 5: long_name}), jsonl=False)
    screen = io.StringIO()
    console = Console(file=screen, width=80, color_system=None)  # stdout sent to a file: not a terminal
    assert not console.is_terminal
    deadline = time.monotonic() + 10.0

    def ended() -> bool:
        Publisher(pub).send(status(done=(2, 5), allowed=(), alerts=0, ended=True))
        return "kitchen" in viewer.state.streams or time.monotonic() > deadline

    viewer.loop(ended, console)
    text = screen.getvalue()
    assert text.count("streams") == 1  # the final view, once
    assert f"boil_water, {long_name}" in text and "…" not in text
    assert "kitchen ended: correct (no mistake, nothing missing)" in text
    assert console.width == 80
    viewer.close()


def test_an_80_by_24_terminal_shows_the_alert_while_the_stream_runs() -> None:
    # The live view is cut at the terminal's bottom (rich's LiveRender, as Live draws it): with the latency table
    # above the alert log, an 80x24 terminal showed "alerts 1" and a cut log until the run ended.
    from rich.live_render import LiveRender

    state = ViewState(graph_names(tea_graph()))
    state.apply(status(decode_ms=1.25, features_ms=183.5, detector_ms=0.12, segmenter_ms=0.04, hop_ms=0.9))
    state.apply(alert())
    for k in range(8):
        state.apply(StepEvent("kitchen", 10 + k, 2.0, 3, "add_tea", float(k), k + 1.0, 0.9, k, run="s"))
    console = Console(width=80, height=24, record=True, file=io.StringIO(), color_system=None)
    console.print(LiveRender(render(state), vertical_overflow="ellipsis"))
    screen = console.export_text()
    assert len(screen.splitlines()) <= 24
    assert "alerts" in screen and "P mistake" in screen  # the log's title and header, and its row, its words whole:
    # beside a 7-character stream id its table would fold "fill_kettl" / "e", so it is lines
    lines = [line.rstrip() for line in screen.splitlines()]
    assert "1.0-2.0 s kitchen boil_water before fill_kettle" in lines
    assert "  P mistake 1.00; likely forgotten fill_kettle (graph 1.00)" in lines


def test_at_80_columns_a_long_stream_id_leaves_the_step_names_whole() -> None:
    # Beside a 20-character stream id and three columns of numbers the names had 2 characters: "bo" / "il" / "_w"...
    state = ViewState(names={1: "fill_kettle", 2: "boil_water", 3: "get_cup", 4: "add_teabag"})
    state.apply(status(stream_id="kitchen-camera-north"))
    narrow = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    narrow.print(render(state))
    table = narrow.export_text().split("└")[0]
    words = {word.strip(",") for line in table.splitlines() for cell in line.split("│")[1:] for word in cell.split()}
    assert {"kitchen-camera-north", "boil_water", "get_cup", "fill_kettle", "add_teabag"} <= words
    assert "fps" not in table and "alerts" in table  # the frame counts give way below 100 columns
    wide = Console(width=120, record=True, file=io.StringIO(), color_system=None)
    wide.print(render(state))
    header = wide.export_text().split("└")[0]
    assert all(column in header for column in ("fps", "frames", "dropped"))


def test_an_80_by_24_terminal_shows_the_alert_once_the_done_list_is_long() -> None:
    # A stream's done list wrapped in the 80-column table's narrow column took a line per step and pushed the alert
    # log below the cut: the cell keeps the newest steps that fit in three lines and counts the others.
    from rich.live_render import LiveRender

    session = Session()
    session.run(DEMO_EXECUTIONS["mistake"])
    row = session.state.streams["cam0"]
    # the last step still on, and a long procedure: the six steps three times over
    session.state.streams["cam0"] = replace(row, ended=False, done=row.done * 3)
    console = Console(width=80, height=24, record=True, file=io.StringIO(), color_system=None)
    console.print(LiveRender(render(session.state), vertical_overflow="ellipsis"))
    screen = console.export_text().splitlines()
    assert any("cam0" in line and "boil_water" in line and "fill_kettle" in line and "1.00" in line for line in screen)
    first_table = screen[:next(k for k, line in enumerate(screen) if line.startswith("└"))]
    done_cell = [line.split("│")[3].strip() for line in first_table if line.startswith("│")]
    assert len(done_cell) <= 3 and " ".join(done_cell).startswith("+") and done_cell[-1].endswith(", add_milk")
    # As wide as its contents (a view printed to a file), the cell names every step.
    console = Console(width=400, record=True, file=io.StringIO(), color_system=None)
    console.print(render(session.state, fit=True))
    assert "get_cup, boil_water, fill_kettle, add_teabag, pour_water, add_milk" in console.export_text()


def test_at_80_columns_the_mistakes_name_stays_whole_beside_a_long_pre_condition() -> None:
    # Shares by longest word alone gave the mistake's column 6 characters when a pre-condition's name was long.
    state = ViewState()
    state.apply(Alert("kitchen", 7, 1.0, "kitchen#1", "s", 2, "boil_water", 1, (1,), ("fill_kettle_with_cold_water",),
                      False, 0.9, False, 1, "fill_kettle_with_cold_water", 1.0, "binary"))
    text = draw(state, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert any("kitchen" in line and "boil_water" in line for line in text.splitlines()), text


def test_below_60_columns_the_alert_and_the_key_steps_are_lines_with_their_names_whole() -> None:
    # At 50 columns the alert log's six bordered columns left each name one character wide, a letter a line.
    session = Session()
    session.run(DEMO_EXECUTIONS["mistake"])
    session.state.streams["cam0"] = replace(session.state.streams["cam0"], decode_ms=1.25, features_ms=183.5)
    text = draw(session.state, width=50)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 50
    assert any("cam0 boil_water before fill_kettle" in line for line in lines), text
    assert any(line.startswith("  P mistake 1.00; likely forgotten fill_kettle") for line in lines), text
    wrapped = lines[next(k for k, line in enumerate(lines) if "likely forgotten" in line) + 1]
    assert wrapped.startswith("  ") and "(graph 1.00)" in wrapped, text  # indented, not at the margin
    assert any("cam0 get_cup" in line and "s 0." in line for line in lines), text  # a key-step, its confidence
    assert any(line.startswith("cam0: decode 1.2, features 183.5") for line in lines), text
    assert any(line.startswith("cam0 ended: 1 mistake (boil_water before") for line in lines), text
    # The streams too: their table's five headers folded "allowed next" to "allo" / "wed" / "next".
    assert "cam0 (ended): now -; 1 alert" in lines and not any("┃" in line for line in lines), text
    assert any(line.startswith("  done get_cup, boil_water") for line in lines), text
    assert any(line.startswith("  next -") for line in lines), text
    # At 60 the streams table keeps every word whole, so it is a table again; the alert log's and the key-steps'
    # tables would not (they folded "boil_water" to "boil_wa" / "ter" and "likely forgotten" a letter pair a line):
    # lines, up to the width where their tables fit (79).
    wide = draw(session.state, width=60).splitlines()
    assert any("stream" in line and "done" in line and "┃" in line for line in wide)
    assert "alerts" in wide and "4.0-7.5 s cam0 boil_water before fill_kettle" in wide
    assert any(line.startswith("recent key-steps: clock") for line in wide)
    assert max(len(line) for line in wide) <= 60
    assert any(PROBABILITY_HEADER in line and "┃" in line for line in draw(session.state, width=80).splitlines())


def test_a_long_stream_id_leaves_the_names_room_by_drawing_lines() -> None:
    # The stream column is as wide as the longest id: at 80 and 100 columns a 64-character id (the wire allows it)
    # left every other column a letter wide, a streams table 40 lines high with "boil_water" folded.
    state = ViewState(names={1: "fill_kettle", 2: "boil_water", 3: "get_cup", 4: "add_teabag"})
    state.apply(status(stream_id="c" * 64))
    for width in (80, 100):
        lines = draw(state, width=width).splitlines()
        assert len(lines) < 15 and any("boil_water" in line for line in lines), "\n".join(lines)
    # At 40 columns the stream's line wraps: its next lines are indented under it, not at the margin like a new entry.
    lines = draw(state, width=40).splitlines()
    entry = lines[lines.index("streams") + 1 : next(k for k, line in enumerate(lines) if line.startswith("  done"))]
    assert len(entry) >= 2 and all(line.startswith("  ") for line in entry[1:]), "\n".join(lines)
    # A short id keeps the tables at 60 columns and up.
    state = ViewState(names={1: "fill_kettle", 2: "boil_water", 3: "get_cup", 4: "add_teabag"})
    state.apply(status(stream_id="cam0"))
    assert any("┃" in line for line in draw(state, width=60).splitlines())
    # Just wide enough for tables, a 34-character id left the latency table cut (its "alert out" column gone) and the
    # steps a session never did in a column too narrow to hold a letter of them.
    session = Session()
    session.run(DEMO_EXECUTIONS["missing"])
    long_id = "kitchen-camera-north-east-corner-2"
    row = session.state.streams.pop("cam0")
    session.state.streams[long_id] = replace(row, stream_id=long_id, decode_ms=1.25, features_ms=183.5)
    session.state.missing = deque((when, replace(report, stream_id=long_id, missing_id=f"{long_id}#end"))
                                  for when, report in session.state.missing)
    for width in (50, 82, 99, 120):
        text = draw(session.state, width=width)
        assert max(len(line) for line in text.splitlines()) <= width, text
        assert "alert out" in text and "add_milk" in text.split("never done (session ended)")[1], text


def test_the_last_frame_ends_with_the_outcome_the_terminal_keeps() -> None:
    # The last frame is printed whole and the terminal keeps its bottom: there, an 80x24 terminal showed the latency
    # and key-step tables, the alert and the verdict scrolled above them.
    session = Session()
    session.run(DEMO_EXECUTIONS["mistake"])
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(render(session.state, closing=True))
    bottom = console.export_text().splitlines()[-24:]
    assert bottom[-1] == "cam0 ended: 1 mistake (boil_water before fill_kettle), nothing missing"
    # the alert's row, its names whole: at 80 columns they were folded mid-word (``boil_w`` / ``ater``)
    assert any("cam0" in line and "boil_water" in line and "fill_kettle" in line and "1.00" in line for line in bottom)
    live = draw(session.state, width=80).splitlines()
    assert live.index(bottom[-1]) < next(k for k, line in enumerate(live) if line.strip() == "alerts")


def test_each_streams_latency_per_stage_is_shown_once_reported() -> None:
    # Roboflow's pipeline watchdog shows where a frame's time goes; here a slow backbone shows without Prometheus.
    state = ViewState()
    state.apply(status())
    assert "latency per stage" not in draw(state)  # nothing measured yet: no empty table
    state.apply(status(decode_ms=1.25, features_ms=183.5, detector_ms=0.12, segmenter_ms=0.04, hop_ms=0.9,
                       alert_out_ms=0.31))
    text = draw(state, width=160)
    assert "latency per stage, ms" in text
    header = next(line for line in text.splitlines() if "features" in line)
    assert all(stage in header for stage in ("decode", "detector", "segmenter", "hop", "alert out"))
    row = next(line for line in text.splitlines() if "183.5" in line)
    assert row.split("│")[1].strip() == "kitchen" and "1.2" in row and "0.3" in row


def test_a_status_of_2048_steps_shows_the_newest_done_and_the_first_allowed() -> None:
    # What the wire allows: every count of names was tried, the most first, and the draw took seconds (the view
    # redraws 8 times a second in the thread that receives); benchmarks/view_draw.py measures it.
    names = {k: f"step_{k}" for k in range(2048)}
    state = ViewState(names=names)
    state.apply(status(done=tuple(range(2048)), allowed=tuple(range(2048)), allowed_scores=(0.0,) * 2048))
    text = draw(state, width=80)
    row = [line for line in text.splitlines() if line.startswith("│")][:3]
    assert "earlier" in "".join(row) and "step_2047" in "".join(row) and "more" in "".join(row)


def test_a_step_named_by_a_sentence_is_shown_cut_short_not_only_counted() -> None:
    # CaptainCook4D names its steps with sentences: at 80 columns "done" read "+5 earlier" and "allowed next"
    # "+1 more", hiding the newest done and the likeliest next step, the two a person reads those cells for.
    names = {k: f"Slice-Slice the tortilla roll number {k} with floss, perpendicular to its length, into pinwheels"
             for k in range(8)}
    state = ViewState(names=names)
    state.apply(status(done=(0, 1, 2, 3, 4, 5), allowed=(6, 7), allowed_scores=(0.7, 0.2), current=2))
    text = draw(state, width=80)
    rows = [line for line in text.splitlines() if line.startswith("│")]
    cells = [[cell.strip() for cell in line.strip("│").split("│")] for line in rows[:3]]
    done, allowed = " ".join(row[2] for row in cells), " ".join(row[3] for row in cells)
    assert done.startswith("+5 earlier, Slice-Slice") and "…" in done
    assert allowed.startswith("Slice-Slice") and allowed.endswith("… 0.70, +1 more")  # its probability kept
    assert max(len(line) for line in text.splitlines()) <= 80


def folded_words(text: str, names: list[str]) -> set[str]:
    """The pieces of the names' words that ``text`` shows cut by a line's or a cell's end (``fill_kettl``)."""
    words = {word for name in names for word in name.split()}
    pieces = {piece for piece in re.split(r"[\s│┃,;()]+", text) if len(piece) >= 3 and not piece.endswith("…")}
    return {piece for piece in pieces - words if any(word.startswith(piece) for word in words)}


@pytest.mark.parametrize("width", range(40, 161, 3))
def test_no_word_of_a_step_name_is_folded_at_any_width(width: int) -> None:
    # At 60 columns the recent key-steps' table left its names 7 characters ("slicing" / "-Contin" / "ue"), at 100 the
    # fixed shares folded "fill_kettl" / "e", at 80-82 an alert 100 s in did the same: a table that would fold a word
    # shares its width by the longest words, and where even that cannot hold them it gives way to lines.
    pinwheels = ["slicing-Continue slicing with floss to create 1 more pinwheel",
                 "Cross-Cross the floss's two ends over the tortilla roll's top",
                 "Spread-Spread jelly over the nut butter", "Place-Place the pinwheels on a plate",
                 "Trim-Trim the ends of the tortilla roll"]
    state = ViewState(names={k: name for k, name in enumerate(pinwheels, start=1)})
    state.apply(status(stream_id="cam0", done=(1, 2), allowed=(4, 5), allowed_scores=(0.5, 0.3), current=3))
    state.apply(StepEvent("cam0", 4, 1.2, 1, pinwheels[0], 390.0, 391.0, 0.32, 0, run="s"))
    state.apply(Alert("cam0", 7, 1.0, "cam0#1", "s", 3, pinwheels[2], 1, (1,), (pinwheels[0],), False, 0.9, False, 1,
                      pinwheels[0], 1.0, "binary"))
    text = draw(state, width=width)
    assert not folded_words(text, pinwheels), text
    assert max(len(line) for line in text.splitlines()) <= width
    # The demo's names, while a step is being done and once an alert 104 s in has come.
    session = Session()
    session.heartbeat()
    session.confirm(GET_CUP, 100.0, 103.5)
    session.heartbeat(current=FILL)
    session.confirm(BOIL, 104.4, 107.0)
    text = draw(session.state, width=width)
    assert not folded_words(text, list(session.state.names.values())), text
    assert max(len(line) for line in text.splitlines()) <= width


def test_never_done_names_with_commas_are_quoted_so_each_can_be_told_apart() -> None:
    # CaptainCook4D: "Slide-Slide floss under the tortilla, perpendicular to ..., Place-Place ..." read as one list of
    # fragments; where one name ended and the next began could not be told.
    names = ("Slide-Slide floss under the tortilla, perpendicular to the roll", "Place-Place the pinwheels")
    line = verdict_text(SessionVerdict((), (), (1, 2), names), str)
    assert line == ('no mistake; never done: "Slide-Slide floss under the tortilla, perpendicular to the roll", '
                    '"Place-Place the pinwheels"')
    assert verdict_text(SessionVerdict((), (), (1,), ("add_milk",)), str) == "no mistake; never done: add_milk"


def test_a_session_the_person_stopped_is_judged_so_far_not_as_ended(ctx: zmq.Context) -> None:
    # Ctrl-C 30 s into a 462 s recording printed "cam0 ended: no mistake; never done:" and fifteen steps the person
    # had not yet reached.
    session = Session()
    session.run((GET_CUP, FILL, BOIL))  # stopped before add_teabag, pour_water and add_milk
    session.state.stopped = True
    text = draw(session.state)
    assert "cam0 stopped: no mistake so far; not done by the stop: add_teabag, pour_water, add_milk" in text
    assert "not done by the stop (session stopped)" in text and "ended:" not in text and "never done" not in text
    assert "missing" not in text  # the table's column said "missing key-steps" of steps not reached yet
    assert "cam0 (stopped)" in text and "(ended)" not in text  # the streams table says it as the verdict does
    # Stopped by the person: the view that runs the streams (stream-detect run) knows it from its own interrupt.
    pub, endpoint = bind(ctx, zmq.PUB, "inproc://stopped")
    viewer = Viewer(ctx, endpoint, ViewState(), jsonl=True)

    def interrupted() -> bool:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        viewer.loop(interrupted, None, lambda: lambda: True)
    assert not viewer.state.stopped  # no stream running: nothing was cut short
    viewer.state.streams["cam0"] = status(stream_id="cam0")
    with pytest.raises(KeyboardInterrupt):
        viewer.loop(interrupted, None, lambda: lambda: True)
    assert viewer.state.stopped
    viewer.state.streams["cam0"] = status(stream_id="cam0", ended=True)
    viewer.state.stopped = False
    with pytest.raises(KeyboardInterrupt):  # its session had ended before the interrupt: ended, not stopped
        viewer.loop(interrupted, None, lambda: lambda: True)
    assert not viewer.state.stopped
    viewer.close()
    pub.close()


def test_a_session_whose_detector_was_stopped_is_judged_so_far_beside_one_that_ended() -> None:
    # A view apart (stream-detect view) said "cam1 ended: no mistake; never done: ..." of a camera stopped by hand:
    # only the one-command run, which stops its own detector, knew to say "stopped".
    ended, stopped = Session("cam0"), Session("cam1")
    stopped.core, stopped.state = ended.core, ended.state  # one checker, one view
    ended.run((GET_CUP, FILL, BOIL))
    stopped.run((GET_CUP, FILL, BOIL), stopped=True)
    text = draw(ended.state, width=160)
    assert "cam0 ended: no mistake; never done: add_teabag, pour_water, add_milk" in text
    assert "cam1 stopped: no mistake so far; not done by the stop: add_teabag, pour_water, add_milk" in text
    assert "cam0 (ended)" in text and "cam1 (stopped)" in text and not ended.state.stopped
    assert "not done (sessions ended or stopped)" in text  # the two reports' table: each row's stream says which


def test_a_recording_that_played_out_before_the_person_stopped_the_run_is_said_ended(ctx: zmq.Context) -> None:
    # `stream-detect --video a.mp4 --video camera`: the file reached its end, then the person pressed Ctrl-C to stop
    # the camera. The view took every session of the run for cut short: "file stopped: ... not done by the stop" of a
    # recording that played to its end, though its status said it ended on its own (no ``stopped``).
    pub, endpoint = bind(ctx, zmq.PUB, "inproc://played-out")
    viewer = Viewer(ctx, endpoint, ViewState(), jsonl=True)

    def interrupted() -> bool:
        raise KeyboardInterrupt

    played = status(stream_id="file", run="f", ended=True, allowed=(), allowed_scores=())
    viewer.state.apply(played)
    viewer.state.apply(status(stream_id="camera", run="c"))
    with pytest.raises(KeyboardInterrupt):
        viewer.loop(interrupted, None, lambda: lambda: True)
    assert viewer.state.stopped  # the camera's session was cut short
    viewer.state.apply(report(stream_id="file", run="f", missing_id="file#end"))
    viewer.state.apply(status(stream_id="camera", run="c", ended=True, allowed=(), allowed_scores=()))
    viewer.state.apply(report(stream_id="camera", run="c", missing_id="camera#end"))
    text = draw(viewer.state, width=160)
    assert "file ended: " in text and "file (ended)" in text, text
    assert "camera stopped: " in text and "camera (stopped)" in text, text
    assert "not done (sessions ended or stopped)" in text, text
    viewer.close()
    pub.close()


def test_a_stopped_session_s_steps_not_done_stay_said_so_once_its_camera_starts_again() -> None:
    # The table of steps not done read whether a report's session was stopped off its stream's row, which is the new
    # run's once the camera starts again: the stopped session's steps were then listed as "never done (session
    # ended)", the very thing `stopped` is there to tell apart.
    session = Session("cam0")
    session.run((GET_CUP, FILL, BOIL), stopped=True)
    assert "not done by the stop (session stopped)" in draw(session.state, width=160)
    session.send(Heartbeat("cam0", 1, 2.0, "t", (), None, 0, 0, 5.0, False))  # the camera's detector started again
    assert session.state.streams["cam0"].run != session.state.missing[-1][1].run
    text = draw(session.state, width=160)
    assert "not done by the stop (session stopped)" in text and "never done" not in text, text


def test_a_stopped_session_s_steps_beside_its_restarted_camera_s_ended_ones_say_which_is_which() -> None:
    # Stopped, then started again and played to its end: the table of steps not done held a row of each run under
    # "not done (sessions ended or stopped)", relying on "each stream's row and verdict line" to say which, but
    # both are the new run's by then: nothing told the stopped session's steps from those the other never did.
    session = Session("cam0")
    session.run((GET_CUP, FILL, BOIL), stopped=True)
    history = (GET_CUP,)
    session.send(Heartbeat("cam0", 100, 2.0, "t", (), None, 0, 0, 5.0, False))  # the camera's detector again
    session.send(keystep(history, 101, stream_id="cam0", session="t"))
    session.send(Heartbeat("cam0", 102, 2.0, "t", history, None, 50, 0, 5.0, True))  # its source's end
    for width in (160, 50):  # the table, and the lines of a narrow terminal
        text = draw(session.state, width=width)
        table = text.split("not done (sessions ended or stopped)", 1)[1]  # its rows, oldest first
        assert "cam0 (stopped)" in table and "cam0 (ended)" in table, text
        assert table.index("cam0 (stopped)") < table.index("cam0 (ended)"), text


@pytest.mark.parametrize("width", range(70, 81))
def test_the_latencies_never_draw_wider_than_the_terminal(width: int) -> None:
    # Their own width check counted each number's minimum width: a 9-character hop (3600000.0, a replayed session's
    # hour-old heartbeat) needed a table 77 wide at 74-76 columns, and the terminal cut off its "alert out" column.
    session = Session()
    session.run(DEMO_EXECUTIONS["mistake"])
    for closing in (False, True):
        console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
        console.print(render(session.state, closing=closing))
        lines = console.export_text().splitlines()
        assert any("3600000.0" in line for line in lines)
        drawn = [line.rstrip() for line in lines if line.startswith(("┏", "┃", "┡", "│", "└"))]
        assert all(line.endswith(("┓", "┃", "┩", "│", "┘")) for line in drawn)  # every table whole, none cut


def test_a_stream_whose_status_stopped_coming_is_shown_stale_not_live() -> None:
    # After a checker restart, a stream whose detector had gone is one the new checker does not know: no status
    # comes for it any more, and the view showed its last row at 29.7 fps for ever.
    state = ViewState(names={2: "boil_water", 3: "get_cup"}, listening_since=100.0)
    state.apply(status(alerts=0), received_at=100.0)
    state.apply(status(stream_id="other", alerts=0, ended=True), received_at=100.0)
    state.now = 100.0 + SILENT_S / 2
    assert stream_row(draw(state), "kitchen")[:2] == ["kitchen", "boil_water"] and not state.stale("kitchen")
    state.apply(CheckerHealth("checker", 9, 104.0, 1, 0, 0, 0, 0, 0, 0, 0, 0), received_at=104.0)  # the checker speaks
    state.now = 104.5
    text = draw(state)
    row = stream_row(text, "kitchen")
    assert row[0] == "kitchen (stale)" and row[1] == "-" and row[4] == "-"  # no step now, no rate
    assert stream_row(text, "other")[0] == "other (ended)"  # an ended stream is over, not stale
    line = " ".join(text.split())
    assert "kitchen stale: the checker has said nothing of it since" in line and "so no verdict" in line
    assert "not answering" not in line


def test_a_lost_stream_the_checker_forgot_is_stale_as_the_dashboard_says() -> None:
    # The checker re-sends a lost stream's status while it holds it; once a restarted checker has forgotten it the
    # view still said "(lost)" for ever, while the dashboard's tile said "no word since".
    state = ViewState(names={2: "boil_water", 3: "get_cup"}, listening_since=100.0)
    state.apply(status(lost=True), received_at=100.0)
    state.now = 100.0 + SILENT_S / 2
    assert stream_row(draw(state), "kitchen")[0] == "kitchen (lost)"
    state.apply(CheckerHealth("checker", 9, 104.0, 1, 0, 0, 0, 0, 0, 0, 0, 0), received_at=104.0)  # the checker speaks
    state.now = 104.5
    text = draw(state)
    assert stream_row(text, "kitchen")[0] == "kitchen (stale)" and state.stale("kitchen")
    line = " ".join(text.split())
    assert "kitchen stale: the checker has said nothing of it since" in line and "kitchen lost:" not in line
    # A checker that was never restarted lets a lost stream go after 12 stream timeouts: the line blamed a restart.
    assert "the checker lets a lost stream go 12 times its --stream-timeout after it fell silent" in line


def test_a_checker_that_stops_answering_is_said_on_screen() -> None:
    state = ViewState(endpoint="tcp://127.0.0.1:5556", listening_since=100.0)
    state.now = 100.0 + SILENT_S + 0.5
    assert "checker at tcp://127.0.0.1:5556 not answering (nothing heard yet: is it running there?)" in " ".join(
        draw(state).split())
    state.apply(status(), received_at=state.now)
    assert "not answering" not in draw(state)
    state.now += SILENT_S + 0.5
    line = " ".join(draw(state).split())
    assert "not answering (last heard" in line and "what is shown may be out of date" in line
    assert "kitchen (stale)" in line and "kitchen stale:" not in line  # the checker's silence is said once


def test_jsonl_says_when_the_checker_falls_silent_and_when_it_answers_again(tmp_path: Path) -> None:
    warned: list[str] = []
    ctx = zmq.Context()
    endpoint = f"ipc://{tmp_path}/out"
    try:
        viewer = Viewer(ctx, endpoint, ViewState(), jsonl=True, out=io.StringIO(), warn=warned.append)
        assert wait_for(lambda: bool(warned), SILENT_S + 10, lambda: viewer.pump(50))  # started before the checker
        assert warned == [f"view: checker at {endpoint} not answering (nothing heard yet: is it running there?); "
                          "waiting for it"]
        stop = threading.Event()
        service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", endpoint), ctx)
        thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
        thread.start()
        try:
            assert wait_for(lambda: len(warned) == 2, 20.0, lambda: viewer.pump(50))
            assert warned[1] == f"view: the checker at {endpoint} answers again"
        finally:
            stop.set()
            thread.join(5)
        viewer.close()
    finally:
        ctx.destroy(linger=0)


def test_a_graph_that_names_the_checkers_steps_otherwise_is_said_and_the_checkers_names_shown() -> None:
    # A view given another procedure's graph labelled every step of the checker's with that graph's names, silently.
    state = ViewState(names={2: "attach_legs", 3: "unbox_parts"})
    state.apply(status(done=(3,)))
    state.apply(alert())  # the checker calls step 2 boil_water
    text = " ".join(draw(state).split())
    assert ("step 2 is 'attach_legs' in the view's --graph but 'boil_water' at the checker: is --graph the "
            "checker's graph?") in text
    # A step the checker has not named yet shows its id: the graph that misnamed step 2 misnames the others as well
    # (it showed "unbox_parts" for the checker's get_cup, under a warning that said the checker's names are shown).
    assert state.name(2) == "boil_water" and state.name(3) == "3"
    long_name = "x" * 300  # the checker names its steps in full (its graph's names), so a long one is no conflict
    state = ViewState(names={2: long_name})
    state.apply(StepEvent("kitchen", 4, 1.2, 2, long_name, 4.0, 7.5, 0.93, 1, run="s"))
    assert not state.name_conflicts and state.name(2) == long_name
    # The view decides as the dashboard does (one rule, streaming.step_names): a checker's name that only begins
    # like the graph's ("boil water" for "boil water for tea") is a conflict; the view used to keep the graph's.
    state = ViewState(names={2: "boil water"})
    state.apply(StepEvent("kitchen", 4, 1.2, 2, "boil water for tea", 4.0, 7.5, 0.93, 1, run="s"))
    assert state.name_conflicts == {2: ("boil water", "boil water for tea")} and state.name(2) == "boil water for tea"


def view_in_a_closed_terminal(new_session: bool) -> subprocess.Popen[bytes]:
    """A ``stream-detect view`` that drew "checker not answering" (a port nobody answers on, so nothing new comes to
    draw) in a pseudo-terminal, which is then closed: every write to it fails with EIO and it is no terminal any more.
    ``new_session``: started in a session of its own, so no SIGHUP can reach it."""
    master, slave = pty.openpty()
    with refused_port() as port:
        view = subprocess.Popen([*STREAM_DETECT, "view", "--connect", f"tcp://127.0.0.1:{port}", "--demo"],
                                stdin=slave, stdout=slave, stderr=subprocess.PIPE, start_new_session=new_session,
                                env={**os.environ, "COLUMNS": "100"})
        os.close(slave)
        try:
            drawn = b""
            deadline = time.monotonic() + 60
            while b"not answering" not in drawn and time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 1.0)
                if ready:
                    drawn += os.read(master, 65536)
            assert b"not answering" in drawn
        finally:
            os.close(master)
    return view


def test_a_view_without_a_controlling_terminal_stops_when_its_terminal_is_gone() -> None:
    # Started in a session of its own (setsid, a service manager), the view is sent no SIGHUP when the terminal it
    # draws in closes; rich then draws nothing, silently, and the view ran on for ever. It must stop as a SIGHUP would.
    view = view_in_a_closed_terminal(new_session=True)
    try:
        _, err = view.communicate(timeout=60)
    finally:
        view.kill()
    assert (view.returncode, err.decode().strip()) == (129, "interrupted by SIGHUP: stopped")


def test_a_view_whose_terminal_is_gone_stops_on_sighup_with_its_line() -> None:
    # A closed window or a dropped ssh session: the view's last frame met a terminal that answers EIO, and the SIGHUP
    # that came with it ended in two chained tracebacks and exit status 1 instead of its line and 129.
    view = view_in_a_closed_terminal(new_session=False)
    view.send_signal(signal.SIGHUP)
    _, err = view.communicate(timeout=60)
    assert (view.returncode, err.decode().strip()) == (129, "interrupted by SIGHUP: stopped")


def test_the_view_forgets_the_streams_a_restarted_checker_no_longer_holds(tmp_path: Path) -> None:
    # Cameras that came and went stayed in the table until it held MAX_VIEW_STREAMS rows of old sessions, every one
    # drawn at each refresh: a view left running at a site climbed from 37 % to 55 % of a core in 8 minutes.
    state = ViewState()
    state.forget_s = 1.0  # an attribute, not an argument: the code before it ignores it and the assertion says so
    view_ctx = zmq.Context()
    viewer = Viewer(view_ctx, f"ipc://{tmp_path}/out", state, jsonl=True, out=io.StringIO())
    try:
        with running_checker(tmp_path) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            for k in range(40):
                EventPublisher(detector, f"gone-{k}").heartbeat(None, 10, 0, 5.0, ended=True)
            assert wait_for(lambda: len(state.streams) == 40, 10, step=lambda: viewer.pump(10))
        with running_checker(tmp_path) as (ctx, _service, _thread):  # restarted: it never hears of gone-*
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            live = EventPublisher(detector, "kitchen")
            assert wait_for(lambda: set(state.streams) == {"kitchen"}, 8,
                            step=lambda: (live.heartbeat(None, 10, 0, 5.0), viewer.pump(10))), sorted(state.streams)
            # What stays of them is bounded: the verdict lines of the last few, and their reports (bounded on their own)
            assert not state.status_heard.keys() - {"kitchen"} and len(state.ended) == ENDED_LOG
    finally:
        viewer.close()
        view_ctx.destroy(linger=0)


def test_a_view_whose_checker_is_silent_forgets_nothing() -> None:
    # Unheard for want of a link is not let go by the checker: the rows stay, marked stale, until it answers.
    state = ViewState(listening_since=100.0)
    state.forget_s = 1.0
    state.apply(status(alerts=0), received_at=100.0)
    state.now = 200.0
    assert state.silent() and state.forget_gone() == [] and "kitchen" in state.streams
    state.apply(CheckerHealth("checker", 9, 200.0, 1, 0, 0, 0, 0, 0, 0, 0, 0), received_at=200.0)
    # answering again: it has forget_s to re-send the streams it holds
    assert state.forget_gone() == [] and "kitchen" in state.streams
    state.apply(CheckerHealth("checker", 10, 201.0, 1, 0, 0, 0, 0, 0, 0, 0, 0), received_at=201.0)
    state.now = 201.0
    assert state.forget_gone() == ["kitchen"] and not state.streams


def test_a_stream_back_in_its_run_after_its_row_was_forgotten_shows_its_alerts_once(tmp_path: Path) -> None:
    # Forgetting a row forgot its alert ids too: the checker re-sends a returning stream's alerts (the same run, the
    # same ids), and the view showed each again as a new alert.
    state = ViewState()
    state.forget_s = 1.0
    view_ctx = zmq.Context()
    viewer = Viewer(view_ctx, f"ipc://{tmp_path}/out", state, jsonl=True, out=io.StringIO())
    seq = iter(range(10_000))

    def cam_alerts() -> list[Alert]:
        return [a for _, a in state.alerts if a.stream_id == "cam0"]

    try:
        with running_checker(tmp_path) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))

            def send_keystep() -> None:  # boil_water before fill_kettle
                detector.send(keystep(history=(2,), seq=next(seq), timestamp=time.time()))
                viewer.pump(10)

            assert wait_for(lambda: len(cam_alerts()) == 1, 10, step=send_keystep)
        with running_checker(tmp_path) as (ctx, _service, _thread):  # it never heard of cam0: its row goes
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            kitchen = EventPublisher(detector, "kitchen")
            assert wait_for(lambda: "cam0" not in state.streams and "kitchen" in state.streams, 15,
                            step=lambda: (kitchen.heartbeat(None, 10, 0, 5.0), viewer.pump(10)))
            # cam0's detector is back, in the same run: the checker replays its history and re-sends its alert.
            assert wait_for(lambda: "cam0" in state.streams, 10, step=send_keystep)
            back = state.status_heard["cam0"]
            # a later status of cam0 comes after the alert the checker re-sent with the first one
            assert wait_for(lambda: state.status_heard.get("cam0", back) > back, 10, step=lambda: viewer.pump(10))
    finally:
        viewer.close()
        view_ctx.destroy(linger=0)
    assert len(cam_alerts()) == 1, cam_alerts()



def test_a_session_that_ended_keeps_its_verdict_and_its_report_once_its_row_is_forgotten(tmp_path: Path) -> None:
    # Forgetting an ended session's row took its verdict line with it (the person who looked away for ten minutes
    # found no word of how it went), and its end report: the same run's report, sent again (its detector's last
    # heartbeat reaching a restarted checker), then showed as a second session over, in the log and as a JSON line.
    state = ViewState(names=graph_names(tea_graph()))
    state.forget_s = 1.0
    out = io.StringIO()
    view_ctx = zmq.Context()
    viewer = Viewer(view_ctx, f"ipc://{tmp_path}/out", state, jsonl=True, out=out)

    def drawn() -> str:
        console = Console(width=160, record=True, file=io.StringIO(), color_system=None)
        console.print(render(state, closing=True))
        return console.export_text()

    try:
        with running_checker(tmp_path) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            kitchen = EventPublisher(detector, "kitchen")
            kitchen.keystep(1, "fill_kettle", 0.0, 1.0, 0.9)
            assert wait_for(lambda: "kitchen" in state.reported and state.streams.get("kitchen", status()).ended, 10,
                            step=lambda: (kitchen.heartbeat(None, 10, 0, 5.0, ended=True), viewer.pump(10)))
            verdict = next(line for line in drawn().splitlines() if line.startswith("kitchen ended:"))
        with running_checker(tmp_path) as (ctx, _service, _thread):  # restarted: it never hears of kitchen
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            other = EventPublisher(detector, "other")
            assert wait_for(lambda: "kitchen" not in state.streams, 15,
                            step=lambda: (other.heartbeat(None, 10, 0, 5.0), viewer.pump(10)))
            assert verdict in drawn()  # its row went, its verdict stayed
            # kitchen's detector says its last word again: the restarted checker sends the same run's report
            kitchen.publisher = detector
            assert wait_for(lambda: "kitchen" in state.streams, 10,
                            step=lambda: (kitchen.heartbeat(None, 10, 0, 5.0, ended=True), viewer.pump(10)))
            back = state.status_heard["kitchen"]
            assert wait_for(lambda: state.status_heard["kitchen"] > back, 10, step=lambda: viewer.pump(10))
    finally:
        viewer.close()
        view_ctx.destroy(linger=0)
    reports = [line for line in out.getvalue().splitlines() if json.loads(line)["kind"] == "missing"]
    assert len(reports) == 1 and len(state.missing) == 1, reports
    assert drawn().count(verdict) == 1  # the row's verdict, not beside the one kept for it


def test_the_alert_ids_kept_past_their_rows_are_bounded() -> None:
    # Kept when a row is forgotten, they are bounded on their own: a peer's stream ids cannot grow them without limit.
    from streaming.view.state import MAX_VIEW_STREAMS

    state = ViewState()
    for k in range(MAX_VIEW_STREAMS + 5):
        state.apply(replace(alert(), stream_id=f"cam{k}", alert_id=f"cam{k}#1"), received_at=1.0)
    assert len(state.alert_ids) == MAX_VIEW_STREAMS and "cam0" not in state.alert_ids


def test_the_end_reports_kept_past_their_rows_are_bounded_a_report_without_a_row_going_first() -> None:
    from streaming.view.state import MAX_VIEW_STREAMS

    state = ViewState()
    state.apply(status(stream_id="cam1", ended=True), received_at=1.0)
    for k in range(MAX_VIEW_STREAMS + 5):
        state.apply(MissingSteps(f"cam{k}", 1, 1.0, f"cam{k}#end", "s", (1,), ("fill_kettle",), False, (0.9,)),
                    received_at=1.0)
    assert len(state.reported) == MAX_VIEW_STREAMS and "cam1" in state.reported and "cam0" not in state.reported

def test_a_row_is_not_forgotten_as_soon_as_the_checker_answers_after_a_long_outage(tmp_path: Path) -> None:
    # Only the time the checker answers counts: after an outage longer than forget_s every row went at the checker's
    # first message, before it had re-sent the streams it holds (it does every 0.5 s).
    state = ViewState()
    state.forget_s = 3.0
    view_ctx = zmq.Context()
    viewer = Viewer(view_ctx, f"ipc://{tmp_path}/out", state, jsonl=True, out=io.StringIO())
    try:
        with running_checker(tmp_path) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            cam = EventPublisher(detector, "cam0")
            assert wait_for(lambda: "cam0" in state.streams, 10,
                            step=lambda: (cam.heartbeat(None, 10, 0, 5.0), viewer.pump(10)))
        assert wait_for(lambda: state.silent() and state.now - state.status_heard["cam0"] > 4.0, 20,
                        step=lambda: viewer.pump(10))
        with running_checker(tmp_path) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            kitchen = EventPublisher(detector, "kitchen")
            assert wait_for(lambda: "kitchen" in state.streams, 10,
                            step=lambda: (kitchen.heartbeat(None, 10, 0, 5.0), viewer.pump(10)))
            kept = sorted(state.streams)
            # and it goes once the checker has answered for forget_s without re-sending it
            assert wait_for(lambda: "cam0" not in state.streams, 15,
                            step=lambda: (kitchen.heartbeat(None, 10, 0, 5.0), viewer.pump(10)))
    finally:
        viewer.close()
        view_ctx.destroy(linger=0)
    assert kept == ["cam0", "kitchen"]


def test_a_view_held_by_its_terminal_draws_news_at_once_when_let_go(tmp_path: Path) -> None:
    # The gap before the next redraw was three times the last drawing's wall time: a terminal that held the view's
    # output (Ctrl-S, a stopped ssh window, a suspended job) made that drawing as long as the hold, and the view then
    # drew nothing, new alerts included, for three times as long again. Only the drawing's own work counts.
    master, slave = pty.openpty()
    with running_checker(tmp_path) as (ctx, _service, _thread):
        view = subprocess.Popen([*STREAM_DETECT, "view", "--connect", f"ipc://{tmp_path}/out", "--demo"],
                                stdin=slave, stdout=slave, stderr=subprocess.DEVNULL,
                                env={**os.environ, "COLUMNS": "120", "LINES": "40"})
        os.close(slave)
        drawn = bytearray()

        def read(for_s: float) -> None:
            ready, _, _ = select.select([master], [], [], for_s)
            if ready:
                with contextlib.suppress(OSError):  # EIO: the view has closed its terminal
                    drawn.extend(os.read(master, 65536))

        def blocked_writing() -> bool:
            with open(f"/proc/{view.pid}/wchan") as wchan:
                where = wchan.read()
            return "tty" in where or "wait_woken" in where

        try:
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            seq = iter(range(10_000))
            def send_and_read(sender: Publisher, stream_id: str, history: tuple[int, ...]) -> Callable[[], None]:
                def step() -> None:
                    sender.send(keystep(history=history, seq=next(seq), stream_id=stream_id, timestamp=time.time()))
                    read(0.1)

                return step

            assert wait_for(lambda: b"kitchen" in drawn, 30, step=send_and_read(detector, "kitchen", (1,)))
            os.write(master, b"\x13")  # Ctrl-S: the terminal holds what the view writes
            assert wait_for(blocked_writing, 10, step=lambda: detector.send(
                keystep(history=(1,), seq=next(seq), stream_id="kitchen", timestamp=time.time())))
            held = time.monotonic()
            assert wait_for(lambda: time.monotonic() - held > 4.0 and blocked_writing(), 10)
            os.write(master, b"\x11")  # Ctrl-Q
            drawn.clear()
            assert wait_for(lambda: len(drawn) > 0, 10, step=lambda: read(0.1))
            sent = time.monotonic()
            late = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            shown = wait_for(lambda: b"late-cam" in drawn, 20, step=send_and_read(late, "late-cam", (2,)))
            took = time.monotonic() - sent
        finally:
            os.write(master, b"\x11")
            view.terminate()
            wait_for(lambda: view.poll() is not None, 30, step=lambda: read(0.1))
            view.kill()
            view.wait(30)
            os.close(master)
    assert shown and took < 3.0, took
