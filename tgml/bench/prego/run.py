"""One `prego-bench` run: learn the graphs (seeds in parallel processes), score every dataset / mode / method / seed.

Result JSON (``format: "prego-bench-results"``, ``version: 1``), written by ``prego-bench --json FILE``::

    {
      "format": "prego-bench-results", "version": 1,
      "settings": {"data": str|null, "annotations": ANNOTATIONS|null, "seeds": [int], "modes": [...],
                   "methods": [...], "sequences": str|null, "graph": str|null, "perturb": [float],
                   "perturb_seed": int, "epochs_override": int|null,
                   "checker": {"kind": "binary"|"probabilistic", "settings_files": {dataset: str}},
                   "methods_settings": {dataset: {method: {...}}}},
      "results": {dataset: {mode: {method: {     # PRED of a probabilistic run adds "<method> + probabilistic"
          "per_seed": [{"seed": int|null, "scores": MISTAKE_SCORES}],
          "mean": METRICS, "std": METRICS,            # std is the population std over seeds (0 for one)
          "published": {"avg_f1", "correct_f1", "mistake_f1"} | null}}}},
      "perturb": {dataset: {mode: {method: [{"rate": float, "mean": METRICS, "std": METRICS}]}}},
      "seconds": float
    }

``METRICS`` = ``{"avg_f1", "correct_f1", "correct_precision", "correct_recall", "mistake_f1",
"mistake_precision", "mistake_recall"}`` in percent, with **true** precision / recall (the published tables
swap them). ``MISTAKE_SCORES`` is `graphs.mistake_metrics.MistakeScores.to_dict()`. ``ANNOTATIONS``
(a dataset of the user's, `own_dataset`) is ``{"file", "scenario", "test_videos": [str]|null, "split": str|null,
"config": str|null, "correct_test_videos": [str]}``; its dataset key is the scenario and it has no published row.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from graphs.common.errors import FieldError, InputError
from graphs.common.files import FILE_NAME_RULE, check_output, is_file_name, replaced_input
from graphs.common.options import SEED_RULE, is_seed
from graphs.common.safe_text import quoted
from graphs.common.settings_files import EPOCHS, as_written
from graphs.mistake_metrics import MistakeScores
from graphs.task_graph import TaskGraph, load_graph, save_graph
from tgml.bench.perturb import perturb_sequences, rate_seed
from tgml.bench.prego.data import (
    DATASETS,
    MODES,
    BenchData,
    check_graph_matches,
    load_dataset,
    mode_has_mistake,
    mode_sequences,
    resolve_data,
)
from tgml.bench.prego.methods import SETTINGS_DIR, UNAVAILABLE, build_graph, load_method_settings
from tgml.bench.prego.own_dataset import AnnotationSource, load_annotation_dataset, own_method_settings
from tgml.bench.prego.published import PUBLISHED
from tgml.bench.prego.scoring import aggregate, evaluate_graph, flat_metrics
from tgml.bench.process_pool import run_jobs
from tgml.learners.registry import LEARNERS

RESULTS_FORMAT: Final = "prego-bench-results"
RESULTS_VERSION: Final = 1


@dataclass(frozen=True)
class BenchConfig:
    """One `prego-bench` run.

    Args:
        data: data folder laid out like ``shared/data`` (None with ``annotations``).
        datasets: built-in datasets to run (empty with ``annotations``).
        modes: ``gt`` (annotated test sequences) and/or ``pred`` (recogniser output).
        methods: graph methods (``do``, ``count-based``; ignored when ``graph`` is given).
        seeds: training seeds of the seeded methods.
        sequences: PRED-mode sequence file replacing the MiniROAD output (one dataset only).
        graph: evaluate this task graph file instead of learning graphs (one dataset only).
        perturb: noise rates of the ablation (docs/prego-benchmark.md); empty for none.
        perturb_seed: base seed of the ablation noise (each rate uses a fixed seed derived from it).
        workers: parallel processes for graph learning (0 = as many as cores and jobs allow).
        epochs: override the configured epochs of every learner trained by epochs (quick checks); None keeps the
            settings.
        config_files: per-dataset settings files replacing the shipped ``tgml/bench/settings/prego-<dataset>.toml``.
        save_graphs: folder to save every learned graph into, or None.
        annotations: a dataset of the user's replacing the built-in ones (GT mode only; its settings file is
            its own ``settings``), or None.
        checker: ``binary`` (the PREGO protocol), or ``probabilistic``: PRED mode also scores every method with the
            probabilistic checker (`tgml.bench.prego.sequence_evidence`), in rows ``<method> + probabilistic``;
            GT mode stays binary.
        checker_files: per-dataset checker settings files replacing the shipped
            ``tgml/bench/settings/prego-checker-<dataset>.json``.
    """

    data: Path | None
    datasets: tuple[str, ...] = tuple(DATASETS)
    modes: tuple[str, ...] = MODES
    methods: tuple[str, ...] = ("do", "count-based")
    seeds: tuple[int, ...] = (1,)
    sequences: Path | None = None
    graph: Path | None = None
    perturb: tuple[float, ...] = ()
    perturb_seed: int = 0
    workers: int = 0
    epochs: int | None = None
    config_files: Mapping[str, Path] = field(default_factory=dict)
    save_graphs: Path | None = None
    annotations: AnnotationSource | None = None
    checker: str = "binary"
    checker_files: Mapping[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        def fail(name: str, value: Any, why: str) -> None:
            raise FieldError("BenchConfig", name, value, as_written(value), why)

        if self.annotations is not None:
            own = "a dataset of your own (--annotations)"
            if self.datasets:
                fail("datasets", self.datasets, f"{own} replaces the built-in datasets")
            if self.modes != ("gt",):
                fail("modes", self.modes, f"{own} runs in GT mode only (PRED mode needs recognised segments)")
            if self.sequences is not None:
                fail("sequences", self.sequences, f"{own} has no recognised sequences (GT mode only)")
            if self.perturb:
                fail("perturb", self.perturb, f"{own} has no noise ablation")
            if self.config_files:
                fail("config_files", dict(self.config_files), f"{own} takes its settings file in annotations.settings")
        elif self.data is None:
            fail("data", self.data, "the built-in datasets need a data folder")
        elif not self.datasets or any(d not in DATASETS for d in self.datasets):
            fail("datasets", self.datasets, f"choose from {', '.join(DATASETS)}")
        if not self.modes or any(m not in MODES for m in self.modes):
            fail("modes", self.modes, "choose from gt, pred")
        unavailable = next((m for m in self.methods if m in UNAVAILABLE), None)
        if self.graph is None and unavailable is not None:
            fail("methods", unavailable, UNAVAILABLE[unavailable])
        if self.graph is None and (not self.methods or any(m not in LEARNERS for m in self.methods)):
            fail("methods", self.methods, f"choose from {', '.join(LEARNERS)}")
        for name in ("datasets", "modes", "methods"):
            values = getattr(self, name)
            if len(set(values)) != len(values):  # a repeat would be learned and reported twice
                fail(name, values, "each may be given once")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            fail("seeds", self.seeds, "need at least one seed, all different")
        if not all(is_seed(seed) for seed in (*self.seeds, self.perturb_seed)):
            fail("seeds", self.seeds, f"each seed (and the perturbation seed) must be {SEED_RULE}")
        if (self.sequences is not None or self.graph is not None) and len(self.dataset_names) != 1:
            fail("datasets", self.datasets, "--sequences and --graph need exactly one --dataset")
        if self.sequences is not None and "pred" not in self.modes:
            fail("modes", self.modes, "--sequences gives PRED-mode input; include mode 'pred'")
        if any(not 0.0 <= r <= 1.0 for r in self.perturb):
            fail("perturb", self.perturb, "rates must lie in [0, 1]")
        if self.workers < 0:
            fail("workers", self.workers, "must be >= 0")
        # Every learner's own epochs range: 10**20 was passed on, and refused naming DOConfig.epochs, no option.
        if self.epochs is not None and not (isinstance(self.epochs, int) and EPOCHS.holds(self.epochs)):
            fail("epochs", self.epochs, f"expected {EPOCHS.rule(integer=True)}")
        unknown = set(self.config_files) - set(DATASETS)
        if unknown:
            fail("config_files", sorted(unknown)[0], f"not a dataset ({', '.join(DATASETS)})")
        if self.checker not in ("binary", "probabilistic"):
            fail("checker", self.checker, "choose binary or probabilistic")
        if self.checker == "probabilistic" and "pred" not in self.modes:
            fail("checker", self.checker, "the probabilistic checker is scored in PRED mode (GT tables stay binary)")
        stray = set(self.checker_files) - set(self.dataset_names)
        if stray:
            fail("checker_files", sorted(stray)[0], "not a dataset of the run")

    @property
    def dataset_names(self) -> tuple[str, ...]:
        """Names of the datasets the run scores: the built-in ones, or the user's dataset."""
        return (self.annotations.name,) if self.annotations is not None else self.datasets


