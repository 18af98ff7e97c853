"""OpenCV renderer of synthetic demo-procedure videos, and the cache of the demo videos.

Each key-step is its own scene (a colour, a moving shape and texture), background frames show an
empty table; a skin-coloured "hand" wanders over every scene, each frame gets sensor noise, each
execution its own brightness and colour cast, and consecutive segments cross-fade. Segment lengths
and pauses are random, so no two executions share a timeline.

The demo videos are written on first use under ``$MISTAKE_CACHE`` (default
``~/.cache/mistake-detection``) as ``demo-<name>-<hash of the render settings>.mp4`` with a ``.json``
sidecar holding the ground-truth segments and the video's size and frame count when it was rendered: a video
cut short or emptied since (a full disk, a copy stopped half-way, an edit by hand) no longer matches them and is
rendered again, as a damaged sidecar is, or one whose segments are not the ones the execution's timeline gives.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import cv2
import numpy as np

from graphs.common.errors import InputError, print_note
from graphs.common.files import atomic_path, read_json, write_text
from graphs.common.safe_text import unknown_name
from recognition.segmenter import run_length_encode
from streaming.demo.procedure import DEMO_EXECUTIONS, DEMO_SEEDS

RENDER_VERSION: Final = 1
BACKGROUND: Final = 0  # label of frames between key-steps

# Scene colours (RGB) per step id; 0 is the empty table.
_BASE: Final[dict[int, tuple[int, int, int]]] = {
    0: (120, 115, 110),
    1: (150, 200, 235),
    2: (45, 40, 55),
    3: (90, 160, 90),
    4: (220, 200, 90),
    5: (120, 80, 160),
    6: (230, 150, 60),
}


@dataclass(frozen=True)
class RenderConfig:
    """How demo videos look and how long their parts are.

    Args:
        fps: frame rate of the video.
        width: frame width.
        height: frame height.
        step_s: (min, max) seconds of a key-step segment.
        pause_s: (min, max) seconds of background before each segment (and after the last).
        fade_s: cross-fade length between consecutive segments.
        noise: standard deviation of per-pixel noise (0-255 scale).
    """

    fps: float = 30.0
    width: int = 320
    height: int = 240
    step_s: tuple[float, float] = (2.5, 3.5)
    pause_s: tuple[float, float] = (0.6, 1.4)
    fade_s: float = 0.3
    noise: float = 10.0

    def __post_init__(self) -> None:
        if not self.fps > 0:
            raise InputError(f"RenderConfig.fps = {self.fps} must be > 0")
        if self.width < 32 or self.height < 32:
            raise InputError(f"RenderConfig.width/height = {self.width}x{self.height} must be at least 32x32")
        for name in ("step_s", "pause_s"):
            lo, hi = getattr(self, name)
            if not 0 < lo <= hi:
                raise InputError(f"RenderConfig.{name} = {(lo, hi)} must satisfy 0 < min <= max")
        if self.fade_s < 0 or self.noise < 0:
            raise InputError("RenderConfig.fade_s and RenderConfig.noise must be >= 0")


def timeline(steps: tuple[int, ...], rng: np.random.Generator, config: RenderConfig) -> np.ndarray:
    """Per-frame labels of an execution: pauses (label 0) around segments of random length.

    Args:
        steps: key-step ids in execution order.
        rng: random generator (draws the lengths).
        config: timing ranges and fps.

    Returns:
        int64 ``(T,)`` per-frame step id, 0 for background.
    """
    pauses = rng.uniform(*config.pause_s, size=len(steps) + 1)
    lengths = rng.uniform(*config.step_s, size=len(steps))
    parts = np.empty(2 * len(steps) + 1)
    parts[0::2], parts[1::2] = pauses, lengths
    labels = np.zeros(2 * len(steps) + 1, dtype=np.int64)
    labels[1::2] = steps
    counts = np.maximum(np.rint(parts * config.fps).astype(np.int64), 1)
    return np.repeat(labels, counts)


def segments_of(labels: np.ndarray, fps: float) -> list[tuple[int, float, float]]:
    """Runs of equal non-background labels as ``(step, start_s, end_s)``.

    Args:
        labels: ``(T,)`` per-frame labels.
        fps: frame rate.

    Returns:
        The key-step segments in order.
    """
    run_labels, starts, lengths = _runs(labels)
    return [
        (step, start / fps, (start + length) / fps)
        for step, start, length in zip(run_labels.tolist(), starts.tolist(), lengths.tolist(), strict=True)
        if step != BACKGROUND
    ]


def _runs(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of equal labels (`run_length_encode`) with the first frame of each: ``(labels, starts, lengths)``, (R,)."""
    run_labels, lengths = run_length_encode(labels)
    return run_labels, np.cumsum(lengths) - lengths, lengths


