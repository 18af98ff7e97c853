"""Batch sizes from a fixed set: the backbone never sees a shape for the first time while cameras wait.

A GPU library picks its kernels per input shape the first time it sees one (cuDNN's search took 2.2-4.4 s per new
batch size on an H100, stalling every camera), and a CPU library builds its kernels per shape too, only faster. A
frame loop that batches whichever cameras have a frame due sees every batch size from 1 to K. So the sizes are fixed
(`Buckets`): a batch of ``m`` frames is cut into passes of the largest size, and the rest padded up to the smallest
size that holds it; `BatchedExtractor` runs every size once at start-up (`BatchedExtractor.warm`), before the first
frame is read, and counts the shapes it meets later for the first time (``late_shapes``, exported as the metric
``stream_detect_late_shapes`` and printed by ``benchmarks/multi_stream.py``), which must stay 0.

Default sizes (`default_batch_sizes`): on a CPU every size from 1 to the extractor's pass size (4 frames for
EfficientNet-Lite: larger passes spill the caches), so nothing is ever padded; on a GPU the powers of two up to the
number of streams (capped at the pass size), so at most half a pass is padding.

Half precision (`check_half_precision`): on a GPU the backbone may run in float16 if its features agree with float32
within `HALF_TOLERANCE` (relative L2 distance per frame) on a fixed set of test frames; otherwise it stays float32.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

import numpy as np

from graphs.common.errors import InputError
from streaming.extractors import FeatureExtractor

CPU_PASS: Final = 4  # an extractor without a pass size of its own still sees at most this many frames on a CPU
HALF_TOLERANCE: Final = 1e-2  # largest relative L2 distance, per frame, between float16 and float32 features
HALF_FRAMES: Final = 8  # test frames of the float16 check


@dataclass(frozen=True)
class Buckets:
    """The batch sizes a backbone ever sees.

    Args:
        sizes: distinct positive sizes (sorted here); the largest is the longest pass.
    """

    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.sizes or any(not isinstance(s, int) or s < 1 for s in self.sizes):
            raise InputError(f"batch sizes {self.sizes}: give one or more positive whole numbers")
        object.__setattr__(self, "sizes", tuple(sorted(set(self.sizes))))

    @property
    def largest(self) -> int:
        """The longest pass."""
        return self.sizes[-1]

    def fit(self, m: int) -> int:
        """The smallest size that holds ``m`` frames (``m`` <= `largest`)."""
        return next(s for s in self.sizes if s >= m)

    def passes(self, m: int) -> list[tuple[int, int, int]]:
        """How ``m`` frames are run: ``(start, frames, size)`` for each pass, ``size - frames`` of them padding.

        Full passes of the largest size first, then the rest in the smallest size that holds it.
        """
        out = []
        start = 0
        while m - start > 0:
            n = min(self.largest, m - start)
            out.append((start, n, self.fit(n)))
            start += n
        return out


def default_batch_sizes(extractor: FeatureExtractor, streams: int, on_gpu: bool) -> tuple[int, ...]:
    """The sizes a detector of ``streams`` streams uses (see the module).

    Args:
        extractor: its pass size caps the sizes.
        streams: the most frames one batch of the frame loop holds (one per stream).
        on_gpu: the extractor runs on a GPU.

    Returns:
        The sizes, smallest first.
    """
    cap = extractor.pass_size or (0 if on_gpu else CPU_PASS)
    most = max(1, streams) if not cap else max(1, min(cap, streams))
    if not on_gpu:
        return tuple(range(1, most + 1))
    sizes = [1]
    while sizes[-1] < most:
        sizes.append(sizes[-1] * 2)
    return tuple(s for s in sizes if not cap or s <= cap) or (1,)


class BatchedExtractor(FeatureExtractor):
    """An extractor that only ever runs batches of the `Buckets` sizes, warmed before use, counting late shapes.

    Each frame's features are computed independently of the others in its batch (`streaming.extractors`), so the
    padding (copies of the pass's last frame) changes nothing but the time.

    Args:
        extractor: the feature extractor.
        buckets: the sizes.
    """

    def __init__(self, extractor: FeatureExtractor, buckets: Buckets) -> None:
        self.extractor = extractor
        self.buckets = buckets
        self.name = extractor.name
        self.dim = extractor.dim
        self.input_size = extractor.input_size
        self.pass_size = buckets.largest
        self.half_check: tuple[bool, float] | None = None  # (float16 used, its largest distance) once checked
        self.warmed: set[tuple[int, ...]] = set()
        self.seen: set[tuple[int, ...]] = set()
        self.late_shapes = 0  # shapes first met after `warm`

    def shape_of(self, size: int) -> tuple[int, ...]:
        """What the network sees for a pass of ``size`` frames: ``(size, H, W)`` at its input size (the frames' own
        size does not matter, the network resizes them); ``(size,)`` without a network."""
        return (size, *self.extractor.input_size) if self.extractor.input_size else (size,)

    def warm(self) -> float:
        """Run every size once on blank frames at the network's input size, so that no size is new later.

        An extractor without an input size (numpy, or feature vectors passed through) has no per-shape state: its
        sizes are only marked as seen. On a GPU, float16 is tried first (`check_half_precision`) and kept when its
        features agree with float32's.

        Returns:
            Seconds it took.
        """
        started = time.perf_counter()
        device = getattr(self.extractor, "device", None)
        if getattr(device, "type", "cpu") != "cpu" and hasattr(self.extractor, "half") and self.half_check is None:
            self.half_check = check_half_precision(self.extractor)  # before the warm-up: float16 has its own kernels
        for size in self.buckets.sizes:
            if self.extractor.input_size is not None:
                height, width = self.extractor.input_size
                self.extractor(np.zeros((size, height, width, 3), dtype=np.uint8))
            shape = self.shape_of(size)
            self.warmed.add(shape)
            self.seen.add(shape)
        return time.perf_counter() - started

    def prepare(self, image: np.ndarray) -> np.ndarray:
        """`FeatureExtractor.prepare` of the extractor."""
        return self.extractor.prepare(image)

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        """Features ``(m, dim)`` of ``(m, H, W, 3)`` uint8 frames, in passes of the bucket sizes."""
        m = len(frames)
        out = np.empty((m, self.dim), dtype=np.float32)
        for start, n, size in self.buckets.passes(m):
            chunk = frames[start : start + n]
            if n < size:  # pad with the last frame: a shape the network has seen
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], size - n, axis=0)])
            shape = self.shape_of(size)
            if shape not in self.seen:
                self.seen.add(shape)
                self.late_shapes += 1
            out[start : start + n] = self.extractor(chunk)[:n]
        return out


def relative_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, ``||a - b|| / ||b||`` (L2; 0 where both are 0)."""
    num = np.linalg.norm(a - b, axis=1)
    den = np.linalg.norm(b, axis=1)
    return np.where(den > 0, num / np.maximum(den, 1e-30), num)


def probe_frames(count: int = HALF_FRAMES, size: tuple[int, int] = (224, 224), seed: int = 0) -> np.ndarray:
    """Frames with structure at every scale (smooth gradients, blocks, noise), the same every run."""
    rng = np.random.default_rng(seed)
    h, w = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    frames = np.empty((count, h, w, 3), dtype=np.uint8)
    for k in range(count):
        base = np.stack([xx / w, yy / h, ((xx + yy) % 64) / 64], axis=2) * 255 * rng.uniform(0.3, 1.0)
        blocks = rng.integers(0, 255, (8, 8, 3)).repeat((h + 7) // 8, 0).repeat((w + 7) // 8, 1)[:h, :w]
        noise = rng.normal(0, 12, (h, w, 3))
        frames[k] = np.clip(0.6 * base + 0.4 * blocks + noise, 0, 255).astype(np.uint8)
    return frames


def check_half_precision(extractor: FeatureExtractor, tolerance: float = HALF_TOLERANCE) -> tuple[bool, float]:
    """Whether an extractor with a ``half`` switch gives float32's features within ``tolerance`` in float16.

    Runs `probe_frames` both ways and compares each frame's features (`relative_distance`). The switch is left on
    when they agree, off otherwise.

    Args:
        extractor: an extractor with a boolean ``half`` attribute (`streaming.extractors.EfficientNetLiteExtractor`).
        tolerance: the largest relative distance accepted.

    Returns:
        ``(agrees, the largest relative distance)``.
    """
    if not hasattr(extractor, "half"):
        return False, float("nan")
    frames = probe_frames(size=extractor.input_size or (224, 224))
    extractor.half = False
    full = extractor(frames)
    extractor.half = True
    half = extractor(frames)
    worst = float(relative_distance(half, full).max())
    agrees = bool(np.isfinite(worst) and worst <= tolerance)
    extractor.half = agrees
    return agrees, worst
