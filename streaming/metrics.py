"""The Prometheus metrics endpoint of the checker and the detector (``--metrics HOST:PORT``).

Needs the optional ``metrics`` extra (``prometheus_client``); `serve_metrics` refuses, in one line naming the extra,
when it is missing. Every service instance has its own `CollectorRegistry` (never the process-wide default), so that
one process (a test, the all-in-one run) may serve several.

What each one exports (``/metrics``, text format; counters end in ``_total``):

checker (`CheckerMetrics`)
    ``stream_checker_messages_received_total``; ``stream_checker_messages_refused_total{reason}`` (each refusal
    reason of the summary line, ``malformed`` included); ``stream_checker_streams{state="live"|"lost"|"ended"}``;
    ``stream_checker_alerts_total`` and ``stream_checker_retractions_total`` (sent: an early alert and its
    confirmation count as two, an alert rebuilt from a history once, periodic re-sends not at all);
    ``stream_checker_stage_seconds{stage}`` histograms of ``hop`` and ``alert_out`` (`streaming.stage_latency`);
    ``stream_checker_reopen_failed_total`` (re-opens of its sockets that could not make them, each tried again until
    they opened) and ``stream_checker_sockets_closed`` (1 meanwhile).
detector (`DetectorMetrics`)
    ``stream_detect_frames_read_total{stream}``, ``stream_detect_frames_dropped_total{stream}`` (a live source's
    frames never processed: 25 a second of a 30 fps camera read at 5 fps), ``stream_detect_slots_missed_total{stream}``
    (frame slots at the detector's rate that got no frame: it fell behind, or the source stalled),
    ``stream_detect_keysteps_total{stream}``; ``stream_detect_streams{state="live"|"lost"|"ended"}`` (lost: its
    source failed); ``stream_detect_stage_seconds{stream,stage}`` histograms of ``decode``, ``features``,
    ``detector`` and ``segmenter``; ``stream_detect_late_shapes_total`` (batch shapes the backbone met for the first
    time after its warm-up: each can stall every camera on a GPU while its kernels are chosen).

Counts the services keep anyway (received, refused, frames) are read when Prometheus scrapes, by a collector: the
live path pays only for the histograms. The endpoint is plain HTTP without authentication, so like the ZeroMQ sockets
it binds loopback unless told otherwise (``--metrics-public``).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import re
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from graphs.common.errors import InputError, require_extra
from streaming.messages import Alert, Retraction
from streaming.stage_latency import CHECKER_STAGES, DETECTOR_STAGES

if TYPE_CHECKING:
    from streaming.checker.service import CheckerService
    from streaming.detector.batching import BatchedExtractor
    from streaming.detector.streams import DetectorStream

# prometheus_client is an optional extra: it is imported where it is used (after `require_prometheus`), never when
# this module loads, so its types are named here as what they are.
Registry = Any  # prometheus_client.CollectorRegistry
Metric = Any  # prometheus_client.core.Metric

DEFAULT_METRICS_HOST: Final = "127.0.0.1"  # a bare port binds loopback
# Seconds: a frame's stages take from a fraction of a millisecond (the GRU step) to tens (the backbone on a CPU).
LATENCY_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# A scrape is one short request: a connection not answered this long after it opened is closed, however it trickles
# its request, and at most this many are served at once (one thread each), so idle or slow peers can neither pile up
# threads in the service they watch nor hold every slot for long.
METRICS_REQUEST_TIMEOUT_S: Final = 10.0
METRICS_MAX_CONNECTIONS: Final = 32
_ADDRESS = re.compile(r"(?:(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):)?(\d{1,5})")


@dataclass(frozen=True)
class MetricsAddress:
    """Where a metrics endpoint listens (``--metrics``).

    Attributes:
        host: a literal IP address (IPv6 without brackets).
        port: 0..65535 (0: a free port).
    """

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_metrics_address(text: str, public: bool = False, option: str = "--metrics") -> MetricsAddress:
    """Read ``HOST:PORT`` (``[::1]:PORT`` for IPv6) or a bare ``PORT`` (loopback), refusing what it must not bind.

    Args:
        text: the option's value.
        public: the user allowed an address beyond loopback (``--metrics-public``).
        option: the option named in errors.

    Returns:
        The address.

    Raises:
        InputError: not ``HOST:PORT``, a port beyond 65535, a host that is not a literal IP address, or an address
            beyond loopback without ``public``.
    """
    match = _ADDRESS.fullmatch(text.strip())
    if match is None or int(match.group(2)) > 65_535:
        raise InputError(f"{option} {text!r}: give HOST:PORT (127.0.0.1:9100, [::1]:9100) or a port 0-65535")
    host = (match.group(1) or DEFAULT_METRICS_HOST).strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise InputError(f"{option} {text}: the host must be a literal IP address (127.0.0.1, [::1], 0.0.0.0); "
                         "names are not resolved") from None
    if not address.is_loopback and not public:
        raise InputError(f"{option} {text} is reachable beyond this machine, and the endpoint has no authentication "
                         "(anyone there could read the stream ids and rates); bind 127.0.0.1, or pass --metrics-public "
                         "on a network you trust")
    return MetricsAddress(host, int(match.group(2)))


def require_prometheus(option: str = "--metrics") -> None:
    """Refuse, in one line naming the extra to install, when ``prometheus_client`` is missing.

    Raises:
        InputError: the ``metrics`` extra is not installed.
    """
    require_extra("prometheus_client", "metrics", option)


def new_registry() -> Registry:
    """An empty registry of one service instance (never the process-wide default)."""
    require_prometheus()
    from prometheus_client import CollectorRegistry

    return CollectorRegistry()


class MetricsServer:
    """A running ``/metrics`` HTTP endpoint serving one registry, in a daemon thread; `close` stops it.

    Args:
        address: where to listen.
        registry: what to serve.
        option: the option named in errors.
        request_timeout_s: a connection not answered this long after it opened is closed.
        max_connections: connections served at once (a thread each); more are closed unanswered.

    Raises:
        InputError: the port is in use or cannot be bound.
    """

    def __init__(self, address: MetricsAddress, registry: Registry, option: str = "--metrics",
                 request_timeout_s: float = METRICS_REQUEST_TIMEOUT_S,
                 max_connections: int = METRICS_MAX_CONNECTIONS) -> None:
        require_prometheus(option)
        from prometheus_client.exposition import make_wsgi_app

        try:
            self._server = _BoundedMetricsServer(address, make_wsgi_app(registry), request_timeout_s, max_connections)
        except OSError as err:
            why = "address already in use" if err.errno == errno.EADDRINUSE else f"cannot bind ({err.strerror})"
            raise InputError(f"{option} {address}: {why}") from None
        threading.Thread(target=self._server.serve_forever, name=f"metrics {address}", daemon=True).start()
        port = int(self._server.server_address[1])
        self.address = MetricsAddress(address.host, port)

    @property
    def url(self) -> str:
        """The endpoint's URL (``http://127.0.0.1:PORT/metrics``)."""
        return f"http://{self.address}/metrics"

    def close(self) -> None:
        """Stop serving, release the port and cut off the connections still served (whose deadlines no longer run)."""
        self._server.shutdown()
        self._server.server_close()
        self._server.cut_off(everyone=True)


