"""The `prego-bench` command as a user runs it: tables, JSON, sub-commands and one-line errors."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from graphs.task_graph import TaskGraph, load_graph, save_graph
from tests.cli_errors import cli_error
from tests.rendered import drawn
from tgml.bench import prego
from tgml.bench.prego_bench_cli import bench_parser, main


def test_benchmark_prints_table_and_writes_json(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "results.json"
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "count-based", "--json", str(out_json)]
    assert main([*argv, "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "epic-tent-o" in printed and "count-based" in printed and "published" in printed
    assert "swapped" in printed and "finished in" in printed
    result = json.loads(out_json.read_text())
    assert round(result["results"]["epic-tent-o"]["gt"]["count-based"]["mean"]["avg_f1"], 1) == 57.7
    assert round(result["results"]["epic-tent-o"]["pred"]["count-based"]["mean"]["avg_f1"], 1) == 44.8


def test_help_gives_the_seed_range_the_run_uses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "seeds S..S+N-1, S being --first-seed" in text and "seeds 1..N" not in text  # the default S is 42, not 1
    assert "first training seed (default 42" in text


def test_perturbation_ablation_table_and_plot(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plot = tmp_path / "ablation.png"
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--mode", "gt", "--method", "count-based"]
    assert main([*argv, "--perturb", "0,0.5", "--plot", str(plot), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "Noise ablation" in printed and "p=0.5" in printed
    pytest.importorskip("matplotlib")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _test_videos(data_dir: Path) -> list[str]:
    return list(json.loads((data_dir / "epic-tent-o" / "test.json").read_text())["annotations"])


def test_user_sequence_file_is_evaluated(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seq = tmp_path / "mine.json"
    videos = _test_videos(data_dir)
    seq.write_text(json.dumps({video: {"pred": [4, 7, 6, 3]} for video in videos}))
    out_json = tmp_path / "r.json"
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--mode", "pred", "--method", "count-based"]
    assert main([*argv, "--sequences", str(seq), "--json", str(out_json), "--quiet"]) == 0
    scores = json.loads(out_json.read_text())["results"]["epic-tent-o"]["pred"]["count-based"]["per_seed"][0]
    assert scores["scores"]["n_videos"] == len(videos) and scores["scores"]["n_steps"] == 4 * len(videos)


@pytest.mark.parametrize("change", ["missing", "extra"])
def test_a_sequence_file_must_hold_exactly_the_test_videos(
    change: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A test video left out was dropped from the scores without a word (Avg F1 46.3 instead of 44.8).
    sequences = {video: {"pred": [4, 7, 6, 3]} for video in _test_videos(data_dir)}
    if change == "missing":
        sequences.pop("annotations_3")
    else:
        sequences["video_99"] = {"pred": [4, 7]}
    seq = tmp_path / "mine.json"
    seq.write_text(json.dumps(sequences))
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--mode", "pred", "--method", "count-based"]
    err = cli_error(main, [*argv, "--sequences", str(seq), "--quiet"], capsys)
    assert (("no sequence for test video 'annotations_3'" if change == "missing" else "'video_99' is not a test video")
            in err and "the file needs exactly the 15 test videos" in err)


def test_bad_sequence_file_is_one_line_naming_video_and_field(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seq = tmp_path / "bad.json"
    seq.write_text(json.dumps({"video_7": {"pred": [1, 2, 300]}}))
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--mode", "pred", "--sequences", str(seq)]
    err = cli_error(main, argv, capsys)
    assert "video_7" in err and "'pred'" in err and "300" in err


def test_a_task_graph_given_as_the_sequence_file_is_named_for_what_it_is(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its fields were read as videos: "video 'format': expected an object with field 'pred'".
    seq = tmp_path / "graph.json"
    adjacency = np.zeros((4, 4), dtype=bool)
    adjacency[1, 0] = adjacency[2, 1] = adjacency[3, 2] = True  # START <- 0 <- 1 <- END
    save_graph(TaskGraph((0, 1), ("a", "b"), adjacency), seq)
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--mode", "pred", "--sequences", str(seq)]
    assert cli_error(main, argv, capsys) == (f"error: {seq}: this looks like a task graph (tgml train writes them), "
                                             'not a sequence file {video: {"pred": [...], "gt": [...]}}')


def test_sequence_file_with_a_video_written_twice_is_refused(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seq = tmp_path / "twice.json"
    seq.write_text('{"v1": {"pred": [4, 7]}, "v2": {"pred": [3]}, "v1": {"pred": [6, 3]}}')
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--mode", "pred", "--method", "count-based"]
    err = cli_error(main, [*argv, "--sequences", str(seq), "--quiet"], capsys)
    assert "twice.json" in err and "'v1' appears twice" in err


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--json", "."], "is a folder, expected a file name for the results file"),
        (["--json", "a_file/r.json"], "a_file is a file, not a folder"),
        (["--save-graphs", "a_file"], "a_file: is a file, expected the graphs folder"),
        (["--perturb", "0.1", "--plot", "a_file/p.png", "--json", "r.json"], "cannot write the ablation plot"),
    ],
    ids=["json-is-a-folder", "json-under-a-file", "save-graphs-is-a-file", "plot-under-a-file"],
)
def test_outputs_that_cannot_be_written_are_refused_before_the_run(
    flags: list[str], fragment: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    flags = [str(tmp_path / f) if not f[0].isdigit() and not f.startswith("--") else f for f in flags]
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "count-based", *flags, "--quiet"]
    assert fragment in cli_error(main, argv, capsys)
    assert not (tmp_path / "r.json").exists()


def _tiny_replay(tmp_path: Path) -> list[str]:
    """A replay command line over a two-step graph and one video of per-frame labels (no --json yet)."""
    adjacency = np.zeros((4, 4), dtype=bool)
    adjacency[1, 0] = adjacency[2, 1] = adjacency[3, 2] = True  # START <- 0 <- 1 <- END
    save_graph(TaskGraph((0, 1), ("a", "b"), adjacency), tmp_path / "g.json")
    frames = tmp_path / "frames.json"
    frames.write_text(json.dumps({"v1": {"pred": [0] * 120 + [1] * 120}}))
    return ["replay", "--frames", str(frames), "--graph", str(tmp_path / "g.json"), "--no-sweep"]


def test_replay_refuses_a_results_path_it_could_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*_tiny_replay(tmp_path), "--json", str(tmp_path)]
    assert "is a folder, expected a file name for the results file" in cli_error(main, argv, capsys)


def test_results_file_may_not_overwrite_an_input(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seq = tmp_path / "mine.json"
    seq.write_text(json.dumps({"v": {"pred": [4, 7, 6, 3]}}))
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--mode", "pred", "--method", "count-based"]
    assert "would overwrite this input file" in cli_error(main, [*argv, "--sequences", str(seq), "--json", str(seq)],
                                                          capsys)
    assert json.loads(seq.read_text()) == {"v": {"pred": [4, 7, 6, 3]}}
    frames_argv = _tiny_replay(tmp_path)
    frames = frames_argv[frames_argv.index("--frames") + 1]
    assert "would overwrite this input file" in cli_error(main, [*frames_argv, "--json", frames], capsys)


def test_replay_names_the_results_file_as_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "[run 1] replay.json"
    assert main([*_tiny_replay(tmp_path), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["format"] == "prego-replay-results"
    assert f"results written to {out}" in capsys.readouterr().out  # the [run 1] was eaten as rich markup


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--perturb", "0.1,lots"], ["prego-bench:", "--perturb", "0.1,lots"]),
        (["--perturb", ""], ["--perturb", "at least one rate"]),
        (["--perturb", "0,0.2,0.2"], ["--perturb", "rate 0.2 is listed twice"]),
        (["--perturb", "0,1.5"], ["--perturb", "rate 1.5 is outside [0, 1]"]),
        (["--dataset", "tent"], ["invalid choice: 'tent'"]),
        (["--config", "settings.toml"], ["--config", "DATASET=FILE"]),
        (["select", "--folds", "2"], ["prego-bench select:", "required: --dataset"]),
        (["replay", "--field", "both"], ["prego-bench replay:", "invalid choice: 'both'"]),
    ],
    ids=["bad-perturb-list", "empty-perturb-list", "repeated-rate", "rate-above-1", "unknown-dataset",
         "config-without-dataset", "select-without-dataset", "replay-bad-field"],
)
def test_usage_mistakes_are_one_error_line(argv: list[str], fragments: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    err = cli_error(main, argv, capsys)
    assert [f for f in fragments if f not in err] == [], err


def test_replay_without_a_frames_file_points_to_frames_option(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only EPIC-Tent-O's per-frame labels ship; the hint named --sequences, an option replay does not have.
    err = cli_error(main, ["replay", "--data", str(data_dir), "--dataset", "assembly101-o", "--no-sweep"], capsys)
    assert "assembly101-o_frames.json" in err and "--frames FILE" in err and "--sequences" not in err


def test_a_method_given_twice_is_refused(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--data", str(data_dir), "--method", "count-based", "do", "count-based", "--quiet"]
    assert cli_error(main, argv, capsys) == ("error: prego-bench: --method count-based do count-based: count-based is "
                                             "given twice (see prego-bench --help)")
    # Named by the option typed, not the settings field behind it (BenchConfig.datasets).
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "epic-tent-o", "--quiet"]
    assert cli_error(main, argv, capsys) == ("error: prego-bench: --dataset epic-tent-o epic-tent-o: epic-tent-o is "
                                             "given twice (see prego-bench --help)")


@pytest.mark.parametrize("option", [["--plot", "ablation.png"], ["--perturb-seed", "3"]], ids=["plot", "seed"])
def test_an_ablation_option_without_the_ablation_is_refused(
    option: list[str], data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --plot without --perturb was ignored without a word: no ablation ran, no plot was written.
    argv = ["--data", str(data_dir), *option, "--quiet"]
    assert cli_error(main, argv, capsys) == (f"error: {option[0]} is an option of the noise ablation: "
                                             "give --perturb RATES too (e.g. --perturb 0,0.1,0.2)")


@pytest.mark.parametrize(
    ("configs", "fragment"),
    [
        (["epic-tent-o=a.toml", "epic-tent-o=b.toml"], "a second settings file for epic-tent-o"),
        (["assembly101-o=a.toml"], "assembly101-o is not run (--dataset epic-tent-o)"),
    ],
    ids=["twice", "dataset-not-run"],
)
def test_settings_files_that_would_be_ignored_are_refused(
    configs: list[str], fragment: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "count-based", "--quiet"]
    err = cli_error(main, [*argv, *(x for c in configs for x in ("--config", c))], capsys)
    assert fragment in err


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (["--config", "tent=a.toml"],
         "error: --config tent=a.toml: dataset 'tent': not one of the 2 known (assembly101-o, epic-tent-o)"),
        (["--mode", "pred", "--checker", "probabilistic", "--checker-settings", "tent=a.json"],
         "error: --checker-settings tent=a.json: dataset 'tent': not one of the 2 known (assembly101-o, epic-tent-o)"),
        (["--mode", "pred", "--checker", "probabilistic", "--checker-settings", "assembly101-o=a.json"],
         "error: --checker-settings assembly101-o=a.json: assembly101-o is not run (--dataset epic-tent-o)"),
        (["--mode", "pred", "--checker", "probabilistic", "--checker-settings", "epic-tent-o=a.json",
          "--checker-settings", "epic-tent-o=b.json"],
         "error: --checker-settings epic-tent-o=b.json: a second settings file for epic-tent-o"),
    ],
    ids=["config-unknown-dataset", "checker-unknown-dataset", "checker-dataset-not-run", "checker-twice"],
)
def test_settings_pairs_are_refused_naming_the_option_typed(
    options: list[str], line: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # These named the settings field behind the option (BenchConfig.config_files = "tent"), and a second
    # --checker-settings for one dataset silently replaced the first.
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "count-based", "--quiet", *options]
    assert cli_error(main, argv, capsys) == line


def test_missing_data_folder_says_how_to_build_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = cli_error(main, ["--data", str(tmp_path / "nowhere"), "--method", "count-based"], capsys)
    assert "prego-bench prepare" in err


def test_missing_split_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "epic-tent-o").mkdir()
    err = cli_error(main, ["--data", str(tmp_path), "--dataset", "epic-tent-o", "--mode", "gt"], capsys)
    assert "epic-tent-o/train.json" in err and "prepare --epic-tent RAW" in err


def test_graph_file_name_with_brackets_is_shown_as_given(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = tmp_path / "[v2]g.json"
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "count-based"]
    assert main([*argv, "--save-graphs", str(tmp_path), "--quiet"]) == 0
    (tmp_path / "epic-tent-o-count-based.json").rename(graph)
    capsys.readouterr()
    assert main([*argv[:-2], "--mode", "gt", "--graph", str(graph), "--perturb", "0.2", "--plot",
                 str(tmp_path / "p.png"), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("graph:[v2]g.json") == 2  # results and ablation tables; rich took "[v2]" for markup


@pytest.mark.parametrize(("extra", "named"), [
    (["--method", "do"], "--method configures"),
    (["--seeds", "3", "--epochs", "5"], "--seeds, --epochs configure"),
    (["--first-seed", "7"], "--first-seed configures"),
    (["--config", "epic-tent-o=x.toml"], "--config configures"),
    (["--save-graphs", "SAVED"], "--save-graphs configures"),
])
def test_learner_options_beside_a_graph_file_are_refused(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    # The graph file is evaluated as it is: these options were ignored in silence (exit 0, one row of the file's
    # graph), and --save-graphs wrote a copy of the file under a name of its own.
    graph = tmp_path / "g.json"
    extra = [str(tmp_path / "saved") if word == "SAVED" else word for word in extra]
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--graph", str(graph), *extra]
    message = cli_error(main, argv, capsys)
    assert message.startswith(f"error: --graph {graph}: the file's graph is evaluated as it is, and {named} ")
    assert not (tmp_path / "saved").exists()


def test_missing_graph_file_is_named(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--graph", str(tmp_path / "g.json")]
    assert "g.json: graph file not found" in cli_error(main, argv, capsys)


def test_prepare_subcommand_writes_the_splits(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prepare", "--epic-tent", str(data_dir / "epic-tent-o" / "raw"), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "epic-tent-o" / "test.json").read_bytes() == (
        data_dir / "epic-tent-o" / "test.json"
    ).read_bytes()
    assert "wrote" in capsys.readouterr().out


def test_prepare_refuses_an_out_that_is_a_file(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    argv = ["prepare", "--epic-tent", str(data_dir / "epic-tent-o" / "raw"), "--out", str(tmp_path / "a_file")]
    assert "a_file: is a file, expected the data folder" in cli_error(main, argv, capsys)


def test_prepare_with_a_broken_source_leaves_existing_files_alone(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(data_dir / "epic-tent-o" / "raw", raw)
    (raw / "test_split.json").write_text('{"annotations_999": 3}')  # a video the label file does not have
    out = tmp_path / "data"
    (out / "epic-tent-o").mkdir(parents=True)
    (out / "epic-tent-o" / "train.json").write_text("earlier train split")
    err = cli_error(main, ["prepare", "--epic-tent", str(raw), "--out", str(out)], capsys)
    assert "annotations_999" in err
    assert (out / "epic-tent-o" / "train.json").read_text() == "earlier train split"


@pytest.mark.parametrize("scales", ["nan", "-1", "0,1"])
def test_select_refuses_scales_that_are_not_positive(
    scales: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["select", "--data", str(data_dir), "--dataset", "epic-tent-o", "--folds", "2", "--epochs", "2"]
    assert "--scales" in cli_error(main, [*argv, "--scales", scales, "--quiet"], capsys)


@pytest.mark.parametrize(("option", "values", "rule"), [
    ("--epochs", "50,100000000000000000000", "an integer in 1..100000"),
    ("--scales", "0.5,1e300", "a number in (0, 100]"),
    ("--sizes", "1,9223372036854775807", "an integer in 1..1000"),
    ("--thresholds", "1,1e400", "a number in (0, 100]"),
])
def test_select_refuses_a_grid_value_outside_its_settings_range_naming_the_option(
    option: str, values: str, rule: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # These were refused by the learner's config, naming its class's field (DOConfig.epochs), not the option typed.
    method = {"--sizes": "do-ensemble", "--thresholds": "noisy-and-do"}.get(option, "do-cv")
    argv = ["select", "--data", str(data_dir), "--dataset", "epic-tent-o", "--method", method, "--folds", "2"]
    err = cli_error(main, [*argv, option, values, "--quiet"], capsys)
    assert err.startswith(f"error: {option} '{values}': expected comma-separated numbers, each {rule}, got ")


@pytest.mark.parametrize("method", ["do-cv", "do-ensemble", "noisy-and-do"])
def test_select_names_folds_below_two_by_the_option(
    method: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "SelectionConfig.folds = 1", a settings class the user never typed.
    argv = ["select", "--data", str(data_dir), "--dataset", "epic-tent-o", "--method", method, "--folds", "1"]
    assert cli_error(main, [*argv, "--quiet"], capsys) == "error: --folds 1: need at least 2"


def test_select_subcommand_prints_the_best_candidate(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["select", "--data", str(data_dir), "--dataset", "epic-tent-o", "--folds", "2", "--epochs", "20",
            "--workers", "1"]
    assert main(argv) == 0
    assert "best: epochs = 20" in capsys.readouterr().out


def test_msg2_reproduces_the_published_epic_tent_rows(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "r.json"
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "msg2", "msgi", "--json", str(out_json),
            "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "msgi" in printed and "tgt-text, published only" in printed and "64.1" in printed  # the paper's rows
    results = json.loads(out_json.read_text())["results"]["epic-tent-o"]
    assert round(results["gt"]["msg2"]["mean"]["avg_f1"], 1) == 54.1  # published 54.1
    assert round(results["pred"]["msg2"]["mean"]["avg_f1"], 1) == 45.2  # published 45.2
    assert results["gt"]["msgi"]["published"] is None


@pytest.mark.parametrize(("method", "reason"), [("llm", "CaptainCook4D only")])
def test_methods_it_cannot_run_say_why(
    data_dir: Path, method: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(main, ["--data", str(data_dir), "--method", method, "--quiet"], capsys)
    assert line.startswith(f"error: --method {method}: ") and reason in line  # not BenchConfig.methods


def test_a_setting_refused_by_the_benchmark_names_the_option_that_set_it(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--data", str(data_dir), "--mode", "gt", "--checker", "probabilistic", "--quiet"]
    assert cli_error(main, argv, capsys) == ("error: --checker probabilistic: the probabilistic checker is scored in "
                                             "PRED mode (GT tables stay binary)")
    # An option left at its default is not quoted as if typed.
    argv = ["--data", str(data_dir), "--graph", str(data_dir), "--quiet"]
    assert cli_error(main, argv, capsys) == ("error: --sequences and --graph need exactly one --dataset (--dataset not "
                                             "given: its default is assembly101-o epic-tent-o)")


def test_a_settings_file_without_the_methods_table_is_named(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An empty file said "settings of epic-tent-o: no [count-based] table in the benchmark settings file": which?
    settings = tmp_path / "s.toml"
    settings.write_text("[do]\nepochs = 5\n")
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "count-based", "--config",
            f"epic-tent-o={settings}", "--quiet"]
    assert cli_error(main, argv, capsys) == (f"error: --config epic-tent-o={settings}: no [count-based] table, which "
                                             "--method count-based needs (a settings file given for a dataset "
                                             "replaces its shipped one whole)")


@pytest.mark.parametrize(("table", "line", "fragment"), [
    ("msg2", 'unique_executions = "yes"', '[msg2] unique_executions = "yes"'),
    ("noisy-and", "cut = 2.0", "[noisy-and] cut = 2.0"),
])
def test_bad_values_of_the_new_methods_name_the_table(
    data_dir: Path, tmp_path: Path, table: str, line: str, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "s.toml"
    settings.write_text(f"[{table}]\n{line}\n")
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", table, "--config",
            f"epic-tent-o={settings}", "--quiet"]
    assert fragment in cli_error(main, argv, capsys)


def test_noisy_and_do_runs_and_names_its_rule_in_the_graph(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The default --workers: this run keeps the benchmark's jobs going through spawned worker processes (the other
    # runs here take --workers 1, as starting the workers costs more than their jobs on this data).
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "noisy-and-do", "--epochs", "20",
            "--save-graphs", str(tmp_path), "--quiet"]
    assert main(argv) == 0
    assert "noisy-and-do" in capsys.readouterr().out
    saved = [load_graph(path) for path in tmp_path.rglob("*.json")]
    assert saved and all(g.info["method"] == "noisy-and-do" and g.info["rule"] == "either" for g in saved)


def test_select_noisy_and_do_compares_with_each_learner_alone(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["select", "--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "noisy-and-do", "--folds", "2",
            "--rules", "either,both", "--thresholds", "1,2", "--workers", "1", "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "do-ensemble" in printed and "noisy-and" in printed
    assert re.search(r"best: rule = (either|both), threshold = [12]", printed)
    assert "--rules" in cli_error(main, [*argv, "--rules", "mean"], capsys)


@pytest.mark.parametrize(("body", "fragment"), [
    ('rule = "mean"\n', '[noisy-and-do] rule = "mean"'),
    ('rule = "either"\n[noisy-and-do.noisy-and]\n', "needs the sub-table [noisy-and-do.do-ensemble]"),
    ('[noisy-and-do.noisy-and]\ncut = 2.0\n[noisy-and-do.do-ensemble]\n',
     "[noisy-and-do.noisy-and]: NoisyAndConfig.cut = 2.0"),
    ('[noisy-and-do.noisy-and]\n[noisy-and-do.do-ensemble]\nsize = 3\n',
     "[noisy-and-do.do-ensemble]: setting 'size': not one of"),
])
def test_bad_noisy_and_do_settings_name_the_table(
    data_dir: Path, tmp_path: Path, body: str, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "s.toml"
    settings.write_text(f"[noisy-and-do]\n{body}")
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "noisy-and-do", "--config",
            f"epic-tent-o={settings}", "--quiet"]
    message = cli_error(main, argv, capsys)
    assert "[noisy-and-do]" in message and fragment in message


def test_prepare_and_select_checker_name_the_options_typed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The lines named the settings fields behind them: "assembly101 / epic_tent raw folders", "DOConfig.seed = -1".
    assert cli_error(main, ["prepare", "--out", str(tmp_path / "out")], capsys) == (
        "error: prepare: give at least one raw folder, --assembly101 or --epic-tent")
    missing = tmp_path / "nowhere"
    assert cli_error(main, ["prepare", "--epic-tent", str(missing), "--out", str(tmp_path / "out")], capsys) == (
        f"error: prepare: --epic-tent {missing}: not a folder")
    err = cli_error(main, ["select-checker", "--dataset", "epic-tent-o", "--seed", "-1"], capsys)
    assert "argument --seed: -1: must be an integer in 0..4294967295" in err and "DOConfig" not in err


def _entry(seeds: int, mean: float, published: dict | None, mistake_precision: float | None = 20.2) -> dict:
    means = {key: mean for key in prego.METRIC_KEYS} | {"mistake_precision": mistake_precision}
    stds = {key: 0.6 for key in prego.METRIC_KEYS} | {"mistake_precision": None if mistake_precision is None else 0.6}
    return {"per_seed": [{}] * seeds, "mean": means, "std": stds, "published": published}


@pytest.mark.parametrize("width", [80, 100, 120, 130])
def test_the_result_tables_never_split_or_cut_a_figure(width: int) -> None:
    """At 80 columns every ``±`` cell was split (``57.7 ±`` / ``0.6``) and names were cut (``pub…``, ``tgt-t…``)."""
    published = {"avg_f1": 58.3, "correct_f1": 93.5, "mistake_f1": 23.1}
    modes = {mode: {"do": _entry(5, 57.7, published), "count-based": _entry(1, 44.8, published),
                    "tgt-text": _entry(5, 47.7, None, mistake_precision=None)} for mode in ("gt", "pred")}
    result = {"settings": {}, "results": {"epic-tent-o": modes},
              "perturb": {"epic-tent-o": {"gt": {"count-based": [
                  {"rate": rate / 10, "mean": {"avg_f1": 75.9, "correct_f1": 90.2, "mistake_f1": 61.6}}
                  for rate in range(6)]}}}}
    for fitted in prego.result_tables(result) + prego.perturbation_tables(result):
        text = drawn(fitted, width)
        assert "…" not in text and max(len(line.rstrip()) for line in text.splitlines()) <= width
        for column in fitted.table.columns:
            for cell in column.cells:  # every figure on one line; a name may wrap, between its words only
                words = [cell.strip()] if column.justify == "right" else cell.split()
                assert all(any(word in line for line in text.splitlines()) for word in words), cell
    text = " ".join(drawn(prego.result_tables(result)[0], width).split())
    assert "57.7 ± 0.6" in text and "tgt-text (n=5)" in text
    # Each dash says what it means: the paper does not give the figure, or there was nothing to measure; and the
    # paper's marks of the two modes are said too (a new user read "gt *" with no key to it).
    assert ("gt *: the annotated key-steps. pred +: the key-steps a MiniROAD detector recognised. –: not published. "
            "-: not measured (nothing to count: a precision without an alert).") in text


def test_seeds_that_all_score_alike_are_said_to() -> None:
    # noisy-AND's seed only jitters a constant start: "± 0.0 over n=5" read as a very stable method, not a
    # deterministic one.
    alike = _entry(5, 72.3, None) | {"per_seed": [{"seed": s, "scores": {"avg_f1": 72.3}} for s in range(5)]}
    result = {"settings": {}, "results": {"epic-tent-o": {"gt": {"noisy-and": alike, "do": _entry(5, 57.7, None)}}}}
    text = " ".join(drawn(prego.result_tables(result)[0], 130).split())
    assert "noisy-and (n=5, all alike)" in text and "do (n=5)" in text and "do (n=5, all" not in text


def test_piped_the_noise_ablation_is_one_table_row_per_method(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Piped at 130 columns, the six-rate ablation table wrapped its cells (``75.9 / 90.2 /`` then ``61.6``)."""
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--mode", "gt", "--method", "count-based",
            "--perturb", "0,0.1,0.2,0.3,0.4,0.5", "--plot", str(tmp_path / "ablation.png"), "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    (row,) = [line for line in printed.splitlines() if line.startswith("│ count-based") and " / " in line]
    assert row.count(" / ") == 12 and "│ 57.7 / 93.2 / 22.2 │" in row  # six rates, each cell whole on the row


