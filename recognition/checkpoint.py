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
was added the same way: what `recognition.evidence.calibrate_evidence` measured on the validation videos at training
time (an object of finite numbers, strings, lists and objects), or null; older checkpoints load with None.

`load_detector` refuses, with one line naming the file, anything else: a truncated or unreadable
file, another format, another version, weights that do not fit the stored config or are not finite,
inconsistent class lists, and class names or step ids the live pipeline could not send (`graphs.limits`: names of
at most `MAX_NAME` characters, step ids in ``0..2^31-1``).
"""

from __future__ import annotations

import math
import numbers
import pickle
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import torch

from graphs.errors import InputError
from graphs.files import atomic_path
from graphs.limits import MAX_NAME, STEP_ID_RULE, is_step_id
from recognition.model import MiniROAD, MiniROADConfig

FORMAT_NAME: Final = "miniroad-detector"
FORMAT_VERSION: Final = 1


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
        info: free-form provenance (training settings, test mAP).
        scenario: the procedure the detector was trained on (the annotation file's scenario); None when the
            checkpoint does not say (written before checkpoints recorded it, or from a folder that names none).
        evidence: what the validation split said about the detector's reliability
            (`recognition.evidence.calibrate_evidence`); None when nothing was measured.
    """

    config: MiniROADConfig
    class_names: tuple[str, ...]
    class_step_ids: tuple[int | None, ...]
    feature_extractor: str
    fps: float
    info: dict[str, Any] = field(default_factory=dict)
    scenario: str | None = None
    evidence: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.evidence is not None:
            check_evidence(self.evidence)
        if self.scenario is not None and (not isinstance(self.scenario, str) or len(self.scenario) > MAX_NAME):
            raise InputError(f"detector checkpoint: scenario = {self.scenario!r:.60} must be a name of at most "
                             f"{MAX_NAME} characters or null")
        names, step_ids = tuple(self.class_names), tuple(self.class_step_ids)
        for i, name in enumerate(names):
            if not isinstance(name, str):
                raise InputError(f"detector checkpoint: class_names[{i}] = {name!r:.60} must be a string")
            if len(name) > MAX_NAME:
                raise InputError(f"detector checkpoint: class_names[{i}] is {len(name)} characters long; "
                                 f"at most {MAX_NAME}")
        for i, step in enumerate(step_ids):
            # int() would silently turn 1.5 into 1 and True into 1: a step id must already be an integer.
            if step is not None and (not isinstance(step, numbers.Integral) or isinstance(step, bool)):
                raise InputError(f"detector checkpoint: class_step_ids[{i}] = {step!r:.60} must be an integer or null")
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
        if len(set(ids)) != len(ids):
            raise InputError("detector checkpoint: a step id is assigned to two classes")
        if not isinstance(self.feature_extractor, str) or not self.feature_extractor:
            raise InputError(f"detector checkpoint: feature_extractor = {self.feature_extractor!r} must be a name")
        fps_ok = isinstance(self.fps, int | float) and not isinstance(self.fps, bool)
        if not fps_ok or not math.isfinite(self.fps) or self.fps <= 0:
            raise InputError(f"detector checkpoint: fps = {self.fps!r} must be a positive number")

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


