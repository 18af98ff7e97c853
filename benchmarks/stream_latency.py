"""Speed of the live pipeline on a camera-like source: dropped frames, sustainable feature rate, latencies.

Usage::

    python benchmarks/stream_latency.py [--extractor efficientnet-lite0] [--threads 1] [--device cpu|cuda]
        [--rates 5,10,15,20,30] [--seconds 10] [--events 1000] [--rate 200]

1. Stage costs: the demo video (320x240) through the real reader, the extractor (on the frame upscaled to 640x480,
   as a camera delivers it), MiniROAD ``step``; wall and CPU milliseconds per frame of each, measured alone, one
   frame at a time (the CPU time hardly depends on other work sharing the cores).
2. Camera: a paced source delivers 640x480 frames at 30 fps (the demo video, upscaled, on a loop) through the live
   reader, which keeps only the newest frame; the detector (extractor, MiniROAD step, segmenter, publishing to a
   checker in its own process) takes frames at each ``--rates`` feature rate for ``--seconds``. Per rate it prints
   the frames processed, the feature slots missed for falling behind (target 0 at 5 fps), and the latency from a
   frame's arrival at the source to its class probabilities, p50 / p99 (target p99 < 50 ms); then the highest rate
   that keeps up (at most 1 % of slots missed; target >= 30 fps).
3. Checker hop: ``--events`` key-step events, each one a pre-condition violation, are published at ``--rate`` per
   second to the checker process; the latency from the segment's confirmation (the event's timestamp) to the
   alert leaving the checker, p50 / p99 (target p99 < 2 ms), and to the alert reaching a subscriber.

The load average before and after is printed too: on a machine shared with other work the rates and tails move.

The detector is the bundled demo detector when it was trained on ``--extractor`` features; otherwise one of the same
size with untrained weights (the speed does not depend on the weights; no alert is then expected).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np
import torch
import zmq
from rich.console import Console
from rich.table import Table

from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.options import MIN_FPS, threads_option
from graphs.common.settings_files import COUNT, EVENT_RATE, RUN_SECONDS, Bound, bounded_option
from recognition.checkpoint import DetectorCheckpoint, load_detector
from recognition.model import FastStepper, MiniROAD
from streaming.all_in_one import await_subscription
from streaming.checker.config import CheckerConfig
from streaming.checker.process import CheckerProcess
from streaming.demo.paths import default_demo_paths
from streaming.demo.procedure import PRECONDITIONS
from streaming.demo.synthetic_video import demo_video
from streaming.detector import DetectorConfig, EventPublisher, LoadedParts, PipelineConfig, build_pipeline
from streaming.extractors import EXTRACTOR_NAMES, FeatureExtractor, make_extractor
from streaming.messages import Alert
from streaming.readers import Frame, LiveReader, ReaderConfig, Source, open_reader
from streaming.transport import Publisher, connect
from streaming.view.client import Viewer
from streaming.view.state import ViewState

# A step that needs another: as the first step of a session it is always a pre-condition violation.
VIOLATING_STEP = next(step for step, needs in PRECONDITIONS.items() if needs)
CAMERA_FPS = 30.0
# A feature rate the reader can take from the camera: at least one a second (MIN_FPS), at most a feature per frame.
CAMERA_RATES = Bound(MIN_FPS, CAMERA_FPS, note="features per second")
CAMERA_SIZE = (640, 480)
KEEPS_UP = 0.01  # a rate keeps up when at most this share of its feature slots is missed


class PacedCamera:
    """A stand-in for ``cv2.VideoCapture`` of a 30 fps camera: frames arrive on the camera's clock, not on demand.

    It plays a video file on a loop, upscaled to 640x480, one frame every 1/30 s, and writes each frame's number
    into its first three pixels so that the consumer can look up when that frame arrived (`arrival`).

    Args:
        video: the file to play.
    """

    def __init__(self, video: Path) -> None:
        self._cap = cv2.VideoCapture(str(video))
        self._video = video
        self._next = time.monotonic()
        self.count = 0
        self.arrivals: dict[int, float] = {}
        self._lock = threading.Lock()
        self._grabbed: tuple[bool, np.ndarray] = (False, np.zeros((0, 0, 3), dtype=np.uint8))

    def isOpened(self) -> bool:  # noqa: N802 - the cv2.VideoCapture interface
        return True

    def read(self) -> tuple[bool, np.ndarray]:
        """Wait for the camera's next frame time, then deliver it (BGR, 640x480)."""
        ok, bgr = self._cap.read()
        if not ok:  # loop the video
            self._cap.release()
            self._cap = cv2.VideoCapture(str(self._video))
            ok, bgr = self._cap.read()
        frame = cv2.resize(bgr, CAMERA_SIZE, interpolation=cv2.INTER_LINEAR)
        self.count += 1
        frame[0, :3] = np.frombuffer(self.count.to_bytes(3, "big"), dtype=np.uint8)[:, None]  # the frame number
        self._next += 1.0 / CAMERA_FPS
        wait = self._next - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        with self._lock:
            self.arrivals[self.count] = time.monotonic()
        return True, frame

    def grab(self) -> bool:
        """`read`, keeping the frame for `retrieve` (the live reader grabs every frame, retrieves those it delivers)."""
        self._grabbed = self.read()
        return self._grabbed[0]

    def retrieve(self) -> tuple[bool, np.ndarray]:
        """The frame last grabbed."""
        return self._grabbed

    def release(self) -> None:
        self._cap.release()

    def arrival(self, rgb: np.ndarray) -> float:
        """When the frame whose RGB image this is arrived (monotonic seconds)."""
        number = int.from_bytes(bytes(int(v) for v in rgb[0, :3, 0]), "big")  # grey stamp: any channel will do
        with self._lock:
            return self.arrivals[number]


