"""``stream-detect eval`` counts what the live view told the person: a retracted alert is no catch.

Each test runs both on the same recording (what a detector published): eval's scores, and a live view fed the
checker's answers as a viewer receives them, whose end-of-stream line is read off the rendered screen.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from graphs.checker_settings import CheckerSettings
from graphs.task_graph import END, START, TaskGraph
from recognition.segmenter import SegmenterOverrides
from streaming.checker.core import CheckerCore
from streaming.demo.paths import default_demo_paths
from streaming.demo.procedure import SCENARIO, STEP_IDS, STEP_NAMES, name_of
from streaming.local_checker import CheckerLink
from streaming.messages import Heartbeat, KeyStepOnset, Message, decode, encode
from streaming.offline.eval_run import (
    STREAM_ID,
    DetectorRecord,
    EvalConfig,
    EvalVideo,
    check_record,
    demo_videos,
    load_chain,
    record_video,
)
from streaming.offline.eval_scores import (
    AnnotatedSegment,
    RaisedAlert,
    VideoRun,
    false_alarm_line,
    score_video,
    video_detail,
)
from streaming.view.render import render
from streaming.view.state import ViewState, graph_names
from tests.streaming.helpers import keystep, tea_graph

FILL, BOIL, GET_CUP = 1, 2, 3  # boil_water needs fill_kettle
PROBABILISTIC = CheckerSettings("probabilistic")


def view_screen(record: DetectorRecord, graph: TaskGraph, checking: CheckerSettings) -> str:
    """The live view's final screen for a recording: the detector's messages served to a checker, and what the
    checker sends viewers folded into a view as it arrives (through the wire encoding)."""
    link = CheckerLink(CheckerCore(graph, checking=checking))
    link.replay(record.messages)
    state = ViewState(names=graph_names(graph))  # as the all-in-one run's view, and `stream-detect view --graph`
    for _, message in link.received:
        state.apply(decode(encode(message)))
    console = Console(width=300, record=True, file=io.StringIO())
    console.print(render(state, fit=True))
    return console.export_text()


def verdict_line(screen: str) -> str:
    """The view's end-of-stream line of the eval stream, without the stream's name."""
    (line,) = [line for line in screen.splitlines() if line.startswith(f"{STREAM_ID} ended: ")]
    return line.removeprefix(f"{STREAM_ID} ended: ").strip()


def test_a_retracted_alert_counts_neither_as_a_catch_nor_as_a_false_alarm() -> None:
    annotated = (AnnotatedSegment(GET_CUP, 0.0, 10.0), AnnotatedSegment(BOIL, 10.0, 20.0),
                 AnnotatedSegment(FILL, 20.0, 30.0))  # fmt: skip
    retracted = RaisedAlert(BOIL, 10.0, 20.0, raised=12.0, retracted=True)  # right, but withdrawn
    wrong = RaisedAlert(FILL, 20.0, 21.0, raised=21.0, retracted=True)  # wrong, and withdrawn
    score = score_video(VideoRun("v", annotated, (), (retracted, wrong)), tea_graph())
    graph = score.mistakes["graph"]
    assert (graph.alerts, graph.correct, graph.mistakes, graph.caught) == (0, 0, 1, 0)
    assert graph.recall == 0.0 and graph.precision is None and score.latencies == []
    assert (score.retracted, score.withdrawn) == (2, 1)
    assert false_alarm_line([score]) == (
        "false alarms: 0 of 0 alerts standing at the end (0.00 per video); 2 retracted (not counted: a retracted "
        "alert is no mistake of the session), 1 of them on a real mistake")
    # The same alert standing is a catch.
    standing = score_video(VideoRun("v", annotated, (), (RaisedAlert(BOIL, 10.0, 20.0, raised=12.0),)), tea_graph())
    assert standing.mistakes["graph"].caught == 1 and standing.withdrawn == 0


def _onset(history: tuple[int, ...], step: int, seq: int, **fields: Any) -> KeyStepOnset:
    values: dict[str, Any] = {
        "stream_id": STREAM_ID, "seq": seq, "timestamp": 1.5, "session": "s", "history": history, "step": step,
        "step_name": name_of(step), "start": 10.0, "confidence": 0.9, "index": len(history), "before": (),
        "withdrawn": False,
    }
    return KeyStepOnset(**(values | fields))


def _end(history: tuple[int, ...], seq: int) -> Heartbeat:
    return Heartbeat(stream_id=STREAM_ID, seq=seq, timestamp=2.0, session="s", history=history, current=None,
                     frames=150, dropped=0, fps=5.0, ended=True)


def test_an_alert_taken_back_once_its_step_is_confirmed_is_missed_in_eval_as_in_the_view() -> None:
    # The case a user met: boil_water announced with no sign of fill_kettle (an early alert, P near 1), then confirmed
    # with the whole step seen and fill_kettle's evidence high: the checker no longer finds a mistake and retracts.
    history = (GET_CUP,)
    messages: Sequence[tuple[float, Message]] = (
        (10.0, keystep(history, 0, stream_id=STREAM_ID, start=0.0, end=10.0)),
        (11.0, _onset(history, BOIL, 1, evidence_steps=(FILL,), evidence=(0.01,), real=0.99)),
        (20.0, keystep((GET_CUP, BOIL), 2, stream_id=STREAM_ID, start=10.0, end=20.0, evidence_steps=(FILL,),
                       evidence=(0.99,), real=0.99)),
        (21.0, _end((GET_CUP, BOIL), 3)),
    )
    record = DetectorRecord("v", 105, tuple(messages))
    annotated = (AnnotatedSegment(GET_CUP, 0.0, 10.0), AnnotatedSegment(BOIL, 10.0, 20.0, has_errors=True))
    video = EvalVideo("v", Path("v.mp4"), annotated)
    run = check_record(record, video, tea_graph(), PROBABILISTIC)
    (alert,) = run.alerts
    assert alert.step == BOIL and alert.retracted and alert.raised == 11.0
    score = score_video(run, tea_graph())
    assert {rule: (c.alerts, c.caught, c.mistakes) for rule, c in score.mistakes.items()} == {
        "graph": (0, 0, 1), "has_errors": (0, 0, 1)}
    assert score.withdrawn == 1
    detail = video_detail(run, tea_graph())
    (missed,) = detail["missed"]
    assert missed["name"] == "boil_water" and missed["why"].startswith("alerted at 11.0 s (P 0.")
    assert "then retracted" in missed["why"]
    # Every performed step carries the checker's probability that a pre-condition was skipped, alert or no alert.
    boil = detail["recognised"][1]["checker"]
    assert not boil["alerted"] and boil["p_skipped"] < 0.5
    assert [p["name"] for p in boil["preconditions"]] == ["fill_kettle"] and boil["preconditions"][0]["p_skipped"] < 0.5
    screen = view_screen(record, tea_graph(), PROBABILISTIC)
    assert verdict_line(screen) == detail["verdict"]
    assert "mistake (" not in detail["verdict"]  # the view named no mistake: neither does eval


def test_a_real_run_whose_early_alert_is_withdrawn_scores_what_the_view_shows(demo_cache: Path) -> None:
    # The bundled detector on the demo's mistake, with early alerts and a confirmation longer than the mistaken step
    # (--min-frames 14, 2.8 s): boil_water is alerted on its announcement, then never confirmed, so retracted.
    graph, detector = default_demo_paths()
    config = EvalConfig(str(graph), str(detector), demo=True, alert_on="onset",
                        segmenter=SegmenterOverrides(min_frames=14))
    chain = load_chain(config)
    (video,) = demo_videos(["demo:mistake"])
    record = record_video(video, chain, config, lambda: None)
    run = check_record(record, video, chain.graph, config.checking)
    assert [(a.step, a.retracted) for a in run.alerts] == [(BOIL, True)]
    score = score_video(run, chain.graph)
    assert score.mistakes["graph"].caught == 0 and score.mistakes["graph"].recall == 0.0  # it was 100 before
    screen = view_screen(record, chain.graph, config.checking)
    assert verdict_line(screen) == video_detail(run, chain.graph)["verdict"]
    standing = [a for a in run.alerts if not a.retracted]
    assert ("mistake (" in verdict_line(screen)) == bool(standing)


def test_an_alert_that_stands_is_a_catch_in_eval_and_a_mistake_in_the_view() -> None:
    messages = (
        (10.0, keystep((GET_CUP,), 0, stream_id=STREAM_ID, start=0.0, end=10.0)),
        (20.0, keystep((GET_CUP, BOIL), 1, stream_id=STREAM_ID, start=10.0, end=20.0)),
        (21.0, _end((GET_CUP, BOIL), 2)),
    )
    record = DetectorRecord("v", 105, messages)
    video = EvalVideo("v", Path("v.mp4"), (AnnotatedSegment(GET_CUP, 0.0, 10.0), AnnotatedSegment(BOIL, 10.0, 20.0)))
    binary = CheckerSettings("binary")
    run = check_record(record, video, tea_graph(), binary)
    assert score_video(run, tea_graph()).mistakes["graph"].caught == 1
    detail = video_detail(run, tea_graph())
    assert detail["verdict"].startswith("1 mistake (boil_water before fill_kettle)")
    assert verdict_line(view_screen(record, tea_graph(), binary)) == detail["verdict"]


def test_a_session_that_recognised_nothing_gets_no_verdict_in_eval_as_in_the_view() -> None:
    # An undertrained detector, or one of another procedure: eval wrote "no mistake; never done: <every step>" where
    # the view said there was no verdict.
    record = DetectorRecord("v", 41, ((21.0, _end((), 0)),))
    video = EvalVideo("v", Path("v.npy"), (AnnotatedSegment(GET_CUP, 0.0, 10.0),))
    run = check_record(record, video, tea_graph(), PROBABILISTIC)
    verdict = video_detail(run, tea_graph())["verdict"]
    assert verdict.startswith("no key-step recognised in 150 frames, so no verdict")
    assert verdict_line(view_screen(record, tea_graph(), PROBABILISTIC)) == verdict


def test_a_correct_session_that_recognised_few_steps_says_so_in_eval_as_in_the_view() -> None:
    # The probabilistic checker weighs the detector's evidence at the end: here it says the five steps never confirmed
    # were done, so nothing is missing after one step recognised of six. Eval wrote a plain "correct".
    others = (1, 2, 4, 5, 6)
    end = dataclasses.replace(_end((GET_CUP,), 1), evidence_steps=others, evidence=(0.99,) * len(others))
    record = DetectorRecord("v", 105, ((10.0, keystep((GET_CUP,), 0, stream_id=STREAM_ID, start=0.0, end=10.0)),
                                       (21.0, end)))
    video = EvalVideo("v", Path("v.mp4"), (AnnotatedSegment(GET_CUP, 0.0, 10.0),))
    run = check_record(record, video, tea_graph(), PROBABILISTIC)
    verdict = video_detail(run, tea_graph())["verdict"]
    assert verdict == "correct (no mistake, nothing missing), but only 1 of the graph's 6 key-steps recognised"
    assert verdict_line(view_screen(record, tea_graph(), PROBABILISTIC)) == verdict


def _missed_boil(fill_done: float, real: float) -> str:
    """``why`` of the annotated mistake boil_water (before fill_kettle) when the detector confirmed it with
    ``fill_kettle``'s done evidence ``fill_done`` and its own detection real at ``real``, through the real checker."""
    messages = (
        (10.0, keystep((GET_CUP,), 0, stream_id=STREAM_ID, start=0.0, end=10.0)),
        (20.0, keystep((GET_CUP, BOIL), 1, stream_id=STREAM_ID, start=10.0, end=20.0, evidence_steps=(FILL,),
                       evidence=(fill_done,), real=real)),
        (21.0, _end((GET_CUP, BOIL), 2)),
    )
    video = EvalVideo("v", Path("v.mp4"), (AnnotatedSegment(GET_CUP, 0.0, 10.0), AnnotatedSegment(BOIL, 10.0, 20.0)))
    run = check_record(DetectorRecord("v", 105, messages), video, tea_graph(), PROBABILISTIC)
    detail = video_detail(run, tea_graph())
    (check,) = [r["checker"] for r in detail["recognised"] if r["name"] == "boil_water"]
    assert not check["alerted"]
    (missed,) = detail["missed"]
    why: str = missed["why"]
    assert why.startswith(f"recognised at 10.0-20.0 s, but the checker put the probability that it was done before a "
                          f"pre-condition at {check['p_skipped']:.2f} (p_skipped), below --alert-threshold: ")
    return why


