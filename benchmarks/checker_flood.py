"""The checker under a flood from a hostile peer: its peak memory, and how fast a well-behaved stream's alert still
arrives.

Usage::

    python benchmarks/checker_flood.py [--seconds 10] [--floods none,multipart,replay,malformed] [--victim-rate 4]
                                       [--streams 8] [--stream-timeout 1]

For each flood, a fresh checker runs in its own process (`streaming.checker.process`, as in ``stream-detect``) on
loopback TCP; a flooder, a separate process, sends to it as fast as it can for ``--seconds``:

- ``multipart``: messages of 2,000 frames of 64 KiB each (128 MiB per message: every frame is within the per-frame
  limit, the message is not);
- ``replay``: heartbeats of a new session every time, each with a 4,096-step history whose every step is a mistake
  (a restarted detector, or a peer making the checker replay histories on purpose), over ``--streams`` stream ids;
- ``malformed``: payloads over 64 KiB, bad JSON, JSON nested 60,000 deep, 3-frame messages, integers of 4,000 digits
  and decodable messages with step ids out of range, in turn.

Meanwhile a victim stream in this process sends ``--victim-rate`` key-steps a second, each a pre-condition violation
in a fresh session, and a viewer here measures the time from each key-step's confirmation to its alert arriving.
Printed per flood: the checker's resident memory (VmRSS) before the flood, at its peak (VmHWM) and once every stream
is freed (`FORGET_AFTER` stream timeouts after the last message: ``--stream-timeout`` keeps that wait short), the
most streams it tracked at once, the victim's alert latency p50 / p99 / max, alerts lost (none within 2 s), and what
the checker counted (malformed, over budget). Target: the victim's alerts within 1 s during every flood, none lost;
the memory of freed streams given back.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import sys
import time
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import numpy as np
import zmq
from rich.console import Console
from rich.table import Table

from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.settings_files import EVENT_RATE, RUN_SECONDS, Bound, bounded_option
from streaming.checker.config import MAX_STREAM_TIMEOUT_S, MAX_STREAMS, CheckerConfig

# Nothing here may import torch: the checker and flooder processes are spawned, and each re-imports this module,
# so a heavy import would show in the checker's memory as if the checker needed it.
from streaming.checker.process import CheckerProcess
from streaming.checker.streams import FORGET_AFTER
from streaming.curve_keys import CurveClient
from streaming.demo.paths import default_demo_paths
from streaming.demo.procedure import PRECONDITIONS
from streaming.messages import MAX_HISTORY, Alert, CheckerHealth, Heartbeat, KeyStepEvent, Status, encode
from streaming.transport import MIN_STREAM_TIMEOUT_S, Publisher, connect
from streaming.view.client import Viewer
from streaming.view.state import ViewState

FLOODS = ("none", "multipart", "replay", "malformed")
VIOLATING_STEP = next(step for step, needs in PRECONDITIONS.items() if needs)  # first in a session: always a mistake
LOST_AFTER_S = 2.0


def flood(kind: str, endpoint: str, stop: EventType, curve: CurveClient | None = None, streams: int = 8) -> None:
    """The flooder process: send ``kind`` messages to ``endpoint`` as fast as possible until ``stop`` is set (with
    ``curve``, as a client the checker lets in: a camera gone wrong, not a stranger, whom CURVE keeps out; a replay
    goes round ``streams`` stream ids)."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 1000)
    if curve is not None:
        curve.apply(sock)
    sock.connect(endpoint)
    time.sleep(0.5)  # the PUB/SUB handshake
    chunk = b"\0" * (64 * 1024)
    history = (VIOLATING_STEP,) * MAX_HISTORY
    payload = encode(Heartbeat("flood", 0, 1.0, "s", (), None, 0, 0, 0.0, False))[1]
    good = json.loads(payload)
    malformed = [
        [b"heartbeat/flood", b" " * (100 * 1024)],
        [b"heartbeat/flood", b"{not json"],
        [b"heartbeat/flood", b"[" * 60_000],
        [b"heartbeat/flood", payload, b"third"],
        [b"heartbeat/flood", payload.replace(b'"frames":0', b'"frames":' + b"9" * 4000)],
        [b"heartbeat/flood", json.dumps(good | {"history": [-1]}).encode()],
        [b"heartbeat/flood", json.dumps(good | {"history": [10**300]}).encode()],
    ]
    k = 0
    try:
        while not stop.is_set():
            if kind == "multipart":
                sock.send_multipart([b"heartbeat/flood", *([chunk] * 1999)], copy=False)
            elif kind == "replay":
                beat = Heartbeat(f"flood{k % streams}", k, time.time(), f"s{k}", history, None, 0, 0, 0.0, False)
                sock.send_multipart(encode(beat))
            elif kind == "malformed":
                sock.send_multipart(malformed[k % len(malformed)])
            else:
                stop.wait(0.1)
            k += 1
    finally:
        sock.close()
        ctx.term()


