"""What the dashboard shows is what happened: the checker's real messages, decoded as the dashboard decodes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zmq

pytest.importorskip("aiohttp", reason="the dashboard needs the 'dashboard' extra (aiohttp)")

from streaming.messages import encode  # noqa: E402
from streaming.transport import Publisher, bind  # noqa: E402
from tests.streaming.dashboard.serving import serving  # noqa: E402
from tests.streaming.dashboard.test_state import status  # noqa: E402
from tests.streaming.helpers import wait_for  # noqa: E402


def test_a_status_both_ended_and_lost_is_refused_and_counted_as_the_view_refuses_it(tmp_path: Path) -> None:
    # The tile said ENDED where the terminal view said lost: the checker never sends both, and now neither shows it.
    ctx = zmq.Context()
    try:
        sock, endpoint = bind(ctx, zmq.XPUB, f"ipc://{tmp_path}/fake-checker")  # speaks for a checker
        fake = Publisher(sock)
        with serving(endpoint, warn=lambda line: None, say=lambda line: None) as served:
            assert wait_for(lambda: fake.new_subscribers() > 0, 10)
            topic, body = encode(status("both", ended=True, allowed=(), allowed_scores=()))
            sock.send_multipart([topic, json.dumps(json.loads(body) | {"lost": True}).encode()])
            sock.send_multipart(encode(status("good")))
            assert wait_for(lambda: [t["stream"] for t in served.state()["tiles"]] == ["good"], 10)
            assert wait_for(lambda: served.state()["link"]["malformed"] == 1, 10)
            assert "status.lost is true while status.ended is true" in served.state()["link"]["last_error"]
    finally:
        ctx.destroy(linger=0)
