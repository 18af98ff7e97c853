"""The floors of the house hold (docs/architecture.md): imports point down, nothing imports itself back, the
learner stays apart from the benchmark harness, live work apart from offline work.

Every import statement of the four packages is read, at module level and inside functions alike (an import made
at call time still ties the two modules together, it only hides the tie from a reader), and resolved to the
project module it names. The rules, each stated in docs/architecture.md:
- no import cycle, of any length;
- ``graphs.common`` (what every floor builds on) imports no other module of the project;
- ``graphs`` (the ground floor) imports none of torch, ``tgml``, ``recognition``, ``streaming``;
- ``tgml`` and ``recognition`` do not import ``streaming`` (the top floor);
- the learner (``tgml/*`` except the harness ``tgml/bench/`` and the command module ``tgml/tgml_cli.py``) imports
  neither the harness nor ``recognition``;
- what runs live (``streaming`` outside ``streaming.offline``) imports neither ``streaming.offline`` nor ``tgml``;
  only a command module may reach offline work (``stream-detect eval``);
- a library module never imports a command module (``*_cli``); a command may dispatch to another.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Set
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("graphs", "tgml", "recognition", "streaming")
# The one learner module allowed to reach the harness: the `tgml` command dispatches `bench-captaincook` to it.
LEARNER_COMMANDS = frozenset({"tgml.tgml_cli"})
FORBIDDEN = {
    "graphs": ("torch", "tgml", "recognition", "streaming"),
    "tgml": ("streaming",),
    "recognition": ("streaming",),
}
COMMON = "graphs.common"
OFFLINE = "streaming.offline"
LIVE_FORBIDDEN = (OFFLINE, "tgml")


def module_names(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """``{dotted module name: file}`` of every ``.py`` file of the packages (``__init__`` names its package)."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _in(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def is_command(module: str) -> bool:
    """Whether a module is a command (argument parsing and one call into the library): its name ends in ``_cli``."""
    return module.rpartition(".")[2].endswith("_cli")