@dataclass(frozen=True)
class GraphJob:
    """One graph to learn: dataset, method, seed (None for deterministic methods)."""

    dataset: str
    method: str
    seed: int | None


def saved_graph_name(dataset: str, method: str, seed: int | None) -> str:
    """The file ``--save-graphs`` gives one learned graph: ``<dataset>-<method>[-seed<k>].json``."""
    return f"{dataset}-{method.replace(':', '_')}{'' if seed is None else f'-seed{seed}'}.json"


def check_graph_names_spare_inputs(config: BenchConfig) -> None:
    """Refuse, before learning, a ``--save-graphs`` folder where a graph file would replace a file the run reads
    (an annotation, split, settings, sequences or graph file kept there under such a name)."""
    assert config.save_graphs is not None
    own = config.annotations
    read = [config.sequences, config.graph, *config.config_files.values(), *config.checker_files.values()]
    if own is not None:
        read += [own.annotations, own.split, own.settings]
    names = {saved_graph_name(d, m, k) for d in config.dataset_names for m in config.methods
             for k in (None, *config.seeds)}
    for name in sorted(names):
        hit = replaced_input(Path(config.save_graphs) / name, read)
        if hit is not None:
            raise InputError(f"--save-graphs {config.save_graphs}: its {name} would replace {hit}, which the run "
                             "reads; choose another folder")


