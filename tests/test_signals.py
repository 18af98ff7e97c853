"""SIGINT and SIGTERM stop every long-running command alike, mid-run, in real processes: one line saying which
signal came, exit status 130 or 143, no traceback, every output whole or absent, no worker left behind.

A command started in the background of a shell script ignores SIGINT and is stopped with SIGTERM (``kill``,
``timeout``, systemd, ``docker stop``); ``recognition-features`` used to die silently with -15 there. Each test starts
the command as a child process with its progress bars drawn (``TTY_COMPATIBLE``), waits until the work is under way
(its progress bar, or its first finished file), then sends the signal. ``stream-detect checker`` and ``detector``
are interrupted in tests/streaming/test_stream_detect_cli.py, ``view`` in tests/streaming/view/test_view_hostile.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from streaming.demo.paths import DEMO_DIR, default_demo_paths
from streaming.demo.procedure import DEMO_EXECUTIONS
from streaming.demo.synthetic_video import demo_video
from tests.procedure_videos import VALID_ORDERS, write_procedure

GRAPH, DETECTOR = default_demo_paths()
ANNOTATIONS = DEMO_DIR / "demo_annotations.json"
BAR = "━"  # rich draws it as soon as a progress bar shows: the work is under way
SIGNALS = {"SIGINT": (signal.SIGINT, 130), "SIGTERM": (signal.SIGTERM, 143)}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ROOT = Path(__file__).resolve().parent.parent
SCRIPTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


class Child:
    """A command in a child process, its stderr (and stdout) gathered by threads while it runs."""

    def __init__(self, module: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        environ = dict(os.environ, TTY_COMPATIBLE="1", TTY_INTERACTIVE="1", COLUMNS="120", **(env or {}))
        # A process group of its own, as a service manager gives a command: `interrupt_group` signals all of it.
        # SIGHUP at its default, as from a terminal: under nohup the suite's is ignored, the child would inherit that,
        # and a command rightly keeps an ignored SIGHUP ignored (the SIGHUP test then saw the run end with 0).
        self.process = subprocess.Popen([sys.executable, "-m", module, *argv], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env=environ, start_new_session=True,
                                        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
        self.out = bytearray()
        self.err = bytearray()
        self._readers = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                         for stream, into in ((self.process.stdout, self.out), (self.process.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: object, into: bytearray) -> None:
        while chunk := stream.read1(4096):  # type: ignore[attr-defined]
            into.extend(chunk)

    def wait_for(self, ready: Callable[[], bool], timeout: float = 90.0) -> None:
        """Wait until ``ready()`` (bounded); the command must still be running then."""
        deadline = time.monotonic() + timeout
        while not ready() and time.monotonic() < deadline and self.process.poll() is None:
            time.sleep(0.05)
        assert self.process.poll() is None, f"ended before it was interrupted: {self.stderr()[-500:]}"
        assert ready(), f"not under way after {timeout} s: {self.stderr()[-500:]}"

    def bar_shown(self) -> bool:
        return BAR.encode() in self.err

    def interrupt(self, signum: int, group: bool = False) -> int:
        """Send ``signum`` (to its whole process group: ``timeout``, systemd, a terminal's Ctrl-C); returns the exit
        status (the command must end within 30 s)."""
        if group:
            os.killpg(self.process.pid, signum)
        else:
            self.process.send_signal(signum)
        code = self.process.wait(30)
        for reader in self._readers:
            reader.join(5)
        return code

    def stderr(self) -> str:
        return ANSI.sub("", self.err.decode(errors="replace")).replace("\r", "\n")

    def children(self) -> list[int]:
        """The process ids of its children (worker processes) now."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)


@contextmanager
def child(module: str, argv: list[str], env: dict[str, str] | None = None) -> Iterator[Child]:
    running = Child(module, argv, env)
    try:
        yield running
    finally:
        running.kill()


WROTE_FILES = "stopped; no output is left half-written (the file being written, if any, was discarded)"


def assert_stopped_by(running: Child, name: str, code: int, status: int, note: str = WROTE_FILES) -> None:
    """Exit status 128 + signal, the last stderr line names the signal (and, for a command that writes files, that
    none is left half-written; ``note="stopped"`` for one that writes none), and no traceback anywhere."""
    assert code == status, running.stderr()[-800:]
    text = running.stderr()
    assert "Traceback" not in text, text[-2000:]
    last = [line for line in text.splitlines() if line.strip()][-1]
    assert last == f"interrupted by {name}: {note}"


def alive(pids: list[int]) -> list[int]:
    """The processes among ``pids`` that still run (zombies waiting for their reaper excluded)."""
    running = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            continue
        if state != "Z":
            running.append(pid)
    return running


def outlived(pids: list[int], wait_s: float = 10.0) -> list[int]:
    """The processes among ``pids`` still running after up to ``wait_s`` (their ends are not instantaneous)."""
    deadline = time.monotonic() + wait_s
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)


