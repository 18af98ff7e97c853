"""Camera-like videos of a made-up six-step procedure ("pack a parcel"), written with OpenCV, and their annotations.

The easy generator (`tests.procedure_videos`) gives each key-step its own whole-frame scene. Here, as in real
procedures, a key-step is a small change in one part of a still table: a lid opened, a cup put in a corner. The
table, the shelf behind it and every object are real photographs shipped by scikit-image (public domain): a wooden
table (``coffee``), a cardboard box and a garage shelf (``stereo_motorcycle``), an espresso cup (``coffee``), coins
(``coins``), a photograph print (``astronaut``), a sticker (``logo``) and paper on the table (``page``, ``text``).

What makes it hard, each drawn per video from the seed:

- a hand-like occluder (forearm, sleeve, palm, fingers, its shadow) brings each object in from the edge of the view,
  puts it down and leaves; it hides part of what it handles and blurs when it moves fast;
- idle gaps of variable length between steps, in which the hand may hover over the table, nudge an object that is
  already there, or rest at the edge of the view, and a sheet of paper may slide through the view (occluders);
- the other hand sometimes rests over part of the table during a step (partial occlusion);
- camera drift (translation, roll, zoom) and shake with bumps, and motion blur along the camera's motion;
- lighting drift (level, colour temperature, a light gradient that turns), mains flicker aliased to a few hertz
  and dips as someone passes the lamp; vignetting; spells of defocus;
- sensor noise (shot and read noise, per channel) and compression: each frame goes through the camera's JPEG
  (quality drawn per video) and the file is MPEG-4 part 2 at OpenCV's default rate (well under 1 Mbit/s at
  640x480, 15 fps);
- steps of 2 to 6 s, slightly imprecise annotated boundaries (+-0.1 s), as a person labels.

The procedure (``PRECONDITIONS``): ``add_coins`` needs ``open_box``; ``stamp_photo`` needs ``add_coins`` AND
``lay_photo``; ``close_box`` needs ``stamp_photo`` AND ``place_cup``; ``open_box``, ``place_cup`` and ``lay_photo``
can come first, in any order. Of 20 executions, the first 14 are for training (varied valid orders, one with a
violation marked ``has_errors``) and the last 6 are held out, 4 of which do a step before one of its pre-conditions
(each violation of ``VIOLATIONS`` once; the early step's segment is marked ``has_errors``).

Usage::

    python -m tests.hard_procedure_videos OUT [--seed 0] [--videos 20] [--size 640x480] [--fps 15] [--clean]

writes ``OUT/videos/video_XX.mp4``, ``OUT/labels.json`` (the annotation format of README "Your own procedure"),
``OUT/split.json`` (``train`` / ``test`` names) and ``OUT/README.txt`` (command, seed, held-out videos). The same
seed writes the same files. ``--clean`` keeps the procedure, objects and hands but drops the camera's motion, the
lighting changes, noise, blur and JPEG, to measure what the nuisances cost.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple

import cv2
import numpy as np

from tests.procedure_videos import annotation_file

SCENARIO: Final = "parcel"
STEPS: Final = {0: "open_box", 1: "place_cup", 2: "add_coins", 3: "lay_photo", 4: "stamp_photo", 5: "close_box"}
PRECONDITIONS: Final[dict[int, tuple[int, ...]]] = {0: (), 1: (), 2: (0,), 3: (), 4: (2, 3), 5: (1, 4)}
# (step done too early, the pre-condition it skips): one single pre-condition and three halves of AND pre-conditions.
VIOLATIONS: Final = ((2, 0), (4, 3), (4, 2), (5, 1))
STEP_SECONDS: Final = (2.0, 6.0)
GAP_SECONDS: Final = (0.6, 3.2)
HELD_OUT_SHARE: Final = 0.3  # 6 of 20
WORLD_MARGIN: Final = 1.2  # the table is drawn this much larger than the view, so the camera can drift over it
FOURCC: Final = "mp4v"

Array = np.ndarray


# ----------------------------------------------------------------------------------------------------------------
# The procedure: orders, violations, the split


def done_too_early(order: Sequence[int]) -> list[bool]:
    """Per step of an order, whether it was done before one of its pre-conditions (what an annotator marks)."""
    return [not set(PRECONDITIONS[s]) <= set(order[:k]) for k, s in enumerate(order)]


def valid_orders() -> list[tuple[int, ...]]:
    """Every order of the steps that respects `PRECONDITIONS` (15 of the 720)."""
    return [p for p in itertools.permutations(STEPS) if not any(done_too_early(p))]


def violating_order(rng: np.random.Generator, step: int, skipped: int) -> tuple[int, ...]:
    """A valid order with ``step`` moved to just before ``skipped``: that step, and only it, misses only ``skipped``.

    Raises:
        ValueError: when ``skipped`` is not a pre-condition of ``step``.
    """
    if skipped not in PRECONDITIONS[step]:
        raise ValueError(f"{STEPS[skipped]} is not a pre-condition of {STEPS[step]}")
    valid = valid_orders()
    for _ in range(1000):  # a few draws suffice: most valid orders have the other pre-conditions first
        order = [s for s in valid[int(rng.integers(len(valid)))] if s != step]
        order.insert(order.index(skipped), step)
        k = order.index(step)
        missing = set(PRECONDITIONS[step]) - set(order[:k])
        if missing == {skipped} and sum(done_too_early(order)) == 1:
            return tuple(order)
    raise AssertionError("no order found")  # unreachable with PRECONDITIONS above


class Plan(NamedTuple):
    """One execution to write: its key, its order, the violation it makes (or None) and whether it is held out."""

    name: str
    order: tuple[int, ...]
    violation: tuple[int, int] | None
    held_out: bool


def plan_executions(videos: int, seed: int) -> list[Plan]:
    """The executions of a set: the last ``round(0.3 * videos)`` held out, two thirds of them with a violation.

    Training videos have valid orders, except one (at a drawn position, when there are at least 7) with a violation;
    the held-out violations go through `VIOLATIONS` in turn, their positions among the held-out videos drawn. Valid
    executions take the valid orders (`valid_orders`) in a drawn sequence: no two share one while any is left.

    Args:
        videos: how many executions (at least 2).
        seed: the set's seed.

    Returns:
        One `Plan` per video, named ``video_00`` ...
    """
    if videos < 2:
        raise ValueError(f"--videos {videos}: at least 2 (one to train on, one held out)")
    rng = np.random.default_rng([seed, 0x5EED])
    held = max(1, round(HELD_OUT_SHARE * videos))
    train = videos - held
    held_violations = round(held * 2 / 3)
    kinds: list[tuple[int, int] | None] = [None] * train
    if train >= 7:
        kinds[int(rng.integers(train))] = VIOLATIONS[int(rng.integers(len(VIOLATIONS)))]
    tail: list[tuple[int, int] | None] = [VIOLATIONS[k % len(VIOLATIONS)] for k in range(held_violations)]
    tail += [None] * (held - held_violations)
    kinds += [tail[k] for k in rng.permutation(held)]
    valid = valid_orders()
    cycle = [valid[k] for k in rng.permutation(len(valid))]
    plans: list[Plan] = []
    for k, kind in enumerate(kinds):
        if kind is None:
            order = cycle[sum(p.violation is None for p in plans) % len(cycle)]
        else:
            order = violating_order(rng, *kind)
        plans.append(Plan(f"video_{k:02d}", order, kind, k >= train))
    return plans


# ----------------------------------------------------------------------------------------------------------------
# Real photographs


class Sprite(NamedTuple):
    """An image to paste: colour (h, w, 3) float32 in 0..255 (RGB) and coverage (h, w) float32 in 0..1."""

    rgb: Array
    alpha: Array


def _ellipse_alpha(h: int, w: int, soft: float = 1.5) -> Array:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    r = np.hypot((xx + 0.5 - w / 2) / (w / 2), (yy + 0.5 - h / 2) / (h / 2))
    return np.clip((1.0 - r) * min(h, w) / (2 * soft), 0.0, 1.0).astype(np.float32)


@functools.lru_cache(maxsize=1)
def photos() -> dict[str, Any]:
    """The scikit-image photographs the scenes are made of, cut and masked once per process."""
    from skimage import data  # the dev extra; only this generator needs it

    coffee = data.coffee().astype(np.float32)
    garage = data.stereo_motorcycle()[0].astype(np.float32)
    out: dict[str, Any] = {
        "wood": coffee[:, 495:600],  # the table top right of the saucer
        "shelf": garage[0:120, 330:741],  # shelves with boxes and tins, behind the table
        "box": Sprite(garage[185:272, 614:677], np.ones((87, 63), np.float32)),  # a closed carton, flap at the top
        "cup": Sprite(coffee[28:392, 70:490], _ellipse_alpha(364, 420)),  # espresso cup on its saucer
        "photo": None,
        "sticker": None,
        "paper": data.page().astype(np.float32),
        "note": data.text().astype(np.float32),
        "fabric": data.grass().astype(np.float32),
        "coins": [],
    }
    astronaut = data.astronaut().astype(np.float32)[30:480, 40:470]
    border = 14
    print_rgb = np.full((astronaut.shape[0] + 2 * border, astronaut.shape[1] + 2 * border, 3), 242, np.float32)
    print_rgb[border:-border, border:-border] = astronaut
    out["photo"] = Sprite(print_rgb, np.ones(print_rgb.shape[:2], np.float32))
    logo = data.logo().astype(np.float32)
    out["sticker"] = Sprite(logo[..., :3], logo[..., 3] / 255.0)
    coins = data.coins()
    _, mask = cv2.threshold(coins, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    count, _, stats, _ = cv2.connectedComponentsWithStats(mask)
    for x, y, w, h, area in stats[1:count]:
        if area > 1000 and 0.8 < w / h < 1.25 and len(out["coins"]) < 6:
            crop = np.repeat(coins[y : y + h, x : x + w, None], 3, axis=2).astype(np.float32)
            out["coins"].append(Sprite(crop, _ellipse_alpha(int(h), int(w))))
    return out


def scaled(sprite: Sprite, width: float) -> Sprite:
    """The sprite resized to ``width`` pixels, aspect kept (area averaging when shrinking)."""
    h, w = sprite.alpha.shape
    size = (max(2, round(width)), max(2, round(width * h / w)))
    interp = cv2.INTER_AREA if size[0] < w else cv2.INTER_LINEAR
    rgb, alpha = (cv2.resize(x, size, interpolation=interp) for x in (sprite.rgb, sprite.alpha))
    return Sprite(rgb, alpha)


def tinted(sprite: Sprite, gain: Sequence[float]) -> Sprite:
    """The sprite's colour multiplied per channel (metal tones for the grey coins, a lid's shaded underside)."""
    return Sprite(np.clip(sprite.rgb * np.asarray(gain, np.float32), 0, 255), sprite.alpha)


# ----------------------------------------------------------------------------------------------------------------
# Compositing (colours are float32 RGB in 0..255; a layer's colour is premultiplied by its coverage)


def warped(
    sprite: Sprite, centre: Sequence[float], angle: float, shape: tuple[int, ...]
) -> tuple[Array, Array, Any] | None:
    """A sprite rotated by ``angle`` degrees about its centre and moved to ``centre`` of an image of ``shape``.

    Returns:
        ``(premultiplied colour, coverage, slices of the image it covers)``, or None when it lies outside.
    """
    h, w = sprite.alpha.shape
    rot = cv2.getRotationMatrix2D((w / 2, h / 2), angle, 1.0)
    cos, sin = abs(rot[0, 0]), abs(rot[0, 1])
    half_w, half_h = (h * sin + w * cos) / 2 + 1, (h * cos + w * sin) / 2 + 1
    x0, y0 = max(int(centre[0] - half_w), 0), max(int(centre[1] - half_h), 0)
    x1, y1 = min(int(np.ceil(centre[0] + half_w)), shape[1]), min(int(np.ceil(centre[1] + half_h)), shape[0])
    if x0 >= x1 or y0 >= y1:
        return None
    rot[0, 2] += centre[0] - w / 2 - x0
    rot[1, 2] += centre[1] - h / 2 - y0
    size = (x1 - x0, y1 - y0)
    alpha = cv2.warpAffine(sprite.alpha, rot, size, flags=cv2.INTER_LINEAR, borderValue=0.0)
    rgb = cv2.warpAffine(sprite.rgb, rot, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return rgb * alpha[..., None], alpha, (slice(y0, y1), slice(x0, x1))


def paste(dst: Array, sprite: Sprite, centre: Sequence[float], angle: float = 0.0) -> None:
    """Alpha-composite a sprite onto an opaque image (in place)."""
    out = warped(sprite, centre, angle, dst.shape)
    if out is not None:
        premult, alpha, where = out
        roi = dst[where]
        roi *= 1 - alpha[..., None]
        roi += premult


def line_kernel(length: float, angle: float) -> Array:
    """A normalised motion-blur kernel: a line of ``length`` pixels at ``angle`` radians."""
    size = int(np.ceil(length)) | 1
    kernel = np.zeros((size, size), np.float32)
    c = size // 2
    dx, dy = np.cos(angle) * length / 2, np.sin(angle) * length / 2
    cv2.line(kernel, (round(c - dx), round(c - dy)), (round(c + dx), round(c + dy)), 1.0, 1, cv2.LINE_AA)
    return kernel / max(float(kernel.sum()), 1e-6)


class Layer:
    """A premultiplied RGBA patch of the world at ``(x0, y0)``: a hand and what it holds, built then composited."""

    def __init__(self, x0: int, y0: int, x1: int, y1: int) -> None:
        self.x0, self.y0 = x0, y0
        # Plain arrays: the blur puts back what cv2.filter2D returns (float32 still, typed as any image).
        self.rgb: Array = np.zeros((y1 - y0, x1 - x0, 3), np.float32)
        self.alpha: Array = np.zeros((y1 - y0, x1 - x0), np.float32)

    def add(self, premult: Array, alpha: Array, where: Any = ...) -> None:
        """Put premultiplied colour with coverage ``alpha`` over the patch (or over the part ``where``)."""
        self.rgb[where] = premult + self.rgb[where] * (1 - alpha[..., None])
        self.alpha[where] = alpha + self.alpha[where] * (1 - alpha)

    def sprite(self, sprite: Sprite, centre: Sequence[float], angle: float = 0.0) -> None:
        """Put a sprite, placed in world coordinates, over the patch."""
        out = warped(sprite, (centre[0] - self.x0, centre[1] - self.y0), angle, self.alpha.shape)
        if out is not None:
            self.add(*out)

    def blur(self, velocity: Sequence[float], exposure: float) -> None:
        """Motion-blur the patch along ``velocity`` (pixels per frame) over ``exposure`` of a frame."""
        length = float(np.hypot(velocity[0], velocity[1])) * exposure
        if length >= 1.5:
            kernel = line_kernel(length, float(np.arctan2(velocity[1], velocity[0])))
            self.rgb = cv2.filter2D(self.rgb, -1, kernel, borderType=cv2.BORDER_CONSTANT)
            self.alpha = cv2.filter2D(self.alpha, -1, kernel, borderType=cv2.BORDER_CONSTANT)

    def onto(self, dst: Array, shadow: Sequence[float], darkness: float, softness: float) -> None:
        """Darken ``dst`` under the shadow the patch casts ``shadow`` pixels away, then composite it (in place)."""
        if darkness > 0:
            soft = cv2.GaussianBlur(self.alpha, (0, 0), max(softness, 0.5))
            dark = Sprite(np.zeros((*soft.shape, 3), np.float32), soft * darkness)
            h, w = soft.shape
            paste(dst, dark, (self.x0 + shadow[0] + w / 2, self.y0 + shadow[1] + h / 2))
        h, w = self.alpha.shape
        H, W = dst.shape[:2]
        ax0, ay0, ax1, ay1 = max(self.x0, 0), max(self.y0, 0), min(self.x0 + w, W), min(self.y0 + h, H)
        if ax0 < ax1 and ay0 < ay1:
            patch = (slice(ay0 - self.y0, ay1 - self.y0), slice(ax0 - self.x0, ax1 - self.x0))
            roi = dst[ay0:ay1, ax0:ax1]
            roi *= 1 - self.alpha[patch][..., None]
            roi += self.rgb[patch]


# ----------------------------------------------------------------------------------------------------------------
# One execution's look: layout, objects, hands, camera, light and sensor, all drawn from its seed


def smooth_noise(rng: np.random.Generator, shape: tuple[int, int], cells: int) -> Array:
    """Low-frequency noise of ``shape`` (zero mean, unit scale): ``cells`` random values per side, upsampled."""
    small = rng.standard_normal((max(2, cells * shape[0] // shape[1]), cells)).astype(np.float32)
    return cv2.resize(small, (shape[1], shape[0]), interpolation=cv2.INTER_CUBIC)


def drift(rng: np.random.Generator, t: Array, periods: tuple[float, float], parts: int = 3) -> Array:
    """A smooth random signal of about unit amplitude: a sum of sinusoids with periods (seconds) in ``periods``."""
    freq = 1.0 / rng.uniform(*periods, size=parts)
    phase = rng.uniform(0, 2 * np.pi, size=parts)
    weight = rng.uniform(0.5, 1.0, size=parts)
    return (np.sin(2 * np.pi * t[:, None] * freq + phase) * weight).sum(axis=1) / weight.sum() * np.sqrt(2)


def jitter(rng: np.random.Generator, n: int, sigma_frames: float) -> Array:
    """White noise smoothed by a Gaussian of ``sigma_frames`` frames, scaled to unit standard deviation."""
    radius = int(3 * sigma_frames) + 1
    kernel = np.exp(-0.5 * (np.arange(-radius, radius + 1) / max(sigma_frames, 1e-3)) ** 2)
    kernel /= np.sqrt((kernel**2).sum())  # the smoothed noise's variance is the sum of the squared weights
    return np.convolve(rng.standard_normal(n + 2 * radius), kernel, mode="valid")[:n]


def bumps(rng: np.random.Generator, t: Array, rate: float, width: tuple[float, float]) -> Array:
    """Isolated events at a Poisson ``rate`` per second, each a Gaussian bump of unit height and drawn width (s)."""
    count = int(rng.poisson(rate * (t[-1] + 1e-9))) if len(t) else 0
    at = rng.uniform(0, t[-1] if len(t) else 0, size=count)
    widths = rng.uniform(*width, size=count)
    signs = rng.choice([-1.0, 1.0], size=count)
    return (signs * np.exp(-0.5 * ((t[:, None] - at) / widths) ** 2)).sum(axis=1) if count else np.zeros_like(t)


SKIN_TONES: Final = ((232, 190, 160), (214, 160, 126), (190, 134, 100), (150, 100, 72), (110, 72, 50))
SLEEVES: Final = ((40, 60, 110), (150, 40, 40), (60, 60, 60), (200, 200, 190), (50, 110, 70), (120, 90, 140))


@dataclass
class Look:
    """Everything drawn once per execution: sizes, layout, the hands' appearance, camera, light and sensor."""

    world: tuple[int, int]  # (width, height) of the table canvas the camera looks at
    view: tuple[int, int]
    fps: float
    clean: bool
    layout: dict[str, tuple[float, float, float]]  # object -> (x, y, angle) in world pixels / degrees
    sprites: dict[str, Sprite]
    base: Array  # shelf, table and the paper that never moves
    palm: float  # palm length in world pixels
    skin: Array  # (H, W, 3) skin colour with its texture, world-sized
    sleeve: Array  # (H, W, 3) fabric, world-sized
    cuff: float
    anchors: tuple[float, float]  # elbows' x (left hand, right hand), world pixels
    shadow: tuple[float, float]
    shadow_darkness: float
    exposure: float  # share of a frame the shutter is open: motion blur length
    jpeg_quality: int
    read_noise: float
    shot_noise: float
    lid_span: tuple[float, float, float, float] = (0, 0, 0, 0)  # box lid: x0, top (hinge), x1, height
    rng: np.random.Generator = field(default_factory=np.random.default_rng)


