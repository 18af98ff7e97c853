"""``tgml bench-queries``: the five procedure questions measured on held-out executions, per dataset and learner.

The paper measures these questions on Ego-Exo4D, whose annotations are not public; here they are measured on
the data we have, with graphs learned on the other videos only (k-fold over the correct executions of each
procedure; the held-out execution is never trained on, and every setting is chosen on training folds):

- CaptainCook4D (24 procedures, error-free executions, ground-truth graphs): 4 folds per procedure (5 to 13
  executions each; leave-one-out would train 194 graphs instead of 96 and replay 1496 training executions
  instead of 582 to choose thresholds, for the same held-out questions).
- EPIC-Tent-O (training split): leave-one-execution-out over its 10 error-free videos (the 3 with an annotated
  error are always training data).
- Assembly101-O (training split, 135 correct videos): 5 folds.

Protocols (`tgml.bench.query_protocols`):

- *missing*: each step of a held-out execution is deleted in turn; the question is asked at the end and at the
  first later step that needed the deleted one (CaptainCook4D: a ground-truth pre-condition; elsewhere: the
  deleted step came first in every training execution holding both, at least two of them). F1 of the steps
  scoring at least a threshold chosen on the fold's training executions (the same deletions, in-sample).
- *mistake*: average precision of the online mistake score. EPIC-Tent-O / Assembly101-O: the PREGO test
  videos (last step a real mistake), graph trained on the whole training split. CaptainCook4D: the deletion
  trials, a step labelled a mistake when the deleted step is one of its ground-truth pre-conditions.
- *future*: top-1 / top-3 accuracy of the next new step among the steps not done yet, at every step.
- *previous*: average precision of the previous-step scores against the ground-truth pre-conditions
  (CaptainCook4D only), per procedure and fold, then averaged.
- *optional*: average precision of the optional score at every step of the held-out executions, a step
  labelled optional when some correct execution of the procedure skips it.

Methods are graph learners answered through `graphs.procedure_queries` with the weighted or the binary rule:
DO (`tgml.learners.do.train.train_do`, the benchmark's settings per dataset), the same DO graphs with the binary
rules, Count-Based (`graphs.count_based`, transition frequencies) and ours, noisy-AND
(`tgml.learners.noisy_and.train.train_noisy_and`, the benchmark's settings per dataset; its weighted rule reads
per-edge probabilities). Another learner is one entry in `LEARNERS` and one in `METHODS`. Two references learn no
graph: "No graph" answers every question from frequencies counted over the same training executions
(`tgml.bench.frequency_answers`), and "GT graph" (CaptainCook4D) ranks the ground truth's ready steps at random.

Result JSON (``format: "query-bench-results"``, ``version: 1``)::

    {"format": "query-bench-results", "version": 1,
     "settings": {"data": str, "datasets": [...], "folds": {dataset: str}, "seed": int, "epochs": int|null,
                  "procedures": [...]},
     "results": {dataset: {method: {metric: float|null, ...}}},
     "published_ego_exo4d": {method: {question: float}},
     "seconds": float}

Metrics are percentages; null where a question cannot be asked (no ground-truth graph, no optional step).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from graphs.annotations import load_annotations
from graphs.common.errors import InputError
from graphs.common.options import SEED_RULE, is_seed
from graphs.common.safe_text import unknown_name
from graphs.count_based import count_based_graph
from graphs.mistake_metrics import protocol_labels
from graphs.precision_recall import precision_recall_f1
from graphs.procedure_queries import ProcedureQueries, learn_optional_scores
from graphs.task_graph import TaskGraph
from tgml.bench.captaincook import DEFAULT_CONFIG as CAPTAINCOOK_DO
from tgml.bench.captaincook import load_procedures
from tgml.bench.data_folder import CAPTAINCOOK_FOLDER as CAPTAINCOOK
from tgml.bench.data_folder import QUERY_DATASETS
from tgml.bench.frequency_answers import FrequencyAnswers
from tgml.bench.prego.data import DATASETS as PREGO_DATASETS
from tgml.bench.prego.data import load_dataset, resolve_data
from tgml.bench.prego.methods import load_method_settings
from tgml.bench.query_protocols import (
    Answering,
    Items,
    Needs,
    always_before,
    average_precision,
    best_threshold,
    deletion_trials,
    first_occurrences,
    future_hits,
    ground_truth_needs,
    missing_items,
    mistake_items,
    optional_items,
    predict,
    previous_items,
    ready_step_hits,
)
from tgml.learners.do.config import DOConfig
from tgml.learners.noisy_and.config import METHOD_NAME as NOISY_AND
from tgml.learners.noisy_and.config import NoisyAndConfig
from tgml.learners.registry import learner

RESULTS_FORMAT: Final = "query-bench-results"
RESULTS_VERSION: Final = 1
DEFAULT_FOLDS: Final[dict[str, int | None]] = {CAPTAINCOOK: 4, "epic-tent-o": None, "assembly101-o": 5}
FOLD_SEED: Final = 0  # shuffles executions into folds

# Published on Ego-Exo4D validation (instance level) by Seminara et al.: a different dataset, shown for reference.
PUBLISHED_EGO_EXO4D: Final = {
    "DO": {"previous": 82.23, "optional": 74.52, "mistake": 84.52, "missing": 87.23, "future": 73.32},
    "TGT": {"previous": 81.77, "optional": 75.56, "mistake": 78.83, "missing": 88.88, "future": 73.56},
}
# Table rows: label, result key, and the question whose published Ego-Exo4D figure sits on that row.
ROWS: Final = (
    ("previous AP", "previous_ap", "previous"),
    ("previous AP all", "previous_ancestors_ap", None),
    ("optional AP", "optional_ap", "optional"),
    ("mistake AP", "mistake_ap", "mistake"),
    ("missing F1 end", "missing_end_f1", "missing"),
    ("missing AP end", "missing_end_ap", None),
    ("missing F1 need", "missing_need_f1", None),
    ("missing AP need", "missing_need_ap", None),
    ("future top-1", "future_top1", "future"),
    ("future top-3", "future_top3", None),
)
CAPTION: Final = (
    "Percent. DO binary: the DO graphs answered by the binary rules. No graph: every answer from frequencies "
    "counted over the training executions (how often a step came before another, was skipped, directly followed "
    "the current one). GT graph (future only): the steps whose ground-truth pre-conditions are met, in random "
    "order. previous: against the direct pre-conditions / all steps that must come earlier in the ground truth. "
    "missing: asked at the end / at the first step that needed the deleted one. —: not asked (no ground truth, "
    "or one class only). *The paper's DO on Ego-Exo4D: a different dataset, for reference, not comparable (blank: "
    "not published)."
)
# A reference column everywhere: every question answered from training counts alone, without a graph.
FREQUENCY_REFERENCE: Final = "No graph"
# A reference column where a ground-truth graph exists: the future question answered by a perfect graph.
READY_REFERENCE: Final = "GT graph"
REFERENCES: Final = (FREQUENCY_REFERENCE, READY_REFERENCE)


@dataclass(frozen=True)
class QueryBenchConfig:
    """One ``tgml bench-queries`` run, validated on construction.

    Args:
        data: the data folder (``captaincook4d/``, ``epic-tent-o/``, ``assembly101-o/``).
        datasets: which datasets, in table order.
        folds: k of the k-fold split over the correct executions of each procedure (leave-one-out when k is at
            least their number); None: `DEFAULT_FOLDS`.
        seed: DO training seed.
        epochs: cap on DO epochs (for quick runs); None: the benchmark's settings.
        procedures: CaptainCook4D procedures to use (default all 24).
    """

    data: Path
    datasets: tuple[str, ...] = QUERY_DATASETS
    folds: int | None = None
    seed: int = 42
    epochs: int | None = None
    procedures: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", Path(self.data))
        if not self.datasets:
            raise InputError("bench-queries: no dataset chosen")
        for name in self.datasets:
            if name not in QUERY_DATASETS:
                raise InputError(unknown_name("bench-queries --dataset", name, QUERY_DATASETS, None))
        if len(set(self.datasets)) != len(self.datasets):
            raise InputError("bench-queries: a dataset is listed twice")
        if self.folds is not None and self.folds < 2:
            raise InputError(f"QueryBenchConfig.folds = {self.folds}: need at least 2")
        if not is_seed(self.seed):
            raise InputError(f"QueryBenchConfig.seed = {self.seed}: expected {SEED_RULE}")
        if self.epochs is not None and self.epochs < 1:
            raise InputError(f"QueryBenchConfig.epochs = {self.epochs}: expected >= 1")
        if self.procedures and CAPTAINCOOK not in self.datasets:
            raise InputError("bench-queries: procedures choose CaptainCook4D procedures, but captaincook4d is not run")

    def folds_of(self, dataset: str) -> int | None:
        """k for a dataset (None: leave-one-out)."""
        return self.folds if self.folds is not None else DEFAULT_FOLDS[dataset]


@dataclass(frozen=True)
class Procedure:
    """One procedure's executions and what it is scored against.

    Attributes:
        dataset: dataset name.
        scenario: the procedure.
        step_ids / step_names: its taxonomy, in matrix order.
        executions: every training-pool execution, raw (repeats kept).
        correct: per execution, whether it is error-free (only those are held out and questioned).
        ground_truth: the ground-truth graph, if there is one.
        tests: PREGO test sequences, each ending with its mistake (empty for CaptainCook4D).
    """

    dataset: str
    scenario: str
    step_ids: tuple[int, ...]
    step_names: tuple[str, ...]
    executions: tuple[tuple[int, ...], ...]
    correct: tuple[bool, ...]
    ground_truth: TaskGraph | None = None
    tests: tuple[tuple[int, ...], ...] = ()


def load_bench_procedures(config: QueryBenchConfig, dataset: str) -> list[Procedure]:
    """Read one dataset's procedures from the data folder (errors name the missing file)."""
    if not config.data.is_dir():
        raise InputError(f"data folder {config.data} not found")
    if dataset == CAPTAINCOOK:
        return [Procedure(dataset, p.scenario, p.step_ids, p.step_names, p.sequences, (True,) * len(p.sequences),
                          p.ground_truth)
                for p in load_procedures(config.data / CAPTAINCOOK, config.procedures)]
    layout = resolve_data(config.data, [dataset])
    scenario = PREGO_DATASETS[dataset].scenario
    bench = load_dataset(layout, dataset, pred=False)
    videos = load_annotations(layout.train_file(dataset), check_times=False).scenario_videos(scenario)
    return [Procedure(dataset, scenario, bench.step_ids, bench.step_names, tuple(v.steps for v in videos),
                      tuple(not any(v.has_errors) for v in videos), None, tuple(bench.test.values()))]


