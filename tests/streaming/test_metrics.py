"""The Prometheus endpoints of the checker and the detector, scraped over loopback with a real HTTP GET."""

from __future__ import annotations

import re
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import zmq

from graphs.common.errors import InputError
from streaming.checker.config import CheckerConfig
from streaming.checker.service import CheckerService
from streaming.demo.paths import default_demo_paths
from streaming.detector import DetectorConfig, EventPublisher, load_detector_for_stream, run_detectors
from streaming.messages import Alert, Heartbeat, Status
from streaming.metrics import CheckerMetrics, DetectorMetrics, MetricsAddress, MetricsServer, parse_metrics_address
from streaming.readers import ReaderConfig, open_reader
from streaming.transport import Publisher, Receiver, connect, subscribe
from tests.streaming.helpers import MISTAKE_STEP, running_checker, tea_graph, wait_for, write_noise_video

_, DETECTOR = default_demo_paths()
LOOPBACK = MetricsAddress("127.0.0.1", 0)


def scrape(server: MetricsServer) -> dict[str, float]:
    """``{'name{labels}': value}`` of every sample the endpoint serves."""
    with urllib.request.urlopen(server.url, timeout=5) as response:
        assert response.status == 200
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_the_checker_endpoint_counts_what_came_in_and_went_out(tmp_path: Path) -> None:
    metrics = CheckerMetrics()
    server = MetricsServer(LOOPBACK, metrics.registry)
    other = MetricsServer(LOOPBACK, CheckerMetrics().registry)  # a second service in the same process
    ctx = zmq.Context()
    stop = threading.Event()
    service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"), ctx,
                             metrics=metrics)
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        sender = connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0)
        viewer = Receiver(subscribe(connect(ctx, zmq.SUB, service.alerts_endpoint, wait_s=5.0)))
        events = EventPublisher(Publisher(sender), "cam0")
        statuses: list[Status] = []

        def pump() -> None:
            statuses.extend(m for m in viewer.poll(50) if isinstance(m, Status) and m.stream_id == "cam0")

        def beat_and_pump() -> None:
            events.heartbeat(None, 0, 0, 0.0)
            pump()

        assert wait_for(lambda: bool(statuses), 10.0, beat_and_pump)
        events.keystep(MISTAKE_STEP, "boil_water", 0.0, 1.0, 0.9)  # before its pre-condition: one alert
        sender.send_multipart([b"keystep/cam0", b"{not json"])
        # Wait on the figures read below, as the endpoint gives them: the malformed message may be counted before
        # the alert that came in ahead of it (the alert is counted once it has gone out).
        def counted() -> bool:
            found = scrape(server)
            return (found.get("stream_checker_alerts_total") == 1
                    and found.get('stream_checker_stage_seconds_count{stage="alert_out"}') == 1
                    and found.get('stream_checker_messages_refused_total{reason="malformed"}') == 1)

        assert wait_for(counted, 10.0, pump)
        samples = scrape(server)
        assert samples["stream_checker_messages_received_total"] >= 2
        assert samples['stream_checker_messages_refused_total{reason="malformed"}'] == 1
        assert samples['stream_checker_messages_refused_total{reason="unknown_step"}'] == 0
        assert samples['stream_checker_streams{state="live"}'] == 1
        assert samples["stream_checker_alerts_total"] == 1
        assert samples['stream_checker_stage_seconds_count{stage="hop"}'] >= 2
        assert samples['stream_checker_stage_seconds_count{stage="alert_out"}'] == 1
        assert scrape(other)["stream_checker_alerts_total"] == 0  # its own registry, its own counts
    finally:
        stop.set()
        thread.join(5)
        ctx.destroy(linger=0)
        server.close()
        other.close()


class _Lost:
    """A link that loses every message: the checker was restarting while they were sent."""

    def send(self, message: object) -> None:
        pass


