"""Training a MiniROAD detector on a feature folder (the published MiniROAD recipe) and scoring it with per-frame mAP.

Recipe (defaults as published): windows of 128 frames, batch 16, AdamW (lr 1e-4, weight decay
0.05), 10 epochs, cross-entropy on per-frame one-hot targets. The test split is scored at the end
by running every test video causally through the detector (the GRU starts from zeros at the
video's first frame, exactly as a live stream would).

Config file (TOML, or YAML with the same keys), e.g. ``configs/miniroad-thumos.toml``::

    [features]
    rgb = "rgb_kinetics_resnet50"
    flow = "flow_kinetics_bninception"      # "" for RGB only
    extractor = "tsn-resnet50"
    fps = 4.0

    [model]
    embed_dim = 2048
    hidden_dim = 1024
    dropout = 0.2

    [train]
    window = 128
    batch_size = 16
    lr = 1e-4
    weight_decay = 0.05
    epochs = 10
    seed = 42
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from graphs.errors import InputError
from graphs.files import check_output, read_json
from graphs.options import SEED_RULE, check_threads, is_seed
from graphs.settings_files import check_tables, field_names, naming_the_file, read_settings
from recognition.checkpoint import save_detector
from recognition.feature_folders import (
    SPLIT_FILE,
    FeatureConfig,
    FeatureDataset,
    VideoFeatures,
    gather_windows,
    load_feature_dataset,
    window_index,
)
from recognition.metrics import frame_map
from recognition.model import MiniROAD, MiniROADConfig


@dataclass(frozen=True)
class DetectorTrainConfig:
    """Everything `train_detector` needs besides the data.

    Attributes:
        features: which feature folders to read.
        embed_dim: embedding width (input width and classes come from the data).
        hidden_dim: GRU hidden size.
        dropout: dropout after the embedding.
        window: training window length in frames.
        batch_size: windows per optimisation step.
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        epochs: passes over the training windows.
        seed: seeds initialisation, window offsets and shuffling.
        threads: torch CPU threads (0 = torch default).
    """

    features: FeatureConfig = field(default_factory=FeatureConfig)
    embed_dim: int = 2048
    hidden_dim: int = 1024
    dropout: float = 0.2
    window: int = 128
    batch_size: int = 16
    lr: float = 1e-4
    weight_decay: float = 0.05
    epochs: int = 10
    seed: int = 42
    threads: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.features, FeatureConfig):
            raise InputError(f"DetectorTrainConfig.features = {self.features!r}: must be a FeatureConfig")
        positive_ints = ("embed_dim", "hidden_dim", "window", "batch_size", "epochs")
        for name in positive_ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"DetectorTrainConfig.{name} = {value!r}: must be an integer >= 1")
        if not is_seed(self.seed):
            raise InputError(f"DetectorTrainConfig.seed = {self.seed!r:.60}: must be {SEED_RULE}")
        check_threads(self.threads, "DetectorTrainConfig.threads", zero_means="torch's default")
        for name, low_ok in (("lr", False), ("weight_decay", True)):
            value = getattr(self, name)
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            if not ok or value < 0 or (value == 0 and not low_ok):
                raise InputError(f"DetectorTrainConfig.{name} = {value!r}: must be a finite number > 0")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, int | float) or not 0 <= self.dropout < 1:
            raise InputError(f"DetectorTrainConfig.dropout = {self.dropout!r}: must be in [0, 1)")

    def model_config(self, input_dim: int, num_classes: int) -> MiniROADConfig:
        """The detector sizes for data of the given width and number of classes."""
        return MiniROADConfig(input_dim, self.embed_dim, self.hidden_dim, num_classes, float(self.dropout))


_MODEL_KEYS = {"embed_dim", "hidden_dim", "dropout"}
_TRAIN_KEYS = {"window", "batch_size", "lr", "weight_decay", "epochs", "seed", "threads"}


def load_detector_training_config(path: str | Path, **overrides: Any) -> DetectorTrainConfig:
    """Read a detector training config (TOML, or YAML with the same sections).

    Args:
        path: the file (``[features]``, ``[model]``, ``[train]`` sections, all optional).
        overrides: fields replaced after reading (e.g. ``epochs`` from the command line); None values ignored.

    Returns:
        The validated config; unknown sections or keys are refused with the file and key named.
    """
    path = Path(path)
    data = read_settings(path)
    check_tables(data, {"features": field_names(FeatureConfig), "model": _MODEL_KEYS, "train": _TRAIN_KEYS}, path)
    with naming_the_file(path):
        features = FeatureConfig(**data.get("features", {}))
        config = DetectorTrainConfig(features=features, **data.get("model", {}), **data.get("train", {}))
    # A bad override (--epochs 0) is not the file's fault: its error names the field and value, not the file.
    changes = {k: v for k, v in overrides.items() if v is not None}
    return replace(config, **changes) if changes else config


# Without --config: a small MiniROAD that trains on one CPU core in seconds to minutes, the sizes of
# configs/miniroad-efficientnet-lite0.toml (a few dozen short videos of one's own procedure).
SMALL_CPU_DETECTOR: dict[str, Any] = {"embed_dim": 128, "hidden_dim": 128, "dropout": 0.2, "window": 64,
                                      "batch_size": 8, "lr": 1e-3, "weight_decay": 0.05, "epochs": 60, "threads": 1}


def training_config_of_folder(features: str | Path, **overrides: Any) -> DetectorTrainConfig:
    """The training config of a feature folder when no file is given: features as its ``split.json`` names them.

    ``recognition-features`` records the extractor and the rate in ``split.json``; the RGB folder is
    ``rgb_<extractor>``. The model and training sizes are `SMALL_CPU_DETECTOR`.

    Args:
        features: the feature folder.
        overrides: fields replaced (``epochs``, ``seed``, ``threads``; None ignored).

    Returns:
        The validated config.
    """
    if not Path(features).is_dir():
        raise InputError(f"--features {features}: folder not found")
    split = Path(features) / SPLIT_FILE
    if not split.is_file():
        raise InputError(f"--features {features}: no {SPLIT_FILE} (give --config to name the folders)")
    raw = read_json(split, "split file")
    extractor = raw.get("feature_extractor") if isinstance(raw, dict) else None
    if not isinstance(extractor, str) or not extractor:
        raise InputError(f"{split}: names no feature_extractor; give --config with a [features] table")
    fps = raw.get("fps", FeatureConfig.fps)
    feature_config = FeatureConfig(rgb=f"rgb_{extractor}", extractor=extractor, fps=fps)
    changes = {k: v for k, v in overrides.items() if v is not None}
    return DetectorTrainConfig(features=feature_config, **(SMALL_CPU_DETECTOR | changes))


@dataclass(frozen=True)
class TrainOutcome:
    """What training produced.

    Attributes:
        model: the trained detector (eval mode).
        test_map: per-frame mAP on the test split, background excluded (0..1).
        class_ap: AP per class on the test split (NaN where the class never occurs).
        losses: mean training loss per epoch.
    """

    model: MiniROAD
    test_map: float
    class_ap: np.ndarray
    losses: tuple[float, ...]


@torch.inference_mode()
def predict_video(model: MiniROAD, features: np.ndarray) -> np.ndarray:
    """Causal per-frame class probabilities of one whole video (GRU from zeros at frame 0).

    Args:
        model: the detector (put in eval mode here).
        features: ``(L, D)``.

    Returns:
        ``(L, C)`` probabilities.
    """
    model.eval()
    x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))[None]  # (1, L, D)
    logits, _ = model(x)
    return torch.softmax(logits[0], dim=-1).numpy()


def evaluate_detector(
    model: MiniROAD, videos: tuple[VideoFeatures, ...], background: tuple[int, ...] = (0,)
) -> tuple[float, np.ndarray]:
    """Per-frame mAP of a detector on videos (all frames pooled).

    Args:
        model: the detector.
        videos: videos with targets.
        background: classes left out of the mean.

    Returns:
        ``(mAP, AP per class)``.
    """
    scores = np.concatenate([predict_video(model, v.features) for v in videos])
    targets = np.concatenate([v.targets for v in videos])
    return frame_map(scores, targets, background)


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}"),
        TimeRemainingColumn(),
        console=Console(stderr=True),  # stdout stays for the results table
        disable=not enabled,
    )


def train_detector(data: FeatureDataset, config: DetectorTrainConfig, progress: bool | Progress = True) -> TrainOutcome:
    """Train MiniROAD on the training split and score it on the test split.

    Args:
        data: the validated feature folder.
        config: model sizes and optimisation settings.
        progress: show a rich progress bar (one tick per batch), or a `Progress` the caller owns
            (started and stopped by the caller) to add the training task to.

    Returns:
        The trained model, test mAP and the loss curve.

    Raises:
        InputError: before training, when no test frame belongs to a key-step class (the mAP would be
            undefined); during it, when the loss or the weights stop being finite (the run diverged).
    """
    background = tuple(c for c, s in enumerate(data.class_step_ids) if s is None)
    steps = [c for c in range(data.num_classes) if c not in background]
    if not any(v.targets[:, steps].any() for v in data.test):
        raise InputError(
            f"{data.root / config.features.split}: no test video has a frame of a key-step class "
            "(class_step_ids not null), so the test mAP is undefined"
        )
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = MiniROAD(config.model_config(data.input_dim, data.num_classes))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    losses: list[float] = []
    lengths = [len(v.features) for v in data.train]
    feats = np.concatenate([v.features for v in data.train])  # (L_total, D)
    targs = np.concatenate([v.targets for v in data.train])  # (L_total, C)
    done = 0  # batches trained so far
    with nullcontext(progress) if isinstance(progress, Progress) else _progress(progress) as bar:
        task = bar.add_task("training", total=None, loss=float("nan"))
        for epoch in range(1, config.epochs + 1):
            model.train()
            index, valid = window_index(lengths, config.window, rng)  # (N, W) each
            order = rng.permutation(len(index))
            # Each epoch's random offsets change its window count (by up to one per video), so the total
            # is re-estimated from the epoch at hand: every batch advances the bar by one and the last
            # epoch's estimate is exact, so the bar ends at its total without overshooting or jumping.
            batches = math.ceil(len(order) / config.batch_size)
            bar.update(task, total=done + batches * (config.epochs - epoch + 1))
            total, count = 0.0, 0
            for start in range(0, len(order), config.batch_size):
                batch = order[start : start + config.batch_size]
                x_np, y_np = gather_windows(feats, targs, index[batch], valid[batch])  # (b, W, D), (b, W, C)
                x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
                _, loss = model(x, y)
                assert loss is not None
                value = float(loss.detach())
                if not math.isfinite(value):
                    raise InputError(
                        f"training diverged: loss {value} at epoch {epoch}, batch {start // config.batch_size + 1} "
                        f"(try a smaller [train] lr than {config.lr:g}); no checkpoint written"
                    )
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += value * len(batch)
                count += len(batch)
                done += 1
                bar.update(task, advance=1, loss=total / count)
            losses.append(total / max(count, 1))
    if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
        raise InputError(
            f"training diverged: the last step left NaN/infinite weights (try a smaller [train] lr than {config.lr:g})"
        )
    model.eval()
    test_map, class_ap = evaluate_detector(model, data.test, background)
    return TrainOutcome(model, test_map, class_ap, tuple(losses))


def config_summary(config: DetectorTrainConfig) -> dict[str, Any]:
    """Plain-JSON settings saved in the checkpoint's ``info``."""
    return asdict(config)


