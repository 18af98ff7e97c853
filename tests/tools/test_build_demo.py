"""``python tools/build_demo.py``: the demo rebuild tool, outside the runtime package, reproduces the shipped graph."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from streaming.demo.paths import DEMO_DIR
from tests.cli_errors import cli_error
from tests.source_imports import imports_of

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "build_demo.py"


def tool_main() -> Callable[[list[str]], int]:
    """The tool's ``main``, loaded from its file (tools/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("build_demo", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_graph_rebuild_reproduces_the_shipped_demo_graph(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(TOOL), "--only", "graph", "--out", str(tmp_path), "--work", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "demo_annotations.json").read_text() == (DEMO_DIR / "demo_annotations.json").read_text()
    rebuilt, shipped = (json.loads((d / "demo_graph.json").read_text()) for d in (tmp_path, DEMO_DIR))
    assert rebuilt["edges"] == shipped["edges"] and rebuilt["steps"] == shipped["steps"]


def test_an_output_that_is_a_file_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    line = cli_error(tool_main(), ["--out", str(blocker), "--work", str(tmp_path / "work")], capsys)
    assert line == f"error: --out {blocker}: is a file, expected the output folder"
    assert not (tmp_path / "work").exists()


def test_the_runtime_package_imports_no_training_code() -> None:
    # The demo builder used to live in streaming/demo/ and import the tgml command and the detector trainer.
    training = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted((ROOT / "streaming").rglob("*.py"))
        for module, _, line in imports_of(path)
        if module.split(".")[0] == "tgml" or module == "recognition.train"
    ]
    assert training == []
