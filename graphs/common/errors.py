"""The one exception type for user mistakes (bad files, bad arguments) and how commands report it."""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Collection
from contextvars import ContextVar
from functools import wraps
from typing import Final, NoReturn, ParamSpec, TypeGuard, TypeVar

from graphs.common.interrupts import Interrupted, handling_signals
from graphs.common.safe_text import printable

EXIT_USAGE = 2
EXIT_FAILURE = 1
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # 141: what a shell reports for a writer whose reader left (`... | head`)
INTERRUPTED_NOTE = "stopped; no output is left half-written (the file being written, if any, was discarded)"
STOPPED_NOTE = "stopped"  # the interrupt's note for a command that writes no file (`writes_no_files`)
_WRITES_FILES: Final[ContextVar[bool]] = ContextVar("writes_files", default=True)
# Whether the running command has begun: read its arguments, or begun writing a file (`command_began`). A signal in
# the tenth of a second a command takes to build its parser said "the file being written, if any, was discarded" of
# a checker that had not even read its options, let alone begun a file.
_BEGUN: Final[ContextVar[bool]] = ContextVar("begun", default=True)

P = ParamSpec("P")
R = TypeVar("R")


class InputError(Exception):
    """A problem with what the user gave us (a file, a field, an argument).

    The message is one line that names the file, field or value at fault; commands print it
    as ``error: <message>`` and exit with status 2 instead of showing a traceback.
    """


class FieldError(InputError):
    """An `InputError` about one field of a settings object: ``<Owner>.<field> = <value>: <why>``.

    A command that filled the field from one of its options says the option instead (`FieldError.as_option`): a
    user who typed ``--method llm`` should not read ``BenchConfig.methods``.

    Args:
        owner: the settings class's name.
        field: the field at fault.
        value: its value (a string, a number or a sequence of them).
        written: the value as the message shows it (JSON-like).
        why: what is wrong.
    """

    def __init__(self, owner: str, field: str, value: object, written: str, why: str) -> None:
        super().__init__(f"{owner}.{field} = {written}: {why}")
        self.field, self.value, self.why = field, value, why

    def as_option(self, options: dict[str, str], given: Collection[str] | None = None) -> InputError:
        """The same error naming the option that set the field (``options``: field -> option), its values as they
        are typed on a command line; itself when no option sets the field.

        Args:
            options: field -> option.
            given: the options the user typed (None: all of them); a field left at its default is said so, since
                ``--dataset a b: ...`` reads as if the user had typed it.
        """
        option = options.get(self.field)
        if option is None:
            return self
        values = " ".join(str(v) for v in (self.value if isinstance(self.value, list | tuple) else [self.value]))
        if given is not None and option not in given:
            return InputError(f"{self.why} ({option} not given: its default is {values})")
        return InputError(f"{option} {values}: {self.why}")


class RunError(Exception):
    """A run that failed for a reason other than its input: a part of it (the checker process, the view) died.

    Commands print it as one ``error: <message>`` line and exit with status 1: the run did not succeed, and it
    never reports that it did. One with `shows_cause` set prints its ``__cause__``'s traceback above that line.
    """

    # The cause is a bug (`streaming.detector.loop.internal_failure`): the line alone named its innermost frame, and
    # the developer it is reported to needs the rest of the traceback, as every other command's bug still shows it.
    shows_cause: bool = False


def install_extra(extra: str) -> str:
    """How to install an optional extra, for an installed package and for a clone (an ``error:`` line's way out)."""
    return f"pip install 'mistake-detection[{extra}]', or pip install -e '.[{extra}]' in a clone"


