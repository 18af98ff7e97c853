"""The dashboard under load: how fast alerts reach open pages, its memory over time, and a page that stops reading.

Usage::

    python benchmarks/dashboard_load.py                          # 100 streams at 10 key-steps/s, 20 pages, 600 s
    python benchmarks/dashboard_load.py --duration 60             # a shorter run

A real checker process (`streaming.checker.process`) on loopback TCP takes K synthetic detector streams from a
publisher process (each stream on its own socket, as every real detector has its own connection): every stream
confirms ``--rate`` key-steps a second of the demo procedure and sends a heartbeat every 0.5 s, each message carrying
its session's history; a session is one execution of the six demo steps, and every third one starts with
``boil_water`` before ``fill_kettle`` (one alert each); then a new session starts on the stream. A real
``stream-detect dashboard`` process reads the checker's output, and ``--pages`` page clients (WebSocket clients in
this process, as the page's script is one) take what it pushes.

Figures (after ``--warmup`` seconds, 10 by default: the streams connect and their sessions start at once, a burst
the run never sees again; the worst latency of the warm-up is shown beside): for every alert each page receives, the
latency from the alert leaving the checker (its ``timestamp``, stamped by the checker as it sends it; one machine,
one clock) to its arrival at the page, and the part of it before the dashboard received it; the dashboard's resident
memory (VmRSS from /proc) sampled every 2 s; and the pages' latencies before and after, half-way through, one more
page connects and then stops reading (a raw socket that completes the WebSocket handshake and never reads again: a
frozen browser tab). Targets: p99 < 500 ms, memory flat over the run, the other pages no slower with the frozen one.
The last line is::

    streams=K rate=R pages=P duration_s=D sent_rate=S alerts=N p50_ms=X p99_ms=Y p99_frozen_ms=Z rss_start_mb=A \
rss_max_mb=B rss_end_mb=C missed=M pages_closed=F
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.settings_files import COUNT, EVENT_RATE, RUN_SECONDS, WAIT_SECONDS, bounded_option

# Nothing at the top may import torch: the spawned publisher re-imports this module.
from streaming.checker.config import CheckerConfig
from streaming.checker.process import CheckerProcess

MISTAKE = (2, 1, 3, 4, 5, 6)  # boil_water before fill_kettle: one alert (the demo graph's mistake)
CORRECT = (3, 4, 1, 2, 5, 6)
NAMES = {1: "fill_kettle", 2: "boil_water", 3: "get_cup", 4: "add_teabag", 5: "pour_water", 6: "add_milk"}
HEARTBEAT_S = 0.5
RSS_EVERY_S = 2.0
READY_TIMEOUT_S = 120.0
ROOT = Path(__file__).resolve().parents[1]


def publish(endpoint: str, streams: int, rate: float, stop: EventType, sent: Any) -> None:
    """K synthetic detector streams (a spawned process): key-steps at ``rate`` a second each, heartbeats every 0.5 s.

    Every stream sends on its own socket; its key-steps are spread evenly over the second, streams staggered.
    """
    import zmq

    from streaming.messages import Heartbeat, KeyStepEvent
    from streaming.transport import Publisher, connect

    ctx = zmq.Context()
    pubs = [Publisher(connect(ctx, zmq.PUB, endpoint, wait_s=30.0)) for _ in range(streams)]
    seq = [0] * streams
    session = [secrets.token_hex(6) for _ in range(streams)]
    history: list[list[int]] = [[] for _ in range(streams)]
    sessions = [k for k in range(streams)]  # session counters, staggered so mistakes spread over streams
    period = 1.0 / (rate * streams)
    start = time.monotonic()
    next_beat = start + HEARTBEAT_S
    tick = 0
    while not stop.is_set():
        due = start + tick * period
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        k = tick % streams
        tick += 1
        order = MISTAKE if sessions[k] % 3 == 0 else CORRECT
        step = order[len(history[k])]
        history[k].append(step)
        t = time.time()
        video = float(len(history[k]))
        pubs[k].send(KeyStepEvent(f"station-{k:03d}", seq[k], t, step, NAMES[step], video, video + 0.9, 0.9,
                                  len(history[k]) - 1, session[k], tuple(history[k])))  # fmt: skip
        seq[k] += 1
        sent.value += 1
        if len(history[k]) == len(order):  # the execution is over: it ends (as a detector's last heartbeat says)
            pubs[k].send(Heartbeat(f"station-{k:03d}", seq[k], t, session[k], tuple(history[k]), None,
                                   10 * len(history[k]), 0, 5.0, True))  # fmt: skip
            seq[k] += 1
            history[k], session[k] = [], secrets.token_hex(6)  # and the next one is a new session
            sessions[k] += 1
        if time.monotonic() >= next_beat:
            t = time.time()
            for j in range(streams):
                pubs[j].send(Heartbeat(f"station-{j:03d}", seq[j], t, session[j], tuple(history[j]), None,
                                       10 * len(history[j]), 0, 5.0, False))  # fmt: skip
                seq[j] += 1
            next_beat += HEARTBEAT_S
    ctx.destroy(linger=0)


@dataclass
class Page:
    """What one page client received."""

    latencies: list[tuple[float, float]] = field(default_factory=list)  # (arrival time, ms since the checker sent it)
    hops: list[float] = field(default_factory=list)  # ms from the checker sending it to the dashboard receiving it
    alert_ids: dict[int, float] = field(default_factory=dict)  # id -> when the checker sent it
    snapshots: int = 0


async def page_client(url: str, page: Page, stop: asyncio.Event) -> None:
    """One open page: a WebSocket that reads everything the dashboard pushes."""
    import aiohttp

    async with aiohttp.ClientSession() as session, session.ws_connect(url + "ws", max_msg_size=0) as ws:
        while not stop.is_set():
            try:
                message = await ws.receive(timeout=0.5)
            except TimeoutError:
                continue
            if message.type != aiohttp.WSMsgType.TEXT:
                break
            now = time.time()
            text = message.data
            # Only alerts and snapshots are read: parsing every tile update would make this process, not the
            # dashboard, the bottleneck of the measurement.
            if text.startswith('{"type":"alert"'):
                alert = json.loads(text)["alert"]
                page.alert_ids[alert["id"]] = alert["published"]
                page.latencies.append((now, 1000 * (now - alert["published"])))
                page.hops.append(1000 * (alert["received"] - alert["published"]))
            elif text.startswith('{"type":"snapshot"'):
                page.snapshots += 1
                page.alert_ids.update((a["id"], a["published"]) for a in json.loads(text)["alerts"])


async def dashboard_link(url: str) -> dict[str, Any]:
    """The dashboard's own counts (its snapshot's ``link``): pages it closed for not reading, among them."""
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(url + "api/state") as response:
        link: dict[str, Any] = (await response.json())["link"]
        return link


def frozen_page(url: str) -> socket.socket:
    """A page that completes the WebSocket handshake and never reads again (a frozen tab), its buffer small."""
    host, port = re.match(r"http://([^:/]+):(\d+)/", url).groups()  # type: ignore[union-attr]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: the window it announces
    sock.connect((host, int(port)))
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    sock.sendall((f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())  # fmt: skip
    answer = sock.recv(1024)
    assert answer.startswith(b"HTTP/1.1 101"), answer[:80]
    return sock


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used, in seconds (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """The process's resident memory now (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_dashboard(alerts: str) -> tuple[subprocess.Popen[str], str]:
    """``stream-detect dashboard`` on a free loopback port; the process and its page's address."""
    # Imported here, as checker_load imports checker_flood: the spawned publisher re-imports this module only.
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks.churn_soak import start

    process, found = start(["dashboard", "--connect", alerts, "--demo", "--bind", "127.0.0.1:0"],
                           r"serving (http://\S+)", READY_TIMEOUT_S, subprocess.DEVNULL)
    return process, found.group(1)


