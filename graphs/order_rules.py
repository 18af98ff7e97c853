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
from graphs.common.errors import InputError
from graphs.common.safe_text import unknown_name
from graphs.task_graph import TaskGraph

PRECONDITION: Final = "precondition"
LATE_STEP: Final = "late-step"
ORDER_RULES: Final = (PRECONDITION, LATE_STEP)


def check_rule(rule: str, option: str = "--order-rule") -> None:
    """Refuse a rule name that is not one of `ORDER_RULES`, naming the ``option`` it came from."""
    if rule not in ORDER_RULES:
        raise InputError(unknown_name(option, rule, ORDER_RULES))


def order_flags(graph: TaskGraph, sequence: Sequence[int], rule: str = PRECONDITION) -> np.ndarray:
    """Flag each step of a sequence under one rule, online, with the checker the live pipeline runs.

    Args:
        graph: the binary task graph.
        sequence: key-step ids in the order they were done (repeats allowed).
        rule: ``"precondition"`` or ``"late-step"``.

    Returns:
        bool ``(len(sequence),)``, true where the step is flagged.
    """
    check_rule(rule)
    checker = PreconditionChecker(graph, late_step=rule == LATE_STEP)
    return np.fromiter((checker.observe(s).is_mistake for s in sequence), dtype=bool, count=len(sequence))


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
