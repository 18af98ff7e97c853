"""Training a MiniROAD detector on a feature folder (the published MiniROAD recipe) and scoring it with per-frame mAP.

Recipe: the defaults of `DetectorTrainConfig` (the model sizes those of `recognition.model.MiniROADConfig`) are the
published MiniROAD ones: windows of frames, AdamW, cross-entropy on per-frame one-hot targets. The test split is scored
at the end by running every test video causally through the detector (the GRU starts from zeros at the video's first
frame, exactly as a live stream would).

Early stopping: a validation split is carved from the training videos (`choose_validation_videos`: a fifth of them
by default, drawn with the seed; never a test video). After every epoch the validation videos are run causally and
scored (loss and per-frame mAP); the weights of the best epoch (``keep_epoch``: highest validation mAP by default)
are the ones kept, scored on the test split and saved, with the curve.

Config file (TOML, or YAML with the same keys): four tables, all optional, each key a field of the config named
beside it; a key left out keeps that field's default (``configs/miniroad-thumos.toml``: the published recipe on its
TSN features)::

    [features]   rgb, flow, extractor, fps                              (`recognition.feature_folders.FeatureConfig`)
    [model]      embed_dim, hidden_dim, dropout, done_head, motion_lag | motion_lag_s      (`DetectorTrainConfig`)
    [train]      window | window_s, batch_size, lr, weight_decay, epochs, seed, threads, val_fraction, val_videos,
                 keep_epoch, evidence_window, refit, class_balance, background_weight, boundary_smoothing
    [augment]    copies, feature_noise, speed_change, order_shuffle, shuffled_done, background_mix

Time scales in seconds: the windows and lags a detector uses are durations of the recording, whatever its rate.
``window_s`` and ``motion_lag_s`` give the training window and the motion lag in seconds, turned into frames at the
feature folder's rate when training starts (`DetectorTrainConfig.at_rate`); ``window`` and ``motion_lag`` give them in
frames, for a config written for one rate. Without a config file the seconds of `SMALL_CPU_DETECTOR` apply: at 5
frames a second the 64-frame window and 10-frame lag of before, at 1 feature a second (imported per-second features)
13 and 2. The other durations were in seconds already (``evidence_window``, ``boundary_smoothing``, the segmenter's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Final, TypeVar

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from graphs.common.consoles import table_console
from graphs.common.errors import InputError, print_stderr, print_warning
from graphs.common.file_kinds import VIDEO_SUFFIXES, ZIP_MAGIC
from graphs.common.files import check_output, not_a_folder, output_start, read_json
from graphs.common.interrupts import signals_deferred
from graphs.common.options import MAX_FPS, THREADS_PER_CORE, max_threads
from graphs.common.safe_text import count_of, first_few, printable
from graphs.common.settings_files import (
    EPOCHS,
    LEARNING_RATE,
    SEED,
    SHARE,
    WIDTH,
    Bound,
    as_written,
    check_settings,
    check_tables,
    field_names,
    json_kind,
    naming_the_file,
    naming_the_flags,
    read_settings,
)
from graphs.training_sources import features_identity
from recognition.augment import blur_targets, class_weights, order_positions, perturb_windows, speed_positions
from recognition.checkpoint import FEATURE_SCALE, save_detector
from recognition.confirmation import ConfirmationChoice, choose_confirmation
from recognition.evidence import MAX_WINDOW_S, EvidenceModel
from recognition.evidence_calibration import calibrate_evidence
from recognition.feature_folders import (
    SPLIT_FILE,
    TARGETS_DIR,
    FeatureConfig,
    FeatureDataset,
    VideoFeatures,
    choose_validation_videos,
    load_feature_dataset,
    load_split,
    unsplit_feature_files,
    window_index,
)
from recognition.learning_curve import EpochScores, check_plot_support, curve_table, kept_by_rule, plot_curve
from recognition.metrics import frame_map
from recognition.model import (
    MiniROAD,
    MiniROADConfig,
    detector_loss,
    done_targets,
    feature_scale,
    finite_outputs,
    largest_by_row,
    output_probabilities,
)
from recognition.motion import MAX_MOTION_LAG, model_inputs
from recognition.segmenter import SegmenterConfig, stored_settings

KEEP_EPOCH = ("map", "loss", "last")
SHUFFLED_DONE = ("order", "scene")
MAX_SECONDS = 3600.0  # longest window or lag in seconds a config may ask for (an hour)
# Windows per optimisation step: the shipped configs take 8 or 16; 4096 windows of 128 frames of 2048 features are
# already 4 GB of one batch.
MAX_BATCH = 4096
OFF_AT_ZERO = Bound(0, 100, note="0: off")


@dataclass(frozen=True)
class DetectorTrainConfig:
    """Everything `train_detector` needs besides the data.

    Attributes:
        features: which feature folders to read.
        embed_dim: embedding width (input width and classes come from the data). The three model sizes default to
            `MiniROADConfig`'s, the published ones.
        hidden_dim: GRU hidden size.
        dropout: dropout after the embedding.
        window: training window length in frames (replaced by ``window_s`` at the folder's rate when that is set).
        batch_size: windows per optimisation step.
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        epochs: passes over the training windows.
        seed: seeds initialisation, window offsets, shuffling, augmentation and the validation draw.
        threads: torch CPU threads (0 = torch default).
        val_fraction: share of the training videos held out for validation (0: none, the last epoch is kept).
        val_videos: the validation videos by name (overrides ``val_fraction``).
        keep_epoch: which epoch's weights are kept: ``"map"`` (highest validation mAP, ties to the lower loss),
            ``"loss"`` (lowest validation loss) or ``"last"``.
        evidence_window: seconds over which the done evidence of a step (formula E1 of `recognition.evidence`) is
            measured when the checkpoint's evidence is calibrated: a step glimpsed for less than this counts as
            partly seen, not done (the detection evidence E2 keeps the segmenter's confirmation length).
        evidence_done_states: the done evidence (E3) weighs the detector's done-state outputs too (``u``); False
            calibrates it on the class probabilities alone (``e = 0``), one of the choices `tgml bench-live`'s folds
            make on their validation recordings of real footage (its "no done state" variants).
        refit: after choosing the epoch on the validation split, train again on every training video (validation
            ones included) for that many epochs, and keep that model.
        class_balance: exponent of the class-balanced loss weights (`recognition.augment.class_weights`; 0: off).
        background_weight: loss weight of the background classes' frames against the key-steps' (formula ``b_c`` of
            `recognition.augment.class_weights`, the mean frame weight kept at 1; 1: off).
        boundary_smoothing: seconds either side of each segment boundary over which targets are blurred
            (`recognition.augment.blur_targets`; 0: off).
        copies: train on the folder's augmented feature copies too (one copy, or the original, per window).
        feature_noise: feature noise in standard deviations of each dimension (0: off).
        speed_change: largest relative speed change of a video per epoch (`recognition.augment.speed_positions`).
        background_mix: largest share of a background frame mixed into a window (0: off).
        order_shuffle: probability that a training video is reassembled from its key-step segments in a random order
            for an epoch (`recognition.augment.order_positions`): the detector learns to see a step, not to expect
            it where correct executions have it (0: off).
        shuffled_done: the done targets of a reordered video: ``"order"`` (the steps before each frame in the new
            order) or ``"scene"`` (those done before it in the recording, which its table shows; `epoch_targets`).
        motion_lag: feed the detector each frame's features beside their change over this many frames
            (`recognition.motion`, formula M; 0: the features alone); replaced by ``motion_lag_s`` when that is set.
        window_s: the training window in seconds (None: ``window`` frames); `at_rate` turns it into frames.
        motion_lag_s: the motion lag in seconds (None: ``motion_lag`` frames; 0: off); `at_rate` turns it into
            frames (at least one unless 0).
        done_head: train the done-state outputs too (`recognition.model.done_targets`): the evidence that a step
            was done which the probabilistic checker weighs.
    """

    features: FeatureConfig = field(default_factory=FeatureConfig)
    embed_dim: int = MiniROADConfig.embed_dim
    hidden_dim: int = MiniROADConfig.hidden_dim
    dropout: float = MiniROADConfig.dropout
    window: int = 128
    batch_size: int = 16
    lr: float = 1e-4
    weight_decay: float = 0.05
    epochs: int = 10
    seed: int = 42
    threads: int = 0
    val_fraction: float = 0.2
    val_videos: tuple[str, ...] = ()
    keep_epoch: str = "map"
    evidence_window: float = 2.0
    evidence_done_states: bool = True
    refit: bool = False
    class_balance: float = 0.0
    background_weight: float = 1.0
    boundary_smoothing: float = 0.0
    copies: bool = True
    feature_noise: float = 0.0
    speed_change: float = 0.0
    background_mix: float = 0.0
    order_shuffle: float = 1.0
    shuffled_done: str = "order"
    done_head: bool = True
    motion_lag: int = 0
    window_s: float | None = None
    motion_lag_s: float | None = None

    # What each number (and choice) may be (`check_settings`, docs/recognition.md's table). A window of frames
    # reaches the longest window in seconds at the highest frame rate; the sizes of other terms are far beyond use.
    BOUNDS: ClassVar[Mapping[str, Bound | tuple[str, ...]]] = {
        "embed_dim": WIDTH, "hidden_dim": WIDTH, "dropout": SHARE, "window": Bound(1, int(MAX_SECONDS * MAX_FPS)),
        "batch_size": Bound(1, MAX_BATCH), "lr": LEARNING_RATE, "weight_decay": Bound(0, 100), "epochs": EPOCHS,
        "seed": SEED, "threads": Bound(0, max_threads, note=f"{THREADS_PER_CORE} per core of this machine; 0: "
                                       "torch's default"),
        "val_fraction": Bound(0, 1, open_high=True, note="0: no validation split"),
        "keep_epoch": KEEP_EPOCH, "evidence_window": Bound(0, MAX_WINDOW_S, open_low=True, note="seconds"),
        "class_balance": OFF_AT_ZERO, "background_weight": Bound(0, 100, open_low=True, note="1: off"),
        "boundary_smoothing": OFF_AT_ZERO, "feature_noise": OFF_AT_ZERO, "speed_change": OFF_AT_ZERO,
        "background_mix": Bound(0, 1, open_high=True, note="0: off"), "order_shuffle": Bound(0, 1, note="0: off"),
        "shuffled_done": SHUFFLED_DONE, "motion_lag": Bound(0, MAX_MOTION_LAG, note="frames; 0: off"),
        "window_s": Bound(0, MAX_SECONDS, open_low=True, note="seconds; or left out: the frames field"),
        "motion_lag_s": Bound(0, MAX_SECONDS, note="seconds; 0: off; or left out: the frames field"),
    }

    def __post_init__(self) -> None:
        if not isinstance(self.features, FeatureConfig):
            raise InputError(f"DetectorTrainConfig.features = {as_written(self.features)}: must be a FeatureConfig")
        check_settings(self)
        videos = self.val_videos
        # A number there (val_videos = 5) ended in "'int' object is not iterable".
        if not isinstance(videos, list | tuple) or not all(isinstance(v, str) and v for v in videos):
            raise InputError(f"DetectorTrainConfig.val_videos = {as_written(videos)}: expected a list of video names")
        object.__setattr__(self, "val_videos", tuple(videos))

    def at_rate(self, fps: float) -> DetectorTrainConfig:
        """This config with its durations in seconds turned into frames at ``fps`` (the feature folder's rate):
        ``window = max(1, round(window_s * fps))``, ``motion_lag = round(motion_lag_s * fps)`` (at least 1 unless
        ``motion_lag_s`` is 0). Fields without seconds keep their frames.

        Raises:
            InputError: a lag of more frames than `recognition.motion.MAX_MOTION_LAG` at this rate.
        """
        changes: dict[str, Any] = {}
        if self.window_s is not None:
            changes["window"] = max(1, round(self.window_s * fps))
        if self.motion_lag_s is not None:
            lag = max(1, round(self.motion_lag_s * fps)) if self.motion_lag_s > 0 else 0
            if lag > MAX_MOTION_LAG:
                # Named as a config file writes it: the file's own checks passed it, the folder's rate did not.
                raise InputError(f"[model] motion_lag_s = {self.motion_lag_s:g}: {lag} frames at {fps:g} frames a "
                                 f"second, more than the {MAX_MOTION_LAG} a live stream keeps")
            changes["motion_lag"] = lag
        return replace(self, **changes) if changes else self

    def model_config(self, input_dim: int, num_classes: int) -> MiniROADConfig:
        """The detector sizes for data of the given width and number of classes."""
        return MiniROADConfig(input_dim, self.embed_dim, self.hidden_dim, num_classes, float(self.dropout),
                              self.done_head, self.motion_lag)


_MODEL_KEYS = {"embed_dim", "hidden_dim", "dropout", "done_head", "motion_lag", "motion_lag_s"}
_TRAIN_KEYS = {"window", "window_s", "batch_size", "lr", "weight_decay", "epochs", "seed", "threads", "val_fraction",
               "val_videos", "keep_epoch", "evidence_window", "evidence_done_states", "refit", "class_balance",
               "background_weight", "boundary_smoothing"}
_AUGMENT_KEYS = {"copies", "feature_noise", "speed_change", "background_mix", "order_shuffle", "shuffled_done"}
# The tables of a training config file and the keys each may hold.
_TABLES = {"features": field_names(FeatureConfig), "model": _MODEL_KEYS, "train": _TRAIN_KEYS, "augment": _AUGMENT_KEYS}


def load_detector_training_config(path: str | Path, **overrides: Any) -> DetectorTrainConfig:
    """Read a detector training config (TOML, or YAML with the same sections).

    Args:
        path: the file (``[features]``, ``[model]``, ``[train]``, ``[augment]`` sections, all optional).
        overrides: fields replaced after reading (e.g. ``epochs`` from the command line); None values ignored.

    Returns:
        The validated config; unknown sections or keys are refused with the file and key named.
    """
    return training_config_of_tables(read_training_tables(path), path, **overrides)


def read_training_tables(path: str | Path) -> dict[str, Any]:
    """The tables of a detector training config file, every table and key known (`check_tables`) and none given in
    frames and in seconds at once; values are checked by `training_config_of_tables`.

    Raises:
        InputError: naming the file, and the table and key at fault.
    """
    path = Path(path)
    data = read_settings(path)
    if not data:  # an empty or cut-short file: its defaults would train, and a later error blame something else
        raise InputError(f"{path}: sets nothing (no {', '.join(f'[{t}]' for t in _TABLES)} table); leave --config "
                         "out for the defaults")
    check_tables(data, _TABLES, path)
    for table, frames, seconds in (("train", "window", "window_s"), ("model", "motion_lag", "motion_lag_s")):
        given = data.get(table, {})
        if frames in given and seconds in given:  # the seconds won, and the frames were dropped without a word
            raise InputError(f"{path}: [{table}] gives both {frames} (frames) and {seconds} (seconds); give one")
    return data


def training_config_of_tables(data: dict[str, Any], path: str | Path, **overrides: Any) -> DetectorTrainConfig:
    """The config the tables of a training config file (`read_training_tables`) give, values checked.

    Args:
        data: the file's tables.
        path: the file, named in errors.
        overrides: as `load_detector_training_config`'s.
    """
    path = Path(path)
    with naming_the_file(path, tables=_TABLES):
        features = FeatureConfig(**data.get("features", {}))
        config = DetectorTrainConfig(features=features, **data.get("model", {}), **data.get("train", {}),
                                     **data.get("augment", {}))
    # A bad override (--epochs 0) is not the file's fault: its error names the field and value, not the file.
    changes = {k: v for k, v in overrides.items() if v is not None}
    return replace(config, **changes) if changes else config


# Without --config: a small MiniROAD that trains on one CPU core in seconds to minutes (a few dozen short videos of
# one's own procedure); the fields it leaves out keep DetectorTrainConfig's defaults.
# configs/miniroad-efficientnet-lite0.toml writes the same settings out, to copy and edit (a test keeps them equal).
# Its window and motion lag are in seconds (12.8 s and 2 s: 64 and 10 frames at recognition-features' 5 fps), so a
# folder of another rate gets the same time scale (`DetectorTrainConfig.at_rate`).
SMALL_CPU_DETECTOR: dict[str, Any] = {"embed_dim": 128, "hidden_dim": 128, "window_s": 12.8, "batch_size": 8,
                                      "lr": 1e-3, "epochs": 60, "threads": 1, "motion_lag_s": 2.0}


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
    why = not_a_folder(features, "a feature folder")
    if why is not None:
        raise InputError(f"--features {features}: {why}")
    split = Path(features) / SPLIT_FILE
    # Only a split.json that is not there at all makes this no feature folder: one there but not a readable file (a
    # folder, a link loop) is refused by read_json saying what it is, where this said "no split.json".
    if not split.exists() and not split.is_symlink():
        raise InputError(f"--features {features}: not a feature folder: no {SPLIT_FILE}, which recognition-features "
                         "(or recognition-features import) writes; " + _what_the_folder_is(Path(features)))
    raw = read_json(split, "split file")
    if not isinstance(raw, dict):  # a list or null was told it "names no feature_extractor", as if one field lacked
        raise InputError(f"{split}: expected an object with 'train' and 'test' lists, got {json_kind(raw)}")
    extractor = raw.get("feature_extractor")
    if not isinstance(extractor, str) or not extractor:
        # A file that is no split at all is said so first: a {} was told to give --config, and the next try
        # refused its missing 'train'.
        load_split(split)
        footage = _videos_of(Path(features))
        if footage is not None and not any(Path(features).glob("rgb_*/")):
            # The footage generators write split.json beside videos/: it was told to give --config, which would
            # then find no features either.
            raise InputError(f"--features {features}: a folder of videos ({footage}), not a feature folder: its "
                             f"{SPLIT_FILE} names no feature_extractor and it holds no rgb_*/ features; "
                             + _extract_first(footage))
        raise InputError(f"{split}: names no feature_extractor; give --config with a [features] table")
    # The rate is split.json's, read (and checked, naming it) with the folder: the config leaves it to the folder.
    feature_config = FeatureConfig(rgb=f"rgb_{extractor}", extractor=extractor)
    changes = {k: v for k, v in overrides.items() if v is not None}
    return DetectorTrainConfig(features=feature_config, **(SMALL_CPU_DETECTOR | changes))


def _what_the_folder_is(folder: Path) -> str:
    """The end of the refusal of a folder with no split file: what to give instead. A folder of one's own ``.npy``
    files (the features of bring-your-own-features, not imported yet) and the ``rgb_<name>/`` inside a feature folder
    were both told to give --config, which reads neither. Any folder of a feature folder is named so (its
    ``target_perframe/`` holds ``.npy`` files too: labels, which are no features to import)."""
    resolved = folder.resolve()
    parent = resolved.parent
    # Only what recognition-features writes beside its split.json makes the parent a feature folder: the videos/ of
    # generated footage, beside a split.json of its own, was named part of a feature folder to give instead.
    if (parent / SPLIT_FILE).is_file() and (resolved.name.startswith("rgb_") or resolved.name == TARGETS_DIR):
        return f"it is the {resolved.name}/ of the feature folder {parent}: give --features {parent}"
    footage = _videos_of(folder)
    if footage is not None:
        return f"it holds videos: {_extract_first(footage)}"
    try:
        own = any(entry.suffix == ".npy" and entry.is_file() for entry in folder.iterdir())
    except OSError:  # unreadable: the generic advice, the refusal itself already named the folder
        own = False
    if own:
        return (f"it holds .npy files: features of your own are imported first (recognition-features import "
                f"--features {folder} --annotations FILE --rate N --out FOLDER), then trained on from FOLDER")
    return "for a folder of your own, give --config to name its folders"


def _videos_of(folder: Path) -> Path | None:
    """The folder of videos that ``folder`` is or holds as ``videos/`` (None: neither holds a video file)."""
    for candidate in (folder, folder / "videos"):
        try:
            if any(entry.suffix.lower() in VIDEO_SUFFIXES and entry.is_file() for entry in candidate.iterdir()):
                return candidate
        except OSError:  # not there or unreadable: no videos known
            continue
    return None


def _extract_first(videos: Path) -> str:
    """How a folder of videos becomes a feature folder to train on."""
    return (f"extract their features first (recognition-features --videos {videos} --annotations FILE --out FOLDER), "
            "then give --features FOLDER")


def check_recorded_extractor(named: object, data: FeatureDataset, features: FeatureConfig,
                             config_path: str | Path | None) -> None:
    """Refuse a config file's ``[features] extractor`` that the checkpoint would not record: the split file names
    another extractor for the features read (`recognition.feature_folders.features_extractor`), and the config's
    went into ``info`` alone, unsaid. Reading ``rgb_<its extractor>`` beside the split file's own is the documented
    way to train on another extractor's features in the same folder, and is recorded as the config says.

    Args:
        named: the file's ``[features] extractor`` (None: not given).
        data: the folder as read (its ``feature_extractor`` is what the checkpoint records).
        features: the config's feature settings.
        config_path: the config file, named in the error.
    """
    if named is None or named == data.feature_extractor:
        return
    raise InputError(f"{config_path}: [features] extractor = {as_written(named, 60)} disagrees with "
                     f"{data.root / features.split}'s feature_extractor ({data.feature_extractor}), the extractor of "
                     f"the features read (rgb = {as_written(features.rgb, 70)}); leave extractor out, or set rgb = "
                     f"{as_written(f'rgb_{named}', 70)} to read that extractor's features")


@dataclass(frozen=True)
class TrainOutcome:
    """What training produced.

    Attributes:
        model: the trained detector (eval mode), with the kept epoch's weights.
        test_map: per-frame mAP on the test split, background excluded (0..1).
        class_ap: AP per class on the test split (NaN where the class never occurs).
        losses: mean training loss per epoch.
        curve: every epoch's training loss and validation loss and mAP.
        kept_epoch: the epoch whose weights ``model`` holds.
        keep_by: how it was chosen (``"map"``, ``"loss"``, ``"last"``: the last when there is no validation split).
        validation: validation video name -> ``(probs (T, C), targets (T, C))``: the kept model's causal per-frame
            probabilities and the one-hot targets (empty without a validation split); with ``refit``, those of the
            model fitted without the validation videos.
        refit: ``model`` was trained again on every training video, for ``kept_epoch`` epochs.
        interrupted: the signal (Ctrl-C, SIGTERM) that stopped training after at least one epoch, when the caller
            asked to keep such a run (`train_detector`'s ``on_stop``), or None. The outcome is then that of the
            epochs trained before it (``curve``), the best of them kept, with no refit.
        interrupted_during: when the stop came (`STOP_PHASES`): ``"training"`` (the epochs after it were not
            trained), ``"refit"`` (every epoch had been; the refit was dropped) or ``"scoring"`` (every epoch had
            been: the scoring after them was finished all the same; a refit not begun yet was dropped); None without
            a stop.
    """

    model: MiniROAD
    test_map: float
    class_ap: np.ndarray
    losses: tuple[float, ...]
    curve: tuple[EpochScores, ...] = ()
    kept_epoch: int = 0
    keep_by: str = "last"
    validation: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    refit: bool = False
    interrupted: KeyboardInterrupt | None = None
    interrupted_during: str | None = None


# When a kept stop came (`TrainOutcome.interrupted_during`, the checkpoint's ``info.interrupted.during``).
STOP_PHASES: Final = ("training", "refit", "scoring")
_Result = TypeVar("_Result")


@dataclass
class KeptStop:
    """The first stop (Ctrl-C, SIGTERM) of a run that keeps its work through it, for `run_training`: the work under
    way when it came is finished all the same, and the stop raised once the result is saved. A second stop, or any
    stop where no ``on_stop`` asked for this, ends the run at once.

    Attributes:
        on_stop: told ``(epochs trained, phase)`` when the first stop is kept (the user is told that saving goes on);
            None: nothing is kept.
        stop: the kept stop, None until one comes.
        during: its phase (`STOP_PHASES`).
    """

    on_stop: Callable[[int, str], None] | None
    stop: KeyboardInterrupt | None = None
    during: str | None = None

    def keep(self, stop: KeyboardInterrupt, epochs: int, during: str) -> None:
        """Keep ``stop``, which came during ``during`` after ``epochs`` epochs, or raise it (see the class)."""
        if self.on_stop is None or self.stop is not None:
            raise stop
        self.stop, self.during = stop.with_traceback(None), during  # not the training data its frames hold
        self.on_stop(epochs, during)

    def finish(self, work: Callable[[], _Result], epochs: int) -> _Result:
        """``work()`` (scoring, calibrating: nothing it leaves half-done stays), run again whole if a first stop cut
        it short: the epochs trained are the user's hours, and this is minutes at most."""
        try:
            return work()
        except KeyboardInterrupt as stop:
            self.keep(stop, epochs, "scoring")
        return work()


@torch.inference_mode()
def predict_video(model: MiniROAD, features: np.ndarray) -> np.ndarray:
    """Causal per-frame class probabilities of one whole video (GRU from zeros at frame 0).

    Args:
        model: the detector (put in eval mode here).
        features: ``(L, D)`` (the motion inputs, if the detector reads them, are computed here).

    Returns:
        ``(L, outputs)`` probabilities: the ``C`` classes, then the done states with a done head
        (`recognition.model.output_probabilities`).
    """
    model.eval()
    x = torch.from_numpy(model_inputs(features, model.config.motion_lag))[None]  # (1, L, D) or (1, L, 2D)
    logits, _ = model(x)
    return output_probabilities(logits[0], model.config.num_classes).numpy()


def video_outputs(model: MiniROAD, video: VideoFeatures) -> np.ndarray:
    """`predict_video` of one video of a folder, refused naming its file when not finite (`finite_outputs`)."""
    return finite_outputs(predict_video(model, video.features), video.features, video.source or f"video {video.name!r}")


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
    targets = np.concatenate([v.targets for v in videos])
    scores = np.concatenate([video_outputs(model, v) for v in videos])[:, : targets.shape[1]]
    return frame_map(scores, targets, background)


def validation_scores(
    probs: list[np.ndarray], videos: tuple[VideoFeatures, ...], background: tuple[int, ...]
) -> tuple[float, float]:
    """Validation loss and mAP of per-video causal probabilities.

    ``loss = -(1/N) Σ_t Σ_c y_tc log p_tc`` over every validation frame (one-hot targets, no class weights, so that
    epochs trained with other settings compare); mAP as `recognition.metrics.frame_map`.

    Returns:
        ``(loss, mAP)``; mAP is NaN when no validation frame belongs to a key-step.
    """
    y = np.concatenate([v.targets for v in videos])
    p = np.concatenate(probs)[:, : y.shape[1]]  # the classes: a done head's outputs follow them
    loss = float(-(y * np.log(np.clip(p, 1e-12, None))).sum(axis=1).mean())
    return loss, frame_map(p, y, background)[0]


def better_epoch(candidate: EpochScores, best: EpochScores | None, keep_by: str) -> bool:
    """Whether ``candidate`` replaces ``best`` under the rule ``keep_by``.

    ``"map"``: the higher validation mAP, ties to the lower validation loss (and to the lower loss throughout when
    the mAP is undefined); ``"loss"``: the lower validation loss; ``"last"``: always.
    """
    if best is None or keep_by == "last":
        return True
    maps = (candidate.val_map, best.val_map)
    if keep_by == "map" and not any(math.isnan(m) for m in maps) and maps[0] != maps[1]:
        return maps[0] > maps[1]
    return candidate.val_loss < best.val_loss


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


@dataclass(frozen=True)
class TrainingData:
    """The fitting videos as the training loop reads them: concatenated, with copies, soft targets and weights.

    Attributes:
        lengths: frame count of each fitting video, in concatenation order.
        features: ``(K + 1, L, D)``: the original features, then each augmented copy.
        targets: ``(L, C)`` targets, blurred at boundaries when asked.
        hard: ``(L, C)`` the one-hot targets (which frames are which step: the done states follow from them).
        background_classes: the classes that are no key-step.
        weights: ``(C,)`` class weights of the loss (None: plain cross-entropy).
        noise_scale: ``(D,)`` noise standard deviation per dimension (None: no noise).
        background: ``(N_b, D)`` background frames to mix in (None: no mixing).
        sources: each fitting video's file(s), as errors name them (a diverged run names the one with the largest
            feature, `divergence_hint`).
    """

    lengths: list[int]
    features: np.ndarray
    targets: np.ndarray
    hard: np.ndarray
    background_classes: tuple[int, ...]
    weights: torch.Tensor | None
    noise_scale: np.ndarray | None
    background: np.ndarray | None
    sources: tuple[str, ...] = ()


def training_data(
    videos: tuple[VideoFeatures, ...], config: DetectorTrainConfig, fps: float, background: tuple[int, ...]
) -> TrainingData:
    """Everything the training loop reads, prepared once from the fitting videos and the settings."""
    lengths = [len(v.features) for v in videos]
    copies = min(len(v.copies) for v in videos) if config.copies else 0
    # Motion inputs are taken over each recording (and copy) as filmed: a reordered piece keeps the change it showed.
    stack = np.stack([np.concatenate([model_inputs((v.features, *v.copies)[k], config.motion_lag) for v in videos])
                      for k in range(copies + 1)])
    hard = np.concatenate([v.targets for v in videos])  # (L, C)
    targets = blur_targets(hard, lengths, round(config.boundary_smoothing * fps))
    weighted = config.class_balance or config.background_weight != 1
    weights = (torch.from_numpy(class_weights(hard, config.class_balance, background, config.background_weight))
               if weighted else None)
    noise = stack[0].std(axis=0) * config.feature_noise if config.feature_noise else None
    back = stack[0][hard[:, list(background)].sum(axis=1) > 0] if config.background_mix and background else None
    return TrainingData(lengths, stack, targets, hard, background, weights, noise, back,
                        tuple(v.source or f"video {v.name!r}" for v in videos))


def epoch_targets(
    prepared: TrainingData, positions: np.ndarray, lengths: Sequence[int], done_head: bool, scene: bool = False
) -> np.ndarray:
    """The targets of an epoch's frames (rows ``positions`` of the fitting videos, resampled or reordered), with
    each video's done states after them when the detector has a done head.

    The done states follow the epoch's step order, or with ``scene`` the recorded execution's: a reordered piece
    keeps the table it was filmed on (the objects of the steps done before it in the recording), and with ``scene``
    its done targets say what that table shows.

    Returns:
        ``(len(positions), C)``, or ``(len(positions), 2C)`` with a done head.
    """
    targets = prepared.targets[positions]
    if not done_head:
        return targets
    background = prepared.background_classes
    if scene:
        done = done_per_video(prepared.hard, prepared.lengths, background)[positions]
    else:
        done = done_per_video(prepared.hard[positions], lengths, background)
    return np.concatenate([targets, done], axis=1)


def done_per_video(hard: np.ndarray, lengths: Sequence[int], background: tuple[int, ...]) -> np.ndarray:
    """`recognition.model.done_targets` of each of the concatenated videos of ``lengths`` frames, ``(L, C)``."""
    bounds = np.cumsum([0, *lengths])
    return np.concatenate([done_targets(hard[a:b], background) for a, b in zip(bounds[:-1], bounds[1:], strict=True)])


def validation_names(data: FeatureDataset, config: DetectorTrainConfig) -> tuple[str, ...]:
    """The validation videos `train_detector` carves from ``data``'s training split (`choose_validation_videos`)."""
    return choose_validation_videos([v.name for v in data.train], config.val_fraction, config.val_videos, config.seed,
                                    [v.name for v in data.test])


def check_calibration_videos(data: FeatureDataset, config: DetectorTrainConfig) -> None:
    """Refuse, before training, a validation split in which no video has a frame of a key-step: the evidence
    calibration after training (`calibrate_for_streams`) has nothing to measure there, and the run would end in an
    error with its epochs lost.

    Raises:
        InputError: naming the option that chose the split and its videos.
    """
    names = validation_names(data, config)
    steps = [c for c, s in enumerate(data.class_step_ids) if s is not None]
    if not names or any(v.targets[:, steps].any() for v in data.train if v.name in names):
        return
    what = (f"--val-videos {','.join(config.val_videos)}" if config.val_videos
            else f"the validation split (--val-fraction {config.val_fraction:g}, seed {config.seed})")
    raise InputError(f"{what}: no validation video has a frame of a key-step class ({first_few(list(names), 5)}), so "
                     "the evidence calibration after training would have nothing to measure; name others with "
                     "--val-videos, or draw others with --seed")


def warn_one_validation_video(data: FeatureDataset, config: DetectorTrainConfig) -> None:
    """Say, before training, that a validation split of one video showing one key-step calibrates the live checker
    at its flattest.

    `choose_slope_penalty` judges the evidence curves by leaving one validation video out, or with one video one of
    its steps; one video of one step leaves nothing out, so the curves get the largest penalty: a step the detector
    never saw still reads as fairly likely done, and the default probabilistic checker may stay silent on a mistake
    the detector sees plainly (six imported recordings, test mAP 100, while a one-video split got the flattest curve:
    P(skipped) 0.37, under the 0.5 alert threshold).
    """
    names = validation_names(data, config)
    if len(names) != 1:
        return
    video = next(v for v in data.train if v.name == names[0])
    # The steps as the calibration reads them: each frame's largest target. A multi-hot row (overlapping classes) is
    # one step there, and counted by any marked column the warning stayed silent on a split calibrated at its flattest.
    key = [c for c, s in enumerate(data.class_step_ids) if s is not None]
    shown = int(np.isin(np.unique(np.asarray(video.targets).argmax(axis=1)), key).sum())
    if shown >= 2:
        return
    what = f"--val-videos {names[0]}" if config.val_videos else f"--val-fraction {config.val_fraction:g}"
    print_warning(f"{what}: one validation video ({names[0]}) showing one key-step: the live checker's evidence curves "
                  "are fitted at their flattest, and stream-detect's default probabilistic checker may then stay "
                  "silent on a mistake the detector sees plainly; name two or more with --val-videos (or label more "
                  "executions), or run the checker with --checker binary (docs/recognition.md, the validation split)")


def train_detector(
    data: FeatureDataset,
    config: DetectorTrainConfig,
    progress: bool | Progress = True,
    on_stop: Callable[[int, str], None] | None = None,
) -> TrainOutcome:
    """Train MiniROAD on the training split (less its validation videos), keep the best epoch, score the test split.

    Args:
        data: the validated feature folder.
        config: model sizes, optimisation, validation and augmentation settings.
        progress: show a rich progress bar (one tick per batch), or a `Progress` the caller owns
            (started and stopped by the caller) to add the training task to.
        on_stop: None (the default): a stop (Ctrl-C, SIGTERM) ends training as any exception does. Given, a first
            stop after the first epoch is kept instead (`KeptStop`): ``on_stop(epochs trained, phase)`` is called
            (`STOP_PHASES`), training ends with the best epoch so far, the scoring is finished, and the outcome
            carries the stop (``interrupted``) for the caller to raise once it has saved it (`run_training`).

    Returns:
        The kept model, test mAP, the learning curve and the kept model's validation probabilities.

    Raises:
        InputError: before training, when no test frame belongs to a key-step class (the mAP would be
            undefined) or the validation split would be empty; during it, when the loss or the weights stop being
            finite (the run diverged).
    """
    config = config.at_rate(data.fps)
    background = tuple(c for c, s in enumerate(data.class_step_ids) if s is None)
    steps = [c for c in range(data.num_classes) if c not in background]
    if not any(v.targets[:, steps].any() for v in data.test):
        raise InputError(
            f"{data.root / config.features.split}: no test video has a frame of a key-step class "
            "(class_step_ids not null), so the test mAP is undefined"
        )
    val_names = validation_names(data, config)
    fit = tuple(v for v in data.train if v.name not in val_names)
    val = tuple(v for v in data.train if v.name in val_names)
    keep_by = config.keep_epoch if val else "last"
    if config.threads:
        torch.set_num_threads(config.threads)
    curve: list[EpochScores] = []
    # The kept epoch and its weights in one variable, assigned in one statement: a stop can never leave one epoch's
    # weights under another's number.
    kept: tuple[EpochScores, dict[str, torch.Tensor]] | None = None

    def score(model: MiniROAD, scores: EpochScores) -> None:
        nonlocal kept
        if val:
            val_loss, val_map = validation_scores([video_outputs(model, v) for v in val], val, background)
            scores = replace(scores, val_loss=val_loss, val_map=val_map)
        better = better_epoch(scores, kept[0] if kept is not None else None, keep_by)
        state = {k: v.detach().clone() for k, v in model.state_dict().items()} if better else None
        with signals_deferred():  # the curve and the kept epoch agree: the kept one is the best of the curve's
            curve.append(scores)
            if state is not None:
                kept = (scores, state)

    stopped = KeptStop(on_stop)
    with nullcontext(progress) if isinstance(progress, Progress) else _progress(progress) as bar:
        task = bar.add_task("training batches", total=None, loss=float("nan"))  # epochs x batches per epoch
        torch.manual_seed(config.seed)  # the initial weights
        model = MiniROAD(config.model_config(data.input_dim, data.num_classes))
        try:
            done = run_epochs(model, training_data(fit, config, data.fps, background), config, config.epochs, bar,
                              task, 0, score)
        except KeyboardInterrupt as stop:
            if kept is None:  # not one epoch finished: nothing to keep
                raise
            stopped.keep(stop, len(curve), "training")  # the best epoch trained is kept and saved, then it stops
        assert kept is not None  # epochs >= 1
        best = kept[0]
        model.load_state_dict(kept[1])
        model.eval()
        selected = model
        validation = stopped.finish(lambda: {v.name: (video_outputs(selected, v), v.targets) for v in val},
                                    len(curve))
        refit = bool(config.refit and val and stopped.stop is None)
        if refit:
            # The kept epoch count, now on every training video; the validation probabilities above stay those of a
            # model that never saw its validation videos.
            try:
                torch.manual_seed(config.seed)
                model = MiniROAD(config.model_config(data.input_dim, data.num_classes))
                run_epochs(model, training_data(data.train, config, data.fps, background), config, best.epoch, bar,
                           task, done, lambda _model, _scores: None)
            except KeyboardInterrupt as stop:  # a refit cut short is no model: the selected epoch's is
                stopped.keep(stop, len(curve), "refit")
                model, refit = selected, False
            model.eval()
    test_map, class_ap = stopped.finish(lambda: evaluate_detector(model, data.test, background), len(curve))
    return TrainOutcome(model, test_map, class_ap, tuple(e.train_loss for e in curve), tuple(curve), best.epoch,
                        keep_by, validation, refit, stopped.stop, stopped.during)


def divergence_hint(features: np.ndarray, lr: float, lengths: Sequence[int] = (), sources: Sequence[str] = ()) -> str:
    """What to try when training diverged: features far from the usual scale first (named in the recording that holds
    the largest, among the many a folder holds), else a smaller learning rate.

    Args:
        features: ``(L, D)`` the fitting videos' features, concatenated, or ``(K + 1, L, D)`` with their augmented
            copies (`TrainingData.features`).
        lr: the learning rate the run used.
        lengths: the frame count of each fitting video, in concatenation order (none: no recording is named).
        sources: each one's file(s), as errors name them.
    """
    largest, rescale = feature_scale(features)
    if not rescale:
        return f"try a smaller [train] lr than {lr:g}"
    where = ""
    if lengths and len(sources) == len(lengths):
        rows = largest_by_row(features).reshape(-1, features.shape[-2])  # (K + 1, L)
        copy, row = np.unravel_index(int(rows.argmax()), rows.shape)
        starts = np.cumsum([0, *lengths])  # (videos + 1,) where each video's rows begin
        video = int(np.searchsorted(starts, row, side="right")) - 1
        first = int(row - starts[video])
        where = f" in {sources[video]} (vector {first}" + (f" of its augmented copy {copy}" if copy else "") + ")"
    return (f"the features reach {largest:.3g} in absolute value{where}: {rescale}, before importing; or try a smaller "
            f"[train] lr than {lr:g}")


def prepared_hint(prepared: TrainingData, lr: float) -> str:
    """`divergence_hint` of the fitting videos a run trained on."""
    return divergence_hint(prepared.features, lr, prepared.lengths, prepared.sources)


def run_epochs(
    model: MiniROAD,
    prepared: TrainingData,
    config: DetectorTrainConfig,
    epochs: int,
    bar: Progress,
    task: TaskID,
    done: int,
    after_epoch: Callable[[MiniROAD, EpochScores], None],
) -> int:
    """Optimise ``model`` for ``epochs`` epochs on ``prepared`` (seeded by ``config.seed``), calling ``after_epoch``
    with the model and the epoch's training loss after each one.

    Args:
        model: the detector to train (fresh).
        prepared: the fitting videos (`training_data`).
        config: optimisation and augmentation settings.
        epochs: how many epochs.
        bar: the progress bar, one tick per batch.
        task: its task.
        done: batches already on the bar.
        after_epoch: scores and keeps the epoch.

    Returns:
        Batches on the bar after the last epoch.

    Raises:
        InputError: the loss or the weights stop being finite.
    """
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    for epoch in range(1, epochs + 1):
        model.train()
        order = order_positions(prepared.hard.argmax(axis=1), prepared.lengths, rng, config.order_shuffle,
                                prepared.background_classes)
        positions, lengths = speed_positions(prepared.lengths, rng, config.speed_change)
        positions = order[positions]  # the epoch's frames: each video reordered, then resampled
        targets = epoch_targets(prepared, positions, lengths, config.done_head, config.shuffled_done == "scene")
        index, valid = window_index(lengths, config.window, rng)  # (N, W) each, into the epoch's frames
        copy = rng.integers(0, len(prepared.features), size=len(index))  # which copy each window reads
        order = rng.permutation(len(index))
        # Each epoch's random offsets change its window count (by up to one per video), so the total
        # is re-estimated from the epoch at hand: every batch advances the bar by one and the last
        # epoch's estimate is exact, so the bar ends at its total without overshooting or jumping.
        batches = math.ceil(len(order) / config.batch_size)
        bar.update(task, total=done + batches * (epochs - epoch + 1))
        total, count = 0.0, 0
        for start in range(0, len(order), config.batch_size):
            batch = order[start : start + config.batch_size]
            frames, mask = index[batch], valid[batch]  # (b, W) into the epoch's frames
            rows = positions[frames]  # (b, W) into the fitting videos' features
            x_np = perturb_windows(prepared.features[copy[batch][:, None], rows], mask, rng,
                                   prepared.noise_scale, prepared.background, config.background_mix)
            y_np = targets[frames] * mask[..., None]
            logits, _ = model(torch.from_numpy(x_np))
            loss = detector_loss(logits, torch.from_numpy(y_np.astype(np.float32)), model.config.num_classes,
                                 prepared.weights)
            value = float(loss.detach())
            if not math.isfinite(value):
                raise InputError(
                    f"training diverged: loss {value} at epoch {epoch}, batch {start // config.batch_size + 1} "
                    f"({prepared_hint(prepared, config.lr)}); no checkpoint written"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += value * len(batch)
            count += len(batch)
            done += 1
            bar.update(task, advance=1, loss=total / count)
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            raise InputError(f"training diverged: epoch {epoch} left NaN/infinite weights "
                             f"({prepared_hint(prepared, config.lr)})")
        after_epoch(model, EpochScores(epoch, total / max(count, 1)))
    return done


def config_summary(config: DetectorTrainConfig) -> dict[str, Any]:
    """Plain-JSON settings saved in the checkpoint's ``info``."""
    return asdict(config) | {"val_videos": list(config.val_videos)}


def detector_ap_table(outcome: TrainOutcome, class_names: tuple[str, ...]) -> Table:
    """A rich table of the test AP per class and the mAP."""
    table = Table(title="MiniROAD test split: per-frame average precision")
    table.add_column("class")
    table.add_column("AP %", justify="right")
    for name, ap in zip(class_names, outcome.class_ap.tolist(), strict=True):
        # A class name comes from the folder's split.json: shown as text, its escapes and brackets never obeyed.
        table.add_row(Text(printable(name)), "n/a" if math.isnan(ap) else f"{100 * ap:.1f}")
    table.add_row("[bold]mAP (background excluded)", f"[bold]{100 * outcome.test_map:.1f}")
    return table


# Printed under `evidence_table` as a line of its own: as the table's caption it was wrapped to the narrow table and
# centred, five lines that read as the title of the test-AP table below it.
EVIDENCE_NOTE: Final = (
    "these rates are what the probabilistic checker weighs (stream-detect --checker probabilistic); each step's count "
    "is drawn toward the rate of all steps pooled, the more so the fewer it has (docs/method.md), so a few validation "
    "videos give similar rates"
)


def evidence_table(evidence: EvidenceModel, class_names: tuple[str, ...], class_step_ids: tuple[int | None, ...]
                   ) -> Table:
    """A rich table of what the validation videos measured per key-step: its miss and false-detection rates."""
    videos = f"{len(evidence.videos)} video{'s' if len(evidence.videos) != 1 else ''}"
    table = Table(title=f"validation split ({videos}): how far the detections can be trusted")
    table.add_column("key-step")
    table.add_column("missed %", justify="right")
    table.add_column("false detections %", justify="right")
    name = dict(zip(class_step_ids, class_names, strict=True))
    for step, miss, false in zip(evidence.step_ids, evidence.miss_rates, evidence.false_rates, strict=True):
        table.add_row(Text(printable(name.get(step, str(step)))), f"{100 * miss:.0f}", f"{100 * false:.0f}")
    return table


STOPPED_SUFFIX: Final = ".stopped"


def stopped_path(out: Path) -> Path:
    """Where a stopped run saves its best epoch when ``--out`` held a detector already: beside it
    (``detector.stopped.pt``), since a stop is how a user abandons a retraining started with the wrong settings, and
    the detector they had is kept."""
    return out.with_name(f"{out.stem}{STOPPED_SUFFIX}{out.suffix}")


def check_replaces_a_checkpoint(out: Path) -> None:
    """Refuse an ``--out`` that names an existing file other than a checkpoint (a task graph, a label file): a run
    replaces a detector it retrains, but ``--out graph.json`` replaced the graph without a word.

    Raises:
        InputError: ``out`` holds bytes that do not begin as torch's checkpoints do (a zip archive).
    """
    start = output_start(out, len(ZIP_MAGIC))
    if start and start != ZIP_MAGIC:
        raise InputError(f"--out {out}: exists and is not a detector checkpoint (a task graph, a label file?); a "
                         "run replaces only a checkpoint: choose another name, or remove the file first")


def check_training_outputs(
    features: str | Path, config_path: str | Path | None, out: str | Path, plot: str | Path | None
) -> tuple[Path, bool, Path | None]:
    """`run_training`'s checks of the files it will write, before any training: a bad path costs no work (and the
    run cannot overwrite its own config).

    Returns:
        ``(out, existed, plot)``: the checkpoint path, whether a detector is there already (a file left empty is
        none), and the plot path (None: no plot).
    """
    folder_files = [p for p in Path(features).rglob("*") if p.is_file()] if Path(features).is_dir() else []
    out = check_output(out, "checkpoint", inputs=[config_path, *folder_files], option="--out", kind="checkpoint")
    check_replaces_a_checkpoint(out)
    # A detector there already (a file left empty is none): a stopped run would save beside it, checked as --out is.
    existed = out.is_file() and out.stat().st_size > 0
    if existed:
        check_replaces_a_checkpoint(check_output(stopped_path(out), "checkpoint of a stopped run (beside --out)",
                                                 inputs=[config_path, *folder_files], option="--out",
                                                 kind="checkpoint"))
    if plot is not None:
        check_plot_support(plot)
        if Path(plot).resolve() == out.resolve():  # neither exists yet: the plot would replace the checkpoint
            raise InputError(f"--plot {plot}: the same file as --out; choose another name for the plot")
        plot = check_output(plot, "learning-curve plot", inputs=[config_path, out, *folder_files], option="--plot")
    return out, existed, plot


def checkpoint_info(config: DetectorTrainConfig, data: FeatureDataset, outcome: TrainOutcome) -> dict[str, Any]:
    """The ``info`` a trained detector's checkpoint records: its config, splits, kept epoch and learning curve."""
    return {
        "train": config_summary(config),
        "test_map": outcome.test_map,
        "losses": list(outcome.losses),
        # Validation videos count as training videos: they chose the kept epoch (eval warns on them too).
        "train_videos": [v.name for v in data.train],
        # Beside the names, what each was (`graphs.training_sources`): eval knows a renamed copy of one, and new
        # footage under one's name, for what they are.
        "train_identities": {v.name: {"features": features_identity(v.features)}
                             | ({"video": data.video_identities[v.name]} if v.name in data.video_identities else {})
                             for v in data.train},
        # The scale the detector knows: the files fed to it later are compared with it (`scale_mismatch`).
        FEATURE_SCALE: {"largest": float(max((largest_by_row(v.features).max(initial=0.0) for v in data.train),
                                             default=0.0))},
        "validation_videos": list(outcome.validation),
        "test_videos": [v.name for v in data.test],
        "kept_epoch": outcome.kept_epoch,
        "keep_epoch": outcome.keep_by,
        "refit": outcome.refit,
        "curve": [e.as_json() for e in outcome.curve],
    }


def calibrate_for_streams(
    validation: dict[str, tuple[np.ndarray, np.ndarray]], data: FeatureDataset, config: DetectorTrainConfig
) -> tuple[ConfirmationChoice | None, SegmenterConfig, EvidenceModel | None]:
    """``(confirmation, segmenter, evidence)`` measured on the validation videos (`TrainOutcome.validation`): the
    segmenter's confirmation length (None: kept at its default) and the evidence calibration (None: no validation
    split)."""
    classes = len(data.class_step_ids)
    if not config.evidence_done_states:  # E3 from the class probabilities (e = 0)
        validation = {name: (probs[:, :classes], targets) for name, (probs, targets) in validation.items()}
    # Without a validation split nothing is measured: the probabilistic checker then asks for --default-rates,
    # and the segmenter keeps its defaults.
    segmenter = SegmenterConfig(fps=data.fps)
    confirmation = choose_confirmation(validation, data.class_step_ids, segmenter) if validation else None
    if confirmation is not None:
        segmenter = confirmation.config  # the streams' segmenter, and the detections the rates below are of
    evidence = (calibrate_evidence(validation, data.class_step_ids, data.fps, segmenter,
                                   window_s=config.evidence_window, detection_window_s=segmenter.min_duration)
                if validation else None)
    return confirmation, segmenter, evidence


def save_trained_detector(target: Path, outcome: TrainOutcome, data: FeatureDataset, info: dict[str, Any],
                          evidence: EvidenceModel | None, stopped: KeptStop) -> KeyboardInterrupt | None:
    """Write the checkpoint to ``target``, a stop while it is written held off until it is whole.

    Returns:
        The first stop that came while the file was written (the run was complete; the caller raises it after the
        report), or None.
    """
    saved_whole: KeyboardInterrupt | None = None  # a first stop while the file was written: the run was complete
    written = False
    try:
        # A stop while the file is written waits for it (under a second: one file): a half-written save would be
        # lost, and one redone elsewhere would leave the detector it had already replaced.
        with signals_deferred():
            save_detector(target, outcome.model, data.class_names, data.class_step_ids, data.feature_extractor,
                          data.fps, info, data.scenario, evidence)
            written = True
    except OSError as err:  # checked up front; this is the disk filling up or the folder changing meanwhile
        raise InputError(f"{target}: cannot write the checkpoint ({err.strerror or err})") from None
    except KeyboardInterrupt as stop:
        # A second stop abandons the tables (the file is whole); one that was not held (no `handling_signals` of
        # the caller's) cut the save short, and nothing was written.
        if stopped.stop is not None or not written:
            raise
        saved_whole = stop.with_traceback(None)
    return saved_whole


def print_training_report(console: Console, outcome: TrainOutcome, data: FeatureDataset, plot: Path | None,
                          confirmation: ConfirmationChoice | None, evidence: EvidenceModel | None,
                          target: Path) -> None:
    """`run_training`'s report: the learning curve, the validation videos, the plot, the confirmation and evidence
    measured, the test APs and where the checkpoint went."""
    console.print(curve_table(outcome.curve, outcome.kept_epoch, outcome.keep_by))
    if outcome.validation:
        console.print(printable(f"validation videos: {', '.join(outcome.validation)}"), markup=False, highlight=False)
    if outcome.refit:
        console.print(f"refit: trained again on all {len(data.train)} training videos for {outcome.kept_epoch} epochs")
    if plot is not None:
        drawn = plot_curve(outcome.curve, outcome.kept_epoch, plot)
        console.print(printable(f"learning curve drawn in {drawn}"), markup=False, highlight=False)
    if confirmation is not None and confirmation.said:
        console.print(printable(confirmation.summary()), markup=False, highlight=False)
    if evidence is not None:
        console.print(evidence_table(evidence, data.class_names, data.class_step_ids))
        console.print(EVIDENCE_NOTE, markup=False, highlight=False)
    console.print(detector_ap_table(outcome, data.class_names))
    console.print(printable(f"test mAP {100 * outcome.test_map:.1f}% — checkpoint written to {target}"),
                  markup=False, highlight=False)


def stopped_when(outcome: TrainOutcome, config: DetectorTrainConfig, during: str | None, target: Path,
                 out: Path) -> str:
    """What a run stopped by a signal says it saved: when the stop came, and which epoch ``target`` holds."""
    kept = f"epoch {outcome.kept_epoch} of those ({kept_by_rule(outcome.keep_by)})"
    if outcome.refit:
        kept += ", refit on every training video"
    when = (f"during the refit; {target} holds epoch {outcome.kept_epoch}, not refit"
            if during == "refit"
            else f"after {len(outcome.curve)} of {config.epochs} epochs; {target} holds {kept}")
    beside = f" (beside {out.name}, left as it was)" if target != out else ""
    return f"{when}{beside}"


def run_training(
    features: str | Path,
    config_path: str | Path | None,
    out: str | Path,
    progress: bool | Progress = True,
    console: Console | None = None,
    plot: str | Path | None = None,
    **overrides: Any,
) -> TrainOutcome:
    """What ``recognition-train`` does: read config and data, train, evaluate, save the checkpoint, print scores.

    The checkpoint records, besides the weights: the validation videos, the kept epoch and the learning curve (in
    ``info``), and the calibration of its evidence measured on the validation videos
    (``evidence``, `recognition.evidence_calibration.calibrate_evidence`).

    Args:
        features: the MiniROAD feature folder.
        config_path: training config file (None: `training_config_of_folder`).
        out: checkpoint to write.
        progress: show the progress bar, or a `Progress` the caller owns (`train_detector`).
        console: where to print the results table (stdout by default).
        plot: draw the learning curve into this PNG (needs the ``plot`` extra, checked before training).
        overrides: config fields to replace (``epochs``, ``seed``, ``threads``, ``val_fraction``, ``val_videos``;
            None ignored).

    Returns:
        The training outcome.

    Raises:
        KeyboardInterrupt: a signal stopped training after at least one epoch: the best epoch trained before it is
            saved (``info.interrupted``) and said, then the stop goes on (the command exits with the signal's status).
    """
    given = {name for name, value in overrides.items() if value is not None}
    tables = {} if config_path is None else read_training_tables(config_path)
    with naming_the_flags(given):  # a bad --val-fraction is named as typed, not as the settings field behind it
        if config_path is None:
            config = training_config_of_folder(features, **overrides)
        else:
            config = training_config_of_tables(tables, config_path, **overrides)
    out, existed, plot = check_training_outputs(features, config_path, out, plot)
    data = load_feature_dataset(features, config.features)
    unsplit = unsplit_feature_files(data, config.features.rgb)
    if unsplit:  # never trained or tested on: said, as every other file a command leaves unread is
        print_warning(f"{data.root / config.features.rgb}: {count_of(len(unsplit), 'feature file')} of no video "
                      f"{data.root / config.features.split} names, not read: {first_few(unsplit, 5)} (add them to "
                      "its 'train' or 'test' list to train or test on them)")
    check_recorded_extractor(tables.get("features", {}).get("extractor"), data, config.features, config_path)
    config = config.at_rate(data.fps)  # the frames the checkpoint records (its motion lag) are those trained with

    def said_stopping(epochs: int, during: str) -> None:
        # The scoring, calibration and saving that follow take a while: a second Ctrl-C abandons them, and loses
        # the run (the first one's line, at the end, says what was saved).
        doing = {"training": f"after {epochs} of {config.epochs} epochs: scoring and saving the best epoch so far",
                 "refit": "during the refit: scoring and saving the best epoch so far",
                 "scoring": f"after all {config.epochs} epochs: finishing the scoring and saving the detector"}[during]
        print_stderr(printable(f"recognition-train: stopping {doing} (Ctrl-C again to abandon it)"))

    check_calibration_videos(data, config)
    warn_one_validation_video(data, config)
    outcome = train_detector(data, config, progress=progress, on_stop=said_stopping)
    stopped = KeptStop(said_stopping, outcome.interrupted, outcome.interrupted_during)  # a stop from here on too
    info = checkpoint_info(config, data, outcome)
    confirmation, segmenter, evidence = stopped.finish(
        lambda: calibrate_for_streams(outcome.validation, data, config), len(outcome.curve))
    if segmenter != SegmenterConfig(fps=data.fps):
        info["segmenter"] = stored_settings(segmenter)

    target = stopped_path(out) if stopped.stop is not None and existed else out  # beside the detector the user had
    if stopped.stop is not None:  # the kept epoch is the best of those trained, not of config.epochs
        info["interrupted"] = {"epochs_trained": len(outcome.curve), "epochs": config.epochs, "during": stopped.during}
    saved_whole = save_trained_detector(target, outcome, data, info, evidence, stopped)
    print_training_report(console or table_console(Console()), outcome, data, plot, confirmation, evidence, target)
    if stopped.stop is not None:  # said before the interrupt's own line, which ends the output
        when = stopped_when(outcome, config, stopped.during, target, out)
        print_stderr(printable(f"recognition-train: stopped {when}"))
        raise stopped.stop
    if saved_whole is not None:
        print_stderr(printable(f"recognition-train: stopped as the detector was written; {target} holds the whole run"))
        raise saved_whole
    return outcome
