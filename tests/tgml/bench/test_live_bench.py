"""`tgml bench-live`: the live chain on real CaptainCook4D recordings' features, its scores, its JSON, its bad input."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from graphs.annotations import load_annotations
from graphs.common.errors import InputError
from graphs.order_rules import LATE_STEP, PRECONDITION
from streaming.demo.paths import default_demo_paths
from tests.cli_errors import cli_error
from tgml.bench.error_annotations import ORDER_ERROR, ErrorRecording, PerformedStep, unmatched_line, unmatched_steps
from tgml.bench.live.bench import assign_folds, silent_avg_f1
from tgml.bench.live.recordings import FEATURES_SUBFOLDER, load_live_data, video_seconds
from tgml.bench.live.scores import LiveCounts, annotated_counts, live_counts
from tgml.bench.mistake_bench import Counts
from tgml.tgml_cli import main

RECIPE = "tomatomozzarellasalad"  # the recipe with the fewest steps: the fastest to train


def subset(data_dir: Path, tmp_path: Path, count: int) -> Path:
    """A features folder with the layout of captaincook4d-pe/features holding ``count`` recordings of `RECIPE`:
    two error-free ones, then ones with an Order Error (the other recordings of a user's folder)."""
    data = load_live_data(data_dir)
    recordings = sorted(data.of(RECIPE), key=lambda r: r.recording_id)
    erred = [r for r in recordings if any(p.order_error for p in r.annotation.performed)]
    others = [r for r in recordings if not r.error_free and r not in erred]
    chosen = [r for r in recordings if r.error_free][:2] + (erred + others)[: count - 2]
    folder = tmp_path / "features"
    folder.mkdir()
    for r in chosen:
        shutil.copy(r.path, folder / r.path.name)
    return folder


def measured(figure: float | None) -> float:
    """A figure the test expects measured (None: nothing to count), narrowed for arithmetic."""
    assert figure is not None
    return figure


def test_the_annotated_steps_with_the_hand_made_graphs_give_derivations_reference(data_dir: Path) -> None:
    data = load_live_data(data_dir)
    assert len(data.recordings) == 90 and sum(r.error_free for r in data.recordings) == 38
    assert sum(len(r.labels) for r in data.recordings) == 62476
    total = LiveCounts()
    for r in data.recordings:
        total += annotated_counts(data.recipes[r.recipe].ground_truth, r.annotation, r.error_free)
    metrics = total.metrics()
    assert (total.counts.steps, total.counts.order_errors) == (1155, 221)
    figures = {k: round(measured(metrics[k]), 1)
               for k in ("avg_f1", "mistake_precision", "mistake_recall", "mistake_f1")}
    assert figures == {"avg_f1": 66.0, "mistake_precision": 55.0, "mistake_recall": 34.8, "mistake_f1": 42.7}


def test_the_silent_floor_of_the_live_rows_is_scored_on_their_own_items(data_dir: Path) -> None:
    # The caption's floor was computed on the annotated rows' items (performed segments: 1,155) and printed beside
    # the live rows, which score distinct steps (1,131): 44.7 against 44.6, so a live row just under its own floor
    # read as just above it.
    data = load_live_data(data_dir)
    silent, segments = LiveCounts(), LiveCounts()
    for r in data.recordings:
        recipe = data.recipes[r.recipe]
        silent += live_counts(r.annotation, r.error_free, [], [], dict(zip(recipe.step_ids, recipe.step_names,
                                                                           strict=True)))
        segments += annotated_counts(recipe.ground_truth, r.annotation, r.error_free)
    assert (silent.counts.steps, segments.counts.steps) == (1131, 1155)
    assert (round(silent_avg_f1(silent) or 0, 1), round(silent_avg_f1(segments) or 0, 1)) == (44.6, 44.7)


def test_an_alert_on_an_order_mistake_counts_right_whatever_its_time_and_an_early_one_is_counted() -> None:
    names = {1: "boil", 2: "pour", 3: "stir"}
    recording = ErrorRecording("1_1", "tea", (PerformedStep(1, "boil", 0.0, ()),
                                              PerformedStep(2, "pour", 100.0, (ORDER_ERROR,)),
                                              PerformedStep(3, "stir", 200.0, (ORDER_ERROR,))), frozenset(), ())
    # "pour" alerted 60 s before the person poured (recognised early), "stir" 5 s after it began, "boil" wrongly.
    counts = live_counts(recording, False, [("pour", 40.0), ("stir", 205.0), ("boil", 210.0)], [], names)
    metrics = counts.metrics()
    assert (counts.counts.alerts, counts.counts.caught) == (3, 2)
    assert sorted(counts.latencies) == [-60.0, 5.0]
    assert metrics["caught_before_start"] == 1
    assert metrics["latency_median_s"] == -27.5


def test_the_latency_of_a_step_done_twice_runs_from_its_occurrence_tagged_order_error() -> None:
    # CaptainCook4D's 16_39 adds garlic twice, the second time out of order: an alert 5 s into that second time was
    # timed from the first, a latency of minutes.
    names = {1: "boil", 2: "garlic"}
    recording = ErrorRecording("16_39", "eggs", (PerformedStep(2, "garlic", 100.0, ()),
                                                 PerformedStep(1, "boil", 300.0, ()),
                                                 PerformedStep(2, "garlic", 576.0, (ORDER_ERROR,))), frozenset(), ())
    counts = live_counts(recording, False, [("garlic", 581.0)], [], names)
    assert (counts.counts.caught, counts.latencies) == (1, [5.0])
    early = live_counts(recording, False, [("garlic", 110.0)], [], names)  # at the first, in-order occurrence
    assert early.latencies == [-466.0] and early.metrics()["caught_before_start"] == 1


def test_the_late_step_rule_scores_the_annotated_steps_as_the_annotators_tag_order_errors(data_dir: Path) -> None:
    # A swap of two dependent steps: the annotators tag the late step too, which only the late-step rule alerts.
    data = load_live_data(data_dir)
    rows = {}
    for rule in (PRECONDITION, LATE_STEP):
        total = LiveCounts()
        for r in data.recordings:
            total += annotated_counts(data.recipes[r.recipe].ground_truth, r.annotation, r.error_free, rule)
        metrics = total.metrics()
        rows[rule] = tuple(round(measured(metrics[k]), 1) for k in ("avg_f1", "mistake_precision", "mistake_recall"))
    assert rows == {PRECONDITION: (66.0, 55.0, 34.8), LATE_STEP: (76.1, 61.8, 60.6)}


def test_the_late_step_rule_needs_the_binary_checker(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--checker", "probabilistic", "--order-rule",
                           "late-step", "--quiet"], capsys)
    assert err == ("error: --order-rule late-step needs --checker binary: the probabilistic checker alerts once per "
                   "omission, on the step done too early")
    from graphs.checker_settings import CheckerSettings
    from tgml.bench.live.bench import LiveBenchConfig

    # Asked to choose, the folds choose among the checkers that take the rule: with late-step, the binary one alone.
    both = ("probabilistic", "binary")
    late = LiveBenchConfig(data_dir, checking=CheckerSettings("binary", order_rule=LATE_STEP), checkers=both)
    assert late.checker_kinds == ("binary",)
    assert LiveBenchConfig(data_dir, checkers=both).checker_kinds == both
    assert LiveBenchConfig(data_dir).checker_kinds == ("probabilistic",)  # the default: no choice


