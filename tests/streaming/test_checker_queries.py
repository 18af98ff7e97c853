"""The checker's procedure questions: steps a session never did when it ends, the likely next steps, and the missing
step most likely forgotten, from `CheckerCore` to a real detector process stopped with SIGTERM."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from graphs.checker_settings import CheckerSettings
from graphs.procedure_queries import ProcedureQueries
from graphs.task_graph import TaskGraph
from streaming.checker.core import CheckerCore
from streaming.demo.paths import default_demo_paths
from streaming.demo.procedure import DEMO_EXECUTIONS
from streaming.messages import MAX_HISTORY, Alert, Message, MissingSteps, Retraction, Status, run_of
from streaming.session_verdict import session_verdict
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.streaming.helpers import (
    STREAM_DETECT,
    beat,
    keystep,
    running_checker,
    tea_graph,
    wait_for,
    weighted_tea_graph,
)

CORRECT = DEMO_EXECUTIONS["correct"]
WITHOUT_MILK = DEMO_EXECUTIONS["missing"]  # the correct order without add_milk (6)




def reports(out: list[Message]) -> list[MissingSteps]:
    return [m for m in out if isinstance(m, MissingSteps)]


def play(core: CheckerCore, steps: tuple[int, ...], session: str = "s") -> list[Message]:
    """Feed a session's key-steps one event at a time, as a detector sends them."""
    out: list[Message] = []
    for k in range(len(steps)):
        out += core.handle(keystep(steps[: k + 1], k, session=session))
    return out


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_ended_session_reports_every_required_step_it_never_did_once_and_re_sends_it() -> None:
    now = [100.0]
    core = CheckerCore(tea_graph(), clock=lambda: now[0])
    assert reports(play(core, WITHOUT_MILK)) == []  # nothing before the end
    out = core.handle(beat(seq=len(WITHOUT_MILK), history=WITHOUT_MILK, ended=True))
    [report] = reports(out)
    assert (report.missing, report.missing_names) == ((6,), ("add_milk",))
    assert (report.missing_id, report.run, report.replayed) == ("cam0#end", run_of("s"), False)
    assert isinstance(out[-1], Status) and out[-1].ended and out.index(report) < len(out) - 1  # report, then "ended"
    # The detector repeats its last heartbeat: no second report.
    assert reports(core.handle(beat(seq=len(WITHOUT_MILK) + 1, history=WITHOUT_MILK, ended=True))) == []
    now[0] += 1.0
    [again] = reports(core.periodic(0.5))  # for a viewer that joins late
    assert again.replayed and again.missing_id == report.missing_id and again.missing == (6,)


def test_a_session_that_did_every_required_step_publishes_nothing() -> None:
    now = [100.0]
    core = CheckerCore(tea_graph(), clock=lambda: now[0])
    out = play(core, CORRECT) + core.handle(beat(seq=len(CORRECT), history=CORRECT, ended=True))
    now[0] += 1.0
    out += core.periodic(0.5)
    assert reports(out) == [] and not any(isinstance(m, Alert) for m in out)


def test_a_session_that_did_nothing_reports_every_step() -> None:
    [report] = reports(CheckerCore(tea_graph()).handle(beat(seq=0, history=(), ended=True)))
    assert report.missing == (1, 2, 3, 4, 5, 6)


def test_a_detector_restarted_after_a_crash_takes_the_stream_without_reporting_the_dead_session() -> None:
    now = [0.0]
    core = CheckerCore(tea_graph(), monotonic=lambda: now[0])
    play(core, (3, 1), session="first")
    # The first detector died unheard; the restarted one takes the stream once it is silent 5 s, maybe before the
    # periodic expiry marks it lost: either way it is lost, and what it did not report may have been done.
    now[0] = 5.5
    out = core.handle(keystep((3,), 0, session="second"))
    assert reports(out) == [] and [m.run for m in out if isinstance(m, Status)] == [run_of("second")]
    # An ended and reported session is not reported again when the next one starts.
    [report] = reports(core.handle(beat(seq=9, history=(3,), ended=True, session="second")))
    assert report.run == run_of("second") and report.missing == (1, 2, 4, 5, 6)
    assert reports(core.handle(keystep((1,), 0, session="third"))) == []


