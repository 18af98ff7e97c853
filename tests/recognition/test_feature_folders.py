"""MiniROAD feature folders: what is read, and one-line errors naming the video at fault."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphs.common.errors import InputError
from recognition.feature_folders import (
    FeatureConfig,
    VideoFeatures,
    copy_file_name,
    load_feature_dataset,
    stored_features_fault,
    window_index,
)

SYNTH = FeatureConfig(rgb="rgb_synth")


def make_windows(
    videos: tuple[VideoFeatures, ...], window: int, rng: np.random.Generator | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Every training window of some videos at once, as the trainer cuts them batch by batch.

    Returns:
        ``(features (N, W, D), targets (N, W, C))``.
    """
    index, valid = window_index([len(v.features) for v in videos], window, rng)
    feats = np.concatenate([v.features for v in videos])
    targs = np.concatenate([v.targets for v in videos])
    return feats[index] * valid[..., None], targs[index] * valid[..., None]  # (N, W, D), (N, W, C): padding 0


def test_reads_split_classes_and_metadata(feature_folder: Path) -> None:
    data = load_feature_dataset(feature_folder, SYNTH)
    assert [v.name for v in data.test] == ["video_12", "video_13", "video_14", "video_15"]
    assert (data.input_dim, data.num_classes) == (24, 5)
    assert data.class_step_ids == (None, 10, 11, 12, 13)
    assert (data.feature_extractor, data.fps) == ("synthetic", 4.0)


def test_a_folder_with_two_extractors_records_the_one_whose_features_are_read(feature_folder: Path) -> None:
    # split.json names the extractor written last; a config that reads another one's folder trains on that one.
    (feature_folder / "rgb_synth").rename(feature_folder / "rgb_synthetic-grid")
    grid = FeatureConfig(rgb="rgb_synthetic-grid", extractor="synthetic-grid")
    assert load_feature_dataset(feature_folder, grid).feature_extractor == "synthetic-grid"
    # A folder named otherwise (MiniROAD's rgb_kinetics_resnet50 with split.json's name) keeps the split's name.
    other = FeatureConfig(rgb="rgb_synthetic-grid", extractor="something-else")
    assert load_feature_dataset(feature_folder, other).feature_extractor == "synthetic"


def test_flow_features_are_concatenated_after_rgb(feature_folder: Path) -> None:
    (feature_folder / "flow_synth").mkdir()
    for path in (feature_folder / "rgb_synth").iterdir():
        np.save(feature_folder / "flow_synth" / path.name, np.ones((240, 3), np.float32))
    data = load_feature_dataset(feature_folder, FeatureConfig(rgb="rgb_synth", flow="flow_synth"))
    assert data.input_dim == 27
    assert np.all(data.train[0].features[:, 24:] == 1)


def test_missing_targets_name_the_video(feature_folder: Path) -> None:
    (feature_folder / "target_perframe" / "video_03.npy").unlink()
    with pytest.raises(InputError, match=r"video 'video_03': targets file .* is missing"):
        load_feature_dataset(feature_folder, SYNTH)


def test_nan_features_name_the_video_and_frame(feature_folder: Path) -> None:
    path = feature_folder / "rgb_synth" / "video_14.npy"
    feats = np.load(path)
    feats[17, 2] = np.nan
    np.save(path, feats)
    with pytest.raises(InputError) as info:
        load_feature_dataset(feature_folder, SYNTH)
    assert str(info.value) == f"video 'video_14': {path}: features contain NaN or infinity (first at frame 17)"


def test_feature_files_of_no_width_are_named(feature_folder: Path) -> None:
    # Every file (rows, 0): the error came from the model's config, "MiniROADConfig.input_dim = 0", naming no file.
    split = json.loads((feature_folder / "split.json").read_text())
    for name in split["train"] + split["test"]:
        np.save(feature_folder / "rgb_synth" / f"{name}.npy", np.zeros((240, 0), dtype=np.float32))
    path = feature_folder / "rgb_synth" / f"{split['train'][0]}.npy"
    with pytest.raises(InputError) as info:
        load_feature_dataset(feature_folder, SYNTH)
    assert str(info.value) == (f"video {split['train'][0]!r}: RGB features in {path} has shape (240, 0), expected "
                               "(frames, width) with both > 0")