def check_evidence(value: object, where: str = "evidence") -> None:
    """Refuse ``evidence`` that is not an object of finite numbers, strings, lists and objects (string keys).

    Raises:
        InputError: naming the first entry at fault (``evidence.rates[3]``).
    """
    if where == "evidence" and not isinstance(value, dict):
        raise InputError(f"detector checkpoint: evidence must be an object or null, got {type(value).__name__}")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InputError(f"detector checkpoint: {where} has a key {key!r:.40} that is not a string")
            check_evidence(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_evidence(item, f"{where}[{i}]")
    elif isinstance(value, bool) or not isinstance(value, numbers.Real | str):
        raise InputError(f"detector checkpoint: {where} = {value!r:.40} must be a number, string, list or object")
    elif isinstance(value, numbers.Real) and not math.isfinite(value):
        raise InputError(f"detector checkpoint: {where} = {value!r} must be a finite number")


def plain_evidence(value: Any) -> Any:
    """``evidence`` as plain Python (numpy numbers and arrays to floats, ints and lists), which ``weights_only``
    loading reads back; anything else is left for `check_evidence` to refuse."""
    if isinstance(value, dict):
        return {key: plain_evidence(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain_evidence(item) for item in value]
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy arrays and scalars, torch tensors
        return plain_evidence(value.tolist())
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return value


def save_detector(
    path: str | Path,
    model: MiniROAD,
    class_names: Sequence[str],
    class_step_ids: Sequence[int | None],
    feature_extractor: str,
    fps: float,
    info: dict[str, Any] | None = None,
    scenario: str | None = None,
    evidence: dict[str, Any] | None = None,
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
        evidence: what the validation split measured (`recognition.evidence.calibrate_evidence`), or None.

    Returns:
        The checkpoint description that was written.
    """
    meta = DetectorCheckpoint(
        model.config, tuple(class_names), tuple(class_step_ids), feature_extractor, float(fps), dict(info or {}),
        scenario, None if evidence is None else plain_evidence(evidence),
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
        "evidence": meta.evidence,
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return meta


def load_detector(path: str | Path, device: str | torch.device = "cpu") -> tuple[MiniROAD, DetectorCheckpoint]:
    """Read a detector checkpoint and rebuild the model (in eval mode).

    Args:
        path: checkpoint file written by `save_detector`.
        device: where to put the weights.

    Returns:
        ``(model, checkpoint)``.

    Raises:
        InputError: missing/unreadable/truncated file, another format or version, weights that do not fit
            or hold NaN/infinity, class lists of the wrong length or type.
    """
    path = Path(path)
    src = str(path)
    if not path.is_file():
        raise InputError(f"{src}: detector checkpoint not found")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, zipfile.BadZipFile, RuntimeError, EOFError, ValueError, OSError):
        # A truncated file fails inside torch's zip reader with a bare OSError (EINVAL), an unreadable one too.
        # torch's own text speaks of its loader's options (weights_only...), not of what the user should give.
        raise InputError(f"{src}: not a detector checkpoint: expected a .pt file written by recognition-train "
                         "(this one cannot be read as one: another kind of file, or a damaged copy)") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise InputError(f"{src}: field 'format' is {found!r}, expected {FORMAT_NAME!r}")
    if data.get("version") != FORMAT_VERSION:
        raise InputError(
            f"{src}: unsupported checkpoint version {data.get('version')!r} (this program reads {FORMAT_VERSION})"
        )
    cfg = data.get("config")
    if not isinstance(cfg, dict):
        raise InputError(f"{src}: field 'config' must be an object")
    try:
        config = MiniROADConfig(**cfg)
    except TypeError as err:
        raise InputError(f"{src}: bad field 'config' ({err})") from None
    except InputError as err:
        raise InputError(f"{src}: {err}") from None
    for key in ("class_names", "class_step_ids"):
        if not isinstance(data.get(key), list | tuple):  # a string would pass as a list of one-letter names
            raise InputError(f"{src}: field {key!r} must be a list (one entry per class)")
    info = data.get("info", {})
    if not isinstance(info, dict):
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
            data.get("evidence"),
        )
    except (InputError, TypeError, ValueError) as err:
        raise InputError(f"{src}: {str(err).removeprefix('detector checkpoint: ')}") from None
    model = MiniROAD(config)
    state = data.get("state_dict")
    if not isinstance(state, dict):
        raise InputError(f"{src}: field 'state_dict' is missing")
    for name, tensor in state.items():
        # NaN weights load fine and only show up as NaN probabilities at the first live frame.
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise InputError(f"{src}: weights {name!r} contain NaN or infinity (a diverged training run?)")
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        lines = str(err).strip().splitlines()
        detail = " ".join(line.strip() for line in lines[1:3]) or lines[0]
        raise InputError(f"{src}: weights do not fit the stored config ({detail[:160]})") from None
    return model.to(device).eval(), meta
