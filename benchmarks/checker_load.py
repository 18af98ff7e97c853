"""How many detector streams one checker holds: latency, CPU and memory of a real checker under K live streams.

Usage::

    python benchmarks/checker_load.py --streams 100 --rate 10 [--seconds 20] [--curve]
    python benchmarks/checker_load.py --find-max [--rate 10] [--curve]     # the largest K with p99 < 5 ms
    python benchmarks/checker_load.py --streams 100 --rate 10 --flood      # and a peer flooding garbage

A real checker process (`streaming.checker.process`, as ``stream-detect`` runs it) listens on loopback TCP, with
CURVE when ``--curve``. A publisher process drives K synthetic detector streams, each on its own socket as every real
detector has its own connection, through the real `EventPublisher`: every stream confirms ``--rate`` key-steps a
second and sends a heartbeat every 0.5 s, each message carrying the session's history. A session is one execution of
a synthetic procedure (``--steps`` key-steps, a random task graph with one or two pre-conditions per step), so
histories grow from 0 to ``--steps`` as in a real session, then a new session starts; about ``--mistakes`` of the
key-steps are done before a pre-condition (an alert each). A subscriber process takes the checker's output.

For every key-step event the latency is measured from its sending (the event's timestamp) to the first matching
message leaving the checker (the ``step`` message, or the alert if it came first; their timestamps are stamped by the
checker as it builds them), and to its arrival at the subscriber. An event never reflected within 2 s is lost. The
checker's CPU (user + system time over the sending window, percent of one core) and peak resident memory (VmHWM) are
read from /proc. The last line is::

    streams=K rate=R events=N p50_ms=X p99_ms=Y cpu_pct=C rss_mb=M lost=L

``--find-max`` doubles K from 100 while p99 < 5 ms and nothing is lost (or halves it until they are), then bisects
to within 10 %, and prints the largest K that met the target (the checker's stream limit, 256 by default, is raised
to K for the trials).
``--flood`` adds a flooder process that sends malformed and oversized messages as fast as it can
(`benchmarks/checker_flood.py`'s ``malformed`` flood), holding an allowed key under ``--curve``: the well-behaved
streams' alerts must still arrive within 1 s.
"""

from __future__ import annotations

import heapq
import json
import math
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import numpy as np
import zmq
from rich.console import Console
from rich.table import Table

# Nothing at the top may import torch: the spawned processes, the checker's included, re-import this module.
from graphs.checker_settings import CheckerSettings
from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.options import seed_option
from graphs.common.settings_files import COUNT, EVENT_RATE, RUN_SECONDS, Bound, bounded_option
from graphs.task_graph import END, START, TaskGraph, save_graph
from streaming.checker.config import CheckerConfig
from streaming.checker.process import CheckerProcess
from streaming.curve_keys import CurveClient, CurveServer, write_key_set
from streaming.messages import MAX_HISTORY, CheckerHealth, decode, run_of
from streaming.transport import HEARTBEAT_S, VIEW_RECV_HWM, Publisher, connect, subscribe

TARGET_P99_MS = 5.0
FAIR_ALERT_S = 1.0  # a well-behaved stream's alert arrives within this long during a flood
GRACE_S = 2.0  # an event with no reflection this long after the last one was sent is lost
READY_TIMEOUT_S = 120.0  # longest wait for every stream to be tracked by the checker before measuring
FIND_MAX_START = 100
FIND_MAX_RESOLUTION = 0.1  # bisect until the gap between passing and failing K is within 10 %


# -- the synthetic procedure ---------------------------------------------------------------------------------------
def synthetic_preconditions(steps: int, seed: int) -> dict[int, frozenset[int]]:
    """A procedure of ``steps`` key-steps (ids 1..steps): each needs one or two of the few steps before it.

    Args:
        steps: number of key-steps.
        seed: random seed.

    Returns:
        step -> its pre-conditions (empty for the first).
    """
    rng = random.Random(seed)
    pre: dict[int, frozenset[int]] = {1: frozenset()}
    for step in range(2, steps + 1):
        window = list(range(max(1, step - 4), step))
        pre[step] = frozenset(rng.sample(window, min(len(window), rng.choice((1, 2)))))
    return pre


def graph_of(pre: dict[int, frozenset[int]]) -> TaskGraph:
    """The binary task graph of a procedure (START before steps without pre-conditions, END after the last ones)."""
    steps = sorted(pre)
    nodes = [START, *steps, END]
    index = {n: i for i, n in enumerate(nodes)}
    adjacency = np.zeros((len(nodes), len(nodes)), dtype=bool)
    needed = set().union(*pre.values())
    for step, reqs in pre.items():
        for req in reqs or (START,):
            adjacency[index[step], index[req]] = True
    for step in steps:
        if step not in needed:
            adjacency[index[END], index[step]] = True
    return TaskGraph(tuple(steps), tuple(f"step {s}" for s in steps), adjacency, scenario="synthetic-load")


