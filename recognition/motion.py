"""Motion inputs: each frame's features beside how they changed over the last ``lag`` frames.

A key-step is a change in one part of a still view (a lid opened, a cup put down). A detector fed the features of
the current frame alone can learn the scene instead of the change: on correct executions the objects already on
the table say which step comes next, so a step done out of order, on a table that looks like another step's, is
recognised as that other step. Giving it the change as well::

    m_t = [x_t, x_t - x_{max(t - lag, 0)}]                                                    (M)

shows what the hand just did wherever it happened, whatever else the table holds. Before ``lag`` frames have passed
the difference is taken to the stream's first frame. Offline (`motion_features`) and live (`MotionHistory`, one
ring of ``lag`` frames per stream) compute the same (M). Measured in docs/recognition.md ("Motion inputs").
"""

from __future__ import annotations

from typing import Final

import numpy as np
import torch

from graphs.common.errors import InputError
from graphs.common.settings_files import as_written

# Longest motion lag a detector may ask for, in frames (a minute at 5 fps): each live stream keeps that many frames.
MAX_MOTION_LAG: Final = 300


def check_motion_lag(value: object, what: str) -> int:
    """``value`` as a motion lag in frames (an integer in ``[0, MAX_MOTION_LAG]``, 0: off), else an `InputError`
    naming ``what`` (the config field that holds it)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_MOTION_LAG:
        raise InputError(f"{what} = {as_written(value)}: must be an integer in [0, {MAX_MOTION_LAG}] (frames; 0: off)")
    return value


def motion_features(features: np.ndarray, lag: int) -> np.ndarray:
    """Formula (M) over a whole recorded sequence.

    Args:
        features: ``(T, F)`` per-frame features of one stream, in time order.
        lag: ``lag`` in frames (``>= 1``).

    Returns:
        ``(T, 2F)`` float32: the features, then their change over ``lag`` frames.
    """
    x = np.asarray(features, dtype=np.float32)
    earlier = x[np.maximum(np.arange(len(x)) - lag, 0)]  # (T, F): x_{max(t - lag, 0)}
    return np.concatenate([x, x - earlier], axis=1)


def model_inputs(features: np.ndarray, lag: int) -> np.ndarray:
    """What a detector reads for one whole recording: its ``(T, F)`` features, or with ``lag > 0`` formula (M),
    ``(T, 2F)``; float32, contiguous."""
    x = motion_features(features, lag) if lag else features
    return np.ascontiguousarray(x, dtype=np.float32)


class MotionHistory:
    """The last ``lag`` feature vectors of each live stream, to compute formula (M) one frame at a time.

    Row ``i`` is stream ``i`` (the rows of a detector's state). A ring of ``lag`` slots per stream holds, at the
    push of frame ``t``, frame ``t - lag`` in slot ``t mod lag``; the first push fills every slot with that frame,
    which is (M)'s rule for ``t < lag``.

    Args:
        lag: ``lag`` in frames (``>= 1``).
        width: ``F``, the width of one frame's features.
        streams: how many streams (rows).
        device: where the ring lives (the detector's device).
    """

    def __init__(self, lag: int, width: int, streams: int = 1, device: torch.device | str = "cpu") -> None:
        if lag < 1:
            raise ValueError(f"motion lag {lag}: must be at least 1 frame")
        self.lag = lag
        self.frames = torch.zeros(streams, lag, width, device=device)  # (K, lag, F)
        self.seen = torch.zeros(streams, dtype=torch.long, device=device)  # frames pushed per stream

    def reset(self, row: int | None = None) -> None:
        """Start a stream over (every stream, or the one at ``row``): its next frame is a first frame."""
        if row is None:
            self.seen.zero_()
        else:
            self.seen[row] = 0

    def push_rows(self, x: torch.Tensor, rows: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Take the newest frame of each of ``m`` streams; return their (M) rows.

        Args:
            x: ``(m, F)`` features, row ``j`` the newest frame of stream ``rows[j]``.
            rows: ``(m,)`` int64 distinct stream rows.
            out: optional ``(m, 2F)`` buffer to write the result into.

        Returns:
            ``(m, 2F)``: the features, then their change over ``lag`` frames.
        """
        x = x.to(self.frames.dtype)
        rows = rows.to(self.frames.device)
        t = self.seen[rows]  # (m,)
        first = t == 0
        if bool(first.any()):
            self.frames[rows[first]] = x[first].unsqueeze(1).expand(-1, self.lag, -1)
        slot = t % self.lag
        earlier = self.frames[rows, slot]  # (m, F): frame t - lag (a copy, read before the slot is overwritten)
        self.frames[rows, slot] = x
        self.seen[rows] += 1
        width = x.shape[1]
        if out is None:
            out = torch.empty(x.shape[0], 2 * width, dtype=x.dtype, device=x.device)
        out[:, :width].copy_(x)
        torch.sub(x, earlier, out=out[:, width:])
        return out
