"""Fixtures shared by the tgml tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tgml.bench import prego


@pytest.fixture(scope="module")
def epic(data_dir: Path) -> prego.BenchData:
    """EPIC-Tent-O as the benchmark loads it (splits and segments), once per test module."""
    return prego.load_dataset(prego.resolve_data(data_dir, ["epic-tent-o"], segments=True), "epic-tent-o")
