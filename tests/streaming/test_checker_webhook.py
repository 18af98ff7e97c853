"""``stream-detect checker --webhook URL``: each alert the checker publishes live is also POSTed as JSON, to a real
HTTP server on loopback, with detectors feeding the checker over real ZeroMQ sockets; a receiver that hangs, fails
or is not there is counted and logged, and never delays the checker's own alerts."""

from __future__ import annotations

import io
import json
import signal
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
import zmq

from graphs.common.errors import InputError
from streaming.demo.procedure import DEMO_EXECUTIONS, name_of
from streaming.detector import EventPublisher
from streaming.detector.webhook import WebhookConfig, WebhookSink, webhook_sinks
from streaming.messages import Alert, Message
from streaming.service_log import ServiceLog
from streaming.stream_detect_cli import main
from streaming.transport import Publisher, connect
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.cli_errors import cli_error
from tests.streaming.detector.test_webhook import _alert, _url, receiver
from tests.streaming.helpers import MISTAKE_STEP, STREAM_DETECT, running_checker, wait_for

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
        sink = WebhookSink(WebhookConfig(_url(server)))
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
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/hook"
    lines: list[str] = []
    with receiver(status=500) as server:
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
        assert len(server.bodies) == 2  # type: ignore[attr-defined]  # the first try and one retry
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


def test_the_checker_command_posts_its_alerts_and_ends_with_the_webhooks_summary(tmp_path: Path) -> None:
    with receiver() as server:
        args = ["checker", "--demo", "--bind", f"ipc://{tmp_path}/in", "--publish", f"ipc://{tmp_path}/out",
                "--webhook", _url(server)]
        proc = subprocess.Popen([*STREAM_DETECT, *args], stderr=subprocess.PIPE, text=True)
        ctx = zmq.Context()
        try:
            assert proc.stderr is not None
            assert proc.stderr.readline().startswith("checker: detectors connect to ")
            viewer = Viewer(ctx, f"ipc://{tmp_path}/out", ViewState(), jsonl=False)
            sock, (camera,) = _cameras(ctx, f"ipc://{tmp_path}/in", ["kitchen"])
            assert _heard(viewer, [camera])
            for step in MISTAKE:
                camera.keystep(step, name_of(step), 0.0, 1.0, 0.9)
            assert wait_for(lambda: len(server.bodies) == 1, 10.0)  # type: ignore[attr-defined]
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
            ctx.destroy(linger=0)
        (_, body), = server.bodies  # type: ignore[attr-defined]
    assert json.loads(body)["step"] == MISTAKE_STEP
    new, summary, webhook, interrupted = err.splitlines()
    assert new.startswith("checker: kitchen new (run ")  # the stream's state changes are logged
    assert summary.startswith("checker: ") and interrupted.startswith("interrupted by SIGTERM")
    assert webhook == f"webhook {_url(server)}: 1 delivered, 0 not delivered, 0 dropped (queue full)"
    assert proc.returncode == 143


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
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/hook"
    out = io.StringIO()
    with webhook_sinks(dead, ServiceLog("checker", log_format, out=out)) as sinks:
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