def no_temporaries(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if ".tmp" in p.name]


@pytest.mark.parametrize("name", SIGNALS)
@pytest.mark.slow
def test_tgml_train_stops_mid_training(name: str, tmp_path: Path) -> None:
    signum, status = SIGNALS[name]
    out = tmp_path / "g.json"
    argv = ["train", "--annotations", str(ANNOTATIONS), "--scenario", "demo-tea", "--out", str(out), "--method", "do",
            "--epochs", "100000"]
    with child("tgml.tgml_cli", argv) as running:
        running.wait_for(running.bar_shown)
        assert_stopped_by(running, name, running.interrupt(signum), status)
    assert not out.exists() and no_temporaries(tmp_path)


@pytest.fixture
def own_dataset(tmp_path: Path) -> Path:
    """The demo annotations with a mistake marked in a test video (prego-bench scores mistakes)."""
    data = json.loads(ANNOTATIONS.read_text())
    data["annotations"]["demo_030"]["segments"][2]["has_errors"] = True
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("name", SIGNALS)
def test_prego_bench_stops_its_workers_at_once(name: str, own_dataset: Path, tmp_path: Path) -> None:
    signum, status = SIGNALS[name]
    out = tmp_path / "results.json"
    argv = ["--annotations", str(own_dataset), "--scenario", "demo-tea", "--test-videos", "demo_030,demo_031",
            "--method", "do", "--seeds", "6", "--workers", "2", "--epochs", "100000", "--json", str(out)]
    with child("tgml.bench.prego_bench_cli", argv) as running:
        running.wait_for(running.bar_shown)
        workers = running.children()
        assert_stopped_by(running, name, running.interrupt(signum), status)
    assert not outlived(workers), "a worker outlived the interrupted run"
    assert not out.exists()


def test_tgml_bench_synthetic_stops_on_sigterm(tmp_path: Path) -> None:
    out = tmp_path / "synthetic.json"
    argv = ["bench-synthetic", "--seeds", "3", "--workers", "2", "--json", str(out)]
    with child("tgml.tgml_cli", argv) as running:
        running.wait_for(running.bar_shown)
        workers = running.children()
        assert_stopped_by(running, "SIGTERM", running.interrupt(signal.SIGTERM), 143)
    assert not outlived(workers) and not out.exists()


@pytest.fixture
def eval_cache(demo_cache: Path, tmp_path: Path) -> Path:
    """A cache folder of its own holding the rendered demo videos (rendered once per session), no eval entry."""
    for name in DEMO_EXECUTIONS:
        demo_video(name)
    cache = tmp_path / "cache"
    shutil.copytree(demo_cache, cache, ignore=shutil.ignore_patterns("eval"))
    return cache


@pytest.mark.parametrize("name", SIGNALS)
def test_stream_detect_eval_stops_mid_video(name: str, eval_cache: Path, tmp_path: Path) -> None:
    signum, status = SIGNALS[name]
    out = tmp_path / "eval.json"
    with child("streaming.stream_detect_cli", ["eval", "--demo", "--json", str(out)],
               env={"MISTAKE_CACHE": str(eval_cache)}) as running:
        running.wait_for(lambda: b"frames of demo" in running.err)
        assert_stopped_by(running, name, running.interrupt(signum), status)
    assert not out.exists() and no_temporaries(eval_cache)
    for entry in (eval_cache / "eval").glob("*.json") if (eval_cache / "eval").is_dir() else ():
        json.loads(entry.read_text())  # a video finished before the signal is cached whole


