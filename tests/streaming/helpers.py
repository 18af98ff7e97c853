"""Shared helpers of the streaming tests: the demo-procedure task graph, polling with a deadline, damaged videos."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from graphs.task_graph import END, START, TaskGraph
from streaming.demo.procedure import PRECONDITIONS, SCENARIO, STEP_IDS, STEP_NAMES


def tea_graph() -> TaskGraph:
    """The demo procedure's ground-truth graph (see `streaming.demo.procedure`)."""
    nodes = [START, *STEP_IDS, END]
    index = {n: i for i, n in enumerate(nodes)}
    adj = np.zeros((len(nodes), len(nodes)), dtype=bool)
    needed: set[int] = set()
    for step, reqs in PRECONDITIONS.items():
        for req in reqs or (START,):
            adj[index[step], index[req]] = True
        needed.update(reqs)
    for step in STEP_IDS:
        if step not in needed:
            adj[index[END], index[step]] = True
    return TaskGraph(STEP_IDS, STEP_NAMES, adj, scenario=SCENARIO)


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0, step: Callable[[], object] | None = None) -> bool:
    """Call ``step`` repeatedly until ``predicate()`` holds or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if step is not None:
            step()
        if predicate():
            return True
        if step is None:
            time.sleep(0.01)
    return predicate()


def write_noise_video(path: Path, frames: int = 60) -> Path:
    """Write a 30 fps, 64x48 video of random noise (every frame is large and unlike the last) with OpenCV."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 30.0, (64, 48))
    assert writer.isOpened()
    rng = np.random.default_rng(0)
    for _ in range(frames):
        writer.write(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))
    writer.release()
    return path


def write_damaged_video(path: Path, frames: int = 60) -> Path:
    """Write a noise video (`write_noise_video`), then zero the middle fifth of its frame data.

    The container (``moov``, written last) stays intact, so the file opens and its first frames
    decode; decoding fails in the zeroed part, as for a file damaged on disk or in transfer.
    """
    write_noise_video(path, frames)
    data = bytearray(path.read_bytes())
    end = data.find(b"moov")
    assert end > 0
    start, stop = int(end * 0.4), int(end * 0.6)
    data[start:stop] = bytes(stop - start)
    path.write_bytes(bytes(data))
    return path
