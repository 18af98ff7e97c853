"""``stream-detect eval --plots DIR``: one timeline per video, to see why an alert was right or wrong.

Three rows over video time: the annotated key-steps (a mistake under either rule outlined in red), the key-steps the
live chain confirmed (paler the less confident), and the alerts (a marker when each was raised, joined to the start
of the step it names, labelled with the step, the pre-conditions it named missing and its probability). An alert
that stands at the end is filled (green when right, red when a false alarm); a retracted one is hollow and grey, its
label says so: it counts for nothing (`streaming.session_verdict`). Each step has its own colour, from a
qualitative palette of 20, and a hatch pattern as well past 20 steps, so that no two steps look alike and colour is
never the only cue: each bar is also labelled with its step where the name fits the bar, and a legend names every
step shown. Needs matplotlib
(the ``plot`` extra).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from graphs.common.errors import extra_import_error, install_extra
from graphs.common.files import save_figure
from graphs.common.safe_text import count_of
from graphs.task_graph import TaskGraph
from streaming.offline.eval_scores import RULES, VideoRun, annotated_mistakes, node_name, video_detail

LEGEND_CHARS: Final = 40  # a legend line's characters; a longer step name goes on, on the next line
LEGEND_LINE_IN: Final = 0.125  # inches a legend line takes at its font size (7 points) with its spacing
ROWS = {"annotated": 2.0, "recognised": 1.0, "alerts": 0.0}
PALETTE = "tab20"  # qualitative: 10 hues, each dark then light; taken dark hues first so neighbours differ most
PALETTE_ORDER = (*range(0, 20, 2), *range(1, 20, 2))
HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "--", "++")  # a new pattern each time the palette comes round
ALERT_COLOURS = {"right": "green", "false alarm": "red", "retracted": "grey"}


def pyplot() -> Any:
    """matplotlib's pyplot drawing to files, or an `InputError` naming the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never a window
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise extra_import_error(err, "matplotlib", "--plots", "--plots needs matplotlib, the optional 'plot' "
                                 f"extra: {install_extra('plot')}") from None
    return plt


