"""The ``tgml`` command: learn, show, evaluate and benchmark task graphs.

Usage::

    tgml train --annotations ../shared/data/epic-tent-o/train.json --scenario epic-tent --out tent.json \\
        [--config configs/do-epic-tent.toml] [--beta 0.005] [--epochs 1200] [--seed 42] [--augment] [--relaxed] \\
        [--early-stop {none,sa-plateau,sa-threshold:X}] [--edge-threshold {1/n,1/(n+2),1/N}] [--quiet]
    tgml show tent.json [--dot tent.dot | --dot tent.svg]
    tgml eval --pred coffee.json --gt ../shared/data/captaincook4d/ground_truth_task_graphs/coffee.json
    tgml bench-captaincook --data ../shared/data/captaincook4d --seeds 5 [--seed-base 42] [--workers 2] \\
        [--procedures coffee,ramen] [--epochs 1000] [--edge-threshold {1/n,1/(n+2),1/N}] [--config FILE] \\
        [--json out.json]

Bad input (missing or malformed file, unknown scenario, step id not in the taxonomy, no usable sequence, a
cyclic graph file) ends with one ``error:`` line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from graphs.edge_metrics import evaluate_files
from graphs.errors import ArgumentParser, InputError, exit_on_input_error
from graphs.files import check_output, write_text
from graphs.graph_drawing import write_rendering
from graphs.options import workers_option
from graphs.task_graph import load_graph, save_graph
from tgml.bench.captaincook import ANNOTATIONS, DEFAULT_CONFIG, DEFAULT_SEED_BASE, results_table, run_benchmark
from tgml.graph_table import terminal_view
from tgml.train import EDGE_THRESHOLDS, TrainConfig, load_train_config, train_from_annotations


def _parser() -> ArgumentParser:
    parser = ArgumentParser(prog="tgml", description="Learn task graphs with TGML (Direct Optimization).")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="learn the task graph of one scenario")
    train.add_argument("--annotations", required=True, help="annotation JSON file")
    train.add_argument("--scenario", required=True, help="scenario (procedure) name in the taxonomy")
    train.add_argument("--out", required=True, help="output task-graph JSON")
    train.add_argument("--config", help="TOML file of training settings (flags override it)")
    train.add_argument("--beta", type=float, help="contrastive weight (default 0.005)")
    train.add_argument("--epochs", type=int, help="maximum epochs (default 1000)")
    train.add_argument("--lr", type=float, help="Adam learning rate (default 0.1)")
    train.add_argument("--seed", type=int, help="random seed (default 42)")
    train.add_argument("--augment", action=argparse.BooleanOptionalAction, default=None,
                       help="three-part sequence augmentation (SPEC §1)")
    train.add_argument("--relaxed", action=argparse.BooleanOptionalAction, default=None,
                       help="relaxed post-processing rule (SPEC §1)")
    train.add_argument("--early-stop", help="none | sa-plateau | sa-threshold:X (default none)")
    train.add_argument("--edge-threshold", choices=list(EDGE_THRESHOLDS),
                       help="cut weights at 1/n (n key-steps, SPEC; default), 1/(n+2) (the authors' code) "
                            "or 1/N (N = n + 4 nodes)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")

    show = sub.add_parser("show", help="print a task graph; --dot writes DOT (or SVG/PNG/PDF via Graphviz)")
    show.add_argument("graph", help="task-graph JSON")
    show.add_argument("--dot", metavar="OUT", help="write .dot/.gv text, or .svg/.png/.pdf if Graphviz exists")

    ev = sub.add_parser("eval", help="edge precision/recall/F1 against a ground-truth graph")
    ev.add_argument("--pred", required=True, help="predicted task-graph JSON")
    ev.add_argument("--gt", required=True, help="ground truth: task-graph JSON or CaptainCook4D graph")

    bench = sub.add_parser("bench-captaincook", help="CaptainCook4D task-graph generation benchmark")
    bench.add_argument("--data", required=True, help="captaincook4d data folder")
    bench.add_argument("--seeds", type=int, default=5, help="number of seeds (default 5)")
    bench.add_argument("--seed-base", type=int, default=DEFAULT_SEED_BASE, help="first seed (default 42)")
    bench.add_argument("--workers", type=workers_option, default=min(os.cpu_count() or 1, 4),
                       help="worker processes (0: one per core; at most 4 per core)")
    bench.add_argument("--procedures", help="comma-separated subset of procedures")
    bench.add_argument("--epochs", type=int, help="maximum epochs (default 1000)")
    bench.add_argument("--config", help="TOML file of training settings")
    bench.add_argument("--edge-threshold", choices=list(EDGE_THRESHOLDS),
                       help="1/n (SPEC, default), 1/(n+2) (the authors' code) or 1/N (N = n + 4 nodes)")
    bench.add_argument("--ensemble", type=int, default=1,
                       help="average the weights of K DO models per seed before post-processing (default 1)")
    bench.add_argument("--json", help="write all results to this JSON file")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _config(args: argparse.Namespace, base: TrainConfig) -> TrainConfig:
    overrides = {k: getattr(args, k, None) for k in ("beta", "epochs", "lr", "seed", "augment", "relaxed")}
    overrides["early_stop"] = getattr(args, "early_stop", None)
    overrides["edge_threshold"] = getattr(args, "edge_threshold", None)
    if args.config:
        return load_train_config(args.config, base, **overrides)
    return base.replace(**{k: v for k, v in overrides.items() if v is not None})


@exit_on_input_error
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tgml`` console script."""
    args = _parser().parse_args(argv)
    console = Console()  # tables only: result lines are plain print()s, never wrapped or read as rich markup
    if args.command == "train":
        # Before training: a failed save would lose the run.
        check_output(args.out, "graph file", inputs=[args.annotations, args.config])
        result = train_from_annotations(args.annotations, args.scenario, _config(args, TrainConfig()),
                                        progress=not args.quiet)
        save_graph(result.graph, args.out)
        print(f"{args.scenario}: {result.epochs_run} epochs, loss {result.final_loss:.3f}, "
              f"SA {result.sequence_accuracy:.3f}, {len(result.graph.edges())} edges -> {args.out}")
    elif args.command == "show":
        graph = load_graph(args.graph)
        console.print(terminal_view(graph))
        if args.dot:
            print(f"wrote {write_rendering(graph, args.dot)}")
    elif args.command == "eval":
        s = evaluate_files(args.pred, args.gt)
        print(f"precision {s.precision:.1f}  recall {s.recall:.1f}  F1 {s.f1:.1f}  "
              f"({s.true_positives} of {s.predicted} predicted edges correct, {s.expected} expected)")
    else:
        if args.seeds < 1:
            raise InputError(f"--seeds {args.seeds}: need at least 1")
        if args.json:
            check_output(args.json, "results file", inputs=[args.config, Path(args.data) / ANNOTATIONS])
        seeds = list(range(args.seed_base, args.seed_base + args.seeds))
        procedures = [p for p in (args.procedures or "").split(",") if p]
        bench = run_benchmark(args.data, seeds, _config(args, DEFAULT_CONFIG), procedures, args.workers,
                              progress=not args.quiet, ensemble=args.ensemble)
        console.print(results_table(bench))
        if args.json:
            write_text(args.json, json.dumps(bench.to_dict(), indent=2) + "\n", "results file")
            print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
