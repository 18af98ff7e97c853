"""Choosing the probabilistic checker's settings for PREGO on the training split only (``prego-bench select-checker``).

Nothing here reads ``test.json`` or the MiniROAD output. K-fold cross-validation over the *training* videos: each fold
learns the task graph (``method``, seed ``seed``) on the other folds and scores PREGO-like items built from its
held-out videos (last confirmed step = the mistake), pooled over the folds, with simulated recognition noise:

- **replay** (per-frame labels, `prego-bench replay`): the items are label streams at ``fps``
  (`recognition_noise.mistake_streams`) run through `recognition_noise.noisy_labels` at every level of
  `recognition_noise.NOISE_LEVELS`; the detector's evidence is calibrated (`recognition.evidence_calibration`) on
  noisy streams of every training video, drawn apart from the items. Searched: the segmenter's ``min_duration``,
  the evidence window ``W``, the prior ``rho`` and the threshold ``tau``;
- **pred** (recognised sequences, ``prego-bench --checker probabilistic``): the items are
  `recognition_noise.mistake_sequences` of the held-out videos (a real prefix with its repeats, then a mistake; slips
  drawn from the steps the other folds know), perturbed with the paper's noise
  (`tgml.bench.perturb`) at every rate of ``rates``; the sequence evidence (`sequence_evidence`) is calibrated on the
  training sequences perturbed apart from the items. Searched: ``rho`` and ``tau``.

A candidate's score is its Avg F1 averaged over the noise levels (or rates): a choice must hold from light to heavy
noise. The binary checker is scored on the same items for comparison. The winner is written as a settings file
(`CHECKER_SETTINGS_FORMAT`), which `prego-bench replay --checker probabilistic` and ``prego-bench --checker
probabilistic`` read; the shipped ones are ``tgml/bench/settings/prego-checker-<dataset>.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import numpy as np

from graphs.checker import StepEvidence, precondition_violations
from graphs.checker_settings import CheckerSettings
from graphs.common.errors import InputError
from graphs.common.files import read_json, write_text
from graphs.common.settings_files import as_written
from graphs.mistake_metrics import mistake_scores
from graphs.precision_recall import measured
from graphs.probabilistic_checker import ProbabilisticChecker
from graphs.task_graph import TaskGraph
from recognition.evidence import EvidenceModel, recording_evidence
from recognition.evidence_calibration import RIDGE, calibrate_evidence
from recognition.segmenter import SegmenterConfig, SegmentEvent, segment_labels
from tgml.bench.perturb import perturb_sequences
from tgml.bench.prego.data import BenchData
from tgml.bench.prego.methods import SETTINGS_DIR, build_graph
from tgml.bench.prego.recognition_noise import (
    NOISE_LEVELS,
    LabelNoise,
    TimedVideo,
    annotation_labels,
    mistake_sequences,
    mistake_streams,
    noise_table,
    noisy_streams,
)
from tgml.bench.prego.replay import label_probabilities, sweep_config
from tgml.bench.prego.sequence_evidence import calibrate_sequence_evidence, sequence_evidence
from tgml.bench.process_pool import run_jobs
from tgml.learners.registry import LEARNERS

CHECKER_SETTINGS_FORMAT: Final = "prego-checker-settings"
CHECKER_SETTINGS_VERSION: Final = 1
# The PREGO frames files hold about 60 labels per second of video; the simulated streams use the same rate.
REPLAY_FPS: Final = 60.0
# The PREGO protocol scores every recognised step as done in order or not; it has no notion of an alert already sent.
# So the benchmarks judge each step on all its pre-conditions: a step recognised twice, still without its
# pre-condition, is scored a mistake both times, as the binary checker scores it (live, the merge stays: one omission,
# one alert). With the merge, the EPIC-Tent-O replay's three re-detections of a mistaken last step scored nothing.
ONE_ALERT_PER_OMISSION: Final = False
# Seconds per unit of the annotation files' start_time / end_time (EPIC-Tent-O's are milliseconds).
TIME_UNITS: Final = {"epic-tent-o": 0.001}


@dataclass(frozen=True)
class CheckerSearch:
    """The search of ``prego-bench select-checker``.

    Attributes:
        folds: folds over the training videos (their number: leave one video out).
        method: the graph method learned in each fold (a `tgml.learners.registry.LEARNERS` name).
        seed: the graph's training seed.
        per_video: items per held-out video.
        slip_rate: share of random-slip mistakes among the items.
        levels: label-noise levels of the replay simulation.
        rates: perturbation rates of the PRED simulation, each in (0, 1].
        priors: ``rho`` values tried, in (0, 1).
        thresholds: ``tau`` values tried, in (0, 1).
        windows: evidence windows ``W`` tried (seconds; replay).
        min_durations: segmenter ``min_duration`` values tried (seconds; replay).
        workers: processes for the graphs and the replay grid (0 = one per core).
    """

    folds: int = 5
    method: str = "do"
    seed: int = 42
    per_video: int = 6
    slip_rate: float = 0.5
    levels: tuple[LabelNoise, ...] = NOISE_LEVELS
    rates: tuple[float, ...] = (0.1, 0.2, 0.3)
    priors: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5)
    thresholds: tuple[float, ...] = (0.3, 0.5, 0.7, 0.9)
    windows: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0)
    min_durations: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    workers: int = 0

    def __post_init__(self) -> None:
        def fail(name: str, why: str) -> None:
            raise InputError(f"CheckerSearch.{name} = {as_written(getattr(self, name))}: {why}")

        if self.folds < 2:
            fail("folds", "need at least 2")
        if self.method not in LEARNERS:
            fail("method", f"choose one of {', '.join(LEARNERS)}")
        if self.per_video < 1:
            fail("per_video", "must be >= 1")
        if not 0.0 <= self.slip_rate <= 1.0:
            fail("slip_rate", "must lie in [0, 1]")
        if not self.levels:
            fail("levels", "need at least one noise level")
        if not self.rates or any(not 0.0 < r <= 1.0 for r in self.rates):
            fail("rates", "need perturbation rates in (0, 1]")
        for name in ("priors", "thresholds"):
            if not getattr(self, name) or any(not 0.0 < v < 1.0 for v in getattr(self, name)):
                fail(name, "need values strictly between 0 and 1")
        for name in ("windows", "min_durations"):
            if not getattr(self, name) or any(not (math.isfinite(v) and v > 0) for v in getattr(self, name)):
                fail(name, "need durations > 0 seconds")
        if self.workers < 0:
            fail("workers", "must be >= 0")


@dataclass(frozen=True)
class CheckerChoice:
    """The probabilistic checker's settings for one input kind (replay or PRED), as a settings file holds them.

    Attributes:
        settings: ``kind`` probabilistic, ``alert_threshold`` (tau) and ``prior_skip`` (rho).
        evidence: the calibration of the evidence it weighs.
        segmenter: the segmenter settings the replay runs with (None for recognised sequences).
    """

    settings: CheckerSettings
    evidence: EvidenceModel
    segmenter: SegmenterConfig | None = None


def _fold_split(count: int, folds: int) -> list[list[int]]:
    """The held-out video indexes of each fold: the fixed permutation `tgml.bench.prego.selection` uses."""
    if not 2 <= folds <= count:
        raise InputError(f"--folds {folds}: need between 2 and {count} (training videos)")
    order = np.random.default_rng(0).permutation(count)
    return [sorted(held.tolist()) for held in np.array_split(order, folds)]


def _fold_graph(data: BenchData, train: tuple[tuple[int, ...], ...], method: str, settings: Mapping[str, Any],
                seed: int) -> dict[str, Any]:
    """Worker job: the graph of one fold, as file content."""
    fold = BenchData(data.name, data.scenario, data.step_ids, data.step_names, train, {})
    return build_graph(method, fold, settings, seed).to_dict()


def fold_graphs(data: BenchData, settings: Mapping[str, Any], search: CheckerSearch, progress: bool
                ) -> tuple[list[list[int]], list[TaskGraph]]:
    """Each fold's held-out videos and the graph learned without them."""
    held = _fold_split(len(data.train), search.folds)
    trains = [tuple(s for j, s in enumerate(data.train) if j not in set(h)) for h in held]
    graphs = run_jobs(_fold_graph, [(data, t, search.method, settings, search.seed) for t in trains],
                      search.workers, "cross-validation graphs", progress)
    return held, [TaskGraph.from_dict(g) for g in graphs]


