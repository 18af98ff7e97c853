"""The installed command of this package (``[project.scripts]``): it imports its module only once it runs."""

from __future__ import annotations

from typing import NoReturn

from graphs.common.errors import run_command


def recognition_train(argv: list[str] | None = None) -> NoReturn:
    """``recognition-train`` (`recognition.recognition_train_cli`)."""
    run_command("recognition.recognition_train_cli", argv)
