"""The checker's settings chosen by cross-validation inside the training folds, never on a test fold.

Each fold's detector holds out validation recordings from its training recordings (`tgml.bench.live.detector`). The
detector side of the chain runs on them (`tgml.bench.live.chain.segment_outputs`) and, for every candidate checker
(`candidates`: the checker, probabilistic or binary; the probabilistic one's ``prior_skip`` ``rho`` and
``alert_threshold`` ``tau``; the graph it checks, the learned one's observed pre-conditions or the learned one as it
is), the checker side replays what it sent against that graph learned without them (the test fold's and the
validation recordings left out), its evidence calibrated on the fold's other validation recordings (`cross_fitted`),
as a test recording's is on recordings it is not among.

The same is done for each segmenter variant (`VARIANTS`: confirmation length, a step confirmed once) and each end-of-
recording missing report (the checker's, or a peak evidence level, `DONE_LEVELS`); `ReplayTable` computes each
validation run's counts under each candidate once.

The candidate with the best `objective` over a pool of validation runs is the one the fold's test recordings are
checked with. The pool of recipe ``R``'s fold ``f``: its own validation runs and those of every fold of the *other*
recipes (whose detectors and graphs never saw a recording of ``R``); not the other folds of ``R``, whose detectors
were trained on ``R``'s fold ``f``. One setting for all recipes is what a user of another recipe gets too: no
per-recipe hand setting.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final, TypeVar

import numpy as np

from graphs.checker_settings import CheckerSettings
from graphs.task_graph import TaskGraph
from recognition.feature_folders import validation_count
from recognition.segmenter import SegmenterConfig
from tgml.bench.error_annotations import ErrorRecording
from tgml.bench.live.chain import DetectorRun, check_stream
from tgml.bench.live.scores import LiveCounts, live_counts

V = TypeVar("V")  # what a calibration is fitted on, per recording
M = TypeVar("M")  # the fitted model

PRIORS: Final = (0.02, 0.05, 0.1, 0.2, 0.35)
# What the live chain may check against (`Candidate.graph`): the learned graph's pre-conditions that the detector's
# own recognition orders too (`tgml.bench.live.observed`), or the learned graph as it is.
LIVE_GRAPHS: Final = ("observed", "learned")
THRESHOLDS: Final = (0.5, 0.7, 0.9)
# The targets the objective weighs: false alarms per error-free recording above this cost one point of F1 per 0.01.
FALSE_ALARM_BUDGET: Final = 0.2


@dataclass(frozen=True)
class ValidationRun:
    """A validation recording's detector run, with what scoring it needs.

    Attributes:
        recipe: its recipe.
        fold: the fold whose training recordings it belongs to.
        annotation: its annotation.
        error_free: the annotation calls it error-free.
        names: step id -> name of its recipe.
        run: what the detector side sent (outputs dropped: not needed).
        graphs: per `LIVE_GRAPHS` name, the recipe's graph learned without it (nor the fold's test recordings).
        variant: the index in `VARIANTS` of the segmenter variant that produced ``run``.
    """

    recipe: str
    fold: int
    annotation: ErrorRecording
    error_free: bool
    names: dict[int, str]
    run: DetectorRun
    graphs: dict[str, TaskGraph]
    variant: int = 0


@dataclass(frozen=True)
class Candidate:
    """A checker a fold may choose on validation.

    Attributes:
        graph: what it checks against, a name of `LIVE_GRAPHS`.
        checking: the checker and its settings.
    """

    graph: str
    checking: CheckerSettings


@dataclass(frozen=True)
class SegmenterVariant:
    """A segmenter variant a fold may choose on validation.

    Attributes:
        min_duration: seconds a run of one class must last to be confirmed on its own.
        once: a step already confirmed in the recording is not sent again (a recipe's steps are done once).
        prior_weight: ``w`` of the position prior's fusion (`recognition.position_prior`, P2; 0: none).
        duration_share: each key-step class confirmed after this share of its median annotated duration in the
            fold's training recordings (`class_durations`), clipped to [``min_duration``, `LONGEST_CONFIRMATION`]
            seconds; 0: ``min_duration`` for every class.
        done_state: the detector's done-state outputs take part in the done evidence (E3's ``u``); False: they are
            dropped before calibration and checking, as for a detector without a done head.
    """

    min_duration: float
    once: bool
    prior_weight: float = 0.0
    duration_share: float = 0.0
    done_state: bool = True

    def config(self, base: SegmenterConfig, durations: np.ndarray | None = None) -> SegmenterConfig:
        """``base`` with this confirmation length (the wait before a segment is emitted anyway at least twice the
        longest), per class from ``durations`` (`class_durations`) with a ``duration_share``."""
        config = replace(base, min_duration=self.min_duration, max_delay=max(base.max_delay, 2 * self.min_duration))
        if not self.duration_share or durations is None:
            return config
        lengths = confirmation_lengths(durations, self.duration_share, self.min_duration)
        return replace(config, class_min_duration=tuple(lengths.tolist()),
                       max_delay=max(config.max_delay, 2 * float(lengths.max())))

    def label(self) -> str:
        """How tables name it."""
        prior = f", prior {self.prior_weight:g}" if self.prior_weight else ""
        share = f", {self.duration_share:g} x duration" if self.duration_share else ""
        state = "" if self.done_state else ", no done state"
        return f"{self.min_duration:g} s{', once' if self.once else ''}{prior}{share}{state}"


# The longest confirmation a step's duration may ask for (`SegmenterVariant.duration_share`): a step of three minutes
# still confirmed within half a minute.
LONGEST_CONFIRMATION: Final = 30.0


def class_durations(labels: Iterable[np.ndarray], classes: int, fps: float) -> np.ndarray:
    """Per class, the median length in seconds of its annotated runs (maximal stretches of one label) over the
    recordings' per-frame labels; NaN for a class with no run.

    Args:
        labels: per recording, ``(T,)`` class indices.
        classes: number of classes.
        fps: frames per second.

    Returns:
        ``(classes,)`` seconds.
    """
    lengths: list[list[int]] = [[] for _ in range(classes)]
    for y in labels:
        y = np.asarray(y)
        if len(y) == 0:
            continue
        starts = np.flatnonzero(np.r_[True, y[1:] != y[:-1]])  # (R,)
        for c, n in zip(y[starts].tolist(), np.diff(np.r_[starts, len(y)]).tolist(), strict=True):
            lengths[c].append(n)
    return np.array([np.median(v) / fps if v else np.nan for v in lengths])


def confirmation_lengths(durations: np.ndarray, share: float, shortest: float) -> np.ndarray:
    """``clip(share * d_c, shortest, LONGEST_CONFIRMATION)`` per class; ``shortest`` for a class never seen."""
    return np.clip(np.nan_to_num(share * np.asarray(durations, dtype=np.float64), nan=shortest), shortest,
                   max(shortest, LONGEST_CONFIRMATION))


# The first is the benchmark's a-priori segmenter, as `stream-detect` runs a detector (a run of 3 s confirms a step; a
# step may be confirmed again; the done evidence weighs the detector's done-state outputs). The others leave the
# done-state outputs out of the done evidence (E3 with ``e = 0``; a done head trained on mostly correct recordings may
# learn when a step is usually done, which is what an order mistake breaks): on the validation recordings the best
# variant's objective rose 90.3 -> 91.3, by the end-of-recording missing report (docs/live-benchmark.md).
VARIANTS: Final = (SegmenterVariant(3.0, False),
                   *(SegmenterVariant(d, once, done_state=False) for d, once in ((3.0, True), (6.0, True),
                                                                                  (10.0, True), (6.0, False))))
# The same four with the detector's done-state outputs in the done evidence (the default before), for comparison.
DONE_STATE_VARIANTS: Final = tuple(replace(v, done_state=True) for v in VARIANTS[1:])
# With ``--position-prior``: the 3 s and 6 s segmenters on the detector's output fused with the position prior
# (`recognition.position_prior`, P2) at weights 0.5 and 1.
PRIOR_VARIANTS: Final = tuple(SegmenterVariant(d, False, w) for w in (0.5, 1.0) for d in (3.0, 6.0))
# Each step confirmed after a share of its usual duration (at least 3 s), once, as the default variants: tried on
# validation and left out of `VARIANTS` (docs/live-benchmark.md).
DURATION_VARIANTS: Final = tuple(SegmenterVariant(3.0, True, duration_share=f, done_state=False)
                                 for f in (0.2, 0.3, 0.5))
# Peak evidence levels (`tgml.bench.live.chain.step_peaks`) under which a required step is named never done; a fold
# may also keep the checker's own end-of-recording report.
DONE_LEVELS: Final = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


@dataclass(frozen=True)
class Choice:
    """What one fold chose on its validation pool.

    Attributes:
        variant: index in `VARIANTS`.
        candidate: the checker, its settings and the graph it checks against.
        done_level: the peak level under which a step is named never done (None: the checker's report).
        objective: its `objective` on the pool.
    """

    variant: int
    candidate: Candidate
    done_level: float | None
    objective: float


class ReplayTable:
    """Every validation run's counts under every candidate checker and every done level, computed once (a run sits in
    the pools of many folds).

    Args:
        runs: the validation runs.
        options: the candidate checkers.
        levels: the done levels (what they change is the counts' missing-step part, which depends on the graph and
            not on the checker: counted per graph, with that graph's first candidate).
    """

    def __init__(self, runs: Sequence[ValidationRun], options: Sequence[Candidate],
                 levels: Sequence[float] = DONE_LEVELS) -> None:
        self.runs, self.options, self.levels = list(runs), list(options), list(levels)
        self.by_option = [[replay_counts([v], o) for o in self.options] for v in self.runs]
        firsts = {o.graph: o for o in reversed(self.options)}  # each graph's first candidate
        self.by_level = [{g: [replay_counts([v], o, level) for level in self.levels] for g, o in firsts.items()}
                         for v in self.runs]

    def choose(self, pool: Sequence[int]) -> Choice:
        """The best choice over the runs at indices ``pool``, per variant (ties: the earlier variant, option, level;
        the checker's own report before a level)."""
        best: Choice | None = None
        for variant in sorted({self.runs[i].variant for i in pool}):
            mine = [i for i in pool if self.runs[i].variant == variant]
            option_metrics = [_pooled(self.by_option[i][k] for i in mine).metrics() for k in range(len(self.options))]
            level_f1 = {g: [_pooled(self.by_level[i][g][k] for i in mine).metrics()["missing_f1"] or 0.0
                            for k in range(len(self.levels))] for g in self.by_level[mine[0]]}
            for k, metrics in enumerate(option_metrics):
                score = objective(metrics)
                if best is None or score > best.objective:
                    best = Choice(variant, self.options[k], None, score)
                f1 = level_f1[self.options[k].graph]
                if f1:
                    j = int(np.argmax(f1))
                    score = objective(metrics) - (metrics["missing_f1"] or 0.0) + f1[j]
                    if score > best.objective:
                        best = Choice(variant, self.options[k], self.levels[j], score)
        if best is None:
            raise ValueError("an empty validation pool")
        return best

    def pooled(self, variant: int, option: int, level: int | None) -> dict[str, float | None]:
        """The metrics of every run of ``variant`` with ``options[option]``, missing steps by ``levels[level]``
        (None: the checker's report)."""
        mine = [i for i, v in enumerate(self.runs) if v.variant == variant]
        metrics = _pooled(self.by_option[i][option] for i in mine).metrics()
        if level is not None:
            graph = self.options[option].graph
            by_level = _pooled(self.by_level[i][graph][level] for i in mine).metrics()
            metrics |= {k: by_level[k] for k in ("missing_precision", "missing_recall", "missing_f1")}
        return metrics


def _pooled(counts: Iterable[LiveCounts]) -> LiveCounts:
    total = LiveCounts()
    for c in counts:
        total += c
    return total


def settings_grid(base: CheckerSettings) -> list[CheckerSettings]:
    """The settings of ``base``'s checker tried: for the probabilistic one `PRIORS` x `THRESHOLDS`, the base one
    first; ``[base]`` alone for a checker that weighs no evidence (the binary one has no prior or threshold)."""
    if not base.entry.weighs_evidence:
        return [base]
    grid = [replace(base, prior_skip=rho, alert_threshold=tau) for rho in PRIORS for tau in THRESHOLDS]
    return [base, *[c for c in grid if c != base]]


def candidates(base: CheckerSettings, kinds: Sequence[str] = (), graphs: Sequence[str] = LIVE_GRAPHS[:1]
               ) -> list[Candidate]:
    """The candidate checkers: each of ``graphs`` with each checker of ``kinds`` (empty: ``base``'s) and its
    `settings_grid`; the first is ``base`` on ``graphs[0]``, the a-priori choice.

    Which checker suits a stream is the recognition's question: on recognition this good the binary checker on the
    learned graph loses nothing (docs/live-benchmark.md), on a detector that misses and invents steps it cries wolf,
    while the probabilistic checker on the observed pre-conditions keeps quiet. So a fold may ask its validation
    recordings, as it does for the settings (``tgml bench-live --checker chosen --live-graph chosen``; not the
    default: on real recognition the choice moved with the folds' draw, docs/live-benchmark.md).
    """
    kinds = list(kinds) or [base.kind]
    return [Candidate(graph, checking) for graph in graphs for kind in kinds
            for checking in settings_grid(base if kind == base.kind else replace(base, kind=kind))]


def objective(metrics: dict[str, float | None]) -> float:
    """What a choice maximises: Avg F1 plus missing-step F1 (points), less 100 points per false alarm per error-free
    recording above `FALSE_ALARM_BUDGET` (a measure over nothing counts 0)."""
    alarms = metrics["false_alarms_per_error_free"] or 0.0
    return (metrics["avg_f1"] or 0.0) + (metrics["missing_f1"] or 0.0) - 100 * max(0.0, alarms - FALSE_ALARM_BUDGET)


def replay_counts(runs: Sequence[ValidationRun], candidate: Candidate, done_level: float | None = None) -> LiveCounts:
    """The pooled counts of the validation runs checked by ``candidate`` (missing steps by ``done_level``:
    `tgml.bench.live.chain.check_stream`)."""
    total = LiveCounts()
    for v in runs:
        chain = check_stream(v.run, v.graphs[candidate.graph], candidate.checking, done_level)
        alerted = [(v.names[a.step], a.time) for a in chain.alerts if not a.retracted]
        total += live_counts(v.annotation, v.error_free, alerted, [s for s, _ in chain.never_done], v.names)
    return total


def pool_indices(runs: Sequence[ValidationRun], recipe: str, fold: int) -> list[int]:
    """The validation runs that may choose the settings of ``recipe``'s fold ``fold``, as indices into ``runs``: its
    own and every fold's of the other recipes (module docstring)."""
    return [i for i, v in enumerate(runs) if v.recipe != recipe or v.fold == fold]


def cross_fitted(validation: dict[str, V], fit: Callable[[dict[str, V]], M], alone: M) -> dict[str, M]:
    """Per validation recording, the model fitted on the others (``alone`` where it is the only one).

    A test recording is checked with an evidence calibration that never saw it; a validation recording scored with a
    calibration fitted on itself looks better than that (its end-of-recording report above all: missing-step F1 41-45
    there against 16-22 on the test folds), and the choice made on it follows the optimism.
    """
    return {k: fit({o: v for o, v in validation.items() if o != k}) if len(validation) > 1 else alone
            for k in validation}


def recordings_for_two_validation(folds: int, fraction: float) -> int | None:
    """The fewest recordings of a recipe that give every fold's detector two validation recordings: the recipe less
    its largest test fold (`tgml.bench.live.bench.assign_folds` deals them in turn) is the training fold, of which the
    trainer holds out `validation_count`. None past 10,000 recordings (a ``fraction`` of 0 holds out none)."""
    for count in range(folds, 10_000):
        if validation_count(count - math.ceil(count / folds), fraction) >= 2:
            return count
    return None


def in_sample_recipes(runs: Sequence[ValidationRun]) -> list[str]:
    """The recipes with a fold of one validation recording, which `cross_fitted` scores with the calibration fitted
    on it: that fold's choice, and every fold's pooled with it, rests on optimistic figures (said by the command)."""
    per_fold = Counter((v.recipe, v.fold) for v in runs if v.variant == 0)
    return sorted({recipe for (recipe, _), count in per_fold.items() if count == 1})