def make_look(rng: np.random.Generator, view: tuple[int, int], fps: float, clean: bool) -> Look:
    """Draw an execution's look."""
    pics = photos()
    W, H = round(view[0] * WORLD_MARGIN), round(view[1] * WORLD_MARGIN)

    def spot(x: float, y: float, dx: float, dy: float, angle: float) -> tuple[float, float, float]:
        return (W * (x + rng.uniform(-dx, dx)), H * (y + rng.uniform(-dy, dy)), rng.uniform(-angle, angle))

    layout = {
        "box": spot(0.50, 0.40, 0.04, 0.02, 0.0),
        "cup": spot(0.25, 0.72, 0.03, 0.03, 25.0),
        "photo": spot(0.76, 0.64, 0.03, 0.03, 12.0),
        "paper": spot(0.16, 0.40, 0.03, 0.04, 25.0),
        "note": spot(0.86, 0.35, 0.02, 0.03, 20.0),
    }
    px, py, _ = layout["photo"]
    layout["sticker"] = (px + W * rng.uniform(-0.02, 0.02), py - H * rng.uniform(0.0, 0.04), rng.uniform(-30, 30))
    box = scaled(pics["box"], W * 0.13)
    bx, by, _ = layout["box"]
    bh, bw = box.alpha.shape
    lid_h = 0.38 * bh
    layout["coins"] = (bx + rng.uniform(-0.1, 0.1) * bw, by - bh / 2 + lid_h / 2, rng.uniform(-40, 40))
    paper_gain = rng.uniform(0.9, 1.02, size=3) * np.array([1.0, 0.98, 0.92])
    sprites = {
        "box": box,
        "cup": scaled(pics["cup"], W * rng.uniform(0.17, 0.21)),
        "photo": scaled(pics["photo"], W * rng.uniform(0.13, 0.15)),
        "sticker": scaled(pics["sticker"], W * 0.055),
        "coins": coin_cluster(rng, pics["coins"], W * 0.036),
        "paper": tinted(scaled(_grey(pics["paper"]), W * 0.2), paper_gain),
        "note": tinted(scaled(_grey(pics["note"]), W * 0.13), paper_gain),
        "sheet": tinted(scaled(_grey(pics["paper"]), W * 0.3), paper_gain),
    }
    base = table(rng, pics, (W, H))
    for key in ("paper", "note"):
        x, y, a = layout[key]
        paste(base, sprites[key], (x, y), a)
    palm = W * rng.uniform(0.07, 0.085)
    skin_tone = np.array(SKIN_TONES[int(rng.integers(len(SKIN_TONES)))], np.float32) * rng.uniform(0.92, 1.06)
    texture = 1 + 0.06 * smooth_noise(rng, (H, W), 24) + 0.03 * smooth_noise(rng, (H, W), 96)
    sleeve_colour = np.array(SLEEVES[int(rng.integers(len(SLEEVES)))], np.float32)
    fabric = cv2.resize(pics["fabric"], (W, H)) / 128.0
    light = rng.uniform(-1, 1, size=2)
    look = Look(
        world=(W, H), view=view, fps=fps, clean=clean, layout=layout, sprites=sprites, base=base, palm=palm,
        skin=np.clip(skin_tone * texture[..., None], 0, 255).astype(np.float32),
        sleeve=np.clip(sleeve_colour * (0.75 + 0.25 * fabric[..., None]), 0, 255).astype(np.float32),
        cuff=rng.uniform(0.6, 1.6),
        anchors=(W * rng.uniform(0.22, 0.34), W * rng.uniform(0.66, 0.78)),
        shadow=(palm * 0.25 * light[0], palm * (0.2 + 0.15 * abs(light[1]))),
        shadow_darkness=0.0 if clean else float(rng.uniform(0.15, 0.35)),
        exposure=float(rng.uniform(0.3, 0.7)),
        jpeg_quality=int(rng.integers(35, 76)),
        read_noise=float(rng.uniform(2.0, 5.0)),
        shot_noise=float(rng.uniform(0.15, 0.6)),
        rng=rng,
    )  # fmt: skip
    look.lid_span = (bx - bw / 2, by - bh / 2, bx + bw / 2, lid_h)
    return look


