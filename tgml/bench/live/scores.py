"""What `tgml bench-live` scores, from one recording's alerts and never-done steps against its annotation.

Recognised steps are matched to annotated ones by step name. Per recording, the items judged are the steps it
performed (annotated) and the steps alerted that it did not perform; an item is a true order mistake when the
annotation tags that step Order Error, and predicted one when an alert (not retracted) names it as done too early:

- order mistakes: precision, recall and F1 of the mistake class, of the correct class, and their mean (Avg F1),
  pooled over recordings (`tgml.bench.mistake_bench.Counts`, the counts of ``tgml bench-mistakes``);
- missing steps: the steps named never done at the end against the steps tagged Missing Step;
- false alarms: alerts in recordings the annotation calls error-free, per such recording;
- latency: seconds from the annotated start of a caught step (of its first occurrence tagged Order Error, for a step
  done twice) to its first alert (negative for an alert that came before it: right by the rule, which judges steps,
  not times; `LiveCounts.metrics` counts those).

The same counts of the annotated steps replayed against a graph (`annotated_counts`) are printed beside: what
perfect recognition would give.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from graphs.order_rules import PRECONDITION
from graphs.task_graph import TaskGraph
from tgml.bench.error_annotations import ErrorRecording
from tgml.bench.mistake_bench import Counts, recording_counts


@dataclass
class LiveCounts:
    """Counts of several recordings: `Counts` plus the error-free recordings, their alerts and the latencies."""

    counts: Counts = field(default_factory=Counts)
    error_free: int = 0
    false_alarms: int = 0
    latencies: list[float] = field(default_factory=list)

    def __iadd__(self, other: LiveCounts) -> LiveCounts:
        self.counts += other.counts
        self.error_free += other.error_free
        self.false_alarms += other.false_alarms
        self.latencies += other.latencies
        return self

    def metrics(self) -> dict[str, float | None]:
        """Percent scores of `Counts.metrics`, false alarms per error-free recording, median and mean latency, and
        how many right alerts came before their step's annotated start."""
        out = dict(self.counts.metrics())
        out["false_alarms_per_error_free"] = self.false_alarms / self.error_free if self.error_free else None
        out["latency_median_s"] = float(np.median(self.latencies)) if self.latencies else None
        out["latency_mean_s"] = float(np.mean(self.latencies)) if self.latencies else None
        # A right alert may precede its step (an order-mistake step recognised, wrongly then, before the person did
        # it): the rule scores steps, not times, so say how many of the catches were early.
        out["caught_before_start"] = float(sum(t < 0 for t in self.latencies)) if self.latencies else None
        return out


def live_counts(
    recording: ErrorRecording,
    error_free: bool,
    alerted: Sequence[tuple[str, float]],
    never_done: Iterable[int],
    names: dict[int, str],
) -> LiveCounts:
    """The counts of one recording's live run (see the module docstring).

    Args:
        recording: its annotation.
        error_free: the annotation calls it error-free.
        alerted: ``(step name, time)`` of every alert that was not retracted, in time order.
        never_done: step ids named never done at the end.
        names: step id -> name.

    Returns:
        The counts.
    """
    performed = {p.name for p in recording.performed}
    tagged = {p.name for p in recording.performed if p.order_error}
    # A caught step's latency runs from its first occurrence tagged Order Error: a step done twice, in order and then
    # out of it (scrambledeggs' 16_39 adds garlic twice), was timed from the occurrence that was no mistake.
    start: dict[str, float] = {}
    for p in recording.performed:
        if p.order_error:
            start.setdefault(p.name, p.start)
    first: dict[str, float] = {}
    for name, time in alerted:
        first.setdefault(name, time)
    alerts = set(first)
    items = performed | alerts
    caught = alerts & tagged
    missing_names = {names[s] for s in recording.missing}
    named = {names[s] for s in never_done}
    counts = Counts(steps=len(items), order_errors=len(tagged), alerts=len(alerts), caught=len(caught),
                    missing_tagged=len(missing_names), missing_named=len(named),
                    missing_right=len(named & missing_names))
    tags = {p.name: p.tags for p in recording.performed}
    other = {n for n, t in tags.items() if t and n not in tagged}
    counts.other_error_steps = len(other)
    counts.other_error_alerts = len(alerts & other)
    counts.untagged_alerts = len(alerts - {n for n, t in tags.items() if t})
    return LiveCounts(counts, int(error_free), len(alerts) if error_free else 0,
                      [first[n] - start[n] for n in sorted(caught)])


def annotated_counts(graph: TaskGraph, recording: ErrorRecording, error_free: bool,
                     rule: str = PRECONDITION) -> LiveCounts:
    """The counts of the annotated steps replayed in time order against ``graph`` (binary checker; the pre-condition
    rule is DERIVATION.md's reference, ``rule`` the live chain's): what perfect recognition would score. Latency is
    not measured (no recognition)."""
    counts = recording_counts(graph, recording, rule)
    return LiveCounts(counts, int(error_free), counts.alerts if error_free else 0)
