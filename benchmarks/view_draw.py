"""How long the live view takes to draw one frame, by how many steps a stream's status lists.

The view redraws 8 times a second in the thread that receives the checker's messages: a frame that takes longer
than that leaves messages waiting. A status may list up to 2048 steps (`streaming.messages.MAX_STEPS`).

    python benchmarks/view_draw.py [--widths 80,200] [--steps 20,200,2048] [--repeats 5] [--streams 1] [--height 0]
        [--alerts 0]

``--streams N`` adds N-1 stale streams of one step each (a flood of made-up ids on the checker's socket) and
``--height H`` draws the live frame fitted to a terminal H lines high, as the view does (0: the frame whole, every
row drawn, as before the view fitted its frames); ``--alerts N`` gives the stream N alerts (up to the 12 the view keeps:
with ``--height``, an alert log taller than the screen is fitted too). Prints one line per width and step count: the
median milliseconds of a frame.
"""

from __future__ import annotations

import io
import statistics
import time

from rich.console import Console

from graphs.common.command_line import ArgumentParser
from graphs.common.errors import exit_on_input_error
from graphs.common.settings_files import COUNT, Bound, bounded_option
from streaming.messages import Alert, Status
from streaming.view.render import render
from streaming.view.state import ALERT_LOG, MAX_VIEW_STREAMS, ViewState


def status(stream_id: str, steps: int) -> Status:
    """A live status listing ``steps`` done and allowed steps."""
    return Status(stream_id=stream_id, seq=1, timestamp=1.0, run="r", done=tuple(range(steps)),
                  allowed=tuple(range(steps)), current=None, alerts=0, frames=100, dropped=0, fps=10.0, gaps=0,
                  ended=False, lost=False, allowed_scores=(0.0,) * steps, rule="binary")


def alert(k: int) -> Alert:
    """The ``k``-th alert on ``cam0``: step 1 done before step 0."""
    return Alert("cam0", k, 1.0, f"cam0#{k}", "r", 1, "step_1", k, (0,), ("step_0",), False, 0.9, False, 0, "step_0",
                 1.0, "binary", video_time=float(k))


def frame_ms(steps: int, width: int, repeats: int, streams: int = 1, height: int = 0, alerts: int = 0) -> float:
    """Median milliseconds to draw the view of one stream whose status lists ``steps`` done and allowed steps, and
    ``streams - 1`` stale ones of one step; ``height``: fitted to a terminal that high (0: whole); ``alerts``: the
    stream's alerts."""
    state = ViewState(names={k: f"step_{k}" for k in range(steps)})
    state.listening_since = 0.0
    for k in range(streams - 1):
        state.apply(status(f"flood{k:03d}", 1), received_at=0.0)
    for k in range(alerts):
        state.apply(alert(k + 1), received_at=60.0)
    state.apply(status("cam0", steps), received_at=60.0)
    state.now = 60.0
    times = []
    for _ in range(repeats):
        console = Console(width=width, height=max(height, 1), file=io.StringIO(), color_system=None)
        started = time.perf_counter()
        console.print(render(state, height=height or None))
        times.append(1000 * (time.perf_counter() - started))
    return statistics.median(times)


@exit_on_input_error
def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=bounded_option(Bound(20, 10000), listed=True), default=[80, 200])
    parser.add_argument("--steps", type=bounded_option(Bound(1, 10**5), listed=True), default=[20, 200, 2048])
    parser.add_argument("--repeats", type=bounded_option(COUNT), default=5)
    parser.add_argument("--streams", type=bounded_option(Bound(1, MAX_VIEW_STREAMS)), default=1)
    parser.add_argument("--height", type=bounded_option(Bound(0, 10000)), default=0)
    parser.add_argument("--alerts", type=bounded_option(Bound(0, ALERT_LOG)), default=0)
    args = parser.parse_args()
    for width in args.widths:
        for steps in args.steps:
            took = frame_ms(steps, width, args.repeats, args.streams, args.height, args.alerts)
            print(f"width={width} steps={steps} frame_ms={took:.1f}")


if __name__ == "__main__":
    main()
