"""Names that break a terminal or rich markup, and the check that a rendering shows them as plain text.

Import it as `from tests.hostile_text import HOSTILE_NAMES, assert_shown_safely` (like `tests.cli_errors`).
"""

from __future__ import annotations

from graphs.common.safe_text import printable

# A rich closing tag (raised MarkupError inside the live view), fake markup, a clear-screen sequence, an OSC window
# title, a C1 control sequence introducer, a bidirectional override and a newline.
HOSTILE_NAMES: tuple[str, ...] = (
    "[/]",
    "[bold red]fake alert[/bold red]",
    "\x1b[2Jwiped",
    "\x1b]0;pwned\x07title",
    "\x9b2Jc1",
    "\u202eevil",
    "two\nlines",
)
RAW_SEQUENCES: tuple[str, ...] = ("\x1b[2J", "\x1b]0;", "\x9b", "\u202e", "two\nlines")


def assert_shown_safely(output: str, names: tuple[str, ...] = HOSTILE_NAMES) -> None:
    """Every name appears as its `printable` form, and no raw sequence of them reached the output.

    Args:
        output: what a command or a rendering wrote (with rich's own styling codes, if any).
        names: the names it was given.
    """
    for raw in RAW_SEQUENCES:
        assert raw not in output, f"raw {raw!r} reached the output"
    for name in names:
        assert printable(name) in output.replace("\n", ""), f"{printable(name)!r} is not shown"
