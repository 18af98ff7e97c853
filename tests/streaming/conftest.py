"""Fixtures of the streaming tests: a ZeroMQ context (the demo-video cache, `demo_cache`, is in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    """A ZeroMQ context for one test, destroyed afterwards with LINGER 0 (its sockets closed, nothing waits)."""
    context = zmq.Context()
    yield context
    context.destroy(linger=0)