def execution(pre: dict[int, frozenset[int]], rng: random.Random, mistakes: float) -> list[int]:
    """One execution: every step once, a ready one each time, except that with probability ``mistakes`` a step whose
    pre-conditions are not all done yet is taken (an alert)."""
    done: set[int] = set()
    order: list[int] = []
    left = set(pre)
    while left:
        ready = sorted(s for s in left if pre[s] <= done)
        early = sorted(left - set(ready))
        step = rng.choice(early) if early and rng.random() < mistakes else rng.choice(ready or early)
        order.append(step)
        done.add(step)
        left.discard(step)
    return order


def mistakes_of(graph: TaskGraph, steps: list[int]) -> frozenset[int]:
    """Indexes of the steps the checker alerts: the checker the checker process runs (`CheckerConfig`'s default
    `CheckerSettings`), not the binary rule, which alerts again for every later step that needs an omission the
    probabilistic checker has already named."""
    checker = CheckerSettings().new(graph)
    return frozenset(i for i, step in enumerate(steps) if checker.observe(step).is_mistake)


# -- processes ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadConfig:
    """One trial.

    Args:
        streams: detector streams (K).
        rate: key-steps per second per stream (R).
        seconds: length of the measured window.
        steps: key-steps per session (one procedure execution).
        mistakes: share of key-steps done before a pre-condition.
        curve: CURVE on both checker sockets.
        flood: a flooder process sends malformed and oversized messages meanwhile.
        seed: random seed.
    """

    streams: int
    rate: float
    seconds: float = 20.0
    steps: int = 40
    mistakes: float = 0.1
    curve: bool = False
    flood: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.streams < 1 or not self.rate > 0 or not self.seconds > 0 or self.steps < 2:
            raise ValueError(f"bad load: {self}")
        if not 0 <= self.mistakes <= 1:
            raise ValueError(f"LoadConfig.mistakes = {self.mistakes} must be in [0, 1]")


@dataclass
class Sent:
    """What the publisher sent in the measured window: event key -> send time, and which events are mistakes."""

    events: dict[tuple[str, str, int], float] = field(default_factory=dict)
    mistakes: set[tuple[str, str, int]] = field(default_factory=set)
    heartbeats: int = 0
    late_s: float = 0.0  # the publisher's worst delay behind its schedule (a busy machine)


@dataclass
class Seen:
    """What the subscriber got: event key -> (the checker's timestamp, arrival) of the first reflection."""

    steps: dict[tuple[str, str, int], tuple[float, float]] = field(default_factory=dict)
    alerts: dict[tuple[str, str, int], tuple[float, float]] = field(default_factory=dict)
    health: CheckerHealth | None = None
    messages: int = 0


