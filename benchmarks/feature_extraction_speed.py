"""Throughput of ``recognition-features``: frames per second from labelled video files to a feature folder.

Usage::

    python benchmarks/feature_extraction_speed.py [--extractor efficientnet-lite0] [--threads 2] [--videos 4]
        [--seconds 20] [--fps 30] [--device cpu|cuda] [--batch 8]

Writes ``--videos`` camera-like videos (640x480, 30 fps, ``--seconds`` long: the demo procedure upscaled, MPEG-4)
with their annotation file into a temporary folder, then runs what ``recognition-features`` runs on them at
``--fps`` features per second with ``--threads`` workers, and prints frames per second (decoding, resizing and the
backbone, batched; target >= 60 on 2 CPU cores), the same for the backbone alone on decoded frames, the CPU time
spent per frame (which, unlike frames per second, hardly depends on other work sharing the cores) and the load
average before and after. ``--device cuda --batch 256 --threads 1`` measures the same on a GPU.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.options import fps_option, threads_option
from graphs.common.settings_files import COUNT, RUN_SECONDS, Bound, bounded_option
from streaming.demo.procedure import annotation_file
from streaming.demo.synthetic_video import demo_video
from streaming.extractors import EXTRACTOR_NAMES, make_extractor
from streaming.offline.features import FeatureExtractionConfig, extract_feature_folder

SIZE = (640, 480)


def write_videos(folder: Path, count: int, seconds: float) -> Path:
    """Camera-like videos (the demo upscaled to 640x480 at 30 fps) and their annotation file; returns the file."""
    source, segments = demo_video("correct")
    cap = cv2.VideoCapture(str(source))
    frames: list[np.ndarray] = []
    while len(frames) < int(seconds * 30):
        ok, bgr = cap.read()
        if not ok:
            break
        frames.append(cv2.resize(bgr, SIZE, interpolation=cv2.INTER_LINEAR))
    cap.release()
    (folder / "videos").mkdir()
    executions = {}
    for k in range(count):
        writer = cv2.VideoWriter(str(folder / "videos" / f"cam{k}.mp4"), cv2.VideoWriter.fourcc(*"mp4v"), 30.0, SIZE)
        for bgr in frames:
            writer.write(bgr)
        writer.release()
        executions[f"cam{k}"] = [s for s in segments if s[2] <= len(frames) / 30]
    labels = folder / "labels.json"
    labels.write_text(json.dumps(annotation_file(executions)))
    return labels


def backbone_only(extractor_name: str, workers: int, device: str, batch: int, frames: int = 1024) -> float:
    """Frames per second of the extractor alone on 640x480 frames, ``batch``-frame calls over ``workers`` threads."""
    extractor = make_extractor(extractor_name, device=device)
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, 256, (batch, SIZE[1], SIZE[0], 3), dtype=np.uint8)] * max(1, frames // batch)
    extractor(batches[0])  # warm-up (and, on a GPU, the kernels' first launch)
    torch.set_num_threads(1)
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(extractor, batches))  # each call returns numpy features: the GPU work is finished
    return len(batches) * batch / (time.perf_counter() - started)


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Run the measurement and print a table."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extractor", default="efficientnet-lite0", choices=EXTRACTOR_NAMES, help="feature extractor")
    parser.add_argument("--threads", type=threads_option, default=2, help="workers (one core each)")
    parser.add_argument("--videos", type=bounded_option(Bound(2, COUNT.high)), default=4,
                        help="videos to extract (at least 2: one is the test split, the other trains)")
    parser.add_argument("--seconds", type=bounded_option(RUN_SECONDS, integer=False), default=20.0,
                        help="length of each video")
    parser.add_argument("--fps", type=fps_option, default=30.0, help="features per second of video")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the extractor runs")
    parser.add_argument("--batch", type=bounded_option(Bound(1, 65536)), default=8,
                        help="frames per extractor call (on a GPU: 256)")
    args = parser.parse_args(argv)
    console = table_console(Console())
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        labels = write_videos(folder, args.videos, args.seconds)
        config = FeatureExtractionConfig(
            videos=str(folder / "videos"), annotations=str(labels), out=str(folder / "features"),
            extractor=args.extractor, fps=args.fps, test_videos=(f"cam{args.videos - 1}",), threads=args.threads,
            device=args.device, batch=args.batch,
        )  # fmt: skip
        started, cpu_started = time.perf_counter(), time.process_time()
        report = extract_feature_folder(config, progress=False)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    alone = backbone_only(args.extractor, args.threads, args.device, args.batch)
    load_after = os.getloadavg()[0]
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{args.threads} CPU workers"
    table = Table(title=f"recognition-features, {args.extractor}, {where}, batch {args.batch}, 640x480 MPEG-4 videos")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    table.add_row("frames extracted", f"{report.frames} ({args.videos} videos at {args.fps:g} fps) + "
                  f"{report.copy_frames} of augmented copies", "")
    table.add_row("decode + features, frames/s", f"{report.frames_per_second:.1f}", ">= 60")
    table.add_row("whole command (checks, model load, writing), frames/s", f"{report.all_frames / wall:.1f}", "")
    table.add_row("features alone on decoded frames, frames/s", f"{alone:.1f}", "")
    # CPU time does not depend on how busy the machine is (much): it says what idle cores would give.
    per_frame = 1000 * cpu / max(report.all_frames, 1)
    table.add_row("CPU time per frame, all threads (whole command), ms", f"{per_frame:.1f}", "")
    table.add_row(
        f"  frames/s that {args.threads} idle cores would give at that cost",
        f"{args.threads * 1000 / per_frame:.0f}",
        "",
    )
    table.add_row("load average (1 min) before / after", f"{load_before:.2f} / {load_after:.2f}", "")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
