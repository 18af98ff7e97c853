"""MiniROAD feature folders (the layout of the MiniROAD code): reading, validation, training windows, and writing.

Folder layout::

    DIR/
      rgb_<type>/<video>.npy          (L, D_rgb) float features, one row per feature frame
      flow_<type>/<video>.npy         (L, D_flow), optional, concatenated after RGB
      target_perframe/<video>.npy     (L, C) one-hot 0/1 targets, class 0 = background (multi-hot rows,
                                      where classes overlap, are split evenly between their classes)
      split.json                      the video list with the train/test split

``split.json``::

    {"train": ["video_a", ...], "test": ["video_b", ...],
     "class_names": ["background", "assemble_support", ...],      # optional, one per target column
     "class_step_ids": [null, 0, 1, ...],                          # optional, null = background
     "fps": 4.0, "feature_extractor": "tsn-resnet50",              # optional, stored in the checkpoint
     "scenario": "tent",                                            # optional, stored in the checkpoint
     "augment_copies": 2,                                           # optional: rgb_<type>/<video>.aug1.npy ...
     "video_identities": {"video_a": "<64 hex digits>", ...}}       # optional: each video file's content identity

``video_identities`` (written by ``recognition-features``, `graphs.training_sources.file_identity`) identifies the
video file each video's features were extracted from; the checkpoint records those of its training videos, so that
``stream-detect eval`` knows a copy of one under another name, and new footage under an old name, for what they are.

``augment_copies`` (``recognition-features --augment-copies K``) says that each training video also has ``K``
features of augmented copies of its frames (`copy_file_name`), frame for frame with the original, sharing its targets.

The trainer carves its validation split from the training videos (`choose_validation_videos`), never from the test
split.

MiniROAD's own ``train_session_set`` / ``test_session_set`` keys are accepted for the lists. Every
problem (a missing file, lengths that disagree, NaN, a target row that is not a class) is an
`InputError` naming the video; problems of ``split.json`` (class lists, fps) are `InputError`s naming it.

Writing (`segment_targets`, `write_features`, `write_targets`, `write_split`): every file is written atomically, so an
interrupted writer leaves each file whole or absent, never half written.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shlex
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Final

import numpy as np

from graphs.annotations import Annotations
from graphs.common.array_files import FLOAT_KINDS, REAL_KINDS, npy_shape, read_npy
from graphs.common.errors import InputError
from graphs.common.file_kinds import mistaken_file
from graphs.common.files import atomic_path, not_a_folder, read_json, write_text
from graphs.common.options import MAX_FPS
from graphs.common.safe_text import count_of, first_few, meant_name, printable, quoted
from graphs.common.settings_files import Bound, as_written, check_settings
from graphs.limits import MAX_NAME, STEP_ID_RULE, is_step_id, name_fault
from graphs.training_sources import is_identity
from recognition.segment_metrics import TimedSegment

TARGETS_DIR = "target_perframe"
SPLIT_FILE = "split.json"
MANIFEST: Final = "extraction.json"  # recognition-features' record of what it extracted, to resume (its own format)
MAX_AUGMENT_COPIES = 32  # each copy costs a full extraction of every training video


DEFAULT_FPS: Final = 4.0  # feature frames per second of a folder whose split file and config give none


@dataclass(frozen=True)
class FeatureConfig:
    """Which feature streams of a MiniROAD folder to read.

    Attributes:
        rgb: name of the RGB feature folder (``rgb_kinetics_resnet50``...).
        flow: name of the optical-flow folder, or ``""`` for RGB only.
        split: name of the split file inside the folder.
        extractor: feature extractor name stored in checkpoints when the split file names none.
        fps: feature frames per second when the split file gives none (None: `DEFAULT_FPS`); a split file that gives
            another is refused, not overruled: the rate a folder's features were written at is theirs.
    """

    rgb: str = "rgb_kinetics_resnet50"
    flow: str = ""
    split: str = SPLIT_FILE
    extractor: str = "tsn-resnet50"
    fps: float | None = None

    # Bounded as a checkpoint's fps is: 5000 trained a detector that could not then be saved (`check_settings`).
    BOUNDS: ClassVar[Mapping[str, Bound]] = {
        "fps": Bound(0, MAX_FPS, open_low=True, note="or left out: the split file's"),
    }

    def __post_init__(self) -> None:
        check_settings(self)
        if not isinstance(self.rgb, str) or not self.rgb:
            raise InputError(f"FeatureConfig.rgb = {as_written(self.rgb)}: must name the RGB feature folder")
        if not isinstance(self.flow, str):
            raise InputError(f"FeatureConfig.flow = {as_written(self.flow)}: must be a folder name or empty")
        if not isinstance(self.split, str) or not self.split:
            raise InputError(f"FeatureConfig.split = {as_written(self.split)}: must name the split file")
        if not isinstance(self.extractor, str) or not self.extractor:
            raise InputError(f"FeatureConfig.extractor = {as_written(self.extractor)}: must be a name")


@dataclass(frozen=True)
class VideoFeatures:
    """One video: features ``(L, D)`` float32 and targets ``(L, C)`` float32 (rows sum to 1).

    ``copies`` holds the features ``(L, D)`` of its augmented copies (training videos of a folder written with
    ``--augment-copies``; empty otherwise). ``source`` names the file(s) the features were read from, as errors about
    them say it (empty: the video's name is said).
    """

    name: str
    features: np.ndarray
    targets: np.ndarray
    copies: tuple[np.ndarray, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class FeatureDataset:
    """A validated MiniROAD folder split into train and test videos.

    Attributes:
        root: the folder.
        train: training videos.
        test: test videos.
        class_names: one name per target column.
        class_step_ids: step id per class, None for background.
        feature_extractor: what produced the features.
        fps: feature frames per second.
        scenario: the procedure the videos execute (None when ``split.json`` names none).
        video_identities: video name -> the content identity of the video file its features were extracted from
            (``split.json``'s, `SplitFile.video_identities`), which the checkpoint records of its training videos.
    """

    root: Path
    train: tuple[VideoFeatures, ...]
    test: tuple[VideoFeatures, ...]
    class_names: tuple[str, ...]
    class_step_ids: tuple[int | None, ...]
    feature_extractor: str
    fps: float
    scenario: str | None = None
    video_identities: Mapping[str, str] = field(default_factory=dict)

    @property
    def input_dim(self) -> int:
        """Feature width ``D``."""
        return int(self.train[0].features.shape[1])

    @property
    def num_classes(self) -> int:
        """Number of classes ``C`` (background included)."""
        return int(self.train[0].targets.shape[1])


def _load_array(path: Path, video: str, what: str, kinds: str = FLOAT_KINDS) -> np.ndarray:
    if not path.exists() and not path.is_symlink():
        raise InputError(f"video {video!r}: {what} file {path} is missing")
    # Real numbers only: complex values would lose their imaginary part in the float32 cast without a word.
    try:
        array = read_npy(path, what, ndim=2, kinds=kinds)
    except InputError as err:
        raise InputError(f"video {video!r}: {err}") from None
    if 0 in array.shape:  # no width either: the model's config refused "input_dim = 0", naming no file
        raise InputError(f"video {video!r}: {what} in {path} has shape {array.shape}, expected (frames, width) with "
                         "both > 0")
    return array


def load_video(root: Path, video: str, config: FeatureConfig) -> VideoFeatures:
    """Read and check one video's features and targets.

    Args:
        root: the MiniROAD folder.
        video: video name (file stem).
        config: which feature folders to read.

    Returns:
        The video's arrays.

    Raises:
        InputError: missing files, mismatched lengths, NaN/inf features, bad target rows.
    """
    paths = [root / config.rgb / f"{video}.npy", *([root / config.flow / f"{video}.npy"] if config.flow else [])]
    streams = [_load_array(path, video, what)
               for path, what in zip(paths, ("RGB features", "flow features"), strict=False)]
    target_path = root / TARGETS_DIR / f"{video}.npy"
    targets = _load_array(target_path, video, "targets", REAL_KINDS + "b")
    lengths = {len(s) for s in streams} | {len(targets)}
    if len(lengths) != 1:
        parts = ", ".join(f"{n} {len(a)}" for n, a in zip(("rgb", "flow"), streams, strict=False))
        files = ", ".join(str(path) for path in (*paths, target_path))
        raise InputError(f"video {video!r}: frame counts disagree ({parts}, targets {len(targets)}) in {files}")
    # Each file on its own, after the float32 cast (a float64 beyond float32's range becomes inf): the error names it.
    arrays = [stream.astype(np.float32) for stream in streams]
    for path, array in zip(paths, arrays, strict=True):
        finite = np.isfinite(array).all(axis=1)
        if not finite.all():
            raise InputError(f"video {video!r}: {path}: features contain NaN or infinity (first at frame "
                             f"{int(np.flatnonzero(~finite)[0])})")
    features = np.concatenate(arrays, axis=1)
    targets = targets.astype(np.float32)
    # Rows are one-hot, or multi-hot where classes overlap (THUMOS: every CliffDiving frame is also Diving);
    # anything else (probabilities, counts, label indices) is not a target row.
    not_binary = ((targets != 0) & (targets != 1)).any(axis=1)
    if not_binary.any():
        row = int(np.flatnonzero(not_binary)[0])
        value = targets[row][(targets[row] != 0) & (targets[row] != 1)][0]
        raise InputError(f"video {video!r}: {target_path}: target row {row} holds {float(value):g}; targets must be "
                         "one-hot 0/1 rows")
    row_sum = targets.sum(axis=1)
    empty = row_sum == 0
    if empty.any():
        raise InputError(
            f"video {video!r}: {target_path}: target row {int(np.flatnonzero(empty)[0])} is not a class (needs a "
            f"one-hot row; the file has {targets.shape[1]} columns: a file cut short to fewer classes empties rows)"
        )
    # Background (class 0) with a key-step on one frame contradicts itself: split evenly it would train half a
    # background frame and score a step as half missed. Overlapping key-step classes stay (THUMOS).
    both = (targets[:, 0] > 0) & (row_sum > 1) if targets.shape[1] > 1 else np.zeros(len(targets), dtype=bool)
    if both.any():
        row = int(np.flatnonzero(both)[0])
        raise InputError(f"video {video!r}: {target_path}: target row {row} marks background (class 0) and a "
                         "key-step class together; a frame is background or shows key-steps")
    return VideoFeatures(video, features, targets / row_sum[:, None],  # a multi-hot row is split evenly
                         source=", ".join(str(path) for path in paths))


@dataclass(frozen=True)
class SplitFile:
    """A checked ``split.json`` (this module's, or MiniROAD's ``*_session_set`` keys): the one loader of split files.

    Attributes:
        path: the file, as errors name it.
        train: training video names, as listed.
        test: test video names, as listed.
        class_names: one name per target column, or None when the file gives none.
        class_step_ids: task-graph step id per column (None for background), or None when the file gives none.
        fps: feature frames per second, or None.
        feature_extractor: the extractor's name, or None.
        scenario: the procedure, or None.
        augment_copies: augmented feature copies of each training video (`copy_file_name`; 0: none).
        video_identities: video name -> the content identity of the video file its features were extracted from
            (`graphs.training_sources.file_identity`); empty when the file records none (imported features, older
            folders).
    """

    path: str
    train: tuple[str, ...]
    test: tuple[str, ...]
    class_names: tuple[str, ...] | None = None
    class_step_ids: tuple[int | None, ...] | None = None
    fps: float | None = None
    feature_extractor: str | None = None
    scenario: str | None = None
    augment_copies: int = 0
    video_identities: Mapping[str, str] = field(default_factory=dict)


def _video_names(split: dict[str, object], key: str, src: str) -> tuple[str, ...]:
    """One video list: ``key`` or MiniROAD's ``<key>_session_set``; names are file names (no folder, no '..')."""
    value = split.get(key, split.get(f"{key}_session_set"))
    if value is None:
        raise InputError(f"{src}: missing field {key!r} (a list of video names)")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{src}: field {key!r} must be a list of video names")
    for name in value:
        if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name or len(name) > MAX_NAME:
            raise InputError(f"{src}: field {key!r}: {quoted(name)} is not a video name (a file name without a folder)")
    twice = _first_repeat(value)
    if twice is not None:
        raise InputError(f"{src}: field {key!r} names video {quoted(twice)} twice")
    return tuple(value)


def _first_repeat(values: list[Any]) -> Any:
    """The first value met a second time (in one pass: a list of 10^5 names costs no more than reading it)."""
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


def load_split(path: str | Path, option: str = "") -> SplitFile:
    """Read and check a split file: every field it has, whatever the bytes (`SplitFile`).

    Args:
        path: the file.
        option: the option that gave it (``"--split"``), named in errors with the path.

    Returns:
        The checked split.

    Raises:
        InputError: the file is missing, unreadable or not JSON; a list is missing or not of names; a video is
            named twice or in both lists; an optional field has the wrong type.
    """
    src = f"{option} {path}" if option else str(path)
    try:
        split = read_json(path, "split file")
    except InputError as err:  # the file's own faults, with the option that gave it
        within = Path(path) / SPLIT_FILE  # the feature folder given for its split: the file is named
        hint = f" (its {within}?)" if Path(path).is_dir() and within.is_file() else ""
        raise InputError((f"{option} {err}" if option else str(err)) + hint) from None
    # An annotation file given as the split said only "missing field 'train'", where --graph names the kind.
    wrong = mistaken_file(split, "split", src, "; give the split.json that recognition-features wrote in its feature "
                          "folder")
    if wrong is not None:
        raise InputError(wrong)
    if not isinstance(split, dict):
        raise InputError(f"{src}: expected an object with 'train' and 'test' lists")
    train, test = _video_names(split, "train", src), _video_names(split, "test", src)
    both = next((v for v in test if v in set(train)), None)
    if both is not None:
        raise InputError(f"{src}: video {quoted(both)} is listed in both 'train' and 'test'")
    names = split.get("class_names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) and len(n) <= MAX_NAME
                                                                       for n in names)):
        raise InputError(f"{src}: field 'class_names' must be a list of names (at most {MAX_NAME} characters)")
    for i, name in enumerate(names or ()):  # the checkpoint refuses such a name: after training, naming no file
        fault = name_fault(name)
        if fault is not None:
            raise InputError(f"{src}: field 'class_names'[{i}] {fault}")
    step_ids = split.get("class_step_ids")
    if step_ids is not None and (not isinstance(step_ids, list)
                                 or not all(s is None or is_step_id(s) for s in step_ids)):
        raise InputError(f"{src}: field 'class_step_ids' must hold step ids ({STEP_ID_RULE}) or null")
    if step_ids is not None:
        twice_id = _first_repeat([s for s in step_ids if s is not None])
        if twice_id is not None:
            raise InputError(f"{src}: 'class_step_ids' gives step id {twice_id} to two classes")
    fps = split.get("fps")
    if fps is not None and (isinstance(fps, bool) or not isinstance(fps, int | float) or not math.isfinite(fps)
                            or not 0 < fps <= MAX_FPS):  # 1e9 was refused later, as a config option's fault
        raise InputError(f"{src}: field 'fps' = {as_written(fps, 60)} must be a number > 0 and at most {MAX_FPS:g}")
    extractor = split.get("feature_extractor")
    if extractor is not None and (not isinstance(extractor, str) or not extractor or len(extractor) > MAX_NAME):
        raise InputError(f"{src}: field 'feature_extractor' must be a name")
    scenario = split.get("scenario")
    if scenario is not None and (not isinstance(scenario, str) or len(scenario) > MAX_NAME):
        raise InputError(f"{src}: field 'scenario' must be a name or null")
    copies = split.get("augment_copies", 0)
    if isinstance(copies, bool) or not isinstance(copies, int) or not 0 <= copies <= MAX_AUGMENT_COPIES:
        raise InputError(f"{src}: field 'augment_copies' = {as_written(copies, 40)} must be an integer in "
                         f"0..{MAX_AUGMENT_COPIES}")
    identities = split.get("video_identities", {})
    if not isinstance(identities, dict) or not all(is_identity(value) for value in identities.values()):
        raise InputError(f"{src}: field 'video_identities' must map video names to content identities (64 lowercase "
                         "hexadecimal digits each, as recognition-features writes them)")
    return SplitFile(src, train, test, None if names is None else tuple(names),
                     None if step_ids is None else tuple(step_ids), None if fps is None else float(fps),
                     extractor, scenario or None, copies, dict(identities))


def check_extraction_finished(root: Path, rgb: str, split: SplitFile) -> None:
    """Refuse a ``recognition-features`` folder whose extraction stopped before some of its videos.

    ``split.json`` is written first, so an interrupted run leaves a split that lists videos with no features yet, or
    (stopped within a video) features without their augmented copies or targets: said as that, with the way to
    finish it, instead of "file missing" for the first of them.

    Raises:
        InputError: a folder with an extraction manifest (`MANIFEST`) lacks a file of some videos.
    """
    if not (root / MANIFEST).is_file():  # imported or written by hand: load_video names the file missing
        return
    videos = (*split.train, *split.test)

    def written(video: str) -> bool:
        copies = split.augment_copies if video in split.train else 0
        files = [root / rgb / f"{video}.npy", root / TARGETS_DIR / f"{video}.npy",
                 *(root / rgb / copy_file_name(video, k) for k in range(1, copies + 1))]
        return all(path.exists() for path in files)

    missing = [v for v in videos if not written(v)]
    if missing:
        raise InputError(f"{root}: {len(missing)} of the {len(videos)} videos {Path(split.path).name} lists are not "
                         f"all written yet ({first_few([printable(v) for v in missing], SHOWN_NAMES)}): the "
                         "extraction into it did not finish; run recognition-features again with the same options "
                         "to extract the rest")


def load_feature_dataset(root: str | Path, config: FeatureConfig | None = None) -> FeatureDataset:
    """Read a whole MiniROAD folder: the split file and every listed video.

    Args:
        root: the folder.
        config: feature folders and defaults.

    Returns:
        The validated dataset (all videos agree on feature width and number of classes).
    """
    config = config or FeatureConfig()
    root = Path(root)
    why = not_a_folder(root, "a features folder")
    if why is not None:
        raise InputError(f"{root}: {why}")
    split = load_split(root / config.split)
    src = split.path
    if split.fps is not None and config.fps is not None and split.fps != config.fps:  # it was overruled unsaid
        raise InputError(f"{src}: records {split.fps:g} feature vectors a second, the training config's [features] "
                         f"fps {config.fps:g}: leave fps out of the config (a folder's rate is the one its features "
                         "were written at)")
    if not split.train or not split.test:
        raise InputError(f"{src}: both 'train' and 'test' must list at least one video")
    for kind, folder in (("RGB", config.rgb), ("flow", config.flow)):
        if folder and not (root / folder).is_dir():
            # The name comes from a settings file's [features] table or split.json's extractor: say what is there.
            held = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith(("rgb_", "flow_")))
            raise InputError(f"{root}: {kind} feature folder {folder!r} not found (the folder holds "
                             f"{', '.join(held) if held else 'no rgb_* or flow_* folder'}; the name is --config's "
                             "[features] rgb or flow, or without one rgb_ and split.json's feature_extractor)"
                             f"{meant_name(folder, held, 0)}")
    check_extraction_finished(root, config.rgb, split)
    train = tuple(load_video(root, v, config) for v in split.train)
    test = tuple(load_video(root, v, config) for v in split.test)
    # The width and class count most videos share are the folder's: the file named is the odd one out. Checked
    # before the copies are read, which are compared with their video: a cut video blamed its whole copy.
    width = Counter(v.features.shape[1] for v in train + test).most_common(1)[0][0]
    n_cls = Counter(v.targets.shape[1] for v in train + test).most_common(1)[0][0]
    for video in train + test:
        if video.features.shape[1] != width:
            raise InputError(f"video {video.name!r}: {root / config.rgb / video.name}.npy: feature width "
                             f"{video.features.shape[1]}, the folder's other videos have {width}")
        if video.targets.shape[1] != n_cls:
            raise InputError(f"video {video.name!r}: {root / TARGETS_DIR / video.name}.npy: "
                             f"{video.targets.shape[1]} target classes, others have {n_cls}")
    if n_cls < 2:  # else refused by the model's config, "MiniROADConfig.num_classes = 1", naming no file
        raise InputError(f"{root / TARGETS_DIR}: the targets have {n_cls} column; a detector tells at least 2 classes "
                         "apart (background and a key-step, or two key-steps)")
    if split.augment_copies:
        train = tuple(with_copies(root, video, config, split.augment_copies) for video in train)
    # Everything the checkpoint will hold is checked here, before training, not when it is saved.
    names = split.class_names or ("background", *(f"class_{c}" for c in range(1, n_cls)))
    step_ids = split.class_step_ids or (None, *range(1, n_cls))
    if len(names) != n_cls or len(step_ids) != n_cls:
        raise InputError(f"{src}: 'class_names'/'class_step_ids' must have {n_cls} entries (one per target column)")
    return FeatureDataset(root, train, test, tuple(names), tuple(step_ids), features_extractor(split, config),
                          split.fps or config.fps or DEFAULT_FPS, split.scenario, split.video_identities)


