"""Commands that need no model start at once: their ``--help`` pages, ``--version``, ``tgml show`` and ``tgml eval``
load no torch.

torch alone takes about 1.4 s to import on 2 CPU cores, ten times what the rest of a command's start-up costs; a user
reading a help page or looking at a graph must not wait for it. Each command runs here in a fresh interpreter (the
test process has long loaded torch), every help page and the two graph commands one after the other, and then the
heavy libraries that interpreter holds are listed. The times themselves are printed by ``benchmarks/startup.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.stream_detect_cli import SUBCOMMANDS as STREAM_DETECT_SUBCOMMANDS
from tgml.tgml_cli import SUBCOMMANDS as TGML_SUBCOMMANDS  # a list written here had left out the two newest

ROOT = Path(__file__).resolve().parents[1]
DEMO_GRAPH = str(ROOT / "streaming" / "demo" / "demo_graph.json")
# Libraries a command may load only when its work needs them: a model, a sentence encoder, a plot, a metrics endpoint.
HEAVY = ("torch", "sentence_transformers", "matplotlib", "prometheus_client")
PREGO_SUBCOMMANDS = ("prepare", "select", "select-checker", "replay")

# command -> (module with `main(argv)`, the argument lists run one after the other)
RUNS: dict[str, tuple[str, list[list[str]]]] = {
    "tgml": ("tgml.tgml_cli", [["--help"], ["--version"], *[[c, "--help"] for c in TGML_SUBCOMMANDS],
                               ["show", DEMO_GRAPH], ["eval", "--pred", DEMO_GRAPH, "--gt", DEMO_GRAPH]]),
    "prego-bench": ("tgml.bench.prego_bench_cli", [["--help"], ["--version"],
                                                   *[[c, "--help"] for c in PREGO_SUBCOMMANDS]]),
    "recognition-train": ("recognition.recognition_train_cli", [["--help"], ["--version"]]),
    "recognition-features": ("streaming.offline.features_cli", [["--help"], ["--version"]]),
    "stream-detect": ("streaming.stream_detect_cli", [["--help"], ["--version"],
                                                      *[[c, "--help"] for c in STREAM_DETECT_SUBCOMMANDS]]),
}

# Runs every argument list through `main`, then prints which heavy libraries were loaded and each run's exit status.
PROBE = """
import contextlib, importlib, io, json, sys
command = importlib.import_module("{module}")
codes = []
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            codes.append(command.main(argv))
        except SystemExit as done:
            codes.append(done.code)
print(json.dumps({{"codes": codes, "loaded": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}}))
"""


@pytest.mark.parametrize("command", list(RUNS))
def test_help_pages_and_graph_commands_load_no_model_library(command: str) -> None:
    module, runs = RUNS[command]
    done = subprocess.run([sys.executable, "-c", PROBE.format(module=module), json.dumps(runs), json.dumps(HEAVY)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["codes"] == [0] * len(runs), f"{command}: exit statuses {report['codes']}\n{done.stderr}"
    assert report["loaded"] == [], f"{command} loads {', '.join(report['loaded'])} for {runs}"


def test_the_probe_sees_a_heavy_import() -> None:
    # The probe must be able to fail: a command that does need torch shows it.
    done = subprocess.run([sys.executable, "-c", PROBE.format(module="recognition.model"), json.dumps([]),
                           json.dumps(HEAVY)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert json.loads(done.stdout.strip().splitlines()[-1])["loaded"] == ["torch"]