def test_another_detector_seed_trains_other_detectors_on_the_same_folds_and_validation_recordings(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --seed also dealt other folds and validation recordings: what a training's seed alone moves (the spread the
    # adoption rule of docs/live-benchmark.md reads) could not be measured from the command line.
    from tgml.bench.live.bench import LiveBenchConfig
    from tgml.bench.live.fold_training import fold_detector_settings

    recordings = load_live_data(data_dir).of(RECIPE)
    folds = assign_folds(recordings, 3, 42)
    train = [r for r, f in zip(recordings, folds, strict=True) if f != 0]
    test = [r for r, f in zip(recordings, folds, strict=True) if f == 0]
    default, other = (fold_detector_settings(c.detector, c.seed, c.detectors_seed, train, test).train for c in
                      (LiveBenchConfig(data_dir), LiveBenchConfig(data_dir, detector_seed=43)))
    assert (default.seed, other.seed) == (42, 43)
    assert default.val_videos == other.val_videos and len(default.val_videos) >= 1
    features = subset(data_dir, tmp_path, 4)
    runs = {}
    for name, extra in (("default", []), ("43", ["--detector-seed", "43"])):
        out = tmp_path / f"{name}.json"
        assert main(["bench-live", "--data", str(data_dir), "--features", str(features), "--folds", "2", "--epochs",
                     "1", "--workers", "1", "--quiet", "--json", str(out), *extra]) == 0
        runs[name] = json.loads(out.read_text())
    capsys.readouterr()
    assert [(d["seed"], d["detector_seed"], d["settings"]["detector"]["seed"]) for d in runs.values()] == [
        (42, 42, 42), (42, 43, 43)]
    assert ({r["recording_id"]: r["fold"] for r in runs["default"]["recordings"]}
            == {r["recording_id"]: r["fold"] for r in runs["43"]["recordings"]})
    assert runs["default"]["overall"]["map"] != runs["43"]["overall"]["map"]


def test_an_annotated_step_that_is_no_step_of_its_recipe_is_said_not_silently_dropped(data_dir: Path) -> None:
    # 17_49 tags "chat masala" Order Error where the recipe says "chaat": neither trained on nor scored, and
    # bench-live said nothing (captaincook-labels and bench-mistakes name it).
    data = load_live_data(data_dir, recipes=("cucumberraita",))
    unmatched = unmatched_steps(r.annotation for r in data.recordings)
    assert ("17_49", "Add-1/2 teaspoon of chat masala powder to the bowl") in unmatched
    line = unmatched_line(unmatched)
    assert line.startswith(f"left out {len(unmatched)} annotated step") and "17_49 'Add-1/2 teaspoon of chat" in line


def test_folds_spread_error_free_and_erroneous_recordings(data_dir: Path) -> None:
    recordings = load_live_data(data_dir).of(RECIPE)
    folds = assign_folds(recordings, 3, 42)
    assert sorted(set(folds)) == [0, 1, 2] and assign_folds(recordings, 3, 42) == folds
    for fold in range(3):
        kinds = {r.error_free for r, f in zip(recordings, folds, strict=True) if f == fold}
        assert kinds == {True, False}


def test_the_run_says_how_many_folds_the_cache_gave_and_how_many_trained(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A cache that missed (edited code or data, other settings) trained every fold again without a word: minutes
    # instead of seconds were the only sign, and a run that read every fold looked the same as one that trained.
    features = subset(data_dir, tmp_path, 4)
    cache = tmp_path / "cache"
    argv = ["bench-live", "--data", str(data_dir), "--features", str(features), "--folds", "2", "--epochs", "1",
            "--workers", "1", "--quiet", "--cache", str(cache)]
    assert main(argv) == 0
    assert f"; --cache {cache}: 0 of 2 folds read from it, 2 trained and kept there\n" in capsys.readouterr().out
    assert main(argv) == 0
    assert f"; --cache {cache}: 2 of 2 folds read from it, none trained\n" in capsys.readouterr().out
    assert main(argv[:-2]) == 0  # no cache, nothing said of one
    assert "--cache" not in capsys.readouterr().out


def test_a_small_folder_of_other_recordings_runs_end_to_end_and_writes_the_json(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    features = subset(data_dir, tmp_path, 4)
    out = tmp_path / "live.json"
    cache = tmp_path / "cache"
    assert main(["bench-live", "--data", str(data_dir), "--features", str(features), "--folds", "2", "--epochs", "1",
                 "--workers", "1", "--quiet", "--json", str(out), "--cache", str(cache)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    # Two training recordings a fold leave one for validation: its optimistic figures are said, not hidden.
    assert f"note: {RECIPE}: a fold held one validation recording" in captured.err
    # The floor an Avg F1 is read against: a detector that raised no alert scored "Avg F1 40.9", said as a score.
    assert "Avg F1 of a checker that never alerts, on these recordings: " in " ".join(text.split())
    assert "on the live rows' items (each recording's distinct performed steps)" in " ".join(text.split())
    assert len(list(cache.glob("*.npz"))) == 2  # one entry per fold
    again = tmp_path / "again.json"  # from the cache: segmenter and checker only, the same figures
    assert main(["bench-live", "--data", str(data_dir), "--features", str(features), "--folds", "2", "--epochs", "1",
                 "--workers", "1", "--quiet", "--json", str(again), "--cache", str(cache), "--ceiling"]) == 0
    assert "the most one threshold on the detectors' outputs could score" in capsys.readouterr().out
    assert json.loads(again.read_text())["overall"] == json.loads(out.read_text())["overall"]
    # Asked for, the bounds (tgml.bench.live.ceiling) are in the JSON too, each over every item of the 4 recordings.
    ceiling = json.loads(again.read_text())["ceiling"]
    assert set(ceiling) == {"missing", "order_unseen", "order_unseen_and_seen"}
    assert ceiling["order_unseen"]["positives"] >= 2 and ceiling["order_unseen"]["score"] is not None
    assert "ceiling" not in json.loads(out.read_text())
    prior = tmp_path / "prior.json"  # the folds may also choose the position prior, checker and graph: no training
    assert main(["bench-live", "--data", str(data_dir), "--features", str(features), "--folds", "2", "--epochs", "1",
                 "--workers", "1", "--quiet", "--json", str(prior), "--cache", str(cache), "--position-prior",
                 "--checker", "chosen", "--live-graph", "chosen"]) == 0
    capsys.readouterr()
    assert len(list(cache.glob("*.npz"))) == 2
    # A copy of the folder (new file times: an rsync without -t, another checkout) keeps its cache; an edited
    # recording misses it (it is in both folds: one's test, the other's training).
    copied = tmp_path / "copied"
    shutil.copytree(features, copied, copy_function=shutil.copy)
    assert main(["bench-live", "--data", str(data_dir), "--features", str(copied), "--folds", "2", "--epochs", "1",
                 "--workers", "1", "--quiet", "--json", str(again), "--cache", str(cache)]) == 0
    assert len(list(cache.glob("*.npz"))) == 2
    assert json.loads(again.read_text())["overall"] == json.loads(out.read_text())["overall"]
    edited = next(copied.glob("*.npy"))
    np.save(edited, np.load(edited) * np.float16(0.5))
    assert main(["bench-live", "--data", str(data_dir), "--features", str(copied), "--folds", "2", "--epochs", "1",
                 "--workers", "1", "--quiet", "--cache", str(cache)]) == 0
    capsys.readouterr()
    assert len(list(cache.glob("*.npz"))) == 4
    assert {fold["position_prior_weight"] for fold in json.loads(prior.read_text())["chosen"][RECIPE].values()} <= {
        0.0, 0.5, 1.0}
    assert "annotated steps, hand-made graphs" in text and "per-second mAP" in text and "bench-live:" in text
    document = json.loads(out.read_text())
    assert document["settings"]["features_dir"] == str(features)  # the folder the detectors read, not the default
    assert document["settings"]["detector"]["features"]["extractor"] is None  # not "perception": not known here
    overall = document["overall"]
    assert set(overall) >= {"live", "annotated_learned", "annotated_hand_made", "map", "silent_avg_f1"}
    silent = LiveCounts()  # the floor, scored as the live rows are: each recording's distinct steps, none alerted
    data = load_live_data(data_dir)
    for r in (r for r in data.recordings if (features / r.path.name).exists()):
        recipe = data.recipes[r.recipe]
        silent += live_counts(r.annotation, r.error_free, [], [], dict(zip(recipe.step_ids, recipe.step_names,
                                                                           strict=True)))
    assert overall["silent_avg_f1"] == pytest.approx(silent.metrics()["avg_f1"])
    assert 0 <= overall["map"] <= 100
    for row in ("live", "annotated_learned", "annotated_hand_made"):  # a score over nothing is None (no alert)
        assert overall[row]["mistake_recall"] is not None and overall[row]["missing_recall"] is not None
        assert overall[row]["false_alarms_per_error_free"] is not None  # two error-free recordings
    assert overall["annotated_hand_made"]["avg_f1"] is not None
    assert len(document["recordings"]) == 4
    assert document["settings"]["checkers"] == ["probabilistic"]
    assert document["settings"]["live_graphs"] == ["observed"]
    for fold in document["chosen"][RECIPE].values():
        assert {"segmenter_min_duration", "once", "position_prior_weight", "done_level", "prior_skip",
                "alert_threshold"} <= set(fold)
        assert (fold["checker"], fold["live_graph"]) == ("probabilistic", "observed")
    # Asked to, each fold chose its checker and graph too, among those the settings name.
    chose = json.loads(prior.read_text())
    assert chose["settings"]["checkers"] == ["probabilistic", "binary"]
    assert chose["settings"]["live_graphs"] == ["observed", "learned"]
    for fold in chose["chosen"][RECIPE].values():
        assert fold["checker"] in ("probabilistic", "binary") and fold["live_graph"] in ("observed", "learned")
        assert (fold["prior_skip"] is None) == (fold["checker"] == "binary")
        assert fold["position_prior_weight"] == 0.0  # not offered without --position-prior
    names = set(load_live_data(data_dir).recipes[RECIPE].step_names)
    for recording in document["recordings"]:
        assert set(recording) >= {"recording_id", "recipe", "recognised", "alerts", "never_done"}
        assert recording["recipe"] == RECIPE
        for segment in recording["recognised"]:
            assert set(segment) == {"step", "start", "end", "confidence"} and segment["step"] in names
            assert 0 <= segment["start"] < segment["end"]
        for alert in recording["alerts"]:
            assert set(alert) == {"step", "missing", "time", "probability", "retracted"}
            assert alert["step"] in names and set(alert["missing"]) <= names
        assert set(recording["never_done"]) <= names


def test_a_features_folder_without_a_recording_of_the_data_set_is_refused(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "features"
    folder.mkdir()
    np.save(folder / "my_video.npy", np.zeros((5, 8), np.float16))
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(folder), "--quiet"], capsys)
    assert "none of its 1 .npy files is a recording" in err and str(folder) in err


@pytest.mark.parametrize("folds", ["-1", "0", "1", "5"])
def test_folds_below_two_or_above_a_recipes_recordings_are_refused(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], folds: str
) -> None:
    features = subset(data_dir, tmp_path, 4)
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(features), "--folds", folds,
                           "--quiet"], capsys)
    assert f"--folds {folds}" in err
    if folds == "5":
        assert f"{RECIPE!r} has only 4 recording(s)" in err
    else:  # 0 ended in a ZeroDivisionError traceback, -1 ran, once the check had slipped out of LiveBenchConfig
        assert err == f"error: --folds {folds}: must be an integer >= 2 (each recording is tested by a detector " \
                      "trained on the other folds)"


def test_nan_or_infinite_features_are_refused_naming_the_file(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    features = subset(data_dir, tmp_path, 4)
    bad = sorted(features.glob("*.npy"))[1]
    x = np.load(bad)
    x[7, 3] = np.inf
    x[9, 0] = np.nan
    np.save(bad, x)
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(features), "--folds", "2",
                           "--quiet"], capsys)
    assert str(bad) in err and "hold NaN or infinite values (first in row 7)" in err