def test_an_alert_rebuilt_from_a_history_is_counted_once_and_its_re_sends_are_not(tmp_path: Path) -> None:
    # Its step reached the checker only in a heartbeat's history: it went out `replayed`, like the periodic re-sends,
    # and a mistake made while the checker restarted was never counted.
    metrics = CheckerMetrics()
    server = MetricsServer(LOOPBACK, metrics.registry)
    ctx = zmq.Context()
    stop = threading.Event()
    service = CheckerService(tea_graph(), CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out",
                                                        status_period_s=0.05), ctx, metrics=metrics)
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        sender = connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0)
        viewer = Receiver(subscribe(connect(ctx, zmq.SUB, service.alerts_endpoint, wait_s=5.0)))
        events = EventPublisher(_Lost(), "cam0")
        events.keystep(MISTAKE_STEP, "boil_water", 0.0, 1.0, 0.9)  # before its pre-condition: one alert, unheard
        events.publisher = Publisher(sender)
        alerts: list[Alert] = []

        def beat() -> None:
            events.heartbeat(None, 0, 0, 0.0)
            alerts.extend(m for m in viewer.poll(50) if isinstance(m, Alert))

        assert wait_for(lambda: len(alerts) >= 3, 10.0, beat)  # the rebuilt alert and two re-sends of it
        assert all(alert.replayed for alert in alerts)
        assert scrape(server)["stream_checker_alerts_total"] == 1
    finally:
        stop.set()
        thread.join(5)
        ctx.destroy(linger=0)
        server.close()


def test_the_detector_endpoint_counts_frames_per_stream_and_times_each_stage(tmp_path: Path) -> None:
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    videos = [write_noise_video(tmp_path / "a.mp4", frames=60), write_noise_video(tmp_path / "b.mp4", frames=30)]
    readers = [open_reader(str(v), ReaderConfig(fps=checkpoint.fps)) for v in videos]
    metrics = DetectorMetrics()
    server = MetricsServer(LOOPBACK, metrics.registry)
    try:
        with running_checker(tmp_path) as (ctx, service, _thread):
            config = DetectorConfig(connect=service.events_endpoint)
            stats = run_detectors(readers, model, checkpoint, extractor, config, ["a", "b"], ctx=ctx,
                                  watcher=metrics)
            samples = scrape(server)
    finally:
        server.close()
    assert [s.frames for s in stats] == [10, 5]
    assert samples['stream_detect_frames_read_total{stream="a"}'] == 10
    assert samples['stream_detect_frames_read_total{stream="b"}'] == 5
    assert samples['stream_detect_frames_dropped_total{stream="a"}'] == 0
    assert samples['stream_detect_streams{state="ended"}'] == 2
    for stage in ("decode", "features", "detector", "segmenter"):
        assert samples[f'stream_detect_stage_seconds_count{{stage="{stage}",stream="b"}}'] == 5


def test_an_address_beyond_loopback_needs_its_flag_and_a_busy_port_is_named() -> None:
    assert parse_metrics_address("9100") == MetricsAddress("127.0.0.1", 9100)
    assert str(parse_metrics_address("[::1]:9100")) == "[::1]:9100"
    assert parse_metrics_address("0.0.0.0:9100", public=True) == MetricsAddress("0.0.0.0", 9100)
    with pytest.raises(InputError, match="--metrics 0.0.0.0:9100 is reachable beyond this machine"):
        parse_metrics_address("0.0.0.0:9100")
    with pytest.raises(InputError, match="literal IP address"):
        parse_metrics_address("localhost:9100")
    with pytest.raises(InputError, match="give HOST:PORT"):
        parse_metrics_address("127.0.0.1:99999")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InputError, match=re.escape(f"--metrics 127.0.0.1:{port}: address already in use")):
            MetricsServer(MetricsAddress("127.0.0.1", port), CheckerMetrics().registry)


