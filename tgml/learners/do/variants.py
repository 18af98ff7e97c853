"""``do-cv``: one DO graph re-cut at the threshold ``1 / round(n * threshold_scale)`` (ours; the scale and the epochs
are chosen by cross-validation on a training split, ``prego-bench select``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from graphs.common.settings_files import field_names
from graphs.postprocess import present_steps
from tgml.learners.do.config import DOConfig, DOCVConfig
from tgml.learners.do.ensemble import EnsembleConfig, mean_weights_graph
from tgml.learners.do.train import train_do
from tgml.learners.result import LearnResult


def train_do_cv(
    sequences: Sequence[Sequence[int]],
    step_ids: Sequence[int],
    step_names: Sequence[str],
    config: DOCVConfig,
    scenario: str = "",
    progress: bool = False,
) -> LearnResult:
    """Train DO with ``config``'s DO fields and re-binarise its weights at the scaled cut.

    Args:
        sequences: raw training key-step sequences (repeats kept).
        step_ids: taxonomy ids, in matrix order.
        step_names: their names.
        config: DO settings and the cut's ``threshold_scale``.
        scenario: procedure name stored in the graph.
        progress: show DO's progress bar.

    Returns:
        The re-cut graph (``info["method"] = "do-cv"``, its threshold recorded); Sequence Accuracy is not recomputed.
    """
    training = DOConfig(**{name: getattr(config, name) for name in field_names(DOConfig)})
    result = train_do(sequences, step_ids, step_names, training, scenario, progress)
    graph = result.graph
    assert graph.weights is not None
    cut = EnsembleConfig(1, config.threshold_scale, config.relaxed)  # one member: only its cut and relaxed rule apply
    n_threshold = cut.threshold_steps(graph.n_steps)
    info = {**graph.info, "method": "do-cv", "threshold_scale": cut.threshold_scale, "threshold": 1.0 / n_threshold}
    present = present_steps(graph.step_ids, sequences)
    recut = mean_weights_graph(graph.step_ids, graph.step_names, [graph.weights], present, cut.relaxed, n_threshold,
                               graph.scenario, info)
    return LearnResult(recut, result.epochs_run, result.final_loss, math.nan)
