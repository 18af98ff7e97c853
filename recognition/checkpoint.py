"""Detector checkpoints: a versioned file with the weights and everything needed to use them.

A checkpoint is written with `torch.save` as a plain dictionary and read back with
``torch.load(weights_only=True)`` (no pickled code is ever executed)::

    {
      "format": "miniroad-detector",
      "version": 1,
      "config": {"input_dim": 4096, "embed_dim": 2048, "hidden_dim": 1024, "num_classes": 13, "dropout": 0.2},
      "class_names": ["background", "assemble_support", ...],     # one per output class
      "class_step_ids": [null, 0, 1, ...],                         # taxonomy step id per class, null = background
      "feature_extractor": "tsn-resnet50",                          # the features it was trained on
      "fps": 4.0,                                                   # feature frames per second
      "info": {...},                                                # training settings, scores
      "scenario": "tent",                                           # the procedure (optional: null if unknown)
      "evidence": {...},                                            # optional: measured on the validation split
      "state_dict": {...}                                           # MiniROAD weights
    }

``scenario`` was added without a version change: a checkpoint written before it (or from a feature folder that
names none) loads with ``scenario = None``, and only its step names are compared with a task graph's. ``evidence``
was added the same way: the calibration of the detector's evidence measured on the validation videos at training
time (`recognition.evidence.EvidenceModel.to_dict`, every field checked on load), or null; older checkpoints load
with None. ``info.feature_scale`` (``{"largest": 5.21}``: the largest absolute value of the features it was trained on,
`DetectorCheckpoint.training_scale`) was added the same way: the feature files fed to the detector are compared with
it (`recognition.model.scale_mismatch`); an older checkpoint, which has none, loads as before and nothing is compared.

`load_detector` refuses, with one line naming the file, anything else: a truncated or unreadable
file (whatever its bytes: the loader is fuzzed), an archive that unpacks to far more than its size (a zip bomb),
another format, another version, a field of the wrong type, a config announcing more than `MAX_MODEL_BYTES` of
weights (stored weights may be stride-0 views of one number: what the config announces is what gets allocated),
weights that are not exactly the tensors of the stored config (checked before the model is built) or are not finite,
inconsistent class lists, class names or step ids the live pipeline could not send (`graphs.limits`: names of
at most `MAX_NAME` characters, step ids in ``0..2^31-1``), an ``fps`` no stream runs at (above
`graphs.common.options.MAX_FPS`), an ``info.feature_scale`` that is not an object holding a finite ``largest`` at
least 0, and segmenter settings (``info.segmenter``) its streams could not run with: each
named as the file stores it (``det.pt: info.segmenter.background = -1``), not when a stream starts.
"""

from __future__ import annotations

import math
import numbers
import os
import warnings
import zipfile
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import IO, Any, Final

import torch

from graphs.common.errors import InputError
from graphs.common.files import atomic_path, open_input, write_failure
from graphs.common.options import MAX_FPS
from graphs.common.safe_text import shortened, unknown_name
from graphs.common.settings_files import as_written, json_kind
from graphs.limits import MAX_NAME, STEP_ID_RULE, is_step_id, name_fault
from recognition.evidence import EvidenceModel
from recognition.model import MiniROAD, MiniROADConfig
from recognition.segmenter import SegmenterConfig, detector_segmenter_config

FORMAT_NAME: Final = "miniroad-detector"
FORMAT_VERSION: Final = 1
MAX_CHECKPOINT_BYTES: Final = 4 * 2**30  # the published 4096-d MiniROAD is 115 MB; a bigger "checkpoint" is not one
MAX_MODEL_BYTES: Final = 2**30  # float32 weights a checkpoint's config may announce: 9 times the published model
FEATURE_SCALE: Final = "feature_scale"  # info's field: {"largest": the training features' largest absolute value}
UNPACKED_SLACK_BYTES: Final = 64 * 2**20  # what a checkpoint's archive may unpack to beyond its own size