def _scene(step: int, t: float, h: int, w: int, cast: np.ndarray, seed: int) -> np.ndarray:
    """One clean frame of a scene at time ``t`` seconds since its segment started (RGB uint8)."""
    img = np.empty((h, w, 3), dtype=np.uint8)
    img[:] = np.clip(np.array(_BASE[step]) + cast, 0, 255).astype(np.uint8)
    cx, cy = w // 2, h // 2
    if step == 0:
        cv2.rectangle(img, (0, int(h * 0.7)), (w, h), (90, 70, 55), -1)  # table top
    elif step == 1:  # water bands running down
        for k in range(6):
            y = int((k * h / 6 + 40 * t) % h)
            cv2.line(img, (0, y), (w, y + 10), (40, 90, 200), 6)
    elif step == 2:  # pulsing hot plate
        r = int(h * (0.18 + 0.05 * np.sin(6 * t)))
        cv2.circle(img, (cx, cy), r + 14, (255, 140, 0), 5)
        cv2.circle(img, (cx, cy), r, (220, 30, 20), -1)
    elif step == 3:  # cup sliding in
        x = int(w * 0.15 + min(t, 2.0) * w * 0.2)
        cv2.rectangle(img, (x, cy - 30), (x + 60, cy + 40), (245, 245, 245), -1)
        cv2.ellipse(img, (x + 68, cy), (14, 20), 0, -90, 90, (245, 245, 245), 5)
    elif step == 4:  # tea bag dropping
        y = int((h * 0.1 + 60 * t) % (h * 0.8))
        cv2.rectangle(img, (cx - 20, y), (cx + 20, y + 40), (110, 60, 20), -1)
        cv2.line(img, (cx, 0), (cx, y), (250, 250, 250), 2)
    elif step == 5:  # water stream, diagonal
        for k in range(-4, 8):
            x0 = int(k * w / 6 + 50 * t) % (2 * w) - w // 2
            cv2.line(img, (x0, 0), (x0 + h, h), (60, 230, 230), 7)
    elif step == 6:  # milk drops growing
        margin = min(20, min(w, h) // 4)  # 20 px at the default size; smaller frames (down to 32 px) need less
        drops = np.random.default_rng(seed).integers(margin, min(w, h) - margin, size=(7, 2))
        for x, y in drops:
            cv2.circle(img, (int(x * w / min(w, h)) % w, int(y)), int(6 + 6 * min(t, 2.0)), (250, 250, 245), -1)
    return img


def _hand(img: np.ndarray, t: float, phase: float) -> None:
    """Draw the wandering skin-coloured hand in place."""
    h, w = img.shape[:2]
    x = int(w * (0.5 + 0.35 * np.sin(0.7 * t + phase)))
    y = int(h * (0.65 + 0.2 * np.cos(0.9 * t + 2 * phase)))
    cv2.ellipse(img, (x, y), (28, 18), int(30 * np.sin(t)), 0, 360, (225, 180, 150), -1)


def render_frames(steps: tuple[int, ...], seed: int, config: RenderConfig) -> tuple[Iterator[np.ndarray], np.ndarray]:
    """Render an execution.

    Args:
        steps: key-step ids in execution order (any order: the renderer does not judge it).
        seed: seeds the timeline, the look and the noise.
        config: size, rate, timing.

    Returns:
        ``(frames, labels)``: an iterator of RGB uint8 ``(H, W, 3)`` frames and the ``(T,)`` labels.
    """
    rng = np.random.default_rng(seed)
    labels = timeline(steps, rng, config)
    cast = rng.uniform(-18, 18, size=3) * rng.uniform(0.85, 1.15)
    phase = float(rng.uniform(0, 2 * np.pi))
    fade = max(int(round(config.fade_s * config.fps)), 1)
    _, starts, lengths = _runs(labels)
    seg_start = np.repeat(starts, lengths)  # (T,) first frame of each frame's run

    def frames() -> Iterator[np.ndarray]:
        noise_rng = np.random.default_rng(seed + 1)
        for i, label in enumerate(labels.tolist()):
            t = (i - seg_start[i]) / config.fps
            img = _scene(label, t, config.height, config.width, cast, seed).astype(np.float32)
            into = i - seg_start[i]
            if into < fade and seg_start[i] > 0:  # cross-fade from the previous segment's last look
                prev = int(labels[seg_start[i] - 1])
                prev_t = (seg_start[i] - 1 - seg_start[seg_start[i] - 1]) / config.fps + into / config.fps
                alpha = (into + 1) / (fade + 1)
                img = alpha * img + (1 - alpha) * _scene(prev, prev_t, config.height, config.width, cast, seed)
            out = img.astype(np.uint8)
            _hand(out, i / config.fps, phase)
            noisy = out.astype(np.int16) + noise_rng.normal(0, config.noise, out.shape).astype(np.int16)
            yield np.clip(noisy, 0, 255).astype(np.uint8)

    return frames(), labels


def write_video(path: Path, steps: tuple[int, ...], seed: int, config: RenderConfig) -> list[tuple[int, float, float]]:
    """Render an execution to an MP4 file (OpenCV, ``mp4v``) and return its ground-truth segments.

    Args:
        path: output ``.mp4`` path (written to a temporary name, then moved into place).
        steps: key-step ids in execution order.
        seed: random seed of the execution.
        config: size, rate, timing.

    Returns:
        ``[(step, start_s, end_s), ...]``.
    """
    return _write_video(path, steps, seed, config)[0]


def _write_video(
    path: Path, steps: tuple[int, ...], seed: int, config: RenderConfig
) -> tuple[list[tuple[int, float, float]], dict[str, int]]:
    """`write_video`, with the size and frame count of the file it moved into place (what the sidecar records)."""
    with atomic_path(path, suffix=".mp4", what="demo video") as tmp:  # OpenCV picks the container by the file's ending
        fourcc = cv2.VideoWriter.fourcc(*"mp4v")
        writer = cv2.VideoWriter(str(tmp), fourcc, config.fps, (config.width, config.height))
        if not writer.isOpened():
            raise InputError(f"{path}: OpenCV cannot write an mp4v video here")
        frames, labels = render_frames(steps, seed, config)
        try:
            for rgb in frames:
                writer.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        finally:
            writer.release()
        # Measured on the temporary file: once moved, the path may already hold another run's render.
        record = {"bytes": os.stat(tmp).st_size, "frames": _frame_count(tmp)}
    return segments_of(labels, config.fps), record


def _frame_count(path: Path) -> int:
    """The frame count a video file's container states, -1 when OpenCV cannot open it: read from its header, so
    checking a cached video costs about a millisecond, not a decode."""
    capture = cv2.VideoCapture(str(path))
    try:
        return int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) if capture.isOpened() else -1
    finally:
        capture.release()


