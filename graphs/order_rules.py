"""Order-mistake rules over a recording's step sequence, and the steps an ended recording never did.

Two rules flag a key-step done out of order:

- ``precondition`` (the live checker's, `graphs.checker.PreconditionChecker`): the step is flagged when one of its
  pre-conditions was not done yet (or it has none defined);
- ``late-step`` adds: the step is flagged when a step already done *requires* it (``K ∈ pre(D)`` for some done ``D``),
  i.e. it comes after a step that should have followed it. A swap of two dependent steps then flags both of them,
  the early one (its pre-condition missing) and the late one (its dependent already done), which is how
  CaptainCook4D's annotators tag an order error ("performed before X" on the one, "performed after Y" on the other).

Pure functions of a `graphs.TaskGraph` and a sequence: the offline benchmark scores them, and the checker can adopt
the late-step rule without changing what it stores per stream (the set of steps done).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import numpy as np

from graphs.checker import PreconditionChecker
from graphs.errors import InputError
from graphs.task_graph import TaskGraph

PRECONDITION: Final = "precondition"
LATE_STEP: Final = "late-step"
ORDER_RULES: Final = (PRECONDITION, LATE_STEP)


def check_rule(rule: str) -> None:
    """Refuse a rule name that is not one of `ORDER_RULES`."""
    if rule not in ORDER_RULES:
        raise InputError(f"order rule {rule!r}: expected one of {', '.join(ORDER_RULES)}")


def waiting_on(graph: TaskGraph, step: int, done: Iterable[int]) -> tuple[int, ...]:
    """The steps already done that require ``step`` (it comes after them, though they should have followed it).

    Args:
        graph: the binary task graph.
        step: the key-step just observed.
        done: the steps observed before it.

    Returns:
        Those steps, in graph order (empty when ``step`` is on time).
    """
    before = set(done)
    return tuple(d for d in graph.step_ids if d in before and step in graph.preconditions(d))


def order_flags(graph: TaskGraph, sequence: Sequence[int], rule: str = PRECONDITION) -> np.ndarray:
    """Flag each step of a sequence under one rule, online (each step judged on the steps before it only).

    Args:
        graph: the binary task graph.
        sequence: key-step ids in the order they were done (repeats allowed).
        rule: ``"precondition"`` or ``"late-step"``.

    Returns:
        bool ``(len(sequence),)``, true where the step is flagged.
    """
    check_rule(rule)
    checker = PreconditionChecker(graph)
    flags = np.zeros(len(sequence), dtype=bool)
    for i, step in enumerate(sequence):
        late = rule == LATE_STEP and bool(waiting_on(graph, step, checker.done))
        flags[i] = checker.observe(step).is_mistake or late
    return flags


def required_steps(graph: TaskGraph) -> tuple[int, ...]:
    """The steps a finished execution must have done: every step but the optional ones and those removed in training.

    The same set the live checker's ``MissingSteps`` report is drawn from.
    """
    skipped = set(graph.optional_steps) | set(graph.removed_steps)
    return tuple(s for s in graph.step_ids if s not in skipped)


def never_done(graph: TaskGraph, done: Iterable[int]) -> tuple[int, ...]:
    """The required steps an ended execution never did (what the live ``missing`` message names), in graph order."""
    seen = set(done)
    return tuple(s for s in required_steps(graph) if s not in seen)
