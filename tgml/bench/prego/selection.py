"""Choosing a method's settings on the training split only (``prego-bench select``): no test data is ever used.

K-fold cross-validation over the *training* videos. Each fold trains DO members on the other folds and scores
PREGO-style validation items built from its held-out videos (`synthetic_slips`: a correct prefix, then one
mistaken step), clean (a stand-in for GT mode) and perturbed at rate ``noise`` (a stand-in for PRED mode). Each
candidate (training schedule x ensemble size x edge threshold scale) pools its flags over the folds; the best mean
of the clean and noisy Avg F1 wins, and one configuration per dataset serves both modes. ``do-cv`` is the search
with single members (size 1) whose epoch caps keep the dataset's early-stopping rule; ``do-ensemble`` searches
sizes too, and caps without early stopping beside the dataset's own rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphs.checker import precondition_violations
from graphs.common.errors import InputError
from graphs.common.settings_files import as_written
from graphs.mistake_metrics import mistake_scores
from graphs.postprocess import binarize, present_steps, scaled_threshold_steps
from graphs.precision_recall import measured
from graphs.task_graph import TaskGraph
from tgml.bench.perturb import perturb_sequences
from tgml.bench.prego.data import BenchData
from tgml.bench.process_pool import run_jobs
from tgml.learners.do.config import DOConfig
from tgml.learners.do.ensemble import EnsembleConfig, average_weights, mean_weights_graph, member_seeds
from tgml.learners.noisy_and.config import NoisyAndConfig
from tgml.learners.noisy_and_do.combination import RULES, CombinationConfig, combined_adjacency, evidence_ratios
from tgml.learners.registry import learner
from tgml.sequences import first_occurrence


def synthetic_slips(
    sequences: Sequence[Sequence[int]], step_ids: Sequence[int], per_video: int, seed: int, slip_rate: float = 0.5
) -> list[tuple[int, ...]]:
    """PREGO-like validation items from held-out training videos: a correct prefix, then one mistaken step.

    The mistaken step is, with probability ``1 - slip_rate``, a later step of the same video done too early
    (skipping the true next step, an order mistake); otherwise a random key-step of the taxonomy not done yet
    (a slip: a wrong or foreign action, possibly one never seen in training). The last step is the mistake,
    as in the PREGO protocol (docs/method.md).

    Args:
        sequences: held-out training sequences (raw; the prefix uses first occurrences).
        step_ids: the taxonomy.
        per_video: items drawn per video (videos with fewer than 3 distinct steps give none).
        seed: random cut positions and mistakes.
        slip_rate: share of random-slip mistakes.

    Returns:
        Key-step sequences whose last step is the mistake.
    """
    if not 0.0 <= slip_rate <= 1.0:
        raise InputError(f"slip rate {slip_rate} is outside [0, 1]")
    rng = np.random.default_rng(seed)
    taxonomy = np.asarray(step_ids, dtype=np.int64)
    items: list[tuple[int, ...]] = []
    for seq in sequences:
        steps = list(first_occurrence([int(s) for s in seq]))
        if len(steps) < 3:
            continue
        for _ in range(per_video):
            cut = int(rng.integers(1, len(steps) - 1))
            prefix = steps[:cut]
            if slip_rate > 0 and rng.random() < slip_rate:  # no draw at 0: same stream as order mistakes only
                pool = taxonomy[~np.isin(taxonomy, prefix)]
            else:
                pool = np.asarray(steps[cut + 1 :], dtype=np.int64)
            items.append((*prefix, int(rng.choice(pool))))
    return items


def synthetic_mistakes(sequences: Sequence[Sequence[int]], per_video: int, seed: int) -> list[tuple[int, ...]]:
    """PREGO-like validation items from held-out *training* videos (no test data involved).

    Each item is a correct prefix of a video's first-occurrence sequence followed by a step of that video done too
    early (one that comes later, skipping the true next step): the last step is the mistake, as in the PREGO
    protocol (docs/method.md).

    Args:
        sequences: held-out training sequences.
        per_video: items drawn per video.
        seed: random cut positions and mistakes.

    Returns:
        Key-step sequences whose last step is the mistake.
    """
    return synthetic_slips(sequences, (), per_video, seed, slip_rate=0.0)


@dataclass(frozen=True)
class ValidationFold:
    """One cross-validation fold of the training split.

    Attributes:
        data: the dataset with ``train`` cut down to the other folds' videos (no test sequences).
        items: ``{"clean": [...], "noisy": [...]}`` validation sequences from the held-out videos, last step the
            mistake; ``noisy`` is ``clean`` perturbed (a stand-in for recognition errors).
    """

    data: BenchData
    items: dict[str, list[tuple[int, ...]]]


def validation_folds(
    data: BenchData, folds: int, per_video: int, noise: float, slip_rate: float
) -> list[ValidationFold]:
    """Split the training videos into fixed folds and build each fold's validation items (`synthetic_slips`).

    The split is the same for every call (fixed permutation), so all candidates of a search see the same folds.

    Args:
        data: the dataset; only ``train`` and the taxonomy are read.
        folds: number of folds, between 2 and the number of training videos.
        per_video: validation items per held-out video.
        noise: perturbation rate of the ``noisy`` items.
        slip_rate: share of random-slip mistakes.

    Returns:
        One `ValidationFold` per fold.
    """
    if not 2 <= folds <= len(data.train):
        raise InputError(f"--folds {folds}: need between 2 and {len(data.train)} (training videos)")
    order = np.random.default_rng(0).permutation(len(data.train))
    out = []
    for k, held in enumerate(np.array_split(order, folds)):
        held_set = set(held.tolist())
        train = tuple(s for j, s in enumerate(data.train) if j not in held_set)
        clean = synthetic_slips([data.train[j] for j in sorted(held_set)], data.step_ids, per_video, 100 + k, slip_rate)
        noisy = perturb_sequences(clean, noise, data.step_ids, seed=200 + k)
        fold_data = BenchData(data.name, data.scenario, data.step_ids, data.step_names, train, {})
        out.append(ValidationFold(fold_data, {"clean": clean, "noisy": noisy}))
    return out


@dataclass(frozen=True)
class SelectionConfig:
    """The search behind ``prego-bench select``.

    Attributes:
        folds: folds over the training videos (the number of videos = leave-one-video-out).
        epochs: DO epoch caps tried.
        caps_keep_rule: train to each cap under the dataset's early-stopping rule (the ``do-cv`` search) instead
            of without early stopping.
        early_stop: also try the dataset's own early-stopping rule with its configured epoch cap.
        scales: edge threshold scales ``s`` (threshold ``1 / round(n * s)``).
        sizes: ensemble sizes; members are trained once for the largest and the first ``m`` form size ``m``.
        noise: perturbation rate of the PRED-mode stand-in.
        slip_rate: share of random-slip validation mistakes (`synthetic_slips`).
        per_video: validation items per held-out video.
        seed: the seed whose `tgml.learners.do.ensemble.member_seeds` are trained.
        workers: processes (0 = one per core).
    """

    folds: int = 5
    epochs: tuple[int, ...] = (25, 50, 75, 100, 200, 400, 1200)
    caps_keep_rule: bool = False
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
            raise InputError(f"SelectionConfig.{name} = {as_written(getattr(self, name))}: {why}")

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


def do_cv_search(
    folds: int, epochs: tuple[int, ...], scales: tuple[float, ...], noise: float = 0.2, workers: int = 0
) -> SelectionConfig:
    """The search that chose the ``do-cv`` settings: one member (seed 1) trained to each epoch cap under the
    dataset's early-stopping rule, scored on order mistakes only (no random slips).

    Args:
        folds: folds over the training videos.
        epochs: epoch caps.
        scales: edge threshold scales.
        noise: perturbation rate of the PRED-mode stand-in.
        workers: processes (0 = one per core).

    Returns:
        The search, for `cross_validate`.
    """
    return SelectionConfig(
        folds=folds,
        epochs=epochs,
        caps_keep_rule=True,
        early_stop=False,
        scales=scales,
        sizes=(1,),
        noise=noise,
        slip_rate=0.0,
        workers=workers,
    )


def training_schedules(settings: Mapping[str, Any], config: SelectionConfig) -> list[tuple[int, str]]:
    """Candidate ``(epoch cap, early-stopping rule)`` pairs of a search, in the order they are reported.

    Args:
        settings: the dataset's DO settings (their ``early_stop`` rule and ``epochs`` cap).
        config: the search.

    Returns:
        Each cap, under the dataset's rule or none (`SelectionConfig.caps_keep_rule`), then the dataset's rule
        with its own cap when `SelectionConfig.early_stop` asks for it; no pair twice.
    """
    rule = str(settings.get("early_stop", "none"))
    out = [(int(e), rule if config.caps_keep_rule else "none") for e in config.epochs]
    if config.early_stop and rule != "none":
        out.append((int(settings.get("epochs", 1000)), rule))
    return list(dict.fromkeys(out))


def _member_weights(
    sequences: Sequence[Sequence[int]], step_ids: Sequence[int], step_names: Sequence[str], config: DOConfig
) -> np.ndarray:
    """Worker job: the weights of one DO member (module-level so worker processes can import it)."""
    from tgml.learners.do.train import train_do  # torch loads in the worker, when a graph is trained

    weights = train_do(sequences, step_ids, step_names, config).graph.weights
    assert weights is not None
    return weights


def cross_validate(
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
        "noisy", "score"}`` (pooled Avg F1 in percent; score = mean of clean and noisy). Among equal scores the
        earlier candidate (smaller cap, size, scale as listed) stays first.
    """
    folds = validation_folds(data, config.folds, config.per_video, config.noise, config.slip_rate)
    schedules = training_schedules(settings, config)
    seeds = member_seeds(config.seed, max(config.sizes))
    jobs = [(k, t, s) for k in range(len(folds)) for t in schedules for s in seeds]
    arguments = [
        (folds[k].data.train, data.step_ids, data.step_names,
         learner("do").config({**settings, "early_stop": rule}, s, cap))
        for k, (cap, rule), s in jobs
    ]
    trained = run_jobs(_member_weights, arguments, config.workers, "cross-validation", progress)
    weights = dict(zip(jobs, trained, strict=True))

    relaxed = learner("do").config(settings).relaxed  # the DO table's rule, or DOConfig's default
    flags: dict[tuple[Any, ...], list[np.ndarray]] = {}
    for k, fold in enumerate(folds):
        present = present_steps(data.step_ids, fold.data.train)
        for t in schedules:
            for size in config.sizes:
                members = [weights[(k, t, s)] for s in seeds[:size]]
                for scale in config.scales:
                    n_threshold = scaled_threshold_steps(len(data.step_ids), scale)
                    graph = mean_weights_graph(data.step_ids, data.step_names, members, present, relaxed, n_threshold)
                    for name, items in fold.items.items():
                        flags.setdefault((t, size, scale, name), []).extend(
                            precondition_violations(graph, seq) for seq in items
                        )
    rows = []
    for t in schedules:
        for size in config.sizes:
            for scale in config.scales:
                clean = measured(mistake_scores(flags[(t, size, scale, "clean")]).avg_f1, "cross-validation")
                noisy = measured(mistake_scores(flags[(t, size, scale, "noisy")]).avg_f1, "cross-validation")
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
    return sorted(rows, key=lambda r: -r["score"])  # stable: ties keep the earlier candidate first


