"""Synthetic procedures: learn task graphs from random executions of random DAGs and score their edges.

Ground truth. A procedure of ``n`` steps is a random DAG: the steps are put in a random order and every step
after the first draws how many pre-conditions it has (0-4, from the `DENSITIES` distribution) among the steps
before it, uniformly. The true graph is that DAG in the canonical form every learner produces (transitively
reduced, START for steps with no pre-condition, END for steps nothing needs), so scores compare like with like.

Executions. A random topological order: at each point one step is drawn *uniformly among the ready steps* (all
pre-conditions done). That is not uniform over linear extensions (an order with many ready steps early is less
likely than under the uniform law); it is the natural "pick anything you may do now" process. With execution noise
``p``, each execution independently, with probability ``p``, gets one error: two adjacent steps swapped, or a step
repeated later (each half the time). One graph per (seed, size, density) is drawn with ``max(executions)``
executions; each row of the table uses the first ``k`` of them, so rows with more executions see the same graph
with more data, and the noisy and clean columns share graphs and executions.

Scores: edge precision / recall / F1 on the full START..END adjacency (`graphs.edge_metrics.edge_scores`), and the
recall of the edges into steps with two or more pre-conditions (what a learner that keeps one pre-condition per
step misses). Each table cell averages every density and seed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import numpy as np
from rich.table import Table

from graphs.common.errors import InputError
from graphs.common.options import MAX_SEED_COUNT, SEED_RULE, is_seed
from graphs.common.safe_text import unknown_name
from graphs.common.settings_files import as_written
from graphs.edge_metrics import edge_scores
from graphs.limits import MAX_STEPS
from graphs.postprocess import binarize
from graphs.precision_recall import measured
from graphs.task_graph import TaskGraph
from tgml.bench.process_pool import run_jobs
from tgml.learners.do.config import DOConfig
from tgml.learners.noisy_and.config import NoisyAndConfig
from tgml.learners.registry import learner

# Probability that a step draws 0, 1, 2, 3 or 4 pre-conditions among the steps before it.
DENSITIES: Final[dict[str, tuple[float, ...]]] = {
    "sparse": (0.15, 0.70, 0.15, 0.0, 0.0),
    "medium": (0.10, 0.45, 0.30, 0.15, 0.0),
    "dense": (0.05, 0.25, 0.30, 0.25, 0.15),
}
# DO as in the CaptainCook4D protocol: first occurrences, beta 0.005, up to 1000 epochs, SA-plateau stopping, 1/n.
MAX_EXECUTIONS: Final = 100_000  # executions per procedure: far beyond the datasets (CaptainCook4D has 13 at most)
DO_CONFIG: Final = DOConfig(beta=0.005, epochs=1000, early_stop="sa-plateau")

Learner = Callable[[Sequence[Sequence[int]], Sequence[int], Sequence[str], int], TaskGraph]


def learn_do(sequences: Sequence[Sequence[int]], step_ids: Sequence[int], names: Sequence[str], seed: int) -> TaskGraph:
    """Direct Optimization with `DO_CONFIG`."""
    return learner("do").learn(sequences, step_ids, names, dataclasses.replace(DO_CONFIG, seed=seed)).graph


def learn_noisy_and(
    sequences: Sequence[Sequence[int]], step_ids: Sequence[int], names: Sequence[str], seed: int
) -> TaskGraph:
    """Noisy-AND TGML with its default settings (no edge cost: every consistent pre-condition is kept)."""
    return learner("noisy-and").learn(sequences, step_ids, names, NoisyAndConfig(seed=seed)).graph


def learn_noisy_and_sparse(
    sequences: Sequence[Sequence[int]], step_ids: Sequence[int], names: Sequence[str], seed: int
) -> TaskGraph:
    """Noisy-AND TGML with the edge cost `SPARSE_EDGE_COST` (a sparsity prior)."""
    config = NoisyAndConfig(edge_cost=SPARSE_EDGE_COST, seed=seed)
    return learner("noisy-and").learn(sequences, step_ids, names, config).graph


# The edge cost (nats per edge) that scored best on synthetic procedures drawn with graph seed 100 (never the
# table's seeds 0..): mean edge F1 over all sizes, executions and noise rates 87.9 / 89.9 / 91.8 / 91.1 / 87.2 for
# costs 0 / 0.5 / 1 / 2 / 3. The default learner keeps cost 0, chosen on CaptainCook4D (real executions, where any
# cost loses F1: leave-one-procedure-out picks 0 in all 24 folds).
SPARSE_EDGE_COST: Final = 1.0
LEARNERS: Final[dict[str, Learner]] = {
    "do": learn_do,
    "noisy-and": learn_noisy_and,
    "noisy-and-sparse": learn_noisy_and_sparse,
}


def canonical_graph(requires: np.ndarray) -> np.ndarray:
    """A pre-condition relation in the form learners output: reduced, with START / END attached.

    Args:
        requires: bool ``(n, n)``, ``requires[i, j]`` iff step ``j`` is a pre-condition of step ``i`` (acyclic).

    Returns:
        bool ``(n+2, n+2)`` START..END adjacency.
    """
    n = requires.shape[0]
    weights = np.zeros((n + 2, n + 2))
    weights[1:-1, 1:-1] = requires
    return binarize(weights, np.ones(n, dtype=bool), relaxed=False, threshold_steps=1)


def random_procedure(n_steps: int, density: str, rng: np.random.Generator) -> np.ndarray:
    """A random pre-condition DAG (module docstring).

    Args:
        n_steps: ``n`` key-steps.
        density: a key of `DENSITIES`.
        rng: random generator.

    Returns:
        bool ``(n+2, n+2)`` canonical START..END adjacency.
    """
    if density not in DENSITIES:
        raise InputError(unknown_name("density", density, DENSITIES, None))
    order = rng.permutation(n_steps)  # order[k] is the k-th step of a topological order
    counts = rng.choice(len(DENSITIES[density]), size=n_steps, p=DENSITIES[density])
    requires = np.zeros((n_steps, n_steps), dtype=bool)
    for k in range(1, n_steps):
        chosen = rng.choice(k, size=min(k, int(counts[k])), replace=False)
        requires[order[k], order[chosen]] = True
    return canonical_graph(requires)


def sample_execution(adjacency: np.ndarray, rng: np.random.Generator) -> list[int]:
    """One valid execution: repeatedly draw a step uniformly among the ready ones.

    Args:
        adjacency: bool ``(n+2, n+2)`` START..END pre-conditions.
        rng: random generator.

    Returns:
        The steps ``0..n-1`` in execution order.
    """
    requires = np.asarray(adjacency, dtype=bool)[1:-1, 1:-1]
    n = requires.shape[0]
    done = np.zeros(n, dtype=bool)
    order = []
    for _ in range(n):
        ready = np.flatnonzero(~done & ~(requires & ~done).any(axis=1))
        step = int(rng.choice(ready))
        done[step] = True
        order.append(step)
    return order


def perturb_execution(execution: Sequence[int], rng: np.random.Generator) -> list[int]:
    """One execution error: two adjacent steps swapped, or a step done again later (each half the time).

    Args:
        execution: a valid execution (at least 2 steps).
        rng: random generator.

    Returns:
        The perturbed execution.
    """
    out = list(execution)
    if rng.random() < 0.5:
        k = int(rng.integers(len(out) - 1))
        out[k], out[k + 1] = out[k + 1], out[k]
    else:
        k = int(rng.integers(len(out)))
        out.insert(int(rng.integers(k + 1, len(out) + 1)), out[k])
    return out


def multi_precondition_recall(pred: np.ndarray, gt: np.ndarray) -> tuple[int, int]:
    """Edges into steps with >= 2 pre-conditions in ``gt``: ``(recovered, total)``."""
    pred, gt = np.asarray(pred, dtype=bool), np.asarray(gt, dtype=bool)
    multi = gt.sum(axis=1) >= 2
    multi[-1] = False  # END's edges are attached by post-processing, not pre-conditions of a key-step
    return int((pred & gt)[multi].sum()), int(gt[multi].sum())


@dataclass(frozen=True)
class SyntheticConfig:
    """One synthetic benchmark run.

    Attributes:
        sizes: numbers of key-steps (at least 2 each).
        executions: numbers of training executions per graph.
        noise: execution-noise rates (share of executions with one error), each in [0, 1].
        densities: keys of `DENSITIES`; every cell averages over them.
        seeds: graphs per (size, density); graph seeds are ``first_seed .. first_seed + seeds - 1``.
        first_seed: first graph seed.
        learners: learner names (keys of `LEARNERS`, or of the mapping given to `run_synthetic`).
        workers: processes (1 = this process, 0 = one per core).
    """

    sizes: tuple[int, ...] = (5, 10, 20, 30)
    executions: tuple[int, ...] = (5, 10, 20, 40, 100)
    noise: tuple[float, ...] = (0.0, 0.2)
    densities: tuple[str, ...] = tuple(DENSITIES)
    seeds: int = 2
    first_seed: int = 0
    learners: tuple[str, ...] = tuple(LEARNERS)
    workers: int = 2

    def __post_init__(self) -> None:
        def fail(name: str, why: str) -> None:
            raise InputError(f"SyntheticConfig.{name} = {as_written(getattr(self, name))}: {why}")

        # Bounded above too: --sizes 100000 ended in a traceback (a task graph holds at most MAX_STEPS key-steps).
        if not self.sizes or any(isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_STEPS
                                 for n in self.sizes):
            fail("sizes", f"need integers in 2..{MAX_STEPS}")
        if not self.executions or any(isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_EXECUTIONS
                                      for k in self.executions):
            fail("executions", f"need integers in 1..{MAX_EXECUTIONS}")
        if not self.noise or any(not 0.0 <= p <= 1.0 for p in self.noise):
            fail("noise", "need rates in [0, 1]")
        if not self.densities or any(d not in DENSITIES for d in self.densities):
            fail("densities", f"choose from {', '.join(DENSITIES)}")
        if not 1 <= self.seeds <= MAX_SEED_COUNT:
            fail("seeds", f"need 1..{MAX_SEED_COUNT}")
        if not is_seed(self.first_seed):
            fail("first_seed", f"must be {SEED_RULE}")
        if not self.learners:
            fail("learners", "need at least one learner")
        if self.workers < 0:
            fail("workers", "must be >= 0")
        for name in ("sizes", "executions", "noise", "densities", "learners"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                fail(name, "each may be given once")


@dataclass(frozen=True)
class Case:
    """One learning problem: a graph and the executions a learner sees."""

    size: int
    density: str
    seed: int
    executions: int
    noise: float
    truth: np.ndarray
    sequences: tuple[tuple[int, ...], ...]


def make_cases(config: SyntheticConfig) -> list[Case]:
    """Draw every graph once and derive the cases (nested execution counts, shared noisy / clean executions)."""
    cases = []
    most = max(config.executions)
    for size in config.sizes:
        for density in config.densities:
            for seed in range(config.first_seed, config.first_seed + config.seeds):
                rng = np.random.default_rng([seed, size, list(DENSITIES).index(density)])
                truth = random_procedure(size, density, rng)
                clean = [sample_execution(truth, rng) for _ in range(most)]
                errors = rng.random(most)  # execution k is perturbed at noise p iff errors[k] < p
                perturbed = [perturb_execution(seq, rng) for seq in clean]
                for p in config.noise:
                    executions = [tuple(perturbed[k] if errors[k] < p else clean[k]) for k in range(most)]
                    for count in config.executions:
                        cases.append(Case(size, density, seed, count, p, truth, tuple(executions[:count])))
    return cases


@dataclass(frozen=True)
class Run:
    """Scores of one learner on one case."""

    learner: str
    size: int
    density: str
    seed: int
    executions: int
    noise: float
    precision: float
    recall: float
    f1: float
    multi_recovered: int
    multi_total: int
    seconds: float


def _learn_job(name: str, learner: Learner, case: Case) -> Run:
    """Worker: learn one graph and score it (top-level so it pickles)."""
    step_ids = list(range(case.size))
    started = time.perf_counter()
    graph = learner(case.sequences, step_ids, [f"step {k}" for k in step_ids], case.seed)
    seconds = time.perf_counter() - started
    scores = edge_scores(graph.adjacency, case.truth)
    recovered, total = multi_precondition_recall(graph.adjacency, case.truth)
    # Both graphs hold their START and END edges, so every score counts something.
    precision, recall, f1 = (measured(value, "synthetic edge scores")
                             for value in (scores.precision, scores.recall, scores.f1))
    return Run(name, case.size, case.density, case.seed, case.executions, case.noise, precision, recall, f1,
               recovered, total, seconds)


@dataclass
class SyntheticResult:
    """All runs plus the settings used."""

    config: SyntheticConfig
    runs: list[Run] = field(default_factory=list)

    def cell(self, learner: str, size: int | None = None, executions: int | None = None,
             noise: float | None = None) -> dict[str, float]:
        """Mean precision / recall / F1, multi-pre-condition recall (pooled) and seconds per graph of some runs."""
        runs = [r for r in self.runs if r.learner == learner and size in (None, r.size)
                and executions in (None, r.executions) and noise in (None, r.noise)]
        total = sum(r.multi_total for r in runs)
        return {
            "precision": float(np.mean([r.precision for r in runs])),
            "recall": float(np.mean([r.recall for r in runs])),
            "f1": float(np.mean([r.f1 for r in runs])),
            "multi_recall": 100.0 * sum(r.multi_recovered for r in runs) / total if total else float("nan"),
            "seconds": float(np.mean([r.seconds for r in runs])),
            "graphs": len(runs),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready content: settings, every run, and the table cells."""
        c = self.config
        return {
            "benchmark": "synthetic-procedures",
            "config": asdict(c),
            "sampler": "uniform among ready steps",
            "runs": [asdict(r) for r in self.runs],
            "table": [{"learner": name, "size": n, "executions": k, "noise": p, **self.cell(name, n, k, p)}
                      for name in c.learners for n in c.sizes for k in c.executions for p in c.noise],
            "overall": [{"learner": name, "noise": p, **self.cell(name, noise=p)}
                        for name in c.learners for p in c.noise],
        }


