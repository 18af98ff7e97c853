"""Training a task graph with Direct Optimization and the TGML loss (docs/method.md).

`train_do` takes raw key-step sequences (repeats kept), pre-processes them per `DOConfig`
(first occurrence, or the three-part augmentation), fits the DO model with Adam, optionally stops early on
Sequence Accuracy, and post-processes the weights into a `graphs.TaskGraph`.

Everything that does not change between epochs (masks, loss rows of the first- and last-occurrence parts,
SA rows) is built once; only the randomly de-duplicated part (c) of the augmentation is rebuilt each epoch,
with a few numpy operations over all sequences at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from graphs.common.errors import InputError
from graphs.postprocess import binarize
from graphs.procedure_queries import learn_optional_scores
from graphs.step_positions import step_positions
from graphs.task_graph import TaskGraph
from tgml.learners.do.config import DOConfig
from tgml.learners.do.early_stop import EarlyStopping
from tgml.learners.do.model import DirectOptimization, n_nodes, wrap
from tgml.learners.result import LearnResult, training_info
from tgml.sequence_accuracy import sequence_accuracy
from tgml.sequences import (
    ObservedRows,
    PackedSequences,
    first_occurrence_mask,
    last_occurrence_mask,
    observed_rows,
    pack,
    random_dedup_mask,
)


@dataclass(frozen=True)
class TrainingSet:
    """Everything about the training sequences that stays fixed across epochs.

    Attributes:
        n_steps: key-steps of the taxonomy.
        present: bool ``(n,)`` key-steps that occur in the sequences.
        fixed: loss rows that never change (first-occurrence part, plus last-occurrence with augmentation).
        fixed_weights: float32 multiplicity of each fixed row.
        dynamic: packed wrapped sequences re-de-duplicated every epoch (augmentation part (c)), or None.
        dynamic_rows_at: bool mask of the positions of ``dynamic`` that give loss rows.
        sa_rows: first-occurrence rows in the ``S..E`` layout, for Sequence Accuracy.
    """

    n_steps: int
    present: np.ndarray
    fixed: ObservedRows
    fixed_weights: np.ndarray
    dynamic: PackedSequences | None
    dynamic_rows_at: np.ndarray
    sa_rows: ObservedRows


def _loss_positions(packed: PackedSequences) -> np.ndarray:
    """Positions S..E of every wrapped sequence (not β, not γ)."""
    last = np.r_[packed.sequence[1:] != packed.sequence[:-1], True]
    first = np.r_[True, packed.sequence[1:] != packed.sequence[:-1]]
    return ~(first | last)


def build_training_set(sequences: Sequence[Sequence[int]], step_ids: Sequence[int], augment: bool) -> TrainingSet:
    """Map raw sequences to the reference node layout and build the fixed loss rows once.

    Args:
        sequences: raw key-step id sequences (repeats kept).
        step_ids: taxonomy ids ``K_1..K_n`` in matrix order.
        augment: build the three-part augmented set instead of first occurrences.

    Returns:
        The `TrainingSet`.
    """
    n = len(step_ids)
    mapped = [positions.tolist() for positions in step_positions(sequences, step_ids)]
    if not any(mapped):
        raise InputError("no usable sequence: every training sequence is empty")
    present = np.zeros(n, dtype=bool)
    present[np.fromiter((k for seq in mapped for k in seq), dtype=np.int64)] = True
    size = n_nodes(n)

    packed = pack([wrap(seq, n) for seq in mapped])
    rows_at = _loss_positions(packed)
    first = observed_rows(packed, first_occurrence_mask(packed), rows_at, size)
    sa_rows = ObservedRows(first.observed[:, 1:-1], first.targets - 1, first.sequence)
    if not augment:
        return TrainingSet(n, present, first, np.ones(len(first.targets), np.float32), None, rows_at[:0], sa_rows)

    # Sequences without repeats are identical in parts (a), (b) and (c): one row set with weight 3.
    repeats = np.array([len(set(seq)) != len(seq) for seq in mapped])
    last = observed_rows(packed, last_occurrence_mask(packed), rows_at, size)
    rep_first, rep_last = repeats[first.sequence], repeats[last.sequence]
    fixed = ObservedRows(
        np.concatenate([first.observed, last.observed[rep_last]]),
        np.concatenate([first.targets, last.targets[rep_last]]),
        np.concatenate([first.sequence, last.sequence[rep_last]]),
    )
    weights = np.concatenate([np.where(rep_first, 1.0, 3.0), np.ones(int(rep_last.sum()))]).astype(np.float32)
    fixed, weights = merge_identical_rows(fixed, weights)
    dynamic = None
    dyn_rows_at = rows_at[:0]
    if repeats.any():
        dynamic = pack([wrap(seq, n) for seq, rep in zip(mapped, repeats, strict=True) if rep])
        dyn_rows_at = _loss_positions(dynamic)
    return TrainingSet(n, present, fixed, weights, dynamic, dyn_rows_at, sa_rows)


def merge_identical_rows(rows: ObservedRows, weights: np.ndarray) -> tuple[ObservedRows, np.ndarray]:
    """Merge rows with the same seen-set and target: they add identical loss terms, so one row with the summed
    multiplicity gives the same loss and gradient with fewer products.

    Args:
        rows: loss rows.
        weights: ``(R,)`` multiplicities.

    Returns:
        ``(unique rows, their summed weights)``; the ``sequence`` of a merged row is that of its first occurrence.
    """
    key = np.concatenate([rows.observed, rows.targets[:, None].astype(np.float32)], axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    merged = np.bincount(inverse.ravel(), weights=weights).astype(np.float32)
    return ObservedRows(rows.observed[first], rows.targets[first], rows.sequence[first]), merged


def epoch_rows(data: TrainingSet, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One epoch's loss rows: the fixed rows plus part (c) of the augmentation de-duplicated afresh (docs/method.md).

    Args:
        data: the training set.
        rng: draws this epoch's random de-duplication.

    Returns:
        ``(observed, targets, weights)`` for `DirectOptimization.forward`.
    """
    observed = torch.from_numpy(data.fixed.observed)  # zero-copy views of the fixed rows
    targets = torch.from_numpy(data.fixed.targets)
    weights = torch.from_numpy(data.fixed_weights)
    if data.dynamic is None:
        return observed, targets, weights
    dyn = observed_rows(data.dynamic, random_dedup_mask(data.dynamic, rng), data.dynamic_rows_at, observed.shape[1])
    return (
        torch.cat([observed, torch.from_numpy(dyn.observed)]),
        torch.cat([targets, torch.from_numpy(dyn.targets)]),
        torch.cat([weights, torch.ones(len(dyn.targets))]),
    )


