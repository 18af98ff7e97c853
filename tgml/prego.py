"""The PREGO online mistake-detection benchmark (SPEC §2-§3) on Assembly101-O and EPIC-Tent-O.

Pipeline: resolve the data folder (`resolve_data`), read each dataset (`load_dataset`), learn one task graph per
dataset / method / seed from the training split (`build_graph`, seeds in parallel processes), score the GT (*)
and PRED (+) test sequences online with the same `graphs.PreconditionChecker` the live pipeline runs
(`evaluate_graph`), aggregate mean ± std over seeds and put the published figures beside them.

Result JSON (``format: "prego-bench-results"``, ``version: 1``), written by ``prego-bench --json FILE``::

    {
      "format": "prego-bench-results", "version": 1,
      "settings": {"data": str, "seeds": [int], "modes": [...], "methods": [...], "sequences": str|null,
                   "graph": str|null, "perturb": [float], "perturb_seed": int,
                   "methods_settings": {dataset: {method: {...}}}},
      "results": {dataset: {mode: {method: {
          "per_seed": [{"seed": int|null, "scores": MISTAKE_SCORES}],
          "mean": METRICS, "std": METRICS,            # std is the population std over seeds (0 for one)
          "published": {"avg_f1", "correct_f1", "mistake_f1"} | null}}}},
      "perturb": {dataset: {mode: {method: [{"rate": float, "mean": METRICS, "std": METRICS}]}}},
      "seconds": float
    }

``METRICS`` = ``{"avg_f1", "correct_f1", "correct_precision", "correct_recall", "mistake_f1",
"mistake_precision", "mistake_recall"}`` in percent, with **true** precision / recall (the published tables
swap them, SPEC §2). ``MISTAKE_SCORES`` is `graphs.mistake_metrics.MistakeScores.to_dict()`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from graphs.checker import precondition_violations
from graphs.count_based import CountBasedConfig, count_based_graph
from graphs.errors import InputError
from graphs.files import read_json, read_toml
from graphs.mistake_metrics import MistakeScores, mistake_scores
from graphs.task_graph import TaskGraph, load_graph, save_graph
from tgml.annotations import load_annotations
from tgml.perturb import perturb_sequences, rate_seed

RESULTS_FORMAT: Final = "prego-bench-results"
RESULTS_VERSION: Final = 1
MODES: Final = ("gt", "pred")
MODE_MARKS: Final = {"gt": "*", "pred": "+"}
PREPARE_HINT: Final = "build it with `prego-bench prepare --assembly101 RAW --epic-tent RAW --out DIR`"
CONFIG_DIR: Final = Path(__file__).resolve().parent.parent / "configs"
METRIC_KEYS: Final = (
    "avg_f1",
    "correct_f1",
    "correct_precision",
    "correct_recall",
    "mistake_f1",
    "mistake_precision",
    "mistake_recall",
)


@dataclass(frozen=True)
class DatasetSpec:
    """Where a PREGO dataset lives inside a data folder and which annotation scenario it uses."""

    name: str
    scenario: str
    raw_flag: str  # the `prepare` option that builds it


DATASETS: Final[dict[str, DatasetSpec]] = {
    "assembly101-o": DatasetSpec("assembly101-o", "assembly101", "--assembly101"),
    "epic-tent-o": DatasetSpec("epic-tent-o", "epic-tent", "--epic-tent"),
}

# SPEC §3, published Avg F1 / Correct F1 / Mistake F1 (percent).
PUBLISHED: Final[dict[str, dict[str, dict[str, tuple[float, float, float]]]]] = {
    "assembly101-o": {
        "gt": {
            "prego": (39.4, 32.6, 46.3),
            "count-based": (26.5, 9.9, 43.1),
            "msg2": (56.1, 63.9, 48.2),
            "tgt-text": (62.8, 69.8, 55.7),
            "do": (75.9, 90.2, 61.6),
        },
        "pred": {
            "prego": (32.5, 23.1, 41.8),
            "count-based": (23.0, 2.1, 43.8),
            "msg2": (46.2, 59.1, 33.2),
            "tgt-text": (53.0, 67.8, 38.2),
            "do": (53.5, 78.9, 28.1),
        },
    },
    "epic-tent-o": {
        "gt": {
            "prego": (32.1, 45.0, 19.1),
            "count-based": (57.7, 93.2, 22.2),
            "msg2": (54.1, 92.9, 15.4),
            "tgt-text": (64.1, 93.8, 34.5),
            "do": (58.3, 93.5, 23.1),
        },
        "pred": {
            "prego": (29.4, 41.6, 17.2),
            "count-based": (44.8, 67.0, 22.7),
            "msg2": (45.2, 67.5, 22.9),
            "tgt-text": (43.8, 69.5, 18.2),
            "do": (46.5, 69.3, 23.7),
        },
    },
}


def published_best(dataset: str, mode: str) -> float:
    """Best published Avg F1 of a column of the SPEC §3 table (the figure to beat)."""
    return max(row[0] for row in PUBLISHED[dataset][mode].values())


# -- data folder --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DataLayout:
    """Paths of a data folder laid out like ``shared/data`` (``assembly101-o/``, ``epic-tent-o/``,
    ``prego-miniroad/``). Use `resolve_data` to get one whose files were checked."""

    root: Path

    def train_file(self, dataset: str) -> Path:
        """``<root>/<dataset>/train.json``."""
        return self.root / dataset / "train.json"

    def test_file(self, dataset: str) -> Path:
        """``<root>/<dataset>/test.json``."""
        return self.root / dataset / "test.json"

    def segments_file(self, dataset: str) -> Path:
        """MiniROAD key-step sequences: ``<root>/prego-miniroad/<dataset>_segments.json``."""
        return self.root / "prego-miniroad" / f"{dataset}_segments.json"

    def frames_file(self, dataset: str) -> Path:
        """MiniROAD per-frame labels: ``<root>/prego-miniroad/<dataset>_frames.json``."""
        return self.root / "prego-miniroad" / f"{dataset}_frames.json"


def resolve_data(
    root: str | Path, datasets: Iterable[str], splits: bool = True, segments: bool = False, frames: bool = False
) -> DataLayout:
    """Check that a data folder holds what a command needs; errors say what is missing and how to get it.

    Args:
        root: the ``--data`` folder.
        datasets: dataset names (keys of `DATASETS`).
        splits: require ``<dataset>/train.json`` and ``test.json``.
        segments: require ``prego-miniroad/<dataset>_segments.json``.
        frames: require ``prego-miniroad/<dataset>_frames.json``.

    Returns:
        The layout of the folder.
    """
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"data folder {root} not found; {PREPARE_HINT}")
    layout = DataLayout(root)
    for dataset in datasets:
        if dataset not in DATASETS:
            raise InputError(f"unknown dataset {dataset!r} (known: {', '.join(DATASETS)})")
        needed: list[tuple[Path, str]] = []
        if splits:
            hint = PREPARE_HINT.replace("--assembly101 RAW --epic-tent RAW", f"{DATASETS[dataset].raw_flag} RAW")
            needed += [(layout.train_file(dataset), hint), (layout.test_file(dataset), hint)]
        miniroad = "it is the MiniROAD output shipped in shared/data/prego-miniroad (or give --sequences FILE)"
        if segments:
            needed.append((layout.segments_file(dataset), miniroad))
        if frames:
            needed.append((layout.frames_file(dataset), miniroad))
        for path, hint in needed:
            if not path.is_file():
                raise InputError(f"missing {path}; {hint}")
    return layout


# -- datasets and sequence files ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchData:
    """One PREGO dataset, ready to learn and score.

    Attributes:
        name: dataset name (``assembly101-o``).
        scenario: its annotation scenario.
        step_ids / step_names: the taxonomy, in matrix order.
        train: raw key-step sequences of the training videos (repeats kept), file order.
        test: GT-mode sequences ``{video: steps}``, each ending with its mistake.
        pred: PRED-mode sequences ``{video: steps}`` (empty when PRED mode is not requested).
    """

    name: str
    scenario: str
    step_ids: tuple[int, ...]
    step_names: tuple[str, ...]
    train: tuple[tuple[int, ...], ...]
    test: dict[str, tuple[int, ...]]
    pred: dict[str, tuple[int, ...]] = field(default_factory=dict)


def load_sequence_file(
    path: str | Path, step_ids: Iterable[int], fields: Sequence[str] = ("pred",)
) -> dict[str, dict[str, tuple[int, ...]]]:
    """Read a ``{video: {"pred": [...], "gt": [...]}}`` key-step sequence file (MiniROAD output or a user's own).

    Args:
        path: the JSON file.
        step_ids: the dataset taxonomy; every id must belong to it.
        fields: fields every video must have; other list fields present are checked too.

    Returns:
        ``{video: {field: steps}}`` in file order.
    """
    data = read_json(path, "sequence file")
    known = set(int(s) for s in step_ids)
    if not isinstance(data, dict) or not data:
        raise InputError(f'{path}: expected a non-empty object {{video: {{"pred": [...], "gt": [...]}}}}')
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    for video, record in data.items():
        if not isinstance(record, dict):
            raise InputError(f"{path}: video {video!r}: expected an object with field {fields[0]!r}")
        parsed: dict[str, tuple[int, ...]] = {}
        for name in dict.fromkeys([*fields, *(k for k in ("pred", "gt") if k in record)]):
            steps = record.get(name)
            if steps is None:
                raise InputError(f"{path}: video {video!r}: missing field {name!r}")
            if not isinstance(steps, list):
                raise InputError(f"{path}: video {video!r}: field {name!r} must be a list of key-step ids")
            if not steps:
                raise InputError(f"{path}: video {video!r}: field {name!r} is an empty sequence")
            for k, step in enumerate(steps):
                if not isinstance(step, int) or isinstance(step, bool):
                    raise InputError(f"{path}: video {video!r}: field {name!r}[{k}] = {step!r} is not an integer id")
                if step not in known:
                    raise InputError(f"{path}: video {video!r}: field {name!r}[{k}] = {step} is not in the taxonomy")
            parsed[name] = tuple(steps)
        out[str(video)] = parsed
    return out


def load_dataset(layout: DataLayout, dataset: str, pred: bool = True, sequences: str | Path | None = None) -> BenchData:
    """Read one dataset's splits and, if asked, its PRED-mode sequences.

    Args:
        layout: a resolved data folder.
        dataset: ``assembly101-o`` or ``epic-tent-o``.
        pred: also read PRED-mode sequences.
        sequences: a ``{video: {"pred": [...]}}`` file replacing the MiniROAD one.

    Returns:
        The dataset.
    """
    spec = DATASETS[dataset]
    train = load_annotations(layout.train_file(dataset))
    test = load_annotations(layout.test_file(dataset))
    step_ids, step_names = train.steps_of(spec.scenario)
    test.check_scenario(spec.scenario)
    if test.steps_of(spec.scenario)[0] != step_ids:
        raise InputError(f"{layout.test_file(dataset)}: taxonomy differs from {layout.train_file(dataset)}")
    test_seqs = {v.video: v.steps for v in test.scenario_videos(spec.scenario)}
    empty = [video for video, steps in test_seqs.items() if not steps]
    if empty:
        raise InputError(f"{layout.test_file(dataset)}: video {empty[0]!r} has no segments")
    pred_seqs: dict[str, tuple[int, ...]] = {}
    if pred:
        source = Path(sequences) if sequences is not None else layout.segments_file(dataset)
        pred_seqs = {video: rec["pred"] for video, rec in load_sequence_file(source, step_ids).items()}
    return BenchData(
        dataset,
        spec.scenario,
        step_ids,
        step_names,
        tuple(v.steps for v in train.scenario_videos(spec.scenario)),
        test_seqs,
        pred_seqs,
    )


# -- per-dataset method settings ----------------------------------------------------------------------------------
def load_method_settings(dataset: str, config_file: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Per-dataset method settings (SPEC §1) from ``configs/prego-<dataset>.toml``.

    Args:
        dataset: dataset name.
        config_file: another TOML file with the same tables (``[do]``, ``[count-based]``...).

    Returns:
        ``{method: {setting: value}}``.
    """
    path = Path(config_file) if config_file is not None else CONFIG_DIR / f"prego-{dataset}.toml"
    hint = "" if config_file is not None else " (configs/ ships with the source checkout: install it with pip -e)"
    data = read_toml(path, "benchmark settings file", hint)
    methods = {k: v for k, v in data.items() if isinstance(v, dict)}
    for method, settings in methods.items():
        if method not in METHOD_BUILDERS:
            raise InputError(f"{path}: unknown method table [{method}] (known: {', '.join(METHOD_BUILDERS)})")
        for key in settings:
            if key not in METHOD_KEYS[method]:
                raise InputError(f"{path}: [{method}] has unknown setting {key!r}")
    return methods


# -- graph builders (top-level functions: they run in worker processes) -------------------------------------------
def _train_config(settings: Mapping[str, Any], seed: int, epochs: int | None) -> Any:
    from tgml.train import TrainConfig  # torch floor, loaded only when DO is requested

    return TrainConfig(
        beta=float(settings.get("beta", 0.005)),
        epochs=int(epochs if epochs is not None else settings.get("epochs", 1000)),
        lr=float(settings.get("lr", 0.1)),
        seed=seed,
        augment=bool(settings.get("augment", True)),
        relaxed=bool(settings.get("relaxed", True)),
        early_stop=str(settings.get("early_stop", "none")),
    )


def build_do(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """Direct Optimization (TGML) graph of one seed, with the dataset's settings (SPEC §1)."""
    from tgml.train import train_task_graph

    config = _train_config(settings, seed, epochs)
    result = train_task_graph(data.train, data.step_ids, data.step_names, config, scenario=data.scenario)
    return result.graph


def build_count_based(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """Count-Based baseline graph (deterministic: ``seed`` and ``epochs`` are ignored)."""
    config = CountBasedConfig(first_occurrence=bool(settings.get("first_occurrence", False)))
    return count_based_graph(data.train, data.step_ids, data.step_names, config, scenario=data.scenario)


def build_do_cv(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """Our variant: DO with the epochs and edge threshold chosen by cross-validation on the training split.

    The graph is trained like `build_do` and re-binarised with the threshold ``1 / (n * threshold_scale)``
    instead of ``1 / n`` (SPEC §1 step 2); ``threshold_scale`` and ``epochs`` come from the settings file, where
    they were written after `cross_validate` picked them on training data only.
    """
    from graphs.postprocess import binarize

    do_settings = {k: v for k, v in settings.items() if k in METHOD_KEYS["do"]}
    graph = build_do(data, do_settings, seed, epochs)
    assert graph.weights is not None
    scale = float(settings.get("threshold_scale", 1.0))
    present = np.isin(np.asarray(graph.step_ids), [s for seq in data.train for s in seq])
    n_threshold = max(1, round(graph.n_steps * scale))
    adjacency = binarize(graph.weights, present, bool(settings.get("relaxed", True)), threshold_steps=n_threshold)
    info = {**graph.info, "method": "do-cv", "threshold_scale": scale, "threshold": 1.0 / n_threshold}
    return TaskGraph(graph.step_ids, graph.step_names, adjacency, graph.weights, graph.scenario, info)


def build_do_ensemble(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """Ours: the weights of ``ensemble_size`` DO seeds averaged, then post-processed (`tgml.ensemble`).

    ``epochs`` / ``early_stop`` / ``threshold_scale`` come from the settings file, where they were written after
    ``prego-bench select --method do-ensemble`` picked them on the training split only.
    """
    from tgml.ensemble import EnsembleConfig, train_ensemble

    config = EnsembleConfig(
        size=int(settings.get("ensemble_size", 5)),
        threshold_scale=float(settings.get("threshold_scale", 1.0)),
        relaxed=bool(settings.get("relaxed", True)),
    )
    do_settings = {k: v for k, v in settings.items() if k in METHOD_KEYS["do"]}
    return train_ensemble(data, do_settings, seed, config, epochs)


GraphBuilder = Callable[[BenchData, Mapping[str, Any], int, "int | None"], TaskGraph]
METHOD_BUILDERS: dict[str, GraphBuilder] = {
    "do": build_do,
    "count-based": build_count_based,
    "do-cv": build_do_cv,
    "do-ensemble": build_do_ensemble,
}
METHOD_KEYS: dict[str, frozenset[str]] = {
    "do": frozenset({"beta", "epochs", "lr", "augment", "relaxed", "early_stop"}),
    "count-based": frozenset({"first_occurrence"}),
    "do-cv": frozenset({"beta", "epochs", "lr", "augment", "relaxed", "early_stop", "threshold_scale"}),
    "do-ensemble": frozenset(
        {"beta", "epochs", "lr", "augment", "relaxed", "early_stop", "threshold_scale", "ensemble_size"}
    ),
}
SEEDED: dict[str, bool] = {"do": True, "count-based": False, "do-cv": True, "do-ensemble": True}


# -- scoring ------------------------------------------------------------------------------------------------------
def evaluate_graph(graph: TaskGraph, sequences: Iterable[Sequence[int]]) -> MistakeScores:
    """Score test sequences online with the pre-condition checker and pool them (SPEC §2).

    Args:
        graph: the binary task graph.
        sequences: one key-step sequence per test video, its last step the mistake.

    Returns:
        Avg F1 and per-class true P/R/F1.
    """
    return mistake_scores(precondition_violations(graph, seq) for seq in sequences)


def flat_metrics(scores: MistakeScores) -> dict[str, float]:
    """The seven table figures of one evaluation (`METRIC_KEYS`)."""
    return {
        "avg_f1": scores.avg_f1,
        "correct_f1": scores.correct.f1,
        "correct_precision": scores.correct.precision,
        "correct_recall": scores.correct.recall,
        "mistake_f1": scores.mistake.f1,
        "mistake_precision": scores.mistake.precision,
        "mistake_recall": scores.mistake.recall,
    }


def aggregate(runs: Sequence[Mapping[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Mean and population std over seeds of each metric.

    Args:
        runs: one `flat_metrics` dict per seed.

    Returns:
        ``(mean, std)`` keyed like `METRIC_KEYS`.
    """
    table = np.array([[run[k] for k in METRIC_KEYS] for run in runs], dtype=np.float64)  # (seeds, metrics)
    return dict(zip(METRIC_KEYS, table.mean(axis=0).tolist(), strict=True)), dict(
        zip(METRIC_KEYS, table.std(axis=0).tolist(), strict=True)
    )


# -- benchmark ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchConfig:
    """One `prego-bench` run.

    Args:
        data: data folder laid out like ``shared/data``.
        datasets: datasets to run.
        modes: ``gt`` (annotated test sequences) and/or ``pred`` (recogniser output).
        methods: graph methods (``do``, ``count-based``; ignored when ``graph`` is given).
        seeds: training seeds of the seeded methods.
        sequences: PRED-mode sequence file replacing the MiniROAD output (one dataset only).
        graph: evaluate this task graph file instead of learning graphs (one dataset only).
        perturb: noise rates of the ablation (SPEC §3); empty for none.
        perturb_seed: base seed of the ablation noise (each rate uses a fixed seed derived from it).
        workers: parallel processes for graph learning (0 = as many as cores and jobs allow).
        epochs: override the configured DO epochs (quick checks); None keeps the settings.
        config_files: per-dataset settings files replacing ``configs/prego-<dataset>.toml``.
        save_graphs: folder to save every learned graph into, or None.
    """

    data: Path
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

    def __post_init__(self) -> None:
        def fail(name: str, value: Any, why: str) -> None:
            raise InputError(f"BenchConfig.{name} = {value!r}: {why}")

        if not self.datasets or any(d not in DATASETS for d in self.datasets):
            fail("datasets", self.datasets, f"choose from {', '.join(DATASETS)}")
        if not self.modes or any(m not in MODES for m in self.modes):
            fail("modes", self.modes, "choose from gt, pred")
        if self.graph is None and (not self.methods or any(m not in METHOD_BUILDERS for m in self.methods)):
            fail("methods", self.methods, f"choose from {', '.join(METHOD_BUILDERS)}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            fail("seeds", self.seeds, "need at least one seed, all different")
        if (self.sequences is not None or self.graph is not None) and len(self.datasets) != 1:
            fail("datasets", self.datasets, "--sequences and --graph need exactly one --dataset")
        if self.sequences is not None and "pred" not in self.modes:
            fail("modes", self.modes, "--sequences gives PRED-mode input; include mode 'pred'")
        if any(not 0.0 <= r <= 1.0 for r in self.perturb):
            fail("perturb", self.perturb, "rates must lie in [0, 1]")
        if self.workers < 0:
            fail("workers", self.workers, "must be >= 0")
        if self.epochs is not None and self.epochs < 1:
            fail("epochs", self.epochs, "must be >= 1")
        unknown = set(self.config_files) - set(DATASETS)
        if unknown:
            fail("config_files", sorted(unknown)[0], f"not a dataset ({', '.join(DATASETS)})")


@dataclass(frozen=True)
class GraphJob:
    """One graph to learn: dataset, method, seed (None for deterministic methods)."""

    dataset: str
    method: str
    seed: int | None


def _build_job(
    data: BenchData, method: str, settings: Mapping[str, Any], seed: int | None, epochs: int | None
) -> dict[str, Any]:
    """Worker entry point: learn one graph and return it as file content (cheap to send between processes)."""
    try:
        import torch

        torch.set_num_threads(1)  # one process per core: threads would only fight over the same cores
    except ImportError:
        pass
    graph = METHOD_BUILDERS[method](data, settings, seed if seed is not None else 0, epochs)
    return graph.to_dict()


def plan_jobs(config: BenchConfig) -> list[GraphJob]:
    """Graphs a run needs: one per seed for seeded methods, one for deterministic ones."""
    return [
        GraphJob(dataset, method, seed)
        for dataset in config.datasets
        for method in config.methods
        for seed in (config.seeds if SEEDED[method] else (None,))
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
        ``{job: graph}``.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    jobs = plan_jobs(config)
    workers = config.workers or min(len(jobs), os.cpu_count() or 1)
    graphs: dict[GraphJob, TaskGraph] = {}
    columns = (TextColumn("learning task graphs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, disable=not progress, transient=True) as bar:
        task = bar.add_task("graphs", total=len(jobs))

        def args(job: GraphJob) -> tuple[Any, ...]:
            return (datasets[job.dataset], job.method, settings[job.dataset][job.method], job.seed, config.epochs)

        if workers <= 1 or len(jobs) == 1:
            for job in jobs:
                graphs[job] = TaskGraph.from_dict(_build_job(*args(job)))
                bar.advance(task)
        else:
            # Slowest jobs (DO) first so the pool is not left waiting on one long graph at the end.
            ordered = sorted(jobs, key=lambda j: (not SEEDED[j.method], j.dataset != "assembly101-o"))
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = {pool.submit(_build_job, *args(job)): job for job in ordered}
                for future, job in futures.items():
                    graphs[job] = TaskGraph.from_dict(future.result())
                    bar.advance(task)
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


def mode_sequences(data: BenchData, mode: str) -> list[tuple[int, ...]]:
    """Test sequences of a mode: annotated (``gt``) or recognised (``pred``)."""
    return list((data.test if mode == "gt" else data.pred).values())


def run_benchmark(config: BenchConfig, progress: bool = True) -> dict[str, Any]:
    """Run the whole benchmark: learn graphs, score every dataset / mode / method / seed, aggregate.

    Args:
        config: what to run.
        progress: show rich progress bars.

    Returns:
        The result document described in the module docstring.
    """
    started = time.perf_counter()
    pred = "pred" in config.modes
    layout = resolve_data(config.data, config.datasets, segments=pred and config.sequences is None)
    datasets = {d: load_dataset(layout, d, pred=pred, sequences=config.sequences) for d in config.datasets}
    settings = {d: load_method_settings(d, config.config_files.get(d)) for d in config.datasets}
    if config.graph is not None:
        dataset = config.datasets[0]
        graph = load_graph(config.graph)
        check_graph_matches(graph, datasets[dataset], config.graph)
        method = f"graph:{Path(config.graph).name}"
        graphs = {GraphJob(dataset, method, None): graph}
        methods: tuple[str, ...] = (method,)
    else:
        for d in config.datasets:
            missing = [m for m in config.methods if m not in settings[d]]
            if missing:
                raise InputError(f"settings of {d}: no [{missing[0]}] table in the benchmark settings file")
        graphs = learn_graphs(config, datasets, settings, progress)
        methods = config.methods
    if config.save_graphs is not None:
        for job, graph in graphs.items():
            suffix = "" if job.seed is None else f"-seed{job.seed}"
            save_graph(graph, Path(config.save_graphs) / f"{job.dataset}-{job.method.replace(':', '_')}{suffix}.json")

    results: dict[str, Any] = {}
    ablation: dict[str, Any] = {}
    for dataset, data in datasets.items():
        results[dataset] = {}
        for mode in config.modes:
            sequences = mode_sequences(data, mode)
            results[dataset][mode] = {}
            for method in methods:
                runs = [
                    (job.seed, evaluate_graph(g, sequences))
                    for job, g in graphs.items()
                    if job.dataset == dataset and job.method == method
                ]
                results[dataset][mode][method] = _method_entry(runs, PUBLISHED[dataset][mode].get(method))
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
            "data": str(config.data),
            "seeds": list(config.seeds),
            "modes": list(config.modes),
            "methods": list(methods),
            "sequences": None if config.sequences is None else str(config.sequences),
            "graph": None if config.graph is None else str(config.graph),
            "perturb": list(config.perturb),
            "perturb_seed": config.perturb_seed,
            "epochs_override": config.epochs,
            "methods_settings": {d: {m: dict(settings[d].get(m, {})) for m in methods} for d in config.datasets},
        },
        "results": results,
        "perturb": ablation,
        "seconds": time.perf_counter() - started,
    }


def perturbation_curves(
    config: BenchConfig, data: BenchData, mode: str, graphs: Mapping[str, Sequence[TaskGraph]]
) -> dict[str, list[dict[str, Any]]]:
    """Noise ablation (SPEC §3): score each method's graphs on test sequences perturbed at each rate.

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


def check_graph_matches(graph: TaskGraph, data: BenchData, source: str | Path) -> None:
    """A given graph must describe the dataset's key-steps (same taxonomy ids)."""
    if set(graph.step_ids) != set(data.step_ids):
        extra = sorted(set(graph.step_ids) - set(data.step_ids))
        what = f"step {extra[0]} is not in" if extra else "its steps do not cover"
        raise InputError(f"{source}: {what} the {data.name} taxonomy")


# -- reporting ----------------------------------------------------------------------------------------------------
SWAP_NOTE: Final = (
    "P/R are true precision / recall. The published tables list them swapped (the reference scores predictions "
    "as if they were ground truth), so their 'Prec' is our recall and vice versa; F1 is unaffected."
)


def _cell(mean: float, std: float, seeded: bool) -> str:
    return f"{mean:.1f} ± {std:.1f}" if seeded else f"{mean:.1f}"


def result_tables(result: Mapping[str, Any]) -> list[Any]:
    """One rich table per dataset: every method and mode, mean ± std over seeds, the published row beside it.

    Args:
        result: a `run_benchmark` result document.

    Returns:
        ``rich.table.Table`` objects, one per dataset.
    """
    from rich.table import Table

    tables = []
    for dataset, modes in result["results"].items():
        table = Table(
            title=f"PREGO online mistake detection — {dataset} (mean ± std over seeds)",
            caption=SWAP_NOTE,
            caption_justify="left",
        )
        table.add_column("method")
        table.add_column("mode")
        for header in ("Avg F1", "Corr F1", "Corr P", "Corr R", "Mist F1", "Mist P", "Mist R"):
            table.add_column(header, justify="right")
        methods = list(dict.fromkeys(m for mode in modes.values() for m in mode))
        for method in methods:
            for mode, entries in modes.items():
                entry = entries[method]
                seeded = len(entry["per_seed"]) > 1
                label = f"{method} (n={len(entry['per_seed'])})" if seeded else method
                mark = MODE_MARKS[mode]
                table.add_row(
                    label,
                    f"{mode} {mark}",
                    *(_cell(entry["mean"][k], entry["std"][k], seeded) for k in METRIC_KEYS),
                )
                published = entry["published"]
                if published is not None:
                    table.add_row(
                        "  published",
                        f"{mode} {mark}",
                        f"{published['avg_f1']:.1f}",
                        f"{published['correct_f1']:.1f}",
                        "–",
                        "–",
                        f"{published['mistake_f1']:.1f}",
                        "–",
                        "–",
                        style="dim",
                    )
            table.add_section()
        for mode in modes:
            best = published_best(dataset, mode)
            table.add_row(
                "best published", f"{mode} {MODE_MARKS[mode]}", f"{best:.1f}", *([""] * 6), style="dim italic"
            )
        tables.append(table)
    return tables


def perturbation_tables(result: Mapping[str, Any]) -> list[Any]:
    """Rich tables of the noise ablation: Avg / Correct / Mistake F1 per rate, one table per dataset and mode."""
    from rich.table import Table

    tables = []
    for dataset, modes in result.get("perturb", {}).items():
        for mode, methods in modes.items():
            table = Table(title=f"Noise ablation — {dataset}, {mode} {MODE_MARKS[mode]} (Avg / Correct / Mistake F1)")
            table.add_column("method")
            rates = [point["rate"] for point in next(iter(methods.values()))]
            for rate in rates:
                table.add_column(f"p={rate:g}", justify="right")
            for method, curve in methods.items():
                table.add_row(
                    method,
                    *(
                        f"{p['mean']['avg_f1']:.1f} / {p['mean']['correct_f1']:.1f} / {p['mean']['mistake_f1']:.1f}"
                        for p in curve
                    ),
                )
            tables.append(table)
    return tables


def plot_perturbation(result: Mapping[str, Any], path: str | Path) -> Path | None:
    """Save the noise ablation as a PNG (Avg / Correct / Mistake F1 against the rate), if matplotlib is installed.

    Args:
        result: a `run_benchmark` result with a ``perturb`` section.
        path: PNG file to write.

    Returns:
        The file written, or None when matplotlib is not installed (it is the optional ``plot`` extra).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never open a window
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    panels = [(d, m, methods) for d, modes in result.get("perturb", {}).items() for m, methods in modes.items()]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (dataset, mode, methods) in zip(axes[0], panels, strict=True):
        for method, curve in methods.items():
            rates = [p["rate"] for p in curve]
            for key, style in (("avg_f1", "-"), ("correct_f1", "--"), ("mistake_f1", ":")):
                label = f"{method} {key.removesuffix('_f1')}"
                ax.plot(rates, [p["mean"][key] for p in curve], style, marker="o", label=label)
        ax.set_title(f"{dataset} {mode} {MODE_MARKS[mode]}")
        ax.set_xlabel("perturbation rate p")
        ax.set_ylabel("F1 (%)")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_results(result: Mapping[str, Any], path: str | Path) -> Path:
    """Write a result document as indented JSON (parent folder created)."""
    import json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


# -- model selection on the training split only -------------------------------------------------------------------
def synthetic_mistakes(sequences: Sequence[Sequence[int]], per_video: int, seed: int) -> list[tuple[int, ...]]:
    """PREGO-like validation items from held-out *training* videos (no test data involved).

    Each item is a correct prefix of a video's first-occurrence sequence followed by a step of that video done too
    early (one that comes later, skipping the true next step): the last step is the mistake, as in SPEC §2.

    Args:
        sequences: held-out training sequences.
        per_video: items drawn per video.
        seed: random cut positions and mistakes.

    Returns:
        Key-step sequences whose last step is the mistake.
    """
    from tgml.ensemble import synthetic_slips  # the ensemble module imports this one lazily the other way round

    return synthetic_slips(sequences, (), per_video, seed, slip_rate=0.0)


def cross_validate(
    data: BenchData,
    settings: Mapping[str, Any],
    folds: int,
    epochs_grid: Sequence[int],
    scale_grid: Sequence[float],
    noise: float = 0.2,
    seed: int = 1,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """K-fold cross-validation of DO epochs x edge-threshold scale on the training split (how ``do-cv`` was chosen).

    Each fold trains DO on the other folds, scores `synthetic_mistakes` of its held-out videos clean and perturbed
    at rate ``noise`` (a stand-in for recognition errors), and pools the flags over folds.

    Returns:
        One row per candidate: ``{"epochs", "threshold_scale", "clean", "noisy", "score"}`` (Avg F1, score = mean
        of clean and noisy), best first.
    """
    from rich.progress import Progress

    from graphs.postprocess import binarize

    if not 2 <= folds <= len(data.train):
        raise InputError(f"--folds {folds}: need between 2 and {len(data.train)} (training videos)")
    order = np.random.default_rng(0).permutation(len(data.train))  # fixed folds: candidates see the same split
    flags: dict[tuple[int, float, str], list[np.ndarray]] = {}
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("cross-validation", total=folds * len(epochs_grid))
        for k, held in enumerate(np.array_split(order, folds)):
            held_set = set(held.tolist())
            train = tuple(s for j, s in enumerate(data.train) if j not in held_set)
            clean = synthetic_mistakes([data.train[j] for j in sorted(held_set)], per_video=3, seed=100 + k)
            noisy = perturb_sequences(clean, noise, data.step_ids, seed=200 + k)
            fold_data = BenchData(data.name, data.scenario, data.step_ids, data.step_names, train, {})
            present = np.isin(np.asarray(data.step_ids), [s for seq in train for s in seq])
            for epochs in epochs_grid:
                graph = build_do(fold_data, settings, seed, epochs)
                assert graph.weights is not None
                for scale in scale_grid:
                    n_threshold = max(1, round(graph.n_steps * scale))
                    adj = binarize(
                        graph.weights, present, bool(settings.get("relaxed", True)), threshold_steps=n_threshold
                    )
                    candidate = TaskGraph(graph.step_ids, graph.step_names, adj, graph.weights)
                    for name, items in (("clean", clean), ("noisy", noisy)):
                        flags.setdefault((epochs, scale, name), []).extend(
                            precondition_violations(candidate, s) for s in items
                        )
                bar.advance(task)
    rows = []
    for epochs in epochs_grid:
        for scale in scale_grid:
            clean_f1 = mistake_scores(flags[(epochs, scale, "clean")]).avg_f1
            noisy_f1 = mistake_scores(flags[(epochs, scale, "noisy")]).avg_f1
            rows.append(
                {
                    "epochs": epochs,
                    "threshold_scale": scale,
                    "clean": clean_f1,
                    "noisy": noisy_f1,
                    "score": (clean_f1 + noisy_f1) / 2,
                }
            )
    return sorted(rows, key=lambda r: -r["score"])
