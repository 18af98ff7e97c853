"""``stream-detect checker --webhook URL``: each alert the checker publishes live is also POSTed as JSON, to a real
HTTP server on loopback, with detectors feeding the checker over real ZeroMQ sockets; a receiver that hangs, fails
or is not there is counted and logged, and never delays the checker's own alerts."""

from __future__ import annotations

import http.server
import io
import json
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
import zmq

from graphs.common.errors import InputError
from streaming.demo.procedure import DEMO_EXECUTIONS, name_of
from streaming.detector import EventPublisher
from streaming.detector.webhook import WebhookConfig, WebhookSink, webhook_sinks
from streaming.messages import Alert, Message, Retraction
from streaming.service_log import ServiceLog
from streaming.stream_detect_cli import main
from streaming.transport import Publisher, connect
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.cli_errors import cli_error
from tests.streaming.detector.test_webhook import _alert, _url, receiver
from tests.streaming.helpers import MISTAKE_STEP, STREAM_DETECT, refused_port, running_checker, wait_for

MISTAKE = DEMO_EXECUTIONS["mistake"]


def _cameras(ctx: zmq.Context, endpoint: str, names: Sequence[str]) -> tuple[zmq.Socket, list[EventPublisher]]:
    sock = connect(ctx, zmq.PUB, endpoint)
    return sock, [EventPublisher(Publisher(sock), name) for name in names]


def _heard(viewer: Viewer, cameras: Sequence[EventPublisher]) -> bool:
    """Heartbeats until the viewer sees every camera's stream (the ZeroMQ slow joiner, both hops)."""
    return wait_for(lambda: {c.stream_id for c in cameras} <= set(viewer.state.streams), 10.0,
                    lambda: ([c.heartbeat(None, 0, 0, 0.0) for c in cameras], viewer.pump(20)))


def _live_alerts(seen: list[Message]) -> list[Alert]:
    return [m for m in seen if isinstance(m, Alert) and not m.replayed]


def test_each_alert_the_checker_publishes_is_posted_once_and_its_replays_are_not(tmp_path: Path) -> None:
    with receiver() as server:
        sink = WebhookSink(WebhookConfig(_url(server)), rebuilt=True)  # as `stream-detect checker` makes it
        with running_checker(tmp_path, [sink], status_period_s=0.05) as (ctx, service, _):
            viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
            sock, (camera,) = _cameras(ctx, service.events_endpoint, ["kitchen"])
            assert _heard(viewer, [camera])
            for step in MISTAKE:
                camera.keystep(step, name_of(step), 0.0, 1.0, 0.9)
            seen: list[Message] = []
            # The checker re-sends the alert every 0.05 s for late viewers: wait until two such copies went out.
            assert wait_for(lambda: sum(isinstance(m, Alert) and m.replayed for m in seen) >= 2, 10.0,
                            lambda: seen.extend(viewer.pump(20)))
            viewer.close()
            sock.close()
        sink.close()  # everything it was handed is tried before this returns
        bodies = [json.loads(body) for _, body in server.bodies]  # type: ignore[attr-defined]
    (live,) = _live_alerts(seen)
    assert [(b["kind"], b["alert_id"], b["step"], b["replayed"]) for b in bodies] == [
        ("alert", live.alert_id, MISTAKE_STEP, False)]
    assert bodies[0]["stream_id"] == "kitchen" and bodies[0]["missing_names"] == ["fill_kettle"]
    assert sink.delivered == 1 and sink.failed == 0 and sink.dropped == 0