def detector_for(extractor: FeatureExtractor) -> tuple[MiniROAD, DetectorCheckpoint, bool]:
    """The demo detector when it reads this extractor's features, else the same size with untrained weights."""
    _, demo = default_demo_paths()
    model, checkpoint = load_detector(demo)
    if checkpoint.feature_extractor == extractor.name:
        return model, checkpoint, True
    config = replace(model.config, input_dim=extractor.dim)
    untrained = replace(checkpoint, config=config, feature_extractor=extractor.name)
    return MiniROAD(config).eval(), untrained, False


def _timed(work: Callable[[], object], count: int) -> tuple[float, float]:
    """Wall and CPU (this process, all threads) milliseconds per item of ``work()`` over ``count`` items."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return (time.perf_counter() - wall) * 1000 / count, (time.process_time() - cpu) * 1000 / count


def stage_costs(
    video: Path, extractor: FeatureExtractor, model: MiniROAD, frames: int = 150
) -> dict[str, tuple[float, float]]:
    """Wall and CPU milliseconds per frame of each stage, measured alone, one frame at a time.

    CPU time hardly depends on other work sharing the cores: it says what an idle core would take.
    """
    reader = open_reader(str(video), ReaderConfig(fps=CAMERA_FPS))
    images: list[np.ndarray] = []
    read = _timed(lambda: images.extend(f.image for _, f in zip(range(frames), reader, strict=False)), frames)
    large = [cv2.resize(im, CAMERA_SIZE) for im in images]
    extractor(large[0][None])  # first call: allocations and kernel choices
    feats: list[np.ndarray] = []
    extract = _timed(lambda: feats.extend(extractor(im[None]) for im in large), len(large))
    stepper = FastStepper(model)
    step = _timed(lambda: [stepper.step(torch.from_numpy(f)) for f in feats], len(feats))
    return {"read + decode (320x240 file)": read, f"{extractor.name} features (640x480)": extract,
            "MiniROAD step": step}  # fmt: skip


@dataclass
class RateResult:
    """One feature rate on the paced camera."""

    rate: float
    frames: int
    missed: int
    latency_ms: np.ndarray

    @property
    def keeps_up(self) -> bool:
        """At most `KEEPS_UP` of the feature slots were missed."""
        return self.missed <= KEEPS_UP * (self.frames + self.missed)


def camera_run(
    ctx: zmq.Context,
    checker: CheckerProcess,
    video: Path,
    extractor: FeatureExtractor,
    model: MiniROAD,
    checkpoint: DetectorCheckpoint,
    rate: float,
    seconds: float,
) -> RateResult:
    """The detector on the paced camera at ``rate`` features per second for ``seconds``, publishing to the checker."""
    camera = PacedCamera(video)
    reader = LiveReader(Source("camera", 0, "bench-camera"), ReaderConfig(fps=rate), open_capture=lambda _: camera)
    config = PipelineConfig(detector=DetectorConfig(connect=checker.events_endpoint, max_frames=int(rate * seconds)),
                            stream_ids=(f"bench-{rate:g}",))
    parts = LoadedParts(None, model, replace(checkpoint, fps=rate), extractor)
    latencies: list[float] = []
    stamps: list[float] = []

    def on_frame(frame: Frame, features: np.ndarray, probs: np.ndarray) -> None:
        now = time.monotonic()
        latencies.append((now - camera.arrival(frame.image)) * 1000)
        stamps.append(now)

    with build_pipeline(config, parts=parts, readers=[reader], observers=[lambda _: on_frame], ctx=ctx) as pipeline:
        stats = pipeline.run()[0]
    # Feature slots over the run: the reader offers one every 1/rate s; a slot the detector was too busy for is missed.
    slots = int(round((stamps[-1] - stamps[0]) * rate)) + 1 if stamps else 0
    return RateResult(rate, stats.frames, max(slots - stats.frames, 0), np.array(latencies))


def demo_alerts(ctx: zmq.Context, checker: CheckerProcess, video: Path, extractor: FeatureExtractor,
                model: MiniROAD, checkpoint: DetectorCheckpoint) -> list[str]:  # fmt: skip
    """The alerts the demo detector raises on the demo video, read as fast as the CPU allows."""
    viewer = Viewer(ctx, checker.alerts_endpoint, ViewState(), jsonl=False)
    reader = open_reader(str(video), ReaderConfig(fps=checkpoint.fps))
    config = PipelineConfig(detector=DetectorConfig(stream_id="bench-demo", connect=checker.events_endpoint))
    with build_pipeline(config, parts=LoadedParts(None, model, checkpoint, extractor), readers=[reader],
                        ctx=ctx) as pipeline:
        await_subscription(viewer, pipeline.streams[0].events)
        pipeline.run()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and not viewer.state.streams["bench-demo"].ended:
        viewer.pump(50)
    alerts = [a.step_name for _, a in viewer.state.alerts if a.stream_id == "bench-demo"]
    viewer.close()
    return alerts


def hop_latency(ctx: zmq.Context, checker: CheckerProcess, n: int, rate: float) -> tuple[np.ndarray, np.ndarray]:
    """Publish ``n`` violating key-steps at ``rate``/s; per alert, (confirmation -> sent, -> received) in ms."""
    viewer = Viewer(ctx, checker.alerts_endpoint, ViewState(), jsonl=False)
    sock = connect(ctx, zmq.PUB, checker.events_endpoint)
    publisher = Publisher(sock)
    greeter = EventPublisher(publisher, "bench-hop")
    await_subscription(viewer, greeter)
    greeter.heartbeat(None, 0, 0, 0.0, ended=True)  # one live session per stream id: this one ends first
    sent_ms: list[float] = []
    recv_ms: list[float] = []

    def take(timeout_ms: int) -> None:
        for message in viewer.receiver.poll(timeout_ms):
            if isinstance(message, Alert) and message.stream_id == "bench-hop" and not message.replayed:
                sent_ms.append((message.timestamp - message.event_timestamp) * 1000)
                recv_ms.append((time.time() - message.event_timestamp) * 1000)

    period = 1.0 / rate
    next_send = time.monotonic()
    for k in range(n):
        events = EventPublisher(publisher, "bench-hop", session=f"s{k}")  # a fresh session: the step comes first
        events.keystep(VIOLATING_STEP, "x", 0.0, 1.0, 1.0)
        events.heartbeat(None, 0, 0, 0.0, ended=True)  # it ends, so that the next session may take the stream id
        next_send += period
        while time.monotonic() < next_send:
            take(max(0, int((next_send - time.monotonic()) * 1000)))
    deadline = time.monotonic() + 2
    while len(sent_ms) < n and time.monotonic() < deadline:
        take(50)
    viewer.close()
    sock.close(linger=0)
    return np.array(sent_ms), np.array(recv_ms)


def _percentiles(values: np.ndarray) -> str:
    return f"{np.percentile(values, 50):.1f} / {np.percentile(values, 99):.1f}" if len(values) else "n/a"


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Run the measurements and print them as rich tables."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extractor", default="efficientnet-lite0", choices=EXTRACTOR_NAMES, help="feature extractor")
    parser.add_argument("--threads", type=threads_option, default=1, help="torch threads of the detector (default 1)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where the feature extractor runs (the small MiniROAD step stays on the CPU)")
    parser.add_argument("--rates", type=bounded_option(CAMERA_RATES, integer=False, listed=True),
                        default=[5.0, 10.0, 15.0, 20.0, 25.0, 30.0], help="feature rates to try on the 30 fps camera")
    parser.add_argument("--seconds", type=bounded_option(RUN_SECONDS, integer=False), default=10.0,
                        help="seconds of camera per rate")
    parser.add_argument("--events", type=bounded_option(COUNT), default=1000,
                        help="key-step events for the hop latency")
    parser.add_argument("--rate", type=bounded_option(EVENT_RATE, integer=False), default=200.0,
                        help="events per second for the hop latency")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    console = table_console(Console())
    graph_path, _ = default_demo_paths()
    video, _ = demo_video("mistake")
    extractor = make_extractor(args.extractor, device=args.device)
    model, checkpoint, trained = detector_for(extractor)
    costs = stage_costs(video, extractor, model)
    rates: list[float] = args.rates
    ctx = zmq.Context()
    with tempfile.TemporaryDirectory() as tmp:
        checker = CheckerProcess(str(graph_path), CheckerConfig(f"ipc://{tmp}/in", f"ipc://{tmp}/out"))
        try:
            results = [camera_run(ctx, checker, video, extractor, model, checkpoint, r, args.seconds) for r in rates]
            alerts = demo_alerts(ctx, checker, video, extractor, model, checkpoint) if trained else None
            sent, recv = hop_latency(ctx, checker, args.events, args.rate)
        finally:
            checker.stop()
            ctx.destroy(linger=0)

    where = f"on {torch.cuda.get_device_name()}" if args.device == "cuda" else f"{args.threads} torch thread(s)"
    title = f"stream-detect, {args.extractor}, {where}"
    stages = Table(title=f"{title}: stage costs, one frame at a time")
    stages.add_column("stage")
    stages.add_column("wall ms/frame", justify="right")
    stages.add_column("CPU ms/frame", justify="right")
    for stage, (wall_ms, cpu_ms) in costs.items():
        stages.add_row(stage, f"{wall_ms:.2f}", f"{cpu_ms:.2f}")
    console.print(stages)
    camera = Table(title=f"{title}: 30 fps 640x480 camera, {args.seconds:g} s per feature rate")
    for column in ("feature rate", "frames", "slots missed", "arrival -> probs p50 ms", "p99 ms"):
        camera.add_column(column, justify="right")
    for r in results:
        p50, p99 = (np.percentile(r.latency_ms, q) if len(r.latency_ms) else float("nan") for q in (50, 99))
        camera.add_row(f"{r.rate:g} fps", str(r.frames), str(r.missed), f"{p50:.1f}", f"{p99:.1f}")
    console.print(camera)
    table = Table(title=f"{title}: summary")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    five = next((r for r in results if r.rate == 5), None)
    if five is not None:
        table.add_row("slots missed at 5 fps", str(five.missed), "0")
        table.add_row("arrival -> probs p99 at 5 fps, ms", f"{np.percentile(five.latency_ms, 99):.1f}", "< 50")
    kept = [r.rate for r in results if r.keeps_up]
    table.add_row("highest feature rate that keeps up", f"{max(kept):g} fps" if kept else "none", ">= 30")
    if alerts is not None:
        table.add_row("demo alerts", ", ".join(alerts) or "none", "boil_water")
    table.add_row(f"checker hop p50 / p99, ms ({len(sent)} alerts)", _percentiles(sent), "p99 < 2")
    table.add_row("confirmation -> alert at subscriber p50 / p99, ms", _percentiles(recv), "")
    table.add_row("load average (1 min) before / after", f"{load_before:.2f} / {os.getloadavg()[0]:.2f}", "")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