async def measure(url: str, pid: int, checker_pid: int, pages: int, duration: float, warmup: float,
                  console: Console) -> dict[str, object]:
    """Open the pages, freeze one half-way, sample memory; the figures."""
    stop = asyncio.Event()
    clients = [Page() for _ in range(pages)]
    tasks = [asyncio.create_task(page_client(url, page, stop)) for page in clients]
    rss: list[tuple[float, float]] = []
    frozen: socket.socket | None = None
    start = time.time()
    frozen_at = start + duration / 2
    cpu0 = cpu_seconds(pid), cpu_seconds(checker_pid)
    with Progress(console=console, transient=True) as progress:
        bar = progress.add_task("dashboard under load", total=duration)
        while (elapsed := time.time() - start) < duration:
            rss.append((elapsed, rss_mib(pid)))
            if frozen is None and time.time() >= frozen_at:
                frozen = frozen_page(url)
            progress.update(bar, completed=elapsed)
            await asyncio.sleep(RSS_EVERY_S)
    spent = time.time() - start
    link = await dashboard_link(url)
    cpu = [100 * (cpu_seconds(p) - c) / spent for p, c in zip((pid, checker_pid), cpu0, strict=True)]
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    if frozen is not None:
        frozen.close()
    settled = start + warmup  # the streams connect and the sessions start together: a burst the run never sees again
    before = np.array([ms for page in clients for at, ms in page.latencies if settled <= at < frozen_at])
    after = np.array([ms for page in clients for at, ms in page.latencies if at >= frozen_at])
    both = np.concatenate([before, after])
    first = [ms for page in clients for at, ms in page.latencies if at < settled]
    # Every alert some page got, sent at least 2 s before the end (the pages stop one after the other).
    every = {n for page in clients for n, sent in page.alert_ids.items() if sent < start + spent - 2.0}
    hops = np.array([ms for page in clients for (at, _), ms in zip(page.latencies, page.hops, strict=True)
                     if at >= settled])
    return {
        "alerts": len(every),
        "received": int(both.size),
        "p50": float(np.percentile(both, 50)) if both.size else float("nan"),
        "p99": float(np.percentile(both, 99)) if both.size else float("nan"),
        "max": float(both.max()) if both.size else float("nan"),
        "p99_before": float(np.percentile(before, 99)) if before.size else float("nan"),
        "p99_frozen": float(np.percentile(after, 99)) if after.size else float("nan"),
        "missed": max(len(every - page.alert_ids.keys()) for page in clients),
        "snapshots": sum(page.snapshots for page in clients) - pages,
        "p99_hop": float(np.percentile(hops, 99)) if hops.size else float("nan"),
        "rss": rss,
        "warmup_max": max(first, default=float("nan")),
        "dropped_pages": link["dropped_pages"],
        "cpu_dashboard": cpu[0],
        "cpu_checker": cpu[1],
    }


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Run the load, print the table and the last line."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=bounded_option(COUNT), default=100, help="detector streams (default 100)")
    parser.add_argument("--rate", type=bounded_option(EVENT_RATE, integer=False), default=10.0,
                        help="key-steps a second per stream (default 10)")
    parser.add_argument("--pages", type=bounded_option(COUNT), default=20, help="open pages (default 20)")
    parser.add_argument("--duration", type=bounded_option(RUN_SECONDS, integer=False), default=600.0,
                        help="seconds of load (default 600)")
    parser.add_argument("--warmup", type=bounded_option(WAIT_SECONDS, integer=False), default=10.0,
                        help="first seconds left out of the latency figures (default 10; their worst is shown)")
    args = parser.parse_args(argv)
    console = table_console(Console(stderr=True))
    spawn = mp.get_context("spawn")
    checker = CheckerProcess(str(ROOT / "streaming" / "demo" / "demo_graph.json"),
                             CheckerConfig("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"))  # fmt: skip
    dashboard, url = start_dashboard(checker.alerts_endpoint)
    stop = spawn.Event()
    sent = spawn.Value("q", 0, lock=False)  # key-steps the publisher sent (written by it alone)
    publisher = spawn.Process(target=publish, args=(checker.events_endpoint, args.streams, args.rate, stop, sent),
                              daemon=True)  # fmt: skip
    load_before = os.getloadavg()[0]
    try:
        publisher.start()
        assert checker.process.pid is not None
        figures = asyncio.run(measure(url, dashboard.pid, checker.process.pid, args.pages, args.duration,
                                      args.warmup, console))
        figures["sent_rate"] = sent.value / args.duration / args.streams
    finally:
        stop.set()
        publisher.join(10)
        if publisher.is_alive():
            publisher.kill()
        dashboard.terminate()
        dashboard.wait(15)
        checker.stop()
    rss = figures["rss"]
    assert isinstance(rss, list)
    settled = [mb for at, mb in rss if at >= 10.0] or [mb for _, mb in rss]
    table = Table(title=f"dashboard: {args.streams} streams at {args.rate:g} key-steps/s, {args.pages} pages, "
                        f"{args.duration:g} s (load {load_before:.2f} -> {os.getloadavg()[0]:.2f})")  # fmt: skip
    columns = ("key-steps/s per stream sent", "alerts", "p50 ms", "p99 ms", "max ms", "max ms warm-up",
               "p99 checker -> dashboard", "p99 before / with a frozen page", "RSS MiB 10 s / max / end",
               "CPU % dashboard / checker", "missed", "snapshots", "pages closed")
    for column in columns:
        table.add_column(column, justify="right")
    table.add_row(
        f"{figures['sent_rate']:.1f}", str(figures["alerts"]), f"{figures['p50']:.1f}", f"{figures['p99']:.1f}",
        f"{figures['max']:.1f}", f"{figures['warmup_max']:.1f}", f"{figures['p99_hop']:.1f}",
        f"{figures['p99_before']:.1f} / {figures['p99_frozen']:.1f}",
        f"{settled[0]:.1f} / {max(settled):.1f} / {settled[-1]:.1f}",
        f"{figures['cpu_dashboard']:.0f} / {figures['cpu_checker']:.0f}", str(figures["missed"]),
        str(figures["snapshots"]), str(figures["dropped_pages"]),
    )
    console.print(table)
    print(f"streams={args.streams} rate={args.rate:g} pages={args.pages} duration_s={args.duration:g} "
          f"sent_rate={figures['sent_rate']:.1f} alerts={figures['alerts']} p50_ms={figures['p50']:.1f} "
          f"p99_ms={figures['p99']:.1f} "
          f"p99_frozen_ms={figures['p99_frozen']:.1f} rss_start_mb={settled[0]:.1f} rss_max_mb={max(settled):.1f} "
          f"rss_end_mb={settled[-1]:.1f} missed={figures['missed']} pages_closed={figures['dropped_pages']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
