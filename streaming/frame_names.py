"""The file name of a key-step's picture (``--alert-frames``): one rule for the detector that writes it
(`streaming.detector.alert_frames`) and the dashboard that serves it (`streaming.dashboard.server`), in a module of
its own so that the dashboard does not load OpenCV to name a file.

A key-step that starts at ``start`` seconds of video time is ``<ms>.jpg``, ``<ms>`` being ``round(start * 1000)``
in 1 to 18 ASCII digits (`FRAME_STEM`). The wire takes any finite ``start`` of 0 or more (an alert's ``video_time``
is that number); one of `FRAME_TIME_LIMIT_S` or more (about 31 million years of video) has no picture. Such a time
never comes from a video or a feature file, but any peer can send it: ``1e306 * 1000`` is infinity, which ``int()``
refused with an OverflowError (a 500 from the dashboard's ``/frames/N``), and a time just below that would name a
file of 300 digits, longer than a file name may be and never counted by the folder's bound.
"""

from __future__ import annotations

import re
from typing import Final

FRAME_STEM: Final = re.compile(r"[0-9]{1,18}")  # the stem frame_name writes (a video time is never negative)
MAX_FRAME_MS: Final = 10**18 - 1  # the largest <ms> of 18 digits
FRAME_TIME_LIMIT_S: Final = 1e15  # a start from here on has no picture (its milliseconds take 19 digits or more)


def frame_name(start: float) -> str | None:
    """The file name of the picture of a key-step that starts at ``start`` seconds of video time.

    Args:
        start: the key-step's start (an alert's ``video_time``).

    Returns:
        ``<ms>.jpg``; None when ``start`` is infinite, NaN, negative, or so late that its milliseconds do not fit
        `FRAME_STEM` (`FRAME_TIME_LIMIT_S`): no picture is written or served for it.
    """
    if not 0.0 <= start < FRAME_TIME_LIMIT_S:  # NaN fails every comparison: refused too
        return None
    ms = round(start * 1000)  # finite, below about 1e18: int() of it cannot overflow
    return f"{ms}.jpg" if ms <= MAX_FRAME_MS else None  # a start just below the limit may round up to 19 digits