@pytest.mark.slow
def test_recognition_features_sigterm_keeps_finished_videos_and_discards_the_current_one(tmp_path: Path) -> None:
    # It used to die silently with exit status -15.
    write_procedure(tmp_path, {f"run{k}": VALID_ORDERS[k % len(VALID_ORDERS)] for k in range(5)})
    features = tmp_path / "features"
    argv = ["--videos", str(tmp_path / "videos"), "--annotations", str(tmp_path / "labels.json"), "--out",
            str(features), "--extractor", "efficientnet-lite0", "--fps", "5", "--threads", "1"]
    with child("streaming.offline.features_cli", argv) as running:
        running.wait_for(lambda: (features / "extraction.json").exists())
        assert_stopped_by(running, "SIGTERM", running.interrupt(signal.SIGTERM), 143)
    done = json.loads((features / "extraction.json").read_text())["videos"]
    assert done and len(done) < 5 and no_temporaries(features)
    for video, entry in done.items():  # every video the manifest names is whole
        assert np.load(features / "rgb_efficientnet-lite0" / f"{video}.npy").shape[0] == entry["frames"]
        assert np.load(features / "target_perframe" / f"{video}.npy").shape[0] == entry["frames"]


def test_recognition_train_sigint_keeps_a_whole_checkpoint(tmp_path: Path) -> None:
    from recognition.checkpoint import load_detector
    from tests.recognition.conftest import SMALL_CONFIG, write_feature_folder

    folder = write_feature_folder(tmp_path / "features")
    config = tmp_path / "small.toml"
    config.write_text(SMALL_CONFIG)
    out = tmp_path / "detector.pt"
    earlier = b"PK\x03\x04 the earlier checkpoint"  # a zip archive's start, as torch.save writes
    out.write_bytes(earlier)
    epochs = 100000
    argv = ["--features", str(folder), "--config", str(config), "--out", str(out), "--epochs", str(epochs)]

    def into_the_second_epoch() -> bool:
        # The bar counts batches of all epochs: one past an epoch's worth, the first epoch was trained and scored.
        # (Interrupted at the first sight of the bar, the run usually had no epoch to save, and the checks of the
        # saved epoch below were skipped by an `if`: the test passed whether or not the stop saved anything.)
        counts = re.findall(r"training batches[^\d\n]*(\d+)/(\d+)", running.stderr())
        return bool(counts) and int(counts[-1][0]) > int(counts[-1][1]) // epochs

    with child("recognition.recognition_train_cli", argv) as running:
        running.wait_for(into_the_second_epoch)
        assert_stopped_by(running, "SIGINT", running.interrupt(signal.SIGINT), 130)
    assert no_temporaries(tmp_path) and out.read_bytes() == earlier
    # Stopped after the first epoch, the best epoch trained is saved beside it, whole.
    stopped = tmp_path / "detector.stopped.pt"
    _, meta = load_detector(stopped)
    trained = meta.info["interrupted"]["epochs_trained"]
    assert trained >= 1 and f"recognition-train: stopped after {trained} of {epochs} epochs; {stopped} holds epoch " \
        in running.stderr()


@pytest.mark.usefixtures("demo_cache")
def test_the_all_in_one_run_stops_with_its_checker_child(tmp_path: Path) -> None:
    for name in DEMO_EXECUTIONS:
        demo_video(name)  # rendered before the child starts: the child finds it in the session cache
    with child("streaming.stream_detect_cli", ["--video", "demo", "--jsonl"]) as running:
        running.wait_for(lambda: bool(running.children()) and b"\n" in running.out)  # real time: a step came
        checker = running.children()
        assert_stopped_by(running, "SIGINT", running.interrupt(signal.SIGINT), 130, note="stopped")  # writes no file
    assert not outlived(checker)


