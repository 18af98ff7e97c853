"""Training-time augmentation and loss weights, on hand-computed examples."""

from __future__ import annotations

import numpy as np

from recognition.augment import blur_targets, class_weights, perturb_windows, speed_positions


def test_boundary_smoothing_shares_the_targets_near_a_boundary_only() -> None:
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2])  # one video of 6 frames, then one of 3 (label 2)
    targets = np.eye(3, dtype=np.float32)[labels]
    soft = blur_targets(targets, [7, 2], radius=1)
    np.testing.assert_allclose(soft[2], [2 / 3, 1 / 3, 0])  # frames 1..3: two background, one step
    np.testing.assert_allclose(soft[3], [1 / 3, 2 / 3, 0])
    np.testing.assert_allclose(soft[5], [0, 1, 0])  # inside the segment: unchanged
    np.testing.assert_allclose(soft[6], [0, 1, 0])  # a video's last frame does not see the next video
    np.testing.assert_allclose(soft[7], [0, 0, 1])
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)
    assert blur_targets(targets, [7, 2], radius=0) is targets


def test_class_weights_balance_the_classes() -> None:
    targets = np.eye(3, dtype=np.float32)[[0] * 6 + [1] * 2 + [2] * 0]
    weights = class_weights(targets, power=1.0)  # inverse frequency: each class weighs as much in total
    assert weights[2] == 0
    np.testing.assert_allclose(6 * weights[0], 2 * weights[1])
    np.testing.assert_allclose((targets @ weights).mean(), 1.0, rtol=1e-6)
    np.testing.assert_allclose(class_weights(targets, power=0.0)[:2], [1.0, 1.0])


def test_background_weight_weighs_the_background_apart_and_keeps_the_loss_scale() -> None:
    targets = np.eye(3, dtype=np.float32)[[0] * 6 + [1] * 3 + [2] * 1]
    plain = class_weights(targets, power=0.0, background=(0,), background_weight=2.0)
    np.testing.assert_allclose(plain[0], 2 * plain[1], rtol=1e-6)  # a background second costs twice a step's
    np.testing.assert_allclose(plain[1], plain[2], rtol=1e-6)
    np.testing.assert_allclose((targets @ plain).mean(), 1.0, rtol=1e-6)
    balanced = class_weights(targets, power=0.5, background=(0,), background_weight=0.5)
    np.testing.assert_allclose(balanced[1] / balanced[2], (3 / 1) ** -0.5, rtol=1e-6)  # the steps still balanced
    np.testing.assert_allclose(balanced[0] / balanced[1], 0.5 * (6 / 3) ** -0.5, rtol=1e-6)
    np.testing.assert_allclose((targets @ balanced).mean(), 1.0, rtol=1e-6)
    np.testing.assert_allclose(class_weights(targets, 0.5, (0,), 1.0), class_weights(targets, 0.5), rtol=1e-6)


def test_speed_changes_resample_each_video_within_itself() -> None:
    rng = np.random.default_rng(0)
    positions, lengths = speed_positions([10, 5], rng, 0.0)
    assert positions.tolist() == list(range(15)) and lengths == [10, 5]
    positions, lengths = speed_positions([40, 30], rng, 0.5)
    first, second = positions[: lengths[0]], positions[lengths[0] :]
    assert 40 / 1.5 <= lengths[0] <= 40 * 1.5 + 1 and first[0] == 0 and first.max() <= 39
    assert second[0] == 40 and second.max() <= 69  # the second video starts at its own first frame
    assert (np.diff(first) >= 0).all() and (np.diff(second) >= 0).all()


def test_noise_and_background_mixing_leave_padding_at_zero() -> None:
    rng = np.random.default_rng(0)
    x = np.ones((2, 4, 3), dtype=np.float32)
    valid = np.array([[True, True, True, False], [True, True, True, True]])
    background = np.full((5, 3), 3.0, dtype=np.float32)
    out = perturb_windows(x, valid, rng, None, background, mix=0.5)
    assert (out[0, 3] == 0).all()
    assert ((out[valid] >= 1.0) & (out[valid] <= 2.0)).all()  # (1 - λ) 1 + λ 3, λ in [0, 0.5]
    noisy = perturb_windows(np.zeros((64, 64, 3), np.float32), np.ones((64, 64), bool), rng, np.array([0.0, 1.0, 2.0]))
    np.testing.assert_allclose(noisy.reshape(-1, 3).std(axis=0), [0.0, 1.0, 2.0], atol=0.05)
