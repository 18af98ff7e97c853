"""Where in a procedure each key-step usually comes: a prior over the classes given the time since the stream began,
fused with the detector's class probabilities.

People doing one recipe do its steps in roughly the same order at roughly the same pace, so the seconds since the
start say a lot about which step is under way: cracking eggs is rare in the last minutes of a sandwich, plating rare
in the first. A detector trained on short windows cannot know that; the prior can. It is learned from the training
recordings' per-frame labels only:

    prior[b, c] = (n[b, c] + a * m[c]) / (n[b] + a)                                                     (P1)

with ``n[b, c]`` the frames of class ``c`` in time bin ``b`` (bins of ``bin_frames`` frames from the start; frames
past the last bin count in the last), smoothed across neighbouring bins by a triangular kernel, ``m`` the classes'
share over all frames, ``a`` pseudo-frames pulling a bin seen little towards ``m``. Fusion is Bayes' rule with the
detector's output read as ``p(c | x)`` under the training marginal ``m``, the time prior tempered by ``w``::

    q_t(c) ∝ p_t(c) * (prior[b(t), c] / m[c]) ** w                                                      (P2)

``w = 0`` leaves the detector as it is; ``w = 1`` is the full Bayes update, which over-trusts the prior when the
detector's output already carries some of the same information (its GRU sees the stream from the start). It is causal:
``b(t)`` needs only the frame's index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from graphs.common.errors import InputError

DEFAULT_BIN_S: Final = 30.0
DEFAULT_PSEUDO_S: Final = 120.0  # pseudo-seconds of the marginal mixed into each bin (`a` of P1, in seconds)
SMOOTH_BINS: Final = 2  # half-width of the triangular kernel across bins
FLOOR: Final = 1e-4  # no class is ever ruled out by the prior


@dataclass(frozen=True)
class PositionPrior:
    """The prior of (P1) and its fusion (P2).

    Attributes:
        table: ``(bins, C)`` class probabilities per time bin (rows sum to 1).
        marginal: ``(C,)`` the classes' share over all training frames.
        bin_frames: frames per bin.
    """

    table: np.ndarray
    marginal: np.ndarray
    bin_frames: int

    def ratio(self, frames: np.ndarray) -> np.ndarray:
        """``prior[b(t)] / m`` for frame indices ``frames`` (``(T,)`` -> ``(T, C)``)."""
        bins = np.minimum(np.asarray(frames) // self.bin_frames, len(self.table) - 1)
        return self.table[bins] / self.marginal

    def fuse(self, probs: np.ndarray, weight: float, start_frame: int = 0) -> np.ndarray:
        """(P2) over ``(T, C)`` probabilities whose first row is frame ``start_frame`` of the stream."""
        if weight == 0.0:
            return probs
        frames = np.arange(start_frame, start_frame + len(probs))
        q = probs * self.ratio(frames) ** weight
        return (q / q.sum(axis=1, keepdims=True)).astype(probs.dtype, copy=False)

    def to_dict(self) -> dict[str, Any]:
        """Its JSON form."""
        return {"bin_frames": self.bin_frames, "marginal": self.marginal.tolist(), "table": self.table.tolist()}

    @classmethod
    def from_dict(cls, data: object, where: str = "position prior") -> PositionPrior:
        """Read `to_dict`'s form, checked (a damaged file is an error naming ``where``)."""
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected an object")
        try:
            table = np.asarray(data["table"], dtype=np.float64)
            marginal = np.asarray(data["marginal"], dtype=np.float64)
            bin_frames = data["bin_frames"]
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{where}: {e}") from e
        # int() turned 2.5 into 2 and True into 1 unsaid, and raised OverflowError on infinity
        if not isinstance(bin_frames, int) or isinstance(bin_frames, bool):
            raise InputError(f"{where}: bin_frames must be an integer")
        if (table.ndim != 2 or marginal.shape != table.shape[1:] or bin_frames < 1 or len(table) == 0
                or not np.isfinite(table).all() or not np.isfinite(marginal).all()
                or (table <= 0).any() or (marginal <= 0).any()):
            raise InputError(f"{where}: table, marginal or bin_frames malformed")
        return cls(table, marginal, bin_frames)


def fit_position_prior(labels: Sequence[np.ndarray], classes: int, fps: float, bin_s: float = DEFAULT_BIN_S,
                       pseudo_s: float = DEFAULT_PSEUDO_S) -> PositionPrior:
    """(P1) from the per-frame class labels of training recordings.

    Args:
        labels: per recording, ``(T,)`` class per frame.
        classes: number of classes ``C``.
        fps: frames per second of the labels.
        bin_s: seconds per bin.
        pseudo_s: ``a`` of (P1), in seconds.

    Returns:
        The `PositionPrior`.
    """
    bin_frames = max(1, round(bin_s * fps))
    longest = max((len(y) for y in labels), default=0)
    if longest == 0:
        raise InputError("position prior: no labelled frame to learn it from")
    bins = -(-longest // bin_frames)
    counts = np.zeros((bins, classes))
    for y in labels:
        np.add.at(counts, (np.arange(len(y)) // bin_frames, np.asarray(y, dtype=np.int64)), 1.0)
    kernel = np.concatenate([np.arange(1, SMOOTH_BINS + 2), np.arange(SMOOTH_BINS, 0, -1)]).astype(np.float64)
    padded = np.pad(counts, ((SMOOTH_BINS, SMOOTH_BINS), (0, 0)), mode="edge")
    smoothed = np.stack([np.convolve(padded[:, c], kernel, mode="valid") for c in range(classes)], axis=1)
    smoothed *= counts.sum() / max(smoothed.sum(), 1e-12)
    marginal = np.maximum(counts.sum(axis=0) / counts.sum(), FLOOR)
    marginal /= marginal.sum()
    pseudo = pseudo_s * fps
    table = (smoothed + pseudo * marginal) / (smoothed.sum(axis=1, keepdims=True) + pseudo)
    table = np.maximum(table, FLOOR)
    return PositionPrior(table / table.sum(axis=1, keepdims=True), marginal, bin_frames)
