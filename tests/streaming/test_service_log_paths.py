"""What a running service says besides its own lines goes through its log too: a secret key file open to others, a
sink of the view failing, Python's warnings and a library's log records. Written straight to stderr, each was a
plain line in a ``--log-format json`` log, and on a stderr that takes nothing (a pipe whose reader stopped reading)
it held the thread that said it (`streaming.service_log.queued_log`)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from graphs.common.errors import InputError
from streaming.curve_keys import CurveClient
from streaming.messages import Message, Status
from streaming.service_log import ServiceLog, queued_log
from streaming.stream_detect_cli import main
from streaming.transport import Publisher, Receiver, bind, connect, subscribe
from streaming.view.client import Viewer, run_view
from streaming.view.state import ViewState
from tests.streaming.helpers import beat, demo_checker_process, full_pipe, wait_for

pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="Linux pipes")

@pytest.fixture
def loose_keys(tmp_path: Path) -> Path:
    """A key set made by the command users run, the checker's secret key file readable by every user (0644)."""
    assert main(["keys", "--out", str(tmp_path / "keys"), "--clients", "cam0,viewer"]) == 0
    keys = tmp_path / "keys"
    (keys / "checker.key_secret").chmod(0o644)
    return keys


@contextlib.contextmanager
def curve_checker(keys: Path, stderr: int, *options: str) -> Iterator[tuple[subprocess.Popen[bytes], str, str]]:
    """A ``stream-detect checker --demo`` with CURVE on two ``ipc://`` paths beside ``keys`` (known before it starts,
    and no port another program's socket can take first), its stderr ``stderr``; SIGTERM on the way out, unless it
    ended."""
    bound, published = f"ipc://{keys.parent}/in", f"ipc://{keys.parent}/out"
    with demo_checker_process(bound, published, stderr, "--curve-secret", str(keys / "checker.key_secret"),
                              "--curve-clients", str(keys / "clients"), *options) as process:
        yield process, bound, published


def client(keys: Path, name: str) -> CurveClient:
    """A client's keys, as its command loads them (its own secret file is 0600)."""
    return CurveClient.from_files(str(keys / "checker.key"), str(keys / "clients" / f"{name}.key_secret"))


def served(keys: Path, bound: str, published: str, process: subprocess.Popen[bytes]) -> bool:
    """Whether the checker serves: a CURVE detector's heartbeat comes back as its status to a CURVE viewer (False once
    the process ended, or if it never came within 60 s)."""
    ctx = zmq.Context()
    try:
        try:
            detector = Publisher(connect(ctx, zmq.PUB, bound, wait_s=30.0, curve=client(keys, "cam0")))
            viewer = Receiver(subscribe(connect(ctx, zmq.SUB, published, wait_s=30.0, curve=client(keys, "viewer"))))
        except InputError:  # nothing answered: the checker ended, or never bound
            return False
        got: list[Message] = []
        seq = iter(range(1_000_000))

        def step() -> None:
            detector.send(beat("cam0", seq=next(seq), history=(1,)))
            got.extend(viewer.poll(50))

        def serves() -> bool:
            return any(isinstance(m, Status) and m.stream_id == "cam0" for m in got)

        return wait_for(lambda: serves() or process.poll() is not None, 60.0, step) and process.poll() is None
    finally:
        ctx.destroy(linger=0)


def test_a_checker_whose_secret_key_file_others_may_read_serves_with_its_stderr_full(loose_keys: Path) -> None:
    # The warning that the key file is open to others was written straight to stderr on the way to serving: a pipe
    # whose reader stopped reading held the checker there, never bound, every camera refused.
    read, write = full_pipe()
    try:
        with curve_checker(loose_keys, write) as (process, bound, published):
            os.close(write)
            write = -1
            assert served(loose_keys, bound, published, process)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)


