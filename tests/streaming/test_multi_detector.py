"""One detector process serving several sources: batched through one model, each stream on its own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zmq

from graphs.common.errors import InputError, RunError
from streaming.demo.paths import default_demo_paths
from streaming.detector import (
    DetectorConfig,
    DetectorStream,
    EventPublisher,
    FrameLoop,
    PipelineConfig,
    StreamSource,
    build_pipeline,
    load_detector_for_stream,
    load_parts,
    open_videos,
    run_detectors,
    stream_ids_for,
)
from streaming.detector.sinks import JsonLinesSink
from streaming.detector.streams import DetectorStats, FrameObserver
from streaming.extractors import FeatureExtractor
from streaming.messages import Heartbeat
from streaming.readers import Frame, LiveReader, ReaderConfig, Source, VideoReader, open_reader
from streaming.transport import Publisher, bind
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.streaming.helpers import (
    STREAM_DETECT,
    KeptMessages,
    StalledStream,
    running_checker,
    silent_server,
    wait_for,
    write_noise_video,
)

GRAPH_FILE, DETECTOR = default_demo_paths()


def _videos(tmp_path: Path) -> list[Path]:
    # Two sizes: cameras need not agree, and the frames differ from one source to the other.
    return [write_noise_video(tmp_path / "a.mp4", frames=90, size=(64, 48)),
            write_noise_video(tmp_path / "b.mp4", frames=60, size=(80, 60))]


def keeping_probabilities(into: list[np.ndarray]) -> FrameObserver:
    """An ``on_frame`` observer that keeps each frame's class probabilities in ``into``."""
    def observe(_frame: Frame, _features: np.ndarray, probs: np.ndarray) -> None:
        into.append(probs)

    return observe


@pytest.mark.parametrize("threads", [1, 2], ids=["one-worker", "two-workers"])
def test_each_stream_gets_from_the_batched_detector_what_it_would_get_alone(tmp_path: Path, threads: int) -> None:
    # With two workers a stream's frames may go through either, side by side with the other stream's: its GRU
    # state must still step in order, frame after frame.
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    videos = _videos(tmp_path)
    config = ReaderConfig(fps=checkpoint.fps)
    ctx = zmq.Context()
    try:
        sock, endpoint = bind(ctx, zmq.PUB, "inproc://multi-test")
        publisher = Publisher(sock)
        alone: list[list[np.ndarray]] = []
        for k, video in enumerate(videos):
            seen: list[np.ndarray] = []
            stream = DetectorStream(open_reader(str(video), config), checkpoint, EventPublisher(publisher, f"alone{k}"),
                                    DetectorConfig(stream_id=f"alone{k}", connect=endpoint),
                                    on_frame=keeping_probabilities(seen))
            with stream.reader:
                FrameLoop([stream], extractor, model, checkpoint).run()  # a loop of one: batches of one frame
            alone.append(seen)
        readers: list[VideoReader] = [open_reader(str(video), config) for video in videos]
        together: list[list[np.ndarray]] = [[], []]
        streams = [
            DetectorStream(reader, checkpoint, EventPublisher(publisher, f"cam{k}"),
                           DetectorConfig(stream_id=f"cam{k}", connect=endpoint),
                           on_frame=keeping_probabilities(together[k]))
            for k, reader in enumerate(readers)
        ]
        stats = FrameLoop(streams, extractor, model, checkpoint, threads=threads).run()
        for reader in readers:
            reader.close()
    finally:
        ctx.destroy(linger=0)
    assert [s.frames for s in stats] == [len(seen) for seen in alone] == [15, 10]
    for mine, reference in zip(together, alone, strict=True):
        np.testing.assert_allclose(np.stack(mine), np.stack(reference), atol=1e-4)
    assert all(stream.ended and stream.stats.error == "" for stream in streams)


