"""Shared helpers of the streaming tests: the demo-procedure task graph and polling with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from graphs.task_graph import END, START, TaskGraph
from streaming.demo.procedure import PRECONDITIONS, SCENARIO, STEP_IDS, STEP_NAMES


def tea_graph() -> TaskGraph:
    """The demo procedure's ground-truth graph (see `streaming.demo.procedure`)."""
    nodes = [START, *STEP_IDS, END]
    index = {n: i for i, n in enumerate(nodes)}
    adj = np.zeros((len(nodes), len(nodes)), dtype=bool)
    needed: set[int] = set()
    for step, reqs in PRECONDITIONS.items():
        for req in reqs or (START,):
            adj[index[step], index[req]] = True
        needed.update(reqs)
    for step in STEP_IDS:
        if step not in needed:
            adj[index[END], index[step]] = True
    return TaskGraph(STEP_IDS, STEP_NAMES, adj, scenario=SCENARIO)


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0, step: Callable[[], object] | None = None) -> bool:
    """Call ``step`` repeatedly until ``predicate()`` holds or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if step is not None:
            step()
        if predicate():
            return True
        if step is None:
            time.sleep(0.01)
    return predicate()
