"""The detector's evidence (formulas E1-E4 of recognition/evidence.py) and its calibration on validation videos."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from graphs.common.errors import InputError
from recognition.evidence import (
    DEFAULT_FALSE_RATE,
    DEFAULT_MISS_RATE,
    MAX_COEFFICIENT,
    EvidenceModel,
    EvidenceReporter,
    EvidenceTracker,
    detection_evidence,
    detection_real,
    recording_evidence,
    step_rows,
    window_evidence,
)
from recognition.evidence_calibration import (
    RIDGE,
    SLOPE_PENALTIES,
    calibrate_evidence,
    choose_slope_penalty,
    done_pairs,
    fit_shrunk_logistic,
    held_out_units,
    shrunk_rates,
    video_detections,
)
from recognition.segmenter import SegmenterConfig, SegmentEvent


def test_window_evidence_is_the_running_maximum_of_window_means() -> None:
    p = np.array([[0.0], [1.0], [1.0], [0.0], [0.5], [0.5], [0.5]])
    # Means over 2 frames (the first over 2 as well): 0, .5, 1, .5, .25, .5, .5 -> running max.
    assert window_evidence(p, 2)[:, 0].tolist() == [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0]
    q = np.array([[0.2], [0.2], [0.8], [0.0]])
    assert window_evidence(q, 3)[:, 0] == pytest.approx([0.2 / 3, 0.4 / 3, 0.4, 0.4])


def test_done_pairs_ask_at_each_annotated_start_and_at_the_end() -> None:
    # Two steps over 4 frames; step 1 annotated from frame 1, step 0 from frame 3 (and again later in the video).
    evidence = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]])
    x, y = done_pairs(evidence, [(1, 1), (0, 3)], 4, done_head=False)
    # Asks at frames 1, 3 and 4 (the end), each with the evidence after the frame before it.
    assert x[:, 0].tolist() == [0.1, 0.2, 0.5, 0.6, 0.7, 0.8]
    assert y.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    with_states = np.concatenate([evidence, np.full((4, 2), 2.0)], axis=1)  # (T, 2K): the done-state logits after
    x, y = done_pairs(with_states, [(0, 0)], 4, done_head=True)
    assert x.shape == (4, 2) and x[:2, 1] == pytest.approx(np.log(1e-4 / (1 - 1e-4)))  # before the first frame
    assert x[2:].tolist() == [[0.7, 2.0], [0.8, 2.0]] and y.tolist() == [0.0, 0.0, 1.0, 0.0]


def test_video_detections_are_real_on_their_step_and_hit_the_runs_they_overlap() -> None:
    labels = np.array([0, 1, 1, 1, 0, 2, 2, 0, 0, 0])  # runs: class 1 on frames 1-3, class 2 on 5-6
    runs = [(1, 1, 4), (2, 5, 7)]
    events = [SegmentEvent(10, 0.2, 0.8, 0.9, 1, 1, 4),  # on its run: real, 3 frames = 0.6 s
              SegmentEvent(20, 1.4, 2.0, 0.5, 2, 7, 10),  # after its run, on background: not real, no hit
              SegmentEvent(0, 0.0, 0.2, 1.0, 0, 0, 1)]  # background: no detection of a step
    found = video_detections(events, labels, runs, {1: 0, 2: 1}, 5.0, detection_window_s=1.2, window_s=0.6)
    assert found.rows.tolist() == [0, 1] and found.real.tolist() == [1.0, 0.0]
    np.testing.assert_allclose(found.evidence, [[0.9 * 0.5, 1.0], [0.5 * 0.5, 1.0]])
    assert found.run_hit.tolist() == [1.0, 0.0]


def test_the_online_tracker_agrees_with_the_whole_recording() -> None:
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4) * 0.3, size=200)
    batch = window_evidence(probs, 5)
    tracker = EvidenceTracker(4, 5)
    for row in probs:
        tracker.update(row)
    assert tracker.now([0, 1, 2, 3]) == pytest.approx(batch[-1])
    for frame in (1, 17, 100, 199):  # looked up at a past frame, to within the breakpoint step
        assert tracker.before(frame, [0, 1, 2, 3]) == pytest.approx(batch[frame - 1], abs=0.005)
    assert tracker.before(0, [0, 1]).tolist() == [0.0, 0.0]


def test_detection_evidence_shrinks_short_and_unsure_detections() -> None:
    assert detection_evidence(0.9, 2.0, 0.5) == pytest.approx(0.9)
    assert detection_evidence(0.6, 0.2, 0.5) == pytest.approx(0.24)


def test_the_default_model_passes_through_the_default_rates() -> None:
    model = EvidenceModel.default([3, 5], window_s=0.5)
    m, f = DEFAULT_MISS_RATE, DEFAULT_FALSE_RATE
    q0, q1 = model.done_probabilities(np.array([0.0, 1.0]))
    assert q0 / (1 - q0) == pytest.approx(m / (1 - f))  # never seen: LR = m / (1 - f)
    assert q1 / (1 - q1) == pytest.approx((1 - m) / f)  # seen clearly: LR = (1 - m) / f
    assert model.real_probability(0, 1.0) == pytest.approx(1 - f)
    assert model.real_probability(1, 0.0) == pytest.approx(f)


def test_a_model_survives_its_json_form_and_a_bad_one_is_named() -> None:
    model = EvidenceModel.default([3, 5], window_s=0.5)
    assert EvidenceModel.from_dict(model.to_dict()) == model
    bad = model.to_dict() | {"miss_rates": [0.2]}
    with pytest.raises(InputError, match="det.pt: miss_rates has 1 values for 2 steps"):
        EvidenceModel.from_dict(bad, "det.pt")
    with pytest.raises(InputError, match="format"):
        EvidenceModel.from_dict(model.to_dict() | {"format": 99})
    with pytest.raises(InputError, match=r"^evidence model: done_slope = nan: expected a number in \[0, 1e\+06\]$"):
        EvidenceModel.from_dict(model.to_dict() | {"done_slope": float("nan")})
    with pytest.raises(InputError, match="unexpected keyword"):
        EvidenceModel.from_dict(model.to_dict() | {"extra": 1})


@pytest.mark.parametrize(("change", "message"), [
    # Only checked finite: a slope of 1e308 made every probability NaN (inf - inf), and the run ended with status 0.
    ({"done_slope": 1e308}, r"done_slope = 1e\+308: expected a number in \[0, 1e\+06\]"),
    ({"real_slope": -1.0}, r"real_slope = -1.0: expected a number in \[0, 1e\+06\]"),
    ({"state_slope": 2e6}, r"state_slope = 2000000.0: expected a number in \[0, 1e\+06\]"),
    ({"real_duration_slope": 1e300}, r"real_duration_slope = 1e\+300: expected"),
    ({"done_base": 1e308}, r"done_base = 1e\+308: expected a number in \[-7, 7\]"),
    ({"done_intercepts": [0.0, -1e308]}, r"done_intercepts\[1\] = -1e\+308: expected a number in \[-1e\+06, 1e\+06\]"),
    ({"real_intercepts": [1e7, 0.0]}, r"real_intercepts\[0\] = 10000000.0: expected"),
    ({"false_rates": [0.1, 1.5]}, r"false_rates\[1\] = 1.5: expected a number in \[0, 1\]"),
    ({"pairs": -1}, r"pairs = -1: expected an integer in 0\.\."),
    ({"detections": "7"}, r'detections = "7": expected an integer in 0\.\.'),
])
def test_coefficients_and_counts_outside_what_a_fit_makes_are_refused_naming_the_field(
        change: dict[str, object], message: str) -> None:
    model = EvidenceModel.default([3, 5], window_s=0.5)
    with pytest.raises(InputError, match=rf"^det\.pt: field 'evidence': {message}"):
        EvidenceModel.from_dict(model.to_dict() | change, "det.pt: field 'evidence'")


def test_the_bounds_hold_every_calibration_the_repo_ships_or_makes() -> None:
    # The shipped detector's curves (slope 16) and the checker settings' (5-9) are far inside; so is a fit on
    # nearly separable pairs, where the penalised slope is largest.
    assert EvidenceModel.from_dict(EvidenceModel.default([1], 0.5).to_dict()).done_slope > 0
    rng = np.random.default_rng(0)
    y = (rng.random(20000) < 0.5).astype(float)
    x = np.where(y == 1, 0.5005, 0.4995)
    alpha, (slope,), _ = fit_shrunk_logistic(x, np.zeros(20000, dtype=np.int64), y, 1)
    assert 100 < slope < MAX_COEFFICIENT and abs(alpha) < MAX_COEFFICIENT


def test_shrunk_logistic_recovers_a_slope_and_keeps_it_non_negative() -> None:
    rng = np.random.default_rng(1)
    x = rng.random(4000)
    y = (rng.random(4000) < 1 / (1 + np.exp(-(-2 + 4 * x)))).astype(float)
    alpha, (slope,), delta = fit_shrunk_logistic(x, np.zeros(4000, dtype=np.int64), y, 1)
    assert alpha + delta[0] == pytest.approx(-2, abs=0.3) and slope == pytest.approx(4, abs=0.5)
    _, (flipped,), _ = fit_shrunk_logistic(x, np.zeros(4000, dtype=np.int64), 1 - y, 1)
    assert flipped == 0.0  # more evidence never makes "done" less likely


def _video(order: list[int], missed: int | None, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """5 fps: 3 background frames, then each step for 10 frames; the detector misses step ``missed`` entirely."""
    labels = np.concatenate([np.r_[np.zeros(3, int), np.full(10, s)] for s in order] + [np.zeros(3, int)])
    targets = np.eye(4)[labels]
    probs = 0.7 * targets + 0.3 * rng.dirichlet(np.ones(4), size=len(labels))
    if missed is not None:
        gone = labels == missed
        probs[gone] = 0.7 * np.eye(4)[0] + 0.3 * rng.dirichlet(np.ones(4), size=int(gone.sum()))
    return probs, targets


def test_calibration_measures_the_miss_rate_and_lowers_done_for_unseen_steps() -> None:
    rng = np.random.default_rng(2)
    validation = {f"v{k}": _video([1, 2, 3], 3 if k < 2 else None, rng) for k in range(8)}
    model = calibrate_evidence(validation, [None, 1, 2, 3], 5.0, SegmenterConfig(fps=5.0, min_duration=0.6))
    assert model.step_ids == (1, 2, 3) and model.source == "validation" and len(model.videos) == 8
    # Step 3 missed in 2 of 8 videos, the others never: its rate is shrunk toward the pooled 2 of 24 (R1).
    assert model.miss_rates == pytest.approx(shrunk_rates(np.array([0, 0, 2]), np.array([8, 8, 8]))[0])
    assert 2 / 24 < model.miss_rates[2] < 2 / 8 and model.miss_rates[0] == model.miss_rates[1] < 2 / 24
    assert max(model.false_rates) == 0.0  # every confirmed detection was on its annotated segment
    q_unseen, q_seen = model.done_probabilities(np.array([0.0, 0.9, 0.9]))[[0, 1]]
    assert q_unseen < 0.1 < 0.9 < q_seen


def test_rates_of_a_small_validation_split_swing_less_from_run_to_run() -> None:
    # Six steps whose false-detection rates are 0.2..0.45, each counted on 7 detections per run (three validation
    # videos): the raw share of one step spreads by about 17 points (sd) over runs, the shrunk one much less, and it is
    # closer to the truth on average.
    rng = np.random.default_rng(0)
    truth = np.array([0.2, 0.25, 0.3, 0.35, 0.4, 0.45])
    totals = np.full(6, 7.0)
    raw, shrunk = [], []
    for _ in range(300):
        hits = rng.binomial(7, truth).astype(np.float64)
        raw.append(hits / totals)
        shrunk.append(shrunk_rates(hits, totals)[0])
    raw_a, shrunk_a = np.array(raw), np.array(shrunk)
    assert np.all(shrunk_a.std(axis=0) < 0.7 * raw_a.std(axis=0))  # about 10 points instead of 17
    assert np.abs(shrunk_a - truth).mean() < 0.8 * np.abs(raw_a - truth).mean()


def test_a_step_counted_often_keeps_a_rate_that_really_differs() -> None:
    rates, n0 = shrunk_rates(np.array([90.0, 5.0, 4.0, 6.0]), np.array([100.0, 100.0, 100.0, 100.0]))
    assert rates[0] > 0.85 and rates[1:].max() < 0.1 and n0 <= 10
    # Counts that differ by chance alone: every step gets about the pooled rate.
    rates, n0 = shrunk_rates(np.array([1.0, 2.0, 1.0, 2.0]), np.array([6.0, 6.0, 6.0, 6.0]))
    assert n0 == 100.0 and rates == pytest.approx(np.full(4, 0.25), abs=0.01)
    # Nothing to shrink: no event at all, or no count.
    assert shrunk_rates(np.zeros(3), np.full(3, 4.0)) == (pytest.approx(np.zeros(3)), 0.0)
    assert shrunk_rates(np.zeros(2), np.zeros(2))[0] == pytest.approx(np.zeros(2))


def test_calibration_refuses_an_empty_validation_split() -> None:
    with pytest.raises(InputError, match="validation split is empty"):
        calibrate_evidence({}, [None, 1], 5.0, SegmenterConfig(fps=5.0))
    # Videos of background only (a file cut to one row): the videos checked are named.
    background = (np.array([[0.9, 0.1]]), np.array([[1.0, 0.0]]))
    with pytest.raises(InputError, match=r"no validation video shows an annotated key-step \(2 checked: v1, v2; a "
                                         r"video of background only, or cut short\?\)"):
        calibrate_evidence({"v1": background, "v2": background}, [None, 1], 5.0, SegmenterConfig(fps=5.0))
    # A detector of background classes only: the one error line, not numpy's "cannot reshape array of size 0".
    with pytest.raises(Exception) as raised:
        calibrate_evidence({"v1": background}, [None, None], 5.0, SegmenterConfig(fps=5.0))
    assert isinstance(raised.value, InputError), repr(raised.value)
    assert str(raised.value) == "evidence calibration: none of the detector's 2 classes is a key-step (all background)"


def test_a_reporter_sends_done_probabilities_before_a_segment_and_how_real_it_is() -> None:
    model = EvidenceModel.default([1, 2], window_s=1.0)
    reporter = EvidenceReporter(model, [None, 1, 2], fps=5.0)
    for _ in range(10):
        reporter.update(np.array([0.0, 1.0, 0.0]))  # step 1 for 2 s
    for _ in range(3):
        reporter.update(np.array([0.0, 0.0, 1.0]))
    steps, before_first = reporter.done_before(0)
    assert steps == (1, 2) and before_first[0] == pytest.approx(model.done_probabilities(np.zeros(2))[0])
    _, before_second = reporter.done_before(10)  # step 2 starts at frame 10: step 1 seen clearly, step 2 not yet
    assert before_second[0] > 0.85 > 0.3 > before_second[1]  # (1 - m) / (1 - m + f) = 0.89
    assert reporter.real(2, 0.9, 5) > reporter.real(2, 0.5, 1)
    with pytest.raises(InputError, match="step 7 is not a class"):
        EvidenceReporter(EvidenceModel.default([7], 1.0), [None, 1], 5.0)


def test_a_whole_recording_gets_the_evidence_the_live_reporter_sends() -> None:
    """`recording_evidence` (replays) and `EvidenceReporter` (live) agree detection by detection."""
    rng = np.random.default_rng(5)
    probs, _ = _video([1, 2, 3], 2, rng)
    model = calibrate_evidence({"v": _video([1, 2, 3], None, rng)}, [None, 1, 2, 3], 5.0,
                               SegmenterConfig(fps=5.0, min_duration=0.6), window_s=1.2)
    assert model.window_s == 1.2
    detections = [(1, 0.8, 10, 3), (3, 0.6, 4, 29), (2, 0.9, 2, 40)]  # (step, confidence, frames, first frame)
    offline = recording_evidence(probs, [d[3] for d in detections], [d[:3] for d in detections], model,
                                 [None, 1, 2, 3], 5.0)
    reporter = EvidenceReporter(model, [None, 1, 2, 3], 5.0)
    for row in probs:
        reporter.update(row)
    for (step, confidence, frames, first), sent in zip(detections, offline, strict=True):
        steps, done = reporter.done_before(first)
        assert [sent.done[s] for s in steps] == pytest.approx(done, abs=0.01)
        assert sent.real == pytest.approx(reporter.real(step, confidence, frames))


def test_a_longer_evidence_window_keeps_a_glimpse_from_counting_as_done() -> None:
    glimpse = np.eye(3)[[0] * 20 + [1] * 3 + [0] * 20]  # step 1 seen for 3 frames of 43
    assert window_evidence(glimpse, 3)[-1, 1] == 1.0
    assert window_evidence(glimpse, 15)[-1, 1] == pytest.approx(0.2)


def test_a_done_head_speaks_for_a_step_whose_action_was_never_caught() -> None:
    # The detector never shows step 3's action (a miss), but its done head says step 3 has been done: the
    # calibration learns to trust the head, and the evidence before the last step says "done".
    rng = np.random.default_rng(5)
    validation = {}
    for k in range(8):
        probs, targets = _video([1, 2, 3], 3 if k < 4 else None, rng)
        done = np.stack([np.zeros(len(targets))] + [
            np.where(np.arange(len(targets)) >= np.flatnonzero(targets[:, c]).max() + 1, 0.95, 0.05)
            for c in (1, 2, 3)], axis=1)
        validation[f"v{k}"] = (np.concatenate([probs, done], axis=1), targets)
    model = calibrate_evidence(validation, [None, 1, 2, 3], 5.0, SegmenterConfig(fps=5.0, min_duration=0.6))
    assert model.state_slope > 0
    x_never = np.zeros(3)  # no action evidence at all
    q_head_says_done = model.done_probabilities(x_never, np.array([0.95, 0.95, 0.95]))
    q_head_says_not = model.done_probabilities(x_never, np.array([0.05, 0.05, 0.05]))
    assert (q_head_says_done > 0.8).all() and (q_head_says_not < 0.2).all()
    tracker = EvidenceTracker(4, 3)
    for row in validation["v0"][0]:
        tracker.update(row)
    first, last = tracker.state_before(0, [1, 2, 3]), tracker.state_before(tracker.frame, [3])
    assert first is not None and first.tolist() == [0.0, 0.0, 0.0]
    assert last is not None and last.tolist() == [0.95]
    assert EvidenceTracker(4, 3).state_before(5, [1]) is None  # no done head: no state


def test_done_evidence_and_detection_evidence_can_look_over_different_windows() -> None:
    # A detector's done evidence looks over 2 s: a 0.6 s burst of a step reaches 0.3 of it, not the step done;
    # its detections are still weighed over the confirmation's 0.6 s, so an alert need not wait 2 s.
    rng = np.random.default_rng(5)
    model = calibrate_evidence({"v": _video([1, 2, 3], None, rng)}, [None, 1, 2, 3], 5.0,
                               SegmenterConfig(fps=5.0, min_duration=0.6), window_s=2.0, detection_window_s=0.6)
    assert (model.window_s, model.detection_window) == (2.0, 0.6)
    assert EvidenceModel.from_dict(model.to_dict()) == model
    reporter = EvidenceReporter(model, [None, 1, 2, 3], 5.0)
    burst = np.array([0.0, 1.0, 0.0, 0.0])
    for _ in range(3):  # step 1 for 0.6 s
        reporter.update(burst)
    assert reporter.tracker.now(reporter.classes)[0] == pytest.approx(0.3)  # 3 of the 10 frames of W
    k = model.step_ids.index(2)
    # y = c * min(1, 0.6 / 0.6); the duration term z = min(1, 0.6 / 2) reads the done window
    assert reporter.real(2, 0.9, 3) == pytest.approx(model.real_probability(k, 0.9, 0.6))
    if model.real_duration_slope > 0:  # a detection lasting the whole done window is more likely real
        assert model.real_probability(k, 0.9, 2.0) > model.real_probability(k, 0.9, 0.6)
    same = calibrate_evidence({"v": _video([1, 2, 3], None, np.random.default_rng(5))}, [None, 1, 2, 3], 5.0,
                              SegmenterConfig(fps=5.0, min_duration=0.6), window_s=2.0)
    assert same.detection_window_s is None and same.detection_window == 2.0  # one window for both, as before
    with pytest.raises(InputError, match=r"detection_window_s = -1.0: expected a number in \(0, 600\]"):
        EvidenceModel.from_dict(model.to_dict() | {"detection_window_s": -1.0})


def test_a_small_split_gets_a_flatter_curve_when_its_videos_disagree() -> None:
    # Three videos: low evidence false, high evidence real, except one video with a real detection at low evidence.
    # Fitting all three without a penalty gives a cliff; leaving that video out shows the cliff is wrong.
    x = np.array([0.5, 0.55, 0.9, 0.95, 0.5, 0.55, 0.9, 0.95, 0.52, 0.55, 0.9, 0.93])
    y = np.array([0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1], dtype=np.float64)
    video = np.repeat(np.arange(3), 4)
    group = np.zeros(12, dtype=np.int64)
    chosen = choose_slope_penalty(x, group, y, 1, video)
    assert chosen > RIDGE
    steep = fit_shrunk_logistic(x, group, y, 1)[1][0]
    assert fit_shrunk_logistic(x, group, y, 1, chosen)[1][0] < steep
    # Nothing to leave out, so nothing shows a steep curve holds: the flattest. RIDGE's cliff made a validation
    # recording scored with a calibration fitted on one other (bench-live's cross-fitting) far surer of "never done"
    # than a test recording scored with one fitted on two or three, and the end report chosen on it followed.
    one_video = np.zeros(12, dtype=np.int64)
    assert choose_slope_penalty(x, group, y, 1, one_video) == max(SLOPE_PENALTIES)


def test_one_validation_video_judges_the_curve_by_leaving_one_step_out() -> None:
    # One video, four steps, each "done" only once its evidence is high: a curve that carries from three steps to the
    # fourth is steep, as two videos would show. The flattest curve given to every one-video split before left a step
    # the detector plainly never saw at P(done) 0.3, so the default checker stayed silent on its skipped step.
    x = np.tile([0.02, 0.05, 0.1, 0.85, 0.9, 0.95], 4)
    y = np.tile([0, 0, 0, 1, 1, 1], 4).astype(np.float64)
    group = np.repeat(np.arange(4), 6)
    one_video = np.zeros(24, dtype=np.int64)
    chosen = choose_slope_penalty(x, group, y, 4, one_video)
    assert chosen < max(SLOPE_PENALTIES)
    assert chosen == choose_slope_penalty(x, group, y, 4, np.repeat([0, 1], 12))  # what two videos would choose
    alpha, slopes, _ = fit_shrunk_logistic(x, group, y, 4, chosen)
    assert 1 / (1 + np.exp(-alpha)) < 0.05  # a step with no evidence: not done
    # Steps that disagree (one "done" at low evidence) pull it flatter, as disagreeing videos do.
    y_mixed = y.copy()
    y_mixed[18:21] = 1
    assert choose_slope_penalty(x, group, y_mixed, 4, one_video) > chosen


def test_one_validation_video_showing_one_step_gets_the_flattest_curve_it_is_warned_of() -> None:
    # Every key-step of the detector has "done?" pairs, shown or not; the steps the video never shows (all "not done",
    # at low evidence) were left out in turn, and on them alone the steepest curve always wins: a slope of ~12, while
    # the warning before training and the docs said this split's curves were the flattest.
    probs, targets = _video([1], None, np.random.default_rng(3))  # one video, step 1 only, of a detector of 3
    segmenter = SegmenterConfig(fps=5.0, min_duration=0.6)
    model = calibrate_evidence({"v": (probs, targets)}, [None, 1, 2, 3], 5.0, segmenter)
    flattest = calibrate_evidence({"v": (probs, targets)}, [None, 1, 2, 3], 5.0, segmenter,
                                  slope_penalty=max(SLOPE_PENALTIES))
    assert model.done_slope == pytest.approx(flattest.done_slope)
    x = np.tile([0.02, 0.1, 0.9, 0.95], 3)
    y = np.r_[0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0].astype(np.float64)  # step 0 shown; steps 1 and 2 never done
    group = np.repeat(np.arange(3), 4)
    assert held_out_units(group, y, np.zeros(12, dtype=np.int64)) is None
    assert choose_slope_penalty(x, group, y, 3, np.zeros(12, dtype=np.int64)) == max(SLOPE_PENALTIES)
    y[6:8] = 1  # step 1 shown too: each step is left out in turn
    units = held_out_units(group, y, np.zeros(12, dtype=np.int64))
    assert units is not None and units.tolist() == group.tolist()


def test_a_step_the_calibration_left_out_is_taken_as_real_live_and_in_a_replay() -> None:
    model = EvidenceModel.default([1], window_s=1.0)  # the detector's step 2 has no curve
    reporter = EvidenceReporter(model, [None, 1, 2], fps=5.0)
    probs = np.eye(3)[[1] * 5 + [2] * 5]
    for row in probs:
        reporter.update(row)
    replayed = recording_evidence(probs, [0, 5], [(1, 0.5, 2), (2, 0.5, 2)], model, [None, 1, 2], 5.0)
    rows = step_rows(model)
    assert [e.real for e in replayed] == [reporter.real(1, 0.5, 2), reporter.real(2, 0.5, 2)]
    assert replayed[0].real == detection_real(model, rows, 1, 0.5 * 0.4, 0.4) < 1.0
    assert replayed[1].real == detection_real(model, rows, 2, 0.5 * 0.4, 0.4) == 1.0


def test_a_done_curve_far_below_its_evidence_is_zero_without_a_warning() -> None:
    # The same coefficients in the done curve (E3) gave the right 0 with numpy's overflow RuntimeWarning on stderr,
    # a line among the JSON log's.
    model = EvidenceModel.default([1], window_s=1.0)
    steep = EvidenceModel.from_dict({**model.to_dict(), "done_intercepts": [-800.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert steep.done_probabilities(np.array([0.5])).tolist() == [0.0]


def test_a_detection_far_below_its_curve_is_unreal_not_an_overflow() -> None:
    # A checkpoint's coefficients are only checked finite: an intercept of -800 raised OverflowError from math.exp
    # at a live stream's first detection.
    model = EvidenceModel.default([1], window_s=1.0)
    steep = EvidenceModel.from_dict({**model.to_dict(), "real_intercepts": [-800.0]})
    assert steep.real_probability(0, 0.5) == 0.0
    assert EvidenceModel.from_dict({**model.to_dict(), "real_intercepts": [800.0]}).real_probability(0, 0.5) == 1.0
