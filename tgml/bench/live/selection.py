"""The checker's settings chosen by cross-validation inside the training folds, never on a test fold.

Each fold's detector holds out validation recordings from its training recordings (`tgml.bench.live.detector`). The
detector side of the chain runs on them (`tgml.bench.live.chain.detect_stream`) and, for every candidate setting of the
probabilistic checker (``prior_skip`` ``rho`` and ``alert_threshold`` ``tau``, `CANDIDATES`), the checker side
replays what it sent against a graph learned without them (the test fold's and the validation recordings left out).

The candidate with the best `objective` over a pool of validation runs is the one the fold's test recordings are
checked with. The pool of recipe ``R``'s fold ``f``: its own validation runs and those of every fold of the *other*
recipes (whose detectors and graphs never saw a recording of ``R``); not the other folds of ``R``, whose detectors
were trained on ``R``'s fold ``f``. One setting for all recipes is what a user of another recipe gets too: no
per-recipe hand setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from graphs.checker_settings import CheckerSettings
from graphs.task_graph import TaskGraph
from tgml.bench.error_annotations import ErrorRecording
from tgml.bench.live.chain import DetectorRun, check_stream
from tgml.bench.live.scores import LiveCounts, live_counts

PRIORS: Final = (0.02, 0.05, 0.1, 0.2, 0.35)
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
        graph: the recipe's graph learned without it (nor the fold's test recordings).
    """

    recipe: str
    fold: int
    annotation: ErrorRecording
    error_free: bool
    names: dict[int, str]
    run: DetectorRun
    graph: TaskGraph


def candidates(base: CheckerSettings) -> list[CheckerSettings]:
    """The probabilistic checker settings tried (`PRIORS` x `THRESHOLDS`), the base one first."""
    grid = [replace(base, prior_skip=rho, alert_threshold=tau) for rho in PRIORS for tau in THRESHOLDS]
    return [base, *[c for c in grid if c != base]]


def objective(metrics: dict[str, float | None]) -> float:
    """What a choice maximises: Avg F1 plus missing-step F1 (points), less 100 points per false alarm per error-free
    recording above `FALSE_ALARM_BUDGET` (a measure over nothing counts 0)."""
    alarms = metrics["false_alarms_per_error_free"] or 0.0
    return (metrics["avg_f1"] or 0.0) + (metrics["missing_f1"] or 0.0) - 100 * max(0.0, alarms - FALSE_ALARM_BUDGET)


def replay_counts(runs: Sequence[ValidationRun], checking: CheckerSettings) -> LiveCounts:
    """The pooled counts of the validation runs checked with ``checking``."""
    total = LiveCounts()
    for v in runs:
        chain = check_stream(v.run, v.graph, checking)
        alerted = [(v.names[a.step], a.time) for a in chain.alerts if not a.retracted]
        total += live_counts(v.annotation, v.error_free, alerted, [s for s, _ in chain.never_done], v.names)
    return total


def choose(runs: Sequence[ValidationRun], options: Sequence[CheckerSettings]) -> tuple[CheckerSettings, float]:
    """The option of the best `objective` over ``runs`` (ties: the earlier option), and its objective."""
    best, best_score = options[0], float("-inf")
    for option in options:
        score = objective(replay_counts(runs, option).metrics())
        if score > best_score:
            best, best_score = option, score
    return best, best_score


def pool_for(runs: Sequence[ValidationRun], recipe: str, fold: int) -> list[ValidationRun]:
    """The validation runs that may choose the settings of ``recipe``'s fold ``fold`` (module docstring)."""
    return [v for v in runs if v.recipe != recipe or v.fold == fold]
