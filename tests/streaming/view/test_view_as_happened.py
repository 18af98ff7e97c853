"""What the terminal view shows is what happened: the checker's real messages, as they come off the wire, in the
orders and reads a live run delivers them."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import zmq
from rich.console import Console

from streaming.checker.core import CheckerCore
from streaming.messages import MessageError, MissingSteps, Status, decode, encode, run_of
from streaming.transport import Publisher, bind
from streaming.view.client import Viewer
from streaming.view.render import render
from streaming.view.state import ViewState, graph_names
from tests.streaming.helpers import beat, tea_graph, wait_for


def ended_status(stream: str = "cam0", seq: int = 0, **fields: object) -> Status:
    values: dict[str, object] = {
        "stream_id": stream, "seq": seq, "timestamp": 1.0, "run": run_of("s"), "done": (3, 1), "allowed": (),
        "current": None, "alerts": 0, "frames": 40, "dropped": 0, "fps": 10.0, "gaps": 0, "ended": True,
        "lost": False, "allowed_scores": (), "rule": "binary",
    }
    return Status(**(values | fields))  # type: ignore[arg-type]


def test_a_status_both_ended_and_lost_is_refused_as_malformed_not_shown(tmp_path: Path) -> None:
    # The checker never sends it (an ended stream stays ended), but a peer could: the view read it as lost (its row
    # said so and its verdict line went), the dashboard as ended. One reading for both: it is not a valid status.
    topic, body = encode(ended_status())
    both = json.loads(body) | {"lost": True}
    try:
        decode([topic, json.dumps(both).encode()])
        raise AssertionError("a status both ended and lost was accepted")
    except MessageError as err:
        assert "status.lost is true while status.ended is true" in str(err)
    ctx = zmq.Context()
    try:
        pub, endpoint = bind(ctx, zmq.PUB, f"ipc://{tmp_path}/checker")
        viewer = Viewer(ctx, endpoint, ViewState(), jsonl=False)
        def send_and_pump() -> None:
            Publisher(pub).send(ended_status(seq=1))
            viewer.pump(20)

        # Connected once a status shows: nothing sent later is lost.
        assert wait_for(lambda: "cam0" in viewer.state.streams, 10.0, send_and_pump)
        pub.send_multipart([b"status/other", json.dumps(both | {"stream_id": "other", "seq": 0}).encode()])
        Publisher(pub).send(ended_status("last"))
        assert wait_for(lambda: "last" in viewer.state.streams, 10.0, lambda: viewer.pump(20))
        assert viewer.receiver.stats.malformed == 1 and "other" not in viewer.state.streams
        assert "status.lost is true while status.ended is true" in str(viewer.receiver.stats.last_error)
        viewer.close()
    finally:
        ctx.destroy(linger=0)


def test_a_dumb_terminal_says_not_done_by_the_stop_when_the_report_and_the_status_come_in_two_reads(
    tmp_path: Path,
) -> None:
    # The checker sends a stopped session's end report, then its status (the one that says `stopped`). On a terminal
    # that cannot redraw each report is a line as it comes; when the two came in different reads the line was
    # written before the status, and said "never done" of a session the person cut short.
    core = CheckerCore(tea_graph())
    core.handle(beat(seq=0, history=(3,), timestamp=1.0))
    end = core.handle(beat(seq=1, history=(3,), timestamp=2.0, ended=True, stopped=True))
    [report] = [m for m in end if isinstance(m, MissingSteps)]
    [last] = [m for m in end if isinstance(m, Status)]
    assert last.stopped and end.index(report) < end.index(last)  # the order the checker sends them in
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=True, color_system=None, _environ={"TERM": "dumb"})
    assert console.is_dumb_terminal
    ctx = zmq.Context()
    over = threading.Event()
    try:
        pub, endpoint = bind(ctx, zmq.PUB, f"ipc://{tmp_path}/checker")
        viewer = Viewer(ctx, endpoint, ViewState(names=graph_names(tea_graph())), jsonl=False)
        loop = threading.Thread(target=viewer.loop, args=(over.is_set, console), daemon=True)
        loop.start()
        running = [m for m in core.handle(beat("other", seq=0, timestamp=1.0)) if isinstance(m, Status)]
        assert wait_for(lambda: "other" in viewer.state.streams, 10.0,  # connected: nothing sent later is lost
                        lambda: pub.send_multipart(encode(running[-1])))
        pub.send_multipart(encode(report))
        # The loop writes its lines right after the read that took the report, before the status is sent.
        assert wait_for(lambda: "cam0" in viewer.state.reported, 10.0)
        pub.send_multipart(encode(last))
        assert wait_for(lambda: "session over" in out.getvalue(), 10.0)
        over.set()
        loop.join(10.0)
        viewer.close()
    finally:
        over.set()
        ctx.destroy(linger=0)
    [said] = [line for line in out.getvalue().splitlines() if "session over" in line]
    assert "cam0 session over; not done by the stop: fill_kettle, boil_water" in said, said


def test_a_next_step_with_a_probability_under_half_a_hundredth_is_not_shown_as_0_00() -> None:
    # The weighted rule gives an allowed step it thinks unlikely a probability such as 0.0047: "0.00" read as "it cannot
    # come next" (a step the rule gives none is named without a number), yet it is allowed and has a chance.
    state = ViewState(names=graph_names(tea_graph()))
    row = ended_status(ended=False, current=None, done=(3,), allowed=(4, 1), allowed_scores=(0.9953, 0.0047),
                       rule="weighted")
    state.apply(decode(list(encode(row))))  # as it comes off the wire
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    console.print(render(state))
    [line] = [line for line in console.export_text().splitlines() if line.startswith("│ cam0")]
    assert "add_teabag 1.00, fill_kettle <0.01" in line, line
