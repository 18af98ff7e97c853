"""The steps a stream may do next, as every screen lists them: the one rule the terminal view (`streaming.view.render`)
and the dashboard (`streaming.dashboard.state`) share, so that they never disagree on what comes next."""

from __future__ import annotations

from streaming.messages import Status


def allowed_next(row: Status) -> list[tuple[int, float]]:
    """The allowed steps of a stream, likeliest first, each with its future-step probability.

    The step being done now is left out (it is not next, it is now: its pre-conditions are met because it is
    allowed), unless the stream is lost: its screens then say no step is being done now, and the step it was last
    seen doing is still to come as far as anyone knows. An ended stream has no next step. The probabilities are the
    checker's, shared among all allowed steps, the one being done included, so those listed may sum to less than 1.

    Args:
        row: the stream's latest status.

    Returns:
        (step id, probability) pairs in the checker's order; empty once the stream ended.
    """
    if row.ended:
        return []
    now = None if row.lost else row.current
    return [(step, score) for step, score in zip(row.allowed, row.allowed_scores, strict=True) if step != now]


def waiting_on(row: Status) -> int | None:
    """The step under way when every step left waits on it: `allowed_next` lists none, and a bare "none" (or "-")
    reads as nothing can follow, so every screen says ``after <step>`` instead. None otherwise (an ended stream has
    no next step).

    Args:
        row: the stream's latest status.
    """
    if allowed_next(row) or row.ended or row.current is None or row.current not in row.allowed:
        return None
    return row.current