def test_a_mistake_missed_for_a_doubtful_detection_of_the_step_blames_the_detection_not_the_pre_condition() -> None:
    # CaptainCook4D 1_30: the pre-condition's p_skipped was 0.57 (more likely skipped), but the step's own detection
    # was likely spurious, so the product was 0.12. `why` said the evidence called the pre-condition done.
    why = _missed_boil(fill_done=0.15, real=0.2)
    assert "the detection of boil_water itself was doubtful (probability it was real 0.20)" in why
    assert "fill_kettle (p_skipped 0.59) was more likely skipped than done" in why
    assert "said fill_kettle (p_skipped 0.59) was done" not in why


def test_a_mistake_missed_because_the_evidence_called_its_pre_condition_done_names_it_done() -> None:
    why = _missed_boil(fill_done=0.9, real=0.95)
    assert why.endswith(": the detector's evidence said fill_kettle (p_skipped 0.03) was done")


def test_a_mistake_missed_after_an_earlier_alert_named_its_pre_condition_says_so() -> None:
    # Hard footage, video_16: stamp_photo was detected 1.8 s early and alerted for lay_photo; that detection ended 5 ms
    # before the annotated step, so the alert scored a false alarm, and the detection inside the step checked only
    # the other pre-condition (one alert per omission). `why` named that one alone, not the omission it was about.
    cup, fill, boil, teabag, pour = 3, FILL, BOIL, 4, 5  # pour_water needs boil_water and add_teabag
    checked = {"evidence_steps": (boil, teabag), "evidence": (0.99, 0.01), "real": 0.95}
    messages = (
        (4.0, keystep((cup,), 0, stream_id=STREAM_ID, start=0.0, end=4.0)),
        (8.0, keystep((cup, fill), 1, stream_id=STREAM_ID, start=4.0, end=8.0)),
        (12.0, keystep((cup, fill, boil), 2, stream_id=STREAM_ID, start=8.0, end=12.0)),
        (14.0, keystep((cup, fill, boil, pour), 3, stream_id=STREAM_ID, start=12.0, end=14.0, **checked)),
        (20.0, keystep((cup, fill, boil, pour, pour), 4, stream_id=STREAM_ID, start=14.5, end=20.0, **checked)),
        (21.0, _end((cup, fill, boil, pour, pour), 5)),
    )
    segments = (AnnotatedSegment(cup, 0.0, 4.0), AnnotatedSegment(fill, 4.0, 8.0), AnnotatedSegment(boil, 8.0, 12.0),
                AnnotatedSegment(pour, 14.2, 20.0))
    run = check_record(DetectorRecord("v", 105, messages), EvalVideo("v", Path("v.mp4"), segments), tea_graph(),
                       PROBABILISTIC)
    detail = video_detail(run, tea_graph())
    (alert,) = detail["alerts"]
    assert alert["missing_names"] == ["add_teabag"] and alert["annotated_segment"] is None
    (missed,) = detail["missed"]
    assert missed["why"].endswith(
        "; add_teabag had been named by an earlier alert, raised at 14.0 s on a detection of pour_water at 12.0-14.0 s "
        "(it overlaps no annotated pour_water: scored a false alarm), and is not checked again")


