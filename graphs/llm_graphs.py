"""The LLM baseline: task graphs that a large language model wrote for the CaptainCook4D procedures.

The TGML paper (Seminara et al., NeurIPS 2024) compares with graphs that Llama-3.1-405B-Instruct produced from
each procedure's step list; the authors publish them as one networkx multi-line adjacency list per procedure,
``graph_<procedure>.adjlist``, with ``;`` as delimiter and ``#`` comment lines. Nodes are ``START``, ``END`` and
``"<id>_<step name>"``, where the number is a dataset-wide id, not the procedure's taxonomy id: a node is matched to
its step by the text after the first ``_``, which must equal the step's name exactly. An edge ``u -> v`` means *v is
a pre-condition of u*, the orientation of `graphs.task_graph.TaskGraph`, so edges are copied as they are. A step
the file never names has no edge. These graphs exist for CaptainCook4D only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np

from graphs.common.errors import InputError
from graphs.common.files import read_text_file
from graphs.task_graph import END, START, TaskGraph

if TYPE_CHECKING:  # networkx loads in the functions that run a graph algorithm: its import costs 0.1 s
    import networkx as nx  # that every command reading this module's settings would pay

LLM_FOLDER: Final = "llm_task_graphs"
METHOD_NAME: Final = "llm"
SUFFIX: Final = ".adjlist"


def llm_graph_path(folder: str | Path, scenario: str) -> Path:
    """Where the LLM graph of a procedure lies: ``<folder>/graph_<scenario>.adjlist``."""
    return Path(folder) / f"graph_{scenario}{SUFFIX}"


def parse_adjacency_list(text: str, source: str) -> nx.DiGraph:
    """Parse a ``;``-delimited networkx multi-line adjacency list.

    Args:
        text: the file's content.
        source: file name for error messages.

    Returns:
        The directed graph as written (node names are strings).
    """
    import networkx as nx

    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    try:
        return nx.parse_multiline_adjlist(iter(lines), delimiter=";", create_using=nx.DiGraph)
    except (TypeError, ValueError, IndexError, StopIteration) as err:  # what networkx raises on broken lines
        raise InputError(f"{source}: not a ';'-delimited multi-line adjacency list ({err})") from None


def step_of_node(node: str, by_name: dict[str, int], source: str, scenario: str) -> int | str:
    """The taxonomy id (or START / END) of an LLM graph node ``"<id>_<step name>"``.

    Args:
        node: node name as written in the file.
        by_name: step name -> taxonomy id of the procedure.
        source: file name for error messages.
        scenario: procedure name for error messages.

    Returns:
        The step id, or the string START / END.
    """
    if node in (START, END):
        return node
    _, sep, name = node.partition("_")
    if not sep or name not in by_name:
        raise InputError(f"{source}: node {node!r} matches no step of procedure {scenario!r} "
                         "(expected '<id>_<step name>' with the step's exact name)")
    return by_name[name]


def llm_adjacency(
    path: str | Path, step_ids: Sequence[int], step_names: Sequence[str], scenario: str = ""
) -> np.ndarray:
    """Read one LLM graph file as an adjacency matrix over a procedure's taxonomy, exactly as written.

    The published LLM graphs are scored as the model wrote them, and one of them (``graph_ramen``) holds a
    two-step cycle, so this reader keeps cycles; `llm_task_graph` makes a `TaskGraph` (a DAG) of the acyclic ones.

    Args:
        path: the ``graph_<procedure>.adjlist`` file.
        step_ids: the procedure's taxonomy ids, in matrix order.
        step_names: their names (the file's nodes are matched to them).
        scenario: procedure name for messages.

    Returns:
        bool ``(n+2, n+2)`` adjacency in the `TaskGraph` layout (``[i, j]``: node ``j`` is a pre-condition of ``i``).
    """
    path = Path(path)
    graph = parse_adjacency_list(read_text_file(path, f"LLM task graph of procedure {scenario!r}"), str(path))
    if graph.number_of_edges() == 0:  # scored, it was "0 of 0 edges" as if the model had answered
        raise InputError(f"{path}: no edge (an empty or commented-out adjacency list); an LLM task graph names at "
                         "least one pre-condition")
    by_name = {name: int(sid) for sid, name in zip(step_ids, step_names, strict=True)}
    position: dict[int | str, int] = {START: 0, END: len(step_ids) + 1}
    position.update({int(s): k + 1 for k, s in enumerate(step_ids)})
    index = {str(node): position[step_of_node(str(node), by_name, str(path), scenario)] for node in graph.nodes}
    if len(set(index.values())) != len(index):  # two ids with one step name would merge silently
        seen: dict[int, str] = {}
        twice = next(node for node in index if seen.setdefault(index[node], node) != node)
        raise InputError(f"{path}: nodes {seen[index[twice]]!r} and {twice!r} name the same step")
    adjacency = np.zeros((len(step_ids) + 2, len(step_ids) + 2), dtype=bool)
    edges = np.array([(index[str(u)], index[str(v)]) for u, v in graph.edges], dtype=np.int64).reshape(-1, 2)
    adjacency[edges[:, 0], edges[:, 1]] = True
    return adjacency


def llm_task_graph(
    path: str | Path, step_ids: Sequence[int], step_names: Sequence[str], scenario: str = ""
) -> TaskGraph:
    """Read one LLM graph file as a `TaskGraph` (refused, naming the file, when the model wrote a cycle).

    Args:
        path: the ``graph_<procedure>.adjlist`` file.
        step_ids: the procedure's taxonomy ids, in matrix order.
        step_names: their names.
        scenario: procedure name stored in the graph.

    Returns:
        The binary `TaskGraph` (no weights); ``info`` names the method and the source file.
    """
    adjacency = llm_adjacency(path, step_ids, step_names, scenario)
    info = {"method": METHOD_NAME, "source": Path(path).name}
    try:
        return TaskGraph(tuple(step_ids), tuple(step_names), adjacency, None, scenario, info)
    except InputError as err:
        raise InputError(f"{path}: {err}") from None
