"""CaptainCook4D online order-mistake benchmark: real human mistakes, no cut at the first one (``tgml bench-mistakes``;
docs/mistakes-benchmark.md).

Graphs are learned per procedure from the 194 graph-generation recordings (`tgml.bench.captaincook.load_procedures`)
by every learner asked for (`tgml.learners.registry`, one graph per seed for a seeded learner), beside two graphs that
are read: the published LLM graphs and the published ground-truth graphs (the reference row). Each of the 190 other
recordings of ``error_annotations.json`` (`tgml.bench.error_annotations`) is replayed online, its performed steps in
time order through `graphs.checker.PreconditionChecker` (the live checker's object) under one or more order rules
(`graphs.order_rules`); the checker goes on after a mistake, as it does live, so a step after an earlier mistake is
judged against every step done before it, the mistaken one included. Scores, pooled over recordings:

- order mistakes: a step is a true mistake when tagged Order Error; precision / recall / F1 of the mistake class, of
  the correct class, and their mean (PREGO's Avg F1);
- missing steps: at the end of each recording, the steps the live ``missing`` message names
  (`graphs.order_rules.never_done`) against the steps tagged Missing Step;
- alerts on steps whose only tags are other errors (technique, measurement, timing...), which no order graph can see.

Result JSON (``--json FILE``)::

    {"benchmark": "captaincook4d-order-mistakes", "version": 1, "recordings": int, "training_recordings": int,
     "skipped_steps": [[recording_id, name]], "untimely_steps": [[recording_id, name]], "rules": [rule],
     "llm_edges_dropped": {scenario: int}, "seconds": float,
     "rows": {ROW: {"kind": "learner" | "published", "seeds": [int], "config": {...} | null,
                    "rules": {RULE: {"summary": {METRIC: {"mean", "std"}},
                                     "per_seed": {seed | "-": {METRIC: value}},
                                     "per_recipe": {scenario: {METRIC: mean over seeds, COUNT: sum over seeds}}}}}}}

METRIC is one of `METRICS`, COUNT one of `COUNTS`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
from rich.table import Table

from graphs.common.errors import InputError
from graphs.common.files import read_json
from graphs.common.safe_text import unknown_name
from graphs.llm_graphs import LLM_FOLDER, llm_adjacency, llm_graph_path
from graphs.order_rules import ORDER_RULES, check_rule, never_done, order_flags
from graphs.postprocess import break_cycles
from graphs.precision_recall import NOT_MEASURED, mean_and_std, mean_of_measured, precision_recall_f1
from graphs.task_graph import TaskGraph
from tgml.bench.captaincook import ANNOTATIONS, DEFAULT_CONFIG, Procedure, load_procedures
from tgml.bench.error_annotations import (
    ErrorAnnotations,
    ErrorRecording,
    load_error_annotations,
    unmatched_line,
    untimely_line,
)
from tgml.bench.fitted_table import FittedTable
from tgml.bench.process_pool import run_jobs
from tgml.learners.registry import LEARNERS, learner

ERROR_ANNOTATIONS: Final = "error_annotations.json"
RESULTS_VERSION: Final = 1
GROUND_TRUTH: Final = "ground-truth"
LLM: Final = "llm"
# The learners run when none is named (the ones that learn the 24 procedures in seconds), and the LLM graphs.
DEFAULT_METHODS: Final = ("noisy-and", "do", "count-based", "msgi", "msg2", LLM)
METHODS: Final = (*LEARNERS, LLM)
COUNTS: Final = ("steps", "order_errors", "alerts", "caught", "missing_tagged", "missing_named", "missing_right",
                 "other_error_steps", "other_error_alerts", "untagged_alerts")
METRICS: Final = ("avg_f1", "mistake_precision", "mistake_recall", "mistake_f1", "correct_precision",
                  "correct_recall", "correct_f1", "missing_precision", "missing_recall", "missing_f1",
                  "other_error_alerts", "untagged_alerts")


@dataclass(frozen=True)
class MistakeBenchConfig:
    """One run of the benchmark.

    Attributes:
        data_dir: the ``captaincook4d`` folder (graph-generation annotations, ground-truth and LLM graphs, errors).
        methods: learners of the registry and ``llm``; the ground-truth row is always added.
        seeds: seeds of the seeded learners.
        rules: order rules scored (`graphs.order_rules.ORDER_RULES`).
        procedures: restrict to these procedures (default all 24).
        workers: worker processes for learning.
        errors_file: the error annotations (default ``<data_dir>/error_annotations.json``).
        llm_folder: the LLM graphs (default ``<data_dir>/llm_task_graphs``).
    """

    data_dir: Path
    methods: tuple[str, ...] = DEFAULT_METHODS
    seeds: tuple[int, ...] = (42, 43, 44)
    rules: tuple[str, ...] = ORDER_RULES
    procedures: tuple[str, ...] = ()
    workers: int = 1
    errors_file: Path | None = None
    llm_folder: Path | None = None

    def __post_init__(self) -> None:
        if not self.methods:
            raise InputError("--method: give at least one method")
        for k, method in enumerate(self.methods):
            if method not in METHODS:
                raise InputError(unknown_name("--method", method, METHODS, None))
            if method in self.methods[:k]:
                raise InputError(f"--method {method}: listed twice")
        if not self.seeds:
            raise InputError("--seeds: at least one seed is needed")
        if not self.rules:
            raise InputError("--rules: give at least one rule")
        for rule in self.rules:
            check_rule(rule, "--rules")


@dataclass
class Counts:
    """What one replay adds up (every field a count; `COUNTS`)."""

    steps: int = 0
    order_errors: int = 0
    alerts: int = 0
    caught: int = 0
    missing_tagged: int = 0
    missing_named: int = 0
    missing_right: int = 0
    other_error_steps: int = 0
    other_error_alerts: int = 0
    untagged_alerts: int = 0

    def __iadd__(self, other: Counts) -> Counts:
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self

    def metrics(self) -> dict[str, float | None]:
        """The scores of these counts (percent; a score over nothing is None, `graphs.precision_recall`)."""
        mistake = precision_recall_f1(self.caught, self.alerts, self.order_errors).in_percent()
        correct_right = self.steps - self.alerts - self.order_errors + self.caught
        correct = precision_recall_f1(correct_right, self.steps - self.alerts,
                                      self.steps - self.order_errors).in_percent()
        missing = precision_recall_f1(self.missing_right, self.missing_named, self.missing_tagged).in_percent()
        return {
            "avg_f1": mean_of_measured((mistake.f1, correct.f1)),
            **dict(zip(("mistake_precision", "mistake_recall", "mistake_f1"), mistake, strict=True)),
            **dict(zip(("correct_precision", "correct_recall", "correct_f1"), correct, strict=True)),
            **dict(zip(("missing_precision", "missing_recall", "missing_f1"), missing, strict=True)),
            "other_error_alerts": float(self.other_error_alerts),
            "untagged_alerts": float(self.untagged_alerts),
        }


def replay_recording(graph: TaskGraph, recording: ErrorRecording, rule: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """One recording, online: the alert flag of each performed step and the steps named missing at its end.

    Args:
        graph: the procedure's graph.
        recording: the recording (performed steps in time order).
        rule: the order rule.

    Returns:
        ``(bool (steps,) alerts, missing steps in graph order)``.
    """
    sequence = recording.sequence
    return order_flags(graph, sequence, rule), never_done(graph, sequence)


def recording_counts(graph: TaskGraph, recording: ErrorRecording, rule: str) -> Counts:
    """The counts one recording adds under one rule (see the module docstring)."""
    flags, named = replay_recording(graph, recording, rule)
    truth = np.array([p.order_error for p in recording.performed], dtype=bool)
    tagged = np.array([bool(p.tags) for p in recording.performed], dtype=bool)
    other = tagged & ~truth
    return Counts(
        steps=len(flags), order_errors=int(truth.sum()), alerts=int(flags.sum()), caught=int((flags & truth).sum()),
        missing_tagged=len(recording.missing), missing_named=len(named),
        missing_right=len(set(named) & recording.missing), other_error_steps=int(other.sum()),
        other_error_alerts=int((flags & other).sum()), untagged_alerts=int((flags & ~tagged).sum()),
    )


def score_graphs(graphs: Mapping[str, TaskGraph], recordings: Sequence[ErrorRecording], rule: str
                 ) -> dict[str, Counts]:
    """Replay every recording against its procedure's graph; counts per procedure."""
    per_recipe: dict[str, Counts] = {}
    for recording in recordings:
        per_recipe.setdefault(recording.scenario, Counts())
        per_recipe[recording.scenario] += recording_counts(graphs[recording.scenario], recording, rule)
    return per_recipe


