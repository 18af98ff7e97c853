"""What the dashboard shows is what happened: the checker's real messages, decoded as the dashboard decodes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zmq

pytest.importorskip("aiohttp", reason="the dashboard needs the 'dashboard' extra (aiohttp)")

from streaming.checker.core import CheckerCore  # noqa: E402
from streaming.dashboard.state import DashboardState  # noqa: E402
from streaming.messages import Status, decode, encode  # noqa: E402
from streaming.transport import Publisher, bind  # noqa: E402
from tests.streaming.dashboard.serving import serving  # noqa: E402
from tests.streaming.dashboard.test_state import status  # noqa: E402
from tests.streaming.helpers import beat, tea_graph, wait_for  # noqa: E402
from tests.streaming.under_way import BACKGROUND, frames, statuses_shown  # noqa: E402

GET_CUP, FILL_KETTLE = 3, 1


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


def test_a_tile_never_offers_the_step_just_done_as_next_while_its_key_step_is_on_its_way(tmp_path: Path) -> None:
    # The checker's status after the heartbeat naming fill_kettle, just before get_cup's key-step, has get_cup
    # neither under way nor done: the tile listed it as allowed next, for up to half a second (tiles go out twice a
    # second, each from the newest status).
    statuses = statuses_shown(tmp_path, frames((GET_CUP, 8), (FILL_KETTLE, 8), (BACKGROUND, 8)))
    graph = tea_graph()
    state = DashboardState(names=dict(zip(graph.step_ids, graph.step_names, strict=True)))
    tiles = []
    for row in statuses:
        state.apply(row, 100.0)
        tiles.append((row, state.tile_json("cam0", 100.0)))
    between = [tile for row, tile in tiles if row.current == FILL_KETTLE and row.done == ()]
    assert between and all(tile is not None and tile["current"] == "fill_kettle" for tile in between)
    assert [[step["name"] for step in tile["allowed"]] for tile in between if tile] == [[]] * len(between)
    assert [tile["after"] for tile in between if tile] == ["get_cup"] * len(between)  # not "none": see the view
    after = next(tile for row, tile in tiles if row.done == (GET_CUP,))
    assert after is not None and [step["name"] for step in after["allowed"]] == ["add_teabag"]


def test_a_tile_offers_a_step_left_without_its_key_step_again_though_the_detector_counts_no_frames() -> None:
    # A detector that sends `frames` 0 in every heartbeat (or whose count stands still): fill_kettle under way, then
    # nothing, and no key-step. The tile held fill_kettle out of "allowed next" until a heartbeat with another frame
    # count, which never came: the step left to do was never offered again.
    core = CheckerCore(tea_graph())
    graph = tea_graph()
    state = DashboardState(names=dict(zip(graph.step_ids, graph.step_names, strict=True)))

    def shown(seq: int, current: int | None, now: float) -> list[str]:
        sent = core.handle(beat(seq=seq, current=current, frames=0, timestamp=now))
        [row] = [m for m in sent if isinstance(m, Status)]
        state.apply(decode(list(encode(row))), now)  # as it comes off the wire
        tile = state.tile_json("cam0", now)
        assert tile is not None
        return [step["name"] for step in tile["allowed"]]

    shown(0, FILL_KETTLE, 100.0)
    assert "fill_kettle" not in shown(1, None, 100.5)  # its key-step may be on its way
    assert "fill_kettle" not in shown(2, None, 100.9)
    assert "fill_kettle" in shown(3, None, 101.5), state.left  # it did not come: offered again
