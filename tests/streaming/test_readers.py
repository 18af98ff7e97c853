"""Video readers on real files written by OpenCV: sampling at the detector's rate, both readers, live drops."""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from graphs.common.errors import InputError
from streaming.readers import (
    DecordReader,
    LiveReader,
    OpenCVFileReader,
    ReaderConfig,
    Source,
    camera_hint,
    open_reader,
    parse_source,
    quiet_codec_logs,
    sample_indices,
)
from tests.streaming.helpers import StalledStream, write_damaged_video, write_noise_video, write_truncated_video

N_FRAMES, SOURCE_FPS = 60, 30.0


@pytest.fixture(scope="module")
def numbered_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 s, 30 fps video whose frame k shows k in binary as 6 black/white stripes (robust to compression)."""
    path = tmp_path_factory.mktemp("video") / "numbered.mp4"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), SOURCE_FPS, (64, 48))
    assert writer.isOpened()
    for k in range(N_FRAMES):
        bits = (k >> np.arange(6)) & 1  # (6,)
        writer.write(_stripes(bits))
    writer.release()
    return path


def _stripes(bits: np.ndarray) -> np.ndarray:
    image = np.zeros((48, 64, 3), dtype=np.uint8)
    for i, bit in enumerate(bits.tolist()):
        image[:, 8 + 8 * i : 16 + 8 * i] = 255 * bit
    return image


def frame_number(image: np.ndarray) -> int:
    w = image.shape[1] / 64  # images may be resized
    levels = [image[:, int((10 + 8 * i) * w) : int((14 + 8 * i) * w)].mean() for i in range(6)]
    return sum(1 << i for i, level in enumerate(levels) if level > 127)


@pytest.mark.parametrize("reader_cls", [DecordReader, OpenCVFileReader], ids=["decord", "opencv"])
def test_file_is_sampled_at_the_detector_rate_and_ends_cleanly(numbered_video: Path, reader_cls: type) -> None:
    if reader_cls is DecordReader:
        pytest.importorskip("decord", reason="decord has no wheel for this platform")
    reader = reader_cls(Source("file", str(numbered_video), str(numbered_video)), ReaderConfig(fps=10.0))
    frames = list(reader)
    reader.close()
    assert len(frames) == 20  # 2 s at 10 fps
    assert [frame_number(f.image) for f in frames] == list(range(0, 60, 3))
    assert frames[0].image.shape == (48, 64, 3) and frames[0].image.dtype == np.uint8
    assert [f.index for f in frames] == list(range(20)) and frames[5].time == pytest.approx(0.5)
    assert reader.dropped == 0 and reader.error == ""


@pytest.mark.parametrize("reader_cls", [DecordReader, OpenCVFileReader], ids=["decord", "opencv"])
def test_a_damaged_file_ends_early_with_an_error_naming_it(tmp_path: Path, reader_cls: type) -> None:
    # decord raised its DECORDError out of read() (a traceback); OpenCV ended at the damage as if the file
    # were over, so the run exited 0 having silently skipped most of the video.
    if reader_cls is DecordReader:
        pytest.importorskip("decord", reason="decord has no wheel for this platform")
    path = write_damaged_video(tmp_path / "damaged.mp4")
    try:
        reader = reader_cls(Source("file", str(path), str(path)), ReaderConfig(fps=30.0))
    except InputError as err:
        # decord's decoder thread reads ahead, so (on a busy machine) the damage can fail even its first batch:
        # the reader then refuses the file when it opens, and --reader auto goes on with OpenCV.
        assert reader_cls is DecordReader and f"--video {path}: decord cannot decode it" in str(err)
        return
    frames = list(reader)
    assert reader.read() is None  # stays ended
    reader.close()
    assert 1 <= len(frames) < 160  # of 240, damaged from about 140 on: at most what came before the damage
    assert reader.error.startswith(f"--video {path}: cannot decode source frame") and "damaged" in reader.error
    assert "\n" not in reader.error and ".cc:" not in reader.error  # one line, no native log prefix


@pytest.mark.parametrize("suffix", [".avi", ".mkv"])
@pytest.mark.parametrize("reader_cls", [DecordReader, OpenCVFileReader], ids=["decord", "opencv"])
def test_a_truncated_file_ends_the_same_way_with_both_readers(tmp_path: Path, reader_cls: type, suffix: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # decord counts the frames it finds, so it took a file cut in half for a complete one: the stream "ended" and the
    # checker called the steps in the missing half never done. OpenCV's reader stopped at the cut with this error.
    # A Matroska file stores a duration, not a count, and that duration covers its audio too: a complete file whose
    # audio runs on looks cut short by it, so there the early end is a warning, and the stream ends at it.
    if reader_cls is DecordReader:
        pytest.importorskip("decord", reason="decord has no wheel for this platform")
    path = write_truncated_video(tmp_path / f"cut{suffix}", frames=120)
    reader = reader_cls(Source("file", str(path), str(path)), ReaderConfig(fps=10.0))
    frames = list(reader)
    assert reader.read() is None  # stays ended
    reader.close()
    assert 10 <= len(frames) < 30  # of 40 at 10 fps: what came before the cut
    warned = capsys.readouterr().err
    if suffix == ".avi":
        assert re.fullmatch(rf"--video {re.escape(str(path))}: cannot decode source frame \d+ of 120, the file is "
                            "damaged or truncated", reader.error), reader.error
        assert warned == ""
    else:
        assert reader.error == ""
        assert re.fullmatch(rf"warning: --video {re.escape(str(path))}: its video ends at \d+\.\d s, before the "
                            r"4\.0 s its container gives \(a file cut short, or an audio track longer than the "
                            r"video\); the stream ends there\n", warned), warned


@pytest.mark.parametrize("suffix", [".avi", ".mkv"])
@pytest.mark.parametrize("reader_cls", [DecordReader, OpenCVFileReader], ids=["decord", "opencv"])
def test_a_complete_avi_or_mkv_ends_cleanly(tmp_path: Path, reader_cls: type, suffix: str) -> None:
    # The other side of the truncation check: the header's length (a count, or a duration) matches what is there.
    if reader_cls is DecordReader:
        pytest.importorskip("decord", reason="decord has no wheel for this platform")
    path = write_noise_video(tmp_path / f"whole{suffix}", 120, fourcc="MJPG" if suffix == ".avi" else "XVID")
    reader = reader_cls(Source("file", str(path), str(path)), ReaderConfig(fps=10.0))
    frames = list(reader)
    reader.close()
    assert len(frames) == 40 and reader.error == ""


def test_both_readers_deliver_the_same_frames_resized(numbered_video: Path) -> None:
    pytest.importorskip("decord", reason="decord has no wheel for this platform")
    config = ReaderConfig(fps=15.0, width=32, height=24)
    a = [f.image for f in DecordReader(Source("file", str(numbered_video), ""), config)]
    b = [f.image for f in OpenCVFileReader(Source("file", str(numbered_video), ""), config)]
    assert len(a) == len(b) == 30 and a[0].shape == (24, 32, 3)
    assert [frame_number(x) for x in a] == [frame_number(x) for x in b]


def test_sampling_picks_the_source_frame_on_screen() -> None:
    assert sample_indices(10, 10.0, 5.0).tolist() == [0, 2, 4, 6, 8]
    assert sample_indices(4, 10.0, 20.0).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_sources_are_classified_by_form() -> None:
    assert parse_source("cam0") == Source("camera", 0, "cam0")
    assert parse_source("2").kind == "camera"
    assert parse_source("/dev/video1") == Source("camera", "/dev/video1", "/dev/video1")
    assert parse_source("rtsp://host/stream").kind == "stream"
    assert parse_source("clip.mp4").kind == "file"


def test_unopenable_video_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.mp4"
    bad.write_text("this is not a video")
    with pytest.raises(InputError, match="notes.mp4"):
        open_reader(str(bad), ReaderConfig())
    with pytest.raises(InputError, match="not found"):
        open_reader(str(tmp_path / "missing.mp4"), ReaderConfig())


def test_live_source_drops_frames_instead_of_falling_behind(numbered_video: Path) -> None:
    # A file opened as a "stream" is produced much faster than the 10 fps consumer takes it.
    source = Source("stream", str(numbered_video), str(numbered_video))
    reader = LiveReader(source, ReaderConfig(fps=10.0, reopen_attempts=0))
    frames = list(reader)
    reader.close()
    assert 1 <= len(frames) < N_FRAMES
    assert reader.dropped > 0 and reader.dropped + len(frames) <= N_FRAMES
    numbers = [frame_number(f.image) for f in frames]
    assert numbers == sorted(numbers)  # always the newest frame, never an old one


def test_lost_live_source_is_reopened_with_bounded_backoff(numbered_video: Path, tmp_path: Path) -> None:
    opened: list[object] = []

    def open_capture(target: object) -> cv2.VideoCapture:
        # First the real video; after it ends every reopen hits a source that is gone.
        opened.append(target)
        return cv2.VideoCapture(str(numbered_video) if len(opened) == 1 else str(tmp_path / "gone.mp4"))

    config = ReaderConfig(
        fps=100.0, reopen_attempts=3, reopen_backoff_s=0.01, reopen_backoff_max_s=0.02, stall_timeout_s=0.05
    )
    reader = LiveReader(Source("stream", "rtsp://camera", "rtsp://camera"), config, open_capture=open_capture)
    frames = list(reader)
    reader.close()
    assert frames and reader.reopens == 3 and len(opened) == 4
    assert "3 reopen attempts failed" in reader.error


def test_a_source_that_does_not_open_at_first_is_retried_when_told_to(numbered_video: Path, tmp_path: Path) -> None:
    # Among several sources a camera that did not open at start stopped the run; told to retry it, the reader opens
    # on its grab thread (the constructor does not wait), says the failure once, and plays the camera once it opens.
    opened: list[object] = []

    def open_capture(target: object) -> cv2.VideoCapture:
        opened.append(target)  # twice not there, then plugged in
        return cv2.VideoCapture(str(numbered_video) if len(opened) == 3 else str(tmp_path / "gone.mp4"))

    config = ReaderConfig(fps=100.0, reopen_attempts=3, reopen_backoff_s=0.01, reopen_backoff_max_s=0.02,
                          stall_timeout_s=0.05)
    warnings: list[str] = []
    reader = LiveReader(Source("stream", "rtsp://camera", "rtsp://camera"), config, open_capture=open_capture,
                        warn=warnings.append, retry_first_open=True)
    frames = list(reader)
    reader.close()
    assert frames and len(opened) == 6 and reader.reopens == 5  # 2 tries to open it, then 3 once the file ended
    assert warnings == ["--video rtsp://camera: cannot open stream (refused, not a video, or no answer within 10 s); "
                        "trying again (try 1 of 3)"]
    assert reader.error == "--video rtsp://camera: source lost, 3 reopen attempts failed"
    # One that never opens ends as a refusal would have said it, after its tries; a number no camera has is a typo.
    never = LiveReader(Source("camera", 4242, "cam4242"), config, open_capture=lambda _t: cv2.VideoCapture(),
                       warn=warnings.append, retry_first_open=True)
    assert list(never) == [] and never.error.startswith("--video cam4242: cannot open camera")
    assert never.error.endswith(", 3 reopen attempts failed")  # after what to look at (`camera_hint`)
    never.close()
    with pytest.raises(InputError, match=r"^--video cam99999999999999999999: cannot open camera \(camera numbers"):
        open_reader("cam99999999999999999999", config, retry_first_open=True)


def test_a_stalled_network_stream_is_noticed_within_the_stall_timeout() -> None:
    # OpenCV's own read timeout is 30 s: a network camera whose link hung kept the reader waiting that long
    # before the stall (stall_timeout_s) and reopen logic could act.
    config = ReaderConfig(fps=100.0, stall_timeout_s=0.5, reopen_attempts=1, reopen_backoff_s=0.01,
                          reopen_backoff_max_s=0.01)
    with StalledStream(frames=5) as stream:
        start = time.monotonic()
        reader = LiveReader(Source("stream", stream.url, stream.url), config)
        frames = list(reader)
        reader.close()
        elapsed = time.monotonic() - start
    assert 1 <= len(frames) <= 5
    assert elapsed < 5.0 and "1 reopen attempts failed" in reader.error


class _PlainHTTP:
    """Python's own HTTP server on 127.0.0.1 serving one file, without Range support (``python3 -m http.server``):
    FFmpeg opens an mp4 there (its index is read) but cannot seek back to the frames, so it reads none. Counts GETs."""

    def __init__(self, path: Path) -> None:
        import functools
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

        owner = self

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                owner.requests += 1
                super().do_GET()

            def log_message(self, *args: object) -> None:
                pass

        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(path.parent)))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/{path.name}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> _PlainHTTP:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5.0)


def test_a_stream_that_opens_but_never_gives_a_frame_is_given_up(tmp_path: Path) -> None:
    # An open that succeeded reset the reopen budget, so "opens, gives nothing, reopens" went on for ever, silently
    # (review 16: 37 GETs in 90 s, not one line on stderr).
    video = write_noise_video(tmp_path / "served.mp4", frames=120)  # larger than FFmpeg's read buffer
    config = ReaderConfig(fps=100.0, stall_timeout_s=0.2, reopen_attempts=3, reopen_backoff_s=0.01,
                          reopen_backoff_max_s=0.02)
    warnings: list[str] = []
    with _PlainHTTP(video) as server:
        reader = LiveReader(Source("stream", server.url, server.url), config, warn=warnings.append)  # it opens
        guard = threading.Timer(20.0, reader.close)  # the old reader never ended: fail, not hang
        guard.start()
        frames = list(reader)
        guard.cancel()
        reader.close()
        requests = server.requests
    assert frames == [] and reader.grabbed == 0
    assert reader.error.startswith(f"--video {server.url}: opened 4 times but gave no frame (3 reopen attempts)")
    assert reader.reopens == 3 and requests >= 4
    # One line per reopen would flood the log: the first is said at once, the next ones at most every 10 s.
    assert warnings == [f"--video {server.url}: no frame for 0.2 s; reopening it (try 1 of 3)"]


class _BurstCapture:
    """A source that gives ``frames`` frames at once, then nothing (open, or closed with ``frames=-1``)."""

    def __init__(self, frames: int) -> None:
        self._left = frames

    def isOpened(self) -> bool:  # noqa: N802 - the cv2.VideoCapture interface
        return self._left >= 0

    def grab(self) -> bool:
        if self._left <= 0:
            return False
        self._left -= 1
        return True

    def retrieve(self) -> tuple[bool, np.ndarray]:
        return True, np.zeros((8, 8, 3), dtype=np.uint8)

    def release(self) -> None:
        pass


def test_a_flapping_source_keeps_its_budget_and_is_said_at_most_every_10_s() -> None:
    # Each reopen that brings frames back restores the budget (2 tries), so six opens that each give frames never end
    # the stream; the two that fail after the last frames do. Each reopen is said, at most one line every 10 s: the
    # clock jumps 4 s at each open, so every third reopen is said, with the count of those not said.
    opened: list[int] = []

    def open_capture(_target: object) -> _BurstCapture:
        opened.append(1)
        return _BurstCapture(3 if len(opened) <= 6 else -1)

    config = ReaderConfig(fps=100.0, stall_timeout_s=0.05, reopen_attempts=2, reopen_backoff_s=0.01,
                          reopen_backoff_max_s=0.02)
    warnings: list[str] = []
    reader = LiveReader(Source("camera", 0, "cam0"), config, open_capture=open_capture,
                        clock=lambda: time.monotonic() + 4.0 * len(opened), warn=warnings.append)
    guard = threading.Timer(20.0, reader.close)
    guard.start()
    frames = list(reader)
    guard.cancel()
    reader.close()
    assert frames and reader.grabbed == 18 and len(opened) == 8
    assert reader.error == "--video cam0: source lost, 2 reopen attempts failed"
    assert warnings == [
        "--video cam0: no frame for 0.05 s; reopening it (try 1 of 2)",
        "--video cam0: no frame for 0.05 s; reopening it (try 1 of 2; 2 reopens since the last such line)",
        "--video cam0: it did not open; reopening it (try 2 of 2; 2 reopens since the last such line)",
    ]


def test_close_releases_a_consumer_waiting_on_a_stalled_stream() -> None:
    # read() waited for the grab thread alone, so a detector blocked in it did not see close() (Ctrl-C) until
    # the stream's read timed out; close() also released the capture under the grab thread's read.
    with StalledStream(frames=5) as stream:
        reader = LiveReader(Source("stream", stream.url, stream.url), ReaderConfig(fps=100.0, stall_timeout_s=30.0))
        closer = threading.Timer(0.5, reader.close)
        start = time.monotonic()
        closer.start()
        frames = list(reader)
        elapsed = time.monotonic() - start
        closer.join(5.0)
    assert 1 <= len(frames) <= 5 and elapsed < 3.0


def test_a_live_reader_left_open_does_not_abort_the_interpreters_exit(tmp_path: Path) -> None:
    # A camera's grab thread is always inside OpenCV; a daemon thread coming back from it while the interpreter
    # finalises is ended by pthread_exit, whose unwinding through OpenCV's C++ frames aborted the process with
    # "terminate called without an active exception" (exit 134) whenever a reader was not closed.
    import subprocess
    import sys

    video = write_noise_video(tmp_path / "camera.mp4", frames=900, size=(320, 240))
    script = (
        "import sys\n"
        "from streaming.readers import LiveReader, ReaderConfig, Source\n"
        f"reader = LiveReader(Source('camera', {str(video)!r}, 'cam'), ReaderConfig(fps=10.0))\n"
        "frames = [reader.read() for _ in range(3)]\n"
        "print(sum(f is not None for f in frames))\n"
        "sys.exit(0)\n"  # never closed
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[2])
    assert (done.returncode, done.stdout) == (0, "3\n"), done.stderr[-500:]
    assert "terminate called" not in done.stderr


def test_odd_video_values_are_named_for_what_they_are(tmp_path: Path) -> None:
    # A camera index beyond a C long raised cv2.error (a traceback); a folder or a device was "file not found".
    with pytest.raises(InputError, match=r"^--video cam99999999999999999999: cannot open camera "
                                         r"\(camera numbers stop at 2147483647\)$"):
        open_reader("cam99999999999999999999", ReaderConfig())
    with pytest.raises(InputError, match=f"--video {tmp_path}: a folder, expected a video file"):
        open_reader(str(tmp_path), ReaderConfig())
    with pytest.raises(InputError, match="--video /dev/null: a character device, expected a video file"):
        open_reader("/dev/null", ReaderConfig())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="camera nodes are /dev/videoN on Linux only")
def test_a_camera_that_does_not_open_says_what_to_look_at(tmp_path: Path) -> None:
    # "cannot open camera" was all: no camera, the wrong number, a node the user may not open and a busy camera
    # read the same, and the line said nothing to do.
    with pytest.raises(InputError, match=r"--video cam4242: cannot open camera \(no /dev/video4242[:;] "):
        open_reader("cam4242", ReaderConfig())
    assert "this machine shows no camera; is one plugged in" in camera_hint(0, tmp_path)
    for name in ("video10", "video2", "video3", "vide", "video2-meta"):
        (tmp_path / name).touch()
    assert camera_hint(0, tmp_path) == (f" (no {tmp_path}/video0; cameras here: {tmp_path}/video2, {tmp_path}/video3, "
                                        f"{tmp_path}/video10: --video cam2 is the first)")
    assert camera_hint(2, tmp_path).startswith(f" ({tmp_path}/video2 is there but did not open: another program")


def test_a_file_decord_cannot_decode_falls_back_to_opencv(tmp_path: Path) -> None:
    # decord opens 4x4 mp4v files but cannot decode them; the first batch was decoded on the first read, so the
    # run ended with "the file is damaged" although OpenCV ("auto" falls back to it) reads the file fine.
    pytest.importorskip("decord", reason="decord has no wheel for this platform")
    path = write_noise_video(tmp_path / "tiny.mp4", frames=30, size=(4, 4))
    with pytest.raises(InputError, match="tiny.mp4: decord cannot decode it"):
        DecordReader(Source("file", str(path), str(path)), ReaderConfig(fps=30.0))
    reader = open_reader(str(path), ReaderConfig(fps=30.0))
    frames = list(reader)
    reader.close()
    assert reader.name == "opencv" and len(frames) == 30 and reader.error == ""


class _PacedCapture:
    """A 22 fps camera stand-in: each grab returns when the camera's next frame is due, numbered in its pixels."""

    period = 0.045  # not a divisor of the consumer's period: frames arrive at every phase of its slots

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self._next = time.monotonic()

    def isOpened(self) -> bool:  # noqa: N802 - the cv2.VideoCapture interface
        return True

    def grab(self) -> bool:
        self._next += self.period
        time.sleep(max(0.0, self._next - time.monotonic()))
        self.arrivals.append(time.monotonic())
        return True

    def retrieve(self) -> tuple[bool, np.ndarray]:
        return True, np.full((8, 8, 3), len(self.arrivals) % 256, dtype=np.uint8)

    def release(self) -> None:
        pass


