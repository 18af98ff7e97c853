"""Training a task graph with the noisy-AND TGML likelihood (`tgml.learners.noisy_and.loss`) and post-processing it.

`train_noisy_and` is the ``noisy-and`` learner of `tgml.learners.registry` (raw key-step sequences in, a
`LearnResult` with a `graphs.TaskGraph` out).

Sequences are de-duplicated to first occurrences (``BACAD -> BACD``). The loss rows are built once: for each
position of each execution, the steps not done before it (``U``), the step done (``y_t``) and the steps of that
execution still to do (``C_t``, the contrast set: the model explains the *order* of the steps an execution
contains, so steps an execution skips never count against it). Identical rows are merged with a multiplicity.

Post-processing is the DO one (`graphs.postprocess.binarize`) applied to ``θ / cut`` with threshold 1, i.e. edges
with ``θ[i, j] >= cut``; the saved weights are the edge probabilities ``θ`` in the START..END layout (START and
END rows / columns 0: post-processing attaches START and END).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Final

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from graphs.common.errors import InputError
from graphs.postprocess import binarize
from graphs.procedure_queries import learn_optional_scores, log_not_required
from graphs.task_graph import EDGE_PROBABILITY_WEIGHTS, TaskGraph
from tgml.learners.do.train import LearnResult, build_training_set, training_info
from tgml.learners.noisy_and.config import METHOD_NAME, NoisyAndConfig
from tgml.learners.noisy_and.loss import edge_probabilities, log_readiness, noisy_and_loss, step_log_likelihood
from tgml.sequence_accuracy import sequence_accuracy
from tgml.sequences import ObservedRows, observed_rows, pack

# Initial scores: one θ for every edge (no edge favoured, `initial_score`), plus this much seeded jitter to break ties.
INIT_JITTER = 0.01
# The least probability that a step is ready at the start, with every other step still to do: Π (1 − θ0) over the
# n − 1 others. At θ0 = 0.5 it is 2^-(n-1): learned right on chains of up to 30 steps (2^-29), lost from 50 on.
START_READINESS: Final = 2.0**-29


def initial_score(n_steps: int) -> float:
    """The score ``A0 = logit(θ0)`` every edge starts from: ``θ0 = 0.5``, lowered so that ``(1 − θ0)^(n−1)`` stays
    at least `START_READINESS`.

    A step's readiness is a product over the steps still to do (`log_readiness`). At ``θ0 = 0.5`` and many steps it
    starts so small that the noise term ``ρ / |C_t|`` of `step_log_likelihood` swamps the model at every early
    position, their gradients vanish and those steps end with no pre-condition while the sequence accuracy reads
    1.000 (on a 100-step chain 55 of 100 steps; on Assembly101-O's 86 key-steps every one, loss 39.6 against 8.0).
    Procedures of up to 30 steps start at 0.5 as before, so their graphs do not change.
    """
    if 0.5 ** (n_steps - 1) >= START_READINESS:
        return 0.0  # exactly: the same scores, and graphs, as before the floor
    theta0 = 1.0 - START_READINESS ** (1.0 / (n_steps - 1))
    return math.log(theta0 / (1.0 - theta0))


@dataclass(frozen=True)
class OrderRows:
    """Loss rows of the noisy-AND likelihood, one per distinct (history, step, still-to-do) triple.

    Attributes:
        unseen: float32 ``(R, n)`` 0/1 steps not done before the position.
        targets: int64 ``(R,)`` the step done.
        candidates: float32 ``(R, n)`` 0/1 steps of the execution not done before the position (target included).
        weights: float32 ``(R,)`` how many positions share the row.
        n_executions: executions the rows come from.
        present: bool ``(n,)`` steps that occur in some execution.
    """

    unseen: np.ndarray
    targets: np.ndarray
    candidates: np.ndarray
    weights: np.ndarray
    n_executions: int
    present: np.ndarray


def order_rows(first: ObservedRows, n_steps: int) -> OrderRows:
    """Build the loss rows from first-occurrence rows in the START..END layout (vectorised over all positions).

    Args:
        first: ``tgml.learners.do.train.build_training_set(sequences, step_ids, augment=False).sa_rows``: one row
            per position of ``<S, y..., E>`` (targets 0 = START, 1..n = key-steps, n+1 = END), first occurrences only.
        n_steps: ``n``.

    Returns:
        The merged `OrderRows` (the START and END positions carry no order information and are dropped).
    """
    step = (first.targets >= 1) & (first.targets <= n_steps)
    unseen = 1.0 - first.observed[step][:, 1 : n_steps + 1]  # (R, n)
    targets = first.targets[step] - 1
    sequence = first.sequence[step]
    members, candidates = still_to_do(unseen, targets, sequence, int(first.sequence.max()) + 1)
    key = np.concatenate([unseen, candidates, targets[:, None].astype(np.float32)], axis=1)
    _, first_row, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    weights = np.bincount(inverse.ravel(), minlength=first_row.size).astype(np.float32)
    present = np.asarray(members.any(axis=0))
    n_executions = int(np.unique(sequence).size)
    return OrderRows(unseen[first_row], targets[first_row], candidates[first_row], weights, n_executions, present)


def still_to_do(
    unseen: np.ndarray, targets: np.ndarray, sequence: np.ndarray, n_sequences: int
) -> tuple[np.ndarray, np.ndarray]:
    """The contrast sets ``C_t``: the steps of each row's execution not done before the row.

    Args:
        unseen: ``(R, n)`` 0/1 steps not done before each row.
        targets: int ``(R,)`` step of each row.
        sequence: int ``(R,)`` execution of each row, ``0..n_sequences-1``.
        n_sequences: executions.

    Returns:
        ``(members (D, n), candidates (R, n))``: which steps each execution contains, and ``C_t`` per row.
    """
    members = np.zeros((n_sequences, unseen.shape[1]), dtype=np.float32)
    members[sequence, targets] = 1.0
    return members, members[sequence] * unseen


def execution_log_likelihoods(weights: np.ndarray, sequences: Sequence[Sequence[int] | np.ndarray],
                              noise: float) -> np.ndarray:
    """``log P(y) = Σ_t log P_ρ(y_t | J_t)`` of whole executions under edge probabilities (noisy-AND model).

    The likelihood `graphs.procedure_queries.global_optionality` needs to tell which steps are optional: leaving
    out a step that later steps require makes them unready, so such a step never looks optional.

    Args:
        weights: ``(n+2, n+2)`` edge probabilities in the START..END layout (`graph_weights`).
        sequences: executions as key-step indices ``1..n``, no repeats (empty ones allowed).
        noise: ``ρ``.

    Returns:
        float ``(len(sequences),)``; 0 for an empty execution.
    """
    if not any(len(seq) for seq in sequences):  # no position to score (a batch of one-step runs left out)
        return np.zeros(len(sequences))
    log_free = torch.from_numpy(log_not_required(weights)[1:-1, 1:-1].copy())  # (n, n) float64
    n = log_free.shape[0]
    packed = pack([[int(k) - 1 for k in seq] for seq in sequences])
    everywhere = np.ones(packed.steps.shape, dtype=bool)
    rows = observed_rows(packed, everywhere, everywhere, n)
    unseen = 1.0 - rows.observed
    _, candidates = still_to_do(unseen, rows.targets, rows.sequence, len(sequences))
    with torch.no_grad():
        log_p = step_log_likelihood(log_readiness(log_free, torch.from_numpy(unseen).double()),
                                    torch.from_numpy(rows.targets), torch.from_numpy(candidates).double(), noise)
    return np.bincount(rows.sequence, weights=log_p.numpy(), minlength=len(sequences))


def graph_weights(theta: np.ndarray) -> np.ndarray:
    """Edge probabilities ``(n, n)`` -> the ``(n+2, n+2)`` START..END weight layout (START/END entries 0)."""
    n = theta.shape[0]
    weights = np.zeros((n + 2, n + 2))
    weights[1:-1, 1:-1] = theta
    return weights


def binarize_probabilities(weights: np.ndarray, present: np.ndarray, cut: float, relaxed: bool) -> np.ndarray:
    """The DO post-processing with the edge test ``θ >= cut`` instead of ``Z >= 1/n``.

    Args:
        weights: ``(n+2, n+2)`` edge probabilities (`graph_weights`).
        present: bool ``(n,)`` steps seen in training.
        cut: edge threshold on ``θ``.
        relaxed: apply the relaxed rule.

    Returns:
        bool ``(n+2, n+2)`` DAG adjacency.
    """
    # threshold_steps=1 keeps entries >= 1, i.e. θ >= cut; cycles still break at their least probable edge.
    return binarize(weights / cut, present, relaxed, threshold_steps=1)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """One intra-op thread for a run (restored afterwards): the products are tiny, threads only add start-up."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def fit_edge_probabilities(
    rows: OrderRows, n_steps: int, config: NoisyAndConfig, progress: bool = False, label: str = ""
) -> tuple[np.ndarray, float]:
    """Maximise the noisy-AND likelihood with Adam (full batch) and return ``θ``.

    Args:
        rows: the loss rows.
        n_steps: ``n``.
        config: training settings.
        progress: show a rich progress bar on stderr.
        label: progress bar title.

    Returns:
        ``(θ as float64 (n, n), final loss)``.
    """
    unseen = torch.from_numpy(rows.unseen)
    targets = torch.from_numpy(rows.targets)
    candidates = torch.from_numpy(rows.candidates)
    weights = torch.from_numpy(rows.weights)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]:>9.4f}"), TimeElapsedColumn())
    with _one_thread(), Progress(*columns, console=Console(stderr=True), disable=not progress) as bar:
        generator = torch.Generator().manual_seed(config.seed)
        jitter = INIT_JITTER * torch.randn(n_steps, n_steps, generator=generator)
        scores = torch.nn.Parameter(jitter + initial_score(n_steps))  # A: (n, n)
        optimizer = torch.optim.Adam([scores], lr=config.lr)
        task = bar.add_task(label or METHOD_NAME, total=config.epochs, loss=float("nan"))
        loss_value = float("nan")
        for _ in range(config.epochs):
            loss = noisy_and_loss(scores, unseen, targets, candidates, weights, rows.n_executions, config.noise,
                                  config.edge_cost)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_value = float(loss.detach())
            bar.update(task, advance=1, loss=loss_value)
        theta = edge_probabilities(scores.detach()).double().numpy()
    return theta, loss_value