def run_synthetic(
    config: SyntheticConfig, learners: Mapping[str, Learner] | None = None, progress: bool = False
) -> SyntheticResult:
    """Learn and score every (learner, case) pair.

    Args:
        config: what to run.
        learners: name -> learner (default `LEARNERS`); must hold every name of ``config.learners``.
        progress: rich progress bar on stderr.

    Returns:
        The `SyntheticResult`.
    """
    registry = dict(LEARNERS if learners is None else learners)
    unknown = [name for name in config.learners if name not in registry]
    if unknown:
        raise InputError(unknown_name("synthetic benchmark --learners: learner", unknown[0], registry, None))
    # Largest graphs first, so no worker is left alone on a long job at the end.
    cases = sorted(make_cases(config), key=lambda c: (-c.size, -c.executions))
    jobs = [(name, registry[name], case) for case in cases for name in config.learners]
    return SyntheticResult(config, run_jobs(_learn_job, jobs, config.workers, "synthetic procedures", progress))


def synthetic_table(result: SyntheticResult) -> Table:
    """Rich table: one row per (size, executions), edge F1 of every learner at every noise rate."""
    c = result.config
    table = Table(title=f"Synthetic procedures: edge F1, mean over {len(c.densities)} densities x {c.seeds} seeds "
                        f"(executions: uniform among ready steps; noise = share of executions with one error)",
                  header_style="bold")
    table.add_column("steps", justify="right")
    table.add_column("executions", justify="right")
    for name in c.learners:
        for p in c.noise:
            table.add_column(f"{name}\nnoise {p:g}", justify="right")
    for n in c.sizes:
        for k in c.executions:
            table.add_row(str(n), str(k), *(f"{result.cell(name, n, k, p)['f1']:.1f}"
                                            for name in c.learners for p in c.noise))
        table.add_section()
    return table


def summary_table(result: SyntheticResult) -> Table:
    """Rich table: per learner and noise rate, mean P / R / F1, recall on multi-pre-condition steps, time per graph."""
    table = Table(title="Synthetic procedures: all sizes and execution counts", header_style="bold")
    for col in ("learner", "noise", "precision", "recall", "F1", "recall, steps with >= 2 pre-conditions",
                "s / graph"):
        table.add_column(col, justify="left" if col == "learner" else "right")
    for name in result.config.learners:
        for p in result.config.noise:
            s = result.cell(name, noise=p)
            table.add_row(name, f"{p:g}", f"{s['precision']:.1f}", f"{s['recall']:.1f}", f"{s['f1']:.1f}",
                          f"{s['multi_recall']:.1f}", f"{s['seconds']:.2f}")
    return table
