"""The all-in-one run's wiring: waiting for the checker to answer before the first frame."""

from __future__ import annotations

import pytest
import zmq

from graphs.errors import InputError
from streaming.all_in_one import await_subscription
from streaming.detector_service import EventPublisher
from streaming.transport import Publisher, bind, connect
from streaming.view import ViewState
from streaming.viewer import Viewer


def test_a_checker_that_never_answers_is_named_in_one_plain_line(ctx: zmq.Context) -> None:
    # The message showed the endpoint as a bytes repr: "the checker at b'tcp://127.0.0.1:5556' does not answer".
    silent_out, out_endpoint = bind(ctx, zmq.PUB, "tcp://127.0.0.1:0")  # a "checker" that never publishes
    silent_in, in_endpoint = bind(ctx, zmq.SUB, "tcp://127.0.0.1:0")
    viewer = Viewer(ctx, out_endpoint, ViewState(), jsonl=False)
    events = EventPublisher(Publisher(connect(ctx, zmq.PUB, in_endpoint)), "cam0")
    with pytest.raises(InputError) as caught:
        await_subscription(viewer, events, timeout_s=0.2)
    assert str(caught.value) == f"the checker at {out_endpoint} does not answer within 0.2 s"