def test_a_stalled_source_holds_back_no_other(tmp_path: Path) -> None:
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    video = write_noise_video(tmp_path / "clip.mp4", frames=90)
    # The camera is given up 6 s after it stalls: the file's 15 frames take well under a second on an idle core.
    stall = ReaderConfig(fps=checkpoint.fps, stall_timeout_s=6.0, reopen_attempts=1, reopen_backoff_s=0.1,
                         reopen_backoff_max_s=0.1)
    with StalledStream(frames=5) as camera, running_checker(tmp_path) as (ctx, service, _thread):
        readers: list[VideoReader] = [LiveReader(Source("stream", camera.url, camera.url), stall),
                                      open_reader(str(video), ReaderConfig(fps=checkpoint.fps))]
        config = DetectorConfig(connect=service.events_endpoint)
        outcome: list[list[DetectorStats]] = []
        run = threading.Thread(target=lambda: outcome.append(
            run_detectors(readers, model, checkpoint, extractor, config, ["stalled", "file"], ctx=ctx)))
        start = time.monotonic()
        run.start()
        streams = service.core.streams
        assert wait_for(lambda: "file" in streams and streams["file"].ended, 30.0)
        file_done = time.monotonic() - start
        assert "stalled" in streams and not streams["stalled"].ended  # still waiting for its camera
        run.join(30.0)
        assert not run.is_alive()
    [(stalled, file)] = outcome
    assert file.frames == 15 and file.error == "" and file_done < 6.0
    assert "source lost" in stalled.error and stalled.frames <= 5


def test_a_source_dead_from_the_start_holds_back_no_other(tmp_path: Path) -> None:
    # A stream that accepts the connection and sends nothing, among several sources, ended the whole detector before
    # it started, after its open timeout (the sources were opened one after another): the file never ran.
    video = write_noise_video(tmp_path / "clip.mp4", frames=90)
    parts = load_parts(StreamSource(str(video), str(GRAPH_FILE), str(DETECTOR)))
    dead = ReaderConfig(open_timeout_s=3.0, reopen_attempts=1, reopen_backoff_s=0.1, reopen_backoff_max_s=0.1)
    said: list[str] = []
    kept: dict[str, KeptMessages] = {}
    log: list[str] = []
    with silent_server() as port, running_checker(tmp_path, log=log, stream_timeout_s=1.0) as (ctx, service, _):
        url = f"rtsp://127.0.0.1:{port}/live"
        sources = (StreamSource(url, str(GRAPH_FILE), str(DETECTOR), reader=dead),
                   StreamSource(str(video), str(GRAPH_FILE), str(DETECTOR), reader=ReaderConfig()))
        config = PipelineConfig(sources, DetectorConfig(connect=service.events_endpoint), ("dead", "file"))
        outcome: list[list[DetectorStats]] = []
        start = time.monotonic()
        pipeline = build_pipeline(config, parts=parts, sinks=[lambda sid: kept.setdefault(sid, KeptMessages())],
                                  ctx=ctx, warn=said.append)
        with pipeline:
            run = threading.Thread(target=lambda: outcome.append(pipeline.run(threading.Event())))
            run.start()
            streams = service.core.streams
            assert wait_for(lambda: "file" in streams and streams["file"].ended, 30.0)
            file_done = time.monotonic() - start
            run.join(30.0)
            assert not run.is_alive()
        # Known from its start heartbeat, then silent: lost, as a camera lost mid-run is, never ended.
        assert wait_for(lambda: "dead" in streams and streams["dead"].lost, 10.0)
        assert not streams["dead"].ended
    [(lost, file)] = outcome
    assert file.frames == 15 and file.error == "" and file_done < 3.0  # it waited for no open timeout
    never = f"--video {url}: cannot open stream (refused, not a video, or no answer within 3 s)"
    assert lost.frames == 0 and lost.error == f"{never}, 1 reopen attempts failed"
    assert said == [f"{never}; trying again (try 1 of 1)"]
    # Its one heartbeat is the start's: a last one, not ended, would bring the lost stream back as live.
    assert [type(m).__name__ for m in kept["dead"].messages] == ["Heartbeat"]
    assert not any(line.startswith("checker: dead back") for line in log), log