@dataclass(frozen=True)
class DetectorCheckpoint:
    """Everything a checkpoint says about its detector, besides the weights.

    Attributes:
        config: the model sizes.
        class_names: one name per output class (index 0 is background).
        class_step_ids: taxonomy key-step id per class; None for background classes.
        feature_extractor: name of the feature extractor the detector expects (``"tsn-resnet50"``,
            ``"light-v1"``) or the TorchScript file it was trained with.
        fps: feature frames per second the detector was trained on.
        info: free-form provenance (training settings, test mAP); its ``segmenter``, when present, holds the
            settings of its streams' segmenter (`segmenter_config`), checked here.
        scenario: the procedure the detector was trained on (the annotation file's scenario); None when the
            checkpoint does not say (written before checkpoints recorded it, or from a folder that names none).
        evidence: the calibration of the detector's evidence on its validation videos (per-step miss and
            false-detection rates and the curves the probabilistic checker reads,
            `recognition.evidence_calibration.calibrate_evidence`); None when nothing was measured.
    """

    config: MiniROADConfig
    class_names: tuple[str, ...]
    class_step_ids: tuple[int | None, ...]
    feature_extractor: str
    fps: float
    info: dict[str, Any] = field(default_factory=dict)
    scenario: str | None = None
    evidence: EvidenceModel | None = None

    def __post_init__(self) -> None:
        if self.scenario is not None and (not isinstance(self.scenario, str) or len(self.scenario) > MAX_NAME):
            raise InputError(f"detector checkpoint: scenario = {as_written(self.scenario, 60)} must be a name of at "
                             f"most {MAX_NAME} characters or null")
        names, step_ids = tuple(self.class_names), tuple(self.class_step_ids)
        for i, name in enumerate(names):
            if not isinstance(name, str):
                raise InputError(f"detector checkpoint: class_names[{i}] = {as_written(name, 60)} must be a string")
            fault = name_fault(name)
            if fault is not None:  # sent on the wire as the step's name, shown in views and alerts
                raise InputError(f"detector checkpoint: class_names[{i}] {fault}")
        for i, step in enumerate(step_ids):
            # int() would silently turn 1.5 into 1 and True into 1: a step id must already be an integer.
            if step is not None and (not isinstance(step, numbers.Integral) or isinstance(step, bool)):
                raise InputError(f"detector checkpoint: class_step_ids[{i}] = {as_written(step, 60)}"
                                 " must be an integer or null")
            if step is not None and not is_step_id(int(step)):
                raise InputError(f"detector checkpoint: class_step_ids[{i}] = {step} must be {STEP_ID_RULE} or null")
        object.__setattr__(self, "class_names", names)
        object.__setattr__(self, "class_step_ids", tuple(None if s is None else int(s) for s in step_ids))
        c = self.config.num_classes
        if len(self.class_names) != c:
            raise InputError(f"detector checkpoint: {len(self.class_names)} class names for {c} classes")
        if len(self.class_step_ids) != c:
            raise InputError(f"detector checkpoint: {len(self.class_step_ids)} class step ids for {c} classes")
        ids = [s for s in self.class_step_ids if s is not None]
        twice = sorted(s for s, n in Counter(ids).items() if n > 1)
        if twice:  # before the evidence, whose steps would then seem to be no classes'
            raise InputError(f"detector checkpoint: class_step_ids names step {twice[0]} for more than one class")
        # Checked after the classes, so that a bad class step id is named as such.
        if self.evidence is not None:
            if not isinstance(self.evidence, EvidenceModel):
                raise InputError(f"detector checkpoint: evidence must be an EvidenceModel, not "
                                 f"{type(self.evidence).__name__}")
            if set(self.evidence.step_ids) - {s for s in self.class_step_ids if s is not None}:
                raise InputError("detector checkpoint: evidence names a step that is not one of its classes")
        if not isinstance(self.feature_extractor, str) or not self.feature_extractor:
            raise InputError(f"detector checkpoint: feature_extractor = {as_written(self.feature_extractor)}"
                             " must be a name")
        fps_ok = isinstance(self.fps, int | float) and not isinstance(self.fps, bool)
        if not fps_ok or not math.isfinite(self.fps) or not 0 < self.fps <= MAX_FPS:
            # 1e9 was refused only by the stream's reader, in words naming no file (ReaderConfig.fps).
            raise InputError(f"detector checkpoint: fps = {as_written(self.fps)} must be a positive number at most "
                             f"{MAX_FPS:g}")
        self.segmenter_config()  # its settings are checked when the file is read, not when a stream starts
        self.training_scale()  # checked when the file is read, not when the first feature file is compared with it

    def segmenter_config(self) -> SegmenterConfig:
        """The segmenter settings the detector's streams run with (``info.segmenter``, at its fps; defaults where it
        stores none), checked against its classes (`recognition.segmenter.detector_segmenter_config`)."""
        settings = self.info.get("segmenter") if isinstance(self.info, dict) else None
        return detector_segmenter_config(settings, self.fps, self.class_step_ids, "detector checkpoint: info.segmenter")

    def training_scale(self) -> float | None:
        """The largest absolute value of the features the detector was trained on (``info.feature_scale.largest``,
        `recognition.train.checkpoint_info`), which the files fed to it are compared with
        (`recognition.model.scale_mismatch`); None for a checkpoint written before it was recorded.

        Raises:
            InputError: the field is there but not an object holding a finite number at least 0.
        """
        scale = self.info.get(FEATURE_SCALE) if isinstance(self.info, dict) else None
        if scale is None:
            return None
        where = f"detector checkpoint: info.{FEATURE_SCALE}"
        if not isinstance(scale, dict):
            raise InputError(f"{where} must be an object, got {json_kind(scale)}")
        largest = scale.get("largest")
        if not isinstance(largest, int | float) or isinstance(largest, bool) or not 0 <= largest < math.inf:
            raise InputError(f"{where}.largest = {as_written(largest, 60)}: expected a finite number >= 0 (the "
                             "largest absolute value of the features it was trained on)")
        return float(largest)

    def renumbered(self, steps: Mapping[int, int]) -> DetectorCheckpoint:
        """The same detector with its key-steps under other ids: each class's step id, and the steps its evidence
        is measured for (the per-class settings, by class index, stay as they are).

        Args:
            steps: old step id -> new one, for every step id that changes (a step not in it keeps its id).

        Returns:
            The renumbered description (checked again, as any is).
        """
        evidence = None if self.evidence is None else replace(
            self.evidence, step_ids=tuple(steps.get(s, s) for s in self.evidence.step_ids))
        return replace(self, class_step_ids=tuple(None if s is None else steps.get(s, s) for s in self.class_step_ids),
                       evidence=evidence)

    def check_features(self, width: int, extractor: str | None = None, source: str = "features") -> None:
        """Refuse features the detector was not trained on.

        Args:
            width: feature vector width the caller will feed.
            extractor: name of the extractor producing them, if known.
            source: what to name in the error (a file, a video, a stream).

        Raises:
            InputError: the width or the extractor does not match.
        """
        if extractor is not None and extractor != self.feature_extractor:
            raise InputError(
                f"{source}: features come from {extractor!r} but the detector was trained on "
                f"{self.feature_extractor!r} features"
            )
        self.config.check_feature_width(width, source, self.feature_extractor)