def _build_job(
    data: BenchData, method: str, settings: Mapping[str, Any], seed: int | None, epochs: int | None
) -> dict[str, Any]:
    """Worker job: learn one graph and return it as file content (cheap to send between processes)."""
    graph = build_graph(method, data, settings, seed if seed is not None else 0, epochs)
    return graph.to_dict()


def plan_jobs(config: BenchConfig) -> list[GraphJob]:
    """Graphs a run needs: one per seed for seeded methods, one for deterministic ones."""
    return [
        GraphJob(dataset, method, seed)
        for dataset in config.dataset_names
        for method in config.methods
        for seed in (config.seeds if LEARNERS[method].seeded else (None,))
    ]


def learn_graphs(
    config: BenchConfig,
    datasets: Mapping[str, BenchData],
    settings: Mapping[str, Mapping[str, Mapping[str, Any]]],
    progress: bool = True,
) -> dict[GraphJob, TaskGraph]:
    """Learn every graph of the plan, seeds in parallel processes when cores allow.

    Args:
        config: the run.
        datasets: loaded datasets by name.
        settings: ``{dataset: {method: settings}}``.
        progress: show a rich progress bar.

    Returns:
        ``{job: graph}``, in the order of `plan_jobs`.
    """
    jobs = plan_jobs(config)
    # `--method do tgt-text` without the `text` extra failed at tgt-text's first job, after a minute of DO graphs.
    text_methods = [m for m in config.methods if LEARNERS[m].needs == "text"]
    if text_methods:
        from tgml.text_embeddings import embed_ahead

        for dataset in config.dataset_names:
            for method in text_methods:
                encoder = LEARNERS[method].config(settings[dataset][method], None, config.epochs).encoder
                embed_ahead([datasets[dataset].step_names], encoder)
    # Slowest jobs (DO) first so the pool is not left waiting on one long graph at the end.
    ordered = sorted(jobs, key=lambda j: (not LEARNERS[j.method].seeded, j.dataset != "assembly101-o"))
    arguments = [
        (datasets[job.dataset], job.method, settings[job.dataset][job.method], job.seed, config.epochs)
        for job in ordered
    ]
    learned = run_jobs(_build_job, arguments, config.workers, "learning task graphs", progress)
    graphs = {job: TaskGraph.from_dict(content) for job, content in zip(ordered, learned, strict=True)}
    return {job: graphs[job] for job in jobs}