# -- learners -------------------------------------------------------------------------------------------------
Learner = Callable[[Procedure, Sequence[Sequence[int]], QueryBenchConfig], TaskGraph]


def do_config(dataset: str, config: QueryBenchConfig) -> DOConfig:
    """DO settings of a dataset's benchmark: the CaptainCook4D protocol, or the ``[do]`` table of
    ``configs/prego-<dataset>.toml``; seed and epoch cap from ``config``."""
    if dataset == CAPTAINCOOK:
        base = dataclasses.replace(CAPTAINCOOK_DO, seed=config.seed)
    else:
        base = learner("do").config(load_method_settings(dataset)["do"], config.seed)
    return base if config.epochs is None else dataclasses.replace(base, epochs=min(config.epochs, base.epochs))


def learn_do(procedure: Procedure, sequences: Sequence[Sequence[int]], config: QueryBenchConfig) -> TaskGraph:
    """DO graph (its optional scores are learned by the trainer)."""
    result = learner("do").learn(sequences, procedure.step_ids, procedure.step_names,
                                 do_config(procedure.dataset, config), procedure.scenario)
    return result.graph


def noisy_and_settings(dataset: str, config: QueryBenchConfig) -> NoisyAndConfig:
    """Noisy-AND settings of a dataset's benchmark: CaptainCook4D's defaults, or the ``[noisy-and]`` table of the
    dataset's PREGO settings; seed and epoch cap from ``config``."""
    if dataset == CAPTAINCOOK:
        base = NoisyAndConfig(seed=config.seed)
        return base if config.epochs is None else dataclasses.replace(base, epochs=min(config.epochs, base.epochs))
    return learner(NOISY_AND).config(load_method_settings(dataset)[NOISY_AND], config.seed, config.epochs)


