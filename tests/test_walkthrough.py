"""The README's "Your own procedure" walkthrough, end to end, on real video files of a procedure that is not the demo.

label (the annotation file) -> ``tgml train`` -> ``recognition-features`` (efficientnet-lite0) -> ``recognition-train``
-> ``stream-detect --video FILE --graph ... --detector ...``: a video with a step done before its pre-condition raises
the alert for that step, a correct video raises none.

The task graph is the one ``tgml train`` learns from the training executions with its default learner (noisy-AND),
which keeps both pre-conditions of ``insert_shelf`` (Direct Optimization could keep only one) and the edge the
injected mistake (``attach_legs`` before ``unbox_parts``) breaks; the test checks both.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from graphs.task_graph import load_graph
from recognition.recognition_train_cli import main as recognition_train
from streaming.offline.features_cli import main as recognition_features
from tests.procedure_videos import MISTAKE_ORDER, MISTAKE_STEP, PRECONDITIONS, SCENARIO, VALID_ORDERS, write_execution
from tests.procedure_videos import write_procedure as label
from tgml.tgml_cli import main as tgml

ROOT = Path(__file__).resolve().parent.parent
TRAIN_VIDEOS = 10
TEST_VIDEOS = ("run10", "run11")


def stream_detect(video: Path, graph: Path, detector: Path) -> list[dict]:
    """Run ``stream-detect`` on a file as the user would (its own process) and return its JSON lines."""
    command = [sys.executable, "-m", "streaming.stream_detect_cli", "--video", str(video), "--graph", str(graph),
               "--detector", str(detector), "--jsonl", "--fast"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


@pytest.mark.slow
def test_your_own_procedure_from_labelled_videos_to_live_alerts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orders: dict[str, tuple[int, ...]] = {
        f"run{k:02d}": VALID_ORDERS[k % len(VALID_ORDERS)] for k in range(TRAIN_VIDEOS)
    }
    orders |= {name: VALID_ORDERS[k + 1] for k, name in enumerate(TEST_VIDEOS)}
    labels = label(tmp_path, orders)
    mistake = tmp_path / "mistake.mp4"
    write_execution(mistake, MISTAKE_ORDER, seed=100)
    graph, features, detector = tmp_path / "shelf.json", tmp_path / "features", tmp_path / "detector.pt"

    assert tgml(["train", "--annotations", str(labels), "--scenario", SCENARIO, "--out", str(graph)]) == 0
    learned = load_graph(graph)
    (needed,) = PRECONDITIONS[MISTAKE_STEP]
    assert needed in learned.preconditions(MISTAKE_STEP), "the learned graph lost the edge the mistake breaks"
    shelf = next(step for step, needs in PRECONDITIONS.items() if len(needs) == 2)
    assert set(PRECONDITIONS[shelf]) <= learned.preconditions(shelf), "a step lost one of its two pre-conditions"

    assert recognition_features([
        "--videos", str(tmp_path / "videos"), "--annotations", str(labels), "--extractor", "efficientnet-lite0",
        "--fps", "2", "--out", str(features), "--test-videos", ",".join(TEST_VIDEOS), "--threads", "2", "--quiet",
    ]) == 0  # fmt: skip
    config = ROOT / "configs" / "miniroad-efficientnet-lite0.toml"
    capsys.readouterr()
    assert recognition_train(["--features", str(features), "--config", str(config), "--out", str(detector),
                              "--quiet"]) == 0  # fmt: skip
    found = re.search(r"test mAP (\d+\.\d)%", capsys.readouterr().out)
    assert found and float(found.group(1)) > 80.0

    lines = stream_detect(mistake, graph, detector)
    # --jsonl prints an alert again when a later copy (the confirmation) changes it: one alert is one alert_id.
    alerts = {m["alert_id"]: m for m in lines if m["kind"] == "alert"}
    assert [m["step"] for m in alerts.values()] == [MISTAKE_STEP]
    assert [m["step"] for m in lines if m["kind"] == "step"] == list(MISTAKE_ORDER)
    correct = stream_detect(tmp_path / "videos" / f"{TEST_VIDEOS[0]}.mp4", graph, detector)
    assert [m for m in correct if m["kind"] == "alert"] == []
    assert [m["step"] for m in correct if m["kind"] == "step"] == list(orders[TEST_VIDEOS[0]])


def test_the_video_writer_says_what_it_writes_when_asked_for_help() -> None:
    """The README points a new user at ``python -m tests.procedure_videos``: ``--help`` explains it, writing nothing."""
    result = subprocess.run([sys.executable, "-m", "tests.procedure_videos", "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "12 videos" in text and "labels.json" in text and "docs/recognition.md" in text