def _vocabulary(sequences: Sequence[Sequence[int]]) -> list[int]:
    """The key-steps a recogniser trained on these videos knows."""
    return sorted({int(s) for seq in sequences for s in seq})


def _probabilistic_flags(
    graph: TaskGraph, steps: Sequence[int], evidence: Sequence[StepEvidence], settings: CheckerSettings
) -> np.ndarray:
    checker = ProbabilisticChecker(graph, settings.alert_threshold, settings.prior_skip, ONE_ALERT_PER_OMISSION)
    return np.fromiter((checker.observe(s, e).is_mistake for s, e in zip(steps, evidence, strict=True)), dtype=bool,
                       count=len(steps))


def _candidates(search: CheckerSearch) -> list[CheckerSettings]:
    return [CheckerSettings("probabilistic", tau, rho, one_alert_per_omission=ONE_ALERT_PER_OMISSION)
            for rho in search.priors for tau in search.thresholds]


def _avg_f1(flags: Sequence[np.ndarray]) -> float:
    return measured(mistake_scores(flags).avg_f1, "select-checker")


# -- PRED mode: recognised sequences ------------------------------------------------------------------------------
def select_pred_checker(
    data: BenchData, settings: Mapping[str, Any], search: CheckerSearch, progress: bool = True
) -> tuple[CheckerChoice, list[dict[str, Any]]]:
    """Choose ``rho`` and ``tau`` for recognised sequences on the training split (module docstring).

    Args:
        data: the dataset; only ``train`` and the taxonomy are read.
        settings: the settings of ``search.method``.
        search: the search.
        progress: show progress bars.

    Returns:
        The choice (with the sequence evidence calibrated on every training sequence) and the table, best first:
        rows ``{"checker", "prior_skip", "alert_threshold", "noise <rate>"..., "score"}``, the binary checker among
        them.
    """
    held, graphs = fold_graphs(data, settings, search, progress)
    items: list[tuple[TaskGraph, list[tuple[int, ...]]]] = []
    for k, (out, graph) in enumerate(zip(held, graphs, strict=True)):
        vocab = _vocabulary([s for j, s in enumerate(data.train) if j not in set(out)])
        items.append((graph, mistake_sequences([data.train[j] for j in out], vocab, search.per_video, 100 + k,
                                               search.slip_rate)))
    noisy = {rate: [(g, perturb_sequences(seqs, rate, data.step_ids, seed=200 + k))
                    for k, (g, seqs) in enumerate(items)] for rate in search.rates}
    model = calibrate_sequence_evidence(data.train, search.rates, data.step_ids, seed=7)
    columns = [f"noise {rate:g}" for rate in search.rates]
    evidence = {rate: [[sequence_evidence(s, model) for s in seqs] for _, seqs in noisy[rate]] for rate in search.rates}
    rows = [_row({"checker": "binary", "prior_skip": None, "alert_threshold": None}, columns, [
        _avg_f1([precondition_violations(g, s) for g, seqs in noisy[rate] for s in seqs]) for rate in search.rates])]
    for candidate in _candidates(search):
        scores = [
            _avg_f1([_probabilistic_flags(g, s, e, candidate)
                     for (g, seqs), evs in zip(noisy[rate], evidence[rate], strict=True)
                     for s, e in zip(seqs, evs, strict=True)])
            for rate in search.rates
        ]
        rows.append(_row({"checker": "probabilistic", "prior_skip": candidate.prior_skip,
                          "alert_threshold": candidate.alert_threshold}, columns, scores))
    rows.sort(key=lambda r: -r["score"])  # stable: among equal scores the earlier candidate stays first
    best = next(r for r in rows if r["checker"] == "probabilistic")
    return CheckerChoice(CheckerSettings("probabilistic", best["alert_threshold"], best["prior_skip"],
                                 one_alert_per_omission=ONE_ALERT_PER_OMISSION), model), rows