def _grey(image: Array) -> Sprite:
    rgb = np.repeat(image[..., None], 3, axis=2)
    return Sprite(rgb, np.ones(image.shape, np.float32))


def coin_cluster(rng: np.random.Generator, coins: list[Sprite], width: float) -> Sprite:
    """Three or four coins, gold or silver, lying together: one sprite carried and put down at once."""
    count = int(rng.integers(3, 5))
    size = round(width * 2.4)
    canvas = np.zeros((size, size, 3), np.float32)
    cover = np.zeros((size, size), np.float32)
    for k in range(count):
        coin = scaled(coins[int(rng.integers(len(coins)))], width * rng.uniform(0.85, 1.1))
        metal = (1.25, 1.05, 0.62) if rng.random() < 0.5 else (1.05, 1.05, 1.08)
        coin = tinted(coin, metal)
        angle = 2 * np.pi * k / count + rng.uniform(-0.4, 0.4)
        at = (size / 2 + np.cos(angle) * width * 0.55, size / 2 + np.sin(angle) * width * 0.55)
        out = warped(coin, at, rng.uniform(0, 360), canvas.shape)
        if out is not None:
            premult, alpha, where = out
            canvas[where] = premult + canvas[where] * (1 - alpha[..., None])
            cover[where] = alpha + cover[where] * (1 - alpha)
    return Sprite(canvas / np.maximum(cover, 1e-6)[..., None], cover)


