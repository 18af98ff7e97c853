"""CURVE beyond loopback, on loopback: who gets through, what is refused and counted, revocation, restart safety.

Every socket here is real (tcp on 127.0.0.1 or ipc); keys are made by `stream-detect keys` itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq
import zmq.auth

from graphs.common.errors import InputError
from graphs.task_graph import save_graph
from streaming.checker.config import CheckerConfig
from streaming.checker.process import CheckerProcess
from streaming.checker.service import CheckerService
from streaming.curve_keys import (
    KEY_RELOAD_S,
    MAX_SKIPPED_LINES,
    RACY_CHANGE_S,
    ClientKeys,
    CurveClient,
    CurveServer,
    certificate,
    load_client_key,
    parse_client_names,
)
from streaming.demo.procedure import DEMO_EXECUTIONS
from streaming.detector import EventPublisher
from streaming.messages import Alert, CheckerHealth
from streaming.stream_detect_cli import main
from streaming.transport import (
    Publisher,
    Receiver,
    bind,
    connect,
    connect_waiting,
    connect_watched,
    is_local,
    subscribe,
)
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.cli_errors import cli_error
from tests.streaming.helpers import (
    MISTAKE_STEP,
    STREAM_DETECT,
    checker_with_few_files,
    running_checker,
    tea_graph,
    wait_for,
)

MISTAKE = DEMO_EXECUTIONS["mistake"]


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """A key set made by the command users run: the checker, cameras cam0 and cam1, a viewer."""
    assert main(["keys", "--out", str(tmp_path / "keys"), "--clients", "cam0,cam1,viewer"]) == 0
    return tmp_path / "keys"


def client(keys: Path, name: str) -> CurveClient:
    return CurveClient.from_files(str(keys / "checker.key"), str(keys / "clients" / f"{name}.key_secret"))


def stranger(keys: Path) -> CurveClient:
    """A client with a valid key pair the checker was never given."""
    public, secret = zmq.curve_keypair()
    return CurveClient(CurveServer.from_files(str(keys / "checker.key_secret"), str(keys / "clients")).public,
                       public, secret)


def server(keys: Path) -> CurveServer:
    return CurveServer.from_files(str(keys / "checker.key_secret"), str(keys / "clients"))


@pytest.fixture
def curve_checker(keys: Path) -> Iterator[tuple[zmq.Context, CheckerService]]:
    """A checker with CURVE on loopback TCP (free ports), served by a thread; clients share its context."""
    ctx = zmq.Context()
    stop = threading.Event()
    service = CheckerService(tea_graph(), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0", curve=server(keys)),
                             ctx)
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield ctx, service
    finally:
        stop.set()
        thread.join(5)
        ctx.destroy(linger=0)


def sends_until_refused(ctx: zmq.Context, endpoint: str, curve: CurveClient | None, name: str) -> None:
    """Publish a mistake and heartbeats from a socket that did not wait for its handshake, until its own monitor
    says the checker turned it away (no timer decides that nothing came)."""
    sock, watch = connect_watched(ctx, zmq.PUB, endpoint, curve=curve)
    events = EventPublisher(Publisher(sock), name)

    def send_and_check() -> None:
        send_mistake(events)
        events.heartbeat(None, 1, 0, 1.0)
        watch.wait(0.05)

    try:
        with pytest.raises(InputError, match="refused|CURVE"):
            wait_for(lambda: False, 10.0, send_and_check)
    finally:
        watch.close()
        sock.close()


def allowed_camera(ctx: zmq.Context, service: CheckerService, keys: Path, viewer: Viewer) -> EventPublisher:
    """Detector ``cam0`` with its allowed key, once ``viewer`` sees its stream through the checker."""
    events = EventPublisher(Publisher(connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0,
                                              curve=client(keys, "cam0"))), "cam0")
    assert wait_for(lambda: "cam0" in viewer.state.streams, 10.0,
                    lambda: (events.heartbeat(None, 0, 0, 0.0), viewer.pump(20)))
    return events


def send_mistake(events: EventPublisher) -> None:
    for step in MISTAKE[:2]:  # boil_water before fill_kettle: one alert
        events.keystep(step, "x", 0.0, 1.0, 0.9)


# -- keys -----------------------------------------------------------------------------------------------------------
def test_keys_are_pyzmq_certificates_with_private_secrets(keys: Path) -> None:
    for folder, name in [(keys, "checker"), *((keys / "clients", n) for n in ("cam0", "cam1", "viewer"))]:
        public, none = zmq.auth.load_certificate(folder / f"{name}.key")
        same, secret = zmq.auth.load_certificate(folder / f"{name}.key_secret")
        assert none is None and same == public and secret is not None and zmq.curve_public(secret) == public
        assert stat.S_IMODE((folder / f"{name}.key_secret").stat().st_mode) == 0o600
        assert stat.S_IMODE((folder / f"{name}.key").stat().st_mode) == 0o644
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    assert not [p for p in keys.rglob(".*")]  # no scratch folder left behind


def test_keys_are_never_overwritten_without_force(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = {p: p.read_bytes() for p in keys.rglob("*.key*")}
    line = cli_error(main, ["keys", "--out", str(keys), "--clients", "cam0"], capsys)
    assert "checker.key exists" in line and "--force" in line
    line = cli_error(main, ["keys", "--out", str(keys), "--add", "--clients", "cam9,cam1"], capsys)
    assert "cam1.key exists" in line
    assert {p: p.read_bytes() for p in keys.rglob("*.key*")} == before  # nothing written, not even cam9
    assert main(["keys", "--out", str(keys), "--add", "--clients", "cam2"]) == 0  # adding keeps the checker
    assert (keys / "checker.key").read_bytes() == before[keys / "checker.key"]
    assert (keys / "clients" / "cam2.key_secret").exists()
    assert main(["keys", "--out", str(keys), "--clients", "cam0", "--force"]) == 0
    assert (keys / "checker.key").read_bytes() != before[keys / "checker.key"]
    assert stat.S_IMODE((keys / "checker.key_secret").stat().st_mode) == 0o600


@pytest.mark.parametrize("names", ["../cam", "a/b", ".hidden", "", "cam0,cam0", "x" * 65, "cam 0"])
def test_client_names_cannot_leave_the_clients_folder(names: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(main, ["keys", "--out", str(tmp_path / "k"), "--clients", names], capsys)
    assert line.startswith("error: --clients")
    assert not (tmp_path / "k").exists()


def test_keys_out_that_is_a_named_pipe_is_said_to_be_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It was "is a file, expected a folder for the keys": a FIFO is no regular file, and the line should say what
    # stands there, as every other output check does.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    line = cli_error(main, ["keys", "--out", str(fifo), "--clients", "cam0"], capsys)
    assert line == f"error: --out {fifo}: is a FIFO (named pipe), expected a folder for the keys"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # left as it was


def test_add_needs_an_existing_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(main, ["keys", "--out", str(tmp_path / "k"), "--add", "--clients", "cam3"], capsys)
    assert "holds no checker key pair" in line


def _tree(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Everything under ``folder``: relative path -> (mode, content; None for a folder)."""
    return {str(p.relative_to(folder)): (p.lstat().st_mode, None if p.is_dir() else p.read_bytes())
            for p in sorted(folder.rglob("*"))}