def train_noisy_and(
    sequences: Sequence[Sequence[int]],
    step_ids: Sequence[int],
    step_names: Sequence[str],
    config: NoisyAndConfig,
    scenario: str = "",
    progress: bool = False,
) -> LearnResult:
    """Learn a task graph whose steps keep every pre-condition (noisy-AND TGML), post-processed like DO.

    Args:
        sequences: raw key-step id sequences (repeats kept; first occurrences are used).
        step_ids: taxonomy ids of the key-steps, in matrix order.
        step_names: their names, same order.
        config: training settings.
        scenario: procedure name stored in the graph.
        progress: show a rich progress bar on stderr.

    Returns:
        `LearnResult`: the graph (weights = edge probabilities ``θ``; each step's optionality over ``sequences``
        judged by this model's likelihood), epochs run, final loss, and the Sequence Accuracy of the binary graph on
        the training sequences. Key-steps never seen are removed from the graph.
    """
    if not step_ids or len(step_ids) != len(step_names):
        raise InputError(f"scenario {scenario!r}: {len(step_ids)} step ids and {len(step_names)} step names "
                         "(expected as many names as ids, at least one)")
    if not sequences:
        raise InputError(f"scenario {scenario!r}: no usable sequence to train on")
    # DO's training set maps ids to positions (refusing unknown ones) and de-duplicates: its Sequence Accuracy
    # rows are the first-occurrence rows this likelihood needs.
    first = build_training_set(sequences, step_ids, augment=False).sa_rows
    n = len(step_ids)
    rows = order_rows(first, n)
    theta, loss_value = fit_edge_probabilities(rows, n, config, progress, scenario)
    weights = graph_weights(theta)
    adjacency = binarize_probabilities(weights, rows.present, config.cut, config.relaxed)
    sa_value = sequence_accuracy(adjacency, first.observed, first.targets, first.sequence)
    # Not a row-softmax: the procedure questions read them with the noisy-AND rules, not DO's.
    info = training_info(METHOD_NAME, asdict(config), config.epochs, loss_value, sa_value, len(sequences), step_ids,
                         rows.present, weights=EDGE_PROBABILITY_WEIGHTS)
    graph = TaskGraph(tuple(step_ids), tuple(step_names), adjacency, weights, scenario, info)
    # Which steps the executions show to be optional is stored with the graph, judged by this model's likelihood.
    graph = learn_optional_scores(graph, sequences, partial(execution_log_likelihoods, noise=config.noise))
    return LearnResult(graph, config.epochs, loss_value, sa_value)
