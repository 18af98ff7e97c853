"""Training-time help for a detector that learns from a few videos: augmentation of feature windows and loss weights.

Each function is one idea, applied by `recognition.train.train_detector` when its ``[augment]`` / ``[train]`` setting
is on (see docs/recognition.md for what each measurably did on camera-like footage):

- `order_positions`: reassemble a training video from its key-step segments in a random order for an epoch: a
  recurrent detector trained on correct executions otherwise learns their order and fails to see a step done out of
  order, which is exactly the mistake to catch;
- `speed_positions`: play each training video at a random speed for an epoch (a step done faster or slower);
- `perturb_windows`: Gaussian feature noise, scaled per dimension, and mixing in a background frame of another
  moment (another scene behind the same action);
- `blur_targets`: soft targets near segment boundaries, where the annotation's exact frame is a guess;
- `class_weights`: per-class loss weights that lift rare key-steps against frequent ones, and weigh the
  background class apart.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def video_bounds(lengths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """First and one-past-last row of each frame's video in the concatenation of videos of the given lengths.

    Returns:
        ``(first (L,), end (L,))`` int64.
    """
    lengths_arr = np.asarray(lengths, dtype=np.int64)
    ends = np.cumsum(lengths_arr)
    starts = ends - lengths_arr
    return np.repeat(starts, lengths_arr), np.repeat(ends, lengths_arr)


def blur_targets(targets: np.ndarray, lengths: Sequence[int], radius: int) -> np.ndarray:
    """Box-blur one-hot targets along time within each video: ``ỹ_t = mean(y_{t-r..t+r})``, clipped to the video.

    Inside a segment longer than ``2r + 1`` frames nothing changes; within ``r`` frames of a boundary the target is
    shared between the two classes in proportion to how many of the ``2r + 1`` neighbouring frames each holds
    (label smoothing where the annotated boundary is uncertain by about ``r`` frames). Rows still sum to 1.

    Args:
        targets: ``(L, C)`` concatenated per-frame targets of videos of ``lengths`` frames.
        lengths: frame count of each video, in concatenation order.
        radius: ``r`` in frames (0: the targets are returned unchanged).

    Returns:
        ``(L, C)`` float32 soft targets.
    """
    if radius <= 0:
        return targets
    first, end = video_bounds(lengths)
    t = np.arange(len(targets))
    lo = np.maximum(t - radius, first)
    hi = np.minimum(t + radius + 1, end)  # exclusive
    cum = np.concatenate([np.zeros((1, targets.shape[1])), np.cumsum(targets, axis=0, dtype=np.float64)])
    return ((cum[hi] - cum[lo]) / (hi - lo)[:, None]).astype(np.float32)


def class_weights(
    targets: np.ndarray, power: float, background: Sequence[int] = (), background_weight: float = 1.0
) -> np.ndarray:
    """Class-balanced loss weights ``w_c = s · b_c · (n_c / N)^(-power)``, scaled so that the mean weight of a frame
    is 1.

    ``n_c = Σ_t y_{t,c}`` is class ``c``'s share of the ``N`` training frames. ``power = 0`` weighs every class alike
    (plain cross-entropy), 1 is inverse frequency (every class counts as much as any other in total), 0.5 lies
    between. ``b_c`` is ``background_weight`` for the classes in ``background`` (the frames outside every key-step)
    and 1 for the others: above 1 a second the detector cannot place costs more when called a step than when called
    background, below 1 the reverse. ``s`` makes ``Σ_c n_c w_c = N``, so the loss keeps its scale. A class without a
    frame gets weight 0 (it never appears in a target).

    Args:
        targets: ``(L, C)`` training targets (soft rows allowed).
        power: the exponent, ``>= 0``.
        background: the background classes ``b_c`` applies to.
        background_weight: ``b_c`` of the background classes, ``> 0`` (1: the background is one class like any
            other).

    Returns:
        ``(C,)`` float32 weights with ``Σ_c n_c w_c = N``.
    """
    counts = targets.sum(axis=0, dtype=np.float64)  # (C,)
    total = counts.sum()
    present = counts > 0
    weights = np.zeros_like(counts)
    weights[present] = (counts[present] / total) ** (-power)
    weights[list(background)] *= background_weight
    weights *= total / (counts * weights).sum()
    return weights.astype(np.float32)


def order_positions(
    labels: np.ndarray, lengths: Sequence[int], rng: np.random.Generator, rate: float,
    background: Sequence[int] = (0,),
) -> np.ndarray:
    """Each video, with probability ``rate``, reassembled from its key-step segments in a random order.

    A video is cut where each key-step run begins; each piece is that run and the background after it (what comes
    before the first key-step stays first). The pieces are shuffled and put back end to end, so the video keeps its
    length and every frame its label.

    Args:
        labels: ``(L,)`` class label of every frame of the concatenated videos.
        lengths: frame count of each video, in concatenation order.
        rng: draws which videos are shuffled and their orders.
        rate: probability that a video is shuffled (0: none).

    Returns:
        ``(L,)`` rows into the concatenation, video after video.
    """
    total = int(np.sum(lengths))
    if rate <= 0:
        return np.arange(total)
    rows = []
    start = 0
    key = ~np.isin(labels, np.asarray(background))
    for length in lengths:
        video = np.arange(start, start + length)
        lab, is_key = labels[video], key[video]
        # A piece starts where a key-step run begins: a key frame whose previous frame has another label.
        cut = np.flatnonzero(is_key & np.r_[True, lab[1:] != lab[:-1]])
        if rng.random() < rate and len(cut) > 1:
            pieces = np.split(video, cut)  # pieces[0]: the frames before the first key-step
            order = 1 + rng.permutation(len(pieces) - 1)
            video = np.concatenate([pieces[0], *(pieces[k] for k in order)])
        rows.append(video)
        start += length
    return np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)


def speed_positions(
    lengths: Sequence[int], rng: np.random.Generator, max_change: float
) -> tuple[np.ndarray, list[int]]:
    """Each video resampled at a random speed: the frames a video would have if played ``s`` times as fast.

    ``s`` is drawn log-uniformly in ``[1 / (1 + m), 1 + m]`` per video; frame ``k`` of the resampled video is source
    frame ``floor(k s)`` (a slower video repeats frames, a faster one skips some), the same rule a live reader
    follows when the camera runs at another rate than the features.

    Args:
        lengths: frame count of each video, in concatenation order.
        rng: draws the speeds.
        max_change: ``m`` (0: every video as it is).

    Returns:
        ``(positions, new_lengths)``: rows into the original concatenation for each resampled frame, and the
        resampled videos' lengths (at least 1).
    """
    lengths_arr = np.asarray(lengths, dtype=np.int64)
    if max_change <= 0:
        return np.arange(int(lengths_arr.sum())), lengths_arr.tolist()
    speeds = np.exp(rng.uniform(-np.log1p(max_change), np.log1p(max_change), size=len(lengths_arr)))
    new_lengths = np.maximum(np.ceil(lengths_arr / speeds).astype(np.int64), 1)
    starts = np.cumsum(lengths_arr) - lengths_arr
    first, _ = video_bounds(new_lengths.tolist())  # per resampled frame: where its video starts (resampled)
    video = np.repeat(np.arange(len(lengths_arr)), new_lengths)
    k = np.arange(int(new_lengths.sum())) - first
    source = np.minimum(np.floor(k * speeds[video]).astype(np.int64), lengths_arr[video] - 1)
    return starts[video] + source, new_lengths.tolist()


def perturb_windows(
    x: np.ndarray,
    valid: np.ndarray,
    rng: np.random.Generator,
    noise_scale: np.ndarray | None = None,
    background: np.ndarray | None = None,
    mix: float = 0.0,
) -> np.ndarray:
    """Feature noise and background mixing on a batch of training windows (padding stays zero).

    ``x' = (1 - λ) x + λ b + ε``: ``b`` one background frame per window, drawn from ``background``, ``λ`` uniform in
    ``[0, mix]`` per window; ``ε ~ N(0, diag(noise_scale²))`` per frame.

    Args:
        x: ``(B, W, D)`` windows.
        valid: ``(B, W)`` true on real frames.
        rng: the draws.
        noise_scale: ``(D,)`` standard deviation of the noise per dimension (None: no noise).
        background: ``(N_b, D)`` background frames to mix in (None or empty: no mixing).
        mix: largest share ``λ`` of the background frame.

    Returns:
        ``(B, W, D)`` float32.
    """
    out = x
    if background is not None and len(background) and mix > 0:
        lam = rng.uniform(0.0, mix, size=(len(x), 1, 1)).astype(np.float32)
        picked = background[rng.integers(0, len(background), size=len(x))][:, None, :]  # (B, 1, D)
        out = (1.0 - lam) * out + lam * picked
    if noise_scale is not None:
        out = out + rng.standard_normal(out.shape, dtype=np.float32) * noise_scale.astype(np.float32)
    return (out * valid[..., None]).astype(np.float32, copy=False)
