"""Per-frame feature extractors: one interface, chosen by the name a detector checkpoint records.

- ``"light-v1"`` (`LightExtractor`): built in, numpy only, about a millisecond per 320x240 frame on one
  core. The frame is split into a 4x4 grid; per cell it keeps the mean colour (3), the luminance
  standard deviation (1) and the mean gradient magnitude (1): 80 numbers that see layout, colour and
  texture. Good for the synthetic demo and for fixed-camera setups; not a general-purpose backbone.
- ``"efficientnet-lite0"`` (`EfficientNetLiteExtractor`): EfficientNet-Lite0 pretrained on ImageNet, 1280
  values per frame (see `streaming.efficientnet_lite` for the pre-processing and why). The backbone for real
  procedures; on CPU or CUDA (``--device``).
- ``"efficientnet-lite0-grid"``: the same network, its last feature map averaged globally and over a 2x2 grid
  (6400 values): where in the view things are, for key-steps on small objects. ``"efficientnet-lite2"`` and
  ``"efficientnet-lite2-grid"``: the larger Lite2 network (260x260 input; the optional ``lite2`` extra).
- ``"torchscript"`` (`TorchScriptExtractor`, ``--backbone model.pt``): any TorchScript module mapping a
  float batch ``(B, 3, H, W)`` (RGB in [0, 1], ImageNet-normalised) to ``(B, D)`` features.

`make_extractor(name, backbone, device)` builds the one a checkpoint asks for, from the table of extractors
(`streaming.registry.EXTRACTORS`: a new backbone is a class here and one entry there). An extractor computes each frame
independently of the others in its batch: a file read in batches gives the features a live stream gets one frame at
a time.
"""

from __future__ import annotations

import abc
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

import numpy as np
import torch

from graphs.common.errors import InputError, RunError
from graphs.common.file_kinds import written_by_torch_save, zip_member_names
from graphs.common.files import open_input
from streaming.devices import resolve_device
from streaming.efficientnet_lite import LITE2_NAME, load_efficientnet_lite
from streaming.efficientnet_lite import NAME as EFFICIENTNET_NAME
from streaming.readers import out_of_memory
from streaming.registry import EXTRACTORS

MAX_BACKBONE_BYTES: Final = 4 * 2**30  # a TorchScript backbone file (ResNet-50 is 100 MB)
LIGHT_NAME: Final = "light-v1"
TORCHSCRIPT_NAME: Final = "torchscript"
GRID_SUFFIX: Final = "-grid"
# Extractor name -> (network, grid cells per side) of the pretrained backbones.
BACKBONES: Final = {
    EFFICIENTNET_NAME: (EFFICIENTNET_NAME, 0),
    EFFICIENTNET_NAME + GRID_SUFFIX: (EFFICIENTNET_NAME, 2),
    LITE2_NAME: (LITE2_NAME, 0),
    LITE2_NAME + GRID_SUFFIX: (LITE2_NAME, 2),
}
# The ones that need no file of the user's (every entry of `streaming.registry.EXTRACTORS` but the TorchScript one).
EXTRACTOR_NAMES: Final = tuple(name for name in EXTRACTORS if name != TORCHSCRIPT_NAME)
EFFICIENTNET_BATCH: Final = 4  # frames per forward pass on a CPU: larger batches spill the caches and run slower
EFFICIENTNET_GPU_BATCH: Final = 256  # on a GPU a large batch is what keeps it busy
IMAGENET_MEAN: Final = (0.485, 0.456, 0.406)
IMAGENET_STD: Final = (0.229, 0.224, 0.225)