def save_detector(
    path: str | Path,
    model: MiniROAD,
    class_names: Sequence[str],
    class_step_ids: Sequence[int | None],
    feature_extractor: str,
    fps: float,
    info: dict[str, Any] | None = None,
    scenario: str | None = None,
    evidence: EvidenceModel | None = None,
) -> DetectorCheckpoint:
    """Write a detector checkpoint (atomically: a crash never leaves half a file).

    Args:
        path: destination file (parent folders are created).
        model: the trained detector.
        class_names: name per output class.
        class_step_ids: step id per class, None for background.
        feature_extractor: the feature extractor the detector expects.
        fps: feature frames per second.
        info: optional provenance saved with it.
        scenario: the procedure it was trained on (None: unknown).
        evidence: the calibration measured on the validation split, or None.

    Returns:
        The checkpoint description that was written.
    """
    meta = DetectorCheckpoint(
        model.config, tuple(class_names), tuple(class_step_ids), feature_extractor, float(fps), dict(info or {}),
        scenario, evidence,
    )
    payload = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "config": asdict(meta.config),
        "class_names": list(meta.class_names),
        "class_step_ids": list(meta.class_step_ids),
        "feature_extractor": meta.feature_extractor,
        "fps": meta.fps,
        "info": meta.info,
        "scenario": meta.scenario,
        "evidence": None if meta.evidence is None else meta.evidence.to_dict(),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
    }
    with atomic_path(path, what="detector checkpoint") as tmp:
        try:
            torch.save(payload, tmp)
        except RuntimeError as err:  # torch's zip writer reports a full disk (or any write error) this way
            raise InputError(f"{path}: cannot write the detector checkpoint ({write_failure(err, Path(path).parent)}); "
                             "the file at this path, if any, is unchanged") from None
    return meta


