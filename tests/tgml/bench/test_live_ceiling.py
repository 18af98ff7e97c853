"""`tgml bench-live --ceiling`: the most one threshold on the detectors' outputs could score (a bound, not a method)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tgml.bench.error_annotations import ORDER_ERROR, ErrorRecording, PerformedStep
from tgml.bench.live.ceiling import best_avg_f1, best_f1, missing_scores, order_scores
from tgml.bench.live.recordings import FPS, load_live_data


def test_the_best_f1_is_taken_at_the_threshold_that_scores_best_and_never_splits_a_tie() -> None:
    scores = np.array([0.9, 0.8, 0.8, 0.3, 0.1])
    positives = np.array([True, False, True, True, False])
    best = best_f1(scores, positives)
    # Name 1: F1 2/4; the tie at 0.8 enters whole: 2 right of 3 named, F1 4/6; then 3 of 4: F1 6/7; all: 6/8.
    assert best.score == pytest.approx(100 * 6 / 7) and best.named == 4
    assert (best.precision, best.recall) == pytest.approx((75.0, 100.0))
    assert (best.positives, best.items) == (3, 5)
    tied = best_f1(np.array([0.5, 0.5]), np.array([True, False]))
    assert tied.named == 2 and tied.precision == pytest.approx(50.0)  # not 1 of 1 by picking the right one first


def test_the_best_avg_f1_averages_the_mistake_and_the_correct_class_as_the_benchmark_does() -> None:
    from tgml.bench.mistake_bench import Counts

    rng = np.random.default_rng(3)
    scores, positives = rng.random(40), rng.random(40) < 0.3
    best = best_avg_f1(scores, positives)
    # The same figure from the benchmark's own counts, alerting the items at or above each distinct score, or none
    # (the floor of a checker that never speaks: half the correct class's F1).
    figures = []
    for c in [*np.unique(scores), np.inf]:
        alerted = scores >= c
        counts = Counts(steps=40, order_errors=int(positives.sum()), alerts=int(alerted.sum()),
                        caught=int((alerted & positives).sum()))
        figures.append(counts.metrics()["avg_f1"] or 0.0)
    assert best.score == pytest.approx(max(figures))
    nothing = best_f1(scores, np.zeros(40, dtype=bool))  # error-free recordings only: nothing to find, not 0
    assert (nothing.score, nothing.average_precision, nothing.positives) == (None, None, 0)
    every = best_avg_f1(scores, np.ones(40, dtype=bool))  # no correct step to find: Counts' Avg F1 is None too
    assert every.score is None and Counts(steps=40, order_errors=40, alerts=40, caught=40).metrics()["avg_f1"] is None
    # The best Avg F1 that keeps precision at 50 or more: here the 3 top items, 2 of them order mistakes.
    ranked = best_avg_f1(np.array([0.9, 0.8, 0.7, 0.2, 0.1]), np.array([True, False, True, False, False]))
    assert ranked.at_precision == pytest.approx(ranked.score)
    assert (ranked.score, ranked.named) == (pytest.approx(80.0), 3)
    # Here no threshold keeps it, and alerting nothing scores best: 0.8 for the correct class, 0 for the mistakes.
    strict = best_avg_f1(np.array([0.9, 0.8, 0.7]), np.array([False, False, True]))
    assert (strict.score, strict.named, strict.precision, strict.at_precision) == (pytest.approx(40.0), 0, None, None)


def test_a_step_scores_as_done_out_of_order_by_how_clearly_its_precondition_was_not_shown_before_it() -> None:
    classes = [None, 1, 2]  # background, wash, cut; cut needs wash
    probs = np.zeros((40, 3))
    probs[:, 0] = 1.0
    probs[20:30, 2], probs[20:30, 0] = 1.0, 0.0  # cut shown clearly in its span; wash never
    recording = ErrorRecording("r", "salad", (PerformedStep(2, "cut", 20.0, (ORDER_ERROR,), 30.0),
                                              PerformedStep(1, "wash", 31.0, (), 38.0)), frozenset(), ())
    scores = order_scores(probs, classes, FPS, recording, {2: frozenset({1}), 1: frozenset()})
    assert scores.steps == (2, 1) and list(scores.order_error) == [True, False]
    assert list(scores.unseen) == pytest.approx([1.0, 0.0])  # wash has no pre-condition: never out of order
    assert list(scores.unseen_and_seen) == pytest.approx([1.0, 0.0])
    probs[5:15, 1], probs[5:15, 0] = 0.6, 0.4  # wash shown at 0.6 before cut began: less likely skipped
    again = order_scores(probs, classes, FPS, recording, {2: frozenset({1}), 1: frozenset()})
    assert again.unseen[0] == pytest.approx(0.4)
    unlike = missing_scores(probs, classes, FPS)
    assert unlike == pytest.approx({1: 0.4, 2: 0.0})


def test_a_step_done_twice_is_one_item_scored_at_the_occurrence_a_chain_could_alert() -> None:
    # The live rows count a step done twice once, right whenever an alert names it, its latency from its occurrence
    # tagged Order Error (scrambledeggs' 16_39 adds garlic twice, tagged the second time); the bound scored the first
    # occurrence alone, here barely recognised, so a chain alerting the second, clearly seen, beat its "ceiling".
    classes = [None, 1, 2]  # background, wash, cut; cut needs wash
    probs = np.zeros((40, 3))
    probs[:, 0] = 1.0
    probs[5:9, 2], probs[5:9, 0] = 0.1, 0.9  # the first cut, barely seen
    probs[20:30, 2], probs[20:30, 0] = 1.0, 0.0  # the second, clearly
    recording = ErrorRecording("r", "salad", (PerformedStep(2, "cut", 5.0, (), 9.0),
                                              PerformedStep(2, "cut", 20.0, (ORDER_ERROR,), 30.0),
                                              PerformedStep(1, "wash", 31.0, (), 38.0)), frozenset(), ())
    graph = {2: frozenset({1}), 1: frozenset()}
    scores = order_scores(probs, classes, FPS, recording, graph)
    assert scores.steps == (2, 1) and list(scores.order_error) == [True, False]  # one item per step, as live_counts
    assert list(scores.unseen) == pytest.approx([1.0, 0.0])
    assert list(scores.unseen_and_seen) == pytest.approx([1.0, 0.0])
    # Wash shown between the two: the second cut had its pre-condition, and the first, the higher, stands. The score
    # is each occurrence's, whichever is tagged: the tag chooses no occurrence, so the threshold is not told it.
    probs[12:17, 1], probs[12:17, 0] = 1.0, 0.0
    between = order_scores(probs, classes, FPS, recording, graph)
    assert between.unseen_and_seen[0] == pytest.approx(0.08)  # the first cut: 4 s at 0.1 in a 5 s mean
    assert between.unseen[0] == pytest.approx(1.0)


def test_with_recognition_made_perfect_the_bounds_reach_the_annotated_steps_scores(data_dir: Path) -> None:
    # What the bounds measure is what a chain could do with such outputs: fed every recording's annotated classes as
    # its probabilities, they score about what the annotated steps score with the hand-made graphs
    # (docs/live-benchmark.md: Avg F1 66.0, missing-step F1 93.8; 2 steps lose their seconds to overlapping ones).
    data = load_live_data(data_dir)
    unlike, tagged, orders = [], [], []
    for r in data.recordings:
        recipe = data.recipes[r.recipe]
        probs = np.eye(len(recipe.class_step_ids))[r.labels]
        scores = missing_scores(probs, recipe.class_step_ids, FPS)
        unlike += [scores[s] for s in recipe.step_ids]
        tagged += [s in r.annotation.missing for s in recipe.step_ids]
        graph = recipe.ground_truth
        orders.append(order_scores(probs, recipe.class_step_ids, FPS, r.annotation,
                                   {s: graph.preconditions(s) for s in recipe.step_ids}))
    assert (best_f1(np.array(unlike), np.array(tagged)).score or 0) > 90
    errors = np.concatenate([o.order_error for o in orders])
    for per_recording in ([o.unseen for o in orders], [o.unseen_and_seen for o in orders]):
        assert 65 < (best_avg_f1(np.concatenate(per_recording), errors).score or 0) < 70
