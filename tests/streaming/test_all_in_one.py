"""The all-in-one run: waiting for the checker before the first frame, watching its checker and view, safe names."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import zmq
from rich.console import Console

from graphs.common.errors import InputError, RunError
from graphs.common.interrupts import Interrupted, handling_signals
from graphs.common.safe_text import printable
from graphs.task_graph import TaskGraph, load_graph, save_graph
from recognition.checkpoint import load_detector, save_detector
from streaming.all_in_one import RunConfig, await_subscription, run_all
from streaming.checker.config import CheckerConfig
from streaming.demo.paths import default_demo_paths
from streaming.detector import EventPublisher, StreamSource
from streaming.messages import Status
from streaming.readers import ReaderConfig
from streaming.stream_detect_cli import main
from streaming.transport import Publisher, bind, connect
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.hostile_text import HOSTILE_NAMES, assert_shown_safely
from tests.streaming.helpers import STREAM_DETECT, StalledStream, status_heard, wait_for, write_noise_video


def test_a_checker_that_never_answers_is_named_in_one_plain_line(ctx: zmq.Context) -> None:
    # The message showed the endpoint as a bytes repr: "the checker at b'tcp://127.0.0.1:5556' does not answer".
    silent_out, out_endpoint = bind(ctx, zmq.PUB, "tcp://127.0.0.1:0")  # a "checker" that never publishes
    silent_in, in_endpoint = bind(ctx, zmq.SUB, "tcp://127.0.0.1:0")
    viewer = Viewer(ctx, out_endpoint, ViewState(), jsonl=False)
    events = EventPublisher(Publisher(connect(ctx, zmq.PUB, in_endpoint)), "cam0")
    with pytest.raises(InputError) as caught:
        await_subscription(viewer, events, timeout_s=0.2)
    assert str(caught.value) == f"the checker at {out_endpoint} does not answer within 0.2 s"


@pytest.fixture
def _demo_videos_in_a_temporary_cache(demo_cache: Path) -> None:
    """The all-in-one runs below read the demo video: render it in the test session's cache."""


def hostile_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """The demo graph and detector, their step and class names replaced by names that break terminals and markup."""
    graph_path, detector_path = default_demo_paths()
    graph = load_graph(graph_path)
    names = HOSTILE_NAMES[: graph.n_steps]
    save_graph(TaskGraph(graph.step_ids, names, graph.adjacency, graph.weights, graph.scenario), tmp_path / "g.json")
    model, checkpoint = load_detector(detector_path)
    by_step = dict(zip(graph.step_ids, names, strict=True))
    classes = [by_step.get(s, "[/]background\x1b[2J") for s in checkpoint.class_step_ids]  # type: ignore[arg-type]
    save_detector(tmp_path / "d.pt", model, classes, checkpoint.class_step_ids, checkpoint.feature_extractor,
                  checkpoint.fps, checkpoint.info, evidence=checkpoint.evidence)
    return tmp_path / "g.json", tmp_path / "d.pt"


@pytest.mark.usefixtures("_demo_videos_in_a_temporary_cache")
def test_the_live_view_shows_names_from_a_graph_and_a_checkpoint_as_plain_text(tmp_path: Path) -> None:
    # "[/]" in a step name raised MarkupError inside rich Live: stream-detect crashed or froze with it.
    graph, detector = hostile_inputs(tmp_path)
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, color_system=None, width=400, height=200)
    source = StreamSource("demo", str(graph), str(detector), reader=ReaderConfig(realtime=False))
    assert run_all(RunConfig(source), console=console) == 0
    shown = screen.getvalue()
    assert_shown_safely(shown, HOSTILE_NAMES[:6])
    assert printable(HOSTILE_NAMES[1]) in shown.split("alerts")[-1]  # the demo mistake, boil_water, renamed


class BrokenTerminal(io.StringIO):
    """An output every write to fails with ``errno``. (rich handles a broken pipe itself.)"""

    def __init__(self, errno: int, why: str) -> None:
        super().__init__()
        self.errno, self.why = errno, why

    def write(self, text: str) -> int:
        raise OSError(self.errno, self.why)


