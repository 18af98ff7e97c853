"""The detector command's loop around a real reader, model and socket."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import zmq

from graphs.common.errors import InputError
from streaming.checker.config import CheckerConfig
from streaming.checker.service import CheckerService
from streaming.demo.paths import default_demo_paths
from streaming.detector import (
    DetectorConfig,
    EventPublisher,
    PipelineConfig,
    build_pipeline,
    load_detector_for_stream,
    run_detector,
)
from streaming.detector.loading import LoadedParts
from streaming.messages import MAX_HISTORY
from streaming.readers import ReaderConfig, open_reader
from streaming.stream_detect_cli import main
from streaming.transport import Publisher, connect, unresolved_host
from tests.streaming.helpers import (
    STREAM_DETECT,
    KeptMessages,
    beat,
    running_checker,
    status_heard,
    tea_graph,
    wait_for,
    write_noise_video,
)

GRAPH, DETECTOR = default_demo_paths()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_detector_refuses_to_run_when_no_checker_answers(tmp_path: Path) -> None:
    # ZeroMQ connects in the background and never says nobody is there: a detector with a wrong --connect
    # read the whole video, sent every key-step into the void and exited 0.
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    reader = open_reader(str(write_noise_video(tmp_path / "clip.mp4")), ReaderConfig(fps=checkpoint.fps))
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(InputError, match=f"--connect {endpoint}: nothing answered within 0.3 s"):
        run_detector(reader, model, checkpoint, extractor, DetectorConfig(connect=endpoint, connect_wait_s=0.3),
                     ctx=zmq.Context.instance())
    assert time.monotonic() - start < 3.0 and reader.frames == 0


def test_a_host_name_that_resolves_to_nothing_is_named(tmp_path: Path) -> None:
    # libzmq retries a name it cannot resolve for ever, so a typo in --connect read "nothing answered", as if the
    # checker were down. A label over 63 characters fails in this machine's resolver: no query leaves it.
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    reader = open_reader(str(write_noise_video(tmp_path / "clip.mp4")), ReaderConfig(fps=checkpoint.fps))
    host = "x" * 64 + ".test"
    with pytest.raises(InputError, match=f"--connect tcp://{host}:5555: no host is named '{host}' here"):
        run_detector(reader, model, checkpoint, extractor,
                     DetectorConfig(connect=f"tcp://{host}:5555", connect_wait_s=0.3), ctx=zmq.Context.instance())
    assert unresolved_host("tcp://localhost:5555") is None and unresolved_host("tcp://127.0.0.1:5555") is None
    # A view or a dashboard (no wait: they keep trying) said "not answering" for ever; now refused at start too.
    with pytest.raises(InputError, match=f"--connect tcp://{host}:5556: no host is named '{host}' here"):
        connect(zmq.Context.instance(), zmq.SUB, f"tcp://{host}:5556")
    # libzmq's SOURCE;HOST form: the host is the part after the semicolon.
    assert unresolved_host(f"tcp://127.0.0.1;{host}:5555") == host


def test_detector_runs_once_its_checker_answers(tmp_path: Path) -> None:
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    reader = open_reader(str(write_noise_video(tmp_path / "clip.mp4")), ReaderConfig(fps=checkpoint.fps))
    with running_checker(tmp_path) as (ctx, service, _thread):
        stats = run_detector(reader, model, checkpoint, extractor,
                             DetectorConfig(stream_id="noise", connect=service.events_endpoint), ctx=ctx)
        assert stats.frames > 0 and stats.error == ""
        assert wait_for(lambda: "noise" in service.core.streams and service.core.streams["noise"].ended, 5.0)
        # The view leaves the last heartbeat's rate on an ended row, where it reads as the run's: the session's, not
        # the last second's (5.5 fps at the end of a 5 fps stream).
        assert service.core.streams["noise"].fps == pytest.approx(stats.frames / stats.seconds, rel=1e-9)


def test_stopping_takes_a_fixed_moment_whatever_the_heartbeat_period(tmp_path: Path) -> None:
    # The last heartbeat's repeats were heartbeat_s / 5 apart: with heartbeat_s = 60 every run ended with
    # 24 s of sleep (the demo recognition test spent 48 of its 55 s there).
    parts = LoadedParts(None, *load_detector_for_stream(DETECTOR, None))
    reader = open_reader(str(write_noise_video(tmp_path / "clip.mp4")), ReaderConfig(fps=parts.checkpoint.fps))
    config = PipelineConfig(detector=DetectorConfig(heartbeat_s=60.0), publish=False)
    with build_pipeline(config, parts=parts, readers=[reader], sinks=[lambda _: KeptMessages()]) as pipeline:
        start = time.monotonic()
        [stats] = pipeline.run()
        assert stats.frames > 0 and time.monotonic() - start < 2.0


def test_a_stream_that_ends_just_before_its_checker_comes_back_repeats_its_end_once_more(tmp_path: Path) -> None:
    # Its end's repeats were still due when the checker came back: it sent them, then the return's as well.
    from streaming.detector import FINAL_REPEATS, DetectorStream, FrameLoop
    from streaming.messages import Heartbeat

    parts = LoadedParts(None, *load_detector_for_stream(DETECTOR, None))
    reader = open_reader(str(write_noise_video(tmp_path / "clip.mp4")), ReaderConfig(fps=parts.checkpoint.fps))
    sent = KeptMessages()
    stream = DetectorStream(reader, parts.checkpoint, EventPublisher(sent, "cam0"), DetectorConfig())
    cuts: list[float] = []

    def rejoined() -> float | None:  # the checker is back, as the loop first asks once the stream has ended
        if not stream.ended or cuts:
            return None
        cuts.append(time.monotonic() - 1.0)  # cut a second ago
        return cuts[0]

    with reader:
        FrameLoop([stream], parts.extractor, parts.model, parts.checkpoint, rejoined=rejoined).run()
    assert cuts
    ends = [m for m in sent.messages if isinstance(m, Heartbeat) and m.ended]
    assert len(ends) == 1 + FINAL_REPEATS  # its end, then the return's
    assert len({m.seq for m in ends}) == len(ends)


def test_a_stream_past_the_history_limit_goes_on_in_a_new_session(tmp_path: Path) -> None:
    # The 4097th key-step of a session raised InputError: a camera left running ended with "error: ..." though
    # nobody had made a mistake.
    with running_checker(tmp_path) as (ctx, service, _thread):
        events = EventPublisher(Publisher(connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0)), "cam0")
        first = events.session
        events.keystep(1, "fill_kettle", 0.0, 1.0, 0.9)
        events.history *= MAX_HISTORY  # as after MAX_HISTORY key-steps, without sending them all
        message = events.keystep(3, "get_cup", 1.0, 2.0, 0.9)
        assert message.session != first and message.history == (3,) and message.index == 0
        assert wait_for(
            lambda: (row := service.core.streams.get("cam0")) is not None and row.session == message.session,
            10.0,
            lambda: events.heartbeat(None, 0, 0, 0.0),
        )
        assert service.core.streams["cam0"].checker.done == (3,)


def test_a_detector_the_checker_turns_away_ends_as_usual_and_only_the_checker_counts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What `stream-detect detector --help` and docs/live-pipeline.md promise, since the wire has no reply to a
    # detector (docs/wire-format.md, limits per peer): its exit status 0 says its sources ended, not that the checker
    # took its messages; a refusal is the checker's to count. Here every message of its stream is refused: another
    # live session holds cam0 (kept live for the whole run by the long stream timeout, without a heartbeat thread).
    video = write_noise_video(tmp_path / "clip.mp4")
    with running_checker(tmp_path, stream_timeout_s=60.0) as (ctx, service, _thread):
        holder = Publisher(connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0))
        assert wait_for(lambda: "cam0" in service.core.streams, 5.0, lambda: holder.send(beat("cam0", session="held")))
        held = service.core.streams["cam0"].session
        args = ["detector", "--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--fast",
                "--connect", service.events_endpoint]
        assert main(args) == 0
        # Its last heartbeat (sent three times) is refused too, so the count reaches at least that.
        assert wait_for(lambda: service.core.counts["stream_taken"] >= 3, 5.0), service.core.counts
        assert service.core.streams["cam0"].session == held and not service.core.streams["cam0"].ended
    assert capsys.readouterr().err.splitlines()[-1].startswith("cam0: 10 frames at ")  # its usual end line


def test_a_checker_that_goes_away_for_good_mid_run_ends_the_detector_with_exit_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The detector played on into a dead checker and exited 0: whatever it sent after the checker went was heard by
    # no one. The one checker failure a detector can see, its connection cut and not made again, is now the run's.
    video = write_noise_video(tmp_path / "clip.mp4", frames=90)  # 3 s, read in real time
    ctx = zmq.Context()
    stop = threading.Event()
    service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"), ctx)
    checker = threading.Thread(target=service.run, args=(stop,), daemon=True)
    checker.start()

    def stop_the_checker_once_it_hears_cam0() -> None:
        if wait_for(lambda: "cam0" in service.core.streams, 30.0):
            stop.set()  # its run ends and closes its sockets: the detector's connection is cut

    stopper = threading.Thread(target=stop_the_checker_once_it_hears_cam0, daemon=True)
    stopper.start()
    try:
        args = ["detector", "--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--realtime",
                "--connect", service.events_endpoint]
        with pytest.raises(SystemExit) as ended:
            main(args)
    finally:
        stop.set()
        stopper.join(5.0)
        checker.join(5.0)
        ctx.destroy(linger=0)
    assert ended.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith("cam0: ")  # its end line first, as in any run
    assert err[-1].startswith(f"error: --connect {service.events_endpoint}: the checker went away at ")
    assert err[-1].endswith(" and had not answered again when the run ended: what the streams sent since was not "
                            "checked")


def test_a_checker_frozen_mid_run_is_noticed_without_its_connection_closing(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    # A checker whose host vanished (power, cable) closes nothing: without pings the detector played on and exited 0.
    # A stopped process (SIGSTOP) answers nothing either, while its socket stays open.
    video = write_noise_video(tmp_path / "clip.mp4", frames=300)  # 10 s, read in real time
    inbound, outbound = f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"
    checker = subprocess.Popen([*STREAM_DETECT, "checker", "--graph", str(GRAPH), "--bind", inbound, "--publish",
                                outbound], stderr=subprocess.PIPE, text=True)
    ctx = zmq.Context()
    frozen: list[float] = []
    over = threading.Event()

    def freeze_the_checker_once_it_hears_cam0() -> None:
        if status_heard(ctx, outbound, "cam0", over, 30.0):
            checker.send_signal(signal.SIGSTOP)
            frozen.append(time.monotonic())

    try:
        assert checker.stderr is not None and checker.stderr.readline().startswith("checker: ")  # bound, ready
        freezer = threading.Thread(target=freeze_the_checker_once_it_hears_cam0, daemon=True)
        freezer.start()
        args = ["detector", "--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--realtime",
                "--connect", inbound]
        with pytest.raises(SystemExit) as ended:
            main(args)
    finally:
        over.set()
        checker.send_signal(signal.SIGCONT)
        checker.kill()
        checker.wait(10)
        ctx.destroy(linger=0)
    assert frozen, "the checker never published cam0's status"
    assert ended.value.code == 1
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"error: --connect {inbound}: the checker went away at ")


def test_the_device_stepper_carries_the_state_like_the_cpu_stepper() -> None:
    # ModelStepper is what a CUDA run steps with; on the CPU it must give what FastStepper gives, frame after frame.
    import torch

    from recognition.model import FastStepper, MiniROAD, MiniROADConfig, ModelStepper, make_stepper

    torch.manual_seed(0)
    model = MiniROAD(MiniROADConfig(12, 8, 8, 4, 0.0)).eval()
    frames = torch.randn(20, 12)
    device, fast = ModelStepper(model), make_stepper(model)
    assert isinstance(fast, FastStepper)
    for x in frames:
        assert torch.allclose(device.step(x), fast.step(x), atol=1e-5)



def test_a_stream_that_ends_while_its_checker_is_away_is_ended_at_the_checker_that_comes_back(tmp_path: Path) -> None:
    # An operator killed and restarted the checker while one detector served a short file and a camera: the file
    # ended meanwhile, its last heartbeats went to no checker, and the new checker never heard of that stream. The
    # view showed it stale, the dashboard "no word", no verdict ever came, and the detector ran on to exit status 0.
    parts = LoadedParts(None, *load_detector_for_stream(DETECTOR, None))
    config = ReaderConfig(fps=parts.checkpoint.fps, realtime=True)
    short = open_reader(str(write_noise_video(tmp_path / "short.mp4", frames=45)), config)  # 1.5 s
    long = open_reader(str(write_noise_video(tmp_path / "long.mp4", frames=1800)), config)  # 60 s: stopped before
    inbound, outbound = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"

    def start_checker() -> subprocess.Popen[str]:
        checker = subprocess.Popen([*STREAM_DETECT, "checker", "--graph", str(GRAPH), "--bind", inbound,
                                    "--publish", outbound], stderr=subprocess.PIPE, text=True)
        assert checker.stderr is not None and checker.stderr.readline().startswith("checker: ")  # bound, ready
        return checker

    ctx = zmq.Context()
    over, stop = threading.Event(), threading.Event()
    checker = start_checker()
    try:
        pipeline_config = PipelineConfig(detector=DetectorConfig(connect=inbound), stream_ids=("short", "long"))
        with build_pipeline(pipeline_config, parts=parts, readers=[short, long], ctx=ctx) as pipeline:
            runner = threading.Thread(target=pipeline.run, args=(stop,), daemon=True)
            runner.start()
            try:
                assert status_heard(ctx, outbound, "short", over, 30.0)
                checker.kill()
                checker.wait(10)
                assert wait_for(lambda: pipeline.streams[0].ended, 30.0)  # while no checker listened
                checker = start_checker()
                assert status_heard(ctx, outbound, "long", over, 15.0)
                # with the stream's measured stage times, not the zeros of a heartbeat that measured nothing
                assert status_heard(ctx, outbound, "short", over, 5.0,
                                    lambda status: status.ended and status.features_ms > 0)
            finally:
                stop.set()
                runner.join(15.0)
    finally:
        over.set()
        checker.kill()
        checker.wait(10)
        ctx.destroy(linger=0)