def test_an_on_time_consumer_gets_fresh_frames_from_a_live_source() -> None:
    # At 8 fps from a 22 fps camera, the newest frame at a slot's start has waited up to 45 ms (23 on average); the
    # reader waits for the next one instead, so a delivered frame is as old as the hand-over (the bound is generous).
    camera = _PacedCapture()
    reader = LiveReader(Source("camera", 0, "cam0"), ReaderConfig(fps=8.0), open_capture=lambda _: camera)
    ages = []
    try:
        for _ in range(20):
            frame = reader.read()
            assert frame is not None
            ages.append(time.monotonic() - camera.arrivals[int(frame.image[0, 0, 0]) - 1])
    finally:
        reader.close()
    assert float(np.mean(ages)) < 0.01, ages


def test_a_live_sources_slots_count_from_its_first_read() -> None:
    # A frame loop starts its cameras' reads spread over one slot so that their frames reach the backbone one after
    # the other; slots counted from when the reader was opened put every camera back in step from the second frame.
    camera = _PacedCapture()
    camera.period = 0.005  # a fast camera: a frame is at hand whenever a slot begins
    reader = LiveReader(Source("camera", 0, "cam0"), ReaderConfig(fps=10.0), open_capture=lambda _: camera)
    try:
        time.sleep(0.06)  # the scenario: this camera's turn comes 60 ms after the readers were opened
        first_read = time.monotonic()
        arrivals = []
        for _ in range(5):
            frame = reader.read()
            assert frame is not None
            arrivals.append(frame.arrived)
    finally:
        reader.close()
    # Each later frame's lateness in its own slot (the first is the newest at hand, up to a slot old).
    offsets = np.array(arrivals[1:]) - first_read - 0.1 * np.arange(1, 5)
    assert (offsets > -0.005).all() and (offsets < 0.09).all(), offsets  # in its slot: before the fix, -0.06


