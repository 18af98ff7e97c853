"""A bench-live cache entry that cannot be read (damaged, or written by another version of the project) is one
error naming the file, never a traceback."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from graphs.common.errors import InputError
from tgml.bench.live.cache import load_fold


@pytest.mark.parametrize(
    "content",
    [b"cnonexistent_module_of_an_old_version\nTrainedFold\n.",  # a class since moved: ModuleNotFoundError
     b"ctgml.bench.live.cache\nNoSuchClass\n.",  # a class since renamed: AttributeError
     b"\x80\x05\x95 damaged",  # cut short
     b""],
    ids=["moved-module", "renamed-class", "damaged", "empty"],
)
def test_an_unreadable_entry_is_one_error_naming_the_file(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "entry").write_bytes(content)
    with pytest.raises(InputError, match=rf"--cache {tmp_path}: entry does not read as a cached fold .*; remove it"):
        load_fold(tmp_path, "entry")


def test_an_entry_of_another_kind_is_refused_and_a_missing_one_is_a_miss(tmp_path: Path) -> None:
    (tmp_path / "entry").write_bytes(pickle.dumps({"not": "a fold"}))
    with pytest.raises(InputError, match="entry is not a cached fold; remove it"):
        load_fold(tmp_path, "entry")
    assert load_fold(tmp_path, "absent") is None
