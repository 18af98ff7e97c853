"""Choosing a method's settings on the training split only (``prego-bench select``): no test data is ever used."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from graphs.checker import precondition_violations
from graphs.errors import InputError
from graphs.mistake_metrics import mistake_scores
from graphs.task_graph import TaskGraph
from tgml.perturb import perturb_sequences
from tgml.prego.data import BenchData
from tgml.prego.methods import build_do


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
    from tgml.ensemble import synthetic_slips  # lazy: tgml.ensemble imports this package at load time

    return synthetic_slips(sequences, (), per_video, seed, slip_rate=0.0)


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
    from rich.progress import Progress

    from graphs.postprocess import binarize

    if not 2 <= folds <= len(data.train):
        raise InputError(f"--folds {folds}: need between 2 and {len(data.train)} (training videos)")
    order = np.random.default_rng(0).permutation(len(data.train))  # fixed folds: candidates see the same split
    flags: dict[tuple[int, float, str], list[np.ndarray]] = {}
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("cross-validation", total=folds * len(epochs_grid))
        for k, held in enumerate(np.array_split(order, folds)):
            held_set = set(held.tolist())
            train = tuple(s for j, s in enumerate(data.train) if j not in held_set)
            clean = synthetic_mistakes([data.train[j] for j in sorted(held_set)], per_video=3, seed=100 + k)
            noisy = perturb_sequences(clean, noise, data.step_ids, seed=200 + k)
            fold_data = BenchData(data.name, data.scenario, data.step_ids, data.step_names, train, {})
            present = np.isin(np.asarray(data.step_ids), [s for seq in train for s in seq])
            for epochs in epochs_grid:
                graph = build_do(fold_data, settings, seed, epochs)
                assert graph.weights is not None
                for scale in scale_grid:
                    n_threshold = max(1, round(graph.n_steps * scale))
                    adj = binarize(
                        graph.weights, present, bool(settings.get("relaxed", True)), threshold_steps=n_threshold
                    )
                    candidate = TaskGraph(graph.step_ids, graph.step_names, adj, graph.weights)
                    for name, items in (("clean", clean), ("noisy", noisy)):
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
