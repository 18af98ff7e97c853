"""Feature files as a live source: a recording's precomputed features replayed one vector at a time through the same
detector loop, segmenter and checker as a camera's frames.

A feature file is a ``(T, D)`` ``.npy`` array of real floats (`recognition.feature_import.read_feature_file`: no
pickle, no NaN or infinity), row ``k`` the features of the moment ``k / rate`` seconds into the recording. Two small
parts make it a source without changing the detector loop:

- `FeatureFileReader`, a `streaming.readers.VideoReader` whose frames carry a feature vector ``(D,)`` as their
  ``image``, at the detector's rate: paced to the wall clock (``realtime``, what ``stream-detect --features`` shows in
  the view) or as fast as the consumer takes them (``--fast``, ``stream-detect eval --features``);
- `PrecomputedExtractor` (name ``"precomputed"``), the feature extractor that passes those vectors through.

`load_detector_for_features` and `open_feature_file` load a detector to be fed from feature files and open them,
refusing before the first vector is read a file that is not a 2-D float array, holds NaN or infinity, is not as wide
as the detector's input, or a ``--rate`` that is not the detector's: one line naming the file or the option. This
module imports nothing of the detector loop, so the loop's loader can dispatch to it on a ``.npy`` source.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import numpy as np
import torch

from graphs.annotations import Annotations
from graphs.common.errors import InputError
from graphs.common.files import not_a_file
from graphs.common.safe_text import count_of, first_few, near_name_hint, unicode_form_hint
from recognition.checkpoint import DetectorCheckpoint, load_detector
from recognition.feature_folders import SPLIT_FILE, copy_of, load_split
from recognition.feature_import import (
    feature_file_fault,
    feature_files,
    header_shape,
    is_npy_name,
    read_feature_file,
)
from recognition.model import MiniROAD
from streaming.devices import resolve_device
from streaming.extractors import FeatureExtractor
from streaming.readers import Frame, ReaderConfig, Source, _FileReader

PRECOMPUTED_NAME: Final = "precomputed"
FEATURE_SUFFIX: Final = ".npy"
SHOWN: Final = 5  # recording names an error lists; it counts the rest
RATE_TOLERANCE: Final = 1e-6  # relative: 1 and 1.0000001 vectors a second are one rate written two ways


def is_feature_file(spec: str | Path) -> bool:
    """Whether a source names a feature file (``<name>.npy``) rather than a video, camera or stream."""
    return is_npy_name(Path(spec))


class PrecomputedExtractor(FeatureExtractor):
    """The extractor of a feature-file source: its "frames" are feature vectors ``(B, D)`` already; they pass through.

    Args:
        dim: ``D``, the width the detector reads.
    """

    name = PRECOMPUTED_NAME

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        if frames.ndim != 2 or frames.shape[1] != self.dim:
            raise ValueError(f"precomputed features must be (B, {self.dim}), got {frames.shape}")
        return np.ascontiguousarray(frames, dtype=np.float32)


class FeatureFileReader(_FileReader):
    """A feature file read as a stream: frame ``k`` is row ``k`` at ``k / fps`` seconds, its ``image`` the row.

    The whole file is read and checked when it opens (`read_feature_file`), so a bad file is refused before the stream
    starts and the stream never ends early.

    Args:
        path: the ``.npy`` file.
        config: ``fps`` (the detector's rate) and ``realtime`` (pace to the wall clock).
        name: how errors name the file (``--features PATH`` by default).
        clock: the pacing clock (tests give their own).
    """

    name = "features"

    def __init__(self, path: str | Path, config: ReaderConfig, name: str = "",
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(Source("file", str(path), str(path)), config, clock)
        self.path = Path(path)
        self.label = name or f"--features {path}"
        fault = feature_file_fault(self.path, self.label)
        if fault is not None:
            raise fault
        try:
            self.features = read_feature_file(self.path)  # (T, D) float32
        except InputError as err:
            raise InputError(f"{self.label}: {str(err).removeprefix(f'{self.path}: ')}") from None
        self.duration = len(self.features) / config.fps

    @property
    def width(self) -> int:
        """``D``, the width of one feature vector."""
        return int(self.features.shape[1])

    def read(self) -> Frame | None:
        k = self.frames
        if k >= len(self.features):
            return None
        arrived = self._pace(k, self.clock())
        self.frames += 1
        return Frame(self.features[k], k, k / self.config.fps, arrived)


def check_rate(rate: float | None, checkpoint: DetectorCheckpoint, detector: str, option: str = "--rate") -> None:
    """Refuse a feature rate that is not the detector's: its GRU, lags and windows count vectors at its own rate.

    Args:
        rate: the rate the user named (None: the detector's is taken).
        checkpoint: the detector's description.
        detector: the checkpoint file, named in the error.
        option: the option that gave the rate.
    """
    if rate is not None and abs(rate - checkpoint.fps) > RATE_TOLERANCE * checkpoint.fps:
        raise InputError(f"{option} {rate:g}: the detector {detector} was trained on "
                         f"{checkpoint.feature_extractor!r} features at {checkpoint.fps:g} per second; give "
                         f"features at its rate (files written at it: {option} {checkpoint.fps:g}, or leave "
                         f"{option} out, which reads them at the detector's)")


def load_detector_for_features(
    detector_path: str | Path, threads: int = 1, device: str = "auto", rate: float | None = None
) -> tuple[MiniROAD, DetectorCheckpoint, FeatureExtractor]:
    """Load a detector checkpoint to be fed from feature files (`load_detector_for_stream` of a feature source).

    Args:
        detector_path: checkpoint file.
        threads: torch threads.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"`` for the detector.
        rate: the files' rate as the user named it (``--rate``), checked against the detector's.

    Returns:
        ``(model, checkpoint, the pass-through extractor of the detector's width)``.
    """
    torch.set_num_threads(threads)
    model, checkpoint = load_detector(detector_path, resolve_device(device))
    check_rate(rate, checkpoint, str(detector_path))
    return model, checkpoint, PrecomputedExtractor(checkpoint.config.input_dim)


def open_feature_file(path: str | Path, checkpoint: DetectorCheckpoint, detector: str, realtime: bool = False,
                      name: str = "") -> FeatureFileReader:
    """Open a feature file for a detector: read, checked, and as wide as the detector's input.

    Args:
        path: the ``.npy`` file.
        checkpoint: the detector's description (rate and width).
        detector: the checkpoint file, named in a width error.
        realtime: pace it to the wall clock.
        name: how errors name the file (default ``--features PATH``).

    Returns:
        The open reader, at the detector's rate.
    """
    # From the header, before the data: a file of another backbone is refused without reading gigabytes of it. A file
    # whose header does not read is refused by the reader's full read, so this is the whole width check.
    shape = header_shape(path)
    if shape is not None and shape[1] != checkpoint.config.input_dim:
        raise InputError(f"{name or f'--features {path}'}: the features are {shape[1]} wide, the detector {detector} "
                         f"reads {checkpoint.config.input_dim} ({checkpoint.feature_extractor!r} features)"
                         + transposed_hint(shape, checkpoint.config.input_dim))
    check_recorded_rate(Path(path), checkpoint, detector, name)
    return FeatureFileReader(path, ReaderConfig(fps=checkpoint.fps, realtime=realtime), name)


def recorded_rate(path: Path) -> tuple[float, Path] | None:
    """The rate a feature file was extracted at, where its folder says so: a file of ``rgb_<extractor>/`` beside the
    ``split.json`` of a feature folder that names that extractor and its ``fps`` (what ``recognition-features``
    writes). None where nothing says it (a file of one's own, a folder without it): the file is read at the
    detector's rate, as before.

    Returns:
        ``(rate, the split file that records it)``.
    """
    split = path.parent.parent / SPLIT_FILE
    if not path.parent.name.startswith("rgb_") or not split.is_file():
        return None
    try:
        stored = load_split(split)
    except InputError:  # the folder's own damage, said by the commands that read the folder; here nothing is known
        return None
    if stored.fps is None or path.parent.name != f"rgb_{stored.feature_extractor}":
        return None
    return stored.fps, split


def check_recorded_rate(path: Path, checkpoint: DetectorCheckpoint, detector: str, name: str = "") -> None:
    """Refuse a feature file that its feature folder records at another rate than the detector's, which it would be
    read at: a detector trained at 2 features a second replayed a 5-a-second folder's file without a word, every
    step stretched to 2.5 times its length (`stream-detect eval` only guessed it from the annotations' lengths).

    Args:
        path: the ``.npy`` file.
        checkpoint: the detector's description (its rate).
        detector: the checkpoint file, named in the error.
        name: how errors name the file (default ``--features PATH``).
    """
    recorded = recorded_rate(path)
    if recorded is None or abs(recorded[0] - checkpoint.fps) <= RATE_TOLERANCE * checkpoint.fps:
        return
    rate, split = recorded
    raise InputError(f"{name or f'--features {path}'}: extracted at {rate:g} per second ({split}), but the detector "
                     f"{detector} was trained at {checkpoint.fps:g} and reads it at that rate: give a detector "
                     f"trained on features at {rate:g}, or features extracted at {checkpoint.fps:g} "
                     f"(recognition-features --fps {checkpoint.fps:g})")


def transposed_hint(shape: tuple[int, int], width: int) -> str:
    """The tail of a width error when the file's rows are the detector's width: an array saved ``(D, T)``, which read
    as a recording of ``D`` vectors ``T`` wide (``recognition-features import`` asks the same of its files)."""
    if shape[0] != width:
        return ""
    return f": saved transposed? its {shape[0]} rows are the detector's width; save it as (rows, width)"


def check_feature_sources(paths: Sequence[str], detector_path: str | Path, rate: float | None) -> None:
    """Everything about live feature-file sources that can be refused before a run starts (``stream-detect
    --features``): every file read and checked (a 2-D float array, finite, as wide as the detector's input), and the
    rate (`check_rate`).

    Args:
        paths: the ``--features`` files.
        detector_path: the checkpoint they will feed.
        rate: ``--rate`` (None: the detector's).
    """
    _, checkpoint = load_detector(detector_path)
    check_rate(rate, checkpoint, str(detector_path))
    for path in paths:
        open_feature_file(path, checkpoint, str(detector_path)).close()

def feature_files_of(specs: Sequence[str], option: str = "--features") -> dict[str, Path]:
    """The feature files ``specs`` name (``.npy`` files, or folders of them), by recording name (the file stem).

    Raises:
        InputError: a path that does not exist, a file that is not ``.npy``, a folder with none, or two files of one
            recording.
    """
    found: dict[str, Path] = {}
    for spec in specs:
        path = Path(spec)
        if path.is_dir():
            files = list(feature_files(path, option).values())
        elif path.is_file() and is_feature_file(path):
            files = [path]
        else:
            why = "not a .npy feature file" if path.is_file() else (not_a_file(path) or "not a .npy feature file")
            raise InputError(f"{option} {path}: {why} (give .npy feature files or folders of them)")
        for file in files:
            if file.stem in found and not same_file(found[file.stem], file):
                raise InputError(f"{option}: two feature files of recording {file.stem!r} ({found[file.stem]} and "
                                 f"{file})")
            found[file.stem] = file
    return found


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: a folder and a file in it given together, one spelt relative and one absolute
    (or through a link), were refused as two feature files of one recording."""
    try:
        return a == b or a.samefile(b)
    except OSError:  # gone or unreadable: said when it is read
        return False


def annotated_feature_files(specs: Sequence[str], annotations: Annotations, src: str,
                            chosen: bool = False) -> dict[str, Path]:
    """`feature_files_of`, every file the features of an annotated recording (of any scenario of the file); the
    augmented copies of a recording (``<video>.aug<k>.npy``, `recognition.feature_folders.copy_file_name`) are left out.

    Args:
        specs: the ``--features`` files and folders.
        annotations: the annotation file read.
        src: its path, named in the error.
        chosen: the recordings to evaluate are named (``--videos-list``, ``--split``): files the annotation file does
            not hold are left out, not refused, since none of them is evaluated and a name chosen that is not
            annotated is refused on its own (but for a name that is an annotated one in another Unicode form).

    Raises:
        InputError: a file whose recording the annotation file does not hold, when none is chosen; when some are,
            one whose name differs from an annotated name only in its Unicode form.
    """
    files = feature_files_of(specs)
    # The augmented copies recognition-features writes beside a training video's features are no recording.
    files = {name: path for name, path in files.items() if not _is_copy(name, annotations)}
    stray = sorted(name for name in files if name not in annotations.videos)
    if chosen:
        # A data set's folder of every recording read with one recipe's labels and its split: refusing the other
        # recordings' files made the user copy the chosen ones out of the folder. A name that is an annotated one in
        # another Unicode form is the one still refused: its recording may be among those chosen.
        stray = [name for name in stray if unicode_form_hint([name], annotations.videos)]
        files = {name: path for name, path in files.items() if name in annotations.videos}
        what = ""
    elif len(stray) == len(files):
        what = ": is it the annotation file of these recordings?"
    else:
        what = ": annotate them, name the recordings to evaluate (--videos-list, --split), or move them out"
    if stray:
        raise InputError(f"--features: {count_of(len(stray), 'feature file')} with no annotation in {src} "
                         f"({first_few(stray, SHOWN)}){what}" + unicode_form_hint(stray, annotations.videos)
                         + near_name_hint(stray, [name for name in annotations.videos if name not in files]))
    return files


def _is_copy(name: str, annotations: Annotations) -> bool:
    """Whether ``name`` is ``<video>.aug<k>`` of an annotated ``<video>``."""
    return copy_of(name) in annotations.videos


def feature_file_for(files: dict[str, Path], name: str) -> Path:
    """The feature file of annotated recording ``name``.

    Raises:
        InputError: there is none.
    """
    if name not in files:
        raise InputError(f"--features: no feature file {name}{FEATURE_SUFFIX} for annotated video {name!r}")
    return files[name]