def unsplit_feature_files(data: FeatureDataset, rgb: str) -> list[str]:
    """The ``.npy`` files of a folder's RGB features that its split file names no video of (neither a video's
    features nor one of its `copy_file_name` copies, those it reads and those left by earlier runs), in name order:
    a video's features copied in by hand, the split left as it was, which recognition-train then never trained or
    tested on, without a word.

    Args:
        data: the loaded folder (`load_feature_dataset`).
        rgb: its RGB feature folder's name.
    """
    videos = {v.name for v in data.train + data.test}

    def own(name: str) -> bool:
        # Any copy of a video of the split is the folder's own, read or not: recognition-features writes copies of
        # training videos only and deletes none, so a split drawn again (a former training video now held out) or
        # a run with fewer --augment-copies leaves some behind; no list of split.json could name them.
        stem = name.removesuffix(".npy")
        return stem in videos or copy_of(stem) in videos

    try:
        return sorted(p.name for p in (data.root / rgb).iterdir() if p.name.endswith(".npy") and not own(p.name))
    except OSError:  # the folder was read a moment ago: gone since, the next run says so
        return []


def features_extractor(split: SplitFile, config: FeatureConfig) -> str:
    """The extractor a checkpoint records for the features ``config`` reads: the split file's, unless it names another.

    One folder may hold several extractors' features (``rgb_efficientnet-lite0/``, ``rgb_efficientnet-lite0-grid/``:
    `recognition-features` run twice into it), and its split file names the one written last. A config that reads
    ``rgb_<its extractor>`` while the split file names another extractor trains on its own extractor's features:
    recording the split file's would give a checkpoint the live pipeline cannot feed (a width mismatch at start-up).
    """
    named = split.feature_extractor
    if named and config.rgb != f"rgb_{named}" and config.rgb == f"rgb_{config.extractor}":
        return config.extractor
    return named or config.extractor


