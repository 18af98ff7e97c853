"""Independent training jobs (one graph per seed, fold or procedure) in worker processes, with a progress bar.

Each job trains with one torch thread (`tgml.learners.do.train` pins it), so one process per core uses the machine; a
job's result depends only on its arguments, so the figures are the same whatever the number of workers.

A job may say what it is doing (`report_progress`): on a terminal each job under way gets a row of its own below the
bar, its phase and, where the job counts it, how far through that phase it is, since a bar of jobs stands still for as
long as the first jobs take (minutes of training).

The parent alone decides when the run stops: workers ignore SIGINT (a Ctrl-C reaches the whole process group, and
each worker would print its own traceback), and an interrupted parent (SIGINT or SIGTERM) ends its workers at once
instead of waiting for the jobs they run; so does a failed job, whose error then comes within seconds, not after the
other jobs under way. A parent that dies without a word (SIGKILL, the OOM killer) cannot end them: each worker
watches for that itself (`_watch_parent`) and ends within `PARENT_POLL_S`.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from graphs.common.errors import print_stderr
from graphs.common.interrupts import signals_deferred

if TYPE_CHECKING:  # loaded by run_jobs: every benchmark module imports this one, and their help pages need neither
    from concurrent.futures import ProcessPoolExecutor

R = TypeVar("R")


def worker_count(requested: int, jobs: int) -> int:
    """Processes to start: ``requested``, or with 0 one per core, never more than there are jobs (at least 1)."""
    return max(1, min(requested or os.cpu_count() or 1, jobs))


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


REPORT_EVERY_S: Final = 0.25  # a job sends a report (a count, a new phase) at most this often: rows redraw as often
Report = tuple[int, str, float | None, float | None]  # (job index, phase, done, total) for `run_jobs`' rows
_report: Callable[[Report], None] | None = None  # where this process's job reports go (None: nothing shows them)
_job: int | None = None  # the index of the job this process runs
_last: tuple[str, float] = ("", -math.inf)  # the phase last sent, and when
# The latest report held back by the rate limit, and the timer that sends it once its time comes: a job whose phase
# changed thousands of times a second sent each change at once and flooded the parent's queue (and its redraws), but
# the phase it stays in must still be shown, even if the job says nothing more during it.
_pending: Report | None = None
_flusher: threading.Timer | None = None
# Every send, the timer's and the job's, and the job's end take it: in a run of one worker `_report` draws the rows on
# the parent's own bar, which a timer's send must never touch while the job's end removes its row.
_lock = threading.Lock()


def report_progress(phase: str, done: float | None = None, total: float | None = None) -> None:
    """Say what the job under way is doing, for its row below `run_jobs`' bar: ``phase`` (``training its detector``)
    and, where it counts, how much of it is ``done`` of ``total``. Nothing where no bar shows it (``progress`` off, no
    terminal, or outside `run_jobs`). Cheap enough to call once per training batch, or per phase of a job that
    changes phase thousands of times a second: a report is sent at most every `REPORT_EVERY_S`; one that comes
    sooner waits, replaced by any later one, and the latest is sent when its time comes (a timer's thread)."""
    global _last, _pending, _flusher
    if _report is None or _job is None:
        return
    with _lock:
        report = (_job, phase, done, total)
        wait = _last[1] + REPORT_EVERY_S - time.monotonic()
        if wait > 0:
            _pending = report
            if _flusher is None:
                _flusher = threading.Timer(wait, _send_pending)
                _flusher.daemon = True  # a job's end cancels it; a worker's exit must not wait for it either
                _flusher.start()
            return
        _pending = None
        _send(report)


def _send(report: Report) -> None:
    """Hand ``report`` on and note when (``_lock`` held)."""
    global _last
    assert _report is not None
    _last = (report[1], time.monotonic())
    _report(report)


def _send_pending() -> None:
    """The timer's: send the report held back, unless the job has ended meanwhile."""
    global _pending, _flusher
    with _lock:
        _flusher = None
        if _pending is not None and _report is not None and _job == _pending[0]:
            _send(_pending)
        _pending = None


def reported_bar(phase: str) -> Any:
    """What to hand a trainer as its progress bar (`recognition.train.train_detector`'s ``progress``) so that its
    count of batches shows on the job's row as ``phase``: a rich ``Progress`` that draws nothing itself; False where
    no row shows reports, the trainer's own choice for no bar."""
    if _report is None or _job is None:
        return False
    from rich.progress import Progress

    class Reported(Progress):
        def update(self, *args: Any, **kwargs: Any) -> None:
            super().update(*args, **kwargs)
            task_id = args[0] if args else kwargs["task_id"]
            task = next(t for t in self.tasks if t.id == task_id)
            report_progress(phase, task.completed, task.total)

    return Reported(disable=True)


# How often a worker looks whether its parent still lives: a worker left by a killed parent burns its core this long
# at most (a job runs for minutes), for one system call a second while the parent lives.
PARENT_POLL_S: Final = 1.0
ORPHANED_EXIT: Final = 70  # a worker's exit status when it ends itself because its parent is gone (EX_SOFTWARE)


def _watch_parent(parent: int, period: float = PARENT_POLL_S) -> None:
    """End this worker process at once when its parent, process ``parent``, is gone.

    A thread polling ``os.getppid()``, not Linux's ``prctl(PR_SET_PDEATHSIG)``: that signal fires when the *thread*
    that started the worker ends, not its process, and the pool starts workers from whichever thread submits a job
    (a run off the main thread, whose thread then ends, would kill healthy workers), and a pool with
    ``max_tasks_per_child`` replaces them from its manager thread; it also misses a parent that died before the
    worker set it, and exists on Linux only. An orphan is re-parented (to init or a subreaper), so a parent pid that
    changed means the parent died, whatever killed it; the pid is the parent's own, handed over, since one read here
    could already be the new parent's.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period)
        # Nobody is left to read the result; the job may hold the main thread in C code for minutes (torch), so no
        # exception or signal it could catch, delay or ignore: the process ends here.
        os._exit(ORPHANED_EXIT)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _start_worker(reports: Any, parent: int | None = None) -> None:
    """A worker's initializer: SIGINT ignored (`_ignore_sigint`), the worker ended when process ``parent`` dies
    (`_watch_parent`; None: not watched), and its jobs' reports put on ``reports`` (a multiprocessing queue the
    parent reads; None: no rows are shown)."""
    global _report
    _ignore_sigint()
    if parent is not None:
        _watch_parent(parent)
    if reports is not None:
        # A worker that ends must not wait for the parent to read its last reports: a lost one is only a row's redraw.
        reports.cancel_join_thread()
        _report = reports.put


def _reported_job(job: Callable[..., R], index: int, args: tuple[Any, ...]) -> R:
    """``job(*args)`` with its reports marked as job ``index``'s (a worker runs one job at a time)."""
    global _job, _last, _pending, _flusher
    with _lock:
        _job, _last = index, ("", -math.inf)
    try:
        return job(*args)
    finally:
        with _lock:  # a report still held back is dropped: the job's row goes with its result
            _job, _pending = None, None
            if _flusher is not None:
                _flusher.cancel()
                _flusher = None


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
    job: Callable[..., R], arguments: Sequence[tuple[Any, ...]], workers: int, label: str, progress: bool = True,
    names: Sequence[str] | None = None,
) -> list[R]:
    """Run ``job(*args)`` for every ``args`` of ``arguments``, in worker processes when more than one is asked for.

    Args:
        job: a module-level function (worker processes import it by name).
        arguments: one argument tuple per job; give the slowest first, so no worker is left alone on a long job
            at the end.
        workers: processes (0 = one per core); 1 runs the jobs here, one after the other.
        label: what the progress bar says.
        progress: show a rich progress bar on stderr, with a row per job under way saying what it reports
            (`report_progress`); where stderr is no terminal (a log file, ``nohup``), where rich draws nothing until
            the end, one plain line per finished job instead.
        names: each job's name on its row (``pinwheels fold 0``); None: ``job 1``, ``job 2``, ...

    Returns:
        The results, in the order of ``arguments``.
    """
    global _report
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
    from rich.table import Column
    from rich.text import Text

    processes = worker_count(workers, len(arguments))
    console = Console(stderr=True)
    plain = progress and not console.is_terminal
    rows_shown = progress and not plain
    started = time.monotonic()
    # The jobs' bar counts jobs (3/18), a job's row the share of its phase done (nothing where it counts none). The
    # words give way on a narrow terminal, cut with an ellipsis: at 80 columns a row's phase pushed its bar, count and
    # time off the line.
    columns = (TextColumn("{task.description}", table_column=Column(ratio=2, no_wrap=True, overflow="ellipsis")),
               BarColumn(bar_width=None, table_column=Column(ratio=1)), TextColumn("{task.fields[count]}"),
               TimeElapsedColumn())
    with Progress(*columns, disable=not rows_shown, transient=True, console=console, expand=True) as bar:
        task = bar.add_task(label, total=len(arguments), count=f"0/{len(arguments)}")
        rows: dict[int, tuple[TaskID, str]] = {}  # job index -> its row and the phase it shows
        finished: set[int] = set()

        def show(report: Report) -> None:
            index, phase, count, total = report
            if index in finished:  # a report that came after its job's result: no row to bring back
                return
            share = "" if not total else f"{100 * (count or 0) / total:3.0f}%"
            row = rows.get(index)
            if row is not None and row[1] == phase:
                bar.update(row[0], completed=count or 0, total=total, count=share)
                return
            name = escape(names[index]) if names is not None else f"job {index + 1}"
            description = f"  {name}: {escape(phase)}"
            if row is None:
                rows[index] = (bar.add_task(description, total=total, completed=int(count or 0), count=share), phase)
                return
            # A new phase redraws the job's own row, its elapsed time the phase's: a row removed and added again went
            # to the bottom, and two folds under way swapped places at each phase.
            bar.reset(row[0], total=total, completed=int(count or 0), description=description, count=share)
            if total is None:  # reset keeps a total it is not given; a phase that counts nothing shows no share
                next(t for t in bar.tasks if t.id == row[0]).total = None
            rows[index] = (row[0], phase)

        def advance(index: int) -> None:
            finished.add(index)
            row = rows.pop(index, None)
            if row is not None:
                bar.remove_task(row[0])
            bar.advance(task)
            count = int(bar.tasks[0].completed)
            bar.update(task, count=f"{count}/{len(arguments)}")
            if plain:
                print_stderr(f"{Text.from_markup(label).plain}: {count}/{len(arguments)} done, "
                             f"{time.monotonic() - started:.0f} s")

        if processes == 1:
            _report = show if rows_shown else None
            try:
                results = []
                for index, args in enumerate(arguments):
                    results.append(_reported_job(job, index, args))
                    advance(index)
                return results
            finally:
                _report = None
        # A fresh interpreter per worker ("spawn"): forking a parent whose torch thread pool already runs can hang.
        context = multiprocessing.get_context("spawn")
        _quiet_resource_tracker()
        reports = context.Queue() if rows_shown else None
        try:
            with ProcessPoolExecutor(processes, mp_context=context, initializer=_start_worker,
                                     initargs=(reports, os.getpid())) as pool:
                done: dict[int, R] = {}
                try:
                    # The first submit starts the workers; a worker cut off while it starts prints a traceback of
                    # its own, so a signal waits until they are all started, then ends them (below).
                    with signals_deferred():
                        futures = {pool.submit(_reported_job, job, k, args): k for k, args in enumerate(arguments)}
                    pending = set(futures)
                    while pending:
                        # `wait` takes every pending future's lock while it sets up: a stop raised in there by the
                        # signal's handler left one taken, the pool's manager thread waited on it, and the shutdown
                        # below on the manager, for ever (SIGTERM right after the bar showed, 1 run in 30 on a busy
                        # machine). So a stop waits for `wait` to return, which a bounded timeout keeps prompt.
                        with signals_deferred():
                            ready, pending = wait(pending, REPORT_EVERY_S, FIRST_COMPLETED)
                            finished_now = [(futures[future], future.result()) for future in ready]
                        for index, result in finished_now:
                            done[index] = result
                            advance(index)
                        _show_reports(reports, show)
                except BaseException:
                    # A stop (SIGINT, SIGTERM) or a failed job: the run's result is lost either way, so the jobs under
                    # way are ended and those not started cancelled. A failed job's error waited for its siblings'
                    # folds (minutes of training) before the user saw it; the pool's own exit would wait for them too.
                    _end_workers(pool)
                    pool.shutdown(cancel_futures=True)
                    raise
        finally:
            if reports is not None:
                reports.close()
    return [done[k] for k in range(len(arguments))]


def _show_reports(reports: Any, show: Callable[[Report], None]) -> None:
    """Hand every report the workers have put on ``reports`` so far to ``show`` (None: no queue)."""
    import queue

    while reports is not None:
        try:
            show(reports.get_nowait())
        except queue.Empty:
            return

