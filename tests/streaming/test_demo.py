"""The built-in demo, end to end: bundled files, recognition quality, alerts through `stream-detect --jsonl`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import zmq

from graphs.task_graph import load_graph
from recognition.checkpoint import load_detector
from streaming.demo.paths import default_demo_paths
from streaming.demo.procedure import DEMO_EXECUTIONS, STEP_IDS
from streaming.demo.synthetic_video import demo_video
from streaming.detector_service import Detector, DetectorConfig, EventPublisher, load_detector_for_stream
from streaming.messages import KeyStepEvent
from streaming.readers import ReaderConfig, open_reader
from streaming.transport import Publisher, bind
from tests.cli_errors import cli_error
from tests.streaming.helpers import MISTAKE_STEP, STREAM_DETECT

GRAPH, DETECTOR = default_demo_paths()


def test_bundled_demo_files_are_small_and_consistent() -> None:
    assert DETECTOR.stat().st_size < 1_000_000
    graph = load_graph(GRAPH)
    _, checkpoint = load_detector(DETECTOR)
    assert set(graph.step_ids) == set(STEP_IDS)
    assert {s for s in checkpoint.class_step_ids if s is not None} == set(STEP_IDS)
    assert checkpoint.feature_extractor == "efficientnet-lite0"


def detect(video: Path) -> list[KeyStepEvent]:
    """Run the real detector loop over a file, collecting the key-step events it publishes."""
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    ctx = zmq.Context()
    try:
        sock, _ = bind(ctx, zmq.PUB, "inproc://demo-test")
        reader = open_reader(str(video), ReaderConfig(fps=checkpoint.fps))
        events: list[KeyStepEvent] = []
        detector = Detector(reader, extractor, model, checkpoint, EventPublisher(Publisher(sock), "t"),
                            DetectorConfig(connect="inproc://demo-test", heartbeat_s=60.0))
        detector.on_event = events.append
        detector.run()
        return events
    finally:
        ctx.destroy(linger=0)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Temporal IoU of two intervals."""
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    return inter / (max(a[1], b[1]) - min(a[0], b[0]))


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
    assert total == 12 and recognised / total >= 0.9


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STREAM_DETECT, *args], capture_output=True, text=True, timeout=240)


def lines_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_stream_detect_jsonl_alerts_the_injected_mistake(demo_cache: Path) -> None:
    result = run_cli("--video", "demo", "--jsonl", "--fast")
    assert result.returncode == 0, result.stderr
    lines = lines_of(result.stdout)
    alerts = [m for m in lines if m["kind"] == "alert"]
    steps = [m["step"] for m in lines if m["kind"] == "step"]
    assert [a["step"] for a in alerts] == [MISTAKE_STEP]
    assert alerts[0]["missing_names"] == ["fill_kettle"]
    assert steps == list(DEMO_EXECUTIONS["mistake"])


def test_stream_detect_correct_execution_raises_no_alert(demo_cache: Path) -> None:
    result = run_cli("--video", "demo:correct", "--jsonl", "--fast", "--reader", "opencv")
    assert result.returncode == 0, result.stderr
    lines = lines_of(result.stdout)
    assert [m for m in lines if m["kind"] == "alert"] == []
    assert [m["step"] for m in lines if m["kind"] == "step"] == list(DEMO_EXECUTIONS["correct"])


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


def test_damaged_demo_cache_entry_is_rendered_again(demo_cache: Path) -> None:
    # A hand-edited or half-written sidecar used to end stream-detect in a JSON traceback.
    video, segments = demo_video("correct")
    sidecar = video.with_suffix(".json")
    for damage in ("{not json", '{"steps": []}', '{"segments": [[1, 2]]}'):
        sidecar.write_text(damage)
        again, segments_again = demo_video("correct")
        assert again == video and segments_again == segments
        assert json.loads(sidecar.read_text())["segments"] == [list(s) for s in segments]
