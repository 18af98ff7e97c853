"""The steps a stream may do next, as every screen lists them: the one rule the terminal view (`streaming.view.render`)
and the dashboard (`streaming.dashboard.state`) share, so that they never disagree on what comes next."""

from __future__ import annotations

from typing import Final, NamedTuple

from streaming.messages import Status
from streaming.transport import HEARTBEAT_S

# The longest a step that stopped being under way is held out (`just_left`) when no heartbeat with another frame count
# comes: a detector sends the key-step right after the heartbeat, so it is never that late; one that counts no frames
# (``frames`` 0 in every heartbeat) or whose count stands still sends no such heartbeat, and the step the person has
# still to do was held out for the rest of the session.
HOLD_S: Final = 2 * HEARTBEAT_S


class JustLeft(NamedTuple):
    """A step its stream's screens last showed under way, whose key-step has not come yet (`just_left`)."""

    step: int
    run: str
    frames: int  # the ``frames`` of the status that stopped naming it: the heartbeat it left with
    since: float  # when that status came (the receiver's clock)


def just_left(row: Status, previous: Status | None, held: JustLeft | None, now: float) -> JustLeft | None:
    """The step that has just stopped being under way and is not done yet: neither now nor next.

    A detector sends a heartbeat just before each key-step, naming what is under way once the step is confirmed; the
    checker's status after that heartbeat no longer names the step as under way and does not hold it as done yet
    either, so it listed it among the steps allowed next until the key-step's status came a moment later: the step
    just done offered as the one to do next. It is left out (`allowed_next`) until a status of a later heartbeat
    (another ``frames`` count) comes, the key-step's included: a step that left without one (a short run that
    turned out to be flicker, or a peer's detector that names another step) is offered again then, or with the
    first status `HOLD_S` later, whatever the frame count says.

    Args:
        row: the stream's status just received.
        previous: the stream's status before it (None: none).
        held: what this returned for ``previous``.
        now: when ``row`` came (the receiver's clock, one clock for all of a stream's statuses).

    Returns:
        What to hold out of the steps allowed next with ``row`` (None: nothing).
    """
    if row.ended or row.lost:
        return None
    if (previous is not None and previous.run == row.run and not previous.lost and previous.current is not None
            and previous.current != row.current and previous.current not in row.done):
        return JustLeft(previous.current, row.run, row.frames, now)
    if (held is not None and held.run == row.run and held.frames == row.frames and held.step != row.current
            and held.step not in row.done and 0 <= now - held.since < HOLD_S):
        return held
    return None


def allowed_next(row: Status, left: JustLeft | None = None) -> list[tuple[int, float]]:
    """The allowed steps of a stream, likeliest first, each with its future-step probability.

    The step being done now is left out (it is not next, it is now: its pre-conditions are met because it is
    allowed), unless the stream is lost: its screens then say no step is being done now, and the step it was last
    seen doing is still to come as far as anyone knows. An ended stream has no next step. The probabilities are the
    checker's, shared among all allowed steps, the one being done included, so those listed may sum to less than 1.
    The step that has just stopped being under way, its key-step on its way, is left out too (``left``).

    Args:
        row: the stream's latest status.
        left: `just_left` of the stream's statuses (None: nothing).

    Returns:
        (step id, probability) pairs in the checker's order; empty once the stream ended.
    """
    if row.ended:
        return []
    now = None if row.lost else row.current
    gone = left.step if left is not None and left.run == row.run else None
    return [(step, score) for step, score in zip(row.allowed, row.allowed_scores, strict=True)
            if step != now and step != gone]


def waiting_on(row: Status, left: JustLeft | None = None) -> int | None:
    """The step under way when every step left waits on it: `allowed_next` lists none, and a bare "none" (or "-")
    reads as nothing can follow, so every screen says ``after <step>`` instead. When the only other one is the step
    that has just stopped being under way (``left``), whose key-step is on its way, what comes next comes after that
    one. None otherwise (an ended stream has no next step).

    Args:
        row: the stream's latest status.
        left: `just_left` of the stream's statuses (None: nothing).
    """
    if allowed_next(row, left) or row.ended:
        return None
    if left is not None and left.run == row.run and left.step in row.allowed:
        return left.step
    if row.current is None or row.current not in row.allowed:
        return None
    return row.current
