"""`prego-bench --annotations FILE`: the PREGO GT-mode table on a dataset of the user's, test videos cut at their first
mistake; the same figures as the built-in EPIC-Tent-O run when fed the same videos and settings."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from graphs.checker import precondition_violations
from graphs.mistake_metrics import mistake_scores
from graphs.task_graph import load_graph
from tests.cli_errors import cli_error
from tgml import text_embeddings
from tgml.bench.prego import DEFAULT_SETTINGS, AnnotationSource, first_mistake_cut, load_annotation_dataset
from tgml.bench.prego import run as prego_run
from tgml.bench.prego_bench_cli import main

TEA_STEPS = {0: "boil water", 1: "add tea", 2: "pour water", 3: "add milk"}


def _segments(steps: list[int], errors: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    return [{"step_id": s, "has_errors": k in errors, "start_time": k, "end_time": k + 1} for k, s in enumerate(steps)]


def _annotation_file(path: Path, videos: dict[str, tuple[str, list[int], tuple[int, ...]]]) -> Path:
    """Write an annotation file: ``{video: (scenario, steps, indices of mistaken segments)}``."""
    taxonomy = {
        "tea": {str(k): {"name": name, "id": k} for k, name in TEA_STEPS.items()},
        "coffee": {"0": {"name": "grind", "id": 0}, "1": {"name": "brew", "id": 1}},
    }
    annotations = {
        video: {"scenario": scenario, "recording_id": video, "segments": _segments(steps, errors)}
        for video, (scenario, steps, errors) in videos.items()
    }
    path.write_text(json.dumps({"annotations": annotations, "taxonomy": taxonomy}))
    return path


TEA_VIDEOS = {
    "t1": ("tea", [0, 1, 2, 3], ()),
    "t2": ("tea", [0, 2, 1, 3], (1,)),  # a training video's flag is not read: it trains whole
    "t3": ("tea", [0, 1, 2, 3], ()),
    "mistake": ("tea", [1, 0, 3, 2, 3], (2, 4)),  # cut after segment 2: [1, 0, 3]
    "correct": ("tea", [0, 1, 2, 3], ()),  # no mistake: kept whole, all steps correct
    "c1": ("coffee", [0, 1], ()),
}


@pytest.fixture
def tea(tmp_path: Path) -> Path:
    return _annotation_file(tmp_path / "tea.json", TEA_VIDEOS)


def test_the_cut_keeps_segments_up_to_the_first_mistake() -> None:
    assert first_mistake_cut([False, False, True, False, True]) == (3, True)
    assert first_mistake_cut([True, False]) == (1, True)
    assert first_mistake_cut([False, False]) == (2, False)


def test_test_videos_are_cut_and_correct_ones_kept_whole(tea: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = load_annotation_dataset(AnnotationSource(tea, "tea", test_videos=("correct", "mistake")))
    # t2, marked has_errors, trains whole (as the benchmarks' training splits do): said, since tgml train leaves it out
    assert capsys.readouterr().err.startswith(f"warning: {tea}: 1 training video marked has_errors (t2) learned from "
                                              "whole")
    assert data.test == {"mistake": (1, 0, 3), "correct": (0, 1, 2, 3)}  # file order, not the listed order
    assert data.correct_videos == frozenset({"correct"})
    assert data.train == ((0, 1, 2, 3), (0, 2, 1, 3), (0, 1, 2, 3))  # whole, the coffee video left out
    assert data.step_ids == (0, 1, 2, 3) and data.step_names == tuple(TEA_STEPS.values())


def test_benchmark_scores_exactly_the_cut_sequences(
    tea: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, graphs = tmp_path / "results.json", tmp_path / "graphs"
    argv = ["--annotations", str(tea), "--scenario", "tea", "--test-videos", "mistake,correct", "--method",
            "count-based", "--json", str(out), "--save-graphs", str(graphs), "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    # One seed: the title said "mean ± std over seeds" of a run with none to spread over.
    assert "PREGO online mistake detection — tea (seed 42)" in printed and "count-based" in printed
    assert "best published" not in printed and "  published" not in printed  # the paper has no row for it
    caption = " ".join(printed.split())
    assert "Scenario tea of" in caption and "1 without one is kept whole" in caption
    # No published row: the footnote on how the published tables swap P and R spoke of tables not shown.
    assert "P/R are true precision / recall." in caption and "swapped" not in caption
    result = json.loads(out.read_text())
    graph = load_graph(graphs / "tea-count-based.json")
    expected = mistake_scores(
        [precondition_violations(graph, (1, 0, 3)), precondition_violations(graph, (0, 1, 2, 3))], [True, False]
    )
    entry = result["results"]["tea"]["gt"]["count-based"]
    assert entry["per_seed"] == [{"seed": None, "scores": expected.to_dict()}]
    assert (expected.n_steps, expected.n_videos) == (7, 2)
    assert entry["published"] is None and list(result["results"]["tea"]) == ["gt"]
    assert result["settings"]["annotations"] == {
        "file": str(tea), "scenario": "tea", "test_videos": ["mistake", "correct"], "split": None, "config": None,
        "correct_test_videos": ["correct"],
    }
    assert result["settings"]["data"] is None


def test_a_split_file_names_train_and_test(tea: Path, tmp_path: Path) -> None:
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["t1", "t3"], "test": ["mistake"]}))  # t2 and correct: not used
    data = load_annotation_dataset(AnnotationSource(tea, "tea", split=split))
    assert data.train == ((0, 1, 2, 3), (0, 1, 2, 3)) and data.test == {"mistake": (1, 0, 3)}
    split.write_text(json.dumps({"train_session_set": ["t2"], "test_session_set": ["correct", "mistake"]}))
    data = load_annotation_dataset(AnnotationSource(tea, "tea", split=split))  # MiniROAD's keys
    assert data.train == ((0, 2, 1, 3),) and data.correct_videos == frozenset({"correct"})


def test_config_tables_replace_the_defaults(tea: Path, tmp_path: Path) -> None:
    settings, out = tmp_path / "mine.toml", tmp_path / "r.json"
    settings.write_text("[count-based]\nfirst_occurrence = true\n\n[do-cv]\nepochs = 5\nthreshold_scale = 2.0\n")
    argv = ["--annotations", str(tea), "--scenario", "tea", "--test-videos", "mistake", "--config", str(settings),
            "--method", "count-based", "do", "do-cv", "--epochs", "3", "--workers", "1", "--json", str(out), "--quiet"]
    assert main(argv) == 0
    used = json.loads(out.read_text())["settings"]["methods_settings"]["tea"]
    assert used["count-based"] == {"first_occurrence": True}
    assert used["do-cv"] == {"epochs": 5, "threshold_scale": 2.0}
    assert used["do"]["epochs"] == 1200 and used["do"]["early_stop"] == "none"  # the default table kept


def _tea(tea: Path, *extra: str) -> list[str]:
    return ["--annotations", str(tea), "--scenario", "tea", *extra, "--method", "count-based", "--quiet"]


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--test-videos", "ghost"], "--test-videos: video 'ghost' is not in"),
        (["--test-videos", "c1"], "video 'c1' of"),
        (["--test-videos", "t1,t2,t3,mistake,correct"], "no training video of scenario 'tea'"),
        (["--test-videos", "correct"], "none of the 1 test videos has a segment with has_errors: true"),
        (["--test-videos", "mistake,mistake"], "video 'mistake' is listed twice"),
        ([], "--annotations needs its test videos: --test-videos A,B or --split FILE"),
        (["--test-videos", "mistake", "--split", "s.json"], "not allowed with argument"),
        (["--test-videos", "mistake", "--mode", "pred"], "--mode: PRED mode needs recognised segments"),
        (["--test-videos", "mistake", "--perturb", "0.1"], "--perturb: the noise ablation runs on the built-in"),
        # "give --perturb RATES too" sent the user to the refusal above.
        (["--test-videos", "mistake", "--plot", "p.png"], "--plot: the noise ablation runs on the built-in"),
        (["--test-videos", "mistake", "--perturb-seed", "3"], "--perturb-seed: the noise ablation runs on"),
        (["--test-videos", "mistake", "--sequences", "s.json"], "--sequences: PRED-mode input"),
        (["--test-videos", "mistake", "--dataset", "epic-tent-o"], "not allowed with argument --annotations"),
        (["--test-videos", "mistake", "--config", "a.toml", "--config", "b.toml"], "give one settings file"),
        (["--test-videos", "mistake", "--config", "nowhere.toml"], "nowhere.toml"),
    ],
    ids=["unknown-test-video", "test-video-of-another-scenario", "no-training-video", "no-mistake-at-all",
         "test-video-twice", "no-test-videos", "both-test-options", "pred-mode", "perturb", "plot", "perturb-seed",
         "sequences", "with-dataset", "two-configs", "missing-config"],
)
def test_bad_input_is_one_error_line(
    extra: list[str], fragment: str, tea: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fragment in cli_error(main, _tea(tea, *extra), capsys)


def test_own_data_shows_the_graph_tgml_train_learns_beside_the_papers_methods(
    tea: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without --method an own-data table showed only the paper's DO and Count-Based, not the noisy-AND graph that
    # `tgml train` learns by default and the live checker then uses.
    out = tmp_path / "results.json"
    assert main(["--annotations", str(tea), "--scenario", "tea", "--test-videos", "mistake,correct", "--json", str(out),
                 "--workers", "1", "--quiet"]) == 0
    capsys.readouterr()
    text = out.read_text()
    assert all(f'"{method}"' in text for method in ("noisy-and", "do", "count-based"))


def test_missing_file_unknown_scenario_and_empty_test_split(
    tea: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = ["--annotations", str(tmp_path / "nowhere.json"), "--scenario", "tea", "--test-videos", "a"]
    assert "nowhere.json" in cli_error(main, missing, capsys)
    err = cli_error(main, ["--annotations", str(tea), "--scenario", "kitchen", "--test-videos", "mistake"], capsys)
    assert "scenario 'kitchen': not one of the 2 known (coffee, tea)" in err
    # Refused before the warning about the file's overlapping segments, which it printed first.
    data = json.loads(tea.read_text())
    data["annotations"]["t1"]["segments"][1]["start_time"] = 0.5
    overlapping = tmp_path / "overlapping.json"
    overlapping.write_text(json.dumps(data))
    err = cli_error(main, ["--annotations", str(overlapping), "--scenario", "kitchen", "--test-videos", "mistake"],
                    capsys)
    assert "scenario 'kitchen': not one of" in err
    # Without --scenario a file of two procedures asks which (a file of one runs it: below).
    assert f"{tea}: holds several scenarios (coffee, tea); choose one with --scenario" in cli_error(
        main, ["--annotations", str(tea), "--test-videos", "a"], capsys)
    assert "--scenario is an option of --annotations" in cli_error(main, ["--scenario", "tea"], capsys)
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["t1"], "test": []}))
    assert "no test video of scenario 'tea'" in cli_error(main, _tea(tea, "--split", str(split)), capsys)
    split.write_text(json.dumps({"train": ["t1", "mistake"], "test": ["mistake"]}))
    assert "video \"mistake\" is listed in both 'train' and 'test'" in cli_error(
        main, _tea(tea, "--split", str(split)), capsys
    )
    split.write_text(json.dumps({"train": ["t1"]}))
    assert "missing field 'test'" in cli_error(main, _tea(tea, "--split", str(split)), capsys)


def test_tuned_methods_need_a_settings_file(tea: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--annotations", str(tea), "--scenario", "tea", "--test-videos", "mistake", "--quiet", "--method"]
    err = cli_error(main, [*argv, "do-cv"], capsys)
    assert "--method do-cv needs settings tuned for your dataset: give --config FILE with a [do-cv] table" in err
    settings = tmp_path / "mine.toml"
    settings.write_text("[do]\nepochs = 10\n")
    err = cli_error(main, [*argv, "do-ensemble", "--config", str(settings)], capsys)
    assert f"--method do-ensemble needs settings tuned for your dataset: {settings} has no [do-ensemble] table" in err


def _merged_epic_tent(data_dir: Path, path: Path) -> list[str]:
    """EPIC-Tent-O's train and test files as one annotation file; returns the test videos. Each test video's last
    segment, and only it, has ``has_errors: true`` (the published split is already cut at the mistake)."""
    train = json.loads((data_dir / "epic-tent-o" / "train.json").read_text())
    test = json.loads((data_dir / "epic-tent-o" / "test.json").read_text())
    assert train["taxonomy"] == test["taxonomy"] and not set(train["annotations"]) & set(test["annotations"])
    for record in test["annotations"].values():
        assert [s["has_errors"] for s in record["segments"]] == [False] * (len(record["segments"]) - 1) + [True]
    merged = {"annotations": {**train["annotations"], **test["annotations"]}, "taxonomy": train["taxonomy"]}
    path.write_text(json.dumps(merged))
    return list(test["annotations"])


def test_epic_tent_as_an_own_dataset_gives_the_built_in_figures(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = _merged_epic_tent(data_dir, tmp_path / "merged.json")
    own, built_in = tmp_path / "own.json", tmp_path / "built-in.json"
    methods = ["--method", "do", "count-based", "--seeds", "1", "--workers", "1", "--quiet"]
    argv = ["--annotations", str(tmp_path / "merged.json"), "--scenario", "epic-tent", "--test-videos", ",".join(tests),
            "--order-only"]  # the published segments overlap: their times are not checked, as for the built-in run
    assert main([*argv, *methods, "--json", str(own)]) == 0
    # The built-in run with the same (default) settings: its shipped EPIC-Tent-O [do] table stops early instead.
    assert main(["--data", str(data_dir), "--dataset", "epic-tent-o", "--mode", "gt", *methods,
                 "--config", f"epic-tent-o={DEFAULT_SETTINGS}", "--json", str(built_in)]) == 0
    ours = json.loads(own.read_text())["results"]["epic-tent"]["gt"]
    reference = json.loads(built_in.read_text())["results"]["epic-tent-o"]["gt"]
    for method in ("do", "count-based"):
        assert ours[method]["per_seed"] == reference[method]["per_seed"], method
        assert ours[method]["per_seed"][0]["scores"]["n_videos"] == 15
    assert round(ours["count-based"]["mean"]["avg_f1"], 1) == 57.7  # the published Count-Based figure
    assert "0 without one are kept whole" in " ".join(capsys.readouterr().out.split())


def test_a_file_of_one_scenario_needs_no_scenario_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # As tgml train: a file of one procedure needs no name for it.
    tea_only = _annotation_file(tmp_path / "tea.json", {k: v for k, v in TEA_VIDEOS.items() if v[0] == "tea"})
    argv = ["--annotations", str(tea_only), "--test-videos", "mistake,correct", "--method", "count-based", "--quiet"]
    named = ["--annotations", str(tea_only), "--scenario", "tea", *argv[2:]]
    assert main([*argv, "--json", str(tmp_path / "default.json")]) == 0
    assert main([*named, "--json", str(tmp_path / "named.json")]) == 0
    default, given = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("default", "named"))
    assert default["settings"]["annotations"]["scenario"] == "tea"
    assert default["results"] == given["results"]


def test_a_file_of_no_video_says_so_not_that_a_scenario_is_to_be_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without --scenario, a file whose 'annotations' is empty said "holds videos of 0 scenarios (): name the one to
    # run": there is none to name, and --scenario tea only moved the error on to the test videos.
    empty = _annotation_file(tmp_path / "empty.json", {})
    err = cli_error(main, ["--annotations", str(empty), "--test-videos", "a"], capsys)
    assert err == f"error: {empty}: no annotated video (field 'annotations' is empty)"


def test_a_missing_text_extra_is_refused_before_any_graph_is_learned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--method do tgt-text` without the `text` extra learned every DO graph first (a minute on PREGO's data) and
    # then failed on tgt-text's first job, the DO graphs thrown away.
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # what an install without the extra sees
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no embeddings cached by an earlier run
    text_embeddings.load_encoder.cache_clear()
    learned: list[str] = []

    def recorded(data: Any, method: str, *args: Any) -> dict[str, Any]:
        learned.append(method)
        return build_job(data, method, *args)

    build_job = prego_run._build_job
    monkeypatch.setattr(prego_run, "_build_job", recorded)
    clean = _annotation_file(tmp_path / "tea.json", {k: v for k, v in TEA_VIDEOS.items() if k != "t2"})
    err = cli_error(main, ["--annotations", str(clean), "--scenario", "tea", "--test-videos", "mistake,correct",
                           "--method", "do", "tgt-text", "--workers", "1", "--epochs", "1", "--quiet"], capsys)
    text_embeddings.load_encoder.cache_clear()
    assert "optional extra 'text'" in err and learned == []
