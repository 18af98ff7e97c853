"""``stream-detect eval --plots``: each timeline tells steps apart and says which alerts were taken back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from graphs.task_graph import END, START, TaskGraph
from recognition.segment_metrics import TimedSegment
from streaming.offline.eval_plots import pyplot, step_styles, timeline_figure
from streaming.offline.eval_scores import AnnotatedSegment, RaisedAlert, VideoRun
from tests.streaming.helpers import tea_graph

FILL, BOIL, GET_CUP, TEABAG, POUR = 1, 2, 3, 4, 5
ANNOTATED = (AnnotatedSegment(GET_CUP, 0.0, 3.0), AnnotatedSegment(BOIL, 3.5, 6.0), AnnotatedSegment(FILL, 6.5, 9.0),
             AnnotatedSegment(TEABAG, 9.5, 12.0), AnnotatedSegment(POUR, 12.5, 15.0))  # fmt: skip
RECOGNISED = tuple(TimedSegment(s.step, s.start + 0.1, s.end) for s in ANNOTATED)
ALERTS = (
    RaisedAlert(BOIL, 3.6, 6.0, raised=4.0, retracted=True, missing=(FILL,), probability=0.98),  # taken back
    RaisedAlert(POUR, 12.6, 15.0, raised=15.2, missing=(BOIL,), probability=0.7),  # a false alarm that stands
)


@pytest.fixture
def figure() -> Iterator[Any]:
    fig = timeline_figure(VideoRun("v", ANNOTATED, RECOGNISED, ALERTS, 75, (0.9,) * 5), tea_graph())
    yield fig
    pyplot().close(fig)


def test_the_legend_names_every_step_shown_and_what_a_hollow_alert_means(figure: Any) -> None:
    (ax,) = figure.axes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:5] == ["fill_kettle", "boil_water", "get_cup", "add_teabag", "pour_water"]  # graph order
    assert {"annotated mistake", "alert: right", "alert: false alarm",
            "alert retracted (counts for nothing)"} <= set(legend)  # fmt: skip
    assert ax.get_title() == "v: 1 alert standing at the end, 1 retracted, 1 mistake missed"


def test_alert_labels_name_the_missing_pre_condition_and_a_retracted_one_is_hollow(figure: Any) -> None:
    (ax,) = figure.axes
    labels = [t.get_text() for t in ax.texts]
    assert "boil_water before fill_kettle\nP 0.98 (retracted)" in labels
    assert "pour_water before boil_water\nP 0.70" in labels
    markers = {line.get_xdata()[0]: line.get_markerfacecolor() for line in ax.lines if line.get_marker() == "v"}
    assert markers[4.0] == "none" and markers[15.2] != "none"  # retracted: hollow; standing: filled


def free_steps(*names: str) -> TaskGraph:
    """A graph of steps 1, 2, ... named ``names``, each needing only START."""
    ids = tuple(range(1, len(names) + 1))
    nodes = [START, *ids, END]
    adjacency = np.zeros((len(nodes), len(nodes)), dtype=bool)
    adjacency[1:-1, 0] = True
    adjacency[-1, 1:-1] = True
    return TaskGraph(ids, names, adjacency)


def test_steps_keep_distinct_looks_past_the_palettes_colours() -> None:
    ids = tuple(range(1, 46))
    graph = free_steps(*(f"step_{k}" for k in ids))
    styles = step_styles(graph, ids)
    looks = {(tuple(colour), hatch) for colour, hatch in styles.values()}
    assert len(looks) == len(ids)  # 45 steps, 45 looks: colour and hatch together
    assert len({colour for colour, _ in styles.values()}) == 20  # every colour of the palette used
    first_ten = [styles[k][0] for k in ids[:10]]
    assert len(set(first_ten)) == 10  # a procedure of ten steps gets ten colours
    assert step_styles(graph, ids[5:8]) == {k: styles[k] for k in ids[5:8]}  # the same step looks the same anywhere


def test_a_step_name_wider_than_its_bar_is_left_to_the_legend() -> None:
    # CaptainCook4D's sentences, drawn whole over bars of a few seconds, overlapped into a black smear.
    long = "Slice-Slice the tortilla roll with floss, perpendicular to its length, into pinwheels"
    graph = free_steps("cut", long)
    annotated = (AnnotatedSegment(1, 0.0, 60.0), AnnotatedSegment(2, 60.0, 62.0))
    recognised = tuple(TimedSegment(s.step, s.start, s.end) for s in annotated)
    fig = timeline_figure(VideoRun("v", annotated, recognised, (), 62, (0.9, 0.9)), graph)
    try:
        (ax,) = fig.axes
        assert [t.get_text() for t in ax.texts] == ["cut", "cut"]  # the short name on both its bars, the long on none
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert legend[1].replace("\n", " ") == long and max(len(line) for line in legend[1].splitlines()) <= 40
    finally:
        pyplot().close(fig)


def test_a_long_alert_label_near_either_end_stays_inside_the_plot() -> None:
    # An alert on CaptainCook4D's sentences at the video's last second: its label, centred under the marker, ran past
    # the plot's right edge over the legend (and at the first second off the picture's left edge), its last lines over
    # the time axis.
    first = "Add-Add one tablespoon of mayonnaise and spread it evenly over the bread slice"
    last = "Slice-Slice the tortilla roll with floss, perpendicular to its length, into pinwheels"
    graph = free_steps(first, last)
    annotated = (AnnotatedSegment(2, 0.0, 2.0), AnnotatedSegment(1, 2.0, 600.0), AnnotatedSegment(2, 600.0, 602.0))
    recognised = tuple(TimedSegment(s.step, s.start, s.end) for s in annotated)
    alerts = (RaisedAlert(2, 0.0, 2.0, raised=0.5, missing=(1,), probability=0.9),
              RaisedAlert(2, 600.0, 602.0, raised=602.0, missing=(1,), probability=0.8))  # fmt: skip
    fig = timeline_figure(VideoRun("v", annotated, recognised, alerts, 602, (0.9, 0.9, 0.9)), graph)
    try:
        (ax,) = fig.axes
        renderer = fig.canvas.get_renderer()
        plot = ax.get_window_extent(renderer)
        labels = [t for t in ax.texts if "\nP 0." in t.get_text()]
        assert len(labels) == 2
        for label in labels:
            extent = label.get_window_extent(renderer)
            assert plot.x0 <= extent.x0 and extent.x1 <= plot.x1, label.get_text()
            assert plot.y0 <= extent.y0, label.get_text()  # nor below it, over the time axis
            assert max(len(line) for line in label.get_text().splitlines()) <= 40  # wrapped, not one long line
    finally:
        pyplot().close(fig)