def load_detector(path: str | Path, device: str | torch.device = "cpu") -> tuple[MiniROAD, DetectorCheckpoint]:
    """Read a detector checkpoint and rebuild the model (in eval mode): the one loader of detector checkpoints.

    Whatever the bytes, the result is the model or one `InputError` naming the file: the file is opened as a
    regular file of at most `MAX_CHECKPOINT_BYTES`, unpickled with ``weights_only`` (no code runs), and every field
    is checked, the weights against the stored config on torch's ``meta`` device before any of the model is
    allocated (a config that announces 10^12 inputs is refused, not built).

    Args:
        path: checkpoint file written by `save_detector`.
        device: where to put the weights.

    Returns:
        ``(model, checkpoint)``.

    Raises:
        InputError: missing/unreadable/truncated file, another format or version, a field of the wrong type,
            weights that do not fit the config or hold NaN/infinity, class lists of the wrong length or type.
    """
    path = Path(path)
    src = str(path)
    with open_input(path, "detector checkpoint", limit=MAX_CHECKPOINT_BYTES) as handle:
        _check_archive(handle, src)
        try:
            with warnings.catch_warnings():  # torch warns of what it is about to refuse (a plain pickle's protocol)
                warnings.simplefilter("ignore")
                data = torch.load(handle, map_location="cpu", weights_only=True)
        except Exception:
            # Whatever torch's reader raises on these bytes (a zip error, KeyError, IndexError, struct.error, a bare
            # OSError on a truncated file, RecursionError...), the file is not a checkpoint it can read; its own
            # text speaks of the loader's options (weights_only...), not of what the user should give.
            raise InputError(f"{src}: not a detector checkpoint: expected a .pt file written by recognition-train "
                             "(this one cannot be read as one: another kind of file, or a damaged copy)") from None
    # Each field's type before its value: a tensor stored where a string goes cannot even be compared with one.
    if not isinstance(data, dict):  # no fields at all: what it holds instead, not a 'format' it does not have
        raise InputError(f"{src}: not a detector checkpoint: it holds {json_kind(data)}, not the object of fields "
                         "recognition-train writes")
    if "format" not in data and data and all(isinstance(value, torch.Tensor) for value in data.values()):
        # torch.save(model.state_dict()): the weights alone, without the classes, rate and sizes that give them sense
        raise InputError(f"{src}: not a detector checkpoint: it holds bare model weights (a state_dict), not the "
                         "object of fields recognition-train writes around them")
    if "format" not in data:  # "is null" named a value nobody wrote
        raise InputError(f"{src}: field 'format' is missing (expected {as_written(FORMAT_NAME)})")
    if data.get("format") != FORMAT_NAME:
        raise InputError(f"{src}: field 'format' is {as_written(data.get('format'), 60)}, expected "
                         f"{as_written(FORMAT_NAME)}")
    if "version" not in data:
        raise InputError(f"{src}: field 'version' is missing (this program reads version {FORMAT_VERSION})")
    version = data.get("version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise InputError(
            f"{src}: unsupported checkpoint version {as_written(version, 60)} (this program reads {FORMAT_VERSION})"
        )
    config = _stored_config(data.get("config"), src)
    for key in ("class_names", "class_step_ids"):
        if not isinstance(data.get(key), list | tuple):  # a string would pass as a list of one-letter names
            raise InputError(f"{src}: field {key!r} must be a list (one entry per class)")
    for key in ("feature_extractor", "fps"):  # recognition-train always writes them; a default would hide the loss
        if key not in data:
            raise InputError(f"{src}: field {key!r} is missing")
    info = data.get("info", {})
    if not isinstance(info, dict) or not all(isinstance(key, str) for key in info):
        raise InputError(f"{src}: field 'info' must be an object")
    try:
        meta = DetectorCheckpoint(
            config,
            tuple(data["class_names"]),
            tuple(data["class_step_ids"]),
            data.get("feature_extractor", ""),
            data.get("fps", 0.0),
            dict(info),
            data.get("scenario"),
            None if data.get("evidence") is None else EvidenceModel.from_dict(data["evidence"], "field 'evidence'"),
        )
    except (InputError, TypeError, ValueError) as err:
        raise InputError(f"{src}: {str(err).removeprefix('detector checkpoint: ')}") from None
    state = _checked_weights(data.get("state_dict"), config, src)
    model = MiniROAD(config)
    model.load_state_dict(state)
    return model.to(device).eval(), meta


