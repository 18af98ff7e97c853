"""The step under way, as the checker tells every screen: a real segmenter's decisions, sent as the detector sends
them, through a real checker to a real viewer (`tests.streaming.under_way`)."""

from __future__ import annotations

import io
import time
from pathlib import Path

import zmq
from rich.console import Console

from streaming.detector import EventPublisher
from streaming.messages import Status
from streaming.transport import HEARTBEAT_S, Publisher, connect
from streaming.view.client import Viewer
from streaming.view.render import render
from streaming.view.state import ViewState, graph_names
from tests.streaming.helpers import running_checker, tea_graph, wait_for
from tests.streaming.under_way import BACKGROUND, FPS, frames, statuses_shown

GET_CUP, FILL_KETTLE = 3, 1  # steps of the tea graph with no pre-condition
BOIL_WATER = 2


def first_done(statuses: list[Status], done: tuple[int, ...]) -> int:
    return next(i for i, row in enumerate(statuses) if row.done == done)


def test_a_step_begun_again_after_a_short_one_stays_under_way_when_the_steps_before_are_confirmed(
    tmp_path: Path,
) -> None:
    # get_cup, a short fill_kettle, get_cup again: when the second get_cup is stable the detector sends a heartbeat
    # naming it, then the key-steps of the first get_cup and of fill_kettle. The checker took get_cup's key-step for
    # the end of the get_cup under way and said nothing was, until the next heartbeat (half a second).
    statuses = statuses_shown(tmp_path, frames((GET_CUP, 8), (FILL_KETTLE, 3), (GET_CUP, 8)))
    both = first_done(statuses, (GET_CUP, FILL_KETTLE))
    assert [row.current for row in statuses[both - 2: both + 1]] == [GET_CUP] * 3, statuses[both - 2: both + 1]


def test_a_short_step_between_background_is_under_way_while_its_confirmation_waits(tmp_path: Path) -> None:
    # Background, fill_kettle for 0.3 s (shorter than a stable run), background: fill_kettle is a clean short step,
    # confirmed once the background after it is stable (0.5 s later). Meanwhile nothing was said to be under way, and
    # no screen ever showed fill_kettle being done.
    statuses = statuses_shown(tmp_path, frames((BACKGROUND, 8), (FILL_KETTLE, 3), (BACKGROUND, 12)))
    done = first_done(statuses, (FILL_KETTLE,))
    assert FILL_KETTLE in [row.current for row in statuses[:done]], statuses[:done]
    assert statuses[done].current is None and statuses[-1].current is None  # once confirmed, background again


def allowed_shown(statuses: list[Status]) -> list[tuple[Status, str]]:
    """Each status with the "allowed next" cell the terminal view draws once it has taken it (in narrow lines)."""
    state = ViewState(names=graph_names(tea_graph()))
    shown = []
    for row in statuses:
        state.apply(row)
        console = Console(width=50, record=True, file=io.StringIO(), color_system=None)
        console.print(render(state))
        [cell] = [line.split("next", 1)[1].strip() for line in console.export_text().splitlines()
                  if line.startswith("  next ")]
        shown.append((row, cell))
    return shown


def test_the_step_just_done_is_never_offered_as_next_while_its_key_step_is_on_its_way(tmp_path: Path) -> None:
    # get_cup, then fill_kettle: once fill_kettle is stable the detector sends a heartbeat naming it, then get_cup's
    # key-step. The checker's status after the heartbeat has get_cup neither under way nor done, so allowed: the
    # view offered the step just done as the one to do next, for a moment.
    statuses = statuses_shown(tmp_path, frames((GET_CUP, 8), (FILL_KETTLE, 8), (BACKGROUND, 8)))
    shown = allowed_shown(statuses)
    between = [(row, cell) for row, cell in shown if row.current == FILL_KETTLE and row.done == ()]
    assert between and all(GET_CUP in row.allowed for row, _ in between)  # what the checker says then
    # Not "-" either (nothing can follow): what comes next comes after get_cup, which is being confirmed.
    assert [cell for _, cell in between] == ["after get_cup"] * len(between), between
    after = next(cell for row, cell in shown if row.done == (GET_CUP,))
    assert "get_cup" not in after and "add_teabag" in after  # done now, and what get_cup allows is next


