"""The live chain on one recorded stream of per-second features, in-process, with the live product's objects.

Second by second: the detector's live stepper (`recognition.model.FastStepper`, the GRU state carried from second to
second) gives the class probabilities and done states; the evidence reporter (`recognition.evidence.EvidenceReporter`,
what a detector stream sends beside each key-step) takes them; the online segmenter
(`recognition.segmenter.OnlineSegmenter`) confirms key-steps; each confirmed key-step goes, with the evidence as it
stood before its first second, to the stream's pre-condition checker (`graphs.checker_settings.CheckerSettings.new`:
the object the live checker and ``prego-bench`` run). At the end the checker names the required steps never done, with
the evidence at the end (the live ``missing`` report). This is what ``stream-detect`` computes for a feature file,
minus the ZeroMQ hops between the detector and the checker processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from graphs.checker import NO_EVIDENCE, StepEvidence
from graphs.checker_settings import CheckerSettings
from graphs.order_rules import required_steps
from graphs.task_graph import TaskGraph
from recognition.evidence import EvidenceModel, EvidenceReporter
from recognition.model import FastStepper
from recognition.segmenter import OnlineSegmenter, SegmenterConfig, SegmentEvent


@dataclass(frozen=True)
class LiveAlert:
    """One alert of the checker.

    Attributes:
        step: the step alerted (done before a pre-condition).
        missing: the pre-conditions it names.
        time: seconds from the stream's start at which it went out (the second that confirmed the step has ended).
        probability: how likely the checker finds it right.
        index: position of the step among the recognised ones.
        retracted: withdrawn later (never, for an alert on a confirmed key-step).
    """

    step: int
    missing: tuple[int, ...]
    time: float
    probability: float
    index: int
    retracted: bool = False


@dataclass(frozen=True)
class DetectorRun:
    """What the detector side of the chain sent for one recording: the confirmed key-steps with their evidence.

    Attributes:
        outputs: ``(T, outputs)`` the stepper's per-second outputs (class probabilities, then done states).
        recognised: the confirmed key-steps, in the order the segmenter emitted them.
        confirmed_at: per key-step, the second (from the start) at whose end the segmenter confirmed it.
        evidence: per key-step, the evidence sent with it (as it stood before its first second).
        end_evidence: the evidence at the end (the last heartbeat's).
    """

    outputs: np.ndarray
    recognised: tuple[SegmentEvent, ...]
    confirmed_at: tuple[float, ...]
    evidence: tuple[StepEvidence, ...]
    end_evidence: StepEvidence


@dataclass(frozen=True)
class ChainRun:
    """What the chain did on one recording.

    Attributes:
        outputs: ``(T, outputs)`` the stepper's per-second outputs (class probabilities, then done states).
        recognised: the confirmed key-steps, in the order the segmenter emitted them.
        alerts: the checker's alerts.
        never_done: ``(step, P(skipped))`` of the required steps named never done at the end.
    """

    outputs: np.ndarray
    recognised: tuple[SegmentEvent, ...]
    alerts: tuple[LiveAlert, ...]
    never_done: tuple[tuple[int, float], ...]


def detect_stream(
    stepper: FastStepper,
    features: np.ndarray,
    class_step_ids: Sequence[int | None],
    segmenter: SegmenterConfig,
    evidence: EvidenceModel | None,
) -> DetectorRun:
    """The detector side, one second at a time: stepper, evidence reporter, online segmenter.

    Args:
        stepper: the detector's live stepper (reset here: the stream starts from zeros).
        features: ``(T, D)`` per-second features.
        class_step_ids: the detector's class -> step id (None: background).
        segmenter: the segmenter settings.
        evidence: the detector's evidence calibration (None: key-steps are sent without evidence).

    Returns:
        The `DetectorRun`.
    """
    stepper.reset()
    seg = OnlineSegmenter(segmenter, class_step_ids)
    reporter = EvidenceReporter(evidence, class_step_ids, segmenter.fps) if evidence is not None else None
    classes = len(class_step_ids)
    x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
    outputs = np.zeros((len(x), stepper.config.outputs), dtype=np.float32)
    recognised: list[SegmentEvent] = []
    confirmed_at: list[float] = []
    sent: list[StepEvidence] = []

    def confirm(event: SegmentEvent, second: int) -> None:
        ev = NO_EVIDENCE
        if reporter is not None:
            steps, q = reporter.done_before(event.start_frame)
            ev = StepEvidence.of(steps, q, reporter.real(event.step, event.confidence,
                                                          event.end_frame - event.start_frame))
        recognised.append(event)
        confirmed_at.append((second + 1) / segmenter.fps)
        sent.append(ev)

    for t in range(len(x)):
        outputs[t] = stepper.step(x[t])[0].numpy()
        if reporter is not None:
            reporter.update(outputs[t])
        for event in seg.update(outputs[t, :classes]):
            confirm(event, t)
    for event in seg.flush():
        confirm(event, len(x) - 1)
    end = StepEvidence.of(*reporter.done_now()) if reporter is not None else NO_EVIDENCE
    return DetectorRun(outputs, tuple(recognised), tuple(confirmed_at), tuple(sent), end)


def check_stream(run: DetectorRun, graph: TaskGraph, checking: CheckerSettings) -> ChainRun:
    """The checker side: each confirmed key-step, in the order sent, with its evidence, to a fresh checker of the
    stream; at the end the required steps it finds never done (the live ``missing`` report).

    Args:
        run: what the detector side sent.
        graph: the task graph.
        checking: which checker (probabilistic by default, as live).

    Returns:
        The `ChainRun`.
    """
    checker = checking.new(graph)
    alerts: list[LiveAlert] = []
    for index, (event, at, ev) in enumerate(zip(run.recognised, run.confirmed_at, run.evidence, strict=True)):
        verdict = checker.observe(event.step, ev)
        if verdict.is_mistake:
            missing = tuple(int(m) for m in verdict.missing if isinstance(m, int))
            alerts.append(LiveAlert(event.step, missing, at, float(verdict.probability), index))
    never = checker.never_done(required_steps(graph), run.end_evidence)
    return ChainRun(run.outputs, run.recognised, tuple(alerts), tuple((int(s), float(p)) for s, p in never))


def run_chain(
    stepper: FastStepper,
    features: np.ndarray,
    graph: TaskGraph,
    class_step_ids: Sequence[int | None],
    segmenter: SegmenterConfig,
    checking: CheckerSettings,
    evidence: EvidenceModel | None,
) -> ChainRun:
    """Run one recording through stepper, segmenter and checker (`detect_stream`, then `check_stream`).

    The checker never feeds back into the detector side, so checking the key-steps after the detector side has sent
    them all gives what checking each as it arrives gives.
    """
    return check_stream(detect_stream(stepper, features, class_step_ids, segmenter, evidence), graph, checking)
