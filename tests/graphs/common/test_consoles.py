"""The console results tables are printed on: whole rows in a log or a pipe, the terminal's width on a terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from graphs.common.consoles import table_console

# A results table of 12 columns (bench-live's is of that kind), wider than the 80 columns rich assumes for a file.
WIDE_TABLE = """
from rich.console import Console
from rich.table import Table
from graphs.common.consoles import table_console
table = Table(title="results")
for k in range(12):
    table.add_column(f"column {k}", justify="right")
table.add_row(*(f"{k}.{k}" for k in range(12)))
table.add_row(*(f"{10 * k}.5" for k in range(12)))
table_console(Console()).print(table)
print("a plain line after it")
"""


def test_a_table_printed_to_a_log_file_keeps_each_row_on_one_line(tmp_path: Path) -> None:
    # A log got rich's 80 columns, so each row of a wide table wrapped over several lines.
    log = tmp_path / "bench.log"
    with log.open("w") as out:  # a real file as stdout: not a terminal
        subprocess.run([sys.executable, "-c", WIDE_TABLE], stdout=out, check=True, timeout=120,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm"})
    lines = log.read_text().splitlines()
    rows = [line for line in lines if "0.0" in line or "10.5" in line]
    assert len(rows) == 2 and all("11.11" in row or "110.5" in row for row in rows), lines
    width = max(len(line) for line in lines)
    assert width > 80 and all(len(line) == width for line in lines if line.startswith(("┏", "│", "└")))
    assert lines[-1] == "a plain line after it"  # nothing padded to the console's width


def test_a_terminal_keeps_its_own_console_and_width() -> None:
    terminal = Console(file=io.StringIO(), force_terminal=True, width=90)
    assert table_console(terminal) is terminal
