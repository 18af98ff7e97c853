"""A name typed that is none of the names a command knows (a scenario, a video, a recipe, a dataset, a method, a rule,
a setting) is refused on one line that names the option and the name, and says the close one meant
(`graphs.common.safe_text.meant_name`): each of these was refused without it, the name meant left to be found in a
list or a file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from streaming.stream_detect_cli import main as stream_detect
from tests.cli_errors import cli_error
from tests.tgml.test_tgml_cli import TINY
from tgml.bench.prego_bench_cli import main as prego_bench
from tgml.tgml_cli import main as tgml


@pytest.fixture
def tea(tmp_path: Path) -> Path:
    """An annotation file of two tea executions (and a coffee scenario without any)."""
    path = tmp_path / "tea.json"
    path.write_text(json.dumps(TINY))
    return path


def test_tgml_train_says_the_scenario_meant_naming_the_option(
    tea: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(tgml, ["train", "--annotations", str(tea), "--scenario", "taa", "--out", str(tmp_path / "g.json")],
                     capsys)
    assert line == (f"error: --scenario: {tea}: scenario 'taa': not one of the 2 known (coffee, tea); "
                    "did you mean 'tea'?")


def test_tgml_train_says_the_execution_meant_by_exclude_videos(
    tea: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(tgml, ["train", "--annotations", str(tea), "--scenario", "tea", "--exclude-videos", "v11",
                            "--out", str(tmp_path / "g.json")], capsys)
    assert line.startswith("error: --exclude-videos: v11 not an execution of 'tea'")
    assert line.endswith("; did you mean 'v1'?")


@pytest.mark.parametrize("method", [[], ["--method", "noisy-and"]], ids=["default-learner", "named-learner"])
def test_tgml_train_says_the_setting_meant_in_a_config_file(
    method: list[str], tea: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text("cutt = 0.9\n")
    line = cli_error(tgml, ["train", "--annotations", str(tea), "--scenario", "tea", "--config", str(config),
                            "--out", str(tmp_path / "g.json"), *method], capsys)
    assert line.startswith(f"error: --config {config}: ") and "setting 'cutt'" in line
    assert line.endswith("; did you mean 'cut'?")


def test_tgml_bench_synthetic_says_the_learner_meant(capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(tgml, ["bench-synthetic", "--learners", "noisy-andd", "--quiet"], capsys)
    assert line == ("error: synthetic benchmark --learners: learner 'noisy-andd': not one of the 3 known (do, "
                    "noisy-and, noisy-and-sparse); did you mean 'noisy-and'?")


@pytest.mark.parametrize("command", ["bench-captaincook", "bench-mistakes", "bench-queries"])
def test_tgml_benchmarks_say_the_procedure_meant_naming_procedures(
    command: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was refused as an unknown scenario of the annotation file, with no word of the option that named it.
    line = cli_error(tgml, [command, "--data", str(data_dir), "--procedures", "coffee,blenderbananapancake",
                            "--quiet"], capsys)
    assert line.startswith("error: --procedures: ") and "scenario 'blenderbananapancake': not one of" in line
    assert line.endswith("; did you mean 'blenderbananapancakes'?")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(["bench-mistakes", "--rules", "precondtion"],
      "error: --rules 'precondtion': not one of the 2 known (precondition, late-step); did you mean 'precondition'?"),
     (["bench-mistakes", "--method", "dao"], "; did you mean 'do'?"),
     (["bench-captaincook", "--method", "dao"], "; did you mean 'do'?"),
     (["bench-queries", "--dataset", "epic-tent"],
      "error: bench-queries --dataset 'epic-tent': not one of the 3 known (captaincook4d, epic-tent-o, "
      "assembly101-o); did you mean 'epic-tent-o'?"),
     (["bench-live", "--recipes", "pinwheel"], "; did you mean 'pinwheels'?"),
     (["captaincook-labels", "--recordings", "1_366", "--out", "{tmp}/labels.json"],
      "has no annotation (ids such as 1_36); did you mean '1_36'?")],
    ids=["bench-mistakes-rules", "bench-mistakes-method", "bench-captaincook-method", "bench-queries-dataset",
         "bench-live-recipes", "captaincook-labels-recordings"])
def test_tgml_benchmarks_say_the_name_meant(
    argv: list[str], expected: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [word.replace("{tmp}", str(tmp_path)) for word in argv]
    line = cli_error(tgml, [*argv, "--data", str(data_dir), *(["--quiet"] if argv[0] != "captaincook-labels" else [])],
                     capsys)
    assert line.endswith(expected), line
    assert line.startswith(f"error: {argv[1]} ") or line.startswith(f"error: bench-queries {argv[1]}")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(["--config", "epic-tent=a.toml"],
      "error: --config epic-tent=a.toml: dataset 'epic-tent': not one of the 2 known (assembly101-o, epic-tent-o); "
      "did you mean 'epic-tent-o'?"),
     (["--checker", "probabilistic", "--checker-settings", "epic-tent=a.json"],
      "error: --checker-settings epic-tent=a.json: dataset 'epic-tent': not one of the 2 known (assembly101-o, "
      "epic-tent-o); did you mean 'epic-tent-o'?"),
     (["select", "--dataset", "epic-tent-o", "--method", "noisy-and-do", "--rules", "geometrc"],
      "error: --rules 'geometrc': not one of the 3 known (geometric, both, either); did you mean 'geometric'?")],
    ids=["config", "checker-settings", "select-rules"])
def test_prego_bench_says_the_dataset_or_rule_meant(
    argv: list[str], expected: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_error(prego_bench, [*argv, "--data", str(data_dir)], capsys) == expected


def test_prego_bench_says_the_test_video_meant_of_your_own_dataset(
    tea: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(prego_bench, ["--annotations", str(tea), "--scenario", "tea", "--test-videos", "v11",
                                   "--order-only"], capsys)
    assert line == f"error: --test-videos: video 'v11' is not in {tea}; did you mean 'v1'?"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(["--video", "demo:corect"],
      "error: --video: demo 'demo:corect': not one of the 3 known (demo:mistake, demo:correct, demo:missing); "
      "did you mean 'demo:correct'?"),
     (["eval", "--demo", "--videos-list", "demo:corect"],
      "error: --videos-list: demo execution 'demo:corect': not one of the 3 known (demo:mistake, demo:correct, "
      "demo:missing); did you mean 'demo:correct'?")],
    ids=["video", "eval-videos-list"])
def test_stream_detect_says_the_demo_meant(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_error(stream_detect, argv, capsys) == expected


def test_tgml_train_hints_no_video_spelt_right_nor_one_given_already(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "did you mean" sent the user to a neighbour of a name spelt right: a video of another scenario of the file, or
    # (a features folder's test recordings only partly in the graph's file) one already in the list.
    raw = {"annotations": {name: {"scenario": scenario, "recording_id": name, "segments": [{"step_id": 1}]}
                           for name, scenario in [("v_13", "tea"), ("w_1", "tea"), ("v_14", "coffee")]},
           "taxonomy": {"tea": {"1": {"name": "boil water", "id": 1}}, "coffee": {"1": {"name": "grind", "id": 1}}}}
    path = tmp_path / "tea.json"
    path.write_text(json.dumps(raw))
    train = ["train", "--annotations", str(path), "--scenario", "tea", "--out", str(tmp_path / "g.json")]
    line = cli_error(tgml, [*train, "--exclude-videos", "v_14"], capsys)
    assert line.startswith("error: --exclude-videos: v_14 not an execution of 'tea'") and "did you mean" not in line
    line = cli_error(tgml, [*train, "--exclude-videos", "v_13,v_15"], capsys)
    assert line.startswith("error: --exclude-videos: v_15 not an execution of 'tea'") and "did you mean" not in line
    line = cli_error(tgml, [*train, "--exclude-videos", "w_11"], capsys)
    assert line.endswith("; did you mean 'w_1'?")  # a typo still gets its hint


def test_prego_bench_hints_no_test_video_named_already(tea: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # v1,v11 got "did you mean 'v1'?": taken, v1 would be listed twice.
    line = cli_error(prego_bench, ["--annotations", str(tea), "--scenario", "tea", "--test-videos", "v1,v11",
                                   "--order-only"], capsys)
    assert line == f"error: --test-videos: video 'v11' is not in {tea}"


@pytest.mark.parametrize("argv", [["bench-live", "--recipes", "pinwheels,pinwheel", "--quiet"],
                                  ["captaincook-labels", "--recordings", "1_36,1_366", "--out", "{tmp}/labels.json"]],
                         ids=["bench-live-recipes", "captaincook-labels-recordings"])
def test_tgml_benchmarks_hint_no_name_given_already(
    argv: list[str], data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The name meant was one listed already beside the typo: taken, it would be listed twice.
    argv = [word.replace("{tmp}", str(tmp_path)) for word in argv]
    line = cli_error(tgml, [*argv, "--data", str(data_dir)], capsys)
    assert line.startswith(f"error: {argv[1]} ") and "did you mean 'pinwheels'?" not in line
    assert "did you mean '1_36'?" not in line


@pytest.mark.parametrize(
    ("command", "argv", "expected"),
    [(prego_bench, ["replya", "--frames", "f.json"],
      "error: prego-bench: command 'replya': not one of the 4 known (prepare, select, select-checker, replay); "
      "did you mean 'replay'?"),
     (stream_detect, ["chekcer"], "; did you mean 'checker'?")],
    ids=["prego-bench", "stream-detect"])
def test_a_misspelt_sub_command_is_refused_with_the_one_meant(
    command: Callable[[list[str]], int], argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # prego-bench took it for the benchmark's and said "unrecognized arguments: replya"; stream-detect listed its
    # nine sub-commands for the one meant to be found there.
    assert cli_error(command, argv, capsys).endswith(expected)


def test_tgml_train_hints_only_a_slip_and_names_the_scenario_of_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # CaptainCook4D's recording 17_49 (not in the graph-generation file) got "did you mean '17_19'?": a near spelling
    # of a recording id is another recording, not a typo. A slip of the keyboard still gets its hint.
    raw = {"annotations": {name: {"scenario": scenario, "recording_id": name, "segments": [{"step_id": 1}]}
                           for name, scenario in [("17_19", "raita"), ("17_3", "raita"), ("16_26", "eggs")]},
           "taxonomy": {"raita": {"1": {"name": "whisk", "id": 1}}, "eggs": {"1": {"name": "crack", "id": 1}}}}
    path = tmp_path / "raita.json"
    path.write_text(json.dumps(raw))
    train = ["train", "--annotations", str(path), "--scenario", "raita", "--out", str(tmp_path / "g.json")]
    assert "did you mean" not in cli_error(tgml, [*train, "--exclude-videos", "17_49"], capsys)
    assert cli_error(tgml, [*train, "--exclude-videos", "16_26"], capsys).endswith(
        "; 16_26 is a video of scenario 'eggs'")
    assert cli_error(tgml, [*train, "--exclude-videos", "17-3"], capsys).endswith("; did you mean '17_3'?")
    assert cli_error(tgml, [*train, "--exclude-videos", "17_33"], capsys).endswith("; did you mean '17_3'?")
