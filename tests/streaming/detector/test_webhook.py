"""The webhook sink: each alert POSTed as JSON to a real HTTP server on loopback; a receiver that fails, hangs or is
not there is counted and logged, and never slows the sender."""

from __future__ import annotations

import base64
import http.server
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from graphs.common.errors import InputError
from streaming.detector.sinks import BackgroundSink
from streaming.detector.webhook import WebhookConfig, WebhookSink, check_webhook_url, webhook_sinks
from streaming.messages import Alert, Heartbeat
from streaming.service_log import ServiceLog
from tests.streaming.helpers import refused_port, wait_for


def _alert(index: int = 1) -> Alert:
    return Alert(stream_id="cam0", seq=index, timestamp=1.0, alert_id=f"cam0#{index}", run="r1", step=2,
                 step_name="boil_water", index=index, missing=(1,), missing_names=("fill_kettle",), undefined=False,
                 event_timestamp=1.0, replayed=False, forgotten=None, forgotten_name=None, forgotten_score=None,
                 rule="weighted", probability=0.9, video_time=4.4)


class _Receiver(http.server.BaseHTTPRequestHandler):
    """Keeps each POST body; answers with the server's ``status`` (and its ``location``, if any) after its
    ``delay_s``; a GET is counted in ``gets``, each POST's Authorization header kept in ``authorizations``."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server interface
        server = self.server
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server.bodies.append((self.headers["Content-Type"], body))  # type: ignore[attr-defined]
        server.authorizations.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        server.release.wait(server.delay_s)  # type: ignore[attr-defined]
        self.send_response(server.status)  # type: ignore[attr-defined]
        if server.location:  # type: ignore[attr-defined]
            self.send_header("Location", server.location)  # type: ignore[attr-defined]
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 - the http.server interface
        self.server.gets += 1  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def receiver(
    status: int = 200, delay_s: float = 0.0, location: str = ""
) -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.bodies = []  # type: ignore[attr-defined]
    server.gets = 0  # type: ignore[attr-defined]
    server.authorizations = []  # type: ignore[attr-defined]
    server.location = location  # type: ignore[attr-defined]
    server.status = status  # type: ignore[attr-defined]
    server.delay_s = delay_s  # type: ignore[attr-defined]
    server.release = threading.Event()  # type: ignore[attr-defined]
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def _url(server: http.server.ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/hook"


def test_each_alert_is_posted_as_json_and_nothing_else() -> None:
    with receiver() as server, WebhookSink(WebhookConfig(_url(server))) as sink:
        sink.send(Heartbeat(stream_id="cam0", seq=0, timestamp=1.0, session="s1", history=(), current=None,
                            frames=0, dropped=0, fps=0.0, ended=False))
        sink.send(_alert())
        assert wait_for(lambda: sink.delivered == 1)
        (kind, body), = server.bodies  # type: ignore[attr-defined]
    assert kind == "application/json"
    alert = json.loads(body)
    assert alert["kind"] == "alert" and alert["alert_id"] == "cam0#1" and alert["video_time"] == 4.4
    assert alert["missing_names"] == ["fill_kettle"]


def test_the_copies_a_checker_re_sends_for_late_viewers_are_not_posted_again() -> None:
    from dataclasses import replace

    with receiver() as server, WebhookSink(WebhookConfig(_url(server))) as sink:
        sink.send(_alert())
        for _ in range(3):  # the checker re-sends the alert every status period, replayed
            sink.send(replace(_alert(), replayed=True))
        sink.close()
        assert [json.loads(body)["replayed"] for _, body in server.bodies] == [False]  # type: ignore[attr-defined]
    assert sink.summary() == f"webhook {_url(server)}: 1 delivered, 0 not delivered, 0 dropped (queue full)"


def test_a_server_that_answers_500_is_retried_then_counted_and_logged_once() -> None:
    lines: list[str] = []
    with receiver(status=500) as server:
        sink = WebhookSink(WebhookConfig(_url(server), retries=2, backoff_s=0.01), log=lines.append)
        sink.send(_alert())
        assert wait_for(lambda: sink.failed == 1)
        sink.close()
        assert len(server.bodies) == 3  # type: ignore[attr-defined]  # the first try and two retries
    assert sink.delivered == 0 and len(lines) == 1 and "HTTP 500 after 3 tries" in lines[0]


def test_a_failure_line_in_the_json_log_carries_its_count_and_reason_as_fields() -> None:
    # --log-format json: a collector reads the numbers from "fields"; the failure line had an empty object, its count
    # and reason only inside the message text, while the summary line at the end had its numbers as fields.
    out = io.StringIO()
    log = ServiceLog("checker", "json", out=out)
    with receiver(status=500) as server, webhook_sinks(WebhookConfig(_url(server), retries=0), log) as sinks:
        sinks[0].send(_alert())
        assert wait_for(lambda: sinks[0].failed == 1)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    failure = next(line for line in lines if "not delivered so far" in line["message"])
    assert failure["level"] == "warning"
    assert failure["fields"] == {"failed": 1, "last": "HTTP 500 after 1 try"}


def test_a_host_that_does_not_answer_is_counted_and_the_log_stays_bounded() -> None:
    lines: list[str] = []
    with refused_port() as port:
        sink = WebhookSink(WebhookConfig(f"http://127.0.0.1:{port}/", retries=0), log=lines.append)
        for k in range(30):
            sink.send(_alert(k + 1))
        assert wait_for(lambda: sink.failed == 30)
        sink.close()
    assert sink.delivered == 0 and len(lines) == 5  # the first five failures, then one line per hundred


def test_a_hanging_server_never_slows_the_sender_and_a_full_queue_drops_the_newest() -> None:
    lines: list[str] = []
    with receiver(delay_s=30.0) as server:
        sink = WebhookSink(WebhookConfig(_url(server), timeout_s=0.5, retries=0, capacity=4), log=lines.append)
        started = time.perf_counter()
        for k in range(50):
            sink.send(_alert(k + 1))
        took = time.perf_counter() - started
        assert took < 0.5  # 50 sends against a server that never answers: each is a put, never a wait
        assert sink.dropped >= 50 - 4 - 1  # the queue holds 4, the thread holds one more
        assert wait_for(lambda: sink.failed >= 1)
        server.release.set()  # type: ignore[attr-defined]
        sink.close()
    assert any("queue full" in line for line in lines) and any("timed out" in line for line in lines)


def test_a_redirect_is_not_followed_and_the_alert_is_counted_as_not_delivered() -> None:
    # urllib followed a 302 to a POST as a GET without the body, and counted the GET's 200 as the alert delivered.
    lines: list[str] = []
    with receiver(status=302, location="/elsewhere") as server:
        sink = WebhookSink(WebhookConfig(_url(server), retries=0), log=lines.append)
        sink.send(_alert())
        assert wait_for(lambda: sink.failed == 1)
        sink.close()
        assert server.gets == 0 and len(server.bodies) == 1  # type: ignore[attr-defined]
    assert sink.delivered == 0 and "HTTP 302 after 1 try" in lines[0]


def test_a_user_and_password_in_the_url_are_sent_as_basic_authentication_and_never_logged() -> None:
    # urllib took "user:s%40cret@127.0.0.1" for a host name: every alert failed, the password in each log line.
    with receiver() as server:
        url = _url(server).replace("http://", "http://alerts:s%40cret@")
        with WebhookSink(WebhookConfig(url)) as sink:
            sink.send(_alert())
            assert wait_for(lambda: sink.delivered + sink.failed == 1)
        (authorization,) = server.authorizations  # type: ignore[attr-defined]
    assert sink.delivered == 1 and authorization == "Basic " + base64.b64encode(b"alerts:s@cret").decode()
    assert sink.summary().startswith(f"webhook {_url(server).replace('http://', 'http://alerts:***@')}: 1 delivered")
    assert "cret" not in sink.summary()


def test_what_a_hanging_server_left_in_the_queue_at_close_is_summed_up_as_still_queued() -> None:
    with receiver(delay_s=30.0) as server:
        sink = WebhookSink(WebhookConfig(_url(server), timeout_s=30.0, retries=0), log=[].append)
        sink.stop_wait_s = 0.2
        for k in range(3):
            sink.send(_alert(k + 1))
        assert wait_for(lambda: len(server.bodies) == 1)  # type: ignore[attr-defined]  # the first one hangs
        sink.close()  # gives up waiting: two alerts never left (the end mark behind them is not a third)
        assert sink.pending() == 2 and sink.lost() == 3 and sink.received == 3
        # The first reached the receiver and got no answer: the line still accounts for every alert it was sent.
        assert sink.summary().endswith(": 0 delivered, 0 not delivered, 0 dropped (queue full), 2 still queued, "
                                       "1 unanswered")
        server.release.set()  # type: ignore[attr-defined]


@pytest.mark.parametrize("url", ["ftp://example.org/x", "example.org/hook", "http://", "http://host:99999/",
                                 "file:///etc/passwd", "", "http://host/a b", "http://host/ä", "http://host/?x=1\ty"])
def test_a_url_that_is_not_http_is_refused_in_one_line(url: str) -> None:
    with pytest.raises(InputError, match="--webhook"):
        check_webhook_url(url)
    assert check_webhook_url("https://hooks.example.org:8443/a?b=c")


def test_a_sink_closed_while_its_queue_is_full_still_stops_its_thread_once_the_queue_is_drained() -> None:
    # close() could not queue its end mark behind a full queue, and the thread then waited for ever on an empty one.
    gate = threading.Event()
    def deliver(_message: int) -> None:
        gate.wait(10.0)

    sink: BackgroundSink[int] = BackgroundSink(deliver, "probe", capacity=1, log=[].append)
    sink.stop_wait_s = 0.1
    sink.send(1)
    assert wait_for(lambda: sink.pending() == 0)  # the thread holds the first, blocked in deliver
    sink.send(2)  # fills the queue
    sink.close()  # gives up queuing the end mark
    gate.set()
    assert wait_for(lambda: not sink._thread.is_alive(), timeout_s=5.0)
    assert sink.delivered == 2 and sink.pending() == 0


def test_a_run_that_ends_between_retries_still_names_the_receivers_answer() -> None:
    # The failure read "closed before it could be delivered", hiding that the receiver had answered HTTP 500.
    lines: list[str] = []
    with receiver(status=500) as server:
        sink = WebhookSink(WebhookConfig(_url(server), retries=3, backoff_s=30.0), log=lines.append)
        sink.send(_alert())
        assert wait_for(lambda: len(server.bodies) == 1)  # type: ignore[attr-defined]  # the first try, refused
        sink.close()  # the run ends while the sink waits to retry
        assert wait_for(lambda: sink.failed == 1)
    assert "(last: HTTP 500 after 1 try; the run ended before the next)" in lines[0]


def test_a_live_alert_goes_before_rebuilt_ones_queued_ahead_of_it_and_they_never_take_its_room() -> None:
    from dataclasses import replace

    # A restarted checker rebuilds the recent alerts of every stream (most POSTed by its predecessor) just before a
    # new mistake: the new one must not wait behind them, nor find the queue full of them.
    with receiver(delay_s=30.0) as server, WebhookSink(WebhookConfig(_url(server), capacity=4), rebuilt=True) as sink:
        sink.send(_alert(1))  # the receiver holds this POST until released
        assert wait_for(lambda: len(server.bodies) == 1)  # type: ignore[attr-defined]
        for index in range(2, 6):  # rebuilt: two fit their half of the queue, two are dropped
            sink.send(replace(_alert(index), replayed=True))
        sink.send(_alert(6))  # live, after them
        sink.send(_alert(7))
        assert sink.dropped == 2 and sink.pending() == 4
        server.release.set()  # type: ignore[attr-defined]
        assert wait_for(lambda: sink.delivered == 5)
    posted = [json.loads(body)["alert_id"] for _, body in server.bodies]  # type: ignore[attr-defined]
    assert posted == ["cam0#1", "cam0#6", "cam0#7", "cam0#2", "cam0#3"]


def test_a_live_message_takes_the_place_of_a_queued_rebuilt_one_when_the_queue_is_full() -> None:
    # With capacity 1, half the queue is the whole of it: a rebuilt alert queued behind a slow receiver took the one
    # place, and the new mistake that came live after it was dropped, what the two lanes are there to prevent.
    class Probe(BackgroundSink[int]):
        def later(self, message: int) -> bool:
            return message < 0  # the rebuilt ones

    gate = threading.Event()
    got: list[int] = []

    def deliver(message: int) -> None:
        gate.wait(10.0)
        got.append(message)

    sink = Probe(deliver, "probe", capacity=1, log=[].append)
    sink.send(1)
    assert wait_for(lambda: sink.pending() == 0)  # the thread holds the first, blocked in deliver
    sink.send(-2)  # rebuilt: the one place
    sink.send(3)  # live: takes it, the rebuilt one is dropped
    sink.send(4)  # live, the queue full of live ones: dropped
    sink.send(-5)  # rebuilt, the queue full: dropped
    assert sink.dropped == 3 and sink.pending() == 1
    gate.set()
    sink.close()
    assert got == [1, 3]
    assert sink.summary_counts() == {"delivered": 2, "failed": 0, "dropped": 3, "queued": 0, "unanswered": 0}


@contextmanager
def raw_receiver(answer: bytes) -> Iterator[str]:
    """A TCP server on loopback that reads each request's headers and answers ``answer`` as it is (no HTTP
    server would write it), then closes; yields its URL."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5.0)
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    request += chunk
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(5.0)
        server.close()


def test_a_receiver_answering_a_status_line_of_60_kb_gets_a_failure_line_of_bounded_length() -> None:
    # http.client quotes the whole status line it could not read (up to 64 KiB) in its error, and the failure line
    # quoted the error: a receiver chose a 60 kB line, twice in the JSON log (the message and its "last" field), for
    # every failed alert.
    garbage = b"NOT-HTTP " + b"x" * 60_000 + b"\r\n\r\n"
    for log_format in ("text", "json"):
        out = io.StringIO()
        log = ServiceLog("checker", log_format, out=out)
        with raw_receiver(garbage) as url, webhook_sinks(WebhookConfig(url, retries=0), log) as sinks:
            sinks[0].send(_alert())
            assert wait_for(lambda: sinks[0].failed == 1)  # noqa: B023
        lines = out.getvalue().splitlines()
        failure = next(line for line in lines if "not delivered so far" in line)
        assert "NOT-HTTP" in failure  # what the receiver answered is still named
        assert max(len(line) for line in lines) < 1000, log_format