def test_an_earlier_alert_on_a_step_annotated_without_a_mistake_is_said_to_be_a_false_alarm() -> None:
    # pour_water done twice, the first time after add_teabag (which the detector missed: its alert on that pour
    # matched the segment, no mistake under either rule, and was scored a false alarm), the second time marked
    # has_errors. The missed second pour's why said the alert was "scored against" the first pour, as if a catch.
    cup, fill, boil, teabag, pour = 3, FILL, BOIL, 4, 5
    checked = {"evidence_steps": (boil, teabag), "evidence": (0.99, 0.01), "real": 0.95}
    messages = (
        (4.0, keystep((cup,), 0, stream_id=STREAM_ID, start=0.0, end=4.0)),
        (8.0, keystep((cup, fill), 1, stream_id=STREAM_ID, start=4.0, end=8.0)),
        (10.0, keystep((cup, fill, boil), 2, stream_id=STREAM_ID, start=8.0, end=10.0)),
        (14.0, keystep((cup, fill, boil, pour), 3, stream_id=STREAM_ID, start=12.0, end=14.0, **checked)),
        (20.0, keystep((cup, fill, boil, pour, pour), 4, stream_id=STREAM_ID, start=14.5, end=20.0, **checked)),
        (21.0, _end((cup, fill, boil, pour, pour), 5)),
    )
    segments = (AnnotatedSegment(cup, 0.0, 4.0), AnnotatedSegment(fill, 4.0, 8.0), AnnotatedSegment(boil, 8.0, 10.0),
                AnnotatedSegment(teabag, 10.0, 11.5), AnnotatedSegment(pour, 12.0, 14.0),
                AnnotatedSegment(pour, 14.2, 20.0, has_errors=True))
    run = check_record(DetectorRecord("v", 105, messages), EvalVideo("v", Path("v.mp4"), segments), tea_graph(),
                       PROBABILISTIC)
    detail = video_detail(run, tea_graph())
    (alert,) = detail["alerts"]
    assert alert["annotated_segment"] == 4 and alert["right"] == {"graph": False, "has_errors": False}
    (missed,) = detail["missed"]
    assert missed["rules"] == ["has_errors"]
    assert missed["why"].endswith(
        "; add_teabag had been named by an earlier alert, raised at 14.0 s on a detection of pour_water at 12.0-14.0 s "
        "(matched to the pour_water annotated at 12.0 s, which is no mistake: scored a false alarm), and is not "
        "checked again")


