"""The console a command prints its results tables on.

On a terminal rich fits a table to the terminal's width. A log file or a pipe has no width, and rich then assumes 80
columns: every row of a wide table wrapped over several lines, and a log of ``tgml bench-live`` or
``recognition-train`` could no longer be read or grepped row by row. There, lines are printed as wide as they are.
"""

from __future__ import annotations

from typing import Final

from rich.console import Console

# Wider than any table or line a command prints: rich pads nothing to the console's width (no table here expands),
# so each line of a log is exactly as long as its content.
UNWRAPPED: Final = 10_000


def table_console(console: Console | None = None) -> Console:
    """``console`` (default: stdout's) where it is a terminal; else a console on the same file that wraps nothing."""
    console = console if console is not None else Console()
    return console if console.is_terminal else Console(width=UNWRAPPED, file=console.file)