def test_features_too_large_for_the_detector_are_named_with_their_largest_value(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1e38 passes the NaN/inf check, but the detector's float32 arithmetic overflows on it: the run ended with
    # "segmenter: frame 100 has empty or non-finite probabilities", naming neither the file nor the cause.
    features = subset(data_dir, tmp_path, 4)
    bad = sorted(features.glob("*.npy"))[1]
    x = np.load(bad).astype(np.float32)
    x[100, 3] = 1e38
    np.save(bad, x)
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(features), "--folds", "2",
                           "--epochs", "1", "--workers", "1", "--quiet"], capsys)
    assert (f"{bad}: the detector's output is not finite from frame 100 on (float32 arithmetic overflowed in the "
            "detector; the features reach 1e+38 in absolute value: rescale them") in err


def test_recipes_leave_the_other_recipes_files_unread_so_a_damaged_one_does_not_stop_the_run(
    data_dir: Path, tmp_path: Path
) -> None:
    features = subset(data_dir, tmp_path, 4)
    other = next(r for r in load_live_data(data_dir).recordings if r.recipe != RECIPE)
    damaged = features / other.path.name
    damaged.write_bytes(other.path.read_bytes()[:100])  # cut short: no .npy reader takes it
    with pytest.raises(InputError, match=re.escape(str(damaged))):
        load_live_data(data_dir, features)
    data = load_live_data(data_dir, features, recipes=(RECIPE,))
    assert list(data.recipes) == [RECIPE] and len(data.recordings) == 4
    with pytest.raises(InputError, match=f"--recipes {other.recipe}x: no recording of it in .*"
                                         f"recipes there: .*{RECIPE}"):
        load_live_data(data_dir, features, recipes=(RECIPE, other.recipe + "x"))


def data_copy(data_dir: Path, tmp_path: Path) -> Path:
    """A writable copy of the data folder's CaptainCook4D files (the features stay where they are)."""
    copy = tmp_path / "data"
    shutil.copytree(data_dir / "captaincook4d", copy / "captaincook4d")
    return copy


def edited_errors(data_dir: Path, tmp_path: Path, edit: Callable[[list[dict]], object]) -> tuple[Path, Path]:
    """`data_copy` with its error annotations edited in place by ``edit``; the copy and the edited file."""
    data = data_copy(data_dir, tmp_path)
    path = data / "captaincook4d" / "error_annotations.json"
    raw = json.loads(path.read_text())
    edit(raw)
    path.write_text(json.dumps(raw))
    return data, path


