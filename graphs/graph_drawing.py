"""Task-graph drawing: Graphviz DOT text, and SVG/PNG/PDF through the ``dot`` program when it is installed.

The drawing shows edges in execution order (``requirement -> step``, START at the top), the way people read a
recipe; the file format and `TaskGraph` keep the opposite, "step needs requirement", orientation. The rich
terminal table of ``tgml show`` is `tgml.graph_table` (this floor stays numpy + networkx only).
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Final

from graphs.common.errors import InputError
from graphs.common.files import atomic_path, check_output, write_text
from graphs.common.safe_text import printable, shortened
from graphs.task_graph import END, START, Node, TaskGraph

IMAGE_FORMATS = ("svg", "png", "pdf")


def _dot_id(node: Node) -> str:
    return f'"{node}"' if node in (START, END) else f'"k{node}"'


def _dot_label(text: str, width: int = 28) -> str:
    """``text`` as the inside of a DOT string: printable (a control character escaped, which Graphviz would copy
    into SVG that no XML parser reads), wrapped at ``width``, backslashes and quotes escaped (a name ending in a
    backslash would otherwise end the string), and ``&`` (Graphviz reads HTML entities in labels: ``&#x1b;`` too)."""
    lines = textwrap.wrap(printable(text), width) or [printable(text)]
    return "\\n".join(line.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;") for line in lines)


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


def check_rendering_format(path: str | Path) -> str:
    """The format a rendering's ending asks for, refused when unknown or needing a Graphviz that is not installed.

    Raises:
        InputError: naming the file and what to use instead.
    """
    return _format_and_dot(path)[0]


def _format_and_dot(path: str | Path) -> tuple[str, str | None]:
    """``(format, the dot program)``: the program for an image format, None for DOT text (`check_rendering_format`)."""
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt in ("dot", "gv"):
        return fmt, None
    if fmt not in IMAGE_FORMATS:
        raise InputError(f"{path}: unknown output format {fmt!r} (use .dot, .gv, .svg, .png or .pdf)")
    dot = shutil.which("dot")
    if dot is None:
        raise InputError(f"{path}: Graphviz 'dot' is not installed; write a .dot file instead")
    return fmt, dot


def write_rendering(graph: TaskGraph, path: str | Path) -> Path:
    """Write the graph as DOT (``.dot``/``.gv``) or, when Graphviz ``dot`` is installed, as an image.

    Args:
        graph: the task graph.
        path: output file; the suffix picks the format (``.dot``, ``.gv``, ``.svg``, ``.png``, ``.pdf``).

    Returns:
        The written path.
    """
    path = Path(path)
    fmt, dot = _format_and_dot(path)
    text = to_dot(graph)
    if dot is None:
        return write_text(check_output(path, "rendering"), text, "rendering")
    check_output(path, "rendering")
    with atomic_path(path, suffix=path.suffix) as tmp:
        try:
            done = run_dot(dot, text, fmt, tmp, RENDER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise InputError(f"{path}: Graphviz did not finish within {RENDER_TIMEOUT_S:g} s") from None
        except OSError as err:
            raise InputError(f"{path}: cannot run Graphviz ({printable(err)})") from None
        if done.returncode != 0:
            raise InputError(f"{path}: Graphviz failed (exit {done.returncode}: {dot_said(done)})")
    return path


# How long Graphviz may take: a page waits for its drawing and lists the steps as text past its limit; `tgml show`
# asked for the drawing, which on a dense 1024-step graph took 51 s on a loaded 2-core machine.
DOT_TIMEOUT_S: Final = 30.0
RENDER_TIMEOUT_S: Final = 600.0


def run_dot(dot: str, text: str, fmt: str, out: Path | None = None,
            timeout_s: float = DOT_TIMEOUT_S) -> subprocess.CompletedProcess[bytes]:
    """Graphviz ``dot`` run on DOT ``text`` into ``fmt``, written to ``out`` or, without it, returned as stdout.

    Raises:
        subprocess.TimeoutExpired: it ran past ``timeout_s`` (and was killed).
        OSError: it could not be started.
    """
    target = ["-o", str(out)] if out is not None else []
    return subprocess.run([dot, f"-T{fmt}", *target], input=text.encode("utf-8"), capture_output=True,
                          timeout=timeout_s, check=False)


def dot_said(done: subprocess.CompletedProcess[bytes]) -> str:
    """The last line Graphviz wrote on stderr, printable and at most 200 characters (``...`` where it was cut)."""
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return shortened(said[-1] if said else "no message", 200)
