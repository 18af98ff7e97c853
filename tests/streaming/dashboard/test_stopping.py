"""Stopping `stream-detect dashboard` with a page open, in a real process sent a real signal.

An operator who presses Ctrl-C (or a service manager that sends SIGTERM) expects the dashboard to stop at once. With
a page open, aiohttp's shutdown waited `CLOSE_TIMEOUT_S` for the page's handler to end by itself, then cancelled it
and waited again: 4 s of silence on the terminal, a second Ctrl-C did nothing, and the page learnt of the stop only
as a broken connection (1006). And one stopped while asyncio makes its event loop ends in its one line too.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the dashboard needs the 'dashboard' extra (aiohttp)")

import aiohttp  # noqa: E402 - after the skip

from tests.streaming.helpers import STREAM_DETECT  # noqa: E402

STARTUP_S = 60.0  # the command imports aiohttp and zmq on a busy 2-core machine
PROMPT_S = 1.5  # a stop with a page open; it took 4.3 s before pages were closed at shutdown
SERVING = re.compile(r"dashboard: serving (http://127\.0\.0\.1:\d+/)")


def started_dashboard() -> tuple[subprocess.Popen[str], str]:
    """`stream-detect dashboard` on a free loopback port (no checker needed); the process and its page's address."""
    process = subprocess.Popen(
        [*STREAM_DETECT, "dashboard", "--demo", "--connect", "tcp://127.0.0.1:9", "--bind", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, restore_signals=True,
        # As from a terminal: under nohup the suite's SIGHUP is ignored, and the dashboard keeps it ignored.
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )  # fmt: skip
    assert process.stderr is not None
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:  # readline returns "" once the process has ended: the loop is bounded
        line = process.stderr.readline()
        if (match := SERVING.search(line)) is not None:
            return process, match.group(1)
        if not line:
            break
    process.kill()
    raise AssertionError(f"the dashboard did not start: {process.communicate(timeout=10)[1][-500:]}")


# SIGHUP: a closed terminal or a dropped ssh session; it cut the pages off (1006) without the shutdown.
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_dashboard_with_a_page_open_stops_at_once_and_tells_the_page(signum: int, status: int) -> None:
    process, url = started_dashboard()
    try:

        async def page() -> tuple[float, int | None]:
            async with aiohttp.ClientSession() as session, session.ws_connect(url + "ws") as ws:
                assert (await ws.receive_json(timeout=10))["type"] == "snapshot"
                sent = time.monotonic()
                process.send_signal(signum)
                while not ws.closed:  # a browser reads on: it answers the dashboard's close at once
                    await ws.receive(timeout=10)
                await asyncio.get_running_loop().run_in_executor(None, process.wait, 30)
                return time.monotonic() - sent, ws.close_code

        took, close_code = asyncio.run(page())
        stderr = process.communicate(timeout=10)[1]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert process.returncode == status, stderr[-800:]
    assert "Traceback" not in stderr, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == f"interrupted by {signal.Signals(signum).name}: stopped"
    assert close_code == aiohttp.WSCloseCode.GOING_AWAY  # the page says the dashboard went, and reconnects
    assert took < PROMPT_S, f"the dashboard took {took:.1f} s to stop with a page open"


ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("where", ["new_event_loop", "create_task"])
def test_a_dashboard_stopped_while_its_event_loop_is_made_ends_in_its_one_line(where: str) -> None:
    # A SIGTERM some 0.5 s after the start (once in ~22 tries) landed while asyncio made its loop, before the serving
    # coroutine ran: after "interrupted by SIGTERM: stopped" came "RuntimeWarning: coroutine ... was never awaited".
    # The command runs as its console script does; a real SIGTERM is sent as asyncio calls ``where``.
    script = ("import signal\nfrom tests.signal_calls import signal_when_called\n"
              "from streaming.stream_detect_cli import main\n"
              f"with signal_when_called({where!r}, signal.SIGTERM):\n"
              "    main(['dashboard', '--connect', 'tcp://127.0.0.1:9', '--bind', '127.0.0.1:0'])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert (done.returncode, done.stderr) == (143, "interrupted by SIGTERM: stopped\n")
