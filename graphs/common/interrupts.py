"""SIGINT, SIGTERM and SIGHUP, handled alike by every command: each stops the run the way Ctrl-C does.

A command started in the background of a shell script ignores SIGINT, and ``kill``, ``timeout``, systemd and
``docker stop`` send SIGTERM: with Python's default a SIGTERM ended the process on the spot (exit status -15), with
no last line and no cleanup. While a command runs (`handling_signals`, entered by
`graphs.common.errors.exit_on_input_error`) both signals raise `Interrupted`, a `KeyboardInterrupt` that remembers
which signal came, so every ``finally`` and every ``except KeyboardInterrupt`` runs for both; the
command then exits with ``128 + signal number`` (130, 143; 129 for SIGHUP, a closed terminal). While the run stops
(its cleanup, a service's summary line), another signal within `REPEAT_S` is the same request sent twice (``timeout``
and a kill of its process group both send SIGTERM) and is let pass; one after that is the user insisting, and
interrupts the cleanup too. A signal that lands where Python would drop the exception (a finalizer, or Python code
that a C extension runs while it loads) is sent again until it lands elsewhere: one SIGTERM is enough.

The atomic writer (`graphs.common.files.atomic_path`) commits a file inside `signals_deferred`: a signal that arrives
while it creates its temporary folder, renames the finished file into place or removes what is left holds until
that step is over, so an interrupted command leaves every output whole or absent, never half written or beside a
stray temporary.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.machinery import ExtensionFileLoader
from types import FrameType
from typing import Any, Final

from graphs.common.backoff import capped_doubling

# SIGHUP too: a terminal that closes (or an ssh session that drops) ended the checker on the spot, without its
# summary line; now it stops like Ctrl-C, exit status 129. `nohup` ignores it, and an ignored signal stays ignored.
HANDLED: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# Re-entrant: the handler (`_raise`) runs in the main thread between two of its bytecodes, so it may come while
# the main thread holds this lock (entering or leaving `signals_deferred`); a plain lock then waited for itself
# for ever, and the run hung on Ctrl-C. Re-entered there, the handler sees the state as it stands and decides.
_lock = threading.RLock()
_deferring = 0  # how many deferred sections are open (any thread)
_pending: list[int] = []  # signals that arrived meanwhile, raised when the last section closes


class Interrupted(KeyboardInterrupt):
    """A SIGINT or SIGTERM turned into an exception, carrying its signal number.

    Args:
        signum: the signal that stopped the run.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.began_stop = False  # this raise marked the run as stopping (`_stopping`)

    @property
    def name(self) -> str:
        """``"SIGINT"`` or ``"SIGTERM"``."""
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        """The shell's convention for a process stopped by a signal: 128 + its number (130, 143)."""
        return 128 + self.signum


FINALIZER_DEPTH: Final = 64  # frames looked through for a finalizer: a __del__ calls few functions deep
RETRY_S: Final = 0.01  # the first wait before a signal that landed in a finalizer is sent again
RETRY_MAX_S: Final = 0.5  # the longest wait between two sendings (a finalizer that takes seconds)

_landed: list[int] = []  # a signal that landed in a finalizer and is not raised yet
_retries = 0  # how many times it was sent again
# The signal the run is stopping on, and when it came: raised once; a signal within `REPEAT_S` of it is the same
# request sent twice (`timeout` and a kill of its process group), one later is the user insisting, and raises again.
_stopping: list[tuple[int, float]] = []
REPEAT_S: Final = 2.0
_depth = 0  # `handling_signals` blocks open in the main thread
_generation = 0  # outermost `handling_signals` blocks entered so far: which run a retry (`_send_again`) belongs to
_hook_before = sys.unraisablehook  # restored when the outermost `handling_signals` block ends