def _public_files_only(limit: int) -> Callable[[], None]:
    """In the child: no file may grow past ``limit`` bytes (a full disk, as the writer sees it: EFBIG), no SIGXFSZ
    death."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("mode", ["new set", "--add", "--force"])
def test_a_key_set_that_cannot_be_written_whole_leaves_the_folder_as_it_was(tmp_path: Path, mode: str) -> None:
    # On a full disk keys left the checker's secret behind (and the folders it made), and the rerun refused it:
    # "checker.key_secret exists". A file-size limit that lets public key files through and stops secret ones stands
    # for the disk that fills up part-way.
    site = tmp_path / "site"
    site.mkdir()
    (site / "notes.txt").write_text("not a key")
    out = site / "keys"
    if mode != "new set":
        assert main(["keys", "--out", str(out), "--clients", "cam0"]) == 0
    before = _tree(site)
    public, secret = zmq.curve_keypair()
    limit = len(certificate(public))
    assert len(certificate(public, secret)) > limit
    extra = [] if mode == "new set" else [mode]
    argv = [*STREAM_DETECT, "keys", "--out", str(out), "--clients", "a,b,c", *extra]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, preexec_fn=_public_files_only(limit))
    assert run.returncode == 2, run.stderr
    [line] = run.stderr.splitlines()
    assert re.fullmatch(rf"error: {re.escape(str(out))}/(clients/[abc]|checker)\.key_secret: cannot write the secret "
                        r"key file \(File too large\)", line), line
    assert _tree(site) == before  # nothing this run wrote is left, and nothing that was there is touched
    assert subprocess.run(argv, capture_output=True, timeout=60).returncode == 0  # the rerun finds no half set


_FILL_UP = """
mount -t tmpfs -o size="$3" tmpfs "$1" || exit 77
"$4" -m streaming.stream_detect_cli keys --out "$1/keys" --clients a,b,c 2> "$2/stderr" > /dev/null
echo $? > "$2/status"
ls -A "$1" > "$2/left"
mount -o remount,size=1m "$1" || exit 78
"$4" -m streaming.stream_detect_cli keys --out "$1/keys" --clients a,b,c > /dev/null 2>&1
echo $? > "$2/rerun"
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux) to mount a small tmpfs")
def test_a_key_set_on_a_disk_that_fills_up_part_way_leaves_nothing(tmp_path: Path) -> None:
    # The hostile test's full disk: room for three of the eight key files, in a tmpfs mounted in private user and
    # mount namespaces (no root needed), so the checker's pair was written and a client's was not.
    disk, report = tmp_path / "disk", tmp_path / "report"
    disk.mkdir()
    report.mkdir()
    pages = 3 * os.sysconf("SC_PAGE_SIZE")  # a tmpfs gives each small file one page
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", _FILL_UP, "sh", str(disk),
                           str(report), str(pages), sys.executable], capture_output=True, text=True, timeout=120)
    if done.returncode == 77 or not (report / "status").exists():
        pytest.skip(f"no tmpfs in a private mount namespace here: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stderr
    assert (report / "status").read_text().strip() == "2"
    [line] = (report / "stderr").read_text().splitlines()
    assert re.fullmatch(rf"error: {re.escape(str(disk))}/keys/(clients/[abc]|checker)\.key(_secret)?: cannot write the "
                        r"(secret|public) key file \(No space left on device\)", line), line
    assert (report / "left").read_text() == ""  # not the checker's pair, not even the folders the run made
    assert (report / "rerun").read_text().strip() == "0"


def test_parse_client_names() -> None:
    assert parse_client_names("cam0, cam1,viewer") == ("cam0", "cam1", "viewer")


# -- loopback and the exposure rule ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("endpoint", "local"), [
    ("tcp://127.0.0.1:5555", True), ("tcp://127.9.9.9:0", True), ("tcp://[::1]:5555", True),
    ("tcp://[::ffff:127.0.0.1]:1", True), ("ipc:///tmp/x", True), ("inproc://x", True),
    ("tcp://0.0.0.0:5555", False), ("tcp://*:5555", False), ("tcp://[::]:1", False), ("tcp://10.0.0.5:1", False),
    ("tcp://localhost:5555", False), ("tcp://lo:5555", False), ("tcp://127.1:5555", False), ("tcp://0:5555", False),
])
def test_only_literal_loopback_addresses_count_as_this_machine(endpoint: str, local: bool) -> None:
    # libzmq reads '0' as 0.0.0.0 and 'lo' as an interface: only what is certainly loopback may stay open.
    assert is_local(endpoint) is local


def test_binding_beyond_loopback_without_keys_is_refused_before_any_bind(
    ctx: zmq.Context, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Hold the port on loopback: a checker that tried to bind 0.0.0.0 on it would say "already in use" instead.
    held = ctx.socket(zmq.SUB)
    held.setsockopt(zmq.LINGER, 0)
    port = held.bind_to_random_port("tcp://127.0.0.1")
    for argv in (["checker", "--demo", "--bind", f"tcp://0.0.0.0:{port}"],
                 ["checker", "--demo", "--publish", f"tcp://*:{port}"],
                 ["--video", "demo", "--jsonl", "--bind", f"tcp://0.0.0.0:{port}"]):
        line = cli_error(main, argv, capsys)
        assert f":{port} is reachable beyond this machine" in line and "stream-detect keys --out" in line
    line = cli_error(main, ["checker", "--demo", "--bind", f"tcp://localhost:{port}"], capsys)
    assert "names its host by name" in line
    with pytest.raises(InputError, match="reachable beyond this machine"):
        CheckerConfig("tcp://127.0.0.1:0", "tcp://[::]:0")


def test_insecure_lets_the_checker_bind_beyond_loopback_with_a_warning(
    ctx: zmq.Context, capsys: pytest.CaptureFixture[str]
) -> None:
    held = ctx.socket(zmq.SUB)  # the port is taken on loopback, so the test never really opens one beyond it
    held.setsockopt(zmq.LINGER, 0)
    port = held.bind_to_random_port("tcp://127.0.0.1")
    with pytest.raises(SystemExit):
        main(["checker", "--demo", "--bind", f"tcp://0.0.0.0:{port}", "--insecure"])
    warning, error = capsys.readouterr().err.splitlines()
    assert warning.startswith(f"warning: --insecure: anyone who reaches tcp://0.0.0.0:{port} can send key-steps")
    assert error.endswith("address already in use (another program is using it: pick another port)")  # it bound


# -- who gets through ------------------------------------------------------------------------------------------------
def test_an_allowed_detectors_alert_reaches_an_allowed_viewer(
    curve_checker: tuple[zmq.Context, CheckerService], keys: Path
) -> None:
    ctx, service = curve_checker
    viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False, curve=client(keys, "viewer"))
    events = allowed_camera(ctx, service, keys, viewer)
    send_mistake(events)
    assert wait_for(lambda: len(viewer.state.alerts) == 1, 10.0, lambda: viewer.pump(20))
    assert viewer.state.alerts[0][1].step == MISTAKE_STEP
    assert service.core.counts["denied"] == 0
    viewer.close()