def table(rng: np.random.Generator, pics: dict[str, Any], size: tuple[int, int]) -> Array:
    """The still scene: the garage shelf behind, then the wooden table top."""
    W, H = size
    horizon = round(H * rng.uniform(0.14, 0.2))
    shelf = pics["shelf"]
    shelf = cv2.resize(shelf, (round(horizon * shelf.shape[1] / shelf.shape[0]), horizon))
    shelf = np.concatenate([shelf, shelf[:, ::-1], shelf], axis=1)
    start = int(rng.integers(0, shelf.shape[1] - W)) if shelf.shape[1] > W else 0
    out = np.empty((H, W, 3), np.float32)
    out[:horizon] = cv2.resize(shelf[:, start : start + W], (W, horizon)) * 0.8
    # Planks across the view, each a strip of the photo's wood stretched along its grain, seams in shadow.
    wood = pics["wood"]
    top = horizon
    while top < H:
        height = round(H * rng.uniform(0.14, 0.22))
        x = int(rng.integers(0, wood.shape[1] - 40))
        plank = np.rot90(wood[:, x : x + 40]).copy()
        plank = plank[::-1] if rng.random() < 0.5 else plank
        plank = cv2.resize(plank, (round(W * rng.uniform(1.0, 1.6)), height))[:, :W]
        rows = min(height, H - top)
        out[top : top + rows] = plank[:rows] * rng.uniform(0.85, 1.08, size=3)
        out[top : top + max(1, round(H * 0.004))] *= 0.55
        top += rows
    edge = max(2, round(H * 0.012))
    out[horizon : horizon + edge] *= 0.45  # the table's front edge, in shadow
    return out


# ----------------------------------------------------------------------------------------------------------------
# The table's state and its picture


@dataclass
class Scene:
    """What lies on the table: objects put down (in that order, later ones on top), the lid, where the coins are."""

    placed: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # object -> (x, y, angle)
    lid: float = 0.0  # 0 closed, 1 open
    coins: str = "none"  # "none", "inside" (the box), "lid" (put on the closed lid)

    def key(self) -> tuple[Any, ...]:
        """What the picture depends on (the cache key)."""
        return tuple(self.placed.items()), round(self.lid, 3), self.coins


def draw_box(dst: Array, look: Look, lid: float, coins: str) -> None:
    """The carton, its lid ``lid`` open (0..1: the flap turns about its far edge), coins inside or on the lid."""
    box = look.sprites["box"]
    bx, by, _ = look.layout["box"]
    paste(dst, box, (bx, by))
    bh, bw = box.alpha.shape
    lid_h = max(2, round(0.38 * bh))
    flap = Sprite(box.rgb[:lid_h], box.alpha[:lid_h])
    top = by - bh / 2
    if lid > 0:
        inside = Sprite(flap.rgb * 0.3 + np.float32(12), flap.alpha)  # the carton's shadowed inside
        paste(dst, inside, (bx, top + lid_h / 2))
        if coins == "inside":
            x, y, a = look.layout["coins"]
            paste(dst, look.sprites["coins"], (x, y), a)
    fold = float(np.cos(np.pi * lid))  # > 0: the flap lies over the box; < 0: it stands back beyond the hinge
    height = max(1, round(lid_h * abs(fold)))
    if lid < 1 and fold > 0:
        part = Sprite(cv2.resize(flap.rgb, (bw, height)), np.ones((height, bw), np.float32))
        paste(dst, tinted(part, [0.85 + 0.15 * fold] * 3), (bx, top + height / 2))
    elif fold < 0:
        under = Sprite(cv2.resize(flap.rgb[::-1], (bw, height)) * 0.7, np.ones((height, bw), np.float32))
        paste(dst, under, (bx, top - height / 2))
    if coins == "lid" and lid == 0:
        x, y, a = look.layout["coins"]
        paste(dst, look.sprites["coins"], (x, y), a)


def scene_image(look: Look, scene: Scene) -> Array:
    """The table with what lies on it, in world pixels (before the camera sees it)."""
    out = look.base.copy()
    draw_box(out, look, scene.lid, scene.coins)
    for name, (x, y, a) in scene.placed.items():
        paste(out, look.sprites[name], (x, y), a)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Hands


# Fingers from the little one: offset across the palm, length, splay (degrees), width; in palm lengths.
FINGERS: Final = ((-0.24, 0.5, -8, 0.13), (-0.08, 0.6, -3, 0.15), (0.08, 0.62, 2, 0.15), (0.24, 0.55, 7, 0.15))


def _rotate(v: Array, degrees: float) -> Array:
    c, s = np.cos(np.radians(degrees)), np.sin(np.radians(degrees))
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])


