"""MiniROAD: the live step reproduces the training forward; shapes, loss and config checks."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from graphs.common.errors import InputError
from graphs.common.settings_files import as_written
from recognition.model import IGNORE_INDEX, FastStepper, MiniROAD, MiniROADConfig, done_targets, output_probabilities

SMALL = MiniROADConfig(input_dim=40, embed_dim=24, hidden_dim=16, num_classes=6, dropout=0.2)


def _model(seed: int = 0) -> MiniROAD:
    torch.manual_seed(seed)
    return MiniROAD(SMALL).eval()


def test_stepping_frame_by_frame_matches_the_batch_forward() -> None:
    model = _model()
    x = torch.randn(3, 60, SMALL.input_dim)
    with torch.inference_mode():
        logits, loss = model(x)
        expected = torch.softmax(logits, dim=-1)  # (B, T, C)
        state = model.init_state(3)
        stepped = []
        for t in range(x.shape[1]):
            probs, state = model.step(x[:, t], state)
            stepped.append(probs)
    assert loss is None
    torch.testing.assert_close(torch.stack(stepped, dim=1), expected, atol=1e-5, rtol=0)


def test_chunks_carry_the_state_like_single_frames() -> None:
    model = _model(1)
    x = torch.randn(2, 30, SMALL.input_dim)
    with torch.inference_mode():
        expected = torch.softmax(model(x)[0], dim=-1)
        state = model.init_state(2)
        parts = []
        for start in range(0, 30, 7):  # uneven chunks, the last one shorter
            probs, state = model.step(x[:, start : start + 7], state, return_all=True)
            parts.append(probs)
        last, _ = model.step(x[:, 28:30], model.step(x[:, :28], model.init_state(2))[1])
    torch.testing.assert_close(torch.cat(parts, dim=1), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(last, expected[:, -1], atol=1e-5, rtol=0)


def test_fast_stepper_matches_the_batch_forward_and_resets() -> None:
    model = _model(2)
    x = torch.randn(1, 40, SMALL.input_dim)
    with torch.inference_mode():
        expected = torch.softmax(model(x)[0][0], dim=-1)
    stepper = FastStepper(model)
    for _ in range(2):  # a second stream after reset() starts from zeros again
        got = torch.cat([stepper.step(x[0, t]).clone() for t in range(40)])
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
        stepper.reset()


def test_training_mode_applies_dropout_and_eval_does_not() -> None:
    model = _model(3)
    x = torch.randn(1, 10, SMALL.input_dim)
    model.train()
    a, b = model(x)[0], model(x)[0]
    assert not torch.allclose(a, b)
    model.eval()
    torch.testing.assert_close(model(x)[0], model(x)[0])


def test_loss_accepts_indices_or_one_hot_and_skips_padding() -> None:
    model = _model(4)
    x = torch.randn(2, 12, SMALL.input_dim)
    y = torch.randint(0, SMALL.num_classes, (2, 12))
    _, loss_idx = model(x, y)
    _, loss_hot = model(x, torch.nn.functional.one_hot(y, SMALL.num_classes))
    torch.testing.assert_close(loss_idx, loss_hot)
    # Padding frames (IGNORE_INDEX / all-zero rows) must not change the loss of the real frames.
    y_pad = y.clone()
    y_pad[:, 8:] = IGNORE_INDEX
    hot_pad = torch.nn.functional.one_hot(y, SMALL.num_classes).float()
    hot_pad[:, 8:] = 0
    _, ref = model(x[:, :8], y[:, :8])
    torch.testing.assert_close(model(x, y_pad)[1], ref)
    torch.testing.assert_close(model(x, hot_pad)[1], ref)
    loss_idx.backward()
    assert model.embed[0].weight.grad is not None


def test_wrong_feature_width_is_refused() -> None:
    model = _model()
    with pytest.raises(InputError, match="feature width 41 does not match the detector's input_dim 40"):
        model.step(torch.randn(1, 41), model.init_state())
    with pytest.raises(InputError, match="input_dim 40"):
        FastStepper(model).step(torch.randn(41))


@pytest.mark.parametrize(
    ("field", "value"),
    [("input_dim", 0), ("embed_dim", -1), ("hidden_dim", 2.5), ("num_classes", 1), ("dropout", 1.0)],
)
def test_config_errors_name_the_field_and_value(field: str, value: object) -> None:
    with pytest.raises(InputError, match=rf"MiniROADConfig\.{field} = {re.escape(as_written(value))}"):
        MiniROADConfig(**{field: value})  # type: ignore[arg-type]  # ill-typed on purpose: the config's checks are tested


def test_published_defaults() -> None:
    cfg = MiniROADConfig()
    assert (cfg.input_dim, cfg.embed_dim, cfg.hidden_dim, cfg.dropout) == (4096, 2048, 1024, 0.2)


def test_int8_stepper_stays_close_to_fp32() -> None:
    torch.manual_seed(5)
    model = MiniROAD(MiniROADConfig(input_dim=256, embed_dim=128, hidden_dim=64, num_classes=6)).eval()
    x = torch.randn(1, 50, 256)
    with torch.inference_mode():
        expected = torch.softmax(model(x)[0][0], dim=-1)
    stepper = FastStepper(model, precision="int8")
    got = torch.cat([stepper.step(x[0, t]).clone() for t in range(50)])
    torch.testing.assert_close(got, expected, atol=1e-2, rtol=0)
    assert (got.argmax(1) == expected.argmax(1)).float().mean() > 0.95
    with pytest.raises(InputError, match='FastStepper precision = "fp16"'):
        FastStepper(model, precision="fp16")


def test_streams_stepped_together_keep_their_own_state() -> None:
    # One detector process serves several cameras: at each tick the streams with a frame are stepped at once, on
    # their rows of one (K, H) state, and each must see exactly what stepping it alone gives.
    model = _model(6)
    x = torch.randn(3, 30, SMALL.input_dim)
    with torch.inference_mode():
        expected = torch.softmax(model(x)[0], dim=-1)  # (3, 30, C): each stream alone
    stepper = FastStepper(model, streams=3)
    seen = [0, 0, 0]
    got: list[list[torch.Tensor]] = [[], [], []]
    for tick in range(60):
        rows = [s for s in range(3) if seen[s] < 30 and (tick + s) % (s + 1) == 0]  # streams at different rates
        if not rows:
            continue
        frames = torch.stack([x[s, seen[s]] for s in rows])
        probs = stepper.step_rows(frames, torch.tensor(rows)).clone()
        for j, s in enumerate(rows):
            got[s].append(probs[j])
            seen[s] += 1
    for s in range(3):
        torch.testing.assert_close(torch.stack(got[s]), expected[s, : seen[s]], atol=1e-5, rtol=0)
    assert min(seen) > 10
    stepper.reset(1)
    assert stepper.state[1].abs().sum() == 0 and stepper.state[0].abs().sum() > 0


DONE = MiniROADConfig(input_dim=40, embed_dim=24, hidden_dim=16, num_classes=4, dropout=0.0, done_head=True)


def test_done_targets_switch_on_when_a_steps_first_run_ends() -> None:
    # Background, step 1 (frames 2-3), background, step 2 (5-6), step 3 (7), step 1 again (8-9).
    labels = [0, 0, 1, 1, 0, 2, 2, 3, 1, 1, 0]
    done = done_targets(np.eye(4)[labels])
    assert done[:, 0].sum() == 0  # background is no key-step
    assert done[:, 1].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]  # from frame 4, after its first run
    assert done[:, 2].tolist() == [0] * 7 + [1] * 4
    assert done[:, 3].tolist() == [0] * 8 + [1] * 3


def test_a_done_head_adds_one_sigmoid_per_class_everywhere_the_model_runs() -> None:
    torch.manual_seed(3)
    model = MiniROAD(DONE).eval()
    assert DONE.outputs == 8
    x = torch.randn(1, 25, DONE.input_dim)
    with torch.inference_mode():
        logits, _ = model(x)
        expected = output_probabilities(logits, 4)[0]  # (T, 8)
        state = model.init_state()
        stepped = []
        for t in range(25):
            probs, state = model.step(x[:, t], state)
            stepped.append(probs)
    assert logits.shape == (1, 25, 8)
    torch.testing.assert_close(expected[:, :4].sum(-1), torch.ones(25))  # a softmax over the classes ...
    assert not torch.allclose(expected[:, 4:].sum(-1), torch.ones(25))  # ... and an independent sigmoid per class
    stepper = FastStepper(model)
    got = torch.cat([stepper.step(x[0, t]).clone() for t in range(25)])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.cat(stepped), expected, atol=1e-5, rtol=0)


def test_the_loss_trains_the_done_states_too() -> None:
    torch.manual_seed(4)
    model = MiniROAD(DONE)
    x = torch.randn(2, 12, DONE.input_dim)
    classes = torch.eye(4)[torch.randint(0, 4, (2, 12))]
    done = torch.zeros(2, 12, 4)
    _, plain = model(x, classes)
    _, both = model(x, torch.cat([classes, done], dim=-1))
    assert plain is not None and both is not None and float(both.detach()) > float(plain.detach())
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(60):  # the done logits learn their (all-zero) targets
        _, loss = model(x, torch.cat([classes, done], dim=-1))
        assert loss is not None
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.inference_mode():
        assert float(torch.sigmoid(model(x)[0][..., 4:]).max()) < 0.2
