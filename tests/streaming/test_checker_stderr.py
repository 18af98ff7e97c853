"""The checker's loop never waits on its log: stderr on a full disk, or a pipe whose reader stopped reading."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from graphs.common.errors import InputError
from streaming.messages import CheckerHealth, Message, Status
from streaming.transport import Publisher, Receiver, connect, subscribe
from tests.streaming.helpers import STREAM_DETECT, beat, demo_checker_process, wait_for

pytestmark = pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ") or not Path("/dev/full").exists()
                                or not Path("/proc/self/fd").is_dir(),
                                reason="Linux pipes and /dev/full")


@contextlib.contextmanager
def checker(tmp_path: Path, stderr: int) -> Iterator[tuple[subprocess.Popen[bytes], str, str]]:
    """A ``stream-detect checker --demo`` on ``ipc://`` paths under ``tmp_path`` (known before it starts: its stderr
    may never say them), its stderr ``stderr``; SIGTERM on the way out, unless it ended."""
    bound, published = f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"
    with demo_checker_process(bound, published, stderr) as process:
        yield process, bound, published


def served(ctx: zmq.Context, bound: str, published: str, process: subprocess.Popen[bytes], stream: str,
           malformed: bool = False) -> bool:
    """Whether the checker serves: a detector's heartbeat on ``stream`` comes back as its status (and, with
    ``malformed``, the checker's health counts the malformed messages a peer sends meanwhile, each a log line);
    False once the process ended, or if that never came (60 s)."""
    try:
        detector = Publisher(connect(ctx, zmq.PUB, bound, wait_s=30.0))
        viewer = Receiver(subscribe(connect(ctx, zmq.SUB, published, wait_s=30.0)))
    except InputError:  # nothing answered: the checker ended (or never bound)
        return False
    garbage = ctx.socket(zmq.PUB)
    garbage.connect(bound)
    got: list[Message] = []
    seq = iter(range(1_000_000))

    def step() -> None:
        detector.send(beat(stream, seq=next(seq), history=(1,)))
        if malformed:
            garbage.send_multipart([b"heartbeat/x", b"not json"])
        got.extend(viewer.poll(50))

    def serves() -> bool:
        return (any(isinstance(m, Status) and m.stream_id == stream for m in got)
                and (not malformed or any(isinstance(m, CheckerHealth) and m.malformed > 0 for m in got)))

    try:
        return wait_for(lambda: serves() or process.poll() is not None, 60.0, step) and process.poll() is None
    finally:
        for sock in (detector.sock, viewer.sock, garbage):
            sock.close(linger=0)


def test_a_checker_whose_stderr_is_on_a_full_disk_serves_on(tmp_path: Path) -> None:
    # Its first log line (the endpoints it bound) raised "No space left on device" and the checker ended, exit
    # status 1: a log disk that filled up stopped every camera's checking; mid-run, the first refusal's line did.
    ctx = zmq.Context()
    with open("/dev/full", "wb") as full, checker(tmp_path, full.fileno()) as (process, bound, published):
        try:
            assert served(ctx, bound, published, process, "cam0")
            assert served(ctx, bound, published, process, "cam1", malformed=True)  # a refusal's line on the way
        finally:
            ctx.destroy(linger=0)
        process.send_signal(signal.SIGTERM)
        # Its interrupt's own line, which stderr cannot take either, made the status 1 (a failure to a supervisor,
        # the OSError's traceback lost on the same disk): a stop is a stop.
        assert process.wait(timeout=60) == 128 + signal.SIGTERM


def test_a_checker_whose_stderr_reader_stopped_reading_serves_on_and_ends(tmp_path: Path) -> None:
    # Its log lines were written from the loop: once a pipe's reader (a log shipper, a terminal paused with Ctrl-S)
    # stopped taking them and the pipe filled, the next line (a refusal) held the loop for good, and a SIGTERM never
    # ended it (its summary line waited too).
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # the smallest pipe: filled by the test at once
    ctx = zmq.Context()
    lines = bytearray()

    def take() -> None:  # what the pipe holds, read here (a reader thread might drain it after the test filled it)
        if select.select([read_end], [], [], 0.05)[0]:
            lines.extend(os.read(read_end, 65536))

    try:
        with checker(tmp_path, write_end) as (process, bound, published):
            assert wait_for(lambda: b"viewers to" in lines or process.poll() is not None, 60.0, take), lines
            # The reader stops; the pipe is filled through a description of its own: O_NONBLOCK on the checker's
            # would make its writes fail at once instead of waiting, as a stopped reader makes them.
            filler = os.open(f"/proc/self/fd/{write_end}", os.O_WRONLY | os.O_NONBLOCK)
            try:
                for chunk in (b"filler\n" * 64, b"."):  # to the last byte it holds
                    with contextlib.suppress(BlockingIOError):
                        while True:
                            os.write(filler, chunk)
            finally:
                os.close(filler)
            assert served(ctx, bound, published, process, "cam1", malformed=True)  # a refusal's line on the way
            process.send_signal(signal.SIGTERM)  # its summary cannot be written: it ends all the same
            assert process.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        ctx.destroy(linger=0)
        os.close(write_end)
        while chunk := os.read(read_end, 65536):  # the rest, to the end of the pipe (the checker gone)
            lines.extend(chunk)
        os.close(read_end)
    assert b"Traceback" not in lines, lines


def test_lines_a_queued_log_could_not_write_are_counted_and_said_by_the_next_it_can(tmp_path: Path) -> None:
    from streaming.service_log import ServiceLog

    with open("/dev/full", "w") as full:
        log = ServiceLog("checker", out=full, queued=True)
        log("checker: lost 1")
        log("checker: lost 2")
        assert log.close()
    assert log.lost == 2
    with open(tmp_path / "log", "w") as kept:
        log.out = kept
        log("checker: kept")
        assert log.close()
    assert (tmp_path / "log").read_text().splitlines() == [
        "warning: checker: 2 log line(s) could not be written (No space left on device)", "checker: kept"]


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_a_checker_logging_json_in_an_encoding_with_a_byte_order_mark_writes_it_once(
    tmp_path: Path, encoding: str
) -> None:
    # Each line was encoded on its own (codecs.encode), so each began with the mark (PYTHONIOENCODING=utf-8-sig or
    # utf-16, Windows' "Unicode"): every JSON line after the first read "\ufeff{..." and a log collector's parser
    # refused it ("Unexpected UTF-8 BOM"). Written as one stream, as sys.stderr writes it, the mark comes first only.
    import codecs
    import json

    log = tmp_path / "checker.log"
    with open(log, "wb") as err:
        process = subprocess.Popen([*STREAM_DETECT, "checker", "--demo", "--bind", f"ipc://{tmp_path}/in", "--publish",
                                    f"ipc://{tmp_path}/out", "--log-format", "json"], stdout=subprocess.DEVNULL,
                                   stderr=err, env={**os.environ, "PYTHONIOENCODING": encoding})
        try:
            encoder = codecs.getincrementalencoder(encoding)()
            encoder.encode("")  # its mark
            ready = encoder.encode("viewers to")
            assert wait_for(lambda: ready in log.read_bytes() or process.poll() is not None, 60.0)
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 128 + signal.SIGTERM
    lines = log.read_bytes().decode(encoding).splitlines()
    # The interrupt's line is sys.stderr's own, its mark that stream's first write: not this log's to leave out.
    assert lines[-1].lstrip("\ufeff") == "interrupted by SIGTERM: stopped", lines
    assert [json.loads(line)["level"] for line in lines[:-1]] == ["info", "info"], lines


ABANDON_WITH_NO_HANDLE_LEFT = """
import os, resource, sys
from graphs.common.errors import drop_stderr
from streaming.service_log import ServiceLog
log = ServiceLog("checker", queued=True)
log("checker: a line the full pipe cannot take")
limit = len(os.listdir("/proc/self/fd")) + 8
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
if not log.close(0.2):  # as the checker's end does (`stream_detect_cli._checker`)
    drop_stderr()
print("interrupted by SIGTERM: stopped", file=sys.stderr)
print("ended", flush=True)
"""


def test_a_checker_ending_on_a_stderr_that_takes_nothing_ends_with_no_file_handle_left() -> None:
    # At its end stderr was pointed at /dev/null, opened there and then: with every file handle held (peers' idle
    # connections at its ports past `ulimit -n`) it could not be, and the interrupt's line waited on the full pipe
    # for ever; only SIGKILL ended the checker.
    import sys

    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    filler = os.open(f"/proc/self/fd/{write_end}", os.O_WRONLY | os.O_NONBLOCK)
    try:
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(filler, b".")
    finally:
        os.close(filler)
    try:
        process = subprocess.Popen([sys.executable, "-c", ABANDON_WITH_NO_HANDLE_LEFT], stdout=subprocess.PIPE,
                                   stderr=write_end, env={**os.environ, "PYTHONPATH": os.getcwd()})
        try:
            out, _ = process.communicate(timeout=30)  # it hung for good before
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    finally:
        os.close(write_end)
        os.close(read_end)
    assert (process.returncode, out) == (0, b"ended\n")
