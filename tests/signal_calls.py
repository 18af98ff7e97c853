"""A real signal sent to this process at a chosen moment of a run: as a named function is called."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def signal_when_called(function: str, signum: int = signal.SIGINT) -> Iterator[list[str]]:
    """Send this process a real ``signum`` as ``function`` is first called (a profile hook watches the calls: no code
    of the run is replaced; a stop raised in the hook makes Python remove it, one held by `signals_deferred` is
    raised where the held block ends). Yields the calls signalled."""
    signalled: list[str] = []

    def hook(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code.co_name == function and not signalled:
            signalled.append(function)
            os.kill(os.getpid(), signum)

    sys.setprofile(hook)
    try:
        yield signalled
    finally:
        sys.setprofile(None)
