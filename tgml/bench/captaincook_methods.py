"""Every method of the CaptainCook4D task-graph table, run and scored together (``tgml bench-captaincook --method``).

Methods (the paper's table, Seminara et al. NeurIPS 2024, plus ours):

- ``do``: Direct Optimization (`tgml.bench.captaincook.run_benchmark`, unchanged: DO options apply to it only);
- ``noisy-and``: our noisy-AND TGML learner (`tgml.noisy_and_train`, default settings), one graph per seed;
- ``count-based``: transition counts (`graphs.count_based`), raw sequences as the published baseline;
- ``msgi`` / ``msg2``: the greedy eligibility search with the accuracy / precision objective
  (`graphs.eligibility_search`);
- ``llm``: the published Llama-3.1-405B graphs (`graphs.llm_graphs`), read from ``<data>/llm_task_graphs``,
  scored as written (one of them keeps a two-step cycle, as published);
- ``tgt-text``: the Task Graph Transformer on step-name embeddings (`tgml.tgt_train`, default settings; needs the
  ``text`` extra), one graph per seed; the step names are embedded once, here, before the workers start.

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

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
from rich.table import Table

from graphs.count_based import CountBasedConfig, count_based_graph
from graphs.edge_metrics import edge_scores
from graphs.eligibility_search import EligibilitySearchConfig, eligibility_search_graph
from graphs.errors import InputError
from graphs.llm_graphs import LLM_FOLDER, llm_adjacency, llm_graph_path
from tgml.bench.captaincook import (
    DEFAULT_CONFIG,
    PUBLISHED,
    BenchmarkResult,
    Procedure,
    RunScore,
    load_procedures,
    run_benchmark,
)
from tgml.bench.process_pool import run_jobs
from tgml.noisy_and_config import NoisyAndConfig
from tgml.train import TrainConfig

RESULTS_VERSION: Final = 2
# Adjacency in the procedure's layout (START, K_1..K_n, END) and the epochs trained (0 without training).
Outcome = tuple[np.ndarray, int]


@dataclass(frozen=True)
class MethodSettings:
    """What the non-DO methods read; DO keeps its own `TrainConfig` and ensemble size.

    Args:
        llm_folder: folder of the ``graph_<procedure>.adjlist`` files (default ``<data>/llm_task_graphs``).
        noisy_and: noisy-AND settings (its seed is replaced by each benchmark seed).
        count_based: Count-Based settings.
    """

    llm_folder: Path | None = None
    noisy_and: NoisyAndConfig = field(default_factory=NoisyAndConfig)
    count_based: CountBasedConfig = field(default_factory=CountBasedConfig)


def _count_based(procedure: Procedure, settings: MethodSettings) -> Outcome:
    graph = count_based_graph(procedure.sequences, procedure.step_ids, procedure.step_names, settings.count_based,
                              procedure.scenario)
    return graph.adjacency, 0


def _eligibility(objective: str) -> Callable[[Procedure, MethodSettings], Outcome]:
    def build(procedure: Procedure, settings: MethodSettings) -> Outcome:
        graph = eligibility_search_graph(procedure.sequences, procedure.step_ids, procedure.step_names,
                                         EligibilitySearchConfig(objective), procedure.scenario)
        return graph.adjacency, 0

    return build


def _llm(procedure: Procedure, settings: MethodSettings) -> Outcome:
    assert settings.llm_folder is not None  # set by run_methods
    path = llm_graph_path(settings.llm_folder, procedure.scenario)
    return llm_adjacency(path, procedure.step_ids, procedure.step_names, procedure.scenario), 0


def _noisy_and(procedure: Procedure, settings: MethodSettings, seed: int) -> Outcome:
    from tgml.noisy_and_train import train_noisy_and_graph  # torch loads only in the worker that trains

    result = train_noisy_and_graph(procedure.sequences, procedure.step_ids, procedure.step_names,
                                   settings.noisy_and.replace(seed=seed), procedure.scenario)
    return result.graph.adjacency, result.epochs_run


def _tgt_text(procedure: Procedure, settings: MethodSettings, seed: int) -> Outcome:
    from tgml.tgt_config import TgtTextConfig
    from tgml.tgt_train import train_tgt_text_graph  # torch and the text encoder load only in the worker

    result = train_tgt_text_graph(procedure.sequences, procedure.step_ids, procedure.step_names,
                                  TgtTextConfig(seed=seed), procedure.scenario)
    return result.graph.adjacency, result.epochs_run


def _embed_step_names(procedures: Sequence[Procedure]) -> None:
    """Embed every procedure's step names here, once: a missing ``text`` extra fails before any training, and the
    workers read the embeddings from the cache instead of each loading the encoder."""
    from tgml.text_embeddings import step_embeddings
    from tgml.tgt_config import TgtTextConfig

    for procedure in procedures:
        step_embeddings(list(procedure.step_names), TgtTextConfig().encoder)


# Methods without randomness: one graph per procedure.
DETERMINISTIC_BUILDERS: Final[dict[str, Callable[[Procedure, MethodSettings], Outcome]]] = {
    "count-based": _count_based,
    "msgi": _eligibility("accuracy"),
    "msg2": _eligibility("precision"),
    "llm": _llm,
}
# Seeded learners other than DO: one graph per (seed, procedure).
SEEDED_BUILDERS: Final[dict[str, Callable[[Procedure, MethodSettings, int], Outcome]]] = {
    "noisy-and": _noisy_and,
    "tgt-text": _tgt_text,
}
NOT_AVAILABLE: Final[dict[str, str]] = {}
METHODS: Final = ("do", *DETERMINISTIC_BUILDERS, *SEEDED_BUILDERS, *NOT_AVAILABLE)


def _seeded_job(method: str, procedure: Procedure, settings: MethodSettings, seed: int) -> Outcome:
    """Worker job: one seeded learner's graph of one procedure."""
    return SEEDED_BUILDERS[method](procedure, settings, seed)


