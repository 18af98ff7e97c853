"""Seed ensembles of Direct Optimization graphs: several DO models that differ only in their seed, as one graph.

Method: train ``size`` DO models, average their row-softmax weight matrices ``Z`` (rows stay distributions, so
the mean is again a valid TGML weight matrix), and post-process the mean with the usual TGML steps (unseen steps
removed, edges kept where ``Z[i, j] >= 1 / n'``, cycles broken...), with the cut ``n' = round(n * threshold_scale)``
(scale 1 is the method's own ``1/n``). The result is an ordinary `graphs.TaskGraph` (binary DAG + the averaged
weights), so `graphs.PreconditionChecker` and the live pipeline use it unchanged.

How the benchmark chooses the ensemble's settings on training data only lives with the benchmark
(`tgml.bench.prego.selection`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphs.common.errors import InputError
from graphs.common.options import MAX_SEED
from graphs.common.settings_files import as_written, field_names
from graphs.postprocess import binarize, present_steps, scaled_threshold_steps
from graphs.task_graph import TaskGraph
from tgml.learners.do.config import DOConfig, DOEnsembleConfig
from tgml.learners.result import LearnResult


@dataclass(frozen=True)
class EnsembleConfig:
    """How the member graphs are combined.

    Attributes:
        size: number of DO members (seeds) averaged.
        threshold_scale: edges need ``Z[i, j] >= 1 / round(n * threshold_scale)`` (1 = the method's ``1/n``).
        relaxed: apply the relaxed post-processing rule (a step that ends up with no pre-condition but START
            keeps its strongest one).
    """

    size: int = 5
    threshold_scale: float = 1.0
    relaxed: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise InputError(f"EnsembleConfig.size = {as_written(self.size)}: expected an integer >= 1")
        scale = self.threshold_scale
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not (math.isfinite(scale) and scale > 0):
            raise InputError(f"EnsembleConfig.threshold_scale = {as_written(scale)}: expected a finite number > 0")
        if not isinstance(self.relaxed, bool):
            raise InputError(f"EnsembleConfig.relaxed = {as_written(self.relaxed)}: expected true or false")

    def threshold_steps(self, n_steps: int) -> int:
        """The ``n'`` of the edge threshold ``1 / n'`` for a taxonomy of ``n_steps`` key-steps."""
        return scaled_threshold_steps(n_steps, self.threshold_scale)


def member_seeds(seed: int, size: int) -> tuple[int, ...]:
    """Training seeds of the ensemble run under seed ``seed``.

    Blocks ``[seed * size, seed * size + size)`` never overlap for different seeds, so the spread over seeds
    measures independent ensembles. They wrap around past `MAX_SEED` (any seed a user may give has its members, and
    only seeds above ``MAX_SEED / size`` can share one with a smaller seed).
    """
    return tuple((seed * size + k) % (MAX_SEED + 1) for k in range(size))


def average_weights(weights: Sequence[np.ndarray]) -> np.ndarray:
    """Element-wise mean of member weight matrices (the row-softmax ``Z`` of TGML, one per seed).

    Args:
        weights: ``K`` float arrays of the same ``(n+2, n+2)`` shape.

    Returns:
        float64 ``(n+2, n+2)`` mean; a mean of row-stochastic matrices is row-stochastic.
    """
    if not weights:
        raise InputError("ensemble: no member weights to average")
    stack = np.stack([np.asarray(w, dtype=np.float64) for w in weights])  # (K, n+2, n+2)
    return stack.mean(axis=0)


def mean_weights_graph(
    step_ids: Sequence[int],
    step_names: Sequence[str],
    weights: Sequence[np.ndarray],
    present: np.ndarray,
    relaxed: bool,
    threshold_steps: int,
    scenario: str = "",
    info: Mapping[str, Any] | None = None,
) -> TaskGraph:
    """The task graph of the mean of some weight matrices, post-processed with the edge cut ``1 / threshold_steps``.

    One matrix is its own mean: this also re-cuts a single graph's weights at another threshold.

    Args:
        step_ids: taxonomy ids, in matrix order.
        step_names: their names.
        weights: ``K >= 1`` float ``(n+2, n+2)`` matrices.
        present: bool ``(n,)`` key-steps seen in training (the others leave the graph).
        relaxed: apply the relaxed post-processing rule.
        threshold_steps: ``n'`` of the edge cut ``1 / n'``.
        scenario: procedure name stored in the graph.
        info: provenance stored in the graph.

    Returns:
        The binary DAG with the mean weights.
    """
    mean = average_weights(weights)  # (n+2, n+2)
    adjacency = binarize(mean, present, relaxed, threshold_steps=threshold_steps)
    return TaskGraph(tuple(step_ids), tuple(step_names), adjacency, mean, scenario, dict(info or {}))


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
    n_threshold = config.threshold_steps(first.n_steps)
    meta = {
        "method": "do-ensemble",
        "members": len(members),
        "threshold_scale": config.threshold_scale,
        "threshold": 1.0 / n_threshold,
        "relaxed": config.relaxed,
        **(info or {}),
    }
    weights = [m.weights for m in members if m.weights is not None]
    return mean_weights_graph(
        first.step_ids, first.step_names, weights, present, config.relaxed, n_threshold, first.scenario, meta
    )


def train_ensemble(
    sequences: Sequence[Sequence[int]],
    step_ids: Sequence[int],
    step_names: Sequence[str],
    training: DOConfig,
    config: EnsembleConfig,
    seed: int,
    scenario: str = "",
) -> TaskGraph:
    """Train the members of one ensemble, one after the other, and combine them.

    Args:
        sequences: raw training key-step sequences (repeats kept).
        step_ids: taxonomy ids, in matrix order.
        step_names: their names.
        training: DO settings of every member (its seed is replaced by the member's).
        config: ensemble settings.
        seed: the ensemble's seed; the members use `member_seeds` of it.
        scenario: procedure name stored in the graph.

    Returns:
        The ensemble graph; ``info`` lists the member seeds and how many epochs each ran.
    """
    from tgml.learners.do.train import train_do  # torch loads only when a graph is trained

    seeds = member_seeds(seed, config.size)
    members = [
        train_do(sequences, step_ids, step_names, dataclasses.replace(training, seed=s), scenario).graph for s in seeds
    ]
    info = {"member_seeds": list(seeds), "member_epochs": [int(m.info.get("epochs_run", 0)) for m in members]}
    return ensemble_graph(members, present_steps(step_ids, sequences), config, info)


def train_do_ensemble(
    sequences: Sequence[Sequence[int]],
    step_ids: Sequence[int],
    step_names: Sequence[str],
    config: DOEnsembleConfig,
    scenario: str = "",
    progress: bool = False,
) -> LearnResult:
    """The ``do-ensemble`` learner (`tgml.learners.registry`): `train_ensemble` with one config.

    Args:
        sequences: raw training key-step sequences (repeats kept).
        step_ids: taxonomy ids, in matrix order.
        step_names: their names.
        config: DO settings of every member, the ensemble's size and cut; ``config.seed`` is the ensemble's seed.
        scenario: procedure name stored in the graph.
        progress: unused (the members train without a progress bar).

    Returns:
        The ensemble graph; epochs are the members' mean, loss and Sequence Accuracy are not computed (NaN).
    """
    training = DOConfig(**{name: getattr(config, name) for name in field_names(DOConfig)})
    ensemble = EnsembleConfig(config.ensemble_size, config.threshold_scale, config.relaxed)
    graph = train_ensemble(sequences, step_ids, step_names, training, ensemble, config.seed, scenario)
    epochs = graph.info.get("member_epochs") or [0]
    return LearnResult(graph, round(sum(epochs) / len(epochs)), math.nan, math.nan)
