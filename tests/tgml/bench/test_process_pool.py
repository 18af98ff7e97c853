"""Training jobs in worker processes: results in the order given, whatever the number of workers; a failed job
fails the run."""

from __future__ import annotations

import pytest

from graphs.postprocess import scaled_threshold_steps
from tgml.bench.process_pool import run_jobs, worker_count

JOBS = [(12, 0.5), (12, 2.0), (7, 1.0), (30, 0.25)]  # any module-level function serves as a job


def test_results_come_back_in_the_order_of_the_jobs_with_one_worker_or_several() -> None:
    expected = [6, 24, 7, 8]
    assert run_jobs(scaled_threshold_steps, JOBS, workers=1, label="here", progress=False) == expected
    assert run_jobs(scaled_threshold_steps, JOBS, workers=2, label="pool", progress=False) == expected


def test_a_failing_job_fails_the_run() -> None:
    with pytest.raises(TypeError):
        run_jobs(scaled_threshold_steps, [*JOBS, ("twelve", None)], workers=2, label="pool", progress=False)


def test_worker_count_never_exceeds_the_jobs() -> None:
    assert worker_count(4, 2) == 2 and worker_count(1, 9) == 1 and worker_count(3, 0) == 1
    assert 1 <= worker_count(0, 100) <= 100  # 0: one per core


def test_where_stderr_is_no_terminal_each_finished_job_is_one_plain_line(capsys: pytest.CaptureFixture[str],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # A benchmark of several minutes run under nohup or into a log printed nothing until its tables: rich draws no
    # progress bar where there is no terminal.
    for forcing in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):  # rich takes these for a terminal
        monkeypatch.delenv(forcing, raising=False)
    run_jobs(scaled_threshold_steps, JOBS, workers=1, label="[bold]folds", progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(", ")[0] for line in lines] == [f"folds: {k}/4 done" for k in range(1, 5)]
    run_jobs(scaled_threshold_steps, JOBS, workers=1, label="folds", progress=False)
    assert capsys.readouterr().err == ""


def test_the_resource_trackers_cleanup_warnings_never_follow_the_runs_last_line() -> None:
    # Stopped, a benchmark ends its workers; multiprocessing's resource tracker then found their semaphores still
    # registered, cleaned them, and warned after "interrupted by SIGTERM" (a flaky tests/test_signals.py failure).
    # Here a semaphore left registered stands for them: the tracker, started by the pool, cleans it without a word.
    import subprocess
    import sys

    script = (
        "from multiprocessing import resource_tracker\n"
        "from graphs.postprocess import scaled_threshold_steps\n"
        "from tgml.bench.process_pool import run_jobs\n"
        f"print(run_jobs(scaled_threshold_steps, {JOBS!r}, workers=2, label='pool', progress=False))\n"
        "resource_tracker.register('/mp-test-left-registered', 'semaphore')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "[6, 24, 7, 8]\n")
    assert done.stderr == ""
