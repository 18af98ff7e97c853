"""Scores of ``stream-detect eval``: what the live chain did on an annotated video, against its annotations.

Three questions, per video and in total:

- **Mistake detection.** An alert names a recognised segment (its step and time span). It is matched to the annotated
  segment of the same step it overlaps most (none: a false alarm). It is correct when that annotated segment is a
  mistake, under one of two rules, both reported:

  - ``graph``: the annotated step was done before its pre-conditions under the task graph, replaying the annotated
    order (what a perfect recogniser would make the checker say);
  - ``has_errors``: the annotation marks the segment ``has_errors`` (the datasets' own mistake labels).

  Precision = correct alerts / alerts raised (an early alert later retracted counts as raised: the person saw it),
  recall = annotated mistakes with a correct alert / annotated mistakes, F1 their harmonic mean. A figure with
  nothing to count is not measured (None, shown ``-``; `graphs.precision_recall`, the convention of every score):
  precision without an alert, recall and F1 without a mistake to find. Where the two rules disagree on a segment,
  `rule_disagreements` says so: a ``has_errors`` step the graph allows usually means the graph was learned from that
  very video.
- **Key-step recognition**: segment F1@{10, 25, 50} and the edit score (`recognition.segment_metrics`).
- **Alert latency**: for each annotated mistake caught, seconds from its annotated start to its first correct alert
  (negative: the alert came before the annotated start); the median and the 90th percentile over all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rich.table import Table

from graphs.checker import PreconditionChecker, precondition_violations
from graphs.precision_recall import f1_of, share, shown
from graphs.task_graph import TaskGraph
from recognition.segment_metrics import IOU_THRESHOLDS, MatchCounts, TimedSegment, edit_score, segment_matches

RULES = ("graph", "has_errors")


@dataclass(frozen=True)
class AnnotatedSegment:
    """One annotated key-step: step id, time span (s), and the annotation's ``has_errors`` flag."""

    step: int
    start: float
    end: float
    has_errors: bool = False


@dataclass(frozen=True)
class RaisedAlert:
    """One alert of the live chain on a video.

    Attributes:
        step: the step alerted.
        start: start (s) of the recognised segment it names.
        end: end (s) of that segment (for an early alert not confirmed by the end of the video: when it was raised).
        raised: video time (s) at which the alert was raised (the end of the frame that raised it).
        retracted: the alert was withdrawn later (an early alert whose step was not confirmed).
        missing: the pre-conditions it named as skipped.
        probability: the checker's probability that it is right (1 from the binary checker).
    """

    step: int
    start: float
    end: float
    raised: float
    retracted: bool = False
    missing: tuple[int, ...] = ()
    probability: float = 1.0


@dataclass(frozen=True)
class VideoRun:
    """What the live chain did on one annotated video (what the per-video cache stores).

    Attributes:
        video: its name.
        annotated: its annotated segments, time order.
        recognised: the key-steps the chain confirmed, in order.
        alerts: the alerts raised, in order.
        frames: frames read.
        confidences: the mean probability of each recognised segment (same order).
    """

    video: str
    annotated: tuple[AnnotatedSegment, ...]
    recognised: tuple[TimedSegment, ...]
    alerts: tuple[RaisedAlert, ...]
    frames: int = 0
    confidences: tuple[float, ...] = ()


@dataclass(frozen=True)
class MistakeCounts:
    """Alert counts under one rule: alerts raised, correct ones, annotated mistakes, those caught."""

    alerts: int = 0
    correct: int = 0
    mistakes: int = 0
    caught: int = 0

    def __add__(self, other: MistakeCounts) -> MistakeCounts:
        return MistakeCounts(self.alerts + other.alerts, self.correct + other.correct,
                             self.mistakes + other.mistakes, self.caught + other.caught)

    @property
    def precision(self) -> float | None:
        """Correct alerts / alerts; None when no alert was raised (nothing to count)."""
        return share(self.correct, self.alerts)

    @property
    def recall(self) -> float | None:
        """Caught mistakes / annotated mistakes; None when there is no mistake to find."""
        return share(self.caught, self.mistakes)

    @property
    def f1(self) -> float | None:
        """Harmonic mean of precision and recall; None without a mistake to find, 0 when mistakes raised no alert."""
        return f1_of(self.precision, self.recall)


