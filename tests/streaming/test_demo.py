"""The built-in demo, end to end: bundled files, recognition quality, alerts and end-of-session reports through
`stream-detect --jsonl` and the live view."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import cv2
import pytest
from rich.console import Console

from graphs.task_graph import load_graph
from recognition.checkpoint import load_detector
from streaming.all_in_one import RunConfig, run_all
from streaming.demo.paths import default_demo_paths
from streaming.demo.procedure import DEMO_EXECUTIONS, STEP_IDS
from streaming.demo.synthetic_video import demo_video
from streaming.detector import DetectorConfig, PipelineConfig, StreamSource, build_pipeline, load_detector_for_stream
from streaming.detector.loading import LoadedParts
from streaming.messages import KeyStepEvent
from streaming.readers import ReaderConfig, open_reader
from tests.cli_errors import cli_error
from tests.streaming.helpers import MISTAKE_STEP, STREAM_DETECT, KeptMessages

GRAPH, DETECTOR = default_demo_paths()


def test_bundled_demo_files_are_small_and_consistent() -> None:
    assert DETECTOR.stat().st_size < 1_000_000
    graph = load_graph(GRAPH)
    _, checkpoint = load_detector(DETECTOR)
    assert set(graph.step_ids) == set(STEP_IDS)
    assert {s for s in checkpoint.class_step_ids if s is not None} == set(STEP_IDS)
    assert checkpoint.feature_extractor == "efficientnet-lite0"
    assert graph.optional_scores is not None and graph.optional_steps == ()  # add_milk is required: demo:missing


def detect(video: Path) -> list[KeyStepEvent]:
    """Run the detector over a file, built as every command builds it, collecting the key-steps it publishes."""
    parts = LoadedParts(None, *load_detector_for_stream(DETECTOR, None))
    kept = KeptMessages()
    reader = open_reader(str(video), ReaderConfig(fps=parts.checkpoint.fps))
    config = PipelineConfig(detector=DetectorConfig(heartbeat_s=60.0), publish=False)
    with build_pipeline(config, parts=parts, readers=[reader], sinks=[lambda _: kept]) as pipeline:
        pipeline.run()
    return kept.keysteps()


def overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Temporal IoU of two intervals."""
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    return inter / (max(a[1], b[1]) - min(a[0], b[0]))


@pytest.mark.slow
def test_demo_key_step_segments_are_recognised(demo_cache: Path) -> None:
    recognised = total = 0
    for name in DEMO_EXECUTIONS:
        video, segments = demo_video(name)
        events = detect(video)
        free = list(events)
        for step, start, end in segments:
            total += 1
            match = next((e for e in free if e.step == step and overlap((e.start, e.end), (start, end)) >= 0.5), None)
            if match is not None:
                recognised += 1
                free.remove(match)
        assert len(free) <= 1, f"{name}: spurious key-steps {[e.step_name for e in free]}"
    assert total == sum(map(len, DEMO_EXECUTIONS.values())) and recognised / total >= 0.9


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STREAM_DETECT, *args], capture_output=True, text=True, timeout=240)


def lines_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def of_kind(lines: list[dict], kind: str) -> list[dict]:
    return [m for m in lines if m["kind"] == kind]


def test_stream_detect_jsonl_alerts_the_injected_mistake(demo_cache: Path) -> None:
    result = run_cli("--video", "demo", "--jsonl", "--fast")
    assert result.returncode == 0, result.stderr
    lines = lines_of(result.stdout)
    alerts = of_kind(lines, "alert")
    steps = [m["step"] for m in of_kind(lines, "step")]
    # One alert: its confirmation may print it again with its final probability (same alert_id, the last copy wins).
    assert {(a["alert_id"], a["step"]) for a in alerts} == {(alerts[0]["alert_id"], MISTAKE_STEP)}
    assert alerts[0]["missing_names"] == ["fill_kettle"]
    # The demo graph is noisy-AND's: the forgotten step's score is the probability that boil_water needs it.
    assert (alerts[0]["forgotten_name"], alerts[0]["rule"]) == ("fill_kettle", "weighted")
    assert alerts[0]["forgotten_score"] > 0.99
    assert steps == list(DEMO_EXECUTIONS["mistake"])
    assert of_kind(lines, "missing") == []  # every step was done in the end, if not in order
    # The alert is raised on the step's onset, through the real sockets, well before the step ends and is confirmed
    # (about 13 frames later at 5 fps; each frame costs the backbone tens of milliseconds even with --fast).
    confirmed = next(m for m in of_kind(lines, "step") if m["step"] == MISTAKE_STEP)
    assert confirmed["timestamp"] - alerts[0]["timestamp"] > 0.1


