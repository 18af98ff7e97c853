"""Reading the annotation files every command starts from, and refusing broken ones clearly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphs import InputError
from graphs.annotations import load_annotations, time_order


def test_reads_the_real_datasets(data_dir: Path) -> None:
    train = load_annotations(data_dir / "assembly101-o" / "train.json", check_times=False)
    assert len(train.videos) == 135
    ids, names = train.steps_of("assembly101")
    assert len(ids) == 86 and len(names) == 86
    tent = load_annotations(data_dir / "epic-tent-o" / "test.json", check_times=False)
    video = tent.videos["annotations_1"]
    assert video.scenario == "epic-tent"
    assert video.steps == (4, 10, 0, 4, 2, 3, 0, 2, 3)
    assert video.has_errors[-1] and not any(video.has_errors[:-1])  # PREGO: the last step is the mistake


def test_captaincook_procedures_are_scenarios(data_dir: Path) -> None:
    ann = load_annotations(data_dir / "captaincook4d" / "task_graph_generation_annotations.json", check_times=False)
    assert len(ann.taxonomy) == 24
    assert len(ann.scenario_videos("coffee")) == 9


def _annotation_file(tmp_path: Path, step_id: object = 1, scenario: str = "tent") -> Path:
    data = {
        "annotations": {"v1": {"scenario": scenario, "recording_id": "v1", "segments": [{"step_id": step_id}]}},
        "taxonomy": {"tent": {"1": {"name": "spread", "id": 1}}},
    }
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(data))
    return path


def test_step_outside_taxonomy_names_video_segment_and_field(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"annotations\['v1'\]\.segments\[0\]\.step_id = 7 is not in the 'tent'"):
        load_annotations(_annotation_file(tmp_path, step_id=7))
    # The taxonomy entry keyed "1" holds another id: the segment is blamed, and the entry named beside it.
    path = _annotation_file(tmp_path)
    path.write_text(path.read_text().replace('"id": 1', '"id": 9'))
    with pytest.raises(InputError, match=r"step_id = 1 is not in the 'tent' taxonomy \(its entry '1' has id 9\)"):
        load_annotations(path)


def test_a_segment_that_is_no_object_is_said_to_be_one(tmp_path: Path) -> None:
    # A number or null in place of a segment read "segments[0].step_id is missing or not an integer".
    path = _annotation_file(tmp_path)
    for value, written in ((5, "5"), (None, "null"), ([1, 0.0, 2.0], "[1, 0.0, 2.0]")):
        path.write_text(path.read_text().split('"segments": ')[0] + f'"segments": [{json.dumps(value)}]}}}}, '
                        '"taxonomy": {"tent": {"1": {"name": "spread", "id": 1}}}}')
        with pytest.raises(InputError) as refused:
            load_annotations(path)
        assert str(refused.value) == (f"{path}: annotations['v1'].segments[0] = {written} must be an object with "
                                      "'step_id', 'start_time' and 'end_time'")


def test_unknown_scenario_lists_known_ones(tmp_path: Path) -> None:
    ann = load_annotations(_annotation_file(tmp_path))
    with pytest.raises(InputError, match="scenario 'coffee': not the one known \\(tent\\)"):
        ann.scenario_videos("coffee")


def test_video_with_scenario_missing_from_taxonomy(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r'annotations\[\'v1\'\]\.scenario = "nope" is not in the taxonomy '
                                         r'\(its scenarios: tent\)$'):
        load_annotations(_annotation_file(tmp_path, scenario="nope"))


def test_video_without_a_scenario_is_told_so(tmp_path: Path) -> None:
    # It said "scenario = null is not in the taxonomy", of a field the file does not have.
    path = _annotation_file(tmp_path)
    data = json.loads(Path(path).read_text())
    del data["annotations"]["v1"]["scenario"]
    Path(path).write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"annotations\['v1'\] has no 'scenario' \(the taxonomy's scenarios: "
                                         r"tent\)$"):
        load_annotations(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["annotations"]["v1"].update(scenario=["tent"]), r'annotations\[\'v1\'\]\.scenario = \["tent"\]'),
        (lambda d: d["taxonomy"]["tent"].update({"2": {"name": "stake", "id": 1}}),
         r"taxonomy\['tent'\]\['2'\]\.id = 1 is the id of another step"),
        (lambda d: d["taxonomy"]["tent"]["1"].update(id=1.5), r"taxonomy\['tent'\]\['1'\]\.id = 1.5 is not an integer"),
        (lambda d: d["annotations"]["v1"]["segments"][0].update(has_errors="no"),
         r'segments\[0\]\.has_errors = "no" is not true or false'),
        (lambda d: d["taxonomy"]["tent"].update({"2": {"name": "spread", "id": 2}}),
         r"taxonomy\['tent'\]\['2'\]\.name = \"spread\" is the name of step 1 too"),
        (lambda d: d["annotations"]["v1"]["segments"][0].update(step_name="stake"),
         r"segments\[0\]\.step_name = \"stake\" is not the name of step_id 1 \(\"spread\" in the 'tent' taxonomy\)"),
        # A graph learned from a blank name would be refused by the graph loader.
        (lambda d: d["taxonomy"]["tent"]["1"].update(name=" "),
         r"taxonomy\['tent'\]\['1'\]\.name holds no visible character; every step needs a name"),
    ],
    ids=["scenario-not-a-string", "taxonomy-id-twice", "taxonomy-id-not-integer", "has-errors-not-boolean",
         "taxonomy-name-twice", "step-name-of-another-step", "taxonomy-name-blank"],
)
def test_wrong_types_and_repeated_taxonomy_ids_are_one_line(tmp_path: Path, change, message: str) -> None:
    path = _annotation_file(tmp_path)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message):
        load_annotations(path)


def test_a_long_step_name_another_segment_names_is_cut_where_it_says_so(tmp_path: Path) -> None:
    # CaptainCook4D's step names are sentences: the line read "... is not the name of step_id 112 ('Spread-Spread nut
    # butter onto the tortilla, leaving 1/2-inc in the 'pinwheels' taxonomy)": the name cut mid-word with no "...",
    # its quote never closed, read as the taxonomy's name; it is now spelt as the file writes it and cut as every
    # value a line quotes is (`as_written`), as the step_name beside it is.
    name = "Spread-Spread nut butter onto the tortilla, leaving 1/2-inch uncovered at the edges"
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({
        "annotations": {"10_16": {"scenario": "pinwheels", "recording_id": "10_16", "segments": [
            {"step_id": 112, "start_time": 1.0, "end_time": 2.0, "step_name": 5}]}},
        "taxonomy": {"pinwheels": {"112": {"name": name, "id": 112}}},
    }))
    with pytest.raises(InputError) as refused:
        load_annotations(path)
    assert str(refused.value) == (f"{path}: annotations['10_16'].segments[0].step_name = 5 is not the name of step_id "
                                  f'112 ("{name[:56]}... in the \'pinwheels\' taxonomy)')


def test_missing_file_and_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="annotation file not found"):
        load_annotations(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(InputError, match="invalid JSON"):
        load_annotations(bad)


def _timed_file(tmp_path: Path, spans: list[tuple[float, float]]) -> Path:
    data = {
        "annotations": {"v1": {"scenario": "tent", "recording_id": "v1", "segments": [
            {"step_id": k % 2 + 1, "start_time": start, "end_time": end} for k, (start, end) in enumerate(spans)]}},
        "taxonomy": {"tent": {"1": {"name": "spread", "id": 1}, "2": {"name": "stake", "id": 2}}},
    }
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(data))
    return path


def test_overlapping_segments_are_accepted_with_one_warning_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1 ends where 0 does not yet (overlap), 2 nests inside 1 (overlap), 3 touches the end of 1 (no overlap)
    path = _timed_file(tmp_path, [(0.0, 4.0), (3.0, 9.0), (5.0, 6.0), (9.0, 10.0)])
    ann = load_annotations(path)
    assert (ann.overlaps, ann.overlap_videos, ann.never_done) == (2, 1, 0)
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {path}: 2 segments in 1 video overlap an earlier one (v1; accepted; where frames are labelled, the "
        "segment that started last owns the overlap)"]
    assert time_order(ann.videos["v1"], str(path)) == [(0, 0.0, 4.0), (1, 3.0, 9.0), (2, 5.0, 6.0), (3, 9.0, 10.0)]
    load_annotations(path, check_times=False)  # a benchmark reads the order only: no warning
    assert capsys.readouterr().err == ""


def test_a_warning_with_stderr_closed_stays_out_of_standard_output(tmp_path: Path) -> None:
    # With `2>&-` Python has no sys.stderr, and print(file=None) wrote the overlap warning on standard output, into
    # whatever the command writes there (a graph, JSON lines).
    path = _timed_file(tmp_path, [(0.0, 4.0), (3.0, 9.0)])
    code = f"from graphs.annotations import load_annotations; load_annotations({str(path)!r}); print('read')"
    done = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "read\n")


def test_a_recording_id_other_than_its_key_is_warned_of(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A copied entry whose recording_id was left as the original's was read in silence: the key names the video
    # everywhere, so the user labelled "10_16" and may have meant "10_99", or the other way round.
    path = _timed_file(tmp_path, [(0.0, 4.0)])
    data = json.loads(path.read_text())
    data["annotations"]["v2"] = data["annotations"]["v1"] | {"recording_id": "v1"}
    path.write_text(json.dumps(data))
    load_annotations(path)
    assert capsys.readouterr().err.splitlines() == [
        f'warning: {path}: 1 video has a recording_id other than its key (v2: recording_id "v1"); the key names the '
        "video (its files and its name in every output), recording_id is not read"]
    load_annotations(path, check_times=False)  # a benchmark reads a published file as published
    assert capsys.readouterr().err == ""


def test_a_command_reading_one_scenario_is_warned_of_its_videos_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every command reading CaptainCook4D's labels for one recipe was warned of all 384 recordings' overlaps.
    path = _timed_file(tmp_path, [(0.0, 4.0), (3.0, 9.0)])
    data = json.loads(path.read_text())
    data["taxonomy"]["tea"] = {"1": {"name": "boil", "id": 1}}
    data["annotations"]["t1"] = {"scenario": "tea", "recording_id": "t1", "segments": [
        {"step_id": 1, "start_time": 0.0, "end_time": 2.0}, {"step_id": 1, "start_time": -1, "end_time": -1}]}
    path.write_text(json.dumps(data))
    load_annotations(path, scenario_read="tea")
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {path} (scenario tea): 1 segment with start_time = end_time < 0 (a step never done: kept in its "
        "place, where a graph learner takes it as done, covering no time)"]
    load_annotations(path, scenario_read="tent")
    assert capsys.readouterr().err.startswith(f"warning: {path} (scenario tent): 1 segment in 1 video overlaps")
    load_annotations(path, scenario_read="not-here")  # a scenario the file does not have: the whole file's
    assert capsys.readouterr().err.startswith(f"warning: {path}: 1 segment in 1 video overlaps")
    # Read with its times unchecked (tgml train --order-only), a scenario's videos were counted again anyway: a
    # warning it should not print, naming no video ("overlap an earlier one (; accepted").
    for scenario in ("tea", "tent"):
        load_annotations(path, check_times=False, scenario_read=scenario)
        assert capsys.readouterr().err == ""


def test_segments_listed_out_of_time_order_are_said_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A labelling tool that exports segments unsorted changed the learned graph without a word: the learners read
    # the file order (as the benchmarks do), recognition-features and eval the times.
    path = _timed_file(tmp_path, [(5.0, 9.0), (0.0, 4.0)])
    ann = load_annotations(path)
    assert ann.videos["v1"].steps == (1, 2) and ann.unordered_names == ("v1",)
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {path}: 1 video lists segments out of start-time order (v1): the graph learners read the file "
        "order, the commands that need times the time order; accepted as they are, the file needs no edit (to learn "
        "from the time order, give --annotations a copy with each video's segments sorted by start_time)"]
    load_annotations(_timed_file(tmp_path, [(0.0, 4.0), (-1.0, -1.0), (5.0, 6.0)]))  # a step never done has no time
    assert "start-time order" not in capsys.readouterr().err


def test_a_step_never_done_keeps_its_place_and_covers_no_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _timed_file(tmp_path, [(0.0, 4.0), (-1.0, -1.0), (5.0, 6.0)])  # CaptainCook4D's -1: never done
    ann = load_annotations(path)
    assert ann.videos["v1"].steps == (1, 2, 1) and ann.never_done == 1 and ann.overlaps == 0
    assert "1 segment with start_time = end_time < 0 (a step never done" in capsys.readouterr().err
    assert time_order(ann.videos["v1"], str(path)) == [(0, 0.0, 4.0), (2, 5.0, 6.0)]


@pytest.mark.parametrize(("spans", "message"), [
    ([(-1.0, 2.0)], "segments[0].start_time = -1 must be a number of seconds >= 0"),
    ([(-3.0, -2.0)], "segments[0].start_time = -3 must be"),
    ([(2.0, 1.0)], "segments[0] ends at 1 s, before it starts (2 s)"),
    ([(2.0, 2.0)], "segments[0] has no duration"),
])
def test_broken_segments_stay_refused(tmp_path: Path, spans: list[tuple[float, float]], message: str) -> None:
    with pytest.raises(InputError) as err:
        load_annotations(_timed_file(tmp_path, spans))
    assert message in str(err.value)


@pytest.mark.parametrize(("name", "overlaps"), [
    ("epic-tent-o/train.json", 38), ("epic-tent-o/test.json", 31), ("assembly101-o/train.json", 0),
    ("assembly101-o/test.json", 0), ("captaincook4d/task_graph_generation_annotations.json", 224),
])
def test_every_public_annotation_file_passes_the_check_every_command_makes(
    name: str, overlaps: int, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ann = load_annotations(data_dir / name)  # refused before: 'a frame can show one key-step only'
    assert ann.overlaps == overlaps
    assert len(capsys.readouterr().err.splitlines()) == (1 if overlaps else 0)


@pytest.mark.parametrize("graph", [{"format": "task-graph", "version": 2, "steps": []},
                                   {"steps": {"0": "START", "1": "boil", "2": "END"}, "edges": [[0, 1], [1, 2]]}],
                         ids=["ours", "captaincook4d"])
def test_a_task_graph_given_as_annotations_is_named_as_one(tmp_path: Path, graph: dict) -> None:
    # It was "missing object field 'annotations'", while the reverse mistake was named.
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(graph))
    with pytest.raises(InputError, match="this looks like a task graph, not an annotation file"):
        load_annotations(path)


def test_a_file_of_another_format_given_as_annotations_is_named_by_its_format(tmp_path: Path) -> None:
    # prego-bench's checker settings ("format": "prego-checker-settings") were "this looks like a task graph".
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"format": "prego-checker-settings", "version": 1, "datasets": {}}))
    with pytest.raises(InputError) as refused:
        load_annotations(path)
    assert str(refused.value) == (f"{path}: its field 'format' says it is a 'prego-checker-settings' file, not an "
                                  "annotation file (one with fields 'annotations' and 'taxonomy')")


@pytest.mark.parametrize(("content", "kind"), [
    ({"train": ["video_00"], "test": ["video_03"], "fps": 2.0},
     "a split file (the 'train' and 'test' videos of a feature folder: its split.json)"),
    ({"settings": {"graph": "g.json"}, "videos": [], "total": {}}, "the results of stream-detect eval --json"),
], ids=["split", "eval-results"])
def test_another_file_of_the_project_given_as_annotations_is_named_as_what_it_is(
    tmp_path: Path, content: dict, kind: str
) -> None:
    # A feature folder's split.json given as --annotations said "missing object field 'annotations'".
    path = tmp_path / "other.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InputError) as refused:
        load_annotations(path)
    assert str(refused.value) == (f"{path}: this looks like {kind}, not an annotation file (its 'annotations' and "
                                  "'taxonomy' give each video's key-steps)")


def test_captaincooks_error_annotations_given_as_annotations_point_to_captaincook_labels(data_dir: Path) -> None:
    # The shared data set's error_annotations.json was "expected a JSON object ..., got a list": the file a user of
    # CaptainCook4D's recordings reaches for first, and the command that turns it into one was not named.
    path = data_dir / "captaincook4d" / "error_annotations.json"
    with pytest.raises(InputError, match="looks like CaptainCook4D's error annotations, .*tgml captaincook-labels "
                                         "writes one from them"):
        load_annotations(path)
