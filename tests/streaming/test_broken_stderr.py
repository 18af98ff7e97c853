"""A detector's log lines are no part of its work: a stderr that breaks while it runs (its reader gone) or that was
closed from the start (``2>&-``) drops the lines, and every stream still plays to its end and ends its session."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.checker.service import CheckerService
from streaming.demo.paths import default_demo_paths
from tests.streaming.helpers import STREAM_DETECT, full_pipe, running_checker, wait_for, write_noise_video

GRAPH, DETECTOR = default_demo_paths()
RUN_S = 180.0  # the detector loads torch and the backbone on a busy 2-core machine


@pytest.fixture
def checker(tmp_path: Path) -> Iterator[tuple[CheckerService, list[str]]]:
    """A checker on loopback ipc, with its log lines."""
    log: list[str] = []
    with running_checker(tmp_path, log=log) as (_ctx, service, _thread):
        yield service, log


def _detector(tmp_path: Path, service: CheckerService) -> list[str]:
    """A detector of a short file and a long one, fast: the short one ends first while the long one runs on."""
    short = write_noise_video(tmp_path / "short.mp4", frames=15)
    long = write_noise_video(tmp_path / "long.mp4", frames=450)
    return [*STREAM_DETECT, "detector", "--video", str(short), "--video", str(long), "--stream-id", "short",
            "--stream-id", "long", "--graph", str(GRAPH), "--detector", str(DETECTOR), "--fast", "--connect",
            service.events_endpoint]


def _ended(log: list[str]) -> set[str]:
    return {line.split()[1] for line in log if line.startswith("checker: ") and " ended (" in line}


def test_a_stderr_whose_reader_left_drops_the_lines_not_the_streams(
        tmp_path: Path, checker: tuple[CheckerService, list[str]]) -> None:
    # The short stream's end line hit the broken pipe: the run ended there, exit status 141, the long stream cut short
    # (no `ended`, lost at the checker).
    service, log = checker
    proc = subprocess.Popen(_detector(tmp_path, service), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        assert proc.stderr.readline().startswith("detector: 2 streams"), "the detector never said it was ready"
        proc.stderr.close()  # the reader goes away before any stream ends (the backbone warms up first)
        assert proc.wait(RUN_S) == 0
    finally:
        proc.kill()
    assert wait_for(lambda: _ended(log) == {"short", "long"}, 10.0), log


def test_a_stderr_closed_from_the_start_puts_no_line_on_standard_output(
        tmp_path: Path, checker: tuple[CheckerService, list[str]]) -> None:
    # With `2>&-` Python has no sys.stderr, and print(file=None) wrote the log lines to standard output.
    service, log = checker
    done = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", *_detector(tmp_path, service)], capture_output=True,
                          text=True, timeout=RUN_S)
    assert (done.returncode, done.stdout) == (0, ""), done
    assert wait_for(lambda: _ended(log) == {"short", "long"}, 10.0), log


def test_a_stderr_that_takes_nothing_holds_no_stream(
        tmp_path: Path, checker: tuple[CheckerService, list[str]]) -> None:
    # The detector wrote its lines on the frame loop's thread: its ready line, before any stream started, waited on
    # the full pipe for ever, and no stream reached the checker (a stream's end line held the others' ends the same).
    service, log = checker
    read, write = full_pipe()
    try:
        proc = subprocess.Popen(_detector(tmp_path, service), stdout=subprocess.DEVNULL, stderr=write)
        os.close(write)
        try:
            assert proc.wait(RUN_S) == 0
        finally:
            proc.kill()
            proc.wait()
    finally:
        os.close(read)
    assert wait_for(lambda: _ended(log) == {"short", "long"}, 10.0), log
