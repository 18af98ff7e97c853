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
    tgml bench-captaincook --data ../shared/data --seeds 5 [--first-seed 42] [--workers 2] \\
        [--method do count-based msgi msg2 llm noisy-and] [--llm-graphs DIR] \\
        [--procedures coffee,ramen] [--epochs 1000] [--edge-threshold {1/n,1/(n+2),1/N}] [--config FILE] \\
        [--json out.json]
    tgml bench-mistakes --data ../shared/data [--method noisy-and do ... | all] [--seeds 3] [--first-seed 42] \\
        [--rules precondition,late-step] [--procedures coffee,ramen] [--workers 2] [--json out.json] \\
        [--select [--folds 4] [--moves 3]]
    tgml bench-queries --data ../shared/data [--dataset captaincook4d,epic-tent-o,assembly101-o] \\
        [--procedures coffee,ramen] [--folds K] [--seed 42] [--epochs N] [--json out.json]
    tgml bench-synthetic [--seeds 2] [--learners do,noisy-and,noisy-and-sparse] [--workers 2] [--json out.json]
    tgml bench-live --data ../shared/data [--features DIR] [--folds 3] [--seed 42] [--detector-seed N] [--epochs N] \\
        [--recipes a,b] [--checker {probabilistic,binary,chosen}] [--live-graph {observed,learned,chosen}] \\
        [--order-rule late-step] [--workers 2] [--json out.json] [--cache DIR] [--position-prior] \\
        [--save-graphs DIR] [--ceiling]
    tgml captaincook-labels --data ../shared/data [--features DIR | --recordings 12_10,12_13] --out labels.json

``tgml bench-captaincook`` prints DO's per-procedure table by default; ``--method`` runs the paper's other methods
(`tgml.bench.captaincook_methods`): one method prints its per-procedure table, several print one table of methods
with the published row beside each. DO options (``--epochs``, ``--config``, ``--edge-threshold``, ``--ensemble``)
apply to DO only, and are refused when no DO runs.

``tgml bench-mistakes`` replays CaptainCook4D's 190 recordings with annotated order errors and missing steps
through the live checker's object against every learner's graphs (`tgml.bench.mistake_bench`;
docs/mistakes-benchmark.md); ``--select`` chooses the order rule on the graph-generation recordings only.

``tgml train`` learns with the noisy-AND learner (`tgml.learners.noisy_and`: every pre-condition of a step is kept)
unless ``--method`` names another learner of `tgml.learners.registry` (``do``, ``tgt-text``, ``count-based``...);
without ``--method``, a Direct Optimization option (``--beta``, ``--augment``, ``--early-stop``, ``--edge-threshold``,
or such a key in ``--config``) selects ``do``. A flag applies only to the learners whose settings have it. The graph
file's ``info.method`` says which learner made it. ``--method tgt-text`` (the Task Graph Transformer on the step
names) needs the ``text`` extra. ``tgml bench-synthetic`` scores the learners on random procedures
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
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from graphs.common.command_line import ArgumentParser, add_version_option
from graphs.common.errors import InputError, exit_on_input_error, print_note, print_stderr, print_warning
from graphs.common.options import (
    epochs_option,
    output_name,
    output_path,
    seed_option,
    seed_range,
    workers_option,
)
from graphs.common.safe_text import count_of

if TYPE_CHECKING:
    from rich.console import Console

    from tgml.bench.live.bench import LiveBenchConfig, LiveBenchResult
    from tgml.bench.live.selection import ValidationRun
    from tgml.learners.registry import LearnerEntry