def test_a_stream_lost_mid_run_stays_lost_at_the_checker(tmp_path: Path) -> None:
    # A camera that gave frames, then stalled: the checker marked it lost, then its detector gave it up after its
    # reopen attempts and sent its last heartbeat, not `ended`, which showed it live again for a --stream-timeout.
    parts = load_parts(StreamSource("demo", str(GRAPH_FILE), str(DETECTOR)))
    lossy = ReaderConfig(stall_timeout_s=2.0, reopen_attempts=1, reopen_backoff_s=0.1, reopen_backoff_max_s=0.1)
    log: list[str] = []
    kept: dict[str, KeptMessages] = {}
    states: list[str] = []  # the stream's state in each status the checker published, as a viewer saw it

    def pump() -> None:
        viewer.pump(20)
        row = viewer.state.streams.get("cam")
        if row is not None:
            state = "ended" if row.ended else "lost" if row.lost else "live"
            if not states or states[-1] != state:
                states.append(state)

    outcome: list[list[DetectorStats]] = []
    with running_checker(tmp_path, log=log, stream_timeout_s=1.0) as (ctx, service, _):
        viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
        with StalledStream(frames=5) as camera:
            sources = (StreamSource(camera.url, str(GRAPH_FILE), str(DETECTOR), reader=lossy),)
            config = PipelineConfig(sources, DetectorConfig(connect=service.events_endpoint), ("cam",))
            pipeline = build_pipeline(config, parts=parts, sinks=[lambda sid: kept.setdefault(sid, KeptMessages())],
                                      ctx=ctx, warn=lambda _line: None)
            with pipeline:
                run = threading.Thread(target=lambda: outcome.append(pipeline.run(threading.Event())))
                run.start()
                assert wait_for(lambda: not run.is_alive(), 60.0, pump)
        # Long enough for the checker to have heard whatever the detector sent last, and to mark the stream lost.
        assert wait_for(lambda: "lost" in states and "cam" in service.core.streams
                        and service.core.streams["cam"].lost
                        and time.monotonic() - service.core.streams["cam"].last_heard > 2.0, 10.0, pump)
        viewer.close()
    [(stats,)] = outcome
    assert "reopen attempts failed" in stats.error and stats.frames >= 1, stats
    assert states == ["live", "lost"], states
    assert not any(line.startswith("checker: cam back") for line in log), log
    # What it sent after the stall: nothing. Every heartbeat counts frames it had delivered before it stalled.
    beats = [m for m in kept["cam"].messages if isinstance(m, Heartbeat)]
    assert not any(m.ended for m in beats) and beats[-1].frames <= stats.frames


def test_a_dead_source_alone_or_beside_a_missing_file_is_refused_at_once(tmp_path: Path) -> None:
    # Alone there is nothing else to run: refused as ever. Beside a file that is not there the typo is said before
    # the stream's open timeout (sources were opened in order, the stream's open waited first).
    _, checkpoint, _ = load_detector_for_stream(DETECTOR, None)
    dead = ReaderConfig(open_timeout_s=3.0)
    with silent_server() as port:
        url = f"rtsp://127.0.0.1:{port}/live"
        with pytest.raises(InputError, match=r"^--video cam4242: cannot open camera"):
            open_videos([StreamSource("cam4242", str(GRAPH_FILE), str(DETECTOR))], checkpoint)
        start = time.monotonic()
        with pytest.raises(InputError, match=r"missing\.mp4: file not found"):
            open_videos([StreamSource(url, str(GRAPH_FILE), str(DETECTOR), reader=dead),
                         StreamSource(str(tmp_path / "missing.mp4"), str(GRAPH_FILE), str(DETECTOR))], checkpoint)
        assert time.monotonic() - start < 3.0


