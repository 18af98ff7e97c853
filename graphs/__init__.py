"""Task graphs: the `TaskGraph` type and its JSON file, post-processing, pre-condition checking.

Ground floor of the project: numpy and networkx only, never torch. The names below load on first use
(`graphs.common.lazy_exports`): a command that imports `graphs.common.errors` for its parser does not pay for numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphs.common.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from graphs.checker import PreconditionChecker, StepVerdict, precondition_violations
    from graphs.common.errors import InputError
    from graphs.task_graph import END, START, TaskGraph, load_graph, save_graph

__all__ = [
    "END",
    "START",
    "InputError",
    "PreconditionChecker",
    "StepVerdict",
    "TaskGraph",
    "load_graph",
    "precondition_violations",
    "save_graph",
]
__getattr__ = lazy_exports(__name__, {
    "graphs.checker": ("PreconditionChecker", "StepVerdict", "precondition_violations"),
    "graphs.common.errors": ("InputError",),
    "graphs.task_graph": ("END", "START", "TaskGraph", "load_graph", "save_graph"),
})
