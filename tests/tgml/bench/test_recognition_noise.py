"""Simulated recognition noise on training videos (tgml/bench/prego/recognition_noise.py): what the probabilistic
checker's PREGO settings are chosen on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphs.common.errors import InputError
from recognition.segmenter import SegmenterConfig, segment_labels
from tgml.bench.prego.recognition_noise import (
    NOISE_LEVELS,
    LabelNoise,
    TimedVideo,
    annotation_labels,
    load_timed_videos,
    mistake_streams,
    noisy_labels,
)

FPS = 10.0
VOCAB = (0, 1, 2, 3, 4, 5)


def _video() -> TimedVideo:
    # 0 for 2 s, 1 for 3 s overlapped by 2 after 2 s (cut there), a 1 s gap, then 3 for 4 s.
    return TimedVideo("v", (0, 1, 2, 3), (0.0, 2.0, 4.0, 8.0), (2.0, 5.0, 7.0, 12.0))


def test_a_video_becomes_labels_cut_at_the_next_start_without_gaps() -> None:
    labels = annotation_labels(_video(), FPS)
    assert labels.tolist() == [0] * 20 + [1] * 20 + [2] * 30 + [3] * 40


def test_no_noise_changes_nothing_and_a_seed_repeats_itself() -> None:
    labels = annotation_labels(_video(), FPS)
    quiet = LabelNoise("none", confuse=0.0, flicker=0.0, burst_s=1.0, lag_s=0.0)
    assert noisy_labels(labels, quiet, VOCAB, FPS, np.random.default_rng(0)).tolist() == labels.tolist()
    heavy = NOISE_LEVELS[-1]
    first = noisy_labels(labels, heavy, VOCAB, FPS, np.random.default_rng(3))
    assert first.tolist() == noisy_labels(labels, heavy, VOCAB, FPS, np.random.default_rng(3)).tolist()


def test_confusion_turns_a_whole_segment_into_one_other_step() -> None:
    labels = annotation_labels(_video(), FPS)
    confused = noisy_labels(labels, LabelNoise("c", 1.0, 0.0, 1.0, 0.0), VOCAB, FPS, np.random.default_rng(1))
    segments = np.split(confused, np.cumsum([20, 20, 30])[:3])
    for segment, step in zip(segments, (0, 1, 2, 3), strict=True):
        assert len(set(segment.tolist())) == 1 and segment[0] != step


def test_lag_carries_the_previous_label_into_the_next_segment() -> None:
    labels = np.array([0] * 50 + [1] * 50)
    late = noisy_labels(labels, LabelNoise("lag", 0.0, 0.0, 1.0, lag_s=2.0), VOCAB, FPS, np.random.default_rng(2))
    first_one = int(np.argmax(late == 1)) if (late == 1).any() else len(late)
    assert first_one > 50 and set(late[:first_one].tolist()) == {0} and set(late[first_one:].tolist()) == {1}


def test_flicker_shows_one_partner_in_bursts_inside_each_segment() -> None:
    labels = np.array([2] * 3000 + [4] * 3000)
    noise = LabelNoise("f", 0.0, flicker=0.3, burst_s=1.0, lag_s=0.0)
    out = noisy_labels(labels, noise, VOCAB, FPS, np.random.default_rng(4))
    for part in (out[:3000], out[3000:]):
        values, counts = np.unique(part, return_counts=True)
        assert len(values) == 2  # the step and its one partner: the prediction alternates between two steps
        assert 0.2 < counts.min() / len(part) < 0.4


def test_bad_noise_levels_are_refused() -> None:
    with pytest.raises(InputError, match="flicker"):
        LabelNoise("x", 0.1, 1.0, 1.0, 0.0)
    with pytest.raises(InputError, match="burst_s"):
        LabelNoise("x", 0.1, 0.1, 0.0, 0.0)


def test_items_end_with_one_mistaken_step_after_a_real_prefix() -> None:
    video = TimedVideo("v", (0, 1, 2, 3, 4), (0, 2, 4, 6, 8), (2, 4, 6, 8, 10))
    items = mistake_streams([video], VOCAB, FPS, per_video=20, seed=0)
    assert len(items) == 20
    clean = annotation_labels(video, FPS)
    for item in items:
        events = segment_labels(item, SegmenterConfig(fps=FPS, background=None))
        steps = [e.step for e in events]
        prefix, mistake = steps[:-1], steps[-1]
        assert prefix == [0, 1, 2, 3, 4][: len(prefix)] and mistake not in prefix
        assert item[: 20 * len(prefix)].tolist() == clean[: 20 * len(prefix)].tolist()
        assert len(item) == 20 * (len(prefix) + 1)  # cut right after the mistake, which lasts as long as its slot


def test_real_training_videos_read_with_their_times(data_dir: Path, tmp_path: Path) -> None:
    videos = load_timed_videos(data_dir / "epic-tent-o" / "train.json", "epic-tent", 0.001)
    assert len(videos) == 13 and all(len(v.steps) == len(v.start_s) == len(v.end_s) for v in videos)
    minutes = sum(len(annotation_labels(v, 60.0)) for v in videos) / 60.0 / 60.0
    assert 60 < minutes < 200  # about two hours of tent pitching
    bad = json.loads((data_dir / "epic-tent-o" / "train.json").read_text())
    first = next(iter(bad["annotations"]))
    bad["annotations"][first]["segments"][2]["end_time"] = "soon"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError, match=rf"video '{first}': segments\[2\].end_time = \"soon\" is not a number"):
        load_timed_videos(path, "epic-tent", 0.001)