# -- the graphs ------------------------------------------------------------------------------------------------------
def learner_config(method: str, seed: int) -> Any:
    """The settings a learner runs with here: CaptainCook4D's DO protocol for ``do``, the registry's defaults else."""
    entry = learner(method)
    base = DEFAULT_CONFIG if method == "do" else entry.config(None)
    return entry.with_seed(base, seed)


def _learn(method: str, procedure: Procedure, seed: int) -> dict[str, Any]:
    """Worker job: one learner's graph of one procedure, as file content (cheap to send between processes)."""
    result = learner(method).learn(procedure.sequences, procedure.step_ids, procedure.step_names,
                                         learner_config(method, seed), procedure.scenario)
    return result.graph.to_dict()


def llm_graph(folder: Path, procedure: Procedure) -> tuple[TaskGraph, int]:
    """The published LLM graph of a procedure, with any cycle broken (one edge per cycle, in cycle order).

    Returns:
        ``(graph, edges dropped)``: a pre-condition checker needs a DAG; one published graph keeps a two-step cycle.
    """
    path = llm_graph_path(folder, procedure.scenario)
    adjacency = llm_adjacency(path, procedure.step_ids, procedure.step_names, procedure.scenario)
    acyclic = break_cycles(adjacency, np.ones(adjacency.shape))
    info = {"method": LLM, "source": path.name}
    graph = TaskGraph(procedure.step_ids, procedure.step_names, acyclic, None, procedure.scenario, info)
    return graph, int(adjacency.sum() - acyclic.sum())