def learn_noisy_and(
    procedure: Procedure, sequences: Sequence[Sequence[int]], config: QueryBenchConfig
) -> TaskGraph:
    """Our noisy-AND graph (edge probabilities as weights; its optional scores are learned by the trainer)."""
    settings = noisy_and_settings(procedure.dataset, config)
    return learner(NOISY_AND).learn(sequences, procedure.step_ids, procedure.step_names, settings,
                                    procedure.scenario).graph


def learn_count_based(
    procedure: Procedure, sequences: Sequence[Sequence[int]], config: QueryBenchConfig
) -> TaskGraph:
    """Count-Based graph (transition frequencies as weights), with optional scores learned the same way."""
    graph = count_based_graph(sequences, procedure.step_ids, procedure.step_names, scenario=procedure.scenario)
    return learn_optional_scores(graph, sequences)


LEARNERS: Final[dict[str, Learner]] = {"do": learn_do, "count-based": learn_count_based, NOISY_AND: learn_noisy_and}


@dataclass(frozen=True)
class Method:
    """A table row: a learner's graph, answered with the weighted rule or with the binary rule only."""

    name: str
    learner: str
    weighted: bool = True


METHODS: Final = (Method("DO", "do"), Method("DO binary", "do", weighted=False),
                  Method("Count-Based", "count-based"), Method("Ours noisy-AND", NOISY_AND))