def test_stream_detect_correct_execution_reports_nothing(demo_cache: Path) -> None:
    result = run_cli("--video", "demo:correct", "--jsonl", "--fast", "--reader", "opencv")
    assert result.returncode == 0, result.stderr
    lines = lines_of(result.stdout)
    assert of_kind(lines, "alert") == [] and of_kind(lines, "missing") == []
    assert [m["step"] for m in of_kind(lines, "step")] == list(DEMO_EXECUTIONS["correct"])
    statuses = of_kind(lines, "status")
    assert statuses[-1]["ended"] and statuses[-1]["done"] == list(DEMO_EXECUTIONS["correct"])
    # The allowed steps come likeliest first, with the noisy-AND next-step probability (the demo graph is
    # noisy-AND's): after get_cup both add_teabag and fill_kettle are ready, each about even, nothing else is.
    after_cup = next(m for m in statuses if m["done"] == [3])
    assert (after_cup["allowed"], after_cup["rule"]) == ([4, 1], "weighted")
    assert after_cup["allowed_scores"] == pytest.approx([0.5, 0.5], abs=0.01)
    # The status after each step counts every frame up to the step's end, though --fast outruns the heartbeat's
    # wall-clock period (it used to say 0 frames after the first steps).
    for step in of_kind(lines, "step"):
        after = next(m for m in statuses if m["seq"] > step["seq"])
        assert after["frames"] >= round(step["end"] * load_detector(DETECTOR)[1].fps)


def test_stream_detect_missing_execution_reports_the_step_never_done(demo_cache: Path) -> None:
    result = run_cli("--video", "demo:missing", "--jsonl", "--fast")
    assert result.returncode == 0, result.stderr
    lines = lines_of(result.stdout)
    assert [m["step"] for m in of_kind(lines, "step")] == list(DEMO_EXECUTIONS["missing"])
    assert of_kind(lines, "alert") == []
    [report] = of_kind(lines, "missing")
    assert (report["missing"], report["missing_names"], report["replayed"]) == ([6], ["add_milk"], False)
    assert lines[-1]["kind"] == "status" and lines[-1]["ended"] and lines.index(report) == len(lines) - 2


def test_the_live_view_shows_what_the_missing_demo_never_did(demo_cache: Path) -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, color_system=None, width=160, height=45)
    source = StreamSource("demo:missing", str(GRAPH), str(DETECTOR), reader=ReaderConfig(realtime=False))
    assert run_all(RunConfig(source), console=console) == 0
    last = screen.getvalue().rsplit("streams", 1)[1]  # the final screen
    assert "cam0 (ended)" in last and "no mistakes so far" not in last and "no mistakes" in last
    assert "cam0 ended: no mistake; never done: add_milk" in last
    never = last.split("never done (session ended)")[1]
    assert "add_milk" in never.split("recent key-steps")[0]


