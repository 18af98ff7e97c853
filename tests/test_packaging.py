"""A regular (non-editable) install carries what the commands read: the benchmark finds its settings without a
source checkout.

The package is built from a copy of the sources and installed into a temporary folder, then imported from there
by a fresh interpreter started outside the repository, so neither the checkout nor the editable install can
stand in for a missing file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("graphs", "tgml", "recognition", "streaming")


def _can_build_here() -> bool:
    """Whether this environment holds the build backend pyproject.toml asks for (then no isolated build is set up)."""
    try:
        major = int(version("setuptools").split(".")[0])
    except (PackageNotFoundError, ValueError):
        return False
    return major >= 68


def _install(target: Path, work: Path) -> None:
    source = work / "source"  # building writes build/ and *.egg-info next to the sources: never into the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    isolation = ["--no-build-isolation", "--no-index"] if _can_build_here() else []
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *isolation, "--target", str(target)]
    done = subprocess.run([*command, str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_an_installed_copy_reads_the_benchmark_settings_and_runs_the_command(tmp_path: Path) -> None:
    target = tmp_path / "site"
    _install(target, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(target)}
    script = (
        "import tgml.bench.prego as prego\n"
        "print(prego.__file__)\n"
        "for dataset in prego.DATASETS:\n"
        "    print(dataset, sorted(prego.load_method_settings(dataset)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert Path(lines[0]).is_relative_to(target)  # the installed copy, not the checkout
    for page in ("index.html", "app.js", "style.css"):  # the dashboard serves its page from the installed package
        assert (target / "streaming" / "dashboard" / "static" / page).is_file(), page
    assert lines[1:] == [
        "assembly101-o ['count-based', 'do', 'do-cv', 'do-ensemble', 'msg2', 'msgi', 'noisy-and', 'noisy-and-do', "
        "'tgt-text']",
        "epic-tent-o ['count-based', 'do', 'do-cv', 'do-ensemble', 'msg2', 'msgi', 'noisy-and', 'noisy-and-do', "
        "'tgt-text']",
    ]
    command = [sys.executable, str(target / "bin" / "prego-bench"), "--help"]
    helped = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert helped.returncode == 0 and "usage: prego-bench" in helped.stdout, helped.stderr