def test_targets_of_a_single_class_are_named(feature_folder: Path) -> None:
    # The error came from the model's config, "MiniROADConfig.num_classes = 1", naming neither file nor folder.
    split = json.loads((feature_folder / "split.json").read_text())
    for name in split["train"] + split["test"]:
        np.save(feature_folder / "target_perframe" / f"{name}.npy", np.ones((240, 1), dtype=np.float32))
    (feature_folder / "split.json").write_text(json.dumps({**split, "class_names": ["a"], "class_step_ids": [1]}))
    with pytest.raises(InputError) as info:
        load_feature_dataset(feature_folder, SYNTH)
    assert str(info.value) == (f"{feature_folder / 'target_perframe'}: the targets have 1 column; a detector tells "
                               "at least 2 classes apart (background and a key-step, or two key-steps)")


def test_a_file_of_another_width_is_named_even_when_read_first(feature_folder: Path) -> None:
    split = json.loads((feature_folder / "split.json").read_text())
    path = feature_folder / "rgb_synth" / f"{split['train'][0]}.npy"
    np.save(path, np.load(path)[:, :5])
    with pytest.raises(InputError) as info:
        load_feature_dataset(feature_folder, SYNTH)
    assert str(info.value) == (f"video {split['train'][0]!r}: {path}: feature width 5, the folder's other videos "
                               "have 24")


def _with_one_copy(folder: Path) -> dict[str, list[str]]:
    """The folder's split with one augmented copy of each training video (its features, shifted)."""
    split = json.loads((folder / "split.json").read_text())
    split["augment_copies"] = 1
    (folder / "split.json").write_text(json.dumps(split))
    for name in split["train"]:
        np.save(folder / "rgb_synth" / copy_file_name(name, 1), np.load(folder / "rgb_synth" / f"{name}.npy") + 0.1)
    return split


def test_a_video_of_another_width_is_named_not_its_augmented_copy(feature_folder: Path) -> None:
    # The copy, whole, was blamed: "augmented copy video_03.aug1.npy has shape (39, 1280), the video's RGB features
    # have 39 frames".
    name = _with_one_copy(feature_folder)["train"][3]
    path = feature_folder / "rgb_synth" / f"{name}.npy"
    np.save(path, np.load(path)[:, :20])
    with pytest.raises(InputError) as info:
        load_feature_dataset(feature_folder, SYNTH)
    assert str(info.value) == f"video {name!r}: {path}: feature width 20, the folder's other videos have 24"


@pytest.mark.parametrize("flow", [False, True], ids=["rgb", "rgb-and-flow"])
def test_an_augmented_copy_narrower_than_its_video_is_refused(feature_folder: Path, flow: bool) -> None:
    # It was padded with the original's last columns and trained on without a word; with flow the copy was only
    # required to be narrower than RGB and flow together.
    name = _with_one_copy(feature_folder)["train"][3]
    config = SYNTH
    if flow:
        (feature_folder / "flow_synth").mkdir()
        for video in (feature_folder / "rgb_synth").glob("video_*.npy"):
            if ".aug" not in video.name:
                np.save(feature_folder / "flow_synth" / video.name, np.ones((240, 3), np.float32))
        config = FeatureConfig(rgb="rgb_synth", flow="flow_synth")
    assert load_feature_dataset(feature_folder, config).train  # copies as wide as the video's RGB: read
    path = feature_folder / "rgb_synth" / copy_file_name(name, 1)
    np.save(path, np.load(path)[:, :20])
    with pytest.raises(InputError) as info:
        load_feature_dataset(feature_folder, config)
    assert str(info.value) == (f"video {name!r}: augmented copy {path} has shape (240, 20), the video's RGB features "
                               "(240, 24)")


def test_an_augmented_copy_of_one_dimension_is_named_in_a_sentence_that_agrees(feature_folder: Path) -> None:
    # "the augmented copy 1 have shape (240,)": the file kind was a singular noun in a plural sentence.
    name = _with_one_copy(feature_folder)["train"][3]
    path = feature_folder / "rgb_synth" / copy_file_name(name, 1)
    np.save(path, np.load(path)[:, 0])
    with pytest.raises(InputError) as info:
        load_feature_dataset(feature_folder, SYNTH)
    assert str(info.value) == (f"video {name!r}: {path}: the features of augmented copy 1 have shape (240,), "
                               "expected 2 dimensions")


