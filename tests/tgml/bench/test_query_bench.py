"""``tgml bench-queries`` on small real subsets: its tables, its JSON and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphs.common.errors import InputError
from tests.cli_errors import cli_error
from tgml.bench.query_bench import ExecutionSplit, QueryBenchConfig, fold_indices, load_bench_procedures
from tgml.tgml_cli import main


def test_folds_cover_every_execution_once() -> None:
    folds = fold_indices(10, 4)
    assert sorted(int(i) for part in folds for i in part) == list(range(10)) and len(folds) == 4
    assert len(fold_indices(3, None)) == 3 and len(fold_indices(3, 8)) == 3  # leave-one-out


def test_epic_tent_executions_with_an_annotated_error_are_never_held_out(data_dir: Path) -> None:
    (tent,) = load_bench_procedures(QueryBenchConfig(data_dir, ("epic-tent-o",)), "epic-tent-o")
    assert len(tent.executions) == 13 and sum(tent.correct) == 10
    assert len(tent.tests) == 15 and tent.ground_truth is None


def test_captaincook_subset_prints_the_table_and_writes_json(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "queries.json"
    assert main(["bench-queries", "--data", str(data_dir), "--dataset", "captaincook4d", "--procedures", "coffee",
                 "--json", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "captaincook4d: procedure questions on held-out executions (4-fold" in printed
    assert "bench-queries: " in printed and printed.rstrip().endswith(f"wrote {out}")
    for text in ("previous AP all", "missing F1 need", "future top-3", "Count-", "binary", "Exo4D*", "82.2"):
        assert text in printed
    payload = json.loads(out.read_text())
    assert payload["format"] == "query-bench-results" and payload["settings"]["folds"] == {"captaincook4d": "4-fold"}
    do, counts = payload["results"]["captaincook4d"]["DO"], payload["results"]["captaincook4d"]["Count-Based"]
    assert do["optional_ap"] is None  # every coffee execution does every step: nothing is optional
    # Every step of the 9 executions is deleted once; at the end the deleted step is the only one not done.
    assert do["missing_end_questions"] == 9 * 16 and do["missing_end_f1"] == 100.0
    assert 0 < do["future_top1"] <= do["future_top3"] <= 100
    assert do["missing_need_f1"] > counts["missing_need_f1"] and do["mistake_ap"] > counts["mistake_ap"]
    assert payload["published_ego_exo4d"]["DO"]["missing"] == 87.23


def test_epic_tent_is_scored_on_its_real_mistakes(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench-queries", "--data", str(data_dir), "--dataset", "epic-tent-o", "--folds", "2",
                 "--epochs", "20", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "epic-tent-o: procedure questions on held-out executions (2-fold" in printed
    previous_row = next(line for line in printed.splitlines() if "previous AP " in line)
    assert previous_row.count("—") == 5  # no ground-truth graph: not asked (four methods, no graph)
    assert not any("GT" in line for line in printed.splitlines() if line.startswith("┃"))  # no perfect-graph column
    optional_row = next(line for line in printed.splitlines() if "optional AP" in line)
    assert optional_row.count("—") == 0  # asked of every column, the graph-free one included
    assert "No" in printed and "noisy-" in printed


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere"
    assert f"data folder {missing} not found" in cli_error(main, ["bench-queries", "--data", str(missing)], capsys)
    err = cli_error(main, ["bench-queries", "--data", str(data_dir), "--json", str(tmp_path)], capsys)
    assert "is a folder, expected a file name for the results file" in err
    blocker = tmp_path / "file"
    blocker.write_text("")
    err = cli_error(main, ["bench-queries", "--data", str(data_dir), "--json", str(blocker / "out.json")], capsys)
    assert "is a file, not a folder" in err
    err = cli_error(main, ["bench-queries", "--data", str(data_dir), "--dataset", "ego-exo4d"], capsys)
    assert "--dataset 'ego-exo4d': not one of" in err
    # the option typed, not the settings field behind it (it said "bench-queries: folds = 1")
    assert cli_error(main, ["bench-queries", "--data", str(data_dir), "--folds", "1"], capsys) == (
        "error: --folds 1: need at least 2")
    err = cli_error(main, ["bench-queries", "--data", str(data_dir), "--dataset", "captaincook4d", "--procedures",
                           "tea"], capsys)
    assert "tea" in err
    assert not any(tmp_path.glob("*.json"))


def test_config_refuses_procedures_without_captaincook(data_dir: Path) -> None:
    with pytest.raises(InputError, match="captaincook4d is not run"):
        QueryBenchConfig(data_dir, ("epic-tent-o",), procedures=("coffee",))


def test_the_title_and_json_say_leave_one_out_where_folds_reach_a_procedures_executions(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --folds 11 on EPIC-Tent-O's 10 correct executions runs leave-one-out (the same figures as --folds 10); the
    # title said "11-fold".
    out = tmp_path / "queries.json"
    assert main(["bench-queries", "--data", str(data_dir), "--dataset", "epic-tent-o", "--folds", "11",
                 "--epochs", "5", "--json", str(out), "--quiet"]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # the title wraps in a narrow table
    assert "epic-tent-o: procedure questions on held-out executions (leave-one-execution-out)" in printed
    assert "11-fold" not in printed
    assert json.loads(out.read_text())["settings"]["folds"] == {"epic-tent-o": "leave-one-out"}


def test_a_split_of_procedures_some_left_out_one_at_a_time_says_how_many() -> None:
    assert ExecutionSplit.of(4, [9, 12, 20]).label() == "4-fold"
    assert ExecutionSplit.of(4, [3, 4]).label() == ExecutionSplit.of(None, [9]).label() == "leave-one-out"
    assert ExecutionSplit.of(4, [3, 9, 12]).label() == (
        "4-fold; leave-one-out for 1 of 3 procedures of 4 executions or fewer")
    # The tables' titles name what was split.
    assert ExecutionSplit.of(4, [9, 12, 20]).label(over_executions=True) == "4-fold over executions"
    assert ExecutionSplit.of(None, [9]).label(over_executions=True) == "leave-one-execution-out"
    assert ExecutionSplit.of(4, [3, 9, 12]).label(over_executions=True) == (
        "4-fold over executions; leave-one-execution-out for 1 of 3 procedures of 4 executions or fewer")
