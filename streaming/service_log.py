"""The services' log lines on stderr (``--log-format text|json`` of ``checker``, ``detector`` and ``view``).

``text`` (the default) writes each line as it always was, made `printable`. ``json`` writes one JSON object per line,
for a log collector::

    {"time": "2026-11-25T13:30:00.123Z", "level": "info", "service": "checker", "message": "checker: ...",
     "fields": {"received": 1520}}

``time`` is UTC (ISO 8601, milliseconds), ``level`` one of `LEVELS`, ``service`` the command's name, ``message`` the
line the text format shows, ``fields`` the values it names, as JSON values (an empty object when there are none).
JSON writes every control and non-ASCII character as an escape, so a hostile name cannot break a line. Bad input
refused before a service starts stays one plain ``error: ...`` line (exit status 2) in both formats.

A service whose loop must never wait on its log (``queued``, `queued_log`: the checker, the detector, the view, the
dashboard and the one-command run) hands its lines to a thread of their own: stderr on a full disk, a slow file, or a
pipe whose reader stopped reading delays or loses log lines, never the loop. At most `QUEUED_LINES` wait; the lines
that could not be written are counted and said by the next line that can be (`LOST_NOTE`), and `ServiceLog.close`
waits at most `CLOSE_WAIT_S` for the rest. While such a log is open, Python's warnings (``warnings.warn``: torch's,
numpy's) and the records of a library's logger that no handler takes (``logging``'s last resort: pyzmq's
authenticator, asyncio's reports) are lines of it too, in its format (`library_lines`; with several open in one
process, of the last opened): they are said on the service's threads, and written straight to stderr they held
those threads as any other line did.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import os
import sys
import threading
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Final, TextIO

from graphs.common.errors import InputError, drop_stderr, keep_devnull, print_stderr
from graphs.common.safe_text import printable, unknown_name

# What a service module logs through: called with a line and, as keywords, the values it names (``fields`` of the
# JSON format) and, where the caller knows it, its ``level``. A `ServiceLog` behind a lambda that gives the level
# when none is named, or any recorder taking ``**fields``.
LogLine = Callable[..., None]
LOG_FORMATS: Final = ("text", "json")
LEVELS: Final = ("info", "warning", "error")
QUEUED_LINES: Final = 1000  # lines waiting for a slow stderr (a few hundred KB); past it, new lines are lost
CLOSE_WAIT_S: Final = 2.0  # how long the end of a run waits for queued lines (its summary) to be written
# Said, as a warning, before the next line written once some could not be: how many, and the last reason.
LOST_NOTE: Final = "{service}: {count} log line(s) could not be written ({why})"


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
        queued: write from a thread of its own (module docstring), never from the caller's; `close` it at the end.
    """

    def __init__(
        self,
        service: str,
        log_format: str = "text",
        out: TextIO | None = None,
        clock: Callable[[], float] = time.time,
        queued: bool = False,
    ) -> None:
        if log_format not in LOG_FORMATS:
            raise InputError(unknown_name("--log-format", log_format, LOG_FORMATS, None))
        self.service = service
        self.json = log_format == "json"
        self.out = out
        self.clock = clock
        self._lock = threading.Lock()
        self.lost = 0  # lines that could not be written (queued: a full queue, or a write that failed)
        self._lost_why = ""
        self._queue: deque[str] | None = deque() if queued else None
        self._queued = threading.Condition(self._lock)
        self._writing = False  # the writer holds a line taken from the queue
        self._encoding = ""  # the writer's encoder's (`_encoder`)
        self._encoder_made = codecs.getincrementalencoder("utf-8")("backslashreplace")
        if queued:
            keep_devnull()  # before peers can take every handle: `drop_stderr` needs one at the end
            threading.Thread(target=self._write_queued, name=f"{service} log", daemon=True).start()

    def __call__(self, message: str, level: str = "info", **fields: object) -> None:
        """Write one line.

        Args:
            message: the line as the text format shows it.
            level: one of `LEVELS`.
            fields: values the line names, for the JSON format (numbers, strings, lists of them).
        """
        line = self._format(message, level, fields)
        if self._queue is None:
            with self._lock:
                if self.out is None:
                    print_stderr(line)  # a broken stderr drops the line, never the service's work
                else:
                    print(line, file=self.out, flush=True)
            return
        with self._queued:
            if len(self._queue) >= QUEUED_LINES:
                self._lose("stderr is not taking them: a full disk, or a reader that stopped reading")
                return
            self._queue.append(line)
            self._queued.notify()

    def _format(self, message: str, level: str, fields: dict[str, object]) -> str:
        if self.json:
            return json.dumps({"time": utc_time(self.clock()), "level": level, "service": self.service,
                               "message": message, "fields": fields}, default=str)  # fmt: skip
        return printable(message)

    def _lose(self, why: str) -> None:
        """Count a line that could not be written (the lock held)."""
        self.lost += 1
        self._lost_why = why

    def _write_queued(self) -> None:
        """The writer thread of a queued log: each line in turn, after a note of the lines lost before it."""
        said_lost = 0
        while True:
            with self._queued:
                while not self._queue:
                    self._queued.wait()
                line = self._queue.popleft()
                self._writing = True
                lost, why = self.lost, self._lost_why
            if lost > said_lost:
                note = LOST_NOTE.format(service=self.service, count=lost - said_lost, why=why)
                if self._write(self._format(note if self.json else f"warning: {note}", "warning",
                                            {"lost": lost - said_lost, "why": why})):
                    said_lost = lost
            written = self._write(line)
            with self._queued:
                if not written:
                    self._lose(self._lost_why)
                self._writing = False
                self._queued.notify_all()

    def _write(self, line: str) -> bool:
        """Write one line, as the writer thread; False (the reason kept) when it could not be."""
        out = self.out or sys.stderr
        if out is None:  # stderr closed from the start (2>&-): print would write the line on stdout
            return True
        try:
            # A live view on the terminal (the view's, the one-command run's) puts rich's proxy in sys.stderr while it
            # draws: a line must go through it, which prints it above the view; written to the descriptor under
            # the proxy, it landed inside the view, and the view's next redraw erased it.
            fd = None if hasattr(out, "rich_proxied_file") else out.fileno()
        except (AttributeError, OSError, ValueError):  # no file descriptor (a test's StringIO): it cannot block
            fd = None
        try:
            if fd is None:
                print(line, file=out, flush=True)
                return True
            # The descriptor itself, not the file object: a write blocked on a full pipe must hold none of the
            # interpreter's stream locks (another thread's print, or the flush at exit, would wait on it).
            data = self._encoder(out.encoding or "utf-8", fd).encode(line + "\n")
            while data:
                data = data[os.write(fd, data):]
        except (OSError, ValueError) as err:  # a full disk, a closed pipe, a closed file
            with self._lock:
                self._lost_why = getattr(err, "strerror", None) or str(err)
            return False
        return True

    def _encoder(self, encoding: str, fd: int) -> codecs.IncrementalEncoder:
        """The writer's encoder for ``encoding``, one for the stream as sys.stderr keeps one: an encoding with a byte
        order mark (utf-16, utf-8-sig) writes it once, not at the start of every line (each JSON line after the first
        then read ``\ufeff{...``, which a JSON parser refuses). As sys.stderr does, no mark past a file's start."""
        if self._encoding != encoding:
            self._encoding = encoding
            self._encoder_made = codecs.getincrementalencoder(encoding)("backslashreplace")
            with contextlib.suppress(OSError):  # a pipe or a terminal: it cannot tell, the mark is written
                if os.lseek(fd, 0, os.SEEK_CUR) > 0:
                    self._encoder_made.setstate(0)
        return self._encoder_made

    def close(self, wait_s: float = CLOSE_WAIT_S) -> bool:
        """Wait up to ``wait_s`` for the queued lines to be written (a stderr that takes none loses them: the process
        ends without them); a log that writes at each call has nothing to wait for.

        Returns:
            Whether every line was written or given up (False: a write still waits, on a stderr that takes nothing).
        """
        if self._queue is None:
            return True
        deadline = time.monotonic() + wait_s
        with self._queued:
            while (self._queue or self._writing) and (left := deadline - time.monotonic()) > 0:
                self._queued.wait(left)
            return not (self._queue or self._writing)

    def warning(self, message: str, **fields: object) -> None:
        """A ``warning: ...`` line (the prefix only in the text format)."""
        self(message if self.json else f"warning: {message}", "warning", **fields)

    def error(self, message: str, **fields: object) -> None:
        """An ``error: ...`` line (the prefix only in the text format)."""
        self(message if self.json else f"error: {message}", "error", **fields)


