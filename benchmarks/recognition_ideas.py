"""Which ideas make the detector generalise from a few videos: validation and test per-frame mAP, idea by idea.

Usage::

    python benchmarks/recognition_ideas.py --set DIR [--work DIR] [--seeds 3] [--copies 4] [--ideas a,b,...]
        [--json results.json] [--threads 2]

``--set`` is a folder of labelled videos as the hard-footage generator writes it (``videos/``, ``labels.json``,
``split.json`` whose ``test`` list names the held-out videos). Features are extracted once per (extractor, rate) into
``--work`` (resumed when run again): ``efficientnet-lite0-grid`` at 5 fps with ``--copies`` augmented copies of each
training video (its first 1280 values are exactly the ``efficientnet-lite0`` features, so both are measured from one
extraction), and, when an idea needs them, at 10 fps and with ``efficientnet-lite2``.

Each idea is a change of the training settings (or the features) on top of the base recipe, the CPU-sized MiniROAD
``recognition-train`` uses without a config; it is trained with ``--seeds`` seeds. A seed also draws the validation
split (a fifth of the training videos), so the mean validation mAP over seeds is a small cross-validation on the
training videos. Ideas are chosen by that validation mAP only; the test mAP (the held-out videos) is printed beside
it for the record, never to choose.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.options import MAX_SEED_COUNT, threads_option
from graphs.common.settings_files import Bound, bounded_option
from recognition.feature_folders import FeatureConfig, FeatureDataset, choose_validation_videos, load_feature_dataset
from recognition.train import SMALL_CPU_DETECTOR, DetectorTrainConfig, train_detector
from streaming.offline.features import FeatureExtractionConfig, extract_feature_folder

LITE0_DIM = 1280
# Idea -> (features: (extractor, fps, keep only the global average), training-setting changes).
BASE_FEATURES = ("efficientnet-lite0-grid", 5.0, True)
IDEAS: dict[str, tuple[tuple[str, float, bool], dict[str, Any]]] = {
    "last epoch, no validation split (before)": (BASE_FEATURES, {"val_fraction": 0.0, "copies": False}),
    "last epoch (validation held out)": (BASE_FEATURES, {"keep_epoch": "last", "copies": False}),
    "early stopping on validation mAP": (BASE_FEATURES, {"copies": False}),
    "early stopping on validation loss": (BASE_FEATURES, {"keep_epoch": "loss", "copies": False}),
    "+ class-balanced loss (0.5)": (BASE_FEATURES, {"class_balance": 0.5, "copies": False}),
    "+ boundary smoothing 0.4 s": (BASE_FEATURES, {"boundary_smoothing": 0.4, "copies": False}),
    "+ feature noise 0.3": (BASE_FEATURES, {"feature_noise": 0.3, "copies": False}),
    "+ speed change 0.25": (BASE_FEATURES, {"speed_change": 0.25, "copies": False}),
    "+ background mixing 0.3": (BASE_FEATURES, {"background_mix": 0.3, "copies": False}),
    "+ dropout 0.5": (BASE_FEATURES, {"dropout": 0.5, "copies": False}),
    "+ augmented copies": (BASE_FEATURES, {}),
    "+ 2x2 grid features": (("efficientnet-lite0-grid", 5.0, False), {"copies": False}),
    "+ 10 fps": (("efficientnet-lite0-grid", 10.0, True), {"window": 128}),
    "+ efficientnet-lite2": (("efficientnet-lite2", 5.0, False), {}),
    "+ refit on every training video": (BASE_FEATURES, {"refit": True, "copies": False}),
    # Not a setting: whether more videos help, measured on the training videos only (the same validation videos, 3 of
    # the other training videos left out), which is what refit relies on.
    "3 fewer fitting videos": (BASE_FEATURES, {"copies": False, "drop_fitting": 3}),
    # Combinations of what helped on validation.
    "augmented copies + 2x2 grid": (("efficientnet-lite0-grid", 5.0, False), {}),
    "augmented copies + refit": (BASE_FEATURES, {"refit": True}),
    "augmented copies + 2x2 grid + refit": (("efficientnet-lite0-grid", 5.0, False), {"refit": True}),
    "augmented copies + noise + background mixing": (BASE_FEATURES, {"feature_noise": 0.3, "background_mix": 0.3}),
}


class SeedRun(TypedDict):
    """One training run of an idea: its seed and what it measured."""

    seed: int
    val_map: float
    test_map: float
    kept_epoch: int
    seconds: float


class IdeaRow(TypedDict):
    """One idea's runs, as the table prints them and ``--json`` writes them."""

    idea: str
    extractor: str
    fps: float
    changes: dict[str, Any]
    runs: list[SeedRun]


