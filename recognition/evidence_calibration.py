"""Calibrating a detector's evidence on validation videos (formulas E3 and E4 of `recognition.evidence`).

At training time ``recognition-train`` runs the kept model causally over the validation videos (never the test
split) and measures, per key-step:

- **done curve (E3)**: at every moment the checker asks "was ``s`` done?" (the start of each annotated segment, and
  the end of the video), a pair ``(x_s, done_s)``: the evidence (E1) as it stood then, and whether ``s`` was
  annotated before. A logistic curve with one slope and a per-step intercept is fitted to the pairs;
- **real curve (E4)**: every segment the online segmenter confirms, with its evidence (E2), its duration against the
  done window (``z``) and whether it is real (at least half of its frames annotated with its step);
- **miss rate**: the share of annotated segments of ``s`` that no confirmed detection of ``s`` overlaps, and
  **false-detection rate**: the share of confirmed detections of ``s`` that are not real.

Per-step intercepts are pulled towards the common one by a quadratic penalty (`SHRINK`): a step seen in only one or
two validation videos gets the common curve, nudged by its own data. The slopes are kept non-negative (more evidence
never makes "done" less likely). Each curve's slope penalty is chosen by leaving one validation video out at a time
(`choose_slope_penalty`; with one video, one of its steps): pairs from three videos are nearly separable, and an
unpenalised fit then gives slopes of 15-30 that turn "never" into "surely" within 0.2 of evidence, which the left-out
video does not bear out.

**Rates a small validation split can be trusted with.** A validation split of three videos shows each step two to
four times and holds a handful of its detections: a raw share such as "4 of 7 detections false" moves by 15 points
from one training run to the next (the binomial spread of 7 draws) without the detector being any different. Each
step's rate is therefore the posterior mean under a Beta prior centred on the pooled rate ``p`` of all steps (which
rests on six times the counts and barely moves)::

    rate_s = (k_s + n0 * p) / (n_s + n0)                                                  (R1)

with ``k_s`` events (misses, false detections) of ``n_s`` chances (annotated segments, confirmed detections). The
prior's strength ``n0`` (pseudo-observations) is estimated from the counts themselves, by maximising the
beta-binomial marginal likelihood of every step's counts (empirical Bayes, over `RATE_STRENGTHS`)::

    n0 = argmax sum_s [ln B(k_s + n0 p, n_s - k_s + n0 (1 - p)) - ln B(n0 p, n0 (1 - p))]  (R2)

so steps whose counts differ more than chance allows keep rates of their own, and steps that differ by chance
alone get about the pooled rate; a step counted often enough outweighs any prior. This rather than cross-validated
rates over the training videos: those need one detector per fold (k trainings instead of one, minutes at training
time), while (R1) costs nothing and removes the part of the swing that is counting noise, which is what a run-to-run
difference on the same footage is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from graphs.common.errors import InputError
from graphs.common.safe_text import first_few
from recognition.evidence import (
    DONE_SHARE_CLIP,
    EvidenceModel,
    detection_evidence,
    duration_evidence,
    state_logit,
    window_evidence,
    window_frames,
)
from recognition.segmenter import SegmenterConfig, SegmentEvent, segment_outputs

SHRINK: Final = 1.0  # penalty on each step's offset from the common intercept (a prior of unit variance)
RIDGE: Final = 1e-3  # penalty on the common intercept and slope: keeps a fit on separable pairs finite
# Slope penalties tried by leave-one-video-out (`choose_slope_penalty`): from almost none (a steep curve, right when
# many videos agree) to a prior of standard deviation ~1.4 per unit of evidence (a flat one, for a split too small
# to tell a steep curve from luck).
SLOPE_PENALTIES: Final = (RIDGE, 0.01, 0.03, 0.1, 0.3, 1.0)
NEWTON_STEPS: Final = 50
# Candidate strengths n0 of the rates' Beta prior (R1), in pseudo-observations: from 1 (a step's own counts dominate
# once it has a few) to 100 (every step gets the pooled rate, unless it was counted hundreds of times).
RATE_STRENGTHS: Final = np.geomspace(1.0, 100.0, 41)


def fit_shrunk_logistic(
    x: np.ndarray, group: np.ndarray, y: np.ndarray, groups: int, slope_penalty: float = RIDGE
) -> tuple[float, np.ndarray, np.ndarray]:
    """Logistic regression ``logit P(y=1) = alpha + x @ b + delta_g`` by Newton's method, ``delta`` shrunk to 0.

    Minimises ``sum_i [log(1 + e^z_i) - y_i z_i] + SHRINK/2 * |delta|^2 + RIDGE/2 * alpha^2 + lambda/2 * |b|^2``.
    The slopes must not be negative (more evidence never makes "done" less likely): while one is, the most negative is
    fixed at 0 and the rest refitted.

    Args:
        x: ``(N,)`` or ``(N, F)`` evidence values.
        group: ``(N,)`` group (step) index of each pair, in ``0..groups-1``.
        y: ``(N,)`` 0/1 labels.
        groups: number of groups.
        slope_penalty: ``lambda`` (`RIDGE` by default; `choose_slope_penalty` picks one for a small split).

    Returns:
        ``(alpha, b (F,), delta (groups,))``.
    """
    features = np.asarray(x, dtype=np.float64).reshape(len(y), -1)  # (N, F)
    n, f = features.shape
    design = np.zeros((n, 1 + f + groups), dtype=np.float64)  # (N, 1 + F + G): [1, x, one-hot group]
    design[:, 0] = 1.0
    design[:, 1 : 1 + f] = features
    design[np.arange(n), 1 + f + group] = 1.0
    penalty = np.full(1 + f + groups, SHRINK)
    penalty[0] = RIDGE
    penalty[1 : 1 + f] = slope_penalty
    used = np.ones(1 + f + groups, dtype=bool)
    for _ in range(f + 1):  # each pass drops a negative slope; with none left, the next one returns
        a, pen = design[:, used], penalty[used]
        theta = np.zeros(int(used.sum()))
        for _ in range(NEWTON_STEPS):
            p = 1.0 / (1.0 + np.exp(-(a @ theta)))
            grad = a.T @ (p - y) + pen * theta
            hess = (a * (p * (1 - p))[:, None]).T @ a + np.diag(pen)
            step = np.linalg.solve(hess, grad)
            theta -= step
            if np.abs(step).max() < 1e-9:
                break
        full = np.zeros(1 + f + groups)
        full[used] = theta
        slopes = full[1 : 1 + f]
        if slopes.min(initial=0.0) >= 0:
            return float(full[0]), slopes, full[1 + f :]
        used[1 + int(np.argmin(slopes))] = False
    raise AssertionError("unreachable: the pass with every slope dropped returns")


def _log_loss(x: np.ndarray, group: np.ndarray, y: np.ndarray, fit: tuple[float, np.ndarray, np.ndarray]) -> float:
    """Summed log-loss of 0/1 labels ``y`` under a fitted curve (probabilities clipped to [1e-6, 1 - 1e-6])."""
    alpha, slopes, delta = fit
    z = alpha + np.asarray(x, dtype=np.float64).reshape(len(y), -1) @ slopes + delta[group]
    p = np.clip(1.0 / (1.0 + np.exp(-z)), 1e-6, 1.0 - 1e-6)
    return float(-(y * np.log(p) + (1.0 - y) * np.log(1.0 - p)).sum())


def choose_slope_penalty(
    x: np.ndarray, group: np.ndarray, y: np.ndarray, groups: int, video: np.ndarray, leave_steps_out: bool = True
) -> float:
    """The slope penalty of `SLOPE_PENALTIES` whose curves best predict held-out validation data from the rest.

    Leave one video out: fit on the other videos, sum the log-loss of the left-out video's labels; the penalty with
    the smallest total wins (ties to the larger penalty, the flatter curve). With a single validation video, leave
    one *step* out instead (`held_out_units`): the curve is fitted on the video's other steps and judged on the
    left-out step, whose intercept then is the common one, as a step the fit never saw is judged live. The slope is
    shared by every step, so how well it carries to an unseen step is the question a second video would answer.
    With one video showing one step (a step with no pair labelled 1 is not shown) there is nothing to leave out, so
    nothing shows that a steep curve holds: the largest penalty, the flattest curve, applies. (`RIDGE`, unpenalised,
    was used for one video once: a curve sure that an unseen step was "never done" (q 0.0003); the flattest was used
    after, and it left a step the detector plainly never saw at P(skipped) 0.37, under the default alert threshold.)

    Args:
        x, group, y, groups: as `fit_shrunk_logistic`.
        video: ``(N,)`` index of the validation video each pair or detection comes from.
        leave_steps_out: with one video, leave its steps out in turn; False: the flattest curve, as before
            2026-12-03 (`tgml bench-live`'s protocol, whose published figures were measured so).

    Returns:
        ``lambda`` for `fit_shrunk_logistic`.
    """
    if not leave_steps_out and len(np.unique(video)) < 2:
        return SLOPE_PENALTIES[-1]
    units = held_out_units(group, y, video)
    if units is None:
        return SLOPE_PENALTIES[-1]
    features = np.asarray(x, dtype=np.float64).reshape(len(y), -1)
    losses = np.zeros(len(SLOPE_PENALTIES))
    for u in np.unique(units).tolist():
        out = units == u
        for k, lam in enumerate(SLOPE_PENALTIES):
            fit = fit_shrunk_logistic(features[~out], group[~out], y[~out], groups, lam)
            losses[k] += _log_loss(features[out], group[out], y[out], fit)
    best = losses.min()
    return float(max(lam for lam, loss in zip(SLOPE_PENALTIES, losses, strict=True) if loss <= best + 1e-9))


def held_out_units(group: np.ndarray, y: np.ndarray, video: np.ndarray) -> np.ndarray | None:
    """What `choose_slope_penalty` leaves out in turn: ``(N,)`` the unit of each pair, or None when there is nothing
    to leave out.

    Two videos or more: each pair's video. One video: each pair's step, when the video shows two steps or more (two
    steps with a pair labelled 1: done, or a real detection); else None. Counted over every step that has pairs, a
    video showing one key-step was left with a steep curve (slope ~12 instead of ~0.6): every key-step of the detector
    has "done?" pairs, so the steps it never shows (all "not done", at the low evidence of a step the detector never
    saw) were left out in turn, and judged on them alone the steepest curve always wins; the warning before training
    (`recognition.train.warn_one_validation_video`) and the docs said that split got the flattest curve.
    """
    videos = np.asarray(video)
    if len(np.unique(videos)) >= 2:
        return videos
    groups = np.asarray(group)
    if len(np.unique(groups[np.asarray(y) > 0])) < 2:
        return None
    return groups


def annotated_runs(labels: np.ndarray, background: set[int]) -> list[tuple[int, int, int]]:
    """``(class, first frame, end frame)`` of each maximal run of one key-step class in per-frame labels."""
    if len(labels) == 0:
        return []
    change = np.flatnonzero(np.diff(labels)) + 1
    starts = np.r_[0, change]
    ends = np.r_[change, len(labels)]
    return [(int(labels[s]), int(s), int(e)) for s, e in zip(starts, ends, strict=True) if int(labels[s]) not in
            background]


def _beta_binomial_loglik(hits: np.ndarray, totals: np.ndarray, pooled: float, strengths: np.ndarray) -> np.ndarray:
    """Formula (R2) for each candidate strength: ``(S,)`` log marginal likelihoods of the steps' counts (the
    binomial coefficients, the same for every strength, left out)."""
    a, b = strengths[:, None] * pooled, strengths[:, None] * (1.0 - pooled)  # (S, 1)
    return (_log_beta(a + hits[None], b + (totals - hits)[None]) - _log_beta(a, b)).sum(axis=1)


def _log_beta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b)``, elementwise (numpy has no lgamma; torch has)."""
    import torch  # here: commands that only replay recorded evidence (prego-bench replay --help) load no torch

    ta, tb = torch.from_numpy(np.asarray(a, dtype=np.float64)), torch.from_numpy(np.asarray(b, dtype=np.float64))
    return (torch.lgamma(ta) + torch.lgamma(tb) - torch.lgamma(ta + tb)).numpy()


