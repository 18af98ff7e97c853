"""What a Python source file imports, read from its syntax tree (nothing is run).

Import it as `from tests.source_imports import imports_of` (pytest runs with `--import-mode=importlib`, like
`tests.cli_errors`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def imports_of(path: Path) -> Iterator[tuple[str, bool, int]]:
    """Every absolute import in a file.

    Args:
        path: a ``.py`` file.

    Yields:
        ``(module, at module level, line)``: the dotted module name (``streaming.messages``); whether it runs
        on ``import`` of the file (top level, or under a top-level ``if`` / ``try``, such as ``TYPE_CHECKING``
        guards) rather than when a function is called.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(node) for node in tree.body}
    for statement in tree.body:
        if isinstance(statement, ast.If | ast.Try):
            top_level.update(id(child) for child in ast.walk(statement))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in top_level, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, id(node) in top_level, node.lineno