@pytest.mark.usefixtures("_demo_videos_in_a_temporary_cache")
def test_a_view_that_fails_ends_the_run_as_a_failure_not_a_success() -> None:
    graph, detector = default_demo_paths()
    console = Console(file=BrokenTerminal(9, "Bad file descriptor"), force_terminal=True)
    source = StreamSource("demo", str(graph), str(detector), reader=ReaderConfig(realtime=False))
    with pytest.raises(RunError, match=r"the live view failed \(OSError: \[Errno 9\] Bad file descriptor\)"):
        run_all(RunConfig(source), console=console)
    # A terminal that went away (a closed window, a hung-up ssh session: EIO) is no failure of the view: its SIGHUP
    # is on the way, and the run stops as that stops it (exit status 129, the annotated video kept; below, for real).
    console = Console(file=BrokenTerminal(5, "Input/output error"), force_terminal=True)
    with pytest.raises(Interrupted) as stopped:
        run_all(RunConfig(source), console=console)
    assert stopped.value.signum == signal.SIGHUP
    with handling_signals():  # a new run forgets the stop this one began (a signal within 2 s would be ignored)
        pass


class FailsOnceArmed(io.StringIO):
    """A terminal every write to fails with EBADF once ``armed`` is set."""

    def __init__(self, armed: threading.Event) -> None:
        super().__init__()
        self.armed = armed

    def write(self, text: str) -> int:
        if self.armed.is_set():
            raise OSError(9, "Bad file descriptor")
        return super().write(text)


@pytest.mark.usefixtures("_demo_videos_in_a_temporary_cache")
def test_a_view_that_fails_mid_run_cuts_its_session_short_not_stopped_by_the_user(
        ctx: zmq.Context, tmp_path_factory: pytest.TempPathFactory) -> None:
    # The failed view stopped the detector as a Ctrl-C does: its last heartbeat said `ended, stopped`, and the checker
    # published a `missing` report and an ended, stopped status, which a dashboard or a second viewer showed as a
    # session the person stopped, while the run's only word was its error line.
    alerts_endpoint = f"ipc://{tmp_path_factory.mktemp('checker')}/out"
    armed, over = threading.Event(), threading.Event()
    heard: list[Status] = []

    def listen() -> None:  # a second viewer; the view fails once the detector's frames reach the checker
        def hear(status: Status) -> bool:
            heard.append(status)
            if status.frames > 0:
                armed.set()
            return False

        status_heard(ctx, alerts_endpoint, "cam0", over, 120.0, hear)

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    graph, detector = default_demo_paths()
    source = StreamSource("demo", str(graph), str(detector), reader=ReaderConfig(realtime=True))
    checker = CheckerConfig("tcp://127.0.0.1:0", alerts_endpoint)
    try:
        with pytest.raises(RunError, match=r"the live view failed \(OSError: \[Errno 9\] Bad file descriptor\)"):
            run_all(RunConfig(source, checker=checker), console=Console(file=FailsOnceArmed(armed),
                                                                        force_terminal=True))
        assert armed.is_set(), "the detector's frames never reached the checker"
        # What the checker published of the detector's last heartbeats came before it was stopped with the run.
        wait_for(lambda: any(status.ended for status in heard), 2.0)
    finally:
        over.set()
        listener.join(5.0)
    assert [status for status in heard if status.frames > 0], heard
    assert not [status for status in heard if status.ended or status.stopped], heard[-1]


