"""A peer flooding the checker with garbage does not hold back a well-behaved stream's alerts (a real flooder process
on loopback, the checker in its own process as ``stream-detect`` runs it), with and without CURVE (there the flooder
holds an allowed key: a camera gone wrong, which CURVE does not keep out)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import zmq

from graphs.task_graph import save_graph
from streaming.checker.config import CheckerConfig
from streaming.checker.process import CheckerProcess
from streaming.curve_keys import CurveClient, CurveServer, write_key_set
from streaming.detector import EventPublisher
from streaming.messages import Alert, CheckerHealth, Status, run_of
from streaming.transport import Publisher, Receiver, connect, subscribe
from tests.streaming.helpers import MISTAKE_STEP, tea_graph, wait_for

ROOT = Path(__file__).resolve().parents[2]
ALERT_BOUND_S = 1.0  # a live stream's alert arrives within this long whatever another peer sends

# The flooder: malformed and oversized messages as fast as it can on one socket and, in a thread of the same process,
# a well-behaved stream ("neighbour") on a socket of its own raising an alert twice a second. With two more arguments
# (the checker's public key file, a client's secret key file) both sockets speak CURVE with that client's key.
FLOODER = """
import sys, threading, time, zmq
from streaming.curve_keys import CurveClient
from streaming.detector import EventPublisher
from streaming.transport import Publisher, connect
endpoint = sys.argv[1]
curve = CurveClient.from_files(sys.argv[2], sys.argv[3]) if len(sys.argv) > 3 else None
ctx = zmq.Context()
flood = ctx.socket(zmq.PUB)
flood.setsockopt(zmq.LINGER, 0)
flood.setsockopt(zmq.SNDHWM, 1000)
if curve is not None:
    curve.apply(flood)
flood.connect(endpoint)
beat = (b'{"version":2,"kind":"heartbeat","stream_id":"neighbour","seq":0,"timestamp":1.0,"session":"s",'
        b'"history":[],"current":null,"frames":0,"dropped":0,"fps":0.0,"ended":false}')
garbage = [
    [b"heartbeat/flood", b" " * (100 * 1024)],      # over the 64 KiB payload limit
    [b"heartbeat/flood", b"{not json"],
    [b"heartbeat/flood", b"[" * 60_000],             # nesting that costs the parser
    [b"heartbeat/flood", beat, b"third frame"],
    [b"keystep/neighbour", b"{}"],                   # its neighbour's topic: the per-stream budget counts topics
    [b"heartbeat/flood", beat.replace(b'"frames":0', b'"frames":' + b"9" * 4000)],
]
def neighbour():
    events = EventPublisher(Publisher(connect(ctx, zmq.PUB, endpoint, wait_s=10.0, curve=curve)), "neighbour")
    while True:
        events = EventPublisher(events.publisher, "neighbour")  # a new session: its first step is a mistake
        events.keystep(2, "boil_water", 0.0, 1.0, 0.9)
        time.sleep(0.5)
        events.heartbeat(None, 0, 0, 0.0, ended=True)  # it ends, so that the next session may take the stream
threading.Thread(target=neighbour, daemon=True).start()
print("flooding", flush=True)
k = 0
while True:
    flood.send_multipart(garbage[k % len(garbage)])
    k += 1
"""


def client_keys(keys: Path | None, name: str) -> CurveClient | None:
    """Client ``name``'s keys from the set in ``keys`` (None without CURVE)."""
    if keys is None:
        return None
    return CurveClient.from_files(str(keys / "checker.key"), str(keys / "clients" / f"{name}.key_secret"))


