"""Fixtures of the streaming tests: a per-session cache for the rendered demo videos, a ZeroMQ context."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq


@pytest.fixture(scope="session")
def demo_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point ``$MISTAKE_CACHE`` at a session folder so the demo videos render once per test run."""
    path = tmp_path_factory.mktemp("demo-cache")
    before = os.environ.get("MISTAKE_CACHE")
    os.environ["MISTAKE_CACHE"] = str(path)
    yield path
    if before is None:
        os.environ.pop("MISTAKE_CACHE", None)
    else:
        os.environ["MISTAKE_CACHE"] = before


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    """A ZeroMQ context for one test, destroyed afterwards with LINGER 0 (its sockets closed, nothing waits)."""
    context = zmq.Context()
    yield context
    context.destroy(linger=0)