@dataclass
class VideoScores:
    """The scores of one video, or of several added up (``video = "total"``)."""

    video: str
    mistakes: dict[str, MistakeCounts]
    segments: dict[float, MatchCounts]
    edit: list[float]  # one edit score per video: the total reports their mean
    latencies: list[float] = field(default_factory=list)  # graph rule: seconds from mistake start to alert
    retracted: int = 0
    frames: int = 0

    def __add__(self, other: VideoScores) -> VideoScores:
        return VideoScores(
            "total",
            {r: self.mistakes[r] + other.mistakes[r] for r in RULES},
            {k: self.segments[k] + other.segments[k] for k in IOU_THRESHOLDS},
            self.edit + other.edit,
            self.latencies + other.latencies,
            self.retracted + other.retracted,
            self.frames + other.frames,
        )


def annotated_mistakes(graph: TaskGraph, annotated: Sequence[AnnotatedSegment]) -> dict[str, np.ndarray]:
    """Which annotated segments are mistakes, under each rule.

    Args:
        graph: the task graph.
        annotated: the video's segments in time order.

    Returns:
        ``{"graph": bool array, "has_errors": bool array}``, one entry per segment.
    """
    return {
        "graph": precondition_violations(graph, [s.step for s in annotated]),
        "has_errors": np.array([s.has_errors for s in annotated], dtype=bool),
    }


@dataclass(frozen=True)
class RuleDisagreement:
    """An annotated segment that is a mistake under one rule and not the other.

    Attributes:
        video: the video.
        segment: the segment's index (time order).
        step: its step id.
        has_errors: whether the annotation marks it ``has_errors``.
        message: one line for the person, naming the step and what the graph says.
    """

    video: str
    segment: int
    step: int
    has_errors: bool
    message: str


def rule_disagreements(graph: TaskGraph, video: str, annotated: Sequence[AnnotatedSegment]) -> list[RuleDisagreement]:
    """The segments whose ``has_errors`` mark disagrees with the graph, replaying the annotated order.

    Args:
        graph: the task graph.
        video: the video's name (for the messages).
        annotated: its segments in time order.

    Returns:
        One entry per disagreeing segment, in time order.
    """
    checker = PreconditionChecker(graph)
    out = []
    for k, segment in enumerate(annotated):
        verdict = checker.observe(segment.step)
        if verdict.is_mistake == segment.has_errors:
            continue
        name = node_name(graph, segment.step)
        if segment.has_errors:
            needs = sorted(graph.preconditions(segment.step), key=graph.index)
            allowed = ", ".join(node_name(graph, n) for n in needs)
            message = (f"{video}: {name} is marked has_errors but the graph lets it follow {allowed}: "
                       "was the graph trained on this video?")
        elif verdict.undefined:
            message = (f"{video}: {name} is not marked has_errors but the graph defines no pre-condition for it "
                       "(a step it never saw), so the checker flags it")
        else:
            missing = ", ".join(node_name(graph, n) for n in verdict.missing)
            message = f"{video}: {name} is not marked has_errors but the graph needs {missing} before it"
        out.append(RuleDisagreement(video, k, segment.step, segment.has_errors, message))
    return out


def node_name(graph: TaskGraph, node: int | str) -> str:
    """A node's name in the graph, or its id when the graph does not know it."""
    return graph.name_of(node) if node in graph.nodes else str(node)


def match_alerts(alerts: Sequence[RaisedAlert], annotated: Sequence[AnnotatedSegment]) -> np.ndarray:
    """The annotated segment each alert names: same step, the largest overlap with the alert's span; -1 for none.

    Args:
        alerts: the alerts raised.
        annotated: the annotated segments.

    Returns:
        ``(len(alerts),)`` integer array of segment indices.
    """
    a = np.array([(x.start, x.end, x.step) for x in alerts], dtype=np.float64).reshape(-1, 3)
    g = np.array([(x.start, x.end, x.step) for x in annotated], dtype=np.float64).reshape(-1, 3)
    overlap = np.minimum(a[:, None, 1], g[None, :, 1]) - np.maximum(a[:, None, 0], g[None, :, 0])
    # An instantaneous span (an early alert raised on its first frame) still touches the segment it falls in.
    overlap = np.where((a[:, None, 2] == g[None, :, 2]) & (overlap >= 0), overlap, -1.0)
    best = overlap.argmax(axis=1) if g.shape[0] else np.zeros(a.shape[0], dtype=int)
    found = overlap[np.arange(a.shape[0]), best] >= 0 if g.shape[0] else np.zeros(a.shape[0], dtype=bool)
    return np.where(found, best, -1)


