"""The ``noisy-and-do`` learner: a noisy-AND graph and a DO-ensemble graph of the same seed, combined edge by edge
(`tgml.learners.noisy_and_do.combination`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from graphs.postprocess import present_steps
from tgml.learners.do.ensemble import train_do_ensemble
from tgml.learners.noisy_and.train import train_noisy_and
from tgml.learners.noisy_and_do.combination import combined_graph
from tgml.learners.noisy_and_do.config import NoisyAndDOConfig
from tgml.learners.result import LearnResult


def train_noisy_and_do(
    sequences: Sequence[Sequence[int]],
    step_ids: Sequence[int],
    step_names: Sequence[str],
    config: NoisyAndDOConfig,
    scenario: str = "",
    progress: bool = False,
) -> LearnResult:
    """Learn both graphs and keep each edge by their combined evidence (``rule`` and ``threshold`` of ``config``).

    Args:
        sequences: raw training key-step sequences (repeats kept).
        step_ids: taxonomy ids, in matrix order.
        step_names: their names.
        config: the combination and both learners' settings.
        scenario: procedure name stored in the graph.
        progress: show the noisy-AND progress bar.

    Returns:
        The combined graph; epochs are the noisy-AND learner's, loss and Sequence Accuracy are not computed (NaN).
    """
    noisy_and = train_noisy_and(sequences, step_ids, step_names, config.noisy_and, scenario, progress)
    do_ensemble = train_do_ensemble(sequences, step_ids, step_names, config.do_ensemble, scenario).graph
    info = {"noisy_and_seed": config.seed, "member_seeds": do_ensemble.info.get("member_seeds", [])}
    graph = combined_graph(noisy_and.graph, do_ensemble, present_steps(step_ids, sequences), config.combination, info)
    return LearnResult(graph, noisy_and.epochs_run, math.nan, math.nan)