def test_a_hanging_receiver_never_holds_back_the_checkers_alerts(tmp_path: Path) -> None:
    lines: list[str] = []
    names = [f"cam{k}" for k in range(8)]
    with receiver(delay_s=30.0) as server:
        sink = WebhookSink(WebhookConfig(_url(server), timeout_s=30.0, retries=0, capacity=2), log=lines.append)
        with running_checker(tmp_path, [sink], status_period_s=0.05) as (ctx, service, _):
            viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
            sock, cameras = _cameras(ctx, service.events_endpoint, names)
            assert _heard(viewer, cameras)
            for step in MISTAKE:
                for camera in cameras:
                    camera.keystep(step, name_of(step), 0.0, 1.0, 0.9)
            seen: list[Message] = []
            assert wait_for(lambda: len(_live_alerts(seen)) == len(names), 10.0, lambda: seen.extend(viewer.pump(20)))
            # Every camera's alert reached the viewer while the receiver still holds the first POST unanswered.
            assert sink.delivered == 0 and len(server.bodies) <= 1  # type: ignore[attr-defined]
            # The queue holds 2, the thread one more once it has taken the first (under load it may not have yet):
            # the rest are counted (the checker hands an alert to its sinks just after publishing it, so the last
            # count may come a moment after the viewer saw the alert).
            assert wait_for(lambda: sink.received == len(names) and sink.dropped >= len(names) - 2 - 1, 5.0)
            server.release.set()  # type: ignore[attr-defined]
            viewer.close()
            sock.close()
        sink.close()
    assert sink.delivered + sink.dropped == len(names)
    assert sum("queue full" in line for line in lines) == 1  # the first drop is logged, then one per hundred


def test_a_receiver_that_fails_is_counted_and_logged_while_the_checker_serves_on(tmp_path: Path) -> None:
    lines: list[str] = []
    with refused_port() as port, receiver(status=500) as server:
        dead = f"http://127.0.0.1:{port}/hook"
        failing = WebhookSink(WebhookConfig(_url(server), retries=1, backoff_s=0.01), log=lines.append)
        gone = WebhookSink(WebhookConfig(dead, retries=1, backoff_s=0.01), log=lines.append)
        with running_checker(tmp_path, [failing, gone], status_period_s=0.05) as (ctx, service, _):
            viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
            sock, (camera,) = _cameras(ctx, service.events_endpoint, ["kitchen"])
            assert _heard(viewer, [camera])
            for step in MISTAKE:
                camera.keystep(step, name_of(step), 0.0, 1.0, 0.9)
            assert wait_for(lambda: failing.failed == 1 and gone.failed == 1, 10.0, lambda: viewer.pump(20))
            camera.heartbeat(None, 10, 0, 30.0, ended=True)  # the checker still serves: the stream's end arrives
            assert wait_for(lambda: viewer.state.streams["kitchen"].ended, 10.0, lambda: viewer.pump(20))
            viewer.close()
            sock.close()
        failing.close()
        gone.close()
        # The first try and one retry (it once found 4: the receiver had been given the port the dead webhook
        # released, and took its two POSTs too).
        posted = [{k: json.loads(body).get(k) for k in ("kind", "alert_id", "step", "replayed", "seq")}
                  for _, body in server.bodies]  # type: ignore[attr-defined]
        assert len(posted) == 2, (posted, lines)
    assert service.core.streams["kitchen"].alerts == 1
    assert len(lines) == 2 and {line.split(": 1 message(s)")[0] for line in lines} == {f"webhook {_url(server)}",
                                                                                       f"webhook {dead}"}
    assert any("HTTP 500 after 2 tries" in line for line in lines)
    assert failing.summary().endswith(": 0 delivered, 1 not delivered, 0 dropped (queue full)")


class _BrokenSink:
    """A sink with a defect: it raises on every alert."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def send(self, message: Message) -> None:
        self.seen.append(message.kind)
        if isinstance(message, Alert):
            raise ValueError("a defect in this sink")


def test_a_sink_that_raises_is_counted_and_the_checker_its_socket_and_other_sinks_go_on(tmp_path: Path) -> None:
    broken, after = _BrokenSink(), _KindRecorder()
    with running_checker(tmp_path, [broken, after]) as (ctx, service, thread):
        viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
        sock, (camera,) = _cameras(ctx, service.events_endpoint, ["kitchen"])
        assert _heard(viewer, [camera])
        for step in MISTAKE:
            camera.keystep(step, name_of(step), 0.0, 1.0, 0.9)
        camera.heartbeat(None, 10, 0, 30.0, ended=True)
        assert wait_for(lambda: viewer.state.streams["kitchen"].ended, 10.0, lambda: viewer.pump(20))
        assert thread.is_alive()
        viewer.close()
        sock.close()
    assert [(a.stream_id, a.step) for _, a in viewer.state.alerts] == [("kitchen", MISTAKE_STEP)]
    assert service.sinks.failed >= 1 and "alert" in broken.seen
    assert "alert" in after.kinds  # the sink after the broken one still got the alert
    assert service.summary().endswith(f", {service.sinks.failed} failed in a sink")


class _KindRecorder:
    """A sink that records the kind of each message."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def send(self, message: Message) -> None:
        self.kinds.append(message.kind)


