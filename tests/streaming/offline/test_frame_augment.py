"""Augmented copies of frames: one random camera per copy, reproducible, on hand-checked pixels."""

from __future__ import annotations

import numpy as np

from streaming.offline.frame_augment import FrameAugmentation, augment_frames, draw_augmentation


def test_a_copy_is_drawn_from_the_seed_the_video_and_its_number() -> None:
    first = draw_augmentation(0, "run0", 1, flips=True)
    assert first == draw_augmentation(0, "run0", 1, flips=True)
    assert first != draw_augmentation(0, "run0", 2, flips=True) != draw_augmentation(0, "run1", 1, flips=True)
    assert not any(draw_augmentation(0, "run0", k, flips=False).flip for k in range(1, 20))
    assert any(draw_augmentation(0, "run0", k, flips=True).flip for k in range(1, 20))
    for k in range(1, 20):
        aug = draw_augmentation(7, "v", k, flips=True)
        assert 0.75 <= aug.scale <= 1 and 0.75 <= aug.brightness <= 1.25 and 0.7 <= aug.saturation <= 1.3


def test_crop_flip_and_colour_change_the_pixels_as_the_formula_says() -> None:
    frames = np.zeros((2, 8, 10, 3), dtype=np.uint8)
    frames[:, :, :5] = (200, 100, 50)  # left half coloured, right half black
    identity = FrameAugmentation(1.0, 0.0, 0.0, False, 1.0, 1.0, 1.0)
    np.testing.assert_array_equal(augment_frames(frames, identity), frames)
    crop = augment_frames(frames, FrameAugmentation(0.5, 0.0, 1.0, True, 1.0, 1.0, 1.0))  # bottom-left 4x5, mirrored
    assert crop.shape == (2, 4, 5, 3) and (crop == (200, 100, 50)).all()
    grey = augment_frames(frames, FrameAugmentation(1.0, 0.0, 0.0, False, 1.0, 1.0, 0.0))[0, 0, 0]
    assert abs(int(grey[0]) - int(grey[2])) <= 1  # no saturation: grey
    darker = augment_frames(frames, FrameAugmentation(1.0, 0.0, 0.0, False, 0.5, 1.0, 1.0))
    np.testing.assert_allclose(darker[0, 0, 0], [100, 50, 25], atol=1)
