"""PREGO scores: pooled per-class F1 with true (not swapped) precision and recall."""

from __future__ import annotations

import numpy as np
import pytest

from graphs.mistake_metrics import mistake_scores, protocol_labels


def test_labels_mark_only_the_last_step_as_the_mistake() -> None:
    np.testing.assert_array_equal(protocol_labels(4), [0, 0, 0, 1])
    assert protocol_labels(0).size == 0


def test_perfect_detector_scores_100() -> None:
    scores = mistake_scores([[False, False, True], [False, True]])
    assert scores.avg_f1 == pytest.approx(100.0)
    assert (scores.n_steps, scores.n_videos) == (5, 2)


def test_scores_are_pooled_over_videos_with_true_precision_and_recall() -> None:
    # truth: 0 0 1 | 0 1 ; alerts: 1 0 1 | 0 0
    scores = mistake_scores([[True, False, True], [False, False]])
    # mistake class: tp=1, predicted=2, actual=2 -> P=50, R=50
    assert scores.mistake.precision == pytest.approx(50.0)
    assert scores.mistake.recall == pytest.approx(50.0)
    # correct class: tp=2 (positions 2 and 4), predicted=3, actual=3
    assert scores.correct.precision == pytest.approx(200 / 3)
    assert scores.correct.recall == pytest.approx(200 / 3)
    assert scores.avg_f1 == pytest.approx((50.0 + 200 / 3) / 2)


def test_precision_and_recall_are_not_swapped() -> None:
    # Alert on everything: mistake recall 100, mistake precision = 2 videos / 6 steps.
    scores = mistake_scores([[True, True, True], [True, True, True]])
    assert scores.mistake.recall == pytest.approx(100.0)
    assert scores.mistake.precision == pytest.approx(100 / 3)
    assert scores.correct.f1 == 0.0


def test_a_correct_video_contributes_only_correct_steps() -> None:
    np.testing.assert_array_equal(protocol_labels(3, has_mistake=False), [0, 0, 0])
    # truth: 0 1 | 0 0 0 (the second video has no mistake); alerts: 0 1 | 0 1 0
    scores = mistake_scores([[False, True], [False, True, False]], has_mistake=[True, False])
    # mistake class: tp=1, predicted=2, actual=1 -> P=50, R=100; correct: tp=3, predicted=3, actual=4
    assert (scores.mistake.precision, scores.mistake.recall) == pytest.approx((50.0, 100.0))
    assert (scores.correct.precision, scores.correct.recall) == pytest.approx((100.0, 75.0))
    assert (scores.n_steps, scores.n_videos) == (5, 2)
    with pytest.raises(ValueError, match="2 entries for 1 videos"):
        mistake_scores([[False, True]], has_mistake=[True, False])
