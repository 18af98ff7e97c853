"""Choosing a method's settings on the training split only (``prego-bench select``): no test data is ever used."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphs.checker import precondition_violations
from graphs.errors import InputError
from graphs.mistake_metrics import mistake_scores
from graphs.postprocess import binarize, present_steps, scaled_threshold_steps
from graphs.task_graph import TaskGraph
from tgml.bench.perturb import perturb_sequences
from tgml.bench.prego.data import BenchData
from tgml.bench.prego.methods import build_do


def synthetic_slips(
    sequences: Sequence[Sequence[int]], step_ids: Sequence[int], per_video: int, seed: int, slip_rate: float = 0.5
) -> list[tuple[int, ...]]:
    """PREGO-like validation items from held-out training videos: a correct prefix, then one mistaken step.

    The mistaken step is, with probability ``1 - slip_rate``, a later step of the same video done too early
    (skipping the true next step, an order mistake); otherwise a random key-step of the taxonomy not done yet
    (a slip: a wrong or foreign action, possibly one never seen in training). The last step is the mistake,
    as in SPEC §2.

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
        steps = list(dict.fromkeys(int(s) for s in seq))
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
    early (one that comes later, skipping the true next step): the last step is the mistake, as in SPEC §2.

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


def cross_validate(
    data: BenchData,
    settings: Mapping[str, Any],
    folds: int,
    epochs_grid: Sequence[int],
    scale_grid: Sequence[float],
    noise: float = 0.2,
    seed: int = 1,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """K-fold cross-validation of DO epochs x edge-threshold scale on the training split (how ``do-cv`` was chosen).

    Each fold trains DO on the other folds, scores `synthetic_mistakes` of its held-out videos clean and perturbed
    at rate ``noise`` (a stand-in for recognition errors), and pools the flags over folds.

    Returns:
        One row per candidate: ``{"epochs", "threshold_scale", "clean", "noisy", "score"}`` (Avg F1, score = mean
        of clean and noisy), best first.
    """
    from rich.console import Console
    from rich.progress import Progress

    flags: dict[tuple[int, float, str], list[np.ndarray]] = {}
    with Progress(disable=not progress, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("cross-validation", total=folds * len(epochs_grid))
        for fold in validation_folds(data, folds, per_video=3, noise=noise, slip_rate=0.0):
            present = present_steps(data.step_ids, fold.data.train)
            for epochs in epochs_grid:
                graph = build_do(fold.data, settings, seed, epochs)
                assert graph.weights is not None
                for scale in scale_grid:
                    n_threshold = scaled_threshold_steps(graph.n_steps, scale)
                    adj = binarize(
                        graph.weights, present, bool(settings.get("relaxed", True)), threshold_steps=n_threshold
                    )
                    candidate = TaskGraph(graph.step_ids, graph.step_names, adj, graph.weights)
                    for name, items in fold.items.items():
                        flags.setdefault((epochs, scale, name), []).extend(
                            precondition_violations(candidate, s) for s in items
                        )
                bar.advance(task)
    rows = []
    for epochs in epochs_grid:
        for scale in scale_grid:
            clean_f1 = mistake_scores(flags[(epochs, scale, "clean")]).avg_f1
            noisy_f1 = mistake_scores(flags[(epochs, scale, "noisy")]).avg_f1
            rows.append(
                {
                    "epochs": epochs,
                    "threshold_scale": scale,
                    "clean": clean_f1,
                    "noisy": noisy_f1,
                    "score": (clean_f1 + noisy_f1) / 2,
                }
            )
    return sorted(rows, key=lambda r: -r["score"])
