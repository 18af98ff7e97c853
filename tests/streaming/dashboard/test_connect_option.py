"""The dashboard's checker endpoint is ``--connect``, as the view's and the detector's are; ``--checker``, its first
name, still works (hidden) so that a service unit written before keeps starting, in a real ``stream-detect`` process
against a real checker."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the dashboard needs the 'dashboard' extra (aiohttp)")

from streaming.stream_detect_cli import main  # noqa: E402
from tests.cli_errors import cli_error  # noqa: E402
from tests.streaming.dashboard.serving import get  # noqa: E402
from tests.streaming.helpers import STREAM_DETECT, running_checker, wait_for  # noqa: E402

STARTUP_S = 60.0  # the command imports aiohttp and zmq on a busy 2-core machine
SERVING = re.compile(r"dashboard: serving (http://127\.0\.0\.1:\d+/) \(checker (\S+)\)")


@pytest.mark.parametrize("option", ["--connect", "--checker"])
def test_the_dashboard_reaches_the_checker_by_connect_or_its_old_name(tmp_path: Path, option: str) -> None:
    with running_checker(tmp_path) as (_ctx, service, _thread):
        process = subprocess.Popen([*STREAM_DETECT, "dashboard", option, service.alerts_endpoint, "--demo", "--bind",
                                    "127.0.0.1:0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(process.stderr or ()), daemon=True)
        reader.start()
        try:
            assert wait_for(lambda: any(SERVING.search(line) for line in lines) or process.poll() is not None,
                            STARTUP_S), lines
            match = next((m for m in map(SERVING.search, lines) if m is not None), None)
            assert match is not None, lines
            assert match.group(2) == service.alerts_endpoint

            def connected() -> bool:
                status, body, _ = get(match.group(1) + "api/state")
                return status == 200 and bool(json.loads(body)["link"]["connected"])

            assert wait_for(connected, 30), lines
        finally:
            process.terminate()
            process.wait(timeout=60)
            reader.join(timeout=10)
    assert not [line for line in lines if "Traceback" in line or line.startswith("error:")], lines


def test_connect_and_its_old_name_together_are_one_error_line(tmp_path: Path) -> None:
    done = subprocess.run([*STREAM_DETECT, "dashboard", "--connect", f"ipc://{tmp_path}/a", "--checker",
                           f"ipc://{tmp_path}/a", "--demo", "--bind", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=STARTUP_S)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: stream-detect dashboard: --checker and --connect both name the checker's endpoint (--checker is the "
        "old name of --connect): give --connect only"]


def test_the_help_names_connect_and_not_the_old_name() -> None:
    shown = subprocess.run([*STREAM_DETECT, "dashboard", "--help"], capture_output=True, text=True, timeout=STARTUP_S)
    assert shown.returncode == 0 and "--connect ENDPOINT" in shown.stdout and "--checker" not in shown.stdout


@pytest.mark.parametrize("option", ["--connect", "--checker"])
def test_a_bad_endpoint_is_named_by_the_option_typed(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(main, ["dashboard", option, "tcp://127.0.0.1:0", "--demo"], capsys)
    assert line.startswith(f"error: {option} tcp://127.0.0.1:0: the port must be 1-65535"), line
    line = cli_error(main, ["dashboard", option, "tcp://no-such-host.invalid:5556", "--demo", "--bind",
                            "127.0.0.1:0"], capsys)
    assert line.startswith(f"error: {option} tcp://no-such-host.invalid:5556: no host is named"), line


@pytest.mark.parametrize("option", ["--connect", "--checker"])
def test_an_empty_endpoint_is_refused_whichever_name_gives_it(option: str) -> None:
    # `--connect ""` (a unit's unset variable) fell back to the default checker and served, as if given nothing,
    # while `--checker ""` was refused.
    try:
        done = subprocess.run([*STREAM_DETECT, "dashboard", option, "", "--demo", "--bind", "127.0.0.1:0"],
                              capture_output=True, text=True, timeout=STARTUP_S)
    except subprocess.TimeoutExpired as served:
        pytest.fail(f"{option} '' started a dashboard: {served.stderr!r}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: {option} '' is not a ZeroMQ endpoint (tcp://HOST:PORT, ipc://PATH, "
                                        "inproc://NAME)"]
