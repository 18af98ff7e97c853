"""Bring your own features: ``recognition-features import`` turns per-recording .npy files and an annotation file
into the folder recognition-train reads, and refuses what it cannot use with one line naming the file."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import recognition.feature_import as feature_import
from graphs.common.errors import InputError
from recognition.checkpoint import load_detector
from recognition.feature_folders import load_feature_dataset
from recognition.recognition_train_cli import main as train_main
from recognition.train import training_config_of_folder
from streaming.offline.features_cli import main
from tests.cli_errors import cli_error
from tests.command_lines import with_options
from tgml.tgml_cli import main as tgml_main

STEPS = {"0": {"id": 0, "name": "unfold"}, "1": {"id": 1, "name": "insert_pole"}}


def segment(step: int, start: float, end: float) -> dict[str, object]:
    return {"step_id": step, "start_time": start, "end_time": end, "description": "", "has_errors": False,
            "step_name": STEPS[str(step)]["name"]}


def write_recordings(root: Path, count: int = 5, rows: int = 60, width: int = 6, rate: float = 1.0,
                     dtype: type[np.floating] = np.float16) -> Path:
    """``count`` recordings at ``rate`` vectors a second: background, step 0 for 20 s, background, step 1 for 20 s;
    each step's features sit around its own point, so a tiny detector learns them. Saved as ``dtype``."""
    rng = np.random.default_rng(0)
    (root / "npy").mkdir()
    annotations: dict[str, object] = {}
    for v in range(count):
        times = np.arange(rows) / rate
        label = np.where((times >= 5) & (times < 25), 1, np.where((times >= 30) & (times < 50), 2, 0))
        centres = np.eye(3, width) * 3.0
        features = centres[label] + rng.normal(0, 0.3, size=(rows, width))
        np.save(root / "npy" / f"rec{v}.npy", features.astype(dtype))
        annotations[f"rec{v}"] = {"scenario": "tent", "recording_id": f"rec{v}",
                                  "segments": [segment(0, 5.0, 25.0), segment(1, 30.0, 50.0)]}
    (root / "labels.json").write_text(json.dumps({"taxonomy": {"tent": STEPS}, "annotations": annotations}))
    return root


def argv(root: Path, *extra: str) -> list[str]:
    """An import command line over ``root``; an option in ``extra`` replaces the one set here (an option given twice
    is refused)."""
    return ["import", *with_options({"--features": str(root / "npy"), "--annotations": str(root / "labels.json"),
                                     "--rate": "1", "--out": str(root / "out")}, *extra)]


def test_imported_features_train_a_detector_that_records_their_rate_and_name(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]
                                                                               ) -> None:
    root = write_recordings(tmp_path)
    assert main(argv(root, "--name", "my-backbone", "--test-videos", "rec4")) == 0
    printed = capsys.readouterr().out
    assert "5 recordings imported" in printed
    # The recordings the graph must leave out, named without opening split.json (a new user had to).
    assert f"test recordings: rec4 (in {root / 'out'}/split.json; leave them out of the graph too" in printed
    data = load_feature_dataset(root / "out", training_config_of_folder(root / "out").features)
    assert (data.fps, data.feature_extractor, data.input_dim) == (1.0, "my-backbone", 6)
    assert [v.name for v in data.test] == ["rec4"]
    labels = data.train[0].targets.argmax(axis=1)
    # Row k starts k seconds in: rows 5..24 are the first step, 30..49 the second, the rest background.
    assert labels[4:6].tolist() == [0, 1] and labels[24:26].tolist() == [1, 0] and labels[49:51].tolist() == [2, 0]
    out = tmp_path / "detector.pt"
    assert train_main(["--features", str(root / "out"), "--out", str(out), "--epochs", "3", "--quiet"]) == 0
    model, checkpoint = load_detector(out)
    assert (checkpoint.feature_extractor, checkpoint.fps) == ("my-backbone", 1.0)
    # The motion lag and the training window are seconds: 2 s and 12.8 s at one vector a second.
    assert (model.config.motion_lag, checkpoint.info["train"]["window"]) == (2, 13)


def test_the_exclude_videos_hint_holds_for_a_graph_learned_from_another_annotation_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The README's CaptainCook4D flow learns the graph from the data set's graph-generation annotations, which hold
    # only some of the imported recordings: the hint's bare command was refused there ("rec3 not an execution ...").
    root = write_recordings(tmp_path)
    labels = root / "labels.json"
    assert main(argv(root, "--test-videos", "rec3,rec4")) == 0
    (hint,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("test recordings: ")]
    assert hint.endswith(f"leave them out of the graph too: tgml train --exclude-videos rec3,rec4 for a graph learned "
                         f"from {labels}; from another annotation file, name only those of them it holds)")
    graph = ["--scenario", "tent", "--quiet", "--out"]
    assert tgml_main(["train", "--annotations", str(labels), "--exclude-videos", "rec3,rec4", *graph,
                      str(tmp_path / "g1.json")]) in (0, None)
    data = json.loads(labels.read_text())
    del data["annotations"]["rec3"]  # the graph's own file, holding rec4 of the test recordings only
    other = tmp_path / "graph_labels.json"
    other.write_text(json.dumps(data))
    capsys.readouterr()
    line = cli_error(tgml_main, ["train", "--annotations", str(other), "--exclude-videos", "rec3,rec4", *graph,
                                 str(tmp_path / "g2.json")], capsys)
    assert line.startswith("error: --exclude-videos: rec3 not an execution of 'tent'")  # a typo stays refused
    assert tgml_main(["train", "--annotations", str(other), "--exclude-videos", "rec4", *graph,
                      str(tmp_path / "g3.json")]) in (0, None)