def copy_file_name(video: str, copy: int) -> str:
    """File name of augmented copy ``copy`` (1, 2, ...) of a video's features: ``<video>.aug<copy>.npy``."""
    return f"{video}.aug{copy}.npy"


_COPY_STEM: Final = re.compile(r"(.+)\.aug[0-9]+")  # <video>.aug<k>, as `copy_file_name` names it


def copy_of(stem: str) -> str | None:
    """The video whose augmented copy a file stem names (``video_01`` for ``video_01.aug2``), or None."""
    match = _COPY_STEM.fullmatch(stem)
    return match.group(1) if match is not None else None


def with_copies(root: Path, video: VideoFeatures, config: FeatureConfig, count: int) -> VideoFeatures:
    """A training video with the features of its ``count`` augmented copies read (`copy_file_name`).

    Copies are of the RGB stream; a flow stream, if any, is the original's, concatenated after each copy.

    Raises:
        InputError: a copy is missing, unreadable, of another length than the video, or not finite.
    """
    copies = []
    # A copy is as wide as its video's RGB features: a narrower one was padded with the original's columns. With flow
    # those are the first columns of the video's features; the RGB file says how many (its header: nothing read).
    own = (video.features.shape[1] if not config.flow else
           npy_shape(root / config.rgb / f"{video.name}.npy", f"video {video.name!r}: RGB features")[1])
    for k in range(1, count + 1):
        path = root / config.rgb / copy_file_name(video.name, k)
        array = _load_array(path, video.name, f"features of augmented copy {k}").astype(np.float32)
        rgb_width = array.shape[1]
        if array.shape[0] != len(video.features) or rgb_width != own:
            raise InputError(f"video {video.name!r}: augmented copy {path} has shape {array.shape}, the video's "
                             f"RGB features {(len(video.features), own)}")
        if not np.all(np.isfinite(array)):
            raise InputError(f"video {video.name!r}: augmented copy {path} contains NaN or infinity")
        copies.append(np.concatenate([array, video.features[:, rgb_width:]], axis=1))
    return replace(video, copies=tuple(copies))


