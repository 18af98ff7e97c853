"""Training MiniROAD end to end on a synthetic feature folder, through the library and `recognition-train`."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from rich.console import Console
from rich.progress import Progress, TaskID

import recognition.train as train_module
from graphs.common import interrupts
from graphs.common.errors import InputError
from graphs.common.interrupts import Interrupted, handling_signals
from recognition.augment import order_positions
from recognition.checkpoint import load_detector
from recognition.feature_folders import VideoFeatures, load_feature_dataset, window_index
from recognition.model import MiniROADConfig
from recognition.recognition_train_cli import main
from recognition.train import (
    DetectorTrainConfig,
    divergence_hint,
    epoch_targets,
    load_detector_training_config,
    predict_video,
    run_training,
    train_detector,
    training_config_of_folder,
    training_data,
)
from streaming.extractors import make_extractor
from tests.cli_errors import cli_error
from tests.recognition.conftest import SMALL_CONFIG
from tests.signal_calls import signal_when_called
from tests.streaming.helpers import write_noise_video


def test_cli_trains_a_detector_that_reaches_the_map_target(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "detector.pt"
    assert main(["--features", str(feature_folder), "--config", str(small_config), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "mAP (background excluded)" in printed.out and "checkpoint written" in printed.out
    # The progress bar goes to stderr, so stdout can be redirected to a clean results file.
    assert "training" in printed.err and "training" not in printed.out
    # The note on the validation rates is a line of its own under their table: as the table's caption it was
    # wrapped and centred to the narrow table, and read as the title of the test-AP table below.
    lines = printed.out.splitlines()
    note = next(i for i, line in enumerate(lines) if "what the probabilistic checker weighs" in line)
    assert lines[note].startswith("these rates are what the probabilistic checker weighs (stream-detect")
    assert lines[note - 1].startswith("└") and "can be trusted" in "".join(lines[:note])
    model, meta = load_detector(out)
    assert meta.info["test_map"] >= 0.9
    assert meta.class_step_ids == (None, 10, 11, 12, 13)
    assert (meta.feature_extractor, meta.fps, meta.config.input_dim) == ("synthetic", 4.0, 24)
    # The saved model is the one that was scored: its causal predictions classify the test frames.
    data = load_feature_dataset(feature_folder, load_detector_training_config(small_config).features)
    video = data.test[0]
    classes = video.targets.shape[1]  # a done head's outputs follow the classes
    accuracy = np.mean(predict_video(model, video.features)[:, :classes].argmax(1) == video.targets.argmax(1))
    assert accuracy > 0.85
    # And the live step gives the same probabilities as the evaluation pass.
    state = model.init_state()
    with torch.inference_mode():
        probs, _ = model.step(torch.from_numpy(video.features[None, :50]), state, return_all=True)
    np.testing.assert_allclose(probs[0].numpy(), predict_video(model, video.features[:50]), atol=1e-5)


class RecordingProgress(Progress):
    """A hidden progress bar that remembers ``(completed, total)`` after every update."""

    def __init__(self) -> None:
        super().__init__(disable=True)
        self.seen: list[tuple[float, float | None]] = []

    def update(self, task_id: TaskID, **changes: object) -> None:
        super().update(task_id, **changes)  # type: ignore[arg-type]
        task = self._tasks[task_id]
        self.seen.append((task.completed, task.total))


def test_progress_bar_advances_once_per_batch_and_ends_at_its_total(feature_folder: Path, small_config: Path) -> None:
    # One window per batch: the random window offsets add several windows per epoch, which the old
    # fixed estimate (windows at offset 0, plus one batch) did not cover, so the bar ran past its total.
    config = replace(load_detector_training_config(small_config), batch_size=1, epochs=2, embed_dim=8, hidden_dim=8)
    bar = RecordingProgress()
    train_detector(load_feature_dataset(feature_folder, config.features), config, progress=bar)
    completed = [c for c, _ in bar.seen]
    assert bar.seen, "training did not use the given progress bar"
    assert all(total is None or c <= total for c, total in bar.seen), "the bar ran past its total"
    assert completed == sorted(completed), "the bar went backwards"
    assert bar.seen[-1][0] == bar.seen[-1][1]


class StoppingProgress(Progress):
    """A hidden progress bar that sends this process a real SIGINT once ``epochs`` epochs' batches are done (and one
    batch more), or at the first batch with ``epochs = 0``."""

    def __init__(self, epochs: int, of: int) -> None:
        super().__init__(disable=True)
        self.epochs, self.of = epochs, of
        self.per_epoch: float | None = None
        self.sent = False

    def update(self, task_id: TaskID, **changes: object) -> None:
        super().update(task_id, **changes)  # type: ignore[arg-type]
        task = self._tasks[task_id]
        if self.per_epoch is None and task.total:
            self.per_epoch = task.total / self.of  # the first estimate: batches of one epoch times the epochs
        if not self.sent and self.per_epoch is not None and task.completed >= self.epochs * self.per_epoch + 1:
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)


def test_a_stopped_run_saves_the_best_epoch_it_trained_then_stops(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ctrl-C threw away every epoch ("no output is left half-written"): hours of training for nothing.
    out = tmp_path / "detector.pt"
    with handling_signals(), pytest.raises(Interrupted):
        run_training(feature_folder, small_config, out, progress=StoppingProgress(2, 40),
                     console=Console(file=io.StringIO()), epochs=40)
    _, meta = load_detector(out)
    trained = meta.info["interrupted"]["epochs_trained"]
    assert meta.info["interrupted"]["epochs"] == 40 and 2 <= trained < 40
    assert len(meta.info["curve"]) == trained and 1 <= meta.info["kept_epoch"] <= trained
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"recognition-train: stopped after {trained} of 40 epochs; {out} holds epoch {meta.info['kept_epoch']} of "
        "those (highest validation mAP)")


@pytest.mark.parametrize("phase", ["evaluate_detector", "calibrate_evidence"])
def test_a_stop_after_the_last_epoch_still_saves_the_detector_then_stops(
    phase: str, feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The scoring and calibration after the last epoch took the whole run with them on a Ctrl-C.
    out = tmp_path / "detector.pt"
    with handling_signals(), pytest.raises(Interrupted), signal_when_called(phase) as signalled:
        run_training(feature_folder, small_config, out, progress=False, console=Console(file=io.StringIO()),
                     epochs=3)
    assert signalled == [phase]
    _, meta = load_detector(out)
    assert meta.info["interrupted"] == {"epochs_trained": 3, "epochs": 3, "during": "scoring"}
    assert meta.evidence is not None  # calibrated whole, though the stop came meanwhile
    err = capsys.readouterr().err.splitlines()
    assert err[-2] == ("recognition-train: stopping after all 3 epochs: finishing the scoring and saving the detector "
                       "(Ctrl-C again to abandon it)")
    assert err[-1].startswith(f"recognition-train: stopped after 3 of 3 epochs; {out} holds epoch ")


def test_a_stop_while_the_detector_is_written_waits_for_the_file_and_keeps_the_whole_run(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A stop inside the save was redone beside the detector the user had, after the save had replaced it.
    out = tmp_path / "detector.pt"
    out.write_bytes(b"")  # nothing to keep: the run goes to --out
    with handling_signals(), pytest.raises(Interrupted), signal_when_called("save_detector") as signalled:
        run_training(feature_folder, small_config, out, progress=False, console=Console(file=io.StringIO()),
                     epochs=3)
    assert signalled == ["save_detector"]
    _, meta = load_detector(out)
    assert "interrupted" not in meta.info and len(meta.info["curve"]) == 3  # the run was complete when it came
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]  # no half file, no stray temporary
    assert capsys.readouterr().err.splitlines()[-1] == (f"recognition-train: stopped as the detector was written; "
                                                        f"{out} holds the whole run")


def test_a_stop_no_handler_held_cuts_the_save_short_and_claims_nothing(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A caller without `handling_signals`: Python's own SIGINT handler raises at once, and the save never ran.
    out = tmp_path / "detector.pt"
    with pytest.raises(KeyboardInterrupt), signal_when_called("save_detector"):
        run_training(feature_folder, small_config, out, progress=False, console=Console(file=io.StringIO()),
                     epochs=3)
    assert not out.exists() and "stopped as the detector was written" not in capsys.readouterr().err


def test_a_second_stop_abandons_the_scoring_and_saves_nothing(
    feature_folder: Path, small_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "detector.pt"
    monkeypatch.setattr(interrupts, "REPEAT_S", 0.0)  # the second Ctrl-C is the user insisting, not a repeat
    with handling_signals(), pytest.raises(Interrupted), signal_when_called("calibrate_evidence") as signalled:
        run_training(feature_folder, small_config, out, progress=StoppingProgress(2, 40),
                     console=Console(file=io.StringIO()), epochs=40)
    assert signalled and not out.exists()


def test_a_stopped_retraining_saves_beside_the_detector_it_had_and_leaves_that_one(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A stop is how a retraining started with the wrong settings is abandoned: the detector the user had is kept.
    out = tmp_path / "detector.pt"
    assert run_training(feature_folder, small_config, out, progress=False, console=Console(file=io.StringIO()),
                        epochs=2) is not None
    had = out.read_bytes()
    with handling_signals(), pytest.raises(Interrupted):
        run_training(feature_folder, small_config, out, progress=StoppingProgress(2, 40),
                     console=Console(file=io.StringIO()), epochs=40)
    assert out.read_bytes() == had
    stopped = tmp_path / "detector.stopped.pt"
    _, meta = load_detector(stopped)
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith("recognition-train: stopping after ") and err[-2].endswith(
        " of 40 epochs: scoring and saving the best epoch so far (Ctrl-C again to abandon it)")
    assert err[-1].startswith(f"recognition-train: stopped after {meta.info['interrupted']['epochs_trained']} of 40 "
                              f"epochs; {stopped} holds epoch ") and err[-1].endswith(" (beside detector.pt, left as "
                                                                                     "it was)")


def test_a_library_caller_is_stopped_by_a_stop_as_by_any_exception(feature_folder: Path, small_config: Path) -> None:
    # train_detector kept every stop for run_training's sake: the live benchmark's folds, which do not save a
    # stopped run, went on with a half-trained detector (and cached it under the fold's key).
    config = load_detector_training_config(small_config)
    data = load_feature_dataset(feature_folder, config.features)
    with handling_signals(), pytest.raises(Interrupted):
        train_detector(data, replace(config, epochs=40), progress=StoppingProgress(2, 40))


def test_a_run_stopped_in_its_first_epoch_writes_nothing(
    feature_folder: Path, small_config: Path, tmp_path: Path
) -> None:
    out = tmp_path / "detector.pt"
    with handling_signals(), pytest.raises(Interrupted):
        run_training(feature_folder, small_config, out, progress=StoppingProgress(0, 40),
                     console=Console(file=io.StringIO()), epochs=40)
    assert not out.exists()


def test_cli_bad_input_is_one_line_and_exit_2(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (feature_folder / "target_perframe" / "video_05.npy").unlink()
    err = cli_error(
        main,
        ["--features", str(feature_folder), "--config", str(small_config), "--out", str(tmp_path / "x.pt")],
        capsys,
    )
    assert err.startswith("error: video 'video_05'")
    assert not (tmp_path / "x.pt").exists()


def test_a_missing_feature_folder_is_named_as_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Without --config it said "no split.json", as if the folder were there but incomplete.
    missing = tmp_path / "nosuch"
    err = cli_error(main, ["--features", f"{missing}/", "--out", str(tmp_path / "x.pt")], capsys)
    assert err == f"error: --features {missing}/: folder not found"
    empty = tmp_path / "empty"
    empty.mkdir()  # a folder, but not one recognition-features wrote
    err = cli_error(main, ["--features", str(empty), "--out", str(tmp_path / "x.pt")], capsys)
    assert err.startswith(f"error: --features {empty}: not a feature folder: no split.json, which "
                          "recognition-features (or recognition-features import) writes")
    # A folder of one's own .npy files, not imported yet, and the rgb_<name>/ of a feature folder were both told to
    # give --config, which reads neither.
    npy = tmp_path / "npy"
    npy.mkdir()
    np.save(npy / "video_01.npy", np.zeros((8, 4), dtype=np.float32))
    err = cli_error(main, ["--features", str(npy), "--out", str(tmp_path / "x.pt")], capsys)
    assert f"it holds .npy files: features of your own are imported first (recognition-features import --features " \
           f"{npy} --annotations FILE --rate N --out FOLDER)" in err and "--config" not in err
    inner = tmp_path / "folder" / "rgb_imported"
    inner.mkdir(parents=True)
    (inner.parent / "split.json").write_text("{}")
    np.save(inner / "video_01.npy", np.zeros((8, 4), dtype=np.float32))
    err = cli_error(main, ["--features", str(inner), "--out", str(tmp_path / "x.pt")], capsys)
    assert err.endswith(f"it is the rgb_imported/ of the feature folder {inner.parent.resolve()}: give --features "
                        f"{inner.parent.resolve()}")
    targets = inner.parent / "target_perframe"  # the labels beside rgb_<name>/: .npy files too, no features to import
    targets.mkdir()
    np.save(targets / "video_01.npy", np.zeros((8, 3), dtype=np.float32))
    err = cli_error(main, ["--features", str(targets), "--out", str(tmp_path / "x.pt")], capsys)
    assert err.endswith(f"it is the target_perframe/ of the feature folder {inner.parent.resolve()}: give --features "
                        f"{inner.parent.resolve()}")
    a_file = tmp_path / "graph.json"  # a path that is there, but a file: "not found" sent users looking for a typo
    a_file.write_text("{}")
    err = cli_error(main, ["--features", str(a_file), "--out", str(tmp_path / "x.pt")], capsys)
    assert err == f"error: --features {a_file}: a file, expected a feature folder"
    loop = tmp_path / "loop"  # there, but a link to itself: "folder not found" was wrong too
    loop.symlink_to(loop)
    err = cli_error(main, ["--features", str(loop), "--out", str(tmp_path / "x.pt")], capsys)
    assert err == f"error: --features {loop}: a link loop"


def test_a_folder_of_videos_is_told_to_extract_features_not_sent_to_another_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The footage generators (tests.procedure_videos, tests.hard_procedure_videos) write split.json beside videos/:
    # `--features footage/videos` was told "it is the videos/ of the feature folder footage: give --features footage",
    # and that one "names no feature_extractor; give --config".
    footage = tmp_path / "footage"
    (footage / "videos").mkdir(parents=True)
    write_noise_video(footage / "videos" / "video_00.mp4", frames=5)
    (footage / "split.json").write_text(json.dumps({"train": ["video_00"], "test": []}))
    extract = (f"extract their features first (recognition-features --videos {footage / 'videos'} --annotations FILE "
               "--out FOLDER), then give --features FOLDER")
    err = cli_error(main, ["--features", str(footage / "videos"), "--out", str(tmp_path / "x.pt")], capsys)
    assert "of the feature folder" not in err and err.endswith(f"it holds videos: {extract}")
    err = cli_error(main, ["--features", str(footage), "--out", str(tmp_path / "x.pt")], capsys)
    assert err == (f"error: --features {footage}: a folder of videos ({footage / 'videos'}), not a feature folder: "
                   f"its split.json names no feature_extractor and it holds no rgb_*/ features; {extract}")
    assert not (tmp_path / "x.pt").exists()


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--config", "c.toml", "--out", "x.pt"], "--features"),
        (["--features", "F", "--config", "c.toml", "--out", "x.pt", "--epochs", "three"], "--epochs"),
    ],
)
def test_usage_mistakes_are_one_line_and_exit_2(
    argv: list[str], names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = cli_error(main, argv, capsys)
    assert err.startswith("error: recognition-train: ") and names in err


def test_config_files_are_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[train]\nepochz = 3\n")
    with pytest.raises(InputError, match=r"bad.toml: \[train\] setting 'epochz': not one of the \d+ known"):
        load_detector_training_config(bad)
    bad.write_text("[train]\nlr = -1.0\n")
    with pytest.raises(InputError, match=r"bad.toml: \[train\] lr = -1.0"):  # the key as written, not the class
        load_detector_training_config(bad)
    bad.write_text("[model]\ndropout = 2.0\n")
    with pytest.raises(InputError, match=r"bad.toml: \[model\] dropout = 2.0: expected a number in \[0, 1\)"):
        load_detector_training_config(bad)
    # Both forms of one setting: the seconds won and the frames were dropped without a word.
    bad.write_text("[train]\nwindow = 32\nwindow_s = 5.0\n")
    with pytest.raises(InputError, match=r"bad.toml: \[train\] gives both window \(frames\) and window_s \(seconds\)"):
        load_detector_training_config(bad)
    bad.write_text("[model]\nmotion_lag = 4\nmotion_lag_s = 2.0\n")
    with pytest.raises(InputError, match=r"bad.toml: \[model\] gives both motion_lag \(frames\) and motion_lag_s"):
        load_detector_training_config(bad)


def test_yaml_configs_are_read(tmp_path: Path) -> None:
    pytest.importorskip("yaml", reason="YAML configs need the optional 'yaml' extra (PyYAML), which is not installed")
    yaml_cfg = tmp_path / "c.yaml"
    yaml_cfg.write_text("features:\n  rgb: rgb_x\ntrain:\n  epochs: 2\n")
    config = load_detector_training_config(yaml_cfg, epochs=5)
    assert (config.features.rgb, config.epochs, config.window) == ("rgb_x", 5, 128)


def test_shipped_configs_load() -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    published = load_detector_training_config(root / "miniroad-thumos.toml")
    assert (published.embed_dim, published.hidden_dim, published.window, published.batch_size) == (2048, 1024, 128, 16)
    assert (published.lr, published.weight_decay, published.epochs) == (1e-4, 0.05, 10)
    # The tiny config is for the live pipeline's built-in extractor: a detector trained with it must be one
    # stream-detect can feed (it named "builtin-tiny", which no extractor answers to).
    tiny = load_detector_training_config(root / "miniroad-tiny.toml").features
    assert make_extractor(tiny.extractor).name == tiny.extractor == "light-v1"
    # The config of the README's walkthrough reads the folder recognition-features writes for its default extractor.
    lite = load_detector_training_config(root / "miniroad-efficientnet-lite0.toml").features
    assert (lite.extractor, lite.rgb) == ("efficientnet-lite0", "rgb_efficientnet-lite0")


def test_the_walkthrough_config_is_what_recognition_train_uses_without_one(tmp_path: Path) -> None:
    # configs/miniroad-efficientnet-lite0.toml writes out the default of a recognition-features folder, to be edited:
    # a change to one that the other does not follow would make the README's two commands train different models.
    (tmp_path / "split.json").write_text(json.dumps({"feature_extractor": "efficientnet-lite0", "fps": 5.0}))
    written = load_detector_training_config(Path(__file__).resolve().parents[2] / "configs" /
                                            "miniroad-efficientnet-lite0.toml")
    assert written == training_config_of_folder(tmp_path)


def test_the_live_benchmarks_config_is_the_detector_tgml_bench_live_trains() -> None:
    # configs/miniroad-captaincook4d-live.toml lets a user train what a fold of tgml bench-live trains; a change to the
    # benchmark's detector that the file did not follow would make a fold's choice replay on another detector.
    from tgml.bench.live.detector import LIVE_DETECTOR

    written = load_detector_training_config(Path(__file__).resolve().parents[2] / "configs" /
                                            "miniroad-captaincook4d-live.toml").at_rate(1.0)
    assert (written.features.extractor, written.features.rgb, written.features.fps) == ("imported", "rgb_imported", 1.0)
    assert replace(written, features=LIVE_DETECTOR.features, window_s=None, motion_lag_s=None) == LIVE_DETECTOR


def test_the_detector_sizes_default_to_the_models_own() -> None:
    # One source per number: the trainer's model sizes are MiniROADConfig's, the published ones.
    trained = DetectorTrainConfig().model_config(input_dim=4096, num_classes=13)
    assert replace(trained, done_head=False) == MiniROADConfig()


def _argv(features: Path, config: Path, out: Path) -> list[str]:
    return ["--features", str(features), "--config", str(config), "--out", str(out), "--quiet"]


def test_an_unwritable_output_path_is_refused_before_training(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Both used to train for the whole run, then die in save_detector with a traceback.
    err = cli_error(main, _argv(feature_folder, small_config, tmp_path), capsys)
    assert err == f"error: --out {tmp_path}: is a folder, expected a file name for the checkpoint"
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    err = cli_error(main, _argv(feature_folder, small_config, tmp_path / "notes.txt" / "sub" / "d.pt"), capsys)
    assert f"{tmp_path / 'notes.txt'} is a file, not a folder" in err
    assert "training" not in capsys.readouterr().err


def test_outputs_over_the_feature_folder_or_each_other_are_refused_before_training(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = feature_folder / "split.json"
    before = split.read_bytes()
    err = cli_error(main, _argv(feature_folder, small_config, split), capsys)
    assert err.startswith(f"error: --out {split}: the checkpoint would overwrite this input file of the run")
    assert split.read_bytes() == before
    out = tmp_path / "d.png"  # a checkpoint named like a picture, and the plot given the same name
    err = cli_error(main, [*_argv(feature_folder, small_config, out), "--plot", str(tmp_path / "." / "d.png")], capsys)
    assert err == f"error: --plot {tmp_path / '.' / 'd.png'}: the same file as --out; choose another name for the plot"
    # A format matplotlib cannot write was found only after training, as a traceback.
    err = cli_error(main, [*_argv(feature_folder, small_config, out), "--plot", str(tmp_path / "curve.npy")], capsys)
    assert err.startswith(f"error: --plot {tmp_path / 'curve.npy'}: matplotlib cannot draw a .npy file")
    assert not out.exists()


def test_an_out_that_names_another_kind_of_file_is_refused_before_training(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --out graph_copy.json exited 0 and replaced a task graph with a checkpoint.
    graph = tmp_path / "graph.json"
    graph.write_text('{"format": "task-graph"}')
    err = cli_error(main, _argv(feature_folder, small_config, graph), capsys)
    assert err == (f"error: --out {graph}: exists and is not a detector checkpoint (a task graph, a label file?); a "
                   "run replaces only a checkpoint: choose another name, or remove the file first")
    assert graph.read_text() == '{"format": "task-graph"}'
    # A checkpoint is replaced, as a retraining does.
    out = tmp_path / "detector.pt"
    assert main(_argv(feature_folder, small_config, out)) == 0
    assert main(_argv(feature_folder, small_config, out)) == 0


def test_a_divergence_on_features_far_from_the_usual_scale_names_the_scale_not_only_the_learning_rate() -> None:
    # Features scaled by 1e30 overflow the first batch at any learning rate; bench-live, which has no lr option,
    # said only "try a smaller [train] lr".
    huge = np.full((4, 3), 1e30, dtype=np.float32)
    assert divergence_hint(huge, 1e-3).startswith("the features reach 1e+30 in absolute value: rescale them")
    assert divergence_hint(np.ones((4, 3), dtype=np.float32), 1e-3) == "try a smaller [train] lr than 0.001"


def test_a_divergence_on_huge_features_names_the_recording_that_holds_them(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "the features reach 1e+31 in absolute value" left the user to search a folder of many files for the one.
    path = feature_folder / "rgb_synth" / "video_03.npy"
    features = np.load(path)
    features[50:] *= np.float32(1e30)
    np.save(path, features)
    config = tmp_path / "one.toml"
    config.write_text(small_config.read_text().replace("epochs = 8", "epochs = 1"))
    err = cli_error(main, _argv(feature_folder, config, tmp_path / "detector.pt"), capsys)
    by_row = np.abs(features).max(axis=1)
    assert err.startswith("error: training diverged: "), err
    assert (f"the features reach {by_row.max():.3g} in absolute value in {path} (vector {int(by_row.argmax())}): "
            "rescale them") in err, err


def test_a_checkpoint_records_the_largest_training_feature_which_files_fed_to_it_are_compared_with(
    feature_folder: Path, small_config: Path, tmp_path: Path
) -> None:
    out = tmp_path / "detector.pt"
    config = tmp_path / "one.toml"
    config.write_text(small_config.read_text().replace("epochs = 8", "epochs = 1"))
    assert main(_argv(feature_folder, config, out)) == 0
    split = json.loads((feature_folder / "split.json").read_text())
    # Over the training split (validation videos included: they chose the kept epoch), not the test videos.
    largest = max(float(np.abs(np.load(feature_folder / "rgb_synth" / f"{name}.npy")).max()) for name in split["train"])
    assert load_detector(out)[1].training_scale() == pytest.approx(largest)


def test_a_diverging_run_is_an_error_and_keeps_the_existing_checkpoint(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # lr = 1e6 made the loss NaN; the NaN weights were saved over the good checkpoint with a "test mAP" printed.
    out = tmp_path / "detector.pt"
    out.write_bytes(b"PK\x03\x04 the previous, good checkpoint")  # a zip archive's start, as torch.save writes
    config = tmp_path / "wild.toml"
    config.write_text(small_config.read_text().replace("lr = 3e-3", "lr = 1e6").replace("epochs = 8", "epochs = 2"))
    err = cli_error(main, _argv(feature_folder, config, out), capsys)
    assert err.startswith("error: training diverged: loss nan at epoch 1") and "lr than 1e+06" in err
    assert out.read_bytes() == b"PK\x03\x04 the previous, good checkpoint"


def test_a_test_split_without_key_step_frames_is_refused_before_training(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The run used to train, then print "test mAP nan%" and save it.
    for video in ("video_12", "video_13", "video_14", "video_15"):
        np.save(feature_folder / "target_perframe" / f"{video}.npy", np.eye(5, dtype=np.float32)[np.zeros(240, int)])
    err = cli_error(main, _argv(feature_folder, small_config, tmp_path / "d.pt"), capsys)
    assert "split.json: no test video has a frame of a key-step class" in err
    assert not (tmp_path / "d.pt").exists()


def test_a_validation_split_without_key_step_frames_is_refused_before_training(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The run used to train every epoch, then fail calibrating the evidence on the validation videos: the hours of
    # training lost, no checkpoint written.
    np.save(feature_folder / "target_perframe" / "video_00.npy", np.eye(5, dtype=np.float32)[np.zeros(240, int)])

    def no_training(*_args: object, **_kwargs: object) -> int:
        raise AssertionError("trained before refusing the validation split")

    monkeypatch.setattr(train_module, "run_epochs", no_training)
    err = cli_error(main, [*_argv(feature_folder, small_config, tmp_path / "d.pt"), "--val-videos", "video_00"], capsys)
    assert err == ("error: --val-videos video_00: no validation video has a frame of a key-step class (video_00), so "
                   "the evidence calibration after training would have nothing to measure; name others with "
                   "--val-videos, or draw others with --seed")
    assert not (tmp_path / "d.pt").exists()


def test_without_a_background_class_every_class_counts_in_the_map(feature_folder: Path, small_config: Path) -> None:
    # class_step_ids without null: class 0 is a key-step like the others, and used to be left out of the mAP.
    split = json.loads((feature_folder / "split.json").read_text())
    split["class_step_ids"] = [9, 10, 11, 12, 13]
    (feature_folder / "split.json").write_text(json.dumps(split))
    config = replace(load_detector_training_config(small_config), epochs=1, embed_dim=8, hidden_dim=8)
    outcome = train_detector(load_feature_dataset(feature_folder, config.features), config, progress=False)
    assert outcome.test_map == pytest.approx(float(np.mean(outcome.class_ap)))


def test_a_window_longer_than_every_video_costs_no_more_than_the_longest_video(
    feature_folder: Path, small_config: Path
) -> None:
    # A window of 10**6 frames used to allocate (N, 10**6) index rows, and batches of that many frames, of
    # padding the loss skips anyway (trailing padding cannot change a causal model's real frames).
    for rng in (None, np.random.default_rng(0)):
        index, valid = window_index([240, 100], 10**6, rng)
        assert index.shape == valid.shape == (2, 240) and valid.sum() == 340
    config = replace(load_detector_training_config(small_config), epochs=1, embed_dim=8, hidden_dim=8, window=10**6)
    outcome = train_detector(load_feature_dataset(feature_folder, config.features), config, progress=False)
    assert np.isfinite(outcome.losses).all()


def test_a_config_that_sets_nothing_is_refused_naming_it(tmp_path: Path) -> None:
    # An empty or cut-short file trained with the defaults, or failed later blaming the features folder.
    (tmp_path / "cut.toml").write_text("# MiniROAD for my procedure\n# [train]\n")
    with pytest.raises(InputError, match=r"cut.toml: sets nothing \(no \[features\], \[model\], \[train\], "
                                         r"\[augment\] table\); leave --config out for the defaults"):
        load_detector_training_config(tmp_path / "cut.toml")


def test_an_epoch_count_no_run_could_finish_is_refused(small_config: Path) -> None:
    # 10**20 epochs was accepted, and recognition-train ran until it was killed.
    with pytest.raises(InputError,
                       match=r"DetectorTrainConfig.epochs = 100000000000000000000: expected an integer in 1\.\.100000"):
        replace(load_detector_training_config(small_config), epochs=10**20)


@pytest.mark.parametrize(("key", "value"), [("embed_dim", 1_000_000_000), ("hidden_dim", 1_000_000)])
def test_a_model_too_wide_to_allocate_is_refused_naming_the_field(
    key: str, value: int, feature_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It ended in torch's "can't allocate memory" traceback, exit status 1.
    huge = tmp_path / "huge.toml"
    huge.write_text(f'[features]\nrgb = "rgb_synth"\n\n[model]\n{key} = {value}\n')
    err = cli_error(main, _argv(feature_folder, huge, tmp_path / "x.pt"), capsys)
    assert err == f"error: {huge}: [model] {key} = {value}: expected an integer in 1..8192"
    assert not (tmp_path / "x.pt").exists()
    huge.write_text(f'[features]\nrgb = "rgb_synth"\n\n[model]\n{key} = 8192\n')
    assert load_detector_training_config(huge).model_config(24, 5).hidden_dim > 0  # the bound itself is taken


def test_a_bad_command_line_override_does_not_blame_the_config_file(
    feature_folder: Path, small_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = cli_error(main, [*_argv(feature_folder, small_config, tmp_path / "d.pt"), "--epochs", "0"], capsys)
    assert err == ("error: recognition-train: argument --epochs: 0: must be an integer >= 1 (see recognition-train "
                   "--help)")


def test_a_recognition_features_folder_trains_without_a_config(feature_folder: Path, tmp_path: Path) -> None:
    # recognition-features names the RGB folder after the extractor it records in split.json.
    (feature_folder / "rgb_synth").rename(feature_folder / "rgb_synthetic")
    out = tmp_path / "d.pt"
    assert main(["--features", str(feature_folder), "--out", str(out), "--epochs", "2", "--quiet"]) == 0
    model, checkpoint = load_detector(out)
    assert checkpoint.feature_extractor == "synthetic" and checkpoint.fps == 4.0
    assert checkpoint.info["train"]["hidden_dim"] == 128  # the small CPU-sized MiniROAD
    # Motion inputs over 2 s and training windows of 12.8 s, in frames at the folder's 4 per second.
    assert (model.config.motion_lag, checkpoint.info["train"]["window"]) == (8, 51)
    # The done evidence looks over 2 s, the detections over the segmenter's confirmation.
    assert checkpoint.evidence is not None
    confirmation = checkpoint.segmenter_config().min_duration  # 0.5 s, or longer as chosen on validation
    assert (checkpoint.evidence.window_s, checkpoint.evidence.detection_window) == (2.0, confirmation)


def test_without_a_config_a_split_file_naming_no_extractor_is_refused(
    feature_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = json.loads((feature_folder / "split.json").read_text())
    del split["feature_extractor"]
    (feature_folder / "split.json").write_text(json.dumps(split))
    err = cli_error(main, ["--features", str(feature_folder), "--out", str(tmp_path / "d.pt")], capsys)
    assert "names no feature_extractor" in err and "--config" in err


def test_a_reordered_videos_done_targets_follow_its_new_order_or_its_recorded_table() -> None:
    # One video: background, step 1 (frames 1-2), step 2 (3-4), step 3 (5-6); reassembled as 3, 1, 2 (a draw
    # of the order shuffle: frame 0 stays first).
    labels = np.array([0, 1, 1, 2, 2, 3, 3])
    video = VideoFeatures("v", np.zeros((7, 2), np.float32), np.eye(4, dtype=np.float32)[labels])
    prepared = training_data((video,), DetectorTrainConfig(copies=False), 5.0, (0,))
    positions = np.array([0, 5, 6, 1, 2, 3, 4])
    shuffled = epoch_targets(prepared, positions, [7], done_head=True)
    scene = epoch_targets(prepared, positions, [7], done_head=True, scene=True)
    assert (shuffled[:, :4] == scene[:, :4]).all()  # the class targets are the frames' own either way
    # Step 1 is done once its run ends in the new order (from frame 5); on the table, once its recorded run
    # ended: the frames of step 3, filmed after it, show it done although they are now played first.
    assert shuffled[:, 4 + 1].tolist() == [0, 0, 0, 0, 0, 1, 1]
    assert scene[:, 4 + 1].tolist() == [0, 1, 1, 0, 0, 1, 1]
    # Step 3, played first, is done from frame 3 in the new order; the table never shows it done (it was filmed
    # last and the video ends with it).
    assert shuffled[:, 4 + 3].tolist() == [0, 0, 0, 1, 1, 1, 1]
    assert scene[:, 4 + 3].tolist() == [0] * 7
    assert order_positions(labels, [7], np.random.default_rng(0), 0.0).tolist() == list(range(7))


def test_shuffled_done_and_the_evidence_window_are_checked() -> None:
    with pytest.raises(InputError, match='shuffled_done = "table": expected one of "order", "scene"'):
        DetectorTrainConfig(shuffled_done="table")
    with pytest.raises(InputError, match=r"evidence_window = 0: expected a number in \(0, 600\] \(seconds\)"):
        DetectorTrainConfig(evidence_window=0)
    with pytest.raises(InputError, match='evidence_done_states = "no": expected true or false'):
        DetectorTrainConfig(evidence_done_states="no")  # type: ignore[arg-type]


@pytest.mark.parametrize(("fps", "window", "lag"), [(5.0, 64, 10), (1.0, 13, 2), (30.0, 384, 60)])
def test_windows_and_lags_in_seconds_become_frames_at_the_folders_rate(fps: float, window: int, lag: int) -> None:
    # A config in seconds means the same time scale at any rate: today's 64-frame window and 10-frame lag at 5 fps.
    config = DetectorTrainConfig(window_s=12.8, motion_lag_s=2.0).at_rate(fps)
    assert (config.window, config.motion_lag) == (window, lag)
    assert DetectorTrainConfig(window=7, motion_lag=3).at_rate(fps) == DetectorTrainConfig(window=7, motion_lag=3)
    assert DetectorTrainConfig(motion_lag_s=0.0).at_rate(fps).motion_lag == 0  # 0 s: no motion inputs
    assert DetectorTrainConfig(motion_lag_s=0.01).at_rate(fps).motion_lag == 1  # a lag is at least one frame


def test_a_lag_in_seconds_longer_than_a_stream_keeps_is_refused_at_the_rate() -> None:
    with pytest.raises(InputError, match="motion_lag_s = 100: 3000 frames at 30 frames a second"):
        DetectorTrainConfig(motion_lag_s=100.0).at_rate(30.0)
    with pytest.raises(InputError, match=r"window_s = -1.0: expected a number in \(0, 3600\] \(seconds; "):
        DetectorTrainConfig(window_s=-1.0)


def test_class_names_with_terminal_escapes_are_shown_as_text_in_the_tables(
    tmp_path: Path, small_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.hostile_text import HOSTILE_NAMES, assert_shown_safely
    from tests.recognition.conftest import write_feature_folder

    folder = write_feature_folder(tmp_path / "f", n_train=3, n_test=2, n_classes=len(HOSTILE_NAMES) + 1, frames=60)
    split = json.loads((folder / "split.json").read_text())
    split["class_names"] = ["background", *HOSTILE_NAMES]
    (folder / "split.json").write_text(json.dumps(split))
    assert main(["--features", str(folder), "--config", str(small_config), "--out", str(tmp_path / "d.pt"),
                 "--epochs", "1", "--quiet"]) == 0
    assert_shown_safely(capsys.readouterr().out)


def test_a_config_extractor_the_checkpoint_would_not_record_is_refused(
    feature_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It trained on split.json's "synthetic" features and recorded "synthetic", while info.train said "nope".
    config = tmp_path / "nope.toml"
    config.write_text(SMALL_CONFIG.replace('rgb = "rgb_synth"', 'rgb = "rgb_synth"\nextractor = "nope"'))
    err = cli_error(main, _argv(feature_folder, config, tmp_path / "d.pt"), capsys)
    assert err == (f'error: {config}: [features] extractor = "nope" disagrees with {feature_folder / "split.json"}\'s '
                   'feature_extractor (synthetic), the extractor of the features read (rgb = "rgb_synth"); leave '
                   'extractor out, or set rgb = "rgb_nope" to read that extractor\'s features')
    assert not (tmp_path / "d.pt").exists()


@pytest.mark.parametrize(("rgb", "extractor"), [("rgb_synth", "synthetic"), ("rgb_synthetic-grid", "synthetic-grid")])
def test_a_config_extractor_the_checkpoint_records_trains(feature_folder: Path, tmp_path: Path, rgb: str,
                                                          extractor: str) -> None:
    # The split file's own extractor; and another extractor's features in the same folder (recognition-features run
    # twice into it: split.json names the one written last), read from rgb_<its name> and recorded as the config says.
    shutil.copytree(feature_folder / "rgb_synth", feature_folder / "rgb_synthetic-grid")
    config = tmp_path / "named.toml"
    config.write_text(SMALL_CONFIG.replace('rgb = "rgb_synth"', f'rgb = "{rgb}"\nextractor = "{extractor}"'))
    out = tmp_path / "d.pt"
    assert main([*_argv(feature_folder, config, out), "--epochs", "1"]) == 0
    assert load_detector(out)[1].feature_extractor == extractor


def _folder_with_copies(tmp_path: Path) -> tuple[Path, dict[str, Any], list[str]]:
    """A feature folder of 2 training videos, each with its one augmented copy, and 1 test video; its split; the
    recognition-train command line that trains on it (small, quiet)."""
    from tests.recognition.conftest import write_feature_folder

    root = write_feature_folder(tmp_path / "features", n_train=2, n_test=1, frames=40)
    split = json.loads((root / "split.json").read_text())
    (root / "split.json").write_text(json.dumps(split | {"augment_copies": 1}))
    for video in split["train"]:
        shutil.copy(root / "rgb_synth" / f"{video}.npy", root / "rgb_synth" / f"{video}.aug1.npy")
    config = tmp_path / "small.toml"
    config.write_text(SMALL_CONFIG)
    # No validation split: of two training videos it would be one, warned of on stderr as these tests' files are.
    return root, split, ["--features", str(root), "--config", str(config), "--out", str(tmp_path / "d.pt"), "--quiet",
                         "--val-fraction", "0"]


def test_a_feature_file_no_video_of_the_split_names_is_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A video's features copied into rgb_<x>/ by hand, split.json left as it was: never trained or tested on, and
    # recognition-train said nothing. A folder's own files (its videos, their augmented copies) are no such file.
    root, _split, argv = _folder_with_copies(tmp_path)
    assert main(argv) in (0, None)
    assert "warning" not in capsys.readouterr().err
    shutil.copy(root / "rgb_synth" / "video_00.npy", root / "rgb_synth" / "video_09.npy")
    assert main(argv) in (0, None)
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {root / 'rgb_synth'}: 1 feature file of no video {root / 'split.json'} names, not read: "
        "video_09.npy (add them to its 'train' or 'test' list to train or test on them)"]


def test_copies_recognition_features_leaves_behind_raise_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # recognition-features writes copies of training videos only and never deletes one: a split drawn again (its
    # split.json deleted, as its own error line advises) that holds out a former training video, or a run with fewer
    # --augment-copies, leaves <video>.aug<k>.npy files it no longer reads. They were named as files "of no video
    # split.json names", to be added to its lists, though their video is in the split and a copy belongs in no list.
    root, split, argv = _folder_with_copies(tmp_path)
    rgb = root / "rgb_synth"
    for video in split["train"]:
        shutil.copy(rgb / f"{video}.npy", rgb / f"{video}.aug2.npy")  # an earlier run with --augment-copies 2
    shutil.copy(rgb / f"{split['test'][0]}.npy", rgb / f"{split['test'][0]}.aug1.npy")  # a training video then
    assert main(argv) in (0, None)
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize(("damage", "message"), [
    ("folder", "is a folder, expected a split file"),
    ("link-loop", "cannot read the split file (Too many levels of symbolic links)"),
    ("list", "expected an object with 'train' and 'test' lists, got a list"),
    ("null", "expected an object with 'train' and 'test' lists, got null"),
])
def test_a_split_file_there_but_damaged_is_named_for_what_it_is(
    damage: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without --config, a split.json that was a folder or a link loop was "no split.json" (not a feature folder),
    # and one holding a list or null "named no feature_extractor", as if one field were missing.
    folder = tmp_path / "features"
    folder.mkdir()
    split = folder / "split.json"
    if damage == "folder":
        split.mkdir()
    elif damage == "link-loop":
        split.symlink_to("split.json")
    else:
        split.write_text("[]" if damage == "list" else "null")
    err = cli_error(main, ["--features", str(folder), "--out", str(tmp_path / "x.pt")], capsys)
    assert err == f"error: {split}: {message}"


def test_a_split_file_of_none_of_a_splits_fields_is_not_sent_to_give_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without --config, a split.json of {} was told it "names no feature_extractor; give --config with a [features]
    # table": given --config, the next try refused its missing 'train'. Its lists are checked first.
    folder = tmp_path / "features"
    folder.mkdir()
    split = folder / "split.json"
    split.write_text("{}")
    err = cli_error(main, ["--features", str(folder), "--out", str(tmp_path / "x.pt")], capsys)
    assert err == f"error: {split}: missing field 'train' (a list of video names)"