def cache_dir() -> Path:
    """Where demo videos (and other demo artefacts) are cached."""
    return Path(os.environ.get("MISTAKE_CACHE") or Path.home() / ".cache" / "mistake-detection")


def _cached_segments(path: Path, sidecar: Path,
                     expected: list[tuple[int, float, float]]) -> list[tuple[int, float, float]] | str:
    """The segments of a cached demo video, or why the entry must be rendered again (for a note).

    The sidecar alone vouched for the entry: a video cut short or emptied since it was rendered was handed to the
    reader, which refused it on every run until the user found and deleted the file. Its segments must be the ones
    the execution's timeline gives (``expected``): a sidecar of valid JSON whose segments were emptied or changed
    ended ``eval --demo`` in an IndexError or KeyError traceback, or scored the video against steps it never shows.
    """
    try:
        data = read_json(sidecar, "demo cache sidecar")
        segments = data["segments"]
        out = [(int(step), float(start), float(end)) for step, start, end in segments]
    except (InputError, KeyError, TypeError, ValueError):  # unreadable or bad JSON, or not the shape we write
        return f"has a damaged sidecar ({sidecar.name})"
    if out != expected:
        return f"has a damaged sidecar ({sidecar.name}: its segments are not the execution's)"
    try:
        recorded = {key: int(data["video"][key]) for key in ("bytes", "frames")}
    except (KeyError, TypeError, ValueError):  # a sidecar written before the video was recorded in it
        return f"has a sidecar that does not record its size ({sidecar.name}, written by an older version)"
    try:
        size = os.stat(path).st_size
    except OSError as err:  # removed since it was found
        return f"cannot be examined ({err.strerror or err})"
    if size != recorded["bytes"]:  # a cut or emptied file, said before FFmpeg logs that it cannot open it
        return f"is damaged ({size} bytes, {recorded['bytes']} when it was rendered)"
    frames = _frame_count(path)
    if frames != recorded["frames"]:  # same size, yet its header was overwritten
        now = "OpenCV cannot open it" if frames < 0 else f"{frames} frames"
        return f"is damaged ({now}, {recorded['frames']} frames when it was rendered)"
    return out


