"""A graph a fold's live chain may check against: the learned graph's pre-conditions that the detector is seen to order.

A graph learned from annotated executions holds pre-conditions this detector rarely recognises (cucumberraita's
"add the chopped cucumber", before "combine all the ingredients"): each such step, missed before the step it gates,
is a false alarm. The graph the detector *can* check is the one its own recognition bears out. So each fold also
learns a graph from the key-steps recognised in its training recordings, by detectors that never saw them, and keeps
a learned pre-condition only where that graph orders the pair too (formula O1 of
`graphs.postprocess.observed_preconditions`).

Nested cross-validation keeps the test fold out, and the validation recordings too:

- the fold's *fitting* recordings (its training recordings less the validation ones) are split in two halves; a
  detector with the fold's settings, trained on one half, recognises the other (`INNER_FOLDS`);
- the fold's own detector (trained on the fitting recordings) recognises its validation recordings;
- recognised sequence of a recording: the first confirmation of each key-step by the a-priori segmenter, in order;
- the validation graph (what the fold's choices are made with) is learned from the fitting recordings' sequences,
  the test graph from those and the validation recordings' sequences, both with the default learner and seed.

Every training recording counts, error-free or not: a graph learned from the error-free ones alone rests on one to
three sequences per fold here, and scored worse on validation (docs/live-benchmark.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np

from graphs.postprocess import observed_preconditions
from graphs.task_graph import TaskGraph
from recognition.feature_folders import FeatureDataset
from recognition.model import FastStepper
from recognition.segmenter import SegmenterConfig
from recognition.train import train_detector
from tgml.bench.live.chain import segment_outputs, stepper_outputs
from tgml.bench.live.detector import EXTRACTOR, LiveDetectorSettings, video
from tgml.bench.live.recordings import FPS, LiveRecording, Recipe
from tgml.bench.process_pool import reported_bar
from tgml.learners.registry import DEFAULT_LEARNER, learner

INNER_FOLDS: Final = 2  # halves of the fitting recordings: each recognised by a detector trained on the other


def recognised_sequence(outputs: np.ndarray, class_step_ids: Sequence[int | None],
                        segmenter: SegmenterConfig) -> tuple[int, ...]:
    """The key-steps the segmenter confirms over a recording's per-second outputs, each at its first confirmation."""
    run = segment_outputs(outputs[:, : len(class_step_ids)], class_step_ids, segmenter, None, once=True)
    return tuple(int(event.step) for event in run.recognised)


def inner_sequences(recipe: Recipe, fitting: Sequence[LiveRecording], settings: LiveDetectorSettings,
                    seed: int) -> dict[str, tuple[int, ...]]:
    """Each fitting recording's recognised sequence, by a detector trained on the other half of them (none with
    fewer than two fitting recordings: nothing to train one on).

    Args:
        recipe: the procedure.
        fitting: the fold's fitting recordings.
        settings: the fold's detector settings (trained here without a validation split, the last epoch kept).
        seed: draws the halves.

    Returns:
        recording id -> recognised sequence.
    """
    if len(fitting) < INNER_FOLDS:
        return {}
    order = np.random.default_rng(seed).permutation(len(fitting))
    halves = [[fitting[i] for i in order[k::INNER_FOLDS]] for k in range(INNER_FOLDS)]
    classes = len(recipe.class_step_ids)
    train = dataclasses.replace(settings.train, val_fraction=0.0, val_videos=(), keep_epoch="last")
    out: dict[str, tuple[int, ...]] = {}
    for k, held in enumerate(halves):
        rest = [r for j, half in enumerate(halves) if j != k for r in half]
        data = FeatureDataset(rest[0].path.parent, tuple(video(r, classes) for r in rest),
                              tuple(video(r, classes) for r in held), recipe.class_names, recipe.class_step_ids,
                              EXTRACTOR, FPS, recipe.scenario)
        bar = reported_bar(f"observed pre-conditions: training detector {k + 1} of {INNER_FOLDS}")
        stepper = FastStepper(train_detector(data, train, progress=bar).model)
        out |= {r.recording_id: recognised_sequence(stepper_outputs(stepper, r.features, str(r.path)),
                                                    recipe.class_step_ids, settings.segmenter) for r in held}
    return out


def recognised_graph(recipe: Recipe, sequences: Sequence[tuple[int, ...]], seed: int) -> TaskGraph:
    """The default learner's graph over recognised sequences (edgeless when none holds a step: nothing is seen
    in any order)."""
    kept = [s for s in sequences if s]
    if not kept:
        n = len(recipe.step_ids)
        return TaskGraph(recipe.step_ids, recipe.step_names, np.zeros((n + 2, n + 2), dtype=bool),
                         scenario=recipe.scenario)
    entry = learner(DEFAULT_LEARNER)
    config = entry.with_seed(entry.config(None), seed)
    return entry.learn(kept, recipe.step_ids, recipe.step_names, config, recipe.scenario).graph


def precondition_count(adjacency: np.ndarray) -> int:
    """How many pre-conditions a graph's ``(n+2, n+2)`` adjacency holds between key-steps (START and END aside)."""
    return int(adjacency[1:-1, 1:-1].sum())


def observed_graph(learned: TaskGraph, recognised: TaskGraph, sequences: int) -> TaskGraph:
    """``learned`` with only the pre-conditions ``recognised`` orders too (O1), its provenance in ``info``."""
    adjacency = observed_preconditions(learned.adjacency, recognised.adjacency)
    info = {**learned.info, "observed": {"recognised_sequences": sequences, "kept": precondition_count(adjacency),
                                         "learned": precondition_count(learned.adjacency)}}
    return dataclasses.replace(learned, adjacency=adjacency, weights=None, info=info)


@dataclasses.dataclass(frozen=True)
class ObservedGraphs:
    """A fold's observed graphs, as file content.

    Attributes:
        graph: the test graph (the learned graph, test fold left out, kept where fitting and validation
            recordings' recognition orders the pairs).
        val_graph: the validation graph (the learned one without the validation recordings, kept where the
            fitting recordings' recognition orders the pairs).
    """

    graph: dict[str, Any]
    val_graph: dict[str, Any]


def observed_graphs(recipe: Recipe, fitting: Sequence[LiveRecording], validation: Mapping[str, np.ndarray],
                    learned: TaskGraph, learned_val: TaskGraph, settings: LiveDetectorSettings,
                    seed: int) -> ObservedGraphs | None:
    """The fold's two observed graphs (None with fewer than two fitting recordings: the learned graphs apply).

    Args:
        recipe: the procedure.
        fitting: the fold's fitting recordings.
        validation: validation recording -> the fold's own detector's per-second outputs on it.
        learned: the learned graph (test fold left out).
        learned_val: the learned graph without the validation recordings either.
        settings: the fold's detector settings.
        seed: the run's seed (halves and learner).

    Returns:
        The `ObservedGraphs`, or None.
    """
    inner = inner_sequences(recipe, fitting, settings, seed)
    if not inner:
        return None
    fitted = [inner[r.recording_id] for r in fitting]
    held = [recognised_sequence(outputs, recipe.class_step_ids, settings.segmenter) for outputs in validation.values()]
    val = observed_graph(learned_val, recognised_graph(recipe, fitted, seed), len(fitted))
    test = observed_graph(learned, recognised_graph(recipe, fitted + held, seed), len(fitted) + len(held))
    return ObservedGraphs(test.to_dict(), val.to_dict())