@pytest.mark.usefixtures("demo_cache")
@pytest.mark.parametrize(("name", "group"), [("SIGINT", False), ("SIGTERM", False), ("SIGTERM", True),
                                             ("SIGHUP", True)])
def test_a_stopped_live_run_still_shows_its_sessions_end_report(name: str, group: bool) -> None:
    # A camera's session ends only with Ctrl-C or SIGTERM, and the run stopped before the checker's end report came:
    # the steps never done and the stream's end were never shown (the split checker/detector/view set-up showed them).
    # Sent to the process group (systemd's default, `timeout`; a closed terminal's SIGHUP), the signal stopped the
    # checker child at once too.
    signum, status = {**SIGNALS, "SIGHUP": (signal.SIGHUP, 129)}[name]
    demo_video("correct")  # rendered before the child starts: the child finds it in the session cache
    with child("streaming.stream_detect_cli", ["--video", "demo:correct", "--jsonl"]) as running:
        running.wait_for(lambda: b'"kind":"step"' in running.out)  # real time: the first step came, others to come
        assert_stopped_by(running, name, running.interrupt(signum, group), status, note="stopped")
    lines = [json.loads(line) for line in bytes(running.out).splitlines() if line.strip()]
    (report,) = [m for m in lines if m["kind"] == "missing"]
    assert report["stream_id"] == "cam0" and report["missing"]  # the steps after the stop were never done
    assert lines[-1]["kind"] == "status" and lines[-1]["ended"]


def test_a_live_run_stopped_before_its_first_step_says_nothing_was_recognised_before_the_stop(
        tmp_path: Path) -> None:
    # A user replaying a real recording (one vector a second) stopped it after 13 s, before its first step could be
    # confirmed, and read "no key-step recognised in 13 frames, so no verdict (is the detector trained for this
    # procedure and this view?)": a verdict on the detector from a session that had not reached any step.
    features = tmp_path / "rec.npy"
    np.save(features, np.zeros((3000, 1280), np.float32))  # the demo detector's width; it confirms nothing in it
    argv = ["--features", str(features), "--graph", str(GRAPH), "--detector", str(DETECTOR)]
    with child("streaming.stream_detect_cli", argv) as running:
        running.wait_for(lambda: b"rec " in running.out)  # real time: the stream's first status is drawn
        assert_stopped_by(running, "SIGINT", running.interrupt(signal.SIGINT), 130, note="stopped")
    text = " ".join(ANSI.sub("", running.out.decode(errors="replace")).split())
    # Stopped within its first frame, fewer than its segmenter's shortest step, it says that instead.
    line = re.search(r"rec stopped: no key-step recognised in the \d+ frames? before the stop, so no verdict \((if a "
                     r"step was done in them: is the detector trained for this procedure and this view\?|they are "
                     r"fewer than the shortest step the segmenter can confirm, 2 frames)\)", text)
    assert line, text[-600:]


@pytest.mark.usefixtures("demo_cache")
@pytest.mark.parametrize("name", SIGNALS)
def test_a_stopped_live_run_keeps_its_annotated_video_up_to_the_stop(name: str, tmp_path: Path) -> None:
    # A camera's session only ends with Ctrl-C or SIGTERM, and the annotated video was discarded with the stop: a
    # live run could never leave one.
    import cv2

    signum, status = SIGNALS[name]
    for demo in DEMO_EXECUTIONS:
        demo_video(demo)  # rendered before the child starts: the child finds it in the session cache
    out = tmp_path / "run.mp4"
    with child("streaming.stream_detect_cli", ["--video", "demo", "--jsonl", "--annotate-out", str(out)]) as running:
        running.wait_for(lambda: _frames_reported(running.out) >= 3)  # real time: frames are being drawn
        assert_stopped_by(running, name, running.interrupt(signum), status)
    kept = re.search(rf"stream-detect: kept the annotated video {re.escape(str(out))}: the (\d+) frames shown before "
                     "the stop\n", running.stderr())
    assert kept, running.stderr()[-800:]
    capture = cv2.VideoCapture(str(out))
    decoded = 0
    while capture.read()[0]:
        decoded += 1
    capture.release()
    assert decoded == int(kept.group(1)) > 0 and no_temporaries(tmp_path)


