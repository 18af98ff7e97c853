"""A refused settings value is quoted as the user wrote it in the TOML or JSON file, not as Python spells it."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import pytest

from graphs.annotations import load_annotations
from graphs.common.errors import InputError
from graphs.common.settings_files import as_written, json_kind, read_settings
from tgml.learners.do.config import DOConfig


@pytest.mark.parametrize(
    ("value", "written"),
    [(True, "true"), (False, "false"), (None, "null"), ("0.1", '"0.1"'), ("étape", '"étape"'), (2.5, "2.5"),
     (["a", 1], '["a", 1]'), ({"id": 12}, '{"id": 12}'), (float("nan"), "nan"), (float("-inf"), "-inf")],
)
def test_values_are_spelled_as_toml_and_json_write_them(value: object, written: str) -> None:
    assert as_written(value) == written


def test_a_long_value_is_cut_so_the_error_stays_one_short_line() -> None:
    text = as_written("x" * 500, limit=40)
    assert len(text) == 40 and text.endswith("...")
    assert as_written("x" * 100, limit=2) == "\"..."  # a limit under 4 still ends in "...", 4 characters
    assert as_written(list(range(10**6))).endswith("19, ...]")  # built from its first items only
    nested: list = []
    for _ in range(100_000):  # as deep as a hostile file nests: a message, not a RecursionError
        nested = [nested]
    assert as_written(nested) == "[[[[[[[[[...]]]]]]]]]"


@pytest.mark.parametrize(
    ("value", "written"),
    [(datetime.date(2020, 1, 1), "2020-01-01"), (np.int64(5), "5"), (np.float32(0.5), "0.5"),
     ([1.0, float("nan")], "[1.0, nan]"), ({"a": [float("inf")]}, '{"a": [inf]}')],
)
def test_values_json_cannot_write_are_spelled_as_toml_does(value: object, written: str) -> None:
    # json's default=repr quoted them: 'lr = "datetime.date(2020, 1, 1)"', '"np.int64(5)"', '[1, NaN]'.
    assert as_written(value) == written


def test_a_settings_file_value_of_the_wrong_type_is_named_in_toml_spelling() -> None:
    with pytest.raises(InputError, match=r'^DOConfig\.lr = "0\.1": expected a number in \(0, 1e\+06\]$'):
        DOConfig(lr="0.1")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"^DOConfig\.epochs = true: expected an integer in 1\.\.100000$"):
        DOConfig(epochs=True)


@pytest.mark.parametrize(("value", "kind"), [(None, "null"), (True, "true or false"), (3, "a number"),
                                             (2.5, "a number"), ("x", "a string"), ([1], "a list"), ({}, "an object")])
def test_what_a_value_is_is_said_in_the_files_words(value: object, kind: str) -> None:
    assert json_kind(value) == kind


def test_an_annotation_file_holding_null_says_null(tmp_path: Path) -> None:
    path = tmp_path / "labels.json"
    path.write_text("null")
    with pytest.raises(InputError, match=r"expected a JSON object with fields 'annotations' and 'taxonomy', got null$"):
        load_annotations(path)


@pytest.mark.parametrize("written", ["configs/miniroad-tiny.toml", "miniroad-tiny"])
def test_a_project_config_named_outside_the_checkout_is_pointed_to(
        written: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The docs' "--config configs/miniroad-captaincook4d-live.toml", typed in a user's own folder, was only "not found".
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        read_settings(written)
    bundled = Path(__file__).resolve().parents[3] / "configs" / "miniroad-tiny.toml"
    assert str(err.value) == (f"{written}: config file not found here; the project's configs/ is in its checkout: "
                              f"--config {bundled}")
    with pytest.raises(InputError, match=r"^nothing\.toml: config file not found$"):
        read_settings("nothing.toml")
    # A folder of the user's own, mistyped: not pointed to the checkout's file of the same name.
    with pytest.raises(InputError, match=r"^my_experiments/miniroad-tiny\.toml: config file not found$"):
        read_settings("my_experiments/miniroad-tiny.toml")


def test_a_json_file_given_as_settings_says_what_settings_files_are(tmp_path: Path) -> None:
    # Read as TOML: "invalid TOML: Invalid statement (at line 1, column 1)", of an annotation file given as --config.
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"annotations": {}, "taxonomy": {}}))
    with pytest.raises(InputError) as refused:
        read_settings(labels)
    assert str(refused.value) == (f"{labels}: this looks like an annotation file (its 'annotations' and 'taxonomy' "
                                  "give each video's key-steps), not a config file (a config file is TOML (.toml), or "
                                  "YAML named .yaml or .yml)")
    own = tmp_path / "settings.json"
    own.write_text(json.dumps({"train": {"epochs": 3}}))
    with pytest.raises(InputError) as refused:
        read_settings(own)
    assert str(refused.value) == (f"{own}: a .json file; a config file is TOML (.toml), or YAML named .yaml or .yml")


@pytest.mark.parametrize(("name", "text"), [("s.toml", "beta = 1" + "0" * 5000 + "\n"),
                                            ("s.yaml", "beta: 1" + "0" * 5000 + "\n")])
def test_an_integer_of_thousands_of_digits_is_one_line_not_a_traceback(name: str, text: str, tmp_path: Path) -> None:
    # Past Python's 4300-digit limit the parsers raised ValueError: a traceback before any range was checked.
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=r"s\.(toml|yaml): invalid (TOML|YAML): an integer of thousands of digits$"):
        read_settings(path)