def shrunk_rates(hits: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, float]:
    """Per-step rates shrunk toward the pooled rate of all steps, formulas (R1) and (R2) of the module docstring.

    Args:
        hits: ``(K,)`` events counted per step (misses, or false detections).
        totals: ``(K,)`` chances per step (annotated segments, or confirmed detections).

    Returns:
        ``(rates (K,), n0)``: the posterior means, and the prior's strength in pseudo-observations (0 when there is
        nothing to shrink: no count at all, or a pooled rate of exactly 0 or 1, which every step then shares).
    """
    hits, totals = np.asarray(hits, dtype=np.float64), np.asarray(totals, dtype=np.float64)
    pooled = float(hits.sum() / totals.sum()) if totals.sum() else 0.0
    if not 0.0 < pooled < 1.0:
        return np.full(len(totals), pooled), 0.0
    n0 = float(RATE_STRENGTHS[int(np.argmax(_beta_binomial_loglik(hits, totals, pooled, RATE_STRENGTHS)))])
    return (hits + n0 * pooled) / (totals + n0), n0


def done_pairs(
    evidence: np.ndarray, runs: Sequence[tuple[int, int]], frames: int, done_head: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The (E3) calibration pairs of one validation video: at every moment the checker asks "was ``s`` done?" (each
    annotated start, from the frames before it, and the end), each step's features and whether it was annotated
    before.

    Args:
        evidence: ``(T, K)`` the (E1) evidence of the ``K`` steps after each frame, or ``(T, 2K)`` with the done-state
            logits ``u`` of (E3) after it.
        runs: ``(step row, first frame)`` of each annotated run of a key-step, in time order.
        frames: ``T``.
        done_head: ``evidence`` holds the done-state logits.

    Returns:
        ``(x (A * K, 1 or 2), y (A * K,))`` for the ``A`` asks, ask by ask, step by step: the features as they stood
        before the ask, and 1 where the step's first run began before it.
    """
    k = evidence.shape[1] // (2 if done_head else 1)
    starts = np.array([start for _, start in runs], dtype=np.int64)
    asks = np.r_[starts, frames]  # (A,)
    first_seen = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(first_seen, np.array([r for r, _ in runs], dtype=np.int64), starts)
    before_start = np.zeros(evidence.shape[1])
    if done_head:  # a stream that has just begun: nothing done (the tracker's answer before the first frame)
        before_start[k:] = state_logit(np.zeros(k))
    stood = np.vstack([before_start, evidence])[asks]  # (A, F * K): the evidence after frame ask - 1
    x = stood.reshape(len(asks), -1, k).transpose(0, 2, 1).reshape(len(asks) * k, -1)  # (A * K, F)
    y = (first_seen[None, :] < asks[:, None]).astype(np.float64).ravel()  # (A * K,)
    return x, y


@dataclass(frozen=True)
class VideoDetections:
    """The confirmed detections of key-steps on one validation video, for the (E4) curve and the rates.

    Attributes:
        evidence: float ``(D, 2)`` per detection, ``y`` of (E2) and ``z`` of (E4).
        rows: int64 ``(D,)`` the step row of each detection.
        real: float ``(D,)`` 1 where at least half of its frames are annotated with its step.
        run_hit: float ``(R,)`` per annotated run, 1 where a detection of its step overlaps it.
    """

    evidence: np.ndarray
    rows: np.ndarray
    real: np.ndarray
    run_hit: np.ndarray


def video_detections(
    events: Sequence[SegmentEvent],
    labels: np.ndarray,
    runs: Sequence[tuple[int, int, int]],
    row: Mapping[int, int],
    fps: float,
    detection_window_s: float,
    window_s: float,
) -> VideoDetections:
    """What the segmenter confirmed on one validation video, held against its annotation.

    Args:
        events: the segmenter's confirmed segments over the video's outputs.
        labels: ``(T,)`` the annotated class of each frame.
        runs: `annotated_runs` of ``labels``.
        row: key-step class -> step row (background classes absent).
        fps: frames per second.
        detection_window_s: ``W`` of (E2).
        window_s: the done window ``z`` of (E4) is measured against.

    Returns:
        The `VideoDetections`.
    """
    kept = [e for e in events if e.class_index in row]
    detected = np.full(len(labels), -1, dtype=np.int64)  # per frame: the class of the detection covering it
    evidence: list[tuple[float, float]] = []
    real: list[float] = []
    for e in kept:
        seconds = (e.end_frame - e.start_frame) / fps
        evidence.append((detection_evidence(e.confidence, seconds, detection_window_s),
                         duration_evidence(seconds, window_s)))
        real.append(1.0 if np.mean(labels[e.start_frame : e.end_frame] == e.class_index) >= 0.5 else 0.0)
        detected[e.start_frame : e.end_frame] = e.class_index
    hit = [float(np.any(detected[start:end] == c)) for c, start, end in runs]
    return VideoDetections(np.asarray(evidence, dtype=np.float64).reshape(-1, 2),
                           np.array([row[e.class_index] for e in kept], dtype=np.int64),
                           np.asarray(real, dtype=np.float64), np.asarray(hit, dtype=np.float64))


def calibrate_evidence(
    validation: Mapping[str, tuple[np.ndarray, np.ndarray]],
    class_step_ids: Sequence[int | None],
    fps: float,
    segmenter: SegmenterConfig,
    window_s: float | None = None,
    detection_window_s: float | None = None,
    slope_penalty: float | None = None,
    leave_steps_out: bool = True,
) -> EvidenceModel:
    """Measure a detector's evidence on its validation videos (see the module docstring).

    Args:
        validation: ``{video: (probs (T, C) or (T, 2C), targets (T, C))}``: the model's causal outputs (class
            probabilities, then done states with a done head) and the annotated per-frame targets (one-hot or
            smoothed: the largest entry is the label).
        class_step_ids: class -> step id (None: background).
        fps: feature frames per second.
        segmenter: the segmenter settings the detector runs with.
        window_s: ``W``, the evidence window in seconds (None: the segmenter's ``min_duration``).
        detection_window_s: ``W`` of the detection evidence (E2), when it differs from ``window_s`` (None: the same).
        slope_penalty: ``lambda`` of both curves' slopes (None: each curve's chosen by `choose_slope_penalty`,
            leaving one validation video out at a time, or one step of a single video).
        leave_steps_out: as `choose_slope_penalty`'s (False: one video gets the flattest curves).

    Returns:
        The calibrated `EvidenceModel`.

    Raises:
        InputError: no validation video, none with an annotated key-step, or no key-step class.
    """
    if not validation:
        raise InputError("evidence calibration: no validation video (the validation split is empty)")
    key = [c for c, s in enumerate(class_step_ids) if s is not None]
    if not key:  # no step to ask about: `done_pairs` of K = 0 steps is no (A * K, F) array
        raise InputError(f"evidence calibration: none of the detector's {len(class_step_ids)} classes is a key-step "
                         "(all background)")
    steps = [s for s in class_step_ids if s is not None]
    row = {c: i for i, c in enumerate(key)}
    background = {c for c, s in enumerate(class_step_ids) if s is None}
    window_s = segmenter.min_duration if window_s is None else float(window_s)
    if not window_s > 0:
        raise InputError(f"evidence calibration: window {window_s} s must be > 0")
    if detection_window_s is not None and not detection_window_s > 0:
        raise InputError(f"evidence calibration: detection window {detection_window_s} s must be > 0")
    det_window_s = window_s if detection_window_s is None else float(detection_window_s)
    window = window_frames(window_s, fps)
    xs, groups, ys, pair_video = [], [], [], []
    det_y, det_group, det_real, det_video = [], [], [], []
    seg_hit = np.zeros(len(key))
    seg_total = np.zeros(len(key))
    done_head = all(np.asarray(p).shape[1] > len(class_step_ids) for p, _ in validation.values())
    for index, (outputs, targets) in enumerate(validation.values()):
        labels = np.asarray(targets).argmax(axis=1)
        runs = annotated_runs(labels, background)
        probs = np.asarray(outputs)[:, : len(class_step_ids)]
        evidence = window_evidence(probs[:, key], window)  # (T, K)
        if done_head:  # the done-state logits (E3's u) beside the action evidence: (T, 2K)
            state = state_logit(np.asarray(outputs)[:, len(class_step_ids) + np.asarray(key)])
            evidence = np.concatenate([evidence, state], axis=1)
        x, y = done_pairs(evidence, [(row[c], start) for c, start, _ in runs], len(labels), done_head)
        xs.append(x)
        ys.append(y)
        groups.append(np.tile(np.arange(len(key)), len(y) // len(key)))
        pair_video.append(np.full(len(y), index))
        found = video_detections(segment_outputs(probs, segmenter, class_step_ids), labels, runs, row, fps,
                                 det_window_s, window_s)
        det_y.append(found.evidence)
        det_group.append(found.rows)
        det_real.append(found.real)
        det_video.append(np.full(len(found.rows), index))
        run_rows = np.array([row[c] for c, _, _ in runs], dtype=np.int64)
        np.add.at(seg_total, run_rows, 1.0)
        np.add.at(seg_hit, run_rows, found.run_hit)
    if not seg_total.any():
        names = list(validation)
        raise InputError(f"evidence calibration: no validation video shows an annotated key-step ({len(names)} "
                         f"checked: {first_few(names, 5)}; a video of background only, or cut short?)")
    x_all, g_all, y_all = np.concatenate(xs), np.concatenate(groups), np.concatenate(ys)
    done_penalty = (choose_slope_penalty(x_all, g_all, y_all, len(key), np.concatenate(pair_video), leave_steps_out)
                    if slope_penalty is None else slope_penalty)
    alpha, slopes, delta = fit_shrunk_logistic(x_all, g_all, y_all, len(key), done_penalty)
    share = float(np.clip(y_all.mean(), DONE_SHARE_CLIP, 1 - DONE_SHARE_CLIP))
    det, det_g = np.concatenate(det_real), np.concatenate(det_group)  # (D,): real or not, step row
    if len(det):
        det_x = np.concatenate(det_y)  # (D, 2): y, z
        real_penalty = (choose_slope_penalty(det_x, det_g, det, len(key), np.concatenate(det_video), leave_steps_out)
                        if slope_penalty is None else slope_penalty)
        r_alpha, r_slopes, r_delta = fit_shrunk_logistic(det_x, det_g, det, len(key), real_penalty)
        r_slope, r_duration = float(r_slopes[0]), float(r_slopes[1])
    else:  # the segmenter confirmed nothing: the default curve (real when seen clearly, not when not)
        fallback = EvidenceModel.default(steps, window_s)
        r_alpha, r_slope, r_delta = fallback.real_intercepts[0], fallback.real_slope, np.zeros(len(key))
        r_duration = 0.0
    false_hits = np.bincount(det_g, weights=1.0 - det, minlength=len(key))
    det_total = np.bincount(det_g, minlength=len(key)).astype(np.float64)
    return EvidenceModel(
        step_ids=tuple(int(s) for s in steps),
        window_s=float(window_s),
        done_intercepts=tuple(float(alpha + d) for d in delta),
        done_slope=float(slopes[0]),
        done_base=float(np.log(share / (1 - share))),
        real_intercepts=tuple(float(r_alpha + d) for d in r_delta),
        real_slope=r_slope,
        miss_rates=tuple(float(v) for v in shrunk_rates(seg_total - seg_hit, seg_total)[0]),
        false_rates=tuple(float(v) for v in shrunk_rates(false_hits, det_total)[0]),
        source="validation",
        videos=tuple(validation),
        pairs=len(y_all),
        detections=len(det),
        state_slope=float(slopes[1]) if done_head else 0.0,
        detection_window_s=None if detection_window_s is None else det_window_s,
        real_duration_slope=r_duration,
    )
