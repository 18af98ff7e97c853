"""``prego-bench replay``: recorded per-frame recogniser output -> online segmenter -> checker -> PREGO metrics.

Usage::

    prego-bench replay --frames ../shared/data/prego-miniroad/epic-tent-o_frames.json --graph graph.json
    prego-bench replay --data ../shared/data --json replay.json            # learns the DO graph itself
    prego-bench replay --data ../shared/data --graph graph.json --field gt --no-sweep
    prego-bench replay --frames F --graph G --min-duration 1.0 --sweep 0.25,0.5,1,2,4
    prego-bench replay --frames mine_frames.json --graph G --background 0 --fps 5   # labels with a background
    prego-bench replay --data ../shared/data --checker probabilistic     # the probabilistic checker beside the binary

With ``--data`` (default ``$MISTAKE_DATA``) the frames file is ``<data>/prego-miniroad/<dataset>_frames.json``
and, without ``--graph``, the DO task graph is learned from ``<data>/<dataset>/train.json`` with the benchmark's
settings (``tgml/bench/settings/prego-<dataset>.toml``, ``--seed``). The run prints the PREGO scores (Avg F1, per-class
F1 and true P/R) and an ablation table over the segmenter's ``min_duration``; ``--json FILE`` writes them
(format in `tgml.bench.prego.replay`). ``--checker probabilistic`` runs the probabilistic checker on the evidence the
labels hold, with the settings chosen on the training split by ``prego-bench select-checker`` (the shipped
``tgml/bench/settings/prego-checker-<dataset>.json``, or ``--checker-settings FILE``): its segmenter, evidence
calibration, prior and threshold; its row is printed beside the binary checker's, with the default segmenter and with
the chosen one. Bad input ends with one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphs.checker_settings import CHECKERS
from graphs.common.command_line import ArgumentParser, add_version_option, plain_summary
from graphs.common.errors import InputError, exit_on_input_error
from graphs.common.options import as_listed_option, fps_option, output_name, seed_option
from graphs.common.settings_files import naming_the_flags
from recognition.segmenter import SegmenterConfig
from tgml.bench.prego import DATASETS
from tgml.bench.prego.replay import DEFAULT_SWEEP, NoStepConfirmed

if TYPE_CHECKING:
    from graphs.task_graph import TaskGraph
    from tgml.bench.prego.checker_selection import CheckerChoice

# The PREGO MiniROAD frames files hold about 60 labels per second of video.
DEFAULT_FPS = 60.0
# The segmenter's fields this command sets from options of the same names (`naming_the_flags`).
SEGMENTER_FLAGS = ("min_duration", "min_run", "max_delay", "background")
# Those whose option defaults to the segmenter's own default: None until typed, so that a refusal names the one
# typed (`--min-run 100` alone was refused as "--min-duration 0.5: ...", an option never typed).
DURATION_FLAGS = ("min_duration", "min_run", "max_delay")


def build_parser() -> ArgumentParser:
    """The command-line interface."""
    defaults = SegmenterConfig(fps=DEFAULT_FPS)
    p = ArgumentParser(prog="prego-bench replay", description=plain_summary(__doc__))
    add_version_option(p)
    p.add_argument("--frames", help="per-frame labels {video: {pred: [...], gt: [...]}}")
    p.add_argument("--data", help="data folder laid out like shared/data (gives the frames file and training split; "
                                  "default $MISTAKE_DATA, read when --frames or --graph is left out)")
    p.add_argument("--dataset", default="epic-tent-o", choices=sorted(DATASETS), help="dataset inside --data")
    p.add_argument("--graph", help="task graph file; learned with DO from --data (or $MISTAKE_DATA) when omitted")
    p.add_argument("--seed", type=seed_option, default=42, help="seed of the DO graph learned without --graph")
    p.add_argument("--field", default="pred", choices=("pred", "gt"), help="which label stream to replay")
    p.add_argument("--background", type=int, metavar="ID",
                   help="the label of frames showing no key-step (default: none, as in the PREGO frames files)")
    p.add_argument("--fps", type=fps_option, default=DEFAULT_FPS, help="labels per second of video (1..1000)")
    p.add_argument("--min-duration", type=float,
                   help=f"seconds to confirm a run (default: {defaults.min_duration:g})")
    p.add_argument("--min-run", type=float,
                   help=f"runs shorter than this are flicker (default: {defaults.min_run:g})")
    p.add_argument("--max-delay", type=float,
                   help=f"longest wait before emitting (default: {defaults.max_delay:g})")
    p.add_argument(
        "--sweep",
        default=as_listed_option(DEFAULT_SWEEP),
        help="comma-separated --min-duration values for the ablation table",
    )
    p.add_argument("--no-sweep", action="store_true", help="skip the ablation")
    p.add_argument("--checker", default="binary", choices=CHECKERS,
                   help="binary (default, the PREGO protocol) or probabilistic (printed beside the binary)")
    p.add_argument("--checker-settings", metavar="FILE",
                   help="the probabilistic checker's settings (default: the shipped prego-checker-<dataset>.json)")
    p.add_argument("--json", type=output_name, help="write the results to this JSON file")
    return p


def _graph_data(args: argparse.Namespace) -> str | None:
    """The data folder the DO graph is learned from (None with ``--graph``): ``--data``, else ``$MISTAKE_DATA``, as
    for the frames file (``--frames`` given, a user who had set it was told to give --data)."""
    from tgml.bench.data_folder import data_folder

    if args.graph:
        return None
    return str(data_folder(args.data, " to learn the DO graph from its training split, or give --graph FILE"))


def _graph(args: argparse.Namespace, folder: str | None) -> tuple[TaskGraph, str]:
    from graphs.task_graph import load_graph
    from tgml.bench.prego import build_graph, load_dataset, load_method_settings, resolve_data

    if folder is None:
        return load_graph(args.graph), str(args.graph)
    layout = resolve_data(folder, [args.dataset], splits=True)
    data = load_dataset(layout, args.dataset, pred=False)
    settings = load_method_settings(args.dataset)["do"]
    print(f"learning the DO graph of {args.dataset} (seed {args.seed}) from {layout.train_file(args.dataset)}")
    graph = build_graph("do", data, settings, args.seed)
    return graph, f"DO learned from {layout.train_file(args.dataset)} seed {args.seed}"


def checker_record(kind: str, path: Path | None, choice: CheckerChoice | None) -> dict[str, Any]:
    """The ``settings.checker`` entry of the results document."""
    if choice is None:
        return {"kind": kind}
    return {"kind": kind, "settings_file": str(path), "alert_threshold": choice.settings.alert_threshold,
            "prior_skip": choice.settings.prior_skip, "window_s": choice.evidence.window_s}


@contextlib.contextmanager
def naming_no_step(frames_path: Path, duration: Callable[[float], str], rate: str) -> Iterator[None]:
    """Inside the block, a video in which no key-step was confirmed (`tgml.bench.prego.replay.NoStepConfirmed`) is
    said with the frames file, and its minimum duration as ``duration`` says it (the option or file that set it)."""
    try:
        yield
    except NoStepConfirmed as err:
        raise InputError(f"{frames_path}: {err.naming(duration(err.config.min_duration), rate)}") from None


@exit_on_input_error
def main(argv: list[str]) -> int:
    """Entry point of ``prego-bench replay`` (dispatched by `tgml.bench.prego_bench_cli`)."""
    args = build_parser().parse_args(argv)
    from rich.console import Console

    from graphs.common.consoles import table_console
    from graphs.common.files import check_output, write_text
    from tgml.bench.prego import PUBLISHED, resolve_data
    from tgml.bench.prego.checker_selection import default_settings_path, load_checker_settings
    from tgml.bench.prego.replay import (
        ReplayChecker,
        load_frames_file,
        replay,
        replay_scores_table,
        result_json,
        sweep,
        sweep_config,
        sweep_table,
    )

    console = table_console(Console())
    if not args.frames:  # $MISTAKE_DATA as every other benchmark reads it: a user who set it was told to give --data
        from tgml.bench.data_folder import data_folder

        args.data = str(data_folder(args.data, " (or --frames FILE)"))
    graph_data = _graph_data(args)
    if args.background is not None and args.background < 0:
        raise InputError(f"--background {args.background}: must be a label >= 0")
    frames_path = (
        Path(args.frames)
        if args.frames
        else resolve_data(args.data, [args.dataset], splits=False, frames=True).frames_file(args.dataset)
    )
    try:  # checked under --no-sweep too: a mistyped value is said, never silently unused
        values = [float(v) for v in args.sweep.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--sweep {args.sweep!r}: expected comma-separated seconds") from None
    # Named as typed: "SegmenterConfig.min_duration = -1.0" named a class the command line never shows; and a check
    # of two durations names the one typed, the other said to be at its default.
    typed = {name for name in DURATION_FLAGS if getattr(args, name) is not None} | {"background"}
    with naming_the_flags(typed, defaults=set(DURATION_FLAGS) - typed):
        config = SegmenterConfig(fps=args.fps, background=args.background,
                                 **{name: getattr(args, name) for name in DURATION_FLAGS if name in typed})
    flags = config  # the options' segmenter: the sweep's base, whatever a chosen one replaces `config` with below
    for value in values:
        try:
            with naming_the_flags(SEGMENTER_FLAGS):
                sweep_config(config, "min_duration", value)
        except InputError as err:  # the value itself is said already; a widened --max-delay keeps its own name
            why = str(err).removeprefix(f"--min-duration {value!r}: ")
            raise InputError(f"--sweep {args.sweep!r}: {value:g} is not a --min-duration the segmenter takes "
                             f"({why})") from None
    if args.no_sweep:
        values = []
    if args.json:  # before the replay; the data set's folder stands for its splits (the graph is learned from one)
        data = args.data or graph_data
        read = [frames_path, args.graph, args.checker_settings, Path(data) / args.dataset if data else None]
        if args.checker == "probabilistic" and not args.checker_settings:
            read.append(default_settings_path(args.dataset))
        check_output(args.json, "results file", inputs=read, option="--json")
    settings_path = None
    choice: CheckerChoice | None = None
    if args.checker == "probabilistic":
        settings_path = Path(args.checker_settings) if args.checker_settings else default_settings_path(args.dataset)
        choice = load_checker_settings(settings_path).replay
        if choice is None or choice.segmenter is None:
            raise InputError(f"{settings_path}: holds no replay settings (chosen on timed training videos)")
    elif args.checker_settings:
        raise InputError("--checker-settings: give it with --checker probabilistic")
    graph, graph_source = _graph(args, graph_data)
    frames = load_frames_file(frames_path, args.field, graph, args.background)
    fps = f"--fps {args.fps:g}"
    # A video of the file is named with the file, as its reader names it, and the durations by what set them.
    with naming_no_step(frames_path, lambda d: f"--min-duration {d:g}", fps):
        result = replay(frames, graph, config)
    runs = [("binary", result)]
    if choice is not None and choice.segmenter is not None:
        # The segmenter chosen with the checker, at the frame rate and background of this input.
        chosen = replace(choice.segmenter, fps=args.fps, background=args.background)
        with naming_no_step(frames_path, lambda d: f"the min_duration {d:g} s of {settings_path}", fps):
            if chosen != config:
                runs.append((f"binary, {chosen.min_duration:g} s", replay(frames, graph, chosen)))
            result = replay(frames, graph, chosen, ReplayChecker(choice.settings, choice.evidence))
        runs.append((f"probabilistic, {chosen.min_duration:g} s", result))
        config = chosen
    published = None
    if args.field == "pred" and (args.data or args.dataset in frames_path.name):
        published = PUBLISHED[args.dataset]["pred"]["do"][0]
    console.print(
        replay_scores_table(runs, f"Replay of {frames_path.name} ({args.field}), {len(frames)} videos", published)
    )
    base = runs[0][1]
    if choice is not None:
        print(f"probabilistic checker ({settings_path}): prior {choice.settings.prior_skip:g}, threshold "
              f"{choice.settings.alert_threshold:g}, evidence window {choice.evidence.window_s:g} s; rows "
              "'<checker>, N s' run the segmenter with min_duration N s, as chosen with the checker")
    with naming_no_step(frames_path, lambda d: f"the {d:g} s of --sweep {args.sweep!r}", fps):
        rows = sweep(frames, graph, flags, values, base=base) if values else []
    if rows:
        console.print(sweep_table(rows, "min_duration", flags.min_duration))
    if args.json:
        settings = {
            "frames": str(frames_path),
            "field": args.field,
            "graph": graph_source,
            "segmenter": asdict(config),
            "checker": checker_record(args.checker, settings_path, choice),
        }
        document = result_json(result, settings, rows) | {
            "runs": [{"run": label, "metrics": r.metrics.to_dict()} for label, r in runs]}
        out = write_text(args.json, json.dumps(document, indent=2) + "\n", "results file")
        print(f"results written to {out}")  # plain: a path is not rich markup
    return 0