def _answering(graph: TaskGraph, method: Method) -> ProcedureQueries:
    if method.weighted:
        return ProcedureQueries(graph)
    return ProcedureQueries(TaskGraph(graph.step_ids, graph.step_names, graph.adjacency, None, graph.scenario,
                                      graph.info, graph.optional_scores))


# -- running --------------------------------------------------------------------------------------------------
def fold_indices(count: int, folds: int | None, seed: int = FOLD_SEED) -> list[np.ndarray]:
    """Split ``count`` executions into folds (shuffled with ``seed``); None or ``folds >= count``: one each."""
    order = np.random.default_rng(seed).permutation(count)
    k = count if folds is None else min(folds, count)
    return [np.sort(part) for part in np.array_split(order, k)]


@dataclass(frozen=True)
class ExecutionSplit:
    """How a dataset's executions were held out, as `fold_indices` splits them: k-fold, with the procedures of k
    correct executions or fewer left out one execution at a time (all of them, or every procedure, when k is None:
    leave-one-out). ``--folds 11`` on EPIC-Tent-O's 10 runs leave-one-out, and a title saying 11-fold would not be
    what ran.

    Attributes:
        folds: k of the split; None: leave-one-out.
        one_at_a_time: the procedures left out one execution at a time.
        procedures: the dataset's procedures.
    """

    folds: int | None
    one_at_a_time: int
    procedures: int

    @classmethod
    def of(cls, folds: int | None, counts: Sequence[int]) -> ExecutionSplit:
        """The split of procedures with these correct executions each (``counts``)."""
        few = sum(count <= folds for count in counts) if folds is not None else len(counts)
        return cls(folds, few, len(counts))

    def label(self, over_executions: bool = False) -> str:
        """``"leave-one-out"``, ``"4-fold"`` or, where some procedures were left out one at a time, ``"4-fold;
        leave-one-out for 1 of 3 procedures of 4 executions or fewer"``; ``over_executions``, for a title, names
        what was split: ``"leave-one-execution-out"``, ``"4-fold over executions"``."""
        one_out = "leave-one-execution-out" if over_executions else "leave-one-out"
        if self.folds is None or self.one_at_a_time == self.procedures:
            return one_out
        k_fold = f"{self.folds}-fold{' over executions' * over_executions}"
        if self.one_at_a_time == 0:
            return k_fold
        return (f"{k_fold}; {one_out} for {self.one_at_a_time} of {self.procedures} procedures of {self.folds} "
                "executions or fewer")


