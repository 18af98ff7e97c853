"""What every learner shares: the `Learner` signature, its `LearnResult`, the info it records, and learning from an
annotation file.

A learner is a function ``(sequences, step_ids, step_names, config, scenario, progress) -> LearnResult``: raw key-step
id sequences (repeats kept) in, a post-processed `graphs.TaskGraph` out. Each one lives in its own folder of
`tgml.learners` and is named once in `tgml.learners.registry`. Torch-free: a learner that needs torch imports it in
its own module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from graphs.annotations import EVERY_VIDEO, Annotations, TrainingSelection, TrainingVideos, load_annotations
from graphs.task_graph import TaskGraph
from graphs.training_sources import execution_identity


@dataclass(frozen=True)
class LearnResult:
    """Outcome of one learner run.

    Attributes:
        graph: post-processed binary DAG (with its weights, when the learner has any); ``info`` holds the settings.
        epochs_run: epochs actually trained (0 for a learner without training epochs).
        final_loss: the learner's loss at the end (NaN for a learner without a loss).
        sequence_accuracy: Sequence Accuracy of the binary graph on the first-occurrence training sequences.
    """

    graph: TaskGraph
    epochs_run: int
    final_loss: float
    sequence_accuracy: float


ConfigT = TypeVar("ConfigT", contravariant=True)


class Learner(Protocol[ConfigT]):
    """The signature every learner of `tgml.learners.registry` has."""

    def __call__(self, sequences: Sequence[Sequence[int]], step_ids: Sequence[int], step_names: Sequence[str],
                 config: ConfigT, scenario: str = "", progress: bool = False) -> LearnResult: ...


C = TypeVar("C")


def learn_from_annotations(
    learner: Learner[C], annotations: str | Path, scenario: str, config: C, progress: bool = False,
    videos: TrainingVideos = EVERY_VIDEO,
) -> LearnResult:
    """Learn one scenario of an annotation file with any learner, from the executions ``videos`` keeps.

    Args:
        learner: a learner (`tgml.learners.registry.LearnerEntry.trainer` gives the one of a name).
        annotations: annotation JSON (format in docs/data-and-citations.md).
        scenario: the procedure to learn.
        config: the learner's settings.
        progress: show the progress bar.
        videos: which executions to learn from (default: every one, as the benchmarks; ``tgml train`` leaves out
            those with an annotated mistake).

    Returns:
        As `learn_selection`.
    """
    # Only the order is learned; the commands check the times first (tgml train, unless --order-only).
    read = load_annotations(annotations, check_times=False)
    return learn_selection(learner, read, scenario, read.training_selection(scenario, videos), config, progress)


def learn_selection(learner: Learner[C], read: Annotations, scenario: str, chosen: TrainingSelection, config: C,
                    progress: bool = False) -> LearnResult:
    """Learn one scenario from the executions ``chosen`` of the annotations ``read`` (for a command that has read
    the file and chosen its executions already, and uses the choice again: `tgml train`).

    Args:
        learner: a learner.
        read: the annotation file.
        scenario: the procedure to learn.
        chosen: ``read.training_selection(scenario, ...)``.
        config: the learner's settings.
        progress: show the progress bar.

    Returns:
        The learner's result; its graph's ``info["train_videos"]`` names the executions it learned from (``stream-detect
        eval`` warns when it judges one of them, as for a detector's), ``info["train_identities"]`` what each was (its
        annotated segments' `graphs.training_sources.execution_identity`), ``info["left_out"]`` those left out, when
        any was.
    """
    result = learner(chosen.sequences, chosen.step_ids, chosen.step_names, config, scenario, progress)
    # Beside each name, what the execution was (`graphs.training_sources`): eval knows a renamed copy of one, and
    # another execution under its name, for what they are.
    identified = {name: execution_identity(read.videos[name], read.taxonomy[scenario]) for name in chosen.kept}
    identities = {name: {"annotation": identity} for name, identity in identified.items() if identity is not None}
    info = {**result.graph.info, "train_videos": list(chosen.kept), "train_identities": identities}
    if chosen.mistakes or chosen.excluded:
        info["left_out"] = chosen.left_out_info()
    return dataclasses.replace(result, graph=dataclasses.replace(result.graph, info=info))


def training_info(
    method: str, config: dict[str, Any], epochs_run: int, final_loss: float, sa: float, train_sequences: int,
    step_ids: Sequence[int], present: np.ndarray, weights: str | None = None,
) -> dict[str, Any]:
    """What every learner records in its graph's ``info``: method, settings, training run, and removed steps.

    Args:
        method: the learner's name.
        config: its settings as plain JSON.
        epochs_run: epochs trained.
        final_loss: the last epoch's loss.
        sa: Sequence Accuracy of the binary graph on the training sequences.
        train_sequences: how many sequences it learned from.
        step_ids: the taxonomy, in matrix order.
        present: bool ``(n,)`` steps seen in training (the others are removed).
        weights: what the saved weights are, when they are not a row-softmax (``info["weights"]``).

    Returns:
        The ``info`` dict, keys in file order.
    """
    info: dict[str, Any] = {"method": method}
    if weights is not None:
        info["weights"] = weights
    return info | {
        "config": config,
        "epochs_run": epochs_run,
        "final_loss": final_loss,
        "sequence_accuracy": sa,
        "train_sequences": train_sequences,
        "removed_steps": [int(s) for s, p in zip(step_ids, present, strict=True) if not p],
    }