@contextlib.contextmanager
def _deterministic() -> Iterator[None]:
    """Deterministic torch algorithms and one intra-op thread for a training run (both restored afterwards).

    The products are tiny (about 1000 x 90 by 90 x 90): thread start-up costs more than it saves, and on a
    shared 2-core machine a second spinning thread made an epoch several times slower.
    """
    before = torch.are_deterministic_algorithms_enabled()
    threads = torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)
        torch.set_num_threads(threads)


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:>10.3f}  SA {task.fields[sa]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=False,
    )


def train_do(
    sequences: Sequence[Sequence[int]],
    step_ids: Sequence[int],
    step_names: Sequence[str],
    config: DOConfig,
    scenario: str = "",
    progress: bool = False,
) -> LearnResult:
    """Learn a task graph from key-step sequences with Direct Optimization (docs/method.md).

    Args:
        sequences: raw key-step id sequences (repeats kept); pre-processing per ``config`` happens here.
        step_ids: taxonomy ids of the key-steps, in matrix order.
        step_names: their names, same order.
        config: training settings.
        scenario: procedure name stored in the graph.
        progress: show a rich progress bar (loss and SA) on stderr.

    Returns:
        `LearnResult`; key-steps never seen in ``sequences`` are removed from the graph (post-processing step 1), and
        each step's global optionality over ``sequences`` is stored in it (`graphs.procedure_queries`).
    """
    if len(step_ids) != len(step_names):
        raise InputError(f"{len(step_ids)} step ids but {len(step_names)} step names")
    if not step_ids:
        raise InputError(f"scenario {scenario!r} has no key-steps")
    if not sequences:
        raise InputError(f"scenario {scenario!r}: no usable sequence to train on")
    data = build_training_set(sequences, step_ids, config.augment)
    rng = np.random.default_rng(config.seed)
    stopper = EarlyStopping(config.early_stop, config.sa_plateau_min, config.sa_patience)

    def sa_now(weights: np.ndarray, epoch: int) -> float:
        adj = binarize(weights, data.present, config.relaxed, threshold_steps=config.threshold_steps(data.n_steps),
                       cycles=epoch > config.cycle_breaking_from, relax_after_attach=True)
        return sequence_accuracy(adj, data.sa_rows.observed, data.sa_rows.targets, data.sa_rows.sequence)

    with _deterministic():
        torch.manual_seed(config.seed)
        model = DirectOptimization(data.n_steps, torch.Generator().manual_seed(config.seed))
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        best_weights = model.graph_weights()
        loss_value = float("nan")
        epoch = 0
        with _progress(progress) as bar:
            task = bar.add_task(scenario or "training", total=config.epochs, loss=float("nan"), sa="  -  ")
            for epoch in range(1, config.epochs + 1):
                observed, targets, multiplicity = epoch_rows(data, rng)
                _, loss = model(observed, targets, multiplicity, config.beta_at(epoch))
                assert loss is not None
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                loss_value = float(loss.detach())
                stop = False
                if stopper.active or (progress and (epoch % 25 == 0 or epoch == config.epochs)):
                    current = model.graph_weights()
                    sa = sa_now(current, epoch)
                    if stopper.active:
                        improved = sa > stopper.best
                        stop = stopper.update(epoch, sa)
                        if improved:
                            best_weights = current
                    bar.update(task, sa=f"{sa:.3f}")
                bar.update(task, advance=1, loss=loss_value)
                if stop:
                    break
            weights = best_weights if (config.keep_best and stopper.active) else model.graph_weights()
            adjacency = binarize(weights, data.present, config.relaxed,
                                 threshold_steps=config.threshold_steps(data.n_steps))
            sa_final = sequence_accuracy(adjacency, data.sa_rows.observed, data.sa_rows.targets, data.sa_rows.sequence)
            # The bar's SA was the stopping rule's (the authors' binarisation); it ends on the written graph's, the
            # figure the summary line gives (0.867 on the bar beside 0.900 in the summary confused a reader).
            bar.update(task, sa=f"{sa_final:.3f}")
    info = training_info("direct-optimization", asdict(config), epoch, loss_value, sa_final, len(sequences),
                         step_ids, data.present)
    graph = TaskGraph(tuple(step_ids), tuple(step_names), adjacency, weights, scenario, info)
    # Which steps the training executions show to be optional is stored with the graph (its file, version 2).
    graph = learn_optional_scores(graph, sequences)
    return LearnResult(graph, epoch, loss_value, sa_final)
