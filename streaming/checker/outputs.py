"""The messages the checker sends, built from a stream's state and the graph's procedure questions.

Each alert names its missing pre-condition most likely forgotten (the missing-step score), each status orders the
allowed steps by their future-step probability, and a session that ends gets a `MissingSteps` report of the
required steps it never did (`graphs.procedure_queries`).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from typing import Final

from graphs.checker import StepVerdict
from graphs.checker_settings import StepChecker
from graphs.procedure_queries import ProcedureQueries
from graphs.task_graph import START, TaskGraph
from streaming.checker.refusals import COUNTED
from streaming.checker.streams import StreamState
from streaming.messages import (
    CHECKER_STREAM,
    Alert,
    CheckerHealth,
    Heartbeat,
    KeyStepEvent,
    KeyStepOnset,
    MissingSteps,
    Retraction,
    Status,
    StepEvent,
)
from streaming.transport import ReceiveStats

# Answers of `Outputs.likely_next` kept, for histories of at most NEXT_CACHE_ITEMS steps (a real session's are far
# shorter; the bound keeps a hostile peer's long histories from filling memory: at most about 16 MiB).
NEXT_CACHE: Final = 1024
NEXT_CACHE_ITEMS: Final = 256
SCORE_DECIMALS: Final = 4  # scores on the wire: 2048 of them take at most 14 KiB, so a status always fits


class Outputs:
    """Builds the checker's outgoing messages; each takes the next ``seq`` of its stream.

    Args:
        graph: the task graph (its step names and procedure questions).
        clock: wall clock for outgoing timestamps.
    """

    def __init__(self, graph: TaskGraph, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.queries = ProcedureQueries(graph)
        self._names = dict(zip(graph.step_ids, graph.step_names, strict=True))
        skipped = set(graph.optional_steps) | set(graph.removed_steps)
        self._required = tuple(s for s in graph.step_ids if s not in skipped)  # what an ended session must have done
        # The allowed steps and their probabilities depend only on the last step and the set done, which cameras
        # running one procedure share: answered once per state (`likely_next`), up to `NEXT_CACHE` states.
        self._next_cache: OrderedDict[tuple[int | None, frozenset[int]], tuple[tuple[int, ...], tuple[float, ...]]]
        self._next_cache = OrderedDict()
        self._health_seq = 0

    def name(self, node: int | str) -> str:
        """The graph's name of a step (its id as text if it has none)."""
        return self._names.get(node, str(node)) if isinstance(node, int) else str(node)

    def likely_next(
        self, checker: StepChecker, history: tuple[int, ...]
    ) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """The allowed steps, likeliest next first, with their future-step probabilities (ties in graph order).

        The probability is the procedure question's (`ProcedureQueries.future`) given the step done last and
        everything done; before the first step, START counts as the step just done.

        Args:
            checker: the stream's checker, which has observed ``history``.
            history: the stream's history (a set of it is what the question reads: a replay repeats steps).
        """
        key = (history[-1] if history else None, frozenset(history))
        answer = self._next_cache.get(key)
        if answer is not None:
            self._next_cache.move_to_end(key)
            return answer
        future = self.queries.future(key[0], key[1])
        probability = dict(zip(future.steps, future.scores, strict=True))
        allowed = sorted(checker.allowed_next(), key=lambda s: -probability.get(s, 0.0))  # stable: graph order
        answer = tuple(allowed), tuple(round(probability.get(s, 0.0), SCORE_DECIMALS) for s in allowed)
        if len(history) <= NEXT_CACHE_ITEMS:
            self._next_cache[key] = answer
        if len(self._next_cache) > NEXT_CACHE:
            self._next_cache.popitem(last=False)
        return answer

    def alert(
        self,
        stream_id: str,
        state: StreamState,
        message: KeyStepEvent | Heartbeat | KeyStepOnset,
        index: int,
        replayed: bool,
        before: set[int],
        verdict: StepVerdict | None = None,
    ) -> Alert:
        """The alert on the step at ``index`` of the stream's history (or of an onset, with its ``verdict``).

        Args:
            stream_id: the stream.
            state: its state (whose checker holds the step's verdict, unless ``verdict`` is given).
            message: the message that brought the step.
            index: the step's position in the history.
            replayed: rebuilt from history, not sent the moment its step arrived.
            before: the steps done before it.
            verdict: an early alert's verdict (not in the history yet).
        """
        verdict = verdict or state.verdict(index)
        assert verdict is not None, "an alert is only built on a step of the graph"
        missing = tuple(int(m) for m in verdict.missing if m != START)
        forgotten, score = self._forgotten(verdict.step, missing, before)
        live = isinstance(message, KeyStepEvent | KeyStepOnset) and message.index == index
        return Alert(
            stream_id=stream_id,
            seq=state.next_seq(),
            timestamp=self.clock(),
            alert_id=f"{stream_id}#{index}",  # `withdrawal` names a position's alert so too
            run=state.run,
            step=verdict.step,
            step_name=self.name(verdict.step),
            index=index,
            missing=missing,
            missing_names=tuple(self.name(m) for m in missing),
            undefined=verdict.undefined,
            event_timestamp=message.timestamp,
            replayed=replayed,
            forgotten=forgotten,
            forgotten_name=None if forgotten is None else self.name(forgotten),
            forgotten_score=score,
            rule=self.queries.rule,
            probability=round(min(1.0, max(0.0, verdict.probability)), SCORE_DECIMALS),
            video_time=message.start if live and isinstance(message, KeyStepEvent | KeyStepOnset) else None,
            late_for=verdict.late_for,
        ).fitted()

    def _forgotten(
        self, step: int, missing: tuple[int, ...], before: set[int]
    ) -> tuple[int, float] | tuple[None, None]:
        """The missing pre-condition most likely forgotten: the highest missing-step score
        (`ProcedureQueries.missing`, given the steps done before), the first in graph order on a tie.

        Args:
            step: the step done too early.
            missing: its pre-conditions not done (graph order).
            before: the steps confirmed before it (those of ``missing`` among them are ranked as not done).

        Returns:
            ``(step id, score)``, or ``(None, None)`` when none of them scores above 0.
        """
        if not missing:
            return None, None
        # The probabilistic checker may judge a confirmed pre-condition missing (its detection doubted): ranked as
        # done, it would score 0 and the alert name no likely forgotten step.
        ranked = self.queries.missing(step, before - set(missing))
        score = dict(zip(ranked.steps, ranked.scores, strict=True))
        best = max(missing, key=lambda m: score.get(m, 0.0))
        if score.get(best, 0.0) <= 0.0:
            return None, None
        return best, round(score[best], SCORE_DECIMALS)

    def retraction(self, state: StreamState, early: Alert, confirmed: int | None) -> Retraction:
        """The withdrawal of an early alert: ``confirmed`` is the step confirmed at its position (None: none)."""
        return self.withdrawal(early.stream_id, state, early.index, early.step, confirmed)

    def withdrawal(
        self, stream_id: str, state: StreamState, index: int, step: int, confirmed: int | None
    ) -> Retraction:
        """The withdrawal of the alert on ``step`` at ``index`` of the stream's history (its id is the position's):
        ``confirmed`` is the step now at that position (None: none)."""
        return Retraction(
            stream_id=stream_id,
            seq=state.next_seq(),
            timestamp=self.clock(),
            alert_id=f"{stream_id}#{index}",
            run=state.run,
            step=step,
            step_name=self.name(step),
            index=index,
            confirmed=confirmed,
            confirmed_name=None if confirmed is None else self.name(confirmed),
        )

    def step_event(self, state: StreamState, message: KeyStepEvent) -> StepEvent:
        """The viewers' copy of a key-step: the graph's name for it, and neither the session token nor the history."""
        return StepEvent(
            stream_id=message.stream_id,
            seq=state.next_seq(),
            timestamp=self.clock(),
            run=state.run,
            step=message.step,
            step_name=self.name(message.step),
            start=message.start,
            end=message.end,
            confidence=message.confidence,
            index=message.index,
        )

    def missing_steps(self, stream_id: str, state: StreamState) -> MissingSteps | None:
        """The end report of the stream's session: the required steps it never did (None: it did them all).

        Steps outside the required ones (optional, or removed in training) are never missing.
        """
        never = state.checker.never_done(self._required, state.evidence_now)
        if not never:
            return None
        missing = tuple(s for s, _ in never)
        return MissingSteps(
            stream_id=stream_id,
            seq=state.next_seq(),
            timestamp=self.clock(),
            missing_id=f"{stream_id}#end",
            run=state.run,
            missing=missing,
            missing_names=tuple(self.name(s) for s in missing),
            replayed=False,
            probabilities=tuple(round(p, SCORE_DECIMALS) for _, p in never),
        ).fitted()

    def status(self, stream_id: str, state: StreamState) -> Status:
        """The current `Status` message of a stream (also used for the periodic re-send)."""
        if state.progress[0] != len(state.checker.history):
            state.progress = (len(state.checker.history), state.checker.done)
        allowed, scores = ((), ()) if state.ended else state.allowed  # an ended session has no next step
        return Status(
            stream_id=stream_id,
            seq=state.next_seq(),
            timestamp=self.clock(),
            run=state.run,
            done=state.progress[1],
            allowed=allowed,
            current=state.current,
            alerts=state.alerts,
            frames=state.frames,
            dropped=state.dropped,
            fps=state.fps,
            gaps=state.gaps,
            ended=state.ended,
            stopped=state.stopped,
            lost=state.lost,
            allowed_scores=scores,
            rule=self.queries.rule,
            **state.latency,
        )

    def health(self, streams: Mapping[str, StreamState], counts: Counter[str], stats: ReceiveStats) -> CheckerHealth:
        """The checker's counts as a `CheckerHealth` message.

        Args:
            streams: the streams tracked.
            counts: the refusal counts (`streaming.checker.refusals.COUNTED`).
            stats: the receiver's counts (received, malformed, over budget before decoding).

        Returns:
            The message (``seq`` counts the checker's own health messages).
        """
        self._health_seq += 1
        counted = {name: counts[name] for name in COUNTED}
        return CheckerHealth(
            stream_id=CHECKER_STREAM,
            seq=self._health_seq - 1,
            timestamp=self.clock(),
            streams=len(streams),
            lost_streams=sum(state.lost for state in streams.values()),
            received=stats.received,
            malformed=stats.malformed,
            **(counted | {"over_budget": counted["over_budget"] + stats.over_budget}),
        )
