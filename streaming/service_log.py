"""The services' log lines on stderr (``--log-format text|json`` of ``checker``, ``detector`` and ``view``).

``text`` (the default) writes each line as it always was, made `printable`. ``json`` writes one JSON object per line,
for a log collector::

    {"time": "2026-11-25T13:30:00.123Z", "level": "info", "service": "checker", "message": "checker: ...",
     "fields": {"received": 1520}}

``time`` is UTC (ISO 8601, milliseconds), ``level`` one of `LEVELS`, ``service`` the command's name, ``message`` the
line the text format shows, ``fields`` the values it names, as JSON values (an empty object when there are none).
JSON writes every control and non-ASCII character as an escape, so a hostile name cannot break a line. Bad input
refused before a service starts stays one plain ``error: ...`` line (exit status 2) in both formats.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Final, TextIO

from graphs.common.errors import InputError
from graphs.common.safe_text import printable

# What a service module logs through: called with a line and, as keywords, the values it names (``fields`` of the
# JSON format) and, where the caller knows it, its ``level``. A `ServiceLog` behind a lambda that gives the level
# when none is named, or any recorder taking ``**fields``.
LogLine = Callable[..., None]
LOG_FORMATS: Final = ("text", "json")
LEVELS: Final = ("info", "warning", "error")


def utc_time(seconds: float) -> str:
    """``2026-11-25T13:30:00.123Z`` for a Unix time."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((seconds - whole) * 1000):03d}Z"


class ServiceLog:
    """Writes a service's log lines, one per call, in the chosen format; safe to call from several threads.

    Args:
        service: the service's name (``checker``, ``detector``, ``view``).
        log_format: ``"text"`` or ``"json"``.
        out: where lines go (None: ``sys.stderr`` as it is at each call).
        clock: Unix time, for ``time``.
    """

    def __init__(
        self,
        service: str,
        log_format: str = "text",
        out: TextIO | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if log_format not in LOG_FORMATS:
            raise InputError(f"--log-format {log_format!r}: choose one of {', '.join(LOG_FORMATS)}")
        self.service = service
        self.json = log_format == "json"
        self.out = out
        self.clock = clock
        self._lock = threading.Lock()

    def __call__(self, message: str, level: str = "info", **fields: object) -> None:
        """Write one line.

        Args:
            message: the line as the text format shows it.
            level: one of `LEVELS`.
            fields: values the line names, for the JSON format (numbers, strings, lists of them).
        """
        if self.json:
            line = json.dumps({"time": utc_time(self.clock()), "level": level, "service": self.service,
                               "message": message, "fields": fields}, default=str)  # fmt: skip
        else:
            line = printable(message)
        with self._lock:
            print(line, file=self.out or sys.stderr, flush=True)

    def warning(self, message: str, **fields: object) -> None:
        """A ``warning: ...`` line (the prefix only in the text format)."""
        self(message if self.json else f"warning: {message}", "warning", **fields)

    def error(self, message: str, **fields: object) -> None:
        """An ``error: ...`` line (the prefix only in the text format)."""
        self(message if self.json else f"error: {message}", "error", **fields)
