"""Many cameras: one detector process for all of them, against one process per camera.

Usage::

    python benchmarks/multi_stream.py [--streams 1,2,4,8] [--rate 5] [--seconds 20] [--threads 1]
        [--device cpu|cuda] [--modes one,each,split]

Each camera is a video file written with OpenCV (640x480, 30 fps; the demo procedure upscaled, each camera from
another point of it), played on a loop at real time through the live reader, which keeps only the newest frame. The
detector takes ``--rate`` frames a second from each camera (the demo detector on ``efficientnet-lite0`` features)
and publishes to a checker in its own process, as ``stream-detect detector`` does (`build_pipeline`):

- ``one``: one process reads the K cameras and batches their frames through one backbone and one MiniROAD
  (``stream-detect detector --video ... --video ...``);
- ``each``: K processes, one per camera, each with its own backbone (one ``stream-detect detector`` per camera);
- ``split``: ``--threads`` processes of one thread each, the cameras dealt among them (what one process with
  ``--threads`` feature workers must at least match: the same cores as separate processes).

After a warm-up of `WARMUP_S` it measures, over ``--seconds``: per stream the feature slots missed (frames the
detector should have taken at ``--rate`` but was too busy for: the frames dropped for falling behind) and the latency
from a frame's arrival at the reader to its class probabilities; per mode the CPU time of the detector process(es),
all threads, as a share of one core and per frame that got its probabilities, their peak memory, the streams per core
(K over the cores used), and the batch shapes the backbone met for the first time after start-up ("late shapes": every
batch size is warmed before the first frame is read, so it must stay 0; on a GPU each one stalls every camera for
seconds). A K "fits" when no slot is missed and the p99 latency is under `P99_TARGET_MS`. Target: at least twice the
streams per core of one process per camera, at the same p99 and no drop. The load average is printed beside each run:
on a machine shared with other work, the tails move with it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from rich.console import Console
from rich.table import Table

from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.options import fps_option, threads_option
from graphs.common.settings_files import COUNT, RUN_SECONDS, bounded_option

CAMERA_FPS = 30.0
CAMERA_SIZE = (640, 480)
CAMERA_SECONDS = 10.0  # each camera's file; it loops
WARMUP_S = 3.0
P99_TARGET_MS = 100.0
START_TIMEOUT_S = 180.0  # loading K backbones on 2 busy cores takes a while


class LoopingCamera:
    """A stand-in for ``cv2.VideoCapture`` of a 30 fps network camera: a video file played on a loop, one frame every
    1/30 s on the camera's clock (not on demand). As with a stream, `grab` decodes every frame (a compressed frame
    needs the ones before it) and `retrieve` converts the last one to colour (BGR).

    Args:
        video: the file to play.
    """

    def __init__(self, video: Path) -> None:
        self._video = video
        self._cap = cv2.VideoCapture(str(video))
        self._next = time.monotonic()

    def isOpened(self) -> bool:  # noqa: N802 - the cv2.VideoCapture interface
        return True

    def grab(self) -> bool:
        """Decode the next frame, then wait for the camera's time for it."""
        ok = self._cap.grab()
        if not ok:
            self._cap.release()
            self._cap = cv2.VideoCapture(str(self._video))
            ok = self._cap.grab()
        self._next = max(self._next + 1.0 / CAMERA_FPS, time.monotonic() - 1.0 / CAMERA_FPS)
        wait = self._next - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        return ok

    def retrieve(self) -> tuple[bool, np.ndarray]:
        """The frame last grabbed, in colour (BGR, 640x480)."""
        return self._cap.retrieve()

    def release(self) -> None:
        self._cap.release()


def looping_camera(video: str) -> Callable[[str | int], LoopingCamera]:
    """A `LiveReader` ``open_capture`` that plays ``video`` on a loop, whatever target the reader names."""
    return lambda _target: LoopingCamera(Path(video))