def test_length_mismatch_and_bad_target_rows(feature_folder: Path) -> None:
    np.save(feature_folder / "target_perframe" / "video_01.npy", np.eye(5, dtype=np.float32)[np.zeros(200, int)])
    with pytest.raises(InputError, match="video 'video_01': frame counts disagree .rgb 240, targets 200. in "
                       f"{feature_folder / 'rgb_synth' / 'video_01.npy'}, "
                       f"{feature_folder / 'target_perframe' / 'video_01.npy'}$"):
        load_feature_dataset(feature_folder, SYNTH)
    np.save(feature_folder / "target_perframe" / "video_01.npy", np.zeros((240, 5), np.float32))
    with pytest.raises(InputError, match="video 'video_01': .*target_perframe/video_01.npy: target row 0 is not a "
                                         "class"):
        load_feature_dataset(feature_folder, SYNTH)


def test_split_file_problems(feature_folder: Path) -> None:
    split = json.loads((feature_folder / "split.json").read_text())
    split["test"] = ["video_99"]
    (feature_folder / "split.json").write_text(json.dumps(split))
    with pytest.raises(InputError, match="video 'video_99': RGB features file .* is missing"):
        load_feature_dataset(feature_folder, SYNTH)
    (feature_folder / "split.json").unlink()
    with pytest.raises(InputError, match="split file not found"):
        load_feature_dataset(feature_folder, SYNTH)


def test_windows_cover_every_frame_once_and_pad_with_ignored_rows(feature_folder: Path) -> None:
    data = load_feature_dataset(feature_folder, SYNTH)
    videos = data.train[:3]
    x, y = make_windows(videos, 100)  # 240 frames -> 100, 100, 40 (+60 padding) per video
    assert x.shape == (9, 100, 24) and y.shape == (9, 100, 5)
    assert y.sum() == pytest.approx(3 * 240)
    np.testing.assert_array_equal(x[2, :40], videos[0].features[200:])
    assert not x[2, 40:].any() and not y[2, 40:].any()
    x_r, y_r = make_windows(videos, 100, np.random.default_rng(0))
    assert y_r.sum() == pytest.approx(3 * 240)  # random offsets move borders, never drop frames


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ([0.2, 0.2, 0.2, 0.2, 0.2], "target row 7 holds 0.2; targets must be one-hot 0/1 rows"),  # probabilities
        ([0, 0, 5, 0, 0], "target row 7 holds 5; targets must be one-hot 0/1 rows"),  # counts / scaled
        ([0, 0, np.nan, 1, 0], "target row 7 holds nan"),
    ],
)
def test_target_rows_that_are_not_zeros_and_ones_are_refused(
    feature_folder: Path, row: list[float], message: str
) -> None:
    # They used to be divided by their sum and trained on as soft labels (and counted as positives of every
    # class in the test mAP) without a word.
    path = feature_folder / "target_perframe" / "video_02.npy"
    targets = np.load(path)
    targets[7] = row
    np.save(path, targets)
    with pytest.raises(InputError, match=f"video 'video_02': {path}: {message}"):
        load_feature_dataset(feature_folder, SYNTH)


def test_multi_hot_rows_of_overlapping_classes_are_split_evenly_and_bool_targets_read(feature_folder: Path) -> None:
    path = feature_folder / "target_perframe" / "video_00.npy"
    targets = np.load(path).astype(bool)
    targets[3] = [False, True, True, False, False]  # two overlapping classes (THUMOS: CliffDiving is also Diving)
    np.save(path, targets)
    video = load_feature_dataset(feature_folder, SYNTH).train[0]
    np.testing.assert_array_equal(video.targets[3], [0, 0.5, 0.5, 0, 0])


def test_complex_features_are_refused_not_truncated(feature_folder: Path) -> None:
    path = feature_folder / "rgb_synth" / "video_01.npy"
    np.save(path, np.load(path).astype(np.complex64))
    with pytest.raises(InputError, match="video 'video_01': .*video_01.npy: the RGB features have dtype complex64"):
        load_feature_dataset(feature_folder, SYNTH)