def feature_folder(work: Path, dataset: Path, extractor: str, fps: float, copies: int, threads: int) -> Path:
    """Extract (or resume) one feature folder of the set; the set's ``split.json`` names the test videos."""
    test = json.loads((dataset / "split.json").read_text())["test"]
    out = work / f"{extractor}-{fps:g}fps-{copies}copies"
    config = FeatureExtractionConfig(
        videos=str(dataset / "videos"), annotations=str(dataset / "labels.json"), out=str(out), extractor=extractor,
        fps=fps, test_videos=tuple(test), threads=threads, device="cpu", augment_copies=copies,
    )
    started = time.perf_counter()
    report = extract_feature_folder(config, progress=False)
    print(f"{out.name}: {len(report.extracted)} extracted, {len(report.skipped)} already there "
          f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return out


def global_average_only(data: FeatureDataset) -> FeatureDataset:
    """The ``efficientnet-lite0`` features of an ``efficientnet-lite0-grid`` folder: its first 1280 values."""
    def cut(videos: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(replace(v, features=v.features[:, :LITE0_DIM], copies=tuple(c[:, :LITE0_DIM] for c in v.copies))
                     for v in videos)

    return replace(data, train=cut(data.train), test=cut(data.test), feature_extractor="efficientnet-lite0")


@exit_on_input_error
def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", type=Path, required=True, help="videos/, labels.json, split.json")
    parser.add_argument("--work", type=Path, default=None, help="feature folders (default: SET/features-ideas)")
    parser.add_argument("--seeds", type=bounded_option(Bound(1, MAX_SEED_COUNT)), default=3)
    parser.add_argument("--copies", type=bounded_option(Bound(0, 1000)), default=4,
                        help="augmented copies of each training video")
    parser.add_argument("--ideas", default="", help="comma-separated idea numbers (1-based; default all)")
    parser.add_argument("--threads", type=threads_option, default=os.cpu_count() or 1, help="extraction workers")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    work = args.work or args.set / "features-ideas"
    work.mkdir(parents=True, exist_ok=True)
    names = list(IDEAS)
    chosen = [names[int(k) - 1] for k in args.ideas.split(",")] if args.ideas else names
    torch.set_num_threads(1)
    folders: dict[tuple[str, float], FeatureDataset] = {}
    rows: list[IdeaRow] = []
    for idea in chosen:
        (extractor, fps, cut), changes = IDEAS[idea]
        key = (extractor, fps)
        if key not in folders:
            copies = args.copies if key == BASE_FEATURES[:2] else 0
            folder = feature_folder(work, args.set, extractor, fps, copies, args.threads)
            folders[key] = load_feature_dataset(folder, FeatureConfig(rgb=f"rgb_{extractor}", extractor=extractor))
        data = global_average_only(folders[key]) if cut else folders[key]
        runs: list[SeedRun] = []
        for seed in range(args.seeds):
            settings = SMALL_CPU_DETECTOR | {"seed": seed} | changes
            drop = settings.pop("drop_fitting", 0)
            config = DetectorTrainConfig(features=FeatureConfig(rgb="-", extractor=data.feature_extractor),
                                         **settings)
            seed_data = data
            if drop:
                names = [v.name for v in data.train]
                val_videos = choose_validation_videos(names, config.val_fraction, seed=seed)
                fitting = sorted(set(names) - set(val_videos))
                dropped = set(np.random.default_rng(seed).choice(fitting, drop, replace=False))
                seed_data = replace(data, train=tuple(v for v in data.train if v.name not in dropped))
                config = replace(config, val_videos=val_videos)
            started = time.perf_counter()
            outcome = train_detector(seed_data, config, progress=False)
            kept_val_map = [e.val_map for e in outcome.curve if e.epoch == outcome.kept_epoch][0]
            runs.append({"seed": seed, "val_map": kept_val_map, "test_map": outcome.test_map,
                         "kept_epoch": outcome.kept_epoch, "seconds": time.perf_counter() - started})
        rows.append({"idea": idea, "extractor": extractor, "fps": fps, "changes": changes, "runs": runs})
        val_maps = [r["val_map"] for r in runs if not np.isnan(r["val_map"])]
        print(f"{idea}: val {100 * np.mean(val_maps) if val_maps else float('nan'):.1f} "
              f"test {100 * np.mean([r['test_map'] for r in runs]):.1f}", file=sys.stderr)
    table = Table(title=f"Per-frame mAP (%), mean ± sd over {args.seeds} seeds (validation split drawn per seed)")
    for column in ("idea", "features", "val mAP", "test mAP", "kept epoch"):
        table.add_column(column, justify="left" if column in ("idea", "features") else "right")
    for row in rows:
        val = np.array([r["val_map"] for r in row["runs"]]) * 100
        test = np.array([r["test_map"] for r in row["runs"]]) * 100
        table.add_row(row["idea"], f"{row['extractor']} {row['fps']:g} fps",
                      "n/a" if np.isnan(val).all() else f"{np.nanmean(val):.1f} ± {np.nanstd(val):.1f}",
                      f"{test.mean():.1f} ± {test.std():.1f}",
                      f"{np.mean([r['kept_epoch'] for r in row['runs']]):.0f}")
    table_console(Console()).print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