def test_ctrl_c_while_a_dead_camera_is_retried_stops_the_detector_at_once(tmp_path: Path) -> None:
    video = write_noise_video(tmp_path / "long.mp4", frames=1800)  # 60 s in real time: still playing at the signal
    args = ["detector", "--video", str(video), "--video", "cam4242", "--stream-id", "file", "--stream-id", "dead",
            "--graph", str(GRAPH_FILE), "--detector", str(DETECTOR)]
    with running_checker(tmp_path) as (_ctx, service, _thread):
        # SIGINT at its default, as from a terminal's Ctrl-C (a suite run in the background ignores it).
        proc = subprocess.Popen([*STREAM_DETECT, *args, "--connect", service.events_endpoint], stderr=subprocess.PIPE,
                                text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert proc.stderr is not None
        try:
            first = [proc.stderr.readline(), proc.stderr.readline()]  # the camera's warning, then "ready"
            # The camera is retried for 7.75 s (5 tries, 0.25 s doubling to 4 s): the signal comes while it is.
            proc.send_signal(signal.SIGINT)
            stopped = time.monotonic()
            _, rest = proc.communicate(timeout=60)
            took = time.monotonic() - stopped
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    assert first[0].startswith("warning: --video cam4242: cannot open camera (") and \
        first[0].endswith("; trying again (try 1 of 5)\n"), first
    assert first[1].startswith("detector: 2 streams (file, dead)"), first
    assert proc.returncode == 130 and took < 5.0, rest
    assert rest.splitlines()[-1].startswith("interrupted by SIGINT"), rest
    assert "error:" not in rest and "Traceback" not in rest, rest


def test_stream_ids_are_one_per_source_and_sources_one_per_stream(tmp_path: Path) -> None:
    clip = write_noise_video(tmp_path / "clip.mp4")
    assert stream_ids_for(["cam0", str(clip)]) == ("cam0", "cam1")
    assert stream_ids_for(["cam0", "rtsp://10.0.0.5/live"], ["door", "bench"]) == ("door", "bench")
    with pytest.raises(InputError, match="--stream-id door is given to two sources"):
        stream_ids_for(["cam0", "cam1"], ["door", "door"])
    for same in (["cam0", "0"], ["/dev/video2", "cam2"], [str(clip), str(tmp_path / "." / "clip.mp4")],
                 ["demo", "demo:mistake"]):
        with pytest.raises(InputError, match=f"--video {same[1]} is given twice"):
            stream_ids_for(same, ["a", "b"])
    with pytest.raises(InputError, match="given once for 2 --video sources"):
        stream_ids_for(["cam0", "cam1"], ["door"])
    with pytest.raises(InputError, match="--stream-id 'no spaces'"):
        stream_ids_for(["cam0"], ["no spaces"])


class _FailingBackbone(FeatureExtractor):
    """The demo's backbone, failing from its ``fail_at``-th batch on (a backbone that runs out of memory)."""

    def __init__(self, extractor: FeatureExtractor, fail_at: int) -> None:
        self.extractor, self.fail_at, self.calls = extractor, fail_at, 0
        self.name, self.dim, self.input_size = extractor.name, extractor.dim, extractor.input_size

    def prepare(self, image: np.ndarray) -> np.ndarray:
        return self.extractor.prepare(image)

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.calls >= self.fail_at:
            raise RuntimeError("backbone out of memory")
        return self.extractor(frames)


def test_a_failing_backbone_in_a_worker_stops_the_loop_with_its_error(tmp_path: Path) -> None:
    # The features run in worker threads: their error must reach the caller, and every stream still end. Neither an
    # InputError nor a RunError, it comes as the RunError of an internal failure, caused by it (one line, no traceback).
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    backbone = _FailingBackbone(extractor, fail_at=8)  # after the warm-up's batch sizes, a few real batches
    config = ReaderConfig(fps=checkpoint.fps)
    readers: list[VideoReader] = [open_reader(str(video), config) for video in _videos(tmp_path)]
    ctx = zmq.Context()
    try:
        sock, endpoint = bind(ctx, zmq.PUB, "inproc://failing-test")
        publisher = Publisher(sock)
        streams = [DetectorStream(reader, checkpoint, EventPublisher(publisher, f"cam{k}"),
                                  DetectorConfig(stream_id=f"cam{k}", connect=endpoint))
                   for k, reader in enumerate(readers)]
        with pytest.raises(RunError, match="internal failure of the detector.*RuntimeError: backbone out of memory") \
                as failed:
            FrameLoop(streams, backbone, model, checkpoint, threads=2).run()
        assert isinstance(failed.value.__cause__, RuntimeError)
    finally:
        for reader in readers:
            reader.close()
        ctx.destroy(linger=0)
    assert all(stream.ended for stream in streams)
    assert 1 <= sum(stream.stats.frames for stream in streams) < 25


def test_a_source_that_fails_is_told_at_once_while_the_other_streams_go_on(tmp_path: Path) -> None:
    # One camera's damaged video died a few seconds in; its error line waited for the other cameras to end, which
    # for live cameras is never.
    from tests.streaming.helpers import write_damaged_video

    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    damaged = open_reader(str(write_damaged_video(tmp_path / "damaged.mp4")), ReaderConfig(fps=checkpoint.fps))
    slow = open_reader(str(write_noise_video(tmp_path / "long.mp4", frames=600)),
                       ReaderConfig(fps=checkpoint.fps, realtime=True))  # two minutes in real time
    said: list[str] = []
    stop = threading.Event()
    ctx = zmq.Context()
    try:
        sock, endpoint = bind(ctx, zmq.PUB, "inproc://failing-source")
        publisher = Publisher(sock)
        streams = [DetectorStream(reader, checkpoint, EventPublisher(publisher, sid),
                                  DetectorConfig(stream_id=sid, connect=endpoint))
                   for sid, reader in (("bad", damaged), ("good", slow))]

        def warn(line: str) -> None:
            said.append(line)
            stop.set()  # told while "good" runs: the test ends here

        FrameLoop(streams, extractor, model, checkpoint, warn=warn).run(stop)
    finally:
        damaged.close()
        slow.close()
        ctx.destroy(linger=0)
    [line] = said
    assert line.startswith("bad: --video ") and "damaged.mp4: cannot decode source frame" in line
    assert line.endswith("; this stream has ended, the other stream goes on")
    assert streams[1].stats.frames < 600 and not streams[1].stats.error


def test_a_sink_whose_reader_left_ends_the_loop_with_its_broken_pipe(tmp_path: Path) -> None:
    # JSON lines into a pipe whose reader left (`| head`) failed in a worker: the loop raised it as an internal failure
    # (exit status 1 and an error line), where a command ends quietly with 141 (Fanout passes it on for that).
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    read, write = os.pipe()
    out = os.fdopen(write, "w")
    reader = open_reader(str(write_noise_video(tmp_path / "long.mp4", frames=300)), ReaderConfig(fps=checkpoint.fps))
    left = threading.Event()

    def leave(*_args: object) -> None:  # on a worker's first frame: the first heartbeat went in
        if not left.is_set():
            left.set()
            os.close(read)

    stream = DetectorStream(reader, checkpoint, EventPublisher(JsonLinesSink(out), "cam0"),
                            DetectorConfig(stream_id="cam0"), on_frame=leave)
    try:
        with pytest.raises(BrokenPipeError):
            FrameLoop([stream], extractor, model, checkpoint, threads=1).run()
    finally:
        reader.close()
        with contextlib.suppress(OSError):
            out.close()
    assert left.is_set() and stream.ended


class _Refuses:
    """A sink with a defect: it raises on every message."""

    def send(self, message: object) -> None:
        raise ValueError("no room")


class _Keeps:
    """A sink that keeps what it is sent."""

    def __init__(self) -> None:
        self.messages: list[object] = []

    def send(self, message: object) -> None:
        self.messages.append(message)


def test_a_failing_sink_beside_another_is_said_through_the_run_s_warnings(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # The `Fanout` that a stream's several sinks go through wrote its failure line straight on stderr, past the
    # detector's queued log (`warn`): a stderr that took nothing held the worker that delivered the frame.
    from streaming.detector import PipelineConfig, build_pipeline
    from streaming.detector.loading import LoadedParts

    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    reader = open_reader(str(write_noise_video(tmp_path / "a.mp4", frames=30)), ReaderConfig(fps=checkpoint.fps))
    warned: list[str] = []
    kept = _Keeps()
    config = PipelineConfig(detector=DetectorConfig(), stream_ids=("cam0",), publish=False)
    with build_pipeline(config, parts=LoadedParts(None, model, checkpoint, extractor), readers=[reader],
                        sinks=[lambda _: kept, lambda _: _Refuses()],
                        warn=warned.append) as pipeline:
        pipeline.run()
    assert kept.messages and warned and warned[0].startswith("_Refuses failed on a "), warned
    assert "_Refuses" not in capsys.readouterr().err
