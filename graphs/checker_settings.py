"""Which pre-condition checker a stream runs (``--checker``, ``--alert-threshold``), and a new one of it.

``probabilistic`` (the default) weighs the detector's evidence (`graphs.probabilistic_checker`); ``binary`` takes what
the detector confirmed as certain (`graphs.checker`, the PREGO protocol, which the benchmark tables use).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from graphs.checker import NO_EVIDENCE, PreconditionChecker, StepEvidence, StepVerdict
from graphs.common.errors import InputError
from graphs.order_rules import LATE_STEP, PRECONDITION, check_rule
from graphs.probabilistic_checker import (
    DEFAULT_ALERT_THRESHOLD,
    DEFAULT_PRIOR_SKIP,
    ProbabilisticChecker,
    check_probability,
)
from graphs.task_graph import TaskGraph

CHECKERS: Final = ("probabilistic", "binary")
DEFAULT_CHECKER: Final = "probabilistic"


class StepChecker(Protocol):
    """What the live checker and the benchmarks ask of a pre-condition checker (both checkers have it)."""

    @property
    def history(self) -> Iterable[StepVerdict]: ...

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
        kind: ``"probabilistic"`` or ``"binary"`` (``--checker``).
        alert_threshold: ``tau`` of the probabilistic checker, in (0, 1) (``--alert-threshold``).
        prior_skip: ``rho`` of the probabilistic checker, in (0, 1).
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
        if self.kind not in CHECKERS:
            raise InputError(f"--checker {self.kind!r}: choose one of {', '.join(CHECKERS)}")
        check_probability(self.alert_threshold, "--alert-threshold")
        check_probability(self.prior_skip, "prior skip probability")
        check_rule(self.order_rule)
        if self.order_rule == LATE_STEP and self.kind != "binary":
            raise InputError("--order-rule late-step needs --checker binary: the probabilistic checker alerts once "
                             "per omission, on the step done too early")

    def new(self, graph: TaskGraph) -> PreconditionChecker | ProbabilisticChecker:
        """A fresh checker of this kind for one stream."""
        if self.kind == "binary":
            return PreconditionChecker(graph, late_step=self.order_rule == LATE_STEP)
        return ProbabilisticChecker(graph, self.alert_threshold, self.prior_skip, self.one_alert_per_omission)
