"""The ground floor's promise: importing `graphs` loads numpy and networkx, nothing heavier (no torch, no rich)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.source_imports import imports_of

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"
ALLOWED = {"numpy", "networkx", "graphs"}


def test_graphs_imports_only_numpy_and_networkx() -> None:
    # An optional extra imported inside a function (PyYAML in read_yaml) loads only when that function runs.
    outside = [
        f"{path.name}:{line} imports {module}"
        for path in sorted(GRAPHS.rglob("*.py"))
        for module, at_top, line in imports_of(path)
        if at_top and module.split(".")[0] not in ALLOWED | set(sys.stdlib_module_names)
    ]
    assert outside == []
