"""Streaming speed of the MiniROAD step at the published sizes (input 4096, embedding 2048, hidden 1024).

Usage::

    python benchmarks/recognition_speed.py                       # 2 threads, 2000 frames, all modes
    python benchmarks/recognition_speed.py --threads 1 --frames 500 --modes fast-fp32,fast-int8

Modes (all under ``torch.inference_mode``, GRU state carried frame to frame, random input features
generated before timing):

* ``module``     — `MiniROAD.step` on one frame (allocates its intermediates);
* ``fast-fp32``  — `FastStepper`, preallocated buffers, exact;
* ``fast-int8``  — `FastStepper(precision="int8")`, weight-only int8 (4x less memory traffic);
* ``chunk-K``    — `MiniROAD.step` on chunks of K frames (throughput when frames can be batched; the
  latency column is per chunk).

``--motion-lag L`` times a detector with motion inputs (`recognition.motion`): the ``fast-*`` modes take the
features and compute their change live, as a stream does; ``module`` and ``chunk-K`` take the inputs precomputed.
``python benchmarks/recognition_speed.py --input-dim 1280 --embed-dim 128 --hidden-dim 128 --classes 7
--motion-lag 10`` is the walkthrough's detector on efficientnet-lite0 (``--motion-lag 0`` beside it for the cost).

Prints frames/s and per-frame latency p50/p99 (ms) per mode, and the largest probability difference
from the batch forward. Targets (issue 4): >= 500 frames/s and p99 < 5 ms on 2 CPU cores.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.options import threads_option
from graphs.common.settings_files import WIDTH, Bound, bounded_option
from recognition.model import FastStepper, MiniROAD, MiniROADConfig
from recognition.motion import MAX_MOTION_LAG, model_inputs


def time_calls(call: Callable[[int], object], n: int, warmup: int) -> np.ndarray:
    """Seconds taken by ``call(i)`` for ``i`` in ``range(n)``, after ``warmup`` untimed calls."""
    for i in range(warmup):
        call(i % n)
    out = np.empty(n)
    for i in range(n):
        start = time.perf_counter()
        call(i)
        out[i] = time.perf_counter() - start
    return out


def bench_module(model: MiniROAD, frames: torch.Tensor, reference: torch.Tensor, warmup: int):
    """`MiniROAD.step`, one frame per call."""
    state = model.init_state()
    got = []
    for t in range(len(reference)):
        p, state = model.step(frames[t : t + 1], state)
        got.append(p)
    diff = (torch.cat(got) - reference).abs().max().item()
    holder = [model.init_state()]

    def call(i: int) -> None:
        _, holder[0] = model.step(frames[i : i + 1], holder[0])

    return time_calls(call, len(frames), warmup), len(frames), diff


def bench_fast(model: MiniROAD, frames: torch.Tensor, reference: torch.Tensor, warmup: int, precision: str):
    """`FastStepper`, one frame per call, preallocated buffers."""
    stepper = FastStepper(model, precision=precision)
    got = torch.cat([stepper.step(frames[t]).clone() for t in range(len(reference))])
    diff = (got - reference).abs().max().item()
    stepper.reset()
    return time_calls(lambda i: stepper.step(frames[i]), len(frames), warmup), len(frames), diff


def bench_chunk(model: MiniROAD, frames: torch.Tensor, reference: torch.Tensor, warmup: int, k: int):
    """`MiniROAD.step` on chunks of ``k`` frames (latency per chunk)."""
    chunks = frames[: (len(frames) // k) * k].reshape(-1, k, frames.shape[1])  # (N, k, F)
    state = model.init_state()
    parts = []
    for c in range(len(reference) // k):
        p, state = model.step(chunks[c : c + 1], state, return_all=True)
        parts.append(p[0])
    diff = (torch.cat(parts) - reference[: len(parts) * k]).abs().max().item() if parts else 0.0
    holder = [model.init_state()]

    def call(i: int) -> None:
        _, holder[0] = model.step(chunks[i : i + 1], holder[0])

    return time_calls(call, len(chunks), max(1, warmup // k)), len(chunks) * k, diff


@exit_on_input_error
def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=threads_option, default=2)
    parser.add_argument("--frames", type=bounded_option(Bound(1, 10**7)), default=2000)
    parser.add_argument("--warmup", type=bounded_option(Bound(0, 10**7)), default=100)
    parser.add_argument("--modes", default="module,fast-fp32,fast-int8,chunk-8")
    published = MiniROADConfig()  # the sizes timed by default
    parser.add_argument("--input-dim", type=bounded_option(WIDTH), default=published.input_dim)
    parser.add_argument("--embed-dim", type=bounded_option(WIDTH), default=published.embed_dim)
    parser.add_argument("--hidden-dim", type=bounded_option(WIDTH), default=published.hidden_dim)
    parser.add_argument("--classes", type=bounded_option(Bound(2, 10**4)), default=published.num_classes)
    parser.add_argument("--motion-lag", type=bounded_option(Bound(0, MAX_MOTION_LAG)), default=0,
                        help="motion inputs over this many frames (0: none)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = MiniROADConfig(args.input_dim, args.embed_dim, args.hidden_dim, args.classes,
                            motion_lag=args.motion_lag)
    model = MiniROAD(config).eval()
    frames = torch.randn(args.frames, config.input_dim)  # (T, F), made before timing
    # What MiniROAD.forward and .step read: the features, or with motion inputs the features and their change.
    inputs = torch.from_numpy(model_inputs(frames.numpy(), args.motion_lag))
    check = min(200, args.frames)
    with torch.inference_mode():
        reference = torch.softmax(model(inputs[None, :check])[0][0], dim=-1)  # (check, C)

    table = Table(
        title=f"MiniROAD streaming step, {config.input_dim}->{config.embed_dim}->{config.hidden_dim}, "
        f"motion lag {args.motion_lag}, "
        f"{args.threads} thread(s), {args.frames} frames"
    )
    for col in ("mode", "frames/s", "p50 ms", "p99 ms", "max |Δp| vs batch"):
        table.add_column(col, justify="right" if col != "mode" else "left")

    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        with torch.inference_mode():
            if mode == "module":
                latencies, n_frames, diff = bench_module(model, inputs, reference, args.warmup)
            elif mode.startswith("fast-"):
                precision = mode.removeprefix("fast-")
                latencies, n_frames, diff = bench_fast(model, frames, reference, args.warmup, precision)
            elif mode.startswith("chunk-"):
                k = int(mode.removeprefix("chunk-"))
                latencies, n_frames, diff = bench_chunk(model, inputs, reference, args.warmup, k)
            else:
                raise SystemExit(f"unknown mode {mode!r}")
        fps = n_frames / latencies.sum()
        p50, p99 = np.percentile(latencies, [50, 99]) * 1e3
        table.add_row(mode, f"{fps:.0f}", f"{p50:.2f}", f"{p99:.2f}", f"{diff:.1e}")
    console = table_console(Console())
    console.print(table)
    console.print("chunk-K latency is per chunk of K frames; targets: >= 500 frames/s, p99 < 5 ms")


if __name__ == "__main__":
    main()