@dataclass
class Tally:
    """Everything one method answered on one dataset, pooled over procedures and folds."""

    previous_ap: list[float] = field(default_factory=list)
    previous_ancestors_ap: list[float] = field(default_factory=list)
    optional: list[Items] = field(default_factory=list)
    mistake: list[Items] = field(default_factory=list)
    missing: dict[str, list[Items]] = field(default_factory=lambda: {"end": [], "need": []})
    predicted: dict[str, list[np.ndarray]] = field(default_factory=lambda: {"end": [], "need": []})
    future: list[np.ndarray] = field(default_factory=list)
    thresholds: dict[str, list[float]] = field(default_factory=lambda: {"end": [], "need": []})

    def metrics(self) -> dict[str, float | None]:
        """Percentages and counts (None where nothing was asked)."""
        out: dict[str, float | None] = {
            "previous_ap": float(np.mean(self.previous_ap)) if self.previous_ap else None,
            "previous_ancestors_ap": float(np.mean(self.previous_ancestors_ap)) if self.previous_ancestors_ap else None,
        }
        for name, parts in (("optional", self.optional), ("mistake", self.mistake)):
            items = Items.join(parts)
            out[f"{name}_ap"] = average_precision(items.scores, items.labels) if len(items.labels) else None
            out[f"{name}_items"] = float(len(items.labels))
        for where in ("end", "need"):
            items = Items.join(self.missing[where])
            if not len(items.labels):
                out.update({f"missing_{where}_{k}": None for k in ("precision", "recall", "f1", "ap")})
                out[f"missing_{where}_questions"] = 0.0
                continue
            predicted = np.concatenate(self.predicted[where])
            p, r, f1 = precision_recall_f1(int((predicted & items.labels).sum()), int(predicted.sum()),
                                           int(items.labels.sum())).in_percent()
            out.update({f"missing_{where}_precision": p, f"missing_{where}_recall": r, f"missing_{where}_f1": f1,
                        f"missing_{where}_ap": average_precision(items.scores, items.labels)})
            out[f"missing_{where}_questions"] = float(items.labels.sum())
        hits = np.concatenate(self.future) if self.future else np.zeros((0, 2))
        out["future_top1"] = float(100 * hits[:, 0].mean()) if len(hits) else None
        out["future_top3"] = float(100 * hits[:, 1].mean()) if len(hits) else None
        out["future_questions"] = float(len(hits))
        for where, chosen in self.thresholds.items():  # the missing-score cuts chosen on the training folds
            out[f"missing_{where}_threshold_median"] = float(np.median(chosen)) if chosen else None
        return out


def _missing_thresholds(
    queries: Answering, executions: Sequence[Sequence[int]], needs: Needs
) -> dict[str, float]:
    """The F1-best thresholds of the missing question on the training executions (in-sample deletions)."""
    ends, at_need = [], []
    for run in executions:
        for trial in deletion_trials(run, needs):
            end, need = missing_items(queries, trial)
            ends.append(end)
            if need is not None:
                at_need.append(need)
    return {where: best_threshold(items.scores, items.labels)
            for where, items in (("end", Items.join(ends)), ("need", Items.join(at_need)))}


