"""What a rich renderable looks like in a terminal of a given width, as plain text (the tables' layout tests).

Import it as `from tests.rendered import drawn` (pytest runs with `--import-mode=importlib`).
"""

from __future__ import annotations

from rich.console import Console


def drawn(renderable: object, width: int) -> str:
    """``renderable`` printed on a console ``width`` columns wide, without colours, as text."""
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()