def _full_decode(path: Path) -> np.ndarray:
    """Every frame of a video, decoded to colour by OpenCV: ``(N, H, W, 3)`` RGB."""
    cap = cv2.VideoCapture(str(path))
    frames = []
    while (got := cap.read())[0]:
        frames.append(cv2.cvtColor(got[1], cv2.COLOR_BGR2RGB))
    cap.release()
    return np.stack(frames)


class _CameraPacedVideo:
    """A real OpenCV capture of a video file whose frames come off at a camera's pace (one every ``period`` s)."""

    def __init__(self, path: Path, period: float) -> None:
        self._cap = cv2.VideoCapture(str(path))
        self.period = period
        self._next = time.monotonic()

    def isOpened(self) -> bool:  # noqa: N802 - the cv2.VideoCapture interface
        return bool(self._cap.isOpened())

    def grab(self) -> bool:
        self._next += self.period
        time.sleep(max(0.0, self._next - time.monotonic()))
        return bool(self._cap.grab())

    def retrieve(self) -> tuple[bool, np.ndarray]:
        return self._cap.retrieve()

    def release(self) -> None:
        self._cap.release()


def test_a_live_source_converts_to_colour_only_the_frames_it_delivers(tmp_path: Path) -> None:
    # The grab thread decoded every frame to colour (read()) although a 5 fps detector takes one in six from a 30 fps
    # camera: now every frame is grabbed, and only the delivered ones are retrieved, with the pixels of a full decode.
    path = write_noise_video(tmp_path / "camera.mp4", frames=60)
    full = _full_decode(path)
    capture = _CameraPacedVideo(path, period=0.01)
    reader = LiveReader(Source("camera", 0, "cam0"), ReaderConfig(fps=20.0, reopen_attempts=0),
                        open_capture=lambda _: capture)
    frames = list(reader)
    reader.close()
    assert reader.grabbed == len(full) == 60
    assert 4 <= len(frames) <= 15 and reader.retrieved == len(frames)  # about 0.6 s at 20 fps
    taken = [int(np.flatnonzero((full == f.image).all(axis=(1, 2, 3)))[0]) for f in frames]  # each is a source frame
    assert all(np.array_equal(f.image, full[j]) for f, j in zip(frames, taken, strict=True))
    assert taken == sorted(set(taken)) and reader.dropped == 60 - len(frames)  # every frame not delivered


