"""Independent training jobs (one graph per seed, fold or procedure) in worker processes, with a progress bar.

Each job trains with one torch thread (`tgml.learners.do.train` pins it), so one process per core uses the machine; a
job's result depends only on its arguments, so the figures are the same whatever the number of workers.

The parent alone decides when the run stops: workers ignore SIGINT (a Ctrl-C reaches the whole process group, and
each worker would print its own traceback), and an interrupted parent (SIGINT or SIGTERM) ends its workers at once
instead of waiting for the jobs they run.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from graphs.common.interrupts import signals_deferred

if TYPE_CHECKING:  # loaded by run_jobs: every benchmark module imports this one, and their help pages need neither
    from concurrent.futures import ProcessPoolExecutor

R = TypeVar("R")


def worker_count(requested: int, jobs: int) -> int:
    """Processes to start: ``requested``, or with 0 one per core, never more than there are jobs (at least 1)."""
    return max(1, min(requested or os.cpu_count() or 1, jobs))


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# multiprocessing's resource tracker, a process of its own started with the pool, outlives the run by a moment: when
# a stop ends the workers, it finds the semaphores they and the pool's queues held still registered, unlinks them, and
# warns of each ("resource_tracker: There appear to be 2 leaked semaphore objects ...") after the run's last line,
# "interrupted by SIGTERM". Nothing leaks (it cleans them); the warnings are noise after a stop, so it is started with
# them ignored (its options are the interpreter's -W flags, read from sys.warnoptions when it starts).
QUIET_RESOURCE_TRACKER = "ignore:resource_tracker:UserWarning"


def _quiet_resource_tracker() -> None:
    """Have the resource tracker, when it starts, ignore its own cleanup warnings (`QUIET_RESOURCE_TRACKER`)."""
    if QUIET_RESOURCE_TRACKER not in sys.warnoptions:
        sys.warnoptions.append(QUIET_RESOURCE_TRACKER)


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """Stop the pool's processes now (`ProcessPoolExecutor.terminate_workers` from Python 3.14 on)."""
    terminate = getattr(pool, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    # Before 3.14 only the private attributes reach them. The queue's feeder thread may be blocked writing jobs that
    # no worker will read (a job's data fills the pipe): shutting down would wait for it forever.
    pool._call_queue.cancel_join_thread()  # type: ignore[attr-defined]
    for process in list((pool._processes or {}).values()):
        process.terminate()


def run_jobs(
    job: Callable[..., R], arguments: Sequence[tuple[Any, ...]], workers: int, label: str, progress: bool = True
) -> list[R]:
    """Run ``job(*args)`` for every ``args`` of ``arguments``, in worker processes when more than one is asked for.

    Args:
        job: a module-level function (worker processes import it by name).
        arguments: one argument tuple per job; give the slowest first, so no worker is left alone on a long job
            at the end.
        workers: processes (0 = one per core); 1 runs the jobs here, one after the other.
        label: what the progress bar says.
        progress: show a rich progress bar on stderr; where stderr is no terminal (a log file, ``nohup``), where
            rich draws nothing until the end, one plain line per finished job instead.

    Returns:
        The results, in the order of ``arguments``.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.text import Text

    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    processes = worker_count(workers, len(arguments))
    console = Console(stderr=True)
    plain = progress and not console.is_terminal
    started = time.monotonic()
    with Progress(*columns, disable=not progress or plain, transient=True, console=console) as bar:
        task = bar.add_task(label, total=len(arguments))

        def advance() -> None:
            bar.advance(task)
            if plain:
                finished = int(bar.tasks[0].completed)
                print(f"{Text.from_markup(label).plain}: {finished}/{len(arguments)} done, "
                      f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)

        if processes == 1:
            results = []
            for args in arguments:
                results.append(job(*args))
                advance()
            return results
        # A fresh interpreter per worker ("spawn"): forking a parent whose torch thread pool already runs can hang.
        context = multiprocessing.get_context("spawn")
        _quiet_resource_tracker()
        with ProcessPoolExecutor(processes, mp_context=context, initializer=_ignore_sigint) as pool:
            done: dict[int, R] = {}
            try:
                # The first submit starts the workers; a worker cut off while it starts prints a traceback of its
                # own, so a signal waits until they are all started, then ends them (below).
                with signals_deferred():
                    futures = {pool.submit(job, *args): k for k, args in enumerate(arguments)}
                for future in as_completed(futures):
                    done[futures[future]] = future.result()
                    advance()
            except KeyboardInterrupt:  # SIGINT or SIGTERM: the jobs under way are lost anyway, end them now
                _end_workers(pool)
                pool.shutdown(cancel_futures=True)
                raise
            except BaseException:  # a failed job: do not wait for the jobs not started yet
                pool.shutdown(cancel_futures=True)
                raise
    return [done[k] for k in range(len(arguments))]
