"""The probabilistic pre-condition checker: alerts that weigh what the detector may have missed.

The binary checker (`graphs.checker.PreconditionChecker`) takes every recognised key-step as a certain fact and every
step not recognised as certainly not done. On real video both are wrong often enough to flood a user with false
alarms: one missed step makes every step that needs it alert, and a spurious 0.2 s detection hides a real omission.
This checker keeps the graph's rule but asks, for each pre-condition, how likely it is that it was *truly* skipped,
given what the detector saw (docs/method.md, "The probabilistic checker").

**Evidence.** For each key-step ``s`` the detector reports ``q_s``: the probability that ``s`` was done, from its own
output alone, under even prior odds. It is a likelihood ratio in disguise, calibrated on validation videos
(`recognition.evidence`)::

    LR_s = q_s / (1 - q_s) = P(evidence | s done) / P(evidence | s not done)

and ``r_i``, the probability (even odds) that the detection of the step being checked is real.

**The skip of one pre-condition.** With ``rho`` the prior probability that a person skips a given pre-condition
(`DEFAULT_PRIOR_SKIP`, ``--prior-skip``), Bayes' rule gives::

    P(p skipped | e_p) = rho / (rho + (1 - rho) * LR_p)                                   (1)

**The alert.** Step ``i`` is checked against ``U(i)``: its pre-conditions (START aside) not already named in an
earlier alert of the session. Pre-conditions are taken as independent::

    P(alert right) = r_i * (1 - prod_{p in U(i)} (1 - P(p skipped | e_p)))                (2)

The alert goes out when (2) reaches the threshold ``tau`` (`DEFAULT_ALERT_THRESHOLD`, ``--alert-threshold``). It
names the pre-conditions of ``U(i)`` more likely skipped than done (at least the likeliest), and those are then
*reported*: one omission, one alert. A re-detection of the same step, or a later step that needs the same
pre-condition, does not alert again for it.

**Never done.** At the end of a session a required step ``s`` is named never done when ``P(s skipped | e_s)`` of (1),
with the evidence at the end, reaches ``tau``.

**Without evidence** (a detector that sends none, a replay of bare key-step sequences) a confirmed step counts as
seen with certainty and any other as certainly not seen: the binary rule, with the one-omission-one-alert merge.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, overload

import numpy as np

from graphs.checker import NO_EVIDENCE, CheckerHistory, StepEvidence, StepVerdict
from graphs.common.errors import InputError
from graphs.task_graph import START, Node, TaskGraph

# Prior probability that a person skips a given pre-condition of the step they are doing. It sets how much evidence
# of a skip an alert needs: with rho = 0.2 a pre-condition the detector never saw is alerted when the detector misses
# fewer than a quarter of the steps it should see (LR < rho / (1 - rho)), and stays quiet for a detector that misses
# more. Chosen on training data only (docs/method.md).
DEFAULT_PRIOR_SKIP: Final = 0.2
# An alert goes out when it is more likely right than wrong (Bayes' decision with equal costs); chosen on the
# validation videos of the hard footage and the simulated PREGO training replays (docs/evaluation.md).
DEFAULT_ALERT_THRESHOLD: Final = 0.5
# Even-odds probabilities are clipped into [EPS, 1 - EPS]: "certain" evidence stays finite, so one strong piece of
# evidence never makes (1) exactly 0 or 1.
EPS: Final = 1e-6


def check_probability(value: object, what: str) -> float:
    """``value`` as a float strictly between 0 and 1, else an `InputError` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value < 1.0:  # NaN fails too
        raise InputError(f"{what} {value!r}: must be a probability strictly between 0 and 1")
    return float(value)


def skip_probability(done_evidence: np.ndarray, prior_skip: float) -> np.ndarray:
    """Posterior probability that each pre-condition was truly skipped, formula (1) of the module docstring.

    Args:
        done_evidence: ``(k,)`` even-odds probabilities ``q_p`` that each pre-condition was done.
        prior_skip: ``rho``, the prior probability of skipping a pre-condition.

    Returns:
        ``(k,)`` ``P(p skipped | e_p) = rho / (rho + (1 - rho) * q_p / (1 - q_p))``.
    """
    q = np.clip(np.asarray(done_evidence, dtype=np.float64), EPS, 1.0 - EPS)
    lr = q / (1.0 - q)
    return prior_skip / (prior_skip + (1.0 - prior_skip) * lr)


