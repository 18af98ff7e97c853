"""``do-ensemble``: a seed ensemble of Direct Optimization graphs, with its settings chosen on training data only.

Method: train ``size`` DO models (SPEC §1) that differ only in their seed, average their row-softmax weight
matrices ``Z`` (rows stay distributions, so the mean is again a valid TGML weight matrix), and post-process the
mean with the usual SPEC §1 steps, keeping edges ``Z[i, j] >= 1 / round(n * threshold_scale)``. The result is an
ordinary `graphs.TaskGraph` (binary DAG + the averaged weights), so `graphs.PreconditionChecker` and the live
pipeline use it unchanged.

Selection (`cross_validate_ensemble`, the ``prego-bench select --method do-ensemble`` command): K-fold
cross-validation over the *training* videos. Each fold trains the members on the other folds and scores
PREGO-style validation items built from its held-out videos (`tgml.bench.prego.selection.validation_folds`: a
correct prefix, then one mistaken step), clean (stand-in for GT mode) and perturbed at rate ``noise`` (stand-in
for PRED mode). The candidate with the best mean of the two pooled Avg F1 wins; one configuration per dataset
serves both modes. The test split is never read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphs.checker import precondition_violations
from graphs.errors import InputError
from graphs.mistake_metrics import mistake_scores
from graphs.postprocess import binarize, present_steps, scaled_threshold_steps
from graphs.task_graph import TaskGraph
from tgml.bench.prego.data import BenchData
from tgml.bench.prego.methods import build_do
from tgml.bench.prego.selection import validation_folds


@dataclass(frozen=True)
class EnsembleConfig:
    """How the member graphs are combined.

    Attributes:
        size: number of DO members (seeds) averaged.
        threshold_scale: edges need ``Z[i, j] >= 1 / round(n * threshold_scale)`` (1 = SPEC §1 step 2).
        relaxed: apply SPEC §1 post-processing step 4.
    """

    size: int = 5
    threshold_scale: float = 1.0
    relaxed: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise InputError(f"EnsembleConfig.size = {self.size!r}: expected an integer >= 1")
        scale = self.threshold_scale
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not (math.isfinite(scale) and scale > 0):
            raise InputError(f"EnsembleConfig.threshold_scale = {scale!r}: expected a finite number > 0")
        if not isinstance(self.relaxed, bool):
            raise InputError(f"EnsembleConfig.relaxed = {self.relaxed!r}: expected true or false")

    def threshold_steps(self, n_steps: int) -> int:
        """The ``n'`` of the edge threshold ``1 / n'`` for a taxonomy of ``n_steps`` key-steps."""
        return scaled_threshold_steps(n_steps, self.threshold_scale)


def member_seeds(seed: int, size: int) -> tuple[int, ...]:
    """Training seeds of the ensemble run under benchmark seed ``seed``.

    Blocks ``[seed * size, seed * size + size)`` never overlap for different benchmark seeds, so the spread
    over benchmark seeds measures independent ensembles.
    """
    return tuple(range(seed * size, seed * size + size))


def average_weights(weights: Sequence[np.ndarray]) -> np.ndarray:
    """Element-wise mean of member weight matrices (row-softmax ``Z`` of SPEC §1, one per seed).

    Args:
        weights: ``K`` float arrays of the same ``(n+2, n+2)`` shape.

    Returns:
        float64 ``(n+2, n+2)`` mean; a mean of row-stochastic matrices is row-stochastic.
    """
    if not weights:
        raise InputError("ensemble: no member weights to average")
    stack = np.stack([np.asarray(w, dtype=np.float64) for w in weights])  # (K, n+2, n+2)
    return stack.mean(axis=0)


def ensemble_graph(
    members: Sequence[TaskGraph], present: np.ndarray, config: EnsembleConfig, info: Mapping[str, Any] | None = None
) -> TaskGraph:
    """Combine member graphs: average their weights and post-process the mean into a binary DAG.

    Args:
        members: DO graphs of the same taxonomy, each with weights.
        present: bool ``(n,)`` key-steps seen in training.
        config: size is not checked here (any number of members is averaged); threshold and relaxation are used.
        info: extra provenance stored in the graph.

    Returns:
        The ensemble `TaskGraph`; ``info["threshold"]`` is the edge threshold used.
    """
    if not members or any(m.weights is None for m in members):
        raise InputError("ensemble: every member graph needs its weights")
    first = members[0]
    if any(m.step_ids != first.step_ids for m in members):
        raise InputError("ensemble: member graphs describe different taxonomies")
    mean = average_weights([m.weights for m in members if m.weights is not None])
    n_threshold = config.threshold_steps(first.n_steps)
    adjacency = binarize(mean, present, config.relaxed, threshold_steps=n_threshold)
    meta = {
        "method": "do-ensemble",
        "members": len(members),
        "threshold_scale": config.threshold_scale,
        "threshold": 1.0 / n_threshold,
        "relaxed": config.relaxed,
        **(info or {}),
    }
    return TaskGraph(first.step_ids, first.step_names, adjacency, mean, first.scenario, meta)


def train_ensemble(
    data: BenchData, settings: Mapping[str, Any], seed: int, config: EnsembleConfig, epochs: int | None = None
) -> TaskGraph:
    """Train the members of one ensemble on a benchmark dataset's training split and combine them.

    Args:
        data: the dataset (only ``train`` and the taxonomy are used).
        settings: DO settings (``beta``, ``epochs``, ``early_stop``...; see `tgml.bench.prego.methods.METHOD_KEYS`).
        seed: benchmark seed; the members use `member_seeds` of it.
        config: ensemble settings.
        epochs: override of the DO epochs (quick checks).

    Returns:
        The ensemble graph; ``info`` lists the member seeds and how many epochs each ran.
    """
    seeds = member_seeds(seed, config.size)
    members = [build_do(data, settings, s, epochs) for s in seeds]
    info = {"member_seeds": list(seeds), "member_epochs": [int(m.info.get("epochs_run", 0)) for m in members]}
    return ensemble_graph(members, present_steps(data.step_ids, data.train), config, info)


# -- selection on the training split ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SelectionConfig:
    """The search behind ``prego-bench select --method do-ensemble``.

    Attributes:
        folds: folds over the training videos (the number of videos = leave-one-video-out).
        epochs: DO epoch caps tried without early stopping.
        early_stop: also try the dataset's own early-stopping rule (with its configured epoch cap).
        scales: edge threshold scales ``s`` (threshold ``1 / round(n * s)``).
        sizes: ensemble sizes; members are trained once for the largest and the first ``m`` form size ``m``.
        noise: perturbation rate of the PRED-mode stand-in.
        slip_rate: share of random-slip validation mistakes (`tgml.bench.prego.selection.synthetic_slips`).
        per_video: validation items per held-out video.
        seed: benchmark seed whose `member_seeds` are trained.
        workers: processes (0 = one per core).
    """

    folds: int = 5
    epochs: tuple[int, ...] = (25, 50, 75, 100, 200, 400, 1200)
    early_stop: bool = True
    scales: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
    sizes: tuple[int, ...] = (1, 5)
    noise: float = 0.2
    slip_rate: float = 0.5
    per_video: int = 3
    seed: int = 1
    workers: int = 0

    def __post_init__(self) -> None:
        def fail(name: str, why: str) -> None:
            raise InputError(f"SelectionConfig.{name} = {getattr(self, name)!r}: {why}")

        if self.folds < 2:
            fail("folds", "need at least 2")
        if not self.epochs or any(e < 1 for e in self.epochs):
            fail("epochs", "need epoch caps >= 1")
        if not self.scales or any(not (math.isfinite(s) and s > 0) for s in self.scales):
            fail("scales", "need finite scales > 0")
        if not self.sizes or any(m < 1 for m in self.sizes):
            fail("sizes", "need ensemble sizes >= 1")
        if not 0.0 <= self.noise <= 1.0:
            fail("noise", "must lie in [0, 1]")
        if not 0.0 <= self.slip_rate <= 1.0:
            fail("slip_rate", "must lie in [0, 1]")
        if self.per_video < 1:
            fail("per_video", "must be >= 1")
        if self.workers < 0:
            fail("workers", "must be >= 0")


def _member_job(data: BenchData, settings: Mapping[str, Any], seed: int) -> np.ndarray:
    """Worker: the weights of one DO member (top-level so it pickles into a process pool)."""
    import torch

    torch.set_num_threads(1)  # one process per core
    graph = build_do(data, settings, seed)
    assert graph.weights is not None
    return graph.weights


def _trainings(settings: Mapping[str, Any], config: SelectionConfig) -> list[tuple[int, str]]:
    """Candidate training schedules: each epoch cap without early stopping, plus the dataset's own rule."""
    out = [(int(e), "none") for e in config.epochs]
    rule = str(settings.get("early_stop", "none"))
    if config.early_stop and rule != "none":
        out.append((int(settings.get("epochs", 1000)), rule))
    return out