def publish(endpoint: str, config: LoadConfig, curve: CurveClient | None, go: EventType, conn: Connection) -> None:
    """The publisher process: K streams, heartbeats until ``go``, then the measured window; the record goes back."""
    # The real detector's publisher; its module loads torch, which only this process may pay for (the checker
    # child re-imports this script, and its memory is what is measured).
    from streaming.detector import EventPublisher

    ctx = zmq.Context()
    rng = random.Random(config.seed)
    pre = synthetic_preconditions(config.steps, config.seed)
    graph = graph_of(pre)
    socks = [connect(ctx, zmq.PUB, endpoint, curve=curve) for _ in range(config.streams)]
    names = [f"load{k:04d}" for k in range(config.streams)]
    publishers = [EventPublisher(Publisher(sock), name) for sock, name in zip(socks, names, strict=True)]
    # Every session a stream can reach in the run, with the steps the checker will flag, drawn before the clock
    # starts: the sender does no checking while it keeps time.
    sessions = math.ceil(config.rate * config.seconds / config.steps) + 1
    queued = [deque((plan, mistakes_of(graph, plan))
                    for plan in (execution(pre, rng, config.mistakes) for _ in range(sessions)))
              for _ in range(config.streams)]  # fmt: skip
    current = [q.popleft() for q in queued]  # per stream: (its session's plan, the indexes the checker flags)
    sent = Sent()
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not go.wait(HEARTBEAT_S) and time.monotonic() < deadline:
            for events in publishers:
                events.heartbeat(None, 0, 0, 0.0)
        start = time.monotonic()
        end = start + config.seconds
        due: list[tuple[float, int, int]] = []  # (when, 0 key-step / 1 heartbeat, stream)
        for k in range(config.streams):
            heapq.heappush(due, (start + rng.random() / config.rate, 0, k))
            heapq.heappush(due, (start + rng.random() * HEARTBEAT_S, 1, k))
        frames = [0] * config.streams
        while due:
            when, kind, k = heapq.heappop(due)
            if when >= end:
                continue
            wait = when - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            else:
                sent.late_s = max(sent.late_s, -wait)
            events = publishers[k]
            frames[k] += 1
            if kind == 1:
                events.heartbeat(events.history[-1] if events.history else None, frames[k], 0, 30.0)
                sent.heartbeats += 1
                heapq.heappush(due, (when + HEARTBEAT_S, 1, k))
                continue
            index = len(events.history)
            plan, flagged = current[k]
            message = events.keystep(plan[index], f"step {plan[index]}", float(index), index + 0.5, 0.9)
            key = (message.stream_id, run_of(message.session), index)
            sent.events[key] = message.timestamp
            if index in flagged:
                sent.mistakes.add(key)
            if index + 1 == len(plan):  # the execution is over: it ends, and the next key-step starts a new session
                events.heartbeat(None, frames[k], 0, 30.0, ended=True)  # one live session per stream id
                publishers[k] = EventPublisher(events.publisher, events.stream_id)
                current[k] = queued[k].popleft()
            heapq.heappush(due, (when + 1.0 / config.rate, 0, k))
        conn.send(sent)
    finally:
        for sock in socks:
            sock.close()
        ctx.destroy(linger=0)


def take_output(endpoint: str, curve: CurveClient | None, stop: EventType, conn: Connection) -> None:
    """The subscriber process: the first reflection of every key-step event, and the checker's counts."""
    ctx = zmq.Context()
    sock = subscribe(connect(ctx, zmq.SUB, endpoint, recv_hwm=VIEW_RECV_HWM, curve=curve),
                     (b"step/", b"alert/", b"checker"))
    seen = Seen()
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    try:
        while not stop.is_set():
            if not poller.poll(50):
                continue
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                now = time.time()
                seen.messages += 1
                topic, payload = frames[0], frames[1]
                if topic.startswith(b"checker/"):
                    message = decode(frames)
                    assert isinstance(message, CheckerHealth)
                    seen.health = message
                    conn.send(("health", message.streams))
                    continue
                if b'"replayed":true' in payload:
                    continue  # a periodic re-send: never the first reflection of a live event
                # The checker's own output, read with the fields needed only: this process shares the two cores.
                body = json.loads(payload)
                book = seen.steps if topic.startswith(b"step/") else seen.alerts
                book.setdefault((body["stream_id"], body["run"], body["index"]), (body["timestamp"], now))
        conn.send(("seen", seen))
    finally:
        sock.close()
        ctx.destroy(linger=0)


