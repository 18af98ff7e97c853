"""`stream-detect` refuses bad input with one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import zmq

from graphs.task_graph import save_graph
from recognition.checkpoint import load_detector, save_detector
from recognition.model import MiniROAD, MiniROADConfig
from streaming.demo.paths import default_demo_paths
from streaming.detector import EventPublisher
from streaming.messages import CheckerHealth, Status
from streaming.stream_detect_cli import main
from streaming.transport import Publisher, Receiver, connect, subscribe
from tests.cli_errors import cli_error
from tests.streaming.helpers import (
    STREAM_DETECT,
    refused_port,
    running_checker,
    tea_graph,
    wait_for,
    write_damaged_video,
    write_noise_video,
    write_truncated_video,
)
from tgml.tgml_cli import main as tgml_main

GRAPH, DETECTOR = default_demo_paths()


@pytest.fixture(autouse=True)
def _demo_videos_in_a_temporary_cache(demo_cache: Path) -> None:
    """Never render demo videos into the user's cache from tests."""


@pytest.mark.parametrize("argv", [["--video"], ["checker", "--bogus"], ["view", "--connect"]])
def test_usage_mistakes_are_one_line_and_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # argparse printed its usage block before the message; every other command answers with one error line.
    assert cli_error(main, argv, capsys).startswith("error: stream-detect")