def _row(head: dict[str, Any], columns: Sequence[str], scores: Sequence[float]) -> dict[str, Any]:
    return {**head, **dict(zip(columns, scores, strict=True)), "score": float(np.mean(scores))}


# -- replay: per-frame labels -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _ReplayItems:
    """The noisy items of every fold at one noise level, and their graphs."""

    graphs: list[TaskGraph]
    streams: list[list[np.ndarray]]  # per fold


def _replay_grid_job(
    items: Mapping[str, _ReplayItems], calibration: Mapping[str, tuple[np.ndarray, np.ndarray]],
    step_ids: tuple[int, ...], config: SegmenterConfig, search: CheckerSearch,
) -> tuple[list[dict[str, Any]], dict[float, dict[str, Any]]]:
    """Worker job: every candidate of one segmenter setting (binary, then each window x rho x tau).

    Args:
        items: the noisy items per noise level.
        calibration: ``{stream: (recognised labels, annotated labels)}`` the evidence is calibrated on.
        step_ids: the taxonomy.
        config: the segmenter settings.
        search: the grid.

    Returns:
        The rows, and per window the evidence model's JSON form.
    """
    validation = {name: (label_probabilities(seen, step_ids), label_probabilities(truth, step_ids))
                  for name, (seen, truth) in calibration.items()}
    columns = [f"{name} noise" for name in items]
    events = {name: [[segment_labels(s, config) for s in fold] for fold in it.streams] for name, it in items.items()}
    head = {"min_duration": config.min_duration}
    rows = [_row({"checker": "binary", **head, "window_s": None, "prior_skip": None, "alert_threshold": None},
                 columns, [_avg_f1([precondition_violations(g, [e.step for e in ev])
                                    for g, fold in zip(it.graphs, events[name], strict=True) for ev in fold])
                           for name, it in items.items()])]
    models: dict[float, dict[str, Any]] = {}
    for window in search.windows:
        # Thirteen folds of three noise levels: enough videos that the near-unpenalised fit is kept (and the
        # leave-one-video-out choice would cost every grid cell 200 more fits).
        model = calibrate_evidence(validation, step_ids, config.fps, config, window_s=window, slope_penalty=RIDGE)
        models[window] = model.to_dict()
        evidence = {name: [[_label_evidence(s, ev, model, step_ids, config.fps) for s, ev in zip(f, fe, strict=True)]
                           for f, fe in zip(it.streams, events[name], strict=True)] for name, it in items.items()}
        for candidate in _candidates(search):
            scores = [
                _avg_f1([_probabilistic_flags(g, [e.step for e in ev], evs, candidate)
                         for g, fold_events, fold_evidence in zip(it.graphs, events[name], evidence[name], strict=True)
                         for ev, evs in zip(fold_events, fold_evidence, strict=True)])
                for name, it in items.items()
            ]
            rows.append(_row({"checker": "probabilistic", **head, "window_s": window,
                              "prior_skip": candidate.prior_skip, "alert_threshold": candidate.alert_threshold},
                             columns, scores))
    return rows, models