def test_an_output_that_would_overwrite_an_input_is_refused_before_any_work(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --json or --out naming a feature file or the data set's own annotations would replace them with the results.
    data, features = data_copy(data_dir, tmp_path), subset(data_dir, tmp_path, 4)
    victims = [data / "captaincook4d" / "error_annotations.json", data / "captaincook4d" / "ground_truth_task_graphs"
               / f"{RECIPE}.json", next(features.glob("*.npy"))]
    before = [v.read_bytes() for v in victims]
    for victim in victims:
        err = cli_error(main, ["bench-live", "--data", str(data), "--features", str(features), "--json", str(victim)],
                        capsys)
        assert err.startswith(f"error: --json {victim}: the results file would overwrite a file of ")
        err = cli_error(main, ["captaincook-labels", "--data", str(data), "--features", str(features), "--out",
                               str(victim)], capsys)
        assert err.startswith(f"error: --out {victim}: the annotation file would overwrite a file of ")
    assert [v.read_bytes() for v in victims] == before


def test_a_features_file_that_ends_before_its_annotated_steps_is_refused_naming_it(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every other row (features at 0.5 per second read at one): the later steps would be labelled background.
    features = subset(data_dir, tmp_path, 4)
    halved = next(features.glob("*.npy"))
    np.save(halved, np.load(halved)[::2])
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(features)], capsys)
    assert err.startswith(f"error: {halved}: covers ") and "a file cut short, or features at another rate?" in err


def test_features_at_twice_one_a_second_are_refused_not_scored(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each row twice (a backbone at two vectors a second): the run scored every step early in its file, exit 0.
    features = subset(data_dir, tmp_path, 4)
    for path in features.glob("*.npy"):
        np.save(path, np.repeat(np.load(path), 2, axis=0))
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(features)], capsys)
    assert err.startswith(f"error: --features {features}: its files last a median 2.") and "one vector a second" in err
    # One such file among others at one a second: the median passes, and it was read without a word. Where the data
    # set says how long the recording lasts, it is refused; elsewhere, its steps prove less: it is warned of.
    (tmp_path / "mixed").mkdir()
    mixed = subset(data_dir, tmp_path / "mixed", 4)
    doubled = sorted(mixed.glob("*.npy"))[0]
    np.save(doubled, np.repeat(np.load(doubled), 2, axis=0))
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(mixed)], capsys)
    assert err.startswith(f"error: {doubled}: ") and "written at 2.00 vectors a second?" in err
    no_lengths = tmp_path / "no-lengths"
    no_lengths.mkdir()
    (no_lengths / "captaincook4d").symlink_to(data_dir / "captaincook4d")  # no captaincook4d-pe/SOURCES.tsv
    data = load_live_data(no_lengths, mixed)
    assert len(data.recordings) == 4
    assert capsys.readouterr().err.strip() == (
        f"warning: --features {mixed}: 1 file lasts more than 1.8 times as long as its recording's annotated steps at "
        f"one vector a second ({doubled.name}): written at another rate?")


