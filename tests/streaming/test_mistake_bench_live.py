"""The live path on the CaptainCook4D mistake benchmark's data: the recordings' step sequences, sent over ZeroMQ as a
detector with ``--alert-on end`` sends them (one confirmed `KeyStepEvent` per step, then an ended heartbeat), make the
real checker service raise exactly the alerts and ``missing`` reports that `tgml bench-mistakes` counts offline."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import zmq

from graphs.checker_settings import CheckerSettings
from graphs.order_rules import LATE_STEP, PRECONDITION
from graphs.task_graph import TaskGraph
from streaming.checker.config import CheckerConfig
from streaming.checker.service import CheckerService
from streaming.detector import EventPublisher
from streaming.messages import Alert, MissingSteps, Status, StepEvent
from streaming.transport import VIEW_RECV_HWM, Publisher, Receiver, connect, subscribe
from tgml.bench.captaincook import load_procedures
from tgml.bench.error_annotations import ErrorRecording
from tgml.bench.mistake_bench import load_error_recordings, replay_recording
from tgml.learners.registry import learner

# Every recording of the 24 procedures is checked with its procedure's ground-truth graph; those of one procedure also
# with the graph `tgml train`'s default learner learns from the graph-generation recordings.
LEARNED = "microwaveeggsandwich"


def live_outputs(graph: TaskGraph, recordings: Sequence[ErrorRecording], tmp_path: Path, rule: str = PRECONDITION
                 ) -> tuple[dict[str, list[int]], dict[str, tuple[int, ...]]]:
    """Send every recording through a checker service on ``graph`` as its own stream; collect what comes out.

    Returns:
        ``({recording: indices of its first-sent alerts}, {recording: steps its missing report names})``.
    """
    ctx = zmq.Context()
    stop = threading.Event()
    checking = CheckerSettings("binary", order_rule=rule)
    service = CheckerService(graph, CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out", checking=checking),
                             ctx)
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    alerts: dict[str, set[int]] = {r.recording_id: set() for r in recordings}
    missing: dict[str, tuple[int, ...]] = {}
    ended: set[str] = set()  # the report of a session comes before the status that says it ended
    try:
        receiver = Receiver(subscribe(connect(ctx, zmq.SUB, service.alerts_endpoint, recv_hwm=VIEW_RECV_HWM)))
        sock = connect(ctx, zmq.PUB, service.events_endpoint)
        streams = {r.recording_id: EventPublisher(Publisher(sock), r.recording_id, clock=lambda: 0.0)
                   for r in recordings}
        seen: set[str] = set()
        applied: dict[str, int] = {}

        def take(timeout_ms: int) -> None:
            for message in receiver.poll(timeout_ms):
                if isinstance(message, StepEvent):  # the checker applied the key-step at this index of the history
                    applied[message.stream_id] = max(applied.get(message.stream_id, 0), message.index + 1)
                elif isinstance(message, Status):
                    seen.add(message.stream_id)
                    if message.ended:
                        ended.add(message.stream_id)
                elif isinstance(message, Alert) and not message.replayed:
                    alerts[message.stream_id].add(message.index)
                elif isinstance(message, MissingSteps) and not message.replayed:
                    missing[message.stream_id] = message.missing

        # The subscriptions take a moment: heartbeat until every stream is seen, each stream at most once a second
        # (a checker slowed by a loaded machine would otherwise find more of one stream's heartbeats in one poll than
        # `STREAM_BUDGET` lets through, and refuse the key-step queued behind them).
        deadline = time.monotonic() + 20.0
        last_beat: dict[str, float] = {}
        while seen != set(streams) and time.monotonic() < deadline:
            for rid in set(streams) - seen:
                if time.monotonic() - last_beat.get(rid, -1.0) >= 1.0:
                    streams[rid].heartbeat(None, 0, 0, 0.0)
                    last_beat[rid] = time.monotonic()
            take(100)
        assert seen == set(streams), "the checker never saw every stream"
        # As live detectors: each stream sends its key-steps one at a time, the next one after the checker has it
        # (steps come seconds apart live; a burst would be over a stream's per-poll budget, `STREAM_BUDGET`), then
        # the ended heartbeat. The streams go side by side, as cameras do: step k of every recording, then step k+1.
        longest = max(len(r.performed) for r in recordings)
        for k in range(longest):
            due = {r.recording_id: r.performed[k] for r in recordings if len(r.performed) > k}
            sent = {rid: streams[rid].keystep(step.step, step.name, step.start, step.start + 1.0, 0.9)
                    for rid, step in due.items()}
            for attempt in range(3):
                # A key-step refused as over budget is sent again, the same message: the checker applies it then,
                # and ignores it as a duplicate (same seq) if the first one was applied after all.
                waiting = [rid for rid in due if applied.get(rid, 0) <= k]
                if not waiting:
                    break
                if attempt:
                    for rid in waiting:
                        streams[rid].publisher.send(sent[rid])
                deadline = time.monotonic() + 5.0
                while any(applied.get(rid, 0) <= k for rid in waiting) and time.monotonic() < deadline:
                    take(20)
            never = [rid for rid in due if applied.get(rid, 0) <= k]
            assert not never, f"{never}: step {k} never applied"
        for recording in recordings:
            streams[recording.recording_id].heartbeat(None, len(recording.performed), 0, 0.0, ended=True)
        deadline = time.monotonic() + 5.0
        while ended != set(streams) and time.monotonic() < deadline:
            take(20)
        assert ended == set(streams), f"{sorted(set(streams) - ended)}: the checker never reported the stream ended"
    finally:
        stop.set()
        thread.join(5)
        ctx.destroy(linger=0)
    return {k: sorted(v) for k, v in alerts.items()}, missing


@pytest.fixture(scope="module")
def cases(data_dir: Path) -> list[tuple[TaskGraph, list[ErrorRecording]]]:
    folder = data_dir / "captaincook4d"
    procedures = load_procedures(folder)
    recordings = load_error_recordings(folder, procedures).recordings
    noisy_and = learner("noisy-and")
    out = []
    for procedure in procedures:
        mine = [r for r in recordings if r.scenario == procedure.scenario]
        out.append((procedure.ground_truth, mine))
        if procedure.scenario == LEARNED:
            graph = noisy_and.learn(procedure.sequences, procedure.step_ids, procedure.step_names,
                                          noisy_and.config(None), procedure.scenario).graph
            out.append((graph, mine))
    return out


@pytest.mark.parametrize("rule", [PRECONDITION, LATE_STEP])
@pytest.mark.slow
def test_the_live_checker_raises_exactly_the_alerts_and_missing_steps_the_benchmark_counts(
    cases: list[tuple[TaskGraph, list[ErrorRecording]]], tmp_path: Path, rule: str
) -> None:
    sent = alerted = reported = 0
    for k, (graph, recordings) in enumerate(cases):
        folder = tmp_path / str(k)
        folder.mkdir()
        alerts, missing = live_outputs(graph, recordings, folder, rule)
        for recording in recordings:
            flags, never_done = replay_recording(graph, recording, rule)
            rid = recording.recording_id
            assert alerts[rid] == [i for i, flag in enumerate(flags) if flag], rid
            assert missing.get(rid, ()) == never_done, rid
            sent += len(flags)
            alerted += len(alerts[rid])
            reported += bool(never_done)
    assert sent > 2500 and alerted > 400 and reported > 100  # the data exercised both kinds of output
