"""The checker under hostile or excessive traffic: refusals counted by name, bounded work, stream life cycles."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import zmq

from graphs.checker_settings import CheckerSettings
from graphs.limits import MAX_NAME, MAX_STEP_ID, MAX_STEPS
from graphs.task_graph import TaskGraph, save_graph
from streaming.checker.budget import CHEAP_ITEMS, REPLAY_BUDGET, STREAM_BUDGET
from streaming.checker.changes import CHANGE_LINES
from streaming.checker.config import CheckerConfig
from streaming.checker.core import CheckerCore
from streaming.checker.process import CheckerProcess
from streaming.checker.refusals import LOG_EVERY_S
from streaming.checker.schedule import SNAPSHOT_BUDGET
from streaming.checker.service import CheckerService
from streaming.checker.streams import FORGET_AFTER, RESEND_ALERTS
from streaming.demo.procedure import DEMO_EXECUTIONS
from streaming.detector import EventPublisher
from streaming.messages import (
    MAX_HISTORY,
    MAX_MESSAGE_BYTES,
    Alert,
    CheckerHealth,
    Message,
    Status,
    StepEvent,
    encode,
    run_of,
)
from streaming.transport import SUBSCRIPTION_BYTES, Publisher, Receiver, ReceiveStats, connect, subscribe
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.streaming.helpers import MISTAKE_STEP, beat, keystep, running_checker, tea_graph, wait_for

MISTAKE = DEMO_EXECUTIONS["mistake"]




class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def statuses(out: list[Message]) -> list[Status]:
    return [m for m in out if isinstance(m, Status)]


def test_a_step_outside_the_graph_is_refused_counted_and_the_next_message_served() -> None:
    core = CheckerCore(tea_graph())
    assert core.serve([beat(current=4242)]) == []  # a heartbeat seeing a step the graph lacks: refused, nothing kept
    assert core.counts["unknown_step"] == 1 and "cam0" not in core.streams
    assert "4242 is not in the task graph" in core.last_refusal
    out = core.serve([keystep(MISTAKE[:2], 1)])
    assert [a.step for a in out if isinstance(a, Alert)] == [MISTAKE_STEP]


def test_one_keystep_outside_the_graph_refuses_that_step_never_the_session() -> None:
    # 99 is not a step of the tea graph. Every later message of the session carries it in its history: before, each
    # one was refused too, and the stream fell silent until its detector started a new session.
    core = CheckerCore(tea_graph())
    core.serve([keystep((3,), 0)])
    out = core.serve([replace(keystep((3, 1), 1), step=99, history=(3, 99), step_name="wrong graph")])
    assert core.counts["unknown_step"] == 1 and not [m for m in out if isinstance(m, StepEvent | Alert)]
    for seq in (2, 3):  # its heartbeats are served, and the unknown step is not counted again
        out = core.serve([beat(seq=seq, history=(3, 99), frames=seq)])
        assert statuses(out)[-1].frames == seq and statuses(out)[-1].done == (3,)
    assert core.counts["unknown_step"] == 1
    out = core.serve([keystep((3, 99, 2), 4)])  # boil_water before fill_kettle: still caught, at its own index
    alerts = [m for m in out if isinstance(m, Alert)]
    assert [(a.step, a.index, a.alert_id, a.missing) for a in alerts] == [(2, 2, "cam0#2", (1,))]
    assert [m.index for m in out if isinstance(m, StepEvent)] == [2]
    out = core.serve([keystep((3, 99, 2, 1), 5)])
    assert statuses(out)[-1].done == (3, 2, 1) and statuses(out)[-1].alerts == 1
    # A checker that starts on such a history (restarted) skips the step the same way and counts it once.
    fresh = CheckerCore(tea_graph())
    out = fresh.serve([beat(seq=9, history=(3, 99, 2, 1))])
    assert fresh.counts["unknown_step"] == 1 and statuses(out)[-1].done == (3, 2, 1)
    assert [(a.step, a.alert_id) for a in out if isinstance(a, Alert)] == [(2, "cam0#2")]


def test_a_replayed_history_sends_one_status_and_only_the_newest_rebuilt_alerts() -> None:
    # A new session with a 4096-step history of mistakes sent 4097 messages (58 ms of CPU each). The binary checker
    # alerts on every one of them (the probabilistic one once: one omission, one alert).
    core = CheckerCore(tea_graph(), checking=CheckerSettings("binary"))
    history = (MISTAKE_STEP,) * MAX_HISTORY  # boil_water every time, the kettle never filled: all mistakes
    out = core.handle(beat(history=history))
    alerts = [m for m in out if isinstance(m, Alert)]
    assert len(alerts) == RESEND_ALERTS and all(a.replayed for a in alerts)
    assert [a.index for a in alerts] == list(range(MAX_HISTORY - RESEND_ALERTS, MAX_HISTORY))
    assert len(statuses(out)) == 1 and statuses(out)[0].alerts == MAX_HISTORY  # every mistake counted
    # A history that disagrees starts over: a replay again, and its live step's alert is never among those dropped.
    live = [m for m in core.handle(keystep((*history[:-1], 5), 1)) if isinstance(m, Alert)]  # pour_water: a mistake
    assert len(live) == RESEND_ALERTS + 1 and [a.index for a in live if not a.replayed] == [MAX_HISTORY - 1]


def test_one_stream_gets_a_bounded_share_of_a_poll() -> None:
    core = CheckerCore(tea_graph())
    flood = [beat("flood", seq) for seq in range(100)]
    out = core.serve([*flood, keystep(MISTAKE[:2], 0, stream_id="victim")])
    assert core.counts["over_budget"] == 100 - STREAM_BUDGET
    assert len(statuses([m for m in out if m.stream_id == "flood"])) == STREAM_BUDGET
    assert [a.stream_id for a in out if isinstance(a, Alert)] == ["victim"]


def test_replays_share_a_budget_and_never_hold_back_a_live_stream() -> None:
    core = CheckerCore(tea_graph(), monotonic=Clock())
    core.serve([keystep(MISTAKE[:1], 0, stream_id="victim")])
    history = (1, 3) * (MAX_HISTORY // 2)  # no mistake in it: only the victim can raise an alert
    replays = [beat(f"replay{k}", 0, history) for k in range(6)]
    out = core.serve([*replays[:3], keystep(MISTAKE[:2], 1, stream_id="victim"), *replays[3:]])
    served = {m.stream_id for m in statuses(out)}
    alerts = [a for a in out if isinstance(a, Alert)]
    assert [(a.stream_id, a.replayed) for a in alerts] == [("victim", False)] and out[0] is alerts[0]
    assert len(served - {"victim"}) == REPLAY_BUDGET // MAX_HISTORY
    assert core.counts["over_budget"] == 6 - REPLAY_BUDGET // MAX_HISTORY
    # Next poll: the streams that waited are served before a newcomer (their detectors send the history again).
    waiting = [r for r in replays if r.stream_id not in served]
    newcomer = beat("newcomer", 0, history)
    out = core.serve([newcomer, *(beat(r.stream_id, 1, history) for r in waiting)])
    assert {m.stream_id for m in statuses(out)} == {r.stream_id for r in waiting[: REPLAY_BUDGET // MAX_HISTORY]}
    assert len(history) > CHEAP_ITEMS


def test_a_silent_stream_is_lost_then_freed_and_comes_back_when_it_speaks() -> None:
    clock = Clock()
    core = CheckerCore(tea_graph(), stream_timeout_s=5.0, monotonic=clock)
    core.serve([beat("kitchen", 0, (1,))])
    clock.now += 4.0
    assert not any(s.lost for s in statuses(core.periodic(0.5)))
    clock.now += 2.0  # 6 s without a heartbeat: a detector killed with kill -9 never says it ended
    lost = [s for s in statuses(core.periodic(0.5)) if s.lost]
    assert lost and lost[0].stream_id == "kitchen" and core.streams["kitchen"].lost
    back = statuses(core.serve([beat("kitchen", 1, (1, 3))]))
    assert not back[-1].lost and back[-1].done == (1, 3)
    clock.now += 5.5
    core.periodic(0.5)
    clock.now += FORGET_AFTER * 5.0
    core.periodic(0.5)
    assert "kitchen" not in core.streams  # freed: its slot is free for good


def test_a_full_checker_evicts_the_longest_idle_stream_never_a_live_one() -> None:
    clock = Clock()
    core = CheckerCore(tea_graph(), max_streams=3, monotonic=clock)
    core.serve([beat("a"), beat("b"), beat("c")])
    assert core.serve([beat("d")]) == [] and core.counts["stream_limit"] == 1  # three live streams: refused
    core.serve([beat("b", 1, ended=True)])
    clock.now += 1.0
    core.serve([beat("c", 1, ended=True)])
    core.serve([beat("d")])
    assert set(core.streams) == {"a", "c", "d"} and core.counts["evicted"] == 1  # b waited longest
    clock.now += 6.0  # a, c and d all silent: a and d are lost now, c has ended
    core.periodic(0.5)
    core.serve([beat("e")])
    assert set(core.streams) == {"c", "d", "e"}  # a was heard from first: it had waited longest
    health = core.health(ReceiveStats(received=9, malformed=2))
    counts = (health.stream_limit, health.evicted, health.lost_streams, health.received, health.malformed)
    assert counts == (1, 2, 1, 9, 2)


def test_a_jump_in_seq_does_not_freeze_the_stream() -> None:
    # A peer sending seq 2^50 on a live stream made the checker ignore every later (smaller) seq of the detector.
    core = CheckerCore(tea_graph())
    core.serve([keystep(MISTAKE[:1], 0)])
    core.serve([beat(seq=2**50, history=MISTAKE[:1])])
    out = core.serve([keystep(MISTAKE[:2], 1)])
    assert [a.step for a in out if isinstance(a, Alert)] == [MISTAKE_STEP]
    assert core.serve([keystep(MISTAKE[:2], 1)]) == []  # a real duplicate is still ignored
    assert statuses(core.serve([keystep(MISTAKE[:3], 2)]))[-1].gaps == 0


def wide_graph(names: list[str]) -> TaskGraph:
    """Step 0 requires every other step; names as given (step k is named names[k])."""
    n = len(names)
    adjacency = np.zeros((n + 2, n + 2), dtype=bool)
    adjacency[1, 2 : n + 1] = True  # step 0 needs steps 1..n-1
    adjacency[2 : n + 1, 0] = True  # which need START
    adjacency[n + 1, 1] = True  # END needs step 0
    return TaskGraph(tuple(range(MAX_STEP_ID - n + 1, MAX_STEP_ID + 1)), tuple(names), adjacency)


def test_every_alert_and_status_fits_one_message_by_construction() -> None:
    # A keystep whose alert re-encoded to more than 64 KiB raised in the checker's loop. Worst case: the largest
    # graph, the largest ids, and names as long as allowed in characters that JSON writes as 12-byte escapes.
    # names differ in their first character (CJK Extension B, also a 12-byte escape), as a graph's names must
    names = [chr(0x20000 + k) + "\U0001f375" * (MAX_NAME - 1) for k in range(MAX_STEPS)]
    graph = wide_graph(names)
    core = CheckerCore(graph)
    first = graph.step_ids[0]
    out = core.handle(beat(history=(first,), current=first))
    alert = next(m for m in out if isinstance(m, Alert))
    assert len(alert.missing) == MAX_STEPS - 1 and 0 < len(alert.missing_names) < len(alert.missing)
    assert all(len(encode(m)[1]) <= MAX_MESSAGE_BYTES for m in out)
    every = core.handle(beat(seq=1, history=(first, *graph.step_ids[1:])))  # done lists them all
    assert statuses(every)[-1].done == graph.step_ids
    assert all(len(encode(m)[1]) <= MAX_MESSAGE_BYTES for m in every)


def test_viewers_never_get_the_detector_session_token() -> None:
    core = CheckerCore(tea_graph(), clock=lambda: 5.0)
    token = "secret-token-1234"
    out = core.serve([keystep(MISTAKE[:2], 0, session=token), beat(seq=1, session=token, history=MISTAKE[:2])])
    out += core.periodic(0.0)
    assert {type(m) for m in out} == {Alert, StepEvent, Status, CheckerHealth}
    assert all(token not in encode(m)[1].decode() for m in out)
    assert {m.run for m in out if isinstance(m, Alert | StepEvent | Status)} == {run_of(token)}


def test_refusals_are_logged_once_per_reason_then_rate_limited() -> None:
    lines: list[str] = []
    clock = Clock()
    core = CheckerCore(tea_graph(), monotonic=clock, log=lambda line, **_: lines.append(line))
    for seq in range(3):
        core.serve([beat(seq=seq, history=(77,) * (seq + 1))])
    clock.now += 11.0
    core.serve([beat(seq=3, history=(77, 77, 77, 78))])
    refused = [line for line in lines if line.startswith("checker: refused")]  # not the stream's own changes
    assert len(refused) == 2 and "unknown_step, 1 so far" in refused[0] and "4 so far" in refused[1]


def test_a_burst_of_refusals_is_said_in_full_once_its_window_is_over() -> None:
    # A detector restarted on a stream its killed predecessor still held: its first twelve messages were refused as
    # stream_taken within a second (a site run), and the log said "1 so far" and nothing more until the checker
    # stopped, while the dashboard's footer counted 12: a refusal after the first line was said only if another came
    # 10 s later.
    lines: list[str] = []
    clock = Clock()
    core = CheckerCore(tea_graph(), monotonic=clock, log=lambda line, **_: lines.append(line))
    core.serve([keystep((1,), 0, session="a")])
    for seq in range(12):
        core.serve([beat(seq=seq, session="b")])
    core.periodic(0.5)  # within the window: nothing more yet
    clock.now += LOG_EVERY_S
    core.periodic(0.5)
    core.periodic(0.5)  # said once
    refused = [line for line in lines if line.startswith("checker: refused")]
    assert len(refused) == 2, refused
    assert "(stream_taken, 1 so far)" in refused[0] and "(stream_taken, 12 so far)" in refused[1], refused


def test_a_session_s_end_line_counts_its_key_steps_not_in_the_graph() -> None:
    # A detector of another procedure: its key-steps are refused one by one, counted with every stream's, and the
    # session's end line spoke only of those applied, as if nothing were wrong.
    lines: list[str] = []
    core = CheckerCore(tea_graph(), monotonic=Clock(), log=lambda line, **_: lines.append(line))
    core.serve([beat(seq=0, history=(1, 77))])
    core.serve([beat(seq=1, history=(1, 77, 78, 3), ended=True)])
    assert lines[-1] == ("checker: cam0 ended (4 key-steps (2 not in the task graph), 0 alerts, 4 required steps "
                         "never done)")


def test_each_stream_state_change_is_one_log_line() -> None:
    # The checker's log had refusals and its summary only: a stream that came, ended or was lost (a detector killed)
    # showed in the view and the dashboard, never on the checker's console or in its log collector.
    lines: list[str] = []
    clock = Clock()
    core = CheckerCore(tea_graph(), monotonic=clock, log=lambda line, **_: lines.append(line), max_streams=2)
    core.serve([keystep((1,), 0, session="a")])
    clock.now += 6.0
    core.periodic(0.5)  # silent past the 5 s timeout
    core.serve([beat(seq=1, session="a", history=(1,))])
    core.serve([beat(seq=2, session="a", history=(1, 3), ended=True)])
    core.serve([beat(seq=3, session="a", history=(1, 3), ended=True)])  # the same end again: no second line
    core.serve([keystep((1,), 0, session="b")])  # a detector started again on the stream
    clock.now += 1.0
    core.serve([beat("cam1", 0, session="c", history=(3,), ended=True)])
    clock.now += 6.0
    core.periodic(0.5)
    core.serve([beat("cam2", 0, session="d")])  # both slots are taken: the idle stream heard longest ago goes
    clock.now += FORGET_AFTER * 5.0 + 1.0
    core.periodic(0.5)
    assert lines == [
        f"checker: cam0 new (run {run_of('a')})",
        "checker: cam0 lost (silent 5 s)",
        "checker: cam0 back (silent 6 s)",
        "checker: cam0 ended (2 key-steps, 0 alerts, 4 required steps never done)",
        f"checker: cam0 restarted (a new detector session, run {run_of('b')})",
        f"checker: cam1 new (run {run_of('c')})",
        "checker: cam1 ended (1 key-step, 0 alerts, 5 required steps never done)",
        "checker: cam0 lost (silent 5 s)",
        "checker: cam0 evicted (idle; its slot went to the new stream cam2)",
        f"checker: cam2 new (run {run_of('d')})",
        "checker: cam2 lost (silent 5 s)",
        "checker: cam1 freed (idle 60 s)",
    ]


def test_a_flood_of_new_stream_ids_cannot_flood_the_log() -> None:
    # One line per change, but a peer inventing stream ids as fast as it sends would write a line per message.
    lines: list[str] = []
    clock = Clock()
    core = CheckerCore(tea_graph(), monotonic=clock, log=lambda line, **_: lines.append(line),
                       stream_timeout_s=60.0)  # none is lost here
    core.serve([beat(f"flood{k}", 0) for k in range(100)])
    core.periodic(0.5)
    assert len(lines) == CHANGE_LINES and lines[-1] == f"checker: flood{CHANGE_LINES - 1} new (run {run_of('s')})"
    clock.now += LOG_EVERY_S
    core.periodic(0.5)  # the window is over: what it did not say is summed up in one line
    assert lines[CHANGE_LINES:] == [f"checker: {100 - CHANGE_LINES} more stream changes in the last 10 s not logged "
                                    f"({100 - CHANGE_LINES} new; at most {CHANGE_LINES} lines per 10 s)"]
    core.serve([beat("late", 0)])
    assert lines[-1] == f"checker: late new (run {run_of('s')})"  # a new window says its changes again


def test_multipart_and_hostile_messages_over_a_socket_are_counted_and_the_checker_serves_on(tmp_path: Path) -> None:
    # The heartbeat that killed the checker ([-1] in its history), a 2000-frame message, a replay, a huge seq.
    body = json.loads(encode(beat("garage"))[1])
    with running_checker(tmp_path) as (ctx, service, thread):
        viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
        sock = connect(ctx, zmq.PUB, service.events_endpoint)
        kitchen = EventPublisher(Publisher(sock), "kitchen")
        assert wait_for(lambda: "kitchen" in viewer.state.streams, 10.0,
                        lambda: (kitchen.heartbeat(None, 0, 0, 0.0), viewer.pump(20)))
        stats = service.receiver.stats
        before = stats.malformed
        sock.send_multipart([b"heartbeat/garage", json.dumps(body | {"history": [-1]}).encode()])
        sock.send_multipart([b"heartbeat/garage", json.dumps(body | {"history": [10**300]}).encode()])
        sock.send_multipart([b"heartbeat/garage"] + [b"x" * 1024] * 2000)
        sock.send_multipart([b"heartbeat/garage", encode(beat("garage"))[1], b"third"])
        sock.send_multipart([b"heartbeat/garage", json.dumps(body | {"history": [1, 2, 99]}).encode()])
        assert wait_for(lambda: stats.malformed - before >= 4 and service.core.counts["unknown_step"] >= 1, 10.0)
        for step in MISTAKE[:2]:
            kitchen.keystep(step, "x", 0.0, 1.0, 0.9)
        assert wait_for(lambda: any(a.step == MISTAKE_STEP for _, a in viewer.state.alerts), 10.0,
                        lambda: viewer.pump(20))
        assert thread.is_alive() and stats.malformed - before == 4
        viewer.close()
        sock.close()


def test_every_socket_bounds_what_a_peer_can_queue(ctx: zmq.Context) -> None:
    from streaming.transport import HARD_MAX_BYTES, RECV_HWM, bind

    sub, _ = bind(ctx, zmq.SUB, "tcp://127.0.0.1:0")
    assert sub.getsockopt(zmq.RCVHWM) == RECV_HWM and sub.getsockopt(zmq.MAXMSGSIZE) == HARD_MAX_BYTES
    assert RECV_HWM * MAX_MESSAGE_BYTES <= 16 * 2**20  # at most 16 MiB of well-formed messages wait per peer
    sub.close()


def test_the_periodic_snapshot_of_many_streams_is_spread_over_several_calls() -> None:
    # 256 streams with 32 alerts each re-sent in one call stalled the loop for every other stream.
    now = [100.0]
    core = CheckerCore(tea_graph(), clock=lambda: now[0])
    core.serve([beat(f"s{k}", 0, (MISTAKE_STEP,) * 40) for k in range(64)])
    now[0] += 1.0
    calls = [core.periodic(0.5)]
    while core.snapshot_pending and len(calls) < 64:  # the service calls again within SNAPSHOT_POLL_MS
        calls.append(core.periodic(0.5))
    sizes = [len(out) for out in calls]
    assert max(sizes) <= SNAPSHOT_BUDGET + RESEND_ALERTS + 2  # one stream may go past the budget, plus the health
    resent = {m.stream_id for out in calls for m in out if isinstance(m, Status)}
    assert resent == {f"s{k}" for k in range(64)}  # every stream's snapshot went out, a few calls later
    assert not core.snapshot_pending and len(calls) <= 64 * (RESEND_ALERTS + 1) // SNAPSHOT_BUDGET + 1


@contextlib.contextmanager
def checker_process(tmp_path: Path) -> Iterator[tuple[CheckerProcess, int]]:
    """A checker of the tea graph in its own process on ipc:// (its memory is its own to measure), and its pid."""
    graph = tmp_path / "tea.json"
    save_graph(tea_graph(), graph)
    with CheckerProcess(str(graph), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out")) as service:
        pid = service.process.pid
        assert pid is not None
        yield service, pid


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def test_messages_sent_up_the_publish_socket_are_dropped_and_counted_not_kept(tmp_path: Path) -> None:
    # An XSUB peer sending 100 kB frames up the viewers' socket took a checker from 44 MB to 4 GB in 4 s (libzmq
    # keeps every upstream message until the application reads it), and a SUB subscribing to 2,000 prefixes of
    # 5 kB to 500 MB (its subscription tree): nothing was counted.
    ctx = zmq.Context()
    with checker_process(tmp_path) as (service, pid):
        peer = ctx.socket(zmq.XSUB)
        peer.connect(service.alerts_endpoint)
        subscriber = ctx.socket(zmq.SUB)
        subscriber.connect(service.alerts_endpoint)
        before = _rss_mb(pid)
        frame = b"\x02" + bytes(100_000)
        for k in range(2000):  # 200 MB sent up, and 10 MB of prefixes
            peer.send(frame)
            subscriber.setsockopt(zmq.SUBSCRIBE, b"%d" % k + bytes(5000))
        small = ctx.socket(zmq.XSUB)
        small.connect(service.alerts_endpoint)
        for _ in range(50):
            small.send(b"\x02 not a subscription")
        viewer = Receiver(subscribe(connect(ctx, zmq.SUB, service.alerts_endpoint, wait_s=5.0)))
        healths: list[CheckerHealth] = []
        assert wait_for(lambda: any(h.malformed >= 50 for h in healths), 10.0,
                        lambda: healths.extend(m for m in viewer.poll(50) if isinstance(m, CheckerHealth)))
        assert _rss_mb(pid) - before < 60  # was 200 MB and more
        # The bound leaves a viewer's handshake room for properties of its own (ZMQ_METADATA), as libzmq checks
        # the size of the handshake's frames too.
        with_metadata = ctx.socket(zmq.SUB)
        with_metadata.setsockopt(zmq.METADATA, b"X-Client:" + b"k" * 500)
        with_metadata.connect(service.alerts_endpoint)
        with_metadata.setsockopt(zmq.SUBSCRIBE, b"")
        assert with_metadata.poll(10_000)  # the checker's periodic messages reach it
    ctx.destroy(linger=0)


def test_peers_subscribing_to_many_prefixes_are_cut_off_and_their_memory_does_not_add_up(tmp_path: Path) -> None:
    # Subscriptions of at most 1 KiB pass the frame limit, but libzmq keeps every distinct prefix a peer subscribed to
    # in its subscription tree (about 48 bytes a byte of prefix) for as long as the peer stays connected: each peer
    # that subscribed to 8,000 prefixes of 1 KiB and stayed, idle, added 380 MB to the checker, uncounted, unlogged.
    ctx = zmq.Context()
    with checker_process(tmp_path) as (service, pid):
        viewer = Receiver(subscribe(connect(ctx, zmq.SUB, service.alerts_endpoint, wait_s=5.0)))
        healths: list[CheckerHealth] = []

        def listen() -> None:
            healths.extend(m for m in viewer.poll(50) if isinstance(m, CheckerHealth))

        assert wait_for(lambda: bool(healths), 10.0, listen)
        before = _rss_mb(pid)
        grown = []
        for k in range(3):
            peer = ctx.socket(zmq.XSUB)  # stays connected: libzmq holds its prefixes until its connection ends
            peer.setsockopt(zmq.SNDHWM, 0)  # queue them all: a full queue drops
            peer.connect(service.alerts_endpoint)
            for n in range(3000):  # about 150 MB of subscription tree
                peer.send(b"\x01%d.%06d" % (k, n) + bytes(1000))
            # Refused, counted as malformed; the viewer, cut off with every peer, is back and served.
            assert wait_for(lambda: any(h.malformed > k for h in healths), 30.0, listen)  # noqa: B023
            grown.append(_rss_mb(pid) - before)
        assert grown[-1] < grown[0] + 80  # was 3 x 150 MB, and so on for each peer
        latest = healths[-1].seq
        assert wait_for(lambda: healths[-1].seq > latest, 10.0, listen)
    ctx.destroy(linger=0)


def test_handshakes_refused_before_a_subscription_flood_are_still_counted() -> None:
    # A flood re-opens the --publish socket, and with it its handshake monitor: refusals queued on the old monitor
    # and not read yet were closed with it, uncounted and unlogged.
    ctx = zmq.Context()
    service = CheckerService(tea_graph(), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"), ctx)
    try:
        public, secret = zmq.curve_keypair()
        refused = ctx.socket(zmq.SUB)  # CURVE keys at a checker without CURVE: its handshake is refused
        refused.setsockopt(zmq.LINGER, 0)
        refused.setsockopt(zmq.CURVE_SERVERKEY, public)
        refused.setsockopt(zmq.CURVE_PUBLICKEY, public)
        refused.setsockopt(zmq.CURVE_SECRETKEY, secret)
        refused.connect(service.alerts_endpoint)
        assert service.handshakes[0].monitor.poll(10_000)  # the refusal waits on the monitor, not read yet
        refused.close()
        peer = ctx.socket(zmq.XSUB)
        peer.setsockopt(zmq.LINGER, 0)
        peer.setsockopt(zmq.SNDHWM, 0)  # queue them all: a full queue drops
        peer.connect(service.alerts_endpoint)
        for n in range(SUBSCRIPTION_BYTES // 1000 + 1):
            peer.send(b"\x01%06d" % n + bytes(1000))
        assert wait_for(lambda: service.publisher.flood is not None, 10.0, service.publisher.new_subscribers)
        stats = service.receiver.stats
        service.watch_peers(stats.malformed, stats.over_budget)
        assert stats.malformed == 1  # the flood, re-opened
        assert service.core.counts["denied"] >= 1
        peer.close()
    finally:
        service.close()
        ctx.destroy(linger=0)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files in /proc (Linux only)")
def test_a_checker_out_of_file_handles_when_a_flood_reopens_its_socket_keeps_its_streams_and_opens_it_later() -> None:
    # Idle connections held at --bind past the process's file limit, then a viewer's subscription flood: the
    # --publish socket, closed to drop the flood, could not be made again and the checker ended (a ZMQError
    # traceback, later one error line), every stream's state lost: a peer with no key could stop it. (libzmq 4.3.5
    # also aborted such a run itself, about 1 in 10, looking up the address to bind with no handle left.)
    import signal
    import socket

    from tests.streaming.helpers import checker_with_few_files

    ctx = zmq.Context()
    held: list[socket.socket] = []

    def let_go() -> None:
        for conn in held:
            conn.close()

    with checker_with_few_files() as (checker, lines, bound, published), contextlib.ExitStack() as cleanup:
        cleanup.callback(ctx.destroy, linger=0)
        cleanup.callback(let_go)
        detector = Publisher(connect(ctx, zmq.PUB, bound, wait_s=10.0))
        seq = iter(range(1_000_000))
        viewer = Receiver(subscribe(connect(ctx, zmq.SUB, published, wait_s=10.0)))
        got: list[Message] = []

        def listen() -> None:
            got.extend(viewer.poll(50))

        def beat_and_listen(history: tuple[int, ...]) -> Callable[[], None]:
            def step() -> None:
                detector.send(beat("kitchen", seq=next(seq), history=history))
                listen()

            return step

        assert wait_for(lambda: any(isinstance(m, Status) and m.stream_id == "kitchen" for m in got), 15,
                        beat_and_listen((1,)))
        peer = ctx.socket(zmq.XSUB)
        peer.setsockopt(zmq.LINGER, 0)
        peer.setsockopt(zmq.SNDHWM, 0)  # queue them all: a full queue drops
        peer.connect(published)
        peer.send(b"\x01")
        assert wait_for(lambda: bool(peer.poll(50)), 15)  # connected and greeted
        for _ in range(100):
            held.append(socket.create_connection(("127.0.0.1", int(bound.rsplit(":", 1)[1])), timeout=5))
        assert wait_for(lambda: len(os.listdir(f"/proc/{checker.pid}/fd")) >= 63, 15)
        for n in range(SUBSCRIPTION_BYTES // 1000 + 1):
            peer.send(b"\x01%06d" % n + bytes(1000))
        assert wait_for(lambda: checker.poll() is not None or any("could not open" in line for line in lines), 30)
        assert checker.poll() is None, lines
        peer.close()
        for conn in held:
            conn.close()
        held.clear()
        assert wait_for(lambda: checker.poll() is not None or any("open again" in line for line in lines), 30)
        assert checker.poll() is None, lines
        # The stream it held before is still there, and the detector, never cut off, is still served.
        got.clear()
        assert wait_for(lambda: any(isinstance(m, Status) and m.stream_id == "kitchen" and m.done == (1, 2)
                                    for m in got), 30,
                        beat_and_listen((1, 2)))
        assert wait_for(lambda: any(isinstance(m, CheckerHealth) and m.streams == 1 and m.malformed == 1
                                    for m in got), 10, listen)
        viewer.sock.close()
        detector.sock.close()
    assert checker.returncode == 128 + signal.SIGTERM, lines  # stopped by the test, not before
    assert not any("Traceback" in line for line in lines), lines
    closed = [line for line in lines if "could not open" in line]
    assert len(closed) == 1 and closed[0].startswith(
        f"checker: could not open {published} again after a subscription flood (Too many open files; connections "
        "held open at its ports used up the process's file handles (ulimit -n)); viewers get nothing"), lines
    assert len([line for line in lines if "open again" in line]) == 1
    assert "1 socket re-open failed and retried" in lines[-2], lines


class SocketsRunOut(zmq.Context):
    """A context whose sockets run out after ``left`` more, as libzmq's do in a process out of file handles
    (``zmq_socket`` fails with EMFILE: each socket takes one for its mailbox); it keeps every socket it made."""

    # pyzmq takes an attribute it does not know of for a context option: these are declared here.
    left: int | None = None
    refused = 0  # sockets it would not make
    made: list[zmq.Socket] = []  # replaced by each instance

    def __init__(self) -> None:
        super().__init__()
        self.made = []

    def socket(  # zmq.Context.socket's own parameters
        self, socket_type: int, socket_class: Callable[[SocketsRunOut, int], zmq.Socket] | None = None, **kwargs: object
    ) -> zmq.Socket:
        if self.left is not None:
            if self.left == 0:
                self.refused += 1
                raise zmq.ZMQError(errno.EMFILE)
            self.left -= 1
        sock = super().socket(socket_type, socket_class, **kwargs)
        self.made.append(sock)
        return sock


@pytest.mark.parametrize(("when", "made"), [("start", 1), ("start", 2), ("start", 3), ("reopen", 1), ("reopen", 2),
                                            ("reopen", 3), ("reopen_publish", 1)])
def test_sockets_made_before_the_one_that_cannot_be_are_closed(tmp_path: Path, when: str, made: int) -> None:
    # Out of file handles half-way through making its sockets (the --bind socket, or a monitor), the checker ended
    # with the sockets it had made still open: their handles, and the listeners' paths or ports, held to the end.
    # (It goes on now, and tries again later: the half-made sockets would be held until then.)
    ctx = SocketsRunOut()
    config = CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out")
    service = None
    try:
        if when == "start":
            ctx.left = made
            with pytest.raises(zmq.ZMQError, match="Too many open files"):
                CheckerService(tea_graph(), config, ctx)
            kept = []
        else:
            service = CheckerService(tea_graph(), config, ctx)
            ctx.left = made
            service.reopen() if when == "reopen" else service.reopen_publish()
            assert service.sockets_closed
            # A re-open of the viewers' socket leaves the detectors' socket and its monitor as they were.
            kept = [service.receiver.sock, service.handshakes[1].monitor] if when == "reopen_publish" else []
        assert len(ctx.made) >= made
        assert [sock for sock in ctx.made if not sock.closed] == kept
    finally:
        if service is not None:
            service.close()
        ctx.destroy(linger=0)


@pytest.mark.parametrize(("when", "made"), [("in use", 0), ("start", 1), ("start", 3), ("reopen", 1), ("reopen", 3),
                                            ("reopen_publish", 1)])
def test_a_checker_that_could_not_make_its_sockets_leaves_no_ipc_file_behind(
    tmp_path: Path, when: str, made: int
) -> None:
    # libzmq never removes the file of an ipc:// bind, and the sockets closed when the next one could not be made
    # (its --bind path in use, no file handle left) left theirs in the folder: a checker that failed to start kept
    # its --publish file there, one whose re-open failed the file of the socket bound again.
    from graphs.common.errors import InputError
    from streaming.transport import bind

    ctx = SocketsRunOut()
    config = CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out")
    other = None
    try:
        if when == "in use":
            other, _ = bind(ctx, zmq.SUB, f"ipc://{tmp_path}/in")  # another checker's input
            with pytest.raises(InputError, match="address already in use"):
                CheckerService(tea_graph(), config, ctx)
            assert sorted(path.name for path in tmp_path.iterdir()) == ["in"]  # the other's, kept
            return
        if when == "start":
            ctx.left = made
            with pytest.raises(zmq.ZMQError):
                CheckerService(tea_graph(), config, ctx)
        else:
            service = CheckerService(tea_graph(), config, ctx)
            ctx.left = made
            service.reopen() if when == "reopen" else service.reopen_publish()
            assert service.sockets_closed
            service.close()
        assert sorted(path.name for path in tmp_path.iterdir()) == []
    finally:
        if other is not None:
            other.close()
        ctx.destroy(linger=0)


def test_a_checker_that_cannot_make_its_sockets_again_after_a_key_is_revoked_keeps_its_streams_and_tries_again(
    tmp_path: Path,
) -> None:
    # A key revoked while the process had no file handle left (peers holding connections at its ports): both sockets
    # were closed to cut every client off and could not be made again, and the checker ended with every stream's
    # state. Its loop must go on without sockets (polling none: a poll on a closed socket fails) and make them later.
    import threading

    from streaming.curve_keys import CurveClient, CurveServer
    from streaming.demo.procedure import name_of
    from streaming.metrics import CheckerMetrics
    from streaming.stream_detect_cli import main

    keys = tmp_path / "keys"
    assert main(["keys", "--out", str(keys), "--clients", "cam0,cam1,viewer"]) == 0

    def client(name: str) -> CurveClient:
        return CurveClient.from_files(str(keys / "checker.key"), str(keys / "clients" / f"{name}.key_secret"))

    ctx = SocketsRunOut()
    peers = zmq.Context()  # the clients' sockets, made whatever the checker's context allows
    lines: list[str] = []
    curve = CurveServer.from_files(str(keys / "checker.key_secret"), str(keys / "clients"))
    metrics = CheckerMetrics()
    service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out", curve=curve),
                             ctx, log=lambda line, **_fields: lines.append(line), metrics=metrics)

    def sample(name: str) -> float | None:
        return metrics.registry.get_sample_value(name)

    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        viewer = Viewer(peers, service.alerts_endpoint, ViewState(), jsonl=False, curve=client("viewer"))
        publisher = Publisher(connect(peers, zmq.PUB, service.events_endpoint, wait_s=5.0, curve=client("cam0")))
        events = EventPublisher(publisher, "cam0")
        events.keystep(MISTAKE[0], name_of(MISTAKE[0]), 0.0, 1.0, 0.9)
        assert wait_for(lambda: "cam0" in viewer.state.streams, 10.0,
                        lambda: (events.heartbeat(None, 0, 0, 0.0), viewer.pump(20)))
        ctx.left = 0
        (keys / "clients" / "cam1.key").unlink()
        assert wait_for(lambda: any("could not open" in line for line in lines), 10.0), lines
        # Tried again and again meanwhile, the loop turning without a socket to poll.
        refused = ctx.refused
        assert wait_for(lambda: ctx.refused >= refused + 3 or not thread.is_alive(), 10.0)
        assert thread.is_alive() and service.sockets_closed
        assert (sample("stream_checker_sockets_closed"), sample("stream_checker_reopen_failed_total")) == (1, 1)
        ctx.left = None
        assert wait_for(lambda: any("open again" in line for line in lines), 10.0), lines
        assert (sample("stream_checker_sockets_closed"), sample("stream_checker_reopen_failed_total")) == (0, 1)
        # Both clients connect again by themselves, and the checker still holds the stream's first step.
        events.keystep(MISTAKE[1], name_of(MISTAKE[1]), 1.0, 2.0, 0.9)
        assert wait_for(lambda: viewer.state.streams["cam0"].done == tuple(MISTAKE[:2]), 15.0,
                        lambda: (events.heartbeat(None, 0, 0, 0.0), viewer.pump(20)))
        viewer.close()
        publisher.sock.close()
    finally:
        stop.set()
        thread.join(5)
        peers.destroy(linger=0)
        ctx.destroy(linger=0)
    assert not thread.is_alive()
    said = [line for line in lines if "open" in line]
    assert len(said) == 2 and said[0].startswith(
        f"checker: could not open ipc://{tmp_path}/in and ipc://{tmp_path}/out again after a client key was revoked "
        "(Too many open files; ") and said[1].startswith(
        f"checker: ipc://{tmp_path}/in and ipc://{tmp_path}/out open again after "), lines
    assert sorted(path.name for path in tmp_path.iterdir()) == ["keys"]  # the sockets' files removed at the end


@contextlib.contextmanager
def closable_checker() -> Iterator[tuple[CheckerService, SocketsRunOut, Clock, list[str]]]:
    """A checker on loopback TCP whose context makes no socket while ``left`` is 0, its clock the test's, its log
    lines kept; driven by the test (no loop thread)."""
    ctx = SocketsRunOut()
    lines: list[str] = []
    service = CheckerService(tea_graph(), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"), ctx,
                             log=lambda line, **_fields: lines.append(line))
    clock = Clock()
    service.core.monotonic = clock
    try:
        yield service, ctx, clock, lines
    finally:
        service.close()
        ctx.destroy(linger=0)


def test_a_port_another_program_takes_while_the_checkers_socket_is_closed_is_said() -> None:
    # The --publish socket closed by a flood found no file handle ("Too many open files", said), then another program
    # took its port: every later try failed for that, and nothing said so; the operator, told of file handles, waited
    # for a checker that could never bind again.
    with closable_checker() as (service, ctx, clock, lines):
        port = int(service.alerts_endpoint.rsplit(":", 1)[1])
        ctx.left = 0
        service.reopen_publish()
        assert len(lines) == 1 and "(Too many open files;" in lines[0], lines
        ctx.left = None
        other = socket.socket()  # the other program's listener, once libzmq let the port go
        try:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            assert wait_for(lambda: _binds(other, port), 10.0)
            other.listen(1)
            clock.now += LOG_EVERY_S
            service.retry_reopen()
            assert service.sockets_closed
            assert len(lines) == 2 and lines[1].startswith(
                f"checker: could not open {service.alerts_endpoint} again after a subscription flood (--publish "
                f"{service.alerts_endpoint}: address already in use (another program took it since it was bound "
                "here: stop that program, and it is bound again)); viewers get nothing until it opens"), lines
            clock.now += LOG_EVERY_S
            service.retry_reopen()
            assert len(lines) == 2, lines  # the same cause: said once
        finally:
            other.close()
        clock.now += 1
        service.retry_reopen()
        assert not service.sockets_closed
        assert len(lines) == 3 and lines[2].startswith(f"checker: {service.alerts_endpoint} open again after "), lines


def _binds(sock: socket.socket, port: int) -> bool:
    """Whether ``sock`` could bind 127.0.0.1:``port`` (False: still taken)."""
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


def _free(port: int) -> bool:
    """Whether 127.0.0.1:``port`` can be bound (a closed socket's listener is closed after close returns)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        return _binds(probe, port)


def test_a_closing_too_soon_after_the_last_to_be_said_is_said_once_it_has_lasted() -> None:
    # Lines about closed sockets are one every LOG_EVERY_S, however often a peer makes them close: a closing that
    # came within that time of the last line was never said, however long it lasted, and the last word in the log was
    # that the sockets were open again.
    with closable_checker() as (service, ctx, clock, lines):
        ctx.left = 0
        service.reopen_publish()
        port = int(service.alerts_endpoint.rsplit(":", 1)[1])
        ctx.left = None
        clock.now += 0.1
        assert wait_for(lambda: _free(port), 10.0)  # libzmq let the closed socket's port go
        service.retry_reopen()
        endpoint = service.alerts_endpoint
        assert [line.split(" (")[0].split(" after ")[0] for line in lines] == [
            f"checker: could not open {endpoint} again", f"checker: {endpoint} open again"]
        clock.now += 1
        ctx.left = 0
        service.reopen_publish()  # another flood, a second later
        assert len(lines) == 2 and service.sockets_closed
        for _ in range(12):
            clock.now += 1
            service.retry_reopen()
        assert len(lines) == 3 and lines[2].startswith(
            f"checker: could not open {service.alerts_endpoint} again after a subscription flood (Too many open "
            "files; "), lines
        assert lines[2].endswith("; 2 times so far; closed for 9.0 s, 10 failed attempts"), lines
        ctx.left = None
        clock.now += 1
        assert wait_for(lambda: _free(port), 10.0)
        service.retry_reopen()
        assert len(lines) == 4 and lines[3].startswith(f"checker: {service.alerts_endpoint} open again after "), lines


def test_a_key_revoked_while_the_viewers_socket_waits_closed_says_the_detectors_socket_closed_too() -> None:
    # A flood closed the --publish socket with no handle left ("detectors are still served", said), then a key was
    # revoked and both sockets could not be made again: nothing said so, and the log still told of detectors served
    # while none was, nor was that re-open counted.
    with closable_checker() as (service, ctx, clock, lines):
        ctx.left = 0
        service.reopen_publish()
        assert len(lines) == 1 and "(detectors are still served)" in lines[0], lines
        clock.now += LOG_EVERY_S
        service.reopen()  # as a key revoked does
        both = f"{service.events_endpoint} and {service.alerts_endpoint}"
        assert len(lines) == 2 and lines[1].startswith(
            f"checker: could not open {both} again after a client key was revoked (Too many open files; "), lines
        assert "nothing is received or sent until they open" in lines[1] and "2 times so far" in lines[1], lines
        assert service.summary_counts()["reopen_failed"] == 2
        ctx.left = None
        clock.now += 1
        ports = [int(endpoint.rsplit(":", 1)[1]) for endpoint in (service.events_endpoint, service.alerts_endpoint)]
        assert wait_for(lambda: all(_free(port) for port in ports), 10.0)
        service.retry_reopen()
        assert not service.sockets_closed
        assert len(lines) == 3 and lines[2].startswith(f"checker: {both} open again after "), lines


def test_streams_are_not_taken_for_lost_while_the_checker_cannot_hear_them(tmp_path: Path) -> None:
    # Both sockets closed and not made again (a key revoked with no handle left): the checker heard nothing, and took
    # that for its streams' silence. Every stream went lost after --stream-timeout, and was freed 12 timeouts later
    # (its early alerts retracted to the webhook): the state the docs say it keeps, lost for its own deafness.
    import threading

    ctx = SocketsRunOut()
    peers = zmq.Context()
    lines: list[str] = []
    service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out",
                                                        stream_timeout_s=1.0),
                             ctx, log=lambda line, **_fields: lines.append(line))
    close_now = threading.Event()

    def until(_core: CheckerCore) -> bool:  # the loop's own thread closes its sockets, as a key reload does
        if close_now.is_set():
            close_now.clear()
            ctx.left = 0
            service.reopen()
        return False

    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop, until), daemon=True)
    thread.start()
    try:
        detector = Publisher(connect(peers, zmq.PUB, service.events_endpoint, wait_s=5.0))
        seq = iter(range(1_000_000))
        assert wait_for(lambda: "cam0" in service.core.streams, 10.0,
                        lambda: detector.send(beat("cam0", seq=next(seq), history=(1,))))
        close_now.set()
        assert wait_for(lambda: service.sockets_closed, 10.0,
                        lambda: detector.send(beat("cam0", seq=next(seq), history=(1,))))
        refused = ctx.refused
        assert wait_for(lambda: ctx.refused >= refused + 5, 20.0)  # 2.5 s of tries: twice the stream timeout
        assert not service.core.streams["cam0"].lost, lines
        ctx.left = None
        assert wait_for(lambda: not service.sockets_closed, 10.0)
        assert wait_for(lambda: service.core.streams["cam0"].served > 1 and not service.core.streams["cam0"].lost,
                        10.0, lambda: detector.send(beat("cam0", seq=next(seq), history=(1,))))
        detector.sock.close()
    finally:
        stop.set()
        thread.join(5)
        peers.destroy(linger=0)
        ctx.destroy(linger=0)
    assert not any(" lost" in line for line in lines), lines


def test_a_refused_handshake_ends_the_checkers_wait_for_messages() -> None:
    # The monitors were read only when the loop turned, every POLL_MS when idle, 1,024 refusals a turn: a peer that
    # made 20,000 refused connections a second outran it, and the unread events grew the checker by 1 MB a second.
    import socket
    import time

    ctx = zmq.Context()
    service = CheckerService(tea_graph(), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"), ctx)
    try:
        for rounds in range(2):  # and again on the sockets a flood re-opens
            port = int(service.events_endpoint.rsplit(":", 1)[1])
            socket.create_connection(("127.0.0.1", port), timeout=5).close()  # a port probe: one refusal
            started = time.monotonic()
            assert service.receiver.poll(60_000) == []
            assert time.monotonic() - started < 30  # woken by the refusal, not the end of the wait
            stats = service.receiver.stats
            service.watch_peers(stats.malformed, stats.over_budget)
            assert service.core.counts["denied"] == rounds + 1
            service.reopen()
            # A port libzmq has not let go yet is tried again on the loop's next turns: this test is the loop.
            assert wait_for(lambda: not service.sockets_closed, 10.0, service.retry_reopen)
    finally:
        service.close()
        ctx.destroy(linger=0)


@pytest.mark.parametrize("which", ["publish", "both"])
def test_a_reopen_that_finds_its_port_taken_never_holds_the_loop(which: str) -> None:
    # The first re-open of a flood or a revoked key retried a busy port 100 times, 20 ms apart, inside the loop: for
    # 2 s no message was served and no stream's silence judged (later tries, made on later turns, never waited).
    import threading
    import time

    ctx = zmq.Context()
    peers = zmq.Context()
    lines: list[str] = []
    service = CheckerService(tea_graph(), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"), ctx,
                             log=lambda line, **_fields: lines.append(line))
    port = int((service.alerts_endpoint if which == "publish" else service.events_endpoint).rsplit(":", 1)[1])
    other = socket.socket()  # another program's listener, at the port the checker re-binds
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    take = threading.Event()
    taken = threading.Event()
    turns: list[float] = []
    reopened: list[float] = []  # how long the re-open's call took

    def until(_core: CheckerCore) -> bool:  # the loop's own thread re-opens, as a flood or a key reload does
        if take.is_set():
            take.clear()
            # The sockets closed first, then their port taken while closed: the re-open finds it busy.
            service.receiver.wake_on([service.handshakes[0].monitor], [])
            service.handshakes[0].close()
            service.publisher.sock.close()
            if which == "both":
                service.handshakes[1].close()
                service.receiver.wake_on([service.handshakes[1].monitor], [])
                service.receiver.sock.close()
            assert wait_for(lambda: _binds(other, port), 10.0)
            other.listen(1)
            started = time.monotonic()
            service.reopen_publish() if which == "publish" else service.reopen()
            reopened.append(time.monotonic() - started)
            taken.set()
        if taken.is_set():
            turns.append(time.monotonic())
        return False

    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop, until), daemon=True)
    thread.start()
    try:
        detector = Publisher(connect(peers, zmq.PUB, service.events_endpoint, wait_s=5.0))
        seq = iter(range(1_000_000))
        assert wait_for(lambda: "cam0" in service.core.streams, 10.0,
                        lambda: detector.send(beat("cam0", seq=next(seq), history=(1,))))
        take.set()
        assert wait_for(taken.is_set, 15.0)
        assert reopened[0] < 0.5, reopened
        if which == "publish":  # the detectors' socket, open, is served while the viewers' port is busy
            assert wait_for(lambda: "cam1" in service.core.streams, 10.0,
                            lambda: detector.send(beat("cam1", seq=next(seq), history=(1,))))
            assert service.sockets_closed
        # Within REOPEN_BUSY_S a busy port is taken for the old listener not let go yet: no failed re-open, no line.
        assert wait_for(lambda: service.reopen_failed == 1, 15.0)
        assert service.sockets_closed and len(turns) > 10
        assert max(b - a for a, b in zip(turns, turns[1:], strict=False)) < 1.0
        other.close()
        assert wait_for(lambda: not service.sockets_closed, 15.0)
        detector.sock.close()
    finally:
        stop.set()
        thread.join(5)
        other.close()
        peers.destroy(linger=0)
        ctx.destroy(linger=0)
    assert not thread.is_alive()
    closed = (service.alerts_endpoint if which == "publish"
              else f"{service.events_endpoint} and {service.alerts_endpoint}")
    assert [line.split(" (")[0].split(" after ")[0] for line in lines if " open" in line] == [
        f"checker: could not open {closed} again", f"checker: {closed} open again"], lines
    # The tries within REOPEN_BUSY_S are no failures: not said as such (about 100 of them read "94 failed attempts").
    import re

    assert all(int(n) < 10 for n in re.findall(r"(\d+) failed attempt", " ".join(lines))), lines


def test_sockets_said_closed_are_said_open_again_when_a_revoked_key_found_a_port_busy_for_a_moment() -> None:
    # The --publish socket could not be opened again (said in a line); a key revoked meanwhile re-opened both, and
    # the --bind port, just closed, was busy for a moment (libzmq lets its listener go a few ms later): that try was
    # not counted as failed, so once they opened no line said so, and the log's last word on them stayed "could not
    # open ... again".
    ctx = zmq.Context()
    lines: list[str] = []
    service = CheckerService(tea_graph(), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"), ctx,
                             log=lambda line, **_fields: lines.append(line))
    alerts_port = int(service.alerts_endpoint.rsplit(":", 1)[1])
    events_port = int(service.events_endpoint.rsplit(":", 1)[1])
    others = [socket.socket(), socket.socket()]  # another program's listeners, at the ports the checker re-binds
    for other in others:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        service.receiver.wake_on([service.handshakes[0].monitor], [])
        service.handshakes[0].close()
        service.publisher.sock.close()
        assert wait_for(lambda: _binds(others[0], alerts_port), 10.0)
        others[0].listen(1)
        service.reopen_publish()
        assert wait_for(lambda: service.reopen_failed == 1, 15.0, service.retry_reopen)  # past the busy time
        assert [line.split(" after ")[0] for line in lines] == [
            f"checker: could not open {service.alerts_endpoint} again"]
        # The detectors' socket closed, its port busy on the revoked key's first try (held here, for a sure busy).
        service.handshakes[1].close()
        service.receiver.wake_on([service.handshakes[1].monitor], [])
        service.receiver.sock.close()
        assert wait_for(lambda: _binds(others[1], events_port), 10.0)
        others[1].listen(1)
        others[0].close()
        service.reopen()
        assert service.sockets_closed
        others[1].close()
        assert wait_for(lambda: not service.sockets_closed, 10.0, service.retry_reopen)
    finally:
        for other in others:
            other.close()
        service.close()
        ctx.destroy(linger=0)
    assert lines[-1].startswith(
        f"checker: {service.events_endpoint} and {service.alerts_endpoint} open again after "), lines


def _unencodable(kind: str) -> Alert:
    """An alert the wire refuses though it was built: the names of 2048 long-named pre-conditions, not cut to fit
    (`Alert.fitted` skipped), or a NaN after the first item of a step list (the field checks' min and max miss it)."""
    steps = tuple(range(MAX_STEPS))
    if kind == "oversized":
        missing, names = steps, tuple("n" * MAX_NAME for _ in steps)
    else:
        missing, names = (1, float("nan")), ()  # type: ignore[assignment]
    return Alert(stream_id="cam0", seq=1, timestamp=1.0, alert_id="cam0#0", run=run_of("s"), step=0,
                 step_name="a step", index=0, missing=missing, missing_names=names, undefined=False,
                 event_timestamp=1.0, replayed=False, forgotten=None, forgotten_name=None, forgotten_score=None,
                 rule="binary")


@pytest.mark.parametrize("kind", ["oversized", "not finite"])
@pytest.mark.parametrize("publishing", [True, False])
def test_a_message_the_wire_refuses_reaches_no_sink_whether_or_not_the_viewers_socket_is_open(
    kind: str, publishing: bool
) -> None:
    # With the --publish socket closed (a re-open waiting to be made) a message was not encoded at all: one the wire
    # refuses went to the webhook and the metrics as an alert sent, where with the socket open it was refused and
    # counted as unsendable. (A NaN in a step list raised a ValueError past the refusal, ending the checker.)
    from streaming.metrics import CheckerMetrics

    class Kept:
        def __init__(self) -> None:
            self.got: list[Message] = []

        def send(self, message: Message) -> None:
            self.got.append(message)

    ctx = SocketsRunOut()
    sink = Kept()
    metrics = CheckerMetrics()
    service = CheckerService(tea_graph(), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"), ctx,
                             metrics=metrics, sinks=[sink])
    try:
        if not publishing:
            ctx.left = 0  # no file handle left: the re-open of a flood cannot make the socket again
            service.reopen_publish()
            assert service.sockets_closed
        bad = _unencodable(kind)
        good = replace(bad, missing=(1,), missing_names=("a",), alert_id="cam0#1", index=1)
        service.send([bad, good])
        assert sink.got == [good]
        assert metrics.registry.get_sample_value("stream_checker_alerts_total") == 1
        assert service.summary_counts()["unsendable"] == 1
    finally:
        service.close()
        ctx.destroy(linger=0)