def in_finalizer(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside a ``__del__`` (decord's VideoReader closes its file there)."""
    for _ in range(FINALIZER_DEPTH):
        if frame is None:
            return False
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def in_extension_import(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside the loading of a C extension module (Python code its initialisation calls).

    An exception raised there may never reach the run: a C extension may replace it with an ``ImportError`` that the
    importing module drops. ``xml.etree.ElementTree`` falls back to its pure-Python parser when its accelerator fails
    to import ``pyexpat``, so a SIGTERM that landed while networkx (which imports it) was being imported was lost,
    and ``tgml train`` trained to its last epoch. An import of Python modules alone passes the exception on faithfully
    and is not waited for (waiting out every import delayed a stop during start-up by seconds). The whole stack is
    looked through."""
    while frame is not None:
        if frame.f_code in _EXTENSION_LOADING:
            return True
        frame = frame.f_back
    return False


# What importlib runs while a C extension initialises: its module is created, then executed (multi-phase init).
_EXTENSION_LOADING: Final = frozenset({ExtensionFileLoader.create_module.__code__,
                                       ExtensionFileLoader.exec_module.__code__})


def _send_again(signum: int, generation: int) -> None:
    """Send ``signum`` to the main thread again (a timer's thread), while the run that it came to still handles it
    (``generation``: a retry left by one `handling_signals` block never reaches the next one): to the main thread
    itself, so that one blocked in a wait wakes up.

    Within the run it goes to whatever handler the run has put there since: the dashboard's event loop installs its
    own (asyncio's ``add_signal_handler``) right after its last extension module loads, and a SIGTERM that landed in
    that import was dropped when its retry found a handler other than `_raise`: the dashboard served on. Under the
    lock, so that the block's end, which puts the handlers from before back under it too, never comes between the
    check and the send (a default disposition would kill the run without its line)."""
    with _lock:
        handler = signal.getsignal(signum)
        if (generation == _generation and _depth and signum in HANDLED
                and handler not in (signal.SIG_IGN, signal.SIG_DFL, None)):
            signal.pthread_kill(threading.main_thread().ident or 0, signum)


def _raise(signum: int, frame: FrameType | None) -> None:
    global _retries
    with _lock:
        if _deferring:
            _pending.append(signum)
            return
        if _stopping and time.monotonic() - _stopping[0][1] < REPEAT_S:
            # The run is already stopping (its cleanup, its summary line): the same request sent twice would cut
            # that short and lose the summary, wherever it lands (a finalizer's retries would land it later).
            return
        if in_finalizer(frame) or in_extension_import(frame):
            # Python prints an exception raised in a finalizer as "Exception ignored in ..." with a traceback, and
            # drops it: the run went on; one raised while a C extension loads may be dropped too
            # (`in_extension_import`). The signal is sent again, later and later, until it lands elsewhere; one that
            # still has not when the run ends is raised then (`handling_signals`).
            _retry_later(signum)
            return
        _landed.clear()
        _retries = 0
        stop = stop_for(signum)
    raise stop


def stop_for(signum: int) -> Interrupted:
    """The stop that ``signum``, on its way, will raise, for the caller to raise now: the run is marked as stopping on
    it, so the signal itself, arriving during the cleanup, is the same request (`REPEAT_S`) and does not cut that
    short. A closed terminal is the case: the view's next write fails with EIO, often before the SIGHUP that says so
    is delivered."""
    with _lock:  # re-entrant: `_raise` calls this holding it
        stop = Interrupted(signum)
        if not _stopping:
            _stopping.append((signum, time.monotonic()))
            stop.began_stop = True
    return stop


def _retry_later(signum: int) -> None:
    """Send ``signum`` again after a wait that doubles with each retry (the lock held): it landed where Python drops
    exceptions (a finalizer)."""
    global _retries
    if not _landed:
        _landed.append(signum)
    wait = capped_doubling(RETRY_S, _retries, RETRY_MAX_S)
    _retries += 1
    timer = threading.Timer(wait, _send_again, (_landed[0], _generation))
    timer.daemon = True
    timer.start()


def _unraisable(unraisable: Any) -> None:
    """``sys.unraisablehook`` while signals are handled: a stop raised where Python drops exceptions that `in_finalizer`
    does not see (a ``weakref.finalize`` callback, a collected generator's ``finally``) is sent again, not lost; a
    single SIGTERM lost there left the run going until SIGKILL. Anything else goes to the hook before it."""
    stop = unraisable.exc_value
    if isinstance(stop, Interrupted) and threading.current_thread() is threading.main_thread():
        with _lock:
            if stop.began_stop and _stopping and _stopping[0][0] == stop.signum:
                _stopping.clear()  # it stopped nothing
            _retry_later(stop.signum)
        return
    _hook_before(unraisable)


@contextmanager
def handling_signals() -> Iterator[None]:
    """Meanwhile SIGINT and SIGTERM raise `Interrupted` (in the main thread; elsewhere this does nothing).

    A signal that the process ignores (SIGINT in a background job of a script) stays ignored: the shell asked for
    that. Nested uses keep the outer handlers.
    """
    global _retries, _depth, _generation, _hook_before
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in HANDLED}
    with _lock:
        outermost = not _depth
        if outermost:  # a new run: whatever an earlier one stopped on is over, and its retries with it
            _stopping.clear()
            _generation += 1
            _hook_before, sys.unraisablehook = sys.unraisablehook, _unraisable
        _depth += 1
    try:  # from here on: a signal while the handlers are set still closes the block
        for s, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(s, _raise)
        yield
    finally:
        with _lock:
            for s, handler in previous.items():  # under the lock: see `_send_again`
                signal.signal(s, handler if handler is not None else signal.SIG_DFL)
            _depth -= 1
            if outermost:
                sys.unraisablehook = _hook_before
            landed = _landed[:1]
            _landed.clear()
            _retries = 0
        if landed and sys.exc_info()[0] is None:  # a signal of the run, landed in a finalizer at its very end
            raise Interrupted(landed[0])


@contextmanager
def _held() -> Iterator[None]:
    """The handled signals blocked in this thread for a few statements of bookkeeping: one that comes meanwhile is
    delivered, and its handler run, once they are done, never between them (a signal that landed between the count
    going to zero and the pending list's clearing raised at once and left a stale entry behind)."""
    if not hasattr(signal, "pthread_sigmask"):  # no per-thread signal masks (Windows): the re-entrant lock alone
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold a SIGINT or SIGTERM that arrives meanwhile until the block is over (a step that must finish whole).

    Keep the block short (a rename, a removal): the signal waits for it.
    """
    global _deferring
    with _held(), _lock:
        _deferring += 1
    try:
        yield
    finally:
        with _held(), _lock:
            _deferring -= 1
            arrived = _pending[:1] if not _deferring else []
            if not _deferring:
                _pending.clear()
        if arrived and threading.current_thread() is threading.main_thread():
            with _lock:
                repeat = bool(_stopping) and time.monotonic() - _stopping[0][1] < REPEAT_S  # see `_raise`
                if not _stopping:
                    _stopping.append((arrived[0], time.monotonic()))
            if not repeat:
                raise Interrupted(arrived[0])
        elif arrived:  # only the main thread may stop the run: hand the signal back to it
            signal.raise_signal(arrived[0])
