"""Alert quality on camera-like footage: the README's "Your own procedure" walkthrough, run end to end and scored.

Usage::

    python benchmarks/alert_quality.py                                   # generate footage, train, evaluate
    python benchmarks/alert_quality.py --footage /work/data/hard --work runs/hard
    python benchmarks/alert_quality.py --footage DIR --checkers binary,probabilistic --train-seeds 0,1,2

The stages, each a command a user types (the console scripts of this environment), timed:

1. ``python -m tests.hard_procedure_videos`` writes the footage (skipped with ``--footage``: a folder with
   ``videos/``, ``labels.json`` and ``split.json``, whose ``test`` videos are the held-out ones);
2. ``tgml train`` learns the task graph from the training videos (``--exclude-videos`` the held-out ones; videos with
   a ``has_errors`` segment are left out by ``tgml train`` itself);
3. ``recognition-features --extractor efficientnet-lite0 --fps 5 --test-videos <held-out>``;
4. ``recognition-train`` (once per ``--train-seeds`` seed);
5. ``stream-detect eval --split features/split.json --json ...`` on the held-out videos, once per checker of
   ``--checkers`` (names of the checker table, `graphs.checker_settings.CHECKERS`) and per detector, each with its
   ``--checker NAME``, and with ``--default-rates`` where the checker weighs the detector's evidence (its entry says
   so) and the detector holds no measured miss and false-detection rates.

Printed: the time of each stage; how many of the true pre-conditions the learned graph holds (when the footage is
this project's generated procedure); then per checker, side by side: per-frame test mAP (the detector's, from its
checkpoint), the mistakes to find, alerts raised, correct ones, mistake precision / recall / F1 (graph rule: a step
done before its pre-conditions under the learned graph; and the annotation rule: segments marked ``has_errors``),
false alarms per video (standing alerts that were not correct, over the held-out videos; a retracted alert counts
for nothing), alert latency (median, p90; seconds from the mistaken step's annotated start to its first correct alert),
retractions, and key-step recognition (F1@50, edit). With several training seeds, each figure is the mean and the
standard deviation over seeds.

Everything lands in ``--work`` (default: a new temporary folder, kept and named at the end): ``footage/``,
``graph.json``, ``features/``, ``detector-seed<S>.pt``, ``eval-<checker>-seed<S>.json``, ``logs/<stage>.log``,
``cache/`` (``$MISTAKE_CACHE`` of the eval runs, so each run of this script scores its own detectors afresh) and,
with ``--json``, the figures. ``--reuse`` keeps a graph, features and detectors already in ``--work``.

A stage that fails prints the end of its log and the script exits with status 1: on this footage that is a finding
about the pipeline, not about the script. Bad options end with one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from graphs.checker_settings import CHECKERS
from graphs.common.command_line import ArgumentParser
from graphs.common.errors import exit_on_input_error
from graphs.common.options import fps_option, seed_option, threads_option
from graphs.common.settings_files import COUNT, Bound, bounded_option

ROOT = Path(__file__).resolve().parent.parent
# The PREGO protocol's checker, which this benchmark has always scored first (the product's default is another:
# `graphs.checker_settings.DEFAULT_CHECKER`, so every eval run is told its checker).
DEFAULT_CHECKER = "binary"
RULES = {"graph": "graph rule", "has_errors": "has_errors rule"}


def fail(message: str) -> NoReturn:
    """Bad input: one ``error:`` line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


class StageFailed(Exception):
    """A walkthrough command ended with a non-zero status."""


@dataclass
class Stages:
    """Runs the walkthrough's commands, logs each one's output and keeps its wall time."""

    work: Path
    env: dict[str, str]
    times: list[tuple[str, float]] = field(default_factory=list)

    def run(self, name: str, command: Sequence[str]) -> str:
        """Run ``command`` from the repository root; return its stdout. Raises `StageFailed` on a non-zero exit."""
        log = self.work / "logs" / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"[{name}] {' '.join(command)}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        result = subprocess.run(list(command), cwd=ROOT, env=self.env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        log.write_text(f"$ {' '.join(command)}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
                       f"\n--- exit {result.returncode} after {seconds:.1f} s\n")  # fmt: skip
        self.times.append((name, seconds))
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise StageFailed(f"{name} failed with exit status {result.returncode} after {seconds:.0f} s "
                              f"(log: {log}):\n{tail}")  # fmt: skip
        return result.stdout