def write_cameras(folder: Path, count: int) -> list[Path]:
    """``count`` camera files: the demo procedure upscaled to 640x480, each starting `CAMERA_SECONDS` later in it."""
    from streaming.demo.synthetic_video import demo_video

    source, _ = demo_video("mistake")
    cap = cv2.VideoCapture(str(source))
    frames = []
    while True:
        ok, bgr = cap.read()
        if not ok:
            break
        frames.append(cv2.resize(bgr, CAMERA_SIZE, interpolation=cv2.INTER_LINEAR))
    cap.release()
    length = int(CAMERA_SECONDS * CAMERA_FPS)
    paths = []
    for k in range(count):
        path = folder / f"camera{k}.mp4"
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), CAMERA_FPS, CAMERA_SIZE)
        start = (k * length // 3) % len(frames)
        for j in range(length):
            writer.write(frames[(start + j) % len(frames)])
        writer.release()
        paths.append(path)
    return paths


@dataclass
class StreamFigures:
    """One camera's stream over the measured window."""

    latency_ms: list[float] = field(default_factory=list)
    stamps: list[float] = field(default_factory=list)  # when each frame's probabilities were known

    def missed_at(self, rate: float) -> int:
        """Feature slots the detector missed: one every 1/rate s from the first frame to the last, less those taken
        (a stream with fewer than two frames missed them all)."""
        if len(self.stamps) < 2:
            return int(rate)
        slots = int(round((self.stamps[-1] - self.stamps[0]) * rate)) + 1
        return max(slots - len(self.stamps), 0)


@dataclass
class ProcessFigures:
    """What one detector process measured."""

    streams: list[StreamFigures]
    cpu_s: float
    wall_s: float
    rss_mb: float
    late_shapes: int = 0  # batch shapes the backbone met for the first time after start-up (the warm-up)
    warm_s: float = 0.0  # how long the warm-up of every batch size took


class _Watch:
    """Times each frame of every stream from its arrival to its probabilities (a frame observer per stream)."""

    def __init__(self, start_at: float) -> None:
        self.start_at = start_at
        self.figures: list[StreamFigures] = []

    def observer(self, stream_id: str) -> Callable[[Any, Any, Any], None]:
        figures = StreamFigures()
        self.figures.append(figures)

        def on_frame(frame: Any, features: Any, probs: Any) -> None:
            now = time.monotonic()
            if now >= self.start_at:
                figures.latency_ms.append((now - frame.arrived) * 1000)
                figures.stamps.append(now)

        return on_frame


def detector_process(videos: list[str], rate: float, seconds: float, endpoint: str, threads: int, device: str,
                     ready: Any, go: Event, out: Any) -> None:  # fmt: skip
    """A child process: the cameras ``videos`` through one detector (`run_detectors`), publishing to ``endpoint``."""
    import torch

    from streaming.demo.paths import default_demo_paths
    from streaming.detector import DetectorConfig, LoadedParts, PipelineConfig, build_pipeline, load_detector_for_stream
    from streaming.detector.loop import batched
    from streaming.readers import LiveReader, ReaderConfig, Source, VideoReader

    torch.set_num_threads(threads)
    _, demo = default_demo_paths()
    model, checkpoint, raw = load_detector_for_stream(demo, None, threads, device)
    extractor = batched(raw, len(videos))
    warm_s = extractor.warm()  # every batch size the loop will use, before any camera is read
    ready.put(os.getpid())
    go.wait()
    started = time.monotonic()
    readers: list[VideoReader] = [
        LiveReader(Source("camera", k, f"bench-cam{k}"), ReaderConfig(fps=rate),
                   open_capture=looping_camera(video))
        for k, video in enumerate(videos)
    ]  # fmt: skip
    watch = _Watch(started + WARMUP_S)
    stop = threading.Event()
    marks: list[tuple[float, float]] = []

    def mark() -> None:
        marks.append((time.monotonic(), time.process_time()))

    def mark_and_stop() -> None:
        mark()
        stop.set()

    timers = [threading.Timer(WARMUP_S, mark), threading.Timer(WARMUP_S + seconds, mark_and_stop)]
    for timer in timers:
        timer.start()
    ids = tuple(f"p{os.getpid()}-cam{k}" for k in range(len(videos)))
    detector = DetectorConfig(stream_id=ids[0], connect=endpoint, threads=threads)
    config = PipelineConfig(detector=detector, stream_ids=ids)
    parts = LoadedParts(None, model, checkpoint, extractor)
    with build_pipeline(config, parts=parts, readers=readers, observers=[watch.observer]) as pipeline:
        pipeline.run(stop)
        late = pipeline.late_shapes
    for timer in timers:
        timer.join()
    (t0, c0), (t1, c1) = marks
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put(ProcessFigures(watch.figures, c1 - c0, t1 - t0, rss_mb, late, warm_s))


@dataclass
class Run:
    """One mode at one K."""

    mode: str
    k: int
    processes: list[ProcessFigures]
    load: tuple[float, float]

    @property
    def streams(self) -> list[StreamFigures]:
        return [s for p in self.processes for s in p.streams]

    @property
    def late_shapes(self) -> int:
        """Batch shapes first met after start-up, over every process (the warm-up keeps it at 0)."""
        return sum(p.late_shapes for p in self.processes)

    @property
    def cores(self) -> float:
        """Cores the detector process(es) kept busy (CPU seconds per wall second)."""
        return sum(p.cpu_s / p.wall_s for p in self.processes)

    @property
    def cpu_ms_per_frame(self) -> float:
        """CPU time of the detector process(es), all threads (decoding every camera frame included), per frame that
        got its probabilities in the measured window."""
        frames = sum(len(s.stamps) for s in self.streams)
        return 1000 * sum(p.cpu_s for p in self.processes) / frames if frames else float("nan")

    def p(self, q: float) -> float:
        values = [v for s in self.streams for v in s.latency_ms]
        return float(np.percentile(values, q)) if values else float("nan")


def run_mode(mode: str, videos: list[Path], rate: float, seconds: float, threads: int, device: str,
             endpoint: str) -> Run:  # fmt: skip
    """K cameras in one process (``one``), in K processes (``each``) or dealt among ``threads`` processes
    (``split``), all started together."""
    ctx = mp.get_context("spawn")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    names = [str(v) for v in videos]
    if mode == "one":
        groups = [names]
    elif mode == "split":
        groups = [names[j::threads] for j in range(min(threads, len(names)))]
    else:
        groups = [[name] for name in names]
    each_threads = threads if mode == "one" else 1  # the others run as the command's default does
    children = [ctx.Process(target=detector_process,
                            args=(group, rate, seconds, endpoint, each_threads, device, ready, go, out), daemon=True)
                for group in groups]  # fmt: skip
    for child in children:
        child.start()
    try:
        for _ in children:
            ready.get(timeout=START_TIMEOUT_S)
        load_before = os.getloadavg()[0]
        go.set()
        figures = [out.get(timeout=WARMUP_S + seconds + 60) for _ in children]
        load_after = os.getloadavg()[0]
    finally:
        for child in children:
            child.join(10)
            if child.is_alive():
                child.kill()
    return Run(mode, len(videos), figures, (load_before, load_after))


def fits(run: Run, rate: float) -> bool:
    """No slot missed and p99 under the target."""
    return sum(s.missed_at(rate) for s in run.streams) == 0 and run.p(99) < P99_TARGET_MS


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Run every mode at every K and print the figures."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=bounded_option(COUNT, listed=True), default=[1, 2, 4, 8],
                        help="camera counts K to try")
    parser.add_argument("--rate", type=fps_option, default=5.0, help="feature frames per second per camera")
    parser.add_argument("--seconds", type=bounded_option(RUN_SECONDS, integer=False), default=20.0,
                        help="measured seconds per run (after the warm-up)")
    parser.add_argument("--threads", type=threads_option, default=1, help="torch threads of the one-process detector")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the models run")
    parser.add_argument("--modes", default="one,each",
                        help="one (one process for all), each (one per camera), split (--threads processes)")
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    unknown = sorted(set(modes) - {"one", "each", "split"})
    if unknown:
        parser.error(f"--modes {args.modes}: unknown mode {unknown[0]!r} (one, each, split)")
    counts: list[int] = args.streams
    from streaming.checker.config import CheckerConfig
    from streaming.checker.process import CheckerProcess
    from streaming.demo.paths import default_demo_paths

    console = table_console(Console())
    graph, _ = default_demo_paths()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp:
        videos = write_cameras(Path(tmp), max(counts))
        checker = CheckerProcess(str(graph), CheckerConfig(f"ipc://{tmp}/in", f"ipc://{tmp}/out"))
        try:
            for k in counts:
                for mode in modes:
                    run = run_mode(mode, videos[:k], args.rate, args.seconds, args.threads, args.device,
                                   checker.events_endpoint)
                    runs.append(run)
                    console.print(_line(run, args.rate))
        finally:
            checker.stop()
    where = f"{args.device}, one-process detector with {args.threads} torch thread(s), {os.cpu_count()} cores"
    table = Table(title=f"{len(counts)} camera counts at {args.rate:g} fps each, {args.seconds:g} s measured ({where})")
    for column in ("mode", "K", "missed", "p50 ms", "p99 ms", "CPU %", "CPU ms/frame", "streams/core", "RSS MB",
                   "late shapes", "fits", "load"):
        table.add_column(column, justify="right")
    for run in runs:
        table.add_row(run.mode, str(run.k), str(sum(s.missed_at(args.rate) for s in run.streams)), f"{run.p(50):.1f}",
                      f"{run.p(99):.1f}", f"{100 * run.cores:.0f}", f"{run.cpu_ms_per_frame:.1f}",
                      f"{run.k / run.cores:.1f}",
                      f"{sum(p.rss_mb for p in run.processes):.0f}", str(run.late_shapes),
                      "yes" if fits(run, args.rate) else "no", f"{run.load[0]:.1f}/{run.load[1]:.1f}")
    console.print(table)
    for mode in modes:
        best = [r for r in runs if r.mode == mode and fits(r, args.rate)]
        top = max(best, key=lambda r: r.k) if best else None
        console.print(f"{mode}: largest K that fits: " + (f"{top.k} ({top.k / top.cores:.1f} streams per core)"
                                                         if top else "none"))
    return 0


def _line(run: Run, rate: float) -> str:
    missed = sum(s.missed_at(rate) for s in run.streams)
    return (f"mode={run.mode} k={run.k} missed={missed} p50_ms={run.p(50):.1f} p99_ms={run.p(99):.1f} "
            f"cpu_pct={100 * run.cores:.0f} cpu_ms_per_frame={run.cpu_ms_per_frame:.1f} "
            f"streams_per_core={run.k / run.cores:.1f} "
            f"rss_mb={sum(p.rss_mb for p in run.processes):.0f} late_shapes={run.late_shapes} "
            f"warm_s={max(p.warm_s for p in run.processes):.2f} load={run.load[0]:.2f}/{run.load[1]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
