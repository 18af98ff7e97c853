"""Online pre-condition checking (the PREGO protocol, docs/method.md).

`PreconditionChecker` is fed one recognised key-step at a time and says at once whether it was
done before its pre-conditions. The same object scores the offline benchmark and runs in the
live checker process, so both paths agree by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
    """

    step: int
    is_mistake: bool
    missing: tuple[Node, ...]
    undefined: bool


class PreconditionChecker:
    """Stateful online checker: ``seen`` starts as ``{START}`` and grows with each observed step.

    A step is a mistake iff one of its pre-conditions is not in ``seen`` or it has no
    pre-condition defined (the PREGO protocol). Every defined step is then added to ``seen`` whether or not
    it was a mistake; an undefined one is not (as in the reference evaluation).

    Args:
        graph: the binary task graph to check against.
    """

    def __init__(self, graph: TaskGraph) -> None:
        self.graph = graph
        self._order = {node: i for i, node in enumerate(graph.nodes)}
        self._seen: set[Node] = {START}
        self.history: list[StepVerdict] = []

    def observe(self, step: int) -> StepVerdict:
        """Check one key-step against what was done so far, then record it.

        Args:
            step: taxonomy id of the key-step just completed.

        Returns:
            The verdict for this step.
        """
        verdict = self.verdict(step)
        if not verdict.undefined:
            self._seen.add(step)
        self.history.append(verdict)
        return verdict

    def verdict(self, step: int, also_done: Iterable[int] = ()) -> StepVerdict:
        """The verdict `observe` would give ``step`` now, nothing recorded.

        Args:
            step: taxonomy id of the key-step.
            also_done: steps taken as observed before it, in order, after those already observed (a step still to
                be confirmed); like `observe`, only those with pre-conditions defined count as done.

        Returns:
            The verdict.
        """
        required = self.graph.preconditions(step)
        undefined = not required
        pending = required - self._seen
        if pending and also_done:  # the seen set is never copied: a stream's may hold thousands of steps
            pending -= {s for s in also_done if self.graph.preconditions(s)}
        missing = tuple(sorted(pending, key=self._order.__getitem__))
        return StepVerdict(int(step), undefined or bool(missing), missing, undefined)

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
        self.history.clear()

    @classmethod
    def replay(cls, graph: TaskGraph, steps: Iterable[int]) -> PreconditionChecker:
        """A checker that has observed ``steps`` in order (how a restarted process rebuilds state)."""
        checker = cls(graph)
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