def cross_validate_ensemble(
    data: BenchData, settings: Mapping[str, Any], config: SelectionConfig, progress: bool = True
) -> list[dict[str, Any]]:
    """K-fold cross-validation of training schedule x ensemble size x edge threshold on the training split.

    Args:
        data: the dataset; only ``train`` and the taxonomy are read (never ``test`` / ``pred``).
        settings: the dataset's DO settings (beta, lr, augmentation, relaxation, early-stopping rule).
        config: the search.
        progress: show a rich progress bar.

    Returns:
        One row per candidate, best first: ``{"epochs", "early_stop", "size", "threshold_scale", "clean",
        "noisy", "score"}`` (pooled Avg F1 in percent; score = mean of clean and noisy).
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    folds = validation_folds(data, config.folds, config.per_video, config.noise, config.slip_rate)
    fold_data, items = [f.data for f in folds], [f.items for f in folds]
    trainings = _trainings(settings, config)
    seeds = member_seeds(config.seed, max(config.sizes))

    jobs = [(k, t, s) for k in range(config.folds) for t in trainings for s in seeds]
    weights: dict[tuple[int, tuple[int, str], int], np.ndarray] = {}
    workers = config.workers or min(len(jobs), os.cpu_count() or 1)
    columns = (TextColumn("cross-validation"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, disable=not progress, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("members", total=len(jobs))

        def job_settings(training: tuple[int, str]) -> dict[str, Any]:
            return {**settings, "epochs": training[0], "early_stop": training[1]}

        if workers <= 1:
            for k, t, s in jobs:
                weights[(k, t, s)] = _member_job(fold_data[k], job_settings(t), s)
                bar.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = {(k, t, s): pool.submit(_member_job, fold_data[k], job_settings(t), s) for k, t, s in jobs}
                for key, future in futures.items():
                    weights[key] = future.result()
                    bar.advance(task)

    relaxed = bool(settings.get("relaxed", True))
    flags: dict[tuple[Any, ...], list[np.ndarray]] = {}
    for k, fold in enumerate(fold_data):
        present = present_steps(data.step_ids, fold.train)
        for t in trainings:
            for size in config.sizes:
                mean = average_weights([weights[(k, t, s)] for s in seeds[:size]])
                for scale in config.scales:
                    threshold = EnsembleConfig(size, float(scale), relaxed).threshold_steps(len(data.step_ids))
                    adjacency = binarize(mean, present, relaxed, threshold_steps=threshold)
                    graph = TaskGraph(data.step_ids, data.step_names, adjacency, mean)
                    for name, seqs in items[k].items():
                        flags.setdefault((t, size, scale, name), []).extend(
                            precondition_violations(graph, seq) for seq in seqs
                        )
    rows = []
    for t in trainings:
        for size in config.sizes:
            for scale in config.scales:
                clean = mistake_scores(flags[(t, size, scale, "clean")]).avg_f1
                noisy = mistake_scores(flags[(t, size, scale, "noisy")]).avg_f1
                rows.append(
                    {
                        "epochs": t[0],
                        "early_stop": t[1],
                        "size": size,
                        "threshold_scale": float(scale),
                        "clean": clean,
                        "noisy": noisy,
                        "score": (clean + noisy) / 2,
                    }
                )
    # Stable sort: among equal scores the earlier (cheaper, smaller) candidate stays first.
    return sorted(rows, key=lambda r: -r["score"])
