"""Motion inputs: the formula on a hand-computed case, and the live steppers computing what training computed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from graphs.common.errors import InputError
from recognition.checkpoint import load_detector, save_detector
from recognition.model import FastStepper, MiniROAD, MiniROADConfig, ModelStepper
from recognition.motion import MotionHistory, motion_features
from recognition.train import DetectorTrainConfig, predict_video

MOVING = MiniROADConfig(input_dim=6, embed_dim=12, hidden_dim=10, num_classes=4, dropout=0.0, done_head=True,
                        motion_lag=3)


def test_motion_is_the_change_over_lag_frames_and_to_the_first_frame_before_that() -> None:
    x = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]], np.float32)
    m = motion_features(x, 2)
    assert m[:, 0].tolist() == [1, 2, 4, 8, 16]  # the features themselves first
    assert m[:, 1].tolist() == [0, 1, 3, 6, 12]  # x_t - x_{t-2}; x_t - x_0 before two frames have passed


def test_a_live_history_of_interleaved_streams_gives_each_its_own_offline_motion() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(9, 4)).astype(np.float32), rng.normal(size=(6, 4)).astype(np.float32)
    history = MotionHistory(lag=3, width=4, streams=2)
    got_a, got_b = [], []
    for t in range(9):  # stream 1 starts three frames late and ends early: rows advance independently
        if 3 <= t < 9:
            pair = history.push_rows(torch.from_numpy(np.stack([a[t], b[t - 3]])), torch.tensor([0, 1]))
            got_a.append(pair[0].numpy())
            got_b.append(pair[1].numpy())
        else:
            got_a.append(history.push_rows(torch.from_numpy(a[t : t + 1]), torch.tensor([0]))[0].numpy())
    np.testing.assert_allclose(np.stack(got_a), motion_features(a, 3), atol=1e-6)
    np.testing.assert_allclose(np.stack(got_b), motion_features(b, 3), atol=1e-6)
    history.reset(1)  # a stream started over differences to its new first frame, not to the old stream's frames
    again = history.push_rows(torch.from_numpy(b[:1] + 5.0), torch.tensor([1]))[0].numpy()
    assert np.allclose(again[4:], 0.0)


@pytest.mark.parametrize("stepper", ["fast", "model"])
def test_live_stepping_of_raw_features_matches_the_batch_forward_over_the_video(stepper: str) -> None:
    torch.manual_seed(0)
    model = MiniROAD(MOVING).eval()
    features = np.random.default_rng(1).normal(size=(20, MOVING.input_dim)).astype(np.float32)
    expected = predict_video(model, features)  # (T, 2C): motion inputs computed over the whole video
    live = FastStepper(model) if stepper == "fast" else ModelStepper(model)
    stepped = np.stack([live.step(torch.from_numpy(features[t])).clone()[0].numpy() for t in range(20)])
    np.testing.assert_allclose(stepped, expected, atol=1e-5)


def test_the_models_input_is_twice_the_features_and_a_checkpoint_keeps_the_lag(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MiniROAD(MOVING)
    assert model.embed[0].in_features == 2 * MOVING.input_dim
    with pytest.raises(InputError, match="input width 6 does not match the detector's 12"):
        model(torch.zeros(1, 5, MOVING.input_dim))  # features without their motion
    save_detector(tmp_path / "d.pt", model, ["bg", "a", "b", "c"], [None, 1, 2, 3], "synthetic", 5.0, {})
    loaded, checkpoint = load_detector(tmp_path / "d.pt")
    assert loaded.config.motion_lag == 3
    checkpoint.check_features(MOVING.input_dim)  # the extractor still feeds F-wide features


@pytest.mark.parametrize("value", [-1, 2.5, True, 10**6])
def test_a_bad_motion_lag_is_refused_with_its_value(value: object) -> None:
    with pytest.raises(InputError, match=r"MiniROADConfig\.motion_lag = "):
        MiniROADConfig(motion_lag=value)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"DetectorTrainConfig\.motion_lag = "):
        DetectorTrainConfig(motion_lag=value)  # type: ignore[arg-type]