# The sizes save_detector has always written: a default in their place builds a model of other sizes, whose weights
# are then refused as "do not fit the stored config", naming a layer instead of the field that is gone. The other
# fields of MiniROADConfig came later and keep their defaults for the checkpoints written before them.
_REQUIRED_CONFIG: Final = ("input_dim", "embed_dim", "hidden_dim", "num_classes")


def _stored_config(cfg: object, src: str) -> MiniROADConfig:
    """The checkpoint's ``config`` field as a `MiniROADConfig`, or one `InputError` naming the field and its key."""
    if not isinstance(cfg, dict) or not all(isinstance(key, str) for key in cfg):
        raise InputError(f"{src}: field 'config' must be an object")
    known = {f.name for f in fields(MiniROADConfig)}
    unknown = sorted(key for key in cfg if key not in known)
    if unknown:  # MiniROADConfig's own TypeError spoke of __init__ and keyword arguments
        raise InputError(unknown_name(f"{src}: field 'config': key", unknown[0], sorted(known), None))
    missing = [key for key in _REQUIRED_CONFIG if key not in cfg]
    if missing:
        raise InputError(f"{src}: field 'config' lacks {', '.join(map(repr, missing))}")
    try:
        return MiniROADConfig(**cfg)
    except InputError as err:  # named as the class's fields, which the file calls config's
        raise InputError(f"{src}: field 'config': {str(err).removeprefix('MiniROADConfig.')}") from None