def test_a_detector_with_a_strangers_key_has_nothing_accepted(
    curve_checker: tuple[zmq.Context, CheckerService], keys: Path
) -> None:
    ctx, service = curve_checker
    with pytest.raises(InputError, match="the checker refused this client's key"):
        connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0, curve=stranger(keys))
    # Without waiting (ZeroMQ would drop everything silently), and without any keys at all: nothing gets in.
    sends_until_refused(ctx, service.events_endpoint, stranger(keys), "evil")
    sends_until_refused(ctx, service.events_endpoint, None, "plain")
    assert service.core.streams == {} and service.receiver.stats.received == 0
    assert wait_for(lambda: service.core.counts["denied"] >= 2, 5.0)
    assert "handshakes refused" in service.summary()
    assert any(n in service.summary() for n in ("2 handshakes", "3 handshakes", "4 handshakes"))


def test_a_viewer_without_the_right_keys_receives_nothing(
    curve_checker: tuple[zmq.Context, CheckerService], keys: Path
) -> None:
    ctx, service = curve_checker
    plain = Receiver(subscribe(connect(ctx, zmq.SUB, service.alerts_endpoint)))
    wrong_server = Receiver(subscribe(connect(ctx, zmq.SUB, service.alerts_endpoint, curve=CurveClient(
        client(keys, "cam1").public, client(keys, "viewer").public, client(keys, "viewer").secret))))
    refused = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False, curve=stranger(keys))
    allowed = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False, curve=client(keys, "viewer"))
    events = allowed_camera(ctx, service, keys, allowed)
    send_mistake(events)
    assert wait_for(lambda: len(allowed.state.alerts) == 1, 10.0, lambda: allowed.pump(20))
    # Until the allowed viewer has heard the alert re-sent twice: the first re-send, published to every subscriber
    # at once, has had a whole period to reach the others.
    got: list[object] = []
    resent: list[object] = []

    def listen() -> None:
        got.extend(plain.poll(10) + wrong_server.poll(10))
        resent.extend(m for m in allowed.pump(10) if isinstance(m, Alert))

    assert wait_for(lambda: len(resent) >= 2, 10.0, listen)
    assert got == [] and plain.stats.malformed == wrong_server.stats.malformed == 0
    with pytest.raises(InputError, match="the checker refused this client's key"):
        wait_for(lambda: False, 5.0, lambda: refused.pump(20))
    assert refused.state.streams == {}
    health = [m for m in allowed.pump(600) + allowed.pump(600) if isinstance(m, CheckerHealth)]
    assert health and health[-1].denied >= 1  # the refused viewer, counted in the status viewers get
    for sock in (plain.sock, wrong_server.sock):
        sock.close()
    allowed.close()
    refused.close()


@pytest.mark.parametrize("held", ["another checker's public key", "a secret key not of its public key"])
def test_a_handshake_that_fails_its_encryption_is_logged_with_both_of_its_causes(
    tmp_path: Path, keys: Path, held: str
) -> None:
    # libzmq reports both the same way (ZMTP_CRYPTOGRAPHIC): a client of its own that sent an allowed public key
    # (cam0's) beside another secret key was logged as holding another checker's public key, and its operator looked
    # at --curve-server, which was right.
    lines: list[str] = []
    cam0, cam1 = client(keys, "cam0"), client(keys, "cam1")
    with running_checker(tmp_path, log=lines, curve=server(keys)) as (ctx, service, _):
        sock = ctx.socket(zmq.PUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.curve_serverkey = cam1.public if held == "another checker's public key" else cam0.server
        sock.curve_publickey, sock.curve_secretkey = cam0.public, cam1.secret
        sock.connect(service.events_endpoint)
        try:
            assert wait_for(lambda: any("refused (denied" in line for line in lines), 10.0)
        finally:
            sock.close()
    line = next(line for line in lines if "refused (denied" in line)
    assert "another checker's public key (--curve-server)" in line, line
    assert "a secret key that does not belong to the public key it presents" in line, line
    assert service.receiver.stats.received == 0


def test_curve_applies_on_ipc_too(tmp_path: Path, keys: Path) -> None:
    # On ipc the file permissions let a local user in; CURVE still asks for a key.
    with running_checker(tmp_path, curve=server(keys)) as (ctx, service, _thread):
        assert service.events_endpoint.startswith("ipc://")
        with pytest.raises(InputError, match="refused this client's key"):
            connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0, curve=stranger(keys))
        connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0, curve=client(keys, "cam1")).close()


# -- adding and revoking a camera ------------------------------------------------------------------------------------
def test_a_key_dropped_into_the_folder_lets_its_camera_in_and_a_removed_one_cuts_it_off(
    curve_checker: tuple[zmq.Context, CheckerService], keys: Path
) -> None:
    ctx, service = curve_checker
    viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False, curve=client(keys, "viewer"))
    assert main(["keys", "--out", str(keys), "--add", "--clients", "cam7"]) == 0  # a new camera, checker running
    sock = None
    deadline = time.monotonic() + 10.0
    while sock is None and time.monotonic() < deadline:
        try:
            sock = connect(ctx, zmq.PUB, service.events_endpoint, wait_s=1.0, curve=client(keys, "cam7"))
        except InputError:  # refused until the checker reads its folder again (at most a second later)
            time.sleep(0.2)
    assert sock is not None
    events = EventPublisher(Publisher(sock), "cam7")
    assert wait_for(lambda: "cam7" in viewer.state.streams, 10.0,
                    lambda: (events.heartbeat(None, 0, 0, 0), viewer.pump(20)))
    denied = service.core.counts["denied"]
    (keys / "clients" / "cam7.key").unlink()  # revoked while connected
    assert wait_for(lambda: service.core.counts["denied"] > denied, 10.0,
                    lambda: (events.heartbeat(None, 0, 0, 0), viewer.pump(20)))
    received = service.receiver.stats.received
    # cam7 keeps sending until the allowed viewer, which came back by itself after the checker re-opened its sockets,
    # has heard the checker's periodic health twice: nothing of cam7's got in meanwhile.
    heard: list[object] = []

    def beat_and_hear() -> None:
        events.heartbeat(None, 0, 0, 0)
        heard.extend(viewer.pump(50))

    assert wait_for(lambda: sum(isinstance(m, CheckerHealth) for m in heard) >= 2, 10.0, beat_and_hear)
    assert service.receiver.stats.received == received
    viewer.close()
    sock.close()


