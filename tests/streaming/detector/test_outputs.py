"""What a run writes besides the checker's messages: the webhook's alerts (and its summary line at the end) and the
alert frames the dashboard shows, both named by the alert's own numbers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import cv2
import numpy as np
import pytest

from streaming.demo.paths import default_demo_paths
from streaming.demo.procedure import DEMO_EXECUTIONS
from streaming.demo.synthetic_video import demo_video
from streaming.detector import DetectorConfig, PipelineConfig, build_pipeline, load_detector_for_stream
from streaming.detector.alert_frames import ANNOUNCED_RETRIES, AlertFrames, frame_name, stream_folder
from streaming.detector.loading import LoadedParts
from streaming.messages import KeyStepEvent, KeyStepOnset
from streaming.readers import Frame, ReaderConfig, open_reader
from streaming.stream_detect_cli import main
from tests.cli_errors import cli_error
from tests.streaming.detector.test_webhook import _url, receiver
from tests.streaming.helpers import KeptMessages, keystep, wait_for


def test_the_demo_alert_is_posted_and_its_frame_written_where_its_video_time_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frames_dir = tmp_path / "frames"
    with receiver() as server:
        status = main(["--video", "demo", "--fast", "--jsonl", "--webhook", _url(server),
                       "--alert-frames", str(frames_dir)])
        assert status == 0
        assert wait_for(lambda: len(server.bodies) >= 1)  # type: ignore[attr-defined]
        posted = [json.loads(body) for _, body in server.bodies]  # type: ignore[attr-defined]
    captured = capsys.readouterr()
    alerts = [json.loads(line) for line in captured.out.splitlines() if '"kind":"alert"' in line]
    assert alerts and {a["alert_id"] for a in posted} == {a["alert_id"] for a in alerts}
    assert {a["step_name"] for a in posted} == {"boil_water"}
    # The run ends as `stream-detect checker` and `view` do: one summary line of what the receiver got.
    assert captured.err.splitlines()[-1] == (f"webhook {_url(server)}: {len(posted)} delivered, 0 not delivered, "
                                             "0 dropped (queue full)")
    for alert in alerts:
        name = f"{int(round(alert['video_time'] * 1000))}.jpg"
        path = frames_dir / urllib.parse.quote(alert["stream_id"], safe="") / name
        image = cv2.imread(str(path))
        assert image is not None and image.shape[2] == 3, path


def _frame(k: int) -> Frame:
    return Frame(np.full((48, 64, 3), k, dtype=np.uint8), k, k / 5.0)


def onset(seq: int, withdrawn: bool = False) -> KeyStepOnset:
    """A copy of the onset of boil_water (from 4.4 s) on cam0, as a detector re-sends it every 0.5 s."""
    return KeyStepOnset(stream_id="cam0", seq=seq, timestamp=1.0, session="s1", history=(), step=2,
                        step_name="boil_water", start=4.4, confidence=0.9, index=0, before=(), withdrawn=withdrawn)


def _unwritable(folder: Path) -> None:
    """A file where a stream's folder goes: no picture can be written in it."""
    folder.rmdir()
    folder.write_bytes(b"")


def test_each_stream_keeps_its_newest_frames_only(tmp_path: Path) -> None:
    with AlertFrames(tmp_path, keep=2) as frames:
        cam = frames.for_stream("kitchen/1 ä")  # any stream id: quoted into one folder name
        for k, start in enumerate((1.0, 2.5, 4.0004)):
            cam.seen(_frame(k), np.zeros(3), np.zeros(3))
            cam.send(keystep(history=(1,), start=start, end=start + 1))
    folder = stream_folder(tmp_path, "kitchen/1 ä")
    assert folder.name == "kitchen%2F1%20%C3%A4"
    assert sorted(p.name for p in folder.iterdir()) == ["2500.jpg", "4000.jpg"]  # the oldest went
    assert frame_name(4.0004) == "4000.jpg"


def test_a_start_too_late_to_name_a_file_writes_no_picture_and_the_stream_goes_on(tmp_path: Path) -> None:
    # The wire takes any finite start: 1e306 * 1000 is infinity, and int() of it raised OverflowError in the frame
    # loop; 1e300 named a file of 303 digits, which the disk refused ("picture(s) not written").
    lines: list[str] = []
    with AlertFrames(tmp_path, keep=2, log=lines.append) as frames:
        cam = frames.for_stream("cam0")
        for k, start in enumerate((1e306, 1e300, 1e15, 2.0)):
            cam.seen(_frame(k), np.zeros(3), np.zeros(3))
            cam.send(keystep(history=(1,), start=start, end=start))
    assert sorted(p.name for p in (tmp_path / "cam0").iterdir()) == ["2000.jpg"]
    assert lines == []
    assert frame_name(1e15) is None and frame_name(float("inf")) is None and frame_name(float("nan")) is None
    assert frame_name(999_999_999_999_999.875) == "999999999999999872.jpg"  # the latest time named: 18 digits


