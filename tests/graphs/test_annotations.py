"""Reading the annotation files every command starts from, and refusing broken ones clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphs import InputError
from graphs.annotations import load_annotations


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


def test_unknown_scenario_lists_known_ones(tmp_path: Path) -> None:
    ann = load_annotations(_annotation_file(tmp_path))
    with pytest.raises(InputError, match="unknown scenario 'coffee' \\(known: tent\\)"):
        ann.scenario_videos("coffee")


def test_video_with_scenario_missing_from_taxonomy(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"annotations\['v1'\]\.scenario = 'nope'"):
        load_annotations(_annotation_file(tmp_path, scenario="nope"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["annotations"]["v1"].update(scenario=["tent"]), r"annotations\['v1'\]\.scenario = \['tent'\]"),
        (lambda d: d["taxonomy"]["tent"].update({"2": {"name": "stake", "id": 1}}),
         r"taxonomy\['tent'\]\['2'\]\.id = 1 is the id of another step"),
        (lambda d: d["taxonomy"]["tent"]["1"].update(id=1.5), r"taxonomy\['tent'\]\['1'\]\.id = 1.5 is not an integer"),
        (lambda d: d["annotations"]["v1"]["segments"][0].update(has_errors="no"),
         r"segments\[0\]\.has_errors = 'no' is not true or false"),
    ],
    ids=["scenario-not-a-string", "taxonomy-id-twice", "taxonomy-id-not-integer", "has-errors-not-boolean"],
)
def test_wrong_types_and_repeated_taxonomy_ids_are_one_line(tmp_path: Path, change, message: str) -> None:
    path = _annotation_file(tmp_path)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message):
        load_annotations(path)


def test_missing_file_and_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="annotation file not found"):
        load_annotations(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(InputError, match="invalid JSON"):
        load_annotations(bad)
