"""The view is a sink of the checker's output (one ``send(message)``): handed to a checker in the same process it
shows and prints what a viewer of the checker's socket shows and prints."""

from __future__ import annotations

import io
import re
from pathlib import Path

import zmq
from rich.console import Console

from streaming.demo.procedure import DEMO_EXECUTIONS
from streaming.detector import EventPublisher
from streaming.registry import SINKS
from streaming.transport import Publisher, connect
from streaming.view.client import View, Viewer
from streaming.view.render import render
from streaming.view.state import ViewState, graph_names
from tests.streaming.helpers import MISTAKE_STEP, running_checker, tea_graph, wait_for


def test_a_view_handed_to_the_checker_shows_what_a_viewer_of_its_socket_shows(tmp_path: Path) -> None:
    assert SINKS["view"].load() is View
    names = graph_names(tea_graph())
    direct_out, socket_out = io.StringIO(), io.StringIO()
    direct = View(ViewState(names=names), jsonl=True, out=direct_out)
    with running_checker(tmp_path, [direct]) as (ctx, service, _):
        viewer = Viewer(ctx, service.alerts_endpoint, ViewState(names=names), jsonl=True, out=socket_out)
        sock = connect(ctx, zmq.PUB, service.events_endpoint)
        camera = EventPublisher(Publisher(sock), "kitchen")
        # Heartbeats until the viewer hears the stream (slow joiner); the view handed to the checker hears them all.
        assert wait_for(lambda: "kitchen" in viewer.state.streams, 10.0,
                        lambda: (camera.heartbeat(None, 0, 0, 0.0), viewer.pump(20)))
        for step in DEMO_EXECUTIONS["mistake"]:
            camera.keystep(step, "x", 0.0, 1.0, 0.9)
        camera.heartbeat(None, 10, 0, 30.0, ended=True)
        assert wait_for(lambda: viewer.state.streams["kitchen"].ended, 10.0, lambda: viewer.pump(20))
        assert wait_for(lambda: direct.state.streams["kitchen"].ended, 5.0)
        viewer.close()
        sock.close()
    for state in (direct.state, viewer.state):
        assert [(a.stream_id, a.step) for _, a in state.alerts] == [("kitchen", MISTAKE_STEP)]
        assert state.streams["kitchen"].done == DEMO_EXECUTIONS["mistake"]
    # Both print the same lines once the socket viewer had joined: the alert, the steps, the end report.
    direct_lines, socket_lines = direct_out.getvalue().splitlines(), socket_out.getvalue().splitlines()
    assert socket_lines and direct_lines[-len(socket_lines):] == socket_lines
    assert _drawn(direct.state) == _drawn(viewer.state)


def _drawn(state: ViewState) -> str:
    console = Console(width=160, record=True, file=io.StringIO(), color_system=None)
    console.print(render(state))
    return re.sub(r"\d\d:\d\d:\d\d", "hh:mm:ss", console.export_text())  # arrival clocks: a few ms apart
