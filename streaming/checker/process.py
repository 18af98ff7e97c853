"""The checker in a child process: the all-in-one ``stream-detect`` run's checker.

The child has its own interpreter, so the checker's latency does not share a GIL with the detector.
It reports the endpoints it bound (or the one-line error) through a pipe, then serves until the parent
asks it to stop or is gone.

A SIGTERM sent to the whole process group (``timeout``, systemd's default ``KillMode``, ``kill -- -PGID``) reaches
the child with its parent's. The parent then winds its session down and waits for the checker's end-of-session
report (`streaming.all_in_one.stopped`), so the child does not stop at its own SIGTERM (or SIGHUP: a closed terminal
signals its whole foreground group) at once: it serves on until the parent asks, the parent is gone, or
`TERM_GRACE_S` has passed (so a SIGTERM sent to the child alone stops it after that grace).
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
from multiprocessing.connection import Connection
from types import TracebackType

from graphs.common.errors import InputError, RunError
from streaming.checker.config import CheckerConfig
from streaming.checker.service import run_checker

CHECKER_START_TIMEOUT_S = 30.0  # longest wait for the checker child to bind its sockets
STOP_TIMEOUT_S = 2.0  # longest wait for the child to end once asked, then after SIGKILL
# How long the child serves on after a SIGTERM of its own: longer than the parent's wait for the end report
# (`streaming.all_in_one.STOP_REPORT_S`, 3 s) when the SIGTERM went to the whole process group.
TERM_GRACE_S = 5.0


def _checker_child(graph_path: str, config: CheckerConfig, pipe: Connection, asked: Connection) -> None:
    """Entry point of the checker child process: report the bound endpoints (or the error), then serve.

    It serves until the parent asks (closes its end of ``asked``: a pipe, not a semaphore, which the resource tracker
    would have to follow, and that process dies with its group's SIGHUP), the parent is gone, or `TERM_GRACE_S` after
    a SIGTERM (module docstring): a parent that is killed outright (SIGKILL, or a signal it does not handle) cannot
    ask, and the checker would otherwise hold its ports forever.
    """
    terminated: list[float] = []  # when a SIGTERM came (a list: the handler may not rebind a name of this scope)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:  # a SIGHUP ignored by the caller (nohup) stays ignored
            signal.signal(signum, lambda *_: terminated.append(time.monotonic()))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the checker stops
    parent = mp.parent_process()

    def over(_core: object) -> bool:
        if asked.poll() or (parent is not None and not parent.is_alive()):  # poll: true at the end of the pipe
            return True
        return bool(terminated) and time.monotonic() - terminated[0] > TERM_GRACE_S

    try:
        run_checker(graph_path, config, ready=lambda events, alerts: pipe.send(("ready", events, alerts)), until=over)
    except InputError as err:
        pipe.send(("error", str(err)))


class CheckerProcess:
    """The checker in a child process (spawned, so it works the same on every platform).

    Use it as a context manager, or call `stop`.

    Args:
        graph_path: task graph file.
        config: endpoints.

    Raises:
        InputError: the child could not bind or load the graph (its error line), or did not start in time.
        RunError: the child died before it answered.
    """

    def __init__(self, graph_path: str, config: CheckerConfig) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=False)
        asked, self._ask = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_checker_child, args=(graph_path, config, child, asked), daemon=True)
        self.process.start()
        child.close()
        asked.close()
        try:  # also Ctrl-C while it starts: a child left unasked would outlive its parent's exit by its grace
            if not parent.poll(CHECKER_START_TIMEOUT_S):
                raise InputError(f"the checker did not start within {CHECKER_START_TIMEOUT_S:.0f} s")
            try:
                reply = parent.recv()
            except EOFError:  # it died before it could answer (killed, or out of memory)
                self.process.join(STOP_TIMEOUT_S)
                code = self.process.exitcode
                raise RunError(f"the checker process ended before it started (exit status {code})") from None
            if reply[0] == "error":
                self.process.join(STOP_TIMEOUT_S)
                raise InputError(reply[1])
        except BaseException:
            self.stop()
            raise
        self.events_endpoint: str = reply[1]
        self.alerts_endpoint: str = reply[2]

    def stop(self) -> None:
        """Ask the checker to stop, and kill it if it has not ended within `STOP_TIMEOUT_S` (a SIGTERM would only
        start its grace)."""
        self._ask.close()  # the child sees the end of the pipe
        self.process.join(STOP_TIMEOUT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(STOP_TIMEOUT_S)

    def __enter__(self) -> CheckerProcess:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()
