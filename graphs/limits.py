"""Limits every file loader shares with the wire format, so that a file that loads is a file the live pipeline can
serve.

The live checker refuses a message whose step id or name breaks these rules (`streaming.messages` reads them from
here); the task-graph, annotation and detector-checkpoint loaders refuse a file that breaks them, naming the field,
instead of letting a run start that the wire would stop half-way.
"""

from __future__ import annotations

import math
from typing import Any, Final

MAX_STEP_ID: Final = 2**31 - 1  # step ids are 0..2^31-1: a signed 32-bit integer, which every consumer can hold
MAX_NAME: Final = 512  # characters in a step name (CaptainCook4D's longest is 292)
MAX_STEPS: Final = 2048  # key-steps in one task graph: a status listing every step twice still fits one message


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
