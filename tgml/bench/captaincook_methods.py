"""Every method of the CaptainCook4D task-graph table, run and scored together (``tgml bench-captaincook --method``).

Methods (the paper's table, Seminara et al. NeurIPS 2024, plus ours):

- ``do``: Direct Optimization (`tgml.bench.captaincook.run_benchmark`, unchanged: DO options apply to it only);
- every other learner of `tgml.learners.registry` (``noisy-and``, ``count-based``, ``msgi``, ``msg2``, ``tgt-text``
  and our variants), with its config class's default settings; ``tgt-text`` needs the ``text`` extra, and the step
  names are embedded once, here, before the workers start;
- ``llm``: the published Llama-3.1-405B graphs (`graphs.llm_graphs`), read from ``<data>/llm_task_graphs``,
  scored as written (one of them keeps a two-step cycle, as published).

Methods without randomness (count-based, msgi, msg2, llm) run once per procedure, in this process and before any
training, so a bad LLM graph folder fails in seconds; seeded learners run per (seed, procedure) in worker
processes, in the same pool as DO.

Result JSON (``tgml bench-captaincook --json FILE``)::

    {"benchmark": "captaincook4d-task-graph-generation", "version": 2,
     "methods": {METHOD: {"method", "config", "seeds", "ensemble", "runs": [{"scenario", "seed", "steps",
                 "epochs", "precision", "recall", "f1", "true_positives", "predicted", "expected"}],
                 "per_seed": {seed: {"precision", "recall", "f1"}}, "summary": {"precision" | "recall" | "f1":
                 {"mean", "ci90"}}, "published": {"precision", "recall", "f1"} | null}},
     "seconds": float}

A method's entry keeps the meaning of version 1's top-level keys (DO's entry also keeps ``published_do``);
``config`` is DO's training configuration for ``do`` and the method's settings otherwise; a method without
randomness has ``seeds: []``, ``seed: null`` runs and one ``per_seed`` entry ``"-"``.
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
from graphs.common.safe_text import unknown_name
from graphs.edge_metrics import edge_scores
from graphs.llm_graphs import LLM_FOLDER, llm_adjacency, llm_graph_path
from tgml.bench.captaincook import (
    DEFAULT_CONFIG,
    PUBLISHED,
    PUBLISHED_PROCEDURES,
    BenchmarkResult,
    Procedure,
    RunScore,
    load_procedures,
    run_benchmark,
    summary_text,
)
from tgml.bench.process_pool import run_jobs
from tgml.learners.do.config import DOConfig
from tgml.learners.registry import LEARNERS, learner
from tgml.learners.tgt_text.config import TgtTextConfig

RESULTS_VERSION: Final = 2
# Adjacency in the procedure's layout (START, K_1..K_n, END) and the epochs trained (0 without training).
Outcome = tuple[np.ndarray, int]
# Graphs that are read, not learned: the published LLM graphs.
PUBLISHED_GRAPHS: Final = ("llm",)
METHODS: Final = ("do", *(name for name in LEARNERS if name != "do"), *PUBLISHED_GRAPHS)


@dataclass(frozen=True)
class MethodSettings:
    """What the methods other than DO read; DO keeps its own `DOConfig` and ensemble size.

    Args:
        llm_folder: folder of the ``graph_<procedure>.adjlist`` files (default ``<data>/llm_task_graphs``).
        configs: a learner's config by name, for a learner that should not use its config class's defaults (its seed
            is replaced by each benchmark seed).
    """

    llm_folder: Path | None = None
    configs: Mapping[str, Any] = field(default_factory=dict)

    def config(self, method: str) -> Any:
        """The config ``method`` learns with: the one given, or the registry's defaults."""
        return self.configs[method] if method in self.configs else learner(method).config(None)


def _llm(procedure: Procedure, settings: MethodSettings) -> Outcome:
    assert settings.llm_folder is not None  # set by run_methods
    path = llm_graph_path(settings.llm_folder, procedure.scenario)
    return llm_adjacency(path, procedure.step_ids, procedure.step_names, procedure.scenario), 0


def _learned(method: str, procedure: Procedure, settings: MethodSettings, seed: int | None) -> Outcome:
    """Worker job: one learner's graph of one procedure (torch loads only in the worker that trains)."""
    entry = learner(method)
    config = settings.config(method) if seed is None else entry.with_seed(settings.config(method), seed)
    result = entry.learn(procedure.sequences, procedure.step_ids, procedure.step_names, config,
                               procedure.scenario)
    return result.graph.adjacency, result.epochs_run


def _settings_entry(method: str, settings: MethodSettings) -> dict[str, Any]:
    """The settings a method used, for the JSON file."""
    if method in PUBLISHED_GRAPHS:
        return {"folder": str(settings.llm_folder)}
    return {k: v for k, v in dataclasses.asdict(settings.config(method)).items() if k != "seed"}


def check_methods(methods: Sequence[str]) -> None:
    """Refuse an unknown or repeated method before anything runs."""
    if not methods:
        raise InputError("--method: give at least one method")
    for k, method in enumerate(methods):
        if method not in METHODS:
            raise InputError(unknown_name("--method", method, METHODS, None))
        if method in methods[:k]:
            raise InputError(f"--method {method}: listed twice")


