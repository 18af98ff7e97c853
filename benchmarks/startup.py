"""Start-up time of the commands that need no model: every ``--help`` page, ``tgml show`` and ``tgml eval``.

Usage::

    python benchmarks/startup.py [--runs 7] [--only tgml]

Each command runs as a whole process (interpreter start, imports, parsing, output), ``--runs`` times after one
warm-up run, and the median and slowest wall times are printed. Target: every one under 0.3 s on a quiet 2-core
machine; importing torch alone takes about 1.4 s there, so a command over the target has most likely loaded it
(``tests/test_startup.py`` checks that none does). The console scripts next to this interpreter are run (those of
the virtual environment it belongs to), else ``python -m`` of the command's module. The packages' bytecode is
compiled first, as ``pip install`` does: where ``PYTHONDONTWRITEBYTECODE`` is set an editable checkout has none, and
every command compiled its modules anew each time (0.37-0.45 s where it takes 0.25-0.29 s compiled).
"""

from __future__ import annotations

import compileall
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import exit_on_input_error
from graphs.common.settings_files import Bound, bounded_option

# The commands' own lists: a list written here had left out bench-live, captaincook-labels and dashboard
from streaming.stream_detect_cli import SUBCOMMANDS as STREAM_DETECT_SUBCOMMANDS
from tgml.tgml_cli import SUBCOMMANDS as TGML_SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[1]
GRAPH = str(ROOT / "streaming" / "demo" / "demo_graph.json")
TARGET_S = 0.3
MODULES = {
    "tgml": "tgml.tgml_cli",
    "prego-bench": "tgml.bench.prego_bench_cli",
    "recognition-train": "recognition.recognition_train_cli",
    "recognition-features": "streaming.offline.features_cli",
    "stream-detect": "streaming.stream_detect_cli",
}
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("tgml", "show", GRAPH),
    ("tgml", "eval", "--pred", GRAPH, "--gt", GRAPH),
    ("tgml", "--help"),
    *(("tgml", c, "--help") for c in TGML_SUBCOMMANDS),
    ("prego-bench", "--help"),
    *(("prego-bench", c, "--help") for c in ("prepare", "select", "select-checker", "replay")),
    ("recognition-train", "--help"),
    ("recognition-features", "--help"),
    ("stream-detect", "--help"),
    *(("stream-detect", c, "--help") for c in STREAM_DETECT_SUBCOMMANDS),
)


def command_line(words: tuple[str, ...]) -> list[str]:
    """The process to start: the console script beside this interpreter, else ``python -m`` of its module."""
    script = Path(sys.executable).parent / words[0]
    if script.is_file():
        return [str(script), *words[1:]]
    return [sys.executable, "-m", MODULES[words[0]], *words[1:]]


def wall_times(argv: list[str], runs: int) -> list[float]:
    """Seconds from start to exit of ``runs`` runs of ``argv`` (after one warm-up run), output discarded."""
    times = []
    for k in range(runs + 1):
        started = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, timeout=120)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"error: {' '.join(argv)} exited with {done.returncode}: {done.stderr.decode()[-300:]}")
        if k:
            times.append(elapsed)
    return times


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Time every command and print one table."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=bounded_option(Bound(1, 1000)), default=7,
                        help="timed runs per command (after one warm-up run)")
    parser.add_argument("--only", choices=list(MODULES), help="time one command's pages only")
    args = parser.parse_args(argv)
    for package in ("graphs", "tgml", "recognition", "streaming"):
        compileall.compile_dir(ROOT / package, quiet=1)
    table = Table(title=f"start-up, whole process, {args.runs} runs (target < {TARGET_S} s)")
    for column in ("command", "median, s", "slowest, s", ""):
        table.add_column(column, justify="left" if column == "command" else "right")
    over = 0
    for words in COMMANDS:
        if args.only and words[0] != args.only:
            continue
        times = wall_times(command_line(words), args.runs)
        median = statistics.median(times)
        over += median >= TARGET_S
        shown = " ".join("GRAPH" if w == GRAPH else w for w in words)
        table.add_row(shown, f"{median:.3f}", f"{max(times):.3f}", "over" if median >= TARGET_S else "")
    table_console(Console()).print(table)
    print(f"{over} command(s) over {TARGET_S} s" if over else f"every command under {TARGET_S} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
