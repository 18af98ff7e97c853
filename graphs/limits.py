"""Limits every file loader shares with the wire format, so that a file that loads is a file the live pipeline can
serve.

The live checker refuses a message whose step id or name breaks these rules (`streaming.messages` reads them from
here); the task-graph, annotation and detector-checkpoint loaders refuse a file that breaks them, naming the field,
instead of letting a run start that the wire would stop half-way.
"""

from __future__ import annotations

import math
from typing import Any, Final

from graphs.common.safe_text import shows_nothing

MAX_STEP_ID: Final = 2**31 - 1  # step ids are 0..2^31-1: a signed 32-bit integer, which every consumer can hold
MAX_NAME: Final = 512  # characters in a step name (CaptainCook4D's longest is 292)
MAX_STEPS: Final = 2048  # key-steps in one task graph: a status listing every step twice still fits one message
NAME_NEEDED: Final = "every step needs a name that shows in alerts, views and tables"


def name_fault(name: str) -> str | None:
    """What makes ``name`` no step name the live pipeline can serve and show, in words that follow the field's name
    in a message (``"is empty; every step needs ..."``); None when it is one.

    Args:
        name: a step or class name from a file or a learner.

    Returns:
        ``"is N characters long; at most MAX_NAME"``, ``"is empty; ..."``, ``"holds no visible character; ..."``
        (`graphs.common.safe_text.shows_nothing`), or None.
    """
    if len(name) > MAX_NAME:
        return f"is {len(name)} characters long; at most {MAX_NAME}"
    if not name:
        return f"is empty; {NAME_NEEDED}"
    if shows_nothing(name):
        return f"holds no visible character; {NAME_NEEDED}"
    return None


def is_step_id(value: Any) -> bool:
    """Whether ``value`` is a valid step id: an integer (not a bool) in ``0..MAX_STEP_ID``.

    Args:
        value: a candidate from a file or a message.

    Returns:
        True if it may name a key-step.
    """
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STEP_ID


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond the float range
        return False


STEP_ID_RULE: Final = f"an integer in 0..{MAX_STEP_ID}"