def test_a_detector_whose_key_is_revoked_while_it_runs_ends_with_the_refusal(
    curve_checker: tuple[zmq.Context, CheckerService], keys: Path, tmp_path: Path
) -> None:
    # It went on to the end of its video and exited 0 with its usual summary, while the checker turned away every
    # message it sent after the revocation. With alert frames, its socket is one of several sinks (a `Fanout`).
    _ctx, service = curve_checker
    args = ["detector", "--video", "demo", "--connect", service.events_endpoint, "--curve-server",
            str(keys / "checker.key"), "--curve-secret", str(keys / "clients" / "cam1.key_secret"), "--stream-id",
            "door", "--alert-frames", str(tmp_path / "frames")]
    proc = subprocess.Popen([*STREAM_DETECT, *args], stderr=subprocess.PIPE, text=True)  # the demo plays for ~25 s
    try:
        assert wait_for(lambda: "door" in service.core.streams or proc.poll() is not None, 60.0)
        assert proc.poll() is None
        (keys / "clients" / "cam1.key").unlink()
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 2
    assert err.splitlines()[-1] == (f"error: --connect {service.events_endpoint}: the checker refused this client's "
                                    "key (put its public key, clients/NAME.key, in the checker's --curve-clients "
                                    "folder, or check --curve-secret)")
    assert "Traceback" not in err


class _Log(list[str]):
    """A checker log: the lines, and each line's fields (the keywords of its call) in ``fields``."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[dict[str, object]] = []

    def __call__(self, line: str, **fields: object) -> None:
        self.append(line)
        self.fields.append(fields)


def test_a_reload_names_the_key_files_it_added_and_revoked_as_fields(keys: Path) -> None:
    # The line only counts them, and its JSON object had no field: a log collector could not tell which camera had
    # been let in or cut off.
    lines = _Log()
    folder = ClientKeys(keys / "clients", log=lines)
    kept = (keys / "clients" / "cam1.key").read_bytes()
    (keys / "clients" / "cam1.key").unlink()
    assert folder.reload(force=True) is True
    (keys / "clients" / "cam2.key").write_bytes(kept)
    assert folder.reload(force=True) is False
    assert lines == [f"checker: client keys reloaded from {keys / 'clients'}: 0 added, 1 revoked (2 allowed)",
                     f"checker: client keys reloaded from {keys / 'clients'}: 1 added, 0 revoked (3 allowed)"]
    assert lines.fields == [{"added": [], "revoked": ["cam1.key"], "allowed": 2},
                            {"added": ["cam2.key"], "revoked": [], "allowed": 3}]


def test_a_reload_names_at_most_32_key_files_in_its_fields(keys: Path) -> None:
    # A folder that became unreadable revokes every key: a thousand names made one JSON line of tens of kilobytes.
    lines = _Log()
    folder = ClientKeys(keys / "clients", log=lines)
    for k in range(40):
        zmq.auth.create_certificates(str(keys / "clients"), f"extra{k:02d}")
    assert folder.reload(force=True) is False
    assert lines == [f"checker: client keys reloaded from {keys / 'clients'}: 40 added, 0 revoked (43 allowed)"]
    assert lines.fields[0]["added"] == [f"extra{k:02d}.key" for k in range(32)] and lines.fields[0]["allowed"] == 43


def test_a_broken_key_file_at_reload_is_skipped_and_named(tmp_path: Path, keys: Path) -> None:
    lines = _Log()
    now = [0.0]
    folder = ClientKeys(keys / "clients", log=lines, monotonic=lambda: now[0])
    allowed = set(folder.allowed)
    (keys / "clients" / "cam1.key").write_text("not a key\n")
    now[0] += 2.0
    assert folder.reload() is True  # cam1's key is gone from the allowed set
    assert len(folder.allowed) == len(allowed) - 1
    assert any("cam1.key" in line and "not a CURVE key file" in line for line in lines)
    assert folder.reload() is False  # nothing changed since


def test_a_secret_key_dropped_into_the_client_folder_is_skipped_and_named(tmp_path: Path, keys: Path) -> None:
    # A client's secret copied to the checker machine as NAME.key was read as an allowed public key, without a word.
    lines = _Log()
    now = [0.0]
    folder = ClientKeys(keys / "clients", log=lines, monotonic=lambda: now[0])
    allowed = set(folder.allowed)
    (keys / "clients" / "cam9.key").write_bytes((keys / "clients" / "cam0.key_secret").read_bytes())
    now[0] += 2.0
    folder.reload()
    assert folder.allowed == allowed
    assert lines == [f"checker: skipped --curve-clients {keys / 'clients' / 'cam9.key'}: holds a secret key; the "
                     "client folder takes public key files only (NAME.key): a client's secret stays on its own "
                     "machine"]


def test_a_dangling_or_looping_key_link_at_reload_is_skipped_and_named_once(tmp_path: Path, keys: Path) -> None:
    # One such link failed the whole look at the folder: "cannot read the client key folder; every client key is
    # revoked", then "0 added, 3 revoked" (4 with the viewer), and every camera and viewer was cut off.
    lines = _Log()
    now = [0.0]
    folder = ClientKeys(keys / "clients", log=lines, monotonic=lambda: now[0])
    allowed = folder.allowed
    (keys / "clients" / "old.key").symlink_to(tmp_path / "nonexistent" / "old.key")  # its key removed, link left
    (keys / "clients" / "loop.key").symlink_to("loop.key")
    now[0] += 2.0
    assert folder.reload() is False  # nobody to cut off: the sockets stay as they are
    assert folder.allowed == allowed
    assert lines == [
        f"checker: skipped --curve-clients {keys / 'clients' / 'loop.key'}: cannot read the CURVE key file (Too many "
        "levels of symbolic links)",
        f"checker: skipped --curve-clients {keys / 'clients' / 'old.key'}: CURVE key file not found (make keys with "
        "'stream-detect keys --out DIR')"]
    now[0] += 2.0
    assert folder.reload() is False
    assert lines[2:] == []  # named once, not at every look
    (keys / "clients" / "old.key").unlink()
    (keys / "clients" / "cam1.key").unlink()  # a real revocation beside the link still counts
    now[0] += 2.0
    assert folder.reload() is True
    assert lines[2:] == [f"checker: skipped --curve-clients {keys / 'clients' / 'loop.key'}: cannot read the CURVE key "
                         "file (Too many levels of symbolic links)",
                         f"checker: client keys reloaded from {keys / 'clients'}: 0 added, 1 revoked (2 allowed)"]


def test_a_folder_of_broken_key_links_is_named_in_a_few_lines(tmp_path: Path, keys: Path) -> None:
    # A deploy tool that left many links behind: the skipped files are named up to a bound, the rest counted.
    lines = _Log()
    folder = ClientKeys(keys / "clients", log=lines)
    allowed = folder.allowed
    for number in range(MAX_SKIPPED_LINES + 3):
        (keys / "clients" / f"old{number:02d}.key").symlink_to(tmp_path / "nonexistent" / f"old{number}.key")
    assert folder.reload(force=True) is False
    assert folder.allowed == allowed
    assert len(lines) == MAX_SKIPPED_LINES + 1
    assert all(line.startswith(f"checker: skipped --curve-clients {keys / 'clients'}/old") for line in lines[:-1])
    assert lines[-1] == (f"checker: skipped 3 more key files of {keys / 'clients'} that cannot be read as public "
                         "keys")


def test_a_key_file_deleted_between_the_listing_and_its_look_revokes_that_key_only(
    keys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The folder's listing held cam1.key, deleted before its stat(): every client key was revoked for a second.
    import streaming.curve_keys as curve_keys

    lines = _Log()
    folder = ClientKeys(keys / "clients", log=lines)
    listed = curve_keys._key_files(keys / "clients")
    (keys / "clients" / "cam1.key").unlink()
    monkeypatch.setattr(curve_keys, "_key_files", lambda _folder: listed)  # the listing made before the delete
    assert folder.reload(force=True) is True
    assert sorted(folder.names.values()) == ["cam0.key", "viewer.key"]
    assert lines == [f"checker: client keys reloaded from {keys / 'clients'}: 0 added, 1 revoked (2 allowed)"]


# Counting a process's open files reads /proc: Linux only.
NEEDS_PROC = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files in /proc (Linux only)")


@contextlib.contextmanager
def no_file_handle_left() -> Iterator[None]:
    """This process at its limit of open files for the block (as a peer holding connections open leaves a checker):
    every ``open`` or folder listing fails with EMFILE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
    try:
        while True:
            try:
                held.append(os.open(os.devnull, os.O_RDONLY))
            except OSError as err:
                assert err.errno == errno.EMFILE
                break
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@NEEDS_PROC
def test_running_out_of_file_handles_revokes_no_key(keys: Path) -> None:
    # A peer holding ~100 connections open at a checker started under `ulimit -n 100` (no key needed: the handshake
    # never starts): "cannot read the client key folder keys/clients; every client key is revoked", then the checker
    # re-opened its sockets, found no handle for them either, and ended in a ZMQError traceback.
    lines = _Log()
    folder = ClientKeys(keys / "clients", log=lines)
    allowed = folder.allowed
    with no_file_handle_left():
        assert folder.reload(force=True) is False
    assert folder.allowed == allowed and lines == []
    assert folder.reload(force=True) is False and lines == []  # the look after it finds the folder as it was