def extra_import_error(err: ImportError, module: str, who: str, absent: str) -> InputError:
    """The one line for an optional extra's module that did not import: ``absent`` (naming the extra to install) when
    the module is not there; when it is there and fails to import, what failed and the package to upgrade.

    A release too old for its own dependencies (sentence-transformers 2.2 imports ``cached_download``, which
    huggingface_hub 0.26 removed), or a binary built for another numpy (matplotlib 3.7 under numpy 2), raises an
    ImportError too: told that the extra is missing, the user installed it again, and pip, finding it present,
    changed nothing.

    Args:
        err: what the import raised.
        module: the extra's module the code imports (``"matplotlib"``, or a sub-module: its package is the one
            told about).
        who: what needs it, as the line starts (``"--plot curve.png"``, ``"the tgt-text learner"``).
        absent: the line when the module is not installed.

    Returns:
        The error to raise (``from None``: the traceback is the package's, not the user's).
    """
    top = module.split(".")[0]
    missing = err.name if isinstance(err, ModuleNotFoundError) else None
    if missing == top:
        return InputError(absent)
    reason = printable(str(err).strip().splitlines()[0]) if str(err).strip() else type(err).__name__
    from importlib.metadata import packages_distributions  # here: a command's start needs none of its parsers

    try:
        distribution = next((name for name in packages_distributions().get(top, ()) if name), top)
    except Exception:  # it reads every installed package's metadata: a damaged one must not turn this line into a
        distribution = top  # traceback, in the broken environments the line is for (the import name is a fair guess)
    return InputError(f"{who}: {top} is installed but does not import ({reason}); pip install --upgrade "
                      f"{distribution} (its release may be too old for the packages it imports)")


def require_extra(module: str, extra: str, user: str) -> None:
    """Refuse, in one line naming the extra to install, when an optional extra's module does not import.

    Args:
        module: the module the extra brings (``"aiohttp"``).
        extra: the extra's name in pyproject.toml (``"dashboard"``).
        user: what needs it, as the line starts (``"stream-detect dashboard"``, ``"--metrics"``).

    Raises:
        InputError: the module does not import.
    """
    try:
        importlib.import_module(module)
    except ImportError as err:
        raise extra_import_error(err, module, user, f"{user} needs the optional '{extra}' extra ({module} is not "
                                 f"installed): {install_extra(extra)}") from None


def print_stderr(line: str) -> None:
    """Write one line on stderr, flushed; dropped when stderr is closed or broken.

    A log line is no part of a run's work: a stderr whose reader left (``2>&1 >out | head -1``) or on a full device
    (``2>/dev/full``) made the detector's end line of its first stream raise, which cut every other stream short
    (exit status 141); one closed from the start (``2>&-``, ``sys.stderr`` None) sent the lines to standard output,
    into ``--jsonl`` lines. After a first failure stderr's descriptor goes to /dev/null, so that the lines after it,
    a library's own messages and the interpreter's last flush find nothing left to fail on.
    """
    stream = sys.stderr
    if stream is None:
        return
    try:
        print(line, file=stream, flush=True)
    except (OSError, ValueError):  # ValueError: a stream closed by the caller
        drop_stderr()


def print_warning(line: str) -> None:
    """Show a warning as one ``warning: ...`` line on stderr (names made printable; `print_stderr`)."""
    print_stderr(printable(f"warning: {line}"))


def print_note(line: str) -> None:
    """Show a note as one ``note: ...`` line on stderr: something left out that is no mistake (an ``.npz`` beside
    the ``.npy`` feature files), said so that nothing is skipped in silence."""
    print_stderr(printable(f"note: {line}"))


_FULL: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})  # the device took no more


def output_full(err: BaseException) -> TypeGuard[OSError]:
    """Whether ``err`` is standard output's device refusing more (``> FILE`` on a full disk, ``> /dev/full``): a
    write error without a file name, since the files a command writes are named in their errors
    (`graphs.common.files`)."""
    return isinstance(err, OSError) and err.errno in _FULL and err.filename is None


def writes_no_files() -> None:
    """Tell `exit_on_input_error` that the running command writes no output file (a checker, a view, a dashboard):
    an interrupt then says only that it stopped, not that the file being written was discarded (there is none).
    Until the command returns; the next call of a decorated ``main`` starts from "writes files" again."""
    _WRITES_FILES.set(False)


def command_began() -> None:
    """Tell `exit_on_input_error` that the running command has begun (its arguments are parsed, or a file is being
    written): an interrupt before says only that it stopped, as nothing was under way to be discarded."""
    _BEGUN.set(True)


