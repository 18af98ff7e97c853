"""The `tgml` command end to end, and its one-line errors (exit status 2) for bad input."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphs.common.errors import InputError
from graphs.task_graph import TaskGraph, load_graph, save_graph
from tests.cli_errors import cli_error
from tgml.tgml_cli import main

TINY: dict[str, Any] = {  # a JSON document, which tests copy and edit
    "annotations": {
        "v1": {"scenario": "tea", "recording_id": "v1", "segments": [{"step_id": 1}, {"step_id": 2}, {"step_id": 3}]},
        "v2": {"scenario": "tea", "recording_id": "v2", "segments": [{"step_id": 1}, {"step_id": 3}, {"step_id": 2}]},
    },
    "taxonomy": {
        "tea": {"1": {"name": "boil water", "id": 1}, "2": {"name": "add tea", "id": 2},
                "3": {"name": "get cup", "id": 3}},
        "coffee": {"7": {"name": "grind", "id": 7}},  # no execution: nothing to learn from
    },
}


def write(path: Path, content: object) -> Path:
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_train_show_dot_and_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ann = write(tmp_path / "ann.json", TINY)
    out = tmp_path / "tea.json"
    assert main(["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(out), "--epochs", "60",
                 "--quiet"]) == 0
    graph = load_graph(out)
    assert graph.scenario == "tea" and graph.step_names == ("boil water", "add tea", "get cup")
    assert graph.info["config"]["epochs"] == 60
    printed = capsys.readouterr()
    summary = printed.out
    assert summary.startswith("tea: noisy-and, 60 epochs, ") and f" edges from 2 executions -> {out}" in summary
    assert " SA 1.000 (sequence accuracy: 1 = every training order meets" in summary
    # Two executions show two orders: a graph learned from so few makes most other orders mistakes, and says so.
    assert printed.err == ("warning: tea: learned from 2 executions only: about 1.5 of its pre-conditions may be "
                           "coincidence (two steps done in either order come out in one order in all 2 with chance 1 "
                           "in 2, over the 3 pairs of steps every execution has); 4 executions would bring it under "
                           "0.5: record more, in the orders the procedure allows\n")

    dot = tmp_path / "tea.dot"
    assert main(["show", str(out), "--dot", str(dot)]) == 0
    shown = capsys.readouterr().out
    assert "boil water" in shown and "START" in shown and "END" in shown
    assert dot.read_text().startswith("digraph") and '"START" -> "k1"' in dot.read_text()

    assert main(["eval", "--pred", str(out), "--gt", str(out)]) == 0
    # One line a script can parse, even though it is longer than the 80 columns rich assumes for a pipe.
    expected = "precision 100.0  recall 100.0  F1 100.0  (5 of 5 predicted edges correct, 5 expected)\n"
    assert capsys.readouterr().out == expected

    bracketed = tmp_path / "[draft] tea.json"
    main(["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(bracketed), "--epochs", "2", "--quiet"])
    assert capsys.readouterr().out.strip().endswith(f"-> {bracketed}")  # not eaten as rich markup


@pytest.mark.parametrize(("method", "options"), [("count-based", []), ("msg2", []),
                                                ("do-ensemble", ["--epochs", "5"])])
def test_every_learner_says_how_many_executions_it_learned_from(
    method: str, options: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The count came from the learner's own info, which only noisy-AND, DO, do-cv and TGT-text record: the baselines
    # and the combined learners printed none, and a graph learned from two executions got no warning.
    ann = write(tmp_path / "ann.json", TINY)
    out = tmp_path / "tea.json"
    assert main(["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(out), "--method", method,
                 *options, "--quiet"]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith(f"tea: {method}, ") and f" edges from 2 executions -> {out}" in printed.out
    assert ("warning: tea: learned from 2 executions only: about 1.5 of its pre-conditions may be coincidence"
            in printed.err)


def executions_of_five_steps(count: int) -> dict[str, Any]:
    """``count`` executions of a five-step procedure whose steps 1 and 2 come first, in either order."""
    orders = [[1, 2, 3, 4, 5], [2, 1, 3, 5, 4], [1, 2, 4, 3, 5], [2, 1, 5, 3, 4], [1, 2, 3, 5, 4],
              [2, 1, 4, 5, 3], [1, 2, 5, 4, 3]]
    return {"annotations": {f"v{i}": {"scenario": "tent", "segments": [{"step_id": s} for s in orders[i]]}
                            for i in range(count)},
            "taxonomy": {"tent": {str(s): {"name": f"step {s}", "id": s} for s in range(1, 6)}}}


@pytest.mark.parametrize(("count", "warned"), [(1, True), (5, True), (6, False), (7, False)])
def test_train_warns_when_its_executions_are_too_few_for_its_steps(
    count: int, warned: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A fixed floor of 3 executions let a graph learned from 6 keep a false pre-condition without a word. Two steps
    # done in either order come out in one order in all n executions with chance 2^(1-n): over the 10 pairs of 5
    # steps, 5 executions expect 10/16 = 0.6 such pre-conditions, 6 expect 0.3.
    ann = write(tmp_path / "ann.json", executions_of_five_steps(count))
    assert main(["train", "--annotations", str(ann), "--out", str(tmp_path / "g.json"), "--epochs", "20",
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    if count == 1:  # "in all 1 with chance 1 in 1" said nothing: one order is the whole reason
        assert err == ("warning: tent: learned from 1 execution only: about 10 of its pre-conditions may be "
                       "coincidence (one execution shows one order, so each of its steps requires every step before "
                       "it); 6 executions would bring it under 0.5: record more, in the orders the procedure allows\n")
    elif warned:
        assert err == ("warning: tent: learned from 5 executions only: about 0.6 of its pre-conditions may be "
                       "coincidence (two steps done in either order come out in one order in all 5 with chance 1 in "
                       "16, over the 10 pairs of steps every execution has); 6 executions would bring it under 0.5: "
                       "record more, in the orders the procedure allows\n")
    else:
        assert err == ""


def test_eval_of_two_procedures_graphs_names_both_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tea, other = tmp_path / "tea.json", tmp_path / "tent.json"
    save_graph(TaskGraph((1, 2), ("boil water", "add tea"), np.zeros((4, 4), bool), scenario="tea"), tea)
    save_graph(TaskGraph((7, 8), ("unfold", "insert pole"), np.zeros((4, 4), bool), scenario="tent"), other)
    err = cli_error(main, ["eval", "--pred", str(tea), "--gt", str(other)], capsys)
    assert err.startswith(f"error: --pred {tea} and --gt {other} (tea and tent): graphs have different steps")


def test_train_uses_config_file_and_flags(tmp_path: Path) -> None:
    ann = write(tmp_path / "ann.json", TINY)
    cfg = write(tmp_path / "c.toml", 'epochs = 30\nearly_stop = "sa-threshold:0.1"\n')
    out = tmp_path / "g.json"
    assert main(["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(out), "--config", str(cfg),
                 "--seed", "5", "--augment", "--quiet"]) == 0
    info = load_graph(out).info
    assert info["config"]["seed"] == 5 and info["config"]["augment"] is True
    assert info["epochs_run"] == 1  # sa-threshold:0.1 from the file stops after the first epoch


def test_train_defaults_to_noisy_and_and_keeps_direct_optimization_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ann = write(tmp_path / "ann.json", TINY)
    out = tmp_path / "g.json"
    base = ["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(out), "--quiet"]
    assert main([*base, "--epochs", "30"]) == 0
    assert "tea: noisy-and," in capsys.readouterr().out
    info = load_graph(out).info
    assert info["method"] == "noisy-and" and info["config"]["epochs"] == 30
    assert main([*base, "--method", "do", "--epochs", "20"]) == 0
    assert load_graph(out).info["method"] == "direct-optimization"
    assert main([*base, "--beta", "0.01", "--epochs", "20"]) == 0  # a DO option selects DO
    assert load_graph(out).info["config"]["beta"] == 0.01
    cfg = write(tmp_path / "na.toml", "edge_cost = 0.5\ncut = 0.8\n")
    assert main([*base, "--config", str(cfg), "--epochs", "20", "--seed", "3"]) == 0
    config = load_graph(out).info["config"]
    assert (config["edge_cost"], config["cut"], config["seed"]) == (0.5, 0.8, 3)


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [(["--cut", "1.5"], "error: --cut 1.5: expected"),
     (["--beta", "0.1", "--cut", "0.5"], "belong to different learners"),
     (["--method", "noisy-and", "--augment"], "'augment' does not apply to --method noisy-and (it belongs to do"),
     (["--method", "do", "--edge-cost", "1"], "'edge_cost' does not apply to --method do (it belongs to noisy-and"),
     (["--method", "count-based", "--seed", "3"], "'seed' does not apply to --method count-based: it learns the same")],
)
def test_train_refuses_settings_of_the_other_learner(
    flags: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ann = write(tmp_path / "ann.json", TINY)
    out = tmp_path / "g.json"
    err = cli_error(main, ["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(out), *flags],
                    capsys)
    assert fragment in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("scenario", "flags", "fragment"),
    [("taa", [], "scenario 'taa': not one of the 2 known (coffee, tea)"),
     ("tea", ["--method", "do", "--cut", "0.5"], "'cut' does not apply to --method do")],
    ids=["misspelt-scenario", "setting-of-another-learner"])
def test_train_refuses_usage_before_warning_about_the_file(
    scenario: str, flags: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A file whose segments overlap is read with a warning; a refused run printed that warning first, a long line
    # above its one error line.
    data = copy.deepcopy(TINY)
    for k, segment in enumerate(data["annotations"]["v1"]["segments"]):
        segment.update(start_time=2.0 * k, end_time=2.0 * k + 3.0)
    ann = write(tmp_path / "ann.json", data)
    err = cli_error(main, ["train", "--annotations", str(ann), "--scenario", scenario, "--out",
                           str(tmp_path / "g.json"), *flags], capsys)
    assert fragment in err


@pytest.mark.parametrize("method", [[], ["--method", "noisy-and"]])
@pytest.mark.parametrize("typo", ["zzz = 1\n", "lrr = 0.2\n"])
def test_train_names_a_misspelt_config_setting_as_unknown(
    method: list[str], typo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Beside noisy-and's own keys, a typo was blamed on another learner: "settings 'zzz' (Direct Optimization) and
    # 'cut' (noisy-and) belong to different learners".
    ann = write(tmp_path / "ann.json", TINY)
    cfg = write(tmp_path / "c.toml", "edge_cost = 0.5\ncut = 0.9\n" + typo)
    out = tmp_path / "g.json"
    err = cli_error(main, ["train", "--annotations", str(ann), "--scenario", "tea", "--config", str(cfg), "--out",
                           str(out), *method], capsys)
    key = typo.split(" ")[0]
    assert err.startswith(f"error: --config {cfg}: " + (f"--method noisy-and setting '{key}': not one of the 6 known ("
                                                          if method else f"unknown setting '{key}' (the settings of "))
    assert "cut, edge_cost, epochs, lr, noise, relaxed" in err and "different learners" not in err
    assert not out.exists()


def test_bench_captaincook_partial_config_keeps_the_benchmark_protocol(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write(tmp_path / "beta.toml", "beta = 0.01\n")  # says nothing about early stopping or epochs
    out = tmp_path / "cc.json"
    assert main(["bench-captaincook", "--data", str(data_dir / "captaincook4d"), "--procedures", "ramen",
                 "--seeds", "1", "--workers", "1", "--config", str(cfg), "--json", str(out), "--quiet"]) == 0
    config = json.loads(out.read_text())["methods"]["do"]["config"]
    assert config["beta"] == 0.01
    assert config["early_stop"] == "sa-plateau" and config["epochs"] == 1000  # the benchmark's, not DOConfig's


def test_console_script_reports_bad_input_without_traceback(tmp_path: Path) -> None:
    exe = shutil.which("tgml")
    cmd = [exe] if exe else [sys.executable, "-m", "tgml.tgml_cli"]
    done = subprocess.run([*cmd, "show", str(tmp_path / "missing.json")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "graph file not found" in done.stderr


def tiny_with_step(video: str, segment: int, step_id: int) -> dict:
    """TINY with the step id of one segment replaced."""
    data = copy.deepcopy(TINY)
    data["annotations"][video]["segments"][segment]["step_id"] = step_id
    return data


@pytest.mark.parametrize(
    ("annotations", "scenario", "flags", "fragments"),
    [
        pytest.param(None, "tea", [], ["ann.json", "not found"], id="missing-annotation-file"),
        pytest.param('{"annotations": ', "tea", [], ["ann.json", "invalid JSON"], id="invalid-json"),
        pytest.param(TINY, "cake", [], ["scenario 'cake': not one of"], id="unknown-scenario"),
        pytest.param(tiny_with_step("v2", 1, 42), "tea", [], ["'v2'", "segments[1]", "42"],
                     id="segment-step-not-in-taxonomy"),
        pytest.param(TINY, "coffee", [], ["'coffee'", "no usable sequence"], id="scenario-with-no-usable-sequence"),
        pytest.param(TINY, "tea", ["--early-stop", "sometimes"], ['--early-stop "sometimes"'], id="bad-config-value"),
    ],
)
def test_train_refuses_bad_input(
    annotations: object, scenario: str, flags: list[str], fragments: list[str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ann = tmp_path / "ann.json"
    if annotations is not None:  # None: the annotation file does not exist
        write(ann, annotations)
    out = tmp_path / "g.json"
    err = cli_error(main, ["train", "--annotations", str(ann), "--scenario", scenario, "--out", str(out), *flags],
                    capsys)
    assert [f for f in fragments if f not in err] == [], err
    assert not out.exists()


@pytest.mark.parametrize(
    ("out", "fragment"),
    [
        (".", "is a folder, expected a file name for the graph file"),
        ("a_file/g.json", "a_file is a file, not a folder"),
    ],
    ids=["out-is-a-folder", "out-under-a-file"],
)
def test_train_refuses_an_unwritable_out_before_training(
    out: str, fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ann = write(tmp_path / "ann.json", TINY)
    write(tmp_path / "a_file", "not a folder")
    argv = ["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(tmp_path / out), "--quiet"]
    assert fragment in cli_error(main, argv, capsys)


def test_train_refuses_to_write_the_graph_over_its_annotation_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ann = write(tmp_path / "ann.json", TINY)
    argv = ["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(ann), "--epochs", "2", "--quiet"]
    assert "would overwrite this input file" in cli_error(main, argv, capsys)
    assert json.loads(ann.read_text()) == TINY


def test_bench_captaincook_refuses_a_procedure_listed_twice(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench-captaincook", "--data", str(data_dir / "captaincook4d"), "--procedures", "ramen,coffee,ramen",
            "--seeds", "1", "--epochs", "2", "--workers", "1", "--quiet"]
    assert "procedure 'ramen' is listed twice" in cli_error(main, argv, capsys)  # it weighed twice in the mean


@pytest.mark.parametrize("option", [["--epochs", "2"], ["--edge-threshold", "1/N"], ["--ensemble", "3"]])
def test_bench_captaincook_refuses_a_do_setting_when_no_do_runs(
    data_dir: Path, capsys: pytest.CaptureFixture[str], option: list[str]
) -> None:
    # --method noisy-and --epochs 2 ran noisy-and's 150 epochs, its table saying so, without a word.
    argv = ["bench-captaincook", "--data", str(data_dir / "captaincook4d"), "--procedures", "ramen", "--seeds", "1",
            "--method", "noisy-and", "count-based", *option, "--quiet"]
    assert cli_error(main, argv, capsys) == (f"error: {option[0]} sets DO's training, and --method noisy-and "
                                             f"count-based runs no DO: add do to --method, or leave {option[0]} out")


def test_bench_captaincook_refuses_a_results_path_it_could_not_write(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench-captaincook", "--data", str(data_dir / "captaincook4d"), "--procedures", "ramen", "--seeds", "1",
            "--epochs", "2", "--workers", "1", "--json", str(tmp_path), "--quiet"]
    assert "is a folder, expected a file name for the results file" in cli_error(main, argv, capsys)


def test_bench_live_refuses_a_cache_that_is_a_file_before_any_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    cache.write_text("my notes\n")
    argv = ["bench-live", "--data", str(tmp_path), "--cache", str(cache), "--quiet"]
    assert cli_error(main, argv, capsys) == f"error: --cache {cache}: is a file, expected a folder for the fold cache"


@pytest.mark.parametrize("recipes", ["", ","])
def test_bench_live_refuses_a_recipes_option_naming_no_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recipes: str
) -> None:
    # An empty $RECIPES in a script must not turn into a run of every recipe.
    err = cli_error(main, ["bench-live", "--data", str(tmp_path), "--recipes", recipes, "--quiet"], capsys)
    assert err.startswith(f"error: --recipes {recipes!r}: names no recipe")


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["train", "--scenario", "tea"], ["tgml train:", "required: --annotations, --out"]),
        (["train", "--annotations", "a.json", "--scenario", "tea", "--out", "g.json", "--edge-threshold", "1/x"],
         ["--edge-threshold", "'1/x'"]),
        (["bench-captaincook", "--data", "cc", "--seeds", "many"], ["--seeds", "'many'"]),
        (["shows", "g.json"], ["invalid choice: 'shows'"]),
    ],
    ids=["missing-options", "bad-choice", "not-a-number", "unknown-command"],
)
def test_usage_mistakes_are_one_error_line(argv: list[str], fragments: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    err = cli_error(main, argv, capsys)
    assert [f for f in fragments if f not in err] == [], err


def test_graph_file_with_a_cycle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cyclic = {"format": "task-graph", "version": 1, "scenario": "tea",
              "steps": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
              "edges": [{"step": 1, "requires": 2}, {"step": 2, "requires": 1}], "weights": None, "info": {}}
    path = write(tmp_path / "cyclic.json", cyclic)
    assert "cycle" in cli_error(main, ["show", str(path)], capsys)
    assert "cycle" in cli_error(main, ["eval", "--pred", str(path), "--gt", str(path)], capsys)


def test_graph_file_with_a_list_as_edge_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = {"format": "task-graph", "version": 1, "scenario": "tea", "steps": [{"id": 1, "name": "a"}],
             "edges": [{"step": [1], "requires": "START"}], "weights": None, "info": {}}
    path = write(tmp_path / "listed.json", graph)
    assert "edges[0].step = [1] is not a step" in cli_error(main, ["show", str(path)], capsys)


def test_unknown_render_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ann = write(tmp_path / "ann.json", TINY)
    out = tmp_path / "g.json"
    main(["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(out), "--epochs", "2", "--quiet"])
    capsys.readouterr()
    with pytest.raises(SystemExit):  # said before the table, naming the option: not after the whole graph
        main(["show", str(out), "--dot", str(tmp_path / "drawing.json")])
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.startswith(f"error: --dot {tmp_path / 'drawing.json'}: unknown output format")
    assert "unknown output format" in cli_error(main, ["show", str(out), "--dot", str(tmp_path / "g.bmp")], capsys)
    dot = tmp_path / "g.dot"  # a graph named .dot, drawn over itself, would become DOT text
    dot.write_bytes(out.read_bytes())
    err = cli_error(main, ["show", str(dot), "--dot", str(dot)], capsys)
    assert err.startswith(f"error: --dot {dot}: the rendering would overwrite this input file of the run")


def test_eval_against_captaincook_ground_truth(tmp_path: Path, data_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    cc = data_dir / "captaincook4d"
    out = tmp_path / "ramen.json"
    main(["train", "--annotations", str(cc / "task_graph_generation_annotations.json"), "--scenario", "ramen",
          "--out", str(out), "--epochs", "80", "--quiet", "--order-only"])  # the published segments overlap
    capsys.readouterr()
    assert main(["eval", "--pred", str(out), "--gt", str(cc / "ground_truth_task_graphs" / "ramen.json")]) == 0
    line = capsys.readouterr().out
    f1 = float(line.split("F1")[1].split()[0])
    assert f1 > 70.0  # ramen is learned almost perfectly (95 F1 at the default settings)
    assert main(["show", str(cc / "ground_truth_task_graphs" / "ramen.json")]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    # The dataset's own file has no version: "(a version 1 file)" sent a user looking for one.
    assert "no optionality stored in this file: every step is required" in shown and "version" not in shown


def test_a_learner_whose_settings_a_dataset_must_choose_says_it_runs_untuned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ann = write(tmp_path / "ann.json", TINY)
    base = ["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(tmp_path / "g.json"), "--quiet"]
    assert main([*base, "--method", "noisy-and-do"]) == 0
    assert capsys.readouterr().err.startswith("warning: --method noisy-and-do runs with its built-in settings")
    assert main([*base, "--method", "do", "--epochs", "5"]) == 0
    assert "built-in settings" not in capsys.readouterr().err  # DO's are the paper's (TINY's two executions are said)


def test_a_config_key_no_learner_has_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ann, cfg = write(tmp_path / "ann.json", TINY), write(tmp_path / "c.toml", "bogus = 1\n")
    err = cli_error(main, ["train", "--annotations", str(ann), "--scenario", "tea", "--out", str(tmp_path / "g.json"),
                           "--config", str(cfg)], capsys)
    assert err.startswith(f"error: --config {cfg}: unknown setting 'bogus' (the settings of noisy-and: ")


def test_show_reads_every_ground_truth_graph_captaincook4d_ships(data_dir: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # `tgml eval --gt` read these files and `tgml show` refused all 24 (no 'format' field): a file a public
    # dataset ships is never refused.
    monkeypatch.setenv("COLUMNS", "250")  # wide enough to hold a step's name and its pre-conditions' on one line
    files = sorted((data_dir / "captaincook4d" / "ground_truth_task_graphs").glob("*.json"))
    assert len(files) == 24
    for path in files:
        assert main(["show", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "Place-Place 8-inch flour tortilla on cutting board" in shown and "START" in shown
    # Where step ids matter (checking recordings), the file is refused, saying what it is and what to use.
    with pytest.raises(InputError, match="a CaptainCook4D graph file, which numbers the steps its own way"):
        load_graph(files[0])


@pytest.mark.parametrize("command", [[], ["bench-mistakes"], ["bench-captaincook"], ["bench-queries"]])
def test_help_lines_fit_80_columns(command: list[str], monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``tgml --help`` listed ``{train,show,eval,bench-captaincook,...}`` twice, on lines of 112 and 122 characters."""
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    page = capsys.readouterr().out
    assert max(len(line) for line in page.splitlines()) <= 80
    if not command:  # each sub-command still listed, one a line, with what it does
        assert page.startswith("usage: tgml [-h] [--version] COMMAND ...")
        assert "    bench-mistakes    CaptainCook4D online order-mistake benchmark" in page


