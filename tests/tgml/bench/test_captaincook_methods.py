"""`tgml bench-captaincook --method`: the paper's baselines on the real data, one table, the JSON, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.cli_errors import cli_error
from tgml.bench.captaincook_methods import run_methods
from tgml.tgml_cli import main


def test_deterministic_baselines_on_all_24_procedures(data_dir: Path) -> None:
    outcome = run_methods(data_dir / "captaincook4d", ["count-based", "msgi", "msg2", "llm"], [42])
    f1 = {m: r.summary()["f1"] for m, r in outcome.results.items()}
    # Published: Count-Based 60.2, MSGI 12.2, MSG² 73.3, LLM 54.9 (the MSG² gap is explained in the docs: these
    # graphs equal the authors' code's on this data, edge for edge).
    assert {m: round(v["mean"], 1) for m, v in f1.items()} == {"count-based": 62.0, "msgi": 12.8, "msg2": 71.1,
                                                                 "llm": 55.0}
    assert all(v["ci90"] == 0.0 for v in f1.values())  # no randomness: one run per procedure
    assert all(len(r.runs) == 24 and r.seeds == () for r in outcome.results.values())


def test_command_prints_one_table_and_writes_per_method_json(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cc.json"
    assert main(["bench-captaincook", "--data", str(data_dir / "captaincook4d"), "--method", "msg2", "noisy-and",
                 "llm", "tgt-text", "--seeds", "2", "--procedures", "coffee", "--workers", "1", "--json", str(out),
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    for text in ("msg2", "noisy-and", "llm", "73.3 / 73.6 / 73.3", "ours", "msgi (not run)", "11.3 / 13.3 / 12.2",
                 "tgt-text", "79.9 / 81.9 / 80.8",
                 "bench-captaincook: "):
        assert text in printed
    saved = json.loads(out.read_text())
    assert saved["version"] == 2 and list(saved["methods"]) == ["msg2", "noisy-and", "llm", "tgt-text"]
    noisy, msg2 = saved["methods"]["noisy-and"], saved["methods"]["msg2"]
    assert noisy["seeds"] == [42, 43] and set(noisy["per_seed"]) == {"42", "43"} and noisy["published"] is None
    assert msg2["seeds"] == [] and msg2["runs"][0]["seed"] is None and set(msg2["per_seed"]) == {"-"}
    assert msg2["published"] == {"precision": 73.3, "recall": 73.6, "f1": 73.3}
    assert msg2["config"] == {"objective": "precision", "unique_executions": True}
    tgt = saved["methods"]["tgt-text"]
    assert tgt["seeds"] == [42, 43] and tgt["published"] == {"precision": 79.9, "recall": 81.9, "f1": 80.8}
    assert 0 < tgt["summary"]["f1"]["mean"] <= 100


def test_bad_methods_and_llm_folders(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = str(data_dir / "captaincook4d")
    line = cli_error(main, ["bench-captaincook", "--data", data, "--method", "gpt"], capsys)
    assert line.startswith("error: --method 'gpt': not one of the")
    assert cli_error(main, ["bench-captaincook", "--data", data, "--method", "llm", "llm"], capsys) == (
        "error: tgml bench-captaincook: --method llm llm: llm is given twice (see tgml bench-captaincook --help)")
    # An LLM folder without one procedure's graph, then with a node that names no step.
    folder = tmp_path / "llm"
    shutil.copytree(data_dir / "captaincook4d" / "llm_task_graphs", folder)
    (folder / "graph_coffee.adjlist").unlink()
    argv = ["bench-captaincook", "--data", data, "--method", "llm", "--llm-graphs", str(folder), "--quiet"]
    assert "graph_coffee.adjlist: LLM task graph of procedure 'coffee' not found" in cli_error(main, argv, capsys)
    (folder / "graph_coffee.adjlist").write_text("12_Brew-Brew tea;1\nSTART;{}\n")
    assert "node '12_Brew-Brew tea' matches no step of procedure 'coffee'" in cli_error(main, argv, capsys)


def test_a_subset_run_says_what_its_figures_are(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two procedures of a baseline showed an epochs column of zeros, "± 0.0" as the 90% CI of one run, and the
    # paper's 24-procedure mean as if it were these two's.
    assert main(["bench-captaincook", "--data", str(data_dir / "captaincook4d"), "--method", "count-based",
                 "--procedures", "coffee,ramen", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "epochs" not in printed and "±" not in printed.split("no randomness")[1]
    assert "published count-based (24 procedures)" in printed
    assert main(["bench-captaincook", "--data", str(data_dir / "captaincook4d"), "--method", "count-based", "msg2",
                 "--procedures", "coffee,ramen", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "2 procedures, one run each" in printed and "±" not in printed
    assert "published P / R / F1 (24 procedures)" in printed


def test_the_seeds_column_says_when_every_seed_scored_alike() -> None:
    # noisy-AND's "5 | 90.2 ± 0.0" read as a very stable method: its seed only jitters a constant start.
    from tgml.bench.captaincook_methods import seeds_cell

    assert seeds_cell([42, 43, 44], np.tile([[90.0, 91.0, 90.5]], (3, 1))) == "3, all alike"
    assert seeds_cell([42, 43], np.array([[90.0, 91.0, 90.5], [89.0, 91.0, 90.0]])) == "2"
    assert seeds_cell([], np.zeros((1, 3))) == "none" and seeds_cell([42], np.zeros((1, 3))) == "1"
