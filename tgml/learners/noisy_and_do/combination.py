"""Combining two learners' evidence for an edge: the noisy-AND edge probabilities and the averaged DO weights.

Two TGML learners see the same training executions and score the same candidate edges ``K_i → K_j`` (``K_j`` a
pre-condition of ``K_i``) on different scales: the noisy-AND learner an independent probability ``θ[i, j]``
(`tgml.learners.noisy_and.loss`) kept when ``θ >= c``, Direct Optimization a row-softmax weight averaged over seeds
``Z̄[i, j]`` (`tgml.learners.do.ensemble`) kept when ``Z̄ >= 1/n'``. Each is first put on the scale of its own cut, so
that 1 means "exactly at the learner's own edge threshold"::

    r_AND[i, j] = θ[i, j] / c          r_DO[i, j] = n' · Z̄[i, j]

and the two ratios are combined element-wise by one rule:

- ``geometric``: ``r = sqrt(r_AND · r_DO)`` (a product of the two experts; in log space the mean of their
  log-evidence, so a strong vote of one can make up for a weak vote of the other, but a zero of either vetoes);
- ``both``: ``r = min(r_AND, r_DO)`` (the edge needs both learners: the intersection of their graphs at ``t = 1``);
- ``either``: ``r = max(r_AND, r_DO)`` (the union of their graphs at ``t = 1``).

An edge enters the binary graph when ``r >= t``, one threshold ``t``, then the usual TGML post-processing (unseen
steps removed, cycles broken at their weakest combined edge, the relaxed rule, START / END attached, transitive
reduction; `graphs.postprocess.binarize`).

The noisy-AND learner scores no START / END edges (``θ`` is 0 there; post-processing attaches them), so only the
``either`` rule lets DO's ``K → START`` edges through, and with them the relaxed rule (a step needing START and one
other step keeps START only). Letting DO's evidence alone decide those entries under the other rules was tried in
the cross-validation on the training splits and scored lower on both PREGO datasets, so ``θ``'s zeros stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import numpy as np

from graphs.common.errors import InputError
from graphs.common.safe_text import unknown_name
from graphs.common.settings_files import Bound, check_settings
from graphs.postprocess import binarize
from graphs.task_graph import TaskGraph

METHOD_NAME: Final = "noisy-and-do"
RULES: Final = ("geometric", "both", "either")
# What the stored weights are (procedure queries then use the binary rules, as for noisy-AND graphs).
COMBINED_WEIGHTS: Final = "combined evidence r[step, requires] (1 = each learner's own edge cut)"


# The ratios are 1 at each learner's own cut; at 100 times it, hardly an edge is left (`check_settings`).
COMBINED_THRESHOLD: Final = Bound(0, 100, open_low=True)


@dataclass(frozen=True)
class CombinationConfig:
    """How the two learners' evidence becomes one binary graph.

    Attributes:
        rule: ``geometric``, ``both`` or ``either`` (module docstring).
        threshold: ``t``: an edge needs a combined ratio ``r >= t``.
        relaxed: apply the relaxed post-processing rule.
    """

    rule: str = "geometric"
    threshold: float = 1.0
    relaxed: bool = True

    BOUNDS: ClassVar[Mapping[str, Bound | tuple[str, ...]]] = {"rule": RULES, "threshold": COMBINED_THRESHOLD}

    def __post_init__(self) -> None:
        check_settings(self)


def evidence_ratios(theta: np.ndarray, cut: float, do_mean: np.ndarray, threshold_steps: int) -> np.ndarray:
    """Both learners' evidence on the scale of their own cut: ``r_AND = θ / c`` and ``r_DO = n' · Z̄``.

    Args:
        theta: ``(n+2, n+2)`` noisy-AND edge probabilities (START..END layout).
        cut: the noisy-AND edge cut ``c``.
        do_mean: ``(n+2, n+2)`` averaged DO row-softmax weights.
        threshold_steps: ``n'`` of DO's edge cut ``1/n'``.

    Returns:
        float64 ``(2, n+2, n+2)``: ``r_AND`` then ``r_DO``.
    """
    theta = np.asarray(theta, dtype=np.float64)
    do_mean = np.asarray(do_mean, dtype=np.float64)
    if theta.shape != do_mean.shape:
        raise InputError(f"evidence of shapes {theta.shape} and {do_mean.shape}: the learners saw different taxonomies")
    return np.stack([theta / cut, do_mean * threshold_steps])


def combine_evidence(ratios: np.ndarray, rule: str) -> np.ndarray:
    """``r = sqrt(r_AND · r_DO)`` (geometric), ``min`` (both) or ``max`` (either), element-wise.

    Args:
        ratios: ``(2, ...)`` the two learners' ratios (`evidence_ratios`).
        rule: one of `RULES`.

    Returns:
        The combined ratio, shape ``ratios.shape[1:]``.
    """
    if rule == "geometric":
        return np.sqrt(ratios[0] * ratios[1])
    if rule == "both":
        return ratios.min(axis=0)
    if rule == "either":
        return ratios.max(axis=0)
    raise InputError(unknown_name("combination rule", rule, RULES, None))


def combined_adjacency(ratios: np.ndarray, present: np.ndarray, config: CombinationConfig) -> tuple[np.ndarray,
                                                                                                     np.ndarray]:
    """The binary DAG of the edges with combined ratio ``r >= t``, post-processed like DO.

    Args:
        ratios: ``(2, n+2, n+2)`` `evidence_ratios`.
        present: bool ``(n,)`` key-steps seen in training.
        config: rule, threshold, relaxed rule.

    Returns:
        ``(bool (n+2, n+2) adjacency, float (n+2, n+2) combined ratio r)``.
    """
    combined = combine_evidence(ratios, config.rule)
    # threshold_steps=1 keeps r / t >= 1; cycles break at their weakest combined edge.
    return binarize(combined / config.threshold, present, config.relaxed, threshold_steps=1), combined


def combined_graph(
    noisy_and: TaskGraph,
    do_ensemble: TaskGraph,
    present: np.ndarray,
    config: CombinationConfig,
    info: Mapping[str, Any] | None = None,
) -> TaskGraph:
    """One graph from a noisy-AND graph and a DO-ensemble graph of the same taxonomy (their weights and cuts).

    Args:
        noisy_and: graph with ``θ`` as weights and its cut in ``info["config"]["cut"]``.
        do_ensemble: graph with the mean DO weights and its cut in ``info["threshold"]`` (``1/n'``).
        present: bool ``(n,)`` key-steps seen in training.
        config: rule and threshold.
        info: extra provenance stored in the graph.

    Returns:
        The combined `TaskGraph`; its weights are the combined ratios ``r``.
    """
    if noisy_and.weights is None or do_ensemble.weights is None:
        raise InputError(f"{METHOD_NAME}: both learners' graphs need their weights")
    if noisy_and.step_ids != do_ensemble.step_ids:
        raise InputError(f"{METHOD_NAME}: the two graphs describe different taxonomies")
    cut = float(noisy_and.info["config"]["cut"])
    threshold_steps = round(1.0 / float(do_ensemble.info["threshold"]))
    ratios = evidence_ratios(noisy_and.weights, cut, do_ensemble.weights, threshold_steps)
    adjacency, combined = combined_adjacency(ratios, present, config)
    meta = {
        "method": METHOD_NAME,
        "weights": COMBINED_WEIGHTS,
        "rule": config.rule,
        "threshold": config.threshold,
        "relaxed": config.relaxed,
        "noisy_and_cut": cut,
        "do_threshold": 1.0 / threshold_steps,
        **(info or {}),
    }
    return TaskGraph(noisy_and.step_ids, noisy_and.step_names, adjacency, combined, noisy_and.scenario, meta)
