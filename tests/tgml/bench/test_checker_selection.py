"""Choosing the probabilistic checker's PREGO settings on the training split (``prego-bench select-checker``), the
settings files it writes, and the benchmark rows they give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphs.checker_settings import CheckerSettings
from graphs.common.errors import InputError
from recognition.evidence import EvidenceModel
from recognition.segmenter import SegmenterConfig
from tests.cli_errors import cli_error
from tgml.bench.prego import DATASETS, load_dataset, load_method_settings, resolve_data
from tgml.bench.prego.checker_selection import (
    CheckerChoice,
    CheckerSearch,
    CheckerSettingsFile,
    default_settings_path,
    load_checker_settings,
    save_checker_settings,
    select_pred_checker,
    select_replay_checker,
)
from tgml.bench.prego.recognition_noise import NOISE_LEVELS, load_timed_videos
from tgml.bench.prego_bench_cli import main as bench_main

TINY = CheckerSearch(folds=3, per_video=2, levels=NOISE_LEVELS[1:2], rates=(0.2,), priors=(0.1,),
                     thresholds=(0.5, 0.7), windows=(2.0,), min_durations=(2.0,), workers=1)


def _file(tmp_path: Path) -> Path:
    model = EvidenceModel.default([0, 1, 2], window_s=2.0)
    content = CheckerSettingsFile(
        "epic-tent-o",
        CheckerChoice(CheckerSettings("probabilistic", 0.7, 0.3), model),
        CheckerChoice(CheckerSettings("probabilistic", 0.5, 0.1), model, SegmenterConfig(fps=60.0, background=None)),
        {"command": "test"},
    )
    return save_checker_settings(tmp_path / "checker.json", content)


def test_a_settings_file_survives_its_json_form(tmp_path: Path) -> None:
    back = load_checker_settings(_file(tmp_path))
    assert back.dataset == "epic-tent-o" and back.chosen_with == {"command": "test"}
    # Read back as the benchmarks run it: every recognised step judged on all its pre-conditions.
    assert back.pred.settings == CheckerSettings("probabilistic", 0.7, 0.3, one_alert_per_omission=False)
    assert back.pred.segmenter is None
    assert back.replay is not None and back.replay.segmenter == SegmenterConfig(fps=60.0, background=None)
    assert back.replay.evidence == EvidenceModel.default([0, 1, 2], window_s=2.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(format="other"), "not a checker settings file"),
        (lambda d: d.update(version=9), "version 9"),
        # The file's key, not the flag that sets the same value on the command line (--alert-threshold).
        (lambda d: d["pred"].update(alert_threshold=1.5), "pred: alert_threshold = 1.5: expected a probability"),
        (lambda d: d["replay"].pop("prior_skip"), "replay: prior_skip = null: expected a probability"),
        (lambda d: d["replay"]["segmenter"].update(min_duration=-1), "replay.segmenter"),
        (lambda d: d["replay"]["evidence"].update(miss_rates=[0.1]), "replay.evidence: miss_rates has 1 values"),
        # 10**30 was read, then ended prego-bench --checker probabilistic in numpy's OverflowError.
        (lambda d: d["pred"]["evidence"]["step_ids"].__setitem__(0, 10**30),
         r"pred\.evidence: step_ids: 10+\.\.\. is not a step id \(an integer in 0\.\.2147483647\)$"),
    ],
)
def test_a_bad_settings_file_is_refused_naming_the_field(tmp_path: Path, change, message: str) -> None:
    path = _file(tmp_path)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message) as err:
        load_checker_settings(path)
    assert str(err.value).startswith(str(path))


@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_the_shipped_settings_cover_each_taxonomy(dataset: str, data_dir: Path) -> None:
    content = load_checker_settings(default_settings_path(dataset))
    data = load_dataset(resolve_data(data_dir, [dataset]), dataset, pred=False)
    assert content.dataset == dataset and content.pred.evidence.step_ids == data.step_ids
    assert "select-checker" in content.chosen_with["command"]
    if dataset == "epic-tent-o":  # the one dataset with timed annotations to simulate frames from
        assert content.replay is not None and content.replay.evidence.step_ids == data.step_ids
        chosen = content.chosen_with["replay"]
        assert chosen["chosen"]["score"] >= chosen["binary"]["score"]  # the training-split comparison it rests on


def test_a_small_search_on_the_training_split_scores_the_binary_checker_beside(data_dir: Path) -> None:
    layout = resolve_data(data_dir, ["epic-tent-o"])
    data = load_dataset(layout, "epic-tent-o", pred=False)
    settings = load_method_settings("epic-tent-o")["do"]
    pred, rows = select_pred_checker(data, settings, TINY, progress=False)
    assert {r["checker"] for r in rows} == {"binary", "probabilistic"} and len(rows) == 3
    assert rows == sorted(rows, key=lambda r: -r["score"])
    assert pred.settings.prior_skip == 0.1 and pred.settings.alert_threshold in (0.5, 0.7)
    videos = load_timed_videos(layout.train_file("epic-tent-o"), "epic-tent", 0.001)
    replay, rows = select_replay_checker(data, videos, settings, TINY, progress=False)
    assert len(rows) == 3 and all("medium noise" in r for r in rows)
    assert replay.segmenter is not None and replay.segmenter.min_duration == 2.0 and replay.evidence.window_s == 2.0
    with pytest.raises(InputError, match="do not match the training split"):
        select_replay_checker(data, videos[1:], settings, TINY, progress=False)


def test_pred_mode_prints_probabilistic_rows_beside_the_binary_ones(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "count-based", "--quiet",
            "--checker", "probabilistic"]
    assert bench_main(argv) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if "count-based + probabilistic" in line]
    assert rows and all("pred +" in line for line in rows)  # GT mode stays binary: no probabilistic row there
    assert any("count-based" in line and "gt *" in line for line in printed.splitlines())


def test_checker_options_that_do_not_fit_are_refused(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = cli_error(bench_main, ["--checker-settings", "epic-tent-o=x.json"], capsys)  # before looking for data
    assert "--checker-settings: give it with --checker probabilistic" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    err = cli_error(bench_main, ["--data", str(data_dir), "--dataset", "epic-tent-o", "--checker", "probabilistic",
                                 "--checker-settings", f"epic-tent-o={bad}"], capsys)
    assert "not a checker settings file" in err
    err = cli_error(bench_main, ["--data", str(data_dir), "--dataset", "epic-tent-o", "--mode", "gt", "--checker",
                                 "probabilistic"], capsys)
    assert "PRED mode" in err


def test_select_checker_writes_a_settings_file_the_replay_reads(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine.json"
    argv = ["select-checker", "--data", str(data_dir), "--dataset", "epic-tent-o", "--folds", "3", "--priors", "0.2",
            "--thresholds", "0.5", "--windows", "5", "--min-durations", "2", "--rates", "0.2", "--workers", "1",
            "--quiet", "--out", str(out)]
    assert bench_main(argv) == 0
    printed = capsys.readouterr().out
    assert "PRED mode" in printed and "Replay" in printed and "binary" in printed
    content = load_checker_settings(out)
    assert content.replay is not None and content.replay.segmenter is not None
    assert content.replay.segmenter.min_duration == 2.0 and content.replay.evidence.window_s == 5.0
    assert content.chosen_with["search"]["folds"] == 3 and content.chosen_with["search"]["levels"][0]["name"]
    replay_argv = ["replay", "--data", str(data_dir), "--no-sweep", "--checker", "probabilistic",
                   "--checker-settings", str(out)]
    assert bench_main(replay_argv) == 0
    assert "probabilistic, 2 s" in capsys.readouterr().out


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--priors", "0.2,1.5", "error: --priors 0.2,1.5: need values strictly between 0 and 1"),  # not CheckerSearch's
    ("--folds", "1", "error: --folds 1: need at least 2"),
    ("--thresholds", "x", "comma-separated numbers"),
    ("--folds", "99", "--folds 99"),
])
def test_select_checker_refuses_a_bad_search(
    data_dir: Path, option: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["select-checker", "--data", str(data_dir), "--dataset", "epic-tent-o", "--quiet", option, value]
    assert message in cli_error(bench_main, argv, capsys)
