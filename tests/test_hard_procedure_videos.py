"""The hard footage generator (`tests.hard_procedure_videos`) writes what the walkthrough and the benchmark rely on.

A small set (four short 160x120 videos at 5 fps) is written once: the videos decode at their size and length, the
labels are a valid annotation file whose segments cover each step once, the held-out video's violation is the one
segment marked ``has_errors``, each key-step changes a small part of the table, and a seed writes the same bytes.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import pytest

from graphs.annotations import load_annotations
from tests.hard_procedure_videos import (
    PRECONDITIONS,
    STEPS,
    VIOLATIONS,
    done_too_early,
    main,
    plan_executions,
    valid_orders,
    write_execution,
    write_set,
)

SIZE = (160, 120)
FPS = 5.0
SEED = 3


@pytest.fixture(scope="module")
def small_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four executions (three to train on, one held out with a violation), written once for this module."""
    folder = tmp_path_factory.mktemp("hard")
    write_set(folder, seed=SEED, videos=4, size=SIZE, fps=FPS)
    return folder


def frames_of(path: Path) -> np.ndarray:
    """Every frame of a video, decoded with OpenCV: (frames, height, width, 3) uint8."""
    capture = cv2.VideoCapture(str(path))
    frames: list[np.ndarray] = []
    while len(frames) < 2000:  # bounded: the generated videos are under a minute
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return np.stack(frames)


def test_videos_decode_and_labels_are_an_annotation_file_of_every_step(small_set: Path) -> None:
    labels = json.loads((small_set / "labels.json").read_text())
    loaded = load_annotations(small_set / "labels.json")  # the reader of tgml train and recognition-features
    split = json.loads((small_set / "split.json").read_text())
    assert split == {"train": ["video_00", "video_01", "video_02"], "test": ["video_03"]}
    assert "video_03" in (small_set / "README.txt").read_text().split("Held out")[1]
    for name, record in labels["annotations"].items():
        frames = frames_of(small_set / "videos" / f"{name}.mp4")
        assert frames.shape[1:] == (SIZE[1], SIZE[0], 3)
        duration = len(frames) / FPS
        segments = record["segments"]
        assert sorted(s["step_id"] for s in segments) == sorted(STEPS)
        assert loaded.videos[name].steps == tuple(s["step_id"] for s in segments)
        times = [(s["start_time"], s["end_time"]) for s in segments]
        assert all(0 <= a < b <= duration for a, b in times)
        assert all(b <= c for (_, b), (c, _) in zip(times, times[1:], strict=False)), "segments overlap"
        assert all(1.7 <= b - a <= 6.3 for a, b in times), times  # steps of 2-6 s, boundaries marked +-0.1 s
        assert times[0][0] > 0.8 and duration - times[-1][1] > 0.8  # the table is idle before and after


def test_the_held_out_violation_is_the_one_step_marked_has_errors(small_set: Path) -> None:
    labels = json.loads((small_set / "labels.json").read_text())["annotations"]
    for name in ("video_00", "video_01", "video_02"):
        assert not any(s["has_errors"] for s in labels[name]["segments"])
    segments = labels["video_03"]["segments"]
    order = [s["step_id"] for s in segments]
    marked = [s["has_errors"] for s in segments]
    assert sum(marked) == 1 and marked == done_too_early(order)
    k = marked.index(True)
    assert not set(PRECONDITIONS[order[k]]) <= set(order[:k]), "the marked step had its pre-conditions"