def validation_count(videos: int, fraction: float) -> int:
    """How many of ``videos`` training videos the validation draw of `choose_validation_videos` holds out:
    ``max(1, round(fraction * videos))``, half up."""
    return max(1, math.floor(fraction * videos + 0.5))


def choose_validation_videos(
    train: Sequence[str], fraction: float, named: Sequence[str] = (), seed: int = 0, test: Sequence[str] = ()
) -> tuple[str, ...]:
    """The validation split, carved from the training videos: the ``named`` ones, or a seeded draw of a fraction.

    `validation_count` videos (``max(1, round(fraction * n))``, half up) of the ``n`` training videos, drawn with
    ``numpy.random.default_rng(seed)`` from the sorted names, so the same folder and seed give the same split.

    Args:
        train: the training videos (``split.json``'s ``train`` list).
        fraction: share held out, in ``[0, 1)``; 0 (with nothing named) turns validation off.
        named: the validation videos by name (overrides ``fraction``).
        seed: seeds the draw.
        test: the test videos, so that naming one is refused as such.

    Returns:
        The validation video names, in training-list order; empty only when validation is off.

    Raises:
        InputError: a named video that is not a training video, a split that would be empty (one training video)
            or would leave no video to train on.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 <= fraction < 1:
        raise InputError(f"--val-fraction {fraction!r}: must be in [0, 1) (0: no validation split)")
    if named:
        for name in named:
            if name in test:
                raise InputError(f"--val-videos: {name!r} is a test video; the validation split is carved from "
                                 "the training videos, never from the test split")
            if name not in train:
                # The hint leaves out the videos already named: "video_3" beside "video_03" must not point there.
                raise InputError(f"--val-videos: {printable(name)!r} is not a training video of the feature folder"
                                 f"{meant_name(name, [t for t in train if t not in named])}")
        if len(set(named)) != len(named):
            raise InputError(f"--val-videos {','.join(named)}: a video is named twice")
        chosen = set(named)
        what = f"--val-videos {','.join(named)}"
    elif fraction == 0:
        return ()
    else:
        if len(train) < 2:
            raise InputError(
                f"--val-fraction {fraction:g}: the validation split would be empty: the feature folder has "
                f"{len(train)} training video and it is needed for training; add training videos, or pass "
                "--val-fraction 0 to train without validation (no early stopping: the last epoch is kept)"
            )
        count = validation_count(len(train), fraction)
        rng = np.random.default_rng(seed)
        chosen = set(rng.choice(sorted(train), size=min(count, len(train)), replace=False).tolist())
        what = f"--val-fraction {fraction:g} of {len(train)} training videos"
    if len(chosen) >= len(train):
        raise InputError(f"{what}: no video would be left for training; lower it")
    return tuple(v for v in train if v in chosen)


def window_index(
    lengths: Sequence[int], window: int, rng: np.random.Generator | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Frame indices of fixed-length training windows (MiniROAD trains on 128 frames) over concatenated videos.

    Each video is cut at a random offset (a fresh one per epoch when ``rng`` is given) so that
    window borders move between epochs; the frames before the offset form a shorter first window.
    Windows never cross a video border; short ones are padded (``valid`` false there).

    Args:
        lengths: frame count of each video, in concatenation order.
        window: window length in frames.
        rng: random offsets when given, offset 0 otherwise.

    Returns:
        ``(index (N, W), valid (N, W))``: rows into the concatenated frames (0 where padded), with
        ``W = min(window, longest video)``.
    """
    lengths_arr = np.asarray(lengths, dtype=np.int64)
    video_start = np.r_[0, np.cumsum(lengths_arr)[:-1]]
    offsets = rng.integers(0, window, size=len(lengths_arr)) if rng is not None else np.zeros(len(lengths_arr), int)
    offsets = np.minimum(offsets, lengths_arr)
    # Window starts per video: 0 (if offset > 0), then offset, offset + window, ... < length.
    starts_list = [
        np.r_[[0] if o > 0 else [], np.arange(o, n, window)].astype(np.int64)
        for o, n in zip(offsets.tolist(), lengths_arr.tolist(), strict=True)
    ]
    ends_list = [np.r_[s[1:], n] for s, n in zip(starts_list, lengths_arr.tolist(), strict=True)]
    starts = np.concatenate([s + b for s, b in zip(starts_list, video_start, strict=True)])
    ends = np.concatenate([e + b for e, b in zip(ends_list, video_start, strict=True)])
    # No window holds more frames than the longest video: a window far longer than every video (a typo such
    # as 100000) would otherwise allocate (N, window) indices of pure padding, which the loss skips anyway.
    width = min(window, int(lengths_arr.max(initial=1)))
    idx = starts[:, None] + np.arange(width)[None, :]  # (N, width)
    valid = idx < ends[:, None]
    return np.where(valid, idx, 0), valid


