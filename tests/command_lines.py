"""Command lines for tests: options with defaults that a test's own options replace.

Every command refuses an option of one value given twice (`graphs.common.command_line.ArgumentParser`), so a test that
changes one of a helper's options must replace it, not repeat it. Import it as
`from tests.command_lines import with_options`.
"""

from __future__ import annotations

from collections.abc import Mapping


def with_options(defaults: Mapping[str, str], *extra: str) -> list[str]:
    """``defaults`` as ``[option, value, ...]``, less each option that ``extra`` gives, then ``extra``.

    Args:
        defaults: ``{option: value}`` for options that take one value.
        extra: the test's own arguments (options, their values, flags).

    Returns:
        The command line's arguments.
    """
    kept = {option: value for option, value in defaults.items() if option not in extra}
    return [*(item for pair in kept.items() for item in pair), *extra]
