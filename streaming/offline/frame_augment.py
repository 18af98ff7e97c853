"""Augmented copies of a training video's frames, for ``recognition-features --augment-copies K``.

Each copy sees the whole video through one random "other camera": a crop of the frame (another placement and zoom),
optionally mirrored, with other brightness, contrast and saturation (other lighting). The parameters are drawn once
per copy and kept for the whole video, as a second camera would be; they come from a generator seeded by the run's
seed, the video's name and the copy's number, so a resumed or repeated run writes the same copies.

The extractor resizes whatever it is given to its own input (`streaming.efficientnet_lite.preprocess`), so the crop
is passed on as it is, not resized back.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Final

import numpy as np

CROP_SCALE: Final = (0.75, 1.0)  # side of the crop, as a share of the frame's side (aspect ratio kept)
BRIGHTNESS: Final = 0.25  # gain drawn in [1 - b, 1 + b]
CONTRAST: Final = 0.25
SATURATION: Final = 0.3
LUMA: Final = np.array([0.299, 0.587, 0.114], dtype=np.float32)


@dataclass(frozen=True)
class FrameAugmentation:
    """One copy's parameters (fractions of the frame, so that they apply to any frame size).

    Attributes:
        scale: crop side as a share of the frame's side.
        left: crop's left edge, as a share of the room left by the crop (0: flush left, 1: flush right).
        top: crop's top edge, likewise.
        flip: mirror left to right.
        brightness: gain on every pixel.
        contrast: gain on each pixel's difference from its frame's mean luminance.
        saturation: gain on each pixel's difference from its own luminance (0: grey).
    """

    scale: float
    left: float
    top: float
    flip: bool
    brightness: float
    contrast: float
    saturation: float


def draw_augmentation(seed: int, video: str, copy: int, flips: bool) -> FrameAugmentation:
    """The parameters of copy ``copy`` of ``video`` (the same for the same seed, name and number).

    Args:
        seed: the run's seed.
        video: the video's name.
        copy: the copy's number (1, 2, ...).
        flips: whether a copy may be mirrored (half of them are).
    """
    rng = np.random.default_rng([seed, zlib.crc32(video.encode("utf-8")), copy])
    scale, left, top, flip, gain, contrast, saturation = rng.uniform(size=7)
    return FrameAugmentation(
        scale=float(CROP_SCALE[0] + scale * (CROP_SCALE[1] - CROP_SCALE[0])),
        left=float(left),
        top=float(top),
        flip=bool(flips and flip < 0.5),
        brightness=float(1 + BRIGHTNESS * (2 * gain - 1)),
        contrast=float(1 + CONTRAST * (2 * contrast - 1)),
        saturation=float(1 + SATURATION * (2 * saturation - 1)),
    )


def augment_frames(frames: np.ndarray, aug: FrameAugmentation) -> np.ndarray:
    """Apply one copy's augmentation to a batch of frames.

    ``y = clip(b · (m + c · (g + s · (x - g) - m)))`` per pixel, with ``g`` the pixel's luminance and ``m`` the frame's
    mean luminance, on the crop (mirrored if asked).

    Args:
        frames: ``(B, H, W, 3)`` uint8 RGB.
        aug: the copy's parameters.

    Returns:
        ``(B, h, w, 3)`` uint8, ``h = round(scale H)``, ``w = round(scale W)``.
    """
    _, height, width, _ = frames.shape
    h, w = max(1, round(aug.scale * height)), max(1, round(aug.scale * width))
    top, left = round(aug.top * (height - h)), round(aug.left * (width - w))
    x = frames[:, top : top + h, left : left + w].astype(np.float32)
    if aug.flip:
        x = x[:, :, ::-1]
    grey = x @ LUMA  # (B, h, w)
    mean = grey.mean(axis=(1, 2), keepdims=True)[..., None]  # (B, 1, 1, 1)
    coloured: np.ndarray = grey[..., None] + aug.saturation * (x - grey[..., None])
    lit: np.ndarray = aug.brightness * (mean + aug.contrast * (coloured - mean))
    return np.clip(lit + 0.5, 0, 255).astype(np.uint8)