@pytest.mark.parametrize(
    ("argv", "line"),
    [(["--video", "demo", "--video", "demo:correct"], "stream-detect run: --video given twice (\"demo\", then "
                                                       "\"demo:correct\"); it takes one value"),
     (["eval", "--features", "a.npy", "--features", "b.npy"], "stream-detect eval: --features given twice "
                                                                "(\"a.npy\", then \"b.npy\"); give all its values "
                                                                "after one --features"),
     (["checker", "--demo", "--bind", "tcp://127.0.0.1:0", "--bind", "tcp://127.0.0.1:1"], "--bind given twice")],
)
def test_an_option_of_one_value_given_twice_is_refused(argv: list[str], line: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # argparse kept the last value without a word: the all-in-one run played only the second video.
    assert line in cli_error(main, argv, capsys)


@pytest.mark.parametrize("option", ["--video", "--features"])
def test_two_sources_for_the_one_command_run_are_told_how_to_run_several(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two cameras at once is the first thing a user tries: the refusal only said "it takes one value".
    line = cli_error(main, [option, "a.npy", option, "b.npy"], capsys)
    assert "it takes one value; for several sources at once, start stream-detect checker, then one stream-detect " \
           "detector given each source (--video A --video B, or --features), and stream-detect view" in line
    # stream-detect detector takes each again: nothing to refuse there.
    assert "given twice" not in cli_error(main, ["detector", option, "a.npy", option, "b.npy"], capsys)


def test_a_mistyped_command_is_named_with_the_commands_there_are(capsys: pytest.CaptureFixture[str]) -> None:
    # It was read as an argument of run, the default: "stream-detect run: unrecognized arguments: evl".
    line = cli_error(main, ["evl", "--features", "x.npy"], capsys)
    assert line == ("error: stream-detect: command 'evl': not one of the 7 known (run, detector, checker, view, "
                    "dashboard, eval, keys); did you mean 'eval'?")


def test_unopenable_video_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "clip.mp4"
    bad.write_text("not a video at all")
    line = cli_error(main, ["--video", str(bad), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--jsonl"], capsys)
    assert "clip.mp4" in line


def test_missing_camera(capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(main, ["--video", "cam57", "--graph", str(GRAPH), "--detector", str(DETECTOR), "--jsonl"], capsys)
    assert "cam57" in line and "camera" in line


def test_graph_that_is_not_a_dag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tea_graph().to_dict()
    data["edges"] += [{"step": 1, "requires": 6}]  # 6 -> 5 -> 2 -> 1 -> 6
    path = tmp_path / "cyclic.json"
    path.write_text(json.dumps(data))
    line = cli_error(main, ["--video", "demo", "--graph", str(path), "--jsonl"], capsys)
    assert "cyclic.json" in line and "cycle" in line


def test_detector_classes_that_do_not_match_the_graph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = tea_graph()
    data = graph.to_dict()
    data["steps"][0]["id"] = 99  # the detector knows step 1, this graph calls it 99
    data["edges"] = [e for e in data["edges"] if 1 not in (e["step"], e["requires"])]
    data["scenario"] = "make-coffee"
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data))
    line = cli_error(main, ["--video", "demo", "--graph", str(path), "--jsonl"], capsys)
    assert "classes [1]" in line and "[99]" in line and "are not for the same procedure" in line
    # --video demo took the bundled detector: the line named "--detector <its path in the package>", an option the
    # user never gave.
    assert line.startswith(f"error: the bundled demo detector and --graph {path} ")
    # Which procedure each file is for, so the user sees which of the two is the wrong one.
    assert "the detector: scenario 'demo-tea', steps 1 fill_kettle, 2 boil_water, 3 get_cup, ... (6 in all)" in line
    assert "the graph: scenario 'make-coffee', steps 99 fill_kettle" in line


def test_an_annotation_file_given_as_the_graph_says_how_to_make_a_graph(capsys: pytest.CaptureFixture[str]) -> None:
    annotations = GRAPH.parent / "demo_annotations.json"
    line = cli_error(main, ["--video", "demo", "--graph", str(annotations), "--jsonl"], capsys)
    assert line == (f"error: --graph {annotations}: this looks like an annotation file, not a task graph; learn a "
                    "graph from it with tgml train")


@pytest.mark.parametrize("name", ["labels.csv", "labels.txt"])
def test_an_annotation_table_given_as_the_graph_says_how_to_make_a_graph(tmp_path: Path, name: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # It said "invalid JSON at line 1 column 1: Expecting value", which the annotation JSON given there did not.
    table = tmp_path / name
    table.write_text("video,step,start,end\nrun1,fill_kettle,1,5\n")
    line = cli_error(main, ["--video", "demo", "--graph", str(table), "--jsonl"], capsys)
    assert line == (f"error: --graph {table}: this looks like an annotation table, not a task graph; learn a "
                    "graph from it with tgml train")
    # tgml show reads the graph file as every command does.
    line = cli_error(tgml_main, ["show", str(table)], capsys)
    assert line == (f"error: {table}: this looks like an annotation table, not a task graph; learn a graph from it "
                    "with tgml train")


SPLIT_KIND = "a split file (the 'train' and 'test' videos of a feature folder: its split.json)"


def test_an_annotation_file_given_as_the_split_is_named_as_one(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # eval --split labels.json said only "missing field 'train'", while --graph labels.json named the kind of file.
    annotations = GRAPH.parent / "demo_annotations.json"
    videos = tmp_path / "videos"
    videos.mkdir()
    line = cli_error(main, ["eval", "--videos", str(videos), "--annotations", str(annotations), "--graph", str(GRAPH),
                            "--detector", str(DETECTOR), "--split", str(annotations)], capsys)
    assert line == (f"error: --split {annotations}: this looks like an annotation file (its 'annotations' and "
                    f"'taxonomy' give each video's key-steps), not {SPLIT_KIND}; give the split.json that "
                    "recognition-features wrote in its feature folder")


def test_a_split_file_given_as_the_graph_is_named_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["demo-correct"], "test": ["demo-mistake"]}))
    line = cli_error(main, ["--video", "demo", "--graph", str(split), "--jsonl"], capsys)
    assert line == f"error: --graph {split}: this looks like {SPLIT_KIND}, not a task graph (tgml train writes them)"


def _renamed_demo_graph(tmp_path: Path, renames: dict[str, str], scenario: str | None = None) -> Path:
    """The bundled demo graph with some steps renamed (same ids, same edges): another procedure's graph."""
    data = json.loads(GRAPH.read_text())
    for step in data["steps"]:
        step["name"] = renames.get(step["name"], step["name"])
    if scenario is not None:
        data["scenario"] = scenario
    path = tmp_path / "renamed.json"
    path.write_text(json.dumps(data))
    return path


def test_a_graph_whose_steps_were_renamed_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The ids matched, so this ran, exited 0 and alerted on "cut_bread".
    graph = _renamed_demo_graph(tmp_path, {"boil_water": "cut_bread", "add_milk": "butter_toast"})
    line = cli_error(main, ["--video", "demo", "--graph", str(graph), "--jsonl", "--fast"], capsys)
    assert "name different steps" in line and "--ignore-names" in line
    assert "step 2 is 'boil_water' in the detector, 'cut_bread' in the graph" in line
    assert "step 6 is 'add_milk' in the detector, 'butter_toast' in the graph" in line
    assert "fill_kettle" not in line  # only the steps that differ are listed


def test_a_graph_of_another_scenario_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = _renamed_demo_graph(tmp_path, {}, scenario="make-coffee")
    line = cli_error(main, ["detector", "--video", "demo", "--graph", str(graph), "--connect", "tcp://127.0.0.1:9"],
                     capsys)
    assert "scenario 'demo-tea' in the detector, 'make-coffee' in the graph" in line


def test_ignore_names_runs_anyway_with_a_warning(tmp_path: Path) -> None:
    graph = _renamed_demo_graph(tmp_path, {"boil_water": "cut_bread"})
    args = ["--video", "demo", "--graph", str(graph), "--jsonl", "--fast", "--ignore-names"]
    result = subprocess.run([*STREAM_DETECT, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and "'boil_water' in the detector, 'cut_bread' in the graph" in warning[0]
    # The confirmation re-sends the early alert with its final probability: the copy received last wins.
    copies = [json.loads(line) for line in result.stdout.splitlines() if '"kind":"alert"' in line]
    alerts = {a["alert_id"]: a for a in copies}
    assert [a["step_name"] for a in alerts.values()] == ["cut_bread"]  # the graph's names, as the warning says


@pytest.mark.parametrize("command", ["checker", "view"])
def test_checker_and_view_need_a_graph_or_demo(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    # A checker without --graph quietly applied the tea-making rules of the demo.
    line = cli_error(main, [command], capsys)
    assert line == f"error: stream-detect {command}: --graph is required (or --demo for the demo graph)"
    line = cli_error(main, [command, "--demo", "--graph", str(GRAPH)], capsys)
    assert "--graph" in line and "--demo" in line



def test_a_detector_mixing_a_file_with_demo_sources_is_told_what_is_missing_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An operator gave `--video clip.mp4 --video demo ...` and read "--graph is required unless --video demo", though
    # --video demo was there; with --graph added, the same again for --detector: two tries for one answer.
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"")
    line = cli_error(main, ["detector", "--video", str(clip), "--video", "demo"], capsys)
    assert line.startswith("error: --graph and --detector are required unless every --video is a demo ")
    assert repr(str(clip)) in line and str(GRAPH) in line and str(DETECTOR) in line
    line = cli_error(main, ["detector", "--video", str(clip), "--graph", str(GRAPH)], capsys)
    assert line.startswith("error: --detector is required unless every --video is a demo ")


@pytest.mark.parametrize("command", ["run", "detector"])
def test_features_without_a_graph_or_detector_name_the_features_not_a_video(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `stream-detect --features rec.npy` alone read "required unless every --video is a demo; 'rec.npy' is not".
    features = tmp_path / "rec.npy"
    np.save(features, np.zeros((4, 3), dtype=np.float32))
    line = cli_error(main, [command, "--features", str(features)], capsys)
    assert line.startswith("error: --features needs --graph and --detector: ") and "--video" not in line
    line = cli_error(main, [command, "--features", str(features), "--graph", str(GRAPH)], capsys)
    assert line.startswith("error: --features needs --detector: ")


@pytest.mark.parametrize("command", ["run", "detector", "checker"])
def test_an_empty_graph_is_refused_not_taken_for_the_demos(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--graph "$GRAPH"` with the variable unset: an empty value ran the operator's file against the demo's
    # tea-making rules and the demo's detector, without a word.
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"")
    # A checker that took the demo's graph meets the bad --bind next, and fails the test rather than serve on.
    sources = ["--bind", "nowhere"] if command == "checker" else ["--video", str(clip), "--detector", str(DETECTOR)]
    line = cli_error(main, [command, *sources, "--graph", ""], capsys)
    assert line.startswith("error: --graph "), line


@pytest.mark.parametrize("command", ["checker", "run"])
def test_busy_port(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], ctx: zmq.Context) -> None:
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    graph = tmp_path / "tea.json"
    save_graph(tea_graph(), graph)
    args = ["--bind", f"tcp://127.0.0.1:{port}", "--publish", "tcp://127.0.0.1:0"]
    if command == "run":
        args += ["--video", "demo", "--jsonl"]
    else:
        args += ["--graph", str(graph)]
    line = cli_error(main, [command, *args], capsys)
    assert str(port) in line and "already in use" in line


@pytest.mark.parametrize("command", ["checker", "run"])
def test_one_endpoint_given_as_both_bind_and_publish_is_refused_before_binding(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], ctx: zmq.Context
) -> None:
    # The second bind failed with "address already in use (is another checker running?)": the cause was one address
    # given twice. The port is held here, so a checker that went on to bind would say "already in use" instead.
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    extra = ["--video", "demo", "--jsonl"] if command == "run" else ["--demo"]
    for bind_at, publish_at in ((f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port}"),
                                (f"tcp://0.0.0.0:{port}", f"tcp://127.0.0.1:{port}"),
                                (f"ipc://{tmp_path}/one", f"ipc://{tmp_path}/./one")):
        argv = [command, *extra, "--bind", bind_at, "--publish", publish_at, "--insecure"]
        line = cli_error(main, argv, capsys)
        assert line == (f"error: --bind {bind_at} and --publish {publish_at} name the same endpoint: detectors and "
                        "viewers need one each")
    assert not (tmp_path / "one").exists()


@pytest.mark.parametrize("command", ["run", "checker", "eval"])
def test_a_prior_skip_outside_zero_one_is_one_error_line(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["--video", "demo", "--jsonl"] if command == "run" else ["--demo"]
    line = cli_error(main, [command, *extra, "--prior-skip", "1.5"], capsys)
    assert line == "error: --prior-skip 1.5: must be a probability strictly between 0 and 1"


@pytest.mark.parametrize("option", ["--prior-skip", "--alert-threshold"])
def test_a_probabilistic_setting_given_to_the_binary_checker_is_refused(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # It changed nothing, and eval's --json still recorded it among the run's settings.
    line = cli_error(main, ["eval", "--demo", "--checker", "binary", option, "0.3"], capsys)
    assert line == (f"error: {option} needs --checker probabilistic: the binary checker takes every recognised step "
                    "as certain and has no threshold or prior to set")


MEASURED_RATES = ("--default-rates: the bundled demo detector holds measured miss and false-detection rates, and those "
                  "are used; the option stands in for a detector without them (leave it out)")
FROM_FEATURES = ["--features", "rec.npy", "--graph", str(GRAPH), "--detector", str(DETECTOR)]
NOT_FRAMES = "--features files hold features, not video frames"


@pytest.mark.parametrize(
    ("argv", "line"),
    [([*FROM_FEATURES, "--backbone", "nope.pt"],
      f"--backbone nope.pt: extracts features from video frames; {NOT_FRAMES}"),
     (["eval", *FROM_FEATURES, "--annotations", "labels.json", "--backbone", "nope.pt"],
      f"--backbone nope.pt: extracts features from video frames; {NOT_FRAMES}"),
     (["detector", *FROM_FEATURES, "--reader", "decord"], f"--reader decord: reads video files; {NOT_FRAMES}"),
     ([*FROM_FEATURES, "--alert-frames", "frames"],
      f"--alert-frames frames: keeps the video frame of each key-step; {NOT_FRAMES}"),
     (["--video", "demo", "--alert-frames-keep", "5"],
      "--alert-frames-keep 5: needs --alert-frames, the folder it bounds"),
     (["detector", "--video", "demo", "--alert-on", "end", "--onset-frames", "3"],
      "--onset-frames 3: sets when a key-step is announced, and --alert-on end announces none"),
     (["eval", "--demo", "--checker", "binary", "--default-rates"],
      "--default-rates needs --checker probabilistic: the binary checker weighs no miss or false-detection rates"),
     (["eval", "--demo", "--rate", "5"],
      "--rate 5: gives the rate of --features files; videos are read at the detector's rate"),
     (["--video", "demo", "--rate", "5"],
      "--rate 5: gives the rate of --features files; videos are read at the detector's rate"),
     # The demo detector holds measured rates: the option changed nothing (known once the checkpoint is read).
     (["--video", "demo", "--fast", "--jsonl", "--default-rates"], MEASURED_RATES),
     (["detector", "--video", "demo", "--fast", "--default-rates"], MEASURED_RATES),
     (["eval", "--demo", "--default-rates"], MEASURED_RATES)],
    ids=["backbone", "eval-backbone", "reader", "alert-frames", "keep", "onset-frames", "default-rates", "eval-rate",
         "run-rate", "run-measured-rates", "detector-measured-rates", "eval-measured-rates"])
def test_an_option_the_run_would_ignore_is_refused(
    argv: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each ran with exit status 0 and no word (eval --features --backbone FILE: a traceback when FILE was missing),
    # while --alert-threshold with --checker binary was refused.
    monkeypatch.chdir(tmp_path)
    assert cli_error(main, argv, capsys) == f"error: {line}"
    assert list(tmp_path.iterdir()) == []  # refused before anything is written


def test_eval_plots_naming_a_file_says_once_that_a_folder_was_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "is a file, expected a folder for the timeline plots folder": the message said "folder" twice.
    taken = tmp_path / "evdemo.json"
    taken.write_text("{}")
    line = cli_error(main, ["eval", "--demo", "--plots", str(taken)], capsys)
    assert line == f"error: --plots {taken}: is a file, expected the timeline plots folder"


def test_the_alert_frames_bound_said_in_the_help_is_the_one_applied(capsys: pytest.CaptureFixture[str]) -> None:
    from streaming.detector.alert_frames import DEFAULT_KEEP

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert f"the oldest deleted first (default: {DEFAULT_KEEP})" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", [["checker"], ["view"], ["dashboard"],
                                     ["eval", "--videos", ".", "--annotations", "a.json", "--detector", "d.pt"]],
                         ids=["checker", "view", "dashboard", "eval"])
def test_a_graph_file_that_is_not_there_is_named_by_its_option_in_every_command(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # `stream-detect --graph` said "--graph nope.json: ..."; the others said only "nope.json: graph file not found".
    line = cli_error(main, [*command, "--graph", "nope.json"], capsys)
    assert line == "error: --graph nope.json: graph file not found"


@pytest.mark.parametrize(("argv", "option", "hint"), [
    (["checker"], "--graph", "give --demo instead"),
    (["dashboard"], "--graph", "give --demo instead"),
    (["eval"], "--graph", "give --demo instead (the demo's videos, graph and detector)"),
    (["--video", "demo"], "--graph", "--video demo brings the demo's graph and detector: leave the option out"),
    (["detector", "--video", "demo"], "--detector",
     "--video demo brings the demo's graph and detector: leave the option out"),
])
def test_demo_typed_as_a_graph_or_detector_file_points_to_the_bundled_demo(
    argv: list[str], option: str, hint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Typed the way --video demo is, it said only "--graph demo: graph file not found".
    monkeypatch.chdir(tmp_path)  # no file named demo here
    line = cli_error(main, [*argv, option, "demo"], capsys)
    assert line == f"error: {option} demo: no file named demo here; for the bundled demo, {hint}"


@pytest.mark.parametrize("option", ["--graph", "--detector"])
def test_demo_typed_as_a_file_beside_features_does_not_point_to_the_demo(
    option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "--video demo brings the demo's graph and detector: leave the option out", and without it the run
    # was refused for want of that very option: no demo reads feature files.
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "rec.npy", np.zeros((4, 8), dtype=np.float32))
    other = {"--graph": ["--detector", "d.pt"], "--detector": ["--graph", "g.json"]}[option]
    line = cli_error(main, ["--features", "rec.npy", *other, option, "demo"], capsys)
    assert line == (f"error: {option} demo: no file named demo here, and no demo reads feature files: --features "
                    "needs the graph of their procedure (tgml train) and the detector trained on them "
                    "(recognition-train)")


def test_real_video_needs_a_detector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(main, ["--video", "cam0", "--graph", str(GRAPH)], capsys)
    assert "--detector" in line


@pytest.mark.parametrize(
    ("argv", "line"),
    [(["--video", "nothere.mp4", "--graph", str(GRAPH), "--detector", str(DETECTOR)],
      "error: --video nothere.mp4: file not found (and not a camera like cam0 or a stream URL)"),
     (["detector", "--video", "demo", "--graph", "nothere.json", "--detector", str(DETECTOR)],
      "error: --graph nothere.json: graph file not found"),
     # A checkpoint given as the graph: the line named the file, not the option it came through.
     (["--video", "demo", "--graph", str(DETECTOR), "--detector", str(DETECTOR)],
      f"error: --graph {DETECTOR}: not UTF-8 text, expected a graph file"),
     (["--video", "demo", "--graph", str(GRAPH), "--detector", "nothere.pt"],
      "error: --detector nothere.pt: detector checkpoint not found"),
     (["--features", "nothere.npy", "--graph", str(GRAPH), "--detector", str(DETECTOR)],
      "error: --features nothere.npy: file not found, expected a .npy feature file"),
     (["detector", "--video", "demo", "--stream-id", "bad id"],
      "error: stream-detect detector: argument --stream-id: \"bad id\": use 1-64 characters from [A-Za-z0-9_.:-] "
      "(see stream-detect detector --help)"),
     (["detector", "--video", "demo", "--curve-server", "nothere.key", "--curve-secret", "nothere.key_secret"],
      "error: --curve-server nothere.key: CURVE key file not found (make keys with 'stream-detect keys --out DIR')"),
     (["--video", "demo", "--curve-secret", "nothere.key_secret", "--curve-clients", "nothere"],
      "error: --curve-secret nothere.key_secret: CURVE key file not found (make keys with 'stream-detect keys "
      "--out DIR')")],
    ids=["video", "graph", "graph-is-a-checkpoint", "detector", "features", "stream-id", "client-key", "checker-key"])
def test_a_missing_file_or_bad_stream_id_is_said_before_the_model_loads(argv: list[str], line: str) -> None:
    # Said only once torch and the model had loaded: 6-10 s for a typo on a busy machine, each time a service
    # restarted in a loop.
    probe = ("import sys\nfrom streaming.stream_detect_cli import main\ntry:\n    main(sys.argv[1:])\n"
             "finally:\n    print('torch loaded' if 'torch' in sys.modules else 'torch not loaded')")
    run = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stderr.strip(), run.stdout.strip()) == (2, line, "torch not loaded")


def test_a_video_that_is_a_link_loop_is_said_to_be_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It was "file not found (and not a camera like cam0 or a stream URL)", though the name is there: a link to itself.
    loop = tmp_path / "loop.mp4"
    loop.symlink_to(loop.name)
    argv = ["--video", str(loop), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--jsonl"]
    assert cli_error(main, argv, capsys) == f"error: --video {loop}: a link loop, expected a video file"


def test_a_feature_source_given_without_its_suffix_or_as_its_folder_says_what_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A newcomer watching a CaptainCook4D recording typed features/17_49, then the folder eval had taken: both lines
    # said only what was wrong ("file not found", "a folder").
    folder = tmp_path / "features"
    folder.mkdir()
    for name in ("17_49", "17_45"):
        np.save(folder / f"{name}.npy", np.zeros((4, 8), dtype=np.float16))
    argv = ["--graph", str(GRAPH), "--detector", str(DETECTOR), "--fast", "--jsonl"]
    bare = folder / "17_49"
    assert cli_error(main, ["--features", str(bare), *argv], capsys) == (
        f"error: --features {bare}: file not found, expected a .npy feature file; did you mean '{bare}.npy'?")
    assert cli_error(main, ["--features", str(folder), *argv], capsys) == (
        f"error: --features {folder}: a folder, expected a .npy feature file (it holds 2 feature files: give one, as "
        f"{folder / '17_45.npy'}; stream-detect eval --features reads a whole folder)")
    # A name with no such file beside it gets no guess, and an empty folder no count.
    (folder / "17_45.npy").unlink()
    (folder / "17_49.npy").unlink()
    assert cli_error(main, ["--features", str(bare), *argv], capsys) == (
        f"error: --features {bare}: file not found, expected a .npy feature file")
    assert cli_error(main, ["--features", str(folder), *argv], capsys) == (
        f"error: --features {folder}: a folder, expected a .npy feature file")


def test_bad_stream_id(capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(main, ["--video", "demo", "--stream-id", "no spaces allowed", "--jsonl"], capsys)
    assert "stream" in line


@pytest.mark.parametrize("reader", ["auto", "opencv"])
def test_damaged_video_file_ends_the_run_with_one_error_line(
    reader: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It used to end in decord's traceback (auto) or, through OpenCV, in exit status 0 at the damage.
    video = write_damaged_video(tmp_path / "damaged.mp4")
    args = ["--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--jsonl", "--fast"]
    line = cli_error(main, [*args, "--reader", reader], capsys)
    assert "damaged.mp4: cannot decode source frame" in line


def test_ffmpeg_lines_never_join_the_error_line(tmp_path: Path) -> None:
    # FFmpeg (in OpenCV and in decord) and decord's own log printed "moov atom not found" and "ERROR opening"
    # on stderr around our error; a real process is needed to see what reaches file descriptor 2.
    video = write_damaged_video(tmp_path / "cut.mp4")
    video.write_bytes(video.read_bytes()[:2000])  # truncated: the container index is gone
    args = ["--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--jsonl"]
    result = subprocess.run([*STREAM_DETECT, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"error: --video {video}: OpenCV cannot open it (not a video, or an "
                                          "unsupported format)"]


def _checker_until_sigterm(tmp_path: Path, *options: str, signum: int = signal.SIGTERM,
                           meanwhile: Callable[[str], object] = lambda _first: None) -> tuple[str, str, int]:
    """A checker process stopped by SIGTERM (or ``signum``) once it is ready and ``meanwhile`` (given the first
    stderr line) has returned: that line, the rest, its exit status."""
    args = ["checker", "--graph", str(GRAPH), "--bind", f"ipc://{tmp_path}/in", "--publish", f"ipc://{tmp_path}/out"]
    # Started as from a terminal: under nohup the suite's SIGHUP is ignored, the child would inherit that, and the
    # checker rightly keeps an ignored SIGHUP ignored (graphs.common.interrupts).
    proc = subprocess.Popen([*STREAM_DETECT, *args, *options], stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    try:
        assert proc.stderr is not None
        ready = proc.stderr.readline()
        meanwhile(ready)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    return ready, err, proc.returncode


def test_sigterm_stops_the_checker_like_ctrl_c(tmp_path: Path) -> None:
    # Python's default SIGTERM (kill, timeout, systemd, docker stop) ended the checker without its summary line.
    ready, err, status = _checker_until_sigterm(tmp_path)
    assert ready.startswith("checker: detectors connect to ")
    assert err.startswith("checker: 0 messages received, 0 streams tracked (0 lost);")
    assert status == 143


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_checker_says_only_that_it_stopped(tmp_path: Path, signum: int, status: int) -> None:
    # It said "no output is left half-written (the file being written, if any, was discarded)": the checker writes
    # no file, and the line read as if something had been thrown away.
    _, err, code = _checker_until_sigterm(tmp_path, signum=signum)
    assert code == status
    assert err.splitlines()[-1] == f"interrupted by {signal.Signals(signum).name}: stopped"


def test_a_closed_terminal_sighup_stops_the_checker_with_its_summary_line(tmp_path: Path) -> None:
    # It died of SIGHUP on the spot, without the summary line.
    ready, err, status = _checker_until_sigterm(tmp_path, signum=signal.SIGHUP)
    assert ready.startswith("checker: detectors connect to ")
    assert err.startswith("checker: 0 messages received, 0 streams tracked (0 lost);")
    assert "interrupted by SIGHUP" in err and "Traceback" not in err
    assert status == 129


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_checker_leaves_no_ipc_socket_file_behind(tmp_path: Path, signum: int) -> None:
    # libzmq never removes the file of an ipc:// bind: every stop left in and out behind in the folder.
    ready, err, status = _checker_until_sigterm(tmp_path, signum=signum)
    assert ready.startswith("checker: detectors connect to ipc://") and status == 128 + signum, err
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_sigterm_stops_a_detector_with_its_ended_heartbeat(tmp_path: Path) -> None:
    # Without it the checker and every viewer kept showing the stream as running.
    video = write_noise_video(tmp_path / "long.mp4", frames=600)  # 20 s, read in real time
    with running_checker(tmp_path) as (_ctx, service, _thread):
        args = ["detector", "--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR),
                "--connect", service.events_endpoint, "--stream-id", "term"]
        proc = subprocess.Popen([*STREAM_DETECT, *args], stderr=subprocess.PIPE, text=True)
        try:
            streams = service.core.streams
            assert wait_for(lambda: "term" in streams and streams["term"].frames > 0, 30.0)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=10)
            assert wait_for(lambda: streams["term"].ended, 5.0)
            assert proc.returncode == 143
            assert err.splitlines()[-1] == "interrupted by SIGTERM: stopped"  # no --alert-frames: it writes no file
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)


def test_demo_cache_that_cannot_be_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # Making the cache folder under a file raised NotADirectoryError from pathlib (a traceback).
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("MISTAKE_CACHE", str(blocker / "cache"))
    line = cli_error(main, ["--video", "demo", "--jsonl", "--fast"], capsys)
    assert "$MISTAKE_CACHE" in line and str(blocker) in line


def test_video_too_small_for_the_detector_features(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A light-v1 detector for the demo's steps (its weights do not matter: the frames are refused before them).
    model, checkpoint = load_detector(DETECTOR)
    light = tmp_path / "light.pt"
    config = MiniROADConfig(80, 8, 8, checkpoint.config.num_classes, 0.0)
    save_detector(light, MiniROAD(config), checkpoint.class_names, checkpoint.class_step_ids, "light-v1", 5.0)
    video = write_noise_video(tmp_path / "tiny.mp4", frames=30, size=(4, 4))
    line = cli_error(main, ["--video", str(video), "--graph", str(GRAPH), "--detector", str(light), "--jsonl",
                            "--fast", "--checker", "binary"], capsys)
    assert line == "error: light-v1 features need frames of at least 7x7 px, got 4x4"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(main, ["--video", "demo", "--device", "cuda", "--jsonl", "--fast"], capsys)
    assert line.startswith("error: --device cuda: torch")
    assert line.endswith("sees no CUDA device; use --device cpu (or auto)")


@pytest.mark.parametrize("video", ["demo:", "demo:typo"])
def test_demo_with_an_empty_or_unknown_name_is_refused(video: str, capsys: pytest.CaptureFixture[str]) -> None:
    # "demo:" used to play the mistake demo as if nothing had been asked.
    line = cli_error(main, ["--video", video, "--jsonl", "--fast"], capsys)
    assert line.startswith(f"error: --video: demo {video!r}: not one of") and "demo:mistake, demo:correct" in line


def test_several_sources_go_through_one_detector_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    videos = [write_noise_video(tmp_path / "a.mp4", frames=60), write_noise_video(tmp_path / "b.mp4", frames=30)]
    with running_checker(tmp_path) as (_ctx, service, _thread):
        args = ["detector", "--video", str(videos[0]), "--video", str(videos[1]), "--stream-id", "door",
                "--stream-id", "bench", "--graph", str(GRAPH), "--detector", str(DETECTOR), "--fast",
                "--connect", service.events_endpoint, "--log-format", "json"]
        assert main(args) == 0
        streams = service.core.streams
        assert wait_for(lambda: all(s in streams and streams[s].ended for s in ("door", "bench")), 5.0)
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]  # every one a JSON object
    ready, *ends = [line for line in lines if line["level"] == "info"]  # (a warning may come first: its rates)
    # Said once the model is loaded and the checker listens: the seconds of loading were silent.
    assert ready["message"] == f"detector: 2 streams (door, bench) publishing to {service.events_endpoint}"
    assert ready["fields"] == {"streams": ["door", "bench"], "connect": service.events_endpoint}
    # Each said as its stream ends: which of two --fast files ends first is the race of their readers.
    assert sorted((line["service"], line["fields"]["stream"], line["fields"]["frames"]) for line in ends) \
        == [("detector", "bench", 5), ("detector", "door", 10)]
    door = next(line for line in ends if line["fields"]["stream"] == "door")
    assert door["message"].startswith("door: 10 frames at ") and door["time"].endswith("Z")


def test_a_reader_s_warning_goes_through_the_detector_s_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A Matroska file whose video ends before its container's duration was said by the reader thread straight on
    # stderr, past the detector's queued log: a stderr that took nothing held that stream's end (and, here, the line
    # was plain text among the JSON lines a log collector parses).
    cut = write_truncated_video(tmp_path / "cut.mkv", frames=120)
    with running_checker(tmp_path) as (_ctx, service, _thread):
        args = ["detector", "--video", str(cut), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--fast",
                "--connect", service.events_endpoint, "--log-format", "json"]
        assert main(args) == 0
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]  # every one a JSON object
    early = [line for line in lines if "its video ends at" in line["message"]]
    assert [(line["level"], line["service"]) for line in early] == [("warning", "detector")], lines


def test_a_stream_of_too_few_frames_for_a_rate_ends_without_one(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # A source of one frame ended on "cam0: 1 frames at 55.7 fps" from a 5 fps detector: a rate over a run that is
    # mostly the wait for its first frame. Under 5 frames none is stated (null in the JSON line's fields).
    videos = [write_noise_video(tmp_path / "one.mp4", frames=6), write_noise_video(tmp_path / "three.mp4", frames=18)]
    with running_checker(tmp_path) as (_ctx, service, _thread):
        args = ["detector", "--video", str(videos[0]), "--video", str(videos[1]), "--stream-id", "one", "--stream-id",
                "three", "--graph", str(GRAPH), "--detector", str(DETECTOR), "--fast", "--connect",
                service.events_endpoint, "--log-format", "json"]
        assert main(args) == 0
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    ends = {line["fields"]["stream"]: line for line in lines if "stream" in line["fields"]}
    assert ends["one"]["message"].startswith("one: 1 frame, 0 dropped, "), ends
    assert ends["three"]["message"].startswith("three: 3 frames, 0 dropped, "), ends
    assert ends["one"]["fields"]["fps"] is None and ends["three"]["fields"]["fps"] is None


def test_a_stream_s_end_line_is_said_when_it_ends_while_the_others_go_on(tmp_path: Path) -> None:
    # The detector said every stream's end line only once the last source had ended: with a camera among the
    # sources, a file that ended long before was never said at all.
    short = write_noise_video(tmp_path / "short.mp4", frames=30)  # 1 s in real time
    long = write_noise_video(tmp_path / "long.mp4", frames=1800)  # 60 s: stopped before
    with running_checker(tmp_path) as (_ctx, service, _thread):
        args = ["detector", "--video", str(short), "--video", str(long), "--stream-id", "short", "--stream-id",
                "long", "--graph", str(GRAPH), "--detector", str(DETECTOR), "--connect", service.events_endpoint]
        proc = subprocess.Popen([*STREAM_DETECT, *args], stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        assert proc.stderr is not None
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
        reader.start()
        try:
            assert wait_for(lambda: any(line.startswith("short: ") for line in lines) or proc.poll() is not None,
                            60.0), lines
            assert proc.poll() is None, lines
            assert not any(line.startswith("long: ") for line in lines)
            assert not service.core.streams["long"].ended
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)
            reader.join(5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    ends = [line for line in lines if line.startswith(("short: ", "long: "))]
    assert [line.split(":")[0] for line in ends] == ["short", "long"], lines  # each once, as it ended
    assert ends[0].startswith("short: 5 frames at ") and "failed" not in ends[0]
    assert lines[-1] == "interrupted by SIGTERM: stopped\n" and proc.returncode == 143


def test_two_sources_with_one_stream_id_or_one_source_twice(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    clip = write_noise_video(tmp_path / "clip.mp4")
    base = ["detector", "--graph", str(GRAPH), "--detector", str(DETECTOR)]
    line = cli_error(main, [*base, "--video", "cam0", "--video", str(clip), "--stream-id", "k", "--stream-id", "k"],
                     capsys)
    assert line == f"error: --stream-id k is given to two sources (--video cam0 and --video {clip}): each stream " \
                   "needs its own id"
    line = cli_error(main, [*base, "--video", str(clip), "--video", f"{tmp_path}/./clip.mp4"], capsys)
    assert line == f"error: --video {tmp_path}/./clip.mp4 is given twice (streams cam0 and cam1): each source feeds " \
                   "one stream"


@pytest.mark.parametrize("command", ["checker", "detector"])
def test_a_metrics_port_in_use(command: str, capsys: pytest.CaptureFixture[str]) -> None:

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = [command, "--metrics", f"127.0.0.1:{port}"]
        args += ["--demo", "--bind", "tcp://127.0.0.1:0", "--publish", "tcp://127.0.0.1:0"] if command == "checker" \
            else ["--video", "demo"]
        line = cli_error(main, args, capsys)
    assert line == f"error: --metrics 127.0.0.1:{port}: address already in use"
    line = cli_error(main, [command, "--metrics", "0.0.0.0:9100", *args[3:]], capsys)
    assert line.startswith("error: --metrics 0.0.0.0:9100 is reachable beyond this machine")
    line = cli_error(main, [command, "--metrics-public", *args[3:]], capsys)  # was ignored in silence
    assert line == "error: --metrics-public lets --metrics bind beyond loopback: give --metrics HOST:PORT with it"


def test_a_metrics_port_that_is_also_the_checkers_bind_or_publish_port_is_refused_before_binding(
        capsys: pytest.CaptureFixture[str]) -> None:
    # The metrics endpoint bound first, then the checker's own socket failed on the port it had just taken, with
    # "address already in use (another program is using it: pick another port)": the other program was this one.
    # The port is held here, so a checker that went on to bind anything would say "already in use" instead.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for option, metrics in (("--bind", f"127.0.0.1:{port}"), ("--publish", str(port))):
            endpoints = {"--bind": "tcp://127.0.0.1:0", "--publish": "tcp://127.0.0.1:0",
                         option: f"tcp://127.0.0.1:{port}"}
            argv = ["checker", "--demo", "--metrics", metrics, *(x for kv in endpoints.items() for x in kv)]
            line = cli_error(main, argv, capsys)
            assert line == (f"error: --metrics {metrics} and {option} tcp://127.0.0.1:{port} name the same port: the "
                            "metrics endpoint and the checker's socket need one each")


def test_the_checker_logs_json_lines(tmp_path: Path) -> None:
    first, err, _ = _checker_until_sigterm(tmp_path, "--log-format", "json")
    ready = json.loads(first)
    assert ready["service"] == "checker" and ready["fields"]["events"] == f"ipc://{tmp_path}/in"
    summary, interrupted = err.splitlines()
    assert json.loads(summary)["message"].startswith("checker: 0 messages received")
    # The summary's numbers are fields too, as the docs promise (its line came with an empty object).
    assert json.loads(summary)["fields"] == dict.fromkeys(
        ("received", "streams", "lost", "stream_limit", "evicted", "unknown_step", "over_budget", "unsendable",
         "stream_taken", "denied", "malformed", "sink_failed", "reopen_failed"), 0)
    assert interrupted.startswith("interrupted by SIGTERM: ")  # like an error: line, the exit's own line stays plain


def test_a_metrics_port_of_0_is_named_once_bound(tmp_path: Path) -> None:
    # --metrics 0 took a free port and said nothing of which: the endpoint could not be found.
    scraped: list[int] = []

    def scrape(first: str) -> None:
        assert first.startswith("checker: metrics at http://127.0.0.1:") and first.endswith("/metrics\n"), first
        with urllib.request.urlopen(first.removeprefix("checker: metrics at ").strip(), timeout=5) as page:
            scraped.append(page.status)

    _, _, status = _checker_until_sigterm(tmp_path, "--metrics", "0", meanwhile=scrape)
    assert scraped == [200] and status == 143


def test_the_checker_s_json_lines_name_the_stream_the_refusal_and_the_webhook_counts(tmp_path: Path) -> None:
    # A log collector got "checker: cam0 new" and the webhook's summary with an empty "fields" object: it had to parse
    # the English to learn which stream changed, what was refused or how many alerts were delivered.
    def a_stream_and_a_malformed_message(_first: str) -> None:
        ctx = zmq.Context()
        try:
            sender = connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0)
            viewer = Receiver(subscribe(connect(ctx, zmq.SUB, f"ipc://{tmp_path}/out", wait_s=5.0)))
            events = EventPublisher(Publisher(sender), "cam0")
            seen: list[Status] = []

            def beat_and_look() -> None:
                events.heartbeat(None, 0, 0, 0.0)
                seen.extend(m for m in viewer.poll(50) if isinstance(m, Status) and m.stream_id == "cam0")

            assert wait_for(lambda: bool(seen), 10.0, beat_and_look)
            sender.send_multipart([b"keystep/cam0", b"{not json"])
            assert wait_for(lambda: any(isinstance(m, CheckerHealth) and m.malformed for m in viewer.poll(50)), 10.0)
        finally:
            ctx.destroy(linger=0)

    with refused_port() as port:  # the webhook is never reached
        webhook = f"http://127.0.0.1:{port}/hook"
        _, err, status = _checker_until_sigterm(tmp_path, "--log-format", "json", "--webhook", webhook,
                                                meanwhile=a_stream_and_a_malformed_message)
    assert status == 143
    lines = [json.loads(line) for line in err.splitlines()[:-1]]
    change = next(line for line in lines if line["message"].startswith("checker: cam0 new (run "))
    assert change["level"] == "info"  # a stream that comes is news, not a warning (one that is lost is)
    assert change["fields"] == {"stream": "cam0", "change": "new", "detail": change["message"][19:-1]}
    refused = next(line for line in lines if line["message"].startswith("checker: refused (malformed"))
    assert refused["fields"]["reason"] == "malformed" and refused["fields"]["count"] == 1
    summary = next(line for line in lines if line["message"].startswith(f"webhook {webhook}: "))
    assert summary["fields"] == {"delivered": 0, "failed": 0, "dropped": 0, "queued": 0, "unanswered": 0}


class _InfiniteWhenBright(torch.nn.Module):
    """1280 features, finite on the blank probe and infinite on any real frame (a division by zero)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bright = (x.mean(dim=(1, 2, 3)) > -1.0).float()[:, None]
        return torch.ones(x.shape[0], 1280) / (1.0 - bright)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_user_backbone_that_outputs_infinity_mid_stream_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Infinite features went on to the detector: the stream was lost, and the run ended in "the checker did not
    # confirm the end of stream cam0", exit 1, without a word about the backbone.
    backbone = tmp_path / "backbone.pt"
    torch.jit.script(_InfiniteWhenBright()).save(str(backbone))
    detector = tmp_path / "detector.pt"
    checkpoint = torch.load(DETECTOR, weights_only=False)
    checkpoint["feature_extractor"] = "torchscript"  # the demo detector's 1280-wide input, fed by the user's file
    torch.save(checkpoint, detector)
    line = cli_error(main, ["--video", "demo", "--fast", "--jsonl", "--detector", str(detector),
                            "--backbone", str(backbone)], capsys)
    assert line.startswith(f"error: --backbone {backbone}: its features hold NaN or infinity")


def test_a_video_slower_than_the_detectors_rate_is_warned_of_and_still_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A 2 fps video given to a 5 fps detector had each frame read two or three times over, without a word (as
    # recognition-features says of a folder it extracts).
    import cv2
    import numpy as np

    clip = tmp_path / "slow.mp4"
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter.fourcc(*"mp4v"), 2.0, (64, 48))
    assert writer.isOpened()
    for k in range(8):
        writer.write(np.full((48, 64, 3), 30 * k, np.uint8))
    writer.release()
    assert main(["--video", str(clip), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--fast", "--jsonl"]) == 0
    err = capsys.readouterr().err
    assert (f"warning: --video {clip}: 2 frames a second, below the detector's 5: each frame is read up to 3 times "
            "over (the detector learned from frames 1/5 s apart); a detector trained at 2 fps or less reads each frame "
            "once") in err, err
