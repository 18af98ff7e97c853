"""`prego-bench replay`: real MiniROAD per-frame output through segmenter and checker, scored like PREGO."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphs.checker import PreconditionChecker, precondition_violations
from graphs.checker_settings import CheckerSettings
from graphs.common.errors import InputError
from graphs.mistake_metrics import mistake_scores
from graphs.task_graph import TaskGraph, save_graph
from recognition.segmenter import SegmenterConfig
from tests.cli_errors import cli_error
from tests.streaming.helpers import tea_graph
from tgml.bench.prego.replay import ReplayChecker, load_frames_file, replay, replay_video, sweep
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
    assert result.metrics.avg_f1 is not None
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
    epic_graph: TaskGraph, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without --graph the DO graph is learned from $MISTAKE_DATA when it is set: the missing graph is said only without.
    monkeypatch.delenv("MISTAKE_DATA", raising=False)
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


def test_the_probabilistic_checker_prints_beside_the_binary_one(
    graph_file: Path, frames_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "replay.json"
    argv = ["replay", "--frames", str(frames_file), "--graph", str(graph_file), "--no-sweep", "--checker",
            "probabilistic", "--json", str(out)]
    from tgml.bench.prego.checker_selection import default_settings_path, load_checker_settings

    chosen = load_checker_settings(default_settings_path("epic-tent-o")).replay
    assert chosen is not None and chosen.segmenter is not None
    assert bench_main(argv) == 0
    printed = capsys.readouterr().out
    assert "binary" in printed and f"probabilistic, {chosen.segmenter.min_duration:g} s" in printed
    assert f"prior {chosen.settings.prior_skip:g}, threshold {chosen.settings.alert_threshold:g}" in printed
    doc = json.loads(out.read_text())
    runs = [r["run"] for r in doc["runs"]]
    assert runs[0] == "binary" and runs[-1].startswith("probabilistic") and doc["runs"][-1]["metrics"] == doc["metrics"]
    assert doc["runs"][0]["metrics"]["avg_f1"] >= 46.5  # the binary row is the default replay, unchanged
    assert doc["settings"]["checker"]["kind"] == "probabilistic"
    for video in doc["videos"].values():  # an alert is exactly a verdict whose probability reached the threshold
        tau = doc["settings"]["checker"]["alert_threshold"]
        assert video["alerts"] == [p >= tau for p in video["probabilities"]]


def test_probabilistic_replay_without_evidence_is_the_binary_rule_merged(epic_graph: TaskGraph,
                                                                         frames_file: Path) -> None:
    from graphs.checker_settings import CheckerSettings
    from graphs.probabilistic_checker import ProbabilisticChecker
    from tgml.bench.prego.replay import ReplayChecker

    frames = load_frames_file(frames_file, "pred", epic_graph)
    result = replay(frames, epic_graph, CONFIG, ReplayChecker(CheckerSettings("probabilistic"), None))
    for video in result.videos.values():
        merged = ProbabilisticChecker.replay(epic_graph, video.steps)
        assert video.alerts == tuple(v.is_mistake for v in merged.history)
    assert result.metrics.n_steps == 595


def test_a_settings_file_without_replay_settings_is_refused(
    graph_file: Path, frames_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tgml.bench.prego.checker_selection import default_settings_path

    doc = json.loads(default_settings_path("epic-tent-o").read_text())
    doc["replay"] = None
    path = tmp_path / "pred-only.json"
    path.write_text(json.dumps(doc))
    argv = ["--frames", str(frames_file), "--graph", str(graph_file), "--no-sweep", "--checker", "probabilistic",
            "--checker-settings", str(path)]
    assert "holds no replay settings" in cli_error(replay_main, argv, capsys)
    assert "give it with --checker probabilistic" in cli_error(replay_main, argv[:5] + argv[7:], capsys)


def test_a_binary_replay_under_the_late_step_rule_flags_the_step_done_late() -> None:
    # Replays build their checker through the checker table as the live checker does, so the binary checker's
    # --order-rule holds here too (a shortcut for "binary" once applied the pre-condition rule whatever it said).
    graph = tea_graph()
    step = next(s for s in graph.step_ids if any(p in graph.step_ids for p in graph.preconditions(s)))
    needed = next(p for p in graph.preconditions(step) if p in graph.step_ids)
    labels = np.repeat([step, needed], 120)  # two seconds each at 60 fps: the step first, what it needs after it
    precondition = replay_video(labels, graph, CONFIG)
    late = replay_video(labels, graph, CONFIG, ReplayChecker(CheckerSettings("binary", order_rule="late-step")))
    assert precondition.steps == late.steps == (step, needed)
    assert precondition.alerts == (True, False) and precondition.probabilities == (1.0, 0.0)
    assert late.alerts == (True, True) and late.probabilities == (1.0, 1.0)
    expected = PreconditionChecker.replay(graph, late.steps, late_step=True).history
    assert late.alerts == tuple(v.is_mistake for v in expected)


def test_a_video_too_short_to_confirm_a_step_is_named_with_its_file(
    graph_file: Path, frames_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "video 'zzz': the segmenter confirmed no key-step at all (is fps right?)": no file, and a hint beside the point.
    doc = json.loads(frames_file.read_text())
    doc["zzz"] = {"pred": [4, 4], "gt": [4, 4]}
    path = tmp_path / "frames.json"
    path.write_text(json.dumps(doc))
    err = cli_error(replay_main, ["--frames", str(path), "--graph", str(graph_file), "--no-sweep"], capsys)
    assert err.startswith(f"error: {path}: video 'zzz': the segmenter confirmed no key-step at all in its 2 frames "
                          "(a video too short for --min-duration 0.5, or labels at another rate than --fps 60?)")


def test_the_data_folder_comes_from_mistake_data_as_for_every_benchmark(
    graph_file: Path, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    # Every other benchmark reads $MISTAKE_DATA when --data is left out; replay said "give --frames FILE or --data
    # DIR" to a user who had set it.
    monkeypatch.delenv("MISTAKE_DATA", raising=False)
    err = cli_error(replay_main, ["--graph", str(graph_file), "--no-sweep"], capsys)
    assert err == "error: no data folder: give --data DIR or set $MISTAKE_DATA (or --frames FILE)"
    monkeypatch.setenv("MISTAKE_DATA", str(data_dir))
    out = tmp_path / "replay.json"
    assert replay_main(["--graph", str(graph_file), "--no-sweep", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["metrics"]["n_videos"] == 15


def test_the_graph_is_learned_from_mistake_data_beside_a_frames_file(
    frames_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # With --frames and no --graph, the DO graph's training split came from --data alone: a user who had set
    # $MISTAKE_DATA was told "give --graph FILE, or --data DIR", what reading it for the frames file had just fixed.
    data = tmp_path / "data"
    (data / "epic-tent-o").mkdir(parents=True)  # a data folder without the split: the line names where it looked
    monkeypatch.setenv("MISTAKE_DATA", str(data))
    err = cli_error(replay_main, ["--frames", str(frames_file), "--no-sweep"], capsys)
    assert err.startswith(f"error: missing {data / 'epic-tent-o' / 'train.json'}; "), err
    monkeypatch.delenv("MISTAKE_DATA")
    err = cli_error(replay_main, ["--frames", str(frames_file), "--no-sweep"], capsys)
    assert err == ("error: no data folder: give --data DIR or set $MISTAKE_DATA to learn the DO graph from its "
                   "training split, or give --graph FILE")


@pytest.mark.parametrize(("content", "kind"), [
    ({"format": "task-graph", "version": 2, "steps": [], "edges": []}, "this looks like a task graph"),
    ({"train": ["a"], "test": ["b"]}, "this looks like a split file"),
    ({"format": "prego-checker-settings", "datasets": {}}, "its field 'format' says it is a 'prego-checker-settings' "
                                                           "file"),
], ids=["graph", "split", "checker-settings"])
def test_another_project_file_given_as_frames_is_named_for_what_it_is(
    content: dict[str, object], kind: str, graph_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its top-level fields were read as videos: "video 'format': field 'pred' must be a non-empty list".
    path = tmp_path / "frames.json"
    path.write_text(json.dumps(content))
    err = cli_error(replay_main, ["--frames", str(path), "--graph", str(graph_file), "--no-sweep"], capsys)
    assert err.startswith(f"error: {path}: {kind}") and err.endswith(
        'not a frames file {video: {"pred": [...], "gt": [...]}}'), err

