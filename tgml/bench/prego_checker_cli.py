"""``prego-bench select-checker``: choose the probabilistic checker's settings for PREGO on the training split only.

Usage::

    prego-bench select-checker --data ../shared/data --dataset epic-tent-o --out settings.json
    prego-bench select-checker --data ../shared/data --dataset assembly101-o --folds 5 --out settings.json
    prego-bench select-checker --dataset epic-tent-o --no-replay --priors 0.1,0.2 --thresholds 0.5   # quick look

Cross-validation over the training videos with simulated recognition noise (`tgml.bench.prego.checker_selection`):
the PRED-mode settings (prior, threshold, sequence evidence) for every dataset, and the replay settings (segmenter
``min_duration``, evidence window, prior, threshold, frame evidence) for a dataset with timed annotations
(EPIC-Tent-O). Prints each search's table (best first, the binary checker among the rows) and writes the winners to
``--out`` (the shipped files are ``tgml/bench/settings/prego-checker-<dataset>.json``). Never reads the test split.
Bad input ends with one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import math
import time
from typing import Any, Final

from graphs.common.command_line import ArgumentParser, add_version_option, plain_summary
from graphs.common.errors import InputError, exit_on_input_error
from graphs.common.options import as_listed_option, output_name, seed_option, workers_option
from graphs.common.settings_files import naming_the_flags
from tgml.bench.data_folder import DATA_ENV
from tgml.bench.prego import DATASETS
from tgml.bench.prego.checker_selection import CheckerSearch
from tgml.learners.registry import LEARNERS


def _floats(text: str | None, default: tuple[float, ...], option: str) -> tuple[float, ...]:
    if text is None:
        return default
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise InputError(f"{option} {text!r}: expected comma-separated numbers") from None
    if not values or any(not math.isfinite(v) for v in values):
        raise InputError(f"{option} {text!r}: expected comma-separated finite numbers")
    return values


# The fields of `tgml.bench.prego.checker_selection.CheckerSearch` that are options of the same name.
SEARCH_OPTIONS: Final = ("folds", "method", "seed", "priors", "thresholds", "windows", "min_durations", "rates",
                         "workers")


def build_parser() -> ArgumentParser:
    """The command-line interface."""
    defaults = CheckerSearch()
    p = ArgumentParser(prog="prego-bench select-checker", description=plain_summary(__doc__))
    add_version_option(p)
    p.add_argument("--data", help=f"data folder like shared/data (default ${DATA_ENV})")
    p.add_argument("--dataset", required=True, choices=sorted(DATASETS),
                   help="the PREGO dataset whose training videos are searched")
    p.add_argument("--folds", type=int, help="folds over the training videos (default: one per video up to 13, else 5)")
    p.add_argument("--method", default=defaults.method, choices=sorted(LEARNERS), metavar="METHOD",
                   help=f"graph learned in each fold, from {', '.join(sorted(LEARNERS))} (default do, the graph "
                        "`prego-bench replay` learns)")
    p.add_argument("--seed", type=seed_option, default=defaults.seed,
                   help=f"the graph's seed (default {defaults.seed})")
    p.add_argument("--priors", help="comma-separated prior skip probabilities rho to try (default "
                                    f"{as_listed_option(defaults.priors)})")
    p.add_argument("--thresholds",
                   help="comma-separated alert thresholds tau to try (default "
                        f"{as_listed_option(defaults.thresholds)})")
    p.add_argument("--windows", help="comma-separated evidence windows W in seconds (replay; default "
                                     f"{as_listed_option(defaults.windows)})")
    p.add_argument("--min-durations", help="comma-separated segmenter min_duration values in seconds (replay; "
                                           f"default {as_listed_option(defaults.min_durations)})")
    p.add_argument("--rates", help="comma-separated perturbation rates of the PRED simulation (default "
                                   f"{as_listed_option(defaults.rates)})")
    p.add_argument("--no-replay", action="store_true", help="choose the PRED-mode settings only")
    p.add_argument("--out", type=output_name, help="write the chosen settings to this JSON file")
    p.add_argument("--workers", type=workers_option, default=0, help="processes (0 = one per core)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _cell(key: str, value: object) -> str:
    """A table cell: scores with one decimal, settings as written in the settings file."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}" if "noise" in key or key == "score" else f"{value:g}"
    return str(value)


