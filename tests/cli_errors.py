"""The one check every command's bad-input test makes: exit status 2 and a single `error: ...` line, no traceback.

Import it as `from tests.cli_errors import cli_error` (pytest runs with `--import-mode=importlib`, like
`tests.streaming.helpers`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest


def cli_error(main: Callable[[list[str]], object], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run a command's ``main(argv)`` that must refuse its input, and check how it refuses.

    Args:
        main: the command's entry point (``tgml.tgml_cli.main``, ``streaming.stream_detect_cli.main``, ...).
        argv: the command line, without the program name.
        capsys: the test's capture fixture; what was written to stderr before the call must have been read.

    Returns:
        The stderr line, stripped: it starts with ``error: ``, is exactly one line and holds no traceback,
        and the command exited with status 2.
    """
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2, f"exit status {exit_info.value.code!r}, expected 2"
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: "), f"stderr does not start with 'error: ': {err!r}"
    assert "\n" not in err and "Traceback" not in err, f"stderr is not one line: {err!r}"
    return err