def test_the_usage_line_offers_no_edge_threshold_the_command_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    # argparse drops the parentheses of a choice in the usage line: it offered '1/n+2', which it then refused.
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    usage = capsys.readouterr().out
    assert "1/n+2" not in usage and "--edge-threshold THRESHOLD" in usage and "1/(n+2)" in usage


def test_train_learns_the_one_scenario_of_a_file_without_being_told_and_asks_which_of_several(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # TINY's taxonomy has coffee too, with no execution (as CaptainCook4D's lists 24 recipes): its videos are tea's.
    out = tmp_path / "tea.json"
    assert main(["train", "--annotations", str(write(tmp_path / "one.json", TINY)), "--out", str(out), "--quiet"]) == 0
    assert load_graph(out).scenario == "tea"
    capsys.readouterr()  # its warning: two executions only
    both = {**TINY, "annotations": {**TINY["annotations"], "c1": {
        "scenario": "coffee", "recording_id": "c1", "segments": [{"step_id": 7}]}}}
    two = write(tmp_path / "two.json", both)
    err = cli_error(main, ["train", "--annotations", str(two), "--out", str(tmp_path / "x.json"), "--quiet"], capsys)
    assert err == f"error: {two}: holds several scenarios (coffee, tea); choose one with --scenario"


def test_bench_live_help_names_the_default_epochs(capsys: pytest.CaptureFixture[str]) -> None:
    # The help said "default the benchmark's" without the number, which docs/live-benchmark.md had to give.
    from tgml.bench.live.detector import LIVE_DETECTOR

    with pytest.raises(SystemExit):
        main(["bench-live", "--help"])
    page = " ".join(capsys.readouterr().out.split())
    assert f"detector training epochs (quick runs; default the benchmark's {LIVE_DETECTOR.epochs})" in page
