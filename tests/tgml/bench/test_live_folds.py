"""`tgml bench-live`'s folds on folders other than the shipped one: what each fold learns its graphs from."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from graphs.annotations import load_annotations
from graphs.common.errors import InputError
from recognition.feature_folders import choose_validation_videos
from tgml.bench.captaincook import ANNOTATIONS
from tgml.bench.live.bench import LiveBenchConfig, assign_folds
from tgml.bench.live.detector import LIVE_DETECTOR
from tgml.bench.live.recordings import load_live_data
from tgml.tgml_cli import main


def test_a_fold_whose_test_and_validation_recordings_are_every_graph_recording_still_runs(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Pinwheels' graph is learned from 5 of its 12 shipped recordings; at 2 folds and seed 65, fold 0 tests 4 of them
    # and drew the fifth for validation: its validation graph had nothing to learn from, and the run stopped with
    # "no usable sequence (5 excluded by --exclude-videos)", an option bench-live does not have.
    out = tmp_path / "live.json"
    code: str | int | None  # main's status, or SystemExit's code
    try:
        code = main(["bench-live", "--data", str(data_dir), "--recipes", "pinwheels", "--folds", "2", "--seed", "65",
                     "--epochs", "1", "--live-graph", "learned", "--workers", "1", "--quiet", "--json", str(out)])
    except SystemExit as stopped:  # an error line: said in the failure
        code = stopped.code
    assert code == 0, capsys.readouterr().err
    assert len(json.loads(out.read_text())["recordings"]) == 12


def test_the_validation_draw_trades_a_graph_recording_only_when_none_would_be_left() -> None:
    from tgml.bench.live.bench import spare_graph_recording

    train, learnable = ["g2", "c", "d", "e"], frozenset({"g1", "g2"})
    # The test fold holds g1, validation g2: nothing left to learn the validation graph from, so g2 goes back to
    # fitting and a fitting recording the graph is not learned from (seeded) takes its place.
    traded = spare_graph_recording(("g2", "c"), train, ["g1"], learnable, 3)
    assert len(traded) == 2 and "c" in traded and set(traded) - {"c"} <= {"d", "e"}
    assert traded == spare_graph_recording(("g2", "c"), train, ["g1"], learnable, 3)
    assert list(traded) == [r for r in train if r in traded]  # in training-list order, as the trainer's draw
    # A graph recording left for fitting, none in the validation draw, or none at all: the draw stands.
    assert spare_graph_recording(("g2", "c"), [*train, "g3"], ["g1"], learnable | {"g3"}, 3) == ("g2", "c")
    assert spare_graph_recording(("c",), ["c", "e"], ["g1", "g2"], learnable, 3) == ("c",)
    assert spare_graph_recording(("c",), ["c", "e"], [], frozenset(), 3) == ("c",)


def test_the_shipped_folders_splits_are_the_trainers_draw_as_before(data_dir: Path) -> None:
    from tgml.bench.live.bench import graph_recordings, spare_graph_recording

    # The trade happens only where the run stopped: the published figures' validation recordings stay.
    data = load_live_data(data_dir)
    annotations = load_annotations(data_dir / "captaincook4d" / ANNOTATIONS, check_times=False)
    for seed in (42, 43):
        for recipe in data.recipes:
            recordings = data.of(recipe)
            folds = assign_folds(recordings, 3, seed)
            learnable = graph_recordings(annotations, recipe)
            for fold in range(3):
                train = [r.recording_id for r, f in zip(recordings, folds, strict=True) if f != fold]
                test = [r.recording_id for r, f in zip(recordings, folds, strict=True) if f == fold]
                drawn = choose_validation_videos(train, LIVE_DETECTOR.val_fraction, (), seed, test)
                assert spare_graph_recording(drawn, train, test, learnable, seed) == drawn


def test_a_fold_that_would_test_every_graph_recording_is_refused_before_training(data_dir: Path) -> None:
    from tgml.bench.live.bench import check_graph_folds

    recordings = [SimpleNamespace(recording_id=name) for name in ("g1", "g2", "x", "y")]
    config = LiveBenchConfig(data_dir, folds=2, seed=7)
    with pytest.raises(InputError, match=r"^--folds 2 --seed 7: soup, fold 1 would test every recording its graph "
                                         r"is learned from \(g1, g2\).*give another --seed or --folds$"):
        check_graph_folds("soup", recordings, [1, 1, 0, 0], frozenset({"g1", "g2"}), config)  # type: ignore[arg-type]
    check_graph_folds("soup", recordings, [0, 1, 0, 1], frozenset({"g1", "g2"}), config)  # type: ignore[arg-type]


def test_a_validation_split_named_in_the_settings_is_refused_before_any_fold_trains() -> None:
    # Each fold checked the named split only when it came to train: a name that fold 0 trains on but fold 1 tests
    # stopped the run after fold 0's training, and a misspelt one named --val-videos, no option of bench-live. Each
    # recording is tested in one fold, so no split named once holds for every fold: the settings are refused.
    from dataclasses import replace

    from tgml.bench.live.detector import LiveDetectorSettings

    def config(named: tuple[str, ...] = (), fraction: float = 0.25) -> LiveBenchConfig:
        detector = LiveDetectorSettings()
        detector = replace(detector, train=replace(detector.train, val_videos=named, val_fraction=fraction))
        return LiveBenchConfig(Path("data"), folds=2, detector=detector)

    with pytest.raises(InputError, match=r"^LiveBenchConfig\.detector\.train\.val_videos 12_10: bench-live draws "
                                         "each fold's validation recordings from its training folds"):
        config(("12_10",))
    with pytest.raises(InputError, match=r"^LiveBenchConfig\.detector\.train\.val_fraction 0: must be above 0"):
        config(fraction=0.0)
    config()


def test_a_config_without_a_segmenter_variant_is_refused() -> None:
    with pytest.raises(InputError, match=r"^LiveBenchConfig\.variants: empty"):
        LiveBenchConfig(Path("data"), variants=())