def score_video(run: VideoRun, graph: TaskGraph) -> VideoScores:
    """Every figure of one video.

    Args:
        run: what the live chain did, with the video's annotations.
        graph: the task graph the alerts were checked against.

    Returns:
        The video's scores.
    """
    mistakes = annotated_mistakes(graph, run.annotated)
    named = match_alerts(run.alerts, run.annotated)
    counts = {}
    latencies: list[float] = []
    for rule in RULES:
        is_mistake = mistakes[rule]
        correct = (named >= 0) & is_mistake[np.clip(named, 0, None)] if named.size else np.zeros(0, dtype=bool)
        caught = sorted({int(k) for k in named[correct]})
        counts[rule] = MistakeCounts(len(run.alerts), int(correct.sum()), int(is_mistake.sum()), len(caught))
        if rule == "graph":
            raised = np.array([a.raised for a in run.alerts])
            latencies = [float(raised[correct & (named == k)].min() - run.annotated[k].start) for k in caught]
    annotated = [TimedSegment(s.step, s.start, s.end) for s in run.annotated]
    return VideoScores(
        run.video,
        counts,
        {k: segment_matches(run.recognised, annotated, k) for k in IOU_THRESHOLDS},
        [edit_score([s.step for s in run.recognised], [s.step for s in annotated])],
        latencies,
        sum(a.retracted for a in run.alerts),
        run.frames,
    )


def video_detail(run: VideoRun, graph: TaskGraph) -> dict[str, Any]:
    """What happened on one video, for a person asking why its figures are what they are (``eval --json``).

    Args:
        run: what the live chain did.
        graph: the task graph (names, and the graph rule's mistakes).

    Returns:
        ``{"recognised": [...], "alerts": [...], "missed": [...]}``: every confirmed step (name, video start and end,
        confidence); every alert (step, the pre-conditions it named, the video time of the step, when it was raised,
        its probability, whether it was retracted, and whether it was right under each rule); every annotated
        mistake no alert caught (under each rule).
    """
    mistakes = annotated_mistakes(graph, run.annotated)
    named = match_alerts(run.alerts, run.annotated)
    confidences = run.confidences or (None,) * len(run.recognised)
    recognised = [{"step": s.step, "name": node_name(graph, s.step), "start": round(s.start, 3),
                   "end": round(s.end, 3), "confidence": None if c is None else round(c, 4)}
                  for s, c in zip(run.recognised, confidences, strict=True)]
    alerts = []
    for alert, k in zip(run.alerts, named.tolist(), strict=True):
        right = {rule: bool(k >= 0 and mistakes[rule][k]) for rule in RULES}
        alerts.append({"step": alert.step, "name": node_name(graph, alert.step), "missing": list(alert.missing),
                       "missing_names": [node_name(graph, m) for m in alert.missing],
                       "video_time": round(alert.start, 3), "raised": round(alert.raised, 3),
                       "probability": round(alert.probability, 4), "retracted": alert.retracted,
                       "annotated_segment": k if k >= 0 else None, "right": right})
    missed = []
    caught = set(named.tolist())
    for k, segment in enumerate(run.annotated):
        rules = [rule for rule in RULES if mistakes[rule][k]]
        if rules and k not in caught:
            missed.append({"segment": k, "step": segment.step, "name": node_name(graph, segment.step),
                           "start": round(segment.start, 3), "end": round(segment.end, 3), "rules": rules})
    return {"recognised": recognised, "alerts": alerts, "missed": missed}


def total(scores: Sequence[VideoScores]) -> VideoScores:
    """The sum of per-video scores (counts added, latencies pooled, edit scores kept for their mean)."""
    out = VideoScores("total", {r: MistakeCounts() for r in RULES}, {k: MatchCounts() for k in IOU_THRESHOLDS}, [])
    for score in scores:
        out = out + score
    return out


def latency_summary(latencies: Sequence[float]) -> tuple[float | None, float | None]:
    """Median and 90th percentile (linear interpolation) of alert latencies; None when no mistake was caught."""
    if not latencies:
        return None, None
    values = np.asarray(latencies, dtype=np.float64)
    return float(np.median(values)), float(np.percentile(values, 90))


