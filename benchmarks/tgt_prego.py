"""PREGO online mistake detection with TGT-text graphs, scored like ``prego-bench`` (GT and PRED modes).

For each dataset and seed, one graph is learned from the training split with the ``tgt-text`` learner
(`tgml.learners.tgt_text.train`; settings of ``configs/tgt-text.toml``, with the relaxed post-processing rule the
benchmark's DO protocol uses on these datasets; ``--set key=value`` overrides one setting) and the test sequences
are scored with the benchmark's own `tgml.bench.prego.evaluate_graph`. Prints Avg / correct / mistake F1, mean ± std
over seeds, next to the published TGT-text figures, and the time per graph.

Usage::

    python benchmarks/tgt_prego.py [--data ../shared/data] [--datasets epic-tent-o,assembly101-o] [--seeds 3] \\
        [--set epochs=300 ...]
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import numpy as np

from graphs.common.command_line import ArgumentParser
from graphs.common.errors import exit_on_input_error
from graphs.common.options import check_seed_count
from graphs.common.settings_files import parse_set_options
from tgml.bench.prego import evaluate_graph, flat_metrics, load_dataset, mode_sequences, resolve_data
from tgml.bench.prego.methods import build_graph
from tgml.learners.registry import learner

ROOT = Path(__file__).resolve().parents[1]
# Seminara et al. 2024, online mistake detection table, TGT-text row: Avg / correct / mistake F1.
PUBLISHED = {("assembly101-o", "gt"): (62.8, 69.8, 55.7), ("epic-tent-o", "gt"): (64.1, 93.8, 34.5),
             ("assembly101-o", "pred"): (53.0, 67.8, 38.2), ("epic-tent-o", "pred"): (43.8, 69.5, 18.2)}


@exit_on_input_error
def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    default_data = Path(os.environ.get("MISTAKE_DATA") or ROOT.parent / "shared" / "data")
    parser.add_argument("--data", type=Path, default=default_data, help="data folder (default $MISTAKE_DATA)")
    parser.add_argument("--datasets", default="epic-tent-o,assembly101-o")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 42, 43, ... (default 3)")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "tgt-text.toml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one setting")
    args = parser.parse_args()
    check_seed_count(args.seeds)  # --seeds 0 ended in a ZeroDivisionError traceback after the first dataset loaded
    given = parse_set_options(args.set)
    # Checked before any training, naming the file or --set option at fault (build_graph checks only as it trains).
    config = learner("tgt-text").config_file(args.config, option="--set", **({"relaxed": True} | given))
    settings = {key: value for key, value in dataclasses.asdict(config).items() if key != "seed"}
    datasets = [d for d in args.datasets.split(",") if d]
    layout = resolve_data(args.data, datasets, segments=True)
    for name in datasets:
        data = load_dataset(layout, name)
        # None: a figure with nothing to count (flat_metrics).
        runs: dict[str, list[tuple[float | None, float | None, float | None]]] = {"gt": [], "pred": []}
        started = time.perf_counter()
        for seed in range(42, 42 + args.seeds):
            graph = build_graph("tgt-text", data, settings, seed)
            for mode in runs:
                m = flat_metrics(evaluate_graph(graph, mode_sequences(data, mode)))
                runs[mode].append((m["avg_f1"], m["correct_f1"], m["mistake_f1"]))
        seconds = (time.perf_counter() - started) / args.seeds
        for mode, values in runs.items():
            table = np.array(values, dtype=float)  # a None becomes NaN, so its mean says "nan", not a TypeError
            cells = "  ".join(f"{m:.1f} ± {s:.1f}" for m, s in zip(table.mean(0), table.std(0), strict=True))
            published = " / ".join(f"{v:.1f}" for v in PUBLISHED[(name, mode)])
            print(f"{name} {mode.upper()}: Avg / correct / mistake F1  {cells}  (published {published}), "
                  f"{args.seeds} seeds")
        print(f"{name}: {seconds:.1f} s per graph ({len(data.step_ids)} key-steps, {len(data.train)} videos)")


if __name__ == "__main__":
    main()
