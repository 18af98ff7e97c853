"""Online pre-condition checking (the PREGO protocol, docs/method.md).

`PreconditionChecker` is fed one recognised key-step at a time and says at once whether it was
done before its pre-conditions. The same object scores the offline benchmark and runs in the
live checker process, so both paths agree by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

import numpy as np

from graphs.task_graph import START, Node, TaskGraph


@dataclass(frozen=True)
class StepVerdict:
    """What the checker concluded about one observed key-step.

    Attributes:
        step: the key-step id that was observed.
        is_mistake: true if the step was done before its pre-conditions (or has none defined).
        missing: pre-conditions not yet done when the step happened, in graph order.
        undefined: the step has no pre-conditions in the graph (unknown or removed step); the
            protocol counts it as a mistake.
        probability: how likely the verdict "mistake" is right: 1 or 0 from this checker, which takes what it is
            told as certain; `graphs.probabilistic_checker` weighs the detector's evidence.
        late_for: under the late-step rule, the steps already done that require this one (it comes after them,
            though they should have followed it), in graph order.
    """

    step: int
    is_mistake: bool
    missing: tuple[Node, ...]
    undefined: bool
    probability: float = 0.0
    late_for: tuple[int, ...] = ()


@dataclass(frozen=True)
class StepEvidence:
    """What a detector says about the steps when it reports one (`graphs.probabilistic_checker` reads it).

    Attributes:
        done: step id -> ``q_s``, the even-odds probability that the step was done before this one started, from
            the detector's output alone. A step absent from it counts as seen with certainty if it was confirmed
            before, and as not seen otherwise.
        real: ``r_i``, the probability that this detection is real (1: taken as certain).
    """

    done: Mapping[int, float] = field(default_factory=dict)
    real: float = 1.0

    @classmethod
    def of(cls, steps: Iterable[int], probabilities: Iterable[float], real: float = 1.0) -> StepEvidence:
        """Evidence from two parallel sequences (as they travel on the wire)."""
        return cls(dict(zip((int(s) for s in steps), (float(p) for p in probabilities), strict=True)), float(real))


NO_EVIDENCE: Final = StepEvidence()


V = TypeVar("V", bound=StepVerdict)


class CheckerHistory(Generic[V]):
    """What both online checkers keep and answer alike: the steps seen (``{START}`` and every defined step observed),
    the verdicts in order (``history``), the steps done and those allowed next.

    Each checker keeps its verdicts its own way (``history``, cleared by `_forget`): the binary one in a list, the
    probabilistic one in flat columns (`graphs.probabilistic_checker.ProbableVerdicts`), as its verdicts are larger
    and a replayed history holds thousands of them.

    Args:
        graph: the binary task graph to check against.
    """

    history: Sequence[V]

    def __init__(self, graph: TaskGraph) -> None:
        self.graph = graph
        self._order = {node: i for i, node in enumerate(graph.nodes)}
        self._seen: set[Node] = {START}

    @property
    def done(self) -> tuple[int, ...]:
        """Steps recorded as done, in the order they were first observed."""
        seen: dict[int, None] = {}
        for verdict in self.history:
            if not verdict.undefined:
                seen.setdefault(verdict.step, None)
        return tuple(seen)

    def allowed_next(self) -> tuple[int, ...]:
        """Steps not done yet whose pre-conditions are all met now, in graph order."""
        return tuple(
            s
            for s in self.graph.step_ids
            if s not in self._seen and (req := self.graph.preconditions(s)) and req <= self._seen
        )

    def reset(self) -> None:
        """Forget everything observed: back to ``seen = {START}``."""
        self._seen = {START}
        self._forget()

    def _forget(self) -> None:
        """Drop the verdicts kept (``history``)."""
        raise NotImplementedError


class PreconditionChecker(CheckerHistory[StepVerdict]):
    """Stateful online checker: ``seen`` starts as ``{START}`` and grows with each observed step.

    A step is a mistake iff one of its pre-conditions is not in ``seen`` or it has no
    pre-condition defined (the PREGO protocol). Every defined step is then added to ``seen`` whether or not
    it was a mistake; an undefined one is not (as in the reference evaluation). The detector's evidence, which
    `graphs.probabilistic_checker.ProbabilisticChecker` weighs, is taken and ignored: the two are interchangeable.

    With ``late_step`` a step is also a mistake when a step already done requires it (``K ∈ pre(D)`` for a done
    ``D``): it comes after a step that should have followed it. A swap of two dependent steps then flags both, the
    early one (its pre-condition missing) and the late one, as CaptainCook4D's annotators tag an order error
    (`graphs.order_rules`).

    Args:
        graph: the binary task graph to check against.
        late_step: apply the late-step rule too.
    """

    def __init__(self, graph: TaskGraph, late_step: bool = False) -> None:
        super().__init__(graph)
        self.history: list[StepVerdict] = []
        self.late_step = late_step
        # step -> the steps that require it, graph order (the late-step rule's question, asked per observation). Built
        # only for that rule, in one pass over the edges: the live checker makes a checker per stream session, and
        # asking every step of every step took 1.9 s on a graph of 2048 steps.
        self._dependents: dict[Node, list[int]] = {}
        if late_step:
            for dependent in graph.step_ids:
                for required in graph.preconditions(dependent):
                    self._dependents.setdefault(required, []).append(dependent)

    def _forget(self) -> None:
        self.history.clear()

    def observe(self, step: int, evidence: StepEvidence = NO_EVIDENCE) -> StepVerdict:
        """Check one key-step against what was done so far, then record it.

        Args:
            step: taxonomy id of the key-step just completed.
            evidence: ignored (the detector's output is taken as certain).

        Returns:
            The verdict for this step.
        """
        verdict = self.verdict(step)
        if not verdict.undefined:
            self._seen.add(step)
        self.history.append(verdict)
        return verdict

    def verdict(self, step: int, also_done: Iterable[int] = (), evidence: StepEvidence = NO_EVIDENCE) -> StepVerdict:
        """The verdict `observe` would give ``step`` now, nothing recorded.

        Args:
            step: taxonomy id of the key-step.
            also_done: steps taken as observed before it, in order, after those already observed (a step still to
                be confirmed); like `observe`, only those with pre-conditions defined count as done.
            evidence: ignored.

        Returns:
            The verdict.
        """
        required = self.graph.preconditions(step)
        undefined = not required
        pending = required - self._seen
        if pending and also_done:  # the seen set is never copied: a stream's may hold thousands of steps
            pending -= {s for s in also_done if self.graph.preconditions(s)}
        missing = tuple(sorted(pending, key=self._order.__getitem__))
        late: tuple[int, ...] = ()
        if self.late_step:
            extra = set(also_done)
            late = tuple(d for d in self._dependents.get(step, ()) if d in self._seen or d in extra)
        is_mistake = undefined or bool(missing) or bool(late)
        return StepVerdict(int(step), is_mistake, missing, undefined, float(is_mistake), late)

    def never_done(self, required: Iterable[int], evidence: StepEvidence = NO_EVIDENCE) -> list[tuple[int, float]]:
        """The required steps never observed, at the end of a session.

        Args:
            required: the steps an ended session must have done, in the order to report them.
            evidence: ignored.

        Returns:
            ``[(step, 1.0)]`` for each step of ``required`` not observed.
        """
        return [(int(s), 1.0) for s in required if s not in self._seen]

    @classmethod
    def replay(cls, graph: TaskGraph, steps: Iterable[int], late_step: bool = False) -> PreconditionChecker:
        """A checker that has observed ``steps`` in order, each taken as seen (a recorded sequence scored offline)."""
        checker = cls(graph, late_step)
        for step in steps:
            checker.observe(step)
        return checker


def precondition_violations(graph: TaskGraph, sequence: Sequence[int]) -> np.ndarray:
    """Score a whole key-step sequence online.

    Args:
        graph: the binary task graph.
        sequence: key-step ids in the order they were done.

    Returns:
        bool array ``(len(sequence),)``, true where the step is flagged a mistake.
    """
    checker = PreconditionChecker(graph)
    return np.fromiter((checker.observe(s).is_mistake for s in sequence), dtype=bool, count=len(sequence))