def scores_json(score: VideoScores) -> dict[str, Any]:
    """The figures of one row as JSON (fractions in [0, 1], seconds, counts)."""
    median, p90 = latency_summary(score.latencies)
    return {
        "video": score.video,
        "frames": score.frames,
        "mistakes": {
            rule: {"alerts": c.alerts, "correct": c.correct, "mistakes": c.mistakes, "caught": c.caught,
                   "precision": c.precision, "recall": c.recall, "f1": c.f1}
            for rule, c in score.mistakes.items()
        },
        "retracted": score.retracted,
        "segment_f1": {f"{k:g}": c.f1 for k, c in score.segments.items()},
        "edit": float(np.mean(score.edit)) if score.edit else None,
        "latency_s": {"median": median, "p90": p90, "values": [round(x, 4) for x in score.latencies]},
    }


def _pct(x: float | None) -> str:
    return shown(None if x is None else 100 * x)


def count_of(n: int, noun: str) -> str:
    """``1 video``, ``2 videos``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def false_alarm_line(scores: Sequence[VideoScores]) -> str:
    """The figure a user switches a system off over: alerts that were not a mistake under the graph, per video.

    Args:
        scores: one entry per video.

    Returns:
        e.g. ``false alarms: 7 of 8 alerts (1.17 per video, retracted ones included)``.
    """
    graph = total(scores).mistakes["graph"]
    wrong = graph.alerts - graph.correct
    per_video = wrong / len(scores) if scores else 0.0
    return (f"false alarms: {wrong} of {count_of(graph.alerts, 'alert')} ({per_video:.2f} per video, retracted ones "
            "included)")


def unmeasured_notes(scores: Sequence[VideoScores]) -> list[str]:
    """One line per figure of the total that had nothing to count (shown ``-``), saying why.

    Args:
        scores: one entry per video.

    Returns:
        The lines, empty when every figure was measured.
    """
    summed = total(scores)
    graph, marked = summed.mistakes["graph"], summed.mistakes["has_errors"]
    these = "the video" if len(scores) == 1 else f"these {len(scores)} videos"
    notes = []
    if not graph.mistakes:
        notes.append(f"no mistake under the graph in the annotated order of {these}: R and F1 not measured")
    if not marked.mistakes:
        notes.append(f"no annotated mistake (has_errors) in {these}: R err and F1 err not measured")
    if not graph.alerts:
        notes.append(f"no alert raised in {these}: P and P err not measured")
    found = summed.segments[min(IOU_THRESHOLDS)]
    if found.tp + found.fp == 0 and found.fn > 0:  # a detector that never confirms a step cannot raise an alert
        notes.append(f"no key-step confirmed in {these}: the detector's probabilities never stayed above the "
                     "segmenter's --threshold for --min-frames (an undertrained detector can score a high test mAP "
                     "and still confirm nothing)")
    return notes


def _seconds(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2f}"


def eval_table(scores: Sequence[VideoScores], title: str) -> Table:
    """The per-video table of ``stream-detect eval``, with a total row (percentages, seconds).

    Args:
        scores: one entry per video.
        title: the table's title (the settings).

    Returns:
        A rich table.
    """
    table = Table(title=title, show_footer=False)
    for name in ("video", "alerts", "retracted", "P", "R", "F1", "P err", "R err", "F1 err", "F1@10", "F1@25",
                 "F1@50", "edit", "latency med s", "p90 s"):
        table.add_column(name, justify="left" if name == "video" else "right")
    rows = [*scores, total(scores)]
    for k, score in enumerate(rows):
        g, e = score.mistakes["graph"], score.mistakes["has_errors"]
        median, p90 = latency_summary(score.latencies)
        table.add_row(
            score.video, str(g.alerts), str(score.retracted),
            _pct(g.precision), _pct(g.recall), _pct(g.f1), _pct(e.precision), _pct(e.recall), _pct(e.f1),
            *(_pct(score.segments[t].f1) for t in IOU_THRESHOLDS),
            f"{np.mean(score.edit):.1f}" if score.edit else "-", _seconds(median), _seconds(p90),
            end_section=k == len(rows) - 2,
        )  # fmt: skip
    return table
