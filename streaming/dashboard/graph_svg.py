"""The task graph as the dashboard draws it: Graphviz's SVG of `graphs.graph_drawing.to_dot`, cut down to shapes.

The page puts this SVG into its own document, so it is rebuilt from an allow-list: only the elements and attributes
Graphviz uses to draw boxes, arrows and text survive (no script, no link, no style, no event attribute, no foreign
object), whatever a step name in the graph file holds. Each step's group gets ``data-step`` and each arrow's
``data-from``/``data-to`` (step ids, or START/END), so the page can mark the alerted step and its missing
pre-conditions without reading names.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Final

from graphs.common.safe_text import printable
from graphs.task_graph import TaskGraph

SVG_NS: Final = "http://www.w3.org/2000/svg"
# What Graphviz's SVG of a task graph uses to draw; everything else is dropped.
ALLOWED_TAGS: Final = frozenset({"svg", "g", "title", "polygon", "polyline", "ellipse", "path", "text"})
ALLOWED_ATTRIBUTES: Final = frozenset({
    "width", "height", "viewBox", "transform", "points", "cx", "cy", "rx", "ry", "d", "x", "y", "text-anchor",
    "font-family", "font-size", "font-weight", "font-style", "fill", "stroke", "stroke-width", "stroke-dasharray",
    "class", "id",
})  # fmt: skip
_NODE = re.compile(r"k(\d+)|START|END")
_EDGE = re.compile(r"(k\d+|START|END)->(k\d+|START|END)")


def graph_svg(graph: TaskGraph, warn: Callable[[str], None]) -> str | None:
    """The task graph drawn as SVG by Graphviz ``dot``, made safe to put into a page.

    Args:
        graph: the task graph.
        warn: told, in one line, why there is no drawing when there is none.

    Returns:
        The SVG text, or None when Graphviz is not installed or fails on this graph (the page then lists the steps
        and their pre-conditions as text).
    """
    from graphs.graph_drawing import dot_said, run_dot, to_dot

    as_text = "the page lists the steps and their pre-conditions as text"
    dot = shutil.which("dot")
    if dot is None:
        warn(f"Graphviz (dot) is not installed: {as_text}")
        return None
    try:
        done = run_dot(dot, to_dot(graph), "svg")
    except (OSError, subprocess.TimeoutExpired) as err:
        warn(f"Graphviz could not draw the task graph ({printable(err)}): {as_text}")
        return None
    if done.returncode != 0:
        warn(f"Graphviz failed on the task graph (exit {done.returncode}: {dot_said(done)}): {as_text}")
        return None
    svg = sanitize_svg(done.stdout)
    if svg is None:
        warn(f"Graphviz's drawing of the task graph is not an SVG document: {as_text}")
    return svg


def sanitize_svg(data: bytes) -> str | None:
    """Rebuild an SVG document from its allowed elements and attributes only (`ALLOWED_TAGS`, `ALLOWED_ATTRIBUTES`).

    Args:
        data: SVG bytes as Graphviz writes them.

    Returns:
        The clean SVG text, or None when ``data`` is not an SVG document.
    """
    try:
        root = ET.fromstring(data)  # Graphviz's output of our own DOT text; expat fetches no external entity
    except ET.ParseError:
        return None
    if root.tag != f"{{{SVG_NS}}}svg":
        return None
    clean = _copy(root)
    if clean is None:
        return None
    clean.set("role", "img")
    clean.set("aria-label", "task graph")
    ET.register_namespace("", SVG_NS)
    return ET.tostring(clean, encoding="unicode")


def _copy(element: ET.Element) -> ET.Element | None:
    tag = element.tag.removeprefix(f"{{{SVG_NS}}}")
    if tag not in ALLOWED_TAGS:
        return None
    out = ET.Element(f"{{{SVG_NS}}}{tag}")
    for name, value in element.attrib.items():
        if name in ALLOWED_ATTRIBUTES and not value.lstrip().lower().startswith(("javascript:", "data:")):
            out.set(name, value)
    out.text = element.text if tag in ("text", "title") else None
    for child in element:
        copied = _copy(child)
        if copied is not None:
            copied.tail = None
            out.append(copied)
    if tag == "g":
        _mark(out)
    return out


def _mark(group: ET.Element) -> None:
    """``data-step`` on a step's group, ``data-from``/``data-to`` on an arrow's (read from its ``title``)."""
    title = group.find(f"{{{SVG_NS}}}title")
    text = (title.text or "").strip() if title is not None else ""
    kind = group.get("class", "")
    if kind == "node" and (node := _NODE.fullmatch(text)) is not None:
        group.set("data-step", node.group(1) or text)
    elif kind == "edge" and (edge := _EDGE.fullmatch(text)) is not None:
        group.set("data-from", edge.group(1).removeprefix("k"))
        group.set("data-to", edge.group(2).removeprefix("k"))
