"""A package's names loaded when first used (PEP 562), so that importing one of its modules costs only that module.

A command imports ``graphs.common.errors`` to build its argument parser; if ``graphs/__init__.py`` imported the
checker and the task graph eagerly, every ``--help`` would pay for numpy before printing a line. A package lists its
names and the module each lives in, and hands `lazy_exports` to its module-level ``__getattr__``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, Iterable[str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports each listed name from its home module on first use.

    Args:
        package: the package's dotted name (for the error of an unknown name).
        modules: dotted name of a module -> the names of it the package exports.

    Returns:
        ``__getattr__(name)``: the name's value; AttributeError for a name not listed.
    """
    homes = {name: module for module, names in modules.items() for name in names}

    def attribute(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return attribute
