"""The dashboard server against a real checker on ipc sockets: what pages get, who gets in, bad input."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import os
import socket
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import zmq

pytest.importorskip("aiohttp", reason="the dashboard needs the 'dashboard' extra (aiohttp)")

import aiohttp  # noqa: E402 - after the skip

from streaming.checker.config import CheckerConfig  # noqa: E402
from streaming.checker.service import CheckerService  # noqa: E402
from streaming.curve_keys import CurveClient, CurveServer  # noqa: E402
from streaming.dashboard.access import COOKIE  # noqa: E402
from streaming.dashboard.feed import CheckerFeed  # noqa: E402
from streaming.dashboard.server import (  # noqa: E402
    SECURITY_HEADERS,
    PageQueue,
    RequestErrors,
    out_of_resources,
    request_logger,
)
from streaming.messages import Alert, CheckerHealth, Message, Status, encode  # noqa: E402
from streaming.stream_detect_cli import main  # noqa: E402
from streaming.transport import HEARTBEAT_S, SILENT_S, Publisher, bind, connect  # noqa: E402
from tests.cli_errors import cli_error  # noqa: E402
from tests.streaming.dashboard.serving import Served, get, serving  # noqa: E402
from tests.streaming.dashboard.test_state import status  # noqa: E402
from tests.streaming.helpers import beat, keystep, running_checker, tea_graph, wait_for  # noqa: E402

TOKEN = "s3cret-token-for-tests"


def alerts_of(state: dict) -> list[dict]:
    return state["alerts"]


def test_an_alert_reaches_the_page_once_and_an_acknowledgement_reaches_every_page(tmp_path: Path) -> None:
    with running_checker(tmp_path) as (ctx, _service, _thread), serving(f"ipc://{tmp_path}/out") as served:
        detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))

        async def pages() -> tuple[dict, dict, list[dict]]:
            async with aiohttp.ClientSession() as session:
                first = await session.ws_connect(served.url + "ws")
                second = await session.ws_connect(served.url + "ws")
                assert (await first.receive_json(timeout=5))["type"] == "snapshot"
                assert (await second.receive_json(timeout=5))["type"] == "snapshot"
                assert wait_for(lambda: served.state()["link"]["connected"], 10)
                for seq in range(3):  # boil_water before fill_kettle, sent three times: one alert
                    detector.send(keystep(history=(2,), seq=seq, timestamp=time.time()))
                alert = await next_of(first, "alert")
                await first.send_json({"type": "ack", "id": alert["alert"]["id"]})
                acked = await next_of(second, "ack")
                others = [m for m in await drain(first) if m["type"] == "alert"]
                return alert, acked, others

        alert, acked, others = asyncio.run(pages())
    assert alert["alert"]["step_name"] == "boil_water" and alert["alert"]["missing_names"] == ["fill_kettle"]
    assert alert["alert"]["acked_at"] is None
    assert acked["alert"]["id"] == alert["alert"]["id"] and acked["alert"]["acked_at"] is not None
    assert others == []  # the re-sends and the repeated key-step showed once


async def next_of(ws: aiohttp.ClientWebSocketResponse, kind: str, timeout_s: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = await ws.receive_json(timeout=deadline - time.monotonic())
        if message["type"] == kind:
            return message
    raise AssertionError(f"no {kind} message within {timeout_s} s")


async def drain(ws: aiohttp.ClientWebSocketResponse, for_s: float = 1.5) -> list[dict]:
    out = []
    deadline = time.monotonic() + for_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            out.append(await ws.receive_json(timeout=left))
        except TimeoutError:
            break
    return out


def test_a_wrong_or_missing_token_gets_401_and_nothing_else(tmp_path: Path) -> None:
    with serving(f"ipc://{tmp_path}/out", token=TOKEN) as served:
        for path in ("", "static/app.js", "api/state", "graph.svg", "frames/1", "ws", "no/such/page"):
            for headers in ({}, {"Authorization": "Bearer wrong-token-of-right-len"}, {"Cookie": f"{COOKIE}=x"}):
                status, body, _ = get(served.url + path, headers)
                assert (status, body) == (401, "401: unauthorized\n"), (path, headers)
        status, _, _ = get(served.url + "?token=wrong")
        assert status == 401
        status, body, _ = get(served.url + "api/state", {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and json.loads(body)["type"] == "snapshot"
        # The page's first visit: the token in the address becomes a cookie, and the address drops it.
        status, _, headers = get(served.url + f"?token={TOKEN}")
        assert status == 303 and headers["Location"] == "/"
        cookie = headers["Set-Cookie"].split(";")[0]
        assert TOKEN not in cookie and "HttpOnly" in headers["Set-Cookie"]
        status, body, _ = get(served.url, {"Cookie": cookie})
        assert status == 200 and "<title>" in body


def test_on_loopback_without_a_token_only_loopback_host_names_are_served(tmp_path: Path) -> None:
    # A site that points its own name at 127.0.0.1 (DNS rebinding) must not read the page.
    with serving(f"ipc://{tmp_path}/out") as served:
        port = served.url.rsplit(":", 1)[1].strip("/")
        assert get(served.url, {"Host": f"evil.example:{port}"})[0] == 421
        assert get(served.url, {"Host": f"localhost:{port}"})[0] == 200
        assert get(served.url)[0] == 200


def test_the_push_channel_refuses_a_page_of_another_site(tmp_path: Path) -> None:
    async def connect_from(url: str, origin: str) -> int:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.ws_connect(url, headers={"Origin": origin}):
                    return 101
            except aiohttp.WSServerHandshakeError as err:
                return err.status

    with serving(f"ipc://{tmp_path}/out") as served:
        host = served.url.split("//")[1].rstrip("/")
        assert asyncio.run(connect_from(served.url + "ws", "http://evil.example")) == 403
        assert asyncio.run(connect_from(served.url + "ws", f"http://{host}")) == 101


def test_beyond_loopback_the_dashboard_refuses_to_start_without_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(main, ["dashboard", "--bind", "0.0.0.0:0"], capsys)
    assert "--bind 0.0.0.0:0 is reachable beyond this machine" in line and "--token-file" in line
    line = cli_error(main, ["dashboard", "--bind", "[::]:0"], capsys)
    assert line.startswith("error: --bind [::]:0 is reachable beyond this machine")  # was ":::0"
    line = cli_error(main, ["dashboard", "--bind", "0.0.0.0:0", "--token", "short"], capsys)
    assert "--token: the token must be 16-256 visible ASCII characters" in line


def test_a_token_file_is_read_only_when_it_is_a_small_regular_text_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # /dev/zero was read until the kernel killed the process (23 GB), a FIFO waited for a writer forever, and bytes
    # that are not text were named by Python's class name.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "binary").write_bytes(b"\xff\xfe" + b"x" * 30)
    (tmp_path / "huge").write_text("t" * 5000)
    expected = {
        "/dev/zero": "is a character device, not a regular file; expected a token file",
        str(fifo): "is a FIFO (named pipe), not a regular file; expected a token file",
        str(tmp_path / "binary"): "not a text file (a token is visible ASCII characters)",
        str(tmp_path / "huge"): "too large for a token file",
        str(tmp_path): "is a folder, expected a token file",
    }
    for path, reason in expected.items():
        line = cli_error(main, ["dashboard", "--bind", "0.0.0.0:0", "--demo", "--token-file", path], capsys)
        assert line.startswith(f"error: --token-file {path}: ") and reason in line, line


def test_a_port_already_taken_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        line = cli_error(main, ["dashboard", "--bind", f"127.0.0.1:{port}"], capsys)
    assert line == (f"error: --bind 127.0.0.1:{port}: address already in use (another program is using it: pick "
                    "another port)")


def test_a_checker_that_is_not_there_is_shown_and_found_once_it_starts(tmp_path: Path) -> None:
    endpoint = f"ipc://{tmp_path}/out"
    with serving(endpoint) as served:
        time.sleep(0.3)  # nothing can arrive: no checker
        link = served.state()["link"]
        assert (link["connected"], link["last_heard"], link["endpoint"]) == (False, None, endpoint)
        ctx = zmq.Context()
        stop = threading.Event()
        service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", endpoint), ctx)
        thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
        thread.start()
        try:
            assert wait_for(lambda: served.state()["link"]["connected"], 10)
        finally:
            stop.set()
            thread.join(5)
            service.close()
            ctx.destroy(linger=0)
        assert wait_for(lambda: not served.state()["link"]["connected"], 10)  # it went away again


def test_an_undecodable_message_is_counted_and_skipped(tmp_path: Path) -> None:
    ctx = zmq.Context()
    try:
        sock, endpoint = bind(ctx, zmq.XPUB, f"ipc://{tmp_path}/fake-checker")  # speaks for a checker
        fake = Publisher(sock)
        with serving(endpoint) as served:
            assert wait_for(lambda: fake.new_subscribers() > 0, 10)
            good = Alert("cam0", 0, time.time(), "cam0#0", "aaaaaaaaaaaa", 2, "boil_water", 0, (1,), ("fill_kettle",),
                         False, time.time(), False, 1, "fill_kettle", 1.0, "weighted")
            sock.send_multipart([b"alert/cam0", b"{not json"])
            sock.send_multipart(encode(good))
            assert wait_for(lambda: len(served.state()["alerts"]) == 1, 10)
            link = served.state()["link"]
            assert link["malformed"] == 1 and "not UTF-8 JSON" in link["last_error"]
    finally:
        ctx.destroy(linger=0)


def test_a_message_of_many_frames_is_counted_without_gathering_its_frames(tmp_path: Path) -> None:
    # The dashboard receives as the checker and the view do (`queued_messages`), so an over-long message is counted
    # as malformed, not held as a status; that its frames are released, never gathered, is proven on the transport
    # (tests/streaming/test_transport.py). This test guards the wiring: it passed on the dashboard's own copy too.
    ctx = zmq.Context()
    try:
        sock, endpoint = bind(ctx, zmq.XPUB, f"ipc://{tmp_path}/fake-checker")
        fake = Publisher(sock)
        with serving(endpoint) as served:
            assert wait_for(lambda: fake.new_subscribers() > 0, 10)
            good = Alert("cam0", 0, time.time(), "cam0#0", "aaaaaaaaaaaa", 2, "boil_water", 0, (1,), ("fill_kettle",),
                         False, time.time(), False, 1, "fill_kettle", 1.0, "weighted")
            sock.send_multipart([b"status/cam0", *[b"x"] * 10_000])
            sock.send_multipart(encode(good))
            assert wait_for(lambda: len(served.state()["alerts"]) == 1, 10)
            assert wait_for(lambda: served.state()["link"]["malformed"] == 1, 10)
            assert "expected 2 frames, got 10001" in served.state()["link"]["last_error"]
    finally:
        ctx.destroy(linger=0)


def test_a_page_sending_nesting_too_deep_to_parse_stays_connected_and_served(tmp_path: Path) -> None:
    # json.loads raised RecursionError, which the page's loop did not catch: a traceback, and the page cut off.
    with serving(f"ipc://{tmp_path}/out") as served:

        async def page() -> tuple[str, bool]:
            async with aiohttp.ClientSession() as session:
                ws = await session.ws_connect(served.url + "ws")
                assert (await ws.receive_json(timeout=5))["type"] == "snapshot"
                await ws.send_str("[" * 3000)  # within the size limit
                await ws.send_json({"type": "ack", "id": 7})  # no such alert: ignored
                message = await next_of(ws, "link")  # pushed every second to pages still connected
                return message["type"], ws.closed

        assert asyncio.run(page()) == ("link", False)


def test_malformed_http_requests_get_400_and_one_log_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # aiohttp logged each with its traceback on stderr: anyone reaching the port could fill the log with them, and
    # under --log-format json they were not JSON.
    bad = [b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
           b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(b"X-%d: 1\r\n" % k for k in range(500)) + b"\r\n",
           b"GET / HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n"]
    with serving(f"ipc://{tmp_path}/out") as served:
        host, port = served.url.removeprefix("http://").rstrip("/").split(":")
        for request in bad:
            with socket.create_connection((host, int(port)), timeout=10) as conn:
                conn.sendall(request)
                assert conn.recv(64).split(b"\r\n")[0].split()[1] == b"400"
        assert served.state()["link"] is not None  # still serving
    lines = capsys.readouterr().err.splitlines()
    assert "Traceback" not in "\n".join(lines)
    (line,) = lines  # the first said at once, the others counted for the next line (10 s later)
    assert line.startswith("warning: dashboard: a request from 127.0.0.1 could not be handled: LineTooLong: 400, "
                           "message: Got more than 8190 bytes")


def test_a_request_never_finished_is_closed_and_an_open_page_is_not(tmp_path: Path) -> None:
    # A peer sending half a request, then a header line now and then, held its connection and a file handle for an
    # hour (aiohttp's default); enough of them took every handle the dashboard had.
    with serving(f"ipc://{tmp_path}/out", request_timeout_s=1.0) as served:
        host, port = served.url.removeprefix("http://").rstrip("/").split(":")
        with socket.create_connection((host, int(port)), timeout=0.2) as conn:
            conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            opened, closed = time.monotonic(), False
            while not closed and time.monotonic() < opened + 10:
                try:
                    closed = conn.recv(1) == b""
                except TimeoutError:
                    conn.sendall(b"X-Slow: 1\r\n")  # still talking, never finishing
                except OSError:
                    closed = True
            assert closed and time.monotonic() - opened < 5

        async def page() -> bool:
            async with aiohttp.ClientSession() as session:
                ws = await session.ws_connect(served.url + "ws")
                assert (await ws.receive_json(timeout=5))["type"] == "snapshot"
                opened = time.monotonic()
                while time.monotonic() < opened + 3:  # three times the timeout, on the link's pushes
                    await next_of(ws, "link")
                return not ws.closed

        assert asyncio.run(page())


def test_request_errors_are_one_line_at_most_every_ten_seconds_counting_those_between() -> None:
    lines: list[str] = []
    now = [100.0]
    errors = RequestErrors(lines.append, monotonic=lambda: now[0])
    logger = request_logger(errors)
    for seconds in (0.0, 1.0, 2.0, 9.0, 10.5):
        now[0] = 100.0 + seconds
        try:
            raise ValueError("Bad status line\n  'x\x1b[31m'")
        except ValueError as err:
            logger.exception("Error handling request from %s", "10.0.0.7", exc_info=err)
    logger.debug("Error handling request from %s", "10.0.0.7")  # aiohttp's own choice not to warn: not said
    assert lines == [
        "dashboard: a request from 10.0.0.7 could not be handled: ValueError: Bad status line 'x\\x1b[31m'",
        "dashboard: a request from 10.0.0.7 could not be handled (4 since the last line): ValueError: Bad status "
        "line 'x\\x1b[31m'",
    ]


def test_alert_pictures_are_served_only_from_inside_the_folder(tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    (frames / "cam0").mkdir(parents=True)
    (frames / "cam0" / "1000.jpg").write_bytes(b"\xff\xd8picture of cam0")
    (tmp_path / "1000.jpg").write_bytes(b"\xff\xd8outside the folder")  # where stream '..' would lead
    with running_checker(tmp_path) as (ctx, _service, _thread), serving(f"ipc://{tmp_path}/out",
                                                                        alert_frames=frames) as served:
        detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
        for stream in ("cam0", ".."):  # boil_water first: an alert at video time 1.0 s on each
            detector.send(keystep(history=(2,), stream_id=stream, session=f"s{len(stream)}", timestamp=time.time()))
        assert wait_for(lambda: len(served.state()["alerts"]) == 2, 10)
        by_stream = {a["stream"]: a for a in served.state()["alerts"]}
        assert all(a["frame"] for a in by_stream.values())
        status, body, headers = get(served.url + f"frames/{by_stream['cam0']['id']}")
        assert (status, body, headers["Content-Type"]) == (200, "\ufffd\ufffdpicture of cam0", "image/jpeg")
        assert get(served.url + f"frames/{by_stream['..']['id']}")[0] == 404
        assert quote("..", safe="") == ".."  # the name really would have pointed outside
        for bad in ("../1000.jpg", "%2e%2e%2f1000.jpg", "-1", "99999999999999999999", "1e3", "%C2%B2", "%E2%91%A0"):
            assert get(served.url + f"frames/{bad}")[0] == 404, bad


def test_the_picture_of_an_alert_at_a_huge_video_time_is_a_404_with_the_security_headers(tmp_path: Path) -> None:
    # The wire takes any finite start: an alert at video time 1e306 made /frames/N a 500 (int() of 1e309, infinity:
    # OverflowError) without the security headers, and a warning in the dashboard's log.
    frames = tmp_path / "frames"
    (frames / "cam0").mkdir(parents=True)
    (frames / "cam0" / "1000.jpg").write_bytes(b"\xff\xd8picture of cam0")
    warnings: list[str] = []
    with running_checker(tmp_path) as (ctx, _service, _thread), serving(
        f"ipc://{tmp_path}/out", warn=warnings.append, alert_frames=frames
    ) as served:
        detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
        for stream, start in (("cam0", 1.0), ("huge", 1e306), ("long", 1e300)):  # boil_water first: an alert each
            detector.send(keystep(history=(2,), stream_id=stream, start=start, end=start, timestamp=time.time()))
        assert wait_for(lambda: len(served.state()["alerts"]) == 3, 10)
        by_stream = {a["stream"]: a for a in served.state()["alerts"]}
        assert by_stream["huge"]["video_time"] == 1e306
        for stream in ("huge", "long"):
            status, body, headers = get(served.url + f"frames/{by_stream[stream]['id']}")
            assert (status, body) == (404, "404: Not Found\n"), stream
            assert SECURITY_HEADERS.items() <= headers.items()
        assert get(served.url + f"frames/{by_stream['cam0']['id']}")[0] == 200
        assert [by_stream[s]["frame"] for s in ("cam0", "huge", "long")] == [True, False, False]  # the page asks not
    assert warnings == []


def test_a_request_a_defect_fails_is_a_500_with_the_security_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiohttp answers a handler's exception with its own 500, past the middleware that sets the headers.
    warnings: list[str] = []
    with serving(f"ipc://{tmp_path}/out", warn=warnings.append, alert_frames=tmp_path) as served:

        def broken(alert_id: int) -> Path | None:
            raise RuntimeError(f"a defect at alert {alert_id}")

        monkeypatch.setattr(served.hub, "frame_path", broken)
        status, _body, headers = get(served.url + "frames/7")
        assert status == 500
        assert SECURITY_HEADERS.items() <= headers.items()
        assert wait_for(lambda: len(warnings) == 1, 10)
    assert warnings == ["dashboard: a request from 127.0.0.1 could not be handled: RuntimeError: a defect at alert 7"]


def test_a_page_that_falls_behind_gets_one_snapshot_instead_of_an_endless_queue() -> None:
    async def fill() -> PageQueue:
        queue = PageQueue(limit=4)
        queue.resync = False
        for n in range(10):
            queue.offer(f"m{n}")
        return queue

    queue = asyncio.run(fill())
    assert queue.skipped >= 1 and queue.resync and len(queue.items) <= 4



def test_with_curve_an_allowed_dashboard_gets_the_alerts_and_a_stranger_is_named_refused(tmp_path: Path) -> None:
    assert main(["keys", "--out", str(tmp_path / "keys"), "--clients", "cam0,dashboard"]) == 0
    keys = tmp_path / "keys"
    server = CurveServer.from_files(str(keys / "checker.key_secret"), str(keys / "clients"))
    allowed = CurveClient.from_files(str(keys / "checker.key"), str(keys / "clients" / "dashboard.key_secret"))
    camera = CurveClient.from_files(str(keys / "checker.key"), str(keys / "clients" / "cam0.key_secret"))
    public, secret = zmq.curve_keypair()
    stranger = CurveClient(server.public, public, secret)
    ctx = zmq.Context()
    stop = threading.Event()
    service = CheckerService(tea_graph(), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0", curve=server), ctx)
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        with serving(service.alerts_endpoint, curve=allowed) as served, \
                serving(service.alerts_endpoint, curve=stranger) as refused:  # fmt: skip
            detector = Publisher(connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0, curve=camera))
            assert wait_for(lambda: served.state()["link"]["connected"], 10)
            detector.send(keystep(history=(2,), timestamp=time.time()))
            assert wait_for(lambda: len(served.state()["alerts"]) == 1, 10)
            assert wait_for(lambda: refused.state()["link"]["refused"] is not None, 10)
            link = refused.state()["link"]
            assert "refused this client's key" in link["refused"] and not link["connected"]
            assert refused.state()["alerts"] == []
            # It keeps trying (its key may be added), later and later: it knocked several times a second, each
            # knock counted and logged by the checker. Seen from the checker's count (updated once per poll, up to
            # 0.1 s late), and allowing libzmq's own retry to add a knock to each wait: after a refusal, four more
            # span at least two waits, 0.2 + 0.4 s, less that lag; they came within some 50 ms before.
            seen = service.core.counts["denied"]
            assert wait_for(lambda: service.core.counts["denied"] > seen, 20)
            first, started = service.core.counts["denied"], time.monotonic()
            assert wait_for(lambda: service.core.counts["denied"] >= first + 4, 30)
            assert time.monotonic() - started >= 0.4
    finally:
        stop.set()
        thread.join(5)
        ctx.destroy(linger=0)


def test_a_token_file_saved_with_a_byte_order_mark_is_read() -> None:
    # Notepad writes a UTF-8 byte-order mark before the text: the file was refused as "not a text file".
    import tempfile

    from streaming.dashboard.access import load_token

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "token.txt"
        path.write_bytes(b"\xef\xbb\xbf" + b"s3cret-token-of-the-site\r\n")
        assert load_token(None, str(path)) == "s3cret-token-of-the-site"


def tile_state(served: Served, stream: str) -> str | None:
    return next((t["state"] for t in served.state()["tiles"] if t["stream"] == stream), None)


def test_a_stream_a_restarted_checker_forgot_is_not_live_and_the_log_says_when_the_checker_stops_and_answers(
    tmp_path: Path,
) -> None:
    # After a checker restart, a stream whose detector had gone meanwhile showed "LIVE" for ever; while the checker
    # was down every tile stayed "LIVE", and the dashboard's log said nothing, then or when it came back.
    warnings: list[str] = []
    said: list[str] = []
    seq = itertools.count()
    with serving(f"ipc://{tmp_path}/out", warn=warnings.append, say=said.append) as served:
        with running_checker(tmp_path) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            assert wait_for(lambda: tile_state(served, "phantom") == "live", 20,
                            step=lambda: detector.send(beat("phantom", seq=next(seq), timestamp=time.time())))
        assert wait_for(lambda: tile_state(served, "phantom") == "unknown", 20)  # the checker is gone
        assert wait_for(lambda: warnings != [], 20)
        with running_checker(tmp_path):  # restarted; the detector is gone too, so it never hears of phantom
            assert wait_for(lambda: said != [], 20)
            assert wait_for(lambda: tile_state(served, "phantom") == "silent", 20)
            assert served.state()["link"]["connected"]
    assert len(warnings) == 1 and "not answering (last heard" in warnings[0], warnings  # one line, not one a poll
    assert len(said) == 1 and "answers again" in said[0], said


def test_a_graph_other_than_the_checkers_is_one_warning_per_step(tmp_path: Path) -> None:
    # Given another --graph, the dashboard marked attach_legs for a "boil_water before fill_kettle" alert, silently.
    warnings: list[str] = []
    with running_checker(tmp_path) as (ctx, _service, _thread), \
            serving(f"ipc://{tmp_path}/out", warn=warnings.append, names={1: "unbox_parts", 2: "attach_legs"},
                    graph_source="--graph shelf.json") as served:  # fmt: skip
        detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
        assert wait_for(lambda: served.state()["link"]["connected"], 10)
        detector.send(keystep(history=(2,), timestamp=time.time()))
        assert wait_for(lambda: len(served.state()["alerts"]) == 1, 10)
        # the checker re-sends its alerts every 0.5 s: wait for a re-send, which must not say it again
        assert wait_for(lambda: any(r.alert.replayed for r in list(served.hub.state.alerts)), 10)
        state = served.state()
    assert [(c["step"], c["graph_name"], c["checker_name"]) for c in state["name_conflicts"]] == [
        (2, "attach_legs", "boil_water"), (1, "unbox_parts", "fill_kettle")]
    assert len(warnings) == 2, warnings
    assert "--graph shelf.json names step 2 'attach_legs', the checker calls it 'boil_water'" in warnings[0]
    assert "is this the checker's graph?" in warnings[0]


def test_a_status_is_handed_over_with_the_time_it_arrived_not_when_it_was_decoded(tmp_path: Path) -> None:
    # Statuses wait up to STATUS_EVERY_S to be decoded: a stream's silence is measured from when one arrived.
    now = [50.0]
    got: list[tuple[Message, float]] = []
    ctx = zmq.Context()
    checker = ctx.socket(zmq.PUB)
    checker.bind(f"ipc://{tmp_path}/out")
    feed = CheckerFeed(f"ipc://{tmp_path}/out", got.extend, clock=lambda: now[0])
    feed.start()

    def health(seq: int) -> list[bytes]:
        return encode(CheckerHealth("checker", seq, 1.0, 1, 0, 10, 0, 0, 0, 0, 0, 0))

    def healths() -> list[int]:
        return [m.seq for m, _ in got if isinstance(m, CheckerHealth)]

    try:
        assert wait_for(lambda: healths() != [], 10, step=lambda: checker.send_multipart(health(0)))
        now[0] = 100.0
        checker.send_multipart(encode(status()))
        checker.send_multipart(health(1))  # decoded at once; behind the status on the same connection
        assert wait_for(lambda: 1 in healths(), 10)
        now[0] = 200.0
        assert wait_for(lambda: any(isinstance(m, Status) for m, _ in got), 10)
        assert [at for m, at in got if isinstance(m, Status)] == [100.0]
    finally:
        feed.close()
        checker.close(linger=0)
        ctx.destroy(linger=0)


def test_connections_held_open_until_file_handles_run_out_log_one_line_and_the_page_comes_back() -> None:
    # Idle connections up to the handle limit (a helper held 1,100 under 1,024; here 100 under 64): asyncio logged
    # "socket.accept() out of system resource" with a traceback about 500 times a second (170 MB of log a minute);
    # after they closed, the page must answer again.
    import resource
    import subprocess
    import urllib.request

    from tests.streaming.helpers import STREAM_DETECT

    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        checker = probe.getsockname()[1]

    def few_handles() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    dashboard = subprocess.Popen([*STREAM_DETECT, "dashboard", "--connect", f"tcp://127.0.0.1:{checker}", "--demo",
                                  "--bind", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True, preexec_fn=few_handles)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(dashboard.stderr or ()), daemon=True)
    reader.start()
    held: list[socket.socket] = []
    try:
        assert wait_for(lambda: any("serving http" in line for line in lines), 60)
        for _ in range(100):  # half a request each, never finished
            conn = socket.create_connection(("127.0.0.1", port), timeout=5)
            conn.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            held.append(conn)
        assert wait_for(lambda: any("out of system resource" in line for line in lines), 30), lines
        for conn in held:
            conn.close()
        held.clear()

        def answers() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/state", timeout=2) as page:
                    return bool(page.status == 200)
            except OSError:
                return False

        assert wait_for(answers, 60)
    finally:
        for conn in held:
            conn.close()
        dashboard.terminate()
        dashboard.wait(timeout=60)
        reader.join(timeout=10)
    said = [line for line in lines if "out of system resource" in line]
    assert len(said) <= 2 and not any("Traceback" in line for line in lines), lines[:20]
    assert said[0].startswith("warning: dashboard: the web server: socket.accept() out of system resource")


def test_only_running_out_of_file_handles_is_rate_limited_other_loop_errors_keep_their_report() -> None:
    # Every event-loop error went through the limiter: a defect in a callback lost its traceback for good.
    import errno

    assert out_of_resources({"message": "socket.accept() out of system resource",
                             "exception": OSError(errno.EMFILE, "Too many open files")})
    assert not out_of_resources({"message": "Exception in callback", "exception": RuntimeError("a defect")})
    assert not out_of_resources({"message": "Task was destroyed but it is pending!"})


def test_tiles_of_streams_a_restarted_checker_no_longer_holds_go_and_open_pages_are_told(tmp_path: Path) -> None:
    # Cameras that came and went kept their tiles until MAX_STREAMS were held, and an open page kept every tile it was
    # ever sent, evicted ones included (nothing told it): a page open for days grew with every stream id.
    seq = itertools.count()
    with serving(f"ipc://{tmp_path}/out") as served:
        served.hub.state.forget_s = 1.0  # an attribute: the code before it ignores it, and the assertions say so

        async def page() -> tuple[list[dict], list[str]]:
            async with aiohttp.ClientSession() as session:
                ws = await session.ws_connect(served.url + "ws")
                with running_checker(tmp_path) as (ctx, _service, _thread):
                    detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                    for k in range(20):
                        detector.send(beat(f"gone-{k}", seq=next(seq), ended=True, timestamp=time.time()))
                    assert wait_for(lambda: len(served.state()["tiles"]) == 20, 10)
                with running_checker(tmp_path) as (ctx, _service, _thread):  # restarted: it never hears of gone-*
                    detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                    assert wait_for(lambda: [t["stream"] for t in served.state()["tiles"]] == ["kitchen"], 8,
                                    step=lambda: detector.send(beat("kitchen", seq=next(seq), timestamp=time.time())))
                    told = [m for m in await drain(ws, 1.0) if m["type"] == "gone"]
                    return told, [t["stream"] for t in served.state()["tiles"]]

        told, tiles = asyncio.run(page())
    assert sorted(s for m in told for s in m["streams"]) == sorted(f"gone-{k}" for k in range(20)), told
    assert tiles == ["kitchen"]


def test_a_stream_that_comes_back_in_its_run_after_its_tile_went_keeps_its_alerts_and_their_acknowledgements(
        tmp_path: Path) -> None:
    # Dropping a tile forgot its stream's alert ids too: the checker re-sends a returning stream's alerts (the same
    # run, the same ids), and the feed then held each one twice, the second copy new and unacknowledged.
    seq = itertools.count()
    with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served:
        served.hub.state.forget_s = 1.0

        def cam_alerts() -> list[dict]:
            return [a for a in served.state()["alerts"] if a["stream"] == "cam0"]

        def tile(stream: str) -> dict | None:
            return next((t for t in served.state()["tiles"] if t["stream"] == stream), None)

        with running_checker(tmp_path) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            assert wait_for(lambda: len(cam_alerts()) == 1, 10, step=lambda: detector.send(
                keystep(history=(2,), seq=next(seq), timestamp=time.time())))  # boil_water before fill_kettle
            alert_id = cam_alerts()[0]["id"]
            served.loop.call_soon_threadsafe(served.hub.acknowledge, alert_id)
            assert wait_for(lambda: cam_alerts()[0]["acked_at"] is not None, 5)
        with running_checker(tmp_path) as (ctx, _service, _thread):  # it never heard of cam0: its tile goes
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            assert wait_for(lambda: tile("cam0") is None and tile("kitchen") is not None, 15,
                            step=lambda: detector.send(beat("kitchen", seq=next(seq), timestamp=time.time())))
            # cam0's detector is back, in the same run: the checker replays its history and re-sends its alert.
            def keystep_and_beat() -> None:
                detector.send(keystep(history=(2,), seq=next(seq), timestamp=time.time()))
                detector.send(beat("kitchen", seq=next(seq), timestamp=time.time()))

            assert wait_for(lambda: (t := tile("cam0")) is not None and t["alerts"] == 1, 10, step=keystep_and_beat)
            came_back = tile("cam0")
            assert came_back is not None
            # a later status of cam0 comes after the alert the checker re-sent with the first one
            assert wait_for(lambda: (t := tile("cam0")) is not None and t["heard"] > came_back["heard"], 10)
            shown = cam_alerts()
            last = tile("cam0")
    assert [(a["id"], a["acked_at"] is not None) for a in shown] == [(alert_id, True)], shown
    assert last is not None and last["last_alert"] is not None and last["last_alert"]["id"] == alert_id


def test_a_tile_is_not_dropped_as_soon_as_the_checker_answers_after_a_long_outage(tmp_path: Path) -> None:
    # Only the time the checker answers counts: after an outage longer than forget_s every tile went at the
    # checker's first message, before it had re-sent the streams it holds (it does every 0.5 s).
    seq = itertools.count()
    with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served:
        served.hub.state.forget_s = 5.0

        def tiles() -> dict[str, dict]:
            return {t["stream"]: t for t in served.state()["tiles"]}

        async def page() -> tuple[list[str], list[str]]:
            async with aiohttp.ClientSession() as session:
                ws = await session.ws_connect(served.url + "ws")
                with running_checker(tmp_path) as (ctx, _service, _thread):
                    detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                    assert wait_for(lambda: "cam0" in tiles(), 10,
                                    step=lambda: detector.send(beat("cam0", seq=next(seq), timestamp=time.time())))
                heard = tiles()["cam0"]["heard"]
                assert wait_for(lambda: not served.state()["link"]["connected"] and time.time() - heard > 6.0, 20)
                await drain(ws, 0.2)
                with running_checker(tmp_path) as (ctx, _service, _thread):
                    detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                    detector.send(beat("kitchen", seq=next(seq), timestamp=time.time()))
                    told: list[dict] = []
                    deadline = time.monotonic() + 15
                    while not any(m["type"] == "tiles" and any(t["stream"] == "kitchen" for t in m["tiles"])
                                  for m in told) and time.monotonic() < deadline:
                        detector.send(beat("kitchen", seq=next(seq), timestamp=time.time()))
                        told += await drain(ws, 0.1)
                    at_first_push = [s for m in told if m["type"] == "gone" for s in m["streams"]]
                    # and it goes once the checker has answered for forget_s without re-sending it
                    assert wait_for(lambda: "cam0" not in tiles(), 20,
                                    step=lambda: detector.send(beat("kitchen", seq=next(seq), timestamp=time.time())))
                    return at_first_push, sorted(tiles())

        at_first_push, after = asyncio.run(page())
    assert at_first_push == [] and after == ["kitchen"], at_first_push


def test_the_checker_link_reaches_the_pages_no_later_than_the_tiles_it_changes(tmp_path: Path) -> None:
    # The link went out on its own 1 s timer, the tiles every 0.5 s: a checker that stopped answering turned the
    # tiles UNKNOWN while the page's header still said "checker connected" (and LIVE tiles under "not answering" once
    # it answered again), for up to a second each time.
    seq = itertools.count()
    with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served:

        def states(message: dict) -> set[str]:
            tiles = message["tiles"] if message["type"] == "tiles" else []
            return {t["state"] for t in tiles if t["stream"] == "cam0"}

        async def page() -> list[dict]:
            async with aiohttp.ClientSession() as session:
                ws = await session.ws_connect(served.url + "ws")
                told: list[dict] = []
                for _ in range(2):  # stopped, then back
                    with running_checker(tmp_path) as (ctx, _service, _thread):
                        detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                        deadline = time.monotonic() + 15
                        while not any("live" in states(m) for m in told) and time.monotonic() < deadline:
                            detector.send(beat("cam0", seq=next(seq), timestamp=time.time()))
                            told += await drain(ws, 0.1)
                    deadline = time.monotonic() + 15
                    while not any("unknown" in states(m) for m in told) and time.monotonic() < deadline:
                        told += await drain(ws, 0.1)
                    assert any("unknown" in states(m) for m in told)
                    told.append({"type": "round"})
                return told

        told = asyncio.run(page())
    connected = None  # as the page's header says it
    for message in told:
        if message["type"] in ("link", "snapshot"):
            connected = (message["link"] if message["type"] == "snapshot" else message)["connected"]
        # LIVE under a connected checker, UNKNOWN under a lost one; a tile between the two (its status silent a few
        # ms before the checker's last message) may come under either.
        for state in states(message) & {"live", "unknown"}:
            assert connected == (state == "live"), (state, connected)


def test_a_checker_whose_clock_is_behind_is_not_taken_for_gone_while_it_speaks(tmp_path: Path) -> None:
    # Whether a checker answers, and whether it still holds a stream, is judged by when its messages arrive, on the
    # receiver's clock: a checker 50 s behind (its clock, or its timestamps) that speaks every HEARTBEAT_S is live.
    from streaming.view.client import Viewer
    from streaming.view.state import ViewState

    ctx = zmq.Context()
    sock, _ = bind(ctx, zmq.PUB, f"ipc://{tmp_path}/out", "--publish")
    checker = Publisher(sock)
    view = ViewState()
    viewer = Viewer(ctx, f"ipc://{tmp_path}/out", view, jsonl=True, out=io.StringIO())
    seq = itertools.count()

    def speak() -> None:
        behind = time.time() - 50.0
        checker.send(status(timestamp=behind, seq=next(seq)))
        checker.send(CheckerHealth("checker", next(seq), behind, 1, 0, 10, 0, 0, 0, 0, 0, 0))
        viewer.pump(10)

    def tile() -> dict | None:
        return next((t for t in served.state()["tiles"] if t["stream"] == "cam0"), None)

    try:
        with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served:
            assert wait_for(lambda: tile() is not None and "cam0" in view.streams, 10, step=speak)
            start = time.monotonic()
            seen: list[tuple[bool, str | None, bool, bool]] = []
            while time.monotonic() - start < 3 * SILENT_S:  # a HEARTBEAT_S apart, as a checker speaks
                speak()
                shown = tile()
                seen.append((served.state()["link"]["connected"], None if shown is None else shown["state"],
                             view.silent(), view.stale("cam0")))
                wait_for(lambda: time.monotonic() - start > len(seen) * HEARTBEAT_S, 1.0, step=lambda: viewer.pump(10))
    finally:
        viewer.close()
        ctx.destroy(linger=0)
    assert set(seen) == {(True, "live", False, False)}, seen


def test_an_ended_sessions_end_report_outlives_its_tile_for_open_pages_and_pages_opened_later(tmp_path: Path) -> None:
    # The end report (the steps a session never did) was shown on its tile alone, and the tile goes once the checker
    # has let the stream go (12 stream timeouts after it went idle, a minute by default) for 10 minutes: a supervisor
    # who looked later never learned that a step was forgotten.
    seq = itertools.count()
    with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served:
        served.hub.state.forget_s = 1.0  # an attribute: the code before it ignores it

        def tile(stream: str) -> dict | None:
            return next((t for t in served.state()["tiles"] if t["stream"] == stream), None)

        async def pages() -> tuple[list[dict], list[dict]]:
            async with aiohttp.ClientSession() as session:
                ws = await session.ws_connect(served.url + "ws")
                with running_checker(tmp_path, stream_timeout_s=1.0) as (ctx, _service, _thread):
                    detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                    assert wait_for(lambda: tile("cam0") is not None, 10, step=lambda: detector.send(
                        keystep(history=(1,), seq=next(seq), timestamp=time.time())))
                    detector.send(beat("cam0", seq=next(seq), history=(1,), ended=True, timestamp=time.time()))
                    ended = wait_for(lambda: (t := tile("cam0")) is not None and bool(t["never_done"]), 10)
                    assert ended
                    # the checker frees the stream (12 s here), the dashboard drops its tile a second later
                    assert wait_for(lambda: tile("cam0") is None, 30)
                    live = [m for m in await drain(ws, 0.5) if m["type"] == "finished"]
                later = await session.ws_connect(served.url + "ws")  # a page opened (or reloaded) after that
                snapshot = await later.receive_json(timeout=10)
                return live, snapshot["finished"]

        live, kept = asyncio.run(pages())
    never = ["get_cup", "boil_water", "add_milk"]
    assert live and live[-1]["session"]["stream"] == "cam0" and live[-1]["session"]["never_done"], live
    [session] = kept
    assert session["stream"] == "cam0" and session["seen_end"] and session["done"] == 1 and session["alerts"] == 0
    assert set(never) <= set(session["never_done"]), session


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="aiohttp 3.14.5 answers a request its parser refuses itself, before any middleware, and "
                          "runs no on_response_prepare for it (aio-libs/aiohttp#6463): no documented hook shapes "
                          "that 400 (docs/dashboard.md, Security)")  # fmt: skip
def test_a_malformed_request_gets_its_400_with_the_security_headers(tmp_path: Path) -> None:
    # Passes (and so fails the suite, the mark being strict) once aiohttp runs the application's response hook for
    # these answers too: the dashboard's `headed` then adds the headers, and the docs' exception must go.
    with serving(f"ipc://{tmp_path}/out", warn=lambda line: None) as served:
        host, port = served.url.removeprefix("http://").rstrip("/").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(b"G<T / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # not a method: refused by the parser
            answer = b""
            while chunk := conn.recv(4096):  # aiohttp closes the connection after it
                answer += chunk
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    if head[0].split()[1:2] != ["400"]:
        pytest.fail(f"not the 400 this test is about: {head[0]!r}")  # not the expected failure: fails the test
    headers = dict(line.split(": ", 1) for line in head[1:])
    assert SECURITY_HEADERS.items() <= headers.items(), headers


def assert_heard_of_late(finished: list[dict]) -> None:
    """The one session listed, from its end report, as heard of late (``or before (re-sent)`` on the page)."""
    [session] = finished
    assert session["stream"] == "cam0" and session["never_done"], session
    assert session["seen_end"] is False, session


def test_a_session_that_ended_while_the_checker_was_down_is_listed_as_heard_of_late(tmp_path: Path) -> None:
    # A source that played out while the checker restarted: its detector sends the last heartbeat again once the
    # checker is back, and the new checker's end report is its first (not a re-send). The finished list said the
    # session ended at that moment, as if heard as it happened, without "or before (re-sent)".
    seq = itertools.count()
    with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served:
        with running_checker(tmp_path) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            assert wait_for(lambda: tile_state(served, "cam0") == "live", 20, step=lambda: detector.send(
                beat("cam0", seq=next(seq), history=(1,), timestamp=time.time())))
        assert wait_for(lambda: tile_state(served, "cam0") == "unknown", 20)  # the checker is gone
        with running_checker(tmp_path) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            assert wait_for(lambda: served.state()["link"]["connected"], 20)  # it hears the new checker's first word
            end = beat("cam0", seq=next(seq), history=(1,), ended=True, timestamp=time.time())
            assert wait_for(lambda: tile_state(served, "cam0") == "ended", 20, step=lambda: detector.send(end))
            finished = served.state()["finished"]
    assert_heard_of_late(finished)


def test_a_session_that_ended_while_its_detector_s_link_was_down_is_listed_as_heard_of_late(tmp_path: Path) -> None:
    # The detector's link to the checker down while its source played out: the checker held the stream lost,
    # re-sending its status every 0.5 s, and the end came with the heartbeat re-sent once the link was back. The
    # lost status, heard a moment before, passed for the session heard running: listed as ended at that moment, as
    # if heard as it happened, without "or before (re-sent)".
    seq = itertools.count()
    with (serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served,
          running_checker(tmp_path, stream_timeout_s=1.0) as (ctx, _service, _thread)):
        detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
        assert wait_for(lambda: tile_state(served, "cam0") == "live", 20, step=lambda: detector.send(
            beat("cam0", seq=next(seq), history=(1,), timestamp=time.time())))
        assert wait_for(lambda: tile_state(served, "cam0") == "lost", 20)  # silent: the link is down
        end = beat("cam0", seq=next(seq), history=(1,), ended=True, timestamp=time.time())
        assert wait_for(lambda: tile_state(served, "cam0") == "ended", 20, step=lambda: detector.send(end))
        finished = served.state()["finished"]
    assert_heard_of_late(finished)