def test_help_lines_fit_80_columns_and_name_the_choices(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--method {noisy-and,do,...}`` was listed twice on lines of 110-180 characters."""
    monkeypatch.setenv("COLUMNS", "80")
    page = bench_parser().format_help()
    assert max(len(line) for line in page.splitlines()) <= 80
    assert "--method METHOD [METHOD ...]" in page and "--dataset DATASET [DATASET ...]" in page
    text = " ".join(page.split())
    assert "graph methods: noisy-and, do, do-cv," in text and "built-in datasets: assembly101-o, epic-tent-o" in text
    assert "invalid choice: 'dp'" in cli_error(main, ["--method", "dp"], capsys)  # the choices are still checked


@pytest.mark.parametrize("damage", ["folder", "link-loop"])
@pytest.mark.parametrize("file", ["epic-tent-o/test.json", "prego-miniroad/epic-tent-o_segments.json"])
def test_a_data_file_there_but_unreadable_is_not_called_missing(
    file: str, damage: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A folder or a link loop in a data file's place was "missing ...; build it with prego-bench prepare", and the
    # user rebuilt a file that was there.
    data = tmp_path / "data"
    for dataset in ("epic-tent-o", "prego-miniroad"):
        (data / dataset).mkdir(parents=True)
        for source in (data_dir / dataset).iterdir():
            (data / dataset / source.name).symlink_to(source)
    target = data / file
    target.unlink()
    if damage == "folder":
        target.mkdir()
    else:
        target.symlink_to(target.name)
    argv = ["--data", str(data), "--dataset", "epic-tent-o", "--method", "count-based", "--mode", "pred", "--quiet"]
    err = cli_error(main, argv, capsys)
    assert "missing" not in err and str(target) in err, err
    assert ("is a folder" if damage == "folder" else "Too many levels of symbolic links") in err, err


def test_a_data_folder_that_is_a_file_is_not_sent_to_be_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A --data naming a file (the data archive) was "data folder ... not found; build it with prego-bench prepare":
    # a path that was there, and a dataset the user had, sent to be built again.
    archive = tmp_path / "data.tar"
    archive.write_text("")
    err = cli_error(main, ["--data", str(archive), "--dataset", "epic-tent-o", "--method", "count-based", "--quiet"],
                    capsys)
    assert err == f"error: data folder {archive}: a file, expected a folder", err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--min-duration", "0.05"], "error: --min-duration 0.05: expected a number >= --min-run (0.1, its default)"),
        (["--max-delay", "0.5"], "error: --max-delay 0.5: expected a number >= 1, twice --min-duration (0.5, its "
                                 "default), so that a clean short step is never cut"),
        # One of a pair typed, the other left at its default: the one typed is at fault. The check fails on the
        # other (min_duration >= min_run, max_delay >= 2 * min_duration), which the error named as if typed.
        (["--min-run", "100"], "error: --min-run 100: expected a number <= --min-duration (0.5, its default)"),
        (["--min-duration", "5"], "error: --min-duration 5: expected a number <= 1, half of --max-delay (2, its "
                                  "default), so that a clean short step is never cut"),
        # Both typed: the pair, both as typed.
        (["--min-run", "100", "--min-duration", "0.5"],
         "error: --min-duration 0.5: expected a number >= --min-run (100)"),
        (["--sweep", "0,1"], "error: --sweep '0,1': 0 is not a --min-duration the segmenter takes (expected a number "
                             "in (0, 86400] (seconds))"),
    ],
    ids=["min-duration-below-min-run", "max-delay-below-twice-min-duration", "min-run-above-default-min-duration",
         "min-duration-above-half-default-max-delay", "both-typed", "sweep-value-out-of-range"],
)
def test_replay_names_the_options_typed_never_the_segmenter_fields(
        flags: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "expected a number >= min_run (0.1)": the reason named SegmenterConfig's field, not the option --min-run.
    argv = [arg for arg in _tiny_replay(tmp_path) if arg != "--no-sweep"]
    err = cli_error(main, [*argv, *flags], capsys)
    assert err == expected
    assert not re.search(r"\b(min_run|min_duration|max_delay)\b", err), err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--no-sweep", "--min-duration", "100", "--max-delay", "200"], "--min-duration 100"),
        (["--sweep", "1,100"], "the 100 s of --sweep '1,100'"),
    ],
    ids=["min-duration", "sweep"],
)
def test_a_video_too_short_for_the_segmenter_names_the_option_that_set_its_duration(
        flags: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "(a video too short for min_duration 100 s, ...)": the segmenter's field, not the option; a swept value's
    # error named neither the option nor the frames file.
    argv = [arg for arg in _tiny_replay(tmp_path) if arg != "--no-sweep"]
    err = cli_error(main, [*argv, *flags], capsys)
    assert err == (f"error: {tmp_path / 'frames.json'}: video 'v1': the segmenter confirmed no key-step at all in its "
                   f"240 frames (a video too short for {named}, or labels at another rate than --fps 60?)"), err
