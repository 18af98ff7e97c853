"""A detector run that fails part-way (here a user's TorchScript backbone that raises on the first bright frame, a real
failure of the run, not of a source) cuts its sessions short: none may be reported as a session that played to its
end. Every stream it cut ends without ``ended``, so the checker makes no end report and marks it lost, the view gives
it no verdict, and the run says why in one ``error:`` line, as a source that fails part-way does."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import zmq

from graphs.common.errors import RunError
from streaming.checker.config import CheckerConfig
from streaming.checker.service import CheckerService
from streaming.demo.paths import default_demo_paths
from streaming.detector import DetectorConfig, DetectorStream, PipelineConfig, build_pipeline, load_detector_for_stream
from streaming.detector.loading import LoadedParts
from streaming.extractors import FeatureExtractor, TorchScriptExtractor
from streaming.messages import Heartbeat, Message
from streaming.readers import ReaderConfig, VideoReader, open_reader
from streaming.stream_detect_cli import main
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.streaming.helpers import STREAM_DETECT, running_checker, tea_graph, wait_for, write_noise_video

GRAPH, DETECTOR = default_demo_paths()
STARTUP_S = 120.0  # the detector loads torch on a busy 2-core machine
DARK_S = 2.0  # the failing source's dark seconds before its bright ones


class _FailsWhenBright(torch.nn.Module):
    """The demo detector's 1280 features (zeros) on a dark frame; raises on a bright one: a bug in the user's model
    that its load-time probe, a blank batch, cannot see."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.mean() > 0.0):
            raise RuntimeError("index out of range in self")
        return torch.zeros(x.shape[0], 1280)


class _NoMemoryWhenBright(torch.nn.Module):
    """As `_FailsWhenBright`, its bright frames out of memory: the machine's limit, not the user's model at fault."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.mean() > 0.0):
            raise MemoryError("no room for the bright frames' activations")
        return torch.zeros(x.shape[0], 1280)


class _AllocatesTooMuch(torch.nn.Module):
    """A backbone whose every batch asks for 4 EiB: no machine has them, its load-time probe fails already."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty(1 << 62, dtype=torch.uint8)[: x.shape[0] * 1280].float().view(x.shape[0], 1280)


def _script(module: torch.nn.Module, path: Path) -> Path:
    with warnings.catch_warnings():  # `torch.jit.script` is deprecated, and still what --backbone loads
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(module).save(str(path))
    return path