@NEEDS_PROC
def test_key_files_unchanged_since_read_are_not_read_again_when_the_folder_changes(
    keys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A key added while the handles ran out, listed by a look that found one free (the listing's handle is freed
    # before the files are read, and a flood of connections takes it back): every file's read failed ("Too many open
    # files") and every key was revoked, not only the new one left unread.
    import streaming.curve_keys as curve_keys

    lines = _Log()
    # Looked at long after they were written: files changed just before a look are read again (racily clean).
    folder = ClientKeys(keys / "clients", log=lines, wall_ns=lambda: time.time_ns() + int((RACY_CHANGE_S + 1) * 1e9))
    allowed = folder.allowed
    zmq.auth.create_certificates(str(keys / "clients"), "cam9")
    listed = curve_keys._key_files(keys / "clients")
    monkeypatch.setattr(curve_keys, "_key_files", lambda _folder: listed)  # the listing made with the last handle
    with no_file_handle_left():
        assert folder.reload(force=True) is False
    assert folder.allowed == allowed
    assert lines == [f"checker: skipped --curve-clients {keys / 'clients' / 'cam9.key'}: cannot read the CURVE key "
                     "file (Too many open files)"]


def test_a_key_file_overwritten_with_its_time_kept_is_read_again(keys: Path) -> None:
    # `cp -p` or `tar` puts another key of the same size in place with the old modification time: an unchanged file
    # keeps the key read before (no handle spent on it), so its identity must see the rewrite (the change time does).
    import os

    lines = _Log()
    folder = ClientKeys(keys / "clients", log=lines)
    target = keys / "clients" / "cam1.key"
    old_key = load_client_key(target)
    before = target.stat()
    # The rewrite must come after the file system's clock moved on: before Linux 6.13 a change time ticks with the
    # kernel's timer (4 ms at HZ=250), and the key file made some 3 ms earlier kept its change time when rewritten.
    probe = keys / "clock-probe"
    assert wait_for(lambda: probe.write_bytes(b"") == 0 and probe.stat().st_ctime_ns > before.st_ctime_ns, 5.0)
    new_key, _ = zmq.curve_keypair()
    target.write_bytes(target.read_bytes().replace(old_key, new_key))  # same size: Z85 keys are 40 characters
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size
    assert folder.reload(force=True) is True  # the old key revoked: sockets re-open
    assert old_key not in folder.allowed and load_client_key(target) in folder.allowed


@NEEDS_PROC
def test_a_key_file_skipped_for_want_of_file_handles_is_read_again_once_they_are_back(
    keys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It was named as skipped ("Too many open files") and stayed out for good: every look after it found the folder
    # as it was, so nothing was read again until something else in the folder changed.
    import streaming.curve_keys as curve_keys

    lines = _Log()
    now = [0.0]
    folder = ClientKeys(keys / "clients", log=lines, monotonic=lambda: now[0])
    zmq.auth.create_certificates(str(keys / "clients"), "cam9")
    new_key = load_client_key(keys / "clients" / "cam9.key")
    listed = curve_keys._key_files(keys / "clients")
    monkeypatch.setattr(curve_keys, "_key_files", lambda _folder: listed)  # the listing made with the last handle
    skipped = (f"checker: skipped --curve-clients {keys / 'clients' / 'cam9.key'}: cannot read the CURVE key file "
               "(Too many open files)")
    with no_file_handle_left():
        now[0] += KEY_RELOAD_S
        assert folder.reload() is False
        now[0] += KEY_RELOAD_S
        assert folder.reload() is False  # tried again, still no handle: named once
    assert new_key not in folder.allowed and lines == [skipped]
    now[0] += KEY_RELOAD_S
    assert folder.reload() is False
    assert new_key in folder.allowed
    assert lines[1:] == [f"checker: client keys reloaded from {keys / 'clients'}: 1 added, 0 revoked (4 allowed)"]


@NEEDS_PROC
def test_binding_an_ipc_path_with_no_file_handle_left_fails_as_zmq_does_and_leaves_the_path_alone(
    tmp_path: Path,
) -> None:
    # The checker re-opening its ipc:// sockets out of handles ended in an OSError traceback from the look at whether
    # another process listens on the path, not in the one line naming the cause. Nor may that look answer "nobody"
    # then: libzmq's bind removes the path's file before it finds no handle for its own socket.
    ctx = zmq.Context()
    path = tmp_path / "taken"
    other, _ = bind(ctx, zmq.XPUB, f"ipc://{path}")  # another checker listening there
    try:
        with no_file_handle_left(), pytest.raises(zmq.ZMQError) as raised:
            bind(ctx, zmq.SUB, f"ipc://{path}")
        assert raised.value.errno == errno.EMFILE
        with pytest.raises(InputError, match="address already in use"):
            bind(ctx, zmq.SUB, f"ipc://{path}")  # the other's file is still there, and it still listens
    finally:
        other.close()
        ctx.destroy(linger=0)


def key_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the key files `ClientKeys` reads from now on, in order (the real reads, counted)."""
    import streaming.curve_keys as curve_keys

    read: list[str] = []
    load = curve_keys.load_client_key

    def counted(path: str | Path, option: str = "--curve-clients") -> bytes:
        read.append(Path(path).name)
        return load(path, option)

    monkeypatch.setattr(curve_keys, "load_client_key", counted)
    return read


def test_key_files_are_read_again_while_their_change_is_recent_and_no_longer_once_it_has_aged(
    keys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rewrite within the file system's clock tick changes nothing a look sees: a file changed close to the look
    # that read it is read again (git's racily clean entries), but not at every look for as long as the checker runs.
    read = key_reads(monkeypatch)
    wall = [time.time_ns()]  # the key files were written just now
    folder = ClientKeys(keys / "clients", monotonic=lambda: 0.0, wall_ns=lambda: wall[0])
    read.clear()  # the read at start
    assert folder.reload(force=True) is False
    assert sorted(read) == ["cam0.key", "cam1.key", "viewer.key"]
    wall[0] += int((RACY_CHANGE_S + 1) * 1e9)
    assert folder.reload(force=True) is False  # read once more, by a look that began long after their change
    assert len(read) == 6
    for _ in range(3):
        assert folder.reload(force=True) is False
    assert len(read) == 6


def test_key_files_changed_in_this_clock_s_future_are_not_read_at_every_look(
    keys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clock set back leaves change times ahead of it: a rewrite now bears another time, which a look sees, so
    # such files are read no more often than any other (they were read at every look until the clock caught up).
    read = key_reads(monkeypatch)
    behind = time.time_ns() - 3600 * 10**9  # the key files were written an hour "later" than this clock says
    target = keys / "clients" / "cam0.key"
    # A kernel before Linux 6.13 stamps change times with its clock's tick (4 ms at 250 Hz): the key files were
    # written a millisecond before the rewrite below.
    with change_time_ticking(monkeypatch, target, 0.05):
        folder = ClientKeys(keys / "clients", monotonic=lambda: 0.0, wall_ns=lambda: behind)
        read.clear()
        for _ in range(3):
            assert folder.reload(force=True) is False
        assert read == []
        # Changed all the same. With the clock really set back, the rewrite bears a time an hour before the one the
        # look saw; here it bears another once the file system's clock has ticked since the keys were written.
        seen = target.stat().st_ctime_ns
        text = (keys / "clients" / "cam1.key").read_text()
        assert wait_for(lambda: target.stat().st_ctime_ns != seen, 10.0, lambda: target.write_text(text))
        assert folder.reload(force=True) is True  # cam0's key is cam1's now: its own is revoked
        assert "cam0.key" in read


@contextlib.contextmanager
def change_time_ticking(monkeypatch: pytest.MonkeyPatch, target: Path, tick_s: float) -> Iterator[None]:
    """``target``'s change time as a file system whose clock ticks every ``tick_s`` shows it (FAT: 2 s; ext4 with
    128-byte inodes, HFS+: 1 s), its ticks counted from its time now. Linux 6.13 and later stamp a file that was
    looked at since its last change with the exact time, so two writes with a look between never share a change time
    on ext4, xfs, btrfs or tmpfs there, as they did in one tick of the kernel's clock before."""
    first = target.stat().st_ctime_ns
    tick_ns = int(tick_s * 1e9)
    real = Path.stat

    def stat(path: Path, *, follow_symlinks: bool = True) -> os.stat_result:
        info = real(path, follow_symlinks=follow_symlinks)
        if path != target:
            return info
        fields = {name: getattr(info, name) for name in dir(info) if name.startswith("st_")}
        fields["st_ctime_ns"] = first + (info.st_ctime_ns - first) // tick_ns * tick_ns
        return os.stat_result(tuple(info), fields)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "stat", stat)
        yield


def test_a_key_file_rewritten_twice_within_one_clock_tick_lets_in_its_second_key_only(
    keys: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The checker read the first key between the two writes; the second, the same size in the same file, left size,
    # change time and inode as they were, and the first key stayed in force, the second refused, for good.
    target = keys / "clients" / "cam9.key"
    pairs = [zmq.curve_keypair(), zmq.curve_keypair()]
    target.write_bytes(certificate(pairs[0][0]))
    checker_key = server(keys)
    ctx = zmq.Context()
    stop = threading.Event()
    with change_time_ticking(monkeypatch, target, RACY_CHANGE_S):
        service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out",
                                                            curve=checker_key), ctx)
        thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
        try:
            assert service.keys is not None and pairs[0][0] in service.keys.allowed
            # Same size, same inode, and (but on a machine so slow that the tick ended since the first write) the
            # same change time: the folder looks as it did when the checker read the first key.
            target.write_bytes(certificate(pairs[1][0]))
            thread.start()
            first, second = (CurveClient(checker_key.public, public, secret) for public, secret in pairs)
            connected: list[zmq.Socket] = []

            def try_second() -> None:
                with contextlib.suppress(InputError):  # refused until the checker reads the file again
                    connected.append(connect(ctx, zmq.PUB, service.events_endpoint, wait_s=1.0, curve=second))

            assert wait_for(lambda: bool(connected), 10.0, try_second)
            with pytest.raises(InputError, match="refused this client's key"):
                connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0, curve=first)
            connected[0].close()
        finally:
            stop.set()
            if thread.ident is not None:
                thread.join(5)  # the loop closes the service as it ends
            else:
                service.close()
            ctx.destroy(linger=0)


