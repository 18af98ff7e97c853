"""The probabilistic checker on a recognised key-step *sequence* (PREGO PRED mode), where the sequence is all there is.

A PRED-mode input holds each video's recognised steps in order and nothing else: no probabilities, no durations.
The evidence the probabilistic checker (`graphs.probabilistic_checker`) weighs is then, per key-step ``s`` before
position ``i``::

    x_s(i) = 1 if s was recognised before position i, else 0                              (S1)

formula (E1) of `recognition.evidence` with one recognised step as the window, and the same calibrated curves
turn it into even-odds probabilities: ``q_s = sigmoid(a_s + b * x_s - beta)`` (E3) and, for the detection at ``i``,
``r = sigmoid(c)`` (E4 with a constant detection evidence, one value for every step; see `calibrate_sequence_evidence`).

The calibration pairs come from perturbed training sequences (`tgml.bench.perturb.aligned_perturbation`: the paper's
noise model, where the perturbation says which recognised step stands where and which ones are real).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from graphs.checker import StepEvidence
from graphs.checker_settings import CheckerSettings
from graphs.common.errors import InputError
from graphs.mistake_metrics import MistakeScores, mistake_scores
from graphs.task_graph import TaskGraph
from recognition.evidence import DONE_SHARE_CLIP, EvidenceModel, detection_real, step_rows
from recognition.evidence_calibration import fit_shrunk_logistic
from tgml.bench.perturb import aligned_perturbation

# A recognised sequence's evidence window is one recognised step (formula S1).
ONE_STEP = 1.0


def seen_before(sequence: Sequence[int], step_ids: Sequence[int] | np.ndarray) -> np.ndarray:
    """Formula (S1) at every position: ``(m, K)`` with 1 where step ``step_ids[k]`` was recognised before position i.

    Args:
        sequence: recognised key-step ids (ids outside ``step_ids`` count for nothing).
        step_ids: the steps, in the evidence model's order.

    Returns:
        ``(len(sequence), len(step_ids))`` of 0.0 / 1.0.
    """
    ids = np.asarray(step_ids, dtype=np.int64)
    seq = np.asarray(sequence, dtype=np.int64)
    hits = (seq[:, None] == ids[None, :]).astype(np.int64)  # (m, K)
    return ((np.cumsum(hits, axis=0) - hits) > 0).astype(np.float64)


def calibrate_sequence_evidence(
    clean: Sequence[Sequence[int]], rates: Sequence[float], step_ids: Sequence[int], seed: int
) -> EvidenceModel:
    """Calibrate formula (S1) on training sequences perturbed at each of ``rates``.

    At every position ``i`` of a perturbed sequence and for every step ``s``, a pair ``(x_s(i), done_s)``: whether
    ``s`` was recognised before ``i``, and whether it was done before the clean step that position stands at. A
    logistic curve with one slope and per-step intercepts (shrunk to the common one) is fitted to them, as
    `recognition.evidence_calibration.calibrate_evidence` does for frames. Every recognised step is one pair of
    the detection curve: real when the perturbation kept it. Its probability is one value for all steps: per-step
    values would learn how often each step is *done*, and a mistake is a step done when it should not be, which that
    frequency says nothing about (measured: per-step values lost 1 to 4 points of Avg F1 in the training-split
    simulation of `tgml.bench.prego.checker_selection`).

    Args:
        clean: training key-step sequences.
        rates: perturbation rates, each in (0, 1].
        step_ids: the taxonomy.
        seed: the perturbation's seed.

    Returns:
        The `EvidenceModel` (window one recognised step; miss rate: share of clean steps the perturbation lost;
        false-detection rate: share of recognised steps not real; the same for every step).

    Raises:
        InputError: no sequence, or a rate outside (0, 1].
    """
    if not clean or not rates:
        raise InputError("sequence evidence calibration: no training sequence or no perturbation rate")
    if any(not 0.0 < r <= 1.0 for r in rates):
        raise InputError(f"sequence evidence calibration: rates {list(rates)} must lie in (0, 1]")
    ids = np.asarray(step_ids, dtype=np.int64)
    k = len(ids)
    rng = np.random.default_rng(seed)
    xs, ys, reals = [], [], []
    total = kept = 0
    for rate in rates:
        for sequence in clean:
            noisy, source, real = aligned_perturbation(sequence, rate, ids, rng)
            done_through = np.cumsum((np.asarray(sequence)[:, None] == ids[None, :]), axis=0) > 0  # (m, K)
            before_clean = np.vstack([np.zeros((1, k), dtype=bool), done_through[:-1]])  # done before clean index j
            xs.append(seen_before(noisy, ids).ravel())
            ys.append(before_clean[source].astype(np.float64).ravel())
            reals.append(real.astype(np.float64))
            kept += len(np.unique(source[real]))
            total += len(sequence)
    x = np.concatenate(xs)
    y = np.concatenate(ys)
    groups = np.tile(np.arange(k), len(x) // k)
    alpha, slopes, delta = fit_shrunk_logistic(x, groups, y, k)
    share = float(np.clip(y.mean(), DONE_SHARE_CLIP, 1 - DONE_SHARE_CLIP))
    real_share = float(np.clip(np.concatenate(reals).mean(), DONE_SHARE_CLIP, 1 - DONE_SHARE_CLIP))
    miss = 1.0 - kept / total
    return EvidenceModel(
        step_ids=tuple(int(s) for s in ids),
        window_s=ONE_STEP,
        done_intercepts=tuple(float(alpha + d) for d in delta),
        done_slope=float(slopes[0]),
        done_base=float(np.log(share / (1 - share))),
        real_intercepts=(float(np.log(real_share / (1 - real_share))),) * k,
        real_slope=0.0,
        miss_rates=(float(miss),) * k,
        false_rates=(1.0 - real_share,) * k,
        source="validation",
        videos=(),
        pairs=len(y),
        detections=int(sum(len(r) for r in reals)),
    )


def sequence_evidence(sequence: Sequence[int], model: EvidenceModel) -> list[StepEvidence]:
    """The evidence sent with each recognised step of a sequence: (E3) of (S1) and the detection's (E4)."""
    q = model.done_probabilities(seen_before(sequence, model.step_ids))  # (m, K)
    rows = step_rows(model)
    return [
        StepEvidence(dict(zip(model.step_ids, done, strict=True)), detection_real(model, rows, int(s), 1.0, 0.0))
        for s, done in zip(sequence, q.tolist(), strict=True)
    ]