def _method_entry(
    runs: list[tuple[int | None, MistakeScores]], published: tuple[float, float, float] | None
) -> dict[str, Any]:
    mean, std = aggregate([flat_metrics(s) for _, s in runs])
    return {
        "per_seed": [{"seed": seed, "scores": scores.to_dict()} for seed, scores in runs],
        "mean": mean,
        "std": std,
        "published": None
        if published is None
        else dict(zip(("avg_f1", "correct_f1", "mistake_f1"), published, strict=True)),
    }


def run_benchmark(config: BenchConfig, progress: bool = True) -> dict[str, Any]:
    """Run the whole benchmark: learn graphs, score every dataset / mode / method / seed, aggregate.

    Args:
        config: what to run.
        progress: show rich progress bars.

    Returns:
        The result document described in the module docstring.
    """
    started = time.perf_counter()
    if config.save_graphs is not None:
        check_output(config.save_graphs, "graphs folder", folder=True)  # before learning, not after
        for name in config.dataset_names:  # a scenario of the user's file names the graph files: keep them inside
            if not is_file_name(f"{name}-{max(config.methods, key=len, default='')}-seed0000.json"):
                raise InputError(f"--save-graphs: scenario {quoted(name)} cannot name a graph file in the folder; it "
                                 f"must be {FILE_NAME_RULE}")
        check_graph_names_spare_inputs(config)
    checker_files = _checker_files(config)  # a bad settings file is refused before any learning
    datasets, settings = _load_inputs(config)
    if config.graph is not None:
        dataset = config.dataset_names[0]
        graph = load_graph(config.graph)
        check_graph_matches(graph, datasets[dataset], config.graph)
        method = f"graph:{Path(config.graph).name}"
        graphs = {GraphJob(dataset, method, None): graph}
        methods: tuple[str, ...] = (method,)
    else:
        for d in config.dataset_names:
            missing = [m for m in config.methods if m not in settings[d]]
            if missing:  # named by the file: "the benchmark settings file" left the user to guess which
                given = config.config_files.get(d)
                where = (f"--config {d}={given}" if given is not None
                         else f"{d}'s shipped settings file {SETTINGS_DIR / f'prego-{d}.toml'}")
                raise InputError(f"{where}: no [{missing[0]}] table, which --method {missing[0]} needs (a settings "
                                 "file given for a dataset replaces its shipped one whole)")
        graphs = learn_graphs(config, datasets, settings, progress)
        methods = config.methods
    if config.save_graphs is not None:
        for job, graph in graphs.items():
            save_graph(graph, Path(config.save_graphs) / saved_graph_name(job.dataset, job.method, job.seed))

    results: dict[str, Any] = {}
    ablation: dict[str, Any] = {}
    for dataset, data in datasets.items():
        results[dataset] = {}
        for mode in config.modes:
            sequences = mode_sequences(data, mode)
            has_mistake = mode_has_mistake(data, mode)
            results[dataset][mode] = {}
            for method in methods:
                runs = [
                    (job.seed, evaluate_graph(g, sequences, has_mistake))
                    for job, g in graphs.items()
                    if job.dataset == dataset and job.method == method
                ]
                published = None if config.annotations is not None else PUBLISHED[dataset][mode].get(method)
                results[dataset][mode][method] = _method_entry(runs, published)
                if mode == "pred" and dataset in checker_files:
                    results[dataset][mode][f"{method} + probabilistic"] = _method_entry(
                        [(job.seed, _score_probabilistic(checker_files[dataset][1], g, sequences, has_mistake))
                         for job, g in graphs.items() if job.dataset == dataset and job.method == method], None)
            if config.perturb:
                ablation.setdefault(dataset, {})[mode] = perturbation_curves(
                    config,
                    data,
                    mode,
                    {m: [g for j, g in graphs.items() if j.dataset == dataset and j.method == m] for m in methods},
                )
    return {
        "format": RESULTS_FORMAT,
        "version": RESULTS_VERSION,
        "settings": {
            "data": None if config.data is None or config.annotations is not None else str(config.data),
            "annotations": _annotations_settings(config.annotations, datasets),
            "seeds": list(config.seeds),
            "modes": list(config.modes),
            "methods": list(methods),
            "sequences": None if config.sequences is None else str(config.sequences),
            "graph": None if config.graph is None else str(config.graph),
            "perturb": list(config.perturb),
            "perturb_seed": config.perturb_seed,
            "epochs_override": config.epochs,
            "checker": {"kind": config.checker,
                        "settings_files": {d: str(path) for d, (path, _) in checker_files.items()}},
            "methods_settings": {
                d: {m: dict(settings[d].get(m, {})) for m in methods} for d in config.dataset_names
            },
        },
        "results": results,
        "perturb": ablation,
        "seconds": time.perf_counter() - started,
    }