def _label_evidence(labels: np.ndarray, events: Sequence[SegmentEvent], model: EvidenceModel,
                    step_ids: Sequence[int], fps: float) -> list[StepEvidence]:
    if not events:
        return []
    return recording_evidence(label_probabilities(labels, step_ids), [e.start_frame for e in events],
                              [(e.step, e.confidence, e.end_frame - e.start_frame) for e in events], model,
                              list(step_ids), fps)


def select_replay_checker(
    data: BenchData, videos: Sequence[TimedVideo], settings: Mapping[str, Any], search: CheckerSearch,
    base: SegmenterConfig | None = None, progress: bool = True,
) -> tuple[CheckerChoice, list[dict[str, Any]]]:
    """Choose the segmenter's ``min_duration``, the evidence window, ``rho`` and ``tau`` for per-frame label replays
    on simulated recognition noise over the training split (module docstring).

    Args:
        data: the dataset; only ``train`` and the taxonomy are read.
        videos: the training videos with their segments' times, in the order of ``data.train``.
        settings: the settings of ``search.method``.
        search: the search.
        base: the replay's segmenter settings (default: `SegmenterConfig` at `REPLAY_FPS`, no background).
        progress: show progress bars.

    Returns:
        The choice (evidence calibrated at the chosen segmenter and window) and the table, best first: rows
        ``{"checker", "min_duration", "window_s", "prior_skip", "alert_threshold", "<level> noise"..., "score"}``.
    """
    if [v.steps for v in videos] != [tuple(s) for s in data.train]:
        raise InputError("the timed training videos do not match the training split (same videos, same order)")
    base = base or SegmenterConfig(fps=REPLAY_FPS, background=None)
    fps = base.fps
    held, graphs = fold_graphs(data, settings, search, progress)
    clean = [annotation_labels(v, fps) for v in videos]
    items: dict[str, _ReplayItems] = {}
    for n, level in enumerate(search.levels):
        streams = []
        for k, out in enumerate(held):
            vocab = _vocabulary([s for j, s in enumerate(data.train) if j not in set(out)])
            fold_items = mistake_streams([videos[j] for j in out], vocab, fps, search.per_video, 100 + k,
                                         search.slip_rate)
            streams.append(noisy_streams(fold_items, level, vocab, fps, seed=1000 * (n + 1) + k))
        items[level.name] = _ReplayItems(graphs, streams)
    vocab_all = _vocabulary(data.train)
    calibration = {}
    for n, level in enumerate(search.levels):  # the detector's calibration: every training video, drawn apart
        for v, truth, labels in zip(videos, clean, noisy_streams(clean, level, vocab_all, fps, seed=50 + n),
                                    strict=True):
            calibration[f"{v.video}@{level.name}"] = (labels, truth)
    configs = [sweep_config(base, "min_duration", md) for md in search.min_durations]
    results = run_jobs(_replay_grid_job, [(items, calibration, tuple(data.step_ids), c, search) for c in configs],
                       search.workers, "replay simulation", progress)
    rows = [row for part, _ in results for row in part]
    rows.sort(key=lambda r: -r["score"])
    best = next(r for r in rows if r["checker"] == "probabilistic")
    k = [c.min_duration for c in configs].index(best["min_duration"])
    model = EvidenceModel.from_dict(results[k][1][best["window_s"]])
    choice = CheckerChoice(CheckerSettings("probabilistic", best["alert_threshold"], best["prior_skip"],
                                 one_alert_per_omission=ONE_ALERT_PER_OMISSION), model,
                           configs[k])
    return choice, rows