class FeatureExtractor(abc.ABC):
    """Maps a batch of RGB frames ``(B, H, W, 3)`` uint8 to features ``(B, dim)`` float32.

    Attributes:
        name: what a checkpoint records (`make_extractor`).
        dim: features per frame.
        input_size: ``(height, width)`` every frame is brought to before the network, whatever the camera's size;
            None for an extractor whose cost does not depend on what shapes it saw before (numpy). The detector's
            batching (`streaming.detector.batching`) warms one network shape per batch size from it.
        pass_size: the most frames one forward pass takes (larger batches are split); 0: no limit.
    """

    name: str = ""
    dim: int = 0
    input_size: tuple[int, int] | None = None
    pass_size: int = 0

    def prepare(self, image: np.ndarray) -> np.ndarray:
        """One frame ``(H, W, 3)`` uint8 made ready for the network, in the thread that decoded it (not the frame
        loop's): the features of the prepared frame are those of the frame. Default: the frame as it is."""
        return image

    @abc.abstractmethod
    def __call__(self, frames: np.ndarray) -> np.ndarray:
        """Extract features.

        Args:
            frames: ``(B, H, W, 3)`` uint8 RGB.

        Returns:
            ``(B, dim)`` float32.
        """


@dataclass(frozen=True)
class LightConfig:
    """Settings of the built-in extractor.

    Args:
        grid: cells per side of the grid.
    """

    grid: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.grid <= 32:
            raise InputError(f"LightConfig.grid = {self.grid} must be in [1, 32]")


def grid_means(values: np.ndarray, grid: int) -> np.ndarray:
    """Mean of each cell of a ``grid x grid`` split of the image plane.

    Args:
        values: ``(B, H, W, C)``; rows/columns beyond a multiple of ``grid`` are cropped.
        grid: cells per side.

    Returns:
        ``(B, grid, grid, C)`` cell means.
    """
    b, h, w, c = values.shape
    ch, cw = h // grid, w // grid
    cells = values[:, : ch * grid, : cw * grid].reshape(b, grid, ch, grid, cw, c)
    return cells.mean(axis=(2, 4))


def light_features(frames: np.ndarray, grid: int = 4) -> np.ndarray:
    """The ``light-v1`` features: per grid cell, mean RGB, luminance std and mean gradient magnitude.

    Args:
        frames: ``(B, H, W, 3)`` uint8 RGB.
        grid: cells per side.

    Returns:
        ``(B, grid * grid * 5)`` float32, roughly in [0, 1].
    """
    # Halve the resolution first: the cells average thousands of pixels anyway, and it quarters the work.
    x = frames[:, ::2, ::2].astype(np.float32) * (1.0 / 255.0)  # (B, H/2, W/2, 3)
    luma = x @ np.array([0.299, 0.587, 0.114], dtype=np.float32)  # (B, h, w)
    gx = np.abs(np.diff(luma, axis=2, append=luma[:, :, -1:]))
    gy = np.abs(np.diff(luma, axis=1, append=luma[:, -1:, :]))
    stack = np.concatenate([x, luma[..., None], (luma * luma)[..., None], (gx + gy)[..., None]], axis=3)
    cells = grid_means(stack, grid)  # (B, g, g, 6)
    std = np.sqrt(np.maximum(cells[..., 4] - cells[..., 3] ** 2, 0.0))
    out = np.concatenate([cells[..., :3], std[..., None], 4.0 * cells[..., 5:6]], axis=3)  # (B, g, g, 5)
    return out.reshape(len(frames), -1).astype(np.float32)


class LightExtractor(FeatureExtractor):
    """The built-in ``light-v1`` extractor (see `light_features`)."""

    name = LIGHT_NAME

    def __init__(self, config: LightConfig | None = None) -> None:
        self.config = config or LightConfig()
        self.dim = self.config.grid * self.config.grid * 5

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        _check_frames(frames)
        side = 2 * self.config.grid - 1  # the frame is halved, then every grid cell needs a pixel
        if min(frames.shape[1:3]) < side:
            height, width = frames.shape[1:3]
            raise InputError(f"{LIGHT_NAME} features need frames of at least {side}x{side} px, got {width}x{height}")
        return light_features(frames, self.config.grid)