def _resolve(name: str, modules: Set[str]) -> str:
    """The project module an imported name stands for (its longest module prefix), or the name's top level."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return parts[0]


def imports_of(module: str, path: Path, modules: Set[str]) -> set[str]:
    """Modules that ``module`` (the file ``path``) imports anywhere in its body, functions included.

    ``from a.b import c`` counts as importing ``a.b.c`` when that is a module, else ``a.b``; project names resolve
    to the module that defines them, third-party names to their top-level package (``torch``).

    Returns:
        The imported names, without ``module`` itself.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(_resolve(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.update(_resolve(f"{base}.{alias.name}", modules) for alias in node.names)
    return found - {module}


def import_map(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """``{module: imported modules}`` of the packages under ``root``."""
    modules = module_names(root, packages)
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def violations(imports: Mapping[str, Set[str]]) -> list[str]:
    """Every broken rule of the house in an import map, as readable lines (empty when all rules hold).

    Args:
        imports: ``{module: modules it imports}`` (project modules by dotted name, others by top-level name).

    Returns:
        One line per import cycle, then one per forbidden import.
    """
    graph = nx.DiGraph((source, target) for source, targets in imports.items() for target in targets)
    found = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            cycle = [edge[0] for edge in nx.find_cycle(graph.subgraph(component))]
            start = cycle.index(min(cycle))  # the same cycle reads the same whatever module the walk began at
            cycle = cycle[start:] + cycle[:start]
            found.append("import cycle: " + " -> ".join([*cycle, cycle[0]]))
    for source, targets in sorted(imports.items()):
        floor = source.split(".")[0]
        for target in sorted(targets):
            if any(_in(target, banned) for banned in FORBIDDEN.get(floor, ())):
                found.append(f"{source} imports {target}: {floor} may not import {target.split('.')[0]}")
            if _in(source, COMMON) and target.split(".")[0] in PACKAGES and not _in(target, COMMON):
                found.append(f"{source} imports {target}: {COMMON} may not import the rest of the project")
            learner = floor == "tgml" and not _in(source, "tgml.bench") and source not in LEARNER_COMMANDS
            if learner and (_in(target, "tgml.bench") or _in(target, "recognition")):
                found.append(f"{source} imports {target}: the learner may not import the harness or recognition")
            live = floor == "streaming" and not _in(source, OFFLINE) and not is_command(source)
            if live and any(_in(target, banned) for banned in LIVE_FORBIDDEN):
                found.append(f"{source} imports {target}: what runs live may not import {OFFLINE} or tgml")
            if is_command(target) and not is_command(source) and target.split(".")[0] in PACKAGES:
                found.append(f"{source} imports {target}: a library module may not import a command")
    return found


def test_the_packages_keep_the_rules_of_the_house() -> None:
    imports = import_map()
    walked = {"tgml.learners.do.ensemble", "tgml.bench.prego.methods", "graphs.common.errors", "streaming.offline"}
    assert walked <= imports.keys()
    assert violations(imports) == []


def test_the_check_finds_every_kind_of_broken_rule() -> None:
    imports = {
        "tgml.a": {"tgml.b"},  # a three-module circle
        "tgml.b": {"tgml.bench.c"},
        "tgml.bench.c": {"tgml.a", "recognition.model"},  # the harness may use recognition
        "tgml.tgml_cli": {"tgml.bench.c"},  # the command may dispatch into the harness
        "graphs.task_graph": {"numpy", "torch"},
        "graphs.common.errors": {"graphs.task_graph", "graphs.common.safe_text", "argparse"},
        "recognition.model": {"torch", "streaming.wire"},
        "tgml.d": {"recognition.model"},
        "streaming.detector": {"streaming.offline.features", "tgml.learners.registry", "recognition.model"},
        "streaming.offline.eval": {"streaming.detector", "tgml.d"},  # offline work may reuse live parts
        "streaming.stream_cli": {"streaming.offline.eval", "tgml.tgml_cli"},  # a command may reach both
        "recognition.train": {"recognition.train_cli"},
    }
    assert violations(imports) == [
        "import cycle: tgml.a -> tgml.b -> tgml.bench.c -> tgml.a",
        "graphs.common.errors imports graphs.task_graph: graphs.common may not import the rest of the project",
        "graphs.task_graph imports torch: graphs may not import torch",
        "recognition.model imports streaming.wire: recognition may not import streaming",
        "recognition.train imports recognition.train_cli: a library module may not import a command",
        "streaming.detector imports streaming.offline.features: what runs live may not import streaming.offline or "
        "tgml",
        "streaming.detector imports tgml.learners.registry: what runs live may not import streaming.offline or tgml",
        "tgml.b imports tgml.bench.c: the learner may not import the harness or recognition",
        "tgml.d imports recognition.model: the learner may not import the harness or recognition",
    ]
    assert violations({"tgml.a": {"tgml.b"}, "tgml.b": {"graphs.task_graph"}, "graphs.task_graph": {"numpy"}}) == []


def test_imports_made_at_call_time_and_relative_ones_count(tmp_path: Path) -> None:
    (tmp_path / "tgml" / "bench").mkdir(parents=True)
    (tmp_path / "tgml" / "__init__.py").write_text("")
    (tmp_path / "tgml" / "bench" / "__init__.py").write_text("from .runner import run\n")
    (tmp_path / "tgml" / "bench" / "runner.py").write_text("from ..model import fit\n\ndef run():\n    return fit()\n")
    (tmp_path / "tgml" / "model.py").write_text("def fit():\n    from tgml.bench import runner\n    return runner\n")
    imports = import_map(tmp_path, ("tgml",))
    assert imports["tgml.model"] == {"tgml.bench.runner"}
    assert imports["tgml.bench.runner"] == {"tgml.model"}
    assert imports["tgml.bench"] == {"tgml.bench.runner"}
    assert violations(imports) == [
        "import cycle: tgml.bench.runner -> tgml.model -> tgml.bench.runner",
        "tgml.model imports tgml.bench.runner: the learner may not import the harness or recognition",
    ]
