"""The position prior: where in a procedure each step usually comes, learned from labels and fused causally."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphs.common.errors import InputError
from recognition.position_prior import PositionPrior, fit_position_prior


def _recordings() -> list[np.ndarray]:
    """Three recordings of one procedure: step 1 in the first five minutes, step 2 in the next five, then
    background (steps of minutes, as in a recipe at one label a second)."""
    return [np.repeat([1, 2, 0], [300, 300, 150]), np.repeat([1, 2, 0], [250, 350, 50]),
            np.repeat([0, 1, 2], [25, 275, 300])]


def test_the_prior_follows_where_each_step_was_done() -> None:
    prior = fit_position_prior(_recordings(), classes=3, fps=1.0, bin_s=30.0, pseudo_s=10.0)
    early, late = prior.table[0], prior.table[15]
    assert early[1] > early[2] and late[2] > late[1]
    np.testing.assert_allclose(prior.table.sum(axis=1), 1.0)
    assert (prior.table > 0).all()  # never rules a class out


def test_frames_past_the_longest_recording_use_the_last_bin() -> None:
    prior = fit_position_prior(_recordings(), classes=3, fps=1.0, bin_s=30.0)
    np.testing.assert_allclose(prior.ratio(np.array([10_000])), prior.ratio(np.array([len(prior.table) * 30 - 1])))


def test_fusion_moves_an_ambiguous_frame_towards_the_step_of_that_time() -> None:
    prior = fit_position_prior(_recordings(), classes=3, fps=1.0, bin_s=30.0, pseudo_s=10.0)
    ambiguous = np.full((1, 3), 1 / 3, dtype=np.float32)
    at_start = prior.fuse(ambiguous, 1.0, start_frame=10)[0]
    at_end = prior.fuse(ambiguous, 1.0, start_frame=450)[0]
    assert at_start.argmax() == 1 and at_end.argmax() == 2
    np.testing.assert_allclose(at_start.sum(), 1.0, rtol=1e-6)
    # a weight of 0 leaves the detector as it is; the fusion of a stream equals its frames fused one at a time
    np.testing.assert_array_equal(prior.fuse(ambiguous, 0.0), ambiguous)
    probs = np.random.default_rng(0).dirichlet(np.ones(3), size=700).astype(np.float32)
    whole = prior.fuse(probs, 0.5)
    one_by_one = np.concatenate([prior.fuse(probs[t:t + 1], 0.5, start_frame=t) for t in range(len(probs))])
    np.testing.assert_allclose(whole, one_by_one, rtol=1e-6)


def test_the_prior_round_trips_through_json_and_refuses_a_damaged_one() -> None:
    prior = fit_position_prior(_recordings(), classes=3, fps=1.0)
    again = PositionPrior.from_dict(json.loads(json.dumps(prior.to_dict())))
    np.testing.assert_allclose(again.table, prior.table)
    assert again.bin_frames == prior.bin_frames
    damaged = prior.to_dict() | {"table": [[0.5, -0.5, 1.0]]}
    with pytest.raises(InputError, match="position prior"):
        PositionPrior.from_dict(damaged)
    for bins in (float("inf"), 2.5, True):  # OverflowError; read as 2; read as 1
        with pytest.raises(InputError, match="position prior"):
            PositionPrior.from_dict(prior.to_dict() | {"bin_frames": bins})
    with pytest.raises(InputError, match="no labelled frame"):
        fit_position_prior([np.array([], dtype=int)], classes=3, fps=1.0)