# -- the run ---------------------------------------------------------------------------------------------------------
@dataclass
class RowResult:
    """One row of the table: a learner (one graph per procedure and seed) or a published graph."""

    name: str
    kind: str
    seeds: tuple[int, ...]
    config: dict[str, Any] | None
    counts: dict[str, dict[int | None, dict[str, Counts]]] = field(default_factory=dict)  # rule -> seed -> recipe

    def pooled(self, rule: str) -> dict[int | None, Counts]:
        """Counts of every recording, per seed."""
        out: dict[int | None, Counts] = {}
        for seed, recipes in self.counts[rule].items():
            total = Counts()
            for counts in recipes.values():
                total += counts
            out[seed] = total
        return out

    def summary(self, rule: str) -> dict[str, dict[str, float | None]]:
        """Mean and population std over seeds of every metric (None: some seed's measured nothing)."""
        mean, std = mean_and_std([[c.metrics()[m] for m in METRICS] for c in self.pooled(rule).values()])
        return {m: {"mean": mean[k], "std": std[k]} for k, m in enumerate(METRICS)}

    def to_dict(self) -> dict[str, Any]:
        """The row's part of the result JSON (module docstring)."""
        rules = {}
        for rule, by_seed in self.counts.items():
            recipes: dict[str, dict[str, float | None]] = {}
            for scenario in next(iter(by_seed.values())):
                per_seed = [by_seed[s][scenario] for s in by_seed]
                total = Counts()
                for counts in per_seed:
                    total += counts
                means, _ = mean_and_std([[c.metrics()[m] for m in METRICS] for c in per_seed])
                recipes[scenario] = {**dict(zip(METRICS, means, strict=True)), **dataclasses.asdict(total)}
            rules[rule] = {
                "summary": self.summary(rule),
                "per_seed": {("-" if s is None else str(s)): c.metrics() for s, c in self.pooled(rule).items()},
                "per_recipe": recipes,
            }
        return {"kind": self.kind, "seeds": list(self.seeds), "config": self.config, "rules": rules}