def _noisy_and_theta(
    sequences: Sequence[Sequence[int]], step_ids: Sequence[int], step_names: Sequence[str],
    settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    """Worker job: the edge probabilities ``θ`` (START..END layout) of one noisy-AND graph."""
    from tgml.learners.noisy_and.train import train_noisy_and  # torch loads in the worker, when a graph is trained

    graph = train_noisy_and(sequences, step_ids, step_names, learner("noisy-and").config(settings, seed)).graph
    assert graph.weights is not None
    return graph.weights


@dataclass(frozen=True)
class CombinationSearch:
    """The search behind ``prego-bench select --method noisy-and-do``.

    Attributes:
        rules: combination rules tried (`tgml.learners.noisy_and_do.combination.RULES`).
        thresholds: thresholds ``t`` on the combined evidence ratio tried.
        selection: folds, validation items, seed and workers (its epoch / scale / size grid is not used: each
            learner keeps the settings of its own table).
    """

    rules: tuple[str, ...] = RULES
    thresholds: tuple[float, ...] = (0.5, 0.7, 1.0, 1.2, 1.4, 1.7, 2.0)
    selection: SelectionConfig = SelectionConfig()

    def __post_init__(self) -> None:
        bad = next((r for r in self.rules if r not in RULES), None)
        if not self.rules or bad is not None:
            raise InputError(f"CombinationSearch.rules = {as_written(list(self.rules))}"
                             f": expected some of {', '.join(RULES)}")
        if not self.thresholds or any(not (math.isfinite(t) and t > 0) for t in self.thresholds):
            raise InputError(f"CombinationSearch.thresholds = {as_written(list(self.thresholds))}"
                             ": expected finite numbers > 0")


def combination_cross_validate(
    data: BenchData, settings: Mapping[str, Any], search: CombinationSearch, progress: bool = True
) -> list[dict[str, Any]]:
    """K-fold cross-validation of the combination rule and threshold of ``noisy-and-do`` on the training split.

    Each fold trains the noisy-AND graph and the DO-ensemble members with the settings of the ``[noisy-and-do]``
    table's two sub-tables, on the other folds' videos; every (rule, threshold) candidate, and each learner alone
    with its own cut (rows ``noisy-and`` and ``do-ensemble``, for comparison in the same folds), is scored on the
    held-out items like `cross_validate`.

    Args:
        data: the dataset; only ``train`` and the taxonomy are read (never ``test`` / ``pred``).
        settings: the ``[noisy-and-do]`` table (with its ``noisy-and`` and ``do-ensemble`` sub-tables).
        search: the candidates and folds.
        progress: show a rich progress bar.

    Returns:
        One row per candidate, best first: ``{"rule", "threshold", "clean", "noisy", "score"}`` (pooled Avg F1
        in percent); the two learners alone have rule ``noisy-and`` / ``do-ensemble`` and threshold 1.
    """
    config = search.selection
    folds = validation_folds(data, config.folds, config.per_video, config.noise, config.slip_rate)
    and_settings, ensemble_settings = dict(settings["noisy-and"]), dict(settings["do-ensemble"])
    ensemble = EnsembleConfig(size=ensemble_settings.get("ensemble_size", 5),
                              threshold_scale=ensemble_settings.get("threshold_scale", 1.0))
    seeds = member_seeds(config.seed, ensemble.size)
    do_settings = {k: v for k, v in ensemble_settings.items() if k not in ("ensemble_size", "threshold_scale")}
    members = run_jobs(
        _member_weights,
        [(fold.data.train, data.step_ids, data.step_names, learner("do").config(do_settings, s))
         for fold in folds for s in seeds],
        config.workers, "cross-validation (DO members)", progress,
    )
    thetas = run_jobs(
        _noisy_and_theta,
        [(fold.data.train, data.step_ids, data.step_names, and_settings, config.seed) for fold in folds],
        config.workers, "cross-validation (noisy-AND)", progress,
    )
    cut = float(and_settings.get("cut", NoisyAndConfig.cut))
    threshold_steps = ensemble.threshold_steps(len(data.step_ids))
    alone = [("noisy-and", 1.0), ("do-ensemble", 1.0)]
    candidates = alone + [(rule, float(t)) for rule in search.rules for t in search.thresholds]
    flags: dict[tuple[str, float, str], list[np.ndarray]] = {}
    for k, fold in enumerate(folds):
        present = present_steps(data.step_ids, fold.data.train)
        mean = average_weights(members[k * ensemble.size : (k + 1) * ensemble.size])
        ratios = evidence_ratios(thetas[k], cut, mean, threshold_steps)
        for rule, t in candidates:
            if rule in RULES:
                combo = CombinationConfig(rule, t, bool(settings.get("relaxed", True)))
                adjacency, weights = combined_adjacency(ratios, present, combo)
            else:  # one learner alone: its ratio against its own cut (1), with its own relaxed rule
                table = and_settings if rule == "noisy-and" else ensemble_settings
                weights = ratios[0] if rule == "noisy-and" else ratios[1]
                adjacency = binarize(weights, present, bool(table.get("relaxed", True)), threshold_steps=1)
            graph = TaskGraph(tuple(data.step_ids), tuple(data.step_names), adjacency, weights)
            for name, items in fold.items.items():
                flags.setdefault((rule, t, name), []).extend(precondition_violations(graph, seq) for seq in items)
    rows = []
    for rule, t in candidates:
        clean = measured(mistake_scores(flags[(rule, t, "clean")]).avg_f1, "cross-validation")
        noisy = measured(mistake_scores(flags[(rule, t, "noisy")]).avg_f1, "cross-validation")
        rows.append({"rule": rule, "threshold": t, "clean": clean, "noisy": noisy, "score": (clean + noisy) / 2})
    return sorted(rows, key=lambda r: -r["score"])  # stable: ties keep the earlier candidate first
