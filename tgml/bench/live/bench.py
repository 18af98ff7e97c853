"""``tgml bench-live``: the whole live chain on real CaptainCook4D recordings, k-fold per recipe
(docs/live-benchmark.md).

Per recipe, its recordings are dealt into ``folds`` folds (error-free and erroneous recordings spread evenly, with a
seeded draw). Each recording is tested once, in its fold, by:

- a detector trained on the recordings of the other folds (`tgml.bench.live.detector`), its settings chosen on
  validation recordings carved from those training folds only;
- a graph learned with the project's default learner (`tgml.learners.registry.DEFAULT_LEARNER`) from the recipe's
  graph-generation annotations, the test fold's recordings left out (`graphs.annotations.TrainingVideos`), which the
  live chain checks as it is or of which it checks the pre-conditions that recognition orders too
  (`tgml.bench.live.observed`: a graph learned from the key-steps recognised in the training recordings, by detectors
  that never saw them);
- the live chain (`tgml.bench.live.chain`): stepper, segmenter, evidence, the default (probabilistic) checker; the
  segmenter variant, the checker's skip prior and alert threshold and the end-of-recording missing report chosen on
  validation recordings of the training folds (`tgml.bench.live.selection`), and, when asked
  (`LiveBenchConfig.checkers`, ``live_graphs``), the checker and the graph it checks too.

Scores (`tgml.bench.live.scores`) per recipe and overall, beside the annotated steps replayed against the hand-made
and the learned graphs, and the per-second mAP of recognition (background excluded, pooled over a recipe's
recordings, averaged over recipes as DERIVATION.md's linear-probe reference).

Result JSON (``--json FILE``)::

    {"benchmark": "captaincook4d-live", "version": 3, "folds": int, "seed": int, "detector_seed": int,
     "seconds": float,
     "settings": {"features_dir": str, "detector": {...}, "segmenter": {...}, "checker": {...}, "learner": str,
                  "checkers": [str], "live_graphs": [str]},   # detector.features.extractor: null for --features
     "overall": {ROW: {METRIC: value}, "map": float, "silent_avg_f1": float},
     "recipes": {recipe: {ROW: {METRIC: value}, "map": float, "recordings": int}},
     "chosen": {recipe: {fold: {"checker", "live_graph", "prior_skip", "alert_threshold" (null: the binary checker),
                                "segmenter_min_duration", "once", "position_prior_weight", "duration_share",
                                "done_state", "segmenter", "done_level", "objective", "validation_recordings",
                                "kept_epoch", "preconditions": {"learned", "checked"}}}},
     "recordings": [{"recording_id", "recipe", "fold",
                     "recognised": [{"step", "start", "end", "confidence"}],
                     "alerts": [{"step", "missing", "time", "probability", "retracted"}],
                     "never_done": [step name]}]}

ROW is ``live`` (recognised steps, checked as each fold chose), ``live_default`` (the same, checked with the a-priori
checker, graph and settings), ``annotated_learned`` and ``annotated_hand_made``; step names are the annotations'.
``silent_avg_f1`` is the Avg F1 of a checker that never alerts, on the live rows' items (`silent_avg_f1`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch
from rich.table import Table

from graphs.annotations import Annotations
from graphs.checker_settings import CheckerSettings, checker_entry
from graphs.common.errors import InputError
from graphs.common.files import check_output
from graphs.common.safe_text import first_few, unknown_name
from graphs.precision_recall import shown
from graphs.task_graph import TaskGraph
from recognition.evidence import EvidenceModel
from recognition.metrics import frame_map
from recognition.position_prior import PositionPrior, fit_position_prior
from tgml.bench.live.chain import ChainRun, DetectorRun, check_stream, segment_outputs
from tgml.bench.live.detector import LiveDetectorSettings, calibrate, one_hot
from tgml.bench.live.fold_training import fold_detector_settings, fold_entry
from tgml.bench.live.observed import precondition_count
from tgml.bench.live.recordings import FEATURES_SUBFOLDER, FPS, LiveData, LiveRecording, Recipe, load_live_data
from tgml.bench.live.scores import LiveCounts, annotated_counts, live_counts
from tgml.bench.live.selection import (
    LIVE_GRAPHS,
    VARIANTS,
    Candidate,
    ReplayTable,
    SegmenterVariant,
    ValidationRun,
    candidates,
    class_durations,
    cross_fitted,
    objective,
    pool_indices,
)
from tgml.bench.process_pool import report_progress, run_jobs
from tgml.learners.registry import DEFAULT_LEARNER

# 2 (2026-11-30): ``settings.live_graph`` became ``settings.live_graphs`` and ``settings.checkers``; ``chosen`` gained
# ``checker`` and ``live_graph``. 3 (2026-12-01): ``overall.silent_avg_f1``, ``detector_seed``.
RESULTS_VERSION: Final = 3
# What the live rows' titles call each graph the chain may check against.
LIVE_GRAPH_TITLES: Final = {"observed": "learned graphs' observed pre-conditions", "learned": "learned graphs"}
ROWS: Final = ("live", "live_default", "annotated_learned", "annotated_hand_made")
# The counts of a checker that never alerts, scored as the live rows are: the floor their Avg F1 is read against.
SILENT: Final = "silent"
ROW_TITLES: Final = {"annotated_learned": "annotated steps, learned graphs",
                     "annotated_hand_made": "annotated steps, hand-made graphs"}


NAMED_SPLIT: Final = "LiveBenchConfig.detector.train.val_videos"


@dataclass(frozen=True)
class LiveBenchConfig:
    """One run of the benchmark.

    Attributes:
        data_dir: the data folder (holding ``captaincook4d/``).
        features_dir: the features folder (None: ``<data>/captaincook4d-pe/features``).
        folds: folds per recipe, in ``[2, recordings of the smallest recipe]``.
        seed: seeds the folds, each fold's validation recordings, the graphs and (by default) the detectors.
        detector_seed: seeds the detectors alone (their initial weights, windows and draws); None: ``seed``. Another
            one trains other detectors on the same folds, validation recordings and learned graphs (the observed
            pre-conditions, from the detectors' own recognition, change with them): what a training's seed moves.
        detector: how each fold's detector is trained and run.
        checking: the a-priori checker and its settings (the live default: probabilistic), which the defaults row
            runs.
        checkers: other checkers a fold may choose on validation instead (`tgml.bench.live.selection.candidates`),
            those that take ``checking``'s order rule; empty (the default): ``checking``'s alone (a choice per fold
            did not hold across seeds, docs/live-benchmark.md).
        recipes: only these recipes (empty: every recipe of the features folder).
        workers: processes running folds side by side (0: one per core).
        cache: a folder keeping each fold's training (`tgml.bench.live.cache`; None: none kept).
        variants: the segmenter variants each fold chooses from on validation (the first: the live default).
        live_graphs: what the live chain may check against, a fold choosing on validation, the first the a-priori
            one: ``"observed"`` (the learned graph's pre-conditions that recognition orders too,
            `tgml.bench.live.observed`; a nested cross-validation trains two more detectors per fold; alone, the
            default) and ``"learned"`` (the learned graph as it is).
    """

    data_dir: Path
    features_dir: Path | None = None
    folds: int = 3
    seed: int = 42
    detector: LiveDetectorSettings = field(default_factory=LiveDetectorSettings)
    checking: CheckerSettings = field(default_factory=CheckerSettings)
    recipes: tuple[str, ...] = ()
    workers: int = 2
    cache: Path | None = None
    variants: tuple[SegmenterVariant, ...] = VARIANTS
    checkers: tuple[str, ...] = ()
    live_graphs: tuple[str, ...] = LIVE_GRAPHS[:1]
    detector_seed: int | None = None

    def __post_init__(self) -> None:
        for graph in self.live_graphs:
            if graph not in LIVE_GRAPHS:
                raise InputError(unknown_name("--live-graph", graph, LIVE_GRAPHS, None))
        if not self.live_graphs or len(set(self.live_graphs)) < len(self.live_graphs):
            raise InputError(f"live graphs {self.live_graphs!r}: give each of {', '.join(LIVE_GRAPHS)} once at most")
        if isinstance(self.folds, bool) or not isinstance(self.folds, int) or self.folds < 2:
            raise InputError(f"--folds {self.folds!r}: must be an integer >= 2 (each recording is tested by a "
                             "detector trained on the other folds)")
        for kind in self.checkers:
            checker_entry(kind)  # an unknown name: its error line
        if not self.variants:  # every fold would train, then the run would stop with nothing to choose from
            raise InputError("LiveBenchConfig.variants: empty; give at least one segmenter variant (the first is the "
                             "live default)")
        if self.detector.train.val_videos:
            # Each recording is a test recording of one fold, so no split named once can hold for every fold: it
            # stopped the run when the first fold that tests one of its recordings came to train.
            raise InputError(f"{NAMED_SPLIT} {first_few(list(self.detector.train.val_videos), 3)}: bench-live draws "
                             "each fold's validation recordings from its training folds (val_fraction, seeded by "
                             "seed); leave it empty")
        if not self.detector.train.val_fraction > 0:
            raise InputError(f"LiveBenchConfig.detector.train.val_fraction {self.detector.train.val_fraction:g}: "
                             "must be above 0 (each fold calibrates its evidence and chooses its settings on its "
                             "validation recordings)")

    @property
    def detectors_seed(self) -> int:
        """What seeds the detectors: ``detector_seed``, else ``seed``."""
        return self.seed if self.detector_seed is None else self.detector_seed

    @property
    def checker_kinds(self) -> tuple[str, ...]:
        """The checkers a fold chooses from: ``checking``'s first, then those of ``checkers`` that take its order
        rule (the probabilistic checker does not take ``late-step``)."""
        rule = self.checking.order_rule
        others = [k for k in dict.fromkeys(self.checkers)  # each once, in the order given
                  if k != self.checking.kind and rule in checker_entry(k).order_rules]
        return (self.checking.kind, *others)

    def candidates(self) -> list[Candidate]:
        """What a fold chooses its checker from; the first is the a-priori one (the defaults row)."""
        return candidates(self.checking, self.checker_kinds, self.live_graphs)


@dataclass
class RecordingResult:
    """One test recording's run and scores."""

    recording: LiveRecording
    fold: int
    run: ChainRun
    counts: dict[str, LiveCounts]


@dataclass
class LiveBenchResult:
    """Every recording's run, the per-recipe mAPs, the wall time, what each fold chose and the graph it checked
    against (``graphs``: recipe -> fold -> graph file content)."""

    config: LiveBenchConfig
    data: LiveData
    recordings: list[RecordingResult]
    maps: dict[str, float]
    seconds: float = 0.0
    chosen: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    validation: list[ValidationRun] = field(default_factory=list)
    replays: ReplayTable | None = None
    graphs: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    folds_from_cache: int = 0  # folds whose training was read from `LiveBenchConfig.cache`, nothing trained

    def pooled(self, recipe: str | None = None) -> dict[str, LiveCounts]:
        """Counts per row over the recordings of ``recipe`` (None: all)."""
        out = {row: LiveCounts() for row in (*ROWS, SILENT)}
        for r in self.recordings:
            if recipe is None or r.recording.recipe == recipe:
                for row in out:
                    out[row] += r.counts[row]
        return out

    def cache_line(self) -> str | None:
        """How many folds the cache gave and how many trained (None: no cache)."""
        if self.config.cache is None:
            return None
        folds = sum(len(recipe) for recipe in self.chosen.values())
        trained = folds - self.folds_from_cache
        return (f"--cache {self.config.cache}: {self.folds_from_cache} of {folds} folds read from it, "
                + (f"{trained} trained and kept there" if trained else "none trained"))

    @property
    def mean_map(self) -> float:
        """Mean over recipes of the per-second mAP (percent)."""
        return 100 * float(np.nanmean(list(self.maps.values())))

    def to_dict(self) -> dict[str, Any]:
        """The result JSON of the module docstring."""
        recipes = {}
        for name in self.maps:
            pooled = self.pooled(name)
            recipes[name] = {**{row: pooled[row].metrics() for row in ROWS}, "map": 100 * self.maps[name],
                             "recordings": sum(r.recording.recipe == name for r in self.recordings)}
        overall = self.pooled()
        detector = _plain(dataclasses.asdict(self.config.detector.with_epochs(None, self.config.detectors_seed).train))
        # The detectors' training settings name captaincook4d-pe's backbone; another folder's is not known here.
        if self.data.features_dir.resolve().parts[-2:] != FEATURES_SUBFOLDER.parts:
            detector["features"]["extractor"] = None
        settings = {"features_dir": str(self.data.features_dir),
                    "detector": detector,
                    "segmenter": dataclasses.asdict(self.config.detector.segmenter),
                    "checker": dataclasses.asdict(self.config.checking), "learner": DEFAULT_LEARNER,
                    "checkers": list(self.config.checker_kinds), "live_graphs": list(self.config.live_graphs)}
        return {"benchmark": "captaincook4d-live", "version": RESULTS_VERSION, "folds": self.config.folds,
                "seed": self.config.seed, "detector_seed": self.config.detectors_seed, "seconds": self.seconds,
                "settings": settings,
                "overall": {**{row: overall[row].metrics() for row in ROWS}, "map": self.mean_map,
                            "silent_avg_f1": overall[SILENT].metrics()["avg_f1"]},
                "recipes": recipes, "chosen": self.chosen,
                "recordings": [recording_json(r, self.data.recipes[r.recording.recipe]) for r in self.recordings]}


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively (JSON)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def recording_json(result: RecordingResult, recipe: Recipe) -> dict[str, Any]:
    """One recording's part of the result JSON (step names as in the annotations)."""
    names = dict(zip(recipe.step_ids, recipe.step_names, strict=True))
    run = result.run
    return {
        "recording_id": result.recording.recording_id, "recipe": recipe.scenario, "fold": result.fold,
        "recognised": [{"step": names[e.step], "start": e.start, "end": e.end, "confidence": round(e.confidence, 4)}
                       for e in run.recognised],
        "alerts": [{"step": names[a.step], "missing": [names[m] for m in a.missing], "time": a.time,
                    "probability": round(a.probability, 4), "retracted": a.retracted} for a in run.alerts],
        "never_done": [names[s] for s, _ in run.never_done],
    }


def assign_folds(recordings: Sequence[LiveRecording], folds: int, seed: int) -> list[int]:
    """The fold of each recording of one recipe: error-free and erroneous recordings each shuffled (seeded) and dealt
    in turn, so every fold holds both kinds.

    Returns:
        Fold index per recording, in the order given.
    """
    rng = np.random.default_rng(seed)
    clean = [i for i, r in enumerate(recordings) if r.error_free]
    erred = [i for i, r in enumerate(recordings) if not r.error_free]
    order = [int(i) for group in (clean, erred) for i in rng.permutation(group)]
    out = [0] * len(recordings)
    for k, i in enumerate(order):
        out[i] = k % folds
    return out


def check_folds(data: LiveData, folds: int) -> None:
    """Refuse ``--folds`` above a recipe's number of recordings (a fold would be empty), or leaving a training fold
    fewer than two recordings (one to fit the detector, one to validate it)."""
    for name in data.recipes:
        count = len(data.of(name))
        if count < 3:  # no --folds would do: say so rather than suggest a --folds that is refused in turn
            raise InputError(f"--folds {folds}: recipe {name!r} has only {count} recording(s) in the features folder; "
                             "k-fold needs at least 3 (each training fold holds 2: one to fit the detector, one to "
                             "validate it): add recordings, or leave the recipe out with --recipes")
        if folds > count:
            raise InputError(f"--folds {folds}: recipe {name!r} has only {count} recording(s) in the features folder; "
                             f"give --folds {count} or fewer")
        if count - math.ceil(count / folds) < 2:
            raise InputError(f"--folds {folds}: recipe {name!r} has {count} recording(s): a training fold would hold "
                             f"fewer than 2 (one to fit the detector, one to validate it); give more folds (up to "
                             f"--folds {count}) or add recordings")


def graph_recordings(annotations: Annotations, scenario: str) -> frozenset[str]:
    """The recordings a recipe's graph is learned from (`tgml.bench.live.fold_training.learn_graph`): its
    graph-generation executions that hold a step and no annotated mistake
    (`graphs.annotations.Annotations.training_selection`)."""
    return frozenset(v.video for v in annotations.scenario_videos(scenario) if v.steps and not any(v.has_errors))


def fold_settings(config: LiveBenchConfig, train: Sequence[LiveRecording], test: Sequence[LiveRecording],
                  learnable: frozenset[str]) -> LiveDetectorSettings:
    """A fold's detector settings (`tgml.bench.live.fold_training.fold_detector_settings`), its drawn validation
    recordings leaving one of ``learnable`` (`graph_recordings`) for the validation graph (`spare_graph_recording`).

    Here, not in `tgml.bench.live.fold_training`, whose source is in the cache's key: the trade changes only the
    settings, which are in the key too, so every cache kept before stays valid.
    """
    settings = fold_detector_settings(config.detector, config.seed, config.detectors_seed, train, test)
    validation = spare_graph_recording(settings.train.val_videos, [r.recording_id for r in train],
                                       [r.recording_id for r in test], learnable, config.seed)
    return dataclasses.replace(settings, train=dataclasses.replace(settings.train, val_videos=validation))


def spare_graph_recording(validation: Sequence[str], train: Sequence[str], test: Sequence[str],
                          learnable: frozenset[str], seed: int) -> tuple[str, ...]:
    """``validation`` with one of its ``learnable`` recordings traded for a training recording outside it (seeded),
    when the test fold and ``validation`` together hold every recording of ``learnable``; else as it is.

    The validation graph is learned without the test fold and the validation recordings
    (`tgml.bench.live.fold_training.train_fold`): holding every graph-generation recording of a recipe, they left it
    nothing to learn from, and the fold stopped the run (the shipped pinwheels at ``--folds 2 --seed 65``; all 384
    recordings, seeds 0-99 at 2 and 3 folds: 11 folds). The trade happens only then, so every split that ran before
    is the same.
    """
    spared = learnable - set(test) - set(validation)
    held = [r for r in validation if r in learnable]
    if spared or not held:  # something to learn from, or nothing the trade could spare (the test fold holds all)
        return tuple(validation)
    fitting = [r for r in train if r not in validation]  # none of them learnable, else one was spared
    swap = fitting[int(np.random.default_rng(seed).integers(len(fitting)))]
    chosen = (set(validation) - {held[0]}) | {swap}
    return tuple(r for r in train if r in chosen)  # in training-list order, as the trainer's draw


def check_graph_folds(recipe: str, recordings: Sequence[LiveRecording], fold_of: Sequence[int],
                      learnable: frozenset[str], config: LiveBenchConfig) -> None:
    """Refuse, before any training, folds of which one's test recordings are every recording the recipe's graph is
    learned from (`graph_recordings`): no graph could be learned without them, and the
    fold stopped the run once others had trained, naming an option bench-live does not have."""
    for fold in range(config.folds):
        test = {r.recording_id for r, f in zip(recordings, fold_of, strict=True) if f == fold}
        if learnable and learnable <= test:
            raise InputError(f"--folds {config.folds} --seed {config.seed}: {recipe}, fold {fold} would test every "
                             f"recording its graph is learned from ({first_few(sorted(learnable), 6)}), so no graph "
                             "could be learned without them; give another --seed or --folds")


def run_live_bench(config: LiveBenchConfig, progress: bool = True) -> LiveBenchResult:
    """Train, run and score every fold of every recipe.

    Args:
        config: the run.
        progress: a rich progress bar on stderr.

    Returns:
        The `LiveBenchResult`.
    """
    started = time.perf_counter()
    if config.cache is not None:  # a cache that cannot be written: found when the first fold's training is saved
        check_output(config.cache, "fold cache", folder=True, option="LiveBenchConfig.cache")
    data = load_live_data(config.data_dir, config.features_dir, config.recipes)
    check_folds(data, config.folds)
    jobs = []
    # Every fold's split and settings before any fold trains: a fold that cannot run stopped the run once the folds
    # before it had trained (minutes each).
    for recipe in data.recipes.values():
        recordings = data.of(recipe.scenario)
        fold_of = assign_folds(recordings, config.folds, config.seed)
        learnable = graph_recordings(data.annotations, recipe.scenario)
        check_graph_folds(recipe.scenario, recordings, fold_of, learnable, config)
        jobs += [(recipe, recordings, fold_of, fold, data.annotations, config,
                  plan_fold(recipe, recordings, fold_of, fold, learnable, config))
                 for fold in range(config.folds)]
    jobs.sort(key=lambda job: -sum(len(r.labels) for r in job[1]))  # the longest first: no worker idles at the end
    done = run_jobs(fold_job, jobs, config.workers, "[bold]bench-live: folds (train, then the live chain)", progress,
                    names=[f"{job[0].scenario} fold {job[3]}" for job in jobs])
    validation = [v for outcome in done for v in outcome.validation]
    options = config.candidates()
    replays = ReplayTable(validation, options)
    prior = options[0]  # the a-priori checker, graph and settings: the defaults row
    results: list[RecordingResult] = []
    chosen: dict[str, dict[int, dict[str, Any]]] = {}
    graphs: dict[str, dict[int, dict[str, Any]]] = {}
    for job, outcome in zip(jobs, done, strict=True):
        recipe, fold = job[0], job[3]
        learned = TaskGraph.from_dict(outcome.graph)
        pool = pool_indices(validation, recipe.scenario, fold)
        pick = replays.choose(pool)
        live = {name: TaskGraph.from_dict(graph) for name, graph in outcome.checked.items()}  # each parsed once
        checked = live[pick.candidate.graph]
        graphs.setdefault(recipe.scenario, {})[fold] = outcome.checked[pick.candidate.graph]
        variant = config.variants[pick.variant]
        chosen.setdefault(recipe.scenario, {})[fold] = {
            "checker": pick.candidate.checking.kind, "live_graph": pick.candidate.graph,
            **checker_numbers(pick.candidate.checking),
            "segmenter_min_duration": variant.min_duration, "once": variant.once,
            "position_prior_weight": variant.prior_weight, "duration_share": variant.duration_share,
            "done_state": variant.done_state, "segmenter": variant.label(), "done_level": pick.done_level,
            "objective": pick.objective, "validation_recordings": len(pool) // len(config.variants),
            "kept_epoch": outcome.kept_epoch,
            "preconditions": {"learned": precondition_count(learned.adjacency),
                              "checked": precondition_count(checked.adjacency)}}
        by_id = {r.recording_id: r for r in job[1]}
        defaults = dict(outcome.test[0])
        for recording_id, sent in outcome.test[pick.variant]:
            recording = by_id[recording_id]
            run = check_stream(sent, checked, pick.candidate.checking, pick.done_level)
            default = check_stream(defaults[recording_id], live[prior.graph], prior.checking)
            results.append(RecordingResult(recording, fold, run, score_recording(
                recording, recipe, run, learned, default, config.checking.order_rule)))
    order = {r.recording_id: k for k, r in enumerate(data.recordings)}
    results.sort(key=lambda r: order[r.recording.recording_id])
    maps: dict[str, float] = {}
    for recipe in data.recipes.values():
        mine = [r for r in results if r.recording.recipe == recipe.scenario]
        classes = len(recipe.class_step_ids)
        maps[recipe.scenario] = frame_map(np.concatenate([r.run.outputs[:, :classes] for r in mine]),
                                          np.concatenate([one_hot(r.recording.labels, classes) for r in mine]),
                                          (0,))[0]
    return LiveBenchResult(config, data, results, maps, time.perf_counter() - started, chosen, validation, replays,
                           graphs, sum(outcome.from_cache for outcome in done))


def split_fold(recordings: Sequence[LiveRecording], fold_of: Sequence[int], fold: int
               ) -> tuple[list[LiveRecording], list[LiveRecording]]:
    """``(train, test)``: the recordings of the other folds and those of ``fold``, in their order."""
    test = [r for r, f in zip(recordings, fold_of, strict=True) if f == fold]
    train = [r for r, f in zip(recordings, fold_of, strict=True) if f != fold]
    return train, test


def plan_fold(recipe: Recipe, recordings: Sequence[LiveRecording], fold_of: Sequence[int], fold: int,
              learnable: frozenset[str], config: LiveBenchConfig) -> LiveDetectorSettings:
    """A fold's detector settings (`fold_settings`), its data checked as far as it can be without training.

    Raises:
        InputError: test recordings with no annotated step, or validation recordings that show none (the evidence
            calibration's own refusal after the fold's training), naming the fold and its training recordings
            (`fold_named`).
    """
    train, test = split_fold(recordings, fold_of, fold)
    with fold_named(recipe.scenario, fold, config.folds, train):
        if not any((r.labels > 0).any() for r in test):  # no public recording is so; an edited annotation file may be
            raise InputError(f"its test recordings ({first_few([r.recording_id for r in test], 6)}) have no annotated "
                             "step, so their recognition cannot be scored")
        settings = fold_settings(config, train, test, learnable)
        validation = [r for r in train if r.recording_id in settings.train.val_videos]
        if not any((r.labels > 0).any() for r in validation):
            raise InputError(f"its validation recordings ({first_few([r.recording_id for r in validation], 6)}) "
                             "have no annotated step, so the evidence cannot be calibrated on them")
    return settings


@dataclass
class FoldOutcome:
    """What one fold's job sends back.

    Attributes:
        graph: the learned graph's file content (test fold left out).
        checked: per `LiveBenchConfig.live_graphs` name, the graph the live chain would check the test recordings
            against (a file's content).
        test: per segmenter variant (`LiveBenchConfig.variants`), ``(recording_id, detector run)`` of each test
            recording.
        validation: the fold's validation runs (`tgml.bench.live.selection`).
        kept_epoch: the detector's kept epoch.
        from_cache: its training was read from the cache, nothing trained.
    """

    graph: dict[str, Any]
    checked: dict[str, dict[str, Any]]
    test: list[list[tuple[str, DetectorRun]]]
    validation: list[ValidationRun]
    kept_epoch: int
    from_cache: bool


@contextmanager
def fold_named(recipe: str, fold: int, folds: int, train: Sequence[LiveRecording]) -> Iterator[None]:
    """An `InputError` raised inside names the fold and its training recordings: "no validation video shows an
    annotated key-step" alone does not say which of 18 folds, or which recordings, to look at."""
    try:
        yield
    except InputError as err:
        # Numbered as the JSON's "fold", the cache's and --save-graphs' file names number it: from 0.
        raise InputError(f"{recipe}, fold {fold} (of 0-{folds - 1}; trained on "
                         f"{first_few([r.recording_id for r in train], 6)}): {err}") from None


def fold_job(
    recipe: Recipe,
    recordings: list[LiveRecording],
    fold_of: list[int],
    fold: int,
    annotations: Annotations,
    config: LiveBenchConfig,
    settings: LiveDetectorSettings,
) -> FoldOutcome:
    """Worker job: one fold of one recipe: learn its graph, train its detector, run the detector side of the chain
    over its test recordings and its validation recordings (those with a graph learned without them too, and each with
    an evidence calibration fitted without it: `tgml.bench.live.selection.cross_fitted`), with ``settings``, the
    detector settings `plan_fold` checked before any fold trained.

    Returns:
        The `FoldOutcome`.

    Raises:
        InputError: what the fold's data cannot give that `plan_fold` could not see without training, naming the
            fold and its training recordings (`fold_named`).
    """
    torch.set_num_threads(1)  # one core per job: two jobs share two cores better than two threads per job
    train, test = split_fold(recordings, fold_of, fold)
    with fold_named(recipe.scenario, fold, config.folds, train):
        # Whether the cache gave it is said at the end of the run: a cache that missed (edited code or data, other
        # settings) trained in silence, and a run that took minutes instead of seconds was the only sign.
        trained, from_cache = fold_entry(recipe, fold, train, test, annotations, settings, config.seed, config.cache,
                                         observed="observed" in config.live_graphs)
        fitting = [r for r in train if r.recording_id not in trained.validation_outputs]
        # The graphs the chain may check against (test, validation); the observed ones are the learned ones as they
        # are where the fold had too few recordings for them.
        live = {"learned": (trained.graph, trained.val_graph)}
        live["observed"] = (trained.observed.graph, trained.observed.val_graph) if trained.observed else live["learned"]
        checked = {name: live[name][0] for name in config.live_graphs}
        val_graphs = {name: TaskGraph.from_dict(live[name][1]) for name in config.live_graphs}
        classes = recipe.class_step_ids
        names = dict(zip(recipe.step_ids, recipe.step_names, strict=True))
        tests, validation = [], []
        labels = [r.labels for r in fitting]
        prior = fit_position_prior(labels, len(classes), FPS)
        # Key-steps' usual durations on the same recordings (background keeps the variant's common length).
        durations = np.where([s is None for s in classes], np.nan, class_durations(labels, len(classes), FPS))
        for index, variant in enumerate(config.variants):
            report_progress("the live chain's segmenter settings on its recordings", index, len(config.variants))
            segmenter = variant.config(settings.segmenter, durations)
            weight = variant.prior_weight
            width = None if variant.done_state else len(classes)  # without done states: the class probabilities only
            fused = {k: (fuse_outputs(prior, out[:, :width], len(classes), weight), y)
                     for k, (out, y) in trained.trainer_validation.items()}
            calibrating = dataclasses.replace(settings, segmenter=segmenter)
            evidence = calibrate(recipe, fused, calibrating)

            def detect(outputs: np.ndarray, model: EvidenceModel) -> DetectorRun:
                outputs = fuse_outputs(prior, outputs[:, :width], len(classes), weight)  # noqa: B023 (used at once)
                return segment_outputs(outputs, classes, segmenter, model, variant.once)  # noqa: B023 (used at once)

            tests.append([(r.recording_id, detect(trained.test_outputs[r.recording_id], evidence)) for r in test])
            held_out = cross_fitted(fused, lambda others: calibrate(recipe, others, calibrating), evidence)  # noqa: B023
            for r in train:
                if r.recording_id in trained.validation_outputs:
                    run = detect(trained.validation_outputs[r.recording_id], held_out[r.recording_id])
                    run = dataclasses.replace(run, outputs=np.zeros((0, run.outputs.shape[1]), np.float32))
                    validation.append(ValidationRun(recipe.scenario, fold, r.annotation, r.error_free, names, run,
                                                    val_graphs, index))
        return FoldOutcome(trained.graph, checked, tests, validation, trained.kept_epoch, from_cache)


def fuse_outputs(prior: PositionPrior, outputs: np.ndarray, classes: int, weight: float) -> np.ndarray:
    """The stepper's per-second outputs with the class probabilities fused with the position prior (P2; the done
    states after them unchanged)."""
    if weight == 0.0:
        return outputs
    return np.concatenate([prior.fuse(outputs[:, :classes], weight), outputs[:, classes:]], axis=1)


def score_recording(
    recording: LiveRecording, recipe: Recipe, run: ChainRun, graph: TaskGraph, default: ChainRun, rule: str
) -> dict[str, LiveCounts]:
    """The counts of each row for one recording (``default``: the run checked with the default settings; the
    annotated rows under the chain's order ``rule``)."""
    names = dict(zip(recipe.step_ids, recipe.step_names, strict=True))

    def counts(chain: ChainRun) -> LiveCounts:
        alerted = [(names[a.step], a.time) for a in chain.alerts if not a.retracted]
        return live_counts(recording.annotation, recording.error_free, alerted, [s for s, _ in chain.never_done],
                           names)

    return {
        "live": counts(run),
        "live_default": counts(default),
        "annotated_learned": annotated_counts(graph, recording.annotation, recording.error_free, rule),
        "annotated_hand_made": annotated_counts(recipe.ground_truth, recording.annotation, recording.error_free, rule),
        SILENT: live_counts(recording.annotation, recording.error_free, [], [], names),
    }


# -- the tables ------------------------------------------------------------------------------------------------------
COLUMNS: Final = (("Avg F1", "avg_f1", 1), ("Mist P", "mistake_precision", 1), ("Mist R", "mistake_recall", 1),
                  ("Mist F1", "mistake_f1", 1), ("Missing P", "missing_precision", 1),
                  ("Missing R", "missing_recall", 1), ("Missing F1", "missing_f1", 1),
                  ("false alarms / error-free rec.", "false_alarms_per_error_free", 2),
                  ("latency median s", "latency_median_s", 1), ("right alerts early", "caught_before_start", 0))


def silent_avg_f1(counts: LiveCounts) -> float | None:
    """Avg F1 (`tgml.bench.mistake_bench.Counts.metrics`) of a checker that raises no alert on the items ``counts``
    were scored on: every performed step called correct, no order error caught.

    The live rows' items are each recording's distinct performed steps (`tgml.bench.live.scores.live_counts`), the
    annotated rows' its performed segments (a step done twice is two): the floors differ (44.6 and 44.7 on the 90
    recordings), and each row is read against its own."""
    return dataclasses.replace(counts.counts, alerts=0, caught=0).metrics()["avg_f1"]


def live_row_title(config: LiveBenchConfig) -> str:
    """The live row's title: what the chain checked against, and the checker too when the folds chose it."""
    kinds, graphs = config.checker_kinds, config.live_graphs
    checker = ["checker chosen by CV"] if len(kinds) > 1 else []
    graph = "graph chosen by CV" if len(graphs) > 1 else LIVE_GRAPH_TITLES[graphs[0]]
    return ", ".join(["live chain: recognised steps", *checker, graph])


def default_row_title(config: LiveBenchConfig) -> str:
    """The defaults row's title: the a-priori segmenter, settings and report, and checker and graph when the folds
    chose them."""
    if len(config.checker_kinds) == len(config.live_graphs) == 1:
        return "live chain, defaults: 3 s segmenter, the checker's settings and report (no CV)"
    return f"live chain, defaults: 3 s segmenter, {config.checking.kind} on {config.live_graphs[0]} graphs (no CV)"


def live_tables(result: LiveBenchResult) -> list[Table]:
    """The overall table (three rows and the mAP) and the per-recipe table of the live chain."""
    overall = result.pooled()
    n = len(result.recordings)
    clean = sum(r.recording.error_free for r in result.recordings)
    recipes = f"{len(result.maps)} recipe{'s' if len(result.maps) != 1 else ''}"
    table = Table(title=f"bench-live: {n} recordings ({clean} error-free), {result.config.folds}-fold per recipe, "
                        f"{' or '.join(result.config.checker_kinds)} checker, {result.config.checking.order_rule} "
                        "rule; per-second "
                        f"mAP of recognition {result.mean_map:.1f} (mean over {recipes})", header_style="bold")
    table.add_column("row")
    for title, _, _ in COLUMNS:
        table.add_column(title, justify="right")
    for row in ROWS:
        metrics = overall[row].metrics()
        title = (live_row_title(result.config) if row == "live" else default_row_title(result.config)
                 if row == "live_default" else ROW_TITLES[row])
        table.add_row(title, *(shown(metrics[key], f".{d}f") for _, key, d in COLUMNS))
    # Avg F1 averages the correct class's F1 with the mistakes': a chain that raises no alert still scores half the
    # first, which reads as a working score unless the floor is printed beside it.
    table.caption = (f"Avg F1 of a checker that never alerts, on these recordings: "
                     f"{shown(silent_avg_f1(overall[SILENT]))} on the live rows' items (each recording's distinct "
                     f"performed steps), {shown(silent_avg_f1(overall['annotated_hand_made']))} on the annotated "
                     "rows' (its performed segments).")
    table.caption_justify = "left"
    per_recipe = Table(title="bench-live per recipe (live chain)", header_style="bold")
    per_recipe.add_column("recipe")
    per_recipe.add_column("rec.", justify="right")
    per_recipe.add_column("mAP", justify="right")
    for title, _, _ in COLUMNS:
        per_recipe.add_column(title, justify="right")
    per_recipe.add_column("Avg F1 annotated, hand-made", justify="right")
    for name, value in result.maps.items():
        pooled = result.pooled(name)
        metrics = pooled["live"].metrics()
        per_recipe.add_row(name, str(sum(r.recording.recipe == name for r in result.recordings)),
                           f"{100 * value:.1f}", *(shown(metrics[key], f".{d}f") for _, key, d in COLUMNS),
                           shown(pooled["annotated_hand_made"].metrics()["avg_f1"]))
    return [table, per_recipe, selection_table(result), variant_table(result)]


def selection_table(result: LiveBenchResult) -> Table:
    """What each candidate checker (checker, graph, settings) scored on every validation recording of the training
    folds (the data the choice is made on, pooled here over all folds; the first segmenter variant, the checker's end
    report), and how often each fold chose it."""
    picks: dict[tuple[Any, ...], int] = {}
    for folds in result.chosen.values():
        for pick in folds.values():  # prior and threshold None: a checker without them
            key = (pick["checker"], pick["live_graph"], pick["prior_skip"], pick["alert_threshold"])
            picks[key] = picks.get(key, 0) + 1
    replays = result.replays
    runs = sum(v.variant == 0 for v in result.validation)
    table = Table(title=f"checkers on the {runs} validation recordings of the training folds "
                        "(never a test recording); objective = Avg F1 + Missing F1 - 100 x false alarms above 0.2",
                  header_style="bold")
    for col in (*CANDIDATE_COLUMNS, *SELECTION_COLUMNS, "chosen by folds"):
        table.add_column(col, justify="right")
    if replays is None:
        return table
    for k, option in enumerate(replays.options):
        metrics = replays.pooled(0, k, None)
        numbers = checker_numbers(option.checking)
        key = (option.checking.kind, option.graph, numbers["prior_skip"], numbers["alert_threshold"])
        table.add_row(*_candidate_cells(option), *_selection_cells(metrics), str(picks.get(key, 0)))
    return table


def checker_numbers(checking: CheckerSettings) -> dict[str, float | None]:
    """``prior_skip`` and ``alert_threshold`` of a checker that weighs evidence; None for one without them."""
    weighs = checking.entry.weighs_evidence
    return {"prior_skip": checking.prior_skip if weighs else None,
            "alert_threshold": checking.alert_threshold if weighs else None}


CANDIDATE_COLUMNS: Final = ("checker", "graph", "prior skip", "threshold")


def _candidate_cells(candidate: Candidate) -> list[str]:
    return [candidate.checking.kind, candidate.graph,
            *(shown(v, "g") for v in checker_numbers(candidate.checking).values())]


SELECTION_COLUMNS: Final = ("objective", "Avg F1", "Mist P", "Mist R", "Missing P", "Missing R", "Missing F1",
                            "false alarms / error-free rec.")


def _selection_cells(metrics: dict[str, float | None]) -> list[str]:
    return [f"{objective(metrics):.1f}", *(shown(metrics[k], f".{d}f") for k, d in (
        ("avg_f1", 1), ("mistake_precision", 1), ("mistake_recall", 1), ("missing_precision", 1),
        ("missing_recall", 1), ("missing_f1", 1), ("false_alarms_per_error_free", 2)))]


def variant_table(result: LiveBenchResult) -> Table:
    """Per segmenter variant, on every validation recording pooled: the candidate checker of the best objective with
    the checker's end report, and with the best peak level for the end report; how often each fold chose them."""
    picks: dict[tuple[str, bool], int] = {}
    for folds in result.chosen.values():
        for pick in folds.values():
            key = (pick["segmenter"], pick["done_level"] is not None)
            picks[key] = picks.get(key, 0) + 1
    # A fold chooses its own checker setting and peak level: the count is of the segmenter and the kind of report,
    # not of the pooled best setting printed beside it.
    table = Table(title="segmenter variants and the end-of-recording report on the validation recordings "
                        "(pooled; each with its best checker; last column: the folds that chose this segmenter and "
                        "kind of report, whatever their own checker and level)", header_style="bold")
    for col in ("segmenter", "end report", *CANDIDATE_COLUMNS, *SELECTION_COLUMNS, "folds choosing"):
        table.add_column(col, justify="right")
    replays = result.replays
    if replays is None:
        return table
    for v, variant in enumerate(result.config.variants):
        rows = [replays.pooled(v, k, None) for k in range(len(replays.options))]
        best = max(range(len(rows)), key=lambda k: objective(rows[k]))
        option = replays.options[best]
        table.add_row(variant.label(), "checker", *_candidate_cells(option),
                      *_selection_cells(rows[best]),
                      str(picks.get((variant.label(), False), 0)))
        levels = [replays.pooled(v, best, j) for j in range(len(replays.levels))]
        j = max(range(len(levels)), key=lambda j: objective(levels[j]))
        table.add_row(variant.label(), f"peak < {replays.levels[j]:g}", *_candidate_cells(option),
                      *_selection_cells(levels[j]),
                      str(picks.get((variant.label(), True), 0)))
    return table
