"""The live view on a terminal with more streams than lines: a flood of made-up stream ids on the checker's loopback
socket (or a site with a dozen cameras) must not push the alert off the screen. The streams an operator acts on are
listed first, the rows the terminal has no room for are summed up in one row, and a resize shows at the next redraw.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import pyte
import zmq
from rich.console import Console
from rich.live_render import LiveRender

from streaming.messages import Alert, MissingSteps, Status
from streaming.transport import Publisher, connect
from streaming.view.client import live_frame
from streaming.view.render import most_that_fit, render
from streaming.view.state import ViewState, graph_names
from tests.streaming.helpers import STREAM_DETECT, beat, drain_terminal, keystep, running_checker, tea_graph, wait_for

ALERT_LINE = "boil_water before fill_kettle"  # the demo's mistake, as the alert log's lines say it at 80 columns
MORE = re.compile(r"^\+ (\d+) more streams \((.+)\)$")


def status(stream_id: str, **fields: Any) -> Status:
    """A status of a live demo stream ``stream_id`` in run ``r``, any field replaceable."""
    values: dict[str, Any] = {
        "stream_id": stream_id, "seq": 1, "timestamp": 1.0, "run": "r", "done": (1,), "allowed": (2,), "current": 2,
        "alerts": 0, "frames": 100, "dropped": 0, "fps": 10.0, "gaps": 0, "ended": False, "lost": False,
        "allowed_scores": (0.0,), "rule": "binary",
    }
    return Status(**(values | fields))


def mistake(stream_id: str) -> Alert:
    return Alert(stream_id, 7, 100.0, f"{stream_id}#1", "r", 2, "boil_water", 1, (1,), ("fill_kettle",), False, 0.9,
                 False, 1, "fill_kettle", 1.0, "binary")


def flooded(bogus: int) -> ViewState:
    """A view listening since 0 s, at 100.5 s: ``bogus`` streams last heard at 1 s (stale), then ``kitchen``, live,
    with an alert."""
    state = ViewState(graph_names(tea_graph()))
    state.listening_since = 0.0
    for k in range(bogus):
        state.apply(status(f"bogus{k:03d}"), received_at=1.0)
    state.apply(status("kitchen", timestamp=100.0, alerts=1), received_at=100.0)
    state.apply(mistake("kitchen"), received_at=100.0)
    state.now = 100.5
    return state


def row_ids(screen: list[str]) -> list[str]:
    """The stream of each row of the streams table drawn on ``screen`` (a row's wrapped lines leave it blank)."""
    return [cell.split()[0] for line in screen if line.startswith("│") and (cell := line.split("│")[1]).strip()]


def live_screen(state: ViewState, width: int, height: int) -> list[str]:
    """What a ``width`` x ``height`` terminal shows of the live view (rich's Live cuts it at the bottom so)."""
    console = Console(width=width, height=height, record=True, file=io.StringIO(), color_system=None)
    console.print(LiveRender(live_frame(render(state, height=height)), vertical_overflow="ellipsis"))
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_live_streams_with_an_alert_come_first_then_live_lost_ended_and_stale_by_id() -> None:
    state = ViewState(graph_names(tea_graph()))
    state.listening_since = 0.0
    state.apply(status("c-stale"), received_at=1.0)
    state.apply(status("b-ended", ended=True), received_at=100.0)
    state.apply(status("a-lost", lost=True), received_at=100.0)
    state.apply(status("z-live"), received_at=100.0)
    state.apply(status("y-live"), received_at=100.0)
    state.apply(status("zz-alerted", alerts=1), received_at=100.0)
    state.apply(mistake("zz-alerted"), received_at=100.0)
    state.now = 100.5
    console = Console(width=140, record=True, file=io.StringIO(), color_system=None)
    console.print(render(state))
    rows = row_ids(console.export_text().splitlines())
    assert rows[:6] == ["zz-alerted", "y-live", "z-live", "a-lost", "b-ended", "c-stale"]


def test_at_80_by_24_the_alert_stays_and_the_rows_left_out_are_summed_up_in_one_row() -> None:
    screen = live_screen(flooded(40), 80, 24)
    assert len(screen) <= 24
    assert "alerts" in screen and f"now kitchen {ALERT_LINE}" in screen
    assert "  P mistake 1.00; likely forgotten fill_kettle (graph 1.00)" in screen
    rows = row_ids(screen)
    assert rows[0] == "kitchen"  # the live stream with the alert, before the stale ones
    (summary,) = [match for line in screen if (match := MORE.match(line))]
    assert int(summary[1]) == 41 - len(rows) and summary[2] == f"{40 - (len(rows) - 1)} stale"
    # A taller terminal lists more rows; the last frame, printed whole as the view stops, lists every one.
    taller = live_screen(flooded(40), 80, 40)
    assert f"now kitchen {ALERT_LINE}" in taller
    assert sum(line.startswith("│ bogus") for line in taller) > sum(line.startswith("│ bogus") for line in screen)
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(render(flooded(40), closing=True))
    assert sum(line.startswith("│ bogus") for line in console.export_text().splitlines()) == 40


def test_below_80_by_24_the_streams_are_one_line_and_the_alert_stays() -> None:
    screen = live_screen(flooded(40), 80, 12)
    assert screen[0] == "streams: 41 (1 live, 40 stale), no room to list them on this terminal"
    assert f"now kitchen {ALERT_LINE}" in screen
    # Below 60 columns the streams are lines, and are cut the same way.
    narrow = live_screen(flooded(40), 50, 30)
    assert any(MORE.match(line) for line in narrow) and "kitchen: now boil_water; 1 alert" in narrow
    assert any(line.startswith("now kitchen boil_water") for line in narrow)


def alerted(alerts: int, reports: int = 0) -> ViewState:
    """``kitchen``, live, with ``alerts`` alerts on boil_water (the k-th from k s of video, heard at 100 + k s), then
    ``reports`` sessions ``cam00``, ``cam01``... ended without fill_kettle (heard at 200 + k s)."""
    state = ViewState(graph_names(tea_graph()))
    state.listening_since = 0.0
    for k in range(alerts):
        state.apply(Alert("kitchen", 7 + k, 100.0 + k, f"kitchen#{k + 1}", "r", 2, "boil_water", k + 1, (1,),
                          ("fill_kettle",), False, 0.9, False, 1, "fill_kettle", 1.0, "binary", video_time=float(k)),
                    received_at=100.0 + k)
    for k in range(reports):
        state.apply(MissingSteps(f"cam{k:02d}", 1, 1.0, f"cam{k:02d}#end", "s", (1,), ("fill_kettle",), False, (0.9,)),
                    received_at=200.0 + k)
    state.apply(status("kitchen", timestamp=300.0, alerts=alerts), received_at=300.0)
    state.now = 300.5
    return state


def alerts_shown(screen: list[str]) -> list[int]:
    """The alerts on ``screen``, each by the second of video its step began at (`alerted`), top to bottom."""
    return [int(match[1]) for line in screen if (match := re.search(r"from (\d+)\.0 s\b", line))]


EARLIER = re.compile(r"^ *\+ (\d+) earlier alerts \(kitchen (\d+)\)$")
CAPTION = "P mistake: the checker's probability"


def test_at_80_by_24_the_newest_alerts_stay_and_the_earlier_ones_are_summed_up_above_them() -> None:
    # Drawn last, the alert that had just fired went below the bottom of the screen, where the live view is cut.
    for width, height in ((80, 24), (120, 16)):  # the alerts as lines, then as a table
        screen = live_screen(alerted(12), width, height)
        assert len(screen) <= height
        shown = alerts_shown(screen)
        assert shown and shown == list(range(12 - len(shown), 12)), "\n".join(screen)  # the newest, oldest first
        (earlier,) = [(k, match) for k, line in enumerate(screen) if (match := EARLIER.match(line))]
        assert int(earlier[1][1]) == int(earlier[1][2]) == 12 - len(shown), "\n".join(screen)
        assert earlier[0] < min(k for k, line in enumerate(screen) if "from " in line)
        assert not any(CAPTION in line for line in screen), "\n".join(screen)
    # The last frame, printed whole as the view stops, and output that is not a terminal, list every alert.
    for frame in (render(alerted(12), closing=True), render(alerted(12), fit=True)):
        console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
        console.print(frame)
        whole = console.export_text().splitlines()
        assert alerts_shown(whole) == list(range(12)) and not any(EARLIER.match(line) for line in whole)
        assert any(CAPTION in line for line in whole)


def test_short_of_lines_the_alerts_caption_goes_first_then_the_streams_rows() -> None:
    # Five alerts: the caption made way for no row of the stream the operator watches ("no room to list them").
    screen = live_screen(alerted(5), 80, 24)
    assert row_ids(screen) == ["kitchen"] and alerts_shown(screen) == list(range(5)), "\n".join(screen)
    assert not any(CAPTION in line for line in screen), "\n".join(screen)
    # Eight alerts: every one, and the caption not cut halfway through.
    screen = live_screen(alerted(8), 80, 24)
    assert alerts_shown(screen) == list(range(8)) and not any(EARLIER.match(line) for line in screen)
    assert not any(CAPTION in line for line in screen), "\n".join(screen)
    # With room for it, the caption is there.
    assert any(CAPTION in line for line in live_screen(alerted(8), 80, 40))


def test_the_newest_sessions_never_done_stay_and_the_rows_they_come_after_are_summed_up() -> None:
    # Twelve sessions that ended without a step after six alerts: the steps the last ones never did were off screen.
    for height in (24, 18):
        screen = live_screen(alerted(6, reports=12), 80, height)
        assert len(screen) <= height
        sessions = [int(match[1]) for line in screen if (match := re.search(r"│ cam(\d\d) ", line))]
        assert sessions and sessions == list(range(12 - len(sessions), 12)), "\n".join(screen)
        summary = [match for line in screen if (match := re.match(r"^ *\+ (\d+) earlier sessions \((.+)\)$", line))]
        assert [int(match[1]) for match in summary] == ([12 - len(sessions)] if len(sessions) < 12 else [])
        assert all(match[2].startswith("cam00, cam01, ") for match in summary)
        # The alerts came before them: those that make way are summed up, not dropped in silence.
        alerts = alerts_shown(screen)
        assert alerts == list(range(6 - len(alerts), 6))
        assert [int(m[1]) for line in screen if (m := EARLIER.match(line))] == [6 - len(alerts)], "\n".join(screen)

def test_the_rows_kept_are_the_most_that_fit_found_in_a_few_drawings() -> None:
    # A redraw comes 8 times a second and each count of rows tried is drawn: 256 streams were not to be drawn 256 times.
    for heights in ([1] * 256, [4] * 256, [1, 3] * 128, [2] * 5 + [9] * 251, [30] + [1] * 255):
        drawing = Drawing(heights)
        for room in (0, 1, 10, 23, 49, 200, 2000):
            for count in (0, 1, 7, 256):
                drawing.tried.clear()
                fit, tried = most_that_fit(count, room, drawing.lines), len(drawing.tried)
                best = max((k for k in range(count + 1) if drawing.lines(k) <= room), default=0)
                assert fit == best and tried <= 10, (heights[:3], room, count, tried)
                # Fitted again in other room (the alerts' caption left out): the counts drawn already are not drawn
                # again, and bound the search (one row that did not fit in this room will not in less).
                for known in ({count: drawing.lines(count)}, {1: drawing.lines(1)}, {0: 8, 3: drawing.lines(3)}):
                    drawing.tried.clear()
                    again = most_that_fit(count, room, drawing.lines, known)
                    assert again == best and not set(drawing.tried) & set(known), (heights[:3], room, count, known)
                    assert len(drawing.tried) <= 10


class Drawing:
    """Rows ``heights`` lines high under a table's title, borders, header and caption (8 lines)."""

    def __init__(self, heights: list[int]) -> None:
        self.heights = heights
        self.tried: list[int] = []

    def lines(self, rows: int) -> int:
        self.tried.append(rows)
        return 8 + sum(self.heights[:rows])


def set_size(fd: int, columns: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def test_a_flood_of_stream_ids_leaves_the_alert_on_an_80_by_24_terminal_and_a_resize_shows_more_rows(
        tmp_path: Path) -> None:
    master, slave = pty.openpty()
    set_size(slave, 80, 24)
    # The size is the terminal's own: LINES or COLUMNS in the environment would hold rich to them through a resize.
    env = {key: value for key, value in os.environ.items() if key not in ("LINES", "COLUMNS")} | {"TERM": "xterm"}
    terminal = pyte.Screen(80, 24)
    fed = pyte.ByteStream(terminal)
    with running_checker(tmp_path) as (ctx, service, _):
        view = subprocess.Popen([*STREAM_DETECT, "view", "--connect", service.alerts_endpoint, "--demo"],
                                stdin=slave, stdout=slave, stderr=subprocess.DEVNULL, env=env)
        os.close(slave)
        reader, drawn = drain_terminal(master)
        read = [0]

        def display() -> list[str]:
            chunk = bytes(drawn[read[0]:])
            read[0] += len(chunk)
            fed.feed(chunk)
            return [line.rstrip() for line in terminal.display]

        detector = Publisher(connect(ctx, zmq.PUB, service.events_endpoint, wait_s=5.0))
        seq = iter(range(1_000_000))
        sent = [0.0]

        def send() -> None:
            """Every half second (a detector's heartbeat), a heartbeat of each made-up id and of ``kitchen``, whose
            key-step is the demo's mistake: every stream stays live."""
            if time.monotonic() - sent[0] < 0.5:
                return
            sent[0] = time.monotonic()
            now = time.time()
            for k in range(40):
                detector.send(beat(f"bogus{k:02d}", next(seq), timestamp=now))
            detector.send(keystep(history=(2,), seq=next(seq), stream_id="kitchen", timestamp=now))
            detector.send(beat("kitchen", next(seq), history=(2,), timestamp=now))

        def summed_up(screen: list[str]) -> int | None:
            """The streams the last frame left out (None: no summary row with the alert under it)."""
            counts = [int(match[1]) for line in screen if (match := MORE.match(line)) and match[2].endswith(" live")]
            alerted = any(line.endswith(ALERT_LINE) and "kitchen" in line for line in screen)
            return counts[-1] if counts and alerted else None

        try:
            assert wait_for(lambda: summed_up(display()) is not None, 60, step=send), "\n".join(display())
            screen = display()
            first = summed_up(screen)
            assert first is not None and first < 41, "\n".join(screen)
            assert row_ids(screen)[0] == "kitchen", "\n".join(screen)
            set_size(master, 80, 40)
            terminal.resize(40, 80)

            def more_room() -> bool:
                return (left := summed_up(display())) is not None and left < first

            assert wait_for(more_room, 30, step=send), "\n".join(display())
        finally:
            view.terminate()
            view.wait(30)
            reader.join(30)
            os.close(master)
