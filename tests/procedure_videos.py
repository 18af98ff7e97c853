"""Real video files of a small made-up procedure ("assemble a shelf"), written with OpenCV, and their annotations.

Not the demo: six key-steps, ``insert_shelf`` needs two of them, and ``fetch_tools`` can happen at any point. Each
key-step is its own moving scene (colour, texture, objects) that an ImageNet backbone tells apart; a skin-coloured
"hand" wanders over every scene and each frame gets sensor noise. Frames are small (160x120) and the source rate
low (10 fps), so tests decode and extract them quickly.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import cv2
import numpy as np

from graphs.common.errors import exit_on_input_error
from graphs.common.files import atomic_path, make_folders, write_text

SCENARIO: Final = "shelf"
STEPS: Final = {
    0: "fetch_tools",
    1: "unbox_parts",
    2: "attach_legs",
    3: "attach_back",
    4: "insert_shelf",
    5: "tighten_screws",
}
PRECONDITIONS: Final[dict[int, tuple[int, ...]]] = {0: (), 1: (), 2: (1,), 3: (1,), 4: (2, 3), 5: (4,)}
# Valid orders the training executions use: legs and back either way round, the tools fetched anywhere.
VALID_ORDERS: Final = (
    (0, 1, 2, 3, 4, 5),
    (1, 0, 3, 2, 4, 5),
    (1, 2, 0, 3, 4, 5),
    (1, 3, 2, 4, 0, 5),
    (1, 2, 3, 0, 4, 5),
    (1, 3, 0, 2, 4, 5),
)
MISTAKE_ORDER: Final = (0, 2, 1, 3, 4, 5)  # attach_legs before unbox_parts: its one pre-condition is missing
MISTAKE_STEP: Final = 2
SIZE: Final = (160, 120)  # width, height
SOURCE_FPS: Final = 10.0


def _scene(step: int, t: float, rng: np.random.Generator) -> np.ndarray:
    """One clean RGB frame of a key-step's scene ``t`` seconds into it (-1: the empty table between steps)."""
    w, h = SIZE
    img = np.empty((h, w, 3), dtype=np.uint8)
    shift = int(12 * t)
    if step == -1:  # empty wooden table
        img[:] = (150, 120, 90)
        cv2.rectangle(img, (0, int(h * 0.75)), (w, h), (110, 85, 60), -1)
    elif step == 0:  # red and white checkerboard sliding by: a toolbox lid
        yy, xx = np.mgrid[0:h, 0:w]
        board = (((xx + shift) // 16 + yy // 16) % 2).astype(bool)
        img[:] = (235, 235, 235)
        img[board] = (200, 30, 30)
    elif step == 1:  # cardboard boxes with tape, drifting
        img[:] = (70, 70, 80)
        for k in range(3):
            x = (20 + 55 * k + shift) % (w + 40) - 40
            cv2.rectangle(img, (x, 30 + 10 * k), (x + 45, 95), (185, 140, 80), -1)
            cv2.line(img, (x, 60), (x + 45, 60), (230, 220, 180), 3)
    elif step == 2:  # blue vertical legs marching
        img[:] = (245, 240, 200)
        for x in range(-40, w + 40, 26):
            cv2.rectangle(img, (x + shift % 26, 10), (x + shift % 26 + 9, h - 10), (20, 60, 200), -1)
    elif step == 3:  # green concentric rings pulsing: the back panel's holes
        img[:] = (30, 30, 30)
        for r in range(8, 90, 12):
            cv2.circle(img, (w // 2, h // 2), r + shift % 12, (40, 200, 70), 3)
    elif step == 4:  # yellow horizontal planks sliding up
        img[:] = (60, 40, 90)
        for y in range(-30, h + 30, 22):
            cv2.rectangle(img, (5, y - shift % 22), (w - 5, y - shift % 22 + 10), (240, 210, 40), -1)
    elif step == 5:  # black and white spokes turning: a screwdriver
        img[:] = (255, 255, 255)
        for k in range(12):
            angle = np.pi * k / 6 + 1.5 * t
            end = (int(w / 2 + 90 * np.cos(angle)), int(h / 2 + 90 * np.sin(angle)))
            cv2.line(img, (w // 2, h // 2), end, (0, 0, 0), 5)
    hx = int(w * (0.5 + 0.35 * np.sin(0.8 * t + rng.uniform(0, 0.2))))
    cv2.ellipse(img, (hx, int(h * 0.8)), (18, 12), 20, 0, 360, (225, 180, 150), -1)  # the hand
    noise = rng.normal(0, 6, img.shape)
    return np.clip(img + noise, 0, 255).astype(np.uint8)


def write_execution(path: Path, order: tuple[int, ...], seed: int) -> list[tuple[int, float, float]]:
    """Write one execution of the procedure as a video file and return its key-step segments.

    Args:
        path: the video to write (``.mp4``, MPEG-4 part 2).
        order: key-step ids in the order they are done.
        seed: draws the step and pause lengths and the noise.

    Returns:
        ``[(step, start_s, end_s), ...]`` in order.
    """
    rng = np.random.default_rng(seed)
    with atomic_path(path, suffix=".mp4", what="video") as tmp:  # the one writer: never through a planted link
        writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter.fourcc(*"mp4v"), SOURCE_FPS, SIZE)
        assert writer.isOpened(), path
        segments = []
        frame = 0
        for step in (*order, None):
            for _ in range(int(rng.integers(8, 12))):  # 0.8-1.1 s of empty table before each step and at the end
                writer.write(cv2.cvtColor(_scene(-1, frame / SOURCE_FPS, rng), cv2.COLOR_RGB2BGR))
                frame += 1
            if step is None:
                break
            length = int(rng.integers(20, 26))  # 2.0-2.5 s
            segments.append((step, frame / SOURCE_FPS, (frame + length) / SOURCE_FPS))
            for k in range(length):
                writer.write(cv2.cvtColor(_scene(step, k / SOURCE_FPS, rng), cv2.COLOR_RGB2BGR))
                frame += 1
        writer.release()
    return segments


def done_too_early(order: Sequence[int]) -> list[bool]:
    """Per step of an order, whether it was done before one of its true pre-conditions (what an annotator marks)."""
    return [not set(PRECONDITIONS[s]) <= set(order[:k]) for k, s in enumerate(order)]


def annotation_file(
    executions: dict[str, list[tuple[int, float, float]]],
    scenario: str = SCENARIO,
    steps: Mapping[int, str] = STEPS,
    too_early: Callable[[Sequence[int]], list[bool]] = done_too_early,
) -> dict[str, Any]:
    """The annotation JSON (the format ``tgml train`` and ``recognition-features`` read) of some executions.

    A step done before its true pre-conditions (``too_early`` of the order) is marked ``has_errors``, as an annotator
    would. ``scenario``, ``steps`` and ``too_early`` default to the shelf procedure's.
    """
    annotations = {
        name: {
            "scenario": scenario,
            "recording_id": name,
            "segments": [
                {"step_id": s, "start_time": a, "end_time": b, "description": "", "has_errors": wrong,
                 "step_name": steps[s]}
                for (s, a, b), wrong in zip(segments, too_early([s for s, _, _ in segments]), strict=True)
            ],
        }
        for name, segments in executions.items()
    }  # fmt: skip
    taxonomy = {scenario: {str(s): {"id": s, "name": n} for s, n in steps.items()}}
    return {"taxonomy": taxonomy, "annotations": annotations}


def write_procedure(folder: Path, orders: dict[str, tuple[int, ...]], seed: int = 0) -> Path:
    """Write executions as ``folder/videos/<name>.mp4`` and their annotations as ``folder/labels.json``.

    Args:
        folder: where to write.
        orders: video name -> key-step order.
        seed: first seed (each video gets the next one).

    Returns:
        The annotation file.
    """
    make_folders(folder / "videos", inside=folder, what="video")
    executions = {
        name: write_execution(folder / "videos" / f"{name}.mp4", order, seed + k)
        for k, (name, order) in enumerate(orders.items())
    }
    return write_text(folder / "labels.json", json.dumps(annotation_file(executions), indent=1), "annotation file")


WALKTHROUGH_TRAIN: Final = 10  # video_00 .. video_09: valid orders, the detector's training videos
WALKTHROUGH_MISTAKE: Final = "video_11"  # attaches the legs before unboxing the parts


def walkthrough_orders() -> dict[str, tuple[int, ...]]:
    """The 12 executions of the own-procedure walkthrough: 11 valid orders, then `WALKTHROUGH_MISTAKE`."""
    orders: dict[str, tuple[int, ...]] = {
        f"video_{k:02d}": VALID_ORDERS[k % len(VALID_ORDERS)] for k in range(WALKTHROUGH_TRAIN + 1)
    }
    return orders | {WALKTHROUGH_MISTAKE: MISTAKE_ORDER}


def write_walkthrough(folder: Path) -> Path:
    """Write the walkthrough's videos, ``labels.json`` and ``split.json`` (``test``: the last two videos).

    Args:
        folder: where to write (``folder/videos/video_XX.mp4``, ``folder/labels.json``, ``folder/split.json``).

    Returns:
        The annotation file.
    """
    orders = walkthrough_orders()
    labels = write_procedure(folder, orders)
    names = list(orders)
    split = {"train": names[:WALKTHROUGH_TRAIN], "test": names[WALKTHROUGH_TRAIN:]}
    write_text(folder / "split.json", json.dumps(split, indent=1), "split file")
    return labels


@exit_on_input_error
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.procedure_videos OUT_DIR``: write the walkthrough's 12 shelf videos and their labels."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.procedure_videos",
        description=f"Write the walkthrough's {len(walkthrough_orders())} videos of a made-up six-step procedure "
                    f"(assemble a shelf, {SOURCE_FPS:g} fps, {SIZE[0]}x{SIZE[1]}) and their labels; "
                    f"{WALKTHROUGH_MISTAKE} attaches the legs before unboxing the parts. "
                    "See docs/recognition.md, 'Try the walkthrough on generated videos'.")
    parser.add_argument("out", help="folder to write: videos/video_00.mp4 ..., labels.json, split.json")
    args = parser.parse_args(argv)
    folder = Path(args.out)
    labels = write_walkthrough(folder)
    print(f"wrote {len(walkthrough_orders())} videos to {folder / 'videos'}, {labels} and {folder / 'split.json'} "
          f"({WALKTHROUGH_MISTAKE} attaches the legs before unboxing the parts, marked has_errors)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