class TorchScriptExtractor(FeatureExtractor):
    """A TorchScript backbone: ``(B, 3, H, W)`` normalised RGB -> ``(B, D)``.

    An output of more dimensions, ``(B, C, 1, 1)`` say, is flattened to ``(B, C)``; a tuple or list
    output uses its first item. The backbone is probed on a blank batch when loaded, so one that fails
    or does not keep the batch dimension is refused there, naming the file.

    Args:
        path: the ``.pt`` TorchScript file.
        size: frames are resized to ``size x size`` before the backbone (0 keeps them as they are).

    Torch's thread count is the caller's to set (``--threads``); the extractor leaves it alone.
    """

    name = TORCHSCRIPT_NAME

    def __init__(self, path: str | Path, size: int = 224) -> None:
        self._mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        self._std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        path = Path(path)
        try:  # a folder, a FIFO or /dev/zero is said to be one (it was "file not found"), never read or waited on
            handle = open_input(path, "TorchScript backbone file", limit=MAX_BACKBONE_BYTES)
        except InputError as err:
            raise InputError(f"--backbone {err}") from None
        with handle:
            try:
                with warnings.catch_warnings():
                    # TorchScript is deprecated upstream but is still the one self-contained backbone format.
                    warnings.simplefilter("ignore", DeprecationWarning)
                    self.module = torch.jit.load(handle, map_location="cpu").eval()
            except (RuntimeError, ValueError):
                raise InputError(f"--backbone {path}: {_not_torchscript(handle)}") from None
        self.size = size
        self.path = path
        self.input_size = (size, size) if size else None
        side = max(size, 32)
        try:
            probe = self._forward(np.zeros((2, side, side, 3), dtype=np.uint8))
        except Exception as err:  # whatever the module raises on a well-formed batch
            if out_of_memory(err):  # no stream runs yet to fail: said as the loop says it (`_no_memory`), exit 1
                raise RunError(f"internal failure of the detector, not a mistake in its input: "
                               f"{_no_memory(path, f'a (2, 3, {side}, {side}) batch', err)}") from None
            raise InputError(f"--backbone {path}: fails on a (2, 3, {side}, {side}) batch "
                             f"({_last_line(err)[:120]})") from None
        if probe.ndim < 2 or probe.shape[0] != 2 or probe[0].numel() == 0:  # (2, 0): features of no width
            raise InputError(f"--backbone {path}: output has shape {tuple(probe.shape)}, expected (batch, features)")
        self.dim = int(probe[0].numel())

    def _forward(self, frames: np.ndarray) -> Any:
        """The module's output tensor (the first item of a tuple or list) for ``(B, H, W, 3)`` uint8 frames."""
        _check_frames(frames)
        x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float().div_(255.0)  # (B,3,H,W)
        if self.size:
            x = torch.nn.functional.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
        with torch.inference_mode():
            out = self.module((x - self._mean) / self._std)
        if isinstance(out, tuple | list) and out:
            out = out[0]
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a tensor")
        if out.is_complex():  # made real it would lose its imaginary part, with torch's warning on stderr
            raise TypeError(f"the output is a tensor of complex numbers ({out.dtype}), not real features")
        return out

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        """Features of a batch; a backbone that fails on it, or returns NaN or infinity, is named (``InputError``):
        the user's model is at fault, and unchecked non-finite features would surface frames later as a detector
        or segmenter error that does not say where they came from."""
        try:
            out = self._forward(frames)  # (B, D) or (B, ...)
        except Exception as err:  # whatever the user's module raises on a well-formed batch
            if out_of_memory(err):  # the machine's limit, not the user's mistake: the loop's internal failure, exit 1
                raise MemoryError(_no_memory(self.path, f"a batch of {len(frames)} frame(s)", err)) from err
            raise InputError(f"--backbone {self.path}: fails on a batch of {len(frames)} frame(s) "
                             f"({_last_line(err)[:120]})") from None
        features = out.reshape(out.shape[0], -1).float().numpy()
        bad = ~np.isfinite(features).all(axis=1)
        if bad.any():
            raise InputError(f"--backbone {self.path}: its features hold NaN or infinity (frame {int(np.argmax(bad))} "
                             f"of a batch of {len(frames)})")
        return features


