"""A session whose detector was stopped (Ctrl-C, SIGTERM) is told from one whose source reached its end, by every
service apart: a real ``stream-detect detector`` process with two sources, one a short file that ends, the other a
long one still playing when the process is signalled; a checker served in this process, the terminal view's client
and the dashboard read what the checker publishes. Both sessions end with ``ended: true``; only the signalled one says
``stopped``, and the view, the dashboard and the checker's log say "stopped" of it and "ended" of the other. A run
told to stop by its stop event (the one-command run's way) says it likewise."""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

import pytest
import zmq

from streaming.checker.config import CheckerConfig
from streaming.checker.service import CheckerService
from streaming.demo.paths import default_demo_paths
from streaming.detector import DetectorConfig, PipelineConfig, build_pipeline, load_detector_for_stream
from streaming.detector.loading import LoadedParts
from streaming.messages import Heartbeat, Message
from streaming.readers import ReaderConfig, VideoReader, open_reader
from streaming.view.client import Viewer
from streaming.view.render import verdict
from streaming.view.state import ViewState
from tests.streaming.dashboard.serving import serving
from tests.streaming.helpers import STREAM_DETECT, tea_graph, wait_for, write_noise_video

GRAPH, DETECTOR = default_demo_paths()
STARTUP_S = 120.0  # the detector loads torch and its backbone on a busy 2-core machine


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_detector_stopped_by_a_signal_is_said_stopped_and_a_file_that_ended_ended(tmp_path: Path,
                                                                                      signum: int) -> None:
    short = write_noise_video(tmp_path / "short.mp4", frames=30)  # 1 s in real time: ends on its own
    long = write_noise_video(tmp_path / "long.mp4", frames=1800)  # 60 s: still playing at the signal
    ctx = zmq.Context()
    log: list[str] = []
    service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"), ctx,
                             log=lambda line, *_args, **_fields: log.append(line))
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
    args = ["detector", "--video", str(short), "--video", str(long), "--stream-id", "file", "--stream-id", "camera",
            "--graph", str(GRAPH), "--detector", str(DETECTOR), "--connect", service.events_endpoint]
    # SIGINT at its default, as from a terminal's Ctrl-C: a suite run in a script's background ignores it, and the
    # child would inherit that.
    proc = subprocess.Popen([*STREAM_DETECT, *args], stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    rows = viewer.state.streams
    try:
        with serving(service.alerts_endpoint, warn=lambda _line: None, say=lambda _line: None) as served:
            assert wait_for(lambda: "file" in rows and rows["file"].ended and "camera" in rows, STARTUP_S,
                            lambda: viewer.pump(20))
            assert proc.poll() is None and not rows["camera"].ended
            proc.send_signal(signum)
            assert proc.wait(30) == 128 + signum
            assert wait_for(lambda: rows["camera"].ended, 10.0, lambda: viewer.pump(20))

            def tiles() -> dict[str, dict[str, object]]:
                return {tile["stream"]: tile for tile in served.state()["tiles"]}

            assert wait_for(lambda: {"file", "camera"} <= tiles().keys() and tiles()["camera"]["state"] == "ended",
                            10.0)
            dashboard = tiles()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        viewer.close()
        stop.set()
        thread.join(5)
        ctx.destroy(linger=0)
    # Both said "ended", the camera stopped by hand as the file that played to its end.
    said = {sid: str(verdict(sid, row, viewer.state)) for sid, row in rows.items()}
    assert said["file"].startswith("file ended: ") and said["camera"].startswith("camera stopped: "), said
    changes = [line for line in log if line.startswith(("checker: file ", "checker: camera "))]
    assert any(line.startswith("checker: file ended (") for line in changes), changes
    assert any(line.startswith("checker: camera stopped (") and line.endswith(" not done by the stop)")
               for line in changes), changes
    assert (dashboard["file"]["state"], dashboard["file"].get("stopped")) == ("ended", False)
    assert (dashboard["camera"]["state"], dashboard["camera"].get("stopped")) == ("ended", True)
    # The checker's status, as the view's client decoded it off the wire.
    assert (rows["file"].ended, rows["file"].stopped) == (True, False)
    assert (rows["camera"].ended, rows["camera"].stopped, rows["camera"].lost) == (True, True, False)


class _Kept:
    """A sink that keeps what it is sent."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def send(self, message: Message) -> None:
        self.messages.append(message)


def test_a_run_told_to_stop_says_stopped_of_the_streams_it_cut_short_only(tmp_path: Path) -> None:
    # The one-command run stops its detector with a stop event, not a signal: the streams still running then end in
    # `FrameLoop.run`'s own path, whose last heartbeats must say `stopped` as a signal's do; one that reached its
    # file's end before the stop must not.
    parts = LoadedParts(None, *load_detector_for_stream(DETECTOR, None))
    config = ReaderConfig(fps=5.0, realtime=True)
    readers: list[VideoReader] = [open_reader(str(write_noise_video(tmp_path / "short.mp4", frames=30)), config),
                                  open_reader(str(write_noise_video(tmp_path / "long.mp4", frames=1800)), config)]
    kept: dict[str, _Kept] = {}
    stop = threading.Event()
    pipeline_config = PipelineConfig(detector=DetectorConfig(), stream_ids=("file", "camera"), publish=False)
    with build_pipeline(pipeline_config, parts=parts, readers=readers, ctx=zmq.Context.instance(),
                        sinks=[lambda sid: kept.setdefault(sid, _Kept())]) as pipeline:
        pipeline.run(stop, lambda stream: stop.set())  # told to stop once the file has ended
    last = {sid: [m for m in sink.messages if isinstance(m, Heartbeat)][-1] for sid, sink in kept.items()}
    assert (last["file"].ended, last["file"].stopped) == (True, False), last["file"]
    assert (last["camera"].ended, last["camera"].stopped) == (True, True), last["camera"]


def test_a_detector_stopped_while_its_checker_is_away_says_its_stop_went_unheard(tmp_path: Path) -> None:
    # Stopped by hand while the checker was down (restarting), the detector said its usual end lines and "interrupted
    # by SIGTERM: stopped", as if its streams' stop had been recorded: no checker ever heard it (nor what the
    # streams did since the checker went), so no view or dashboard would ever say those sessions stopped.
    long = write_noise_video(tmp_path / "long.mp4", frames=1800)  # 60 s in real time: still playing at the signal
    ctx = zmq.Context()
    service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"), ctx)
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    args = ["detector", "--video", str(long), "--stream-id", "camera", "--graph", str(GRAPH), "--detector",
            str(DETECTOR), "--connect", service.events_endpoint]
    proc = subprocess.Popen([*STREAM_DETECT, *args], stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: "camera" in service.core.streams, STARTUP_S)
        stop.set()  # the checker stops and closes its sockets: the detector's connection is cut
        thread.join(5)
        ctx.destroy(linger=0)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 128 + signal.SIGTERM  # a stop stays a stop
    lines = err.splitlines()
    assert lines[-1] == "interrupted by SIGTERM: stopped", lines
    assert lines[-2].startswith(f"warning: --connect {service.events_endpoint}: the checker went away at "), lines
    assert lines[-2].endswith(" and had not answered again when the run was stopped: what the streams sent since, "
                              "their stop included, was not checked"), lines
    assert lines[-3].startswith("camera: "), lines  # the stream's own end line first, as in any run
