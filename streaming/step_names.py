"""The names a viewer (the terminal view, the dashboard) shows for steps, and when its ``--graph`` is not the checker's.

A viewer may be given a graph file for names the messages do not carry. The checker's messages name the steps they
are about in full, with its own graph's names (`streaming.checker.outputs`); where one of those differs from the
viewer's graph, the graph is not the checker's: the checker's name is shown from then on (its alerts mean its step),
the conflict is kept to be said once, and every step the checker has not named yet shows its number, since the
graph that misnamed one misnames the others as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from graphs.limits import MAX_STEPS
from streaming.messages import Alert, Message, MissingSteps, Retraction, StepEvent

MAX_NAMES: Final = 2 * MAX_STEPS  # names learned from messages: a bound on what a peer can make a viewer remember
MAX_CONFLICTS: Final = MAX_STEPS  # conflicts remembered to be said once


class StepNames:
    """Step id -> shown name, learned from the checker over a viewer's ``--graph``.

    Attributes:
        graph: the ``--graph``'s names.
        shown: the names shown now (a step with none shows its id).
        conflicts: step -> (the ``--graph``'s name, the checker's), the first of each step, in the order found.
        checker_named: the steps the checker has named.
    """

    def __init__(self, graph: Mapping[int, str]) -> None:
        self.graph = dict(graph)
        self.shown = dict(graph)
        self.conflicts: dict[int, tuple[str, str]] = {}
        self.checker_named: set[int] = set()

    def learn(self, step: int, name: str) -> bool:
        """Take the checker's name of ``step``; returns whether it reveals a conflict not known before."""
        if len(self.checker_named) < MAX_NAMES:
            self.checker_named.add(step)
        mine = self.graph.get(step)
        if mine is not None and mine != name:
            if not self.conflicts:
                self.shown = {s: n for s, n in self.shown.items() if s in self.checker_named}
            self.shown[step] = name
            if step in self.conflicts or len(self.conflicts) >= MAX_CONFLICTS:
                return False
            self.conflicts[step] = (mine, name)
            return True
        if step not in self.shown and len(self.shown) < MAX_NAMES:
            self.shown[step] = name
        return False

    def name(self, step: int) -> str:
        """The name shown for ``step`` (its id when it has none)."""
        return self.shown.get(step, str(step))


def named_steps(message: Message) -> list[tuple[int, str]]:
    """The ``(step, name)`` pairs a checker's message names: an alert's step, its missing pre-conditions (those that
    fit the message) and its forgotten step; a retraction's step and the step confirmed instead; an end report's
    steps never done; a confirmed key-step's step. Other messages name none."""
    if isinstance(message, Alert):
        pairs = [(message.step, message.step_name), *zip(message.missing, message.missing_names, strict=False)]
        if message.forgotten is not None and message.forgotten_name is not None:
            pairs.append((message.forgotten, message.forgotten_name))
        return pairs
    if isinstance(message, Retraction):
        confirmed = ([(message.confirmed, message.confirmed_name)]
                     if message.confirmed is not None and message.confirmed_name is not None else [])
        return [(message.step, message.step_name), *confirmed]
    if isinstance(message, MissingSteps):
        return list(zip(message.missing, message.missing_names, strict=False))
    if isinstance(message, StepEvent):
        return [(message.step, message.step_name)]
    return []