def probabilistic_flags(
    graph: TaskGraph, sequence: Sequence[int], settings: CheckerSettings, model: EvidenceModel | None
) -> np.ndarray:
    """The alert flags of the probabilistic checker over one recognised sequence.

    Args:
        graph: the task graph.
        sequence: recognised key-step ids.
        settings: the checker (``kind`` probabilistic), its threshold and prior.
        model: the sequence evidence's calibration (None: each recognised step taken as certain).

    Returns:
        bool ``(len(sequence),)``.
    """
    checker = settings.new(graph)
    evidence = sequence_evidence(sequence, model) if model is not None else [StepEvidence()] * len(sequence)
    return np.fromiter((checker.observe(int(s), e).is_mistake for s, e in zip(sequence, evidence, strict=True)),
                       dtype=bool, count=len(sequence))


def evaluate_graph_probabilistic(
    graph: TaskGraph,
    sequences: Iterable[Sequence[int]],
    settings: CheckerSettings,
    evidence: EvidenceModel | None,
    has_mistake: Sequence[bool] | None = None,
) -> MistakeScores:
    """`tgml.bench.prego.scoring.evaluate_graph` with the probabilistic checker weighing what the sequences say.

    Args:
        graph: the binary task graph.
        sequences: one recognised key-step sequence per test video, its last step the mistake.
        settings: the checker's threshold and prior (``kind`` probabilistic).
        evidence: the sequence evidence's calibration (None: each recognised step taken as certain).
        has_mistake: per sequence, whether it ends with a mistake (None: all do).

    Returns:
        Avg F1 and per-class true P/R/F1.
    """
    return mistake_scores((probabilistic_flags(graph, seq, settings, evidence) for seq in sequences), has_mistake)