def test_a_session_full_at_the_history_cap_is_reported_when_its_successor_starts() -> None:
    core = CheckerCore(tea_graph())
    core.handle(beat(seq=0, history=(3, 1) * (MAX_HISTORY // 2), session="first"))  # 4096 steps: full
    out = core.handle(keystep((3,), 0, session="second"))  # its detector went on in a new session
    [report] = reports(out)
    assert report.run == run_of("first") and report.missing == (2, 4, 5, 6) and out[0] is report


def test_a_lost_stream_is_never_reported_not_even_when_it_is_freed_or_replaced() -> None:
    # A detector killed with kill -9 never said its session ended: the steps it did not report may have been done.
    clock = Clock()
    core = CheckerCore(tea_graph(), stream_timeout_s=5.0, monotonic=clock)
    play(core, (3, 1), session="first")
    clock.now += 6.0
    out = core.periodic(0.5)
    assert core.streams["cam0"].lost and reports(out) == []
    assert reports(core.handle(keystep((3,), 0, session="second"))) == []  # the detector restarted
    clock.now += 6.0
    core.periodic(0.5)  # the second one is lost too ...
    clock.now += 13 * 5.0
    assert reports(core.periodic(0.5)) == [] and "cam0" not in core.streams  # ... and freed, silently


def graph_with_optional_and_removed_steps() -> TaskGraph:
    """The tea graph plus step 7 (``wash_up``), removed in training (no edge), with add_teabag (4) optional."""
    tea = tea_graph()
    adjacency = np.zeros((9, 9), dtype=bool)
    adjacency[:7, :7] = tea.adjacency[:7, :7]  # START and steps 1..6 keep their pre-conditions
    adjacency[8, :7] = tea.adjacency[7, :7]  # END moves to index 8
    return TaskGraph((*tea.step_ids, 7), (*tea.step_names, "wash_up"), adjacency,
                     optional_scores=np.array([0.0, 0.0, 0.0, 0.9, 0.0, 0.0, 0.0]))


def test_optional_steps_and_steps_outside_the_graph_are_never_named() -> None:
    graph = graph_with_optional_and_removed_steps()
    assert graph.optional_steps == (4,) and graph.removed_steps == (7,)
    [report] = reports(CheckerCore(graph).handle(beat(seq=0, history=(3, 1, 2), ended=True)))
    assert report.missing == (5, 6) and report.missing_names == ("pour_water", "add_milk")
    done = beat(seq=0, history=(3, 1, 2, 5, 6), ended=True)
    assert reports(CheckerCore(graph).handle(done)) == []  # 4 and 7 not needed


def last_status(out: list[Message]) -> Status:
    return [m for m in out if isinstance(m, Status)][-1]


def test_the_status_orders_the_allowed_steps_by_their_future_step_probability() -> None:
    graph = weighted_tea_graph()
    queries = ProcedureQueries(graph)
    core = CheckerCore(graph)
    first = last_status(core.handle(beat(seq=0, history=())))
    assert first.rule == "weighted" and first.allowed == (3, 1)  # graph order is (1, 3): get_cup is likelier
    assert first.allowed_scores == pytest.approx([queries.future(None, []).score(s) for s in (3, 1)], abs=1e-4)
    after_cup = last_status(core.handle(keystep((3,), 1)))
    assert after_cup.allowed == (4, 1)
    assert after_cup.allowed_scores == pytest.approx([queries.future(3, [3]).score(s) for s in (4, 1)], abs=1e-4)
    assert after_cup.allowed_scores[0] > after_cup.allowed_scores[1] > 0


def test_without_weights_the_binary_rule_orders_them_and_says_so() -> None:
    core = CheckerCore(tea_graph())  # a binary graph: the successors of the step just done come first
    first = last_status(core.handle(beat(seq=0, history=())))
    assert (first.rule, first.allowed, first.allowed_scores) == ("binary", (1, 3), (0.5, 0.5))  # START's successors
    after_cup = last_status(core.handle(keystep((3,), 1)))
    assert (after_cup.allowed, after_cup.allowed_scores) == ((4, 1), (1.0, 0.0))
    done = last_status(core.handle(keystep(CORRECT, 2)))
    assert (done.allowed, done.allowed_scores) == ((), ())


def alerts(out: list[Message]) -> list[Alert]:
    return [m for m in out if isinstance(m, Alert)]


def test_an_alert_names_the_missing_step_most_likely_forgotten() -> None:
    # pour_water (5) after get_cup (3) only: boil_water (2) and add_teabag (4) are both missing.
    history = (3, 5)
    graph = weighted_tea_graph()
    [alert] = alerts(CheckerCore(graph).handle(keystep(history, 0)))
    assert alert.missing == (2, 4) and alert.rule == "weighted"
    scores = ProcedureQueries(graph).missing(5, [3])
    assert scores.score(4) > scores.score(2) > 0  # pour_water follows add_teabag more surely
    assert (alert.forgotten, alert.forgotten_name) == (4, "add_teabag")
    assert alert.forgotten_score == pytest.approx(scores.score(4), abs=1e-4)
    # A checker that rebuilds the stream from its history (a restart) names the same step.
    [rebuilt] = alerts(CheckerCore(graph).handle(beat(seq=0, history=(*history, 1))))
    assert (rebuilt.forgotten, rebuilt.forgotten_score, rebuilt.replayed) == (4, alert.forgotten_score, True)
    # Binary rule: each unmet pre-condition scores 1/|unmet|; the tie goes to the first in graph order.
    [binary] = alerts(CheckerCore(tea_graph()).handle(keystep(history, 0)))
    assert (binary.forgotten, binary.forgotten_name, binary.forgotten_score, binary.rule) == (
        2, "boil_water", 0.5, "binary")


def test_a_confirmed_pre_condition_the_probabilistic_checker_doubts_is_named_as_likely_forgotten() -> None:
    # fill_kettle (1) was confirmed, but the detector's done evidence for it is weak: the probabilistic checker judges
    # it skipped when boil_water (2) comes, and the alert must name it, not leave "likely forgotten" empty.
    for graph in (tea_graph(), weighted_tea_graph()):
        core = CheckerCore(graph, checking=CheckerSettings("probabilistic"))
        out = play(core, (3, 1))
        out += core.handle(keystep((3, 1, 2), 2, real=0.99, evidence_steps=(1,), evidence=(0.02,)))
        [alert] = alerts(out)
        assert (alert.step, alert.missing) == (2, (1,))
        assert (alert.forgotten, alert.forgotten_name) == (1, "fill_kettle") and (alert.forgotten_score or 0.0) > 0.5


def test_an_undefined_step_has_no_likely_forgotten_step() -> None:
    graph = graph_with_optional_and_removed_steps()
    [alert] = alerts(CheckerCore(graph).handle(beat(seq=0, history=(7,))))
    assert alert.undefined and alert.missing == () and alert.forgotten is None and alert.forgotten_score is None


@contextmanager
def detector_process(tmp_path: Path, video: str) -> Iterator[tuple[Viewer, subprocess.Popen[str]]]:
    """A real ``stream-detect detector`` process (stream ``term``, stderr piped) on ``video``, sending to a checker
    served in this process, and a viewer of that checker; the process is killed on leaving if still running."""
    graph, detector = default_demo_paths()
    with running_checker(tmp_path) as (ctx, service, _thread):
        viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
        args = ["detector", "--video", video, "--graph", str(graph), "--detector", str(detector),
                "--connect", service.events_endpoint, "--stream-id", "term"]
        proc = subprocess.Popen([*STREAM_DETECT, *args], stderr=subprocess.PIPE, text=True)
        try:
            yield viewer, proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
            viewer.close()


@pytest.mark.usefixtures("demo_cache")
@pytest.mark.slow
def test_sigterm_of_a_detector_reports_the_steps_its_session_never_did(tmp_path: Path) -> None:
    # The person stopped the camera (kill, systemd, docker stop) half-way through: the view must say what was
    # never done, as at the end of a file.
    with detector_process(tmp_path, "demo:correct") as (viewer, proc):
        state = viewer.state
        assert wait_for(lambda: any(e.stream_id == "term" for _, e in state.events), 60.0,
                        lambda: viewer.pump(20))  # the first key-step, a few seconds into the real-time video
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        assert wait_for(lambda: "term" in state.streams and state.streams["term"].ended, 10.0,
                        lambda: viewer.pump(20))
    assert proc.returncode == 143
    assert proc.stderr is not None
    err = proc.stderr.read().splitlines()  # the stream's summary, then the interrupt's line (as documented)
    assert err[-2].startswith("term: ") and " key-step" in err[-2] and err[-1].startswith("interrupted by SIGTERM")
    row = state.streams["term"]
    [(_, report)] = list(state.missing)
    assert report.run == row.run and len(row.done) < len(CORRECT)
    assert report.missing == tuple(s for s in sorted(CORRECT) if s not in row.done)


def test_a_confirmed_step_is_no_longer_shown_as_the_step_under_way() -> None:
    # The heartbeat a detector sends just before a key-step says what is under way once it is confirmed; the key-step
    # itself leaves that as it is (clearing it cleared a step begun again right after a short one: A, b, A).
    core = CheckerCore(weighted_tea_graph())
    assert last_status(core.handle(beat(seq=0, history=(), current=3))).current == 3  # get_cup is being seen
    assert last_status(core.handle(beat(seq=1, history=(), current=1))).current == 1  # then fill_kettle: get_cup ended
    confirmed = last_status(core.handle(keystep((3,), 2)))
    assert confirmed.done == (3,) and confirmed.current == 1  # its segment ended before fill_kettle began
    assert last_status(core.handle(beat(seq=3, history=(3,), current=None))).current is None  # background now


@pytest.mark.usefixtures("demo_cache")
@pytest.mark.slow
def test_sigterm_of_a_detector_during_a_mistaken_step_keeps_its_alert(tmp_path: Path) -> None:
    # Stopped while boil_water (done before fill_kettle) was under way: the detector ended without publishing the
    # step it was seeing, the checker retracted its early alert, and the verdict read "no mistake; never done:
    # fill_kettle, ..." for a session whose one step was the mistake. A stop ends a session as a file's end does.
    received: list[Message] = []
    with detector_process(tmp_path, "demo") as (viewer, proc):
        assert wait_for(lambda: any(isinstance(m, Alert) and m.stream_id == "term" for m in received), 60.0,
                        lambda: received.extend(viewer.pump(20)))  # the early alert on boil_water
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        assert wait_for(lambda: any(isinstance(m, MissingSteps) and m.stream_id == "term" for m in received),
                        10.0, lambda: received.extend(viewer.pump(20)))
    assert proc.returncode == 143
    verdict = session_verdict([m for m in received if isinstance(m, Alert)],
                              [m for m in received if isinstance(m, Retraction)])
    assert [(a.step_name, a.missing_names) for a in verdict.mistakes] == [("boil_water", ("fill_kettle",))]
    assert not verdict.retracted
