"""Per-frame mAP: hand-checked values, background excluded, absent classes ignored."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recognition.metrics import average_precision, frame_map


def test_average_precision_by_hand() -> None:
    # Ranking by score: pos, neg, pos, neg -> AP = (1/1 + 2/3) / 2
    scores = np.array([[0.9], [0.8], [0.7], [0.1]])
    positives = np.array([[True], [False], [True], [False]])
    assert average_precision(scores, positives)[0] == pytest.approx((1 + 2 / 3) / 2)


def test_perfect_and_reversed_rankings() -> None:
    labels = np.array([0, 1, 1, 2, 2, 2])
    perfect = np.eye(3)[labels]
    value, ap = frame_map(perfect, labels)
    assert value == 1.0 and np.allclose(ap, 1.0)
    reversed_scores = 1.0 - perfect
    value, _ = frame_map(reversed_scores, labels)
    assert value < 0.5


def test_background_and_absent_classes_are_left_out() -> None:
    labels = np.array([0, 0, 1, 1])  # class 2 never occurs
    scores = np.array([[0.1, 0.9, 0.0], [0.9, 0.1, 0.0], [0.5, 0.5, 0.0], [0.0, 1.0, 0.0]])
    value, ap = frame_map(scores, np.eye(3)[labels])
    assert math.isnan(ap[2])
    assert value == pytest.approx(ap[1])  # background (0) and the absent class do not count
    assert ap[1] < 1.0


def test_tied_scores_are_one_threshold_whatever_the_frame_order() -> None:
    # Saturated float32 probabilities tie (many frames at exactly 1.0). Ties were broken by frame index, so
    # the AP depended on where the positive frames happened to sit: 1.0 one way round, 0.5 the other.
    scores = np.array([[1.0], [1.0], [0.2]])
    for column in ([[True], [False], [False]], [[False], [True], [False]]):
        assert average_precision(scores, np.array(column))[0] == pytest.approx(0.5)
    # two tie groups: {0.9 x3: 2 positives}, {0.1 x2: 1 positive}; AP = 2/3 * 2/3 + 1/3 * 3/5
    scores = np.array([[0.9], [0.1], [0.9], [0.1], [0.9]])
    positives = np.array([[True], [True], [False], [False], [True]])
    assert average_precision(scores, positives)[0] == pytest.approx(2 / 3 * 2 / 3 + 1 / 3 * 3 / 5)
    rng = np.random.default_rng(0)
    scores = rng.random((200, 4))  # no ties: unchanged definition, precision at every positive
    positives = rng.random((200, 4)) < 0.3
    order = np.argsort(-scores[:, 0])
    hit = positives[order, 0]
    expected = np.mean((np.cumsum(hit) / np.arange(1, 201))[hit])
    assert average_precision(scores, positives)[0] == pytest.approx(expected)