def alert_probability(real: float, skip: np.ndarray) -> float:
    """Probability that an alert on a step is right, formula (2): the detection is real and a pre-condition skipped.

    Args:
        real: ``r_i``, the probability that the detection of the step is real.
        skip: ``(k,)`` skip probabilities of its unreported pre-conditions (formula (1)).

    Returns:
        ``r_i * (1 - prod(1 - skip))``; 0 when ``skip`` is empty.
    """
    if len(skip) == 0:
        return 0.0
    return float(real * (1.0 - np.prod(1.0 - np.asarray(skip, dtype=np.float64))))


@dataclass(frozen=True)
class ProbableVerdict(StepVerdict):
    """A `StepVerdict` with the probability behind it.

    Attributes:
        probability: (overrides the base's meaning) formula (2): the probability that the alert is right (for an
            undefined step: that the detection is real). The verdict is a mistake when it reaches the threshold.
        skip: ``(pre-condition, P(skipped))`` for every pre-condition checked (formula (1)), in graph order.
        merged: pre-conditions of the step not checked again because an earlier alert of the session named them.
    """

    skip: tuple[tuple[Node, float], ...] = ()
    merged: tuple[Node, ...] = ()


# Bits of `ProbableVerdicts`' flags column.
_MISTAKE: Final = 1
_UNDEFINED: Final = 2


class ProbableVerdicts(Sequence[ProbableVerdict]):
    """A session's verdicts in order, kept as columns of flat arrays, not as one object per position.

    A verdict object costs about 200 bytes (its instance, its ``__dict__``, a tuple or two), and a stream replaying a
    4,096-step history held 4,096 of them: 256 such streams took 200 MiB, which Python's small-object allocator kept
    after they were freed (its arenas go back to the system only once wholly empty, and the objects of every other
    stream were spread through them). Here a position costs 25 bytes, plus 13 per pre-condition it checked and 4 per
    one it merged, in a few arrays that go back whole. Reading a position builds its verdict again, equal field for
    field to the one `append` was given.

    Args:
        nodes: the graph's nodes (what the verdicts name is kept as an index into them).
        index: each node's index in ``nodes`` (the checker's own map, not copied: a stream's checker has one).
    """

    def __init__(self, nodes: tuple[Node, ...], index: Mapping[Node, int]) -> None:
        self._nodes = nodes
        self._index = index
        self._steps = array("q")
        self._probability = array("d")
        self._flags = array("B")
        # Per position, where its pre-conditions checked (and merged) end in the flat columns below.
        self._checked_end = array("I")
        self._merged_end = array("I")
        self._checked = array("i")  # node index of each pre-condition checked, position after position
        self._skip = array("d")  # its P(skipped), as the verdict's ``skip`` holds it
        self._named = array("B")  # 1: the verdict names it missing
        self._merged = array("i")
        self._done: dict[int, None] = {}  # defined steps, in the order first observed

    def append(self, verdict: ProbableVerdict) -> None:
        """Keep ``verdict`` as the next position.

        Raises:
            ValueError: it is not a verdict this checker gives (it names missing a pre-condition it did not check, or
                has ``late_for`` steps).
        """
        skip, missing = verdict.skip, verdict.missing
        if verdict.late_for or (missing and tuple(node for node, _ in skip if node in missing) != missing):
            raise ValueError(f"not a verdict of the probabilistic checker: {verdict}")
        index = self._index
        undefined = verdict.undefined
        self._steps.append(verdict.step)
        self._probability.append(verdict.probability)
        self._flags.append((_MISTAKE if verdict.is_mistake else 0) | (_UNDEFINED if undefined else 0))
        if skip:
            checked, values, named = self._checked, self._skip, self._named
            for node, value in skip:
                checked.append(index[node])
                values.append(value)
                named.append(node in missing)
        self._checked_end.append(len(self._checked))
        if verdict.merged:
            merged = self._merged
            for node in verdict.merged:
                merged.append(index[node])
        self._merged_end.append(len(self._merged))
        if not undefined:
            self._done.setdefault(verdict.step, None)

    def clear(self) -> None:
        """Forget every position."""
        for column in (self._steps, self._probability, self._flags, self._checked_end, self._merged_end,
                       self._checked, self._skip, self._named, self._merged):
            del column[:]
        self._done.clear()

    @property
    def done(self) -> tuple[int, ...]:
        """The steps of the defined verdicts, in the order first observed."""
        return tuple(self._done)

    def __len__(self) -> int:
        return len(self._steps)

    @overload
    def __getitem__(self, position: int) -> ProbableVerdict: ...

    @overload
    def __getitem__(self, position: slice) -> list[ProbableVerdict]: ...

    def __getitem__(self, position: int | slice) -> ProbableVerdict | list[ProbableVerdict]:
        if isinstance(position, slice):
            return [self._verdict(i) for i in range(*position.indices(len(self)))]
        i = position + len(self) if position < 0 else position
        if not 0 <= i < len(self):
            raise IndexError(f"verdict {position} of {len(self)}")
        return self._verdict(i)

    def __iter__(self) -> Iterator[ProbableVerdict]:
        return (self._verdict(i) for i in range(len(self)))

    def _verdict(self, i: int) -> ProbableVerdict:
        """The verdict at position ``i`` (in range), built from the columns."""
        nodes = self._nodes
        start, end = (self._checked_end[i - 1] if i else 0), self._checked_end[i]
        checked = [nodes[k] for k in self._checked[start:end]]
        skip = tuple(zip(checked, self._skip[start:end], strict=True))
        missing = tuple(node for node, named in zip(checked, self._named[start:end], strict=True) if named)
        merged = tuple(nodes[k] for k in self._merged[(self._merged_end[i - 1] if i else 0):self._merged_end[i]])
        flags = self._flags[i]
        return ProbableVerdict(self._steps[i], bool(flags & _MISTAKE), missing, bool(flags & _UNDEFINED),
                               probability=self._probability[i], skip=skip, merged=merged)