def draw_hand(
    look: Look, grip: Array, anchor: float, curl: float, carry: str | None, carry_angle: float
) -> Layer | None:
    """A forearm in its sleeve, the back of the hand and four fingers and a thumb reaching to ``grip``.

    The elbow sits below the view at x ``anchor``; ``curl`` (0 flat .. 1 closed) shortens the fingers; ``carry``
    (a sprite name) is held under the fingers. None when the hand is off the canvas.
    """
    W, H = look.world
    L = look.palm
    elbow = np.array([0.6 * anchor + 0.4 * grip[0], H * 1.3])
    d = (grip - elbow) / max(float(np.hypot(*(grip - elbow))), 1e-6)
    n = np.array([-d[1], d[0]])
    side = 1.0 if anchor < W / 2 else -1.0  # the thumb's side: the back of a left hand has it on the right
    palm_c = grip - d * 0.6 * L
    wrist = grip - d * 1.1 * L
    cuff = wrist - d * look.cuff * L
    lo = np.minimum(grip, cuff) - 1.4 * L
    hi = np.maximum(grip, cuff) + 1.4 * L
    hi[1] = H
    x0, y0 = int(max(lo[0], 0)), int(max(lo[1], 0))
    x1, y1 = int(min(hi[0], W)), int(min(hi[1], H))
    if x1 - x0 < 2 or y1 - y0 < 2:
        return None  # out of the table canvas
    layer = Layer(x0, y0, x1, y1)
    if carry is not None:
        layer.sprite(look.sprites[carry], grip + d * 0.1 * L, carry_angle)
    shape = layer.alpha.shape
    origin = np.array([x0, y0])

    def fx(p: Array) -> tuple[int, int]:  # fixed point with 4 fractional bits, layer coordinates
        x, y = (float(v) * 16 for v in p - origin)
        return int(min(max(x, -(2**24)), 2**24)), int(min(max(y, -(2**24)), 2**24))

    skin = np.zeros(shape, np.uint8)
    arm = [elbow + n * 0.55 * L, elbow - n * 0.55 * L, wrist - n * 0.32 * L, wrist + n * 0.32 * L]
    cv2.fillPoly(skin, [np.array([fx(p) for p in arm], np.int32)], 255, cv2.LINE_AA, 4)
    angle = float(np.degrees(np.arctan2(d[1], d[0])))
    axes = (int(0.62 * L * 16), int(0.38 * L * 16))
    cv2.ellipse(skin, fx(palm_c), axes, angle, 0, 360, 255, -1, cv2.LINE_AA, 4)
    for offset, length, spread, width in FINGERS:
        base = palm_c + d * 0.35 * L + n * offset * L * side
        tip = base + _rotate(d, spread * side) * length * L * (1 - 0.5 * curl)
        width = max(1, round(width * L))
        cv2.line(skin, fx(base), fx(tip), 255, width, cv2.LINE_AA, 4)
    thumb_base = palm_c - n * 0.3 * L * side - d * 0.15 * L
    thumb_tip = thumb_base + _rotate(d, -50 * side) * 0.5 * L * (1 - 0.3 * curl)
    cv2.line(skin, fx(thumb_base), fx(thumb_tip), 255, max(1, round(0.17 * L)), cv2.LINE_AA, 4)
    alpha = skin.astype(np.float32) / 255.0
    shade = 0.72 + 0.28 * np.clip(cv2.GaussianBlur(alpha, (0, 0), 0.18 * L) * 1.6, 0, 1)
    colour = look.skin[y0 : y0 + shape[0], x0 : x0 + shape[1]] * shade[..., None]
    layer.add(colour * alpha[..., None], alpha)
    sleeve = np.zeros(shape, np.uint8)
    cloth = [elbow + n * 0.62 * L, elbow - n * 0.62 * L, cuff - n * 0.45 * L, cuff + n * 0.45 * L]
    cv2.fillPoly(sleeve, [np.array([fx(p) for p in cloth], np.int32)], 255, cv2.LINE_AA, 4)
    s_alpha = sleeve.astype(np.float32) / 255.0
    s_colour = look.sleeve[y0 : y0 + shape[0], x0 : x0 + shape[1]]
    layer.add(s_colour * s_alpha[..., None], s_alpha)
    return layer


# ----------------------------------------------------------------------------------------------------------------
# The script of an execution: what each hand does, frame by frame, and when the table changes


@dataclass
class Track:
    """One hand over a whole video, per frame: fingers' position, how closed, shown or not, elbow, what it holds."""

    grip: Array
    curl: Array
    on: Array
    anchor: Array
    carry: list[str | None]
    carry_angle: Array

    @classmethod
    def empty(cls, frames: int) -> Track:
        """A hand out of view for ``frames`` frames."""
        return cls(np.zeros((frames, 2)), np.zeros(frames), np.zeros(frames, bool), np.zeros(frames), [None] * frames,
                   np.zeros(frames))  # fmt: skip


@dataclass
class Script:
    """Everything that happens in one execution, planned before a frame is drawn."""

    fps: float
    frames: int
    hands: tuple[Track, Track]  # the hand doing the steps, and the other one
    lid: Array  # per frame, the lid's opening; NaN where unchanged since the last frame
    events: dict[int, list[Callable[[Scene], None]]]
    plan: Scene  # the table as the plan leaves it (the state each planned action starts from)

    def at(self, frame: int, change: Callable[[Scene], None]) -> None:
        """Change the table at ``frame`` (and in the plan, so later actions see it)."""
        self.events.setdefault(frame, []).append(change)
        change(self.plan)


def coins_to(where: str) -> Callable[[Scene], None]:
    """A change of the table: the coins go ``where`` (`Scene.coins`)."""
    def change(scene: Scene) -> None:
        scene.coins = where

    return change


def put_down(name: str, pose: tuple[float, float, float]) -> Callable[[Scene], None]:
    """A change of the table: object ``name`` lies at ``pose`` (x, y, angle), on top of what is there."""
    def change(scene: Scene) -> None:
        scene.placed.update({name: pose})

    return change


def ease(n: int) -> Array:
    """``n`` samples of a smooth 0 -> 1 ramp (smoothstep): hands speed up and slow down."""
    s = np.linspace(0.0, 1.0, n) if n > 1 else np.ones(1)
    return s * s * (3 - 2 * s)


def glide(rng: np.random.Generator, a: Array, b: Array, n: int, tremor: float, fps: float) -> Array:
    """``n`` positions from ``a`` to ``b`` along a slightly curved path, with a hand's tremor (pixels)."""
    e = ease(n)[:, None]
    span = b - a
    normal = np.array([-span[1], span[0]])
    path = a + span * e + normal * rng.uniform(-0.15, 0.15) * np.sin(np.pi * e)
    shake = np.stack([jitter(rng, n, 0.1 * fps), jitter(rng, n, 0.1 * fps)], axis=1) if n > 1 else np.zeros((n, 2))
    return path + shake * tremor


def hold(rng: np.random.Generator, at: Array, n: int, wander: float, fps: float) -> Array:
    """``n`` positions of a hand working around ``at``: slow small moves."""
    return at + np.stack([jitter(rng, n, 0.25 * fps), jitter(rng, n, 0.25 * fps)], axis=1) * wander


def hand_direction(look: Look, grip: Array, anchor: float) -> Array:
    """The unit vector from the elbow to the fingers (as `draw_hand` draws the arm)."""
    elbow = np.array([0.6 * anchor + 0.4 * grip[0], look.world[1] * 1.3])
    d = grip - elbow
    return d / max(float(np.hypot(*d)), 1e-6)


CARRIED: Final = {1: "cup", 2: "coins", 3: "photo", 4: "sticker"}


def _entry(rng: np.random.Generator, step: int, look: Look) -> Array:
    """Where a step's hand comes from (and goes back to), off the view: each object has its side."""
    W, H = look.world
    side = {
        1: (-0.08, rng.uniform(0.6, 0.95)),  # the cup from the left
        2: (1.08, rng.uniform(0.3, 0.6)),  # the coins from the right
        3: (rng.uniform(0.8, 1.0), 1.1),  # the photo from the bottom right
        4: (rng.uniform(0.5, 0.75), 1.1),  # the sticker from below
    }.get(step, (rng.uniform(0.35, 0.65), 1.1))  # the lid: from below
    return np.array([W * side[0], H * side[1]])


def lid_edge(look: Look, x: float, lid: float) -> Array:
    """The point of the lid's free edge a hand holds, the lid ``lid`` open."""
    _, top, _, height = look.lid_span
    return np.array([x, top + height * np.cos(np.pi * lid)])


