"""The installed commands of this package (``[project.scripts]``): each imports its module only once it runs."""

from __future__ import annotations

from typing import NoReturn

from graphs.common.errors import run_command


def stream_detect(argv: list[str] | None = None) -> NoReturn:
    """``stream-detect`` (`streaming.stream_detect_cli`)."""
    run_command("streaming.stream_detect_cli", argv)


def recognition_features(argv: list[str] | None = None) -> NoReturn:
    """``recognition-features`` (`streaming.offline.features_cli`)."""
    run_command("streaming.offline.features_cli", argv)
