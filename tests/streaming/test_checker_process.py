"""The checker child process of the all-in-one run, and its lifetime."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from graphs.task_graph import save_graph
from streaming.all_in_one import STOP_REPORT_S
from streaming.checker.config import CheckerConfig
from streaming.checker.process import STOP_TIMEOUT_S, TERM_GRACE_S, CheckerProcess
from tests.streaming.helpers import tea_graph

ROOT = Path(__file__).resolve().parents[2]


def running(pid: int) -> bool:
    """Whether a process exists and is not a zombie (an orphan's reaper may be slow or absent in containers)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_checker_child_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    # A parent killed outright (SIGKILL, or SIGTERM before the CLI handled it) cannot stop its checker; the
    # child kept serving, and holding its ports, forever.
    graph = tmp_path / "tea.json"
    save_graph(tea_graph(), graph)
    code = (
        "import time\n"
        "from streaming.checker.config import CheckerConfig\n"
        "from streaming.checker.process import CheckerProcess\n"
        f"checker = CheckerProcess({str(graph)!r}, CheckerConfig('ipc://{tmp_path}/in', 'ipc://{tmp_path}/out'))\n"
        "print(checker.process.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert running(child)
        parent.kill()
        parent.wait(5)
        deadline = time.monotonic() + 5.0
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(child)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(5)
        if child and running(child):
            os.kill(child, signal.SIGKILL)


def until_ended(pid: int, timeout_s: float) -> float:
    """Seconds until ``pid`` ended (``timeout_s`` when it did not: the caller's assert says so)."""
    started = time.monotonic()
    while running(pid) and time.monotonic() - started < timeout_s:
        time.sleep(0.05)
    return time.monotonic() - started


def test_the_checker_child_outlasts_a_sigterm_of_its_own_by_its_grace_and_stops_at_once_when_asked(
    tmp_path: Path,
) -> None:
    # A SIGTERM to the whole process group (systemd, `timeout`) stopped the child with its parent, before the parent
    # could show the session's end report (tests/test_signals.py); a SIGTERM to the child alone must still stop it.
    assert STOP_REPORT_S < TERM_GRACE_S  # the run's wait for the report ends inside the child's grace
    graph = tmp_path / "tea.json"
    save_graph(tea_graph(), graph)
    config = CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out")
    with CheckerProcess(str(graph), config) as alone:
        assert alone.process.pid is not None
        os.kill(alone.process.pid, signal.SIGTERM)
        waited = until_ended(alone.process.pid, TERM_GRACE_S + 10)
        assert TERM_GRACE_S - 0.5 < waited < TERM_GRACE_S + 10, waited
    with CheckerProcess(str(graph), CheckerConfig(f"ipc://{tmp_path}/in2", f"ipc://{tmp_path}/out2")) as asked:
        assert asked.process.pid is not None
        os.kill(asked.process.pid, signal.SIGTERM)
        started = time.monotonic()
        asked.stop()  # the parent's own wind-down is over: it asks, and the child ends well inside its grace
        assert not asked.process.is_alive() and time.monotonic() - started < STOP_TIMEOUT_S  # not killed