class ProbabilisticChecker(CheckerHistory[ProbableVerdict]):
    """Stateful online checker that weighs the detector's evidence (the module docstring gives the model).

    It is a drop-in for `graphs.checker.PreconditionChecker` (``observe``, ``verdict``, ``done``, ``allowed_next``,
    ``history``, ``reset``, ``replay``); ``observe`` and ``verdict`` also take the detector's `StepEvidence`.

    Args:
        graph: the binary task graph.
        threshold: ``tau``: an alert goes out when its probability reaches it, in (0, 1).
        prior_skip: ``rho``: prior probability that a pre-condition is skipped, in (0, 1).
        one_alert_per_omission: True (live): a pre-condition named by an alert is not checked again. False: every
            step is judged on all its pre-conditions, as the PREGO protocol scores each recognised step (a step
            recognised twice, still without its pre-condition, is still done out of order: the merge is a rule about
            what a user is sent, not about what the step was).
    """

    def __init__(
        self,
        graph: TaskGraph,
        threshold: float = DEFAULT_ALERT_THRESHOLD,
        prior_skip: float = DEFAULT_PRIOR_SKIP,
        one_alert_per_omission: bool = True,
    ) -> None:
        super().__init__(graph)
        self.history: ProbableVerdicts = ProbableVerdicts(graph.nodes, self._order)
        self.threshold = check_probability(threshold, "--alert-threshold")
        self.prior_skip = check_probability(prior_skip, "--prior-skip")
        self.one_alert_per_omission = one_alert_per_omission
        self._reported: set[Node] = set()

    def observe(self, step: int, evidence: StepEvidence = NO_EVIDENCE) -> ProbableVerdict:
        """Check one key-step, then record it (and, if it alerts, the pre-conditions it names as reported).

        Args:
            step: taxonomy id of the key-step just recognised.
            evidence: the detector's evidence as of the step's start.

        Returns:
            The verdict.
        """
        verdict = self.verdict(step, evidence=evidence)
        if not verdict.undefined:
            self._seen.add(step)
        if verdict.is_mistake and self.one_alert_per_omission:
            self._reported.update(verdict.missing)
        self.history.append(verdict)
        return verdict

    def verdict(
        self, step: int, also_done: Iterable[int] = (), evidence: StepEvidence = NO_EVIDENCE
    ) -> ProbableVerdict:
        """The verdict `observe` would give ``step`` now, nothing recorded.

        Args:
            step: taxonomy id of the key-step.
            also_done: steps taken as confirmed before it (a step still to be confirmed), for the steps the evidence
                does not cover.
            evidence: the detector's evidence as of the step's start.

        Returns:
            The verdict.
        """
        required = self.graph.preconditions(step)
        real = min(max(float(evidence.real), 0.0), 1.0)  # a scalar: np.clip costs more than the rest of the verdict
        if not required:  # not a step of the graph: the protocol counts it as a mistake if it really happened
            return ProbableVerdict(int(step), real >= self.threshold, (), True, probability=real)
        pending = sorted((p for p in required if p != START), key=self._order.__getitem__)
        merged = tuple(p for p in pending if p in self._reported)
        checked = [p for p in pending if p not in self._reported]
        if not checked:  # every pre-condition named before (a replayed history's repeats): formula (2) is 0
            return ProbableVerdict(int(step), False, (), False, probability=0.0, merged=merged)
        extra = {s for s in also_done if self.graph.preconditions(s)}
        q = np.array([self._done_evidence(p, evidence, extra) for p in checked], dtype=np.float64)
        skip = skip_probability(q, self.prior_skip)
        probability = alert_probability(real, skip)
        is_mistake = probability >= self.threshold
        missing: tuple[Node, ...] = ()
        if is_mistake:
            likely = [p for p, s in zip(checked, skip, strict=True) if s >= 0.5]
            missing = tuple(likely) if likely else (checked[int(np.argmax(skip))],)
        pairs = tuple((p, round(float(s), 6)) for p, s in zip(checked, skip, strict=True))
        return ProbableVerdict(int(step), is_mistake, missing, False, probability=probability, skip=pairs,
                               merged=merged)

    def _done_evidence(self, step: Node, evidence: StepEvidence, extra: set[int]) -> float:
        """``q_p`` of one pre-condition: the detector's if it sent one, else what the confirmed steps say."""
        if isinstance(step, int) and step in evidence.done:
            return evidence.done[step]
        return 1.0 if step in self._seen or step in extra else 0.0

    def never_done(self, required: Iterable[int], evidence: StepEvidence = NO_EVIDENCE) -> list[tuple[int, float]]:
        """The required steps more likely skipped than the threshold allows, at the end of a session.

        Args:
            required: the steps an ended session must have done (not optional, not removed), in graph order.
            evidence: the detector's evidence at the end (its last heartbeat).

        Returns:
            ``[(step, P(skipped))]`` by formula (1), in the order given, for those reaching the threshold.
        """
        steps = [int(s) for s in required]
        q = np.array([self._done_evidence(s, evidence, set()) for s in steps], dtype=np.float64)
        skip = skip_probability(q, self.prior_skip)
        return [(s, float(p)) for s, p in zip(steps, skip, strict=True) if p >= self.threshold]

    @property
    def done(self) -> tuple[int, ...]:
        """Steps recorded as done, in the order they were first observed."""
        return self.history.done

    @property
    def reported(self) -> frozenset[Node]:
        """Pre-conditions named by an alert of this session (not checked again: one omission, one alert)."""
        return frozenset(self._reported)

    def reset(self) -> None:
        """Forget everything observed, the reported pre-conditions too."""
        super().reset()
        self._reported.clear()

    def _forget(self) -> None:
        self.history.clear()

    @classmethod
    def replay(
        cls,
        graph: TaskGraph,
        steps: Iterable[int],
        threshold: float = DEFAULT_ALERT_THRESHOLD,
        prior_skip: float = DEFAULT_PRIOR_SKIP,
    ) -> ProbabilisticChecker:
        """A checker that has observed ``steps`` in order, without the detector's evidence (a recorded sequence
        scored offline; the live checker rebuilds a stream from its history with the evidence it still has)."""
        checker = cls(graph, threshold, prior_skip)
        for step in steps:
            checker.observe(step)
        return checker