@dataclass
class MethodsOutcome:
    """Every method's `BenchmarkResult`, in the order asked, and the wall time of the whole run."""

    results: dict[str, BenchmarkResult]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of the module docstring."""
        return {"benchmark": "captaincook4d-task-graph-generation", "version": RESULTS_VERSION,
                "methods": {name: result.to_dict() for name, result in self.results.items()},
                "seconds": self.seconds}


def run_methods(
    data_dir: str | Path,
    methods: Sequence[str],
    seeds: Sequence[int],
    config: DOConfig = DEFAULT_CONFIG,
    scenarios: Sequence[str] = (),
    workers: int = 1,
    progress: bool = False,
    ensemble: int = 1,
    settings: MethodSettings | None = None,
) -> MethodsOutcome:
    """Learn and score every method on every procedure (seeded ones for every seed).

    Args:
        data_dir: the ``captaincook4d`` folder.
        methods: names from `METHODS`.
        seeds: seeds of the seeded learners.
        config: DO's training settings.
        scenarios: restrict to these procedures.
        workers: worker processes for the seeded learners.
        progress: rich progress bars on stderr.
        ensemble: DO members per seed (see `run_benchmark`).
        settings: the other methods' settings.

    Returns:
        The `MethodsOutcome`.
    """
    started = time.perf_counter()
    check_methods(methods)
    settings = settings or MethodSettings()
    if settings.llm_folder is None:
        settings = dataclasses.replace(settings, llm_folder=Path(data_dir) / LLM_FOLDER)
    procedures = load_procedures(data_dir, scenarios)
    results: dict[str, BenchmarkResult] = {}
    # Cheap methods first, here: a bad LLM folder or graph is reported before minutes of training.
    once = [m for m in methods if m in PUBLISHED_GRAPHS or (m != "do" and not learner(m).seeded)]
    for method in once:
        result = BenchmarkResult(config, (), method=method, settings=_settings_entry(method, settings))
        for procedure in procedures:
            adjacency, epochs = _llm(procedure, settings) if method in PUBLISHED_GRAPHS else _learned(
                method, procedure, settings, None)
            result.runs.append(RunScore(procedure.scenario, None, len(procedure.step_ids), epochs,
                                        edge_scores(adjacency, procedure.ground_truth.adjacency)))
        results[method] = result
    seeded = [m for m in methods if m != "do" and m not in once]
    if any(learner(m).needs == "text" for m in seeded):
        from tgml.text_embeddings import embed_ahead

        embed_ahead((procedure.step_names for procedure in procedures), TgtTextConfig().encoder)
    jobs = [(m, p, settings, int(s)) for m in seeded for s in seeds for p in procedures]
    outcomes = run_jobs(_learned, jobs, workers, "[bold]CaptainCook4D learners", progress) if jobs else []
    for method in seeded:
        results[method] = BenchmarkResult(config, tuple(int(s) for s in seeds), method=method,
                                          settings=_settings_entry(method, settings))
    for (method, procedure, _, seed), (adjacency, epochs) in zip(jobs, outcomes, strict=True):
        results[method].runs.append(RunScore(procedure.scenario, seed, len(procedure.step_ids), epochs,
                                             edge_scores(adjacency, procedure.ground_truth.adjacency)))
    if "do" in methods:
        results["do"] = run_benchmark(data_dir, seeds, config, scenarios, workers, progress, ensemble)
    return MethodsOutcome({m: results[m] for m in methods}, time.perf_counter() - started)


def seeds_cell(seeds: Sequence[int], per_seed: np.ndarray) -> str:
    """The seeds column: "none" for a deterministic method ("-" is not measured), the count else, and "all alike"
    where every seed scored the same (noisy-AND's seed only jitters a constant start): a spread of 0.0 over n runs
    read as stability."""
    if not seeds:
        return "none"
    alike = len(seeds) > 1 and float(np.ptp(per_seed, axis=0).max()) == 0.0
    return f"{len(seeds)}{', all alike' if alike else ''}"


def methods_table(outcome: MethodsOutcome) -> Table:
    """Rich table: one row per method, P / R / F1 mean ± 90% CI over seeds, with the published row beside it.

    Methods of the paper's table that were not run are listed too, with their published row only.
    """
    procedures = len({r.scenario for result in outcome.results.values() for r in result.runs})
    spread = any(len(result.seeds) > 1 for result in outcome.results.values())
    table = Table(title=f"CaptainCook4D task graph generation, {procedures} procedures, "
                        f"{'mean ± 90% CI over seeds' if spread else 'one run each'}", header_style="bold")
    paper = "published P / R / F1" + (f" ({PUBLISHED_PROCEDURES} procedures)" if procedures < PUBLISHED_PROCEDURES
                                      else "")
    for col in ("method", "seeds", "precision", "recall", "F1", paper):
        table.add_column(col, justify="left" if col == "method" else "right")
    for name, result in outcome.results.items():
        summary = result.summary()
        published = PUBLISHED.get(name)
        table.add_row(
            name if result.ensemble == 1 else f"{name} (ensemble of {result.ensemble})",
            seeds_cell(result.seeds, result.per_seed()),
            *(summary_text(summary[k], len(result.seeds)) for k in ("precision", "recall", "f1")),
            "ours" if published is None else " / ".join(f"{v:.1f}" for v in published),
        )
    not_run = [m for m in PUBLISHED if m not in outcome.results]
    if not_run:
        table.add_section()
    for name in not_run:
        table.add_row(f"[dim]{name} (not run)", "", "", "", "", " / ".join(f"{v:.1f}" for v in PUBLISHED[name]))
    return table
