"""The ``tgml`` command: learn, show, evaluate and benchmark task graphs.

Usage::

    tgml train --annotations ../shared/data/epic-tent-o/train.json --scenario epic-tent --out tent.json \\
        [--method {noisy-and,do,tgt-text}] [--config FILE] [--epochs N] [--lr LR] [--seed 42] [--relaxed] \\
        [--include-mistakes] [--exclude-videos A,B] [--order-only] [--quiet] \\
        noisy-and only: [--edge-cost NATS] [--noise RHO] [--cut THETA] \\
        do only:        [--beta 0.005] [--augment] [--early-stop {none,sa-plateau,sa-threshold:X}] \\
                        [--edge-threshold {1/n,1/(n+2),1/N}]
    tgml show tent.json [--dot tent.dot | --dot tent.svg]
    tgml eval --pred coffee.json --gt ../shared/data/captaincook4d/ground_truth_task_graphs/coffee.json
    tgml eval --pred ../shared/data/captaincook4d/llm_task_graphs/graph_coffee.adjlist --gt .../coffee.json
    tgml bench-captaincook --data ../shared/data --seeds 5 [--seed-base 42] [--workers 2] \\
        [--method do count-based msgi msg2 llm noisy-and] [--llm-graphs DIR] \\
        [--procedures coffee,ramen] [--epochs 1000] [--edge-threshold {1/n,1/(n+2),1/N}] [--config FILE] \\
        [--json out.json]
    tgml bench-queries --data ../shared/data [--dataset captaincook4d,epic-tent-o,assembly101-o] \\
        [--procedures coffee,ramen] [--folds K] [--seed 42] [--epochs N] [--json out.json]
    tgml bench-synthetic [--seeds 2] [--learners do,noisy-and,noisy-and-sparse] [--workers 2] [--json out.json]

``tgml bench-captaincook`` prints DO's per-procedure table by default; ``--method`` runs the paper's other methods
(`tgml.bench.captaincook_methods`): one method prints its per-procedure table, several print one table of methods
with the published row beside each. DO options (``--epochs``, ``--config``, ``--edge-threshold``, ``--ensemble``)
apply to DO only.

``tgml train`` learns with the noisy-AND learner (`tgml.noisy_and_train`: every pre-condition of a step is kept)
unless ``--method do`` asks for Direct Optimization; without ``--method``, a Direct Optimization option (``--beta``,
``--augment``, ``--early-stop``, ``--edge-threshold``, or such a key in ``--config``) selects ``do``. The graph
file's ``info.method`` says which learner made it. ``--method tgt-text`` learns with the Task Graph Transformer on
the step names (`tgml.tgt_train`; needs the ``text`` extra; takes --config, --epochs, --lr, --seed, --relaxed,
--edge-threshold). ``tgml bench-synthetic`` scores the learners on random procedures
(`tgml.bench.synthetic_procedures`).

``tgml train`` learns from the executions without a ``has_errors`` segment: one with an annotated mistake would teach
the graph that the mistaken order is allowed. It says on stderr which it left out, and records them in the graph
file's ``info.left_out``; ``--include-mistakes`` keeps them (the PREGO training splits hold a few, and the paper learned
from them), ``--exclude-videos`` leaves out named executions too.

``--data`` of the benchmarks defaults to ``$MISTAKE_DATA``; ``bench-captaincook`` takes the data folder or its
``captaincook4d/`` folder.

Bad input (missing or malformed file, unknown scenario, step id not in the taxonomy, no usable sequence, a
cyclic graph file) ends with one ``error:`` line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from graphs.edge_metrics import evaluate_files
from graphs.errors import ArgumentParser, InputError, exit_on_input_error
from graphs.files import check_output, write_text
from graphs.graph_drawing import write_rendering
from graphs.options import check_seed_count, seed_option, workers_option
from graphs.settings_files import read_settings
from graphs.task_graph import load_graph, save_graph
from tgml.annotations import TrainingVideos, load_annotations
from tgml.bench.captaincook import ANNOTATIONS, DEFAULT_CONFIG, DEFAULT_SEED_BASE, captaincook_table
from tgml.bench.captaincook_methods import METHODS as CAPTAINCOOK_METHODS
from tgml.bench.captaincook_methods import MethodSettings, check_methods, methods_table, run_methods
from tgml.bench.data_folder import CAPTAINCOOK_FOLDER, DATA_ENV, captaincook_folder, data_folder
from tgml.bench.query_bench import DATASET_NAMES, QueryBenchConfig, query_bench_tables, run_query_bench
from tgml.bench.synthetic_procedures import LEARNERS, SyntheticConfig, run_synthetic, summary_table, synthetic_table
from tgml.graph_table import left_out_summary, terminal_view
from tgml.noisy_and_config import LEARNER_METHODS, NoisyAndConfig, load_noisy_and_config, resolve_method
from tgml.noisy_and_train import noisy_and_from_annotations
from tgml.tgt_config import METHOD_NAME as TGT_TEXT
from tgml.tgt_config import SETTING_KEYS as TGT_TEXT_SETTINGS
from tgml.tgt_config import TgtTextConfig, load_tgt_text_config
from tgml.tgt_train import train_tgt_text_graph
from tgml.train import (
    EDGE_THRESHOLDS,
    TrainConfig,
    learn_from_annotations,
    load_graph_training_config,
    train_from_annotations,
)


def _parser() -> ArgumentParser:
    parser = ArgumentParser(prog="tgml", description="Learn task graphs with TGML (noisy-AND or Direct Optimization).")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="learn the task graph of one scenario")
    train.add_argument("--annotations", required=True, help="annotation JSON file")
    train.add_argument("--scenario", required=True, help="scenario (procedure) name in the taxonomy")
    train.add_argument("--out", required=True, help="output task-graph JSON")
    train.add_argument("--method", choices=[*LEARNER_METHODS, TGT_TEXT],
                       help="learner (default noisy-and, or do when a Direct Optimization option is given; "
                            "tgt-text: the Task Graph Transformer on the step names)")
    train.add_argument("--config", help="TOML file of training settings (flags override it)")
    train.add_argument("--edge-cost", type=float, help="noisy-and: prior cost of an edge in nats (default 0)")
    train.add_argument("--noise", type=float, help="noisy-and: rate of steps done out of order (default 0.01)")
    train.add_argument("--cut", type=float, help="noisy-and: keep edges with probability >= CUT (default 0.9)")
    train.add_argument("--beta", type=float, help="do: contrastive weight (default 0.005)")
    train.add_argument("--epochs", type=int, help="epochs (default: noisy-and 150, do 1000)")
    train.add_argument("--lr", type=float, help="Adam learning rate (default 0.1)")
    train.add_argument("--seed", type=seed_option, help="random seed (default 42)")
    train.add_argument("--augment", action=argparse.BooleanOptionalAction, default=None,
                       help="three-part sequence augmentation (docs/method.md)")
    train.add_argument("--relaxed", action=argparse.BooleanOptionalAction, default=None,
                       help="relaxed post-processing rule (docs/method.md)")
    train.add_argument("--early-stop", help="none | sa-plateau | sa-threshold:X (default none)")
    train.add_argument("--edge-threshold", choices=list(EDGE_THRESHOLDS),
                       help="cut weights at 1/n (n key-steps, as the paper; default), 1/(n+2) (the authors' code) "
                            "or 1/N (N = n + 4 nodes)")
    train.add_argument("--include-mistakes", action="store_true",
                       help="also learn from executions with a has_errors segment (left out by default: the graph "
                            "would take the mistaken order as allowed)")
    train.add_argument("--exclude-videos", type=_names, default=[], metavar="A,B",
                       help="leave these executions out (held-out test videos), comma-separated")
    train.add_argument("--order-only", action="store_true",
                       help="read only the order of the segments, their times unchecked (the published EPIC-Tent-O "
                            "and CaptainCook4D files hold overlapping segments); by default the times are checked "
                            "like every command that reads annotations does")
    train.add_argument("--quiet", action="store_true", help="no progress bar")

    show = sub.add_parser("show", help="print a task graph; --dot writes DOT (or SVG/PNG/PDF via Graphviz)")
    show.add_argument("graph", help="task-graph JSON")
    show.add_argument("--dot", metavar="OUT", help="write .dot/.gv text, or .svg/.png/.pdf if Graphviz exists")

    ev = sub.add_parser("eval", help="edge precision/recall/F1 against a ground-truth graph")
    ev.add_argument("--pred", required=True, help="predicted task-graph JSON, or an LLM graph_<procedure>.adjlist "
                                                   "(then --gt is its CaptainCook4D graph)")
    ev.add_argument("--gt", required=True, help="ground truth: task-graph JSON or CaptainCook4D graph")

    bench = sub.add_parser("bench-captaincook", help="CaptainCook4D task-graph generation benchmark")
    bench.add_argument("--data", help=f"data folder holding {CAPTAINCOOK_FOLDER}/ (like shared/data), or that "
                                      f"{CAPTAINCOOK_FOLDER} folder itself (default ${DATA_ENV})")
    bench.add_argument("--seeds", type=int, default=5, metavar="N",
                       help="how many training seeds: each procedure is learned with seeds S..S+N-1, S being "
                            "--seed-base (default 5)")
    bench.add_argument("--seed-base", type=seed_option, default=DEFAULT_SEED_BASE, metavar="S",
                       help=f"the first training seed (default {DEFAULT_SEED_BASE})")
    bench.add_argument("--workers", type=workers_option, default=min(os.cpu_count() or 1, 4),
                       help="worker processes (0: one per core; at most 4 per core)")
    bench.add_argument("--procedures", help="comma-separated subset of procedures")
    bench.add_argument("--method", nargs="+", default=["do"], metavar="METHOD",
                       help=f"methods to run, from {', '.join(CAPTAINCOOK_METHODS)} (default do)")
    bench.add_argument("--llm-graphs", help="folder of the LLM graph_<procedure>.adjlist files "
                                            f"(default {CAPTAINCOOK_FOLDER}/llm_task_graphs of the data)")
    bench.add_argument("--epochs", type=int, help="maximum epochs (default 1000)")
    bench.add_argument("--config", help="TOML file of training settings")
    bench.add_argument("--edge-threshold", choices=list(EDGE_THRESHOLDS),
                       help="1/n (the paper, default), 1/(n+2) (the authors' code) or 1/N (N = n + 4 nodes)")
    bench.add_argument("--ensemble", type=int, default=1,
                       help="average the weights of K DO models per seed before post-processing (default 1)")
    bench.add_argument("--json", help="write all results to this JSON file")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")

    queries = sub.add_parser("bench-queries", help="procedure questions (previous, optional, mistake, missing, "
                                                   "future) on held-out executions")
    queries.add_argument("--data", help=f"data folder holding {CAPTAINCOOK_FOLDER}/, epic-tent-o/, assembly101-o/ "
                                        f"(like shared/data; default ${DATA_ENV})")
    queries.add_argument("--dataset", help=f"comma-separated subset of {','.join(DATASET_NAMES)} (default all)")
    queries.add_argument("--procedures", help="comma-separated CaptainCook4D procedures (default all 24)")
    queries.add_argument("--folds", type=int, help="k-fold over executions (default 4 for CaptainCook4D, "
                                                   "leave-one-out for EPIC-Tent-O, 5 for Assembly101-O)")
    queries.add_argument("--seed", type=seed_option, default=42, help="the one training seed of the learned graphs "
                                                              "(default 42)")
    queries.add_argument("--epochs", type=int, help="cap on DO epochs (quick runs; default the benchmark's)")
    queries.add_argument("--json", help="write all results to this JSON file")
    queries.add_argument("--quiet", action="store_true", help="no progress bar")

    syn = sub.add_parser("bench-synthetic", help="edge F1 of the learners on random procedures")
    syn.add_argument("--seeds", type=int, default=2, metavar="N",
                     help="how many random graphs per size and density, drawn with seeds S..S+N-1, S being "
                          "--first-seed (default 2)")
    syn.add_argument("--first-seed", type=seed_option, default=0, metavar="S",
                     help="the seed of the first random graph (default 0)")
    syn.add_argument("--sizes", default="5,10,20,30", help="comma-separated numbers of steps")
    syn.add_argument("--executions", default="5,10,20,40,100", help="comma-separated numbers of executions")
    syn.add_argument("--noise", default="0,0.2", help="comma-separated shares of executions with one error")
    syn.add_argument("--learners", default=",".join(LEARNERS), help=f"comma-separated, from {', '.join(LEARNERS)}")
    syn.add_argument("--workers", type=workers_option, default=min(os.cpu_count() or 1, 4), help="worker processes")
    syn.add_argument("--json", help="write all results to this JSON file")
    syn.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _listed(text: str, kind: type, option: str) -> tuple:
    """The values of a comma-separated option (``--sizes 5,10``), or an error naming the option."""
    try:
        values = tuple(kind(x) for x in _names(text))
    except ValueError:
        raise InputError(f"{option} {text!r}: expected comma-separated {kind.__name__} values") from None
    if not values:
        raise InputError(f"{option} {text!r}: expected at least one value")
    return values


def _noisy_and_config(args: argparse.Namespace) -> NoisyAndConfig:
    overrides = {k: getattr(args, k) for k in ("edge_cost", "noise", "cut", "epochs", "lr", "seed", "relaxed")}
    if args.config:
        return load_noisy_and_config(args.config, **overrides)
    return NoisyAndConfig().replace(**{k: v for k, v in overrides.items() if v is not None})


def _tgt_text_config(args: argparse.Namespace) -> TgtTextConfig:
    """The tgt-text settings: --config file, then the flags; a flag of another learner is refused."""
    flags = {"epochs", "lr", "seed", "relaxed", "edge_threshold"}
    other = next((k for k in ("edge_cost", "noise", "cut", "beta", "augment", "early_stop")
                  if getattr(args, k) is not None), None)
    if other is not None:
        raise InputError(f"--{other.replace('_', '-')} does not apply to --method {TGT_TEXT} "
                         f"(its settings: {', '.join(sorted(TGT_TEXT_SETTINGS))})")
    overrides = {k: getattr(args, k) for k in flags}
    if args.config:
        return load_tgt_text_config(args.config, **overrides)
    return TgtTextConfig().replace(**{k: v for k, v in overrides.items() if v is not None})


def _train_method(args: argparse.Namespace) -> str:
    """The learner asked for, or the one the given flags and config-file keys belong to."""
    if args.method == TGT_TEXT:
        return TGT_TEXT
    given = {k for k, v in vars(args).items() if v is not None}
    if args.config:
        given |= set(read_settings(args.config))
    return resolve_method(args.method, given)


def _config(args: argparse.Namespace, base: TrainConfig) -> TrainConfig:
    overrides = {k: getattr(args, k, None) for k in ("beta", "epochs", "lr", "seed", "augment", "relaxed")}
    overrides["early_stop"] = getattr(args, "early_stop", None)
    overrides["edge_threshold"] = getattr(args, "edge_threshold", None)
    if args.config:
        return load_graph_training_config(args.config, base, **overrides)
    return base.replace(**{k: v for k, v in overrides.items() if v is not None})


def _names(option: str | None) -> list[str]:
    """A comma-separated option as a list (empty items dropped)."""
    return [name for name in (option or "").split(",") if name]


@exit_on_input_error
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tgml`` console script."""
    args = _parser().parse_args(argv)
    console = Console()  # tables only: result lines are plain print()s, never wrapped or read as rich markup
    if args.command == "train":
        # Before training: a failed save would lose the run.
        check_output(args.out, "graph file", inputs=[args.annotations, args.config], option="--out")
        load_annotations(args.annotations, check_times=not args.order_only)  # the segment check every command makes
        method = _train_method(args)
        videos = TrainingVideos(args.include_mistakes, tuple(args.exclude_videos))
        if method == TGT_TEXT:
            result = learn_from_annotations(train_tgt_text_graph, args.annotations, args.scenario,
                                            _tgt_text_config(args), progress=not args.quiet, videos=videos)
        elif method == "do":
            result = train_from_annotations(args.annotations, args.scenario, _config(args, TrainConfig()),
                                            progress=not args.quiet, videos=videos)
        else:
            result = noisy_and_from_annotations(args.annotations, args.scenario, _noisy_and_config(args),
                                                progress=not args.quiet, videos=videos)
        save_graph(result.graph, args.out)
        if "left_out" in result.graph.info:
            print(f"tgml train: {left_out_summary(result.graph.info['left_out'])}", file=sys.stderr)
        print(f"{args.scenario}: {method}, {result.epochs_run} epochs, loss {result.final_loss:.3f}, "
              f"SA {result.sequence_accuracy:.3f}, {len(result.graph.edges())} edges -> {args.out}")
    elif args.command == "show":
        if args.dot:
            check_output(args.dot, "rendering", option="--dot")
        graph = load_graph(args.graph)
        console.print(terminal_view(graph))
        if args.dot:
            print(f"wrote {write_rendering(graph, args.dot)}")
    elif args.command == "eval":
        s = evaluate_files(args.pred, args.gt)
        print(f"precision {s.precision:.1f}  recall {s.recall:.1f}  F1 {s.f1:.1f}  "
              f"({s.true_positives} of {s.predicted} predicted edges correct, {s.expected} expected)")
    elif args.command == "bench-queries":
        config = QueryBenchConfig(data_folder(args.data), tuple(_names(args.dataset)) or DATASET_NAMES, args.folds,
                                  args.seed, args.epochs, tuple(_names(args.procedures)))
        if args.json:
            check_output(args.json, "results file", option="--json")
        outcome = run_query_bench(config, progress=not args.quiet)
        for table in query_bench_tables(outcome):
            console.print(table)
        print(f"bench-queries: {outcome.seconds:.0f} s")
        if args.json:
            write_text(args.json, json.dumps(outcome.to_dict(), indent=2) + "\n", "results file")
            print(f"wrote {args.json}")
    elif args.command == "bench-synthetic":
        if args.json:
            check_output(args.json, "results file", option="--json")
        check_seed_count(args.seeds)
        synthetic_config = SyntheticConfig(
            _listed(args.sizes, int, "--sizes"), _listed(args.executions, int, "--executions"),
            _listed(args.noise, float, "--noise"), seeds=args.seeds, first_seed=args.first_seed,
            learners=_listed(args.learners, str, "--learners"), workers=args.workers)
        synthetic = run_synthetic(synthetic_config, progress=not args.quiet)
        wide = console if console.is_terminal else Console(width=150)  # logs and pipes: keep the whole table
        wide.print(synthetic_table(synthetic))
        wide.print(summary_table(synthetic))
        if args.json:
            write_text(args.json, json.dumps(synthetic.to_dict(), indent=2) + "\n", "results file")
            print(f"wrote {args.json}")
    else:
        check_seed_count(args.seeds)
        data = captaincook_folder(data_folder(args.data))
        if args.json:
            check_output(args.json, "results file", inputs=[args.config, data / ANNOTATIONS], option="--json")
        seeds = list(range(args.seed_base, args.seed_base + args.seeds))
        procedures = [p for p in (args.procedures or "").split(",") if p]
        check_methods(args.method)
        settings = MethodSettings(Path(args.llm_graphs) if args.llm_graphs else None)
        methods_run = run_methods(data, args.method, seeds, _config(args, DEFAULT_CONFIG), procedures,
                                  args.workers, progress=not args.quiet, ensemble=args.ensemble, settings=settings)
        if len(args.method) == 1:
            console.print(captaincook_table(methods_run.results[args.method[0]]))
        else:  # logs and pipes: keep the whole table
            (console if console.is_terminal else Console(width=150)).print(methods_table(methods_run))
        print(f"bench-captaincook: {methods_run.seconds:.1f} s")
        if args.json:
            write_text(args.json, json.dumps(methods_run.to_dict(), indent=2) + "\n", "results file")
            print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