def _escape_what_stdout_cannot_encode() -> None:
    """Let standard output escape a character its encoding lacks (``l\\u2019eau``), as standard error does already.

    In a legacy locale (``LANG=en_US.ISO-8859-1``, ``PYTHONIOENCODING=ascii``) Python's strict default made a step
    named ``l’eau`` end the live view mid-run (``error: the live view failed (UnicodeEncodeError ...)``, exit status
    1) and ``tgml show`` in a traceback. UTF-8 output, and the C locale's (its own handler), are left as they are.
    """
    stream = sys.stdout
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is None or encoding.startswith("utf") or getattr(stream, "errors", None) != "strict":
        return
    with contextlib.suppress(ValueError, OSError):  # a stream closed or detached by the caller: left alone
        reconfigure(errors="backslashreplace")


def exit_on_input_error(main: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command's ``main`` so that user mistakes end in one line and exit status 2, and SIGINT and SIGTERM
    end the run alike (`graphs.common.interrupts`): one line saying which came, exit status 130 or 143.

    Only `InputError`, `PermissionError` on a named path (exit status 2), `RunError` (exit status 1) and an interrupt
    are turned into a short message: any other exception is a bug in this project and keeps its traceback. The line
    is made `printable`: a path or a name holding a newline or a terminal escape sequence is shown escaped, on one
    line. An interrupted command has left every output file whole or absent (the atomic writer discards the file it
    was writing), which the line says; a command that writes no file (`writes_no_files`) says only that it stopped.
    Output piped into a reader that leaves early (``| head``) ends the command quietly with exit status 141, as a
    shell reports a writer killed by SIGPIPE: no ``BrokenPipeError`` traceback, no "Exception ignored" line (a reader
    gone while the command stops on a signal leaves the signal's status). Output sent to a full device
    (``> /dev/full``, a full disk) ends in one ``error:`` line and exit status 1.
    """

    @wraps(main)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        writes = _WRITES_FILES.set(True)
        begun = _BEGUN.set(False)
        _escape_what_stdout_cannot_encode()
        try:
            with handling_signals():
                result = main(*args, **kwargs)
                sys.stdout.flush()  # here, not at exit: a reader gone by now is a broken pipe to end quietly
                return result
        except BrokenPipeError as err:
            _drop_stdout()
            if isinstance(err.__context__, KeyboardInterrupt):  # its reader gone while stopping: the stop is the news
                _stop(err.__context__)
            raise SystemExit(EXIT_BROKEN_PIPE) from None
        except SystemExit as ended:
            if isinstance(ended.__context__, BrokenPipeError):  # rich's console exits 1 on a broken pipe, silently
                _drop_stdout()
                raise SystemExit(EXIT_BROKEN_PIPE) from None
            raise
        except InputError as err:
            print_stderr(f"error: {printable(err)}")  # a broken stderr must not change the exit status
            raise SystemExit(EXIT_USAGE) from None
        except RunError as err:
            if err.shows_cause and err.__cause__ is not None:
                print_stderr("".join(traceback.format_exception(err.__cause__)).rstrip("\n"))
            print_stderr(f"error: {printable(err)}")
            raise SystemExit(EXIT_FAILURE) from None
        except KeyboardInterrupt as err:
            _stop(err)
        except PermissionError as err:
            if err.filename is None:
                raise
            # A folder or file the user running the command may not read, enter or write (mode 000, another
            # user's): the user's to fix, wherever the command met it first.
            print_stderr(f"error: {printable(err.filename)}: permission denied (the user running this may not read, "
                         "enter or write it)")
            raise SystemExit(EXIT_USAGE) from None
        except Exception as err:
            behind = interrupt_behind(err)
            if behind is not None:
                _stop(behind)
            if isinstance(err, OSError) and isinstance(err.__context__, KeyboardInterrupt):
                # Stopping, the last write hit a terminal that is gone (a closed window, a dropped ssh session: EIO
                # on the SIGHUP that says so): the interrupt is the news; its line goes out if anything is left.
                _drop_stdout()
                _stop(err.__context__)
            if output_full(err):
                _drop_stdout()
                print_stderr(f"error: cannot write the output: {printable(err.strerror)}")
                raise SystemExit(EXIT_FAILURE) from None
            raise
        finally:
            _WRITES_FILES.reset(writes)
            _BEGUN.reset(begun)

    return wrapper


def run_command(module: str, argv: list[str] | None = None) -> NoReturn:
    """Import a command's module and exit with what its ``main(argv)`` returns: every installed command's entry.

    A command's module loads numpy, torch or OpenCV as it is imported (40-200 ms), before its `exit_on_input_error`
    handles signals: a Ctrl-C meanwhile printed Python's ``KeyboardInterrupt`` traceback, and a SIGTERM ended it with
    no line. Here they end it as they would a moment later, ``interrupted by SIGINT: stopped``, status 130 (143).
    """
    try:
        with handling_signals():
            main = importlib.import_module(module).main
    except KeyboardInterrupt as stop:
        _WRITES_FILES.set(False)  # it had not begun: nothing was written
        _stop(stop)
    sys.exit(main(argv))


def _stop(interrupt: KeyboardInterrupt) -> NoReturn:
    """End a command stopped by a signal: its one line (`_interrupted_note`), exit status 128 + the signal. A plain
    `KeyboardInterrupt` (no handler installed) is SIGINT's. The line is tried, and may find nothing left to write to
    (a closed terminal, a reader gone, a full disk): the exit status says it all the same."""
    stop = interrupt if isinstance(interrupt, Interrupted) else Interrupted(signal.SIGINT)
    print_stderr(f"interrupted by {stop.name}: {_interrupted_note()}")  # nowhere to go: the status still says it
    raise SystemExit(stop.exit_status) from None


def _interrupted_note() -> str:
    """What the interrupt's line says after ``interrupted by SIGNAL:`` (`writes_no_files`, `command_began`)."""
    return INTERRUPTED_NOTE if _WRITES_FILES.get() and _BEGUN.get() else STOPPED_NOTE


def interrupt_behind(err: BaseException) -> Interrupted | None:
    """The interrupt that ``err`` was raised from, by its ``__cause__`` chain, if any.

    Python re-raises an exception that interrupts the making of a class (``__set_name__``) as a `RuntimeError` caused
    by it, so a SIGTERM landing while a lazily imported module defines its classes (``import networkx`` after
    training) came out as a traceback and exit status 1 instead of the interrupt's line and 143.
    """
    cause = err.__cause__
    for _ in range(32):  # a chain of causes is short; the bound keeps a cyclic one from looping
        if cause is None:
            return None
        if isinstance(cause, KeyboardInterrupt):
            return cause if isinstance(cause, Interrupted) else Interrupted(signal.SIGINT)
        cause = cause.__cause__
    return None


# /dev/null, opened ahead by a service whose stderr may come to take nothing (`keep_devnull`): at its end, peers
# holding every file handle (idle connections at the checker's ports, its `ulimit -n` reached) left none to open it,
# and the interrupt's line then waited on the stderr that took nothing, for ever.
_devnull: list[int] = []
_devnull_lock = threading.Lock()


def keep_devnull() -> None:
    """Open /dev/null for `drop_stderr` now, once a process (a queued service log, as it starts)."""
    with _devnull_lock:
        if not _devnull:
            with contextlib.suppress(OSError):  # no handle left now: `drop_stderr` tries its own then
                _devnull.append(os.open(os.devnull, os.O_WRONLY))


def drop_stderr() -> None:
    """Point stderr's descriptor at /dev/null (its own descriptor only: whoever shares the stream keeps it); what its
    buffer holds is flushed there, and dropped. For a stderr that failed (`print_stderr`), or that takes nothing at a
    service's end (`streaming.service_log.queued_log`): the lines after it and the flush at exit would otherwise fail,
    or wait there for ever."""
    with _devnull_lock:
        kept = _devnull[0] if _devnull else None
    try:
        null = kept if kept is not None else os.open(os.devnull, os.O_WRONLY)
    except OSError:  # no handle left: nothing better to do
        return
    try:
        os.dup2(null, sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):  # no descriptor behind it (a test's capture): nothing to point
        return
    finally:
        if null != kept:
            os.close(null)
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()


def _drop_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush finds no broken pipe to report."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind sys.stdout (a test's capture): nothing to flush
        pass
