"""Where torch work runs: the ``--device`` values of ``stream-detect`` and ``recognition-features``."""

from __future__ import annotations

from typing import Final

import torch

from graphs.common.errors import InputError
from graphs.common.safe_text import unknown_name

DEVICES: Final = ("auto", "cpu", "cuda")


def resolve_device(device: str, option: str = "--device") -> torch.device:
    """The torch device a ``--device`` value means.

    Args:
        device: ``"auto"`` (CUDA when torch sees a CUDA device, else the CPU), ``"cpu"`` or ``"cuda"``.
        option: the option named in errors.

    Returns:
        The device.

    Raises:
        InputError: an unknown value, or ``"cuda"`` where torch sees no CUDA device.
    """
    if device not in DEVICES:
        raise InputError(unknown_name(option, device, DEVICES, None))
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError(f"{option} cuda: torch {torch.__version__} sees no CUDA device; use --device cpu (or auto)")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
