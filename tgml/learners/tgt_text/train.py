"""Training a task graph with the Task Graph Transformer on step texts (``tgt-text``; settings:
`tgml.learners.tgt_text.config`).

`train_tgt_text` is the ``tgt-text`` learner of `tgml.learners.registry` (raw key-step sequences and step names in,
`LearnResult` out).

The step names are embedded once by an offline sentence encoder (`tgml.text_embeddings`, cached on disk); the
model (`tgml.learners.tgt_text.model`) maps them to ``Z``, trained full batch with Adam on the TGML loss of the
first-occurrence sequences (`tgml.loss`, reference node layout) plus the distinctiveness term. The contrastive
weight ``β`` follows
the paper's schedule: it starts at ``beta_start`` and, at ``beta_updates`` evenly spaced epochs, moves towards
``beta_end`` by the fraction of training done so far. The weights of the last epoch go through the DO
post-processing to a DAG.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from graphs.common.errors import InputError
from graphs.postprocess import binarize
from graphs.procedure_queries import learn_optional_scores
from graphs.task_graph import TaskGraph
from tgml.learners.do.train import LearnResult, build_training_set, training_info
from tgml.learners.tgt_text.config import METHOD_NAME, TgtTextConfig
from tgml.learners.tgt_text.model import TaskGraphTransformer, distinctiveness_loss
from tgml.loss import tgml_loss
from tgml.sequence_accuracy import sequence_accuracy
from tgml.text_embeddings import step_embeddings


def beta_schedule(epochs: int, start: float, end: float, updates: int) -> np.ndarray:
    """The paper's β schedule: at ``updates`` evenly spaced epochs, β moves towards ``end`` by the share done.

    At an update after a share ``s`` of the epochs, ``β ← β + (end − β) · s``: β falls slowly at first and faster
    as training goes on. With the paper's 3000 epochs and an update every 100, ``updates = 30``.

    Args:
        epochs: training epochs.
        start: β at the first epoch.
        end: the value β moves towards.
        updates: number of updates (0: constant β).

    Returns:
        float ``(epochs,)``: β of each epoch (index 0 = epoch 1).
    """
    betas = np.full(epochs, float(start))
    if updates < 1:
        return betas
    every = max(epochs // updates, 1)
    beta = float(start)
    for index in range(every - 1, epochs, every):  # at most `updates` (+1) iterations, not one per epoch
        beta += (end - beta) * index / epochs
        betas[index:] = beta
    return betas


@contextlib.contextmanager
def _seeded_single_thread(seed: int) -> Iterator[None]:
    """Seeded, deterministic, one intra-op thread (all restored afterwards): the products are tiny, and a
    second spinning thread on a shared machine makes an epoch slower, not faster."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def fit_tgt(
    text: np.ndarray,
    observed: np.ndarray,
    targets: np.ndarray,
    weights: np.ndarray,
    config: TgtTextConfig,
    progress: bool = False,
    label: str = "",
) -> tuple[np.ndarray, float]:
    """Train the transformer on fixed loss rows and return the ``S..E`` weighted graph.

    Args:
        text: ``(n, d)`` step embeddings.
        observed: ``(T, n + 4)`` observed-before rows (reference layout).
        targets: int64 ``(T,)`` node of each row.
        weights: ``(T,)`` row multiplicities.
        config: settings.
        progress: rich progress bar on stderr.
        label: its title.

    Returns:
        ``((n+2, n+2) float64 weights, last epoch's TGML loss)``.
    """
    betas = beta_schedule(config.epochs, config.beta_start, config.beta_end, config.beta_updates)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]:>9.3f}"), TimeElapsedColumn())
    with _seeded_single_thread(config.seed), \
            Progress(*columns, console=Console(stderr=True), disable=not progress) as bar:
        text_t = torch.from_numpy(np.asarray(text, dtype=np.float32))
        observed_t = torch.from_numpy(observed)
        targets_t = torch.from_numpy(targets)
        weights_t = torch.from_numpy(weights)
        model = TaskGraphTransformer(text_t.shape[1], text_t.shape[0], config.width, config.heads, config.layers,
                                     config.feedforward, config.relation_hidden, config.dropout)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, foreach=True)  # one update for all tensors
        task = bar.add_task(label or METHOD_NAME, total=config.epochs, loss=float("nan"))
        model.train()
        loss_value = float("nan")
        for epoch in range(config.epochs):
            z, nodes = model(text_t)
            likelihood = tgml_loss(z, observed_t, targets_t, model.contrast, float(betas[epoch]), weights_t)
            loss = likelihood + config.distinctiveness * distinctiveness_loss(nodes, config.similarity_scale)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_value = float(likelihood.detach())
            bar.update(task, advance=1, loss=loss_value)
        return model.graph_weights(text_t), loss_value


def train_tgt_text(
    sequences: Sequence[Sequence[int]],
    step_ids: Sequence[int],
    step_names: Sequence[str],
    config: TgtTextConfig,
    scenario: str = "",
    progress: bool = False,
    embeddings: np.ndarray | None = None,
) -> LearnResult:
    """Learn a task graph with the Task Graph Transformer from step names and key-step sequences.

    Args:
        sequences: raw key-step id sequences (repeats kept; first occurrences are used).
        step_ids: taxonomy ids of the key-steps, in matrix order.
        step_names: their names (the text the encoder embeds), same order.
        config: settings.
        scenario: procedure name stored in the graph.
        progress: rich progress bar on stderr.
        embeddings: ``(n, d)`` step embeddings to use instead of encoding ``step_names`` (e.g. richer texts).

    Returns:
        `LearnResult`: the post-processed graph (weights = the row-softmax ``Z``), epochs run, the last TGML loss,
        and the Sequence Accuracy of the graph on the training sequences. Key-steps never seen are removed.
    """
    if not step_ids or len(step_ids) != len(step_names):
        raise InputError(f"scenario {scenario!r}: {len(step_ids)} step ids and {len(step_names)} step names "
                         "(expected as many names as ids, at least one)")
    if not sequences:
        raise InputError(f"scenario {scenario!r}: no usable sequence to train on")
    data = build_training_set(sequences, step_ids, augment=False)  # before encoding: bad ids fail fast
    if embeddings is None:
        embeddings = step_embeddings(list(step_names), config.encoder)
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if embeddings.ndim != 2 or embeddings.shape[0] != len(step_ids):
        raise InputError(f"scenario {scenario!r}: embeddings of shape {embeddings.shape} for {len(step_ids)} steps")
    weights, loss_value = fit_tgt(embeddings, data.fixed.observed, data.fixed.targets, data.fixed_weights, config,
                                  progress, scenario)
    adjacency = binarize(weights, data.present, config.relaxed,
                         threshold_steps=config.threshold_steps(data.n_steps))
    sa_value = sequence_accuracy(adjacency, data.sa_rows.observed, data.sa_rows.targets, data.sa_rows.sequence)
    info = training_info(METHOD_NAME, asdict(config), config.epochs, loss_value, sa_value, len(sequences), step_ids,
                         data.present)
    graph = TaskGraph(tuple(step_ids), tuple(step_names), adjacency, weights, scenario, info)
    # Z is a row softmax like DO's, so the default TGML likelihood judges which steps are optional.
    graph = learn_optional_scores(graph, sequences)
    return LearnResult(graph, config.epochs, loss_value, sa_value)