@dataclass
class MistakeBenchResult:
    """Every row, the data facts behind them, and the wall time."""

    rows: dict[str, RowResult]
    errors: ErrorAnnotations
    rules: tuple[str, ...]
    llm_edges_dropped: dict[str, int]
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The result JSON of the module docstring."""
        return {"benchmark": "captaincook4d-order-mistakes", "version": RESULTS_VERSION,
                "recordings": len(self.errors.recordings), "training_recordings": self.errors.training,
                "skipped_steps": [list(pair) for pair in self.errors.unmatched],
                "untimely_steps": [list(pair) for pair in self.errors.untimely], "rules": list(self.rules),
                "llm_edges_dropped": self.llm_edges_dropped, "seconds": self.seconds,
                "rows": {name: row.to_dict() for name, row in self.rows.items()}}


def load_error_recordings(data_dir: Path, procedures: Sequence[Procedure], errors_file: Path | None = None
                          ) -> ErrorAnnotations:
    """The error annotations of the recordings no graph is learned from, matched to the procedures' taxonomies.

    A recording of a procedure left out by ``procedures`` is not scored (``--procedures``).
    """
    raw = read_json(data_dir / ANNOTATIONS, "annotation file")
    videos = raw.get("annotations") if isinstance(raw, dict) else None
    if not isinstance(videos, dict):
        raise InputError(f"{data_dir / ANNOTATIONS}: expected an object with 'annotations'")
    activities = {v["activity_id"]: str(v["scenario"]) for v in videos.values()
                  if isinstance(v, dict) and isinstance(v.get("activity_id"), int) and "scenario" in v}
    taxonomies = {p.scenario: (p.step_ids, p.step_names) for p in procedures}
    return load_error_annotations(errors_file or data_dir / ERROR_ANNOTATIONS, taxonomies, activities,
                                  frozenset(videos), restrict=frozenset(taxonomies))


def run_mistake_bench(config: MistakeBenchConfig, progress: bool = False) -> MistakeBenchResult:
    """Learn every graph, replay the 190 recordings against each, and score them.

    Args:
        config: the run.
        progress: rich progress bar on stderr while learning.

    Returns:
        The `MistakeBenchResult`; rows in the order asked, the ground-truth reference row last.
    """
    started = time.perf_counter()
    data_dir = Path(config.data_dir)
    procedures = load_procedures(data_dir, config.procedures)
    errors = load_error_recordings(data_dir, procedures, config.errors_file)
    recordings = errors.recordings
    graphs: dict[str, dict[int | None, dict[str, TaskGraph]]] = {}
    dropped: dict[str, int] = {}
    rows: dict[str, RowResult] = {}
    if LLM in config.methods:  # read before any training: a bad LLM folder fails in seconds
        folder = config.llm_folder or data_dir / LLM_FOLDER
        graphs[LLM] = {None: {}}
        for procedure in procedures:
            graphs[LLM][None][procedure.scenario], edges = llm_graph(folder, procedure)
            if edges:
                dropped[procedure.scenario] = edges
        rows[LLM] = RowResult(LLM, "published", (), {"folder": str(folder)})
    learners = [m for m in config.methods if m != LLM]
    if any(learner(m).needs == "text" for m in learners):
        from tgml.learners.tgt_text.config import TgtTextConfig
        from tgml.text_embeddings import embed_ahead

        embed_ahead((procedure.step_names for procedure in procedures), TgtTextConfig().encoder)
    jobs = [(m, p, s) for m in learners for s in (config.seeds if learner(m).seeded else (None,)) for p in procedures]
    arguments = [(m, p, 0 if s is None else s) for m, p, s in jobs]
    learned = run_jobs(_learn, arguments, config.workers, "[bold]learning graphs", progress) if jobs else []
    for (method, procedure, seed), content in zip(jobs, learned, strict=True):
        graphs.setdefault(method, {}).setdefault(seed, {})[procedure.scenario] = TaskGraph.from_dict(content)
    for method in learners:
        seeds = config.seeds if learner(method).seeded else ()
        settings = dataclasses.asdict(learner_config(method, 0))
        rows[method] = RowResult(method, "learner", tuple(seeds), {k: v for k, v in settings.items() if k != "seed"})
    graphs[GROUND_TRUTH] = {None: {p.scenario: p.ground_truth for p in procedures}}
    rows[GROUND_TRUTH] = RowResult(GROUND_TRUTH, "published", (), {"folder": "ground_truth_task_graphs"})
    ordered = {m: rows[m] for m in (*config.methods, GROUND_TRUTH)}
    for name, row in ordered.items():
        for rule in config.rules:
            row.counts[rule] = {seed: score_graphs(by_seed, recordings, rule)
                                for seed, by_seed in graphs[name].items()}
    return MistakeBenchResult(ordered, errors, config.rules, dropped, time.perf_counter() - started)


# -- the table -------------------------------------------------------------------------------------------------------
RULE_TITLES: Final = {"precondition": "pre-condition rule (the live checker)",
                      "late-step": "pre-condition + late-step rule (graphs.order_rules)"}


def _cell(summary: dict[str, dict[str, float | None]], metric: str, seeded: bool) -> str:
    mean, std = summary[metric]["mean"], summary[metric]["std"]
    if mean is None or std is None:
        return NOT_MEASURED
    if metric in ("other_error_alerts", "untagged_alerts"):
        return f"{mean:.0f}" + (f" ± {std:.0f}" if seeded else "")
    return f"{mean:.1f}" + (f" ± {std:.1f}" if seeded else "")


def mistake_tables(result: MistakeBenchResult) -> list[FittedTable]:
    """One table per rule: a row per learner (mean ± std over seeds), the published graphs last.

    Each is a `tgml.bench.fitted_table.FittedTable`: in a terminal too narrow for it, it is drawn narrowed or as
    lines, never with a figure cut; printed wide enough (a log, a pipe), it is the whole table.
    """
    tables = []
    errors = result.errors
    first = next(iter(result.rows.values())).pooled(result.rules[0])
    totals = next(iter(first.values()))
    for rule in result.rules:
        table = Table(title=f"CaptainCook4D online order mistakes, {len(errors.recordings)} recordings, "
                            f"{totals.steps} steps ({totals.order_errors} Order Error), {RULE_TITLES[rule]}",
                      header_style="bold")
        columns = ("method", "seeds", "Avg F1", "Mist P", "Mist R", "Mist F1", "Corr F1", "Missing P", "Missing R",
                   "Missing F1", f"alerts on other errors (of {totals.other_error_steps})", "alerts on untagged")
        for col in columns:
            table.add_column(col, justify="left" if col == "method" else "right")
        for name, row in result.rows.items():
            if name == GROUND_TRUTH:
                table.add_section()
            summary = row.summary(rule)
            seeded = len(row.seeds) > 1
            table.add_row(name if name != GROUND_TRUTH else "ground truth (reference)",
                          str(len(row.seeds)) if row.seeds else "none",  # "-" is a figure not measured
                          *(_cell(summary, m, seeded) for m in ("avg_f1", "mistake_precision", "mistake_recall",
                                                                "mistake_f1", "correct_f1", "missing_precision",
                                                                "missing_recall", "missing_f1",
                                                                "other_error_alerts", "untagged_alerts")))
        if any(cell == NOT_MEASURED for column in table.columns[2:] for cell in column.cells):
            table.caption, table.caption_justify = f"{NOT_MEASURED}: not measured (nothing to count)", "left"
        tables.append(FittedTable(table))
    return tables


def data_notes(result: MistakeBenchResult) -> list[str]:
    """The lines that say what was left out or changed, never silently."""
    errors = result.errors
    notes = [f"{len(errors.recordings)} recordings scored; {errors.training} recordings left out (the graphs are "
             "learned from them)"]
    # In the words of bench-live and captaincook-labels (`tgml.bench.error_annotations`).
    if errors.unmatched:
        notes.append(unmatched_line(errors.unmatched))
    if errors.untimely:
        notes.append(untimely_line(errors.untimely, "a step with a time is replayed as done, a tagged one counts as "
                                                    "missing"))
    for scenario, edges in result.llm_edges_dropped.items():
        notes.append(f"llm: {edges} edge(s) of {scenario} dropped to break a cycle (a checker needs a DAG)")
    return notes