def _print_rows(title: str, rows: list[dict[str, Any]], limit: int = 12) -> None:
    from rich.console import Console
    from rich.table import Table

    from graphs.common.consoles import table_console

    table = Table(title=title)
    keys = list(rows[0])
    for key in keys:
        table.add_column(key, justify="right")
    binary = [r for r in rows if r["checker"] == "binary"]
    shown = rows[:limit] + [r for r in binary if r not in rows[:limit]]
    for row in shown:
        table.add_row(*(_cell(key, value) for key, value in row.items()))
    table_console(Console()).print(table)


@exit_on_input_error
def main(argv: list[str]) -> int:
    """Entry point of ``prego-bench select-checker`` (dispatched by `tgml.bench.prego_bench_cli`)."""
    started = time.perf_counter()
    args = build_parser().parse_args(argv)
    from graphs.common.files import check_output
    from tgml.bench.data_folder import data_folder
    from tgml.bench.prego import load_dataset, load_method_settings, resolve_data
    from tgml.bench.prego.checker_selection import (
        TIME_UNITS,
        CheckerSettingsFile,
        save_checker_settings,
        search_record,
        select_pred_checker,
        select_replay_checker,
    )
    from tgml.bench.prego.recognition_noise import load_timed_videos

    root = data_folder(args.data)
    layout = resolve_data(root, [args.dataset])
    if args.out:
        check_output(args.out, "checker settings file", option="--out",
                     inputs=[layout.root / args.dataset, layout.segments_file(args.dataset).parent])
    data = load_dataset(layout, args.dataset, pred=False)
    defaults = CheckerSearch()
    with naming_the_flags(SEARCH_OPTIONS):  # --priors 2, not the settings field CheckerSearch.priors
        search = CheckerSearch(
            folds=args.folds if args.folds is not None else (len(data.train) if len(data.train) <= 13 else 5),
            method=args.method,
            seed=args.seed,
            priors=_floats(args.priors, defaults.priors, "--priors"),
            thresholds=_floats(args.thresholds, defaults.thresholds, "--thresholds"),
            windows=_floats(args.windows, defaults.windows, "--windows"),
            min_durations=_floats(args.min_durations, defaults.min_durations, "--min-durations"),
            rates=_floats(args.rates, defaults.rates, "--rates"),
            workers=args.workers,
        )
    settings = load_method_settings(args.dataset)[args.method]
    pred, pred_rows = select_pred_checker(data, settings, search, progress=not args.quiet)
    _print_rows(f"PRED mode: {args.dataset} training split, {search.folds} folds, perturbed sequences (Avg F1)",
                pred_rows)
    replay = None
    replay_rows: list[dict[str, Any]] = []
    if not args.no_replay and args.dataset in TIME_UNITS:
        videos = load_timed_videos(layout.train_file(args.dataset), DATASETS[args.dataset].scenario,
                                   TIME_UNITS[args.dataset])
        replay, replay_rows = select_replay_checker(data, videos, settings, search, progress=not args.quiet)
        _print_rows(f"Replay: {args.dataset} training split, {search.folds} folds, simulated label noise (Avg F1)",
                    replay_rows)
    elif not args.no_replay:
        print(f"no replay settings: {args.dataset} has no timed annotations to simulate frames from")

    def best(rows: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
        return next((r for r in rows if r["checker"] == kind), None)

    chosen = {
        "command": "prego-bench select-checker " + " ".join(argv),
        "search": search_record(search),
        "pred": {"chosen": best(pred_rows, "probabilistic"), "binary": best(pred_rows, "binary")},
        "replay": None if replay is None else {"chosen": best(replay_rows, "probabilistic"),
                                               "binary": best(replay_rows, "binary")},
    }
    for what, rows in (("PRED mode", pred_rows), ("replay", replay_rows)):
        if rows and rows[0]["checker"] == "binary":
            print(f"{what}: the binary checker scored higher than every probabilistic candidate on the training "
                  "split; the best probabilistic one is kept for the probabilistic rows")
    print(f"PRED mode: prior {pred.settings.prior_skip:g}, threshold {pred.settings.alert_threshold:g}")
    if replay is not None:
        assert replay.segmenter is not None
        print(f"replay: min_duration {replay.segmenter.min_duration:g} s, window {replay.evidence.window_s:g} s, "
              f"prior {replay.settings.prior_skip:g}, threshold {replay.settings.alert_threshold:g}")
    if args.out:
        out = save_checker_settings(args.out, CheckerSettingsFile(args.dataset, pred, replay, chosen))
        print(f"settings written to {out}")
    print(f"finished in {time.perf_counter() - started:.1f} s")
    return 0