def _not_torchscript(handle: IO[bytes]) -> str:
    """Why a file `torch.jit.load` refused is no backbone, in the user's terms: torch's own text speaks of its zip
    reader ("PytorchStreamReader failed locating file constants.pkl: ... internal miniz error"), cut mid-word."""
    names = zip_member_names(handle)
    if written_by_torch_save(names) and not any(n.endswith("/constants.pkl") for n in names):
        return ("written by torch.save (weights, or a detector checkpoint: that one goes to --detector), not a "
                "TorchScript module: save the backbone with torch.jit.save")
    return "not a TorchScript file (torch.jit.save writes them): another kind of file, or a damaged copy"


class EfficientNetLiteExtractor(FeatureExtractor):
    """EfficientNet-Lite pretrained on ImageNet: 1280 features per frame, or 6400 with the grid
    (`streaming.efficientnet_lite`).

    Runs under ``torch.inference_mode``; a batch larger than `EFFICIENTNET_BATCH` frames (on a CPU) or
    `EFFICIENTNET_GPU_BATCH` frames (on a GPU) is split. Torch's thread count is the caller's to set (``--threads``).
    On a CPU the convolutional stages run under ONNX Runtime (`streaming.onnx_backbone`: about twice as fast, the
    features within 5e-6 of torch's as measured, 1e-4 as tested).

    On a GPU each pass is copied from page-locked (pinned) host memory with an asynchronous copy, and with ``half``
    the network runs under float16 autocast (`streaming.detector.batching.check_half_precision` decides whether its
    features agree with float32 closely enough). `prepare` resizes a frame to the network's input in the thread that
    decoded it, with the same resize the network would apply on a CPU, so that 224x224 frames, not full ones, cross
    the loop and the bus.

    Args:
        device: ``"auto"`` (CUDA when torch sees one), ``"cpu"`` or ``"cuda"``.
        name: one of `BACKBONES`.
        onnx_runtime: on a CPU, run the convolutions under ONNX Runtime (False: torch's kernels, as on a GPU).
    """

    def __init__(self, device: str = "auto", name: str = EFFICIENTNET_NAME, onnx_runtime: bool = True) -> None:
        network, grid = BACKBONES[name]
        self.name = name
        self.device = resolve_device(device)
        self.backbone = load_efficientnet_lite(network, self.device, grid)
        if onnx_runtime and self.device.type == "cpu":
            self.backbone.use_onnx_runtime()
        self.dim = self.backbone.dim
        self.input_size = (self.backbone.size, self.backbone.size)
        self.pass_size = EFFICIENTNET_BATCH if self.device.type == "cpu" else EFFICIENTNET_GPU_BATCH
        self.half = False
        self._pinned: dict[tuple[int, ...], torch.Tensor] = {}

    def prepare(self, image: np.ndarray) -> np.ndarray:
        """The frame at the network's input size, resized as `streaming.efficientnet_lite.preprocess` does on a CPU
        (uint8, bilinear with anti-aliasing): the features are the same as for the full frame there."""
        if image.shape[:2] == self.input_size:
            return image
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(image))[None].permute(0, 3, 1, 2)  # (1, 3, H, W) view
            x = torch.nn.functional.interpolate(x, size=self.input_size, mode="bilinear", antialias=True,
                                                align_corners=False)
            return np.ascontiguousarray(x[0].permute(1, 2, 0).numpy())

    def _to_device(self, chunk: np.ndarray) -> torch.Tensor:
        """A pass's frames on the device: on a GPU through a pinned buffer kept per shape, copied asynchronously (the
        buffer is reused only after the previous pass's features came back, which waits for its copy)."""
        host = torch.from_numpy(np.ascontiguousarray(chunk))
        if self.device.type == "cpu":
            return host
        pinned = self._pinned.get(chunk.shape)
        if pinned is None:
            pinned = self._pinned[chunk.shape] = torch.empty(chunk.shape, dtype=torch.uint8).pin_memory()
        pinned.copy_(host)
        return pinned.to(self.device, non_blocking=True)

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        _check_frames(frames)
        out = np.empty((len(frames), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(frames), self.pass_size):
                chunk = self._to_device(frames[start : start + self.pass_size])
                if self.half:
                    with torch.autocast(self.device.type, dtype=torch.float16):
                        feats = self.backbone(chunk)  # (b, 1280)
                else:
                    feats = self.backbone(chunk)
                out[start : start + len(chunk)] = feats.float().cpu().numpy()
        return out


def _no_memory(path: Path, batch: str, err: Exception) -> str:
    """What a backbone that ran out of memory says (`streaming.readers.out_of_memory`): ``err``'s last line, since
    TorchScript's first says only that its interpreter failed, and the `MemoryError` the detector's loop ends with
    (`streaming.detector.loop.internal_failure`: one ``error:`` line, no traceback) would name that line alone."""
    return f"--backbone {path}: ran out of memory on {batch} ({_last_line(err)[:160]})"


def _last_line(err: Exception) -> str:
    """The last non-blank line of an error (TorchScript puts the message under its traceback), or its type's name."""
    return ([line.strip() for line in str(err).splitlines() if line.strip()] or [type(err).__name__])[-1]


def _check_frames(frames: np.ndarray) -> None:
    if frames.ndim != 4 or frames.shape[3] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be (B, H, W, 3) uint8, got {frames.shape} {frames.dtype}")


def pretrained_extractor(name: str, backbone: str | Path | None, device: str) -> FeatureExtractor:
    """A pretrained backbone of `BACKBONES` (no file of the user's: ``backbone`` must be None)."""
    if backbone is not None:
        raise InputError(f"--backbone {backbone}: this detector was trained on the built-in {name} features")
    return EfficientNetLiteExtractor(device, name)


def light_extractor(name: str, backbone: str | Path | None, device: str) -> FeatureExtractor:
    """The built-in ``light-v1`` extractor (numpy, on the CPU whatever ``device`` says)."""
    if backbone is not None:
        raise InputError(f"--backbone {backbone}: this detector was trained on the built-in {name} features")
    return LightExtractor()


def torchscript_extractor(name: str, backbone: str | Path | None, device: str) -> FeatureExtractor:
    """The user's TorchScript backbone (``--backbone``, required)."""
    if backbone is None:
        raise InputError(f"the detector needs TorchScript backbone features ({name}): pass --backbone model.pt")
    return TorchScriptExtractor(backbone)


def make_extractor(name: str, backbone: str | Path | None = None, device: str = "auto",
                   source: str = "") -> FeatureExtractor:
    """Build the extractor a detector checkpoint names, from the table `streaming.registry.EXTRACTORS`.

    Args:
        name: one of `EXTRACTOR_NAMES`, or a name starting with ``"torchscript"`` (the checkpoint's
            ``feature_extractor``).
        backbone: TorchScript file, required for ``"torchscript"``.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"`` for the EfficientNet backbones (the others run on the CPU).
        source: what asks for ``name`` (``--detector FILE``), named when no backbone here computes it.

    Returns:
        The extractor.
    """
    key = TORCHSCRIPT_NAME if name.startswith(TORCHSCRIPT_NAME) else name
    if key not in EXTRACTORS:
        known = ", ".join((*EXTRACTOR_NAMES, TORCHSCRIPT_NAME))
        # A detector trained on imported features (recognition-features import) has no backbone to compute them.
        asks = f"{source}: asks" if source else "the detector asks"
        raise InputError(f"{asks} for feature extractor {name!r}, which no backbone here computes from "
                         f"video (known: {known}): give it its features as .npy files with --features, not videos")
    factory = EXTRACTORS[key].load()
    extractor: FeatureExtractor = factory(name, backbone, device)
    return extractor