@NEEDS_PROC
def test_a_checker_whose_port_is_held_open_past_its_file_limit_keeps_its_keys_and_serves(keys: Path) -> None:
    # The real run: a checker under a limit of 64 open files, 100 idle connections at its --bind port.
    ctx = zmq.Context()
    held: list[socket.socket] = []

    def let_go() -> None:
        for conn in held:
            conn.close()

    with (checker_with_few_files("--curve-secret", str(keys / "checker.key_secret"), "--curve-clients",
                                 str(keys / "clients")) as (checker, lines, bound, published),
          contextlib.ExitStack() as cleanup):
        cleanup.callback(ctx.destroy, linger=0)
        cleanup.callback(let_go)
        viewer = Viewer(ctx, published, ViewState(), jsonl=False, curve=client(keys, "viewer"))
        assert wait_for(lambda: bool(viewer.pump(50)), 15)
        for _ in range(100):
            held.append(socket.create_connection(("127.0.0.1", int(bound.rsplit(":", 1)[1])), timeout=5))
        assert wait_for(lambda: len(os.listdir(f"/proc/{checker.pid}/fd")) >= 63, 15)
        # Three looks at the folder (one a second) with no handle left: none may revoke a key.
        assert not wait_for(lambda: checker.poll() is not None or any("revoked" in line for line in lines),
                            3 * KEY_RELOAD_S + 1)
        for conn in held:
            conn.close()
        held.clear()
        viewer.pump(0)
        assert wait_for(lambda: bool(viewer.pump(50)), 15)  # still served, the viewer never cut off
        viewer.close()
    assert checker.returncode == 128 + signal.SIGTERM, lines  # stopped by the test, not before
    assert not any("Traceback" in line or "revoked" in line for line in lines), lines


