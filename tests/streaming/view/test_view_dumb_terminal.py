"""The live view on a terminal that cannot move its cursor (``TERM=dumb``: an editor's shell, a serial console).

rich's live view draws nothing on such a terminal until it stops, so ``stream-detect --video demo`` there showed
only its start-up line for the whole run, and the demo's alert appeared once the run was over: on a camera, hours
later. The run here is a real process on a real pseudo-terminal.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import time

from tests.streaming.helpers import STREAM_DETECT, drain_terminal, refused_port

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ALERT_LINE = re.compile(r"^\d\d:\d\d:\d\d cam0 MISTAKE boil_water before fill_kettle \(.+; P mistake \d\.\d\d\)$",
                        re.MULTILINE)
STEP_LINE = re.compile(r"^\d\d:\d\d:\d\d cam0 key-step (\w+) \d+\.\d-\d+\.\d s, confidence \d\.\d\d$", re.MULTILINE)


def test_a_dumb_terminal_is_told_each_step_and_alert_as_a_line_as_it_comes_then_the_last_frame() -> None:
    master, slave = pty.openpty()
    run = subprocess.Popen([*STREAM_DETECT, "--video", "demo", "--fast"], stdin=slave, stdout=slave, stderr=slave,
                           env={**os.environ, "TERM": "dumb", "COLUMNS": "80", "LINES": "24"})  # fmt: skip
    os.close(slave)
    reader, shown = drain_terminal(master)
    try:
        run.wait(timeout=180)
        reader.join(60.0)
    finally:
        os.close(master)
    text = ANSI.sub("", bytes(shown).decode(errors="replace")).replace("\r\n", "\n")
    assert run.returncode == 0, text[-2000:]
    titles = [match.start() for match in re.finditer(r"^ *streams *$", text, re.MULTILINE)]
    assert len(titles) == 1, text[-2000:]  # the streams table's title: the last frame, drawn once
    last_frame = titles[0]
    told, frame = text[:last_frame], text[last_frame:]
    # Before the last frame, as they came: the mistake once (its later, firmer copies are no second mistake) ...
    assert len(ALERT_LINE.findall(told)) == 1, told
    # ... and each of the demo's key-steps, in the order done.
    assert STEP_LINE.findall(told) == ["get_cup", "boil_water", "fill_kettle", "add_teabag", "pour_water", "add_milk"]
    assert "cam0 ended: 1 mistake (boil_water before fill_kettle), nothing missing" in frame


def test_on_a_dumb_terminal_a_view_says_in_a_line_that_its_checker_is_not_answering() -> None:
    # The screen that says so is not drawn there: the view waited on a checker that was not there without a word.
    with refused_port() as port:
        master, slave = pty.openpty()
        view = subprocess.Popen([*STREAM_DETECT, "view", "--connect", f"tcp://127.0.0.1:{port}", "--demo"],
                                stdin=slave, stdout=slave, stderr=slave,
                                env={**os.environ, "TERM": "dumb", "COLUMNS": "80"})
        os.close(slave)
        reader, shown = drain_terminal(master)
        try:
            deadline = time.monotonic() + 60
            while b"not answering" not in shown and time.monotonic() < deadline and view.poll() is None:
                time.sleep(0.05)
            view.send_signal(signal.SIGINT)
            view.wait(timeout=30)
            reader.join(30.0)
        finally:
            if view.poll() is None:
                view.kill()
                view.wait(10)
            os.close(master)
    text = ANSI.sub("", bytes(shown).decode(errors="replace")).replace("\r\n", "\n")
    assert view.returncode == 130, text[-2000:]
    said = text.find(f"view: checker at tcp://127.0.0.1:{port} not answering")
    assert 0 <= said < text.find("streams"), text[-2000:]
