"""What the terminal view shows is what happened: the checker's real messages, as they come off the wire, in the
orders and reads a live run delivers them."""

from __future__ import annotations

import json
from pathlib import Path

import zmq

from streaming.messages import MessageError, Status, decode, encode, run_of
from streaming.transport import Publisher, bind
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.streaming.helpers import wait_for


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
        # Connected once a status shows: nothing sent later is lost.
        assert wait_for(lambda: "cam0" in viewer.state.streams, 10.0,
                        lambda: (Publisher(pub).send(ended_status(seq=1)), viewer.pump(20)))
        pub.send_multipart([b"status/other", json.dumps(both | {"stream_id": "other", "seq": 0}).encode()])
        Publisher(pub).send(ended_status("last"))
        assert wait_for(lambda: "last" in viewer.state.streams, 10.0, lambda: viewer.pump(20))
        assert viewer.receiver.stats.malformed == 1 and "other" not in viewer.state.streams
        assert "status.lost is true while status.ended is true" in str(viewer.receiver.stats.last_error)
        viewer.close()
    finally:
        ctx.destroy(linger=0)
