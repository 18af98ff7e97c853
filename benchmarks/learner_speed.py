"""Training time of the noisy-AND learner next to Direct Optimization, one graph at a time, one thread.

Prints seconds per graph (mean over graphs, after one untimed warm-up graph) for:

* CaptainCook4D, the 24 procedures: DO with the benchmark protocol (up to 1000 epochs, SA-plateau stopping) and
  noisy-AND with its default settings;
* the PREGO training splits: DO with the ``[do]`` table of ``tgml/bench/settings/prego-<dataset>.toml`` and
  noisy-AND with ``configs/noisy-and-<dataset>.toml``;
* a second table: the PREGO benchmark's ``do-ensemble``, ``noisy-and`` and ``noisy-and-do`` graphs, each built by
  the benchmark's own builder with its shipped ``tgml/bench/settings/prego-<dataset>.toml`` table, seed 42.
  ``noisy-and-do`` trains both of the others, so it should take about their sum: the combination itself is a few
  array operations and one post-processing.

Budget from the issue: noisy-AND should not take much longer than DO (about 0.3 s per CaptainCook4D procedure and
1-2 s per PREGO graph).

Usage::

    python benchmarks/learner_speed.py [--data ../shared/data] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from graphs.annotations import load_annotations
from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.settings_files import COUNT, bounded_option
from tgml.bench import prego
from tgml.bench.captaincook import DEFAULT_CONFIG, load_procedures
from tgml.bench.prego.methods import load_method_settings
from tgml.learners.do.train import train_do
from tgml.learners.noisy_and.config import NoisyAndConfig
from tgml.learners.noisy_and.train import train_noisy_and
from tgml.learners.registry import learner

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
PREGO = {"assembly101-o": "assembly101", "epic-tent-o": "epic-tent"}
PREGO_METHODS = ("do-ensemble", "noisy-and", "noisy-and-do")


def seconds_per_call(calls: Sequence[Callable[[], object]], repeats: int) -> float:
    """Mean wall time of the calls (each run ``repeats`` times) after one untimed warm-up call."""
    calls[0]()
    start = time.perf_counter()
    for _ in range(repeats):
        for call in calls:
            call()
    return (time.perf_counter() - start) / (repeats * len(calls))


@exit_on_input_error
def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_data = os.environ.get("MISTAKE_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--data", default=default_data, help="shared data folder")
    parser.add_argument("--repeats", type=bounded_option(COUNT), default=1, help="times every graph is trained")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = Path(args.data)

    table = Table(title="Seconds per learned graph (1 thread)")
    for column in ("data", "graphs", "DO", "noisy-AND", "ratio"):
        table.add_column(column, justify="left" if column == "data" else "right")

    procedures = load_procedures(data / "captaincook4d")
    do_cc = [partial(train_do, p.sequences, p.step_ids, p.step_names, DEFAULT_CONFIG) for p in procedures]
    and_cc = [partial(train_noisy_and, p.sequences, p.step_ids, p.step_names, NoisyAndConfig()) for p in procedures]
    do_s, and_s = seconds_per_call(do_cc, args.repeats), seconds_per_call(and_cc, args.repeats)
    table.add_row("CaptainCook4D", str(len(procedures)), f"{do_s:.3f}", f"{and_s:.3f}", f"{and_s / do_s:.2f}")

    for dataset, scenario in PREGO.items():
        ann = load_annotations(data / dataset / "train.json", check_times=False)
        ids, names = ann.steps_of(scenario)
        train = [v.steps for v in ann.scenario_videos(scenario)]
        do_config = learner("do").config(load_method_settings(dataset)["do"], seed=42)
        and_config = learner("noisy-and").config_file(CONFIGS / f"noisy-and-{dataset}.toml")
        do_s = seconds_per_call([partial(train_do, train, ids, names, do_config)], args.repeats)
        and_s = seconds_per_call([partial(train_noisy_and, train, ids, names, and_config)], args.repeats)
        table.add_row(f"PREGO {dataset}", "1", f"{do_s:.3f}", f"{and_s:.3f}", f"{and_s / do_s:.2f}")
    console = table_console(Console())
    console.print(table)
    console.print(prego_method_table(data, args.repeats))


def prego_method_table(data: Path, repeats: int) -> Table:
    """Seconds per graph of the benchmark's ensemble / noisy-AND / combined methods on each PREGO training split."""
    table = Table(title="Seconds per PREGO benchmark graph (1 thread, seed 42)")
    table.add_column("data")
    for method in PREGO_METHODS:
        table.add_column(method, justify="right")
    for dataset in PREGO:
        bench_data = prego.load_dataset(prego.resolve_data(data, [dataset]), dataset, pred=False)
        settings = prego.load_method_settings(dataset)
        builds = [[partial(prego.build_graph, m, bench_data, settings[m], 42, None)] for m in PREGO_METHODS]
        table.add_row(f"PREGO {dataset}", *(f"{seconds_per_call(b, repeats):.2f}" for b in builds))
    return table


if __name__ == "__main__":
    main()
