"""`prego-bench prepare`: the benchmark files rebuilt from the official raw annotations, byte for byte."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from graphs.common.errors import InputError
from tgml.bench.prepare import PrepareConfig, assembly_step_name, prepare_all, timecode_ms


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
    with pytest.raises(InputError, match="--epic-tent .*nope: not a folder"):
        PrepareConfig(None, tmp_path / "nope", tmp_path / "out")
    with pytest.raises(InputError, match="at least one"):
        PrepareConfig(None, None, tmp_path / "out")


def test_missing_source_file_is_named(data_dir: Path, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(data_dir / "epic-tent-o" / "raw", raw)
    (raw / "Synchronised_action_label.txt").unlink()
    with pytest.raises(InputError, match="Synchronised_action_label.txt"):
        prepare_all(PrepareConfig(None, raw, tmp_path / "out"))


def _label_line_500(raw: Path, change) -> None:
    """Apply ``change`` to the fields of one data line of the EPIC-Tent label file."""
    path = raw / "Synchronised_action_label.txt"
    lines = path.read_text().splitlines()
    fields = lines[500].split(",")
    change(fields)
    lines[500] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")


def _first_split_count(raw: Path, value: object) -> None:
    path = raw / "train_split.json"
    counts = json.loads(path.read_text())
    counts[next(iter(counts))] = value
    path.write_text(json.dumps(counts))


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda raw: _first_split_count(raw, "x"), r"train_split.json: video 'annotations_\d+': 'x' is not a number"),
        (lambda raw: _label_line_500(raw, lambda f: f.__setitem__(-1, "abc")),
         r"Synchronised_action_label.txt: annotations_14: action_label 'abc' is not an action"),
        (lambda raw: _label_line_500(raw, lambda f: f.__setitem__(-1, "40")), r"action_label '40' is not an action"),
        (lambda raw: _label_line_500(raw, lambda f: f.__setitem__(1, "12:xx:00:00")),
         r"Synchronised_action_label.txt: annotations_14: EPIC-Tent timecode '12:xx:00:00'"),
        (lambda raw: _label_line_500(raw, lambda f: f.__delitem__(slice(2, None))),
         r"annotations_14: action_label None is not an action"),
        (lambda raw: (raw / "EPIC-Tent-O_action_dict.json").write_text('{"one": "assemble_support"}'),
         r"EPIC-Tent-O_action_dict.json: entry 'one': expected an integer action id"),
        # str.isdigit() took these, and int() then raised a ValueError traceback.
        (lambda raw: (raw / "EPIC-Tent-O_action_dict.json").write_text('{"\u00b2": "assemble_support"}'),
         r"EPIC-Tent-O_action_dict.json: entry '\u00b2': expected an integer action id"),
        (lambda raw: _label_line_500(raw, lambda f: f.__setitem__(-1, "\u2460")),
         r"annotations_14: action_label '\u2460' is not an action"),
    ],
    ids=["split-count-not-a-number", "label-not-a-number", "label-not-in-dictionary", "bad-timecode", "short-row",
         "dictionary-key-not-an-id", "dictionary-key-superscript", "label-circled-digit"],
)
def test_broken_epic_tent_sources_are_one_line_errors(data_dir: Path, tmp_path: Path, corrupt, message: str) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(data_dir / "epic-tent-o" / "raw", raw)
    corrupt(raw)
    with pytest.raises(InputError, match=message):
        prepare_all(PrepareConfig(None, raw, tmp_path / "out"))


def test_assembly_dictionary_key_that_is_not_an_id(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "Assembly101-O_action_dict.json").write_text('{"0": "attach-tilter", "x1": "attach-dashboard"}')
    with pytest.raises(InputError, match=r"Assembly101-O_action_dict.json: entry 'x1': expected an integer action id"):
        prepare_all(PrepareConfig(raw, None, tmp_path / "out"))


def _replace(path: Path, make) -> None:
    path.unlink()
    make(path)


# The raw text sources (split lists, the EPIC-Tent label file, Assembly101's CSVs) were read with Path.read_text and
# open(): a folder or Latin-1 bytes ended in a traceback, a FIFO hung for ever and /dev/zero was read until memory ran
# out. They now go through the reader every other input uses.
RAW_DAMAGE = {
    "folder": (lambda p: _replace(p, Path.mkdir), "is a folder, expected"),
    "latin-1": (lambda p: p.write_bytes("caf\u00e9\n".encode("latin-1")), "not UTF-8 text, expected"),
}
RAW_SOURCES = {
    "split-list": ("assembly101-o", lambda raw: raw / "train_split.txt", "a split file"),
    "assembly-csv": ("assembly101-o", lambda raw: sorted((raw / "annots").glob("*.csv"))[0],
                     "an Assembly101 annotation CSV"),
    "epic-labels": ("epic-tent-o", lambda raw: raw / "Synchronised_action_label.txt", "an EPIC-Tent label file"),
}


def _raw_copy(data_dir: Path, tmp_path: Path, dataset: str) -> tuple[Path, list[str]]:
    raw = tmp_path / "raw"
    shutil.copytree(data_dir / dataset / "raw", raw)
    option = "--assembly101" if dataset == "assembly101-o" else "--epic-tent"
    return raw, ["prepare", option, str(raw), "--out", str(tmp_path / "out")]


@pytest.mark.parametrize("damage", RAW_DAMAGE)
@pytest.mark.parametrize("source", RAW_SOURCES)
def test_a_damaged_raw_text_source_is_one_error_line(
    source: str, damage: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli_errors import cli_error
    from tgml.bench.prego_bench_cli import main as prego_bench

    dataset, locate, what = RAW_SOURCES[source]
    raw, argv = _raw_copy(data_dir, tmp_path, dataset)
    path = locate(raw)
    change, message = RAW_DAMAGE[damage]
    change(path)
    assert cli_error(prego_bench, argv, capsys) == f"error: {path}: {message} {what}"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("special", ["fifo", "dev-zero"])
def test_a_raw_source_that_is_a_fifo_or_a_device_is_refused_without_reading_it(
    special: str, data_dir: Path, tmp_path: Path
) -> None:
    import os
    import resource
    import subprocess
    import sys

    raw, argv = _raw_copy(data_dir, tmp_path, "assembly101-o")
    path = raw / "train_split.txt"
    path.unlink()
    if special == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")

    def bounded() -> None:  # before the fix /dev/zero was read until memory ran out: bound the child, not the host
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    done = subprocess.run([sys.executable, "-m", "tgml.bench.prego_bench_cli", *argv], capture_output=True, text=True,
                          timeout=60, preexec_fn=bounded)
    kind = "a FIFO (named pipe)" if special == "fifo" else "a character device"
    assert (done.returncode, done.stderr.splitlines()) == (
        2, [f"error: {path}: is {kind}, not a regular file; expected a split file"])


def test_a_failed_write_leaves_every_prepared_file_as_it_was(data_dir: Path, tmp_path: Path) -> None:
    # The four files were written one by one: a failure at the last replaced the first three, a train.json of this
    # run beside a test.json of an older one.
    out = tmp_path / "out"
    for name in ("assembly101-o/train.json", "assembly101-o/test.json", "epic-tent-o/train.json"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("{}")
    (out / "epic-tent-o" / "test.json").mkdir()  # the last file cannot be written
    config = PrepareConfig(data_dir / "assembly101-o" / "raw", data_dir / "epic-tent-o" / "raw", out)
    with pytest.raises(InputError, match="test.json: is a folder"):
        prepare_all(config)
    assert [(out / n).read_text() for n in ("assembly101-o/train.json", "assembly101-o/test.json",
                                            "epic-tent-o/train.json")] == ["{}"] * 3


# A field over the csv module's 128 KiB limit ended in a `_csv.Error` traceback (exit status 1).
@pytest.mark.parametrize("source", ["assembly-csv", "epic-labels"])
def test_a_raw_csv_field_over_the_csv_limit_is_one_error_line(
    source: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli_errors import cli_error
    from tgml.bench.prego_bench_cli import main as prego_bench

    dataset, locate, _ = RAW_SOURCES[source]
    raw, argv = _raw_copy(data_dir, tmp_path, dataset)
    path = locate(raw)
    lines = path.read_text().splitlines()
    lines[500 if source == "epic-labels" else 1] += "x" * 200_000
    path.write_text("\n".join(lines) + "\n")
    err = cli_error(prego_bench, argv, capsys)
    assert err.startswith(f"error: {path}: not a CSV file this can read (field larger than field limit"), err
    assert not (tmp_path / "out").exists()


# An empty split or annotation CSV was taken: prepare wrote a split of no video, or a video of no key-step, and the
# benchmark scored them without a word. No published file is empty.
@pytest.mark.parametrize(("dataset", "locate", "message"), [
    ("assembly101-o", lambda raw: raw / "train_split.txt", "names no video"),
    ("assembly101-o", lambda raw: sorted((raw / "annots").glob("*.csv"))[0], "no row (each row is one key-step"),
    ("epic-tent-o", lambda raw: raw / "train_split.json", "names no video"),
], ids=["assembly-split", "assembly-csv", "epic-split"])
def test_an_empty_raw_source_is_one_error_line(
    dataset: str, locate, message: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli_errors import cli_error
    from tgml.bench.prego_bench_cli import main as prego_bench

    raw, argv = _raw_copy(data_dir, tmp_path, dataset)
    path = locate(raw)
    if dataset == "assembly101-o" and path.suffix == ".csv":  # a video of the train split, so that it is read
        (raw / "train_split.txt").write_text(path.stem + "\n")
    path.write_text("{}" if path.suffix == ".json" else "")
    assert cli_error(prego_bench, argv, capsys).startswith(f"error: {path}: {message}")
    assert not (tmp_path / "out").exists()
