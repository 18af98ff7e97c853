"""The CaptainCook4D order-mistake benchmark (`tgml bench-mistakes`): its data, its protocol, its bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphs import END, START, InputError, TaskGraph
from graphs.annotations import load_annotations
from tests.cli_errors import cli_error
from tests.rendered import drawn
from tgml.bench.error_annotations import ErrorAnnotations, load_error_annotations
from tgml.bench.mistake_bench import (
    GROUND_TRUTH,
    Counts,
    MistakeBenchConfig,
    MistakeBenchResult,
    RowResult,
    mistake_tables,
    run_mistake_bench,
)
from tgml.bench.mistake_selection import moved_item, ordered_pairs
from tgml.tgml_cli import main

TAXONOMY = {"tea": ((1, 2, 3), ("boil", "steep", "pour"))}


def write(path: Path, content: object) -> Path:
    path.write_text(json.dumps(content))
    return path


def step(name: str, start: float, *tags: str) -> dict:
    return {"description": name, "step_id": 0, "start_time": start, "end_time": start + 1,
            "errors": [{"tag": t, "description": ""} for t in tags]}


def measured(figure: float | None) -> float:
    """A figure the test expects measured (None: nothing to count), narrowed for arithmetic."""
    assert figure is not None
    return figure


def test_the_reference_row_reproduces_the_published_ground_truth_figures(data_dir: Path) -> None:
    config = MistakeBenchConfig(data_dir / "captaincook4d", ("count-based",), (42,))
    result = run_mistake_bench(config)
    assert len(result.errors.recordings) == 190 and result.errors.training == 194
    assert {rid for rid, _ in result.errors.unmatched} == {"2_26", "17_49"}  # skipped, counted, reported
    reference = result.rows[GROUND_TRUTH].summary("precondition")
    figures = {k: round(measured(reference[k]["mean"]), 1) for k in ("avg_f1", "mistake_precision", "mistake_recall",
                                                            "missing_precision", "missing_recall", "missing_f1")}
    assert figures == {"avg_f1": 60.2, "mistake_precision": 56.0, "mistake_recall": 30.5, "missing_precision": 97.9,
                       "missing_recall": 97.5, "missing_f1": 97.7}  # DERIVATION.md's reference figures
    totals = result.rows[GROUND_TRUTH].pooled("precondition")[None]
    assert (totals.steps, totals.order_errors) == (2554, 793)
    document = result.to_dict()
    recipes = document["rows"]["count-based"]["rules"]["late-step"]["per_recipe"]
    assert len(recipes) == 24 and sum(r["order_errors"] for r in recipes.values()) == 793
    late = measured(result.rows[GROUND_TRUTH].summary("late-step")["mistake_recall"]["mean"])
    assert late > figures["mistake_recall"]  # the late-step rule catches the steps done after their dependents


def test_the_command_prints_the_table_per_rule_and_writes_the_per_recipe_json(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mistakes.json"
    assert main(["bench-mistakes", "--data", str(data_dir), "--method", "msg2", "llm", "--procedures",
                 "coffee,cucumberraita,ramen", "--workers", "1", "--quiet", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "pre-condition rule (the live checker)" in text and "ground truth (reference)" in text
    # In bench-live's words (tgml.bench.error_annotations).
    assert "whose name is no step of the recording's recipe: 17_49 'Add-1/2 teaspoon of chat masala ...'" in text
    assert "bench-mistakes:" in text
    # A long step name is shortened between words, and says so (it was cut mid-word: 'Cover-Cover with a lid (or pap').
    assert "1 annotated step whose Missing Step tag and start time disagree" in text
    assert ": 4_43 'Cover-Cover with a lid (or paper ...'" in text
    # The recordings left out are those two recipes' graph-training recordings: every recipe's 194 were counted.
    annotations = load_annotations(data_dir / "captaincook4d" / "task_graph_generation_annotations.json",
                                   check_times=False)
    training = sum(len(annotations.scenario_videos(s)) for s in ("coffee", "cucumberraita", "ramen"))
    assert f"recordings scored; {training} recordings left out (the graphs are learned from them)" in text
    document = json.loads(out.read_text())
    assert list(document["rows"]) == ["msg2", "llm", GROUND_TRUTH]
    assert set(document["rows"]["llm"]["rules"]["precondition"]["per_recipe"]) == {"coffee", "cucumberraita", "ramen"}


@pytest.mark.parametrize(("content", "said"), [
    ({"annotations": {}}, "expected a JSON list of recordings {'recording_id', 'activity_id', 'step_annotations'} "
                          "(CaptainCook4D's error_annotations.json), got an object"),
    # It said "expected a JSON list of recordings {...}, got a list": the list was right, its emptiness was not.
    ([], "an empty list, expected the recordings {'recording_id', 'activity_id', 'step_annotations'} "
         "(CaptainCook4D's error_annotations.json)"),
], ids=["another-format", "no-recording"])
def test_an_error_file_of_another_format_or_no_recording_is_one_error_line(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: object, said: str
) -> None:
    folder = tmp_path / "captaincook4d"
    folder.mkdir()
    for name in ("task_graph_generation_annotations.json", "ground_truth_task_graphs", "llm_task_graphs"):
        (folder / name).symlink_to(data_dir / "captaincook4d" / name)
    write(folder / "error_annotations.json", content)
    err = cli_error(main, ["bench-mistakes", "--data", str(folder), "--method", "msg2", "--quiet"], capsys)
    assert err == f"error: {folder / 'error_annotations.json'}: {said}"


def test_a_recipe_without_a_graph_is_one_error_line(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "captaincook4d"
    (folder / "ground_truth_task_graphs").mkdir(parents=True)
    for name in ("task_graph_generation_annotations.json", "error_annotations.json"):
        (folder / name).symlink_to(data_dir / "captaincook4d" / name)
    graph = folder / "ground_truth_task_graphs" / "coffee.json"
    graph.symlink_to(data_dir / "captaincook4d" / "ground_truth_task_graphs" / "coffee.json")
    err = cli_error(main, ["bench-mistakes", "--data", str(folder), "--method", "msg2", "--quiet"], capsys)
    assert "ground_truth_task_graphs" in err and ".json" in err


@pytest.mark.parametrize(
    ("recording", "fragment"),
    [({"recording_id": "r", "activity_id": "1", "step_annotations": []}, 'field \'activity_id\' = "1"'),
     ({"recording_id": "r", "activity_id": 9, "step_annotations": []}, "activity_id 9 is the activity of no"),
     ({"recording_id": "r", "activity_id": 1, "step_annotations": [step("boil", 0.0, "Wrong Error")]},
      'errors[0] tag "Wrong Error"'),
     ({"recording_id": "r", "activity_id": 1, "step_annotations": [{"description": "boil"}]},
      "step_annotations[0]: field 'start_time' = null"),
     ({"recording_id": "r", "activity_id": 1, "is_error": "false", "step_annotations": []},
      "field 'is_error' = \"false\": expected true or false"),
     ({"recording_id": "r", "activity_id": 1, "step_annotations": [step("boil", 0.0) | {"end_time": "12.5"}]},
      "step_annotations[0]: field 'end_time' = \"12.5\": expected a finite number"),
     # It became a step of no duration, refused later naming the derived labels file, not this one.
     ({"recording_id": "r", "activity_id": 1, "step_annotations": [step("boil", 85.4) | {"end_time": 50.0}]},
      "step_annotations[0]: field 'end_time' = 50.0: not after its start_time 85.4")],
)
def test_bad_recordings_name_the_recording_and_field(recording: dict, fragment: str, tmp_path: Path) -> None:
    path = write(tmp_path / "errors.json", [recording])
    with pytest.raises(InputError, match=r"errors\.json: recording") as caught:
        load_error_annotations(path, TAXONOMY, {1: "tea"}, frozenset())
    assert fragment in str(caught.value)


def test_a_damaged_recording_the_graphs_are_learned_from_is_refused_too(tmp_path: Path) -> None:
    # Its errors are never scored, so damage there ran to exit 0 while the same damage in a scored recording was
    # refused; the file is one input, checked whole (for the procedures a run reads).
    damaged = {"recording_id": "b", "activity_id": 1, "step_annotations": [step("boil", 0.0, "Wrong Error")]}
    path = write(tmp_path / "errors.json", [{"recording_id": "a", "activity_id": 1, "step_annotations": []}, damaged])
    with pytest.raises(InputError, match=r'recording b: step_annotations\[0\]: errors\[0\] tag "Wrong Error"'):
        load_error_annotations(path, TAXONOMY, {1: "tea"}, frozenset({"b"}))


def test_steps_are_replayed_in_time_order_and_unknown_names_are_counted(tmp_path: Path) -> None:
    steps = [step("pour", 9.0, "Order Error"), step("boil", 1.0), step("brew", 5.0), step("steep", -1, "Missing Step")]
    path = write(tmp_path / "errors.json", [{"recording_id": "a", "activity_id": 1, "step_annotations": steps},
                                            {"recording_id": "b", "activity_id": 1, "step_annotations": []}])
    errors = load_error_annotations(path, TAXONOMY, {1: "tea"}, frozenset({"b"}))
    (recording,) = errors.recordings
    assert recording.sequence == (1, 3) and [p.order_error for p in recording.performed] == [False, True]
    assert recording.missing == {2} and errors.unmatched == (("a", "brew"),) and errors.training == 1


def test_a_moved_step_tags_both_steps_of_each_pair_it_inverts() -> None:
    ids, names = (1, 2, 3, 4), ("a", "b", "c", "d")
    index = {START: 0, 1: 1, 2: 2, 3: 3, 4: 4, END: 5}
    adjacency = np.zeros((6, 6), dtype=bool)
    for needer, needed in [(1, START), (2, 1), (3, 2), (4, START), (END, 3), (END, 4)]:  # a -> b -> c; d alone
        adjacency[index[needer], index[needed]] = True
    pairs = ordered_pairs(TaskGraph(ids, names, adjacency))
    assert pairs == {(1, 2), (2, 3), (1, 3)}
    moved, labels = moved_item((1, 2, 3, 4), 0, 2, pairs)  # a done after b and c
    assert moved == (2, 3, 1, 4) and labels.tolist() == [True, True, True, False]
    moved, labels = moved_item((1, 2, 3, 4), 3, 0, pairs)  # d first: it breaks no order
    assert moved == (4, 1, 2, 3) and not labels.any()


def test_select_with_json_is_refused_not_silently_unused(data_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rules.json"
    err = cli_error(main, ["bench-mistakes", "--data", str(data_dir), "--select", "--json", str(out)], capsys)
    assert err.startswith(f"error: --json {out}: --select prints the order rules' cross-validation table")
    assert not out.exists()


@pytest.mark.parametrize("option", ["--folds", "--moves"])
def test_a_cross_validation_size_without_select_is_refused_not_silently_unused(
        data_dir: Path, option: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The benchmark ran on, the size never used: --folds and --moves shape --select's cross-validation only.
    err = cli_error(main, ["bench-mistakes", "--data", str(data_dir), option, "3", "--quiet"], capsys)
    assert err.startswith(f"error: {option} 3: only --select cross-validates"), err


@pytest.mark.parametrize(("option", "value", "rule"), [("--moves", "9223372036854775807", "1..1000"),
                                                       ("--folds", "9223372036854775807", "2..1000"),
                                                       ("--folds", "1", "2..1000"), ("--moves", "0", "1..1000")])
def test_select_sizes_are_refused_outside_their_range_before_any_work(
        data_dir: Path, option: str, value: str, rule: str, capsys: pytest.CaptureFixture[str]) -> None:
    # --moves 9223372036854775807 looped for ever; --folds that size asked numpy for that many folds.
    err = cli_error(main, ["bench-mistakes", "--data", str(data_dir), "--select", option, value, "--quiet"], capsys)
    assert err == f"error: {option} {value}: expected an integer in {rule}", err


def test_all_is_given_alone(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "--method all llm" said "all: unknown" and listed every method but all.
    err = cli_error(main, ["bench-mistakes", "--data", str(data_dir), "--method", "all", "llm", "--quiet"], capsys)
    assert err == "error: --method all llm: give all alone (it stands for every method)"


@pytest.mark.parametrize("width", [80, 100, 120, 190])
def test_the_tables_show_every_figure_whole_at_any_terminal_width(width: int) -> None:
    """bench-mistakes in an 80-column terminal printed ``53…``, ``100…`` and headers ``Mi…``: every figure whole now."""
    def counts(caught: int, alerts: int) -> Counts:
        return Counts(steps=89, order_errors=21, alerts=alerts, caught=caught, missing_tagged=3, missing_named=3,
                      missing_right=3, other_error_steps=36, other_error_alerts=4, untagged_alerts=11)

    def once(c: Counts) -> dict:
        return {"precondition": {None: {"coffee": c}}}

    rows = {
        "do": RowResult("do", "learner", (1, 2), {}, {"precondition": {1: {"coffee": counts(7, 16)},
                                                                       2: {"coffee": counts(6, 15)}}}),
        "count-based": RowResult("count-based", "learner", (), {}, once(counts(6, 21))),
        GROUND_TRUTH: RowResult(GROUND_TRUTH, "published", (), None, once(counts(0, 0))),  # no alert: no precision
    }
    result = MistakeBenchResult(rows, ErrorAnnotations(Path("errors.json"), (), 9), ("precondition",), {})
    (fitted,) = mistake_tables(result)
    text = drawn(fitted, width)
    assert "…" not in text
    figures = [cell for column in fitted.table.columns if column.justify == "right" for cell in column.cells]
    assert "59.5 ± 1.3" in figures and "100.0" in figures  # mean ± std over the seeds; the reference's figures
    for figure in figures:
        assert isinstance(figure, str)  # the tables' cells are plain text
        assert any(figure in line for line in text.splitlines()), figure  # on one line, never "57.7 ±" / "0.6"
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    # A method without seeds says "none"; "-" is only a figure not measured (no alert: no precision), said so.
    assert "none" in figures and "-: not measured (nothing to count)" in " ".join(text.split())


def test_piped_the_table_is_printed_whole(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench-mistakes", "--data", str(data_dir), "--method", "count-based", "--procedures", "coffee",
                 "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "┃ method " in text and "┃ Missing F1 ┃" in text and "│ count-based " in text and "…" not in text