def _checker_files(config: BenchConfig) -> dict[str, tuple[Path, Any]]:
    """``{dataset: (settings file, its PRED-mode choice)}`` of a probabilistic run (empty for a binary one)."""
    if config.checker != "probabilistic":
        return {}
    from tgml.bench.prego.checker_selection import default_settings_path, load_checker_settings

    out = {}
    for dataset in config.dataset_names:
        path = Path(config.checker_files.get(dataset, default_settings_path(dataset)))
        out[dataset] = (path, load_checker_settings(path).pred)
    return out


def _score_probabilistic(
    choice: Any, graph: TaskGraph, sequences: Sequence[Sequence[int]], has_mistake: Sequence[bool]
) -> MistakeScores:
    """PRED-mode scores of one graph with the probabilistic checker of a settings file's choice."""
    from tgml.bench.prego.sequence_evidence import evaluate_graph_probabilistic  # loads the calibration's torch

    return evaluate_graph_probabilistic(graph, sequences, choice.settings, choice.evidence, has_mistake)


def _load_inputs(
    config: BenchConfig,
) -> tuple[dict[str, BenchData], dict[str, dict[str, dict[str, Any]]]]:
    """The datasets of a run and each one's method settings (a user's dataset: defaults plus its own file)."""
    if config.annotations is not None:
        methods = () if config.graph is not None else config.methods
        settings = own_method_settings(config.annotations, methods)  # before reading data: a usage mistake first
        data = load_annotation_dataset(config.annotations)
        return {data.name: data}, {data.name: settings}
    assert config.data is not None  # checked by BenchConfig
    pred = "pred" in config.modes
    layout = resolve_data(config.data, config.datasets, segments=pred and config.sequences is None)
    datasets = {d: load_dataset(layout, d, pred=pred, sequences=config.sequences) for d in config.datasets}
    return datasets, {d: load_method_settings(d, config.config_files.get(d)) for d in config.datasets}


def _annotations_settings(source: AnnotationSource | None, datasets: Mapping[str, BenchData]) -> dict[str, Any] | None:
    """The ``annotations`` entry of the results' settings: what the user's dataset was and which videos were whole."""
    if source is None:
        return None
    return {
        "file": str(source.annotations),
        "scenario": source.scenario,
        "test_videos": None if source.test_videos is None else list(source.test_videos),
        "split": None if source.split is None else str(source.split),
        "config": None if source.settings is None else str(source.settings),
        "correct_test_videos": sorted(datasets[source.name].correct_videos),
    }


def perturbation_curves(
    config: BenchConfig, data: BenchData, mode: str, graphs: Mapping[str, Sequence[TaskGraph]]
) -> dict[str, list[dict[str, Any]]]:
    """Noise ablation (docs/prego-benchmark.md): score each method's graphs on test sequences perturbed at each rate.

    Each rate uses the same fixed noise seed for every method, so methods are compared on identical input.

    Returns:
        ``{method: [{"rate", "mean", "std"}]}``.
    """
    curves: dict[str, list[dict[str, Any]]] = {m: [] for m in graphs}
    clean = mode_sequences(data, mode)
    for rate in config.perturb:
        noisy = perturb_sequences(clean, rate, data.step_ids, seed=rate_seed(config.perturb_seed, rate))
        for method, method_graphs in graphs.items():
            mean, std = aggregate([flat_metrics(evaluate_graph(g, noisy)) for g in method_graphs])
            curves[method].append({"rate": rate, "mean": mean, "std": std})
    return curves