def test_a_dangling_key_link_leaves_a_running_checkers_clients_connected(tmp_path: Path, keys: Path) -> None:
    # The hostile test's scenario: with a checker, a camera and a viewer running, `ln -s /nonexistent/old.key
    # clients/old.key` revoked every key; the viewer and the detector ended, refused. At start the same folder is
    # refused, naming the link (someone is there to fix it).
    lines: list[str] = []
    ctx = zmq.Context()
    stop = threading.Event()
    service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out",
                                                        curve=server(keys)), ctx,
                             log=lambda line, **_fields: lines.append(line))
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False, curve=client(keys, "viewer"))
        events = allowed_camera(ctx, service, keys, viewer)
        denied = service.core.counts["denied"]
        link = keys / "clients" / "old.key"
        link.symlink_to(tmp_path / "nonexistent" / "old.key")
        # Waits for the checker's look at the folder since the link (a line about it), whatever that look did.
        assert wait_for(lambda: any(str(keys / "clients") in line for line in lines), 10.0)
        heard: list[object] = []

        def send_and_hear() -> None:
            send_mistake(events)
            heard.extend(viewer.pump(20))

        assert wait_for(lambda: any(isinstance(m, Alert) for m in heard), 10.0, send_and_hear)
        assert service.core.counts["denied"] == denied
        connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0, curve=client(keys, "cam1")).close()
        assert [line for line in lines if str(keys / "clients") in line] == [
            f"checker: skipped --curve-clients {link}: CURVE key file not found (make keys with 'stream-detect keys "
            "--out DIR')"]
        viewer.close()
    finally:
        stop.set()
        thread.join(5)
        ctx.destroy(linger=0)
    with pytest.raises(InputError, match=f"--curve-clients {link}: CURVE key file not found"):
        server(keys)


