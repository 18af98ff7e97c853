"""Task graphs: the `TaskGraph` type and its JSON file, post-processing, pre-condition checking.

Ground floor of the project: numpy and networkx only, never torch.
"""

from graphs.checker import PreconditionChecker, StepVerdict, precondition_violations
from graphs.errors import InputError
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