@contextmanager
def _checker_command(
    tmp_path: Path, server: http.server.ThreadingHTTPServer
) -> Iterator[tuple[subprocess.Popen[str], Viewer, EventPublisher]]:
    """``stream-detect checker --demo --webhook`` on the receiver, a viewer of it and one camera (``kitchen``) it has
    heard; the checker is killed at the end if the test did not end it."""
    args = ["checker", "--demo", "--bind", f"ipc://{tmp_path}/in", "--publish", f"ipc://{tmp_path}/out",
            "--webhook", _url(server)]
    proc = subprocess.Popen([*STREAM_DETECT, *args], stderr=subprocess.PIPE, text=True)
    ctx = zmq.Context()
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("checker: detectors connect to ")
        viewer = Viewer(ctx, f"ipc://{tmp_path}/out", ViewState(), jsonl=False)
        _sock, (camera,) = _cameras(ctx, f"ipc://{tmp_path}/in", ["kitchen"])
        assert _heard(viewer, [camera])
        yield proc, viewer, camera
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        ctx.destroy(linger=0)


def test_the_checker_command_posts_its_alerts_and_ends_with_the_webhooks_summary(tmp_path: Path) -> None:
    with receiver() as server:
        with _checker_command(tmp_path, server) as (proc, _viewer, camera):
            for step in MISTAKE:
                camera.keystep(step, name_of(step), 0.0, 1.0, 0.9)
            assert wait_for(lambda: len(server.bodies) == 1, 10.0)  # type: ignore[attr-defined]
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
        (_, body), = server.bodies  # type: ignore[attr-defined]
    assert json.loads(body)["step"] == MISTAKE_STEP
    new, summary, webhook, interrupted = err.splitlines()
    assert new.startswith("checker: kitchen new (run ")  # the stream's state changes are logged
    assert summary.startswith("checker: ") and interrupted.startswith("interrupted by SIGTERM")
    assert webhook == f"webhook {_url(server)}: 1 delivered, 0 not delivered, 0 dropped (queue full)"
    assert proc.returncode == 143


class _Lost:
    """A link that loses every message: the checker was restarting while they were sent."""

    def send(self, message: Message) -> None:
        pass


def test_the_checker_command_posts_once_an_alert_it_rebuilt_from_a_history(tmp_path: Path) -> None:
    # A mistake whose messages the checker never got (it was restarting, or they were lost) reaches it in the next
    # heartbeat's history, and its alert goes out `replayed`: the webhook took it for a re-send, and no receiver ever
    # heard of the mistake that every view showed.
    with receiver() as server:
        with _checker_command(tmp_path, server) as (proc, viewer, camera):
            link, camera.publisher = camera.publisher, _Lost()
            for step in MISTAKE:
                camera.keystep(step, name_of(step), 0.0, 1.0, 0.9)
            camera.publisher = link
            seen: list[Message] = []
            # The rebuilt alert, then at least two of the checker's periodic re-sends of it.
            def beat_and_look() -> None:
                camera.heartbeat(None, 0, 0, 0.0)
                seen.extend(viewer.pump(20))

            assert wait_for(lambda: sum(isinstance(m, Alert) for m in seen) >= 3, 10.0, beat_and_look)
            assert wait_for(lambda: len(server.bodies) >= 1, 10.0)  # type: ignore[attr-defined]
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
        bodies = [json.loads(body) for _, body in server.bodies]  # type: ignore[attr-defined]
    assert all(isinstance(m, Alert) and m.replayed for m in seen if isinstance(m, Alert))
    assert [(b["alert_id"], b["step"], b["replayed"]) for b in bodies] == [("kitchen#1", MISTAKE_STEP, True)]
    assert f"webhook {_url(server)}: 1 delivered, 0 not delivered" in err