def test_a_withdrawn_announcement_writes_nothing_and_a_confirmation_overwrites_its_announcement(tmp_path: Path) -> None:
    with AlertFrames(tmp_path) as frames:
        cam = frames.for_stream("cam0")
        cam.seen(_frame(10), np.zeros(3), np.zeros(3))
        cam.send(onset(0, withdrawn=True))
        assert not list((tmp_path / "cam0").iterdir())
        cam.send(onset(1))
        cam.seen(_frame(200), np.zeros(3), np.zeros(3))
        confirmed = keystep(history=(2,), start=4.4, end=7.0)
        assert isinstance(confirmed, KeyStepEvent)
        cam.send(confirmed)
    image = cv2.imread(str(tmp_path / "cam0" / "4400.jpg"))
    assert image is not None and abs(int(image.mean()) - 200) <= 2  # the frame that confirmed the step


def test_an_announcement_re_sent_keeps_the_frame_it_was_announced_at(tmp_path: Path) -> None:
    # A detector re-sends a step's onset every 0.5 s while the step lasts: each copy wrote the picture again, so an
    # early alert's picture became a frame seconds after the alert, every step cost up to ten JPEGs, and a disk that
    # refused them counted 48 pictures not written for the demo's 6 files.
    with AlertFrames(tmp_path) as frames:
        cam = frames.for_stream("cam0")
        writer = frames._writer
        path = tmp_path / "cam0" / "4400.jpg"
        for seq, shade in enumerate((10, 100, 150)):
            cam.seen(_frame(shade), np.zeros(3), np.zeros(3))
            cam.send(onset(seq))
        assert wait_for(lambda: writer.delivered == 1)
        image = cv2.imread(str(path))
        assert writer.received == 1 and image is not None and abs(int(image.mean()) - 10) <= 2
        # Withdrawn, then announced again: a new announcement, with its own frame.
        cam.send(onset(3, withdrawn=True))
        cam.seen(_frame(200), np.zeros(3), np.zeros(3))
        cam.send(onset(4))
    image = cv2.imread(str(path))
    assert writer.received == 2 and image is not None and abs(int(image.mean()) - 200) <= 2


def test_an_announcement_whose_picture_failed_is_tried_again_with_its_own_frame(tmp_path: Path) -> None:
    # The first write of an early alert's picture failed (a disk full for a moment): the re-sent onsets wrote nothing,
    # so the early alert had no picture until the step was confirmed, if it ever was.
    lines: list[str] = []
    with AlertFrames(tmp_path, log=lines.append) as frames:
        cam = frames.for_stream("cam0")
        writer = frames._writer
        folder = tmp_path / "cam0"
        _unwritable(folder)
        cam.seen(_frame(10), np.zeros(3), np.zeros(3))
        cam.send(onset(0))
        assert wait_for(lambda: writer.failed == 1)
        folder.unlink()
        folder.mkdir()  # room again
        cam.seen(_frame(150), np.zeros(3), np.zeros(3))
        cam.send(onset(1))
        assert wait_for(lambda: writer.delivered == 1)
        cam.send(onset(2))
    image = cv2.imread(str(folder / "4400.jpg"))
    assert image is not None and abs(int(image.mean()) - 10) <= 2  # the frame it was announced at
    shot = cam._announced_shot
    assert shot is not None and shot.tries_again == 1  # written once: the copy after that tried nothing
    assert (writer.received, writer.failed, writer.delivered) == (1, 1, 1)  # one picture, written in the end
    assert not any("in all" in line for line in lines), lines


def test_a_picture_that_keeps_failing_is_tried_a_bounded_number_of_times_and_counted_once(tmp_path: Path) -> None:
    lines: list[str] = []
    with AlertFrames(tmp_path, log=lines.append) as frames:
        cam = frames.for_stream("cam0")
        writer = frames._writer
        _unwritable(tmp_path / "cam0")
        cam.seen(_frame(10), np.zeros(3), np.zeros(3))
        for seq in range(20):  # ten seconds of a step's onset, re-sent
            cam.send(onset(seq))
            shot = cam._announced_shot
            assert shot is not None and wait_for(lambda: shot.written is False)  # noqa: B023
    # One picture not written, one line as it happened: each try's failure was a line of its own, "4 picture(s) not
    # written so far" for one picture, before the total said 1.
    assert [line for line in lines if "so far" in line] == [lines[0]] and ": 1 picture(s) not written" in lines[0]
    assert shot is not None and shot.tries_again == ANNOUNCED_RETRIES
    assert lines[-1].endswith(": 0 picture(s) written, 1 not written in all"), lines
    assert (writer.received, writer.failed, writer.delivered) == (1, 1, 0)