def test_a_standard_set_holds_out_six_videos_four_of_them_with_each_kind_of_violation() -> None:
    for seed in range(5):
        plans = plan_executions(20, seed)
        train, test = [p for p in plans if not p.held_out], [p for p in plans if p.held_out]
        assert len(train) == 14 and len(test) == 6
        assert sorted(p.violation for p in test if p.violation) == sorted(VIOLATIONS)
        assert sum(p.violation is not None for p in train) == 1
        valid = [p.order for p in train if p.violation is None]
        assert len(set(valid)) == len(valid), "two training videos share an order"
        assert set(valid) <= set(valid_orders())
        for p in plans:
            marked = done_too_early(p.order)
            if p.violation is None:
                assert not any(marked)
            else:
                step, skipped = p.violation
                k = p.order.index(step)
                assert marked == [i == k for i in range(len(p.order))]
                assert set(PRECONDITIONS[step]) - set(p.order[:k]) == {skipped}
    assert Counter(len(pre) for pre in PRECONDITIONS.values())[2] >= 2  # at least two AND pre-conditions


def test_each_key_step_changes_a_small_part_of_the_view(tmp_path: Path) -> None:
    # Without the camera's motion and noise, the table at rest before and after a step differs where the step put
    # its object or moved the lid. A frame "at rest" is the per-pixel median of a gap, as hands move through gaps.
    order = (3, 0, 2, 1, 4, 5)
    segments = write_execution(tmp_path / "clean.mp4", order, (SEED, 9), SIZE, FPS, clean=True)
    frames = frames_of(tmp_path / "clean.mp4").astype(np.int16)
    bounds = [0.0] + [t for _, a, b in segments for t in (a, b)] + [len(frames) / FPS]
    spans = zip(bounds[::2], bounds[1::2], strict=True)
    gaps = [frames[round((a + 0.3) * FPS) : round((b - 0.3) * FPS)] for a, b in spans]
    assert all(len(g) >= 1 for g in gaps)
    rest = [np.median(g, axis=0) for g in gaps]
    for k, step in enumerate(order):
        changed = float((np.abs(rest[k + 1] - rest[k]).max(axis=2) > 40).mean())
        assert 0.002 < changed < 0.2, f"{STEPS[step]} changed {100 * changed:.1f}% of the view"


def test_a_seed_writes_the_same_files_and_another_seed_other_ones(small_set: Path, tmp_path: Path) -> None:
    plan = plan_executions(4, SEED)[0]
    again = write_execution(tmp_path / "again.mp4", plan.order, (SEED, 0), SIZE, FPS)
    assert (tmp_path / "again.mp4").read_bytes() == (small_set / "videos" / "video_00.mp4").read_bytes()
    labels = json.loads((small_set / "labels.json").read_text())["annotations"]["video_00"]["segments"]
    assert [(s["step_id"], s["start_time"], s["end_time"]) for s in labels] == again
    other = write_execution(tmp_path / "other.mp4", plan.order, (SEED + 1, 0), SIZE, FPS)
    assert other != again
    assert (tmp_path / "other.mp4").read_bytes() != (tmp_path / "again.mp4").read_bytes()


def test_without_scikit_image_the_generator_says_which_extra_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A new user following docs/evaluation.md with only the README's install got a traceback and an empty folder.
    monkeypatch.setitem(sys.modules, "skimage", None)  # what `import skimage` meets where it is not installed
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "hard")])
    assert exit_.value.code == 2
    assert "error: the scenes are made of scikit-image's photographs: install the dev extra" in capsys.readouterr().err
    assert not (tmp_path / "hard").exists()


@pytest.mark.parametrize("fps", [1.0, 2.0])
def test_the_lowest_rates_the_generator_accepts_write_videos(tmp_path: Path, fps: float) -> None:
    # --fps takes 1..120, and at 1-2 fps an idle gap of a second or two is shorter than any hand motion: planning one
    # in it ended `python -m tests.hard_procedure_videos OUT --fps 2` with a ValueError traceback.
    for index, plan in enumerate(plan_executions(4, SEED)):
        segments = write_execution(tmp_path / f"video_{index}.mp4", plan.order, (SEED, index), SIZE, fps)
        assert len(segments) == len(plan.order)
        assert len(frames_of(tmp_path / f"video_{index}.mp4")) >= 10 * fps