# -- the settings file ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CheckerSettingsFile:
    """What ``prego-bench select-checker`` writes and the benchmark reads (format in the module docstring).

    Attributes:
        dataset: the dataset the settings were chosen on.
        pred: the choice for recognised sequences.
        replay: the choice for per-frame label replays (None: the dataset has no frames file to replay).
        chosen_with: how: the command, the graph method and seed, the folds, the noise levels and rates, and each
            choice's cross-validation score beside the binary checker's.
    """

    dataset: str
    pred: CheckerChoice
    replay: CheckerChoice | None = None
    chosen_with: Mapping[str, Any] = field(default_factory=dict)


def default_settings_path(dataset: str) -> Path:
    """The shipped settings file of a dataset: ``tgml/bench/settings/prego-checker-<dataset>.json``."""
    return SETTINGS_DIR / f"prego-checker-{dataset}.json"


def _choice_dict(choice: CheckerChoice) -> dict[str, Any]:
    return {
        "alert_threshold": choice.settings.alert_threshold,
        "prior_skip": choice.settings.prior_skip,
        "segmenter": None if choice.segmenter is None else asdict(choice.segmenter),
        "evidence": choice.evidence.to_dict(),
    }


def save_checker_settings(path: str | Path, content: CheckerSettingsFile) -> Path:
    """Write a settings file (JSON, atomically)."""
    document = {
        "format": CHECKER_SETTINGS_FORMAT,
        "version": CHECKER_SETTINGS_VERSION,
        "dataset": content.dataset,
        "pred": _choice_dict(content.pred),
        "replay": None if content.replay is None else _choice_dict(content.replay),
        "chosen_with": dict(content.chosen_with),
    }
    return write_text(path, json.dumps(document, indent=1) + "\n", "checker settings file")