def test_a_secret_key_file_other_users_may_read_is_loaded_with_one_warning(
    keys: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Mode 0666 was taken without a word; ssh refuses such a key, the connection here stays encrypted: a warning.
    secret = keys / "clients" / "cam0.key_secret"
    secret.chmod(0o666)
    assert client(keys, "cam0").secret is not None
    assert capsys.readouterr().err.splitlines() == [
        f"warning: --curve-secret {secret}: a secret key file open to other users of this machine (mode 0666); "
        f"chmod 600 {secret}"]
    # Read again to be used (a detector reads its key early, then to connect): it warned twice.
    client(keys, "cam0")
    assert capsys.readouterr().err == ""
    secret.chmod(0o600)
    client(keys, "cam0")
    assert capsys.readouterr().err == ""


# -- restart safety --------------------------------------------------------------------------------------------------
def test_checker_killed_and_restarted_mid_stream_loses_nothing_with_curve(tmp_path: Path, keys: Path) -> None:
    graph_path = tmp_path / "tea.json"
    save_graph(tea_graph(), graph_path)
    config = CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out", curve=server(keys))
    steps = (1, 5, 4, 6, 3, 2)  # a mistake before the kill (5), one while it is down (4)
    ctx = zmq.Context()
    checker = CheckerProcess(str(graph_path), config)
    try:
        viewer = Viewer(ctx, checker.alerts_endpoint, ViewState(), jsonl=False, curve=client(keys, "viewer"))
        # Watched as a detector's socket is: a checker killed and restarted is no refusal, and must not end it.
        sock, watch = connect_waiting(ctx, zmq.PUB, checker.events_endpoint, "--connect", 10.0,
                                      curve=client(keys, "cam0"))
        events = EventPublisher(Publisher(sock, watch), "cam0")
        state = viewer.state
        assert wait_for(lambda: "cam0" in state.streams, 10.0, lambda: (events.heartbeat(None, 0, 0, 0),
                                                                        viewer.pump(20)))
        for step in steps[:2]:
            events.keystep(step, "x", 0.0, 1.0, 0.9)
        assert wait_for(lambda: len(state.streams["cam0"].done) == 2, 10.0, lambda: viewer.pump(20))
        assert checker.process.pid is not None  # CheckerProcess starts its process before it returns
        os.kill(checker.process.pid, signal.SIGKILL)
        checker.process.join(5)
        for step in steps[2:4]:
            events.keystep(step, "x", 0.0, 1.0, 0.9)
        checker = CheckerProcess(str(graph_path), config)  # both clients re-connect and handshake again
        for step in steps[4:]:
            events.keystep(step, "x", 0.0, 1.0, 0.9)
        assert wait_for(lambda: state.streams["cam0"].done == steps and len(state.alerts) == 2, 15.0,
                        lambda: (events.heartbeat(None, 5, 0, 30.0), viewer.pump(20)))
        assert sorted(a.index for _, a in state.alerts) == [1, 2]
        assert all(isinstance(a, Alert) for _, a in state.alerts)
        # It did see the checker go: the publisher reads its watch at most every HANDSHAKE_CHECK_S, so the alerts can
        # all be in before it has read the disconnection (the test failed one run in two on a loaded machine).
        assert wait_for(lambda: watch.reconnects >= 1, 5.0, lambda: watch.check(running=True))
        viewer.close()
        watch.close()
        sock.close()
    finally:
        checker.stop()
        ctx.destroy(linger=0)


# -- bad input -------------------------------------------------------------------------------------------------------
def bad_curve_cases(keys: Path, tmp: Path) -> list[tuple[list[str], str]]:
    """(command line, what the error line must say) for every CURVE mistake a user can make."""
    (tmp / "garbage.key_secret").write_text("public-key = \"short\"\n")
    (tmp / "binary.key").write_bytes(bytes(range(256)))
    (tmp / "empty").mkdir()
    (tmp / "broken").mkdir()
    (tmp / "broken" / "cam.key").write_text("curve\n")
    os.mkfifo(tmp / "fifo.key")
    other_secret = zmq.curve_keypair()[1].decode()
    (tmp / "twice.key_secret").write_text((keys / "clients" / "cam0.key_secret").read_text()
                                          + f'    secret-key = "{other_secret}"\n')
    (tmp / "secrets").mkdir()  # a client's secret copied where the checker reads public keys
    (tmp / "secrets" / "cam0.key").write_bytes((keys / "clients" / "cam0.key_secret").read_bytes())
    secret, clients = str(keys / "checker.key_secret"), str(keys / "clients")
    cam = ["--curve-server", str(keys / "checker.key"), "--curve-secret", str(keys / "clients" / "cam0.key_secret")]
    checker = ["checker", "--demo", "--bind", f"ipc://{tmp}/in", "--publish", f"ipc://{tmp}/out"]
    detector = ["detector", "--video", "demo", "--connect", "tcp://127.0.0.1:1"]
    view = ["view", "--demo", "--connect", "tcp://127.0.0.1:1"]
    return [
        ([*checker, "--curve-secret", str(tmp / "none.key_secret"), "--curve-clients", clients], "none.key_secret"),
        ([*checker, "--curve-secret", str(tmp / "garbage.key_secret"), "--curve-clients", clients],
         "garbage.key_secret: not a CURVE key file"),
        ([*checker, "--curve-secret", str(keys / "checker.key"), "--curve-clients", clients], "holds no secret key"),
        ([*checker, "--curve-secret", str(tmp / "fifo.key"), "--curve-clients", clients],
         "fifo.key: is a FIFO (named pipe)"),
        ([*checker, "--curve-secret", secret, "--curve-clients", str(tmp / "nowhere")], "nowhere: no such folder"),
        ([*checker, "--curve-secret", secret, "--curve-clients", str(tmp / "empty")], "holds no public key"),
        ([*checker, "--curve-secret", secret, "--curve-clients", str(tmp / "broken")], "cam.key: not a CURVE key"),
        ([*checker, "--curve-secret", secret, "--curve-clients", str(tmp / "secrets")],
         f"{tmp / 'secrets' / 'cam0.key'}: holds a secret key; the client folder takes public key files only"),
        # A client's secret given as the checker's: it ran, and refused every client, blaming them.
        ([*checker, "--curve-secret", str(keys / "clients" / "cam0.key_secret"), "--curve-clients", clients],
         "cam0.key_secret: its public key is also cam0.key of --curve-clients"),
        ([*detector, "--curve-server", str(keys / "checker.key"), "--curve-secret", str(tmp / "twice.key_secret")],
         f"{tmp / 'twice.key_secret'}: holds 2 secret-key lines with different keys"),
        ([*checker, "--curve-secret", secret], "--curve-secret needs --curve-clients"),
        ([*checker, "--curve-clients", clients], "--curve-clients needs --curve-secret"),
        (["checker", "--demo", "--bind", "inproc://x", "--curve-secret", secret, "--curve-clients", clients],
         "CURVE does not apply to inproc://"),
        (["checker", "--demo", "--bind", "tcp://0.0.0.0:0"], "stream-detect keys"),
        ([*view, "--curve-server", str(keys / "checker.key")], "--curve-server needs --curve-secret"),
        ([*detector, "--curve-server", str(keys / "checker.key")], "--curve-server needs --curve-secret"),
        ([*detector, "--curve-secret", str(keys / "clients" / "cam0.key_secret")],
         "--curve-secret needs --curve-server"),
        ([*view, "--curve-server", secret, "--curve-secret", str(keys / "clients" / "viewer.key_secret")],
         "holds a secret key"),
        ([*view, "--curve-server", str(tmp / "binary.key"), "--curve-secret", secret], "binary.key: not a CURVE key"),
        ([*view, *cam[:2], "--curve-secret", str(tmp / "missing.key_secret")],
         "missing.key_secret: CURVE key file not found"),
        (["view", "--demo", "--connect", "inproc://x", *cam], "CURVE does not apply to inproc://"),
        (["--video", "demo", "--curve-secret", secret, "--curve-clients", str(tmp / "nowhere")], "no such folder"),
    ]


def test_every_curve_mistake_is_one_line_naming_the_culprit(
    keys: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    for argv, expected in bad_curve_cases(keys, bad):
        line = cli_error(main, argv, capsys)
        assert expected in line, (argv, line)


@pytest.mark.parametrize("who", ["a stranger's key", "another checker's key"])
def test_a_refused_client_that_keeps_trying_never_dies_of_its_own_reconnects(
    curve_checker: tuple[zmq.Context, CheckerService], keys: Path, who: str
) -> None:
    # As the dashboard does: the refusal caught, the watch checked again and again. libzmq's own retry, queued
    # before the watch's disconnect, made the next disconnect raise a bare ZMQError, and the dashboard went deaf.
    ctx, service = curve_checker
    if who == "a stranger's key":
        curve = stranger(keys)
    else:
        public, secret = zmq.curve_keypair()
        curve = CurveClient(zmq.curve_keypair()[0], public, secret)
    sock, watch = connect_watched(ctx, zmq.SUB, service.alerts_endpoint, curve=curve)
    refusals: list[str] = []

    def knock() -> None:
        try:
            watch.check(running=True)
        except InputError as err:
            refusals.append(str(err))
        watch.monitor.poll(20)  # as the dashboard's loop waits on its socket between two checks

    first = service.core.counts["denied"]
    assert wait_for(lambda: service.core.counts["denied"] >= first + 4, 20.0, knock)
    assert refusals or who == "another checker's key"  # that one is said only after several failures in a row
    watch.close()
    sock.close()


def test_add_refuses_a_set_whose_checker_keys_do_not_belong_together(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # --add only checked that checker.key_secret read as a key file: a set mixed with another set's checker key, or
    # one whose secret file held no secret, took new clients without a word.
    for name in ("a", "b"):
        assert main(["keys", "--out", str(tmp_path / name), "--clients", "cam0"]) == 0
    (tmp_path / "a" / "checker.key").write_bytes((tmp_path / "b" / "checker.key").read_bytes())
    line = cli_error(main, ["keys", "--out", str(tmp_path / "a"), "--add", "--clients", "cam1"], capsys)
    assert f"--add: {tmp_path / 'a' / 'checker.key'} is not the public key of " in line
    (tmp_path / "b" / "checker.key_secret").write_bytes((tmp_path / "b" / "checker.key").read_bytes())
    line = cli_error(main, ["keys", "--out", str(tmp_path / "b"), "--add", "--clients", "cam1"], capsys)
    assert "holds no secret key" in line
    assert not any((tmp_path / name / "clients" / "cam1.key").exists() for name in ("a", "b"))