@pytest.mark.parametrize("reader_cls", [DecordReader, OpenCVFileReader], ids=["decord", "opencv"])
def test_a_file_reader_delivers_the_sampled_frames_of_a_full_decode(tmp_path: Path, reader_cls: type) -> None:
    path = write_noise_video(tmp_path / "noise.mp4", frames=60)
    if reader_cls is DecordReader:
        decord = pytest.importorskip("decord", reason="decord has no wheel for this platform")
        full = decord.VideoReader(str(path), ctx=decord.cpu(0)).get_batch(list(range(60))).asnumpy()
    else:
        full = _full_decode(path)
    reader = reader_cls(Source("file", str(path), str(path)), ReaderConfig(fps=5.0))
    frames = [f.image for f in reader]
    reader.close()
    indices = sample_indices(60, 30.0, 5.0)  # every sixth frame
    assert len(frames) == len(indices) == 10
    assert all(np.array_equal(image, full[j]) for image, j in zip(frames, indices, strict=True))


def test_the_codec_logs_are_silenced_with_opencv_4_as_with_opencv_5(monkeypatch: pytest.MonkeyPatch) -> None:
    # pyproject.toml lets in opencv-python-headless>=4.10: OpenCV 4's module has the log level as cv2.setLogLevel
    # only (no cv2.utils.logging, up to 4.12), and a site keeping OpenCV 4 got an AttributeError from every run.
    monkeypatch.setenv("OPENCV_FFMPEG_LOGLEVEL", "-8")  # set by the call: restored after the test
    opencv_logging = getattr(cv2.utils, "logging", None)
    if opencv_logging is not None:  # the installed OpenCV 5 itself: its level is set, and put back after the test
        before = opencv_logging.getLogLevel()
        quiet_codec_logs()
        assert opencv_logging.getLogLevel() == opencv_logging.LOG_LEVEL_SILENT
        opencv_logging.setLogLevel(before)
        monkeypatch.delattr(cv2.utils, "logging")
    levels: list[int] = []
    monkeypatch.setattr(cv2, "setLogLevel", levels.append, raising=False)  # OpenCV 4's surface
    quiet_codec_logs()
    assert levels == [0]  # cv::utils::logging::LOG_LEVEL_SILENT


def test_only_a_source_s_own_failures_are_said_as_the_source_s() -> None:
    # A reader thread said any exception as the video's ("--video X: MemoryError()", exit status 2).
    from streaming.readers import source_fault

    assert source_fault(cv2.error("damaged")) and source_fault(OSError(5, "Input/output error", "out of memory.mp4"))
    assert source_fault(InputError("--video out of memory.mp4: cannot decode"))
    assert source_fault(RuntimeError("invalid data"), decoder=True) and not source_fault(RuntimeError("invalid data"))
    assert not source_fault(MemoryError()) and not source_fault(OSError(12, "Cannot allocate memory"))
    assert not source_fault(cv2.error("Failed to allocate 1228800 bytes"), decoder=True)
    assert not source_fault(KeyError("frame"), decoder=True)