def plot_path(folder: str | Path, video: str) -> Path:
    """Where the timeline of ``video`` goes: ``<folder>/<video>.png`` (characters a file name cannot hold become -)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in video)[:120]
    return Path(folder) / f"{safe}.png"


def step_styles(graph: TaskGraph, steps: Sequence[int]) -> dict[int, tuple[Any, str]]:
    """A colour and a hatch pattern per step, by the step's place in the graph (the same step looks the same on every
    video's plot): the palette's 20 colours, then the same colours with a new hatch.

    Args:
        graph: the task graph.
        steps: the steps to style (ids; one the graph does not know comes after its steps).

    Returns:
        step id -> (RGBA colour, matplotlib hatch).
    """
    cmap = pyplot().get_cmap(PALETTE)
    order = {step: k for k, step in enumerate(graph.step_ids)}
    ranked = sorted(set(steps), key=lambda s: (order.get(s, len(order)), s))
    places = {step: order.get(step, len(order) + k) for k, step in enumerate(ranked)}
    size = len(PALETTE_ORDER)
    return {step: (cmap(PALETTE_ORDER[k % size]), HATCHES[(k // size) % len(HATCHES)]) for step, k in places.items()}


def timeline_figure(run: VideoRun, graph: TaskGraph) -> Any:
    """One video's timeline (see the module docstring) as a matplotlib figure; the caller saves and closes it.

    Args:
        run: what the live chain did on the video.
        graph: the task graph (step names, and which annotated steps are mistakes).

    Returns:
        The figure.
    """
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    detail = video_detail(run, graph)
    mistakes = annotated_mistakes(graph, run.annotated)
    steps = sorted({s.step for s in run.annotated} | {s.step for s in run.recognised})
    styles = step_styles(graph, steps)
    end = max([s.end for s in run.annotated] + [s.end for s in run.recognised] + [a.raised for a in run.alerts]
              + [1.0])
    names = {s: "\n".join(textwrap.wrap(node_name(graph, s), LEGEND_CHARS) or [""]) for s in styles}
    # Tall enough for the legend: a line of it about LEGEND_LINE_IN inches, its entries spaced, its title and the
    # five entries of mistakes and alerts.
    legend_lines = sum(name.count("\n") + 1.5 for name in names.values()) + 8
    # An alert's label of several lines needs that much more room under the alerts' row.
    labels = [alert_label(item) for item in detail["alerts"]]
    label_lines = max([label.count("\n") - 1 for label in labels] + [0])
    fig, ax = plt.subplots(figsize=(max(8.0, min(24.0, end / 4)) + 2.5,
                                    max(3.6 + LEGEND_LINE_IN * 2 * label_lines, LEGEND_LINE_IN * legend_lines + 0.6)))
    bar_labels: list[tuple[Any, float, float]] = []  # each bar's step name, and the bar's span
    alert_labels: list[Any] = []
    for k, segment in enumerate(run.annotated):
        wrong = any(mistakes[rule][k] for rule in RULES)
        colour, hatch = styles[segment.step]
        ax.broken_barh([(segment.start, segment.end - segment.start)], (ROWS["annotated"] - 0.35, 0.7),
                       facecolors=colour, hatch=hatch, edgecolors="red" if wrong else "none",
                       linewidth=2.0 if wrong else 0.0)
        bar_labels.append((ax.text((segment.start + segment.end) / 2, ROWS["annotated"],
                                   node_name(graph, segment.step), ha="center", va="center", fontsize=7,
                                   clip_on=True), segment.start, segment.end))
    for item in detail["recognised"]:
        colour, hatch = styles[item["step"]]
        alpha = 0.35 + 0.65 * (item["confidence"] if item["confidence"] is not None else 1.0)
        ax.broken_barh([(item["start"], item["end"] - item["start"])], (ROWS["recognised"] - 0.35, 0.7),
                       facecolors=colour, hatch=hatch, alpha=alpha)
        bar_labels.append((ax.text((item["start"] + item["end"]) / 2, ROWS["recognised"], item["name"], ha="center",
                                   va="center", fontsize=7, clip_on=True), item["start"], item["end"]))
    for item, label in zip(detail["alerts"], labels, strict=True):
        kind = "retracted" if item["retracted"] else ("right" if any(item["right"].values()) else "false alarm")
        colour = ALERT_COLOURS[kind]
        ax.plot([item["video_time"], item["raised"]], [ROWS["recognised"], ROWS["alerts"]], color=colour,
                linestyle=":", linewidth=1.0)
        ax.plot(item["raised"], ROWS["alerts"], marker="v", markersize=9, color=colour,
                markerfacecolor="none" if item["retracted"] else colour, markeredgewidth=1.5)
        alert_labels.append(ax.text(item["raised"], ROWS["alerts"] - 0.3, label, ha="center", va="top", fontsize=7,
                                    color=colour))
    ax.set_yticks(list(ROWS.values()), list(ROWS))
    ax.set_ylim(-1.2, 2.6)
    ax.set_xlim(0, end * 1.02)
    ax.set_xlabel("video time (s)")
    standing = sum(not a["retracted"] for a in detail["alerts"])
    retracted = len(detail["alerts"]) - standing
    ax.set_title(f"{run.video}: {count_of(standing, 'alert')} standing at the end, {retracted} retracted, "
                 f"{count_of(len(detail['missed']), 'mistake')} missed", fontsize=9)
    # A sentence of a name (CaptainCook4D's) on one legend line made the legend most of the picture.
    handles: list[Any] = [Patch(facecolor=styles[s][0], hatch=styles[s][1], label=names[s]) for s in styles]
    handles.append(Patch(facecolor="white", edgecolor="red", linewidth=2.0, label="annotated mistake"))
    handles += [Line2D([], [], marker="v", linestyle="none", color=ALERT_COLOURS[kind], markersize=8,
                       markerfacecolor="none" if kind == "retracted" else ALERT_COLOURS[kind],
                       label=f"alert: {kind}" if kind != "retracted" else "alert retracted (counts for nothing)")
                for kind in ALERT_COLOURS]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False,
              title="steps and alerts", title_fontsize=7)
    fig.tight_layout()
    _drop_labels_wider_than_their_bars(fig, ax, bar_labels)
    _keep_labels_inside_the_plot(fig, ax, alert_labels)
    return fig


def alert_label(item: Mapping[str, Any]) -> str:
    """An alert's label under its marker: the step before its missing pre-conditions (wrapped to legend lines: a
    CaptainCook4D step is a sentence), then its probability and whether it was retracted.

    Args:
        item: one alert of `video_detail` (``name``, ``missing_names``, ``probability``, ``retracted``).
    """
    missing = ", ".join(item["missing_names"])
    label = f"{item['name']} before {missing}" if missing else item["name"]
    wrapped = "\n".join(textwrap.wrap(label, LEGEND_CHARS) or [""])
    return wrapped + f"\nP {item['probability']:.2f}" + (" (retracted)" if item["retracted"] else "")


def _keep_labels_inside_the_plot(fig: Any, ax: Any, labels: Sequence[Any]) -> None:
    """Align an alert's label to the side of its marker that has room: centred under an alert near either end of the
    video, a long label ran past the plot's edge, over the legend or off the picture."""
    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    # Room under the alerts' row for the tallest label: lower the plot's floor so that, once the data units are
    # rescaled, that label's height fits between its top and the floor (k: its share of the plot's height).
    tallest = max([text.get_window_extent(renderer).height for text in labels] + [0.0])
    k = min(0.75, (tallest + 4.0) / inside.height)
    top = ROWS["alerts"] - 0.3
    low, high = ax.get_ylim()
    ax.set_ylim(min(low, (top - high * k) / (1.0 - k)), high)
    for text in labels:
        extent = text.get_window_extent(renderer)
        if extent.x1 > inside.x1:
            text.set_horizontalalignment("right")
        elif extent.x0 < inside.x0:
            text.set_horizontalalignment("left")


def _drop_labels_wider_than_their_bars(fig: Any, ax: Any, labels: Sequence[tuple[Any, float, float]]) -> None:
    """Remove each bar's name that is wider than its bar: long names drawn over their neighbours were a black smear
    (the legend names every step by its colour)."""
    renderer = fig.canvas.get_renderer()
    for text, start, end in labels:
        left, right = ax.transData.transform([(start, 0.0), (end, 0.0)])[:, 0]
        if text.get_window_extent(renderer).width > right - left:
            text.remove()


def draw_timeline(run: VideoRun, graph: TaskGraph, path: str | Path) -> None:
    """Draw one video's timeline (see the module docstring) to a PNG file, written atomically.

    Args:
        run: what the live chain did on the video.
        graph: the task graph (step names, and which annotated steps are mistakes).
        path: the PNG file.
    """
    plt = pyplot()
    fig = timeline_figure(run, graph)
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