def segment_owners(times: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which segment each frame shows: among the segments with ``start <= t < end``, the one that started last (the
    rule for overlapping segments, docs/data-and-citations.md); -1 outside every segment.

    Painting each segment over the frames in start order, later over earlier, gives the same result; it is done
    here in ``O(S + L log L)`` without a loop over segments: frame range ``[lo, hi)`` of segment ``j`` is covered by
    the two power-of-two blocks ``[lo, lo + 2^k)`` and ``[hi - 2^k, hi)`` with ``2^k <= hi - lo < 2^(k+1)``; each
    block level keeps the largest segment index given to a block (``np.maximum.at``), and a level passes its
    blocks' maxima down to both halves, as in a sparse table read backwards.

    Args:
        times: ``(L,)`` seconds at which each frame was shown, in any order.
        starts: ``(S,)`` segment starts in seconds, in time order (start, then file order: a later index started
            later).
        ends: ``(S,)`` segment ends in seconds.

    Returns:
        ``(L,)`` int64 segment index per frame, -1 for background.
    """
    times = np.asarray(times, dtype=np.float64)
    order = np.argsort(times, kind="stable")
    sorted_times = times[order]
    lo = np.searchsorted(sorted_times, np.asarray(starts, dtype=np.float64), side="left")  # first frame t >= start
    hi = np.searchsorted(sorted_times, np.asarray(ends, dtype=np.float64), side="left")  # first frame t >= end
    index = np.arange(len(lo), dtype=np.int64)
    keep = hi > lo  # segments that cover at least one frame
    lo, hi, index = lo[keep], hi[keep], index[keep]
    owner = np.full(len(times), -1, dtype=np.int64)
    if len(index) == 0:
        return owner
    level = np.floor(np.log2(hi - lo)).astype(np.int64)  # (S,) block level of each segment
    blocks = np.full(len(times), -1, dtype=np.int64)  # blocks[i]: owner of the block of the current level at i
    for k in range(int(level.max()), -1, -1):
        if k < int(level.max()):  # pass the level above's blocks down to their two halves
            half = 1 << k
            blocks[half:] = np.maximum(blocks[half:], blocks[:-half])
        mine = level == k
        np.maximum.at(blocks, lo[mine], index[mine])
        np.maximum.at(blocks, hi[mine] - (1 << k), index[mine])
    owner[order] = blocks
    return owner


def segment_targets(
    times: np.ndarray, starts: np.ndarray, ends: np.ndarray, classes: np.ndarray, num_classes: int
) -> np.ndarray:
    """One-hot per-frame targets from labelled segments: a frame shown at time ``t`` belongs to the segment with
    ``start <= t < end`` that started last (segments may overlap: `segment_owners`), and to class 0 (background)
    outside every segment.

    Args:
        times: ``(L,)`` seconds at which each feature frame was shown.
        starts: ``(S,)`` segment starts in seconds, in time order (`graphs.annotations.time_order`).
        ends: ``(S,)`` segment ends in seconds.
        classes: ``(S,)`` class index of each segment, in ``1..num_classes-1``.
        num_classes: columns of the result, background included.

    Returns:
        ``(L, num_classes)`` float32 one-hot rows.
    """
    owner = segment_owners(times, starts, ends)  # (L,)
    with_background = np.concatenate([np.asarray(classes, dtype=np.int64), [0]])  # owner -1 reads the last: class 0
    labels = with_background[owner]
    return np.eye(num_classes, dtype=np.float32)[labels]


def _save_array(root: str | Path, path: Path, array: np.ndarray) -> None:
    # Inside the feature folder the user named: a link planted at the file or at its sub-folder is refused.
    with atomic_path(path, what="feature array", inside=root) as tmp, open(tmp, "xb") as handle:
        np.save(handle, array, allow_pickle=False)  # to a handle: no ".npy" appended


FINITE_BLOCK_BYTES: Final = 2**24  # a stored file's values are checked this many bytes at a time, whatever its size


def stored_width(folder: Path) -> int | None:
    """The width most ``.npy`` files of a folder share, from their headers (None without a readable one): what a
    resumed run holds each kept file to, the extractor being loaded only if some video needs it."""
    widths = Counter[int]()
    for path in folder.glob("*.npy") if folder.is_dir() else ():
        with contextlib.suppress(InputError):  # a damaged file is found again, and named, when its video comes
            widths[npy_shape(path, "features")[1]] += 1
    return widths.most_common(1)[0][0] if widths else None


def stored_features_fault(path: Path, rows: int, width: int | None = None) -> str:
    """Why a feature file that an earlier run wrote cannot be kept by a run resuming the folder ("" when it can).

    The header is read first (`npy_shape`: a damaged or cut-short file is never loaded), then the values through a
    memory map, a block of rows at a time: NaN or infinity (a disk error, a hand edit) is what ``recognition-train``
    refuses in the folder later, so a resumed run extracts the file again instead of keeping it.

    Args:
        path: the features file.
        rows: the frames the run recorded for it.
        width: the width the folder's other files share (`stored_width`; None: not checked).

    Returns:
        ``"damaged or cut short"``, ``"N rows, not the M recorded"``, ``"N wide, not the folder's W"``,
        ``"non-finite values"``, or ``""``.
    """
    try:
        shape = npy_shape(path, "features")
    except InputError:
        return "damaged or cut short"
    if shape[0] != rows:
        return f"{shape[0]} rows, not the {rows} recorded"
    if width is not None and shape[1] != width:  # recognition-train refuses a folder of two widths
        return f"{shape[1]} wide, not the folder's {width}"
    return "" if _all_finite(path) else "non-finite values"


def _all_finite(path: Path) -> bool:
    """Whether every value of a checked ``.npy`` file is finite; an unreadable one is not."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):  # the file changed or vanished since its header was read
        return False
    step = max(1, FINITE_BLOCK_BYTES // max(1, array[:1].nbytes))
    return all(bool(np.isfinite(array[k : k + step]).all()) for k in range(0, len(array), step))


def write_features(root: str | Path, rgb: str, video: str, features: np.ndarray) -> Path:
    """Write one video's features into a MiniROAD folder (atomically).

    Args:
        root: the folder.
        rgb: name of the RGB feature folder (``rgb_<extractor>``).
        video: video name (file stem).
        features: ``(L, D)``, stored as float32.

    Returns:
        The file written.
    """
    path = Path(root) / rgb / f"{video}.npy"
    _save_array(root, path, np.asarray(features, dtype=np.float32))
    return path


def write_targets(root: str | Path, video: str, targets: np.ndarray) -> Path:
    """Write one video's per-frame targets into a MiniROAD folder (atomically).

    Args:
        root: the folder.
        video: video name (file stem).
        targets: ``(L, C)`` one-hot, stored as float32.

    Returns:
        The file written.
    """
    path = Path(root) / TARGETS_DIR / f"{video}.npy"
    _save_array(root, path, np.asarray(targets, dtype=np.float32))
    return path


def write_split(
    root: str | Path,
    train: Sequence[str],
    test: Sequence[str],
    class_names: Sequence[str],
    class_step_ids: Sequence[int | None],
    fps: float,
    feature_extractor: str,
    scenario: str | None = None,
    augment_copies: int = 0,
    video_identities: Mapping[str, str] | None = None,
) -> Path:
    """Write ``split.json`` (atomically) with the lists and everything a checkpoint will record.

    Args:
        root: the folder.
        train: training video names.
        test: test video names.
        class_names: one per target column (``"background"`` first).
        class_step_ids: task-graph step id per column, None for background.
        fps: feature frames per second.
        feature_extractor: the extractor's name.
        scenario: the procedure the videos execute (recorded in the checkpoints trained on the folder).
        augment_copies: augmented copies of each training video's features (`copy_file_name`; 0: none).
        video_identities: video name -> content identity of its video file (`graphs.training_sources.file_identity`;
            None: the features came from no video file the command read).

    Returns:
        The file written.
    """
    split = {
        "train": list(train),
        "test": list(test),
        "class_names": list(class_names),
        "class_step_ids": list(class_step_ids),
        "fps": float(fps),
        "feature_extractor": feature_extractor,
        "scenario": scenario,
    }
    if augment_copies:
        split["augment_copies"] = augment_copies
    if video_identities:
        split["video_identities"] = dict(video_identities)
    return write_text(Path(root) / SPLIT_FILE, json.dumps(split, indent=1), "split file")


def step_targets(times: np.ndarray, segments: Sequence[TimedSegment], step_ids: Sequence[int]) -> np.ndarray:
    """A video's one-hot targets ``(L, 1 + len(step_ids))`` at its frame times: class ``k + 1`` is ``step_ids[k]``,
    class 0 background (`segment_targets`, whose rule settles overlapping segments).

    Args:
        times: ``(L,)`` seconds at which each feature frame was shown.
        segments: the video's segments in time order (`graphs.annotations.time_order`).
        step_ids: the scenario's key-steps in taxonomy order.

    Returns:
        ``(L, C)`` float32 one-hot rows.
    """
    class_of = {step: k + 1 for k, step in enumerate(step_ids)}
    starts = np.array([s.start for s in segments], dtype=np.float64)
    ends = np.array([s.end for s in segments], dtype=np.float64)
    classes = np.array([class_of[s.step] for s in segments], dtype=np.int64)
    return segment_targets(np.asarray(times, dtype=np.float64), starts, ends, classes, len(step_ids) + 1)


# How far a recording's annotated steps may run past its feature file's last vector when a benchmark or eval reads
# them: public annotations end past the last whole second a per-second file holds (0.95 s on CaptainCook4D's 17_19)
# and annotation tools round; a file cut short or read at the wrong rate misses by minutes.
ANNOTATION_SLACK_S: Final = 5.0


def check_segments_fit(segments: Sequence[TimedSegment], duration: float, slack: float, src: str, video: str) -> None:
    """Refuse a segment that ends after the video does (beyond ``slack`` seconds of rounding).

    Args:
        segments: the video's segments.
        duration: the video's length in seconds.
        slack: seconds a segment may run past the end.
        src: the annotation file, named in the error.
        video: the video key.
    """
    late = [s for s in segments if s.end > duration + slack]
    if late:
        raise InputError(
            f"{src}: a segment of video {video!r} ends at {late[0].end:g} s, after the video ({duration:.2f} s long)"
        )


DEFAULT_TEST_FRACTION: Final = 0.2  # a new folder's held-out share (an existing folder keeps its split)


def check_test_split_options(test_fraction: float | None, test_videos: Sequence[str], noun: str) -> None:
    """Refuse a ``--test-fraction`` outside (0, 1) or a ``--test-videos`` naming a video twice, as a run's config is
    built (extraction and import alike).

    Args:
        test_fraction: ``--test-fraction`` (None: not given).
        test_videos: ``--test-videos`` (empty: not given).
        noun: what the run's videos are called in the error (``video``, ``recording``).
    """
    fraction = test_fraction
    if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, int | float)
                                 or not 0 < fraction < 1):
        # Both splits must hold a video: 0 would leave no test split (draw_test_videos), said here at once.
        raise InputError(f"--test-fraction {fraction!r}: must be in (0, 1), the share of {noun}s held out for testing")
    if len(set(test_videos)) != len(test_videos):
        raise InputError(f"--test-videos {','.join(test_videos)}: a video is named twice")