def test_a_short_run_that_turned_out_flicker_is_offered_again_at_the_next_heartbeat(tmp_path: Path) -> None:
    # A short fill_kettle is under way while it may be a clean short step; a short boil_water right after it makes
    # the two flicker, and no key-step comes. fill_kettle is held out of "allowed next" only until a later heartbeat.
    statuses = statuses_shown(tmp_path, frames((BACKGROUND, 8), (FILL_KETTLE, 3), (BOIL_WATER, 3), (BACKGROUND, 12)))
    shown = allowed_shown(statuses)
    assert any(row.current == FILL_KETTLE for row, _ in shown)
    assert all(row.done == () for row, _ in shown)  # never confirmed
    left = next(i for i, (row, _) in enumerate(shown) if i and shown[i - 1][0].current == FILL_KETTLE)
    assert "fill_kettle" not in shown[left][1]  # the heartbeat it left with: it may be confirmed
    assert "fill_kettle" in shown[-1][1], shown[-1]  # a later heartbeat: it was not


def test_a_step_left_without_its_key_step_is_offered_again_though_the_detector_counts_no_frames(
    tmp_path: Path,
) -> None:
    # A detector of another make that counts no frames (`frames` 0 in every heartbeat, as the conformance client
    # sends them), or one whose count stands still: fill_kettle is under way, then nothing is and no key-step comes.
    # It was held out of "allowed next" until a heartbeat with another frame count, which never came: fill_kettle, the
    # step the person has to do, was never offered again for the rest of the session.
    state = ViewState(names=graph_names(tea_graph()))
    with running_checker(tmp_path) as (ctx, _service, _thread):
        viewer = Viewer(ctx, f"ipc://{tmp_path}/out", state, jsonl=False)
        events = EventPublisher(Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0)), "cam0",
                                session="s")
        beats = Beats(events)
        def beat_and_pump() -> None:
            events.heartbeat(None, 0, 0, FPS)
            viewer.pump(20)

        def next_beat_and_pump() -> None:
            beats()
            viewer.pump(20)

        assert wait_for(lambda: "cam0" in state.streams, 10.0, beat_and_pump)
        events.heartbeat(FILL_KETTLE, 0, 0, FPS)
        assert wait_for(lambda: state.streams["cam0"].current == FILL_KETTLE, 10.0, lambda: viewer.pump(20))
        beats.current = None
        assert wait_for(lambda: state.streams["cam0"].current is None, 10.0, next_beat_and_pump)
        assert "fill_kettle" not in next_cell(state)  # its key-step may be on its way
        assert wait_for(lambda: "fill_kettle" in next_cell(state), 10.0, next_beat_and_pump)
        assert not state.streams["cam0"].lost and state.streams["cam0"].done == ()
        viewer.close()


class Beats:
    """A detector's heartbeats every `HEARTBEAT_S` (frames 0 in each), sent when called after that long."""

    def __init__(self, events: EventPublisher) -> None:
        self.events, self.last = events, float("-inf")
        self.current: int | None = FILL_KETTLE  # None: no step under way

    def __call__(self) -> None:
        if time.monotonic() - self.last >= HEARTBEAT_S:
            self.last = time.monotonic()
            self.events.heartbeat(self.current, 0, 0, FPS)


def next_cell(state: ViewState) -> str:
    """The "allowed next" cell the terminal view draws for cam0 (in narrow lines)."""
    console = Console(width=50, record=True, file=io.StringIO(), color_system=None)
    console.print(render(state))
    [cell] = [line.split("next", 1)[1].strip() for line in console.export_text().splitlines()
              if line.startswith("  next ")]
    return cell
