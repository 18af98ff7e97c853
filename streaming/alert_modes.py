"""When a detector lets the checker alert (``--alert-on``): on a key-step's onset, or once it has ended.

Torch-free, so that the command line reads its choices and defaults from here without loading the detector.
"""

from __future__ import annotations

from typing import Final

from graphs.common.errors import InputError
from graphs.common.safe_text import unknown_name

ALERT_MODES: Final = ("end", "onset")  # alert once a step is confirmed, or on its provisional announcement
# Onset: on the demo and the walkthrough procedure it alerts 2.2-2.8 s sooner at the same precision (see eval).
DEFAULT_ALERT_ON: Final = "onset"
DEFAULT_ONSET_FRAMES: Final = 2  # --alert-on onset on a checkpoint that sets no onset_frames, without --onset-frames


def check_alert_on(value: str) -> None:
    """Refuse an ``--alert-on`` value that is not one of `ALERT_MODES`.

    Raises:
        InputError: one line naming the value and the choices.
    """
    if value not in ALERT_MODES:
        raise InputError(unknown_name("--alert-on", value, ALERT_MODES, None))
