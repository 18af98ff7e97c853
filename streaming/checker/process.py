"""The checker in a child process: the all-in-one ``stream-detect`` run's checker.

The child has its own interpreter, so the checker's latency does not share a GIL with the detector.
It reports the endpoints it bound (or the one-line error) through a pipe, then serves until the parent
asks it to stop (SIGTERM) or is gone.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import threading
from multiprocessing.connection import Connection
from types import TracebackType

from graphs.common.errors import InputError, RunError
from streaming.checker.config import CheckerConfig
from streaming.checker.service import run_checker

CHECKER_START_TIMEOUT_S = 30.0  # longest wait for the checker child to bind its sockets
STOP_TIMEOUT_S = 2.0  # longest wait for the child to end after SIGTERM, then after SIGKILL


def _checker_child(graph_path: str, config: CheckerConfig, pipe: Connection) -> None:
    """Entry point of the checker child process: report the bound endpoints (or the error), then serve.

    It serves until the parent asks (SIGTERM) or is gone: a parent that is killed outright (SIGKILL, or a
    signal it does not handle) cannot ask, and the checker would otherwise hold its ports forever.
    """
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the checker stops
    parent = mp.parent_process()
    orphaned = (lambda _core: not parent.is_alive()) if parent is not None else None
    try:
        run_checker(graph_path, config, ready=lambda events, alerts: pipe.send(("ready", events, alerts)), stop=stop,
                    until=orphaned)
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
        self.process = ctx.Process(target=_checker_child, args=(graph_path, config, child), daemon=True)
        self.process.start()
        child.close()
        if not parent.poll(CHECKER_START_TIMEOUT_S):
            self.stop()
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
        self.events_endpoint: str = reply[1]
        self.alerts_endpoint: str = reply[2]

    def stop(self) -> None:
        """Ask the checker to stop (SIGTERM), then kill it if it does not within `STOP_TIMEOUT_S`."""
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(STOP_TIMEOUT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(STOP_TIMEOUT_S)

    def __enter__(self) -> CheckerProcess:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()
