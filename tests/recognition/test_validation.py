"""The validation split carved from the training videos: early stopping, the curve, what the checkpoint keeps."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from graphs.common.errors import InputError
from recognition.checkpoint import load_detector
from recognition.feature_folders import choose_validation_videos, copy_file_name, load_feature_dataset
from recognition.recognition_train_cli import main
from recognition.train import (
    load_detector_training_config,
    predict_video,
    train_detector,
    training_data,
    validation_scores,
)
from tests.cli_errors import cli_error
from tests.recognition.conftest import write_feature_folder


def _argv(features: Path, config: Path, out: Path, *more: str) -> list[str]:
    return ["--features", str(features), "--config", str(config), "--out", str(out), "--quiet", *more]


def test_training_prints_the_curve_keeps_the_best_epoch_and_records_it(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, plot = tmp_path / "d.pt", tmp_path / "curve.png"
    assert main(_argv(feature_folder, small_config, out, "--plot", str(plot))) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "Learning curve" in printed and "val mAP" in printed and "<- kept" in printed
    assert "one validation video" not in captured.err  # two of them: the calibration can leave one out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    model, checkpoint = load_detector(out)
    info = checkpoint.info
    curve = info["curve"]
    assert [e["epoch"] for e in curve] == list(range(1, 9))
    # A fifth of the 12 training videos (2), drawn with the seed: the same on every run, never a test video.
    assert info["validation_videos"] == list(choose_validation_videos(info["train_videos"], 0.2, seed=0))
    assert len(info["validation_videos"]) == 2 and not set(info["validation_videos"]) & set(info["test_videos"])
    best = max(curve, key=lambda e: (e["val_map"], -e["val_loss"]))
    assert info["kept_epoch"] == best["epoch"] and info["keep_epoch"] == "map"
    # The saved weights are the kept epoch's: they reproduce its validation scores.
    data = load_feature_dataset(feature_folder, load_detector_training_config(small_config).features)
    val = tuple(v for v in data.train if v.name in info["validation_videos"])
    loss, val_map = validation_scores([predict_video(model, v.features) for v in val], val, (0,))
    assert (loss, val_map) == pytest.approx((best["val_loss"], best["val_map"]), rel=1e-4)


def test_the_kept_models_validation_probabilities_are_handed_over(feature_folder: Path, small_config: Path) -> None:
    config = replace(load_detector_training_config(small_config), epochs=2, val_videos=("video_03", "video_08"))
    data = load_feature_dataset(feature_folder, config.features)
    outcome = train_detector(data, config, progress=False)
    assert list(outcome.validation) == ["video_03", "video_08"]
    for name, (probs, targets) in outcome.validation.items():
        video = next(v for v in data.train if v.name == name)
        np.testing.assert_array_equal(targets, video.targets)
        np.testing.assert_allclose(probs, predict_video(outcome.model, video.features), atol=1e-6)
        classes = targets.shape[1]  # the class probabilities, then the done states of the done head
        assert probs.shape == (len(targets), 2 * classes)
        np.testing.assert_allclose(probs[:, :classes].sum(axis=1), 1.0, atol=1e-5)
        assert ((probs[:, classes:] >= 0) & (probs[:, classes:] <= 1)).all()


def test_a_validation_video_the_detector_overflows_on_is_named_with_its_largest_value(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1e38 is a finite float32 (the file is read), but the detector's arithmetic on it is not: the run ended with
    # "segmenter: frame 100 has empty or non-finite probabilities" once trained, naming neither the file nor the cause.
    validation = feature_folder / "rgb_synth" / "video_07.npy"  # one of the two the seed draws
    features = np.load(validation)
    features[100, 3] = 1e38
    np.save(validation, features)
    err = cli_error(main, _argv(feature_folder, small_config, tmp_path / "d.pt"), capsys)
    assert err == (f"error: {validation}: the detector's output is not finite from frame 100 on (float32 arithmetic "
                   "overflowed in the detector; the features reach 1e+38 in absolute value: rescale them, e.g. divide "
                   "each by its standard deviation)")
    assert not (tmp_path / "d.pt").exists()


def test_keeping_by_loss_keeps_the_lowest_validation_loss(feature_folder: Path, small_config: Path) -> None:
    config = replace(load_detector_training_config(small_config), epochs=3, keep_epoch="loss")
    outcome = train_detector(load_feature_dataset(feature_folder, config.features), config, progress=False)
    assert outcome.kept_epoch == min(outcome.curve, key=lambda e: e.val_loss).epoch


def test_one_training_video_cannot_be_split_unless_validation_is_turned_off(
    tmp_path: Path, small_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_feature_folder(tmp_path / "one", n_train=1, n_test=1)
    err = cli_error(main, _argv(folder, small_config, tmp_path / "d.pt"), capsys)
    assert "the validation split would be empty" in err and "--val-fraction 0" in err
    assert not (tmp_path / "d.pt").exists()
    assert main(_argv(folder, small_config, tmp_path / "d.pt", "--val-fraction", "0", "--epochs", "2")) == 0
    _, checkpoint = load_detector(tmp_path / "d.pt")
    assert checkpoint.info["validation_videos"] == [] and checkpoint.info["kept_epoch"] == 2
    assert checkpoint.info["curve"][0]["val_map"] is None


def test_a_validation_split_of_one_video_showing_one_step_is_warned_of(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One validation video of several steps is judged by leaving one of its steps out (no warning); a video of one
    # key-step leaves nothing out: its curves come out at their flattest, and the default probabilistic checker can
    # stay silent on a mistake the detector sees plainly (P(skipped) 0.37 < 0.5 on a user's six imported
    # recordings). Said before training.
    argv = _argv(feature_folder, small_config, tmp_path / "d.pt", "--val-videos", "video_03", "--epochs", "1")
    assert main(argv) == 0
    assert "one validation video" not in capsys.readouterr().err
    folder = tmp_path / "one_step"
    shutil.copytree(feature_folder, folder)
    targets = folder / "target_perframe" / "video_03.npy"
    labels = np.load(targets).argmax(axis=1)
    np.save(targets, np.eye(5, dtype=np.float32)[np.where(labels > 0, 1, 0)])  # every step frame is step_1
    assert main(_argv(folder, small_config, tmp_path / "d2.pt", "--val-videos", "video_03", "--epochs", "1")) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "one validation video" in x)
    assert line.startswith("warning: ") and "video_03" in line and "one key-step" in line
    assert "--val-videos" in line and "--checker binary" in line


def test_one_validation_video_of_multi_hot_rows_is_warned_of_by_the_steps_the_calibration_reads(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Overlapping classes (every step frame also step_1, as every CliffDiving frame is also Diving): the calibration
    # reads each frame's largest target, step_1 alone, and fits the flattest curve; the warning counted every marked
    # column, saw several steps and said nothing.
    folder = tmp_path / "overlap"
    shutil.copytree(feature_folder, folder)
    targets = folder / "target_perframe" / "video_03.npy"
    hot = np.load(targets)
    hot[hot[:, 1:].any(axis=1), 1] = 1.0  # step_1 marked on every step frame, beside the step itself
    np.save(targets, hot)
    assert (hot[:, 1:].sum(axis=0) > 0).sum() >= 2  # the file marks several steps
    assert main(_argv(folder, small_config, tmp_path / "d.pt", "--val-videos", "video_03", "--epochs", "1")) == 0
    line = next((x for x in capsys.readouterr().err.splitlines() if "one validation video" in x), "")
    assert line.startswith("warning: --val-videos video_03: ") and "one key-step" in line


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["--val-videos", "video_13"], "'video_13' is a test video"),
        (["--val-videos", "nosuch"], "'nosuch' is not a training video"),
        (["--val-videos", "video_3"], "'video_3' is not a training video of the feature folder; did you mean "
                                      "'video_03'?"),
        (["--val-fraction", "1.5"], "--val-fraction"),
        (["--val-fraction", "0.99"], "no video would be left for training"),
    ],
)
def test_bad_validation_splits_are_one_line_and_exit_2(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    more: list[str], message: str,
) -> None:
    err = cli_error(main, _argv(feature_folder, small_config, tmp_path / "d.pt", *more), capsys)
    assert message in err


def test_the_validation_draw_depends_on_the_seed_only() -> None:
    names = [f"v{i}" for i in range(14)]
    drawn = choose_validation_videos(names, 0.2, seed=3)
    assert len(drawn) == 3 and drawn == choose_validation_videos(list(reversed(names)), 0.2, seed=3)[::-1]
    assert choose_validation_videos(names, 0.0) == ()
    assert choose_validation_videos(names[:2], 0.1) != ()  # at least one video
    with pytest.raises(InputError, match="named twice"):
        choose_validation_videos(names, 0.2, named=("v1", "v1"))


def test_the_val_videos_hint_never_points_at_a_video_already_named() -> None:
    with pytest.raises(InputError, match="did you mean 'vid_3'") as raised:
        choose_validation_videos(["video_03", "vid_3"], 0.2, named=("video_03", "video_3"))
    assert "'video_03'?" not in str(raised.value)


def test_augmented_copies_are_read_for_training_videos_and_must_be_whole(
    feature_folder: Path, small_config: Path
) -> None:
    split = json.loads((feature_folder / "split.json").read_text())
    split["augment_copies"] = 1
    (feature_folder / "split.json").write_text(json.dumps(split))
    config = load_detector_training_config(small_config)
    for name in split["train"]:
        feats = np.load(feature_folder / "rgb_synth" / f"{name}.npy")
        np.save(feature_folder / "rgb_synth" / copy_file_name(name, 1), feats + 0.1)
    data = load_feature_dataset(feature_folder, config.features)
    assert all(len(v.copies) == 1 for v in data.train) and all(not v.copies for v in data.test)
    np.testing.assert_allclose(data.train[0].copies[0], data.train[0].features + 0.1, atol=1e-6)
    outcome = train_detector(data, replace(config, epochs=2), progress=False)
    assert np.isfinite(outcome.losses).all()
    np.save(feature_folder / "rgb_synth" / copy_file_name(split["train"][4], 1), np.zeros((3, 24)))
    with pytest.raises(InputError, match=r"video 'video_04': augmented copy .*video_04\.aug1\.npy has shape \(3, 24\)"):
        load_feature_dataset(feature_folder, config.features)


def test_every_augmentation_trains(feature_folder: Path, small_config: Path) -> None:
    config = replace(load_detector_training_config(small_config), epochs=2, class_balance=0.5, background_weight=2.0,
                     boundary_smoothing=1.0, feature_noise=0.5, speed_change=0.25, background_mix=0.3)
    data = load_feature_dataset(feature_folder, config.features)
    outcome = train_detector(data, config, progress=False)
    assert np.isfinite(outcome.losses).all() and outcome.test_map > 0.5
    prepared = training_data(data.train, config, data.fps, (0,))  # the loss weights the options ask for
    assert prepared.weights is not None
    weights, counts = prepared.weights.numpy(), prepared.hard.sum(axis=0)
    np.testing.assert_allclose(weights[0] / weights[1], 2.0 * (counts[0] / counts[1]) ** -0.5, rtol=1e-5)


def test_augmentation_settings_are_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[augment]\nbackground_mix = 1.5\n")
    with pytest.raises(InputError, match="background_mix = 1.5"):
        load_detector_training_config(bad)
    bad.write_text("[train]\nbackground_weight = 0\n")
    with pytest.raises(InputError, match=r"background_weight = 0: expected a number in \(0, 100\]"):
        load_detector_training_config(bad)
    bad.write_text("[train]\nkeep_epoch = 'best'\n")
    with pytest.raises(InputError, match='keep_epoch = "best"'):
        load_detector_training_config(bad)


def test_refit_trains_again_on_every_training_video_for_the_kept_epochs(
    feature_folder: Path, small_config: Path
) -> None:
    config = replace(load_detector_training_config(small_config), epochs=3, refit=True)
    data = load_feature_dataset(feature_folder, config.features)
    early = train_detector(data, replace(config, refit=False), progress=False)
    refit = train_detector(data, config, progress=False)
    assert refit.refit and not early.refit and refit.kept_epoch == early.kept_epoch
    # The validation probabilities handed on are still those of the model that never saw the validation videos.
    for name, (probs, _) in refit.validation.items():
        np.testing.assert_allclose(probs, early.validation[name][0], atol=1e-6)
    video = data.test[0].features
    assert not np.allclose(predict_video(refit.model, video), predict_video(early.model, video), atol=1e-4)


def test_plotting_without_the_plot_extra_is_refused_before_training(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an environment without the extra sees: ImportError
    err = cli_error(main, _argv(feature_folder, small_config, tmp_path / "d.pt", "--plot", str(tmp_path / "c.png")),
                    capsys)
    assert "needs matplotlib, the optional 'plot' extra" in err
    assert not (tmp_path / "d.pt").exists()


@pytest.mark.parametrize("score", [1.0, 0.0])
def test_a_validation_map_at_either_end_of_its_axis_is_drawn(score: float, tmp_path: Path) -> None:
    # A mAP of 100 % every epoch (the walkthrough's shelf) lay on the axes' top edge, under the frame: the legend
    # named a green curve the picture did not show.
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    import cv2

    from recognition.learning_curve import EpochScores, plot_curve

    curve = [EpochScores(e, 2.0 / e, 1.0 / e, score) for e in range(1, 21)]
    image = cv2.imread(str(plot_curve(curve, 20, tmp_path / "curve.png")))
    assert image is not None
    drawn = image[..., ::-1].astype(int)  # BGR -> RGB
    green = np.abs(drawn - np.array([44, 160, 44])).sum(axis=2) < 60  # matplotlib's tab:green
    legend_rows = drawn.shape[0] // 10  # the legend's own green sample sits above the axes
    assert green[legend_rows:].sum() > 200