def _train_options(p: argparse.ArgumentParser) -> None:
    """The options of ``tgml train``."""
    from tgml.learners.do.config import EDGE_THRESHOLDS
    from tgml.learners.registry import DEFAULT_LEARNER, LEARNERS

    p.add_argument("--annotations", required=True, help="annotation file: JSON, or a .csv of video,step,start,end rows")
    p.add_argument("--scenario", help="scenario (procedure) name in the taxonomy (default: the scenario of the "
                                      "file's videos, when they are all of one)")
    p.add_argument("--out", required=True, type=output_name, help="output task-graph JSON")
    p.add_argument("--method", choices=list(LEARNERS), metavar="METHOD",
                   help=f"learner, from {', '.join(LEARNERS)} (default {DEFAULT_LEARNER}, or do when a Direct "
                        "Optimization option is given; tgt-text: the Task Graph Transformer on the step names)")
    p.add_argument("--config", help="TOML file of training settings (flags override it)")
    p.add_argument("--edge-cost", type=float, help="noisy-and: prior cost of an edge in nats (default 0)")
    p.add_argument("--noise", type=float, help="noisy-and: rate of steps done out of order (default 0.01)")
    p.add_argument("--cut", type=float, help="noisy-and: keep edges with probability >= CUT (default 0.9)")
    p.add_argument("--beta", type=float, help="do: contrastive weight (default 0.005)")
    p.add_argument("--epochs", type=epochs_option, help="epochs (default: noisy-and 150, do 1000, tgt-text 500)")
    p.add_argument("--lr", type=float, help="Adam learning rate (default: noisy-and 0.2, do 0.1, tgt-text 0.001)")
    p.add_argument("--seed", type=seed_option, help="random seed (default 42)")
    p.add_argument("--augment", action=argparse.BooleanOptionalAction, default=None,
                   help="three-part sequence augmentation (docs/method.md)")
    p.add_argument("--relaxed", action=argparse.BooleanOptionalAction, default=None,
                   help="relaxed post-processing rule (docs/method.md)")
    p.add_argument("--early-stop", help="none | sa-plateau | sa-threshold:X (default none)")
    # A metavar: argparse's usage line drops the parentheses of the choices, and showed '1/n+2', which it refuses.
    p.add_argument("--edge-threshold", choices=list(EDGE_THRESHOLDS), metavar="THRESHOLD",
                   help="cut weights at 1/n (n key-steps, as the paper; do's default), 1/(n+2) (the authors' code; "
                        "tgt-text's default) or 1/N (N = n + 4 nodes)")
    p.add_argument("--include-mistakes", action="store_true",
                   help="also learn from executions with a has_errors segment (left out by default: the graph "
                        "would take the mistaken order as allowed)")
    p.add_argument("--exclude-videos", type=_names, default=[], metavar="A,B",
                   help="leave these executions out (held-out test videos), comma-separated")
    p.add_argument("--order-only", action="store_true",
                   help="read only the order of the segments, their times unchecked; by default the times are "
                        "checked like every command that reads annotations does (overlapping segments are accepted "
                        "with a one-line warning)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _show_options(p: argparse.ArgumentParser) -> None:
    """The options of ``tgml show``."""
    p.add_argument("graph", help="task-graph JSON")
    p.add_argument("--dot", metavar="OUT", type=output_name,
                   help="write .dot/.gv text, or .svg/.png/.pdf if Graphviz exists")


def _eval_options(p: argparse.ArgumentParser) -> None:
    """The options of ``tgml eval``."""
    p.add_argument("--pred", required=True, help="predicted task-graph JSON, or an LLM graph_<procedure>.adjlist "
                                                  "(then --gt is its CaptainCook4D graph)")
    p.add_argument("--gt", required=True, help="ground truth: task-graph JSON or CaptainCook4D graph")


def _bench_captaincook_options(p: argparse.ArgumentParser) -> None:
    """The options of ``tgml bench-captaincook``."""
    from graphs.common.settings_files import bounded_option
    from tgml.bench.captaincook import DEFAULT_SEED_BASE
    from tgml.bench.captaincook_methods import METHODS
    from tgml.bench.data_folder import CAPTAINCOOK_FOLDER, DATA_ENV
    from tgml.learners.do.config import EDGE_THRESHOLDS, ENSEMBLE_SIZE

    p.add_argument("--data", help=f"data folder holding {CAPTAINCOOK_FOLDER}/ (like shared/data), or that "
                                  f"{CAPTAINCOOK_FOLDER} folder itself (default ${DATA_ENV})")
    p.add_argument("--seeds", type=int, default=5, metavar="N",
                   help="how many training seeds: each procedure is learned with seeds S..S+N-1, S being "
                        "--first-seed (default 5)")
    p.add_argument("--first-seed", "--seed-base", dest="seed_base", type=seed_option, default=DEFAULT_SEED_BASE,
                   metavar="S", help=f"the first training seed (default {DEFAULT_SEED_BASE}; --seed-base is its "
                                     "older name)")
    p.add_argument("--workers", type=workers_option, default=min(os.cpu_count() or 1, 4),
                   help="worker processes (default: the cores, at most 4; 0: one per core)")
    p.add_argument("--procedures", help="comma-separated subset of procedures")
    p.add_argument("--method", nargs="+", default=["do"], metavar="METHOD",
                   help=f"methods to run, from {', '.join(METHODS)} (default do)")
    p.add_argument("--llm-graphs", help="folder of the LLM graph_<procedure>.adjlist files "
                                        f"(default {CAPTAINCOOK_FOLDER}/llm_task_graphs of the data)")
    p.add_argument("--epochs", type=epochs_option, help="DO's maximum epochs (default 1000)")
    p.add_argument("--config", help="TOML file of DO's training settings")
    p.add_argument("--edge-threshold", choices=list(EDGE_THRESHOLDS), metavar="THRESHOLD",
                   help="DO's: 1/n (the paper, default), 1/(n+2) (the authors' code) or 1/N (N = n + 4 nodes)")
    # ensemble_size's range: --ensemble 9223372036854775807 hung building its member seeds.
    p.add_argument("--ensemble", type=bounded_option(ENSEMBLE_SIZE), default=1,
                   help="average the weights of K DO models per seed before post-processing (default 1)")
    p.add_argument("--json", type=output_name, help="write all results to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _bench_mistakes_options(p: argparse.ArgumentParser) -> None:
    """The options of ``tgml bench-mistakes``."""
    from graphs.order_rules import ORDER_RULES
    from tgml.bench.captaincook import DEFAULT_SEED_BASE
    from tgml.bench.data_folder import CAPTAINCOOK_FOLDER, DATA_ENV
    from tgml.bench.mistake_bench import DEFAULT_METHODS, METHODS

    p.add_argument("--data", help=f"data folder holding {CAPTAINCOOK_FOLDER}/ (like shared/data), or that "
                                  f"{CAPTAINCOOK_FOLDER} folder itself (default ${DATA_ENV})")
    p.add_argument("--method", nargs="+", default=list(DEFAULT_METHODS), metavar="METHOD",
                   help=f"learners and published graphs, from {', '.join(METHODS)}, or 'all' "
                        f"(default {' '.join(DEFAULT_METHODS)}); the ground-truth graphs are always "
                        "the last row")
    p.add_argument("--seeds", type=int, default=3, metavar="N",
                   help="seeds of the seeded learners: S..S+N-1, S being --first-seed (default 3)")
    p.add_argument("--first-seed", "--seed-base", dest="seed_base", type=seed_option, default=DEFAULT_SEED_BASE,
                   metavar="S", help=f"the first seed (default {DEFAULT_SEED_BASE}; --seed-base is its older name)")
    p.add_argument("--rules", default=",".join(ORDER_RULES),
                   help=f"comma-separated order rules, from {', '.join(ORDER_RULES)} (default both)")
    p.add_argument("--procedures", help="comma-separated subset of procedures")
    p.add_argument("--workers", type=workers_option, default=min(os.cpu_count() or 1, 4),
                   help="worker processes (default: the cores, at most 4; 0: one per core)")
    p.add_argument("--select", action="store_true",
                   help="choose the order rule by cross-validation on the graph-generation recordings only "
                        "(synthetic moved steps; the 190 test recordings are not read)")
    p.add_argument("--folds", type=int, help="--select: folds per procedure (default 4)")
    p.add_argument("--moves", type=int, help="--select: moved-step variants of each held-out recording (default 3)")
    p.add_argument("--json", type=output_name, help="write all results, per recipe too, to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _bench_queries_options(p: argparse.ArgumentParser) -> None:
    """The options of ``tgml bench-queries``."""
    from tgml.bench.data_folder import CAPTAINCOOK_FOLDER, DATA_ENV, QUERY_DATASETS

    p.add_argument("--data", help=f"data folder holding {CAPTAINCOOK_FOLDER}/, epic-tent-o/, assembly101-o/ "
                                  f"(like shared/data; default ${DATA_ENV})")
    p.add_argument("--dataset", help=f"comma-separated subset of {','.join(QUERY_DATASETS)} (default all)")
    p.add_argument("--procedures", help="comma-separated CaptainCook4D procedures (default all 24)")
    p.add_argument("--folds", type=int, help="k-fold over executions (default 4 for CaptainCook4D, "
                                             "leave-one-out for EPIC-Tent-O, 5 for Assembly101-O); a procedure "
                                             "of k executions or fewer is left out one execution at a time")
    p.add_argument("--seed", type=seed_option, default=42, help="the one training seed of the learned graphs "
                                                        "(default 42)")
    p.add_argument("--epochs", type=epochs_option, help="cap on DO epochs (quick runs; default the benchmark's)")
    p.add_argument("--json", type=output_name, help="write all results to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _bench_synthetic_options(p: argparse.ArgumentParser) -> None:
    """The options of ``tgml bench-synthetic``."""
    from tgml.bench.synthetic_procedures import LEARNERS

    p.add_argument("--seeds", type=int, default=2, metavar="N",
                   help="how many random graphs per size and density, drawn with seeds S..S+N-1, S being "
                        "--first-seed (default 2)")
    p.add_argument("--first-seed", type=seed_option, default=0, metavar="S",
                   help="the seed of the first random graph (default 0)")
    p.add_argument("--sizes", default="5,10,20,30", help="comma-separated numbers of steps (default %(default)s)")
    p.add_argument("--executions", default="5,10,20,40,100",
                   help="comma-separated numbers of executions (default %(default)s)")
    p.add_argument("--noise", default="0,0.2",
                   help="comma-separated shares of executions with one error (default %(default)s)")
    p.add_argument("--learners", default=",".join(LEARNERS),
                   help=f"comma-separated, from {', '.join(LEARNERS)} (default all)")
    p.add_argument("--workers", type=workers_option, default=min(os.cpu_count() or 1, 4),
                   help="worker processes (default: the cores, at most 4; 0: one per core)")
    p.add_argument("--json", type=output_name, help="write all results to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


# ``--checker`` and ``--live-graph`` of ``tgml bench-live``: each fold chooses on its validation recordings.
CHOSEN = "chosen"


def _bench_live_options(p: argparse.ArgumentParser) -> None:
    """The options of ``tgml bench-live``."""
    from graphs.checker_settings import CHECKERS, DEFAULT_CHECKER
    from graphs.order_rules import ORDER_RULES, PRECONDITION
    from tgml.bench.data_folder import DATA_ENV

    p.add_argument("--data", help=f"data folder holding captaincook4d/ and captaincook4d-pe/ (default ${DATA_ENV})")
    p.add_argument("--features", help="folder of <recording_id>.npy per-second features (default "
                                      "DATA/captaincook4d-pe/features)")
    p.add_argument("--folds", type=int, default=3, help="folds per recipe (default 3)")
    p.add_argument("--seed", type=seed_option, default=42, help="seeds folds, detectors and graphs (default 42)")
    p.add_argument("--detector-seed", type=seed_option,
                   help="seeds the detectors alone (default --seed): the same folds, validation recordings and "
                        "learned graphs, other detectors (and the observed pre-conditions their recognition gives): "
                        "what a training's seed moves")
    # tgml.bench.live.detector.LIVE_DETECTOR's epochs, named here: importing it would load torch for every tgml command
    p.add_argument("--epochs", type=epochs_option,
                   help="detector training epochs (quick runs; default the benchmark's 40)")
    p.add_argument("--recipes", help="comma-separated subset of the recipes (each fold then chooses its settings on "
                                     "these recipes' validation recordings only: not the full run's choices)")
    p.add_argument("--checker", choices=(*CHECKERS, CHOSEN), default=DEFAULT_CHECKER,
                   help=f"pre-condition checker (default {DEFAULT_CHECKER}, as live); chosen: each fold chooses "
                        f"{' or '.join(CHECKERS)} on its validation recordings, {DEFAULT_CHECKER} a priori")
    p.add_argument("--order-rule", choices=ORDER_RULES, default=PRECONDITION,
                   help="late-step: with the binary checker, a step confirmed after a step that required it alerts "
                        f"too, as the annotators tag an order error (default {PRECONDITION})")
    p.add_argument("--workers", type=workers_option, default=min(os.cpu_count() or 1, 2),
                   help="processes running folds side by side (default: the cores, at most 2; 0: one per core)")
    p.add_argument("--json", type=output_name,
                   help="write scores and every recording's recognised steps and alerts to this JSON file")
    p.add_argument("--cache", help="folder keeping each fold's trained detector outputs: a second run with the same "
                                   "data, folds, seeds, detector settings and training code re-runs segmenter and "
                                   "checker only")
    p.add_argument("--position-prior", action="store_true",
                   help="the folds may also choose, on validation, to fuse the detector's output with where in the "
                        "recipe each step usually comes (docs/live-benchmark.md)")
    # tgml.bench.live.selection.LIVE_GRAPHS, named here: importing it would load torch for every tgml command
    p.add_argument("--live-graph", choices=("observed", "learned", CHOSEN), default="observed",
                   help="what the live chain checks against: observed (default), the learned graph's pre-conditions "
                        "that the detector's own recognition of the training recordings orders too (two more "
                        "detectors trained per fold); learned: the learned graph as it is; chosen: each fold chooses "
                        "on its validation recordings, observed a priori")
    p.add_argument("--save-graphs", type=output_path, metavar="DIR",
                   help="write the graph each fold's live chain checked against as DIR/<recipe>-fold<k>.json, "
                        "and each recipe's hand-made graph as DIR/<recipe>-hand-made.json, in the files "
                        "stream-detect --graph reads (to replay a fold's choice live)")
    p.add_argument("--ceiling", action="store_true",
                   help="also print the most one threshold on a score of the detectors' outputs could reach, placed "
                        "in hindsight on the test recordings themselves: how far recognition leaves the targets")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _captaincook_labels_options(p: argparse.ArgumentParser) -> None:
    """The options of ``tgml captaincook-labels``."""
    from tgml.bench.data_folder import DATA_ENV

    p.add_argument("--data", help=f"data folder holding captaincook4d/ (default ${DATA_ENV})")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--features", help="the recordings of this folder of <recording_id>.npy files")
    which.add_argument("--recordings", help="comma-separated recording ids (default: every recording)")
    p.add_argument("--out", type=output_name, required=True, help="annotation file to write")


# sub-command -> (its one line in ``tgml --help``, the function adding its options)
SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "train": ("learn the task graph of one scenario", _train_options),
    "show": ("print a task graph; --dot writes DOT (or SVG/PNG/PDF via Graphviz)", _show_options),
    "eval": ("edge precision/recall/F1 against a ground-truth graph", _eval_options),
    "bench-captaincook": ("CaptainCook4D task-graph generation benchmark", _bench_captaincook_options),
    "bench-mistakes": ("CaptainCook4D online order-mistake benchmark: 190 recordings with annotated order errors "
                       "and missing steps", _bench_mistakes_options),
    "bench-queries": ("procedure questions (previous, optional, mistake, missing, future) on held-out executions",
                      _bench_queries_options),
    "bench-synthetic": ("edge F1 of the learners on random procedures", _bench_synthetic_options),
    "bench-live": ("the live chain (detector, segmenter, checker) on real CaptainCook4D recordings' features, "
                   "k-fold per recipe", _bench_live_options),
    "captaincook-labels": ("CaptainCook4D recordings' steps and errors as an annotation file (for recognition-features "
                           "import and stream-detect eval)", _captaincook_labels_options),
}


def _parser(commands: Collection[str] = tuple(SUBCOMMANDS)) -> ArgumentParser:
    """The command line, with the options of ``commands`` only: the others' option lists import their benchmark
    modules, which a help page or ``tgml show`` must not wait for (`main` passes the one sub-command asked for)."""
    parser = ArgumentParser(prog="tgml", description="Learn task graphs with TGML (noisy-AND or Direct Optimization).")
    add_version_option(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")  # listed below, one a line
    for name, (summary, add_options) in SUBCOMMANDS.items():
        # its own page opens with the line `tgml --help` gives it (it had none: usage, then options)
        options = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")
        if name in commands:
            add_options(options)
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


# `tgml train` flags that set a learner's field; each applies only to the learners that have it.
TRAIN_SETTINGS = ("edge_cost", "noise", "cut", "beta", "epochs", "lr", "seed", "augment", "relaxed", "early_stop",
                  "edge_threshold")


def _settings_given(args: argparse.Namespace) -> dict[str, Any]:
    """The learner settings set by flags (None: not given)."""
    return {k: v for k in TRAIN_SETTINGS if (v := getattr(args, k, None)) is not None}


def _train_method(args: argparse.Namespace) -> str:
    """The learner asked for, or the one the given flags and config-file keys belong to."""
    from graphs.common.settings_files import read_settings
    from tgml.learners.registry import resolve_learner

    flags = set(_settings_given(args))
    in_file = set(read_settings(args.config)) if args.config else set()
    try:
        return resolve_learner(args.method, flags | in_file)
    except InputError as err:
        if not in_file:
            raise
        resolve_learner(args.method, flags)  # the flags alone are refused with their own line...
        raise InputError(f"--config {args.config}: {err}") from None  # ...else the file holds the culprit


def _learner_config(entry: LearnerEntry, args: argparse.Namespace, base: Any = None) -> Any:
    """A learner's settings: ``base`` (default: the learner's defaults), then the --config file, then the flags."""
    from graphs.common.settings_files import naming_the_file, naming_the_flags, read_settings

    flags = _settings_given(args)
    if args.config and hasattr(entry.config_class, "from_table"):  # a combined learner: its sub-tables in the file
        path = Path(args.config)
        seed = flags.pop("seed", None)
        with naming_the_file(path):
            return entry.config({**read_settings(path), **flags}, seed)
    if args.config:
        return entry.config_file(args.config, base, **flags)
    with naming_the_flags(flags):
        return dataclasses.replace(base if base is not None else entry.config(None), **flags)


def _methods_with_defaults() -> frozenset[str]:
    """The learners whose built-in settings are fit to run on any dataset (`prego-defaults.toml`'s tables); the
    others' (do-cv, do-ensemble, noisy-and-do) are choices a dataset's cross-validation makes."""
    from tgml.bench.prego.methods import load_method_settings
    from tgml.bench.prego.own_dataset import DEFAULT_SETTINGS

    return frozenset(load_method_settings("defaults", DEFAULT_SETTINGS))


def _train(args: argparse.Namespace, console: Console) -> None:
    """``tgml train``: learn one scenario's graph and save it."""
    from graphs.annotations import TrainingVideos, choose_scenario, load_annotations
    from graphs.common.files import check_output
    from graphs.task_graph import check_replaces_a_graph, save_graph
    from tgml.coincidence import COINCIDENCE_LIMIT, coincident_orders
    from tgml.graph_table import left_out_summary
    from tgml.learners.registry import learner
    from tgml.learners.result import learn_selection

    # Before training: a failed save would lose the run.
    check_output(args.out, "graph file", inputs=[args.annotations, args.config], option="--out", kind="graph")
    check_replaces_a_graph(args.out)
    method = _train_method(args)  # settings that do not fit the learner are refused before the file is read
    annotations = load_annotations(args.annotations, check_times=not args.order_only,  # every command's checks
                                   scenario_read=args.scenario, scenario_required=args.scenario is not None)
    if args.scenario is None:
        # A file whose executions are of one procedure needs no name for it (a taxonomy of many, as CaptainCook4D's,
        # included); with several, which to learn is the user's choice.
        args.scenario = choose_scenario(annotations, None)
    videos = TrainingVideos(args.include_mistakes, tuple(args.exclude_videos))
    entry = learner(method)
    if not args.config and method not in _methods_with_defaults():
        # prego-bench --annotations refuses these without a table; here the learner's defaults run, so say it
        print_warning(f"--method {method} runs with its built-in settings, which were not chosen for any dataset "
                      "(give --config with settings chosen on training data: prego-bench select, "
                      "docs/prego-benchmark.md)")
    chosen = annotations.training_selection(args.scenario, videos)
    result = learn_selection(entry.learn, annotations, args.scenario, chosen, _learner_config(entry, args),
                             progress=not args.quiet)
    save_graph(result.graph, args.out)
    if "left_out" in result.graph.info:
        print_stderr(f"tgml train: {left_out_summary(result.graph.info['left_out'])}")
    # The selection names the executions for every learner; a learner's own "train_sequences" is recorded by some
    # only (the baselines and the combined learners printed no count, and warned of none).
    executions = len(chosen.kept)
    chance = coincident_orders(chosen.sequences)
    if chance.too_few:
        # A fixed count of executions fits one procedure's size only: 6 executions of 13 steps learned a false
        # pre-condition; the expected count of coincidences grows with the steps and halves with each execution.
        why = ("one execution shows one order, so each of its steps requires every step before it" if executions == 1
               else f"two steps done in either order come out in one order in all {executions} with chance 1 in "
                    f"{2 ** (executions - 1)}, over the {chance.pairs} pairs of steps every execution has")
        print_warning(f"{args.scenario}: learned from {count_of(executions, 'execution')} only: about "
                      f"{_about(chance.expected)} of its pre-conditions may be coincidence ({why}); "
                      f"{chance.executions_needed} executions would bring it under {COINCIDENCE_LIMIT:g}: record "
                      "more, in the orders the procedure allows")
    measures = [f"{result.epochs_run} epochs"] if result.epochs_run else []
    scores = (("loss", "{:.3f}", result.final_loss),
              # "SA" alone means nothing to a newcomer: said where it is printed (tgml/sequence_accuracy.py).
              ("SA", "{:.3f} (sequence accuracy: 1 = every training order meets the learned pre-conditions)",
               result.sequence_accuracy))
    measures += [f"{name} {shape.format(value)}" for name, shape, value in scores if math.isfinite(value)]
    learned_from = f" from {count_of(executions, 'execution')}"
    print(f"{args.scenario}: {', '.join([method, *measures])}, {len(result.graph.edges())} edges{learned_from} -> "
          f"{args.out}")


def _about(count: float) -> str:
    """An expected count as a person reads it: one decimal under 10 (0.6, 4.1), whole above (11)."""
    return f"{count:.1f}" if count < 10 else f"{count:.0f}"


def _show(args: argparse.Namespace, console: Console) -> None:
    """``tgml show``: the graph's table, and its drawing with ``--dot``."""
    from graphs.common.files import check_output
    from graphs.edge_metrics import load_shown_graph
    from graphs.graph_drawing import check_rendering_format, write_rendering
    from tgml.graph_table import terminal_view

    if args.dot:  # before the table: a drawing that cannot be made is said first, never after the output
        check_output(args.dot, "rendering", inputs=[args.graph], option="--dot")
        try:
            check_rendering_format(args.dot)
        except InputError as err:
            raise InputError(f"--dot {err}") from None
    graph = load_shown_graph(args.graph)
    console.print(terminal_view(graph))
    if args.dot:
        print(f"wrote {write_rendering(graph, args.dot)}")


def _eval(args: argparse.Namespace, console: Console) -> None:
    """``tgml eval``: edge precision, recall and F1 of one graph against another."""
    from graphs.edge_metrics import evaluate_files
    from graphs.precision_recall import shown

    s = evaluate_files(args.pred, args.gt)
    print(f"precision {shown(s.precision)}  recall {shown(s.recall)}  F1 {shown(s.f1)}  "
          f"({s.true_positives} of {s.predicted} predicted edges correct, {s.expected} expected)")


def _bench_captaincook(args: argparse.Namespace, console: Console) -> None:
    """``tgml bench-captaincook``: learn the 24 procedures' graphs with each method and print the tables."""
    from graphs.common.files import check_output, write_text
    from tgml.bench.captaincook import DEFAULT_CONFIG, captaincook_table
    from tgml.bench.captaincook_methods import MethodSettings, check_methods, methods_table, run_methods
    from tgml.bench.data_folder import captaincook_folder, data_folder
    from tgml.learners.registry import learner

    seeds = list(seed_range(args.seed_base, args.seeds, "--first-seed"))
    data = captaincook_folder(data_folder(args.data))
    if args.json:
        check_output(args.json, "results file", inputs=[args.config, data, args.llm_graphs], option="--json")
    procedures = _names(args.procedures)
    check_methods(args.method)
    if "do" not in args.method:  # the other methods have settings of their own: never an option silently unused
        given = [flag for flag, value in (("--epochs", args.epochs), ("--config", args.config),
                                          ("--edge-threshold", args.edge_threshold),
                                          ("--ensemble", args.ensemble if args.ensemble != 1 else None))
                 if value is not None]
        if given:
            raise InputError(f"{given[0]} sets DO's training, and --method {' '.join(args.method)} runs no DO: add "
                             f"do to --method, or leave {given[0]} out")
    settings = MethodSettings(Path(args.llm_graphs) if args.llm_graphs else None)
    do_config = _learner_config(learner("do"), args, DEFAULT_CONFIG)
    methods_run = run_methods(data, args.method, seeds, do_config, procedures, args.workers,
                              progress=not args.quiet, ensemble=args.ensemble, settings=settings)
    if len(args.method) == 1:
        console.print(captaincook_table(methods_run.results[args.method[0]]))
    else:
        console.print(methods_table(methods_run))
    print(f"bench-captaincook: {methods_run.seconds:.1f} s")
    if args.json:
        write_text(args.json, json.dumps(methods_run.to_dict(), indent=2) + "\n", "results file")
        print(f"wrote {args.json}")


def _bench_mistakes(args: argparse.Namespace, console: Console) -> None:
    """``tgml bench-mistakes``: learn, replay, print the tables and the notes on the data."""
    from graphs.common.files import check_output, write_text
    from tgml.bench.data_folder import captaincook_folder, data_folder
    from tgml.bench.mistake_bench import METHODS, MistakeBenchConfig, data_notes, mistake_tables, run_mistake_bench

    seeds = tuple(seed_range(args.seed_base, args.seeds, "--first-seed"))  # refused before any work
    if not args.select:  # never an option silently unused
        given = [f"--{name} {value}" for name in ("folds", "moves") if (value := getattr(args, name)) is not None]
        if given:
            raise InputError(f"{given[0]}: only --select cross-validates (folds and moved steps); the benchmark "
                             "itself scores the 190 test recordings as they are")
    data = captaincook_folder(data_folder(args.data))
    if args.select:
        if args.json:  # the cross-validation table is printed, not written: never an option silently unused
            raise InputError(f"--json {args.json}: --select prints the order rules' cross-validation table and writes "
                             "no results file; run without --select for the figures' JSON")
        _select_rule(args, data, console)
        return
    if args.json:
        check_output(args.json, "results file", inputs=[data], option="--json")
    if "all" in args.method and len(args.method) > 1:
        raise InputError(f"--method {' '.join(args.method)}: give all alone (it stands for every method)")
    methods = tuple(METHODS if args.method == ["all"] else args.method)
    config = MistakeBenchConfig(data, methods, seeds,
                                tuple(_names(args.rules)), tuple(_names(args.procedures)), args.workers)
    result = run_mistake_bench(config, progress=not args.quiet)
    for table in mistake_tables(result):
        console.print(table)
    for note in data_notes(result):
        print(note)
    print(f"bench-mistakes: {result.seconds:.1f} s")
    if args.json:
        write_text(args.json, json.dumps(result.to_dict(), indent=2) + "\n", "results file")
        print(f"wrote {args.json}")


def _select_rule(args: argparse.Namespace, data: Path, console: Console) -> None:
    """``tgml bench-mistakes --select``: the cross-validation table of the order rules and the one chosen."""
    from rich.table import Table

    from graphs.precision_recall import shown
    from tgml.bench.captaincook import load_procedures
    from tgml.bench.mistake_bench import DEFAULT_METHODS
    from tgml.bench.mistake_selection import SelectionConfig, cross_validate
    from tgml.learners.registry import DEFAULT_LEARNER

    started = time.perf_counter()
    method = args.method[0] if args.method != list(DEFAULT_METHODS) else DEFAULT_LEARNER
    sizes = {name: value for name in ("folds", "moves") if (value := getattr(args, name)) is not None}
    config = SelectionConfig(method, seed=args.seed_base, rules=tuple(_names(args.rules)), workers=args.workers,
                             **sizes)
    rows = cross_validate(load_procedures(data, _names(args.procedures)), config, progress=not args.quiet)
    table = Table(title=f"Order rule chosen by {config.folds}-fold cross-validation on the graph-generation "
                        f"recordings ({method} graphs, {rows[0]['items']} items, {rows[0]['tagged']} tagged steps)")
    for col in ("rule", "Avg F1", "Mist F1", "Corr F1"):
        table.add_column(col, justify="left" if col == "rule" else "right")
    for row in rows:
        table.add_row(row["rule"], *(shown(row[k]) for k in ("avg_f1", "mistake_f1", "correct_f1")))
    console.print(table)
    print(f"chosen: {rows[0]['rule']}")
    print(f"bench-mistakes --select: {time.perf_counter() - started:.1f} s")


def _bench_queries(args: argparse.Namespace, console: Console) -> None:
    """``tgml bench-queries``: the procedure questions on held-out executions."""
    from graphs.common.files import check_output, write_text
    from graphs.common.settings_files import naming_the_flags
    from tgml.bench.data_folder import QUERY_DATASETS, data_folder
    from tgml.bench.query_bench import QueryBenchConfig, query_bench_tables, run_query_bench

    with naming_the_flags(("folds", "seed", "epochs")):  # --folds 1, not the settings field QueryBenchConfig.folds
        config = QueryBenchConfig(data_folder(args.data), tuple(_names(args.dataset)) or QUERY_DATASETS, args.folds,
                                  args.seed, args.epochs, tuple(_names(args.procedures)))
    if args.json:
        check_output(args.json, "results file", inputs=[config.data / name for name in config.datasets],
                     option="--json")
    outcome = run_query_bench(config, progress=not args.quiet)
    for table in query_bench_tables(outcome):
        console.print(table)
    print(f"bench-queries: {outcome.seconds:.0f} s")
    if args.json:
        write_text(args.json, json.dumps(outcome.to_dict(), indent=2) + "\n", "results file")
        print(f"wrote {args.json}")


# The fields of `tgml.bench.synthetic_procedures.SyntheticConfig` that are options of the same name.
SYNTHETIC_OPTIONS: Final = ("sizes", "executions", "noise", "seeds", "first_seed", "learners", "workers")


def _bench_synthetic(args: argparse.Namespace, console: Console) -> None:
    """``tgml bench-synthetic``: edge F1 of the learners on random procedures."""
    from graphs.common.files import check_output, write_text
    from graphs.common.settings_files import naming_the_flags
    from tgml.bench.synthetic_procedures import SyntheticConfig, run_synthetic, summary_table, synthetic_table

    if args.json:
        check_output(args.json, "results file", option="--json")
    seed_range(args.first_seed, args.seeds, "--first-seed")
    with naming_the_flags(SYNTHETIC_OPTIONS):  # --noise 1.5, not the settings field SyntheticConfig.noise
        config = SyntheticConfig(
            _listed(args.sizes, int, "--sizes"), _listed(args.executions, int, "--executions"),
            _listed(args.noise, float, "--noise"), seeds=args.seeds, first_seed=args.first_seed,
            learners=_listed(args.learners, str, "--learners"), workers=args.workers)
    synthetic = run_synthetic(config, progress=not args.quiet)
    console.print(synthetic_table(synthetic))
    console.print(summary_table(synthetic))
    if args.json:
        write_text(args.json, json.dumps(synthetic.to_dict(), indent=2) + "\n", "results file")
        print(f"wrote {args.json}")


def _bench_live(args: argparse.Namespace, console: Console) -> None:
    """``tgml bench-live``: train, run live and score every fold; print the tables (`tgml.bench.live.bench`)."""
    from graphs.common.files import write_text
    from tgml.bench.error_annotations import unmatched_line, unmatched_steps, untimely_line, untimely_steps
    from tgml.bench.live.bench import live_tables, run_live_bench

    result = run_live_bench(_bench_live_config(args), progress=not args.quiet)
    unmatched = unmatched_steps(r.annotation for r in result.data.recordings)
    if unmatched:  # neither trained on nor scored: said, as captaincook-labels and bench-mistakes say it
        print_note(unmatched_line(unmatched))
    untimely = untimely_steps(r.annotation for r in result.data.recordings)
    if untimely:  # in neither the steps done nor those never done, when untagged and without a time: said
        print_note(untimely_line(untimely, "one with a time is scored as done, and tagged as missing too; one with "
                                 "neither is in neither"))
    document = result.to_dict()
    if args.ceiling:
        from tgml.bench.live.ceiling import ceiling_table, live_ceilings

        ceilings = live_ceilings(result)
        document["ceiling"] = {name: dataclasses.asdict(c) for name, c in ceilings.items()}
    unsaved: InputError | None = None  # a results file that cannot be written after all: the tables still shown
    if args.json:  # first: the run's work is on disk whatever happens next
        try:
            write_text(args.json, json.dumps(document, indent=2) + "\n", "results file")
        except InputError as err:
            unsaved = err
    if args.save_graphs:
        _save_live_graphs(result, Path(args.save_graphs))
    for table in live_tables(result):
        console.print(table)
    if args.ceiling:
        console.print(ceiling_table(result, ceilings))
    cached = result.cache_line()
    print(f"bench-live: {result.seconds:.0f} s" + (f"; {cached}" if cached else ""))
    note_in_sample(result.validation, result.config.folds, result.config.detector.train.val_fraction)
    if unsaved is not None:
        raise unsaved
    if args.json:
        print(f"wrote {args.json}")
    if args.save_graphs:
        count, recipes = sum(len(folds) for folds in result.graphs.values()), len(result.graphs)
        print(f"wrote {count} graph{'s' if count != 1 else ''} to {args.save_graphs}/ (<recipe>-fold<k>.json), and "
              f"{recipes} hand-made graph{'s' if recipes != 1 else ''} (<recipe>-hand-made.json)")


def _bench_live_config(args: argparse.Namespace) -> LiveBenchConfig:
    """The run ``tgml bench-live``'s options ask for, every output checked before any fold trains."""
    from graphs.checker_settings import CHECKERS, DEFAULT_CHECKER, CheckerSettings
    from graphs.common.files import check_output
    from tgml.bench.data_folder import data_folder
    from tgml.bench.live.bench import LiveBenchConfig
    from tgml.bench.live.detector import LiveDetectorSettings
    from tgml.bench.live.recordings import captaincook_dir, features_folder
    from tgml.bench.live.selection import LIVE_GRAPHS, PRIOR_VARIANTS, VARIANTS

    data = data_folder(args.data)
    features = Path(args.features) if args.features else None
    if args.json:
        check_output(args.json, "results file", inputs=[captaincook_dir(data), features_folder(data, features)],
                     option="--json")
    if args.cache:  # a file there would be found only when the first fold's training is saved, and lost
        check_output(args.cache, "fold cache", folder=True, option="--cache")
    if args.save_graphs:
        check_output(args.save_graphs, "graphs folder", folder=True, option="--save-graphs")
    if args.recipes is not None and not _names(args.recipes):  # an empty $VAR would run every recipe, unasked
        raise InputError(f"--recipes {args.recipes!r}: names no recipe (comma-separated names; leave the option out "
                         "for every recipe)")
    note_unread_entries(data, features)
    if args.checker == CHOSEN:  # a priori the live default, or the first checker that takes the order rule
        kinds = tuple(k for k, entry in CHECKERS.items() if args.order_rule in entry.order_rules)
        checking = CheckerSettings(DEFAULT_CHECKER if DEFAULT_CHECKER in kinds else kinds[0],
                                   order_rule=args.order_rule)
    else:
        kinds, checking = (args.checker,), CheckerSettings(args.checker, order_rule=args.order_rule)
    return LiveBenchConfig(data, features, args.folds, args.seed, LiveDetectorSettings().with_epochs(args.epochs),
                           checking, tuple(_names(args.recipes)), args.workers,
                           Path(args.cache) if args.cache else None,
                           VARIANTS + (PRIOR_VARIANTS if args.position_prior else ()), kinds,
                           LIVE_GRAPHS if args.live_graph == CHOSEN else (args.live_graph,), args.detector_seed)


def _save_live_graphs(result: LiveBenchResult, folder: Path) -> None:
    """``--save-graphs``: each fold's learned graph, and each recipe's hand-made graph with its step ids (which
    CaptainCook4D's own file, numbered its own way and matched by name, does not give stream-detect)."""
    from graphs.task_graph import TaskGraph, save_graph

    for recipe, folds in result.graphs.items():
        for fold, graph in sorted(folds.items()):
            save_graph(TaskGraph.from_dict(graph), folder / f"{recipe}-fold{fold}.json")
        save_graph(result.data.recipes[recipe].ground_truth, folder / f"{recipe}-hand-made.json")


def _captaincook_labels(args: argparse.Namespace, console: Console) -> None:
    """``tgml captaincook-labels``: write the annotation file of CaptainCook4D recordings
    (`tgml.bench.live.annotation_file`)."""
    from graphs.common.files import check_output, check_replaces_only, write_text
    from graphs.common.safe_text import printable
    from tgml.bench.data_folder import data_folder
    from tgml.bench.error_annotations import unmatched_line, untimely_line
    from tgml.bench.live.annotation_file import captaincook_labels
    from tgml.bench.live.recordings import captaincook_dir, feature_files, features_folder

    data = data_folder(args.data)
    features = Path(args.features) if args.features is not None else None
    check_output(args.out, "annotation file", inputs=[captaincook_dir(data), features_folder(data, features)],
                 option="--out", kind="annotations")
    check_replaces_only(args.out, "annotations", "annotation file")
    recordings: dict[str, str] | None = None  # recording id -> where the user named it
    if features is not None:
        recordings = {name: str(path) for name, path in feature_files(features).items()}
        note_unread_entries(data, features)
    elif args.recordings is not None:
        recordings = {r: f"--recordings {args.recordings}" for r in _names(args.recordings)}
        if not recordings:
            raise InputError(f"--recordings {args.recordings!r}: names no recording (comma-separated ids)")
    labels = captaincook_labels(data, recordings)
    write_text(args.out, json.dumps(labels.content, indent=1) + "\n", "annotation file")
    count = sum(len(r) for r in labels.recordings.values())
    recipes = ", ".join(f"{printable(recipe)} ({len(r)})" for recipe, r in labels.recordings.items())
    print(f"wrote {args.out}: {count} recording{'s' if count != 1 else ''} of {recipes}; {labels.done} steps done, "
          f"{labels.never_done} annotated never done")
    # Notes on stderr, as bench-live gives them: stdout keeps the one line a script reads.
    if labels.unmatched:
        print_note(unmatched_line(labels.unmatched))
    if labels.untimely:  # never a step dropped unsaid: one untagged without a time is in neither count above
        print_note(untimely_line(labels.untimely, "a step with a time is written as done, and tagged as never done "
                                                  "too; one with neither is left out"))


def note_in_sample(validation: Sequence[ValidationRun], folds: int, fraction: float) -> None:
    """Say which recipes had a fold of one validation recording, whose settings were chosen on figures from a
    calibration fitted on that very recording (`tgml.bench.live.selection.in_sample_recipes`), and how many recordings
    a recipe needs at these ``folds`` for two."""
    from graphs.common.safe_text import first_few
    from tgml.bench.live.selection import in_sample_recipes, recordings_for_two_validation

    recipes = in_sample_recipes(validation)
    if recipes:
        enough = recordings_for_two_validation(folds, fraction)
        print_note(f"{first_few(recipes, 5, and_more=', and ')}: a fold held one validation recording, scored with "
                   "the evidence calibration fitted on it, so the settings chosen on it are optimistic (the "
                   "end-of-recording report above all)"
                   + (f"; at {folds} folds, {enough} recordings of a recipe give each fold two" if enough else ""))


def note_unread_entries(data: Path, features: Path | None) -> None:
    """Say which entries of the features folder are not ``<recording_id>.npy`` files and so are not read (a
    sub-folder, an ``.npz``): never a silent skip."""
    from recognition.feature_import import unread_line
    from tgml.bench.live.recordings import features_folder

    line = unread_line(features_folder(data, features), name="recording_id")
    if line is not None:
        print_note(line)


def _names(option: str | None) -> list[str]:
    """A comma-separated option as a list, each item stripped (``"a, b"`` as other commands read it), empty ones
    dropped."""
    return [name.strip() for name in (option or "").split(",") if name.strip()]


RUNS: dict[str, Callable[[argparse.Namespace, Console], None]] = {
    "train": _train, "show": _show, "eval": _eval, "bench-captaincook": _bench_captaincook,
    "bench-mistakes": _bench_mistakes, "bench-queries": _bench_queries, "bench-synthetic": _bench_synthetic,
    "bench-live": _bench_live, "captaincook-labels": _captaincook_labels,
}


@exit_on_input_error
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tgml`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    asked = next((word for word in argv if not word.startswith("-")), "")
    args = _parser([asked]).parse_args(argv)
    from rich.console import Console

    from graphs.common.consoles import table_console

    # Tables only: result lines are plain print()s, never wrapped or read as rich markup.
    console = table_console(Console())
    RUNS[args.command](args, console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
