"""The segmenter's confirmation length, chosen on validation outputs (`recognition.confirmation`)."""

from __future__ import annotations

import numpy as np

from recognition.confirmation import annotated_segments, candidate_durations, choose_confirmation, confirmed_f1
from recognition.segmenter import SegmenterConfig

CLASS_STEP_IDS = (None, 10, 11, 12)  # background, then three key-steps


def outputs(step_s: int, fps: float, flicker_every: int | None, rng: np.random.Generator
            ) -> tuple[np.ndarray, np.ndarray]:
    """Class probabilities and one-hot targets of a recording doing the three steps for ``step_s`` seconds each,
    with pauses between them; every ``flicker_every``-th frame (None: never) the detector gives to a wrong step."""
    frames_per_step = int(step_s * fps)
    labels = np.concatenate([np.zeros(frames_per_step // 4, dtype=np.int64)] + [
        np.r_[np.full(frames_per_step, c), np.zeros(frames_per_step // 4, dtype=np.int64)] for c in (1, 2, 3)])
    targets = np.eye(4)[labels]
    seen = labels.copy()
    if flicker_every is not None:
        flicker = np.arange(flicker_every, len(seen), flicker_every)
        seen[flicker] = (seen[flicker] + rng.integers(1, 4, len(flicker))) % 4
    return np.eye(4)[seen] * 0.85 + 0.05, targets


def test_long_steps_at_one_vector_a_second_get_a_confirmation_that_outlasts_a_flicker() -> None:
    # At one vector a second the default 0.5 s is one vector: each one-vector flicker was a confirmed step.
    rng = np.random.default_rng(0)
    validation = {f"v{i}": outputs(40, 1.0, 13, rng) for i in range(3)}
    base = SegmenterConfig(fps=1.0)
    choice = choose_confirmation(validation, CLASS_STEP_IDS, base)
    assert choice.median_step_s == 40.0
    # 1 s is the same one vector as 0.5 s, 2 s's half one vector (no flicker rule); 10 s = 40 s / 4.
    assert list(choice.f1) == [0.5, 3.0, 6.0, 10.0]
    chosen = choice.config
    assert chosen.min_duration > 1.0 and chosen.max_delay >= 2 * chosen.min_duration
    # A one-vector blip inside a step is its flicker, and no run shorter than the confirmation is a step.
    assert chosen.min_run == chosen.min_duration / 2 and chosen.class_min_duration == (chosen.min_duration,) * 4
    # Announced early (--alert-on onset) only once past the flicker rule: sooner, a run it drops is withdrawn.
    assert chosen.onset_frames == chosen.frames(chosen.min_run)
    blips = choice.f1[0.5]  # None: nothing to count
    assert choice.f1[chosen.min_duration] == 100.0 and blips is not None and blips < 50  # every blip had been a step
    assert "confirmed after" in choice.summary() and "median step 40.0 s" in choice.summary()


def test_steps_of_a_few_seconds_keep_the_default_untried() -> None:
    # Steps of 3 s at 2 a second: a quarter of one is below every candidate longer than the default.
    rng = np.random.default_rng(1)
    validation = {"v": outputs(3, 2.0, 5, rng)}
    base = SegmenterConfig(fps=2.0)
    choice = choose_confirmation(validation, CLASS_STEP_IDS, base)
    assert choice.config == base and choice.f1 == {}
    # Said all the same: a confirmation of one frame, where the manual says the trainer prints its choice.
    assert choice.said and choice.summary() == (
        "segmenter: a key-step is confirmed after 0.5 s, the default, a single frame at 2 a second: the validation "
        "videos' median step, 3.0 s, leaves no longer one to try (one must fit in 25% of it, its half spanning two "
        "frames or more)")


def test_the_default_at_video_rates_goes_unsaid() -> None:
    rng = np.random.default_rng(1)
    choice = choose_confirmation({"v": outputs(3, 5.0, 5, rng)}, CLASS_STEP_IDS, SegmenterConfig(fps=5.0))
    assert choice.f1 == {} and not choice.said


def test_a_tie_goes_to_the_shorter_confirmation() -> None:
    # Clean outputs: every candidate finds every step; the shorter one alerts sooner.
    rng = np.random.default_rng(2)
    validation = {"v": outputs(40, 1.0, None, rng)}
    choice = choose_confirmation(validation, CLASS_STEP_IDS, SegmenterConfig(fps=1.0))
    assert set(choice.f1.values()) == {100.0} and choice.config.min_duration == 0.5


def test_candidates_take_at_most_a_quarter_of_the_median_step_and_differ_in_frames() -> None:
    assert candidate_durations(SegmenterConfig(fps=1.0), 13.0) == [0.5, 3.0]
    assert candidate_durations(SegmenterConfig(fps=2.0), 100.0) == [0.5, 2.0, 3.0, 6.0, 10.0]
    assert candidate_durations(SegmenterConfig(fps=2.99), 100.0) == [0.5, 2.0, 3.0, 6.0, 10.0]  # 0.5 s: still 1 frame
    # At video rates the default spans frames enough: long steps or not, it is kept.
    assert candidate_durations(SegmenterConfig(fps=5.0), 100.0) == [0.5]
    assert candidate_durations(SegmenterConfig(fps=1.0), None) == [0.5]


def test_no_annotated_step_scores_nothing() -> None:
    probs = np.tile([0.9, 0.05, 0.03, 0.02], (30, 1))
    annotated = {"v": annotated_segments(np.eye(4)[np.zeros(30, dtype=np.int64)], 1.0, CLASS_STEP_IDS)}
    assert confirmed_f1({"v": probs}, annotated, SegmenterConfig(fps=1.0), CLASS_STEP_IDS) is None