def test_a_checker_says_its_secret_key_file_is_open_to_others_in_its_json_log(loose_keys: Path) -> None:
    # The warning was a plain "warning: ..." line amid the JSON ones: a log collector refused it, or dropped it.
    with curve_checker(loose_keys, subprocess.PIPE, "--log-format", "json") as (process, _, _):
        assert process.stderr is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(line.decode() for line in process.stderr or ()),
                                  daemon=True)
        reader.start()
        assert wait_for(lambda: any("viewers to" in line for line in lines) or process.poll() is not None, 60.0)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        reader.join(timeout=10)
    assert lines[-1] == "interrupted by SIGTERM: stopped\n"  # the command's own last line, as in either format
    records = [json.loads(line) for line in lines[:-1]]  # every log line JSON
    loose = [r for r in records if "open to other users" in r["message"]]
    secret = loose_keys / "checker.key_secret"
    assert [(r["level"], r["service"], r["message"]) for r in loose] == [
        ("warning", "checker", f"--curve-secret {secret}: a secret key file open to other users of this machine "
                               f"(mode 0644); chmod 600 {secret}")]


class Failing:
    """A sink with a defect: it raises on every message."""

    def send(self, message: Message) -> None:
        raise RuntimeError(f"cannot take a {message.kind} message")


def test_a_sink_of_the_view_that_fails_is_said_in_the_service_log() -> None:
    # The view's sinks (the webhook: the view's and the one-command run's) said a failure on stderr from the view's
    # loop, whatever log the service held: a plain line amid --log-format json, and a full stderr froze the view.
    ctx = zmq.Context()
    out = io.StringIO()
    log = ServiceLog("view", "json", out=out)
    try:
        pub, endpoint = bind(ctx, zmq.PUB, "tcp://127.0.0.1:0")  # a fixed port of the ephemeral range may be a client's
        status = Status(stream_id="kitchen", seq=0, timestamp=1.0, run="s", done=(1,), allowed=(), current=None,
                        alerts=0, frames=10, dropped=0, fps=10.0, gaps=0, ended=False, lost=False, allowed_scores=(),
                        rule="binary")
        with Viewer(ctx, endpoint, ViewState(), jsonl=True, out=io.StringIO(), sinks=[Failing()],
                    sink_log=log.warning) as viewer:
            def publish_and_pump() -> None:
                Publisher(pub).send(status)
                viewer.pump(20)

            assert wait_for(lambda: viewer.sinks.failed > 0, 10.0, publish_and_pump)
    finally:
        ctx.destroy(linger=0)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["level"], r["message"]) for r in records][:1] == [
        ("warning", "Failing failed on a status message (1 so far): cannot take a status message")]


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@contextlib.contextmanager
def _stderr_file_and_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Iterator[logging.Logger]:
    """stderr written to ``tmp_path / "stderr"``, and the library logger ``name`` that no handler takes; after the
    block, Python's warnings and logging hooks must be as they were before it."""
    shown, resort = warnings.showwarning, logging.lastResort
    library = logging.getLogger(name)
    monkeypatch.setattr(library, "propagate", False)  # pytest's own handler on the root logger would take it
    with (tmp_path / "stderr").open("w") as stderr:
        monkeypatch.setattr("sys.stderr", stderr)
        yield library
    assert (warnings.showwarning, logging.lastResort) == (shown, resort)  # as they were


def test_python_warnings_and_library_log_records_are_lines_of_the_service_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A library's warning (warnings.warn) or a log record no handler takes (logging's last resort: pyzmq's
    # authenticator, asyncio's reports) said on a service's thread was written straight to stderr, in no format the
    # service was asked for.
    with (_stderr_file_and_library(tmp_path, monkeypatch, "a.library") as library,
          queued_log("detector", "json") as log):

        def work() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.warn("a library's warning", UserWarning, stacklevel=1)
            library.info("nobody's news")
            try:
                raise OSError("the peer went away")
            except OSError:
                library.exception("could not answer")

        thread = threading.Thread(target=work)
        thread.start()
        thread.join(10)
        assert log.close()
    said = [(r["level"], r["message"].split(" (")[0]) for r in _records(tmp_path / "stderr")]
    assert said == [("warning", "UserWarning: a library's warning"), ("error", "a.library: could not answer")]
    error = _records(tmp_path / "stderr")[1]
    assert error["message"] == "a.library: could not answer (OSError: the peer went away)"
    assert error["fields"]["logger"] == "a.library" and "OSError: the peer went away" in error["fields"]["traceback"]


