"""A graph-free reference for the procedure questions: every answer from counts over the training executions.

`tgml bench-queries` sets it beside the graph learners so that a graph earns its place: each question is answered
the way a frequency table would, with no graph, from the same training executions (first occurrences):

- *previous*: ``K_p`` scored by ``before[i, p]``, the share of the executions holding ``K_i`` where ``K_p`` came
  earlier;
- *optional*: ``1 − fr(K_i)``, the share of the executions that skip the step;
- *missing* (for ``K_i``): each step not done scored ``before[i, m]``; at the end of the procedure, each step not
  done scored ``fr(K_m)``, how often an execution holds it;
- *mistake*: ``max_{m ∉ J} before[i, m]``, the most usual earlier step not done yet (1 for a step never seen);
- *future*: the steps not done ranked by how often each directly followed the current step (from START: came
  first), ties broken by how often the step occurs at all.

It answers through the same calls as `graphs.procedure_queries.ProcedureQueries`, so the protocols of
`tgml.bench.query_protocols` measure both alike. Numpy only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from graphs.procedure_queries import UNDEFINED_MISTAKE, rank_steps


@dataclass(frozen=True)
class Ranking:
    """Steps with scores, highest first, zeros left out (what the protocols read of `RankedSteps`)."""

    steps: tuple[int, ...]
    scores: tuple[float, ...]


@dataclass(frozen=True)
class Score:
    """One score about one step (what the protocols read of `StepScore`)."""

    value: float


def first_positions(executions: Sequence[Sequence[int]], n_steps: int) -> np.ndarray:
    """Where each step is first done in each execution.

    Args:
        executions: executions as step *indices* ``0..n-1``.
        n_steps: ``n``.

    Returns:
        float ``(D, n)``: the position, ``inf`` where the execution does not hold the step.
    """
    positions = np.full((len(executions), n_steps), np.inf)
    for d, run in enumerate(executions):
        steps = np.asarray(run, dtype=np.int64)
        order = np.arange(len(steps), dtype=np.float64)
        positions[d, steps[::-1]] = order[::-1]  # written last to first: the first occurrence wins
    return positions


def came_before(positions: np.ndarray) -> np.ndarray:
    """``before[i, p]``: the share of the executions holding ``K_i`` in which ``K_p`` was done earlier.

    Args:
        positions: `first_positions`.

    Returns:
        float ``(n, n)``, zero on the diagonal and in the rows of steps never done.
    """
    holds = np.isfinite(positions)  # (D, n)
    earlier = (positions[:, None, :] < positions[:, :, None]) & holds[:, :, None]  # (D, i, p)
    counts = holds.sum(axis=0).astype(np.float64)
    return np.divide(earlier.sum(axis=0), counts[:, None], out=np.zeros(earlier.shape[1:]), where=counts[:, None] > 0)


def transition_counts(executions: Sequence[Sequence[int]], n_steps: int) -> np.ndarray:
    """``follows[a + 1, b]``: how often ``K_b`` directly followed ``K_a``; row 0 counts the first steps (START).

    Args:
        executions: executions as step indices ``0..n-1``, each step once.
        n_steps: ``n``.

    Returns:
        float ``(n + 1, n)``.
    """
    follows = np.zeros((n_steps + 1, n_steps))
    for run in executions:
        steps = np.asarray(run, dtype=np.int64)
        if len(steps):
            np.add.at(follows, (np.r_[0, steps[:-1] + 1], steps), 1.0)
    return follows


class FrequencyAnswers:
    """The five questions answered from training counts alone (see the module docstring).

    Args:
        executions: the training executions as step ids (repeats allowed: first occurrences are used; ids outside
            ``step_ids`` are ignored).
        step_ids: the taxonomy.
    """

    def __init__(self, executions: Iterable[Sequence[int]], step_ids: Sequence[int]) -> None:
        self.step_ids = tuple(step_ids)
        self._position = {s: k for k, s in enumerate(self.step_ids)}
        runs = [[self._position[s] for s in dict.fromkeys(int(s) for s in run) if s in self._position]
                for run in executions]
        n = len(self.step_ids)
        positions = first_positions(runs, n)
        self._before = came_before(positions)
        self._frequency = np.isfinite(positions).mean(axis=0) if runs else np.zeros(n)
        self._follows = transition_counts(runs, n)
        occurs = np.isfinite(positions).sum(axis=0)
        self._occurs = occurs / max(int(occurs.sum()), 1)  # < 1: only breaks ties between transition counts

    def _not_done(self, history: Iterable[int], also: int | None = None) -> np.ndarray:
        mask = np.ones(len(self.step_ids), dtype=bool)
        mask[[self._position[s] for s in history if s in self._position]] = False
        if also is not None:
            mask[also] = False
        return mask

    def _ranked(self, scores: np.ndarray) -> Ranking:
        return Ranking(*rank_steps(scores, self.step_ids))

    def previous(self, step: int) -> Ranking:
        """Steps scored by how often they came before ``step``."""
        i = self._position.get(step)
        return Ranking((), ()) if i is None else self._ranked(self._before[i])

    def optional(self, step: int, history: Iterable[int] | None = None) -> Score:
        """The share of the training executions that skip ``step`` (0 for a step outside the taxonomy)."""
        i = self._position.get(step)
        return Score(0.0 if i is None else float(1.0 - self._frequency[i]))

    def mistake(self, step: int, history: Iterable[int]) -> Score:
        """The most usual earlier step of ``step`` not done yet; `UNDEFINED_MISTAKE` for a step never seen."""
        i = self._position.get(step)
        if i is None or self._frequency[i] == 0:
            return Score(UNDEFINED_MISTAKE)
        pending = self._not_done(history, also=i)
        return Score(float(self._before[i][pending].max(initial=0.0)))

    def missing(self, step: int, history: Iterable[int]) -> Ranking:
        """Steps not done, scored by how often they came before ``step``."""
        i = self._position.get(step)
        if i is None:
            return Ranking((), ())
        return self._ranked(np.where(self._not_done(history, also=i), self._before[i], 0.0))

    def missing_at_end(self, history: Iterable[int]) -> Ranking:
        """Steps not done, scored by how often an execution holds them."""
        return self._ranked(np.where(self._not_done(history), self._frequency, 0.0))

    def future(self, step: int | None, history: Iterable[int]) -> Ranking:
        """Steps not done, ranked by how often they directly followed ``step`` (None: START), then by frequency."""
        i = None if step is None else self._position.get(step)
        if step is not None and i is None:
            return Ranking((), ())
        row = self._follows[0 if i is None else i + 1]
        return self._ranked(np.where(self._not_done(history, also=i), row + self._occurs, 0.0))