def choose_test_videos(
    names: Sequence[str],
    stored: SplitFile | None,
    test_videos: Sequence[str],
    test_fraction: float | None,
    seed: int,
    annotations: str | Path,
    noun: str = "video",
    unknown: str = "an annotated video of this scenario",
    absent: Callable[[str], str] | None = None,
    elsewhere: Callable[[str], str | None] | None = None,
) -> frozenset[str]:
    """The test split of a run that writes a feature folder (``recognition-features``, and its ``import``): an
    existing folder's (`kept_test_videos`), else the videos ``--test-videos`` names, else a seeded draw of
    ``--test-fraction`` of them (`DEFAULT_TEST_FRACTION` when not given).

    Args:
        names: the run's videos (the scenario's annotated videos, or the imported recordings).
        stored: the split of an earlier run into the same folder (`stored_split`), None for a new folder.
        test_videos: ``--test-videos`` (empty: not given).
        test_fraction: ``--test-fraction`` (None: not given).
        seed: ``--seed`` of the draw.
        annotations: the annotation file the names come from (for the error lines).
        noun: what the run's videos are called in the errors (``video``, ``recording``).
        unknown: what a name of ``--test-videos`` that is not among ``names`` is not, after "is not".
        absent: as for `kept_test_videos`.
        elsewhere: what a name of ``--test-videos`` that is not among ``names`` is instead, after "is", when the
            annotation file holds it under another scenario (`annotated_elsewhere`); None: no such phrase.

    Returns:
        Test video names; both splits are non-empty.

    Raises:
        InputError: a named video that is not among ``names``, a split that leaves either side empty, or one that
            differs from the folder's.
    """
    if test_videos:
        missing = [v for v in test_videos if v not in names]
        if missing:
            # A video of another recipe of the same data set is no typo: a near name would point at the wrong one.
            instead = elsewhere(missing[0]) if elsewhere is not None else None
            if instead is not None:
                raise InputError(f"--test-videos: {printable(missing[0])!r} is {instead}")
            raise InputError(f"--test-videos: {printable(missing[0])!r} is not {unknown}"
                             f"{meant_name(missing[0], names)}")
    if stored is not None:
        return kept_test_videos(names, stored, test_videos, test_fraction, seed, annotations, absent)
    if test_videos:
        test, what = frozenset(test_videos), f"--test-videos {','.join(test_videos)}"
    else:
        fraction = DEFAULT_TEST_FRACTION if test_fraction is None else test_fraction
        test = draw_test_videos(names, fraction, seed)
        what = f"--test-fraction {fraction:g} of {count_of(len(names), noun)}"
    if not test:
        raise InputError(f"{what}: the test split would be empty; raise it or name test {noun}s with --test-videos")
    if len(test) == len(names):
        raise InputError(f"{what}: no {noun} would be left for training")
    return test


