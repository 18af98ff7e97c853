"""``stream-detect eval --plots DIR``: one timeline per video, to see why an alert was right or wrong.

Three rows over video time: the annotated key-steps (a mistake under either rule outlined in red), the key-steps the
live chain confirmed (paler the less confident), and the alerts (a marker when each was raised, joined to the start
of the step it names; green when right, red when a false alarm, grey when retracted). Needs matplotlib (the ``plot``
extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphs.common.errors import InputError, install_extra
from graphs.common.files import save_figure
from graphs.task_graph import TaskGraph
from streaming.offline.eval_scores import RULES, VideoRun, annotated_mistakes, node_name, video_detail

ROWS = {"annotated": 2.0, "recognised": 1.0, "alerts": 0.0}


def pyplot() -> Any:
    """matplotlib's pyplot drawing to files, or an `InputError` naming the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never a window
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError(f"--plots needs matplotlib, the optional 'plot' extra: {install_extra('plot')}") from None
    return plt


def plot_path(folder: str | Path, video: str) -> Path:
    """Where the timeline of ``video`` goes: ``<folder>/<video>.png`` (characters a file name cannot hold become -)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in video)[:120]
    return Path(folder) / f"{safe}.png"


def draw_timeline(run: VideoRun, graph: TaskGraph, path: str | Path) -> None:
    """Draw one video's timeline (see the module docstring) to a PNG file, written atomically.

    Args:
        run: what the live chain did on the video.
        graph: the task graph (step names, and which annotated steps are mistakes).
        path: the PNG file.
    """
    plt = pyplot()
    detail = video_detail(run, graph)
    mistakes = annotated_mistakes(graph, run.annotated)
    steps = sorted({s.step for s in run.annotated} | {s.step for s in run.recognised})
    colours = {step: plt.get_cmap("tab20")(k % 20) for k, step in enumerate(steps)}
    end = max([s.end for s in run.annotated] + [s.end for s in run.recognised] + [a.raised for a in run.alerts]
              + [1.0])
    fig, ax = plt.subplots(figsize=(max(8.0, min(24.0, end / 4)), 3.2))
    for k, segment in enumerate(run.annotated):
        wrong = any(mistakes[rule][k] for rule in RULES)
        ax.broken_barh([(segment.start, segment.end - segment.start)], (ROWS["annotated"] - 0.35, 0.7),
                       facecolors=colours[segment.step], edgecolors="red" if wrong else "none",
                       linewidth=2.0 if wrong else 0.0)
        ax.text((segment.start + segment.end) / 2, ROWS["annotated"], node_name(graph, segment.step),
                ha="center", va="center", fontsize=7, clip_on=True)
    for item in detail["recognised"]:
        alpha = 0.35 + 0.65 * (item["confidence"] if item["confidence"] is not None else 1.0)
        ax.broken_barh([(item["start"], item["end"] - item["start"])], (ROWS["recognised"] - 0.35, 0.7),
                       facecolors=colours[item["step"]], alpha=alpha)
    for item in detail["alerts"]:
        right = any(item["right"].values())
        colour = "grey" if item["retracted"] else ("green" if right else "red")
        ax.plot([item["video_time"], item["raised"]], [ROWS["recognised"], ROWS["alerts"]], color=colour,
                linestyle=":", linewidth=1.0)
        ax.plot(item["raised"], ROWS["alerts"], marker="v", color=colour, markersize=9)
        ax.text(item["raised"], ROWS["alerts"] - 0.3, f"{item['name']} {item['probability']:.2f}", ha="center",
                va="top", fontsize=7, color=colour)
    ax.set_yticks(list(ROWS.values()), list(ROWS))
    ax.set_ylim(-0.9, 2.6)
    ax.set_xlim(0, end * 1.02)
    ax.set_xlabel("video time (s)")
    ax.set_title(f"{run.video}: {len(detail['alerts'])} alerts, {len(detail['missed'])} mistakes missed", fontsize=9)
    fig.tight_layout()
    try:
        save_figure(fig, path, "timeline plot", dpi=100, option="--plots")
    finally:
        plt.close(fig)


def draw_timelines(runs: Sequence[VideoRun], graph: TaskGraph, folder: str | Path) -> list[Path]:
    """One timeline per video into ``folder`` (which must exist); returns the files written."""
    paths = [plot_path(folder, run.video) for run in runs]
    for run, path in zip(runs, paths, strict=True):
        draw_timeline(run, graph, path)
    return paths