def test_a_feature_file_with_nan_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_recordings(tmp_path)
    bad = np.load(root / "npy" / "rec2.npy")
    bad[7, 1] = np.inf
    np.save(root / "npy" / "rec2.npy", bad)
    err = cli_error(main, argv(root), capsys)
    assert "rec2.npy" in err and "NaN or infinite values (first in row 7)" in err
    assert not (root / "out").exists()  # checked before anything is written


@pytest.mark.parametrize(("array", "why"), [
    (np.zeros((4, 3, 2), dtype=np.float32), "expected 2 dimensions"),
    (np.zeros((40, 6), dtype=np.int64), "expected floats (float16, float32, float64, ...)"),
    # A pickled object array: never unpickled.
    (np.array([{"a": 1}], dtype=object), "expected floats (float16, float32, float64, ...)"),
])
def test_a_feature_file_that_is_not_a_2d_float_array_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                array: np.ndarray, why: str) -> None:
    root = write_recordings(tmp_path)
    np.save(root / "npy" / "rec1.npy", array, allow_pickle=True)
    err = cli_error(main, argv(root), capsys)
    assert "rec1.npy" in err and why in err


def test_an_unreadable_feature_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_recordings(tmp_path)
    (root / "npy" / "rec3.npy").write_bytes(b"not numpy at all")
    assert "rec3.npy: not a NumPy .npy file" in cli_error(main, argv(root), capsys)