# -- one trial -------------------------------------------------------------------------------------------------------
@dataclass
class Result:
    """The figures of one trial."""

    config: LoadConfig
    events: int
    lost: int
    latency_ms: np.ndarray  # leaving the checker, per reflected event
    arrival_ms: np.ndarray  # at the subscriber
    alert_ms: np.ndarray  # mistakes: to the alert leaving the checker
    alerts_lost: int
    mistakes: int
    cpu_pct: float
    rss_mb: float
    heartbeats: int
    late_s: float
    health: CheckerHealth | None
    load: tuple[float, float]

    def p(self, q: float, values: np.ndarray | None = None) -> float:
        data = self.latency_ms if values is None else values
        return float(np.percentile(data, q)) if len(data) else float("nan")

    @property
    def passed(self) -> bool:
        """p99 under the target and nothing lost."""
        return self.lost == 0 and self.p(99) < TARGET_P99_MS

    def line(self) -> str:
        """The summary line."""
        return (f"streams={self.config.streams} rate={self.config.rate:g} events={self.events} "
                f"p50_ms={self.p(50):.2f} p99_ms={self.p(99):.2f} cpu_pct={self.cpu_pct:.1f} "
                f"rss_mb={self.rss_mb:.1f} lost={self.lost}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _keys(folder: Path, curve: bool) -> tuple[CurveServer | None, CurveClient | None, CurveClient | None]:
    """The checker's keys and two clients (the streams, the subscriber) when ``curve``."""
    if not curve:
        return None, None, None
    write_key_set(folder, ("load", "probe"))
    server = CurveServer.from_files(str(folder / "checker.key_secret"), str(folder / "clients"))
    streams, probe = (CurveClient.from_files(str(folder / "checker.key"), str(folder / "clients" / f"{n}.key_secret"))
                      for n in ("load", "probe"))
    return server, streams, probe


def run_trial(config: LoadConfig) -> Result:
    """Start a checker, a subscriber and the publisher (and a flooder), measure one window, stop everything."""
    # Imported here, not at the top, so that the checker child (which re-imports this module) does not load the
    # flood benchmark's viewer; spawned children get this path too.
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks.checker_flood import peak_rss_mib

    spawn = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        graph = Path(tmp) / "graph.json"
        save_graph(graph_of(synthetic_preconditions(config.steps, config.seed)), graph)
        server, streams, probe = _keys(Path(tmp) / "keys", config.curve)
        checker = CheckerProcess(str(graph), CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0",
                                                           max_streams=max(256, config.streams), curve=server))
        go, stop, flood_stop = spawn.Event(), spawn.Event(), spawn.Event()
        sub_end, sub_child = spawn.Pipe(duplex=False)
        pub_end, pub_child = spawn.Pipe(duplex=False)
        children = [
            spawn.Process(target=take_output, args=(checker.alerts_endpoint, probe, stop, sub_child), daemon=True),
            spawn.Process(target=publish, args=(checker.events_endpoint, config, streams, go, pub_child), daemon=True),
        ]
        if config.flood:
            from benchmarks.checker_flood import flood

            flooder = (flood, ("malformed", checker.events_endpoint, flood_stop, streams))
            children.append(spawn.Process(target=flooder[0], args=flooder[1], daemon=True))
        load_before = os.getloadavg()[0]
        pid = checker.process.pid
        assert pid is not None
        try:
            for child in children:
                child.start()
            _await_streams(sub_end, config.streams)
            if config.flood:
                time.sleep(1.0)  # the flood is under way
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            go.set()
            if not pub_end.poll(config.seconds + READY_TIMEOUT_S):
                raise RuntimeError("the publisher did not finish")
            sent: Sent = pub_end.recv()
            cpu1, t1 = cpu_seconds(pid), time.monotonic()
            flood_stop.set()
            time.sleep(GRACE_S)
            stop.set()
            seen = _await_seen(sub_end)
            rss = peak_rss_mib(pid)
        finally:
            go.set()
            stop.set()
            flood_stop.set()
            for child in children:
                child.join(10)
                if child.is_alive():
                    child.kill()
            checker.stop()
    return _figures(config, sent, seen, 100 * (cpu1 - cpu0) / (t1 - t0), rss, (load_before, os.getloadavg()[0]))