def test_stage_latencies_reach_the_status_viewers_get(tmp_path: Path) -> None:
    # The detector's means come with its heartbeat; the checker adds its own hop.
    with running_checker(tmp_path) as (ctx, service, _thread):
        events = EventPublisher(Publisher(connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0)), "cam0")
        latency = {"decode_ms": 1.5, "features_ms": 21.0, "detector_ms": 0.2, "segmenter_ms": 0.05}
        assert wait_for(lambda: "cam0" in service.core.streams, 5.0,
                        lambda: events.heartbeat(None, 3, 0, 5.0, latency=latency))
        events.keystep(1, "fill_kettle", 0.0, 1.0, 0.9)
        assert wait_for(lambda: service.core.status("cam0").features_ms == 21.0, 5.0)
        status = service.core.status("cam0")
        # The ended heartbeat follows no frame (its means are 0): the last measured latencies stay on view.
        # (sent again until taken, as a detector repeats its last heartbeat: the flood above may still be queued)
        def end_beat() -> None:
            events.heartbeat(None, 3, 0, 5.0, ended=True)
            time.sleep(0.05)

        assert wait_for(lambda: service.core.status("cam0").ended, 10.0, end_beat)
        assert service.core.status("cam0").features_ms == 21.0
    assert (status.decode_ms, status.detector_ms, status.segmenter_ms) == (1.5, 0.2, 0.05)
    assert 0 <= status.hop_ms < 1000
    with pytest.raises(ValueError, match=r"heartbeat.decode_ms = -1.0 must be in 0..3600000"):
        Heartbeat("cam0", 0, 1.0, "s", (), None, 0, 0, 0.0, False, decode_ms=-1.0)
    with pytest.raises(ValueError, match="is not finite"):
        Heartbeat("cam0", 0, 1.0, "s", (), None, 0, 0, 0.0, False, features_ms=float("inf"))


def test_idle_connections_are_closed_and_never_pile_up_threads() -> None:
    # A peer opening connections and sending nothing kept a thread each, for ever, in the service it watched.
    server = MetricsServer(LOOPBACK, CheckerMetrics().registry, request_timeout_s=0.5, max_connections=4)
    threads_before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", server.address.port), timeout=5) for _ in range(12)]
    try:
        for sock in idle:  # each is closed by the server: the cap's extras at once, the rest once idle too long
            assert sock.recv(1) == b""
        assert wait_for(lambda: threading.active_count() <= threads_before)
        assert scrape(server)["stream_checker_alerts_total"] == 0  # and it serves scrapes again
    finally:
        for sock in idle:
            sock.close()
        server.close()


def test_requests_trickled_a_byte_at_a_time_are_cut_off_and_scrapes_get_through() -> None:
    # Every connection slot held by peers sending one byte now and then (each read within the socket's timeout)
    # blocked every scrape for as long as they kept it up: Prometheus saw the service as down.
    server = MetricsServer(LOOPBACK, CheckerMetrics().registry, request_timeout_s=1.0, max_connections=2)
    trickling = [socket.create_connection(("127.0.0.1", server.address.port), timeout=0.2) for _ in range(2)]
    try:
        opened, cut = time.monotonic(), [False, False]
        while not all(cut) and time.monotonic() < opened + 10:
            for k, sock in enumerate(trickling):
                if cut[k]:
                    continue
                try:
                    sock.recv(64)  # closed, or answered (a 400): either way let go
                    cut[k] = True
                except TimeoutError:
                    sock.sendall(b"G")  # still talking, never finishing the request line
                except OSError:
                    cut[k] = True
        assert all(cut) and time.monotonic() - opened < 5

        def scraped() -> bool:  # once the cut-off handlers have given their slots back (a moment after the cut)
            try:
                return scrape(server)["stream_checker_alerts_total"] == 0
            except (ConnectionError, OSError):
                return False

        assert wait_for(scraped)
    finally:
        for sock in trickling:
            sock.close()
        server.close()
