"""How a stream's session ended, as the person watching it was told: the one rule that the live view's end-of-stream
line and ``stream-detect eval``'s counts share.

- An alert **stands** unless a `Retraction` of the same run names its ``alert_id``. A retracted alert is no mistake
  of the session, whatever it named: the person saw it withdrawn, so it is never a catch.
- The session's **mistakes** are its standing alerts, one per ``alert_id`` (a confirmed step's alert repeats the id of
  its early alert; the copy received last wins, as in the view), in the order of their steps.
- Its steps **never done** are those of its end report (`MissingSteps`), if it sent one.
- It was **correct** when it has neither.

`session_verdict` decides; `verdict_text` says it in one line (``1 mistake (boil_water before fill_kettle), nothing
missing``), and `ended_text` adds what a session that recognised nothing, or few steps, has to say first: the words
the view prints after ``cam0 ended:`` and ``eval --json`` writes as each video's ``verdict``;
`retraction_reason` says why an alert was withdrawn, in the view's alert log and in eval's account of a missed mistake.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from graphs.common.safe_text import count_of, first_few
from streaming.messages import Alert, MissingSteps, Retraction

MISTAKES_NAMED: int = 3  # mistakes a verdict line names; it counts the rest
NEVER_DONE_NAMED: int = 10  # steps never done a verdict line names
CORRECT: str = "correct (no mistake, nothing missing)"


@dataclass(frozen=True)
class SessionVerdict:
    """What a session's end says about it.

    Attributes:
        mistakes: the standing alerts, one per ``alert_id``, in the order of their steps.
        retracted: the alerts withdrawn by a retraction, one per ``alert_id``, in the order of their steps.
        never_done: the required steps its end report names (step ids, graph order).
        never_done_names: the names the report gives the first of them.
    """

    mistakes: tuple[Alert, ...]
    retracted: tuple[Alert, ...]
    never_done: tuple[int, ...] = ()
    never_done_names: tuple[str, ...] = ()

    @property
    def correct(self) -> bool:
        """No standing alert and no step never done."""
        return not self.mistakes and not self.never_done


def session_verdict(
    alerts: Iterable[Alert], retractions: Iterable[Retraction], report: MissingSteps | None = None,
    run: str | None = None,
) -> SessionVerdict:
    """The verdict of one stream's session from what the checker sent viewers about it.

    Args:
        alerts: the stream's alerts (repeats of an ``alert_id`` allowed).
        retractions: the retractions received.
        report: the session's end report, if one came.
        run: keep only the messages of this detector run (None: all are of the session).

    Returns:
        The verdict.
    """
    withdrawn = {r.alert_id for r in retractions if run is None or r.run == run}
    last: dict[str, Alert] = {}
    for alert in alerts:
        if run is None or alert.run == run:
            last[alert.alert_id] = alert
    ordered = sorted(last.values(), key=lambda a: a.index)
    never = report if report is not None and (run is None or report.run == run) else None
    return SessionVerdict(
        tuple(a for a in ordered if a.alert_id not in withdrawn),
        tuple(a for a in ordered if a.alert_id in withdrawn),
        never.missing if never is not None else (),
        never.missing_names if never is not None else (),
    )


def step_names(ids: Sequence[int], names: Sequence[str], name: Callable[[int], str]) -> list[str]:
    """The names of steps a message lists; those whose names did not fit the message named by ``name``."""
    return list(names) + [name(s) for s in ids[len(names) :]]


def describe_mistake(alert: Alert, name: Callable[[int], str]) -> str:
    """An alert in a few words: ``boil_water before fill_kettle`` (late-step rule: ``fill_kettle after boil_water``).

    Args:
        alert: the alert.
        name: step id -> readable name, for the steps the alert does not name itself.
    """
    if not alert.missing and alert.late_for:
        return f"{alert.step_name} after {', '.join(name(s) for s in alert.late_for)}"
    if not alert.missing:
        return f"{alert.step_name} (not in the task graph)" if alert.undefined else alert.step_name
    return f"{alert.step_name} before {', '.join(step_names(alert.missing, alert.missing_names, name))}"


STOPPED_CORRECT: str = "no mistake so far, nothing missing"  # a session the person stopped with nothing to say


def verdict_text(verdict: SessionVerdict, name: Callable[[int], str], counted: int = 0, stopped: bool = False) -> str:
    """The verdict in one line: ``correct (no mistake, nothing missing)``, ``1 mistake (boil_water before
    fill_kettle), nothing missing``, ``no mistake; never done: add_milk``.

    Args:
        verdict: the session's verdict.
        name: step id -> readable name.
        counted: the mistakes the checker counted for the session (its `Status`), when a viewer may have missed some
            of their alerts (it joined late, or its log dropped them): the line counts the larger number.
        stopped: the person stopped the session before its procedure's end: ``no mistake so far; not done by the
            stop: ...``.
    """
    count = max(counted, len(verdict.mistakes))
    never = step_names(verdict.never_done, verdict.never_done_names, name)
    if any("," in n for n in never):  # CaptainCook4D's sentences: where one name ends and the next begins, quoted
        never = [f'"{n}"' for n in never]
    if not count and not never:
        return STOPPED_CORRECT if stopped else CORRECT
    # The binary checker alerts each detection of a step done too early: one line of its mistake, with how often.
    times = Counter(describe_mistake(a, name) for a in verdict.mistakes)
    named = list(times)[:MISTAKES_NAMED]
    rest = count - sum(times[d] for d in named)
    described = "; ".join(d if times[d] == 1 else f"{d} [{'twice' if times[d] == 2 else f'{times[d]} times'}]"
                          for d in named) + (f"; and {rest} more" if rest > 0 else "")
    if not verdict.mistakes:  # counted, none of their alerts received: "1 mistake (; and 1 more)" said nothing
        described = f"{'its alert' if count == 1 else 'their alerts'} not received by this view"
    mistakes = f"{count} mistake{'s' if count > 1 else ''} ({described})" if count else "no mistake"
    undone = "not done by the stop" if stopped else "never done"
    missing = f"; {undone}: {first_few(never, NEVER_DONE_NAMED, and_more=', and ')}" if never else ", nothing missing"
    return mistakes + (" so far" if stopped else "") + missing


EndTone = Literal["no verdict", "correct", "partly seen", "mistaken"]  # how the view colours the line


def nothing_recognised(recognised: int, counted: int) -> bool:
    """A session that confirmed no key-step and raised no alert: it gets no verdict, and no list of steps never done
    (often every step: the checker weighs the detector's silence)."""
    return recognised == 0 and counted == 0


def no_verdict_text(frames: int, stopped: bool = False, shortest: int | None = None) -> str:
    """What is said of a session that recognised nothing (`nothing_recognised`), in the view, eval and the
    dashboard; of one ``stopped`` by the person, that its frames ended at the stop: a real recording stopped before
    its first step is confirmed (seconds at one vector a second) says nothing of the detector.

    Args:
        frames: the frames the session read.
        stopped: the person stopped the session.
        shortest: the frames of the shortest step its segmenter can confirm (`SegmenterConfig.shortest_step`), where
            they are known (eval, the one-command run's view); None: not known (they are not on the wire). Fewer
            frames than that say nothing of the detector either, and the line says so instead of asking about it;
            not known, the question is asked only of a recording long enough for a step.
    """
    read = f"the {count_of(frames, 'frame')} before the stop" if stopped else count_of(frames, "frame")
    if shortest is not None and frames < shortest:
        what = "they are fewer" if stopped else "the recording is shorter"
        return (f"no key-step recognised in {read}, so no verdict ({what} than the shortest step the segmenter can "
                f"confirm, {count_of(shortest, 'frame')})")
    if stopped:
        return (f"no key-step recognised in {read}, so no verdict (if a step was done in them: is the detector "
                "trained for this procedure and this view?)")
    if shortest is None:
        return (f"no key-step recognised in {read}, so no verdict (if the recording was long enough for a step: is "
                "the detector trained for this procedure and this view?)")
    return (f"no key-step recognised in {read}, so no verdict (is the detector trained for this procedure and this "
            "view?)")


def ended_text(
    verdict: SessionVerdict, name: Callable[[int], str], recognised: int, steps: int, frames: int, counted: int = 0,
    stopped: bool = False, shortest: int | None = None,
) -> tuple[str, EndTone]:
    """What a stream's end says, after ``cam0 ended:``: the live view's line and ``eval --json``'s ``verdict``.

    Nothing recognised is no sign of a correct session: an undertrained detector, or one trained for another
    procedure or view, confirms nothing, and the checker then finds no mistake. Nor is "nothing missing" when the
    detector saw few of the graph's steps: the checker, weighing its miss rates, is unsure of the rest, not sure they
    were done; the line says how much was seen.

    Args:
        verdict: the session's verdict.
        name: step id -> readable name.
        recognised: the key-steps the session confirmed, each once (a `Status`'s ``done``).
        steps: the graph's key-steps.
        frames: the frames the session read.
        counted: the mistakes the checker counted (`verdict_text`).
        stopped: the person stopped the session (`verdict_text`).
        shortest: the frames of the shortest step the segmenter can confirm, where known (`no_verdict_text`).

    Returns:
        The line and its tone.
    """
    if nothing_recognised(recognised, max(counted, len(verdict.mistakes))):
        return no_verdict_text(frames, stopped, shortest), "no verdict"
    line = verdict_text(verdict, name, counted=counted, stopped=stopped)
    if line not in (CORRECT, STOPPED_CORRECT):
        return line, "mistaken"
    if recognised < steps:
        return f"{line}, but only {recognised} of the graph's {steps} key-steps recognised", "partly seen"
    return line, "correct"


def retraction_reason(retraction: Retraction, named: bool = True) -> str:
    """Why an early alert was withdrawn, from what was confirmed at its position, and that it no longer holds.

    Three cases (`streaming.checker.core`, docs/wire-format.md's ``confirmed``): another step was confirmed there; the
    same step was confirmed, but with the whole step seen the checker no longer finds it a mistake (the step's own
    detection doubted, or a pre-condition's evidence came in during the step); or no step of the graph was confirmed
    there (withdrawn, the session ended, the stream started over or was forgotten while lost).

    Args:
        retraction: the retraction.
        named: name the withdrawn step; False says "it", for a line that shows its name beside the reason (the
            view: CaptainCook4D's step names are sentences, and each retracted row wrapped the same one twice).

    Returns:
        e.g. ``fill_kettle was confirmed there, not boil_water: the alert no longer holds``, or unnamed ``fill_kettle
        was confirmed there instead: the alert no longer holds``.
    """
    step = retraction.step_name if named else "it"
    if retraction.confirmed is None:
        what = (f"{step} was not confirmed there (its announcement was withdrawn, the session ended or its stream "
                "started over first, or a step outside the task graph came instead)")
    elif retraction.confirmed == retraction.step:
        # The probabilistic checker weighs two factors (docs/method.md, formula 2): saying only "its pre-conditions look
        # done" was false where the step's own detection lost weight (CaptainCook4D 17_45: a pre-condition 0.995
        # skipped, the step 0.49 real); the message does not carry which factor fell, so both are named.
        what = (f"{step} was confirmed, but with the whole step seen a mistake is no longer likely enough (its own "
                "detection doubted, or its pre-conditions seen done)")
    else:
        what = f"{retraction.confirmed_name} was confirmed there" + (f", not {step}" if named else " instead")
    return f"{what}: the alert no longer holds"