def annotated_elsewhere(annotations: Annotations, scenario: str, noun: str, run: str
                        ) -> Callable[[str], str | None]:
    """`choose_test_videos`'s ``elsewhere`` for a run over one scenario of ``annotations``: a name the file annotates
    under another scenario is said to be that scenario's, with what to name instead.

    Args:
        annotations: the run's annotation file.
        scenario: the scenario the run writes.
        noun: what its videos are called (``video``, ``recording``).
        run: what the run does to them, after "of the scenario" (``extracted``, ``imported``).
    """
    def where(name: str) -> str | None:
        video = annotations.videos.get(name)
        if video is None or video.scenario == scenario:
            return None
        return (f"a {noun} of scenario {printable(video.scenario)!r} in {annotations.path}, not of "
                f"{printable(scenario)!r}: name test {noun}s of the scenario {run}")
    return where


def draw_test_videos(names: Sequence[str], fraction: float, seed: int) -> frozenset[str]:
    """A seeded draw of ``fraction`` of the videos (rounded half up: 0.5 of a video is one), from their sorted names.

    Args:
        names: the scenario's annotated videos.
        fraction: the share to hold out, in [0, 1).
        seed: the draw's seed.

    Returns:
        The drawn names (the same for the same names, fraction and seed).
    """
    count = math.floor(fraction * len(names) + 0.5)
    rng = np.random.default_rng(seed)
    return frozenset(rng.choice(sorted(names), size=count, replace=False).tolist()) if count else frozenset()


SHOWN_NAMES = 8  # video names an error line lists; it counts the rest


def _listed(names: Iterable[str]) -> str:
    return first_few(sorted(printable(n) for n in names), SHOWN_NAMES) or "none"


def _absences(videos: Iterable[str], absent: Callable[[str], str]) -> list[tuple[str, str]]:
    """``[(listed videos, why)]``: the videos of a split a run leaves out, grouped by why (`kept_test_videos`)."""
    causes: dict[str, list[str]] = {}
    for video in sorted(videos):
        causes.setdefault(absent(video), []).append(video)
    return [(_listed(group), cause) for cause, group in causes.items()]


def _dropped(videos: Iterable[str], absent: Callable[[str], str] | None) -> str:
    """The videos of a split a run leaves out, in `kept_test_videos`'s list of changes."""
    if absent is None:
        return f"no longer annotated: {_listed(videos)}"
    return ", and ".join(f"{listed} {cause}" for listed, cause in _absences(videos, absent))


def foreign_entries(folder: str | Path) -> list[str]:
    """What an existing ``--out`` folder without ``split.json`` holds that no feature folder writes (``rgb_*/``,
    ``flow_*/``, ``target_perframe/``, ``extraction.json``; hidden names, such as an interrupted writer's temporary
    folder, are passed over): a folder that holds such files is someone else's, and a run would scatter its own
    among them (``--out ~`` or ``--out /``). Empty for a missing or empty folder, and for a feature folder.
    """
    folder = Path(folder)
    if not folder.is_dir() or (folder / SPLIT_FILE).exists():
        return []
    own = {TARGETS_DIR, MANIFEST}
    return sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()
                  if not p.name.startswith(".") and p.name not in own
                  and not (p.is_dir() and p.name.startswith(("rgb_", "flow_"))))


def check_feature_folder_out(folder: str | Path) -> None:
    """Refuse an ``--out`` folder that holds other files than a feature folder's (`foreign_entries`).

    Raises:
        InputError: naming the folder and the first few of its entries.
    """
    foreign = foreign_entries(folder)
    if foreign:
        named = first_few([printable(n) for n in foreign], 3)
        raise InputError(f"--out {folder}: holds other files than a feature folder's ({named}) and no {SPLIT_FILE}, "
                         "so it is no feature folder to resume; give a new or empty folder")


def stored_split(folder: str | Path) -> SplitFile | None:
    """The split an earlier run wrote into a feature folder (``split.json``), or None for a new folder.

    Args:
        folder: the ``--out`` folder.

    Returns:
        The checked split file, or None when there is none.
    """
    path = Path(folder) / SPLIT_FILE
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return load_split(path)
    except InputError as err:
        raise InputError(f"{err}; this folder's split cannot be kept: repair {path}, or delete it to draw a new "
                         "split") from None