def detector_ap_table(outcome: TrainOutcome, class_names: tuple[str, ...]) -> Table:
    """A rich table of the test AP per class and the mAP."""
    table = Table(title="MiniROAD test split: per-frame average precision")
    table.add_column("class")
    table.add_column("AP %", justify="right")
    for name, ap in zip(class_names, outcome.class_ap.tolist(), strict=True):
        table.add_row(name, "n/a" if math.isnan(ap) else f"{100 * ap:.1f}")
    table.add_row("[bold]mAP (background excluded)", f"[bold]{100 * outcome.test_map:.1f}")
    return table


def run_training(
    features: str | Path,
    config_path: str | Path | None,
    out: str | Path,
    progress: bool = True,
    console: Console | None = None,
    **overrides: Any,
) -> TrainOutcome:
    """What ``recognition-train`` does: read config and data, train, evaluate, save the checkpoint, print scores.

    Args:
        features: the MiniROAD feature folder.
        config_path: training config file (None: `training_config_of_folder`).
        out: checkpoint to write.
        progress: show the progress bar.
        console: where to print the results table (stdout by default).
        overrides: config fields to replace (``epochs``, ``seed``, ``threads``; None ignored).

    Returns:
        The training outcome.
    """
    if config_path is None:
        config = training_config_of_folder(features, **overrides)
    else:
        config = load_detector_training_config(config_path, **overrides)
    # Before training, so that a bad path costs no work (and the run cannot overwrite its own config).
    out = check_output(out, "checkpoint", inputs=[config_path], option="--out")
    data = load_feature_dataset(features, config.features)
    outcome = train_detector(data, config, progress=progress)
    info = {
        "train": config_summary(config),
        "test_map": outcome.test_map,
        "losses": list(outcome.losses),
        "train_videos": [v.name for v in data.train],
        "test_videos": [v.name for v in data.test],
    }
    try:
        save_detector(out, outcome.model, data.class_names, data.class_step_ids, data.feature_extractor, data.fps, info,
                      data.scenario)
    except OSError as err:  # checked up front; this is the disk filling up or the folder changing meanwhile
        raise InputError(f"{out}: cannot write the checkpoint ({err.strerror or err})") from None
    console = console or Console()
    console.print(detector_ap_table(outcome, data.class_names))
    console.print(f"test mAP {100 * outcome.test_map:.1f}% — checkpoint written to {out}")
    return outcome