def test_a_recording_too_short_for_any_step_is_said_so_not_blamed_on_the_detector(tmp_path: Path) -> None:
    # A fifth of a second (one frame at the demo detector's 5 fps) ended "no key-step recognised in 1 frame, so no
    # verdict (is the detector trained for this procedure and this view?)", while its segmenter confirms no step under
    # 2 frames: the run's detector, in this process, knows that much.
    video = write_noise_video(tmp_path / "short.mp4", frames=6)  # 30 fps
    graph, detector = default_demo_paths()
    run = subprocess.run([*STREAM_DETECT, "--video", str(video), "--graph", str(graph), "--detector", str(detector)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert ("cam0 ended: no key-step recognised in 1 frame, so no verdict (the recording is shorter than the shortest "
            "step the segmenter can confirm, 2 frames)") in " ".join(run.stdout.split()), run.stdout[-800:]


def test_a_camera_lost_mid_run_ends_lost_never_live_again(tmp_path: Path) -> None:
    # A network camera that gave frames, then hung: the checker marked it lost, then, once its reopen attempts were
    # spent, the detector delivered the frame that came before the stall (seconds old) and sent its last heartbeat,
    # not `ended`: both showed the lost stream live again, to the view and to every dashboard.
    graph, detector = default_demo_paths()
    lossy = ReaderConfig(stall_timeout_s=2.0, reopen_attempts=1, reopen_backoff_s=0.1, reopen_backoff_max_s=0.1)
    out = io.StringIO()
    with StalledStream(frames=5) as camera:
        source = StreamSource(camera.url, str(graph), str(detector), reader=lossy)
        checker = CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0", stream_timeout_s=1.0)
        with pytest.raises(InputError) as failed:
            run_all(RunConfig(source, checker=checker, jsonl=True), out=out)
    assert str(failed.value).endswith("reopen attempts failed"), failed.value
    statuses = [json.loads(line) for line in out.getvalue().splitlines()]
    states = [("ended" if s["ended"] else "lost" if s["lost"] else "live") for s in statuses if s["kind"] == "status"]
    assert states and states[-1] == "lost", states
    assert "live" not in states[states.index("lost"):], states


@pytest.mark.usefixtures("_demo_videos_in_a_temporary_cache")
def test_a_checker_that_dies_mid_run_is_one_error_line_and_exit_status_1(capsys: pytest.CaptureFixture[str],
                                                                         ctx: zmq.Context, tmp_path: Path,
                                                                         tmp_path_factory: pytest.TempPathFactory
                                                                         ) -> None:
    # When the checker died, stream-detect still exited 0, with the alert missing. A failed run, unlike a stopped one
    # (tests/test_signals.py), leaves no annotated video: its frames lack what the dead checker would have said.
    # The checker publishes on an ipc endpoint outside tmp_path, whose emptiness is checked at the end.
    alerts_endpoint = f"ipc://{tmp_path_factory.mktemp('checker')}/out"
    before = {p.pid for p in multiprocessing.active_children()}
    killed: list[float] = []  # when the checker was killed
    over = threading.Event()

    def kill_the_checker_mid_run() -> None:
        # Mid-run: once the checker has published a frame count of the stream, as a second viewer hears it, the
        # detector is past its start-up and its frames reach the checker (the demo plays in real time for about
        # 25 s). A fixed wait after the checker's start landed, on a busy machine, before the detector had sent one.
        def running(status: Status) -> bool:
            return status.frames > 0 and bool(checker())

        def checker() -> list[int]:
            return [c.pid for c in multiprocessing.active_children() if c.pid is not None and c.pid not in before]

        if status_heard(ctx, alerts_endpoint, "cam0", over, 60.0, running):
            os.kill(checker()[0], signal.SIGKILL)
            killed.append(time.monotonic())

    killer = threading.Thread(target=kill_the_checker_mid_run, daemon=True)
    killer.start()
    exit_status: int | str | None = None
    try:
        exit_status = main(["--video", "demo", "--jsonl", "--annotate-out", str(tmp_path / "run.mp4"),
                        "--publish", alerts_endpoint])
    except SystemExit as exit_info:
        exit_status = exit_info.code
    finally:
        ended = time.monotonic()
        over.set()
        killer.join(5.0)
    assert killed, "the checker never published a frame count of cam0: the run was never under way to kill it"
    assert exit_status == 1
    # Timed from the kill, not from the start, which loading the model and the checker's start make long on a busy
    # machine: had the run missed the death, it would have played the remaining 20 s or more of the demo.
    assert ended - killed[0] < 10.0, f"the run went on {ended - killed[0]:.1f} s after its checker was killed"
    err = capsys.readouterr().err.strip()
    assert err == "error: the checker process ended unexpectedly (exit status -9); alerts from then on are missing"
    assert list(tmp_path.iterdir()) == []  # neither the video nor its temporary folder


def test_a_closed_terminal_stops_the_live_view_as_its_sighup_does_video_kept(tmp_path: Path) -> None:
    # A closed tmux window: the view's next frame met EIO before the SIGHUP was delivered, and the run ended with
    # "error: the live view failed (OSError: [Errno 5] ...)", exit status 1, and its annotated video deleted. Here no
    # SIGHUP comes at all (the child has no controlling terminal): the EIO alone must stop it as one would.
    import pty
    import select
    import subprocess

    from tests.streaming.helpers import STREAM_DETECT

    video = tmp_path / "run.mp4"
    master, slave = pty.openpty()
    run = subprocess.Popen([*STREAM_DETECT, "--video", "demo", "--annotate-out", str(video)],
                           stdin=slave, stdout=slave, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "120"})
    os.close(slave)
    try:
        drawn = b""
        deadline = time.monotonic() + 120
        # Not the first frame of the view, whose headers name no step: boil_water is seen (the demo's mistake, seconds
        # in), so the annotated video holds frames when the terminal closes (with none, there is nothing to keep).
        while b"boil_water" not in drawn and time.monotonic() < deadline and run.poll() is None:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                drawn += os.read(master, 65536)
        assert b"boil_water" in drawn, drawn[-2000:]
    finally:
        os.close(master)  # the terminal is gone: every write to it now fails with EIO
    _, err = run.communicate(timeout=120)
    lines = err.decode().strip().splitlines()
    assert run.returncode == 129, lines
    assert lines[-1].startswith("interrupted by SIGHUP") and "Traceback" not in err.decode()
    assert any(line.startswith(f"stream-detect: kept the annotated video {video}") for line in lines)
    assert video.is_file() and video.stat().st_size > 0


def test_with_its_output_redirected_a_run_shows_its_progress_on_standard_error() -> None:
    # `stream-detect --video demo --jsonl > out` (or the view sent to a file) showed nothing on the terminal until
    # the run ended: a long video looked hung. Standard error is a real terminal here (a pty), output a pipe.
    import pty
    import subprocess

    from tests.streaming.helpers import STREAM_DETECT, drain_terminal

    master, slave = pty.openpty()
    run = subprocess.Popen([*STREAM_DETECT, "--video", "demo", "--fast", "--jsonl"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=slave, env={**os.environ, "COLUMNS": "120"})
    os.close(slave)
    reader, shown = drain_terminal(master)
    try:
        out, _ = run.communicate(timeout=120)
        reader.join(60.0)
    finally:
        os.close(master)
    assert run.returncode == 0
    assert all(line.startswith(b"{") for line in out.splitlines())  # the output stays JSON lines, nothing else
    text = bytes(shown).decode(errors="replace")
    assert re.search(r"stream-detect: [1-9][0-9]* frames read, 1 alert so far; JSON lines go to standard output", text)


def test_ctrl_c_in_the_live_view_leaves_one_copy_of_its_last_frame() -> None:
    # The terminal echoes ^C where the cursor is: after a frame, at the end of its last line, a table's border as wide
    # as the terminal, so the echo went on a line of its own, and the last frame, drawn from as many lines up as the
    # frame before had, began one line lower: its "streams" title stood twice above it.
    import fcntl
    import pty
    import struct
    import subprocess
    import termios

    from tests.streaming.helpers import STREAM_DETECT, drain_terminal, screen_of, wait_for

    columns = 120
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))

    def own_terminal() -> None:  # a shell's foreground job: Ctrl-C typed on the terminal is its SIGINT
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    run = subprocess.Popen([*STREAM_DETECT, "--video", "demo"], stdin=slave, stdout=slave, stderr=slave,
                           preexec_fn=own_terminal, env={**os.environ, "COLUMNS": str(columns), "LINES": "50"})
    os.close(slave)
    reader, drawn = drain_terminal(master)
    try:
        # A key-step recognised, with its video time ("1.2-3.8 s"): the view has drawn frames for seconds.
        assert wait_for(lambda: re.search(rb"\d+\.\d-\d+\.\d s", drawn) is not None or run.poll() is not None,
                        120.0), bytes(drawn[-2000:])
        assert run.poll() is None, bytes(drawn[-2000:])
        os.write(master, b"\x03")  # Ctrl-C, as typed
        run.wait(timeout=120)
        reader.join(60.0)
    finally:
        if run.poll() is None:
            run.kill()
        os.close(master)
    assert run.returncode == 130
    screen = screen_of(bytes(drawn), columns, 50)
    assert [line.strip() for line in screen].count("streams") == 1, "\n".join(screen)
    assert [line for line in screen if line][-1].startswith("interrupted by SIGINT"), "\n".join(screen)