SCRIPT = """
import threading, warnings
from streaming.service_log import queued_log
with queued_log("detector", "text"):
    said = threading.Thread(target=lambda: warnings.warn("a library's warning", stacklevel=1))
    said.start()
    said.join(20)
    print("alive" if said.is_alive() else "went on", flush=True)
"""


def test_a_python_warning_on_a_service_thread_never_waits_on_a_full_stderr() -> None:
    # Written straight to a stderr that takes nothing, the warning held the thread that said it (a detector's frame
    # loop, the view's drawing loop) for as long as the pipe stayed full.
    read, write = full_pipe()
    try:
        process = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=write,
                                   cwd=Path(__file__).resolve().parents[2])
        os.close(write)
        write = -1
        try:
            out, _ = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        assert out.decode().split() == ["went", "on"]
    finally:
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)


def test_two_queued_logs_of_one_process_ended_out_of_order_leave_warnings_as_they_were(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two services of one process (a checker and a detector run side by side, or one test after another), the first
    # started ended first: the second's end put back the first's hooks, and Python's warnings and library records went
    # on being lines of an ended service's log (its name, its format) for the rest of the process.
    with _stderr_file_and_library(tmp_path, monkeypatch, "another.library") as library:
        checker = contextlib.ExitStack()
        first = checker.enter_context(queued_log("checker", "json"))
        with queued_log("detector", "json") as second:
            checker.close()  # the checker ends while the detector runs
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.warn("said while the detector runs", UserWarning, stacklevel=1)
            library.warning("a record while the detector runs")
            assert second.close()
        assert first.close()
    said = [(r["service"], r["message"].split(" (")[0]) for r in _records(tmp_path / "stderr")]
    assert said == [("detector", "UserWarning: said while the detector runs"),
                    ("detector", "another.library: a record while the detector runs")]


def test_a_warnings_hook_put_back_after_the_service_ended_is_not_a_line_of_its_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder) -> None:
    # A thread that saved the hooks while the service ran (warnings.catch_warnings, as libraries and the service's
    # own threads do around a call) and put them back after it ended left the ended service's log taking every
    # warning of the process: written in its format, by a log nobody closes again.
    with (tmp_path / "stderr").open("w") as stderr:
        monkeypatch.setattr("sys.stderr", stderr)
        kept = contextlib.ExitStack()
        with queued_log("view", "json") as log:
            kept.enter_context(warnings.catch_warnings())  # saves the service's hooks
        kept.close()  # ... and puts them back, the service gone
        warnings.simplefilter("always")
        warnings.warn("said after the view ended", UserWarning, stacklevel=1)
        assert log.close()
    assert (tmp_path / "stderr").read_text() == ""
    assert [str(w.message) for w in recwarn.list] == ["said after the view ended"]  # where warnings went before


def test_a_sink_of_the_view_command_that_fails_is_a_warning_line_in_the_text_log() -> None:
    # Through the view's log, the failure's line lost its "warning: " (a plain "view: Failing failed ..." line in the
    # text format), which it had written on stderr, and which the one-command run's view still writes.
    ctx = zmq.Context()
    out = io.StringIO()
    log = ServiceLog("view", "text", out=out)
    stop = threading.Event()
    try:
        pub, endpoint = bind(ctx, zmq.PUB, "tcp://127.0.0.1:0")  # a free port
        status = Status(stream_id="kitchen", seq=0, timestamp=1.0, run="s", done=(1,), allowed=(), current=None,
                        alerts=0, frames=10, dropped=0, fps=10.0, gaps=0, ended=False, lost=False, allowed_scores=(),
                        rule="binary")
        publisher = Publisher(pub)

        def publish() -> None:
            while not stop.wait(0.05):
                publisher.send(status)

        sender = threading.Thread(target=publish, daemon=True)
        sender.start()
        assert run_view(endpoint, None, jsonl=True, out=io.StringIO(), done=lambda: "failed on" in out.getvalue(),
                        log=log, sinks=[Failing()]) == 0
        stop.set()
        sender.join(10)
    finally:
        stop.set()
        ctx.destroy(linger=0)
    assert out.getvalue().splitlines()[0] == (
        "warning: view: Failing failed on a status message (1 so far): cannot take a status message")
