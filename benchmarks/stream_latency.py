"""Speed of the live pipeline on the built-in demo: frames per second and the checker hop latency.

Usage::

    python benchmarks/stream_latency.py [--events 1000] [--rate 200] [--threads 1]

1. Throughput: the demo video (320x240, 30 fps) goes through the real reader, the built-in
   ``light-v1`` extractor, MiniROAD ``step`` and the segmenter, publishing to a checker running in
   its own process, as fast as the CPU allows. Prints frames per second (target: >= 30) and the
   per-frame cost of each stage.
2. Checker hop: ``--events`` key-step events, each one a pre-condition violation, are published
   at ``--rate`` per second to the checker process; for each alert it prints the latency from the
   segment's confirmation (the event's timestamp) to the alert leaving the checker (the alert's
   timestamp), p50 / p99 (target p99 < 2 ms), and to the alert reaching a subscriber.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import zmq
from rich.console import Console
from rich.table import Table

from streaming.all_in_one import await_subscription
from streaming.checker_process import CheckerProcess
from streaming.checker_service import CheckerConfig
from streaming.demo.paths import default_demo_paths
from streaming.demo.procedure import PRECONDITIONS
from streaming.demo.synthetic_video import demo_video
from streaming.detector_service import Detector, DetectorConfig, EventPublisher, load_detector_for_stream
from streaming.messages import Alert
from streaming.readers import ReaderConfig, open_reader
from streaming.transport import Publisher, connect
from streaming.view import ViewState
from streaming.viewer import Viewer

# A step that needs another: as the first step of a session it is always a pre-condition violation.
VIOLATING_STEP = next(step for step, needs in PRECONDITIONS.items() if needs)


def stage_costs(video: Path, detector_path: Path, frames: int = 300) -> dict[str, float]:
    """Milliseconds per frame of each stage, measured in isolation on the first ``frames`` frames."""
    model, checkpoint, extractor = load_detector_for_stream(detector_path, None)
    reader = open_reader(str(video), ReaderConfig(fps=checkpoint.fps))
    t = time.perf_counter()
    images = [f.image for _, f in zip(range(frames), reader, strict=False)]
    read_ms = (time.perf_counter() - t) * 1000 / len(images)
    t = time.perf_counter()
    feats = [extractor(im[None]) for im in images]
    feat_ms = (time.perf_counter() - t) * 1000 / len(images)
    from recognition.model import FastStepper

    stepper = FastStepper(model)
    t = time.perf_counter()
    for f in feats:
        stepper.step(torch.from_numpy(f))
    step_ms = (time.perf_counter() - t) * 1000 / len(images)
    return {"read + decode": read_ms, "light-v1 features": feat_ms, "MiniROAD step": step_ms}


def throughput(ctx: zmq.Context, checker: CheckerProcess, video: Path, detector_path: Path) -> tuple[float, int, list]:
    """Run the demo video through the detector into the checker; frames/s, frames, alerts seen."""
    model, checkpoint, extractor = load_detector_for_stream(detector_path, None)
    reader = open_reader(str(video), ReaderConfig(fps=checkpoint.fps))
    viewer = Viewer(ctx, checker.alerts_endpoint, ViewState(), jsonl=False)
    sock = connect(ctx, zmq.PUB, checker.events_endpoint)
    events = EventPublisher(Publisher(sock), "bench-demo")
    await_subscription(viewer, events)
    detector = Detector(reader, extractor, model, checkpoint, events, DetectorConfig(connect=checker.events_endpoint))
    stats = detector.run()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and not viewer.state.streams["bench-demo"].ended:
        viewer.pump(50)
    alerts = [a for _, a in viewer.state.alerts]
    viewer.close()
    sock.close()
    return stats.fps, stats.frames, alerts


def hop_latency(ctx: zmq.Context, checker: CheckerProcess, n: int, rate: float) -> tuple[np.ndarray, np.ndarray]:
    """Publish ``n`` violating key-steps at ``rate``/s; per alert, (confirmation -> sent, -> received) in ms."""
    viewer = Viewer(ctx, checker.alerts_endpoint, ViewState(), jsonl=False)
    sock = connect(ctx, zmq.PUB, checker.events_endpoint)
    publisher = Publisher(sock)
    await_subscription(viewer, EventPublisher(publisher, "bench-hop"))
    sent_ms: list[float] = []
    recv_ms: list[float] = []
    period = 1.0 / rate
    next_send = time.monotonic()
    for k in range(n):
        events = EventPublisher(publisher, "bench-hop", session=f"s{k}")  # a fresh session: the step comes first
        events.keystep(VIOLATING_STEP, "x", 0.0, 1.0, 1.0)
        next_send += period
        while True:
            for message in viewer.receiver.poll(max(0, int((next_send - time.monotonic()) * 1000))):
                if isinstance(message, Alert) and message.stream_id == "bench-hop" and not message.replayed:
                    now = time.time()
                    sent_ms.append((message.timestamp - message.event_timestamp) * 1000)
                    recv_ms.append((now - message.event_timestamp) * 1000)
            if time.monotonic() >= next_send:
                break
    deadline = time.monotonic() + 2
    while len(sent_ms) < n and time.monotonic() < deadline:
        for message in viewer.receiver.poll(50):
            if isinstance(message, Alert) and message.stream_id == "bench-hop" and not message.replayed:
                sent_ms.append((message.timestamp - message.event_timestamp) * 1000)
                recv_ms.append((time.time() - message.event_timestamp) * 1000)
    viewer.close()
    sock.close()
    return np.array(sent_ms), np.array(recv_ms)


def main(argv: list[str] | None = None) -> int:
    """Run both measurements and print them as rich tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1000, help="key-step events for the hop latency")
    parser.add_argument("--rate", type=float, default=200.0, help="events per second for the hop latency")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    console = Console()
    graph_path, detector_path = default_demo_paths()
    video, _ = demo_video("mistake")
    costs = stage_costs(video, detector_path)
    ctx = zmq.Context()
    with tempfile.TemporaryDirectory() as tmp:
        checker = CheckerProcess(str(graph_path), CheckerConfig(f"ipc://{tmp}/in", f"ipc://{tmp}/out"))
        try:
            fps, frames, alerts = throughput(ctx, checker, video, detector_path)
            sent, recv = hop_latency(ctx, checker, args.events, args.rate)
        finally:
            checker.stop()
            ctx.destroy(linger=0)

    table = Table(title="stream-detect demo pipeline (320x240 demo video, built-in light-v1 extractor)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    table.add_row("frames processed per second", f"{fps:.0f} ({frames} frames)", ">= 30")
    for stage, ms in costs.items():
        table.add_row(f"  {stage}, ms/frame", f"{ms:.2f}", "")
    table.add_row("demo alerts", ", ".join(a.step_name for a in alerts) or "none", "boil_water")
    table.add_row(f"checker hop p50 / p99, ms ({len(sent)} alerts)",
                  f"{np.percentile(sent, 50):.2f} / {np.percentile(sent, 99):.2f}" if len(sent) else "n/a", "p99 < 2")
    table.add_row("confirmation -> alert at subscriber p50 / p99, ms",
                  f"{np.percentile(recv, 50):.2f} / {np.percentile(recv, 99):.2f}" if len(recv) else "n/a", "")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
