"""Independent training jobs (one graph per seed, fold or procedure) in worker processes, with a progress bar.

Each job trains with one torch thread (`tgml.learners.do.train` pins it), so one process per core uses the machine; a
job's result depends only on its arguments, so the figures are the same whatever the number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

R = TypeVar("R")


def worker_count(requested: int, jobs: int) -> int:
    """Processes to start: ``requested``, or with 0 one per core, never more than there are jobs (at least 1)."""
    return max(1, min(requested or os.cpu_count() or 1, jobs))


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
        progress: show a rich progress bar on stderr.

    Returns:
        The results, in the order of ``arguments``.
    """
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    processes = worker_count(workers, len(arguments))
    with Progress(*columns, disable=not progress, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task(label, total=len(arguments))
        if processes == 1:
            results = []
            for args in arguments:
                results.append(job(*args))
                bar.advance(task)
            return results
        # A fresh interpreter per worker ("spawn"): forking a parent whose torch thread pool already runs can hang.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(processes, mp_context=context) as pool:
            futures = {pool.submit(job, *args): k for k, args in enumerate(arguments)}
            done: dict[int, R] = {}
            try:
                for future in as_completed(futures):
                    done[futures[future]] = future.result()
                    bar.advance(task)
            except BaseException:  # a failed job or Ctrl-C: do not wait for the jobs not started yet
                pool.shutdown(cancel_futures=True)
                raise
    return [done[k] for k in range(len(arguments))]