def plan_step(script: Script, look: Look, rng: np.random.Generator, step: int, start: int, frames: int) -> None:
    """Plan one key-step: the hand comes in (carrying its object), does the step, and leaves."""
    W, H = look.world
    hand = script.hands[0]
    fps = script.fps
    reach = max(1, round(frames * rng.uniform(0.3, 0.42)))
    work = max(2, round(frames * rng.uniform(0.18, 0.32)))
    back = max(1, frames - reach - work)
    work = frames - reach - back
    entry, exit_ = _entry(rng, step, look), _entry(rng, step, look)
    tremor = W * 0.003
    s0, s1, s2 = start, start + reach, start + reach + work
    if step in CARRIED:
        name = CARRIED[step]
        x, y, angle = look.layout[name]
        target = np.array([x, y])
        right = target[0] > 0.45 * W or entry[0] > W
        anchor = look.anchors[int(right)]
        d = hand_direction(look, target, anchor)
        grip_at = target - d * 0.1 * look.palm  # the object lies where the hand put it down
        turn = rng.uniform(-35, 35)
        hand.grip[s0:s1] = glide(rng, entry, grip_at, reach, tremor, fps)
        hand.grip[s1:s2] = hold(rng, grip_at, work, W * 0.006, fps)
        release = s1 + max(1, work // 3)
        hand.carry[s0:release] = [name] * (release - s0)
        hand.carry_angle[s0:s1] = angle + turn * (1 - ease(reach))
        hand.carry_angle[s1:release] = angle
        hand.curl[s0:release] = 0.75
        hand.curl[release:s2] = np.linspace(0.5, 0.2, s2 - release)
        put = hand.grip[release - 1] + d * 0.1 * look.palm
        if name == "coins":
            where = "inside" if script.plan.lid >= 0.5 else "lid"
            script.at(release, coins_to(where))
        else:
            script.at(release, put_down(name, (float(put[0]), float(put[1]), angle)))
    else:
        bx, _, _ = look.layout["box"]
        x = bx + rng.uniform(-0.04, 0.04) * W
        anchor = look.anchors[int(rng.random() < 0.5)]
        was = script.plan.lid
        goal = 1.0 if step == 0 else 0.0
        opening = was + (goal - was) * ease(work)
        hand.grip[s0:s1] = glide(rng, entry, lid_edge(look, x, was), reach, tremor, fps)
        edge = np.stack([lid_edge(look, x, o) for o in opening])
        hand.grip[s1:s2] = edge + hold(rng, np.zeros(2), work, W * 0.003, fps)
        hand.curl[s0:s2] = 0.45
        script.lid[s1:s2] = opening
        if step == 0 and script.plan.coins == "lid":  # coins put on the closed lid fall in when it opens
            script.at(s2, lambda scene: setattr(scene, "coins", "inside"))
        script.plan.lid = goal
    hand.grip[s2 : start + frames] = glide(rng, hand.grip[s2 - 1], exit_, back, tremor, fps)
    hand.curl[s2 : start + frames] = np.linspace(0.3, 0.5, back)
    hand.anchor[s0 : start + frames] = anchor
    hand.on[s0 : start + frames] = True


def plan_idle(script: Script, look: Look, rng: np.random.Generator, start: int, frames: int, during_step: bool) -> None:
    """Plan what hands do outside the key-steps: hover, nudge the cup, rest in view, pass a sheet, or nothing.

    Each happens in under half of the span, so that most frames of a gap show the table at rest. During a step, only
    the other hand: resting over the table (it hides part of it) or passing a sheet.
    """
    W, H = look.world
    fps = script.fps
    # Each motion takes at least 3 frames: at 1-2 fps a gap of a second or two holds none.
    if frames < max(fps, 3):
        return
    span = max(3, round(frames * (rng.uniform(0.4, 1.0) if during_step else rng.uniform(0.25, 0.45))))
    at = start + int(rng.integers(0, frames - span + 1))
    draw = rng.random()
    kinds = (("rest", 0.2), ("sheet", 0.05)) if during_step else (
        ("hover", 0.3), ("nudge", 0.12), ("rest", 0.13), ("sheet", 0.1))  # fmt: skip
    kind = None
    for name, p in kinds:
        if draw < p:
            kind = name
            break
        draw -= p
    if kind is None or (kind == "nudge" and "cup" not in script.plan.placed):
        return
    hand = script.hands[1] if kind in ("rest", "sheet") or during_step else script.hands[0]
    a, b = max(1, span // 4), max(1, span // 4)
    mid = span - a - b
    tremor = W * 0.003
    if kind == "sheet":
        left = rng.random() < 0.5
        y = H * rng.uniform(0.35, 0.75)
        p0, p1 = np.array([-0.25 * W if left else 1.25 * W, y]), np.array([1.25 * W if left else -0.25 * W, y])
        hand.grip[at : at + span] = glide(rng, p0, p1, span, tremor, fps)
        hand.carry[at : at + span] = ["sheet"] * span
        hand.carry_angle[at : at + span] = rng.uniform(-20, 20)
        hand.curl[at : at + span] = 0.7
        hand.anchor[at : at + span] = look.anchors[int(not left)]
        hand.on[at : at + span] = True
        return
    if kind == "rest":
        spot = np.array([W * rng.uniform(0.15, 0.85), H * rng.uniform(0.62, 0.9 if during_step else 0.96)])
    elif kind == "nudge":
        x, y, _ = script.plan.placed["cup"]
        spot = np.array([x, y])
    else:
        x, y, _ = look.layout[["box", "cup", "photo", "sticker"][int(rng.integers(4))]]
        spot = np.array([x, y]) + rng.uniform(-0.05, 0.05, size=2) * W
    anchor = look.anchors[int(spot[0] > W / 2)]
    entry, exit_ = np.array([spot[0] + rng.uniform(-0.2, 0.2) * W, 1.1 * H]), np.array([spot[0], 1.1 * H])
    hand.grip[at : at + a] = glide(rng, entry, spot, a, tremor, fps)
    hand.grip[at + a : at + a + mid] = hold(rng, spot, mid, W * 0.008, fps)
    hand.grip[at + a + mid : at + span] = glide(rng, hand.grip[at + a + mid - 1], exit_, b, tremor, fps)
    hand.curl[at : at + span] = rng.uniform(0.2, 0.6)
    hand.anchor[at : at + span] = anchor
    hand.on[at : at + span] = True
    if kind == "nudge":
        x, y, angle = script.plan.placed["cup"]
        moved = (x + rng.uniform(-0.012, 0.012) * W, y + rng.uniform(-0.012, 0.012) * W, angle + rng.uniform(-5, 5))
        script.at(at + a + mid // 2, put_down("cup", moved))


def plan_execution(
    look: Look, rng: np.random.Generator, order: Sequence[int]
) -> tuple[Script, list[tuple[int, int, int]]]:
    """Plan an execution of ``order``: gaps and steps of drawn lengths, hands and table changes.

    Returns:
        The script and the steps as ``(step, first frame, frame after the last)``.
    """
    fps = look.fps
    gaps = [rng.uniform(1.0, 2.5)] + [rng.uniform(*GAP_SECONDS) for _ in order[1:]] + [rng.uniform(1.0, 2.5)]
    lengths = [rng.uniform(*STEP_SECONDS) for _ in order]
    gap_frames = [max(1, round(g * fps)) for g in gaps]
    step_frames = [max(4, round(s * fps)) for s in lengths]
    total = sum(gap_frames) + sum(step_frames)
    script = Script(fps, total, (Track.empty(total), Track.empty(total)), np.full(total, np.nan), {}, Scene())
    script.lid[0] = 0.0
    steps = []
    frame = 0
    for k, step in enumerate(order):
        plan_idle(script, look, rng, frame, gap_frames[k], during_step=False)
        frame += gap_frames[k]
        plan_step(script, look, rng, step, frame, step_frames[k])
        plan_idle(script, look, rng, frame, step_frames[k], during_step=True)
        steps.append((step, frame, frame + step_frames[k]))
        frame += step_frames[k]
    plan_idle(script, look, rng, frame, gap_frames[-1], during_step=False)
    return script, steps


# ----------------------------------------------------------------------------------------------------------------
# The camera: drift, shake, blur, light, noise, compression


@dataclass
class Optics:
    """Per frame: the camera's pose over the table, exposure and colour, the light's slant, defocus."""

    shift: Array  # (F, 2) pixels the view centre moves over the table
    roll: Array  # (F,) degrees
    zoom: Array  # (F,)
    gain: Array  # (F, 3) level times colour balance
    slant: Array  # (F,) direction (radians) of the light gradient across the view
    slant_depth: float
    defocus: Array  # (F,) Gaussian blur sigma in pixels
    vignette: Array  # (h, w)
    grid: tuple[Array, Array]  # x and y across the view, -0.5 .. 0.5
    noise: list[Array] = field(default_factory=list)  # unit normal fields a little larger than the view


def make_optics(rng: np.random.Generator, look: Look, frames: int) -> Optics:
    """Draw the camera's and the light's behaviour over ``frames`` frames (all still when ``look.clean``)."""
    w, h = look.view
    t = np.arange(frames) / look.fps
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    grid = (xx / w - 0.5, yy / h - 0.5)
    if look.clean:
        return Optics(np.zeros((frames, 2)), np.zeros(frames), np.ones(frames), np.ones((frames, 3)),
                      np.zeros(frames), 0.0, np.zeros(frames), np.ones((h, w), np.float32), grid)  # fmt: skip
    sway = look.fps * 0.04  # shake correlation, in frames

    def shake() -> Array:
        knocks = np.clip(np.abs(bumps(rng, t, 1 / 15, (0.1, 0.3))), 0, 1)
        return w * (rng.uniform(0.0015, 0.004) + 0.012 * knocks) * jitter(rng, frames, sway)

    glances = bumps(rng, t, 1 / 12, (0.4, 1.2))
    shift = np.stack([
        w * (0.022 * drift(rng, t, (6, 30)) + 0.03 * glances) + shake(),
        h * (0.02 * drift(rng, t, (6, 30)) + 0.015 * bumps(rng, t, 1 / 15, (0.4, 1.2))) + shake(),
    ], axis=1)  # fmt: skip
    roll = 1.2 * drift(rng, t, (8, 40)) + 0.25 * jitter(rng, frames, sway)
    zoom = 1 + 0.02 * drift(rng, t, (8, 40))
    mains = rng.choice([100.0, 120.0]) * rng.uniform(0.998, 1.002)
    alias = abs(mains - look.fps * round(mains / look.fps))  # mains flicker seen at the frame rate
    flicker = 1 + rng.uniform(0.005, 0.03) * np.sin(2 * np.pi * alias * t + rng.uniform(0, 2 * np.pi))
    dips = 1 - rng.uniform(0.08, 0.22) * np.clip(np.abs(bumps(rng, t, 1 / 20, (0.15, 0.4))), 0, 1)
    level = rng.uniform(0.8, 1.08) * (1 + 0.1 * drift(rng, t, (5, 25))) * flicker * dips
    colour = 1 + 0.035 * np.stack([drift(rng, t, (10, 40)) for _ in range(3)], axis=1)
    slant = rng.uniform(0, 2 * np.pi) + 0.8 * drift(rng, t, (20, 60))
    focus = np.clip(np.abs(bumps(rng, t, 1 / 25, (0.5, 1.5))), 0, 1)
    defocus = (w / 640) * (0.3 + rng.uniform(0.8, 1.8) * focus)
    vignette = (1 - rng.uniform(0.15, 0.35) * (grid[0] ** 2 + grid[1] ** 2) * 2).astype(np.float32)
    noise = [rng.standard_normal((h + h // 4, w + w // 4, 3), dtype=np.float32) for _ in range(3)]
    return Optics(shift, roll, zoom, level[:, None] * colour, slant, float(rng.uniform(0.1, 0.3)), defocus,
                  vignette, grid, noise)  # fmt: skip


def view_matrix(look: Look, optics: Optics, frame: int) -> Array:
    """The affine map from the table canvas to the camera's view at ``frame``."""
    W, H = look.world
    w, h = look.view
    centre = (W / 2 + optics.shift[frame, 0], H / 2 + optics.shift[frame, 1])
    m = cv2.getRotationMatrix2D(centre, float(optics.roll[frame]), float(optics.zoom[frame]))
    m[:, 2] += (w / 2 - centre[0], h / 2 - centre[1])
    return m


def expose(look: Look, optics: Optics, world: Array, frame: int, rng: np.random.Generator) -> Array:
    """What the camera records of the table at ``frame``: view, motion blur, focus, light, noise, JPEG (uint8 BGR)."""
    w, h = look.view
    # float32 like ``world``; cv2 types its result as any image, integer ones too, which += noise would not fit.
    view: Array = cv2.warpAffine(world, view_matrix(look, optics, frame), (w, h), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REFLECT)  # fmt: skip
    if look.clean:
        return cv2.cvtColor(np.clip(view + 0.5, 0, 255).astype(np.uint8), cv2.COLOR_RGB2BGR)
    if frame > 0:
        move = optics.shift[frame] - optics.shift[frame - 1]
        turn = np.radians(optics.roll[frame] - optics.roll[frame - 1]) * w / 3  # roll moves the edges this much
        velocity = (move[0] + turn, move[1] + turn)
        length = float(np.hypot(*velocity)) * look.exposure
        if length >= 1.5:
            view = cv2.filter2D(view, -1, line_kernel(length, float(np.arctan2(velocity[1], velocity[0]))))
    if optics.defocus[frame] >= 0.5:
        view = cv2.GaussianBlur(view, (0, 0), float(optics.defocus[frame]))
    gx, gy = optics.grid
    slant = optics.slant[frame]
    light = optics.vignette * (1 + optics.slant_depth * (np.cos(slant) * gx + np.sin(slant) * gy)).astype(np.float32)
    view *= light[..., None] * optics.gain[frame].astype(np.float32)
    np.clip(view, 0, 255, out=view)
    sigma = cv2.sqrt(view * np.float32(look.shot_noise) + np.float32(look.read_noise**2))
    # Unit normal noise: a window of a few frames' worth drawn once, at a new random place each frame.
    bank = optics.noise[int(rng.integers(len(optics.noise)))]
    oy, ox = int(rng.integers(bank.shape[0] - h + 1)), int(rng.integers(bank.shape[1] - w + 1))
    view += bank[oy : oy + h, ox : ox + w] * sigma
    np.clip(view, 0, 255, out=view)
    bgr = cv2.cvtColor(view.astype(np.uint8), cv2.COLOR_RGB2BGR)
    ok, jpeg = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, look.jpeg_quality])
    assert ok
    decoded = cv2.imdecode(jpeg, cv2.IMREAD_COLOR)
    assert decoded is not None  # the JPEG was encoded just above
    return decoded


# ----------------------------------------------------------------------------------------------------------------
# Writing


def render(look: Look, script: Script, seed: Sequence[int]) -> Any:
    """The execution's frames, in order (uint8 BGR, ``look.view`` sized)."""
    optics = make_optics(np.random.default_rng([*seed, 1]), look, script.frames)
    noise = np.random.default_rng([*seed, 2])
    scene = Scene()
    cached: tuple[Any, Array] | None = None
    lid = 0.0
    for f in range(script.frames):
        for change in script.events.get(f, []):
            change(scene)
        if not np.isnan(script.lid[f]):
            lid = float(script.lid[f])
        scene.lid = lid
        if cached is None or cached[0] != scene.key():
            cached = (scene.key(), scene_image(look, scene))
        world = cached[1].copy()
        for hand in script.hands:
            if not hand.on[f]:
                continue
            layer = draw_hand(look, hand.grip[f], float(hand.anchor[f]), float(hand.curl[f]), hand.carry[f],
                              float(hand.carry_angle[f]))  # fmt: skip
            if layer is None:
                continue
            if not look.clean and f > 0 and hand.on[f - 1]:
                layer.blur(hand.grip[f] - hand.grip[f - 1], look.exposure)
            layer.onto(world, look.shadow, look.shadow_darkness, 0.25 * look.palm)
        yield expose(look, optics, world, f, noise)


def write_execution(
    path: Path, order: Sequence[int], seed: Sequence[int], size: tuple[int, int], fps: float, clean: bool = False
) -> list[tuple[int, float, float]]:
    """Write one execution as a video file and return its annotated key-step segments.

    Args:
        path: the video to write (``.mp4``, MPEG-4 part 2).
        order: key-step ids in the order they are done.
        seed: the execution's seed (a sequence of integers).
        size: ``(width, height)`` of the video.
        fps: frames per second.
        clean: no camera motion, light changes, noise, blur or JPEG.

    Returns:
        ``[(step, start_s, end_s), ...]`` in order, boundaries as a person would mark them (+-0.1 s).
    """
    rng = np.random.default_rng([*seed, 0])
    look = make_look(rng, size, fps, clean)
    script, steps = plan_execution(look, rng, order)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*FOURCC), fps, size)
    if not writer.isOpened():
        raise OSError(f"{path}: OpenCV cannot write {FOURCC} video here")
    try:
        for frame in render(look, script, seed):
            writer.write(frame)
    finally:
        writer.release()
    duration = script.frames / fps
    marks = rng.uniform(-0.1, 0.1, size=(len(steps), 2))
    return [
        (step, round(max(0.0, a / fps + float(da)), 3), round(min(duration, b / fps + float(db)), 3))
        for (step, a, b), (da, db) in zip(steps, marks, strict=True)
    ]


def write_set(
    folder: Path, seed: int = 0, videos: int = 20, size: tuple[int, int] = (640, 480), fps: float = 15.0,
    clean: bool = False, progress: Callable[[str], None] | None = None,
) -> list[Plan]:  # fmt: skip
    """Write a set of executions: ``videos/<name>.mp4``, ``labels.json``, ``split.json`` and ``README.txt``.

    Args:
        folder: where to write (created).
        seed: the set's seed: the same seed writes the same files.
        videos: how many executions (the last ``round(0.3 * videos)`` held out).
        size: ``(width, height)``.
        fps: frames per second.
        clean: no camera motion, light changes, noise, blur or JPEG.
        progress: called with each video's name once written.

    Returns:
        The plans written.
    """
    plans = plan_executions(videos, seed)
    (folder / "videos").mkdir(parents=True, exist_ok=True)
    executions = {}
    for k, plan in enumerate(plans):
        executions[plan.name] = write_execution(folder / "videos" / f"{plan.name}.mp4", plan.order, (seed, k), size,
                                                fps, clean)  # fmt: skip
        if progress is not None:
            progress(plan.name)
    labels = annotation_file(executions, SCENARIO, STEPS, done_too_early)
    (folder / "labels.json").write_text(json.dumps(labels, indent=1) + "\n")
    split = {"train": [p.name for p in plans if not p.held_out], "test": [p.name for p in plans if p.held_out]}
    (folder / "split.json").write_text(json.dumps(split, indent=1) + "\n")
    (folder / "README.txt").write_text(readme(plans, seed, size, fps, clean))
    return plans


def readme(plans: Sequence[Plan], seed: int, size: tuple[int, int], fps: float, clean: bool) -> str:
    """The set's README.txt: how it was written and which videos are held out, with their violations."""
    command = (f"python -m tests.hard_procedure_videos OUT --seed {seed} --videos {len(plans)} "
               f"--size {size[0]}x{size[1]} --fps {fps:g}" + (" --clean" if clean else ""))  # fmt: skip
    lines = [
        f'Hard "{SCENARIO}" procedure videos (tests/hard_procedure_videos.py).',
        f"Written by: {command}",
        f"Seed {seed}; {len(plans)} videos at {size[0]}x{size[1]}, {fps:g} fps" + (", clean" if clean else "") + ".",
        "Steps: " + ", ".join(f"{s} {n}" for s, n in STEPS.items()) + ".",
        "Pre-conditions: " + "; ".join(
            f"{STEPS[s]} needs {' AND '.join(STEPS[p] for p in pre)}" for s, pre in PRECONDITIONS.items() if pre) + ".",
        "",
        "Training videos (" + str(sum(not p.held_out for p in plans)) + "):",
    ]  # fmt: skip

    def line(p: Plan) -> str:
        if p.violation is None:
            return f"  {p.name}: {' '.join(STEPS[s] for s in p.order)}  [valid]"
        what = f"{STEPS[p.violation[0]]} before {STEPS[p.violation[1]]}, marked has_errors"
        return f"  {p.name}: {' '.join(STEPS[s] for s in p.order)}  [{what}]"

    lines += [line(p) for p in plans if not p.held_out]
    lines += ["", f"Held out ({sum(p.held_out for p in plans)}), the test split of split.json:"]
    lines += [line(p) for p in plans if p.held_out]
    held = ",".join(p.name for p in plans if p.held_out)
    lines += ["", f"Use: recognition-features ... --test-videos {held}; tgml train ... --exclude-videos {held}", ""]
    return "\n".join(lines)


def _size(value: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in value.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not WIDTHxHEIGHT (e.g. 640x480)") from None
    if not (32 <= w <= 4096 and 32 <= h <= 4096) or w % 2 or h % 2:
        raise argparse.ArgumentTypeError(f"{value!r}: width and height must be even, 32..4096")
    return w, h


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.hard_procedure_videos OUT``: write a set of hard procedure videos and their labels."""
    parser = argparse.ArgumentParser(prog="python -m tests.hard_procedure_videos",
                                     description="Write camera-like videos of a six-step procedure and their labels.")
    parser.add_argument("out", help="folder to write (videos/, labels.json, split.json, README.txt)")
    parser.add_argument("--seed", type=int, default=0, help="the set's seed (default 0)")
    parser.add_argument("--videos", type=int, default=20, help="executions (default 20; the last 30%% held out)")
    parser.add_argument("--size", type=_size, default=(640, 480), help="WIDTHxHEIGHT (default 640x480)")
    parser.add_argument("--fps", type=float, default=15.0, help="frames per second (default 15)")
    parser.add_argument("--clean", action="store_true", help="no camera motion, light changes, noise, blur or JPEG")
    args = parser.parse_args(argv)
    if args.videos < 2:
        parser.error(f"--videos {args.videos}: at least 2 (one to train on, one held out)")
    if not 1 <= args.fps <= 120:
        parser.error(f"--fps {args.fps}: between 1 and 120")
    try:  # checked before a folder is made: no half-written set
        import skimage  # noqa: F401
    except ImportError:
        parser.error("the scenes are made of scikit-image's photographs: install the dev extra "
                     "(pip install -e \".[dev]\") or scikit-image")
    out = Path(args.out)
    plans = write_set(out, args.seed, args.videos, args.size, args.fps, args.clean,
                      progress=lambda name: print(f"wrote {out / 'videos' / name}.mp4", file=sys.stderr))  # fmt: skip
    held = [p.name for p in plans if p.held_out]
    print(f"wrote {len(plans)} videos, {out / 'labels.json'}, {out / 'split.json'} and {out / 'README.txt'}; "
          f"held out: {', '.join(held)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
