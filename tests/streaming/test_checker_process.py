"""The checker child process of the all-in-one run, and its lifetime."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from graphs.task_graph import save_graph
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