def test_an_earlier_alert_on_another_step_that_named_the_pre_condition_is_told_with_its_time() -> None:
    # One alert per omission, whichever step needs it: get_cup named by the alert on pour_water is not checked again
    # for add_milk, which needs it too. why gave that alert's time only when it was on the missed step itself.
    cup, fill, boil, pour, milk = GET_CUP, FILL, BOIL, 5, 6
    needs = {1: (), 2: (1,), 3: (), 4: (3,), 5: (2, 3), 6: (1, 3)}
    nodes = [START, *STEP_IDS, END]
    adj = np.zeros((len(nodes), len(nodes)), dtype=bool)
    for step, reqs in needs.items():
        for req in reqs or (START,):
            adj[nodes.index(step), nodes.index(req)] = True
    for step in (4, 6):
        adj[nodes.index(END), nodes.index(step)] = True
    graph = TaskGraph(STEP_IDS, STEP_NAMES, adj, scenario=SCENARIO)
    messages = (
        (4.0, keystep((fill,), 0, stream_id=STREAM_ID, start=0.0, end=4.0)),
        (8.0, keystep((fill, boil), 1, stream_id=STREAM_ID, start=4.0, end=8.0)),
        (12.0, keystep((fill, boil, pour), 2, stream_id=STREAM_ID, start=8.0, end=12.0, evidence_steps=(boil, cup),
                       evidence=(0.99, 0.01), real=0.95)),
        (16.0, keystep((fill, boil, pour, milk), 3, stream_id=STREAM_ID, start=12.0, end=16.0,
                       evidence_steps=(fill, cup), evidence=(0.99, 0.01), real=0.95)),
        (17.0, _end((fill, boil, pour, milk), 4)),
    )
    segments = (AnnotatedSegment(fill, 0.0, 4.0), AnnotatedSegment(boil, 4.0, 8.0),
                AnnotatedSegment(pour, 8.0, 12.0, has_errors=True), AnnotatedSegment(milk, 12.0, 16.0))
    run = check_record(DetectorRecord("v", 105, messages), EvalVideo("v", Path("v.mp4"), segments), graph,
                       PROBABILISTIC)
    detail = video_detail(run, graph)
    (alert,) = detail["alerts"]
    assert alert["name"] == "pour_water" and alert["missing_names"] == ["get_cup"] and alert["annotated_segment"] == 2
    (missed,) = detail["missed"]
    assert missed["name"] == "add_milk"
    assert missed["why"].endswith(
        "; get_cup had been named by an earlier alert, raised at 12.0 s on a detection of pour_water at 8.0-12.0 s "
        "(scored against the pour_water annotated at 8.0 s), and is not checked again")