# The queued logs open in this process, the last opened last (`library_lines`): one pair of hooks serves them all, so
# that services ended in any order (two in one process, one test after another) leave the hooks as they found them.
_OPEN_LOGS: list[ServiceLog] = []
_HOOKS_LOCK = threading.Lock()
# What the hooks replaced, kept after they are taken out: a hook someone put back later (`warnings.catch_warnings`
# saves the hooks it finds and restores them at its end, maybe after the service ended) hands on to these.
_BEFORE: dict[str, Any] = {"show": warnings.showwarning, "resort": logging.lastResort}


def _open_log() -> ServiceLog | None:
    """The queued log that takes the library lines now: the last opened of those still open; None when none is."""
    with _HOOKS_LOCK:
        return _OPEN_LOGS[-1] if _OPEN_LOGS else None


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """``warnings.showwarning`` while a queued log is open: a line of that log; a caller that named a file of its own,
    or a warning said when no log is open (the hook put back after the service ended), goes where it went before."""
    log = _open_log()
    if file is not None or log is None:
        _BEFORE["show"](message, category, filename, lineno, file, line)
        return
    log.warning(f"{category.__name__}: {message} ({filename}:{lineno})", category=category.__name__,
                file=filename, line=lineno)


class _LastResort(logging.Handler):
    """``logging``'s last resort (the handler of a record no handler took) as lines of the open queued log: the
    record's logger and message, its exception's type and reason; its traceback as the JSON line's ``traceback``
    field, and in the text format after the message (escaped onto the one line, as every text line is). With no log
    open (put back after the service ended), the last resort it replaced takes the record."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)  # as logging's own last resort: debug and info records are nobody's news

    def emit(self, record: logging.LogRecord) -> None:
        """Hand the record to the log (never raises: a record that cannot be formatted is said as such)."""
        log = _open_log()
        if log is None:
            before = _BEFORE["resort"]
            if before is not None and record.levelno >= before.level:
                before.handle(record)
            return
        try:
            message = f"{record.name}: {record.getMessage()}"
        except Exception as err:  # a library's bad format string must not end the thread that logged it
            message = f"{record.name}: {record.msg!r} (cannot be formatted: {err})"
        fields: dict[str, object] = {"logger": record.name}
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            message += f" ({type(error).__name__}: {error})"
            trace = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            if log.json:
                fields["traceback"] = trace
            else:
                message += f"\n{trace}"
        if record.levelno >= logging.ERROR:
            log.error(message, **fields)
        else:
            log.warning(message, **fields)


_LAST_RESORT: Final = _LastResort()


@contextlib.contextmanager
def library_lines(log: ServiceLog) -> Iterator[None]:
    """Inside the block, Python's warnings and the library log records that would reach ``logging``'s last resort are
    lines of ``log`` (as warnings, and errors for records at ``ERROR`` and above) instead of lines written on stderr
    by the thread that raised them.

    One pair of hooks serves every queued log of the process: the first block in puts them in, the last one out takes
    them out (unless something else replaced them meanwhile), and while several are open the last opened takes the
    lines. Each block putting in hooks of its own and restoring what it found, a service ended before one started
    after it had its hooks put back by that one's end: the rest of the process's warnings went to an ended log.
    """
    with _HOOKS_LOCK:
        if not _OPEN_LOGS:
            if warnings.showwarning is not _show_warning:  # else put back by someone after the last end: kept
                _BEFORE["show"] = warnings.showwarning
            if logging.lastResort is not _LAST_RESORT:
                _BEFORE["resort"] = logging.lastResort
            warnings.showwarning, logging.lastResort = _show_warning, _LAST_RESORT
        _OPEN_LOGS.append(log)
    try:
        yield
    finally:
        with _HOOKS_LOCK:
            # This block's entry: the last of this log's (a log in two nested blocks keeps the outer one's).
            del _OPEN_LOGS[max(k for k, open_log in enumerate(_OPEN_LOGS) if open_log is log)]
            if not _OPEN_LOGS:
                if warnings.showwarning is _show_warning:
                    warnings.showwarning = _BEFORE["show"]
                if logging.lastResort is _LAST_RESORT:
                    logging.lastResort = _BEFORE["resort"]


@contextlib.contextmanager
def queued_log(service: str, log_format: str) -> Iterator[ServiceLog]:
    """A service's queued log (`ServiceLog` with ``queued``: a full disk or a stopped reader at stderr never holds,
    nor ends, its loop), which takes the library lines too (`library_lines`), closed at the end of the block: its
    last lines (a summary, a stream's end) are written before the command's own last line, and a stderr that takes
    none by then is left behind (`graphs.common.errors.drop_stderr`), or that line and the flush at exit
    would hold the process there."""
    log = ServiceLog(service, log_format, queued=True)
    try:
        with library_lines(log):
            yield log
    finally:
        if not log.close():
            drop_stderr()
