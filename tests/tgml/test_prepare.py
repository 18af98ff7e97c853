"""`prego-bench prepare`: the benchmark files rebuilt from the official raw annotations, byte for byte."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from graphs.errors import InputError
from tgml.prepare import PrepareConfig, assembly_step_name, prepare_all, timecode_ms


def expected_hashes(data_dir: Path) -> dict[str, str]:
    lines = (data_dir / "SHA256SUMS").read_text().split("\n")
    return {name: digest for digest, name in (line.split() for line in lines if line.strip())}


def test_rebuilt_files_match_the_published_hashes(data_dir: Path, tmp_path: Path) -> None:
    config = PrepareConfig(data_dir / "assembly101-o" / "raw", data_dir / "epic-tent-o" / "raw", tmp_path)
    written = prepare_all(config)
    assert len(written) == 4
    for name, digest in expected_hashes(data_dir).items():
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == digest, name


def test_one_dataset_can_be_prepared_alone(data_dir: Path, tmp_path: Path) -> None:
    written = prepare_all(PrepareConfig(None, data_dir / "epic-tent-o" / "raw", tmp_path))
    names = sorted(p.relative_to(tmp_path).as_posix() for p in written)
    assert names == ["epic-tent-o/test.json", "epic-tent-o/train.json"]


def test_names_and_timecodes_follow_the_derivation_rules() -> None:
    assert assembly_step_name("attach", "turntable top") == "attach-turntable_top"
    assert assembly_step_name("position", "figurine") == "attach-figurine"
    assert timecode_ms("00:01:02:345") == 62345
    assert timecode_ms("-1:-1:-1:-1") == -3661001  # missing GoPro time, kept as the published files do


def test_missing_raw_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="epic_tent"):
        PrepareConfig(None, tmp_path / "nope", tmp_path / "out")
    with pytest.raises(InputError, match="at least one"):
        PrepareConfig(None, None, tmp_path / "out")


def test_missing_source_file_is_named(data_dir: Path, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(data_dir / "epic-tent-o" / "raw", raw)
    (raw / "Synchronised_action_label.txt").unlink()
    with pytest.raises(InputError, match="Synchronised_action_label.txt"):
        prepare_all(PrepareConfig(None, raw, tmp_path / "out"))