def victim_keystep(publisher: Publisher, k: int) -> KeyStepEvent:
    """Send the victim's ``k``-th key-step: the first of a fresh session, so always a pre-condition violation; the
    session then ends (one live session per stream id, so the next one may take the stream)."""
    event = KeyStepEvent("victim", 0, time.time(), VIOLATING_STEP, "x", 0.0, 1.0, 1.0, 0, f"v{k}", (VIOLATING_STEP,))
    publisher.send(event)
    publisher.send(Heartbeat("victim", 1, time.time(), f"v{k}", (VIOLATING_STEP,), None, 0, 0, 0.0, True))
    return event


def await_victim(viewer: Viewer, publisher: Publisher, timeout_s: float = 30.0) -> None:
    """Send heartbeats until the checker's status for the victim comes back (both hops connected)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        publisher.send(Heartbeat("victim", 0, time.time(), "hello", (), None, 0, 0, 0.0, False))
        if any(isinstance(m, Status) and m.stream_id == "victim" for m in viewer.pump(50)):
            publisher.send(Heartbeat("victim", 1, time.time(), "hello", (), None, 0, 0, 0.0, True))  # it ends
            return
    raise RuntimeError("the checker did not answer")


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set size (VmHWM), in MiB."""
    return status_mib(pid, "VmHWM")


def status_mib(pid: int, field: str) -> float:
    """One memory field of ``/proc/PID/status`` (``VmRSS``, ``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def await_freed(viewer: Viewer, timeout_s: float) -> bool:
    """Wait until the checker's health says it tracks no stream (each freed after its timeouts); False if it still
    tracks some after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for message in viewer.receiver.poll(100):
            if isinstance(message, CheckerHealth) and message.streams == 0:
                return True
    return False


