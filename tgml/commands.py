"""The installed commands of this package (``[project.scripts]``): each imports its module only once it runs."""

from __future__ import annotations

from typing import NoReturn

from graphs.common.errors import run_command


def tgml(argv: list[str] | None = None) -> NoReturn:
    """``tgml`` (`tgml.tgml_cli`)."""
    run_command("tgml.tgml_cli", argv)


def prego_bench(argv: list[str] | None = None) -> NoReturn:
    """``prego-bench`` (`tgml.bench.prego_bench_cli`)."""
    run_command("tgml.bench.prego_bench_cli", argv)
