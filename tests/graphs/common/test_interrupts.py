"""A signal stops the run as Ctrl-C does, wherever it lands."""

from __future__ import annotations

import os
import signal
import time

import pytest

from graphs.common.interrupts import Interrupted, handling_signals


class ClosesInItsFinalizer:
    """Like decord's VideoReader, which closes its file in ``__del__``: the signal arrives while that runs."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        total = 0
        for k in range(100_000):  # bytecodes for the handler to run between
            total += k


def test_a_signal_landing_in_a_finalizer_stops_the_run_after_it(capfd: pytest.CaptureFixture[str]) -> None:
    # Raised inside __del__, the interrupt was printed as "Exception ignored in ..." with a traceback, then dropped.
    with pytest.raises(Interrupted) as stopped, handling_signals():
        ClosesInItsFinalizer()  # collected at once: its finalizer runs here
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the signal, sent again, stops the run here
            pass
    assert stopped.value.signum == signal.SIGTERM
    assert "Exception ignored" not in capfd.readouterr().err
