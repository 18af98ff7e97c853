"""Scores of ``stream-detect eval``: what the live chain did on an annotated video, against its annotations.

Three questions, per video and in total:

- **Mistake detection.** An alert names a recognised segment (its step and time span). It is matched to the annotated
  segment of the same step it overlaps most (none: a false alarm). It is correct when that annotated segment is a
  mistake, under one of two rules, both reported:

  - ``graph``: the annotated step was done before its pre-conditions under the task graph, replaying the annotated
    order (what a perfect recogniser would make the checker say);
  - ``has_errors``: the annotation marks the segment ``has_errors`` (the datasets' own mistake labels).

  Only the alerts that **stand at the end** count, the rule of the live view's end-of-stream verdict
  (`streaming.session_verdict`): an early alert later retracted is no mistake of the session, so it is neither a
  catch nor a false alarm; `VideoScores.retracted` counts those, and how many of them named a real mistake
  (``withdrawn``: a catch the checker took back). Precision = correct standing alerts / standing alerts, recall =
  annotated mistakes with a correct standing alert / annotated mistakes, F1 their harmonic mean. A figure with
  nothing to count is not measured (None, shown ``-``; `graphs.precision_recall`, the convention of every score):
  precision without an alert, recall and F1 without a mistake to find. Where the two rules disagree on a segment,
  `rule_disagreements` says so: a ``has_errors`` step the graph allows usually means the graph was learned from that
  very video.
- **Key-step recognition**: segment F1@{10, 25, 50} and the edit score (`recognition.segment_metrics`).
- **Alert latency**: for each annotated mistake caught, seconds from its annotated start to its first correct alert
  (negative: the alert came before the annotated start); the median and the 90th percentile over all of them.

``eval --json`` says why, per video: the checker's verdict on every confirmed step, alert or no alert (`StepCheck`:
the probability that a pre-condition was skipped), and for every annotated mistake not caught, the reason
(`why_missed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rich.table import Table

from graphs.annotations import read_left_out, read_train_videos
from graphs.checker import PreconditionChecker, StepVerdict, precondition_violations
from graphs.common.safe_text import count_of, wrap_words
from graphs.precision_recall import f1_of, share, shown
from graphs.probabilistic_checker import ProbableVerdict
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
        retracted: the alert was withdrawn later (an early alert whose step was not confirmed, or confirmed and no
            longer found a mistake with the whole step seen): it does not stand at the end, and counts for nothing.
        missing: the pre-conditions it named as skipped.
        probability: the checker's probability that it is right (1 from the binary checker).
        reason: why it was retracted (`streaming.session_verdict.retraction_reason`; "" when it stands).
    """

    step: int
    start: float
    end: float
    raised: float
    retracted: bool = False
    missing: tuple[int, ...] = ()
    probability: float = 1.0
    reason: str = ""


@dataclass(frozen=True)
class StepCheck:
    """The checker's verdict on one confirmed key-step, alert or no alert.

    Attributes:
        probability: the probability that the step was done before one of its pre-conditions: formula (2) of
            `graphs.probabilistic_checker` (the detection is real and a pre-condition skipped); 1 or 0 from the
            binary checker. The checker alerts when it reaches ``--alert-threshold``.
        alerted: the checker found the step a mistake.
        skipped: ``(pre-condition, P(skipped))`` of each pre-condition checked, formula (1) (binary checker: each
            missing one at 1).
        already_named: pre-conditions not checked again because an earlier alert of the session named them.
    """

    probability: float
    alerted: bool
    skipped: tuple[tuple[int, float], ...] = ()
    already_named: tuple[int, ...] = ()