def _await_streams(conn: Connection, streams: int) -> None:
    """Wait until the checker's health (seen by the subscriber) counts every stream: both hops are connected."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if conn.poll(1.0):
            kind, value = conn.recv()
            if kind == "health" and value >= streams:
                return
    raise RuntimeError(f"the checker did not track all {streams} streams within {READY_TIMEOUT_S:g} s")


def _await_seen(conn: Connection) -> Seen:
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline and conn.poll(deadline - time.monotonic()):
        kind, value = conn.recv()
        if kind == "seen":
            return value
    raise RuntimeError("the subscriber did not report")


def _figures(
    config: LoadConfig, sent: Sent, seen: Seen, cpu_pct: float, rss: float, load: tuple[float, float]
) -> Result:
    latency, arrival, alert_ms = [], [], []
    lost = alerts_lost = 0
    for key, at in sent.events.items():
        firsts = [hit for hit in (seen.steps.get(key), seen.alerts.get(key)) if hit is not None]
        if not firsts:
            lost += 1
            continue
        out, came = min(firsts)
        latency.append(out - at)
        arrival.append(came - at)
        if key in sent.mistakes:
            if key in seen.alerts:
                alert_ms.append(seen.alerts[key][0] - at)
            else:
                alerts_lost += 1
    ms = 1000.0
    return Result(config, len(sent.events), lost, np.array(latency) * ms, np.array(arrival) * ms,
                  np.array(alert_ms) * ms, alerts_lost, len(sent.mistakes), cpu_pct, rss, sent.heartbeats,
                  sent.late_s, seen.health, load)


# -- reporting -------------------------------------------------------------------------------------------------------
def table(results: list[Result]) -> Table:
    """One row per trial."""
    out = Table(title="checker under load (one checker process, loopback TCP)")
    for name in ("streams", "rate/s", "CURVE", "flood", "events (lost)", "alerts (lost)",
                 "p50/p99/max ms out of checker", "p99 ms at viewer", "alert p99/max ms",
                 "checker CPU %", "peak RSS MiB", "checker counted", "sender late ms", "load avg"):
        out.add_column(name, justify="right")
    for r in results:
        h = r.health
        counted = (f"{h.received} in, {h.malformed} malformed, {h.over_budget} over budget, {h.stream_limit} refused, "
                   f"{h.stream_taken} stream taken, {h.denied} denied" if h else "n/a")
        out.add_row(str(r.config.streams), f"{r.config.rate:g}", "yes" if r.config.curve else "no",
                    "yes" if r.config.flood else "no", f"{r.events} ({r.lost})", f"{r.mistakes} ({r.alerts_lost})",
                    f"{r.p(50):.2f} / {r.p(99):.2f} / {r.p(100):.1f}", f"{r.p(99, r.arrival_ms):.2f}",
                    f"{r.p(99, r.alert_ms):.1f} / {r.p(100, r.alert_ms):.1f}", f"{r.cpu_pct:.1f}", f"{r.rss_mb:.1f}",
                    counted, f"{1000 * r.late_s:.0f}", f"{r.load[0]:.1f} -> {r.load[1]:.1f}")
    return out


def find_max(base: LoadConfig, console: Console) -> tuple[int, list[Result]]:
    """The largest K whose p99 stays under the target with nothing lost (doubling or halving, then bisection)."""
    results: list[Result] = []

    def trial(k: int) -> Result:
        result = run_trial(LoadConfig(k, base.rate, base.seconds, base.steps, base.mistakes, base.curve, base.flood,
                                      base.seed))
        results.append(result)
        console.print(result.line() + ("" if result.passed else "  (over the target)"), highlight=False)
        return result

    passing, failing = 0, 0
    k = FIND_MAX_START
    first = trial(k).passed
    while True:  # double while the target holds, or halve until it does: bracket the largest K
        if first:
            passing, k = k, 2 * k
            if not trial(k).passed:
                failing = k
                break
        else:
            failing, k = k, k // 2
            if k == 0:
                return 0, results
            if trial(k).passed:
                passing = k
                break
    while failing - passing > max(1, int(FIND_MAX_RESOLUTION * passing)):
        middle = (passing + failing) // 2
        if trial(middle).passed:
            passing = middle
        else:
            failing = middle
    return passing, results


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Run the trial(s), print the table, then the summary line last."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=bounded_option(COUNT), default=100, help="detector streams K (default 100)")
    parser.add_argument("--rate", type=bounded_option(EVENT_RATE, integer=False), default=10.0,
                        help="key-steps per second per stream (default 10)")
    parser.add_argument("--seconds", type=bounded_option(RUN_SECONDS, integer=False), default=20.0,
                        help="measured window (default 20)")
    parser.add_argument("--steps", type=bounded_option(Bound(2, MAX_HISTORY)), default=40,
                        help="key-steps per session (default 40)")
    parser.add_argument("--mistakes", type=bounded_option(Bound(0, 1), integer=False), default=0.1,
                        help="share of steps done too early (default 0.1)")
    parser.add_argument("--curve", action="store_true", help="CURVE on the checker's sockets")
    parser.add_argument("--flood", action="store_true", help="a peer floods malformed and oversized messages")
    parser.add_argument("--find-max", action="store_true", help="the largest K with p99 under 5 ms at --rate")
    parser.add_argument("--seed", type=seed_option, default=0)
    args = parser.parse_args(argv)
    config = LoadConfig(args.streams, args.rate, args.seconds, args.steps, args.mistakes, args.curve, args.flood,
                        args.seed)
    console = table_console(Console())
    console.print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start", highlight=False)
    if args.find_max:
        best, results = find_max(config, console)
        console.print(table(results))
        console.print(f"largest K with p99 < {TARGET_P99_MS:g} ms and nothing lost at rate {args.rate:g}: {best}"
                      + (" (the checker's default stream limit is 256)" if best > 256 else ""), highlight=False)
        final = next((r for r in results if r.config.streams == best), results[-1])
    else:
        final = run_trial(config)
        console.print(table([final]))
        if config.flood:
            worst = final.p(100, final.alert_ms)
            verdict = "met" if worst < FAIR_ALERT_S * 1000 and final.alerts_lost == 0 else "MISSED"
            console.print(f"fairness: slowest alert {worst:.1f} ms, {final.alerts_lost} lost (target: every alert "
                          f"within {FAIR_ALERT_S:g} s: {verdict})", highlight=False)
    print(final.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
