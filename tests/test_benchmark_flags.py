"""The benchmark scripts (benchmarks/*.py) refuse a numeric flag out of range before any work: one ``error:`` line
naming the flag and the value, exit status 2. Unchecked, ``checker_load.py --streams 0`` and ``wire_speed.py
--repeats -3`` ended in ValueError tracebacks, and ``view_draw.py --widths 80,0`` timed a view of no columns.
Scripts that import no torch are run here, so the table stays fast; every script's flags share the ranges of
`graphs.common.settings_files` (``bounded_option``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CASES = [
    ("checker_flood.py", ["--seconds", "-1"], "--seconds: -1: expected a number in (0, "),
    ("checker_flood.py", ["--victim-rate", "nan"], "--victim-rate: nan: expected a number in (0, "),
    ("checker_load.py", ["--streams", "0"], "--streams: 0: expected an integer in 1.."),
    ("checker_load.py", ["--mistakes", "1.5"], "--mistakes: 1.5: expected a number in [0, 1]"),
    ("churn_soak.py", ["--duration", "inf"], "--duration: inf: expected a number in (0, "),
    ("startup.py", ["--runs", "0"], "--runs: 0: expected an integer in 1..1000"),
    ("wire_speed.py", ["--repeats", "-3"], "--repeats: -3: expected an integer in 1.."),
    ("view_draw.py", ["--widths", "80,0"], "--widths: 80,0: expected comma-separated numbers, each an integer in "),
    ("tgt_prego.py", ["--seeds", "x"], "argument --seeds: invalid int value: 'x'"),  # argparse's usage block before
]


@pytest.mark.parametrize(("script", "argv", "says"), CASES, ids=[f"{s} {' '.join(a)}" for s, a, _ in CASES])
def test_a_benchmark_refuses_a_flag_out_of_range_in_one_line_with_status_2(script: str, argv: list[str],
                                                                            says: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *argv], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr[-2000:]