def _check_archive(handle: IO[bytes], src: str) -> None:
    """Refuse an archive that unpacks to far more than its own size (a zip bomb), or whose records fail their CRC (a
    damaged copy), before torch reads it.

    ``torch.save`` stores the tensors uncompressed, so a checkpoint unpacks to about its own size; a 37 MB archive of
    compressed records took the loader to 8.6 GB. The sizes come from the archive's directory, and only then is each
    record read against its CRC: torch's reader does not check them, and a few flipped bytes in the weights gave a
    detector that loaded, stayed finite and recognised nothing. A file that is not a zip archive is left to torch's
    reader (it refuses it, or reads the legacy format, whose tensors are no larger than the file).
    """
    size = os.fstat(handle.fileno()).st_size
    damaged = None
    try:
        with zipfile.ZipFile(handle) as archive:
            entries = archive.infolist()
            unpacked = sum(entry.file_size for entry in entries)
            # torch can be told not to compute the CRCs (``compute_crc32=False``): every one is 0, none to check.
            crcs = any(entry.CRC for entry in entries) or not any(entry.file_size for entry in entries)
            if unpacked <= size + UNPACKED_SLACK_BYTES and crcs:
                damaged = archive.testzip()  # the first record whose bytes fail their CRC
    # A compression method changed by a flipped bit: NotImplementedError or zlib.error; torch's reader says the rest.
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, zlib.error):
        unpacked = 0
    finally:
        handle.seek(0)
    if unpacked > size + UNPACKED_SLACK_BYTES:
        raise InputError(f"{src}: not a detector checkpoint: its archive unpacks to {unpacked / 2**20:.0f} MB from "
                         f"{size / 2**20:.0f} MB (recognition-train stores weights uncompressed); not read")
    if damaged is not None:
        raise InputError(f"{src}: a damaged copy: its record {damaged} fails its checksum (CRC); not read")


def _checked_weights(state: object, config: MiniROADConfig, src: str) -> dict[str, torch.Tensor]:
    """The stored weights, refused unless they are exactly the tensors a model of ``config`` holds, all finite.

    The expected names and shapes come from a model built on torch's ``meta`` device (no memory behind it), so a
    config that does not fit its weights is refused before the real model is allocated.
    """
    if not isinstance(state, dict):
        raise InputError(f"{src}: field 'state_dict' is missing")
    try:
        with torch.device("meta"):
            expected = {name: tuple(t.shape) for name, t in MiniROAD(config).state_dict().items()}
    except Exception:  # sizes torch cannot even describe (its storage arithmetic overflows: RuntimeError, TypeError)
        raise InputError(f"{src}: field 'config' announces a model too large to build ({config})") from None
    # Stored weights can be stride-0 views of one number: a 6 kB file may announce any size, so the model the config
    # describes is bounded before it (or a check over the weights' elements) is allocated.
    model_bytes = 4 * sum(math.prod(shape) for shape in expected.values())
    if model_bytes > MAX_MODEL_BYTES:
        raise InputError(f"{src}: field 'config' announces a model of {model_bytes / 2**30:.1f} GiB ({config}); at "
                         f"most {MAX_MODEL_BYTES / 2**30:.0f} GiB of weights are loaded")
    names = [name for name in state if isinstance(name, str)]
    missing = sorted(set(expected) - set(names))
    unexpected = sorted(str(name) for name in state if name not in expected)
    if missing or unexpected:
        detail = f"missing {', '.join(missing[:3])}" if missing else f"unexpected {', '.join(unexpected[:3])}"
        raise InputError(f"{src}: weights do not fit the stored config ({shortened(detail, 160)})")
    for name, shape in expected.items():
        tensor = state[name]
        if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided or not tensor.is_floating_point():
            raise InputError(f"{src}: weights {name!r} must be a tensor of floating-point numbers")
        if tuple(tensor.shape) != shape:
            raise InputError(f"{src}: weights do not fit the stored config ({name} has shape {tuple(tensor.shape)}, "
                             f"the config needs {shape})")
        # NaN weights load fine and only show up as NaN probabilities at the first live frame.
        if not torch.isfinite(tensor).all():
            raise InputError(f"{src}: weights {name!r} contain NaN or infinity (a diverged training run?)")
    return {name: state[name] for name in expected}
