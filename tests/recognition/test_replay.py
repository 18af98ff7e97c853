"""`prego-bench replay`: real MiniROAD per-frame output through segmenter and checker, scored like PREGO."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphs.checker import precondition_violations
from graphs.errors import InputError
from graphs.mistake_metrics import mistake_scores
from graphs.task_graph import TaskGraph, save_graph
from recognition.replay import load_frames_file, replay, sweep
from recognition.segmenter import SegmenterConfig
from tests.cli_errors import cli_error
from tgml.bench.prego_bench_cli import main as bench_main
from tgml.bench.prego_replay_cli import main as replay_main

CONFIG = SegmenterConfig(fps=60.0, background=None)


@pytest.fixture(scope="module")
def frames_file(data_dir: Path) -> Path:
    return data_dir / "prego-miniroad" / "epic-tent-o_frames.json"


@pytest.fixture(scope="module")
def graph_file(epic_graph: TaskGraph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("graph") / "epic-do.json"
    save_graph(epic_graph, path)
    return path


def test_replay_of_real_predictions_reaches_the_published_pred_figure(epic_graph: TaskGraph, frames_file: Path) -> None:
    frames = load_frames_file(frames_file, "pred", epic_graph)
    result = replay(frames, epic_graph, CONFIG)
    assert result.metrics.n_videos == 15
    assert result.metrics.avg_f1 >= 46.5  # DO on offline-aggregated MiniROAD segments (published PRED figure)
    # the alerts are exactly what the checker says about the confirmed steps, per video
    for video in result.videos.values():
        np.testing.assert_array_equal(precondition_violations(epic_graph, video.steps), video.alerts)


def test_replay_of_ground_truth_frames_equals_gt_mode(epic_graph: TaskGraph, frames_file: Path, data_dir: Path) -> None:
    segments = json.loads((data_dir / "prego-miniroad" / "epic-tent-o_segments.json").read_text())
    expected = mistake_scores(precondition_violations(epic_graph, r["gt"]) for r in segments.values())
    result = replay(load_frames_file(frames_file, "gt", epic_graph), epic_graph, CONFIG)
    assert result.metrics == expected
    assert result.metrics.avg_f1 == pytest.approx(58.3, abs=0.05)  # published DO GT figure (Seminara et al.)


def test_sweep_changes_how_many_steps_are_confirmed(epic_graph: TaskGraph, frames_file: Path) -> None:
    frames = load_frames_file(frames_file, "pred", epic_graph)
    rows = sweep(frames, epic_graph, CONFIG, (0.25, 1.0, 4.0))
    steps = [r.metrics.n_steps for _, r in rows]
    assert steps == sorted(steps, reverse=True) and steps[0] > steps[-1]


def test_command_prints_scores_and_writes_json(
    graph_file: Path, frames_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "replay.json"
    argv = ["replay", "--frames", str(frames_file), "--graph", str(graph_file), "--sweep", "0.5,2", "--json", str(out)]
    assert bench_main(argv) == 0
    printed = capsys.readouterr().out
    assert "Avg F1" in printed and "Segmenter ablation" in printed
    doc = json.loads(out.read_text())
    assert doc["format"] == "prego-replay-results" and doc["version"] == 1
    assert doc["metrics"]["avg_f1"] >= 46.5 and doc["metrics"]["n_videos"] == 15
    assert [row["value"] for row in doc["sweep"]] == [0.5, 2.0]
    assert doc["sweep"][0]["metrics"] == doc["metrics"]  # 0.5 s is the default
    assert doc["settings"]["segmenter"]["min_duration"] == 0.5
    assert set(doc["videos"]) == set(json.loads(frames_file.read_text()))


def test_unknown_class_in_frames_file_is_one_line_exit_2(
    graph_file: Path, frames_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frames = json.loads(frames_file.read_text())
    small = {"annotations_1": frames["annotations_1"], "annotations_2": dict(frames["annotations_2"])}
    small["annotations_2"]["pred"] = small["annotations_2"]["pred"][:100] + [42] + small["annotations_2"]["pred"][101:]
    bad = tmp_path / "bad_frames.json"
    bad.write_text(json.dumps(small))
    err = cli_error(replay_main, ["--frames", str(bad), "--graph", str(graph_file), "--no-sweep"], capsys)
    assert "video 'annotations_2': frame 100 has label 42" in err


def test_missing_field_and_missing_graph(
    epic_graph: TaskGraph, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "f.json"
    bad.write_text(json.dumps({"v1": {"gt": [1, 1, 2]}}))
    with pytest.raises(InputError, match="video 'v1': field 'pred' must be a non-empty list"):
        load_frames_file(bad, "pred", epic_graph)
    assert "graph" in cli_error(replay_main, ["--frames", str(bad)], capsys)


def test_a_background_label_is_named_with_background(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.streaming.helpers import tea_graph

    graph = tmp_path / "tea.json"
    save_graph(tea_graph(), graph)
    # get_cup, then boil_water before fill_kettle, with empty-table frames (label 0) around each step.
    labels = [0] * 30 + [3] * 60 + [0] * 30 + [2] * 60 + [0] * 30 + [1] * 60 + [0] * 30
    frames = tmp_path / "mine_frames.json"
    frames.write_text(json.dumps({"v1": {"pred": labels, "gt": labels}}))
    out = tmp_path / "replay.json"
    argv = ["--frames", str(frames), "--graph", str(graph), "--background", "0", "--no-sweep", "--json", str(out)]
    assert replay_main(argv) == 0
    video = json.loads(out.read_text())["videos"]["v1"]
    assert video["steps"] == [3, 2, 1] and video["alerts"] == [False, True, False]
    capsys.readouterr()
    assert "frame 0 has label 0" in cli_error(replay_main, argv[:4] + ["--no-sweep"], capsys)  # 0 is not a step
    assert "--background 2: is a key-step" in cli_error(replay_main, [*argv[:4], "--background", "2"], capsys)