def _video(path: Path, dark_s: float, bright_s: float, fps: int = 30) -> Path:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), fps, (64, 48))
    for k in range(int((dark_s + bright_s) * fps)):
        writer.write(np.full((48, 64, 3), 10 if k < dark_s * fps else 250, dtype=np.uint8))
    writer.release()
    return path


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The backbone, the demo detector retargeted to it, a video that turns bright after `DARK_S` and a dark one."""
    root = tmp_path_factory.mktemp("failing")
    with warnings.catch_warnings():  # `torch.jit.script` is deprecated, and still what --backbone loads
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(_FailsWhenBright()).save(str(root / "backbone.pt"))
    checkpoint = torch.load(DETECTOR, weights_only=False)
    checkpoint["feature_extractor"] = "torchscript"
    torch.save(checkpoint, root / "detector.pt")
    return {"backbone": root / "backbone.pt", "detector": root / "detector.pt",
            "bright": _video(root / "bright.mp4", DARK_S, 2.0), "dark": _video(root / "dark.mp4", 60.0, 0.0),
            "no_memory": _script(_NoMemoryWhenBright(), root / "no_memory.pt"),
            "too_much": _script(_AllocatesTooMuch(), root / "too_much.pt")}


def test_a_split_detector_that_fails_ends_no_session_of_any_of_its_streams(failing: dict[str, Path],
                                                                           tmp_path: Path) -> None:
    # The failure ended both streams with `ended: true`: the checker logged "ended (0 key-steps, 0 alerts, 6 required
    # steps never done)" of each and published their `missing` reports, a false verdict on a person's work.
    ctx = zmq.Context()
    log: list[str] = []
    service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out",
                                                        stream_timeout_s=1.0), ctx,
                             log=lambda line, *_args, **_fields: log.append(line))
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
    args = ["detector", "--video", str(failing["bright"]), "--video", str(failing["dark"]), "--stream-id", "bad",
            "--stream-id", "good", "--graph", str(GRAPH), "--detector", str(failing["detector"]), "--backbone",
            str(failing["backbone"]), "--connect", service.events_endpoint]  # in real time: "good" still plays
    rows = viewer.state.streams
    try:
        proc = subprocess.Popen([*STREAM_DETECT, *args], stderr=subprocess.PIPE, text=True)
        _, err = proc.communicate(timeout=STARTUP_S)
        assert wait_for(lambda: {"bad", "good"} <= rows.keys() and all(row.ended or row.lost for row in rows.values()),
                        10.0, lambda: viewer.pump(20))
    finally:
        viewer.close()
        stop.set()
        thread.join(5)
        ctx.destroy(linger=0)
    assert proc.returncode == 2, err
    lines = err.splitlines()
    assert lines[-1].startswith(f"error: --backbone {failing['backbone']}: fails on a batch"), err
    assert sum(line.startswith("error: ") for line in lines) == 1 and "Traceback" not in err, err
    assert [(row.ended, row.lost) for row in rows.values()] == [(False, True)] * 2 and not viewer.state.missing
    changes = [line for line in log if line.startswith(("checker: bad ", "checker: good "))]
    assert not any(" ended (" in line or " stopped (" in line for line in changes), changes
    assert {line.split()[1] for line in changes if " lost (" in line} == {"bad", "good"}, changes


def test_the_one_command_run_that_fails_shows_no_end_of_its_session(failing: dict[str, Path],
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # Its view printed "cam0 ended: no key-step recognised in 10 frames, ..." (with --jsonl, the `missing` report and
    # an ended status) above the run's error line.
    with pytest.raises(SystemExit) as exit_info:
        main(["--video", str(failing["bright"]), "--graph", str(GRAPH), "--detector", str(failing["detector"]),
              "--backbone", str(failing["backbone"]), "--jsonl", "--fast"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2
    assert err.startswith(f"error: --backbone {failing['backbone']}: fails on a batch") and err.count("\n") == 1, err
    messages = [json.loads(text) for text in out.splitlines()]
    assert [m for m in messages if m["kind"] == "status" and m["stream_id"] == "cam0"]
    assert not [m for m in messages if m["kind"] == "missing" or m.get("ended")], messages[-3:]


def test_a_backbone_out_of_memory_is_a_failure_of_the_run_not_a_mistake_in_its_input(
        failing: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # "error: --backbone X: fails on a batch of 1 frame(s) (builtins.MemoryError: ...)", exit status 2: the user was
    # told their model or input was wrong, when the machine had run out of memory.
    with pytest.raises(SystemExit) as exit_info:
        main(["--video", str(failing["bright"]), "--graph", str(GRAPH), "--detector", str(failing["detector"]),
              "--backbone", str(failing["no_memory"]), "--jsonl", "--fast"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: internal failure of the detector, not a mistake in its input: MemoryError: "
                          f"--backbone {failing['no_memory']}: ran out of memory on a batch of "), err
    assert "(builtins.MemoryError: no room for the bright frames' activations)" in err, err


def test_a_backbone_that_cannot_allocate_its_probe_is_a_failure_of_the_run_not_a_mistake_in_its_input(
        failing: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--video", str(failing["dark"]), "--graph", str(GRAPH), "--detector", str(failing["detector"]),
              "--backbone", str(failing["too_much"]), "--jsonl", "--fast"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err and not out, err
    assert err.startswith("error: internal failure of the detector, not a mistake in its input: --backbone "
                          f"{failing['too_much']}: ran out of memory on a (2, 3, 224, 224) batch ("), err
    assert "can't allocate memory" in err, err


class _FailsOnceArmed(FeatureExtractor):
    """The demo's backbone, raising on every batch once ``armed`` is set (a backbone that runs out of memory)."""

    def __init__(self, extractor: FeatureExtractor, armed: threading.Event) -> None:
        self.extractor, self.armed = extractor, armed
        self.name, self.dim, self.input_size = extractor.name, extractor.dim, extractor.input_size

    def prepare(self, image: np.ndarray) -> np.ndarray:
        return self.extractor.prepare(image)

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        if self.armed.is_set():
            raise RuntimeError("backbone out of memory")
        return self.extractor(frames)


