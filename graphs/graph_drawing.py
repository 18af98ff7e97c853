"""Task-graph rendering: Graphviz DOT text (SVG/PNG through the ``dot`` program) and a rich terminal view.

Both views draw edges in execution order (``requirement -> step``, START at the top), the way people read a
recipe; the file format and `TaskGraph` keep the opposite, "step needs requirement", orientation.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import networkx as nx
from rich.console import Group
from rich.table import Table
from rich.text import Text

from graphs.errors import InputError
from graphs.files import atomic_path, check_output, write_text
from graphs.task_graph import END, START, Node, TaskGraph

IMAGE_FORMATS = ("svg", "png", "pdf")


def _dot_id(node: Node) -> str:
    return f'"{node}"' if node in (START, END) else f'"k{node}"'


def _dot_label(text: str, width: int = 28) -> str:
    wrapped = "\\n".join(textwrap.wrap(text, width)) or text
    return wrapped.replace('"', '\\"')


def to_dot(graph: TaskGraph, wrap: int = 28) -> str:
    """Graphviz DOT text of the binary graph.

    Args:
        graph: the task graph.
        wrap: wrap step names at this many characters.

    Returns:
        DOT source; removed (never seen) steps are drawn dashed and grey, without edges.
    """
    removed = set(graph.removed_steps)
    title = graph.scenario or "task graph"
    lines = [
        "digraph task_graph {",
        f'  label="{_dot_label(title, 80)}"; labelloc=t; rankdir=TB;',
        '  node [shape=box, style="rounded", fontname="Helvetica", fontsize=10];',
        f'  {_dot_id(START)} [label="START", shape=oval];',
        f'  {_dot_id(END)} [label="END", shape=oval];',
    ]
    for step, name in zip(graph.step_ids, graph.step_names, strict=True):
        style = ', style="rounded,dashed", color=grey, fontcolor=grey' if step in removed else ""
        lines.append(f'  {_dot_id(step)} [label="{step}: {_dot_label(name, wrap)}"{style}];')
    for dependent, requires in graph.edges():
        lines.append(f"  {_dot_id(requires)} -> {_dot_id(dependent)};")  # drawn in execution order
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_rendering(graph: TaskGraph, path: str | Path) -> Path:
    """Write the graph as DOT (``.dot``/``.gv``) or, when Graphviz ``dot`` is installed, as an image.

    Args:
        graph: the task graph.
        path: output file; the suffix picks the format (``.dot``, ``.gv``, ``.svg``, ``.png``, ``.pdf``).

    Returns:
        The written path.
    """
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    text = to_dot(graph)
    if fmt in ("dot", "gv"):
        return write_text(check_output(path, "rendering"), text, "rendering")
    if fmt not in IMAGE_FORMATS:
        raise InputError(f"{path}: unknown output format {fmt!r} (use .dot, .gv, .svg, .png or .pdf)")
    dot = shutil.which("dot")
    if dot is None:
        raise InputError(f"{path}: Graphviz 'dot' is not installed; write a .dot file instead")
    check_output(path, "rendering")
    with atomic_path(path, suffix=path.suffix) as tmp:
        done = subprocess.run([dot, f"-T{fmt}", "-o", str(tmp)], input=text, text=True, capture_output=True)
        if done.returncode != 0:
            raise InputError(f"{path}: Graphviz failed: {done.stderr.strip().splitlines()[-1:]}")
    return path


def terminal_view(graph: TaskGraph) -> Group:
    """A rich renderable: one table row per step, grouped by execution level, with its pre-conditions.

    Args:
        graph: the task graph.

    Returns:
        A rich `Group` (title line + table) ready for ``console.print``.
    """
    execution = graph.to_networkx().reverse(copy=False)  # requirement -> step
    level = {node: depth for depth, layer in enumerate(nx.topological_generations(execution)) for node in layer}
    removed = set(graph.removed_steps)
    table = Table(show_lines=False, header_style="bold")
    table.add_column("level", justify="right")
    table.add_column("id", justify="right")
    table.add_column("step")
    table.add_column("requires")
    order = sorted(graph.nodes, key=lambda node: (node in removed, level[node], graph.index(node)))
    for node in order:
        if node in removed:
            table.add_row("-", str(node), Text(graph.name_of(node), style="dim"), Text("not seen in training", "dim"))
            continue
        needs = sorted(graph.preconditions(node), key=graph.index)
        req = ", ".join(str(x) for x in needs) if needs else "-"
        label = Text(graph.name_of(node), style="bold" if node in (START, END) else "")
        table.add_row(str(level[node]), "" if node in (START, END) else str(node), label, req)
    method = graph.info.get("method", "")
    head = Text.assemble(
        (graph.scenario or "task graph", "bold cyan"),
        f"  {graph.n_steps} steps, {len(graph.edges())} edges",
        f", {len(removed)} removed" if removed else "",
        f"  ({method})" if method else "",
    )
    return Group(head, table)
