"""The one-command run, the view and the dashboard never wait on their log, nor end on it: stderr a pipe whose reader
stopped reading (full), closed from the start (``2>&-``) or on a full device (/dev/full). Their log is queued, as the
checker's and the detector's are (`streaming.service_log.queued_log`)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from streaming.messages import Status, encode_payload
from streaming.transport import Publisher, bind
from tests.streaming.helpers import STREAM_DETECT, full_pipe, refused_port, wait_for

pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="Linux pipes and /dev/full")

RUN_S = 180.0  # the run loads torch and the demo's detector on a busy 2-core machine
STARTUP_S = 60.0
MODES = ("full pipe", "closed", "/dev/full")


@contextlib.contextmanager
def started(command: list[str], mode: str) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` with its stderr as ``mode`` says and its stdout a pipe; killed on the way out if still running."""
    kept: list[int] = []
    if mode == "full pipe":
        read, write = full_pipe()
        kept.append(read)
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=write)
        os.close(write)
    elif mode == "closed":
        process = subprocess.Popen(["sh", "-c", 'exec "$@" 2>&-', "sh", *command], stdout=subprocess.PIPE)
    else:
        with open("/dev/full", "wb") as full:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=full)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()
        for fd in kept:
            os.close(fd)


@pytest.mark.parametrize("mode", MODES)
def test_a_run_whose_stderr_takes_nothing_plays_its_stream_to_the_end(mode: str) -> None:
    # The webhook's failures and its summary were written by the webhook's thread and the main one: on a full pipe
    # the run never ended; closed (`2>&-`), the run ended at once, exit status 1, on `sys.stderr.isatty()`.
    with refused_port() as port, started([*STREAM_DETECT, "--video", "demo", "--fast", "--jsonl", "--webhook",
                                          f"http://127.0.0.1:{port}/hook"], mode) as run:
        out, _ = run.communicate(timeout=RUN_S)
    lines = [json.loads(line) for line in out.splitlines()]
    assert run.returncode == 0, out[-500:]
    assert any(line["kind"] == "status" and line["ended"] for line in lines), out[-500:]


def _lines_of(process: subprocess.Popen[bytes], got: bytearray) -> list[dict[str, Any]]:
    """The JSON lines ``process`` printed so far (read without waiting)."""
    assert process.stdout is not None
    while select.select([process.stdout], [], [], 0)[0] and (chunk := os.read(process.stdout.fileno(), 65536)):
        got.extend(chunk)
    return [json.loads(line) for line in got.decode().splitlines() if line.strip()]


def _status(done: tuple[int, ...]) -> Status:
    return Status(stream_id="kitchen", seq=len(done), timestamp=1.0, run="s", done=done, allowed=(), current=None,
                  alerts=0, frames=10, dropped=0, fps=10.0, gaps=0, ended=False, lost=False, allowed_scores=(),
                  rule="binary")


@pytest.mark.parametrize("mode", MODES)
def test_a_view_whose_stderr_takes_nothing_shows_what_comes_after_a_warning(mode: str) -> None:
    # The view wrote its warnings (here: a malformed message dropped) from its loop: on a full pipe the loop stopped
    # there, no message after it was shown, and a SIGTERM's line waited on the pipe too.
    ctx = zmq.Context()
    try:
        pub, endpoint = bind(ctx, zmq.PUB, "tcp://127.0.0.1:0")
        with started([*STREAM_DETECT, "view", "--demo", "--connect", endpoint, "--jsonl"], mode) as view:
            got = bytearray()

            def shows(done: tuple[int, ...]) -> bool:
                return any(line.get("done") == list(done) for line in _lines_of(view, got))

            assert wait_for(lambda: shows((1,)) or view.poll() is not None, STARTUP_S,
                            lambda: Publisher(pub).send(_status((1,)))), got
            assert view.poll() is None, got
            good = json.loads(encode_payload(_status((1, 2))))

            def send() -> None:
                pub.send_multipart([b"status/kitchen", b"not json"])
                pub.send_multipart([b"status/kitchen", json.dumps(good).encode()])

            assert wait_for(lambda: shows((1, 2)) or view.poll() is not None, 30.0, send) and view.poll() is None, got
            view.send_signal(signal.SIGTERM)
            assert view.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        ctx.destroy(linger=0)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@pytest.mark.parametrize("mode", MODES)
def test_a_dashboard_whose_stderr_takes_nothing_serves_its_page(tmp_path: Path, mode: str) -> None:
    # Its warning that the --alert-frames folder is not there yet was written on the way to serving: on a full pipe
    # the dashboard never served, and a SIGTERM did not end it.
    with socket.socket() as probe:  # a free port, known before it starts: its stderr may never say it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [*STREAM_DETECT, "dashboard", "--demo", "--connect", "tcp://127.0.0.1:9", "--bind", f"127.0.0.1:{port}",
               "--alert-frames", str(tmp_path / "not yet")]
    with started(command, mode) as dashboard:
        assert wait_for(lambda: _answers(f"http://127.0.0.1:{port}/") or dashboard.poll() is not None, STARTUP_S)
        assert dashboard.poll() is None and _answers(f"http://127.0.0.1:{port}/")
        dashboard.send_signal(signal.SIGTERM)
        assert dashboard.wait(timeout=30) == 128 + signal.SIGTERM


def test_a_line_logged_while_a_live_view_draws_on_the_terminal_is_printed_above_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # While the view (or the one-command run's) draws on a terminal, rich's Live puts a proxy in sys.stderr that
    # prints a line above the view. The queued log wrote to the descriptor under the proxy: the line landed inside the
    # view, and its next redraw erased it (a webhook failing, a frame not read, said to nobody).
    import io

    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from streaming.service_log import queued_log

    with (tmp_path / "stderr").open("w") as stderr:  # a real descriptor under the proxy, as a terminal's
        monkeypatch.setattr("sys.stderr", stderr)
        screen = io.StringIO()
        console = Console(file=screen, force_terminal=True, width=120)
        with Live(Text("the view"), console=console, auto_refresh=False) as live, queued_log("view", "text") as log:
            live.refresh()
            log.warning("webhook https://example.invalid: 3 message(s) not delivered")
            assert log.close()
            live.update(Text("the view, redrawn"), refresh=True)
    assert (tmp_path / "stderr").read_text() == ""
    drawn = screen.getvalue()
    assert "warning: webhook https://example.invalid: 3 message(s) not delivered" in drawn
    assert drawn.index("not delivered") < drawn.index("the view, redrawn")