def _read_choice(data: object, where: str, replay: bool) -> CheckerChoice:
    if not isinstance(data, Mapping):
        raise InputError(f"{where}: expected an object")
    for key in ("alert_threshold", "prior_skip"):  # named as the file writes them, not as the flags that also set them
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value < 1.0:
            raise InputError(f"{where}: {key} = {as_written(value)}: expected a probability strictly between 0 and 1")
    try:
        settings = CheckerSettings("probabilistic", data.get("alert_threshold"), data.get("prior_skip"),  # type: ignore[arg-type]
                                   one_alert_per_omission=ONE_ALERT_PER_OMISSION)
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
    evidence = EvidenceModel.from_dict(data.get("evidence"), f"{where}.evidence")
    segmenter = None
    if replay:
        fields = data.get("segmenter")
        if not isinstance(fields, Mapping):
            raise InputError(f"{where}.segmenter: expected the segmenter's settings")
        try:
            segmenter = SegmenterConfig(**fields)
        except (TypeError, InputError) as err:
            raise InputError(f"{where}.segmenter: {err}") from None
    return CheckerChoice(settings, evidence, segmenter)


def load_checker_settings(path: str | Path) -> CheckerSettingsFile:
    """Read a settings file, every field checked.

    Raises:
        InputError: naming the file and the field at fault.
    """
    data = read_json(path, "checker settings file")
    if not isinstance(data, dict) or data.get("format") != CHECKER_SETTINGS_FORMAT:
        raise InputError(f"{path}: not a checker settings file (format {CHECKER_SETTINGS_FORMAT!r}; write one with "
                         "`prego-bench select-checker`)")
    if data.get("version") != CHECKER_SETTINGS_VERSION:
        raise InputError(f"{path}: version {as_written(data.get('version'))} is not {CHECKER_SETTINGS_VERSION}")
    try:
        pred = _read_choice(data.get("pred"), f"{path}: pred", replay=False)
        replay = None if data.get("replay") is None else _read_choice(data["replay"], f"{path}: replay", replay=True)
    except InputError as err:
        message = str(err)
        raise InputError(message if message.startswith(str(path)) else f"{path}: {message}") from None
    chosen = data.get("chosen_with", {})
    return CheckerSettingsFile(str(data.get("dataset", "")), pred, replay, chosen if isinstance(chosen, dict) else {})


def search_record(search: CheckerSearch) -> dict[str, Any]:
    """The search as plain JSON (for ``chosen_with``)."""
    record = asdict(replace(search, workers=0))
    record.pop("workers")
    record["levels"] = noise_table(search.levels)
    return record