def extractor_change_note(folder: str | Path, before: SplitFile | None, now: str) -> str | None:
    """What a run into a folder of another extractor's features changed for training, or None: those features are
    kept beside the new ones, and ``split.json`` now names the new extractor, which ``recognition-train`` reads
    unless a config names another (one folder may hold several; the latest is the default).

    Args:
        folder: the ``--out`` folder.
        before: its split before the run (`stored_split`), None for a new folder.
        now: the extractor name the run records.
    """
    if before is None or before.feature_extractor in (None, now):
        return None
    old = before.feature_extractor
    return (f"{folder} held {old} features (rgb_{old}/, kept); its split.json now names {now}: recognition-train "
            f"without --config trains on rgb_{now}/")


def test_split_line(test: Collection[str], folder: str | Path, what: str = "videos", shown: int = 5,
                    annotations: str | Path | None = None) -> str:
    """The summary line naming a folder's test split: ``tgml train --exclude-videos`` must leave the same videos out
    of the graph, and a split drawn at random is said nowhere else than in ``split.json``.

    Args:
        test: the test videos' names.
        folder: the feature folder.
        what: how they are called (``videos``, ``recordings``).
        shown: how many names are listed before the rest are counted (the command to copy lists every one).
        annotations: the annotation file the folder's labels came from; given, the line says the command is for a
            graph learned from it. A graph may come from another file (CaptainCook4D's is learned from the data set's
            graph-generation annotations, which hold only some of a folder's recordings), and `tgml train` refuses
            a name that is no execution of its file (maybe a typo): the bare command failed on that documented flow.
    """
    names = sorted(test)
    command = f"tgml train --exclude-videos {shlex.quote(','.join(names))}"  # quoted: a name may hold a space
    if annotations is not None:
        command += (f" for a graph learned from {annotations}; from another annotation file, name only those of them "
                    "it holds")
    return (f"test {what}: {first_few(names, shown)} (in {Path(folder) / SPLIT_FILE}; leave them out of the graph too: "
            f"{command})")


def earlier_rate(folder: str | Path, rgb: str, stored: SplitFile | None, rate: float, option: str,
                 verb: str) -> float | None:
    """The rate ``split.json`` records when a run writes the folder again at another (None: a new folder, or the
    same rate): extracting (``recognition-features``) and importing (``import``) find it alike.

    Args:
        folder: the ``--out`` folder.
        rgb: the features folder this run writes (``rgb_<extractor>``).
        stored: the folder's split (`stored_split`).
        rate: this run's vectors per second.
        option: the option that gave it (``--fps``, ``--rate``), named in the error.
        verb: what the run does (``extract``, ``import``), in the error.

    Raises:
        InputError: another extractor's ``rgb_*`` features are in the folder: one folder, one rate (split.json's is
            every ``rgb_*``'s), and the shared targets would be rewritten at the new one under them.
    """
    if stored is None or stored.fps is None or math.isclose(stored.fps, rate, rel_tol=1e-6):  # 2 and 2.0000001 alike
        return None
    others = sorted(p.name for p in Path(folder).glob("rgb_*") if p.is_dir() and p.name != rgb)
    if others:
        raise InputError(f"{option} {rate:g}: {Path(folder) / SPLIT_FILE} records {stored.fps:g} per second, the rate "
                         f"of {others[0]}/ too; {verb} at {option} {stored.fps:g} or into another --out")
    return stored.fps


def kept_test_videos(names: Sequence[str], stored: SplitFile, test_videos: Sequence[str], test_fraction: float | None,
                     seed: int, annotations: str | Path, absent: Callable[[str], str] | None = None
                     ) -> frozenset[str]:
    """An existing folder's test split, kept by a run that writes into it again (``recognition-features`` resuming
    an extraction, or ``recognition-features import`` run again): a split is never redrawn under features already
    written (and a detector perhaps already trained and scored) on it.

    ``--test-videos`` or ``--test-fraction``, when given, must give the same test videos; without ``--test-videos``
    the videos must be the ones the split lists (with it, videos annotated since then train).

    Args:
        names: the run's videos (the scenario's annotated videos, or the imported recordings).
        stored: the folder's split file.
        test_videos: ``--test-videos`` (empty: not given).
        test_fraction: ``--test-fraction`` (None: not given).
        seed: ``--seed`` of the draw.
        annotations: the annotation file the names come from (for the error lines).
        absent: why a video of the split is not among ``names``, a phrase after the videos (``"have no feature file
            in --features npy/"``): an import leaves out annotated recordings without a feature file, so "no longer
            annotated" would name the wrong cause (and a new video may be a feature file added). None: every such
            video is no longer annotated, and a new one annotated since.

    Returns:
        The folder's test videos.

    Raises:
        InputError: naming the difference, and how to keep the split or draw a new one.
    """
    kept = frozenset(stored.test)
    given = bool(test_videos) or test_fraction is not None  # advice to leave out what was not given misleads
    how = (("leave --test-videos and --test-fraction out to keep it, " if given else "")
           + "write to a new --out, or delete the split file to draw a new split")
    asked, what = kept, ""
    if test_videos:
        asked, what = frozenset(test_videos), f"--test-videos {','.join(test_videos)}"
    elif test_fraction is not None:
        asked = draw_test_videos(names, test_fraction, seed)
        what = f"--test-fraction {test_fraction:g} (--seed {seed})"
    if asked != kept:
        raise InputError(f"{what} holds out {_listed(asked)}, but {stored.path} (an earlier run's split, kept when "
                         f"the folder is resumed) holds out {_listed(kept)}: {how}")
    gone = kept - set(names)
    if gone:
        (first, why), *others = _absences(gone, absent or (lambda _: f"are no longer annotated in {annotations}"))
        more = "".join(f", and {listed} {cause}" for listed, cause in others)
        raise InputError(f"{stored.path}: test videos {first} of the folder's split {why}{more}: {how}")
    if not test_videos:
        listed = kept | set(stored.train)
        new, dropped = set(names) - listed, listed - set(names)
        if new or dropped:
            # A run that says why videos are absent (an import) also has its new ones for other reasons than
            # annotation (a feature file added): named neutrally.
            since = "annotated since" if absent is None else "not in the split"
            change = "; ".join(part for part in (f"{since}: {_listed(new)}" if new else "",
                                                  _dropped(dropped, absent) if dropped else "")
                               if part)
            differ = (f"{annotations}: the videos differ from those {stored.path} splits" if absent is None
                      else f"{stored.path}: this run's videos differ from those it splits")
            raise InputError(f"{differ} ({change}); name the test videos with --test-videos {','.join(sorted(kept))} "
                             "to keep its test videos (the other videos train), or write to a new --out")
    return kept