def test_pre_conditions_named_by_two_earlier_alerts_are_each_told_with_their_own_alert() -> None:
    # add_milk needs fill_kettle, get_cup and boil_water: the alert on add_teabag named fill_kettle, the one on
    # pour_water get_cup. why gave both to the first alert, which never named get_cup.
    fill, boil, cup, teabag, pour, milk = FILL, BOIL, GET_CUP, 4, 5, 6
    needs = {1: (), 2: (), 3: (), 4: (1,), 5: (3,), 6: (1, 2, 3)}
    nodes = [START, *STEP_IDS, END]
    adj = np.zeros((len(nodes), len(nodes)), dtype=bool)
    for step, reqs in needs.items():
        for req in reqs or (START,):
            adj[nodes.index(step), nodes.index(req)] = True
    for step in (4, 5, 6):
        adj[nodes.index(END), nodes.index(step)] = True
    graph = TaskGraph(STEP_IDS, STEP_NAMES, adj, scenario=SCENARIO)
    messages = (
        (4.0, keystep((boil,), 0, stream_id=STREAM_ID, start=0.0, end=4.0)),
        (8.0, keystep((boil, teabag), 1, stream_id=STREAM_ID, start=4.0, end=8.0, evidence_steps=(fill,),
                      evidence=(0.01,), real=0.95)),
        (12.0, keystep((boil, teabag, pour), 2, stream_id=STREAM_ID, start=8.0, end=12.0, evidence_steps=(cup,),
                       evidence=(0.01,), real=0.95)),
        (16.0, keystep((boil, teabag, pour, milk), 3, stream_id=STREAM_ID, start=12.0, end=16.0,
                       evidence_steps=(fill, boil, cup), evidence=(0.01, 0.99, 0.01), real=0.95)),
        (17.0, _end((boil, teabag, pour, milk), 4)),
    )
    segments = (AnnotatedSegment(boil, 0.0, 4.0), AnnotatedSegment(teabag, 4.0, 8.0, has_errors=True),
                AnnotatedSegment(pour, 8.0, 12.0, has_errors=True), AnnotatedSegment(milk, 12.0, 16.0))
    run = check_record(DetectorRecord("v", 105, messages), EvalVideo("v", Path("v.mp4"), segments), graph,
                       PROBABILISTIC)
    detail = video_detail(run, graph)
    assert [a["missing_names"] for a in detail["alerts"]] == [["fill_kettle"], ["get_cup"]]
    (missed,) = detail["missed"]
    assert missed["name"] == "add_milk"
    assert missed["why"].endswith(
        "; fill_kettle had been named by an earlier alert, raised at 8.0 s on a detection of add_teabag at 4.0-8.0 s "
        "(scored against the add_teabag annotated at 4.0 s); get_cup had been named by an earlier alert, raised at "
        "12.0 s on a detection of pour_water at 8.0-12.0 s (scored against the pour_water annotated at 8.0 s), and "
        "are not checked again")