def _settings_entry(method: str, settings: MethodSettings) -> dict[str, Any]:
    """The settings a method used, for the JSON file."""
    if method == "noisy-and":
        return {k: v for k, v in asdict(settings.noisy_and).items() if k != "seed"}
    if method == "count-based":
        return asdict(settings.count_based)
    if method in ("msgi", "msg2"):
        return asdict(EligibilitySearchConfig("accuracy" if method == "msgi" else "precision"))
    if method == "llm":
        return {"folder": str(settings.llm_folder)}
    return {}


def check_methods(methods: Sequence[str]) -> None:
    """Refuse an unknown, repeated or not yet available method before anything runs."""
    if not methods:
        raise InputError("--method: give at least one method")
    for k, method in enumerate(methods):
        if method in NOT_AVAILABLE:
            row = " / ".join(f"{v:.1f}" for v in PUBLISHED[method])
            raise InputError(f"--method {method}: {NOT_AVAILABLE[method]} (published P / R / F1 {row})")
        if method not in METHODS:
            raise InputError(f"--method {method}: unknown; choose from {', '.join(METHODS)}")
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
    config: TrainConfig = DEFAULT_CONFIG,
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
        settings = MethodSettings(Path(data_dir) / LLM_FOLDER, settings.noisy_and, settings.count_based)
    procedures = load_procedures(data_dir, scenarios)
    results: dict[str, BenchmarkResult] = {}
    # Cheap methods first, here: a bad LLM folder or graph is reported before minutes of training.
    for method in (m for m in methods if m in DETERMINISTIC_BUILDERS):
        result = BenchmarkResult(config, (), method=method, settings=_settings_entry(method, settings))
        for procedure in procedures:
            adjacency, epochs = DETERMINISTIC_BUILDERS[method](procedure, settings)
            result.runs.append(RunScore(procedure.scenario, None, len(procedure.step_ids), epochs,
                                        edge_scores(adjacency, procedure.ground_truth.adjacency)))
        results[method] = result
    seeded = [m for m in methods if m in SEEDED_BUILDERS]
    if "tgt-text" in seeded:
        _embed_step_names(procedures)
    jobs = [(m, p, settings, int(s)) for m in seeded for s in seeds for p in procedures]
    outcomes = run_jobs(_seeded_job, jobs, workers, "[bold]CaptainCook4D learners", progress) if jobs else []
    for method in seeded:
        results[method] = BenchmarkResult(config, tuple(int(s) for s in seeds), method=method,
                                          settings=_settings_entry(method, settings))
    for (method, procedure, _, seed), (adjacency, epochs) in zip(jobs, outcomes, strict=True):
        results[method].runs.append(RunScore(procedure.scenario, seed, len(procedure.step_ids), epochs,
                                             edge_scores(adjacency, procedure.ground_truth.adjacency)))
    if "do" in methods:
        results["do"] = run_benchmark(data_dir, seeds, config, scenarios, workers, progress, ensemble)
    return MethodsOutcome({m: results[m] for m in methods}, time.perf_counter() - started)


def methods_table(outcome: MethodsOutcome) -> Table:
    """Rich table: one row per method, P / R / F1 mean ± 90% CI over seeds, with the published row beside it.

    Methods of the paper's table that were not run are listed too, with their published row only.
    """
    procedures = len({r.scenario for result in outcome.results.values() for r in result.runs})
    table = Table(title=f"CaptainCook4D task graph generation, {procedures} procedures, mean ± 90% CI over seeds",
                  header_style="bold")
    for col in ("method", "seeds", "precision", "recall", "F1", "published P / R / F1"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for name, result in outcome.results.items():
        summary = result.summary()
        published = PUBLISHED.get(name)
        table.add_row(
            name if result.ensemble == 1 else f"{name} (ensemble of {result.ensemble})",
            str(len(result.seeds)) if result.seeds else "-",
            *(f"{summary[k]['mean']:.1f} ± {summary[k]['ci90']:.1f}" for k in ("precision", "recall", "f1")),
            "ours" if published is None else " / ".join(f"{v:.1f}" for v in published),
        )
    not_run = [m for m in PUBLISHED if m not in outcome.results]
    if not_run:
        table.add_section()
    for name in not_run:
        table.add_row(f"[dim]{name} (not run)", "", "", "", "", " / ".join(f"{v:.1f}" for v in PUBLISHED[name]))
    return table
