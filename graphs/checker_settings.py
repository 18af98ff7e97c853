"""Which pre-condition checker a stream runs (``--checker``, ``--alert-threshold``, ``--prior-skip``), and a new one
of it.

`CHECKERS` is the one table from a checker's name to the checker, of the same shape as the learners' table
(`tgml.learners.registry`): each entry names what builds its checker by import path (``"module:function"``), imported
when a stream gets one. Every command that takes ``--checker`` reads it (its choices, the error line for an unknown
name), and `CheckerSettings.new` builds through it; `streaming.registry.CHECKERS` is this table. A new checker is a
class in `graphs/` with the `StepChecker` methods, a function ``(graph, settings) -> checker``, and one entry here.

``probabilistic`` (the default) weighs the detector's evidence (`graphs.probabilistic_checker`); ``binary`` takes what
the detector confirmed as certain (`graphs.checker`, the PREGO protocol, which the benchmark tables use).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from graphs.checker import NO_EVIDENCE, PreconditionChecker, StepEvidence, StepVerdict
from graphs.common.errors import InputError
from graphs.common.safe_text import unknown_name
from graphs.order_rules import LATE_STEP, PRECONDITION, check_rule
from graphs.probabilistic_checker import (
    DEFAULT_ALERT_THRESHOLD,
    DEFAULT_PRIOR_SKIP,
    ProbabilisticChecker,
    check_probability,
)
from graphs.task_graph import TaskGraph

DEFAULT_CHECKER: Final = "probabilistic"  # a name of `CHECKERS`


class StepChecker(Protocol):
    """What the live checker and the benchmarks ask of a pre-condition checker (both checkers have it)."""

    @property
    def history(self) -> Sequence[StepVerdict]: ...

    @property
    def done(self) -> tuple[int, ...]: ...

    def observe(self, step: int, evidence: StepEvidence = NO_EVIDENCE) -> StepVerdict: ...

    def verdict(self, step: int, also_done: Iterable[int] = (), evidence: StepEvidence = NO_EVIDENCE) -> StepVerdict:
        ...

    def never_done(self, required: Iterable[int], evidence: StepEvidence = NO_EVIDENCE) -> list[tuple[int, float]]:
        ...

    def allowed_next(self) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class CheckerSettings:
    """The checker every stream of a run gets.

    Args:
        kind: a name of `CHECKERS` (``--checker``): ``"probabilistic"`` or ``"binary"``.
        alert_threshold: ``tau`` of the probabilistic checker, in (0, 1) (``--alert-threshold``).
        prior_skip: ``rho`` of the probabilistic checker, in (0, 1) (``--prior-skip``).
        order_rule: ``"precondition"``, or ``"late-step"`` (``--order-rule``: a step done after a step that required
            it alerts too, as CaptainCook4D's annotators tag an order error; binary checker only: the probabilistic
            one names each omission once).
        one_alert_per_omission: the probabilistic checker's merge (True, live); False judges every step on all its
            pre-conditions, as the PREGO protocol scores steps (the benchmarks' replays).
    """

    kind: str = DEFAULT_CHECKER
    alert_threshold: float = DEFAULT_ALERT_THRESHOLD
    prior_skip: float = DEFAULT_PRIOR_SKIP
    order_rule: str = PRECONDITION
    one_alert_per_omission: bool = True

    def __post_init__(self) -> None:
        entry = checker_entry(self.kind)
        check_probability(self.alert_threshold, "--alert-threshold")
        check_probability(self.prior_skip, "--prior-skip")
        check_rule(self.order_rule)
        if self.order_rule not in entry.order_rules:
            takers = [e.name for e in CHECKERS.values() if self.order_rule in e.order_rules]
            raise InputError(f"--order-rule {self.order_rule} needs --checker {' or '.join(takers)}: the {entry.name} "
                             f"checker {entry.why_not_other_rules}")

    @property
    def entry(self) -> CheckerEntry:
        """This checker's entry of `CHECKERS`."""
        return CHECKERS[self.kind]

    def new(self, graph: TaskGraph) -> StepChecker:
        """A fresh checker of this kind for one stream (built by its entry of `CHECKERS`)."""
        return self.entry.build(graph, self)

    def in_effect(self) -> dict[str, Any]:
        """The settings this kind of checker reads, for a results file: the binary checker's JSON showed a threshold,
        a prior and ``one_alert_per_omission: true`` that it never reads (it alerts each recognition of a step)."""
        return {"kind": self.kind, **{name: getattr(self, name) for name in self.entry.reads}}


@dataclass(frozen=True)
class CheckerEntry:
    """One checker of the table.

    Attributes:
        name: what commands call it (``--checker NAME``, ``CheckerSettings.kind``).
        target: ``"module:function"`` of its builder, ``(graph, settings) -> StepChecker`` (`load`).
        summary: one line for help texts and tables.
        order_rules: the ``--order-rule`` values it applies (`graphs.order_rules.ORDER_RULES`).
        weighs_evidence: it reads the detector's evidence (its measured miss and false-detection rates), so a
            detector without them is refused unless ``--default-rates`` (`streaming.detector.loading`).
        why_not_other_rules: the end of the error line refusing another rule, after "the NAME checker ".
        needs: the optional extra it needs beyond the core install, or "".
        reads: the fields of `CheckerSettings` its builder reads (`CheckerSettings.in_effect`).
    """

    name: str
    target: str
    summary: str
    order_rules: tuple[str, ...] = (PRECONDITION,)
    weighs_evidence: bool = False
    why_not_other_rules: str = "applies the pre-condition rule only"
    needs: str = ""
    reads: tuple[str, ...] = ("order_rule",)

    def load(self) -> Callable[[TaskGraph, CheckerSettings], StepChecker]:
        """Its builder (its module imported now)."""
        module, _, attribute = self.target.partition(":")
        builder: Callable[[TaskGraph, CheckerSettings], StepChecker] = getattr(importlib.import_module(module),
                                                                               attribute)
        return builder

    def build(self, graph: TaskGraph, settings: CheckerSettings) -> StepChecker:
        """A fresh checker for one stream."""
        return self.load()(graph, settings)


def binary_checker(graph: TaskGraph, settings: CheckerSettings) -> PreconditionChecker:
    """``binary``: every confirmed step taken as certain (`graphs.checker.PreconditionChecker`)."""
    return PreconditionChecker(graph, late_step=settings.order_rule == LATE_STEP)


def probabilistic_checker(graph: TaskGraph, settings: CheckerSettings) -> ProbabilisticChecker:
    """``probabilistic``: the detector's evidence weighed (`graphs.probabilistic_checker.ProbabilisticChecker`)."""
    return ProbabilisticChecker(graph, settings.alert_threshold, settings.prior_skip, settings.one_alert_per_omission)


_ENTRIES: Final = (
    CheckerEntry("probabilistic", "graphs.checker_settings:probabilistic_checker",
                 "weighs the detector's evidence: alerts when a pre-condition was probably skipped, one alert per "
                 "omission (the default)",
                 weighs_evidence=True, why_not_other_rules="alerts once per omission, on the step done too early",
                 reads=("alert_threshold", "prior_skip", "one_alert_per_omission")),
    CheckerEntry("binary", "graphs.checker_settings:binary_checker",
                 "takes every confirmed step as certain: alerts on any missing pre-condition (the PREGO protocol)",
                 order_rules=(PRECONDITION, LATE_STEP)),
)
CHECKERS: Final[Mapping[str, CheckerEntry]] = {entry.name: entry for entry in _ENTRIES}


def checker_entry(name: str, option: str = "--checker") -> CheckerEntry:
    """The entry of a checker's name, or one `InputError` line naming the option and the choices."""
    entry = CHECKERS.get(name)
    if entry is None:
        raise InputError(unknown_name(option, name, CHECKERS, None))
    return entry