class _Kept:
    """A sink that keeps what it is sent."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def send(self, message: Message) -> None:
        self.messages.append(message)


def test_a_ctrl_c_after_the_run_failed_stops_no_session_and_the_failure_is_said(tmp_path: Path) -> None:
    # A Ctrl-C that came after a worker's failure, before the loop raised it, took the run for one stopped by hand:
    # the stream the failure cut short sent `ended: true, stopped: true` (a verdict "so far" on a session the failure
    # ended), and the failure itself was never said, the interrupt's exit status in place of its error line.
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    armed = threading.Event()
    parts = LoadedParts(None, model, checkpoint, _FailsOnceArmed(extractor, armed))
    readers: list[VideoReader] = [
        open_reader(str(write_noise_video(tmp_path / "short.mp4", frames=30)), ReaderConfig(fps=5.0)),
        open_reader(str(write_noise_video(tmp_path / "long.mp4", frames=1800)), ReaderConfig(fps=5.0, realtime=True)),
    ]
    kept: dict[str, _Kept] = {}
    config = PipelineConfig(detector=DetectorConfig(), stream_ids=("file", "camera"), publish=False)
    raised: BaseException | None = None
    with build_pipeline(config, parts=parts, readers=readers, ctx=zmq.Context.instance(),
                        sinks=[lambda sid: kept.setdefault(sid, _Kept())]) as pipeline:

        def ended(stream: DetectorStream) -> None:  # the file played to its end: then the failure, then Ctrl-C
            armed.set()
            assert wait_for(lambda: pipeline.loop._failure is not None, 30.0)
            raise KeyboardInterrupt

        try:
            pipeline.run(None, ended)
        except BaseException as err:  # noqa: BLE001 - a KeyboardInterrupt is what the old code raised
            raised = err
    last = {sid: [m for m in sink.messages if isinstance(m, Heartbeat)][-1] for sid, sink in kept.items()}
    assert (last["file"].ended, last["file"].stopped) == (True, False), last["file"]
    assert (last["camera"].ended, last["camera"].stopped) == (False, False), last["camera"]
    assert isinstance(raised, RunError) and isinstance(raised.__cause__, RuntimeError), repr(raised)
    assert str(raised).endswith("RuntimeError: backbone out of memory (at tests/streaming/test_failed_runs.py:"
                                f"{_FailsOnceArmed.__call__.__code__.co_firstlineno + 2} in __call__)"), raised


def _fails_inside(monkeypatch: pytest.MonkeyPatch, error: BaseException, after: int = 8) -> None:
    """The TorchScript backbone raising ``error`` from its ``after``-th batch on (the warm-up's batches pass): what
    the run meets when it fails inside rather than on its input (a GPU out of memory, the host's memory gone)."""
    calls = [0]
    forward = TorchScriptExtractor.__call__

    def call(self: TorchScriptExtractor, frames: np.ndarray) -> np.ndarray:
        calls[0] += 1
        if calls[0] >= after:
            raise error
        return forward(self, frames)

    monkeypatch.setattr(TorchScriptExtractor, "__call__", call)


@pytest.mark.parametrize("error", [MemoryError(), RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB\n"
                                                                "(GPU 0; 79.15 GiB total capacity)")])
def test_a_split_detector_that_fails_inside_says_so_in_one_line_and_ends_no_session(
        failing: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        error: BaseException) -> None:
    # A MemoryError or a CUDA out of memory in a worker went out as a Python traceback (exit status 1), with no
    # `error:` line: its streams were cut short all the same, lost at the checker.
    _fails_inside(monkeypatch, error)
    log: list[str] = []
    with running_checker(tmp_path, log=log, stream_timeout_s=1.0) as (_ctx, service, _thread):
        with pytest.raises(SystemExit) as exit_info:
            main(["detector", "--video", str(failing["dark"]), "--video", str(failing["bright"]), "--stream-id", "a",
                  "--stream-id", "b", "--graph", str(GRAPH), "--detector", str(failing["detector"]), "--backbone",
                  str(failing["backbone"]), "--fast", "--connect", service.events_endpoint])
        assert wait_for(lambda: {line.split()[1] for line in log if " lost (" in line} == {"a", "b"}, 10.0), log
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and "Traceback" not in err, err
    said = "MemoryError" if isinstance(error, MemoryError) else "RuntimeError: CUDA out of memory. Tried to allocate " \
        "20.00 MiB"
    assert err.splitlines()[-1].startswith("error: internal failure of the detector, not a mistake in its input: "
                                           f"{said} (at tests/streaming/test_failed_runs.py:"), err
    assert sum(line.startswith("error: ") for line in err.splitlines()) == 1, err
    assert not [line for line in log if " ended (" in line or " stopped (" in line], log


@pytest.mark.parametrize("after", [1, 8], ids=["at-warm-up", "mid-run"])
def test_the_one_command_run_that_fails_inside_does_not_blame_its_view(
        failing: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        after: int) -> None:
    # It said "error: the live view failed (MemoryError: )": the view was fine, the detector's worker had failed (or
    # its warm-up, before any frame was read).
    _fails_inside(monkeypatch, MemoryError(), after)
    with pytest.raises(SystemExit) as exit_info:
        main(["--video", str(failing["dark"]), "--graph", str(GRAPH), "--detector", str(failing["detector"]),
              "--backbone", str(failing["backbone"]), "--jsonl", "--fast"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 1, err
    assert err.startswith("error: internal failure of the detector, not a mistake in its input: MemoryError (at ") \
        and err.count("\n") == 1, err
    assert not [m for m in map(json.loads, out.splitlines()) if m["kind"] == "missing" or m.get("ended")], out


def test_a_bug_inside_the_detector_shows_its_traceback_above_its_one_line(
        failing: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A bug (no memory run out) ended in the one line alone: its innermost frame, the rest of the traceback lost to the
    # developer it is reported to, where every other command's bug still shows it.
    _fails_inside(monkeypatch, KeyError("frame"))
    with pytest.raises(SystemExit) as exit_info:
        main(["--video", str(failing["dark"]), "--graph", str(GRAPH), "--detector", str(failing["detector"]),
              "--backbone", str(failing["backbone"]), "--jsonl", "--fast"])
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert exit_info.value.code == 1, err
    assert lines[0] == "Traceback (most recent call last):" and lines[-2] == "KeyError: 'frame'", err
    assert "in _process" in err and "raise error" in err, err  # the worker's frames, down to the raise
    assert lines[-1].startswith("error: internal failure of the detector, not a mistake in its input: KeyError: "
                                "'frame' (at tests/streaming/test_failed_runs.py:"), err
    assert sum(line.startswith("error: ") for line in lines) == 1, err


def test_an_installed_detector_names_its_own_line_not_a_library_s(tmp_path: Path) -> None:
    # Installed, the folder above the project's packages is site-packages: a library's frame (torch's, under a GPU's
    # out of memory) was named as the project's innermost line.
    site = tmp_path / "site-packages"
    root = Path(__file__).resolve().parents[2]
    for package in ("graphs", "recognition", "streaming", "tgml"):
        shutil.copytree(root / package, site / package, ignore=shutil.ignore_patterns("__pycache__", "*.pt"))
    (site / "library.py").write_text("def allocate():\n    raise MemoryError('out of host memory')\n")
    script = ("import library\n"
              "from graphs.common.errors import exit_on_input_error\n"
              "from streaming.detector.loop import internal_failure\n"
              "try:\n"
              "    exit_on_input_error(library.allocate)()\n"
              "except MemoryError as err:\n"
              "    print(internal_failure(err))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"internal failure of the detector, not a mistake in its input: MemoryError: out of host "
                        r"memory \(at graphs/common/errors\.py:\d+ in wrapper\)\n", done.stdout), done.stdout


def _reader_fails(monkeypatch: pytest.MonkeyPatch, where: str, error: BaseException) -> None:
    """decord's decoding of a later batch, or a frame's resize through OpenCV, raising ``error`` from its second call
    on (the reader's own first decode, as it opens, passes): the reader thread failing inside, not on the file."""
    from streaming.readers import DecordReader, OpenCVFileReader

    cls, name = (DecordReader, "_decode") if where == "decode" else (OpenCVFileReader, "_resize")
    original = getattr(cls, name)
    calls = [0]

    def failing(self: VideoReader, *args: object) -> object:
        calls[0] += 1
        if calls[0] >= 2:
            raise error
        return original(self, *args)

    monkeypatch.setattr(cls, name, failing)


@pytest.mark.parametrize(("where", "error"), [("decode", MemoryError()), ("resize", MemoryError()),
                                              ("decode", KeyError("frame")), ("resize", KeyError("frame"))])
def test_a_reader_thread_that_fails_inside_is_the_detector_s_failure_not_the_video_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], where: str,
        error: BaseException) -> None:
    # A MemoryError (or a bug) while decoding or resizing a frame was said as "error: --video X: MemoryError()",
    # exit status 2: the user was sent to look for damage in a file that had none.
    if where == "decode":
        pytest.importorskip("decord", reason="decord has no wheel for this platform")
    _reader_fails(monkeypatch, where, error)
    video = _video(tmp_path / "fine.mp4", 20.0, 0.0)  # at 5 fps, 100 frames: several of decord's batches
    with (running_checker(tmp_path, stream_timeout_s=1.0) as (_ctx, service, _thread),
          pytest.raises(SystemExit) as exit_info):
        main(["detector", "--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--fast",
              "--reader", "decord" if where == "decode" else "opencv", "--connect", service.events_endpoint])
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert exit_info.value.code == 1, err
    said = "MemoryError" if isinstance(error, MemoryError) else "KeyError: 'frame'"
    assert lines[-1].startswith(f"error: internal failure of the detector, not a mistake in its input: {said} (at "
                                "tests/streaming/test_failed_runs.py:"), err
    assert sum(line.startswith("error: ") for line in lines) == 1 and str(video) not in err, err
    assert ("Traceback" in err) == (not isinstance(error, MemoryError)), err  # a bug's traceback, for its fix