@pytest.mark.parametrize("url", ["ftp://example.org/hook", "localhost:8080/hook", "http://"])
def test_a_checker_webhook_that_is_not_http_is_one_error_line_before_anything_binds(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(main, ["checker", "--demo", "--bind", f"ipc://{tmp_path}/in", "--publish",
                            f"ipc://{tmp_path}/out", "--webhook", url], capsys)
    assert line.startswith(f"error: --webhook {url!r}: ")
    assert not list(tmp_path.iterdir())  # no socket was bound


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_commands_webhook_logs_what_it_lost_as_warnings_and_sums_up(log_format: str) -> None:
    out = io.StringIO()
    with refused_port() as port, webhook_sinks(dead := f"http://127.0.0.1:{port}/hook",
                                                ServiceLog("checker", log_format, out=out)) as sinks:
        (sink,) = sinks
        sink.send(_alert())
    failure, summary = out.getvalue().splitlines()  # the block ended: its retries are given up, nothing waits
    if log_format == "json":
        assert [json.loads(line)["level"] for line in (failure, summary)] == ["warning", "warning"]
        failure, summary = (json.loads(line)["message"] for line in (failure, summary))
    prefix = "warning: " if log_format == "text" else ""
    assert failure.startswith(f"{prefix}webhook {dead}: 1 message(s) not delivered so far (last: ")
    assert summary == f"{prefix}webhook {dead}: 0 delivered, 1 not delivered, 0 dropped (queue full)"
    with webhook_sinks(None, ServiceLog("checker", out=out)) as none:
        assert none == []


def test_a_command_refused_on_bad_input_before_any_alert_prints_only_its_error_line() -> None:
    out = io.StringIO()
    with receiver() as server:
        with pytest.raises(InputError), webhook_sinks(_url(server), ServiceLog("view", out=out)):
            raise InputError("--connect 'tcp://nowhere': not an endpoint")  # as run_view refuses before any alert
        assert out.getvalue() == ""
        with pytest.raises(InputError), webhook_sinks(_url(server), ServiceLog("view", out=out)) as (sink,):
            sink.send(_alert())  # once an alert was handed over, what became of it is still said
            raise InputError("the checker refused this viewer's key")
    assert out.getvalue() == f"webhook {_url(server)}: 1 delivered, 0 not delivered, 0 dropped (queue full)\n"


class _RawReceiver:
    """A receiver written on a bare socket, for answers no well-behaved HTTP server sends: it reads each request,
    then hands the connection to ``answer`` (which returns when the peer hung up or ``stop`` is set)."""

    def __init__(self, answer: Callable[[socket.socket, threading.Event], None]) -> None:
        self.answer = answer
        self.stop = threading.Event()
        self.requests = 0
        self.hung_up = 0  # connections the webhook closed while the answer was still coming
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.listener.settimeout(0.05)  # the accept loop looks this often whether it was stopped
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5.0)
                request = b""
                while b"\r\n\r\n" not in request:  # the JSON body is small: it came with the headers or just after
                    chunk = conn.recv(65536)
                    if not chunk:  # the client closed before its request was whole: nothing to answer
                        break
                    request += chunk
                else:
                    self.requests += 1
                if b"\r\n\r\n" not in request:
                    continue
                try:
                    self.answer(conn, self.stop)
                except OSError:  # the webhook closed the connection: what a bounded reader does
                    self.hung_up += 1


@contextmanager
def _raw_receiver(answer: Callable[[socket.socket, threading.Event], None]) -> Iterator[_RawReceiver]:
    server = _RawReceiver(answer)
    server.thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.thread.join(10.0)
        server.listener.close()
        assert not server.thread.is_alive()


ENDLESS_CAP = 64 << 20  # what the endless answer sends at most, so that an unbounded reader fails the test, not the box


