"""The checker's log of stream state changes: one line when a stream appears, starts a new session, ends, is lost,
comes back or is freed, within a budget a flood cannot exceed.

The view, the dashboard and the metrics show these states; the log is what a person reading the checker's console (or
a log collector) has. A peer may invent stream ids as fast as it can send (each one costs it a message), so at most
`CHANGE_LINES` lines go out per `streaming.checker.refusals.LOG_EVERY_S` window; the changes beyond are counted by
kind and said in one line once the window is over.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Final

from graphs.common.safe_text import count_of, printable
from streaming.checker.refusals import LOG_EVERY_S
from streaming.service_log import LogLine

# The changes of a stream working as it should: their lines are information, the others (lost, freed, evicted) warnings.
ROUTINE_CHANGES: Final = frozenset({"new", "restarted", "ended", "stopped", "back"})
CHANGE_LINES: Final = 20  # stream change lines per LOG_EVERY_S window; the rest are counted and said in one line


class StreamChanges:
    """The rate-limited log of stream state changes.

    Args:
        monotonic: the clock of the windows.
        log: called with one line per change said, its ``level`` (`ROUTINE_CHANGES` are ``info``) and its
            ``stream``, ``change`` and ``detail`` as fields (and one per window whose changes were not all said,
            ``not_logged`` their counts by kind); None: no log.
    """

    def __init__(self, monotonic: Callable[[], float], log: LogLine | None = None) -> None:
        self.monotonic = monotonic
        self.log = log
        self._window = -math.inf  # when the current window began
        self._said = 0  # lines said in it
        self._unsaid: Counter[str] = Counter()  # changes not said in it, by kind

    def __call__(self, stream_id: str, change: str, detail: str = "") -> None:
        """A stream changed state.

        Args:
            stream_id: the stream.
            change: its new state, one word (``new``, ``restarted``, ``ended``, ``stopped``, ``lost``, ``back``,
                ``freed``, ``evicted``).
            detail: what the line adds in parentheses ("" for nothing).
        """
        if self.log is None:
            return
        self.flush()
        if self._said >= CHANGE_LINES:
            self._unsaid[change] += 1
            return
        self._said += 1
        self.log(printable(f"checker: {stream_id} {change}" + (f" ({detail})" if detail else "")),
                 level="info" if change in ROUTINE_CHANGES else "warning", stream=stream_id, change=change,
                 detail=detail)

    def flush(self) -> None:
        """Once the window is over, say how many changes in it were not said (if any), and start the next."""
        now = self.monotonic()
        if self.log is None or now - self._window < LOG_EVERY_S:
            return
        if self._unsaid:
            kinds = ", ".join(f"{n} {change}" for change, n in self._unsaid.most_common())
            self.log(f"checker: {count_of(self._unsaid.total(), 'more stream change')} in the last {LOG_EVERY_S:g} s "
                     f"not logged ({kinds}; at most {CHANGE_LINES} lines per {LOG_EVERY_S:g} s)",
                     not_logged=dict(self._unsaid))
        self._window, self._said, self._unsaid = now, 0, Counter()
