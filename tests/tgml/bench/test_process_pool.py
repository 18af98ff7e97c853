"""Training jobs in worker processes: results in the order given, whatever the number of workers; a failed job
fails the run."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

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


REPORTING_SCRIPT = '''
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tgml.bench.process_pool import report_progress, run_jobs


def job(name: str, go: str) -> str:
    report_progress("training its detector", 1, 4)
    while not Path(go).exists():  # held until the test has seen the row drawn
        time.sleep(0.01)
    return name


if __name__ == "__main__":
    print(run_jobs(job, [("a", sys.argv[1]), ("b", sys.argv[1])], workers=2, label="folds", names=["kit fold 0",
                                                                                                   "kit fold 1"]))
'''


def drawn_in_terminal(script_text: str, tmp_path: Path, columns: int,
                      seen: Callable[[bytes], bool]) -> tuple[bytes, int, bytes]:
    """Run a reporting script on a terminal of ``columns`` until ``seen(what it drew)``, then let its jobs end.

    Returns:
        What it drew on the terminal, its exit status and its standard output.
    """
    script, go = tmp_path / "reporting.py", tmp_path / "go"
    script.write_text(script_text)
    master, slave = pty.openpty()
    run = subprocess.Popen([sys.executable, str(script), str(go)], stdin=slave, stdout=subprocess.PIPE, stderr=slave,
                           env={k: v for k, v in os.environ.items() if k not in ("TERM", "NO_COLOR")}
                           | {"COLUMNS": str(columns), "TERM": "xterm"})
    os.close(slave)
    drawn = b""
    try:
        deadline = time.monotonic() + 120
        while not seen(drawn) and time.monotonic() < deadline and run.poll() is None:
            if select.select([master], [], [], 1.0)[0]:
                drawn += os.read(master, 65536)
        go.touch()
        out, _ = run.communicate(timeout=120)
    finally:
        os.close(master)
    return drawn, run.returncode, out


def test_what_a_job_in_a_worker_reports_is_drawn_as_its_own_row_under_the_bar(tmp_path: Path) -> None:
    # The bar counts finished jobs only: bench-live's stood at 0/18 for the two minutes its first folds trained.
    drawn, status, out = drawn_in_terminal(
        REPORTING_SCRIPT, tmp_path, 120,
        lambda drawn: all(row in drawn for row in (b"kit fold 0: training its detector", b"kit fold 1: training")))
    assert b"kit fold 0: training its detector" in drawn and b"25%" in drawn, drawn[-2000:]
    assert (status, out) == (0, b"['a', 'b']\n")


LONG_PHASE_SCRIPT = REPORTING_SCRIPT.replace(
    '"training its detector"',
    '"learning its validation graph, its detector over its recordings, then its observed pre-conditions"')


def rows_of(drawn: bytes, name: bytes) -> list[bytes]:
    """The lines drawn that name ``name``."""
    return [line for line in re.split(rb"[\r\n]+", drawn) if name in line]


def test_on_an_80_column_terminal_a_long_phase_is_cut_and_its_rows_share_and_time_stay_on_the_line(
    tmp_path: Path,
) -> None:
    # bench-live's phases are long: at 80 columns the words pushed the row's bar, share and elapsed time off the line.
    name = b"kit fold 0: learning"
    drawn, status, out = drawn_in_terminal(LONG_PHASE_SCRIPT, tmp_path, 80,
                                           lambda drawn: any(b"25%" in row for row in rows_of(drawn, name)))
    assert (status, out) == (0, b"['a', 'b']\n")
    row = next((row for row in rows_of(drawn, name) if b"25%" in row), None)
    assert row is not None, drawn[-2000:]
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", row).decode()
    assert "\u2026" in text and re.search(r"25% 0:00:\d\d\s*$", text), text


PHASES_SCRIPT = '''
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tgml.bench.process_pool import report_progress, run_jobs


def held(path: Path) -> None:
    while not path.exists():  # held until the test has seen what it waits for drawn
        time.sleep(0.01)


def job(name: str, folder: str) -> str:
    here = Path(folder)
    if name == "b":
        held(here / "b")
    report_progress("phase one", 1, 4)
    if name == "a":
        held(here / "a2")
        report_progress("phase two", 3, 4)
    held(here / "end")
    return name


if __name__ == "__main__":
    print(run_jobs(job, [("a", sys.argv[1]), ("b", sys.argv[1])], workers=2, label="all-folds-bar",
                   names=["kit fold 0", "kit fold 1"]))
'''


def test_a_jobs_row_keeps_its_place_when_its_phase_changes(tmp_path: Path) -> None:
    # A new phase removed the job's row and added it again at the bottom: with two folds under way, they swapped
    # places at each phase, and the eye that followed "fold 0" on the second line read fold 1's row.
    script = tmp_path / "phases.py"
    script.write_text(PHASES_SCRIPT)
    master, slave = pty.openpty()
    run = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdin=slave, stdout=subprocess.PIPE,
                           stderr=slave, env={k: v for k, v in os.environ.items() if k not in ("TERM", "NO_COLOR")}
                           | {"COLUMNS": "120", "TERM": "xterm"})
    os.close(slave)
    drawn = b""

    def read_until(done: Callable[[], bool]) -> None:
        nonlocal drawn
        deadline = time.monotonic() + 120
        while not done() and time.monotonic() < deadline and run.poll() is None:
            if select.select([master], [], [], 1.0)[0]:
                drawn += os.read(master, 65536)

    def frames() -> list[bytes]:  # each redraw starts with the bar of jobs, the rows of the jobs under way below it
        return drawn.split(b"all-folds-bar")[1:-1]  # the last one may be cut short

    try:
        read_until(lambda: any(b"kit fold 0: phase one" in f for f in frames()))
        (tmp_path / "b").touch()
        read_until(lambda: any(b"kit fold 1: phase one" in f for f in frames()))
        (tmp_path / "a2").touch()
        read_until(lambda: any(b"kit fold 0: phase two" in f for f in frames()))
        last = next(f for f in reversed(frames()) if b"kit fold 0: phase two" in f)
        (tmp_path / "end").touch()
        out, _ = run.communicate(timeout=120)
    finally:
        (tmp_path / "end").touch()  # a failed wait above: the jobs end, and the run with them
        if run.poll() is None:
            run.communicate(timeout=120)
        os.close(master)
    assert (run.returncode, out) == (0, b"['a', 'b']\n")
    assert b"kit fold 1: phase one" in last, last
    assert last.index(b"kit fold 0: phase two") < last.index(b"kit fold 1: phase one"), last


def test_a_job_changing_its_phase_thousands_of_times_a_second_sends_few_reports_and_shows_its_latest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A new phase was sent at once, rate limit or not: a job that changed phase per item flooded the parent's queue
    # with thousands of reports a second, and the parent redrew its rows for each.
    from tests.streaming.helpers import wait_for
    from tgml.bench import process_pool

    got: list[process_pool.Report] = []
    monkeypatch.setattr(process_pool, "_report", got.append)

    def job() -> int:
        for k in range(5000):
            process_pool.report_progress(f"item {k}")
        # The last phase is the one the job stays in: shown, though the job says nothing more.
        assert wait_for(lambda: bool(got) and got[-1][1] == "item 4999", 5.0), got[-3:]
        return len(got)

    assert process_pool._reported_job(job, 0, ()) <= 3, got[:5]
    process_pool.report_progress("after its end")  # outside a job: nothing sent, nothing held back
    assert got[-1][1] == "item 4999" and process_pool._pending is None and process_pool._flusher is None


SLOW_JOBS_SCRIPT = '''
import os
import sys
import time
from pathlib import Path

from tgml.bench.process_pool import run_jobs


def job(name: str, folder: str) -> str:
    here = Path(folder)
    (here / f"{name}.pid").write_text(str(os.getpid()))
    if name == "fails":
        while not (here / "slow.pid").exists():  # fails only once its sibling is under way
            time.sleep(0.01)
        raise ValueError("fold 1 failed")
    time.sleep(300)  # a fold training for minutes
    return name


if __name__ == "__main__":
    jobs = [(name, sys.argv[1]) for name in sys.argv[2].split(",")]
    started = time.monotonic()
    try:
        run_jobs(job, jobs, workers=len(jobs), label="folds", progress=False)
    except ValueError as err:
        print(f"error: {err} after {time.monotonic() - started:.0f} s", flush=True)
        sys.exit(1)
'''


def _process_gone(pid: int) -> bool:
    """Whether process ``pid`` has ended: absent, or a zombie nobody reaped (an orphan's new parent in a container
    may be a PID 1 that never reaps)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _pids(folder: Path, names: tuple[str, ...]) -> list[int]:
    from tests.streaming.helpers import wait_for

    assert wait_for(lambda: all((folder / f"{n}.pid").exists() and (folder / f"{n}.pid").read_text() for n in names),
                    120), sorted(p.name for p in folder.iterdir())
    return [int((folder / f"{n}.pid").read_text()) for n in names]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_workers_end_soon_after_their_parent_is_killed(tmp_path: Path) -> None:
    # A bench command SIGKILLed (or OOM-killed) left its workers training their folds, each burning a core for as
    # long as its job took: nobody was left to end them.
    from tests.streaming.helpers import wait_for

    script = tmp_path / "slow.py"
    script.write_text(SLOW_JOBS_SCRIPT)
    run = subprocess.Popen([sys.executable, str(script), str(tmp_path), "slow,slower"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        workers = _pids(tmp_path, ("slow", "slower"))
        run.kill()
        run.wait(timeout=30)
        assert wait_for(lambda: all(_process_gone(pid) for pid in workers), 30), \
            [pid for pid in workers if not _process_gone(pid)]
    finally:
        run.kill()
        run.wait(timeout=30)
        for pid in workers:  # the old code's orphans: not left running for minutes after a failed test
            if not _process_gone(pid):
                os.kill(pid, 9)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_failing_job_ends_its_running_siblings_and_its_error_comes_at_once(tmp_path: Path) -> None:
    # The run waited for the folds under way (minutes of training) before the failed one's error showed.
    script, out = tmp_path / "failing.py", tmp_path / "out.txt"
    script.write_text(SLOW_JOBS_SCRIPT)
    with out.open("w") as written:  # a file, not a pipe: workers left behind would hold a pipe open after the run
        run = subprocess.Popen([sys.executable, str(script), str(tmp_path), "slow,fails"], stdout=written,
                               stderr=subprocess.STDOUT)
    slow = 0
    try:
        slow = _pids(tmp_path, ("slow",))[0]
        status = run.wait(timeout=60)  # the slow job alone takes 300 s
        assert (status, out.read_text().split(" after ")[0]) == (1, "error: fold 1 failed"), out.read_text()[-2000:]
        assert _process_gone(slow)
    finally:
        run.kill()
        run.wait(timeout=30)
        if slow and not _process_gone(slow):  # the old code's: not left running for minutes after a failed test
            os.kill(slow, 9)