def _endless_chunked_body(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
    for _ in range(ENDLESS_CAP // len(chunk)):
        conn.sendall(chunk)
    stop.wait(10.0)  # never the last chunk: a reader that wants it all waits, then gives up


def _trickled_headers(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    while not stop.wait(0.02):  # a byte well within every read's timeout, a header that never ends
        conn.sendall(b"a")


def test_an_answer_whose_body_never_ends_is_read_a_few_kib_and_the_alert_is_delivered() -> None:
    # answer.read() kept the whole body: such a receiver grew the checker's memory by 2 GB a second.
    with _raw_receiver(_endless_chunked_body) as server:
        sink = WebhookSink(WebhookConfig(server.url, timeout_s=1.0, retries=0), log=[].append)
        sink.send(_alert())
        assert wait_for(lambda: sink.delivered + sink.failed == 1, 10.0)
        assert sink.delivered == 1 and server.requests == 1
        # The webhook closed the connection long before the 64 MiB: it took what loopback buffers, no more.
        assert wait_for(lambda: server.hung_up == 1, 10.0)
        sink.close()


def test_an_answer_trickled_a_byte_at_a_time_is_a_failed_try_once_the_timeout_is_spent_and_is_retried() -> None:
    # The timeout bounded each read, not the request: a byte every second held the alert unanswered for ever.
    lines: list[str] = []
    with _raw_receiver(_trickled_headers) as server:
        sink = WebhookSink(WebhookConfig(server.url, timeout_s=0.3, retries=1, backoff_s=0.01), log=lines.append)
        threads = threading.active_count()
        sink.send(_alert())
        assert wait_for(lambda: sink.failed == 1, 10.0)  # it never failed: each byte reset the read's timeout
        assert server.requests == 2 and sink.delivered == 0
        # Each try's connection was closed by the webhook when its time was up, and no thread was started for it.
        assert wait_for(lambda: server.hung_up == 2, 10.0)
        assert threading.active_count() <= threads
        sink.close()
    assert len(lines) == 1 and "(last: timed out after 2 tries)" in lines[0]


@pytest.mark.parametrize(("url", "shown"), [
    ("http://u:s3cret@127.0.0.1:99999/h", "http://u:***@127.0.0.1:99999/h"),  # a port out of range
    ("http://u:s3cret@127.0.0.1:port/h", "http://u:***@127.0.0.1:port/h"),  # a port that is not a number
    ("ftp://u:s3cret@127.0.0.1/h", "ftp://u:***@127.0.0.1/h"),
    ("http://u:s3cret@/h", "http://u:***@/h"),  # no host
    ("http://u:s3cret@127.0.0.1/a b", "http://u:***@127.0.0.1/a b"),
    ("http://u:s3cret@[::1/h", "http://u:***@[::1/h"),  # a bad IPv6 host
    ("u:s3cret@127.0.0.1/h", "u:***@127.0.0.1/h"),  # no scheme
    ("http://u:s3/cret@127.0.0.1/h", "http://u:***@127.0.0.1/h"),  # a '/' not percent-encoded: urllib reads a port
    ("http://u:s3?cret@127.0.0.1:99999/h", "http://u:***@127.0.0.1:99999/h"),  # a '?' not percent-encoded
    ("ftp://u:2024/pw@127.0.0.1/h", "ftp://u:***@127.0.0.1/h"),  # digits first and a '/': the shape of a port
    # No password, an '@' in the query: the same shape, hidden all the same (a password must never show), the
    # port at fault still named.
    ("http://hooks.example.org:99999/notify?to=ops@example.org", "http://hooks.example.org:***@example.org"),
])
def test_a_refused_webhook_url_never_shows_its_password(
    url: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The error line echoed the URL as given, password and all, where the run's log lines show it as ***.
    line = cli_error(main, ["checker", "--demo", "--bind", "tcp://127.0.0.1:0", "--publish", "tcp://127.0.0.1:0",
                            "--webhook", url], capsys)
    assert line.startswith(f"error: --webhook {shown!r}: ")
    assert "s3" not in line and "cret" not in line and "2024" not in line and "pw" not in line
    if "hooks" in url:  # where no password is involved, the reason is kept
        assert "Port out of range" in line


def _header_without_end(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * (1 << 17))  # past http.client's 64 KiB for a line
    conn.settimeout(0.05)
    while not stop.is_set():  # until the webhook hangs up: the next try's connection waits for this one to end
        try:
            if not conn.recv(65536):
                return
        except TimeoutError:
            continue


def test_an_answer_that_is_not_http_is_a_failed_try_and_is_retried() -> None:
    # http.client's own errors (a header line too long) escaped the retries: the alert failed on its first try.
    lines: list[str] = []
    with _raw_receiver(_header_without_end) as server:
        sink = WebhookSink(WebhookConfig(server.url, timeout_s=1.0, retries=1, backoff_s=0.01), log=lines.append)
        sink.send(_alert())
        assert wait_for(lambda: sink.failed == 1, 10.0)
        assert server.requests == 2 and sink.delivered == 0
        sink.close()
    assert len(lines) == 1 and "got more than 65536 bytes when reading header line after 2 tries" in lines[0]


class _Kept(list[Message]):
    """A sink, or a detector's link, that keeps what it is sent."""

    def send(self, message: Message) -> None:
        self.append(message)


def test_an_alert_posted_once_is_not_posted_again_when_its_stream_is_rebuilt(tmp_path: Path) -> None:
    # A stream the checker freed (silent for 12 stream timeouts: a detector cut off for a minute) is rebuilt from the
    # history of its next message, and its alerts went out rebuilt: each was POSTed and counted again, as many times
    # as the link dropped. An alert rebuilt where an early alert was withdrawn is another mistake, and is POSTed.
    from recognition.segmenter import OnsetEvent
    from streaming.checker.config import CheckerConfig
    from streaming.checker.core import CheckerCore
    from streaming.checker.service import CheckerService
    from streaming.metrics import CheckerMetrics
    from tests.streaming.helpers import tea_graph

    now = [0.0]
    sink, metrics, ctx = _Kept(), CheckerMetrics(), zmq.Context()
    service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"), ctx,
                             metrics=metrics, sinks=[sink])  # fmt: skip
    service.core = CheckerCore(tea_graph(), monotonic=lambda: now[0])
    link = _Kept()
    kitchen, hall = EventPublisher(link, "kitchen"), EventPublisher(link, "hall")

    def serve(advance_s: float = 0.0) -> None:
        now[0] += advance_s
        service.send(service.core.periodic(0.5), resent=True)
        service.core.serve(list(link), emit=service.send)
        link.clear()

    def posted() -> list[tuple[str, str, bool]]:
        return [(m.kind, m.alert_id, isinstance(m, Alert) and m.replayed) for m in sink
                if isinstance(m, Alert | Retraction)]

    try:
        for step in MISTAKE:
            kitchen.keystep(step, name_of(step), 0.0, 1.0, 0.9)
        # hall: boil_water announced too early, withdrawn, then confirmed in a message that was lost
        hall.keystep(MISTAKE[0], name_of(MISTAKE[0]), 0.0, 1.0, 0.9)
        hall.onset(OnsetEvent(MISTAKE_STEP, 1.0, 0.9, 10), name_of(MISTAKE_STEP))
        hall.onset(OnsetEvent(MISTAKE_STEP, 1.0, 0.9, 12, withdrawn=True), name_of(MISTAKE_STEP))
        serve()
        hall.history.append(MISTAKE_STEP)
        hall.heartbeat(None, 0, 0, 0.0)
        serve()
        assert posted() == [("alert", "kitchen#1", False), ("alert", "hall#1", False), ("retraction", "hall#1", False),
                            ("alert", "hall#1", True)]  # fmt: skip
        serve(10.0)  # both lost
        serve(100.0)  # and freed
        assert service.core.streams == {}
        kitchen.heartbeat(None, 0, 0, 0.0)
        hall.heartbeat(None, 0, 0, 0.0)
        serve()
        assert set(service.core.streams) == {"kitchen", "hall"}  # rebuilt: their alerts went out again, replayed
        assert len(posted()) == 4, posted()
        assert metrics.registry.get_sample_value("stream_checker_alerts_total") == 3
    finally:
        service.close()
        ctx.destroy(linger=0)