class _QuietHandler(WSGIRequestHandler):
    """One request per connection, read with a bound on each wait; nothing logged per request."""

    def setup(self) -> None:
        server = self.server
        assert isinstance(server, _BoundedMetricsServer)
        self.request.settimeout(server.request_timeout_s)  # every read of the request waits at most this long
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass


class _BoundedMetricsServer(socketserver.ThreadingMixIn, WSGIServer):
    """prometheus_client's threaded WSGI server, with idle connections closed and a cap on those served at once.

    prometheus_client's own `start_http_server` gives every connection a thread that waits for its request for ever:
    a peer that opens connections and sends nothing keeps a thread each in the checker or the detector.
    """

    daemon_threads = True

    def __init__(self, address: MetricsAddress, app: Callable[..., Any], request_timeout_s: float,
                 max_connections: int) -> None:
        # The host is a literal address (`parse_metrics_address`): its family follows from its form.
        self.address_family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
        self.request_timeout_s = request_timeout_s
        self._slots = threading.BoundedSemaphore(max_connections)
        self._deadlines: dict[Any, float] = {}  # each connection served now: when it is cut off
        self._lock = threading.Lock()
        super().__init__((address.host, address.port), _QuietHandler)
        self.set_app(app)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):  # all busy: this connection is closed unanswered
            self.shutdown_request(request)
            return
        with self._lock:
            self._deadlines[request] = time.monotonic() + self.request_timeout_s
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._forget(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._forget(request)

    def _forget(self, request: Any) -> None:
        with self._lock:
            self._deadlines.pop(request, None)
        self._slots.release()

    def service_actions(self) -> None:
        # Called by serve_forever between polls (every 0.5 s): the socket timeout bounds each read, not a request
        # trickled a byte at a time, so a connection past its deadline is shut down under its handler's feet.
        self.cut_off()

    def cut_off(self, everyone: bool = False) -> None:
        """Shut down the connections past their deadline (``everyone``: all of them, once serving has stopped)."""
        now = time.monotonic()
        with self._lock:
            overdue = [request for request, deadline in self._deadlines.items() if everyone or deadline <= now]
        for request in overdue:
            with contextlib.suppress(OSError):
                request.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A peer that went silent or away is the bound doing its work, not a defect to print a traceback for.
        if not isinstance(sys.exc_info()[1], TimeoutError | ConnectionError):
            super().handle_error(request, client_address)


class _Collected:
    """A collector (`prometheus_client.registry.Collector`'s interface) that reads its values when scraped."""

    def __init__(self, collect: Callable[[], Iterator[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterator[Metric]:
        return self._collect()


def _register(registry: Registry, collect: Callable[[], Iterator[Metric]]) -> None:
    registry.register(_Collected(collect))


def _stage_histogram(name: str, what: str, labels: Sequence[str], registry: Registry) -> Any:
    from prometheus_client import Histogram

    return Histogram(name, f"Seconds a {what} spends in each stage of the live path", labels, registry=registry,
                     buckets=LATENCY_BUCKETS)


def _states(name: str, what: str, counts: dict[str, int]) -> Metric:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(name, f"{what} by state", labels=["state"])
    for state, count in counts.items():
        family.add_metric([state], count)
    return family


class DetectorMetrics:
    """The detector's metrics: per-stream frame counts and stage histograms, and the batch shapes the backbone met for
    the first time after start-up (`streaming.detector.streams.StreamWatcher`).

    Args:
        registry: where they live (a new one if None).
    """

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry or new_registry()
        self.stages = _stage_histogram("stream_detect_stage_seconds", "frame", ["stream", "stage"], self.registry)
        self._streams: list[DetectorStream] = []
        self._batches: BatchedExtractor | None = None
        _register(self.registry, self._collect)

    def observer(self, stream_id: str) -> Callable[[str, float], None]:
        """The function a stream calls with ``(stage, seconds)`` for each frame."""
        children = {stage: self.stages.labels(stream_id, stage) for stage in DETECTOR_STAGES}
        return lambda stage, seconds: children[stage].observe(seconds)

    def watch(self, streams: Sequence[DetectorStream], batches: BatchedExtractor | None = None) -> None:
        """Export these streams' counts, and the frame loop's late shapes, from now on."""
        self._streams = list(streams)
        self._batches = batches

    def _collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily

        streams = list(self._streams)
        read = CounterMetricFamily("stream_detect_frames_read", "Frames the reader delivered", labels=["stream"])
        dropped = CounterMetricFamily("stream_detect_frames_dropped",
                                      "Frames a live source produced that were never processed", labels=["stream"])
        missed = CounterMetricFamily("stream_detect_slots_missed",
                                     "Frame slots at the detector's rate that got no frame (fell behind, or a stall)",
                                     labels=["stream"])
        keysteps = CounterMetricFamily("stream_detect_keysteps", "Key-steps confirmed and published",
                                       labels=["stream"])
        states = dict.fromkeys(("live", "lost", "ended"), 0)
        for stream in streams:
            read.add_metric([stream.stream_id], stream.reader.frames)
            dropped.add_metric([stream.stream_id], stream.reader.dropped)
            missed.add_metric([stream.stream_id], stream.reader.missed)
            keysteps.add_metric([stream.stream_id], stream.stats.events)
            failed = stream.stats.error or stream.reader.error
            states["lost" if failed else "ended" if stream.ended else "live"] += 1
        yield from (read, dropped, missed, keysteps, _states("stream_detect_streams", "Detector streams", states))
        if self._batches is not None:
            late = CounterMetricFamily("stream_detect_late_shapes",
                                       "Batch shapes the backbone met for the first time after start-up (kept at 0 by "
                                       "the warm-up; each one can stall every camera on a GPU)")
            late.add_metric([], self._batches.late_shapes)
            yield late


class CheckerMetrics:
    """The checker's metrics: what it received and refused, its streams, alerts and stage histograms.

    Args:
        registry: where they live (a new one if None).
    """

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry or new_registry()
        from prometheus_client import Counter

        self.stages = _stage_histogram("stream_checker_stage_seconds", "message", ["stage"], self.registry)
        self._stage = {stage: self.stages.labels(stage) for stage in CHECKER_STAGES}
        self.alerts = Counter("stream_checker_alerts",
                              "Alerts sent, rebuilt ones included (periodic re-sends not counted)",
                              registry=self.registry)
        self.retractions = Counter("stream_checker_retractions", "Early alerts retracted", registry=self.registry)
        self._service: CheckerService | None = None
        _register(self.registry, self._collect)

    def observe(self, stage: str, seconds: float) -> None:
        """One message's (``hop``) or alert's (``alert_out``) time in a stage."""
        self._stage[stage].observe(seconds)

    def sent(self, message: Alert | Retraction) -> None:
        """Count an alert or a retraction sent for the first time (live, or an alert rebuilt from a history)."""
        (self.alerts if isinstance(message, Alert) else self.retractions).inc()

    def watch(self, service: CheckerService) -> None:
        """Export this checker's counts from now on."""
        self._service = service

    def _collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        service = self._service
        if service is None:
            return
        stats, core = service.receiver.stats, service.core
        received = CounterMetricFamily("stream_checker_messages_received", "Valid messages received")
        received.add_metric([], stats.received)
        refused = CounterMetricFamily("stream_checker_messages_refused", "Messages refused or dropped, by reason",
                                      labels=["reason"])
        counts = dict(core.counts)
        counts["over_budget"] = counts.get("over_budget", 0) + stats.over_budget
        counts["malformed"] = stats.malformed
        for reason, count in sorted(counts.items()):
            refused.add_metric([reason], count)
        states = dict.fromkeys(("live", "lost", "ended"), 0)
        for state in list(core.streams.values()):
            states["lost" if state.lost else "ended" if state.ended else "live"] += 1
        reopen_failed = CounterMetricFamily("stream_checker_reopen_failed",
                                            "Re-opens of the checker's sockets that could not make them (tried again "
                                            "until they opened)")
        reopen_failed.add_metric([], service.reopen_failed)
        closed = GaugeMetricFamily("stream_checker_sockets_closed",
                                   "1 while sockets the checker re-opens wait to be made again, else 0")
        closed.add_metric([], int(service.sockets_closed))
        yield from (received, refused, _states("stream_checker_streams", "Streams the checker tracks", states),
                    reopen_failed, closed)
