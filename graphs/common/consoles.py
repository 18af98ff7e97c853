"""The console a command prints its results tables on.

On a terminal rich fits a table to the terminal's width. A log file or a pipe has no width, and rich then assumes 80
columns: every row of a wide table wrapped over several lines, and a log of ``tgml bench-live`` or
``recognition-train`` could no longer be read or grepped row by row. There, lines are printed as wide as they are.

rich is imported only when a console is made, never with `graphs`: the ground floor loads numpy and networkx only
(`tests/graphs/test_ground_floor.py`), so the console is typed here by what this module reads of it.
"""

from __future__ import annotations

from typing import IO, Final, Protocol, TypeVar, cast

# Wider than any table or line a command prints: rich pads nothing to the console's width (no table here expands),
# so each line of a log is exactly as long as its content.
UNWRAPPED: Final = 10_000


class _Console(Protocol):
    """What `table_console` reads of a ``rich.console.Console``."""

    @property
    def is_terminal(self) -> bool: ...

    @property
    def file(self) -> IO[str]: ...


ConsoleT = TypeVar("ConsoleT", bound=_Console)


def table_console(console: ConsoleT) -> ConsoleT:
    """``console`` where it is a terminal; else a rich console on the same file that wraps nothing."""
    if console.is_terminal:
        return console
    from rich.console import Console

    return cast(ConsoleT, Console(width=UNWRAPPED, file=console.file))
