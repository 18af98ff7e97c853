"""Speed of the wire format on its largest message: a heartbeat carrying a full 4,096-step history.

Usage::

    python benchmarks/wire_speed.py [--repeats 200]

Every detector message carries the stream's whole history (the Clone pattern), so a long stream sends thousands of
step ids twice a second and the checker decodes and validates each one. Prints the milliseconds of one encode, one
decode and one round trip (median and p99 over ``--repeats``). Target: a round trip under 2 ms (it was about 8 ms
before encoding stopped deep-copying the history and decoding checked it in C).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np
from rich.console import Console
from rich.table import Table

from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.settings_files import COUNT, bounded_option
from streaming.messages import MAX_HISTORY, Heartbeat, decode, encode


def timed(work: Callable[[], object], repeats: int) -> np.ndarray:
    """Milliseconds of each of ``repeats`` calls of ``work()``."""
    out = np.empty(repeats)
    for k in range(repeats):
        start = time.perf_counter()
        work()
        out[k] = (time.perf_counter() - start) * 1000
    return out


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Time encode, decode and both on a full-history heartbeat, and print one table."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=bounded_option(COUNT), default=200, help="calls timed per measure")
    args = parser.parse_args(argv)
    history = (tuple(range(1, 7)) * (MAX_HISTORY // 6 + 1))[:MAX_HISTORY]
    beat = Heartbeat("cam0", 4, 2.0, "s1", history, None, 120, 2, 29.5, False)
    frames = encode(beat)
    assert decode(frames) == beat
    table = Table(title=f"wire format, heartbeat with a {len(history)}-step history ({len(frames[1])} bytes)")
    for column in ("measure", "median, ms", "p99, ms", "target"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    measures: tuple[tuple[str, Callable[[], object], str], ...] = (
        ("encode", lambda: encode(beat), ""),
        ("decode (validated)", lambda: decode(frames), ""),
        ("encode + decode", lambda: decode(encode(beat)), "< 2"),
    )
    for name, work, target in measures:
        ms = timed(work, args.repeats)
        table.add_row(name, f"{np.median(ms):.3f}", f"{np.percentile(ms, 99):.3f}", target)
    table_console(Console()).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
