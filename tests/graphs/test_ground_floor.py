"""The ground floor's promise: importing `graphs` loads numpy and networkx, nothing heavier (no torch, no rich)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"
ALLOWED = {"numpy", "networkx", "graphs"}


def module_level_imports(tree: ast.Module) -> list[tuple[str, int]]:
    """``(module, line)`` of every import that runs on import: top level, or under a top-level ``if``/``try``.

    An optional extra imported inside a function (PyYAML in ``read_yaml``) loads only when that function runs.
    """
    nodes = [n for top in tree.body for n in (ast.walk(top) if isinstance(top, ast.If | ast.Try) else [top])]
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
    return found


def test_graphs_imports_only_numpy_and_networkx() -> None:
    outside = [
        f"{path.name}:{line} imports {name}"
        for path in sorted(GRAPHS.rglob("*.py"))
        for name, line in module_level_imports(ast.parse(path.read_text(), filename=str(path)))
        if name.split(".")[0] not in ALLOWED | set(sys.stdlib_module_names)
    ]
    assert outside == []