@pytest.mark.parametrize("fraction", ["0", "-0.5", "1", "nan"])
def test_a_test_fraction_that_leaves_a_split_empty_is_refused_by_its_range(
        fraction: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "[0, 1)" was printed for -0.5, then 0 was refused as "the test split would be empty": the range said is the one.
    root = write_recordings(tmp_path)
    err = cli_error(main, argv(root, "--test-fraction", fraction), capsys)
    assert err.startswith(f"error: --test-fraction {float(fraction)!r}: must be in (0, 1), the share of recordings")


def test_a_step_marked_never_done_is_no_oddity_to_the_import(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A Missing Step as tgml captaincook-labels writes it (start_time = end_time = -1): every import warned that "a
    # graph learner takes it as done", which concerns tgml train alone; an error line then came second.
    from graphs.annotations import load_annotations

    root = write_recordings(tmp_path)
    labels = json.loads((root / "labels.json").read_text())
    labels["taxonomy"]["tent"]["2"] = {"id": 2, "name": "stake_tent"}
    labels["annotations"]["rec0"]["segments"].append({"step_id": 2, "start_time": -1.0, "end_time": -1.0,
                                                      "description": "", "has_errors": True, "step_name": "stake_tent"})
    (root / "labels.json").write_text(json.dumps(labels))
    assert main(argv(root)) == 0
    assert "never done" not in capsys.readouterr().err
    load_annotations(root / "labels.json")  # what tgml train reads it with: the learners take the step as done
    assert "1 segment with start_time = end_time < 0 (a step never done" in capsys.readouterr().err


def test_files_of_another_width_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_recordings(tmp_path)
    np.save(root / "npy" / "rec3.npy", np.zeros((60, 7), dtype=np.float32))
    err = cli_error(main, argv(root), capsys)
    assert "rec3.npy: the features are 7 wide" in err and "same backbone" in err
    # The odd file is named even when it is the first read: the width most files share is the backbone's.
    np.save(root / "npy" / "rec3.npy", np.load(root / "npy" / "rec2.npy"))
    np.save(root / "npy" / "rec1.npy", np.zeros((60, 7), dtype=np.float32))
    err = cli_error(main, argv(root), capsys)
    assert "rec1.npy: the features are 7 wide, those of the folder's other files" in err


def test_a_features_option_that_is_no_folder_of_feature_files_says_what_it_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_recordings(tmp_path)
    one = root / "npy" / "rec0.npy"
    err = cli_error(main, argv(root, "--features", str(one)), capsys)
    assert err.endswith(f"--features {one}: a file, expected a folder of <video>.npy files")
    one.unlink()
    one.mkdir()  # named like rec0's features: said to be a folder, not counted as a recording without features
    assert cli_error(main, argv(root), capsys).endswith("rec0.npy is a folder, not a feature file")
    # A link loop, as --features or as --out: said, where Path.resolve raised a traceback.
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert cli_error(main, argv(root, "--features", str(loop)), capsys).endswith(f"--features {loop}: a link loop")
    err = cli_error(main, argv(root, "--out", str(loop)), capsys)
    assert err.endswith(f"--out {loop}: a link loop, where the feature folder would go")
    gone = tmp_path / "gone"
    gone.symlink_to(tmp_path / "nowhere")
    err = cli_error(main, argv(root, "--out", str(gone)), capsys)
    assert err.endswith(f"--out {gone}: a link to no folder, where the feature folder would go")


def test_an_import_never_rewrites_the_files_it_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --features F/rgb_x --out F --name x: the import would rewrite each file as float32 while reading it.
    root = write_recordings(tmp_path)
    (root / "npy").rename(root / "rgb_x")
    before = (root / "rgb_x" / "rec0.npy").read_bytes()
    err = cli_error(main, ["import", "--features", str(root / "rgb_x"), "--annotations", str(root / "labels.json"),
                           "--rate", "1", "--name", "x", "--out", str(root)], capsys)
    assert err == (f"error: --out {root}: its rgb_x/ is the --features folder, whose files the import would rewrite "
                   "as it reads them; choose another --out or --name")
    assert (root / "rgb_x" / "rec0.npy").read_bytes() == before


def test_the_features_folder_itself_is_no_feature_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_recordings(tmp_path)
    err = cli_error(main, argv(root, "--out", str(root / "npy")), capsys)
    assert err == (f"error: --out {root / 'npy'}: it is the --features folder; the feature folder (its rgb_imported/, "
                   "target_perframe/ and split.json) goes beside it, in another --out")
    assert sorted(p.name for p in (root / "npy").iterdir()) == [f"rec{v}.npy" for v in range(5)]


def test_importing_again_at_another_rate_says_the_folder_is_rewritten(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # A folder imported at 1 per second and again at 2: its targets and split.json were rewritten at the new rate
    # without a word, and the detector trained on it before no longer matched it.
    root = write_recordings(tmp_path, rows=120)
    assert main(argv(root)) == 0
    capsys.readouterr()
    assert main(argv(root, "--rate", "2")) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {root / 'out'} was imported at 1 per second; its targets and split.json are rewritten at --rate "
        "2, and a detector trained on it before expects 1: train it again"]
    assert main(argv(root, "--rate", "2")) == 0
    assert capsys.readouterr().err == ""  # the same rate again: nothing to say


def test_features_at_another_rate_are_not_imported_beside_others(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # split.json holds one rate for every rgb_* of the folder: a second backbone at another rate would silently
    # rewrite the targets and the rate the first one is read at.
    root = write_recordings(tmp_path)
    assert main(argv(root, "--name", "first")) == 0
    capsys.readouterr()
    second = ["import", "--features", str(root / "npy"), "--annotations", str(root / "labels.json"), "--rate", "2",
              "--name", "second", "--out", str(root / "out")]
    err = cli_error(main, second, capsys)
    assert err.startswith(f"error: --rate 2: {root / 'out' / 'split.json'} records 1 per second, the rate of "
                          "rgb_first/ too")


def test_a_recording_with_no_annotation_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_recordings(tmp_path)
    np.save(root / "npy" / "stray.npy", np.zeros((60, 6), dtype=np.float32))
    err = cli_error(main, argv(root), capsys)
    assert "1 feature file with no annotation" in err and "stray" in err
    # Labels of one recipe (tgml captaincook-labels --recordings) beside a folder of six: "annotate them, or move them
    # out" did not say that labels of every file and --scenario import the one recipe from the folder as it is.
    assert "a file annotated under another scenario than --scenario's is left out" in err


def test_a_segment_after_the_features_end_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_recordings(tmp_path)
    np.save(root / "npy" / "rec0.npy", np.zeros((30, 6), dtype=np.float32))  # 30 s, the second step ends at 50 s
    err = cli_error(main, argv(root), capsys)
    assert "'rec0' ends at 50 s, after the video (30.00 s long)" in err
    assert f"{root / 'npy' / 'rec0.npy'} has 30 vectors, 30.00 s at --rate 1; is that the rate it was written" in err


def test_an_out_folder_of_other_files_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_recordings(tmp_path)
    (root / "out").mkdir()
    (root / "out" / "report.pdf").write_bytes(b"%PDF")
    err = cli_error(main, argv(root), capsys)
    assert err == (f"error: --out {root / 'out'}: holds other files than a feature folder's (report.pdf) and no "
                   "split.json, so it is no feature folder to resume; give a new or empty folder")
    assert [p.name for p in (root / "out").iterdir()] == ["report.pdf"]


def test_importing_again_into_the_same_folder_keeps_its_split(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # Run again without --test-videos, the import drew a new split and refused its own folder.
    root = write_recordings(tmp_path)
    assert main(argv(root, "--test-videos", "rec4")) == 0
    assert main(argv(root)) == 0
    data = load_feature_dataset(root / "out", training_config_of_folder(root / "out").features)
    assert [v.name for v in data.test] == ["rec4"]
    err = cli_error(main, argv(root, "--test-videos", "rec3"), capsys)
    assert "--test-videos rec3 holds out rec3, but" in err and "holds out rec4" in err
    # The folder's test recording gone from the files: no advice to leave out options that were not given.
    (root / "npy" / "rec4.npy").unlink()
    labels = json.loads((root / "labels.json").read_text())
    del labels["annotations"]["rec4"]
    (root / "labels.json").write_text(json.dumps(labels))
    err = cli_error(main, argv(root), capsys)
    assert "test videos rec4 of the folder's split are no longer annotated" in err
    assert err.endswith(": write to a new --out, or delete the split file to draw a new split")


@pytest.mark.parametrize(("extra", "what"), [(["--rate", "0"], "--rate"), (["--name", "../x"], '--name "../x"')])
def test_a_bad_rate_or_name_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                                       what: str) -> None:
    root = write_recordings(tmp_path)
    assert what in cli_error(main, argv(root, *extra), capsys)


def test_annotated_recordings_without_features_are_counted_not_imported(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = write_recordings(tmp_path)
    (root / "npy" / "rec0.npy").unlink()
    assert main(argv(root, "--test-videos", "rec1")) == 0
    out = capsys.readouterr().out
    assert "4 recordings imported" in out and "1 annotated recording has no feature file (rec0)" in out


def test_recordings_of_several_scenarios_name_the_folders_scenarios(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # A public dataset's annotation file holds many scenarios: the line names those of the folder's recordings, not
    # all of the file's, and --scenario picks one (the others counted, not imported).
    root = write_recordings(tmp_path)
    labels = json.loads((root / "labels.json").read_text())
    labels["taxonomy"] |= {"shelf": STEPS, "kite": STEPS}
    labels["annotations"]["rec4"]["scenario"] = "shelf"
    labels["annotations"]["kite_1"] = labels["annotations"]["rec3"] | {"scenario": "kite", "recording_id": "kite_1"}
    (root / "labels.json").write_text(json.dumps(labels))
    err = cli_error(main, argv(root), capsys)
    assert err == (f"error: --features {root / 'npy'}: its recordings are of 2 scenarios of {root / 'labels.json'} "
                   "(shelf: 1, tent: 4 files); choose one with --scenario")
    # A misspelt one is named with the file's scenarios, and before the warning about the file's segments (it came
    # after that long line).
    segments = labels["annotations"]["rec1"]["segments"]
    segments[1]["start_time"] = segments[0]["start_time"]
    (root / "labels.json").write_text(json.dumps(labels))
    line = cli_error(main, argv(root, "--scenario", "tnet"), capsys)
    assert "scenario 'tnet': not one of the 3 known (kite, shelf, tent)" in line
    assert main(argv(root, "--scenario", "tent", "--test-videos", "rec1")) == 0
    assert "1 feature file is of recordings of another scenario (rec4)" in capsys.readouterr().out


def test_the_file_warning_counts_the_scenario_the_feature_files_chose(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # The README's import (no --scenario) of one recipe's files with `tgml captaincook-labels`' file of six recipes
    # warned "labels.json: 65 segments in 33 videos overlap an earlier one (10_16, 10_18, 10_24 and 30 more ...)",
    # videos of recipes not imported; given --scenario, or in stream-detect eval, the same file said "(scenario
    # pinwheels): 15 segments in 10 videos".
    root = write_recordings(tmp_path, count=3)
    labels = json.loads((root / "labels.json").read_text())
    labels["taxonomy"] |= {"kite": STEPS}
    kite = labels["annotations"]["rec0"] | {"scenario": "kite", "segments": [segment(0, 5.0, 25.0),
                                                                             segment(1, 20.0, 50.0)]}
    labels["annotations"] |= {f"kite_{k}": kite | {"recording_id": f"kite_{k}"} for k in range(4)}
    labels["annotations"]["rec1"]["segments"][1]["start_time"] = 24.0  # one overlap among the imported ones
    (root / "labels.json").write_text(json.dumps(labels))
    assert main(argv(root, "--test-videos", "rec2")) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {root / 'labels.json'} (scenario tent): 1 segment in 1 video overlaps an earlier "
                        "one (rec1; accepted; where frames are labelled, the segment that started last owns the "
                        "overlap)"]


def test_a_test_recording_of_another_scenario_is_named_as_such_not_as_a_typo(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]
                                                                             ) -> None:
    # On CaptainCook4D's folder, --scenario scrambledeggs --test-videos 16_23,10_46 (10_46: a pinwheels recording) was
    # answered "'10_46' is not an imported recording ...; did you mean '16_44'?": another recording, and no word of why.
    root = write_recordings(tmp_path)
    labels = json.loads((root / "labels.json").read_text())
    labels["taxonomy"] |= {"shelf": STEPS}
    labels["annotations"]["rec4"]["scenario"] = "shelf"
    (root / "labels.json").write_text(json.dumps(labels))
    err = cli_error(main, argv(root, "--scenario", "tent", "--test-videos", "rec1,rec4"), capsys)
    assert err == (f"error: --test-videos: 'rec4' is a recording of scenario 'shelf' in {root / 'labels.json'}, not of "
                   "'tent': name test recordings of the scenario imported")
    assert not (root / "out").exists()


def test_float64_features_beyond_float32s_range_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # They were imported as inf without a word (the folder then refused by recognition-train, far from the cause).
    root = write_recordings(tmp_path)
    features = np.load(root / "npy" / "rec2.npy").astype(np.float64)
    features[9, 0] = -1e40
    np.save(root / "npy" / "rec2.npy", features)
    err = cli_error(main, argv(root), capsys)
    assert err.startswith(f"error: {root / 'npy' / 'rec2.npy'}: the features hold values beyond float32's range")
    assert "first in row 9" in err and not (root / "out").exists()


def test_files_far_longer_than_their_steps_at_the_rate_given_are_warned_of(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # Features written 5 a second imported at --rate 1: five times too long, 80 % of each file background; a file
    # too short at its rate is refused, this direction was accepted without a word.
    root = write_recordings(tmp_path, rows=300)
    assert main(argv(root)) == 0
    printed = capsys.readouterr()
    assert printed.err.splitlines() == ["warning: at --rate 1 the feature files last a median 6.0 times as long as "
                                        "their recordings' annotated steps (every step would end early in its file, "
                                        "the rest labelled background): is that the rate they were written at?"]
    (tmp_path / "right").mkdir()
    assert main(argv(write_recordings(tmp_path / "right"))) == 0
    assert capsys.readouterr().err == ""  # 60 s for steps ending at 50 s


def test_a_config_naming_another_feature_folder_says_which_the_folder_holds(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # The live config reads rgb_imported: an import under --name foo wrote rgb_foo, and the error named only the first.
    root = write_recordings(tmp_path)
    assert main(argv(root, "--name", "foo")) == 0
    live = Path(__file__).parents[2] / "configs" / "miniroad-captaincook4d-live.toml"
    line = cli_error(train_main, ["--features", str(root / "out"), "--config", str(live),
                                  "--out", str(tmp_path / "d.pt")], capsys)
    assert line == (f"error: {root / 'out'}: RGB feature folder 'rgb_imported' not found (the folder holds rgb_foo; "
                    "the name is --config's [features] rgb or flow, or without one rgb_ and split.json's "
                    "feature_extractor)")


@pytest.mark.parametrize(
    ("argv", "line"),
    [(["imprt", "--features", "npy/"], "error: recognition-features: command 'imprt': not the one known (import); "
                                       "did you mean 'import'?"),
     (["--features", "npy/", "--annotations", "l.json", "--rate", "1", "--out", "f/"],
      "error: recognition-features: --features, --rate: options of recognition-features import (your own feature "
      "files: recognition-features import --features DIR ...); extraction from videos takes --videos")],
)
def test_a_mistyped_or_forgotten_import_is_named(argv: list[str], line: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # Both were answered "the following arguments are required: --videos", naming neither the word nor import.
    assert cli_error(main, argv, capsys) == line


def test_a_mistyped_test_recording_is_named_with_the_one_meant(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # A new user's --test-videos video_3 for video_03 was answered "'video_3' is not an imported recording": which
    # one it should have been, and which names there are, had to be found in the folder.
    root = write_recordings(tmp_path)
    line = cli_error(main, argv(root, "--test-videos", "rec04"), capsys)
    assert line.startswith("error: --test-videos: 'rec04' is not an imported recording") and "'rec4'?" in line
    line = cli_error(main, argv(root, "--test-videos", "zzz"), capsys)
    assert line.endswith("(they are: rec0, rec1, rec2, rec3, rec4)")


def test_two_files_of_one_recording_are_refused_not_one_dropped(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # rec0.npy beside rec0.NPY (the suffix is read in any case): one of them was read, the other dropped unsaid.
    root = write_recordings(tmp_path)
    np.save(root / "npy" / "rec0.tmp.npy", np.zeros((3, 6), np.float16))
    (root / "npy" / "rec0.tmp.npy").rename(root / "npy" / "rec0.NPY")
    assert cli_error(main, argv(root), capsys) == (f"error: --features {root / 'npy'}: two feature files of video "
                                                   "'rec0' (rec0.NPY and rec0.npy); keep one")


def test_a_config_rate_other_than_the_folders_is_refused_not_overruled(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # [features] fps = 5 on a folder imported at 1 a second: the checkpoint said 1, and the config's 5 went unsaid.
    root = write_recordings(tmp_path)
    assert main(argv(root, "--test-videos", "rec4")) == 0
    config = tmp_path / "five.toml"
    config.write_text('[features]\nrgb = "rgb_imported"\nextractor = "imported"\nfps = 5.0\n')
    err = cli_error(train_main, ["--features", str(root / "out"), "--config", str(config), "--out",
                                 str(tmp_path / "d.pt"), "--epochs", "1", "--quiet"], capsys)
    assert err == (f"error: {root / 'out' / 'split.json'}: records 1 feature vectors a second, the training config's "
                   "[features] fps 5: leave fps out of the config (a folder's rate is the one its features were "
                   "written at)")
    assert not (tmp_path / "d.pt").exists()


def files_of(folder: Path) -> dict[Path, bytes]:
    """Every file under ``folder`` and its bytes: a folder left as it was compares equal."""
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_rate_the_files_do_not_fit_is_refused_over_a_folder_imported_at_one_they_fit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Files written 2 a second, imported at 2, then again at --rate 1: two warnings, and the folder's targets and
    # split.json were rewritten at 1 (a detector trained on it no longer matched it; a later training ran at 1).
    root = write_recordings(tmp_path, rows=120, rate=2)
    assert main(argv(root, "--rate", "2", "--test-videos", "rec4")) == 0
    out = root / "out"
    before = files_of(out)
    err = cli_error(main, argv(root), capsys)
    assert err == (f"error: --rate 1: {out} was imported at 2 per second, which the feature files fit, and at --rate 1 "
                   "they last a median 2.4 times as long as their recordings' annotated steps (every step would end "
                   f"early in its file): import at --rate 2, or into another --out ({out} is left as it was)")
    assert files_of(out) == before
    # Into a new folder the same rate is only doubtful: warned of, as documented.
    assert main(argv(root, "--out", str(root / "new"), "--test-videos", "rec4")) == 0
    assert "warning: at --rate 1 the feature files last a median 2.4 times" in capsys.readouterr().err


def test_a_folder_at_a_rate_the_files_do_not_fit_either_is_warned_of_as_a_new_one_and_the_right_rate_is_taken(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Files written 5 a second, imported at 2 (warned of), then at 1: the folder's rate does not fit them either, so
    # the lengths prove nothing against 1 (a long idle tail would look the same): warned of, as into a new folder (it
    # was refused with no way through). At 5, the rate that fits, the folder is rewritten with the warning that says so.
    root = write_recordings(tmp_path, rows=300, rate=5)
    assert main(argv(root, "--rate", "2", "--test-videos", "rec4")) == 0
    assert "median 3.0 times" in capsys.readouterr().err
    assert main(argv(root)) == 0
    assert "median 6.0 times" in capsys.readouterr().err
    assert main(argv(root, "--rate", "5")) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {root / 'out'} was imported at 1 per second; its targets and split.json are rewritten at --rate "
        "5, and a detector trained on it before expects 1: train it again"]


def test_recordings_of_the_folders_split_without_a_feature_file_are_said_to_have_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A test recording whose .npy is missing from --features was said to be "no longer annotated" in labels.json,
    # which still annotated it.
    root = write_recordings(tmp_path)
    assert main(argv(root, "--test-videos", "rec3,rec4")) == 0
    out, npy, labels = root / "out", root / "npy", root / "labels.json"
    before = files_of(out)
    (npy / "rec4.npy").rename(root / "rec4.npy")
    err = cli_error(main, argv(root), capsys)
    assert err == (f"error: {out / 'split.json'}: test videos rec4 of the folder's split have no feature file in "
                   f"--features {npy}: write to a new --out, or delete the split file to draw a new split")
    # Each recording's own cause: rec3 is no longer annotated, rec4 has no file.
    annotations = json.loads(labels.read_text())
    del annotations["annotations"]["rec3"]
    labels.write_text(json.dumps(annotations))
    (npy / "rec3.npy").unlink()
    err = cli_error(main, argv(root), capsys)
    assert err == (f"error: {out / 'split.json'}: test videos rec3 of the folder's split are no longer annotated in "
                   f"{labels}, and rec4 have no feature file in --features {npy}: write to a new --out, or delete the "
                   "split file to draw a new split")
    assert files_of(out) == before
    # A training recording without its file: named as such too, and --test-videos keeps the split (the others train).
    (root / "again").mkdir()
    root = write_recordings(root / "again")
    assert main(argv(root, "--test-videos", "rec4")) == 0
    before = files_of(root / "out")
    (root / "npy" / "rec1.npy").unlink()
    err = cli_error(main, argv(root), capsys)
    assert err == (f"error: {root / 'out' / 'split.json'}: this run's videos differ from those it splits (rec1 have "
                   f"no feature file in --features {root / 'npy'}); name the test videos with --test-videos rec4 to "
                   "keep its test videos (the other videos train), or write to a new --out")
    assert files_of(root / "out") == before
    assert main(argv(root, "--test-videos", "rec4")) == 0


def test_files_saved_transposed_are_said_to_be_not_taken_for_another_rate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (D, T) files were refused as too short at --rate ("is that the rate it was written at?"): their lengths were
    # read before their widths.
    root = write_recordings(tmp_path)
    npy = root / "npy"
    for v in range(5):  # every file transposed: one row count (the width), widths that differ (the lengths)
        np.save(npy / f"rec{v}.npy", np.zeros((60 + v, 6), dtype=np.float32).T)
    err = cli_error(main, argv(root), capsys)
    assert err == (f"error: --features {npy}: every file has 6 rows and their widths differ (60, 61, 62, 63, 64): "
                   "saved transposed? (rows, width) = (6, 60) in rec0.npy; a file is (time, width), one row per "
                   "vector")
    (root / "one").mkdir()
    npy = write_recordings(root / "one") / "npy"
    np.save(npy / "rec2.npy", np.load(npy / "rec2.npy").T)  # one file transposed: its rows are the others' width
    err = cli_error(main, argv(root / "one"), capsys)
    assert err == (f"error: {npy / 'rec2.npy'}: the features are 60 wide, those of the folder's other files 6: saved "
                   "transposed? (rows, width) = (6, 60); a file is (time, width), one row per vector")
    assert not (root / "out").exists() and not (root / "one" / "out").exists()
    # Two files, one transposed: either could be the odd one (the correct file was named "saved transposed?").
    (root / "two").mkdir()
    npy = write_recordings(root / "two") / "npy"
    for v in range(2, 5):
        (npy / f"rec{v}.npy").unlink()
    np.save(npy / "rec1.npy", np.load(npy / "rec1.npy").T)
    err = cli_error(main, [*argv(root / "two"), "--test-videos", "rec0"], capsys)
    assert err == (f"error: {npy / 'rec0.npy'} is 6 wide and {npy / 'rec1.npy'} 60: every file must come from the "
                   "same backbone (one saved transposed?); a file is (time, width), one row per vector")


def test_a_file_of_another_width_is_named_from_its_header_before_any_data_is_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Every file was read whole before the widths were compared (722 MB to refuse a 200 MB file of another backbone).
    # Here the odd file's data is cut short after its header: never read, its width is what is said.
    root = write_recordings(tmp_path)
    odd = root / "npy" / "rec2.npy"
    np.save(odd, np.zeros((100_000, 9), dtype=np.float32))
    with odd.open("r+b") as handle:
        handle.truncate(4096)
    err = cli_error(main, argv(root), capsys)
    assert err == (f"error: {odd}: the features are 9 wide, those of the folder's other files 6: every file must come "
                   "from the same backbone")
    assert not (root / "out").exists()


def test_a_file_name_in_another_unicode_form_than_its_annotation_is_said_to_be_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # macOS may write "vidéo" decomposed (NFD); the annotation holds it composed. The error named a file that looks
    # annotated, with no hint why it is not.
    root = write_recordings(tmp_path)
    labels = json.loads((root / "labels.json").read_text())
    labels["annotations"]["vid\u00e9o"] = labels["annotations"].pop("rec0") | {"recording_id": "vid\u00e9o"}
    (root / "labels.json").write_text(json.dumps(labels))
    decomposed = "vide\u0301o"
    (root / "npy" / "rec0.npy").rename(root / "npy" / f"{decomposed}.npy")
    err = cli_error(main, argv(root), capsys)
    assert err.endswith(f"; {decomposed} differs from an annotated name only in its Unicode form (a file name "
                        "written decomposed, NFD, as macOS may write it): rename the files as the annotation file "
                        "spells them")


def test_another_backbones_features_into_the_same_folder_are_refused(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # A 64-wide import into a 768-wide folder exited 0 and left the old files of the recordings it did not rewrite
    # beside the new ones: eval failed later on a file this import never touched.
    root = write_recordings(tmp_path)
    assert main(argv(root, "--test-videos", "rec4")) == 0
    before = {p: p.read_bytes() for p in (root / "out").rglob("*") if p.is_file()}
    (tmp_path / "other").mkdir()
    other = write_recordings(tmp_path / "other", count=3, width=8)
    err = cli_error(main, argv(other, "--out", str(root / "out"), "--test-videos", "rec2"), capsys)
    assert err == (f"error: --out {root / 'out'}: its rgb_imported/ holds features 6 wide from an earlier import, and "
                   f"those of --features {other / 'npy'} are 8: one folder, one backbone; import into another --out")
    assert {p: p.read_bytes() for p in (root / "out").rglob("*") if p.is_file()} == before


def test_an_import_under_another_name_says_that_training_now_reads_its_features(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Into a folder of another extractor's features (recognition-features', or an import under another --name): both
    # are kept, and split.json now names the new ones, which recognition-train reads by default. It said nothing.
    root = write_recordings(tmp_path)
    assert main(argv(root, "--test-videos", "rec4", "--name", "mine")) == 0
    assert "note:" not in capsys.readouterr().err
    assert main(argv(root, "--test-videos", "rec4")) == 0
    err = capsys.readouterr().err
    assert err.strip() == (f"note: {root / 'out'} held mine features (rgb_mine/, kept); its split.json now names "
                           "imported: recognition-train without --config trains on rgb_imported/")
    assert (root / "out" / "rgb_mine").is_dir() and (root / "out" / "rgb_imported").is_dir()


def test_entries_that_are_not_feature_files_are_named_in_a_note(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # rec0's features saved as .npz beside the .npy files: counted as a recording without a feature file, unsaid why.
    root = write_recordings(tmp_path)
    npy = root / "npy"
    np.savez(npy / "rec0.npz", features=np.load(npy / "rec0.npy"))
    (npy / "rec0.npy").unlink()
    (npy / "old").mkdir()
    assert main(argv(root, "--test-videos", "rec4")) == 0
    printed = capsys.readouterr()
    assert "not imported: 1 annotated recording has no feature file (rec0)" in printed.out.splitlines()
    # On stderr, as every command's notes: stdout is the summary a script may read.
    assert printed.err.splitlines()[-1] == (f"note: --features {npy}: 2 entries are not <video>.npy and not read: "
                                            "old/, rec0.npz")


def test_files_none_of_which_is_of_the_scenario_asked_for_are_refused(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # Widths are now checked over the scenario's recordings before this check: over none, still this one line.
    root = write_recordings(tmp_path)
    labels = json.loads((root / "labels.json").read_text())
    labels["taxonomy"]["shelf"] = STEPS  # a recording of it annotated, with no feature file
    labels["annotations"]["shelf_1"] = labels["annotations"]["rec0"] | {"scenario": "shelf", "recording_id": "shelf_1"}
    (root / "labels.json").write_text(json.dumps(labels))
    err = cli_error(main, argv(root, "--scenario", "shelf"), capsys)
    assert err == f"error: --features {root / 'npy'}: no feature file of a recording of scenario 'shelf'"


def import_config(root: Path, rate: float = 1.0) -> feature_import.ImportConfig:
    """The run `argv` describes, as the import function takes it (``rec4`` held out)."""
    return feature_import.ImportConfig(str(root / "npy"), str(root / "labels.json"), rate, str(root / "out"),
                                       test_videos=("rec4",))


def test_an_import_holds_one_feature_file_in_memory_not_the_whole_folder(tmp_path: Path) -> None:
    # Every file was read during the check and held until the folder was written: a 332 MB folder needed 369 MB, and
    # tens of GB of another backbone's features could not be imported at all. Six 4 MiB float32 files (1024 vectors of
    # 1024 at 20 a second, 51.2 s for steps ending at 50 s); numpy's allocations are traced by tracemalloc.
    root = write_recordings(tmp_path, count=6, rows=1024, width=1024, rate=20, dtype=np.float32)
    one = 1024 * 1024 * 4
    config = import_config(root, rate=20)
    report = feature_import.ImportReport(root / "out")
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        plan = feature_import.plan_import(config, report)
        held, checking = tracemalloc.get_traced_memory()
        assert held - before < one  # what the check keeps for the write: the files' shapes, not their values (6 * one)
        assert checking - before < 2.5 * one  # and what it reads meanwhile: one file at a time
        tracemalloc.reset_peak()
        feature_import.write_import(config, report, plan)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - held < 2.5 * one  # the write reads one file at a time: not the six together (6 * one)
    assert (report.rows, report.width, len(report.train), report.test) == (6 * 1024, 1024, 5, ["rec4"])
    for v in range(6):  # and every file written whole, as it was read
        written = np.load(root / "out" / "rgb_imported" / f"rec{v}.npy")
        assert np.array_equal(written, np.load(root / "npy" / f"rec{v}.npy"))
        assert np.load(root / "out" / "target_perframe" / f"rec{v}.npy").shape == (1024, 3)


def test_a_file_changed_between_the_check_and_the_write_is_refused_naming_it(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]
                                                                             ) -> None:
    # The check keeps each file's shape, the write reads the file again: a file rewritten in between (another program,
    # a copy still running) would be written beside targets of its old length, a folder recognition-train misreads.
    root = write_recordings(tmp_path)
    npy, out = root / "npy", root / "out"
    config = import_config(root)
    plan = feature_import.plan_import(config, feature_import.ImportReport(out))
    np.save(npy / "rec3.npy", np.zeros((60, 7), dtype=np.float32))  # another width, valid on its own
    with pytest.raises(InputError) as refused:
        feature_import.write_import(config, feature_import.ImportReport(out), plan)
    assert str(refused.value) == (f"{npy / 'rec3.npy'}: the features are now (rows, width) = (60, 7), (60, 6) when "
                                  "checked: the file changed while it was imported, and "
                                  f"{out} is half-written (3 of 5 recordings written before it, split.json not yet "
                                  "written): run the import again")
    assert sorted(p.name for p in (out / "rgb_imported").iterdir()) == ["rec0.npy", "rec1.npy", "rec2.npy"]
    assert not (out / "split.json").exists()
    # A file now invalid (NaN), the first written: its own fault is said, and that nothing was written.
    (tmp_path / "nan").mkdir()
    root = write_recordings(tmp_path / "nan")
    config = import_config(root)
    plan = feature_import.plan_import(config, feature_import.ImportReport(root / "out"))
    bad = np.load(root / "npy" / "rec0.npy")
    bad[3, 2] = np.nan
    np.save(root / "npy" / "rec0.npy", bad)
    with pytest.raises(InputError) as refused:
        feature_import.write_import(config, feature_import.ImportReport(root / "out"), plan)
    assert str(refused.value) == (f"{root / 'npy' / 'rec0.npy'}: the features hold NaN or infinite values (first in "
                                  "row 3); it read whole when checked, and nothing was written into "
                                  f"{root / 'out'}: run the import again")
    assert not any((root / "out").rglob("*.npy"))
    # Run again as the error says, the file fixed: the whole folder is written.
    bad[3, 2] = 0
    np.save(root / "npy" / "rec0.npy", bad)
    assert main(argv(root, "--test-videos", "rec4")) == 0
    assert "5 recordings imported" in capsys.readouterr().out


def test_a_misspelt_scenario_or_feature_folder_is_refused_with_the_name_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The scenario was refused as the file's, the option unnamed; a config's feature folder with the folder's list.
    root = write_recordings(tmp_path)
    line = cli_error(main, argv(root, "--scenario", "tnet"), capsys)
    assert line == (f"error: --scenario: {root / 'labels.json'}: scenario 'tnet': not the one known (tent); "
                    "did you mean 'tent'?")
    assert main(argv(root, "--name", "importd")) == 0  # rgb_importd: the live config reads rgb_imported
    live = Path(__file__).parents[2] / "configs" / "miniroad-captaincook4d-live.toml"
    line = cli_error(train_main, ["--features", str(root / "out"), "--config", str(live),
                                  "--out", str(tmp_path / "d.pt")], capsys)
    assert line.endswith("feature_extractor); did you mean 'rgb_importd'?")