def _optional_truth(procedure: Procedure) -> set[int]:
    """Steps that some correct execution of the procedure skips, among those some correct execution does."""
    runs = [set(run) for run, ok in zip(procedure.executions, procedure.correct, strict=True) if ok]
    done = set().union(*runs)
    return {s for s in done if any(s not in run for run in runs)}


def _answerers(
    procedure: Procedure, graphs: dict[str, TaskGraph], train: Sequence[Sequence[int]]
) -> dict[str, Answering]:
    """Every table column that answers all the questions: the graph methods, and the graph-free frequencies."""
    answerers: dict[str, Answering] = {m.name: _answering(graphs[m.learner], m) for m in METHODS}
    answerers[FREQUENCY_REFERENCE] = FrequencyAnswers(train, procedure.step_ids)
    return answerers


def _score_fold(
    procedure: Procedure, graphs: dict[str, TaskGraph], held_out_ids: set[int], tallies: dict[str, Tally]
) -> None:
    """Ask every question of one fold (``held_out_ids`` held out, graphs trained on the rest) for every method."""
    gt = procedure.ground_truth
    train_runs = [first_occurrences(s) for k, s in enumerate(procedure.executions) if k not in held_out_ids]
    correct_train = [first_occurrences(s) for k, s in enumerate(procedure.executions)
                     if k not in held_out_ids and procedure.correct[k]]
    held_out = [procedure.executions[k] for k in sorted(held_out_ids)]
    needs = ground_truth_needs(gt) if gt is not None else always_before(train_runs)
    optional = _optional_truth(procedure)
    if gt is not None:
        tallies[READY_REFERENCE].future += [ready_step_hits(gt, first_occurrences(run)) for run in held_out]
    for name, queries in _answerers(procedure, graphs, train_runs).items():
        tally = tallies[name]
        if gt is not None:
            for ancestors, found in ((False, tally.previous_ap), (True, tally.previous_ancestors_ap)):
                items = previous_items(queries, gt, ancestors)
                ap = average_precision(items.scores, items.labels)
                if ap is not None:
                    found.append(ap)
        thresholds = _missing_thresholds(queries, correct_train, needs)
        for where, value in thresholds.items():
            tally.thresholds[where].append(value)
        for raw in held_out:
            run = first_occurrences(raw)
            tally.future.append(future_hits(queries, run))
            if optional:
                tally.optional.append(optional_items(queries, run, optional))
            for trial in deletion_trials(run, needs):
                end, need = missing_items(queries, trial)
                asked = {"end": end} if need is None else {"end": end, "need": need}
                for where, items in asked.items():
                    tally.missing[where].append(items)
                    tally.predicted[where].append(predict(items.scores, thresholds[where]))
                if gt is not None:  # a step is mistaken when the deleted one is its ground-truth pre-condition
                    labels = [needs(step, trial.deleted) for step in trial.steps]
                    tally.mistake.append(mistake_items(queries, trial.steps, labels))


def _train_graphs(procedure: Procedure, sequences: Sequence[Sequence[int]],
                  config: QueryBenchConfig) -> dict[str, TaskGraph]:
    learners = dict.fromkeys(m.learner for m in METHODS)
    return {name: LEARNERS[name](procedure, sequences, config) for name in learners}