def _frames_reported(jsonl: bytes | bytearray) -> int:
    """The most frames a stream's status line among the complete ``--jsonl`` lines reports."""
    lines = [json.loads(line) for line in bytes(jsonl).split(b"\n")[:-1] if line.strip()]
    return max((m["frames"] for m in lines if m.get("kind") == "status"), default=0)


def _closed_pipe_run(module: str, argv: list[str]) -> tuple[int, str]:
    """Run a command whose standard output is a pipe nobody reads any more (``... | head`` after its line)."""
    process = subprocess.Popen([sys.executable, "-m", module, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    process.stdout.close()  # the reader left: every write is a broken pipe
    _, err = process.communicate(timeout=180)
    return process.returncode, err.decode(errors="replace")


@pytest.mark.usefixtures("demo_cache")
@pytest.mark.parametrize("command", ["tgml show", "tgml train", "prego-bench replay", "recognition-train",
                                     "stream-detect run", "recognition-features"])
def test_output_piped_into_head_ends_quietly_with_141(command: str, tmp_path: Path) -> None:
    # It ended in a BrokenPipeError traceback and exit 120 (exit 1 and no message for recognition-train).
    from tests.recognition.conftest import SMALL_CONFIG, write_feature_folder

    frames = tmp_path / "frames.json"
    labels = [1] * 120 + [2] * 120 + [3] * 120  # 2 s runs at the replay's 60 labels per second
    frames.write_text(json.dumps({"v": {"pred": labels, "gt": labels}}))
    config = tmp_path / "small.toml"
    config.write_text(SMALL_CONFIG)
    if command == "recognition-features":
        write_procedure(tmp_path, {"run0": VALID_ORDERS[0], "run1": VALID_ORDERS[1]})
    runs = {
        "tgml show": ("tgml.tgml_cli", ["show", str(GRAPH)]),
        "tgml train": ("tgml.tgml_cli", ["train", "--annotations", str(ANNOTATIONS), "--scenario", "demo-tea",
                                         "--out", str(tmp_path / "g.json"), "--epochs", "3", "--quiet"]),
        "prego-bench replay": ("tgml.bench.prego_bench_cli", ["replay", "--frames", str(frames), "--graph",
                                                              str(GRAPH), "--no-sweep"]),
        "recognition-train": ("recognition.recognition_train_cli", [
            "--features", str(write_feature_folder(tmp_path / "f", n_train=2, n_test=1, frames=40)), "--config",
            str(config), "--out", str(tmp_path / "d.pt"), "--epochs", "1", "--quiet"]),
        "stream-detect run": ("streaming.stream_detect_cli", ["--video", "demo", "--jsonl", "--fast"]),
        "recognition-features": ("streaming.offline.features_cli", [
            "--videos", str(tmp_path / "videos"), "--annotations", str(tmp_path / "labels.json"), "--out",
            str(tmp_path / "features"), "--extractor", "light-v1", "--fps", "2", "--test-videos", "run1"]),
    }
    module, argv = runs[command]
    status, err = _closed_pipe_run(module, argv)
    assert status == 141, err[-600:]
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err[-600:]


def test_a_service_whose_log_reader_is_gone_when_it_is_stopped_exits_with_the_signals_status() -> None:
    # `stream-detect checker 2> >(tee log)` and Ctrl-C: tee stopped too, the summary line met a broken pipe, and the
    # checker exited 141 (a broken stdout) instead of 143 for the SIGTERM that stopped it.
    read_end, write_end = os.pipe()
    checker = subprocess.Popen([sys.executable, "-m", "streaming.stream_detect_cli", "checker", "--demo", "--bind",
                                "tcp://127.0.0.1:0", "--publish", "tcp://127.0.0.1:0"],
                               stdout=subprocess.DEVNULL, stderr=write_end)
    os.close(write_end)
    with os.fdopen(read_end, "rb", buffering=0) as log:
        assert log.readline().startswith(b"checker: detectors connect to")  # bound and serving
    checker.send_signal(signal.SIGTERM)  # its summary line now goes to a pipe nobody reads
    assert checker.wait(60) == 128 + signal.SIGTERM


def test_a_signal_landing_while_a_module_defines_its_classes_still_stops_the_run_cleanly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A SIGTERM that came while `import networkx` made its classes (after tgml train's last epoch) surfaced as
    # "RuntimeError: Error calling __set_name__": Python wraps what a class body's descriptors raise. The handler
    # raises `Interrupted` wherever the signal lands; here it lands in a descriptor's __set_name__.
    from graphs.common.command_line import ArgumentParser
    from graphs.common.errors import exit_on_input_error
    from graphs.common.interrupts import Interrupted

    class Descriptor:
        def __set_name__(self, owner: type, name: str) -> None:
            raise Interrupted(signal.SIGTERM)

    @exit_on_input_error
    def main() -> int:
        ArgumentParser().parse_args([])  # under way, as tgml train is after its last epoch
        type("Graph", (), {"adj": Descriptor()})  # what `class Graph: adj = cached_property(...)` does
        return 0

    with pytest.raises(SystemExit) as ended:
        main()
    assert ended.value.code == 143
    assert capsys.readouterr().err.startswith("interrupted by SIGTERM: stopped;")


def test_a_command_that_writes_no_file_says_only_that_it_stopped(capsys: pytest.CaptureFixture[str]) -> None:
    # A checker, a view or a dashboard said "the file being written, if any, was discarded" on Ctrl-C: it writes
    # none, and the line read as if something had been thrown away. The next command starts from "writes files".
    from graphs.common.command_line import ArgumentParser
    from graphs.common.errors import exit_on_input_error, writes_no_files
    from graphs.common.interrupts import Interrupted

    @exit_on_input_error
    def service() -> int:
        ArgumentParser().parse_args([])
        writes_no_files()
        raise Interrupted(signal.SIGINT)

    @exit_on_input_error
    def writer() -> int:
        ArgumentParser().parse_args([])
        raise Interrupted(signal.SIGTERM)

    for main, status, line in ((service, 130, "interrupted by SIGINT: stopped"),
                               (writer, 143, f"interrupted by SIGTERM: {WROTE_FILES}")):
        with pytest.raises(SystemExit) as ended:
            main()
        assert ended.value.code == status
        assert capsys.readouterr().err == line + "\n"


@pytest.mark.parametrize("name", SIGNALS)
@pytest.mark.parametrize("command", sorted(SCRIPTS))
def test_a_signal_while_a_command_loads_its_modules_stops_it_in_one_line(command: str, name: str) -> None:
    # A Ctrl-C in a command's first tenth of a second, while its module imported numpy, torch or OpenCV, came before
    # its handlers: Python's KeyboardInterrupt traceback (a SIGTERM: no line at all). The installed entry point is
    # called as the console script calls it, and the signal lands as the command's module begins to execute.
    signum, status = SIGNALS[name]
    module, _, function = SCRIPTS[command].partition(":")
    script = (f"from tests.signal_calls import signal_when_called\nfrom {module} import {function}\n"
              f"with signal_when_called('exec_module', {int(signum)}):\n    {function}(['--help'])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert (done.returncode, done.stderr, done.stdout) == (status, f"interrupted by {name}: stopped\n", "")


@pytest.mark.parametrize("command", sorted(SCRIPTS))
def test_a_signal_while_a_command_builds_its_parser_says_only_that_it_stopped(command: str) -> None:
    # In the tenth of a second after its modules are loaded, while it built its parser, a service said "no output is
    # left half-written (the file being written, if any, was discarded)": it had not read its options, let alone
    # begun a file. The installed entry point is called as the console script calls it; the signal lands as the
    # first option is added to the parser.
    module, _, function = SCRIPTS[command].partition(":")
    script = (f"from tests.signal_calls import signal_when_called\nfrom {module} import {function}\n"
              f"with signal_when_called('add_argument', {int(signal.SIGTERM)}):\n    {function}(['--help'])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert (done.returncode, done.stderr, done.stdout) == (143, "interrupted by SIGTERM: stopped\n", "")