def test_a_fold_whose_data_cannot_be_scored_is_named_with_its_recordings(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An edited annotation file with no step left in some recordings: the message says which fold, not only what.
    features = subset(data_dir, tmp_path, 4)

    def no_steps(raw: list[dict]) -> None:
        for entry in raw:
            if (features / f"{entry['recording_id']}.npy").exists():
                entry["step_annotations"] = []

    data, _ = edited_errors(data_dir, tmp_path, no_steps)
    err = cli_error(main, ["bench-live", "--data", str(data), "--features", str(features), "--folds", "2", "--epochs",
                           "1", "--workers", "1", "--quiet"], capsys)
    # Numbered from 0, as the JSON's "fold" and the cache's file names: "fold 1 of 2" sent a user to -fold1 files.
    assert err.startswith(f"error: {RECIPE}, fold 0 (of 0-1; trained on ")
    assert err.endswith("have no annotated step, so their recognition cannot be scored")


def test_a_damaged_entry_of_the_error_annotations_is_named_not_a_features_file(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    features = subset(data_dir, tmp_path, 4)
    data, path = edited_errors(data_dir, tmp_path, lambda raw: raw[3].pop("recording_id"))
    err = cli_error(main, ["bench-live", "--data", str(data), "--features", str(features)], capsys)
    assert err == f"error: {path}: recording 3: field 'recording_id' = null: expected a string"


def test_entries_of_a_features_folder_that_are_not_features_files_are_named(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    features = subset(data_dir, tmp_path, 4)
    first = next(features.glob("*.npy"))
    (features / "sub").mkdir()
    np.savez(features / "extra.npz", x=np.zeros(3))
    first.rename(first.with_suffix(".NPY"))  # read all the same: the suffix in any case
    out = tmp_path / "labels.json"
    assert main(["captaincook-labels", "--data", str(data_dir), "--features", str(features), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "wrote" in captured.out and "4 recordings" in captured.out
    assert f"note: --features {features}: 2 entries are not <recording_id>.npy and not read: extra.npz, sub/" in (
        captured.err)
    (features / "folder.npy").mkdir()  # named like a features file, but not one: refused, not taken for a recording
    err = cli_error(main, ["captaincook-labels", "--data", str(data_dir), "--features", str(features), "--out",
                           str(out)], capsys)
    assert err == f"error: --features {features}: folder.npy is a folder, not a feature file"


def test_a_recording_with_no_annotation_is_refused_naming_it(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    features = subset(data_dir, tmp_path, 4)
    np.save(features / "99_999.npy", np.zeros((5, 768), np.float16))
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(features), "--quiet"], capsys)
    assert "99_999" in err and "has no annotation" in err


def test_features_at_another_rate_are_refused_by_their_recordings_length(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 16-frame clips of 25 fps video, 1.5625 a second, last a median 1.6 times their steps, under the 1.8 a folder is
    # held to: bench-live scored them as one a second, every step early in its file, exit status 0.
    features = subset(data_dir, tmp_path, 4)
    files = sorted(features.glob("*.npy"))
    x = np.load(files[0])
    np.save(files[0], np.concatenate([x, x[-3:]]))  # a few vectors past the video: another backbone's windows
    load_live_data(data_dir, features)
    for path in files:
        x = np.load(path)
        np.save(path, x[(np.arange(int(len(x) * 1.5625)) / 1.5625).astype(int)])
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(features), "--quiet"], capsys)
    assert re.fullmatch(rf"error: {re.escape(str(features))}/\S+\.npy: \d+ vectors, but recording \S+ lasts \d+ s "
                        rf"\({re.escape(str(data_dir / 'captaincook4d-pe' / 'SOURCES.tsv'))}\): written at 1\.5\d "
                        r"vectors a second\? bench-live reads one a second .*", err)


@pytest.mark.parametrize("seconds", ["9\u00b2", "9" * 5000, "x" * 200_000, '"973', "\u0663", ""])
def test_a_damaged_sources_table_row_is_one_line(seconds: str, tmp_path: Path) -> None:
    # A superscript digit ('9\u00b2', which str.isdigit takes), 5,000 digits or a field over csv's limit ended
    # bench-live in a ValueError or _csv.Error traceback; a stray quote swallowed the rows after it in silence. A row
    # without a length was then skipped in silence, and the length check of its recording with it.
    sources = tmp_path / "SOURCES.tsv"
    sources.write_text(f"recording_id\tseconds\n10_16\t{seconds}\n10_18\t620\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{re.escape(str(sources))}: "):
        video_seconds(sources)


def test_a_sources_table_row_without_its_recording_says_so(tmp_path: Path) -> None:
    # It said "'' has no length in seconds (seconds = '973')": a length it had just quoted.
    sources = tmp_path / "SOURCES.tsv"
    sources.write_text("recording_id\tseconds\n10_16\t973\n\t620\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        video_seconds(sources)
    assert str(refused.value) == (f"{sources}: line 3: no recording_id (seconds = \"620\"; a damaged table? restore it "
                                  "from the data set)")


def _cut_mid_row(text: str) -> bytes:
    """The table cut four characters into a row: inside its recording_id, before its seconds."""
    return text[: text.index("\n", len(text) // 2) + 5].encode()


# Each was read as a table of no lengths, and bench-live ran without its check of the files' lengths, in silence.
DAMAGED_SOURCES: dict[str, tuple[Callable[[str], bytes], str]] = {
    "empty": (lambda text: b"", "not the data set's sources table (its first line names no recording_id and "
                                "seconds columns, tab-separated)"),
    "utf-16-without-bom": (lambda text: text.encode("utf-16-le"), "is UTF-16 text (Windows' \"Unicode\"), expected a "
                                                                   "sources table in UTF-8"),
    "another-file": (lambda text: b"recording\tlength\n10_16\t973\n", "not the data set's sources table"),
    "cut-mid-row": (_cut_mid_row, "has no length in seconds (no seconds cell; a damaged table?"),
}


@pytest.mark.parametrize("damage", DAMAGED_SOURCES)
def test_a_damaged_sources_table_stops_bench_live_in_one_line(
    damage: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    (data / "captaincook4d-pe").mkdir(parents=True)
    (data / "captaincook4d").symlink_to(data_dir / "captaincook4d")
    (data / "captaincook4d-pe" / "features").symlink_to(data_dir / FEATURES_SUBFOLDER)
    sources = data / "captaincook4d-pe" / "SOURCES.tsv"
    change, message = DAMAGED_SOURCES[damage]
    sources.write_bytes(change((data_dir / "captaincook4d-pe" / "SOURCES.tsv").read_text()))
    err = cli_error(main, ["bench-live", "--data", str(data), "--recipes", "zoodles", "--folds", "2", "--epochs", "1",
                           "--workers", "1", "--quiet"], capsys)
    assert err.startswith(f"error: {sources}: ") and message in err, err


def test_the_shipped_sources_table_gives_every_shared_recordings_length(data_dir: Path) -> None:
    seconds = video_seconds(data_dir / "captaincook4d-pe" / "SOURCES.tsv")
    assert set(seconds) == {p.stem for p in (data_dir / FEATURES_SUBFOLDER).glob("*.npy")}


def test_the_default_features_folder_is_the_data_sets(data_dir: Path) -> None:
    assert load_live_data(data_dir).features_dir == data_dir / FEATURES_SUBFOLDER


def test_every_recipe_of_captaincook4d_is_read_with_its_hand_made_graph(data_dir: Path, tmp_path: Path) -> None:
    # The figures are also checked on recordings of recipes we have no features of: a folder of any CaptainCook4D
    # recordings must load as the six do. Width-4 stand-ins for the 384 annotated recordings exercise the annotations.
    raw = json.loads((data_dir / "captaincook4d" / "error_annotations.json").read_text())
    folder = tmp_path / "features"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for entry in raw:
        length = round(max([s["end_time"] for s in entry["step_annotations"]] + [0.0])) + 5
        np.save(folder / f"{entry['recording_id']}.npy", rng.standard_normal((length, 4)).astype(np.float16))
    data = load_live_data(data_dir, folder)
    assert len(data.recipes) == 24 and len(data.recordings) == len(raw)
    done = labelled = 0
    for recipe in data.recipes.values():
        recordings = data.of(recipe.scenario)
        assert len(recordings) >= 12  # enough for the default 3 folds
        assert recipe.ground_truth.adjacency[1:-1, 1:-1].any()  # steps matched by name: pre-conditions found
        for r in recordings:
            steps = {p.step for p in r.annotation.performed if p.end > p.start}
            seen = {recipe.step_ids[c - 1] for c in np.unique(r.labels[r.labels > 0])}
            assert seen <= steps
            done, labelled = done + len(steps), labelled + len(seen)
            assert annotated_counts(recipe.ground_truth, r.annotation, r.error_free).counts.steps >= len(steps)
    # Where two steps overlap the later one takes the seconds: 14 of the 5,331 steps done have none left.
    assert done - labelled == 14 and done == 5331


def test_captaincook_labels_writes_the_steps_bench_live_scores_in_the_annotation_format(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A user with their own features of CaptainCook4D recordings needs their labels in the format that
    # recognition-features import and stream-detect eval read, with the step ids of the recipe's graphs.
    features = subset(data_dir, tmp_path, 4)
    out = tmp_path / "labels.json"
    assert main(["captaincook-labels", "--data", str(data_dir), "--features", str(features), "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: 4 recordings of {RECIPE} (4); ")
    labels = load_annotations(out)
    assert "a step never done: kept in its place" in capsys.readouterr().err  # a Missing Step among the four
    data = load_live_data(data_dir, features)
    recipe = data.recipes[RECIPE]
    assert labels.steps_of(RECIPE) == (recipe.step_ids, recipe.step_names)
    for r in data.recordings:
        video = labels.videos[r.recording_id]
        segments = list(zip(video.steps, video.spans, video.has_errors, strict=True))
        done = [(step, span, error) for step, span, error in segments if span is not None and span[0] >= 0]
        never = [(step, span) for step, span, _ in segments if span is not None and span[0] < 0]
        assert [(step, span[0]) for step, span, _ in done] == [(p.step, p.start) for p in r.annotation.performed]
        assert [step for step, _, error in done if error] == [p.step for p in r.annotation.performed if p.order_error]
        assert {step for step, _ in never} == r.annotation.missing
        assert all(span == (-1, -1) for _, span in never)
    # A step whose Missing Step tag and start time disagree is named: untagged and without a time, it is in neither
    # the steps done nor those never done.
    raw = json.loads((data_dir / "captaincook4d" / "error_annotations.json").read_text())
    rid = next(r.recording_id for r in data.recordings if r.annotation.performed)
    entry = next(e for e in raw if e["recording_id"] == rid)
    name = entry["step_annotations"][0]["description"]
    entry["step_annotations"][0] |= {"start_time": -1.0, "end_time": -1.0, "errors": []}
    edited = tmp_path / "edited"
    (edited / "captaincook4d").mkdir(parents=True)
    for item in (data_dir / "captaincook4d").iterdir():
        if item.name != "error_annotations.json":
            (edited / "captaincook4d" / item.name).symlink_to(item)
    (edited / "captaincook4d" / "error_annotations.json").write_text(json.dumps(raw))
    assert main(["captaincook-labels", "--data", str(edited), "--features", str(features), "--out",
                 str(tmp_path / "edited.json")]) == 0
    said = capsys.readouterr().err.splitlines()[-1]  # a note, as bench-live says it: stdout keeps the "wrote" line
    assert said.startswith("note: 1 annotated step whose Missing Step tag and start time disagree")
    assert f"{rid} '" in said
    assert name[:20] in said
    # A file of a recording the data set does not hold is named, and nothing is written.
    np.save(features / "99_1.npy", np.zeros((3, 4), np.float32))
    err = cli_error(main, ["captaincook-labels", "--data", str(data_dir), "--features", str(features), "--out",
                           str(tmp_path / "other.json")], capsys)
    assert err.startswith(f"error: {features / '99_1.npy'}: recording '99_1' is not in ")
    assert not (tmp_path / "other.json").exists()


def test_captaincook_labels_replaces_an_annotation_file_only(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --out graph.json, detector.pt or split.json replaced the file with the labels, exit status 0, as tgml train's
    # --out once replaced a label file.
    argv = ["captaincook-labels", "--data", str(data_dir), "--recordings", "12_10", "--out"]
    graph, notes = tmp_path / "graph.json", tmp_path / "notes.txt"
    shutil.copy(default_demo_paths()[0], graph)
    notes.write_text("my notes\n")
    for path, what in ((graph, "is a task graph (tgml train writes them)"), (notes, "is not an annotation file")):
        before = path.read_bytes()
        err = cli_error(main, [*argv, str(path)], capsys)
        assert err == (f"error: --out {path}: exists and {what}; a run replaces only an annotation file: choose "
                       "another name, or remove the file first")
        assert path.read_bytes() == before
    labels = tmp_path / "labels.json"
    for _ in range(2):  # written, then written again over itself
        assert main([*argv, str(labels)]) == 0
        assert load_annotations(labels).videos.keys() == {"12_10"}


def test_a_folds_checker_settings_are_chosen_on_no_recording_its_test_fold_could_have_taught() -> None:
    from graphs.checker_settings import CheckerSettings
    from tgml.bench.live.selection import Candidate, ValidationRun, candidates, objective, pool_indices

    runs = [ValidationRun(recipe, fold, None, True, {}, None, None)  # type: ignore[arg-type]
            for recipe in ("a", "b") for fold in range(3)]
    pool = [runs[i] for i in pool_indices(runs, "a", 1)]
    assert {(v.recipe, v.fold) for v in pool} == {("a", 1), ("b", 0), ("b", 1), ("b", 2)}
    options = candidates(CheckerSettings())
    assert options[0] == Candidate("observed", CheckerSettings()) and len(set(options)) == len(options) == 15
    both = candidates(CheckerSettings(), ("probabilistic", "binary"), ("observed", "learned"))
    assert len(both) == 2 * (15 + 1) and both[0] == options[0]  # the a-priori checker first
    assert Candidate("learned", CheckerSettings("binary")) in both
    metrics: dict[str, float | None] = {"avg_f1": 60.0, "missing_f1": 90.0, "false_alarms_per_error_free": 0.5}
    assert objective(metrics) == pytest.approx(120.0)  # 0.3 false alarms above the budget cost 30 points
    assert objective(metrics | {"false_alarms_per_error_free": 0.1, "avg_f1": None}) == 90.0


def test_recipes_with_a_fold_of_one_validation_recording_are_named() -> None:
    from tgml.bench.live.selection import ValidationRun, in_sample_recipes

    def run(recipe: str, fold: int, variant: int = 0) -> ValidationRun:
        return ValidationRun(recipe, fold, None, True, {}, None, None, variant)  # type: ignore[arg-type]

    # "a" fold 1 has one recording (seen under two segmenter variants); "b" has two in each fold.
    runs = [run("a", 0), run("a", 0), run("a", 1), run("a", 1, variant=1), run("b", 0), run("b", 0)]
    assert in_sample_recipes(runs) == ["a"]


@pytest.mark.parametrize("folds", [2, 3, 4])
def test_the_note_on_one_validation_recording_gives_the_recordings_needed_at_the_folds_asked(folds: int) -> None:
    # The note said "at 3 folds, 9 recordings" whatever --folds was given. Checked with the trainer's own draw on
    # folds dealt in turn, as bench-live deals them.
    from recognition.feature_folders import choose_validation_videos
    from tgml.bench.live.detector import LIVE_DETECTOR
    from tgml.bench.live.selection import recordings_for_two_validation

    def fewest_validation(count: int) -> int:
        fold_sizes = [sum(1 for k in range(count) if k % folds == f) for f in range(folds)]
        return min(len(choose_validation_videos([f"r{i}" for i in range(count - size)], LIVE_DETECTOR.val_fraction))
                   for size in fold_sizes)

    enough = recordings_for_two_validation(folds, LIVE_DETECTOR.val_fraction)
    assert enough is not None and fewest_validation(enough) == 2 and fewest_validation(enough - 1) == 1


def test_a_validation_recording_is_scored_with_an_evidence_calibration_that_never_saw_it() -> None:
    # Scored with a calibration fitted on itself, the validation end report looked far better than the test folds'
    # (missing-step F1 41-45 against 16-22), and the settings chosen on it followed the optimism.
    from tgml.bench.live.selection import cross_fitted

    outputs = {"17_10": 1, "17_29": 2, "17_37": 3}
    models = cross_fitted(outputs, lambda seen: frozenset(seen), frozenset(outputs))
    assert models == {"17_10": {"17_29", "17_37"}, "17_29": {"17_10", "17_37"}, "17_37": {"17_10", "17_29"}}
    alone = cross_fitted({"17_10": 1}, lambda seen: frozenset(seen), frozenset({"17_10"}))
    assert alone == {"17_10": {"17_10"}}  # nothing else to fit on: the fold's own calibration


def test_a_steps_peak_is_the_largest_causal_five_second_mean_of_its_probability() -> None:
    from tgml.bench.live.chain import step_peaks

    probs = np.zeros((20, 3))
    probs[6:8, 1] = 1.0  # two clear seconds: a 5 s mean of 0.4 at most
    probs[10:17, 2] = 0.5  # seven seconds at one half
    assert step_peaks(probs, [None, 7, 9], 1.0) == pytest.approx({7: 0.4, 9: 0.5})
    assert step_peaks(probs[:1], [None, 7, 9], 1.0) == {7: 0.0, 9: 0.0}  # only what the stream has shown so far


def test_a_steps_confirmation_length_is_a_share_of_its_usual_duration_on_the_training_recordings() -> None:
    from recognition.segmenter import SegmenterConfig, segment_labels
    from tgml.bench.live.selection import LONGEST_CONFIRMATION, SegmenterVariant, class_durations

    # class 1 lasts 10 s and 30 s (median 20 s), class 2 lasts 200 s, class 3 never occurs
    labels = [np.array([0] * 5 + [1] * 10 + [0] * 3 + [2] * 200), np.array([1] * 30 + [0] * 4)]
    durations = class_durations(labels, 4, 1.0)
    assert durations[1:3].tolist() == [20.0, 200.0] and np.isnan(durations[3])
    base = SegmenterConfig(fps=1.0, min_duration=3.0, min_run=1.0, max_delay=6.0)
    durations[0] = np.nan  # background keeps the common length
    config = SegmenterVariant(3.0, True, duration_share=0.3).config(base, durations)
    assert config.class_min_duration == (3.0, 6.0, LONGEST_CONFIRMATION, 3.0)  # 0.3 x 20 s; 60 s clipped; unseen
    assert config.max_delay == 2 * LONGEST_CONFIRMATION
    assert SegmenterVariant(3.0, True).config(base, durations).class_min_duration is None
    # 5 s of class 1 between background: a step at the common 3 s, none once class 1 must last 6 s
    stream = [0] * 10 + [1] * 5 + [0] * 10
    assert [e.step for e in segment_labels(stream, base)] == [1]
    assert [e.step for e in segment_labels(stream, config)] == []


def test_the_binary_checker_has_no_prior_or_threshold_to_choose() -> None:
    # Its folds "chose" 15 identical settings and the JSON recorded a prior and a threshold it never used.
    from graphs.checker_settings import CheckerSettings
    from tgml.bench.live.bench import checker_numbers
    from tgml.bench.live.selection import settings_grid

    binary = CheckerSettings("binary", order_rule=LATE_STEP)
    assert settings_grid(binary) == [binary]
    assert checker_numbers(binary) == {"prior_skip": None, "alert_threshold": None}
    probabilistic = CheckerSettings()
    assert len(settings_grid(probabilistic)) == 15 and settings_grid(probabilistic)[0] == probabilistic
    assert checker_numbers(probabilistic) == {"prior_skip": 0.2, "alert_threshold": 0.5}


def test_the_live_chain_checks_the_learned_preconditions_its_own_recognition_orders(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Six recordings, two folds: three train each fold, one of them validates, and each of the other two is
    # recognised by a detector trained on the other (the nested cross-validation of tgml.bench.live.observed).
    features = subset(data_dir, tmp_path, 6)
    cache = tmp_path / "cache"
    runs = {}
    for graph in ("learned", "observed"):  # the first run writes entries without observed graphs; the second adds them
        out = tmp_path / f"{graph}.json"
        assert main(["bench-live", "--data", str(data_dir), "--features", str(features), "--folds", "2", "--epochs",
                     "1", "--workers", "1", "--quiet", "--json", str(out), "--cache", str(cache),
                     "--live-graph", graph, "--save-graphs", str(tmp_path / graph)]) == 0
        assert (f"wrote 2 graphs to {tmp_path / graph}/ (<recipe>-fold<k>.json), and 1 hand-made graph "
                "(<recipe>-hand-made.json)") in capsys.readouterr().out
        runs[graph] = json.loads(out.read_text())
        assert runs[graph]["settings"]["live_graphs"] == [graph]
        assert {c["live_graph"] for c in runs[graph]["chosen"][RECIPE].values()} == {graph}
    assert len(list(cache.glob("*.npz"))) == 2  # the same entries, the observed graphs added to them
    learned = {fold: c["preconditions"] for fold, c in runs["learned"]["chosen"][RECIPE].items()}
    observed = {fold: c["preconditions"] for fold, c in runs["observed"]["chosen"][RECIPE].items()}
    assert all(p["checked"] == p["learned"] > 0 for p in learned.values())
    assert all(p["checked"] <= p["learned"] for p in observed.values()) and observed != learned
    # What each fold checked against is written as a graph file stream-detect reads (--save-graphs).
    from graphs.task_graph import load_graph

    for graph, counts in (("learned", learned), ("observed", observed)):
        saved = {path.name: load_graph(path) for path in (tmp_path / graph).glob("*.json")}
        hand_made = saved.pop(f"{RECIPE}-hand-made.json")
        assert set(saved) == {f"{RECIPE}-fold0.json", f"{RECIPE}-fold1.json"}
        assert {f"{RECIPE}-fold{fold}.json": c["checked"] for fold, c in counts.items()} == {
            name: int(g.adjacency[1:-1, 1:-1].sum()) for name, g in saved.items()}
        # The hand-made graph over the same steps, with the recipe's ids (CaptainCook4D's file numbers its own).
        assert (hand_made.step_ids, hand_made.scenario) == (saved[f"{RECIPE}-fold0.json"].step_ids, RECIPE)
        assert hand_made.adjacency.any()
    # The annotated rows keep the learned graph whatever the live chain checks against.
    for row in ("annotated_learned", "annotated_hand_made"):
        assert runs["observed"]["overall"][row] == runs["learned"]["overall"][row]


def test_a_recognised_sequence_is_each_steps_first_confirmation_in_order() -> None:
    from tgml.bench.live.detector import LIVE_SEGMENTER
    from tgml.bench.live.observed import recognised_sequence

    labels = [0] * 5 + [2] * 20 + [0] * 5 + [1] * 20 + [2] * 20 + [0] * 10  # step 9, step 7, step 9 again
    outputs = np.eye(3, dtype=np.float32)[labels]
    assert recognised_sequence(outputs, [None, 7, 9], LIVE_SEGMENTER) == (9, 7)
    assert recognised_sequence(outputs[:3], [None, 7, 9], LIVE_SEGMENTER) == ()


def test_perfect_features_copy_each_recording_with_its_annotated_class_in_every_second(
    data_dir: Path, tmp_path: Path
) -> None:
    # benchmarks/perfect_features.py: what the chain itself costs is measured on recognition made perfect.
    import subprocess
    import sys

    features = subset(data_dir, tmp_path, 3)
    out = tmp_path / "perfect"
    script = str(Path(__file__).parents[3] / "benchmarks" / "perfect_features.py")
    done = subprocess.run([sys.executable, script, "--data", str(data_dir), "--features", str(features), "--out",
                           str(out), "--dim", "16"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == f"wrote 3 recordings to {out}\n", done.stderr
    for recording in load_live_data(data_dir, features).recordings:
        x = np.load(out / recording.path.name).astype(np.float64)
        assert x.shape == (len(recording.labels), 16)
        # The class of a second is read back from its vector by the nearest class mean: nothing to learn but that.
        means = np.stack([x[recording.labels == c].mean(axis=0) for c in np.unique(recording.labels)])
        nearest = np.unique(recording.labels)[((x[:, None] - means[None]) ** 2).sum(-1).argmin(axis=1)]
        assert (nearest == recording.labels).mean() > 0.95
    again = subprocess.run([sys.executable, script, "--data", str(data_dir), "--features", str(features), "--out",
                            str(features)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and again.stderr.startswith(f"error: --out {features}: the features folder it reads")


def test_live_trace_says_which_features_folder_the_run_read_and_refuses_a_cut_run_in_one_line(
    data_dir: Path, tmp_path: Path
) -> None:
    # benchmarks/live_trace.py on a run over --features mine/: "recording ... is not in <the data set's folder>" did
    # not say which folder to give; an alert without its "retracted" flag (a file edited or cut) was a traceback.
    import subprocess
    import sys

    features = subset(data_dir, tmp_path, 3)
    kept = sorted(path.stem for path in features.glob("*.npy"))
    script = str(Path(__file__).parents[3] / "benchmarks" / "live_trace.py")
    mine = tmp_path / "mine"
    run = {"settings": {"features_dir": str(mine)},
           "recordings": [{"recording_id": "10_16", "recipe": "pinwheels", "recognised": [], "alerts": [],
                           "never_done": []}]}
    path = tmp_path / "live.json"
    path.write_text(json.dumps(run))
    command = [sys.executable, script, str(path), "--data", str(data_dir), "--features", str(features)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr == (f"error: {path}: recording '10_16' is not in {features} (the run "
                                                    f"read {mine}: give it with --features)\n"), done.stderr
    alert = {"step": "x", "missing": [], "time": 1.0, "probability": 1.0}  # no "retracted"
    run["recordings"] = [{"recording_id": kept[0], "recipe": RECIPE, "recognised": [], "alerts": [alert],
                          "never_done": []}]
    path.write_text(json.dumps(run))
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr == (f"error: {path}: not the JSON of `tgml bench-live --json` (an "
                                                    "entry without key 'retracted')\n"), done.stderr
    alert["retracted"] = False
    path.write_text(json.dumps(run))
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Alerts by what was true at their time (1):" in done.stdout, done.stderr


def test_the_offline_screen_scores_a_forwards_and_a_two_way_model_on_the_benchmarks_folds(
    data_dir: Path, tmp_path: Path
) -> None:
    # benchmarks/offline_missing.py: whether an end report that reads the whole recording names the steps never done
    # better (docs/live-benchmark-history.md). A user's folder of three recordings, one pass each: it runs end to end.
    import subprocess
    import sys

    recordings = sorted(load_live_data(data_dir).of(RECIPE), key=lambda r: r.recording_id)
    chosen = [r for r in recordings if r.error_free][:2] + [r for r in recordings if r.annotation.missing][:1]
    features = tmp_path / "features"
    features.mkdir()
    for r in chosen:  # two error-free recordings and one with a Missing Step tag: every figure has items
        shutil.copy(r.path, features / r.path.name)
    script = str(Path(__file__).parents[3] / "benchmarks" / "offline_missing.py")
    command = [sys.executable, script, "--data", str(data_dir), "--features", str(features), "--epochs", "1",
               "--hidden", "8", "--window", "60"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == ["forwards", "both ways"]
    for row in rows:  # mAP, the never-done score's AP, its best F1 (P / R): numbers, percent
        numbers = re.findall(r"\d+\.\d", row)
        assert len(numbers) == 5 and all(0.0 <= float(x) <= 100.0 for x in numbers)
    refused = subprocess.run([*command, "--folds", "4"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.startswith("error: --folds 4: recipe"), refused.stderr


def test_a_fold_chooses_the_checker_and_the_graph_its_validation_recordings_score_best() -> None:
    # At recognition that misses nothing the binary checker on the learned graph loses nothing, while the a-priori
    # checker (probabilistic, the observed pre-conditions) keeps quiet; on a detector that misses and invents steps
    # the binary one cries wolf (docs/live-benchmark.md). Which one suits is the validation recordings' question.
    from graphs.checker import StepEvidence
    from graphs.checker_settings import CheckerSettings
    from graphs.task_graph import TaskGraph
    from recognition.segmenter import SegmentEvent
    from tgml.bench.live.chain import DetectorRun
    from tgml.bench.live.selection import Candidate, ReplayTable, ValidationRun, candidates

    steps, names = [1, 2], {1: "wash", 2: "cut"}

    def graph(cut_needs_wash: bool) -> TaskGraph:
        adj = np.zeros((4, 4), dtype=bool)  # the start, wash, cut, the end
        adj[1, 0] = adj[3, 2] = True  # wash after the start; the end after cut
        adj[2, 1 if cut_needs_wash else 0] = True
        return TaskGraph(tuple(steps), tuple(names.values()), adj, scenario="salad")

    graphs = {"learned": graph(True), "observed": graph(False)}  # recognition never bore "wash before cut" out

    def run(recording: str, order: list[int], tagged: int | None) -> ValidationRun:
        performed = tuple(PerformedStep(s, names[s], 10.0 * k, (ORDER_ERROR,) if s == tagged else ())
                          for k, s in enumerate(order))
        events = tuple(SegmentEvent(s, 10.0 * k, 10.0 * k + 5, 1.0, s) for k, s in enumerate(order))
        # The detector calibrated as one that invents steps: each detection real with probability 0.05, which the
        # probabilistic checker weighs (and keeps quiet) and the binary one takes as certain.
        sent = DetectorRun(np.zeros((0, 3), np.float32), events, tuple(e.end for e in events),
                           tuple(StepEvidence(real=0.05) for _ in events), StepEvidence())
        return ValidationRun("salad", 0, ErrorRecording(recording, "salad", performed, frozenset(), ()),
                             tagged is None, names, sent, graphs)

    runs = [run("1_1", [2, 1], tagged=2), run("1_2", [1, 2], None), run("1_3", [2, 1], tagged=2)]
    options = candidates(CheckerSettings(), ("probabilistic", "binary"), ("observed", "learned"))
    pick = ReplayTable(runs, options).choose([0, 1, 2])
    assert pick.candidate.graph == "learned"  # the observed pre-conditions cannot see the cut before the wash
    assert pick.candidate == Candidate("learned", CheckerSettings("binary"))  # the probabilistic one stays silent
    assert pick.objective == pytest.approx(100.0)  # Avg F1 100: both swaps alerted, no false alarm (no step missed)


def test_the_silent_floor_is_half_the_correct_class_f1_of_calling_every_step_correct() -> None:
    # 10 steps, 2 order errors: every step called correct is right on 8 of 10 (precision 0.8, recall 1), and no
    # mistake is caught (mistake F1 0); the chain's own alerts do not enter the floor.
    floor = silent_avg_f1(LiveCounts(Counts(steps=10, order_errors=2, alerts=3, caught=1)))
    assert floor == pytest.approx(100 * (2 * 0.8 / 1.8) / 2)


def test_a_calibration_on_one_recording_keeps_the_flattest_curve_the_benchmark_was_measured_with() -> None:
    # recognition-train's one validation video now leaves its steps out in turn; the benchmark calibrated its
    # cross-fitted validation recordings (one each) that way too, unmeasured, its published figures no longer from
    # its documented protocol ("a calibration fitted on a single recording gets the flattest curve").
    from graphs.task_graph import TaskGraph
    from recognition.evidence_calibration import SLOPE_PENALTIES, calibrate_evidence
    from tgml.bench.live.detector import LiveDetectorSettings, calibrate
    from tgml.bench.live.recordings import FPS, Recipe

    rng = np.random.default_rng(0)
    labels = np.concatenate([np.r_[np.zeros(4, int), np.full(12, s)] for s in (1, 2, 3)] + [np.zeros(4, int)])
    targets = np.eye(4)[labels]
    probs = 0.7 * targets + 0.3 * rng.dirichlet(np.ones(4), size=len(labels))
    recipe = Recipe("tea", (1, 2, 3), ("a", "b", "c"), TaskGraph((1, 2, 3), ("a", "b", "c"), np.zeros((5, 5), bool)))
    settings = LiveDetectorSettings()
    model = calibrate(recipe, {"rec": (probs, targets)}, settings)
    flattest = calibrate_evidence({"rec": (probs, targets)}, recipe.class_step_ids, FPS, settings.segmenter,
                                  window_s=settings.train.evidence_window,
                                  detection_window_s=settings.segmenter.min_duration,
                                  slope_penalty=max(SLOPE_PENALTIES))
    assert model.done_slope == pytest.approx(flattest.done_slope)
    assert model.real_slope == pytest.approx(flattest.real_slope)
    steps = calibrate_evidence({"rec": (probs, targets)}, recipe.class_step_ids, FPS, settings.segmenter,
                               window_s=settings.train.evidence_window,
                               detection_window_s=settings.segmenter.min_duration)
    assert steps.done_slope != pytest.approx(flattest.done_slope)  # what recognition-train's calibration fits
