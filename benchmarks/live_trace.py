"""Where the live chain's order-mistake recall is lost and where its alerts come from, on a `tgml bench-live` run.

Usage::

    tgml bench-live --data ../shared/data --json live.json
    python benchmarks/live_trace.py live.json --data ../shared/data

Two tables, read from the run's JSON (every recording's recognised steps and alerts) and the annotation:

- **recall**: every performed step the annotators tagged Order Error, traced through the chain. Whether the
  hand-made graph can see it at all (one of its pre-conditions, START aside, was not begun before the step: what a
  checker with perfect recognition on that graph would flag), whether the detector recognised the step while it was
  done (a recognised segment overlapping its annotated interval) or already before it began, whether each broken
  pre-condition was nevertheless recognised before the step began (a checker trusting recognition then has no
  reason to alert), and whether an alert named the step (what the benchmark scores).
- **alerts**: every alert not retracted, by what was true at its time: right (the step is tagged Order Error); a
  step never performed; a step recognised well before it was done (more than `EARLY_S` before its annotated start);
  a step done then whose named pre-conditions were all done before it (the pre-condition was not recognised, or
  recognised but not believed); a real deviation the annotators did not tag (a named pre-condition not yet done).

The hand-made graphs stand in for the folds' learned ones (the JSON does not keep those), so the recall table says
what a perfect recogniser would give on the hand-made graphs, not the learned-graph ceiling that `tgml bench-live`
prints as "annotated steps, learned graph".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Final

from graphs.common.errors import InputError
from graphs.task_graph import TaskGraph
from tgml.bench.error_annotations import ErrorRecording, PerformedStep
from tgml.bench.live.recordings import load_live_data

EARLY_S: Final = 30.0  # an alert this long before the step's annotated start is an early recognition


def broken_preconditions(step: PerformedStep, annotation: ErrorRecording, graph: TaskGraph) -> list[str]:
    """The hand-made graph's pre-conditions of ``step`` (START aside) not begun before it, by name."""
    begun = {p.step: p.start for p in annotation.performed}
    pre = graph.preconditions(step.step) if step.step in graph.nodes else frozenset()
    return [graph.name_of(p) for p in pre if p != "START" and (p not in begun or begun[p] > step.start)]


def recall_trace(recording: dict[str, Any], annotation: ErrorRecording, graph: TaskGraph) -> list[tuple[str, ...]]:
    """One row of labels per performed step tagged Order Error (see the module docstring)."""
    recognised = recording["recognised"]
    alerted = {a["step"] for a in recording["alerts"] if not a["retracted"]}
    rows: list[tuple[str, ...]] = []
    for step in annotation.performed:
        if not step.order_error:
            continue
        broken = broken_preconditions(step, annotation, graph)
        mine = [s for s in recognised if s["step"] == step.name]
        end = step.end if step.end >= 0 else step.start
        during = any(s["start"] <= end and s["end"] >= step.start for s in mine)
        before = any(s["end"] < step.start for s in mine)
        seen_pre = broken and all(any(s["step"] == p and s["start"] < step.start for s in recognised) for p in broken)
        rows.append((
            "the graph sees it" if broken else "no pre-condition of the graph broken",
            "recognised while done" if during else "not recognised while done",
            "also recognised before it began" if before else "",
            "every broken pre-condition recognised before it" if seen_pre else "",
            "ALERTED" if step.name in alerted else "quiet",
        ))
    return rows


def alert_sources(recording: dict[str, Any], annotation: ErrorRecording) -> list[str]:
    """What was true at each alert of the recording that was not retracted (see the module docstring)."""
    performed = {p.name: p for p in annotation.performed}
    kinds = []
    for alert in recording["alerts"]:
        if alert["retracted"]:
            continue
        step = performed.get(alert["step"])
        if step is not None and step.order_error:
            kinds.append("right: the step is tagged Order Error")
        elif step is None:
            kinds.append("the step was never performed")
        elif alert["time"] < step.start - EARLY_S:
            kinds.append(f"the step recognised more than {EARLY_S:g} s before it was done")
        elif all(m in performed and performed[m].start < alert["time"] for m in alert["missing"]):
            recognised = {s["step"] for s in recording["recognised"] if s["end"] < alert["time"]}
            seen = any(m in recognised for m in alert["missing"])
            kinds.append("its named pre-conditions were done before it: "
                         + ("one was recognised, not believed" if seen else "none was recognised"))
        else:
            kinds.append("a real deviation from the graph the annotators did not tag")
    return kinds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the JSON of `tgml bench-live --json`")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("MISTAKE_DATA", "../shared/data")),
                        help="the data folder the run read (default $MISTAKE_DATA or ../shared/data)")
    parser.add_argument("--features", type=Path, default=None, help="the features folder, if not the default")
    args = parser.parse_args(argv)
    try:
        try:
            run = json.loads(args.run.read_text())
            recordings = run["recordings"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise InputError(f"{args.run}: not the JSON of `tgml bench-live --json` ({err})") from None
        data = load_live_data(args.data, args.features)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    by_id = {r.recording_id: r for r in data.recordings}
    recall: Counter[tuple[str, ...]] = Counter()
    sources: Counter[str] = Counter()
    try:
        for recording in recordings:
            live = by_id.get(recording["recording_id"])
            if live is None:
                # The run's own folder is in its JSON: a run on --features mine/ traced against the data set's
                # folder stopped here without saying which folder to give.
                read = run.get("settings", {}).get("features_dir") if isinstance(run, dict) else None
                hint = (f" (the run read {read}: give it with --features)"
                        if isinstance(read, str) and Path(read).resolve() != data.features_dir.resolve() else "")
                raise InputError(f"{args.run}: recording {recording['recording_id']!r} is not in "
                                 f"{data.features_dir}{hint}")
            recall.update(recall_trace(recording, live.annotation, data.recipes[live.recipe].ground_truth))
            sources.update(alert_sources(recording, live.annotation))
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (KeyError, TypeError) as err:  # an edited or cut file: a traceback named no file
        what = f"an entry without key {err}" if isinstance(err, KeyError) else str(err)
        print(f"error: {args.run}: not the JSON of `tgml bench-live --json` ({what})", file=sys.stderr)
        return 2
    print(f"Order Error steps, traced ({sum(recall.values())}; hand-made graphs):")
    for labels, count in sorted(recall.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{count:5d}  " + "; ".join(label for label in labels if label))
    print(f"\nAlerts by what was true at their time ({sum(sources.values())}):")
    for kind, count in sources.most_common():
        print(f"{count:5d}  {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