@dataclass
class QueryBenchResult:
    """Per dataset and method, the metrics; plus the run's settings and duration."""

    config: QueryBenchConfig
    results: dict[str, dict[str, dict[str, float | None]]]
    seconds: float
    splits: dict[str, ExecutionSplit]  # dataset -> the split that ran, procedure by procedure

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready content (see the module docstring)."""
        return {
            "format": RESULTS_FORMAT,
            "version": RESULTS_VERSION,
            "settings": {"data": str(self.config.data), "datasets": list(self.config.datasets),
                         "folds": {dataset: split.label() for dataset, split in self.splits.items()},
                         "seed": self.config.seed, "epochs": self.config.epochs,
                         "procedures": list(self.config.procedures)},
            "results": self.results,
            "published_ego_exo4d": PUBLISHED_EGO_EXO4D,
            "seconds": self.seconds,
        }


def run_query_bench(config: QueryBenchConfig, progress: bool = False) -> QueryBenchResult:
    """Learn the graphs fold by fold and ask every question of every held-out execution.

    Args:
        config: what to run.
        progress: rich progress bar on stderr (one tick per trained fold).

    Returns:
        The `QueryBenchResult`.
    """
    start = time.perf_counter()
    plan = {dataset: load_bench_procedures(config, dataset) for dataset in config.datasets}  # all input checked
    for dataset in config.datasets:
        if dataset != CAPTAINCOOK:
            load_method_settings(dataset)  # the DO settings file, checked before any training
    jobs = {d: [(p, fold_indices(sum(p.correct), config.folds_of(d))) for p in procs] for d, procs in plan.items()}
    total = sum(len(folds) + bool(p.tests) for items in jobs.values() for p, folds in items)
    results: dict[str, dict[str, dict[str, float | None]]] = {}
    bar = Progress(TextColumn("[bold]bench-queries {task.fields[what]}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=Console(stderr=True), disable=not progress)
    with bar:
        task = bar.add_task("folds", total=total, what="")
        for dataset, items in jobs.items():
            tallies = {name: Tally() for name in (*(m.name for m in METHODS), *REFERENCES)}
            for procedure, folds in items:
                bar.update(task, what=f"{dataset} {procedure.scenario}")
                correct = [k for k, ok in enumerate(procedure.correct) if ok]
                for part in folds:
                    out = {correct[i] for i in part}
                    train = [s for k, s in enumerate(procedure.executions) if k not in out]
                    graphs = _train_graphs(procedure, train, config)
                    _score_fold(procedure, graphs, out, tallies)
                    bar.advance(task)
                if procedure.tests:  # real mistakes: the PREGO test videos, graph from the whole training split
                    graphs = _train_graphs(procedure, procedure.executions, config)
                    for name, queries in _answerers(procedure, graphs, procedure.executions).items():
                        tallies[name].mistake += [mistake_items(queries, seq, protocol_labels(len(seq)))
                                                  for seq in procedure.tests]
                    bar.advance(task)
            results[dataset] = {name: tally.metrics() for name, tally in tallies.items()
                                if name != READY_REFERENCE or tally.future}
    splits = {d: ExecutionSplit.of(config.folds_of(d), [sum(p.correct) for p in procs]) for d, procs in plan.items()}
    return QueryBenchResult(config, results, time.perf_counter() - start, splits)


# -- report ---------------------------------------------------------------------------------------------------
def query_bench_tables(result: QueryBenchResult) -> list[Table]:
    """One rich table per dataset: a row per question and metric, a column per method, and the paper's DO figure
    on Ego-Exo4D beside it (a different dataset, marked as such)."""
    tables = []
    for number, (dataset, methods) in enumerate(result.results.items(), start=1):
        folds = result.splits[dataset].label(over_executions=True)
        last = number == len(result.results)  # the legend once, under the last table
        table = Table(title=f"{dataset}: procedure questions on held-out executions ({folds})", header_style="bold",
                      caption=CAPTION if last else None, caption_justify="left")
        table.add_column("question, metric", no_wrap=True)
        for name in methods:  # narrow columns: a header breaks at its spaces and hyphens
            table.add_column(name.replace(" ", "\n").replace("-", "-\n"), justify="right")
        table.add_column("Ego-\nExo4D*", justify="right", style="dim")
        for label, key, question in ROWS:
            cells = ["—" if (v := m.get(key)) is None else f"{v:.1f}" for m in methods.values()]
            published = f"{PUBLISHED_EGO_EXO4D['DO'][question]:.1f}" if question else ""
            table.add_row(label, *cells, published)
        tables.append(table)
    return tables