@pytest.mark.parametrize("name", ["nope"])
def test_unknown_demo_name_is_refused(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    from streaming.stream_detect_cli import main

    assert name in cli_error(main, ["--video", f"demo:{name}", "--jsonl"], capsys)


def test_every_scene_renders_at_the_smallest_allowed_size() -> None:
    from streaming.demo.synthetic_video import RenderConfig, render_frames

    # RenderConfig accepts 32x32; the milk-drop scene (step 6) used to need more than 40 px.
    config = RenderConfig(width=32, height=32, fps=10.0, step_s=(0.3, 0.3), pause_s=(0.1, 0.1), fade_s=0.0)
    frames, labels = render_frames(tuple(STEP_IDS), seed=1, config=config)
    shapes = {frame.shape for frame in frames}
    assert shapes == {(32, 32, 3)} and set(STEP_IDS) <= set(labels.tolist())


@pytest.mark.slow
def test_damaged_demo_cache_entry_is_rendered_again(demo_cache: Path) -> None:
    # A hand-edited or half-written sidecar used to end stream-detect in a JSON traceback.
    video, segments = demo_video("correct")
    sidecar = video.with_suffix(".json")
    for damage in ("{not json", '{"steps": []}', '{"segments": [[1, 2]]}'):
        sidecar.write_text(damage)
        again, segments_again = demo_video("correct")
        assert again == video and segments_again == segments
        assert json.loads(sidecar.read_text())["segments"] == [list(s) for s in segments]


@pytest.mark.slow
def test_a_sidecar_whose_segments_were_changed_is_rendered_again(
    demo_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Valid JSON with the segments emptied or changed was trusted: eval --demo ended in an IndexError (no segment) or
    # KeyError (step 99) traceback, or scored the video against steps it does not show (times moved).
    from streaming.stream_detect_cli import main

    video, segments = demo_video("correct")
    sidecar = video.with_suffix(".json")
    good = json.loads(sidecar.read_text())
    moved = [[step, start + 5.0, end + 5.0] for step, start, end in good["segments"]]
    for changed in ([], [[99, 1.0, 2.0]], moved):
        sidecar.write_text(json.dumps(good | {"segments": changed}))
        capsys.readouterr()
        assert demo_video("correct") == (video, segments)
        assert capsys.readouterr().err == (f"note: the cached demo video {video} has a damaged sidecar "
                                           f"({sidecar.name}: its segments are not the execution's); rendering it "
                                           "again\n")
    sidecar.write_text(json.dumps(good | {"segments": []}))
    assert main(["eval", "--demo", "--videos-list", "demo:correct", "--quiet", "--no-cache"]) in (0, None)
    assert json.loads(sidecar.read_text()) == good


def frame_count(video: Path) -> int:
    """The frame count a video's container states; -1 when OpenCV cannot open it (as the reader would refuse it)."""
    capture = cv2.VideoCapture(str(video))
    try:
        return int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) if capture.isOpened() else -1
    finally:
        capture.release()


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["cut", "emptied", "header-overwritten"])
def test_a_damaged_cached_demo_video_is_rendered_again_with_a_note(
    damage: str, demo_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only the sidecar was checked: a video cut short or emptied was handed to the reader, and every run ended in
    # "OpenCV cannot open it" until the user found the file and deleted it.
    video, segments = demo_video("correct")
    size, frames = video.stat().st_size, frame_count(video)
    if damage == "cut":
        os.truncate(video, size // 2)
        found = f"{size // 2} bytes, {size} when it was rendered"
    elif damage == "emptied":
        video.write_bytes(b"")
        found = f"0 bytes, {size} when it was rendered"
    else:  # the same size, its container header gone
        with video.open("r+b") as handle:
            handle.write(bytes(64))
        found = f"OpenCV cannot open it, {frames} frames when it was rendered"
    assert frame_count(video) == -1  # damaged as the reader would find it
    capsys.readouterr()
    assert demo_video("correct") == (video, segments)
    assert (video.stat().st_size, frame_count(video)) == (size, frames)
    assert capsys.readouterr().err == f"note: the cached demo video {video} is damaged ({found}); rendering it again\n"
    assert demo_video("correct") == (video, segments)  # whole again: taken as it is, without a note
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_two_runs_started_at_once_over_a_damaged_demo_video_both_succeed(demo_cache: Path, tmp_path: Path) -> None:
    # The tester's case: `stream-detect --video demo` over a cut cached video exited 2 ("OpenCV cannot open it") on
    # every run. Two runs at once may both find it damaged and both render it: each must read a whole video.
    video, _ = demo_video("correct")
    size = video.stat().st_size
    os.truncate(video, size // 2)
    runs = [subprocess.Popen([*STREAM_DETECT, "--video", "demo:correct", "--jsonl", "--fast",
                              "--bind", f"ipc://{tmp_path}/in{k}", "--publish", f"ipc://{tmp_path}/out{k}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(2)]
    outputs = [run.communicate(timeout=240) for run in runs]
    for run, (stdout, stderr) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, stderr
        assert [m["step"] for m in of_kind(lines_of(stdout), "step")] == list(DEMO_EXECUTIONS["correct"])
    note = (f"note: the cached demo video {video} is damaged ({size // 2} bytes, {size} when it was rendered); "
            "rendering it again")
    # A run that reached the cache after the other had rendered it found it whole and said nothing.
    notes = [line for _, stderr in outputs for line in stderr.splitlines() if line.startswith("note: ")]
    assert notes in ([note], [note, note])
    assert video.stat().st_size == size and not list(demo_cache.glob(".*"))  # no temporary file left behind
