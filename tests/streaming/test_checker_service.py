"""The checker: alerts per stream, restart safety, and separation of streams, over real sockets."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest
import zmq

from graphs.checker import PreconditionChecker
from graphs.task_graph import save_graph
from streaming.checker.config import CheckerConfig
from streaming.checker.core import CheckerCore
from streaming.checker.process import CheckerProcess
from streaming.demo.procedure import DEMO_EXECUTIONS
from streaming.detector import EventPublisher
from streaming.messages import (
    MAX_HISTORY,
    Alert,
    CheckerHealth,
    Heartbeat,
    MissingSteps,
    Retraction,
    Status,
    StepEvent,
    run_of,
)
from streaming.transport import Publisher, Receiver, connect, subscribe
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.streaming.helpers import (
    MISTAKE_STEP,
    STREAM_DETECT,
    beat,
    keystep,
    running_checker,
    tea_graph,
    wait_for,
)
from tests.streaming.test_early_alerts import onset

MISTAKE = DEMO_EXECUTIONS["mistake"]
CORRECT = DEMO_EXECUTIONS["correct"]


def expected_alerts(steps: tuple[int, ...]) -> dict[int, int]:
    """index -> step of every alert an uninterrupted checker raises (the graphs checker itself)."""
    checker = PreconditionChecker(tea_graph())
    return {i: s for i, s in enumerate(steps) if checker.observe(s).is_mistake}


def test_core_alerts_the_out_of_order_step_only_and_ignores_duplicates() -> None:
    core = CheckerCore(tea_graph(), clock=lambda: 100.0)
    out = []
    for i in range(len(MISTAKE)):
        event = keystep(MISTAKE[: i + 1], i)
        out += core.handle(event)
        out += core.handle(event)  # a duplicate changes nothing
    alerts = [m for m in out if isinstance(m, Alert)]
    assert [(a.step, a.index, a.alert_id) for a in alerts] == [(MISTAKE_STEP, 1, "cam0#1")]
    assert alerts[0].missing_names == ("fill_kettle",) and not alerts[0].replayed
    forwarded = [m for m in out if isinstance(m, StepEvent)]
    assert [m.step for m in forwarded] == list(MISTAKE)


def test_core_recovers_lost_events_from_the_next_messages_history() -> None:
    core = CheckerCore(tea_graph())
    first = keystep(MISTAKE[:1], 0)
    last = keystep(MISTAKE[:4], 5, timestamp=2.0)
    core.handle(first)
    out = core.handle(last)  # seq 1..4 never arrived
    status = [m for m in out if isinstance(m, Status)][-1]
    assert status.gaps == 4 and status.done == MISTAKE[:4]
    assert [m.step for m in out if isinstance(m, Alert)] == [MISTAKE_STEP]


def test_new_session_on_the_same_stream_starts_over_once_the_old_one_ended_or_was_lost() -> None:
    now = [0.0]
    core = CheckerCore(tea_graph(), monotonic=lambda: now[0])
    core.handle(keystep((1,), 0, session="a"))
    core.handle(beat(seq=1, session="a", history=(1,), ended=True))  # a detector that ends says so
    out = core.handle(keystep((3,), 0, session="b"))
    assert [m for m in out if isinstance(m, Status)][-1].done == (3,)
    now[0] = 6.0  # b killed: silent past the 5 s timeout, so a restarted detector takes the stream over
    out = core.handle(keystep((1,), 0, session="c"))
    assert [m for m in out if isinstance(m, Status)][-1].done == (1,)


def test_a_second_live_session_on_one_stream_id_is_refused_not_swapped_in() -> None:
    # Two detectors given one --stream-id took the stream from each other at every message: each switch ended the
    # other's session with a false "never done" report (20 of them in one run of two demos).
    lines: list[str] = []
    core = CheckerCore(tea_graph(), log=lambda line, **_: lines.append(line))
    first = core.serve([keystep((1,), 0, session="a")])
    out = core.serve([keystep((3,), 0, session="b"), beat(seq=1, session="a", history=(1, 3))])
    assert not [m for m in out if isinstance(m, MissingSteps)]
    assert [m for m in out if isinstance(m, Status)][-1].done == (1, 3) and core.counts["stream_taken"] == 1
    assert lines[0] == f"checker: cam0 new (run {run_of('a')})"  # the refused newcomer changed nothing else
    assert lines[1:] == ["checker: refused (stream_taken, 1 so far): cam0: another detector session is live on this "
                         "stream id (a second detector given the same --stream-id?); refused until that one ends or "
                         "is silent for 5 s"]
    assert [m for m in first if isinstance(m, Status)][-1].run == [m for m in out if isinstance(m, Status)][-1].run
    health = next(m for m in core.periodic(0.0) if isinstance(m, CheckerHealth))
    assert health.stream_taken == 1


def test_a_refused_message_of_another_session_leaves_the_stream_s_hop_and_the_histogram_alone() -> None:
    # An intruder's one heartbeat stamped at time 0 set the live stream's hop_ms to an hour (3600000) and fed the
    # metrics' hop histogram, though it was refused.
    core = CheckerCore(tea_graph(), clock=lambda: 10.0)
    hops: list[float] = []
    core.observe = lambda stage, seconds: hops.append(seconds)
    core.serve([beat(timestamp=9.99, session="a")])
    assert core.streams["cam0"].latency["hop_ms"] == 10.0 and hops == [pytest.approx(0.01)]
    out = core.serve([beat(seq=1, timestamp=0.0, session="intruder")])
    assert core.counts["stream_taken"] == 1 and not [m for m in out if isinstance(m, Status)]
    assert core.streams["cam0"].latency["hop_ms"] == 10.0 and len(hops) == 1
    # Nor does one ignored rather than refused: another session's onset, a replayed copy of the stream's own.
    core.serve([onset((), 3, 5, session="intruder", timestamp=0.0)])
    core.serve([beat(seq=0, timestamp=0.0, session="a")])
    assert core.streams["cam0"].latency["hop_ms"] == 10.0 and len(hops) == 1
    core.serve([beat(seq=1, timestamp=9.98, session="a")])  # the stream's own next message is measured
    assert core.streams["cam0"].latency["hop_ms"] == 20.0 and len(hops) == 2


def test_a_detector_that_names_steps_otherwise_than_the_graph_is_said_once_per_session() -> None:
    # A detector of another procedure with the same step ids: its boil_water was checked as the graph's step 2 and
    # alerted in the graph's words; the checker, where alerts are made, said nothing (the view and dashboard did).
    lines: list[str] = []
    core = CheckerCore(tea_graph(), log=lambda line, **_: lines.append(line))
    core.serve([keystep((1,), 0, step_name="unfold_tent"), keystep((1, 3), 1, step_name="insert_pole")])
    said = [line for line in lines if "misnamed" in line]
    assert said == ["checker: cam0 misnamed (its detector calls step 1 'unfold_tent', the task graph 'fill_kettle': a "
                    "detector of another procedure? its steps are checked as the graph's)"]
    assert [m for m in core.serve([beat(seq=2, history=(1, 3))]) if isinstance(m, Status)][-1].done == (1, 3)
    # The graph's own names: nothing said; a new session is told again.
    core.serve([keystep((3,), 0, session="b", stream_id="cam1")])
    core.serve([keystep((1,), 0, session="c", step_name="unfold_tent", stream_id="cam2")])
    assert [line.split(" misnamed")[0] for line in lines if "misnamed" in line] == ["checker: cam0", "checker: cam2"]


def test_a_detector_past_the_history_cap_goes_on_in_a_new_session_at_once() -> None:
    core = CheckerCore(tea_graph())
    core.serve([beat(seq=0, session="a", history=(1, 3) * (MAX_HISTORY // 2))])  # a full session
    out = core.serve([keystep((1,), 0, session="b")])  # its successor, while the full one is still live
    assert [m for m in out if isinstance(m, Status)][-1].done == (1,) and core.counts["stream_taken"] == 0


def test_history_that_disagrees_within_a_session_starts_the_stream_over() -> None:
    core = CheckerCore(tea_graph())
    [alert] = [m for m in core.handle(keystep(MISTAKE[:2], 0)) if isinstance(m, Alert)]  # boil_water at 1
    out = core.handle(keystep(CORRECT[:3], 1))
    status = [m for m in out if isinstance(m, Status)][-1]
    assert not [m for m in out if isinstance(m, Alert)]
    assert status.done == CORRECT[:3] and status.alerts == 0  # as a fresh session would report
    assert [m for m in core.periodic(0.0) if isinstance(m, Alert)] == []  # the old stream's alert is not re-sent
    # The run is the same, so viewers kept that alert standing for ever: it is withdrawn, naming what is there now.
    [withdrawn] = [m for m in out if isinstance(m, Retraction)]
    assert (withdrawn.alert_id, withdrawn.run, withdrawn.step, withdrawn.confirmed_name) == (
        alert.alert_id, alert.run, alert.step, "fill_kettle")
    assert out.index(withdrawn) < out.index(status) and withdrawn.seq < status.seq


def test_two_streams_into_one_checker_stay_separate(tmp_path: Path) -> None:
    with running_checker(tmp_path) as (ctx, service, _thread):
        viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
        sock = connect(ctx, zmq.PUB, service.events_endpoint)
        a = EventPublisher(Publisher(sock), "kitchen")
        b = EventPublisher(Publisher(sock), "garage")
        assert wait_for(
            lambda: {"kitchen", "garage"} <= set(viewer.state.streams),
            10.0,
            lambda: (a.heartbeat(None, 0, 0, 0.0), b.heartbeat(None, 0, 0, 0.0), viewer.pump(20)),
        )
        for sa, sb in zip(MISTAKE, CORRECT, strict=True):  # interleaved on one socket
            a.keystep(sa, "x", 0.0, 1.0, 0.9)
            b.keystep(sb, "x", 0.0, 1.0, 0.9)
        a.heartbeat(None, 10, 0, 30.0, ended=True)
        b.heartbeat(None, 10, 0, 30.0, ended=True)
        state = viewer.state
        assert wait_for(
            lambda: all(s.ended for s in state.streams.values()) and len(state.streams) == 2,
            10.0,
            lambda: viewer.pump(20),
        )
        assert [(al.stream_id, al.step) for _, al in state.alerts] == [("kitchen", MISTAKE_STEP)]
        assert state.streams["kitchen"].done == MISTAKE and state.streams["garage"].done == CORRECT
        assert state.streams["garage"].alerts == 0 and state.streams["kitchen"].alerts == 1
        viewer.close()
        sock.close()


def test_checker_killed_and_restarted_mid_stream_loses_nothing(tmp_path: Path) -> None:
    graph_path = tmp_path / "tea.json"
    save_graph(tea_graph(), graph_path)
    config = CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out")
    # Before the kill: a mistake (5); while the checker is down: another one (4) and a correct step;
    # after the restart: two correct steps.
    steps = (1, 5, 4, 6, 3, 2)
    ctx = zmq.Context()
    checker = CheckerProcess(str(graph_path), config)
    try:
        viewer = Viewer(ctx, checker.alerts_endpoint, ViewState(), jsonl=False)
        sock = connect(ctx, zmq.PUB, checker.events_endpoint)
        events = EventPublisher(Publisher(sock), "cam0")
        state = viewer.state
        assert wait_for(
            lambda: "cam0" in state.streams, 10.0, lambda: (events.heartbeat(None, 0, 0, 0), viewer.pump(20))
        )
        for step in steps[:2]:
            events.keystep(step, "x", 0.0, 1.0, 0.9)
        assert wait_for(lambda: len(state.streams["cam0"].done) == 2, 10.0, lambda: viewer.pump(20))
        assert len(state.alerts) == 1

        assert checker.process.pid is not None  # CheckerProcess starts its process before it returns
        os.kill(checker.process.pid, signal.SIGKILL)  # no goodbye, no flush
        checker.process.join(5)
        for step in steps[2:4]:  # sent while nobody listens: lost on the wire
            events.keystep(step, "x", 0.0, 1.0, 0.9)

        checker = CheckerProcess(str(graph_path), config)
        for step in steps[4:]:
            events.keystep(step, "x", 0.0, 1.0, 0.9)
        assert wait_for(
            lambda: state.streams["cam0"].done == steps and len(state.alerts) == 2,
            15.0,
            lambda: (events.heartbeat(None, 5, 0, 30.0), viewer.pump(20)),
        )
        uninterrupted = expected_alerts(steps)
        assert {a.index: a.step for _, a in state.alerts} == uninterrupted
        assert len(uninterrupted) == 2 and len(state.alerts) == 2  # the replayed alert of step 5 shown once
        assert state.streams["cam0"].alerts == 2
        viewer.close()
        sock.close()
    finally:
        checker.stop()
        ctx.destroy(linger=0)


def test_periodic_resend_repeats_recent_alerts_for_late_viewers() -> None:
    now = [100.0]
    core = CheckerCore(tea_graph(), clock=lambda: now[0])
    core.handle(keystep(MISTAKE[:1], 0))
    live = [m for m in core.handle(keystep(MISTAKE[:2], 1)) if isinstance(m, Alert)]
    assert [m for m in core.periodic(0.5) if not isinstance(m, CheckerHealth)] == []  # nothing due yet
    now[0] += 1.0
    again = [m for m in core.periodic(0.5) if not isinstance(m, CheckerHealth)]
    resent = [m for m in again if isinstance(m, Alert)]
    assert [a.alert_id for a in resent] == [a.alert_id for a in live] and all(a.replayed for a in resent)
    assert isinstance(again[-1], Status) and again[-1].alerts == 1


def test_busy_stream_still_resends_its_alerts_every_period() -> None:
    # A stream heartbeating faster than the period gets a status on every message; the snapshot that
    # lets a slow-joining viewer catch up on a missed alert must still go out once per period.
    now = [100.0]
    core = CheckerCore(tea_graph(), clock=lambda: now[0])
    core.handle(keystep(MISTAKE[:1], 0))
    core.handle(keystep(MISTAKE[:2], 1))
    resent: list[Alert] = []
    for seq in range(2, 18):  # 2 s of heartbeats every 0.125 s (exact in binary)
        now[0] += 0.125
        core.handle(Heartbeat("cam0", seq, now[0], "s", MISTAKE[:2], None, seq, 0, 10.0, False))
        resent += [m for m in core.periodic(0.5) if isinstance(m, Alert)]
    assert [a.alert_id for a in resent] == ["cam0#1"] * 4 and all(a.replayed for a in resent)


def test_end_of_run_summary_counts_refused_streams_and_malformed_messages(tmp_path: Path) -> None:
    # A detector turned away (stream limit) or speaking garbage gets nothing back on the wire; the person who
    # started the checker learns it from this line.
    with running_checker(tmp_path, max_streams=1) as (ctx, service, _thread):
        sock = connect(ctx, zmq.PUB, service.events_endpoint)
        kitchen = EventPublisher(Publisher(sock), "kitchen")
        garage = EventPublisher(Publisher(sock), "garage")
        assert wait_for(lambda: "kitchen" in service.core.streams, 10.0, lambda: kitchen.heartbeat(None, 0, 0, 0.0))
        assert wait_for(
            lambda: service.core.refused > 0 and service.receiver.stats.malformed > 0,
            10.0,
            lambda: (garage.heartbeat(None, 0, 0, 0.0), sock.send_multipart([b"heartbeat/garage", b"\xff"])),
        )
        sock.close()
    line = service.summary()
    assert line.startswith("checker: ") and "\n" not in line
    assert "1 stream tracked" in line and "refused (over the 1-stream limit)" in line
    assert "malformed dropped (last: " in line


def test_checker_survives_hostile_payloads_and_keeps_serving(tmp_path: Path) -> None:
    # Deep JSON nesting and an integer too large for a float field used to escape `decode` and end the loop.
    with running_checker(tmp_path) as (ctx, service, thread):
        sock = connect(ctx, zmq.PUB, service.events_endpoint)
        kitchen = EventPublisher(Publisher(sock), "kitchen")
        assert wait_for(lambda: "kitchen" in service.core.streams, 10.0, lambda: kitchen.heartbeat(None, 0, 0, 0.0))
        huge = (
            b'{"version":1,"kind":"heartbeat","stream_id":"garage","seq":0,"timestamp":1' + b"0" * 400
            + b',"session":"s","history":[],"current":null,"frames":0,"dropped":0,"fps":0,"ended":false}'
        )
        sock.send_multipart([b"heartbeat/garage", b"[" * 60_000])
        sock.send_multipart([b"heartbeat/garage", huge])
        assert wait_for(lambda: service.receiver.stats.malformed >= 2 or not thread.is_alive(), 10.0)
        garage = EventPublisher(Publisher(sock), "garage")
        assert wait_for(lambda: "garage" in service.core.streams, 10.0, lambda: garage.heartbeat(None, 0, 0, 0.0))
        assert thread.is_alive() and service.receiver.stats.malformed == 2
        sock.close()


def test_a_new_streams_first_status_carries_the_hop_of_the_message_that_started_it() -> None:
    # The hop was stored on the stream's state before the message made that state: a stream's first status, and
    # every re-send of it until a second message came, said 0 ms.
    now = [1000.25]
    core = CheckerCore(tea_graph(), clock=lambda: now[0])
    out = core.serve([Heartbeat("kitchen", 0, 1000.0, "a", (), None, 10, 0, 30.0, False)])
    (first,) = [m for m in out if isinstance(m, Status)]
    assert first.hop_ms == 250.0
    core.serve([Heartbeat("kitchen", 1, 1000.25, "a", (), None, 10, 0, 30.0, True)])  # it ends
    now[0] = 1000.75
    out = core.serve([Heartbeat("kitchen", 1, 1000.5, "b", (), None, 0, 0, 30.0, False)])  # a new session
    assert [m.hop_ms for m in out if isinstance(m, Status)] == [250.0]


def test_an_ended_stream_makes_room_for_a_new_one_at_the_stream_limit() -> None:
    # Ended streams were kept for good, so a long-running checker that had seen max_streams detector runs
    # turned every later one away.
    core = CheckerCore(tea_graph(), max_streams=1)
    core.serve([Heartbeat("kitchen", 0, 1.0, "a", (1,), None, 10, 0, 30.0, False)])
    assert core.serve([Heartbeat("garage", 0, 1.0, "b", (), None, 0, 0, 0.0, False)]) == []  # kitchen still runs
    core.serve([Heartbeat("kitchen", 1, 2.0, "a", (1,), None, 20, 0, 30.0, True)])
    out = core.serve([Heartbeat("garage", 1, 3.0, "b", (), None, 0, 0, 0.0, False)])
    assert [m.stream_id for m in out] == ["garage"] and list(core.streams) == ["garage"]
    assert core.refused == 1 and core.counts["evicted"] == 1


def test_a_new_subscriber_is_greeted_at_once_with_the_checkers_health(tmp_path: Path) -> None:
    # Without the greeting, a viewer that joins after the first health message waits a whole status period (here an
    # hour) to learn that its subscription is in place.
    with running_checker(tmp_path, status_period_s=3600.0) as (ctx, service, _thread):
        first, second = (Receiver(subscribe(connect(ctx, zmq.SUB, service.alerts_endpoint), (b"checker/",)))
                         for _ in range(2))
        got: list[object] = []
        assert wait_for(lambda: any(isinstance(m, CheckerHealth) for m in got), 10.0,
                        lambda: got.extend(first.poll(20)))
        late = Receiver(subscribe(connect(ctx, zmq.SUB, service.alerts_endpoint), (b"checker/",)))
        got.clear()
        assert wait_for(lambda: any(isinstance(m, CheckerHealth) for m in got), 10.0,
                        lambda: got.extend(late.poll(20)))
        for receiver in (first, second, late):
            receiver.sock.close()


def test_a_detector_that_waited_for_its_checker_loses_not_even_its_first_message(tmp_path: Path) -> None:
    with running_checker(tmp_path) as (ctx, service, _thread):
        sock = connect(ctx, zmq.PUB, service.events_endpoint, wait_s=10.0)  # answered, and subscribed
        assert sock.type == zmq.XPUB
        Publisher(sock).send(keystep((1,), 0))  # at once: a PUB that did not wait drops it
        assert wait_for(lambda: "cam0" in service.core.streams, 10.0)
        sock.close()


def test_the_checker_command_logs_a_line_when_a_stream_comes_is_lost_comes_back_and_ends(tmp_path: Path) -> None:
    # A detector killed with -9 left the checker's console empty while its streams went lost: only the view, the
    # dashboard and the metrics said so (review 16).
    args = ["checker", "--demo", "--bind", f"ipc://{tmp_path}/in", "--publish", f"ipc://{tmp_path}/out",
            "--stream-timeout", "1"]
    proc = subprocess.Popen([*STREAM_DETECT, *args], stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    stderr = proc.stderr
    assert stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(stderr.readline, "")), daemon=True)
    reader.start()
    ctx = zmq.Context()
    try:
        assert wait_for(lambda: bool(lines), 30.0) and lines[0].startswith("checker: detectors connect to ")
        camera = EventPublisher(Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in")), "kitchen")

        def logged(change: str) -> bool:
            return any(line.startswith(f"checker: kitchen {change} ") for line in lines)

        def alive() -> None:
            camera.heartbeat(None, 10, 0, 5.0)

        assert wait_for(lambda: logged("new"), 10.0, alive)  # heartbeats until the subscription is through
        assert wait_for(lambda: logged("lost"), 10.0)  # then silence, past the 1 s stream timeout
        assert wait_for(lambda: logged("back"), 10.0, alive)
        camera.heartbeat(None, 20, 0, 5.0, ended=True)
        assert wait_for(lambda: logged("ended"), 10.0)
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        reader.join(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        ctx.destroy(linger=0)
    new, lost, back, ended = [line.rstrip("\n") for line in lines if line.startswith("checker: kitchen ")]
    assert new == f"checker: kitchen new (run {run_of(camera.session)})"
    assert lost == "checker: kitchen lost (silent 1 s)"
    assert re.fullmatch(r"checker: kitchen back \(silent \d+ s\)", back), back
    assert ended.startswith("checker: kitchen ended (0 key-steps, 0 alerts, ") and ended.endswith(" never done)")


def test_what_the_checker_set_up_is_out_of_the_collectors_way_while_it_serves_and_only_then(tmp_path: Path) -> None:
    # A full collection walked every module, the graph and the sockets: 22-38 ms once every few seconds under 100
    # streams, every key-step meanwhile waiting (benchmarks/checker_load.py). Frozen while serving; a checker run
    # inside another program (a test, the all-in-one) leaves that program's heap as it found it.
    import gc

    from streaming.checker.service import run_checker

    graph = tmp_path / "tea.json"
    save_graph(tea_graph(), graph)
    before = gc.get_freeze_count()
    frozen: list[int] = []
    run_checker(str(graph), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"),
                ready=lambda *_: frozen.append(gc.get_freeze_count()), until=lambda _core: True)  # fmt: skip
    assert frozen and frozen[0] > before
    assert gc.get_freeze_count() == before


def test_a_checker_that_stops_leaves_another_checker_and_its_host_frozen(tmp_path: Path) -> None:
    # gc.freeze is one switch for the whole process: the first of two checkers in one process to stop unfroze the
    # other's set-up (its full collections back, 14-38 ms each), and a checker stopping inside a program that had
    # frozen its own heap (gc.freeze before fork, as the gc docs advise) unfroze that program's too.
    import gc

    from streaming.checker.service import run_checker

    graph = tmp_path / "tea.json"
    save_graph(tea_graph(), graph)
    second_ready, first_stop, second_stop = threading.Event(), threading.Event(), threading.Event()
    second = threading.Thread(target=run_checker, args=(str(graph), CheckerConfig(f"ipc://{tmp_path}/in2",
                                                                                f"ipc://{tmp_path}/out2")),
                              kwargs={"ready": lambda *_: second_ready.set(), "stop": second_stop})
    second.start()
    try:
        assert second_ready.wait(30)
        first_stop.set()
        run_checker(str(graph), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"), stop=first_stop)
        assert gc.get_freeze_count() > 0  # the second one serves on, frozen
    finally:
        second_stop.set()
        second.join(30)
    assert gc.get_freeze_count() == 0
    gc.freeze()  # the host's own
    try:
        host = gc.get_freeze_count()
        run_checker(str(graph), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"),
                    until=lambda _core: True)
        assert gc.get_freeze_count() >= host
    finally:
        gc.unfreeze()