def demo_video(
    name: str = "mistake", note: Callable[[str], None] = print_note
) -> tuple[Path, list[tuple[int, float, float]]]:
    """The path of a demo video, rendered on first use (and again when its cache entry is damaged), and its
    ground-truth segments.

    Rendering is atomic (`atomic_path`): two runs that find the entry missing or damaged at once each render it into
    a private temporary file and move it into place, so a run reads the old file or a whole new one, never half.

    Args:
        name: ``"mistake"``, ``"correct"`` or ``"missing"`` (see `DEMO_EXECUTIONS`).
        note: told, in one line, when a damaged cache entry is rendered again.

    Returns:
        ``(video path, segments)``.
    """
    if name not in DEMO_EXECUTIONS:
        raise InputError(unknown_name("--video: demo", f"demo:{name}", [f"demo:{n}" for n in DEMO_EXECUTIONS], None))
    steps, seed, config = DEMO_EXECUTIONS[name], DEMO_SEEDS[name], RenderConfig()
    key = hashlib.sha1(repr((RENDER_VERSION, steps, seed, config)).encode()).hexdigest()[:10]
    path = cache_dir() / f"demo-{name}-{key}.mp4"
    sidecar = path.with_suffix(".json")
    if path.is_file() and sidecar.is_file():
        # The timeline alone (no frame rendered) gives the segments the sidecar must hold.
        expected = segments_of(timeline(steps, np.random.default_rng(seed), config), config.fps)
        cached = _cached_segments(path, sidecar, expected)
        if not isinstance(cached, str):
            return path, cached
        # A damaged cache entry is ours to rebuild, not the user's problem: render it again.
        note(f"the cached demo video {path} {cached}; rendering it again")
    try:
        segments, record = _write_video(path, steps, seed, config)
        # Written after the video, so that a sidecar describing a video is only ever seen once that video is there.
        sidecar_data = {"steps": DEMO_EXECUTIONS[name], "segments": segments, "video": record}
        write_text(sidecar, json.dumps(sidecar_data), "demo cache sidecar")
    except InputError as err:  # the cache folder cannot be made or written, or something else stands there
        raise InputError(
            f"cannot render the demo video into {path.parent} (set $MISTAKE_CACHE to a writable folder): {err}"
        ) from None
    return path, segments
