"""Speed of TGML training on Assembly101-O (targets from the issue).

Prints, for ``assembly101-o/train.json`` with the three-part augmentation:
1. the time of one training epoch (forward, backward, Adam step, per-epoch re-de-duplication included) with the
   vectorised loss and with a plain per-position Python loop (kept here only, as the baseline), and their
   ratio (target >= 200x);
2. the wall time of a full DO training: 1200 epochs, augmentation, no early stopping (target < 10 s on 2 cores).

Usage::

    python benchmarks/tgml_speed.py [--data ../shared/data] [--threads 1] [--loop-epochs 2] [--fast-epochs 100]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from graphs.annotations import load_annotations
from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.options import epochs_option, threads_option
from tgml.learners.do.config import DOConfig
from tgml.learners.do.model import DirectOptimization, wrap
from tgml.learners.do.train import build_training_set, epoch_rows, train_do
from tgml.sequences import first_occurrence

SCENARIO = "assembly101"


def loop_loss(z: torch.Tensor, sequences: list[list[int]], contrast: list[int], beta: float) -> torch.Tensor:
    """The TGML loss as a plain loop over positions (the TGML formula of docs/method.md, no vectorisation)."""
    eps = 1e-6
    total = z.new_zeros(())
    for seq in sequences:
        for t in range(1, len(seq) - 1):  # S..E of <β, S, y…, E, γ>
            seen = seq[:t]
            unseen = [h for h in contrast if h not in seen]
            numerator = (z[seq[t], seen] + eps).sum()
            denominator = (z[unseen][:, seen] + eps).sum()
            total = total - (torch.log(numerator) - beta * torch.log(denominator))
    return total


def last_occurrence(seq: list[int]) -> list[int]:
    """Part (b) written plainly: a repeat moves the step to its latest position."""
    return list(reversed(dict.fromkeys(reversed(seq))))


def random_dedup(seq: list[int], rng: np.random.Generator) -> list[int]:
    """Part (c) de-duplication written plainly: each repeat moves the step later with probability 0.5."""
    chosen: dict[int, int] = {}
    for pos, step in enumerate(seq):
        if step not in chosen or rng.random() < 0.5:
            chosen[step] = pos
    return [seq[p] for p in sorted(chosen.values())]


@exit_on_input_error
def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_data = os.environ.get("MISTAKE_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--data", default=default_data, help="shared data folder")
    parser.add_argument("--threads", type=threads_option, default=1,
                        help="torch threads for the epoch timings (training itself always uses one)")
    parser.add_argument("--loop-epochs", type=epochs_option, default=2, help="epochs timed with the per-position loop")
    parser.add_argument("--fast-epochs", type=epochs_option, default=100, help="epochs timed with the vectorised loss")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ann = load_annotations(Path(args.data) / "assembly101-o" / "train.json", check_times=False)
    step_ids, step_names = ann.steps_of(SCENARIO)
    raw = [v.steps for v in ann.scenario_videos(SCENARIO)]
    n = len(step_ids)
    config = DOConfig(epochs=1200, augment=True, relaxed=True)

    # Vectorised: fixed rows built once, part (c) re-de-duplicated every epoch, one matrix product per epoch.
    data = build_training_set(raw, step_ids, augment=True)
    model = DirectOptimization(n, torch.Generator().manual_seed(0))
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)

    def fast_epoch() -> int:
        observed, targets, weights = epoch_rows(data, rng)
        _, loss = model(observed, targets, weights, config.beta)
        assert loss is not None  # targets were given, so the model returned a loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        return int(weights.sum())

    fast_epoch()  # warm-up
    start = time.perf_counter()
    for _ in range(args.fast_epochs):
        rows = fast_epoch()
    fast = (time.perf_counter() - start) / args.fast_epochs

    # Plain loop: the same augmented set rebuilt with Python lists, the loss summed position by position.
    index = {s: k for k, s in enumerate(step_ids)}
    mapped = [[index[s] for s in seq] for seq in raw]
    fixed_seqs = [wrap(first_occurrence(s), n) for s in mapped] + [wrap(last_occurrence(s), n) for s in mapped]
    contrast = list(range(1, n + 3))
    loop_model = DirectOptimization(n, torch.Generator().manual_seed(0))
    loop_opt = torch.optim.Adam(loop_model.parameters(), lr=0.1)
    loop_rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(args.loop_epochs):
        epoch_seqs = fixed_seqs + [wrap(random_dedup(s, loop_rng), n) for s in mapped]
        loss = loop_loss(loop_model.adjacency(), epoch_seqs, contrast, config.beta)
        loop_opt.zero_grad()
        loss.backward()
        loop_opt.step()
    loop = (time.perf_counter() - start) / args.loop_epochs

    start = time.perf_counter()
    result = train_do(raw, step_ids, step_names, config, SCENARIO)
    full = time.perf_counter() - start

    table = Table(title=f"TGML speed, Assembly101-O train, augmentation, {torch.get_num_threads()} torch threads")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    table.add_row("loss rows per epoch", f"{rows}", "")
    table.add_row("epoch, per-position loop", f"{loop * 1e3:.1f} ms", "")
    table.add_row("epoch, vectorised", f"{fast * 1e3:.2f} ms", "")
    table.add_row("speed-up", f"{loop / fast:.0f}x", ">= 200x")
    table.add_row(f"full DO training ({result.epochs_run} epochs)", f"{full:.2f} s", "< 10 s")
    table_console(Console()).print(table)


if __name__ == "__main__":
    main()
