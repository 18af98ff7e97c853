"""`prego-bench`: the PREGO online mistake-detection benchmark (Assembly101-O, EPIC-Tent-O, or a dataset of yours).

Usage::

    prego-bench --data DIR [--dataset assembly101-o epic-tent-o] [--mode gt pred]
                [--method do count-based msg2 msgi noisy-and do-cv do-ensemble noisy-and-do]
                [--seeds N] [--json FILE] [--sequences FILE] [--graph FILE] [--perturb 0,0.1,0.2]
                [--plot FILE] [--workers N] [--epochs N] [--config DATASET=FILE] [--save-graphs DIR]
                [--checker probabilistic [--checker-settings DATASET=FILE]]   (PRED rows of the probabilistic checker)
    prego-bench --annotations FILE [--scenario S] (--test-videos A,B | --split FILE) [--config FILE]
                [--method ...] [--seeds N] [--json FILE] [--graph FILE] [--save-graphs DIR] [--order-only]
                                      (GT mode on your own annotation file; tgml/bench/prego/own_dataset.py)
    prego-bench prepare --assembly101 RAW --epic-tent RAW --out DIR
    prego-bench select --data DIR --dataset assembly101-o [--folds 5] [--method do-cv|do-ensemble|noisy-and-do]
                                      (choose do-cv / do-ensemble / noisy-and-do settings on training data only)
    prego-bench select-checker --data DIR --dataset epic-tent-o [--out FILE]
                                      (choose the probabilistic checker's settings on training data only)
    prego-bench replay ...            (recorded per-frame predictions through the online segmenter)

Examples::

    prego-bench --data ../shared/data --seeds 5 --json results.json
    prego-bench --data ../shared/data --dataset epic-tent-o --mode pred --sequences my_recogniser.json
    prego-bench --data ../shared/data --dataset epic-tent-o --graph graphs/epic-tent.json
    prego-bench --data ../shared/data --perturb 0,0.1,0.2,0.3,0.4,0.5 --plot ablation.png
    prego-bench --annotations my.json --scenario tea --test-videos rec_7,rec_9 --method do count-based

`--data` defaults to ``$MISTAKE_DATA``. Bad input ends with one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Final

from graphs.common.command_line import ArgumentParser, add_version_option, unknown_command
from graphs.common.errors import FieldError, InputError, exit_on_input_error
from graphs.common.files import check_output
from graphs.common.options import output_path, seed_option, seed_range, workers_option
from graphs.common.safe_text import unknown_name
from graphs.common.settings_files import EPOCHS, Bound, as_written, naming_the_flags
from tgml.bench import prego
from tgml.bench.data_folder import DATA_ENV, data_folder
from tgml.bench.prepare import PrepareConfig, prepare_all
from tgml.learners.do.config import ENSEMBLE_SIZE, THRESHOLD_SCALE
from tgml.learners.noisy_and_do.combination import COMBINED_THRESHOLD, RULES
from tgml.learners.registry import DEFAULT_LEARNER, LEARNERS

PAPER_METHODS = ("do", "count-based")  # the paper's PREGO table: Direct Optimization and the Count-Based baseline
# The benchmark settings each option fills, so that a refusal names the option (`graphs.common.errors.FieldError`).
CONFIG_OPTIONS: Final = {"datasets": "--dataset", "modes": "--mode", "methods": "--method", "sequences": "--sequences",
                         "perturb": "--perturb", "workers": "--workers", "epochs": "--epochs", "checker": "--checker"}


def default_methods(own_data: bool) -> tuple[str, ...]:
    """The methods run when ``--method`` is not given: the paper's on its datasets; on a user's own annotations the
    graph `tgml train` learns comes first, so that the table shows the graph the live checker will use."""
    return (DEFAULT_LEARNER, *PAPER_METHODS) if own_data else PAPER_METHODS


def _rates(text: str) -> tuple[float, ...]:
    try:
        rates = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated rates like 0,0.1,0.2") from None
    if not rates:
        raise argparse.ArgumentTypeError(f"{text!r}: expected at least one rate, like 0,0.1,0.2")
    for k, rate in enumerate(rates):
        if not 0.0 <= rate <= 1.0:
            raise argparse.ArgumentTypeError(f"{text!r}: rate {rate:g} is outside [0, 1]")
        if rate in rates[:k]:
            raise argparse.ArgumentTypeError(f"{text!r}: rate {rate:g} is listed twice")
    return rates


def _config_pair(text: str) -> tuple[str, Path]:
    dataset, sep, path = text.partition("=")
    if not sep or not path:
        raise InputError(f"--config {text!r}: expected DATASET=FILE (FILE alone only with --annotations)")
    return dataset, Path(path)


def _checker_pair(text: str, checker: str) -> tuple[str, Path]:
    if checker != "probabilistic":
        raise InputError("--checker-settings: give it with --checker probabilistic")
    dataset, sep, path = text.partition("=")
    if not sep or not path:
        raise InputError(f"--checker-settings {text!r}: expected DATASET=FILE")
    return dataset, Path(path)


def _checker_files(pairs: list[tuple[str, Path]], run: list[str], own: bool) -> dict[str, Path]:
    """The ``--checker-settings`` files by dataset, each for a dataset of the run and given once (a second file for
    one dataset replaced the first without a word).

    Args:
        pairs: ``(dataset, file)`` as typed.
        run: the datasets of the run (with ``own``: the scenario of ``--annotations``).
        own: the run is on a dataset of the user's.
    """
    files: dict[str, Path] = {}
    for dataset, path in pairs:
        if dataset in files:
            raise InputError(f"--checker-settings {dataset}={path}: a second settings file for {dataset}")
        if dataset not in run:
            if own:
                why = f"is not the scenario run ({run[0]})"
            elif dataset in prego.DATASETS:
                why = f"is not run (--dataset {' '.join(run)})"
            else:
                raise InputError(unknown_name(f"--checker-settings {dataset}={path}: dataset", dataset,
                                              prego.DATASETS, None))
            raise InputError(f"--checker-settings {dataset}={path}: {dataset} {why}")
        files[dataset] = path
    return files


def _video_names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if not text.strip() or any(not name for name in names):
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated video names like a,b")
    return names


# The fields of `tgml.bench.prego.SelectionConfig` that `prego-bench select` fills from options of the same name.
SELECTION_OPTIONS: Final = ("folds", "noise", "slip_rate", "workers", "epochs", "scales", "sizes")
FIRST_SEED: Final = 42  # the reference's first training seed

# The benchmark and its sub-commands: argparse's usage listed the benchmark's twenty options alone, and the four
# sub-commands (replay: a recogniser's output through the checker) were named only in the page's last lines.
SUBCOMMANDS: Final = ("prepare", "select", "select-checker", "replay")
BENCH_USAGE: Final = ("prego-bench [--dataset DATASET ... | --annotations FILE] [options]\n"
                      f"       prego-bench {{{','.join(SUBCOMMANDS)}}} [options]")


def bench_parser() -> ArgumentParser:
    """Arguments of the benchmark run."""
    p = ArgumentParser(
        prog="prego-bench",
        usage=BENCH_USAGE,
        description="PREGO online mistake-detection benchmark. The sub-commands below have their own options "
        "(prego-bench replay --help).",
        epilog="sub-commands (each has --help): prepare (rebuild the split files from the raw annotations), "
        "select (choose settings on training data only), select-checker (the probabilistic checker's settings, "
        "training data only), replay (per-frame recogniser output through the checker)",
    )
    add_version_option(p)
    p.add_argument("--data", type=Path, help=f"data folder like shared/data (default ${DATA_ENV})")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--dataset", nargs="+", choices=list(prego.DATASETS), metavar="DATASET",  # as BENCH_USAGE
                        help=f"built-in datasets: {', '.join(prego.DATASETS)} (default: both)")
    source.add_argument("--annotations", type=Path, metavar="FILE",
                        help="your own annotation file (training and test videos) instead of the built-in datasets")
    p.add_argument("--scenario", metavar="S",
                   help="with --annotations: the scenario whose videos are run (default: the file's only one)")
    tests = p.add_mutually_exclusive_group()
    tests.add_argument("--test-videos", type=_video_names, metavar="A,B",
                       help="with --annotations: comma-separated test videos; the scenario's other videos train")
    tests.add_argument("--split", type=Path, metavar="FILE",
                       help='with --annotations: a {"train": [...], "test": [...]} file')
    p.add_argument("--order-only", action="store_true",
                   help="with --annotations: read only the order of the segments, their times unchecked; by default "
                        "negative times and segments ending before they start are refused (overlaps are accepted "
                        "with a one-line warning)")
    p.add_argument("--mode", nargs="+", choices=list(prego.MODES), help="gt and/or pred (default: both; gt only "
                   "with --annotations)")
    p.add_argument("--method", nargs="+", default=None, choices=[*LEARNERS, *prego.UNAVAILABLE], metavar="METHOD",
                   help=f"graph methods: {', '.join([*LEARNERS, *prego.UNAVAILABLE])} (default "
                        f"{' '.join(PAPER_METHODS)}, the paper's; with --annotations also {DEFAULT_LEARNER}, the "
                        "graph `tgml train` learns)")
    p.add_argument("--seeds", type=int, default=1, metavar="N",
                   help="how many training seeds: the learners run with seeds S..S+N-1, S being --first-seed; "
                        "the tables show mean ± std over them (default 1)")
    p.add_argument("--first-seed", type=seed_option, default=None, metavar="S",
                   help=f"the first training seed (default {FIRST_SEED}, the reference's)")
    p.add_argument("--json", type=output_path, metavar="FILE",
                   help="write the results here (schema: docs/prego-benchmark.md, 'Results document')")
    p.add_argument("--sequences", type=Path, help='PRED-mode input {video: {"pred": [...]}} replacing MiniROAD')
    p.add_argument("--graph", type=Path, help="evaluate this task graph file instead of learning graphs")
    p.add_argument("--perturb", type=_rates, default=(), help="noise ablation rates, e.g. 0,0.1,0.2,0.3,0.4,0.5")
    p.add_argument("--perturb-seed", type=seed_option, default=None, help="base seed of the ablation noise (default 0)")
    p.add_argument("--plot", type=output_path, default=None,
                   help="PNG of the ablation, with --perturb (default prego-perturb.png)")
    p.add_argument("--workers", type=workers_option, default=0, help="parallel processes (0 = one per core)")
    p.add_argument("--epochs", type=int,
                   help="override the configured epochs of every learner trained by epochs (quick checks)")
    p.add_argument("--config", action="append", default=[], metavar="SETTINGS",
                   help="DATASET=FILE settings; with --annotations one FILE whose tables replace the defaults")
    p.add_argument("--save-graphs", type=output_path, help="save every learned graph into this folder")
    p.add_argument("--checker", default="binary", choices=("binary", "probabilistic"),
                   help="probabilistic: PRED mode also scores each method with the probabilistic checker (GT stays "
                        "binary)")
    p.add_argument("--checker-settings", action="append", default=[], metavar="DATASET=FILE",
                   help="the probabilistic checker's settings of a dataset (default: the shipped "
                        "prego-checker-<dataset>.json, written by `prego-bench select-checker`)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def prepare_parser() -> ArgumentParser:
    """Arguments of `prego-bench prepare`."""
    p = ArgumentParser(prog="prego-bench prepare", description="Rebuild train/test JSON from raw files.")
    add_version_option(p)
    p.add_argument("--assembly101", type=Path, help="Assembly101-O raw folder (annots/, splits, action dict)")
    p.add_argument("--epic-tent", type=Path, help="EPIC-Tent-O raw folder (Synchronised_action_label.txt, ...)")
    p.add_argument("--out", type=output_path, required=True, help="output data folder")
    return p


def select_parser() -> ArgumentParser:
    """Arguments of `prego-bench select` (cross-validation on the training split: how ``do-cv`` / ``do-ensemble`` /
    ``noisy-and-do`` were chosen)."""
    p = ArgumentParser(prog="prego-bench select", description="Choose a method's settings on training data only.")
    add_version_option(p)
    p.add_argument("--data", type=Path, help=f"data folder like shared/data (default ${DATA_ENV})")
    p.add_argument("--dataset", required=True, choices=list(prego.DATASETS),
                   help="the PREGO dataset whose training videos are searched")
    p.add_argument("--method", default="do-cv", choices=["do-cv", "do-ensemble", "noisy-and-do"],
                   help="method whose settings to pick (default do-cv)")
    p.add_argument("--folds", type=int, default=5, help="folds over the training videos (default 5)")
    p.add_argument(
        "--epochs", help="comma-separated epoch caps (default do-cv: 50,100,200,400,1200; do-ensemble: 25,...,1200)"
    )
    p.add_argument("--scales", help="edge threshold 1/round(n*s): comma-separated s (default 0.5,1,2 / 0.25,...,4)")
    p.add_argument("--sizes", default="1,5", help="do-ensemble: comma-separated ensemble sizes (default 1,5)")
    p.add_argument("--slip-rate", type=float, default=0.5,
                   help="do-ensemble: share of random-slip mistakes (default 0.5)")
    p.add_argument("--no-early-stop", action="store_true", help="do-ensemble: skip the dataset's early-stopping rule")
    p.add_argument("--rules", default=",".join(RULES),
                   help=f"noisy-and-do: comma-separated combination rules (default {','.join(RULES)})")
    thresholds = "0.5,0.7,1,1.2,1.4,1.7,2"
    p.add_argument("--thresholds", default=thresholds,
                   help=f"noisy-and-do: comma-separated thresholds on the combined evidence ratio (default "
                        f"{thresholds})")
    p.add_argument("--noise", type=float, default=0.2,
                   help="perturbation rate standing in for recognition errors (default 0.2)")
    p.add_argument("--workers", type=workers_option, default=0, help="processes (0 = one per core)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _numbers(text: str | None, default: str, kind: type, option: str, bound: Bound) -> list:
    """The numbers of a comma-separated option (``--epochs``, ``--scales``, ``--sizes``), or its default, each in
    the range of the setting it tries (``bound``: 10**20 epochs was refused naming DOConfig.epochs, no option)."""
    try:
        values = [kind(x) for x in (text or default).split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{option} {text!r}: expected comma-separated numbers") from None
    rule = bound.rule(integer=kind is int)
    bad = [v for v in values if not (math.isfinite(v) and bound.holds(v))]
    if not values or bad:
        got = f", got {as_written(bad[0], 30)}" if bad else ""
        raise InputError(f"{option} {text!r}: expected comma-separated numbers, each {rule}{got}")
    return values


def _cell(key: str, value: object) -> str:
    """A selection-table cell: scores with one decimal, settings as written in the settings file."""
    if isinstance(value, str):
        return value
    if key in ("clean", "noisy", "score"):
        return f"{value:.1f}"
    return f"{value:g}"


def _select(argv: list[str]) -> int:
    started = time.perf_counter()
    args = select_parser().parse_args(argv)
    args.data = data_folder(args.data)
    if args.method == "noisy-and-do":
        return _select_combination(args, started)
    ensemble = args.method == "do-ensemble"
    epochs = _numbers(args.epochs, "25,50,75,100,200,400,1200" if ensemble else "50,100,200,400,1200", int, "--epochs",
                      EPOCHS)
    scales = _numbers(args.scales, "0.25,0.5,1,2,4" if ensemble else "0.5,1,2", float, "--scales", THRESHOLD_SCALE)
    layout = prego.resolve_data(args.data, [args.dataset])
    data = prego.load_dataset(layout, args.dataset, pred=False)
    settings = prego.load_method_settings(args.dataset)["do"]
    title = f"Cross-validation on the {args.dataset} training split (Avg F1, synthetic mistakes)"
    with naming_the_flags(SELECTION_OPTIONS):  # --folds 1, not the settings field SelectionConfig.folds
        if ensemble:
            search = prego.SelectionConfig(
                folds=args.folds,
                epochs=tuple(epochs),
                early_stop=not args.no_early_stop,
                scales=tuple(scales),
                sizes=tuple(_numbers(args.sizes, "1,5", int, "--sizes", ENSEMBLE_SIZE)),
                noise=args.noise,
                slip_rate=args.slip_rate,
                workers=args.workers,
            )
            keys: tuple[str, ...] = ("epochs", "early_stop", "size", "threshold_scale", "clean", "noisy", "score")
            headers: tuple[str, ...] = (
                "epochs", "early stop", "size", "threshold scale", "clean", f"noise {args.noise:g}", "score"
            )
        else:
            search = prego.do_cv_search(args.folds, tuple(epochs), tuple(scales), args.noise, args.workers)
            keys = ("epochs", "threshold_scale", "clean", "noisy", "score")
            headers = ("epochs", "threshold scale", "clean", f"noise {args.noise:g}", "score")
    rows = prego.cross_validate(data, settings, search, progress=not args.quiet)
    return _print_selection(title, headers, keys, rows, started)


def _print_selection(
    title: str, headers: tuple[str, ...], keys: tuple[str, ...], rows: list[dict], started: float,
    best: dict | None = None,
) -> int:
    """Print the cross-validation table, the best candidate (default: the first row) and the time taken."""
    from rich.console import Console
    from rich.table import Table

    from graphs.common.consoles import table_console

    table = Table(title=title)
    for header in headers:
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(*(_cell(k, row[k]) for k in keys))
    table_console(Console()).print(table)
    best = best or rows[0]
    print("best: " + ", ".join(f"{k} = {_cell(k, best[k])}" for k in keys[: keys.index("clean")]))
    print(f"finished in {time.perf_counter() - started:.1f} s")
    return 0


def _select_combination(args: argparse.Namespace, started: float) -> int:
    """``select --method noisy-and-do``: the combination rule and threshold, each learner keeping its own table."""
    rules = tuple(r.strip() for r in args.rules.split(",") if r.strip())
    bad = next((r for r in rules if r not in RULES), None)
    if bad is not None:
        raise InputError(unknown_name("--rules", bad, RULES))
    if not rules:
        raise InputError(f"--rules {args.rules!r}: expected comma-separated rules among {', '.join(RULES)}")
    with naming_the_flags(SELECTION_OPTIONS):
        search = prego.CombinationSearch(
            rules=rules,
            thresholds=tuple(_numbers(args.thresholds, "", float, "--thresholds", COMBINED_THRESHOLD)),
            selection=prego.SelectionConfig(folds=args.folds, noise=args.noise, slip_rate=args.slip_rate,
                                            workers=args.workers),
        )
    layout = prego.resolve_data(args.data, [args.dataset])
    data = prego.load_dataset(layout, args.dataset, pred=False)
    settings = prego.load_method_settings(args.dataset)["noisy-and-do"]
    rows = prego.combination_cross_validate(data, settings, search, progress=not args.quiet)
    title = f"Cross-validation of noisy-and-do on the {args.dataset} training split (Avg F1, synthetic mistakes)"
    keys = ("rule", "threshold", "clean", "noisy", "score")
    headers = ("rule", "threshold", "clean", f"noise {args.noise:g}", "score")
    # The learners alone are listed for comparison in the same folds; the choice is among the combinations.
    best = next(row for row in rows if row["rule"] in RULES)
    return _print_selection(title, headers, keys, rows, started, best)


def _prepare(argv: list[str]) -> int:
    args = prepare_parser().parse_args(argv)
    for path in prepare_all(PrepareConfig(args.assembly101, args.epic_tent, args.out)):
        print(f"wrote {path}")
    return 0


def _ablation_options(args: argparse.Namespace) -> None:
    """Refuse the noise ablation's options without it (a --plot given alone was ignored without a word), and fill in
    their defaults."""
    if not args.perturb:
        given = next((option for option, value in (("--plot", args.plot), ("--perturb-seed", args.perturb_seed))
                      if value is not None), None)
        if given is not None and args.annotations is not None:  # --perturb is refused there: no advice to give it
            raise InputError(f"{given}: the noise ablation runs on the built-in datasets only, not --annotations")
        if given is not None:
            raise InputError(f"{given} is an option of the noise ablation: give --perturb RATES too (e.g. --perturb "
                             "0,0.1,0.2)")
    args.plot = Path("prego-perturb.png") if args.plot is None else args.plot
    args.perturb_seed = 0 if args.perturb_seed is None else args.perturb_seed


def _own_dataset(args: argparse.Namespace) -> prego.AnnotationSource | None:
    """The ``--annotations`` dataset of the command line, or None; options that do not fit it are refused."""
    own_options = {"--scenario": args.scenario, "--test-videos": args.test_videos, "--split": args.split,
                   "--order-only": args.order_only or None}
    if args.annotations is None:
        given = next((option for option, value in own_options.items() if value is not None), None)
        if given is not None:
            raise InputError(f"{given} is an option of --annotations FILE (your own dataset)")
        return None
    refused = {
        "--mode": ("pred" in (args.mode or []), "PRED mode needs recognised segments; --annotations runs GT mode"),
        "--sequences": (args.sequences is not None, "PRED-mode input; --annotations runs GT mode only"),
        "--perturb": (bool(args.perturb), "the noise ablation runs on the built-in datasets only"),
        "--config": (len(args.config) > 1, "give one settings file with --annotations"),
    }
    for option, (bad, why) in refused.items():
        if bad:
            raise InputError(f"{option}: {why}")
    if args.test_videos is None and args.split is None:
        raise InputError("--annotations needs its test videos: --test-videos A,B or --split FILE")
    return prego.AnnotationSource(
        annotations=args.annotations,
        scenario=prego.only_scenario(args.annotations) if args.scenario is None else args.scenario,
        test_videos=args.test_videos,
        split=args.split,
        settings=Path(args.config[0]) if args.config else None,
        order_only=args.order_only,
    )


def _refuse_learner_options_with_a_graph(args: argparse.Namespace) -> None:
    """A graph file is evaluated as it is: the options of the learners it replaces would be ignored in silence
    (``--method do --seeds 3`` beside ``--graph`` printed one row of the file's graph and exited 0)."""
    if args.graph is None:
        return
    given = {"--method": args.method is not None, "--seeds": args.seeds != 1,
             "--first-seed": args.first_seed is not None, "--epochs": args.epochs is not None,
             "--config": bool(args.config), "--save-graphs": args.save_graphs is not None}
    unused = [option for option, typed in given.items() if typed]
    if unused:
        raise InputError(f"--graph {args.graph}: the file's graph is evaluated as it is, and {', '.join(unused)} "
                         f"{'configures' if len(unused) == 1 else 'configure'} the learners it replaces; leave "
                         f"{'it' if len(unused) == 1 else 'them'} out, or leave out --graph to learn graphs")


def _bench(argv: list[str]) -> int:
    from rich.console import Console

    from graphs.common.consoles import table_console

    started = time.perf_counter()
    args = bench_parser().parse_args(argv)
    _refuse_learner_options_with_a_graph(args)
    first_seed = FIRST_SEED if args.first_seed is None else args.first_seed
    seeds = tuple(seed_range(first_seed, args.seeds, "--first-seed"))
    checker_pairs = [_checker_pair(text, args.checker) for text in args.checker_settings]  # usage first
    _ablation_options(args)
    own = _own_dataset(args)
    if own is not None:
        inputs = [args.graph, own.annotations, own.split, own.settings]
        datasets: list[str] = []
        modes = ["gt"]
        configs: list[tuple[str, Path]] = []
    else:
        configs = [_config_pair(text) for text in args.config]  # a usage mistake before a missing folder
        args.data = data_folder(args.data, " (or --annotations FILE)")
        datasets = args.dataset or list(prego.DATASETS)
        modes = args.mode or list(prego.MODES)
        for k, (dataset, path) in enumerate(configs):
            if dataset not in prego.DATASETS:  # BenchConfig would name its field (config_files), not the option
                raise InputError(unknown_name(f"--config {dataset}={path}: dataset", dataset, prego.DATASETS, None))
            if dataset in (d for d, _ in configs[:k]):
                raise InputError(f"--config {dataset}={path}: a second settings file for {dataset}")
            if dataset in prego.DATASETS and dataset not in datasets:
                raise InputError(f"--config {dataset}={path}: {dataset} is not run (--dataset {' '.join(datasets)})")
        layout = prego.DataLayout(args.data)
        inputs = [args.sequences, args.graph, *(path for _, path in configs)]
        # The data sets' folders stand for every file in them (splits, segments, frames, LLM graphs).
        inputs += [layout.root / d for d in datasets] + [layout.segments_file(d).parent for d in datasets]
    checker_files = _checker_files(checker_pairs, [own.name] if own is not None else datasets, own is not None)
    inputs += list(checker_files.values())
    # Outputs written after the run are checked now, so a bad path cannot throw the finished run away (nor
    # overwrite one of the run's own inputs).
    if args.json is not None:
        check_output(args.json, "results file", inputs=[i for i in inputs if i is not None], option="--json")
    if args.perturb:
        check_output(args.plot, "ablation plot", inputs=[i for i in inputs if i is not None], option="--plot")
    if args.save_graphs is not None:
        check_output(args.save_graphs, "graphs folder", folder=True, option="--save-graphs")
    try:
        config = prego.BenchConfig(
            data=None if own is not None else args.data,
            datasets=tuple(datasets),
            modes=tuple(modes),
            methods=tuple(args.method or default_methods(own is not None)),
            seeds=seeds,
            sequences=args.sequences,
            graph=args.graph,
            perturb=args.perturb,
            perturb_seed=args.perturb_seed,
            workers=args.workers,
            epochs=args.epochs,
            config_files=dict(configs),
            save_graphs=args.save_graphs,
            annotations=own,
            checker=args.checker,
            checker_files=checker_files,
        )
    except FieldError as err:  # said with the option the user typed, not the field it filled
        given = [o for o in CONFIG_OPTIONS.values() if getattr(args, o[2:].replace("-", "_")) not in (None, ())]
        raise err.as_option(CONFIG_OPTIONS, given) from None
    console = table_console(Console())
    result = prego.run_benchmark(config, progress=not args.quiet)
    for table in prego.result_tables(result) + prego.perturbation_tables(result):
        console.print(table)
    if args.perturb:
        plotted = prego.plot_perturbation(result, args.plot)
        print(f"ablation plot: {plotted}" if plotted else "ablation plot skipped: install the 'plot' extra")
    if args.json is not None:
        print(f"results: {prego.write_results(result, args.json)}")
    print(f"finished in {time.perf_counter() - started:.1f} s")
    return 0


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Entry point of `prego-bench`: the benchmark, or the ``prepare`` / ``replay`` sub-commands."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["prepare"]:
        return _prepare(argv[1:])
    if argv[:1] == ["select"]:
        return _select(argv[1:])
    if argv[:1] == ["select-checker"]:
        from tgml.bench.prego_checker_cli import main as checker_main

        return checker_main(argv[1:])
    if argv[:1] == ["replay"]:
        from tgml.bench.prego_replay_cli import main as replay_main  # loaded only when asked

        return replay_main(argv[1:])
    if argv and not argv[0].startswith("-"):  # the benchmark takes options only: a typo of a sub-command
        # ("replya") was "unrecognized arguments: replya", though the usage lists the sub-commands.
        raise unknown_command("prego-bench", argv[0], SUBCOMMANDS)
    return _bench(argv)


if __name__ == "__main__":
    raise SystemExit(main())
