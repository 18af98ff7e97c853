"""Online segmenter: exact ground-truth segments on real data, no steps from flicker, bounded delay."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from graphs.common.errors import InputError
from recognition.segmenter import (
    OnlineSegmenter,
    OnsetEvent,
    SegmenterConfig,
    SegmenterOverrides,
    SegmentEvent,
    run_length_encode,
    segment_labels,
    segment_outputs,
)

FPS = 20.0  # 0.5 s = 10 frames, 0.1 s = 2 frames, 2 s = 40 frames
CFG = SegmenterConfig(fps=FPS, background=None)


def _labels(*runs: tuple[int, int]) -> list[int]:
    return [label for label, n in runs for _ in range(n)]


def _steps(events: list[SegmentEvent]) -> list[int]:
    return [e.step for e in events]


def _frame_by_frame(labels: list[int], config: SegmenterConfig = CFG) -> list[tuple[int, SegmentEvent]]:
    """Events with the index of the frame that produced them (len(labels) for flush)."""
    seg = OnlineSegmenter(config)
    out = [(i, e) for i, label in enumerate(labels) for e in seg.update(label)]
    return out + [(len(labels), e) for e in seg.flush()]


@pytest.fixture(scope="module")
def frames(data_dir: Path) -> dict[str, dict[str, list[int]]]:
    return json.loads((data_dir / "prego-miniroad" / "epic-tent-o_frames.json").read_text())


def test_ground_truth_frames_give_the_ground_truth_segments_exactly(frames: dict, data_dir: Path) -> None:
    config = SegmenterConfig(fps=60.0, background=None)  # defaults, ~60 labels per second
    segments = json.loads((data_dir / "prego-miniroad" / "epic-tent-o_segments.json").read_text())
    assert len(frames) == 15
    for video, record in frames.items():
        gt = np.asarray(record["gt"])
        events = segment_labels(gt, config)
        assert _steps(events) == segments[video]["gt"], video
        runs, lengths = run_length_encode(gt)
        bounds = np.cumsum(lengths)
        assert [e.end_frame for e in events] == bounds.tolist(), video  # boundaries exact too
        assert events[0].start == 0.0 and events[-1].end == pytest.approx(len(gt) / 60.0)


def test_run_by_run_equals_frame_by_frame_on_real_predictions(frames: dict) -> None:
    config = SegmenterConfig(fps=60.0, background=None)
    for video in ("annotations_1", "annotations_17"):  # the most flickering ones
        labels = frames[video]["pred"]
        assert [e for _, e in _frame_by_frame(labels, config)] == segment_labels(labels, config)


def test_flicker_never_becomes_a_step() -> None:
    # a blip shorter than min_run inside a step
    assert _steps(segment_labels(_labels((1, 40), (2, 1), (1, 40)), CFG)) == [1]
    # a flicker cluster (several short runs in a row) inside one step is absorbed
    events = segment_labels(_labels((1, 40), (2, 4), (3, 5), (2, 3), (1, 40)), CFG)
    assert _steps(events) == [1] and (events[0].start_frame, events[0].end_frame) == (0, 92)
    # a flicker cluster at a transition: neither flickering label is a step
    assert _steps(segment_labels(_labels((1, 40), (2, 4), (3, 5), (2, 3), (4, 40)), CFG)) == [1, 4]
    # flicker at the start and the end of the stream
    assert _steps(segment_labels(_labels((5, 3), (6, 4), (1, 40), (2, 4), (3, 4)), CFG)) == [1]


def test_a_clean_short_step_between_stable_ones_is_kept() -> None:
    # 0.25 s of step 2 between two stable steps: a single clean change, accepted (also A B A)
    assert _steps(segment_labels(_labels((1, 40), (2, 5), (3, 40)), CFG)) == [1, 2, 3]
    assert _steps(segment_labels(_labels((1, 40), (2, 5), (1, 40)), CFG)) == [1, 2, 1]
    # ...and at the very start / end of the stream
    assert _steps(segment_labels(_labels((2, 5), (1, 40), (3, 5)), CFG)) == [2, 1, 3]


def test_a_class_confirms_after_its_own_duration() -> None:
    # Two 0.75 s bursts inside step 1: stable at the common 0.5 s, so two steps of their own; when classes 2 and 3
    # must last 1 s each they are two short runs in a row, a flicker cluster, absorbed into step 1.
    labels = _labels((1, 40), (2, 15), (3, 15), (1, 40))
    assert _steps(segment_labels(labels, CFG)) == [1, 2, 3, 1]
    per_class = replace(CFG, class_min_duration=(0.5, 0.5, 1.0, 1.0))
    events = segment_labels(labels, per_class)
    assert _steps(events) == [1] and (events[0].start_frame, events[0].end_frame) == (0, 110)
    # a class's length says when the segment before it is confirmed: once the next run is stable
    labels = _labels((1, 40), (2, 40))
    at = {e.step: i for i, e in _frame_by_frame(labels, per_class)}
    assert at[1] == 40 + per_class.frames(1.0) - 1
    assert at[1] == next(i for i, e in _frame_by_frame(labels) if e.step == 1) + CFG.frames(0.5)
    # a run shorter than its class's length is no step, not even a clean short one; an announcement is withdrawn
    labels = _labels((1, 40), (2, 15), (4, 40))
    assert _steps(segment_labels(labels, CFG)) == [1, 2, 4]
    assert _steps(segment_labels(labels, per_class)) == [1, 4]
    seg = OnlineSegmenter(replace(per_class, onset_frames=5))
    announced = [e for label in labels for e in seg.update_events(label)] + seg.flush_events()
    assert [(e.step, e.withdrawn) for e in announced if isinstance(e, OnsetEvent) and e.step == 2] == [(2, False),
                                                                                                     (2, True)]
    # frame by frame and run by run agree; labels beyond the tuple use min_duration
    for config in (per_class, replace(CFG, class_min_duration=(0.5, 1.0))):
        for labels in (_labels((1, 40), (2, 15), (3, 15), (1, 40)), _labels((3, 12), (2, 25), (4, 30))):
            assert [e for _, e in _frame_by_frame(labels, config)] == segment_labels(labels, config)


def test_per_class_durations_must_fit_the_detector() -> None:
    config = SegmenterConfig(fps=FPS, class_min_duration=(0.5, 1.0))
    OnlineSegmenter(config, class_step_ids=(None, 4))
    with pytest.raises(InputError, match="class_min_duration has 2 entries for a detector of 3 classes"):
        OnlineSegmenter(config, class_step_ids=(None, 4, 5))


def test_background_ends_a_segment_but_is_not_a_step() -> None:
    config = SegmenterConfig(fps=FPS, background=0)
    events = segment_labels(_labels((0, 30), (4, 30), (0, 30), (4, 30), (0, 5), (7, 30)), config)
    assert _steps(events) == [4, 4, 7]
    assert [(e.start_frame, e.end_frame) for e in events] == [(30, 60), (90, 120), (125, 155)]


def test_probability_input_maps_classes_to_step_ids_with_confidence() -> None:
    config = SegmenterConfig(fps=FPS, switch_margin=0.1)
    seg = OnlineSegmenter(config, class_step_ids=(None, 42, 17))
    probs = [np.array([0.1, 0.8, 0.1])] * 20 + [np.array([0.1, 0.3, 0.6])] * 20
    # near-ties stay with the current class (hysteresis): these 0.45/0.5 frames do not start class 2
    probs[10:15] = [np.array([0.05, 0.45, 0.5])] * 5
    events = [e for p in probs for e in seg.update(p)] + seg.flush()
    assert [(e.step, e.class_index) for e in events] == [(42, 1), (17, 2)]
    assert events[0].confidence == pytest.approx((15 * 0.8 + 5 * 0.45) / 20)
    assert events[1].confidence == pytest.approx(0.6)
    assert events[0].end == pytest.approx(1.0)


def test_delay_is_bounded() -> None:
    two_m = CFG.frames(2 * CFG.min_duration)
    # clean input: a segment is out at most 2 * min_duration after its last frame
    # (frame index i emitting it means i + 1 - end_frame frames were seen after the segment)
    labels = _labels((1, 40), (2, 5), (3, 40), (4, 40))
    delays = [i + 1 - e.end_frame for i, e in _frame_by_frame(labels) if i < len(labels)]
    assert delays == [15, 10, 10] and max(delays) <= two_m
    # endless flicker after a step: it is still emitted after max_delay
    flicker = _labels((1, 40)) + [2, 2, 2, 3, 3, 3] * 30
    out = _frame_by_frame(flicker)
    assert out[0][1].step == 1 and out[0][0] + 1 - out[0][1].end_frame == CFG.frames(CFG.max_delay)
    seg = OnlineSegmenter(CFG)
    for label in _labels((1, 40)):
        seg.update(label)
    assert seg.active == (1, 0.0)


@pytest.mark.parametrize("after", [2, 0], ids=["next-step", "background"])
def test_a_step_stays_active_until_it_is_emitted(after: int) -> None:
    # Between a step's last frame and its emission (the run after it becoming stable) the segmenter said no step
    # was in progress: the detector's heartbeats then had the step neither current nor in the history, and the
    # checker's screens offered it as the step to do next for the whole confirmation delay.
    seg = OnlineSegmenter(replace(CFG, background=0))
    for label in _labels((1, 40)):
        assert seg.update(label) == []
    for _ in range(CFG.frames(CFG.min_duration) - 1):  # the run after it, not stable yet: it may be flicker
        assert seg.update(after) == []
        assert seg.active == (1, 0.0)
    [event] = seg.update(after)
    assert event.step == 1 and seg.active == (None if after == 0 else (2, 2.0))


def test_a_clean_short_step_after_background_is_active_until_it_is_emitted() -> None:
    # Background, a short run (shorter than a stable one), background: the short run is a step once the background
    # after it is stable. The segmenter said nothing was in progress meanwhile, so no screen ever showed the step.
    cfg = replace(CFG, background=0)
    seg = OnlineSegmenter(cfg)
    short = CFG.frames(CFG.min_duration) // 2
    for label in _labels((0, 40), (1, short)):
        assert seg.update(label) == [] and seg.active is None  # its own run may still be flicker
    for _ in range(CFG.frames(CFG.min_duration) - 1):
        assert seg.update(0) == []
        assert seg.active == (1, 2.0)
    [event] = seg.update(0)
    assert event.step == 1 and seg.active is None
    # A second short run after it, once over, makes a flicker cluster: no step, so no longer in progress.
    seg = OnlineSegmenter(cfg)
    for label in _labels((0, 40), (1, short), (2, short), (0, 1)):
        seg.update(label)
    assert seg.active is None
    # Nor is a run shorter than its class's own length, which is never a step.
    seg = OnlineSegmenter(replace(cfg, class_min_duration=(0.5, 1.0), max_delay=4.0))
    for label in _labels((0, 40), (1, short), (0, 2)):
        seg.update(label)
    assert seg.active is None


def test_a_lone_short_run_followed_by_flicker_is_emitted_within_max_delay() -> None:
    # A short step, then single-frame flicker (shorter than min_run, so it is no run at all) for 3 s, then a
    # stable step. The short step waited for that stable step: it came out 3.5 s after its last frame, past
    # max_delay (2 s), both after a stable step and at the start of the stream.
    max_delay = CFG.frames(CFG.max_delay)  # 40 frames
    flicker = [3, 4] * 30
    for head in ([(1, 40)], []):
        labels = _labels(*head, (2, 5)) + flicker + _labels((5, 40))
        out = _frame_by_frame(labels)
        assert _steps([e for _, e in out]) == [*(1 for _ in head), 2, 5]
        delays = [i + 1 - e.end_frame for i, e in out if i < len(labels)]
        assert max(delays) <= max_delay, delays
        short = next(e for _, e in out if e.step == 2)
        assert next(i for i, e in out if e is short) + 1 - short.end_frame == max_delay  # emitted at the bound
        assert [e for _, e in out] == segment_labels(labels, CFG)  # run by run: same events


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"fps": 0.0}, "SegmenterConfig.fps = 0.0"),
        ({"min_duration": 0.05, "min_run": 0.1}, "SegmenterConfig.min_duration = 0.05"),
        ({"max_delay": 0.5}, "SegmenterConfig.max_delay = 0.5"),
        ({"switch_margin": 1.5}, "SegmenterConfig.switch_margin = 1.5"),
        ({"min_run": float("nan")}, "SegmenterConfig.min_run = nan"),
        ({"class_min_duration": (0.5, 0.05)}, r"class_min_duration\[1\] = 0.05"),
        ({"class_min_duration": (0.5, float("inf"))}, r"class_min_duration\[1\] = inf"),
        ({"class_min_duration": ()}, r"class_min_duration = \[\]: must be a non-empty list"),
        ({"class_min_duration": (0.5, 1.5)}, r"max_delay = 2.0: must be >= 2 \* the longest class_min_duration"),
        # No upper limit: 1e9 frames a second and an announcement 10^12 frames in were taken.
        ({"fps": 1e9}, r"^SegmenterConfig.fps = 1000000000.0: expected a number in \(0, 1000\]$"),
        ({"onset_frames": 10**12},
         r"^SegmenterConfig.onset_frames = 1000000000000: expected an integer in 0..86400000"),
        ({"threshold": True}, r"^SegmenterConfig.threshold = true: expected a number in \[0, 1\)"),
    ],
)
def test_config_errors_name_the_field(changes: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        SegmenterConfig(**{"fps": 30.0, **changes})


def test_the_segmenter_flags_are_bounded_and_named_as_typed() -> None:
    # --onset-frames 10^12 was refused as "SegmenterConfig.onset_frames", a class the command line never shows.
    with pytest.raises(InputError, match=r"^--onset-frames 1000000000000: must be an integer in 1\.\.86400000$"):
        SegmenterOverrides(onset_frames=10**12)
    with pytest.raises(InputError, match=r"^--min-frames 1000000: 200000 s at the detector's 5 frames a second"):
        SegmenterOverrides(min_frames=10**6).apply(SegmenterConfig(fps=5.0))
    assert SegmenterOverrides(min_frames=216_000).apply(SegmenterConfig(fps=5.0)).min_duration == 43_200


def test_bad_frames_are_refused() -> None:
    seg = OnlineSegmenter(SegmenterConfig(fps=10.0), class_step_ids=(None, 1))
    with pytest.raises(InputError, match="non-finite"):
        seg.update(np.array([np.nan, 1.0]))
    with pytest.raises(InputError, match="label 5 is not a class"):
        seg.update(5)


def test_a_label_given_as_a_0d_array_or_tensor_is_a_label() -> None:
    # probs.argmax() is a 0-d tensor/array: it was read as a one-class probability vector, i.e. label 0 forever.
    for label in (np.int64(3), np.array(3), torch.tensor(3)):
        seg = OnlineSegmenter(CFG)
        events = [e for _ in range(20) for e in seg.update(label)] + seg.flush()
        assert _steps(events) == [3], type(label)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (
            np.full((4, 3), 1 / 3),
            r"expected one frame's class probabilities \(C,\) or an integer label, got .*\(4, 3\)",
        ),
        (np.float64(0.7), "expected one frame's class probabilities"),
        (np.array([0.1, 0.2, 0.3, 0.4]), "frame 0 has 4 probabilities for a detector of 3 classes"),
    ],
)
def test_what_is_not_one_frames_probabilities_is_refused(frame: np.ndarray, message: str) -> None:
    # A (T, C) batch used to be flattened and its argmax taken over all of it; a wrong class count went unseen.
    seg = OnlineSegmenter(SegmenterConfig(fps=10.0), class_step_ids=(None, 1, 2))
    with pytest.raises(InputError, match=message):
        seg.update(frame)
    seg.update(np.array([[0.2, 0.7, 0.1]]))  # (1, C), as FastStepper.step returns it, is one frame


# -- provisional key-steps (onset_frames) and unsure frames (threshold) -------------------------------------------
ONSET = SegmenterConfig(fps=FPS, background=0, onset_frames=4)  # a step is announced after 0.2 s


def _onsets(labels: list[int], config: SegmenterConfig = ONSET) -> list[tuple[int, SegmentEvent | OnsetEvent]]:
    """Every event (segments, onsets, withdrawals) with the index of the frame that produced it."""
    seg = OnlineSegmenter(config)
    out = [(i, e) for i, label in enumerate(labels) for e in seg.update_events(label)]
    return out + [(len(labels), e) for e in seg.flush_events()]


def test_a_step_is_announced_after_onset_frames_long_before_its_segment_is_confirmed() -> None:
    labels = _labels((0, 20), (3, 60), (0, 20), (5, 60), (0, 20))
    events = _onsets(labels)
    onsets = [(i, e) for i, e in events if isinstance(e, OnsetEvent) and not e.repeated]
    segments = [(i, e) for i, e in events if isinstance(e, SegmentEvent)]
    assert [(i, e.step, e.withdrawn) for i, e in onsets] == [(23, 3, False), (103, 5, False)]
    # Once stable, each run is announced again every 0.5 s (10 frames) while it lasts, as the same run.
    again = [(i, e.step, e.start_frame, e.before) for i, e in events if isinstance(e, OnsetEvent) and e.repeated]
    assert again == [(i, 3, 20, ()) for i in (33, 43, 53, 63, 73)] + [(i, 5, 100, ()) for i in range(113, 154, 10)]
    assert onsets[0][1].start == 1.0 and onsets[0][1].start_frame == 20 and onsets[0][1].frame == 23
    # Confirmed once the background after them is stable: 66 frames (3.3 s) after the announcement.
    assert [(i, e.step) for i, e in segments] == [(89, 3), (169, 5)]
    assert onsets[1][1].before == ()  # step 3 was confirmed before step 5 began


def test_an_announcement_names_the_open_step_it_follows() -> None:
    # Step 5 follows step 3 directly: when 5 is announced, 3 is still waiting for 5 to become stable.
    events = _onsets(_labels((3, 40), (5, 40)))
    onsets = [e for _, e in events if isinstance(e, OnsetEvent)]
    assert [(e.step, e.before, e.repeated) for e in onsets] == [
        (3, (), False), *[(3, (), True)] * 3, (5, (3,), False), *[(5, (), True)] * 3]  # 3 is confirmed when 5 is stable
    assert [e.step for _, e in events if isinstance(e, SegmentEvent)] == [3, 5]


def test_flicker_that_was_announced_is_withdrawn_and_never_confirmed() -> None:
    config = SegmenterConfig(fps=FPS, background=0, onset_frames=1)  # announce at the first frame
    labels = _labels((3, 40), (7, 1), (3, 40))  # one frame of 7 inside step 3: flicker
    events = _onsets(labels, config)
    seven = [(i, e.withdrawn) for i, e in events if isinstance(e, OnsetEvent) and e.step == 7]
    assert seven == [(40, False), (41, True)]  # withdrawn as soon as the flicker is absorbed
    assert [e.step for _, e in events if isinstance(e, SegmentEvent)] == [3]


def test_an_announced_run_left_unconfirmed_at_the_end_of_the_stream_is_withdrawn() -> None:
    config = SegmenterConfig(fps=FPS, background=0, onset_frames=1, min_run=0.1)
    events = _onsets(_labels((3, 40), (7, 1)), config)  # one frame of 7 at the very end: flicker, never a step
    assert [(e.step, e.withdrawn) for _, e in events if isinstance(e, OnsetEvent) and not e.repeated] == [
        (3, False), (7, False), (7, True)]


def test_a_stable_run_is_announced_again_while_it_lasts_and_flicker_never() -> None:
    config = SegmenterConfig(fps=FPS, background=0, onset_frames=1)
    events = _onsets(_labels((3, 40), (7, 1), (3, 40), (0, 20)), config)
    again = [(i, e.step, e.start_frame) for i, e in events if isinstance(e, OnsetEvent) and e.repeated]
    # Step 3's one run (resumed after the flicker) every 10 frames; the frame of 7 never; nothing after step 3 ends.
    assert again == [(i, 3, 0) for i in (10, 20, 30, 51, 61, 71)]


def test_onsets_change_no_confirmed_segment() -> None:
    rng = np.random.default_rng(3)
    labels = rng.choice(4, size=3000, p=[0.4, 0.2, 0.2, 0.2])
    labels = np.repeat(labels, rng.integers(1, 15, size=labels.size))  # runs from flicker to stable
    plain = segment_labels(labels, SegmenterConfig(fps=FPS, background=0))
    for onset_frames in (1, 3, 10, 30):
        config = SegmenterConfig(fps=FPS, background=0, onset_frames=onset_frames)
        seg = OnlineSegmenter(config)
        events = [e for label in labels.tolist() for e in seg.update_events(label)] + seg.flush_events()
        assert [e for e in events if isinstance(e, SegmentEvent)] == plain
        announced = [e for e in events if isinstance(e, OnsetEvent) and not e.withdrawn]
        withdrawn = [e for e in events if isinstance(e, OnsetEvent) and e.withdrawn]
        # Every announcement is confirmed by a segment of its run or withdrawn, never both.
        confirmed = {(e.class_index, e.start_frame) for e in plain}
        for onset in announced:
            kept = (onset.class_index, onset.start_frame) in confirmed or any(
                s.class_index == onset.class_index and s.start_frame <= onset.start_frame < s.end_frame for s in plain
            )
            assert kept != any(w.start_frame == onset.start_frame and w.step == onset.step for w in withdrawn)


def test_unsure_frames_below_the_threshold_are_background() -> None:
    # Step 1 at p = 0.45 (most likely, but unsure) for a second, then surely.
    unsure = np.array([0.3, 0.45, 0.25])
    sure = np.array([0.05, 0.9, 0.05])
    frames = [unsure] * 20 + [sure] * 20
    plain = OnlineSegmenter(SegmenterConfig(fps=FPS, background=0, switch_margin=0.0))
    picky = OnlineSegmenter(SegmenterConfig(fps=FPS, background=0, switch_margin=0.0, threshold=0.5))
    a = [e for f in frames for e in plain.update(f)] + plain.flush()
    b = [e for f in frames for e in picky.update(f)] + picky.flush()
    assert [(e.step, e.start) for e in a] == [(1, 0.0)]
    assert [(e.step, e.start) for e in b] == [(1, 1.0)]


def test_a_hand_over_between_two_steps_near_the_threshold_is_read_as_the_next_step_not_background() -> None:
    # Step 1 sure, then handing over: step 2 likeliest at 0.55, above the threshold, step 1 at 0.45 within the
    # hysteresis margin. Hysteresis kept step 1, the threshold then read its 0.45 as unsure: a second of neither.
    sure = np.array([0.05, 0.9, 0.05])
    handing_over = np.array([0.0, 0.45, 0.55])
    frames = [sure] * 20 + [handing_over] * 20
    segmenter = OnlineSegmenter(SegmenterConfig(fps=FPS, background=0, switch_margin=0.1, threshold=0.5))
    events = [e for f in frames for e in segmenter.update(f)] + segmenter.flush()
    assert [(e.step, e.start, e.end) for e in events] == [(1, 0.0, 1.0), (2, 1.0, 2.0)]
    # Without the threshold the same margin keeps step 1 through the near-tie: hysteresis as before.
    plain = OnlineSegmenter(SegmenterConfig(fps=FPS, background=0, switch_margin=0.1))
    assert [(e.step, e.start, e.end) for e in [e for f in frames for e in plain.update(f)] + plain.flush()] == [
        (1, 0.0, 2.0)]


def test_a_threshold_needs_a_background_class() -> None:
    with pytest.raises(InputError, match="threshold"):
        OnlineSegmenter(SegmenterConfig(fps=FPS, background=None, threshold=0.5))
    with pytest.raises(InputError, match="onset_frames"):
        SegmenterConfig(fps=FPS, onset_frames=-1)


def test_command_line_overrides_change_only_what_they_name_and_stay_valid() -> None:
    from recognition.segmenter import SegmenterOverrides

    base = SegmenterConfig(fps=FPS, background=0, min_duration=0.5, max_delay=2.0)
    longer = SegmenterOverrides(min_frames=40).apply(base)  # 2 s at 20 fps: max_delay widens to keep short steps
    assert (longer.min_duration, longer.max_delay, longer.threshold) == (2.0, 4.0, base.threshold)
    assert SegmenterOverrides(threshold=0.6, onset_frames=3).apply(base).onset_frames == 3
    assert SegmenterOverrides().apply(base) == base
    # A detector of long steps confirms each class after its own length (recognition-train's choice): --min-frames
    # sets that one too, or a shorter --min-frames changed nothing.
    per_class = SegmenterConfig(fps=1.0, min_duration=6.0, min_run=3.0, max_delay=12.0, class_min_duration=(6.0,) * 4,
                                onset_frames=3)
    shorter = SegmenterOverrides(min_frames=2).apply(per_class)
    assert (shorter.min_duration, shorter.min_run, shorter.class_min_duration, shorter.onset_frames) == (
        2.0, 2.0, (2.0,) * 4, 2)
    with pytest.raises(InputError, match="--min-frames 0"):
        SegmenterOverrides(min_frames=0)
    with pytest.raises(InputError, match="--threshold"):
        SegmenterOverrides(threshold=0.5).apply(SegmenterConfig(fps=FPS, background=None))


@pytest.mark.parametrize("config", [SegmenterConfig(fps=10.0), SegmenterConfig(fps=10.0, threshold=0.5),
                                    SegmenterConfig(fps=10.0, switch_margin=0.3, min_duration=1.0, max_delay=3.0)])
def test_a_recording_fed_at_once_gives_the_segments_of_its_frames_fed_one_by_one(config: SegmenterConfig) -> None:
    # Offline replays (the evidence calibration) checked and ranked every frame in Python; at once, only the
    # hysteresis goes frame by frame.
    rng = np.random.default_rng(0)
    labels = np.repeat(rng.integers(0, 5, 60), rng.integers(1, 25, 60))  # runs of every length, flicker included
    probs = rng.dirichlet(np.ones(5) * 0.5, len(labels)) * 0.5
    probs[np.arange(len(labels)), labels] += 0.5
    one_by_one = OnlineSegmenter(config)
    expected = [e for p in probs for e in one_by_one.update(p)] + one_by_one.flush()
    at_once = OnlineSegmenter(config)
    assert at_once.update_frames(probs) + at_once.flush() == expected and len(expected) > 10
    probs[7, 2] = np.nan
    with pytest.raises(InputError, match="segmenter: frame 7 has empty or non-finite probabilities"):
        OnlineSegmenter(config).update_frames(probs)


def test_label_input_is_segmented_as_frame_by_frame() -> None:
    """One-hot rows (the calibration's and the confirmation's label input) are fed run by run: the same segments as
    feeding them frame by frame."""
    labels = np.random.default_rng(3).choice(4, size=400, p=[0.1, 0.5, 0.3, 0.1])
    labels = np.repeat(labels, np.random.default_rng(4).integers(1, 9, size=400))
    config = SegmenterConfig(fps=10.0, min_duration=0.5)
    onehot = np.eye(4)[labels]
    almost = 0.999 * onehot + 0.00025  # not one-hot: fed frame by frame
    fast, slow = segment_outputs(onehot, config, [None, 1, 2, 3]), segment_outputs(almost, config, [None, 1, 2, 3])
    assert [(e.step, e.start_frame, e.end_frame) for e in fast] == [(e.step, e.start_frame, e.end_frame) for e in slow]
    assert len(fast) > 20


@pytest.mark.parametrize("config", [
    SegmenterConfig(fps=5), SegmenterConfig(fps=30), SegmenterConfig(fps=30, min_run=0),
    SegmenterConfig(fps=30, class_min_duration=(0.5, 1.0, 0.3)),
], ids=["5fps", "30fps", "no-min-run", "per-class"])
def test_the_shortest_step_is_the_shortest_recording_the_segmenter_confirms_a_step_in(config: SegmenterConfig) -> None:
    # The verdict of a recording that recognised nothing says it was too short for any step when it was: the number
    # it gives must be the segmenter's own, one frame fewer confirming nothing, whichever step.
    ids = [None, 1, 2]

    def confirms(cls: int, frames: int) -> bool:
        seg = OnlineSegmenter(config, ids)
        probs = np.eye(len(ids), dtype=np.float32)[cls]
        events = [e for _ in range(frames) for e in seg.update(probs)]
        return bool(events + seg.flush())

    shortest = config.shortest_step(ids)
    assert any(confirms(cls, shortest) for cls in (1, 2))
    assert not any(confirms(cls, shortest - 1) for cls in (1, 2) if shortest > 1)