def run_flood(kind: str, graph: str, seconds: float, victim_rate: float, streams: int = 8,
              stream_timeout_s: float = 1.0) -> dict[str, object]:
    """One checker, one flood, one victim stream: the figures of that flood."""
    ctx = zmq.Context()
    checker = CheckerProcess(graph, CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0",
                                                  stream_timeout_s=stream_timeout_s))
    pid = checker.process.pid
    assert pid is not None  # CheckerProcess starts its process before it returns, so it has a pid
    stop = mp.get_context("spawn").Event()
    flooder = mp.get_context("spawn").Process(target=flood, args=(kind, checker.events_endpoint, stop, None, streams),
                                              daemon=True)
    try:
        viewer = Viewer(ctx, checker.alerts_endpoint, ViewState(), jsonl=False)
        publisher = Publisher(connect(ctx, zmq.PUB, checker.events_endpoint))
        await_victim(viewer, publisher)
        rss_start = status_mib(pid, "VmRSS")
        tracked = 0
        flooder.start()
        time.sleep(1.0)  # the flood is under way
        sent: dict[str, float] = {}  # session -> when its key-step was confirmed
        latency: list[float] = []
        health: CheckerHealth | None = None
        period, next_send, end = 1.0 / victim_rate, time.monotonic(), time.monotonic() + seconds
        k = 0
        while time.monotonic() < end + LOST_AFTER_S:
            if time.monotonic() >= next_send and time.monotonic() < end:
                event = victim_keystep(publisher, k)
                sent[event.session] = event.timestamp
                next_send += period
                k += 1
            for message in viewer.receiver.poll(10):
                if isinstance(message, Alert) and message.stream_id == "victim" and not message.replayed:
                    latency.append(time.time() - message.event_timestamp)
                elif isinstance(message, CheckerHealth):
                    health = message
                    tracked = max(tracked, message.streams)
        stop.set()
        rss = peak_rss_mib(pid)
        # Every stream is lost one timeout after its last message, and freed FORGET_AFTER timeouts later.
        freed = await_freed(viewer, (FORGET_AFTER + 2) * stream_timeout_s + 10.0)
        rss_freed = status_mib(pid, "VmRSS") if freed else float("nan")
        viewer.close()
        publisher.sock.close()
    finally:
        stop.set()
        flooder.join(5)
        if flooder.is_alive():
            flooder.kill()
        checker.stop()
        ctx.destroy(linger=0)
    ms = np.array(latency) * 1000
    return {
        "flood": kind,
        "rss_start": rss_start,
        "rss": rss,
        "rss_freed": rss_freed,
        "tracked": tracked,
        "latency": ms,
        "sent": len(sent),
        "lost": len(sent) - len(ms),
        "malformed": health.malformed if health else 0,
        "over_budget": health.over_budget if health else 0,
        "received": health.received if health else 0,
    }


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Run each flood and print one table."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=bounded_option(RUN_SECONDS, integer=False), default=10.0,
                        help="length of each flood")
    parser.add_argument("--floods", default=",".join(FLOODS), help=f"comma-separated, from {', '.join(FLOODS)}")
    parser.add_argument("--victim-rate", type=bounded_option(EVENT_RATE, integer=False), default=4.0,
                        help="victim key-steps per second")
    parser.add_argument("--streams", type=bounded_option(Bound(1, MAX_STREAMS)), default=8,
                        help="stream ids the replay flood goes round")
    parser.add_argument("--stream-timeout", type=bounded_option(Bound(MIN_STREAM_TIMEOUT_S, MAX_STREAM_TIMEOUT_S,
                                                                      note="seconds"), integer=False),
                        default=1.0, help=f"the checker's --stream-timeout: its streams are freed {FORGET_AFTER} "
                                          "times as long after their last message")
    args = parser.parse_args(argv)
    floods = [f for f in args.floods.split(",") if f]
    if unknown := set(floods) - set(FLOODS):
        parser.error(f"unknown flood {sorted(unknown)}")
    graph_path, _ = default_demo_paths()
    table = Table(title=f"checker under a {args.seconds:g} s flood, victim stream at {args.victim_rate:g} alerts/s, "
                        f"replays over {args.streams} stream ids")
    for column in ("flood", "checker RSS start / peak / freed, MiB", "most streams", "victim alert p50 / p99 / max, ms",
                   "lost", "checker counted"):
        table.add_column(column, justify="left" if column in ("flood", "checker counted") else "right")
    for kind in floods:
        row = run_flood(kind, str(graph_path), args.seconds, args.victim_rate, args.streams, args.stream_timeout)
        ms: np.ndarray = row["latency"]  # type: ignore[assignment]
        figures = f"{np.percentile(ms, 50):.1f} / {np.percentile(ms, 99):.1f} / {ms.max():.1f}" if len(ms) else "n/a"
        counted = f"{row['received']} valid, {row['malformed']} malformed, {row['over_budget']} over budget"
        rss = f"{row['rss_start']:.0f} / {row['rss']:.0f} / {row['rss_freed']:.0f}"
        table.add_row(kind, rss, str(row["tracked"]), figures, f"{row['lost']} of {row['sent']}", counted)
    table_console(Console()).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