@contextmanager
def checker_beside_a_peer(
    tmp_path: Path, keys: Path | None, script: str, peer: str, topics: tuple[bytes, ...], **config: Any
) -> Iterator[tuple[Receiver, EventPublisher, subprocess.Popen[str]]]:
    """The tea graph's checker in its own process (CURVE with the key set in ``keys``, None: without), a process
    running ``script`` against its events endpoint (with client ``peer``'s keys), a viewer of the checker's
    ``topics`` and a well-behaved stream ``victim``; the processes stopped and the sockets closed on leaving.

    Args:
        config: further `CheckerConfig` fields (``stream_timeout_s``).
    """
    graph = tmp_path / "tea.json"
    save_graph(tea_graph(), graph)
    server = None if keys is None else CurveServer.from_files(str(keys / "checker.key_secret"), str(keys / "clients"))
    peer_keys = [] if keys is None else [str(keys / "checker.key"), str(keys / "clients" / f"{peer}.key_secret")]
    ctx = zmq.Context()
    checker = CheckerProcess(str(graph), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0", curve=server,
                                                       **config))
    process = subprocess.Popen([sys.executable, "-c", script, checker.events_endpoint, *peer_keys], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    try:
        viewer = Receiver(subscribe(connect(ctx, zmq.SUB, checker.alerts_endpoint, curve=client_keys(keys, "viewer")),
                                    topics))
        victim = EventPublisher(Publisher(connect(ctx, zmq.PUB, checker.events_endpoint, wait_s=10.0,
                                                  curve=client_keys(keys, "victim"))), "victim")
        yield viewer, victim, process
    finally:
        process.kill()
        process.wait(5)
        checker.stop()
        ctx.destroy(linger=0)


@pytest.mark.parametrize("curve", [False, True], ids=["open", "curve"])
def test_a_flood_of_garbage_does_not_hold_back_a_live_streams_alert(tmp_path: Path, curve: bool) -> None:
    keys = tmp_path / "keys" if curve else None
    if keys is not None:
        write_key_set(keys, ("flooder", "victim", "viewer"))
    topics = (b"alert/", b"checker/")
    with checker_beside_a_peer(tmp_path, keys, FLOODER, "flooder", topics) as (viewer, victim, flooder):
        assert flooder.stdout is not None and flooder.stdout.readline() == "flooding\n"
        health: list[CheckerHealth] = []

        def take() -> list[Alert]:
            got = viewer.poll(20)
            health.extend(m for m in got if isinstance(m, CheckerHealth))
            return [m for m in got if isinstance(m, Alert) and not m.replayed]

        assert wait_for(lambda: bool(health) and health[-1].malformed > 1000, 30.0, take)  # the flood is under way
        latencies: dict[str, list[float]] = {"victim": [], "neighbour": []}
        for _ in range(8):
            victim.heartbeat(None, 0, 0, 0.0, ended=True)  # it ends, so that the next session may take the stream
            victim = EventPublisher(victim.publisher, "victim")  # a fresh session: its first step is a mistake
            sent = victim.keystep(MISTAKE_STEP, "boil_water", 0.0, 1.0, 0.9)
            deadline = time.monotonic() + 2 * ALERT_BOUND_S
            mine: list[Alert] = []
            while not mine and time.monotonic() < deadline:
                for alert in take():
                    latencies.setdefault(alert.stream_id, []).append(alert.timestamp - alert.event_timestamp)
                    if alert.stream_id == "victim" and alert.run == run_of(sent.session):
                        mine.append(alert)
            assert mine, "the victim's alert never came"
        # The neighbour raises an alert twice a second: wait for three of them, on the count, not on a clock.
        def neighbours() -> None:
            latencies["neighbour"] += [a.timestamp - a.event_timestamp for a in take() if a.stream_id == "neighbour"]

        assert wait_for(lambda: len(latencies["neighbour"]) >= 3, 10.0, neighbours)
        assert len(latencies["victim"]) == 8 and max(latencies["victim"]) < ALERT_BOUND_S
        assert max(latencies["neighbour"]) < ALERT_BOUND_S
        assert health[-1].malformed > 1000 and flooder.poll() is None  # still flooding at the end


# Another allowed key floods a live stream's topic with well-formed heartbeats of its own session, from many sockets.
INTRUDER = """
import sys, zmq
from streaming.curve_keys import CurveClient
from streaming.messages import Heartbeat, encode
endpoint, server_key, secret = sys.argv[1:4]
curve = CurveClient.from_files(server_key, secret)
ctx = zmq.Context()
socks = []
for _ in range(16):
    sock = ctx.socket(zmq.PUB)
    sock.setsockopt(zmq.LINGER, 0)
    curve.apply(sock)
    sock.connect(endpoint)
    socks.append(sock)
beats = [encode(Heartbeat("victim", k, 1.0, "intruder", (), None, k, 0, 5.0, False)) for k in range(1000)]
print("flooding", flush=True)
k = 0
while True:
    for sock in socks:
        try:
            sock.send_multipart(beats[k % 1000], zmq.NOBLOCK)
        except zmq.Again:
            pass
    k += 1
"""


def test_another_allowed_key_flooding_a_live_streams_id_does_not_take_the_stream(tmp_path: Path) -> None:
    # Its heartbeats spent the stream's share of every poll, the live detector's were dropped undecoded, the checker
    # took the stream for lost and handed it to the intruder's session. Each key now has a share of its own.
    keys = tmp_path / "keys"
    write_key_set(keys, ("intruder", "victim", "viewer"))
    with checker_beside_a_peer(tmp_path, keys, INTRUDER, "intruder", (b"status/victim", b"checker/"),
                               stream_timeout_s=2.0) as (viewer, victim, intruder):
        runs: list[tuple[str, bool]] = []
        health: list[CheckerHealth] = []

        def beat_and_take() -> None:
            victim.heartbeat(None, 0, 0, 5.0)
            for m in viewer.poll(100):
                if isinstance(m, CheckerHealth):
                    health.append(m)
                elif isinstance(m, Status):
                    runs.append((m.run, m.lost))

        assert wait_for(lambda: bool(runs), 10.0, beat_and_take)  # the victim's stream is up
        assert intruder.stdout is not None and intruder.stdout.readline() == "flooding\n"
        assert wait_for(lambda: bool(health) and health[-1].stream_taken > 1000, 30.0, beat_and_take), health[-1:]
        flooded = time.monotonic()
        while time.monotonic() - flooded < 3 * 2.0:  # three stream timeouts under the flood
            beat_and_take()
        assert health[-1].stream_taken > 1000 and intruder.poll() is None  # still flooding at the end
        assert {run for run, _ in runs} == {run_of(victim.session)}, "the intruder's session took the stream"
        assert not any(lost for _, lost in runs), "the live stream was taken for lost"