def console_script(name: str) -> str:
    """The console script ``name`` of this Python environment (the commands a user types after ``pip install``)."""
    here = Path(sys.executable).parent
    found = shutil.which(name, path=f"{here}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        fail(f'the command {name!r} is not installed next to {sys.executable} (pip install -e ".[dev]")')
    return found


def _names(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{value!r}: give names separated by commas")
    return names


def _seeds(value: str) -> list[int]:
    try:
        return [int(x) for x in _names(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: give integer seeds separated by commas") from None


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    p = ArgumentParser(prog="alert_quality.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--footage", help="existing footage folder (videos/, labels.json, split.json): skip generation")
    p.add_argument("--work", help="folder for every output (default: a new temporary folder, kept)")
    p.add_argument("--seed", type=seed_option, default=0, help="footage seed when generating (default 0)")
    p.add_argument("--videos", type=bounded_option(Bound(2, COUNT.high)), default=20,
                   help="executions when generating (default 20)")
    p.add_argument("--size", default="640x480", help="frame size when generating (default 640x480)")
    p.add_argument("--fps", type=fps_option, default=15.0, help="frame rate when generating (default 15)")
    p.add_argument("--scenario", help="scenario of the annotation file (default: its only one)")
    p.add_argument("--clean", action="store_true",
                   help="generate the footage without camera motion, light changes, noise, blur or JPEG")
    p.add_argument("--feature-fps", type=fps_option, default=5.0,
                   help="recognition-features --fps (default 5, as the README)")
    p.add_argument("--train-seeds", type=_seeds, default=None,
                   help="recognition-train --seed, one detector per seed (default: the config's seed)")  # fmt: skip
    p.add_argument("--checkers", type=_names, default=[DEFAULT_CHECKER],
                   help=f"checkers to compare, comma-separated, of {', '.join(CHECKERS)} (default {DEFAULT_CHECKER})")
    p.add_argument("--alert-on", default=None, help="stream-detect eval --alert-on (default: eval's default)")
    p.add_argument("--threads", type=threads_option, default=None,
                   help="--threads for features and training (default: theirs)")
    p.add_argument("--reuse", action="store_true", help="keep the graph, features and detectors found in --work")
    p.add_argument("--json", dest="json_out", help="also write every figure to this JSON file")
    return p


def check_options(args: argparse.Namespace) -> None:
    """One ``error:`` line (exit 2) for a bad option, before anything runs."""
    unknown = [c for c in args.checkers if c not in CHECKERS]
    if unknown:
        fail(f"--checkers: unknown checker {unknown[0]!r} (known: {', '.join(CHECKERS)})")
    if args.footage is not None:
        folder = Path(args.footage)
        for part in ("videos", "labels.json", "split.json"):
            if not (folder / part).exists():
                fail(f"--footage {folder}: no {part} there (python -m tests.hard_procedure_videos writes one)")
        held_out(folder)
        if args.scenario is None:
            only_scenario(folder / "labels.json")


def held_out(footage: Path) -> list[str]:
    """The ``test`` videos of the footage's split.json."""
    path = footage / "split.json"
    try:
        split = json.loads(path.read_text())
        test = split["test"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        fail(f"{path}: cannot read its 'test' list ({err})")
    if not isinstance(test, list) or not test or not all(isinstance(n, str) for n in test):
        fail(f"{path}: 'test' must be a non-empty list of video names")
    return test


def only_scenario(labels: Path) -> str:
    """The one scenario of an annotation file's taxonomy (``tgml train`` needs it named)."""
    try:
        scenarios = sorted(json.loads(labels.read_text())["taxonomy"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        fail(f"{labels}: cannot read its taxonomy ({err})")
    if len(scenarios) != 1:
        listed = ", ".join(scenarios)
        fail(f"{labels}: {len(scenarios)} scenarios ({listed}): name one with --scenario")
    return scenarios[0]


def graph_recall(graph_path: Path, labels: Path, scenario: str | None) -> str | None:
    """How many of the generated procedure's pre-conditions the learned graph holds, and how many it adds."""
    if str(ROOT) not in sys.path:  # the generator lives in the test tree of the checkout, not in the package
        sys.path.insert(0, str(ROOT))
    from graphs.task_graph import load_graph
    from tests.hard_procedure_videos import PRECONDITIONS, SCENARIO, STEPS

    taxonomy = json.loads(labels.read_text()).get("taxonomy", {})
    names = {int(k): v.get("name") for k, v in taxonomy.get(scenario or SCENARIO, {}).items()}
    if names != STEPS:
        return None  # not this project's generated procedure: no ground truth to compare with
    graph = load_graph(graph_path)
    true = {(p, s) for s, pre in PRECONDITIONS.items() for p in pre}
    learned = {(p, s) for s in STEPS for p in graph.preconditions(s) if p in STEPS}
    return (f"{len(true & learned)} of {len(true)} pre-conditions learned, {len(learned - true)} extra "
            f"(AND steps: {', '.join(STEPS[s] for s, pre in PRECONDITIONS.items() if len(pre) > 1)})")  # fmt: skip


def detector_info(detector: Path) -> tuple[float | None, bool]:
    """The per-frame test mAP (0..1) recognition-train stored in the checkpoint, and whether it holds measured
    miss and false-detection rates (the evidence a probabilistic checker weighs)."""
    from recognition.checkpoint import load_detector

    checkpoint = load_detector(detector)[1]
    value = checkpoint.info.get("test_map")
    return (float(value) if isinstance(value, int | float) else None), checkpoint.evidence is not None


def figures(eval_json: Path, mean_ap: float | None) -> dict[str, Any]:
    """The benchmark's figures from one ``stream-detect eval --json`` file."""
    data = json.loads(eval_json.read_text())
    total = data["total"]
    videos = len(data["videos"])
    out: dict[str, Any] = {"videos": videos, "map": None if mean_ap is None else 100 * mean_ap}
    for rule in RULES:
        counts = total["mistakes"][rule]
        out[rule] = {
            "mistakes": counts["mistakes"],
            "alerts": counts["alerts"],
            "correct": counts["correct"],
            "precision": _pct(counts["precision"]),
            "recall": _pct(counts["recall"]),
            "f1": _pct(counts["f1"]),
            "false_alarms_per_video": (counts["alerts"] - counts["correct"]) / videos if videos else None,
        }
    out["latency_median"] = total["latency_s"]["median"]
    out["latency_p90"] = total["latency_s"]["p90"]
    out["retracted"] = total["retracted"]
    out["f1_50"] = _pct(total["segment_f1"].get("0.5"))
    out["edit"] = total["edit"]
    return out


def _pct(x: float | None) -> float | None:
    return None if x is None else 100 * x


ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("per-frame test mAP", ("map",), "{:.1f}"),
    ("mistakes to find", ("graph", "mistakes"), "{:.0f}"),
    ("alerts raised", ("graph", "alerts"), "{:.1f}"),
    ("correct alerts", ("graph", "correct"), "{:.1f}"),
    ("mistake precision", ("graph", "precision"), "{:.1f}"),
    ("mistake recall", ("graph", "recall"), "{:.1f}"),
    ("mistake F1", ("graph", "f1"), "{:.1f}"),
    ("false alarms / video", ("graph", "false_alarms_per_video"), "{:.2f}"),
    ("alert latency median (s)", ("latency_median",), "{:.2f}"),
    ("alert latency p90 (s)", ("latency_p90",), "{:.2f}"),
    ("retracted alerts", ("retracted",), "{:.1f}"),
    ("precision err (has_errors rule)", ("has_errors", "precision"), "{:.1f}"),
    ("recall err (has_errors rule)", ("has_errors", "recall"), "{:.1f}"),
    ("F1 err (has_errors rule)", ("has_errors", "f1"), "{:.1f}"),
    ("false alarms / video err", ("has_errors", "false_alarms_per_video"), "{:.2f}"),
    ("key-step F1@50", ("f1_50",), "{:.1f}"),
    ("key-step edit", ("edit",), "{:.1f}"),
)


def _get(fig: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = fig
    for key in path:
        value = value[key]
    return value


def _cell(runs: Sequence[dict[str, Any]], path: tuple[str, ...], fmt: str) -> str:
    """One figure over training seeds: the value, or mean +- sd; ``-`` when not measured."""
    values = [v for v in (_get(r, path) for r in runs) if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        shown = str(values[0]) if isinstance(values[0], int) else fmt.format(values[0])
        return shown if len(runs) == 1 else f"{shown} (1 of {len(runs)})"
    return f"{fmt.format(statistics.mean(values))} ± {fmt.format(statistics.stdev(values))}" + (
        "" if len(values) == len(runs) else f" ({len(values)} of {len(runs)})")


def print_report(stages: Stages, results: dict[str, list[dict[str, Any]]], graph_line: str | None) -> None:
    """The stage times, then the figures of each checker side by side."""
    print("\nstage                                    seconds")
    for name, seconds in stages.times:
        print(f"{name:<40} {seconds:8.1f}")
    if graph_line:
        print(f"\nlearned graph: {graph_line}")
    checkers = list(results)
    seeds = len(next(iter(results.values())))
    videos = next(iter(results.values()))[0]["videos"]
    header = f"\n{'held-out videos: ' + str(videos) + (f', {seeds} detector seeds' if seeds > 1 else ''):<36}"
    print(header + "".join(f"{c:>22}" for c in checkers))
    for label, path, fmt in ROWS:
        print(f"{label:<36}" + "".join(f"{_cell(results[c], path, fmt):>22}" for c in checkers))
    assumed = [c for c in checkers if any(r["default_rates"] for r in results[c])]
    if assumed:
        print(f"{', '.join(assumed)}: the detector holds no measured miss and false-detection rates; "
              "stream-detect eval ran with --default-rates")


@exit_on_input_error
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    args = build_parser().parse_args(argv)
    check_options(args)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="alert-quality-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MISTAKE_CACHE=str(work / "cache"))
    stages = Stages(work, env)
    py = sys.executable
    try:
        if args.footage is None:
            footage = work / "footage"
            if not (args.reuse and (footage / "split.json").exists()):
                stages.run("generate footage", [py, "-m", "tests.hard_procedure_videos", str(footage), "--seed",
                                                str(args.seed), "--videos", str(args.videos), "--size", args.size,
                                                "--fps", f"{args.fps:g}",
                                                *(["--clean"] if args.clean else [])])  # fmt: skip
        else:
            footage = Path(args.footage).resolve()
        labels, videos = footage / "labels.json", footage / "videos"
        test = held_out(footage)
        scenario = ["--scenario", args.scenario or only_scenario(labels)]
        threads = ["--threads", str(args.threads)] if args.threads else []
        graph = work / "graph.json"
        if not (args.reuse and graph.exists()):
            stages.run("tgml train", [console_script("tgml"), "train", "--annotations", str(labels), *scenario,
                                      "--exclude-videos", ",".join(test), "--out", str(graph)])  # fmt: skip
        features = work / "features"
        stages.run("recognition-features", [
            console_script("recognition-features"), "--videos", str(videos), "--annotations", str(labels), *scenario,
            "--extractor", "efficientnet-lite0", "--fps", f"{args.feature_fps:g}", "--out", str(features),
            "--test-videos", ",".join(test), "--quiet", *threads])  # fmt: skip
        detectors: list[tuple[str, Path]] = []
        for seed in args.train_seeds or [None]:
            tag = "default" if seed is None else str(seed)
            detector = work / f"detector-seed{tag}.pt"
            if not (args.reuse and detector.exists()):
                seeded = [] if seed is None else ["--seed", str(seed)]
                stages.run(f"recognition-train (seed {tag})", [
                    console_script("recognition-train"), "--features", str(features), "--out", str(detector),
                    "--quiet", *seeded, *threads])  # fmt: skip
            detectors.append((tag, detector))
        results: dict[str, list[dict[str, Any]]] = {c: [] for c in args.checkers}
        alert_on = ["--alert-on", args.alert_on] if args.alert_on else []
        for tag, detector in detectors:
            mean_ap, measured = detector_info(detector)
            for checker in args.checkers:
                out = work / f"eval-{checker}-seed{tag}.json"
                # A checker that weighs evidence runs on eval's stated rates when the detector has none measured.
                assumed = CHECKERS[checker].weighs_evidence and not measured
                stages.run(f"stream-detect eval {checker} (seed {tag})", [
                    console_script("stream-detect"), "eval", "--videos", str(videos), "--annotations", str(labels),
                    "--graph", str(graph), "--detector", str(detector), "--split", str(features / "split.json"),
                    "--json", str(out), "--quiet", *alert_on, "--checker", checker,
                    *(["--default-rates"] if assumed else [])])  # fmt: skip
                results[checker].append(figures(out, mean_ap) | {"detector_seed": tag, "default_rates": assumed})
    except StageFailed as failed:
        print(f"\n{failed}", file=sys.stderr)
        print_times = "\n".join(f"  {n}: {s:.1f} s" for n, s in stages.times)
        print(f"stages run:\n{print_times}\nwork folder: {work}", file=sys.stderr)
        return 1
    graph_line = graph_recall(graph, labels, args.scenario)
    print_report(stages, results, graph_line)
    print(f"\nwork folder: {work}")
    if args.json_out:
        payload = {"footage": str(footage), "work": str(work), "held_out": test, "graph": graph_line,
                   "stage_seconds": dict(stages.times), "checkers": results}  # fmt: skip
        Path(args.json_out).write_text(json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
