"""A site left running while cameras, viewers and pages come and go: does anything grow?

Usage::

    python benchmarks/churn_soak.py                      # 600 s, 5 cameras at a time, each 3-8 s long
    python benchmarks/churn_soak.py --duration 300 --cameras 8 --port 46300   # ports 46300-46302

A real ``stream-detect checker`` (``--stream-timeout 2``: an idle stream is freed 24 s after it went quiet), a
``stream-detect dashboard`` and a ``stream-detect view`` drawing on a pseudo-terminal run as child processes.
Meanwhile ``--cameras`` detector streams at a time, each on a connection of its own (a detector process), each with
a stream id never used before, send heartbeats and key-steps of the demo procedure for 3-8 s, then end (70 %) or
vanish (lost); viewers connect a SUB socket for a moment and leave, and dashboard pages (HTTP requests, then a
WebSocket for 0.5-4 s, a third cut off without a close) come and go. Every ``--every`` seconds the three services'
resident memory, open file descriptors, threads and CPU time are read from /proc.

Figures per service: RSS, descriptors and threads at the first reading (one ``--every`` into the churn) and at the
last (``--settle`` seconds after it stopped, once the checker has freed every stream), RSS's slope over the second
half of the churn (MB per hour, a least-squares fit: the first half is warm-up), and the CPU share of one core over
the first and the last quarter of the churn. Targets: descriptors and threads back where they were, no RSS slope
beyond noise, CPU flat. A view or a dashboard holds at most 256 streams and drops one the checker has not re-sent for
10 minutes: under this churn (about 50 new stream ids a minute) they fill up to 256 within the first 10 minutes, and
a run longer than that shows the plateau. The last line is::

    duration_s=D streams=N checker_rss_mb=A->B checker_slope_mb_h=S view_cpu_pct=X->Y dashboard_cpu_pct=X->Y ...
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import random
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zmq

from graphs.common.command_line import ArgumentParser
from graphs.common.errors import exit_on_input_error
from graphs.common.settings_files import COUNT, RUN_SECONDS, WAIT_SECONDS, Bound, bounded_option
from streaming.detector import EventPublisher
from streaming.transport import Publisher, connect_waiting

ROOT = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "streaming.stream_detect_cli"]
ORDERS = ((2, 1, 3, 4, 5, 6), (3, 4, 1, 2, 5, 6))  # boil_water before fill_kettle (an alert), and a valid order
NAMES = {1: "fill_kettle", 2: "boil_water", 3: "get_cup", 4: "add_teabag", 5: "pour_water", 6: "add_milk"}
READY_S = 60.0


@dataclass
class Samples:
    """One process's readings: (seconds since the start, RSS MB, descriptors, threads, CPU seconds)."""

    pid: int
    rows: list[tuple[float, float, int, int, float]] = field(default_factory=list)

    def read(self, t: float) -> None:
        """One reading from /proc (none once the process is gone)."""
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
            fds = len(os.listdir(f"/proc/{self.pid}/fd"))
            stat = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        rss = int(fields["VmRSS"].split()[0]) / 1024
        cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
        self.rows.append((t, rss, fds, int(fields["Threads"]), cpu))

    def figures(self) -> dict[str, float]:
        """Start and end values, the second half's RSS slope (MB/h), CPU % of the first and last quarter."""
        t, rss, fds, threads, cpu = (np.array(column, dtype=float) for column in zip(*self.rows, strict=True))
        churn = slice(0, len(t) - 1)  # the last reading is the settled one, after the churn
        tc, rc = t[churn], rss[churn]
        half = tc >= tc[0] + (tc[-1] - tc[0]) / 2
        slope = float(np.polyfit(tc[half], rc[half], 1)[0] * 3600) if half.sum() > 2 else float("nan")
        quarter = max(1, (len(t) - 1) // 4)

        def cpu_pct(a: int, b: int) -> float:
            return float(100 * (cpu[b] - cpu[a]) / max(t[b] - t[a], 1e-9))

        return {"rss_start": rss[0], "rss_end": rss[-1], "rss_max": rss.max(), "slope": slope,
                "fds_start": fds[0], "fds_end": fds[-1], "threads_start": threads[0], "threads_end": threads[-1],
                "cpu_first": cpu_pct(0, quarter), "cpu_last": cpu_pct(len(t) - 2 - quarter, len(t) - 2)}


def start(args: list[str], pattern: str, ready_s: float = READY_S,
          stdout: int | None = None) -> tuple[subprocess.Popen[str], re.Match[str]]:
    """A command of the project (``stream-detect ARGS``), and the match of ``pattern`` in the first stderr line that
    has it; its later stderr is drained unread (a full pipe would stall it). ``stdout``: as for `subprocess.Popen`.
    `benchmarks.dashboard_load` starts its dashboard with it too."""
    process = subprocess.Popen([*COMMAND, *args], cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    deadline = time.monotonic() + ready_s
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            raise RuntimeError(f"{args[0]} stopped: exit status {process.wait()}")
        if (found := re.search(pattern, line)) is not None:
            threading.Thread(target=process.stderr.read, daemon=True).start()  # its log, drained unread
            return process, found
    raise RuntimeError(f"{args[0]} did not start")


def camera(ctx: zmq.Context, endpoint: str, stream_id: str, rng: random.Random) -> None:
    """One short detector session on a connection of its own; it ends, or vanishes (lost)."""
    sock, watch = connect_waiting(ctx, zmq.PUB, endpoint, "--connect", 10.0)
    events = EventPublisher(Publisher(sock, watch), stream_id)
    order, frames, done = rng.choice(ORDERS), 0, 0
    end, next_step = time.monotonic() + rng.uniform(3, 8), time.monotonic() + 0.8
    while time.monotonic() < end:
        frames += 2
        events.heartbeat(order[done % 6], frames, 0, 5.0)
        if time.monotonic() >= next_step and done < 6:
            events.keystep(order[done], NAMES[order[done]], done, done + 0.5, 0.9)
            done, next_step = done + 1, time.monotonic() + 0.8
        time.sleep(0.4)
    if rng.random() < 0.7:
        for _ in range(3):
            events.heartbeat(None, frames, 0, 5.0, ended=True)
            time.sleep(0.1)
    watch.close()
    sock.close()


def cameras(endpoint: str, count: int, until: float, started: list[int]) -> None:
    """``count`` cameras at a time until ``until``, each with a stream id never used before."""
    ctx = zmq.Context()
    lock = threading.Lock()

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < until:
            with lock:
                started[0] += 1
                stream = f"station-{started[0]:05d}"
            camera(ctx, endpoint, stream, rng)

    workers = [threading.Thread(target=worker, args=(k,)) for k in range(count)]
    for w in workers:
        w.start()
        time.sleep(0.7)
    for w in workers:
        w.join()
    ctx.destroy(linger=0)


async def visitors(alerts: str, page: str, until: float) -> dict[str, int]:
    """Viewers (SUB sockets) and dashboard pages that come and go until ``until``."""
    import aiohttp

    counts = {"viewers": 0, "pages": 0}
    ctx = zmq.Context()

    async def viewer() -> None:
        while time.monotonic() < until:
            sock = ctx.socket(zmq.SUB)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(alerts)
            sock.setsockopt(zmq.SUBSCRIBE, random.choice((b"", b"alert/", b"status/")))
            await asyncio.sleep(random.uniform(0.2, 1.5))
            sock.close()
            counts["viewers"] += 1

    async def pages() -> None:
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < until:
                async with session.get(page + "api/state") as answer:
                    await answer.read()
                async with session.ws_connect(page + "ws", origin=page.rstrip("/")) as ws:
                    leave = time.monotonic() + random.uniform(0.5, 4)
                    while time.monotonic() < leave:
                        with contextlib.suppress(TimeoutError):
                            await ws.receive(timeout=0.5)
                    counts["pages"] += 1
                    connection = ws._response.connection if ws._response is not None else None
                    if random.random() < 0.3 and connection is not None and connection.transport is not None:
                        connection.transport.abort()  # a page that vanishes without a close

    try:
        await asyncio.gather(viewer(), viewer(), pages(), pages(), pages())
    finally:
        ctx.destroy(linger=0)
    return counts


def drain(fd: int) -> None:
    """Read what the view draws until its terminal closes (a full terminal would stop it drawing)."""
    with contextlib.suppress(OSError):
        while os.read(fd, 65536):
            pass


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Run the churn, print one line per service and the last line."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=bounded_option(RUN_SECONDS, integer=False), default=600.0,
                        help="seconds of churn (default 600)")
    parser.add_argument("--cameras", type=bounded_option(COUNT), default=5,
                        help="detector streams at a time (default 5)")
    parser.add_argument("--every", type=bounded_option(RUN_SECONDS, integer=False), default=10.0,
                        help="seconds between readings (default 10)")
    parser.add_argument("--settle", type=bounded_option(WAIT_SECONDS, integer=False), default=30.0,
                        help="seconds after the churn before the last reading (default 30: the checker frees an idle "
                             "stream after 24 s)")
    parser.add_argument("--port", type=bounded_option(Bound(0, 65533, note="0: free ones")), default=0,
                        help="first of three loopback ports: checker in, checker out, dashboard (default: free ones)")
    args = parser.parse_args(argv)
    ports = [args.port + k if args.port else 0 for k in range(3)]
    checker, bound = start(["checker", "--demo", "--bind", f"tcp://127.0.0.1:{ports[0]}", "--publish",
                            f"tcp://127.0.0.1:{ports[1]}", "--stream-timeout", "2"],
                           r"detectors connect to (\S+), viewers to (\S+)")
    events, alerts = bound.group(1), bound.group(2)
    dashboard, served = start(["dashboard", "--connect", alerts, "--demo", "--bind", f"127.0.0.1:{ports[2]}"],
                              r"serving (http://\S+)")
    master, slave = pty.openpty()  # the view draws only on a terminal: its redraws are what grows with its rows
    view = subprocess.Popen([*COMMAND, "view", "--connect", alerts, "--demo"], cwd=ROOT, stdin=slave, stdout=slave,
                            stderr=subprocess.DEVNULL, env=os.environ | {"TERM": "xterm", "COLUMNS": "200",
                                                                         "LINES": "60"})
    os.close(slave)
    threading.Thread(target=drain, args=(master,), daemon=True).start()
    samples = {name: Samples(p.pid) for name, p in (("checker", checker), ("dashboard", dashboard), ("view", view))}
    t0 = time.monotonic()
    until = t0 + args.duration
    started = [0]
    churn = threading.Thread(target=cameras, args=(events, args.cameras, until, started))
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(args.every):  # the first reading once every service has started and met the churn
            for s in samples.values():
                s.read(time.monotonic() - t0)

    sampler = threading.Thread(target=sample)
    try:
        sampler.start()
        churn.start()
        visits = asyncio.run(visitors(alerts, served.group(1), until))
        churn.join()
        stop.set()
        sampler.join()
        time.sleep(args.settle)  # the checker frees the last streams; descriptors and threads should be back
        settled = time.monotonic() - t0
        for s in samples.values():
            s.read(settled)
    finally:
        stop.set()
        for process in (view, dashboard, checker):
            process.terminate()
            process.wait(10)
    line = [f"duration_s={args.duration:.0f}", f"streams={started[0]}", f"viewers={visits['viewers']}",
            f"pages={visits['pages']}"]
    for name, s in samples.items():
        f = s.figures()
        print(f"{name}: RSS {f['rss_start']:.1f} -> {f['rss_end']:.1f} MB (max {f['rss_max']:.1f}), second half "
              f"{f['slope']:+.1f} MB/h; fds {f['fds_start']:.0f} -> {f['fds_end']:.0f}; threads "
              f"{f['threads_start']:.0f} -> {f['threads_end']:.0f}; CPU {f['cpu_first']:.1f} % -> {f['cpu_last']:.1f} %"
              " of a core (first and last quarter)")
        line += [f"{name}_rss_mb={f['rss_start']:.1f}->{f['rss_end']:.1f}", f"{name}_slope_mb_h={f['slope']:+.1f}",
                 f"{name}_fds={f['fds_start']:.0f}->{f['fds_end']:.0f}",
                 f"{name}_threads={f['threads_start']:.0f}->{f['threads_end']:.0f}",
                 f"{name}_cpu_pct={f['cpu_first']:.1f}->{f['cpu_last']:.1f}"]
    print(" ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