def test_integer_features_are_refused_as_the_import_and_a_live_feature_file_refuse_them(feature_folder: Path) -> None:
    # They trained a detector whose own kind of file stream-detect --features then refused ("expected floats").
    path = feature_folder / "rgb_synth" / "video_01.npy"
    np.save(path, np.load(path).astype(np.int16))
    with pytest.raises(InputError, match=r"video 'video_01': .*video_01.npy: the RGB features have dtype int16, "
                                         r"expected floats \(float16, float32, float64, ...\)$"):
        load_feature_dataset(feature_folder, SYNTH)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"class_step_ids": [None, 10, 11, 11, 13]}, "'class_step_ids' gives step id 11 to two classes"),
        ({"fps": 1e999}, "invalid JSON: number 1e999 is out of the float range"),  # read_json refuses it now
        # was refused later as "[model] motion_lag_s = 2: 2000000000 frames ...", an option nobody gave
        ({"fps": 1e9}, r"field 'fps' = 1000000000.0 must be a number > 0 and at most 1000"),
        ({"class_names": "abcde"}, "field 'class_names' must be a list of names"),
        ({"class_names": ["bg", 1, 2, 3, 4]}, "field 'class_names' must be a list of names"),
        # were refused by save_detector, after the whole training run
        ({"class_names": ["bg", "a", "", "c", "d"]}, r"field 'class_names'\[2\] is empty"),
        ({"class_names": ["bg", "a", "b", "\u200b ", "d"]}, r"field 'class_names'\[3\] holds no visible character"),
    ],
)
def test_split_fields_the_checkpoint_needs_are_checked_before_training(
    feature_folder: Path, changes: dict, message: str
) -> None:
    # Duplicate step ids and an infinite fps were only refused by save_detector, after the whole training run.
    split = json.loads((feature_folder / "split.json").read_text())
    (feature_folder / "split.json").write_text(json.dumps({**split, **changes}).replace("Infinity", "1e999"))
    with pytest.raises(InputError, match=rf"split\.json: {message}"):
        load_feature_dataset(feature_folder, SYNTH)


def test_infinite_fps_in_the_config_is_refused() -> None:
    with pytest.raises(InputError, match=r"FeatureConfig.fps = inf: expected a number in \(0, 1000\]"):
        FeatureConfig(fps=float("inf"))
    # 5000 trained a detector that save_detector then refused (a checkpoint's fps is at most 1000)
    with pytest.raises(InputError, match=r"FeatureConfig.fps = 5000: expected a number in \(0, 1000\]"):
        FeatureConfig(fps=5000)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_stored_file_with_a_non_finite_value_cannot_be_kept(tmp_path: Path, bad: float) -> None:
    # A resumed extraction kept such a file as "already there"; recognition-train refused the folder later. The file
    # is larger than a block of the check, and the value sits in its last row.
    path = tmp_path / "v.npy"
    features = np.ones((5000, 1024), np.float32)
    np.save(path, features)
    assert stored_features_fault(path, 5000) == ""
    features[-1, -1] = bad
    np.save(path, features)
    assert stored_features_fault(path, 5000) == "non-finite values"


def test_a_stored_file_cut_short_or_of_another_length_cannot_be_kept(tmp_path: Path) -> None:
    path = tmp_path / "v.npy"
    np.save(path, np.ones((30, 8), np.float32))
    assert stored_features_fault(path, 31) == "30 rows, not the 31 recorded"
    path.write_bytes(path.read_bytes()[:-8])
    assert stored_features_fault(path, 30) == "damaged or cut short"
    assert stored_features_fault(tmp_path / "gone.npy", 30) == "damaged or cut short"


def test_the_exclude_videos_command_to_copy_is_quoted_for_the_shell() -> None:
    # "--exclude-videos my video 1,b" broke when pasted: the shell split it at the space.
    from recognition.feature_folders import test_split_line  # imported here: at the top pytest would collect it

    line = test_split_line(["my video 1", "b"], Path("features"), "recordings")
    assert line.endswith("tgml train --exclude-videos 'b,my video 1')")
    assert test_split_line(["run2"], Path("f")).endswith("tgml train --exclude-videos run2)")
