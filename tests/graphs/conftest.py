"""Fixtures shared by the graphs tests."""

from __future__ import annotations

import numpy as np
import pytest

from graphs import END, START, TaskGraph


@pytest.fixture
def tent_graph() -> TaskGraph:
    """A small tent graph with weights, of the shape training produces.

    unpack(10) <- START; open_bag(13) <- START; spread(11) <- {10, 13}; stake(12) <- 11; END <- 12;
    never_seen(14) has no edge at all (a step removed in training).
    """
    ids = (10, 11, 12, 13, 14)
    names = ("unpack", "spread", "stake", "open_bag", "never_seen")
    idx = {START: 0, 10: 1, 11: 2, 12: 3, 13: 4, 14: 5, END: 6}
    adj = np.zeros((7, 7), dtype=bool)
    for step, req in [(10, START), (13, START), (11, 10), (11, 13), (12, 11), (END, 12)]:
        adj[idx[step], idx[req]] = True
    weights = np.random.default_rng(0).random((7, 7))
    return TaskGraph(ids, names, adj, weights, scenario="tent", info={"method": "test"})