@pytest.mark.parametrize("command", [["--video", "demo", "--fast", "--jsonl"], ["view", "--demo", "--jsonl"]])
@pytest.mark.parametrize("url", ["ftp://example.org/hook", "localhost:8080/hook"])
def test_a_webhook_that_is_not_http_is_one_error_line(
    command: list[str], url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(main, [*command, "--webhook", url], capsys)
    assert "--webhook" in line and "http" in line


def test_an_alert_frames_folder_that_cannot_be_made_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = cli_error(main, ["detector", "--video", "demo", "--fast", "--alert-frames", str(blocker / "sub"),
                            "--connect", "tcp://127.0.0.1:9"], capsys)
    assert "--alert-frames" in line


@pytest.mark.parametrize("stream_id", [".", ".."])
def test_a_stream_id_naming_a_folder_is_refused_with_alert_frames(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stream_id: str
) -> None:
    # Quoting leaves '.' and '..' as they are: the frames would land in the folder itself or above it.
    keepsake = tmp_path / "holiday.jpg"
    keepsake.write_bytes(b"a photo")
    line = cli_error(main, ["--video", "demo", "--fast", "--jsonl", "--stream-id", stream_id, "--alert-frames",
                            str(tmp_path / "frames")], capsys)
    assert line.startswith(f"error: --stream-id '{stream_id}': with --alert-frames it would name the folder")
    assert keepsake.read_bytes() == b"a photo"


def _small_file_limit() -> None:
    """In the child: files may not grow past 1 KiB (a full disk, as the writer sees it: EFBIG), no SIGXFSZ death."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


@pytest.mark.usefixtures("demo_cache")
def test_a_picture_a_full_disk_refuses_leaves_no_partial_file_and_is_named_as_not_written(tmp_path: Path) -> None:
    # Each key-step left an empty <ms>.jpg.part beside the pictures, and the warning spoke of "message(s) not
    # delivered", a webhook's words for a file that was not written.
    for name in DEMO_EXECUTIONS:
        demo_video(name)  # rendered before the child starts, which may not write more than 1 KiB to a file
    frames_dir = tmp_path / "frames"
    argv = [sys.executable, "-m", "streaming.stream_detect_cli", "--video", "demo", "--fast", "--jsonl",
            "--alert-frames", str(frames_dir)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120, preexec_fn=_small_file_limit)
    assert run.returncode == 0, run.stderr[-2000:]  # the pictures are a side output: the stream itself went on
    *warnings, total = run.stderr.splitlines()
    assert warnings and all(re.fullmatch(rf"warning: alert frames {re.escape(str(frames_dir))}: \d+ picture\(s\) not "
                                         r"written so far \(last: cam0/\d+\.jpg: File too large\)", line)
                            for line in warnings), warnings
    # The warnings stop after a few: the run ended as if complete, without the count of what was lost.
    assert re.fullmatch(rf"warning: alert frames {re.escape(str(frames_dir))}: 0 picture\(s\) written, \d+ not "
                        "written in all", total), total
    assert list((frames_dir / "cam0").iterdir()) == []


@pytest.mark.usefixtures("demo_cache")
def test_pictures_not_written_are_said_in_the_detectors_log(tmp_path: Path) -> None:
    # They went to stderr as plain 'warning:' lines whatever the detector's log was: with --log-format json, lines a
    # log collector cannot read, about pictures the dashboard will miss.
    frames_dir = tmp_path / "frames"
    model, checkpoint, extractor = load_detector_for_stream(default_demo_paths()[1], None)
    video, _ = demo_video("mistake")
    reader = open_reader(str(video), ReaderConfig(fps=checkpoint.fps))
    config = PipelineConfig(detector=DetectorConfig(), stream_ids=("cam0",), publish=False,
                            alert_frames=str(frames_dir))
    lines: list[str] = []
    with build_pipeline(config, parts=LoadedParts(None, model, checkpoint, extractor), readers=[reader],
                        sinks=[lambda _: KeptMessages()], warn=lines.append) as pipeline:
        shutil.rmtree(frames_dir / "cam0")
        (frames_dir / "cam0").write_bytes(b"")  # a file where the stream's folder was: no picture can be written
        pipeline.run(threading.Event())
    assert lines and all(line.startswith(f"alert frames {frames_dir}: ") for line in lines), lines
    assert lines[-1].endswith(" not written in all")


def test_the_bound_deletes_only_the_frames_it_wrote(tmp_path: Path) -> None:
    folder = stream_folder(tmp_path, "cam0")
    folder.mkdir()
    photos = ["holiday.jpg", "-1.jpg", "--1.jpg", "\u0661\u0662.jpg", "\u00b2.jpg", "12.5.jpg", "12.JPG"]
    for name in photos:  # not the <ms>.jpg frame_name writes (ASCII digits): never counted, never deleted, no crash
        (folder / name).write_bytes(b"a photo")
    (folder / "500.jpg").write_bytes(b"an older run's frame")
    with AlertFrames(tmp_path, keep=1) as frames:
        cam = frames.for_stream("cam0")
        cam.seen(_frame(1), np.zeros(3), np.zeros(3))
        cam.send(keystep(history=(1,), start=2.0, end=3.0))
    assert sorted(p.name for p in folder.iterdir()) == sorted(["2000.jpg", *photos])