def step_check(verdict: StepVerdict) -> StepCheck:
    """A checker's verdict on a step (`graphs.checker.StepVerdict`, or the probabilistic checker's) as a `StepCheck`."""
    if isinstance(verdict, ProbableVerdict):
        return StepCheck(verdict.probability, verdict.is_mistake, tuple((int(p), q) for p, q in verdict.skip),
                         tuple(int(p) for p in verdict.merged))
    return StepCheck(verdict.probability, verdict.is_mistake, tuple((int(p), 1.0) for p in verdict.missing))


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
        checks: the checker's verdict on each recognised segment (same order; empty when not kept).
        never_done: the required steps the session's end report named never done.
        verdict: the session's end-of-stream verdict in the live view's words (`streaming.session_verdict`).
        annotated_never_done: the steps its annotation marks never done; None when the annotation file marks no
            step so (the end report is then not scored).
    """

    video: str
    annotated: tuple[AnnotatedSegment, ...]
    recognised: tuple[TimedSegment, ...]
    alerts: tuple[RaisedAlert, ...]
    frames: int = 0
    confidences: tuple[float, ...] = ()
    checks: tuple[StepCheck, ...] = ()
    never_done: tuple[int, ...] = ()
    verdict: str = ""
    annotated_never_done: tuple[int, ...] | None = None


@dataclass(frozen=True)
class MistakeCounts:
    """Alert counts under one rule: alerts standing at the end (not retracted), correct ones, annotated mistakes,
    those caught by a correct standing alert."""

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
    withdrawn: int = 0  # retracted alerts that named a mistake (graph rule): catches the checker took back
    # The end report against the steps annotated never done: `MistakeCounts` with "alerts" the steps named never done
    # and "mistakes" the steps annotated so (`missing_counts`), over ``missing_videos`` videos scored.
    missing: MistakeCounts = field(default_factory=MistakeCounts)
    missing_videos: int = 0
    unscored_never_done: int = 0  # steps named never done in videos whose annotation marks none so (not scored)

    def __add__(self, other: VideoScores) -> VideoScores:
        return VideoScores(
            "total",
            {r: self.mistakes[r] + other.mistakes[r] for r in RULES},
            {k: self.segments[k] + other.segments[k] for k in IOU_THRESHOLDS},
            self.edit + other.edit,
            self.latencies + other.latencies,
            self.retracted + other.retracted,
            self.frames + other.frames,
            self.withdrawn + other.withdrawn,
            self.missing + other.missing,
            self.missing_videos + other.missing_videos,
            self.unscored_never_done + other.unscored_never_done,
        )


def missing_counts(named: Sequence[int], annotated: Sequence[int]) -> MistakeCounts:
    """The end report's never-done steps (``named``) against the steps annotated never done, as `MistakeCounts`:
    precision = right / named, recall = right / annotated (bench-live's missing-step scores)."""
    right = len(set(named) & set(annotated))
    return MistakeCounts(len(set(named)), right, len(set(annotated)), right)


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


def rule_disagreements(graph: TaskGraph, video: str, annotated: Sequence[AnnotatedSegment],
                       learned: bool | None = None) -> list[RuleDisagreement]:
    """The segments whose ``has_errors`` mark disagrees with the graph, replaying the annotated order.

    Args:
        graph: the task graph.
        video: the video's name (for the messages).
        annotated: its segments in time order.
        learned: whether the graph learned from this video, as eval matched it (by content where the graph records
            identities: `streaming.offline.eval_run.trained_on`); None: by its name in ``train_videos``.

    Returns:
        One entry per disagreeing segment, in time order.
    """
    checker = PreconditionChecker(graph)
    # The videos the graph file says its learner left out (`tgml train`'s mistakes and --exclude-videos), or, where it
    # lists those it learned from (`train_videos`), any other: a file of another set of videos holds none of them.
    left_out = read_left_out(graph.info.get("left_out")) or {}
    listed = read_train_videos(graph.info.get("train_videos"))
    if learned is None and listed is not None:
        learned = video in listed
    learned_without = learned is False or (learned is None and any(video in names for names in left_out.values()))
    learned_from = learned is True
    out = []
    for k, segment in enumerate(annotated):
        verdict = checker.observe(segment.step)
        if verdict.is_mistake == segment.has_errors:
            continue
        name = node_name(graph, segment.step)
        if segment.has_errors:
            needs = sorted(graph.preconditions(segment.step), key=graph.index)
            allowed = ", ".join(node_name(graph, n) for n in needs)
            if learned_without:
                why = "the graph was learned without this video, so the pre-condition rule does not see this error"
            elif learned_from:
                why = ("the graph was learned from this video (its train_videos), so it takes this order for a "
                       "correct one")
            else:
                why = "was the graph trained on this video?"
            message = f"{video}: {name} is marked has_errors but the graph lets it follow {allowed}: {why}"
        elif verdict.undefined:
            message = (f"{video}: {name} is not marked has_errors but the graph defines no pre-condition for it "
                       "(a step it never saw), so the checker flags it")
        else:
            missing = ", ".join(node_name(graph, n) for n in verdict.missing)
            message = f"{video}: {name} is not marked has_errors but the graph needs {missing} before it"
        out.append(RuleDisagreement(video, k, segment.step, segment.has_errors, message))
    return out


DISAGREEMENTS_SHOWN = 5  # warning lines about rules that disagree; the rest counted (--json lists them all)


def disagreement_lines(disagreements: Sequence[RuleDisagreement], shown: int = DISAGREEMENTS_SHOWN) -> list[str]:
    """The warning lines of `rule_disagreements`: each message once (a step repeated in a video, as CaptainCook4D's
    are, made the same line twice), the first ``shown`` of them, then how many more.

    Args:
        disagreements: every disagreement, in the order to tell them.
        shown: the lines written out.
    """
    messages = list(dict.fromkeys(d.message for d in disagreements))
    lines = messages[:shown]
    if len(messages) > shown:
        lines.append(f"and {len(messages) - shown} more segments on which has_errors and the graph disagree (--json "
                     "lists every one, as each video's rule_disagreements)")
    return lines


def node_name(graph: TaskGraph, node: int | str) -> str:
    """A node's name in the graph, or its id when the graph does not know it."""
    return graph.name_of(node) if node in graph.nodes else str(node)


def match_alerts(
    alerts: Sequence[RaisedAlert] | Sequence[TimedSegment], annotated: Sequence[AnnotatedSegment]
) -> np.ndarray:
    """The annotated segment each alert (or recognised segment) names: same step, the largest overlap with its span;
    -1 for none.

    Args:
        alerts: the alerts raised (or the segments recognised).
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
    standing = np.array([not a.retracted for a in run.alerts], dtype=bool)
    counts = {}
    latencies: list[float] = []
    withdrawn = 0
    for rule in RULES:
        right = _right(named, mistakes[rule])
        correct = right & standing  # a retracted alert is no catch: the session's verdict does not name it
        caught = sorted({int(k) for k in named[correct]})
        counts[rule] = MistakeCounts(int(standing.sum()), int(correct.sum()), int(mistakes[rule].sum()), len(caught))
        if rule == "graph":
            raised = np.array([a.raised for a in run.alerts])
            latencies = [float(raised[correct & (named == k)].min() - run.annotated[k].start) for k in caught]
            withdrawn = int((right & ~standing).sum())
    annotated = [TimedSegment(s.step, s.start, s.end) for s in run.annotated]
    scored = run.annotated_never_done is not None
    return VideoScores(
        run.video,
        counts,
        {k: segment_matches(run.recognised, annotated, k) for k in IOU_THRESHOLDS},
        [edit_score([s.step for s in run.recognised], [s.step for s in annotated])],
        latencies,
        sum(a.retracted for a in run.alerts),
        run.frames,
        withdrawn,
        missing_counts(run.never_done, run.annotated_never_done or ()) if scored else MistakeCounts(),
        int(scored),
        0 if scored else len(set(run.never_done)),
    )


def _right(named: np.ndarray, is_mistake: np.ndarray) -> np.ndarray:
    """Which alerts name an annotated mistake (``named``: `match_alerts`; ``is_mistake``: one rule's)."""
    return (named >= 0) & is_mistake[np.clip(named, 0, None)] if named.size else np.zeros(0, dtype=bool)


def video_detail(run: VideoRun, graph: TaskGraph) -> dict[str, Any]:
    """What happened on one video, for a person asking why its figures are what they are (``eval --json``).

    Args:
        run: what the live chain did.
        graph: the task graph (names, and the graph rule's mistakes).

    Returns:
        ``{"verdict", "never_done", "recognised", "alerts", "missed"}``: the session's end-of-stream verdict as the
        live view words it; the required steps it never did; every confirmed step (name, video start and end,
        confidence, and the checker's verdict on it, alert or no alert: ``checker``, `check_json`); every alert (step,
        the pre-conditions it named, the video time of the step, when it was raised, its probability, whether it was
        retracted, whether it stands at the end, and whether it was right under each rule); every annotated mistake
        no standing alert caught (under each rule), with ``why`` it was missed (`why_missed`).
    """
    mistakes = annotated_mistakes(graph, run.annotated)
    named = match_alerts(run.alerts, run.annotated)
    confidences = run.confidences or (None,) * len(run.recognised)
    checks: Sequence[StepCheck | None] = run.checks or (None,) * len(run.recognised)
    recognised = [{"step": s.step, "name": node_name(graph, s.step), "start": round(s.start, 3),
                   "end": round(s.end, 3), "confidence": None if c is None else round(c, 4),
                   "checker": None if check is None else check_json(check, graph)}
                  for s, c, check in zip(run.recognised, confidences, checks, strict=True)]
    alerts = []
    for alert, k in zip(run.alerts, named.tolist(), strict=True):
        right = {rule: bool(k >= 0 and mistakes[rule][k]) for rule in RULES}
        alerts.append({"step": alert.step, "name": node_name(graph, alert.step), "missing": list(alert.missing),
                       "missing_names": [node_name(graph, m) for m in alert.missing],
                       "video_time": round(alert.start, 3), "raised": round(alert.raised, 3),
                       "probability": round(alert.probability, 4), "retracted": alert.retracted,
                       "retraction_reason": alert.reason or None, "stands": not alert.retracted,
                       "annotated_segment": k if k >= 0 else None, "right": right})
    missed = []
    caught = {k for alert, k in zip(run.alerts, named.tolist(), strict=True) if not alert.retracted}
    for k, segment in enumerate(run.annotated):
        rules = [rule for rule in RULES if mistakes[rule][k]]
        if rules and k not in caught:
            missed.append({"segment": k, "step": segment.step, "name": node_name(graph, segment.step),
                           "start": round(segment.start, 3), "end": round(segment.end, 3), "rules": rules,
                           "why": why_missed(run, graph, k)})
    return {"verdict": run.verdict, "never_done": [node_name(graph, s) for s in run.never_done],
            "recognised": recognised, "alerts": alerts, "missed": missed}


def check_json(check: StepCheck, graph: TaskGraph) -> dict[str, Any]:
    """The checker's verdict on a confirmed step as JSON: ``p_skipped`` (the probability that the step was done
    before one of its pre-conditions, `StepCheck.probability`), ``alerted``, each pre-condition checked with its
    own ``p_skipped``, and the pre-conditions an earlier alert had named already (not checked again)."""
    return {
        "p_skipped": round(check.probability, 4),
        "alerted": check.alerted,
        "preconditions": [{"step": p, "name": node_name(graph, p), "p_skipped": round(q, 4)} for p, q in check.skipped],
        "already_named": [node_name(graph, p) for p in check.already_named],
    }


def why_missed(run: VideoRun, graph: TaskGraph, segment: int) -> str:
    """One sentence on why an annotated mistake has no standing alert: raised and retracted, not recognised, or
    recognised and found no mistake by the checker (with its probability, and which factor of it kept it low:
    `below_threshold_cause`).

    Args:
        run: what the live chain did.
        graph: the task graph.
        segment: the annotated mistake's index.

    Returns:
        The sentence.
    """
    annotated = run.annotated[segment]
    name = node_name(graph, annotated.step)
    withdrawn = [a for a, k in zip(run.alerts, match_alerts(run.alerts, run.annotated).tolist(), strict=True)
                 if k == segment and a.retracted]
    if withdrawn:
        first = withdrawn[0]
        why = first.reason or "the alert no longer held"
        return (f"alerted at {first.raised:.1f} s (P {first.probability:.2f}), then retracted ({why}), so the "
                "session's verdict does not name it")
    found = [j for j, k in enumerate(match_alerts(run.recognised, run.annotated).tolist()) if k == segment]
    if not found:
        return (f"not recognised: the detector confirmed no {name} over {annotated.start:.1f}-{annotated.end:.1f} s "
                "(see 'recognised'; --threshold and --min-frames set what it confirms)")
    seen = run.recognised[found[0]]
    check = run.checks[found[0]] if run.checks else None
    if check is None:
        return f"recognised at {seen.start:.1f}-{seen.end:.1f} s, and the checker raised no alert on it"
    if check.alerted:
        return (f"recognised at {seen.start:.1f}-{seen.end:.1f} s and found a mistake (p_skipped "
                f"{check.probability:.2f}), but its alert did not name this segment")
    if check.already_named and not check.skipped:
        return (f"recognised at {seen.start:.1f}-{seen.end:.1f} s; its missing pre-condition "
                f"{', '.join(node_name(graph, p) for p in check.already_named)} was named by an earlier alert, "
                "so it is not alerted twice")
    return (f"recognised at {seen.start:.1f}-{seen.end:.1f} s, but the checker put the probability that it was done "
            f"before a pre-condition at {check.probability:.2f} (p_skipped), below --alert-threshold"
            f"{below_threshold_cause(check, graph, name)}{named_before(run, graph, check)}")


def named_before(run: VideoRun, graph: TaskGraph, check: StepCheck) -> str:
    """The tail of `why_missed`'s sentence for a step whose other pre-conditions an earlier alert named (one alert per
    omission, whichever step needs it: they are not checked again), each with the alert that named it, its time and
    whether it matched an annotated mistake ("" when none was named). Without it the sentence blamed only the
    pre-conditions still checked, and a user looking for the omission the mistake was about found no word of it (an
    alert on a detection 5 ms before the annotated step).
    """
    if not check.already_named:
        return ""
    again = f"{'is' if len(check.already_named) == 1 else 'are'} not checked again"
    mistakes = annotated_mistakes(graph, run.annotated)
    clauses: list[str] = []
    left = list(check.already_named)
    # Each pre-condition with the alert that named it: two alerts can have named one each (a step that needs them
    # both, or two steps that share one), and the first alert named only its own.
    for alert, k in zip(run.alerts, match_alerts(run.alerts, run.annotated).tolist(), strict=True):
        named = [p for p in left if p in alert.missing]
        if alert.retracted or not named:
            continue
        left = [p for p in left if p not in named]
        step_name = node_name(graph, alert.step)  # the alert's: another step that needs the pre-condition names it
        # Matched to a segment is no catch by itself: the segment must be a mistake under the rule it is scored by.
        wrong_in = [rule for rule in RULES if k >= 0 and mistakes[rule][k]]
        if k < 0:
            scored = f"it overlaps no annotated {step_name}: scored a false alarm"
        elif not wrong_in:
            scored = (f"matched to the {step_name} annotated at {run.annotated[k].start:.1f} s, which is no mistake: "
                      "scored a false alarm")
        else:
            scored = f"scored against the {step_name} annotated at {run.annotated[k].start:.1f} s" + (
                f", a mistake under the {wrong_in[0]} rule only" if len(wrong_in) < len(RULES) else "")
        clauses.append(f"{' and '.join(node_name(graph, p) for p in named)} had been named by an earlier alert, "
                       f"raised at {alert.raised:.1f} s on a detection of {step_name} at {alert.start:.1f}-"
                       f"{alert.end:.1f} s ({scored})")
    if left:  # no alert of the run names it: said without one
        clauses.append(f"{' and '.join(node_name(graph, p) for p in left)} had been named by an earlier alert")
    return f"; {'; '.join(clauses)}, and {again}"


def below_threshold_cause(check: StepCheck, graph: TaskGraph, name: str) -> str:
    """Which factor of formula (2) of `graphs.probabilistic_checker` kept a checked step below the threshold, as the
    tail of `why_missed`'s sentence ("" when the checker weighed nothing).

    The probability is ``r * s``: ``r`` the probability that the step's own detection is real, ``s = 1 - prod(1 -
    p_skipped)`` that one of its pre-conditions was skipped. `StepCheck` keeps the product and each pre-condition's
    ``p_skipped``, so ``r = probability / s``. A factor below 0.5 says "more likely not" (the checker's own rule for
    naming a pre-condition skipped): pre-conditions the evidence called done, or a detection of the step that is
    more likely spurious. Naming the likeliest-skipped pre-condition as done whatever its value told a user that a
    pre-condition at p_skipped 0.57 (more likely skipped) was the cause, when the step's own detection was.

    Args:
        check: the checker's verdict on the step (not alerted).
        graph: the task graph (for names).
        name: the step's name.

    Returns:
        e.g. ``: the detector's evidence said fill_kettle was done (p_skipped 0.03)``.
    """
    if not check.skipped:  # the binary checker found nothing missing, or nothing was checked
        return ""
    any_skipped = 1.0 - float(np.prod([1.0 - q for _, q in check.skipped]))
    real = min(check.probability / any_skipped, 1.0) if any_skipped > 0.0 else 1.0
    listed = [f"{node_name(graph, p)} (p_skipped {q:.2f})" for p, q in check.skipped]
    doubtful = f"the detection of {name} itself was doubtful (probability it was real {real:.2f})"
    if any_skipped < 0.5:
        cause = f": the detector's evidence said {' and '.join(listed)} {'was' if len(listed) == 1 else 'were'} done"
        return cause + (f", and {doubtful}" if real < 0.5 else "")
    likely = [text for (_, q), text in zip(check.skipped, listed, strict=True) if q >= 0.5]
    suspected = (f"the detector's evidence said {' and '.join(likely)} {'was' if len(likely) == 1 else 'were'} more "
                 "likely skipped than done" if likely else
                 f"the detector's evidence put the probability that one of {', '.join(listed)} was skipped at "
                 f"{any_skipped:.2f}")
    if real < 0.5:
        return f": {doubtful}, though {suspected}"
    return f": {suspected}, and the detection of {name} was real at {real:.2f}; together they fall short"


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
        "withdrawn": score.withdrawn,
        "segment_f1": {f"{k:g}": c.f1 for k, c in score.segments.items()},
        "edit": float(np.mean(score.edit)) if score.edit else None,
        "latency_s": {"median": median, "p90": p90, "values": [round(x, 4) for x in score.latencies]},
        "missing_steps": None if not score.missing_videos else {
            "named": score.missing.alerts, "right": score.missing.correct, "annotated": score.missing.mistakes,
            "precision": score.missing.precision, "recall": score.missing.recall, "f1": score.missing.f1,
            "videos": score.missing_videos},
    }


def _pct(x: float | None) -> str:
    return shown(None if x is None else 100 * x)


def false_alarm_line(scores: Sequence[VideoScores]) -> str:
    """The figure a user switches a system off over: standing alerts that were not a mistake under the graph, per
    video, and the retracted alerts beside them (seen, then withdrawn: counted in neither precision nor recall).

    Args:
        scores: one entry per video.

    Returns:
        e.g. ``false alarms: 7 of 8 alerts standing at the end (1.17 per video); 2 retracted, 1 of them on a real
        mistake``.
    """
    summed = total(scores)
    graph = summed.mistakes["graph"]
    wrong = graph.alerts - graph.correct
    per_video = wrong / len(scores) if scores else 0.0
    line = f"false alarms: {wrong} of {count_of(graph.alerts, 'alert')} standing at the end ({per_video:.2f} per video)"
    if summed.retracted:
        line += (f"; {summed.retracted} retracted (not counted: a retracted alert is no mistake of the session), "
                 f"{summed.withdrawn} of them on a real mistake")
    return line


def missing_steps_line(scores: Sequence[VideoScores]) -> str | None:
    """The end report against the steps annotated never done (a segment with ``start_time == end_time < 0``, as
    CaptainCook4D marks a Missing Step); None when no video's annotation marks any (`unmeasured_notes` says so
    when the end report named steps).

    Returns:
        e.g. ``missing steps at the end (10 videos scored): 3 named never done, 2 of them right; 4 annotated never
        done (P 66.7, R 50.0, F1 57.1)``.
    """
    summed = total(scores)
    if not summed.missing_videos:
        return None
    m = summed.missing
    return (f"missing steps at the end ({count_of(summed.missing_videos, 'video')} scored): {m.alerts} named never "
            f"done, {m.correct} of them right; {m.mistakes} annotated never done (P {_pct(m.precision)}, "
            f"R {_pct(m.recall)}, F1 {_pct(m.f1)})")


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
        withdrawn = f" ({summed.retracted} raised and retracted)" if summed.retracted else ""
        notes.append(f"no alert standing at the end in {these}{withdrawn}: P and P err not measured")
    if summed.unscored_never_done:
        notes.append(f"the end report named {count_of(summed.unscored_never_done, 'step')} never done; the annotations "
                     "of the graph's scenario mark no step never done (start_time = end_time < 0, as CaptainCook4D's "
                     "Missing Steps): not scored")
    if summed.missing_videos and not summed.missing.mistakes:
        notes.append(f"no step annotated never done in {these}: missing-step R and F1 not measured")
    if summed.missing_videos and not summed.missing.alerts:
        notes.append(f"the end report named no step never done in {these}: missing-step P not measured")
    found = summed.segments[min(IOU_THRESHOLDS)]
    if found.tp + found.fp == 0 and found.fn > 0:  # a detector that never confirms a step cannot raise an alert
        notes.append(f"no key-step confirmed in {these}: the detector's probabilities never stayed above the "
                     "segmenter's --threshold for --min-frames (an undertrained detector can score a high test mAP "
                     "and still confirm nothing)")
    return notes


def _seconds(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2f}"


# The columns of eval's table, whose names the lines of a narrow terminal and the notes under both use too.
COLUMNS: tuple[str, ...] = ("video", "alerts", "retracted", "P", "R", "F1", "P err", "R err", "F1 err", "F1@10",
                            "F1@25", "F1@50", "edit", "latency med s", "p90 s")


# What `COLUMNS` mean, said under the table and under its lines: the two sets of P / R / F1 were told apart only in
# docs/evaluation.md, and "P err" reads as an error margin.
LEGEND: tuple[tuple[tuple[str, ...], str], ...] = (
    (("P", "R", "F1"), "precision, recall, F1 (%) of the alerts against the mistakes under the graph (a step done "
                       "before its pre-conditions)"),
    (("P err", "R err", "F1 err"), "the same against the annotation's own mistake labels (has_errors)"),
    (("F1@10/25/50", "edit"), "key-step recognition (segment F1 at IoU 0.10/0.25/0.50; edit score of their order)"),
    (("latency",), "seconds from a caught mistake's start to its alert (median, p90)"),
    (("-",), "not measured (nothing to count)"),
)


def legend_lines(width: int) -> list[str]:
    """`LEGEND` in lines of at most ``width``, broken between words but never inside a column's name: ``P`` /
    ``err`` would read as two columns.

    Args:
        width: the table's width, or the terminal's when the figures are lines.
    """
    nbsp = "\u00a0"  # a space `wrap_words` never breaks at
    text = "; ".join(f"{', '.join(name.replace(' ', nbsp) for name in names)}: {meaning}" for names, meaning in LEGEND)
    return [line.replace(nbsp, " ") for line in wrap_words(text, width)]


def _cells(score: VideoScores) -> dict[str, str]:
    """One video's figures as `COLUMNS` shows them (percentages, seconds)."""
    g, e = score.mistakes["graph"], score.mistakes["has_errors"]
    median, p90 = latency_summary(score.latencies)
    values = (score.video, str(g.alerts), str(score.retracted),
              _pct(g.precision), _pct(g.recall), _pct(g.f1), _pct(e.precision), _pct(e.recall), _pct(e.f1),
              *(_pct(score.segments[t].f1) for t in IOU_THRESHOLDS),
              f"{np.mean(score.edit):.1f}" if score.edit else "-", _seconds(median), _seconds(p90))  # fmt: skip
    return dict(zip(COLUMNS, values, strict=True))


def eval_lines(scores: Sequence[VideoScores], title: str, width: int) -> list[str]:
    """`eval_table`'s figures as lines, for a terminal narrower than the table: a line per video and the total,
    wrapped at ``width`` between figures (never inside one) and indented after the first line.

    Args:
        scores: one entry per video.
        title: the table's title.
        width: the terminal's columns.
    """
    lines = wrap_words(title, width)
    groups = (("P", "R", "F1"), ("P err", "R err", "F1 err"), ("F1@10", "F1@25", "F1@50", "edit"))
    for score in [*scores, total(scores)]:
        cells = _cells(score)
        units = [f"{score.video}:", f"{count_of(score.mistakes['graph'].alerts, 'alert')},",
                 f"{cells['retracted']} retracted;"]
        for group in groups:  # each figure beside its column's name, a group closed by ";"
            units += ["key-steps"] if group[0] == "F1@10" else []
            units += [f"{name} {cells[name]}{';' if name == group[-1] else ','}" for name in group]
        units += [f"latency median {cells['latency med s']},", f"p90 {cells['p90 s']} s"]
        # A figure stays with its name: its spaces are no-break ones while wrapping, given back after.
        text = " ".join(unit.replace(" ", "\u00a0") for unit in units)
        lines += [line.replace("\u00a0", " ") for line in wrap_words(text, width)]
    return lines


def eval_table(scores: Sequence[VideoScores], title: str) -> Table:
    """The per-video table of ``stream-detect eval``, with a total row (percentages, seconds).

    Args:
        scores: one entry per video.
        title: the table's title (the settings).

    Returns:
        A rich table.
    """
    table = Table(title=title, show_footer=False)
    for name in COLUMNS:
        table.add_column(name, justify="left" if name == "video" else "right")
    rows = [*scores, total(scores)]
    for k, score in enumerate(rows):
        table.add_row(*_cells(score).values(), end_section=k == len(rows) - 2)
    return table
