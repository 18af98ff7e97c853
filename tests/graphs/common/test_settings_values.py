"""A refused settings value is quoted as the user wrote it in the TOML or JSON file, not as Python spells it."""

from __future__ import annotations

import pytest

from graphs.common.errors import InputError
from graphs.common.settings_files import as_written
from tgml.learners.do.config import DOConfig


@pytest.mark.parametrize(
    ("value", "written"),
    [(True, "true"), (False, "false"), (None, "null"), ("0.1", '"0.1"'), ("étape", '"étape"'), (2.5, "2.5"),
     (["a", 1], '["a", 1]'), ({"id": 12}, '{"id": 12}')],
)
def test_values_are_spelled_as_toml_and_json_write_them(value: object, written: str) -> None:
    assert as_written(value) == written


def test_a_long_value_is_cut_so_the_error_stays_one_short_line() -> None:
    text = as_written("x" * 500, limit=40)
    assert len(text) == 40 and text.endswith("...")


def test_a_settings_file_value_of_the_wrong_type_is_named_in_toml_spelling() -> None:
    with pytest.raises(InputError, match=r'^DOConfig\.lr = "0\.1": expected a number$'):
        DOConfig(lr="0.1")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"^DOConfig\.epochs = true: expected an integer$"):
        DOConfig(epochs=True)
