"""Rebuild the PREGO benchmark JSON files from the official annotation sources.

Follows the derivation facts of ``data/DERIVATION.md``: the output of `prepare_all` is byte-identical to
``assembly101-o/{train,test}.json`` and ``epic-tent-o/{train,test}.json`` of the shared data folder
(checked against ``SHA256SUMS`` by the tests). Command: ``prego-bench prepare --assembly101 RAW
--epic-tent RAW --out DIR``.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from graphs.common.errors import InputError
from graphs.common.files import check_output, read_json, read_text_file, write_files
from graphs.common.options import is_decimal_digits

T = TypeVar("T")
ASSEMBLY_SCENARIO: Final = "assembly101"
EPIC_SCENARIO: Final = "epic-tent"
SPLITS: Final = ("train", "test")

# EPIC-Tent's label file has known defects; these repairs (0-based line index, header = line 0) are part of
# the published derivation and must be applied before any other processing (DERIVATION.md).
EPIC_LABEL_FIXES: Final[dict[int, int]] = {43: 0, 197: 5, 260: 4, 273: 4, 280: 4, 331: 4, 398: 4, 690: 4, 995: 4}
EPIC_DELETED_LINES: Final = (195, 6, 5, 4, 3, 2, 1)
# Missing GoPro times are written "-1:-1:-1:-1"; the published files keep the formula's value for them.
_TIMECODE = re.compile(r"^(-?\d+):(-?\d+):(-?\d+):(-?\d+)$")


@dataclass(frozen=True)
class PrepareConfig:
    """Where the raw sources are and where the JSON files go.

    Args:
        assembly101: Assembly101-O raw folder (``annots/``, ``*_split.txt``, ``Assembly101-O_action_dict.json``),
            or None to skip that dataset.
        epic_tent: EPIC-Tent-O raw folder (``Synchronised_action_label.txt``, ``*_split.json``,
            ``EPIC-Tent-O_action_dict.json``), or None to skip it.
        out: output folder; ``assembly101-o/`` and ``epic-tent-o/`` are created inside it.
    """

    assembly101: Path | None
    epic_tent: Path | None
    out: Path

    def __post_init__(self) -> None:
        if self.assembly101 is None and self.epic_tent is None:
            raise InputError("prepare: give at least one raw folder, --assembly101 or --epic-tent")
        for name in ("assembly101", "epic_tent"):
            value = getattr(self, name)
            if value is not None and not Path(value).is_dir():
                raise InputError(f"prepare: --{name.replace('_', '-')} {value}: not a folder")


def dump_annotations(data: dict[str, Any]) -> str:
    """Serialise an annotation file the way the published files are written (4 spaces, insertion order)."""
    return json.dumps(data, indent=4)


def _taxonomy_entry(step_id: int, name: str) -> dict[str, Any]:
    return {"name": name, "id": step_id, "is_leafnode": True, "parent_id": None, "parent_name": None}


def _segment(step_id: int, start: int, end: int, name: str, has_errors: bool) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "start_time": start,
        "end_time": end,
        "description": name,
        "has_errors": has_errors,
        "step_name": name,
    }


def _check_id_keys(names: dict[str, Any], path: Path) -> None:
    """An action dictionary maps integer ids (written as JSON keys) to names."""
    bad = next((key for key, name in names.items() if not is_decimal_digits(key) or not isinstance(name, str)), None)
    if bad is not None:
        raise InputError(f"{path}: entry {bad!r}: expected an integer action id mapped to a name")


def _read_lines(path: Path, what: str) -> list[str]:
    """The lines of a raw text source, read as every input is (`read_text_file`): a folder, a FIFO or a device in its
    place, bytes that are not UTF-8 or a file too large are one-line errors, never a traceback, a hang or a read of
    ``/dev/zero`` until memory runs out."""
    return read_text_file(path, what).splitlines()


def _csv_rows(reader: Iterator[T], path: Path) -> Iterator[T]:
    """The rows of a raw CSV source; what the csv module refuses (a field over its 128 KiB limit) is an `InputError`
    naming the file, where it was a ``_csv.Error`` traceback. No row number: EPIC-Tent's rows are counted after
    the published line repairs, which would name the wrong line of the file."""
    try:
        yield from reader
    except csv.Error as err:
        raise InputError(f"{path}: not a CSV file this can read ({err})") from None


# -- Assembly101-O ------------------------------------------------------------------------------------------------
def assembly_step_name(verb: str, this: str) -> str:
    """Key-step name of one Assembly101 mistake-CSV row: ``verb-this`` with spaces as ``_`` (DERIVATION.md)."""
    name = f"{verb}-{this.replace(' ', '_')}"
    return "attach-figurine" if name == "position-figurine" else name


def build_assembly101(raw: Path, split: str) -> dict[str, Any]:
    """Assembly101-O annotation file content for one split.

    Args:
        raw: the raw folder (``annots/<video>.csv``, ``<split>_split.txt``, ``Assembly101-O_action_dict.json``).
        split: ``"train"`` or ``"test"``.

    Returns:
        ``{"annotations": ..., "taxonomy": ...}`` in the published key order.
    """
    raw = Path(raw)
    names = read_json(raw / "Assembly101-O_action_dict.json", "Assembly101-O action dictionary")
    if not isinstance(names, dict):
        raise InputError(f"{raw / 'Assembly101-O_action_dict.json'}: expected an object id -> name")
    _check_id_keys(names, raw / "Assembly101-O_action_dict.json")
    id_of = {name: int(key) for key, name in names.items()}
    videos = {line.strip() for line in _read_lines(raw / f"{split}_split.txt", "split file") if line.strip()}
    if not videos:  # an empty split wrote an annotation file of no video, and the benchmark then scored nothing
        raise InputError(f"{raw / f'{split}_split.txt'}: names no video")
    csvs = sorted(p for p in (raw / "annots").glob("*.csv") if p.stem in videos)
    missing = videos - {p.stem for p in csvs}
    if missing:
        raise InputError(f"{raw / 'annots'}: no CSV for video {sorted(missing)[0]!r} of {split}_split.txt")
    annotations: dict[str, Any] = {}
    for path in csvs:
        segments = []
        # Read whole through the shared reader (bounded, UTF-8, regular files only); newline="" keeps csv's own
        # handling of line ends, as opening the file with newline="" did.
        with io.StringIO(read_text_file(path, "Assembly101 annotation CSV"), newline="") as fh:
            for row_no, row in enumerate(_csv_rows(csv.reader(fh), path), start=1):
                if len(row) < 6:
                    raise InputError(f"{path}: row {row_no} has {len(row)} columns, expected at least 6")
                name = assembly_step_name(row[2], row[3])
                if name not in id_of:
                    raise InputError(f"{path}: row {row_no}: step {name!r} is not in the action dictionary")
                try:
                    start, end = int(row[0]), int(row[1])
                except ValueError:
                    raise InputError(f"{path}: row {row_no}: start/end frame is not an integer") from None
                mistake = row[5].strip() == "mistake"
                segments.append(_segment(id_of[name], start, end, name, mistake))
                if mistake:
                    break
        if not segments:  # an empty file wrote a video of no key-step without a word
            raise InputError(f"{path}: no row (each row is one key-step of the video)")
        annotations[path.stem] = {"scenario": ASSEMBLY_SCENARIO, "recording_id": path.stem, "segments": segments}
    taxonomy = {key: _taxonomy_entry(int(key), name) for key, name in names.items()}
    return {"annotations": annotations, "taxonomy": {ASSEMBLY_SCENARIO: taxonomy}}


# -- EPIC-Tent-O --------------------------------------------------------------------------------------------------
def timecode_ms(code: str) -> int:
    """``HH:MM:SS:mmm`` to milliseconds (DERIVATION.md); fields may be -1 (missing), kept as the formula gives."""
    match = _TIMECODE.match(code.strip()) if isinstance(code, str) else None  # a short CSV row gives None
    if not match:
        raise InputError(f"EPIC-Tent timecode {code!r} is not HH:MM:SS:mmm")
    hh, mm, ss, ms = (int(g) for g in match.groups())
    return (hh * 3600 + mm * 60 + ss) * 1000 + ms


def _timecode_at(code: str, where: str) -> int:
    """`timecode_ms`, with the file and video of a bad timecode in the message."""
    try:
        return timecode_ms(code)
    except InputError as err:
        raise InputError(f"{where}: {err}") from None


def repaired_epic_rows(path: Path) -> list[dict[str, str]]:
    """Rows of ``Synchronised_action_label.txt`` after the published line repairs, as dicts by header name."""
    lines = _read_lines(path, "EPIC-Tent label file")
    if len(lines) <= max(EPIC_LABEL_FIXES):
        raise InputError(f"{path}: {len(lines)} lines, expected the full EPIC-Tent label file")
    for index, label in EPIC_LABEL_FIXES.items():
        lines[index] = lines[index].rsplit(",", 1)[0] + f",{label}"
    for index in EPIC_DELETED_LINES:  # descending, so earlier indices stay valid
        del lines[index]
    rows = list(_csv_rows(csv.DictReader(lines), path))
    needed = {"subject_id", "str_GoPro_ts", "end_GoPro_ts", "action_label"}
    if rows and not needed <= rows[0].keys():
        raise InputError(f"{path}: header lacks {sorted(needed - rows[0].keys())}")
    return rows


def build_epic_tent(raw: Path, split: str) -> dict[str, Any]:
    """EPIC-Tent-O annotation file content for one split.

    Args:
        raw: the raw folder (``Synchronised_action_label.txt``, ``<split>_split.json``,
            ``EPIC-Tent-O_action_dict.json``).
        split: ``"train"`` or ``"test"``.

    Returns:
        ``{"annotations": ..., "taxonomy": ...}`` in the published key order.
    """
    raw = Path(raw)
    names = read_json(raw / "EPIC-Tent-O_action_dict.json", "EPIC-Tent-O action dictionary")
    counts = read_json(raw / f"{split}_split.json", "split file")
    if not isinstance(names, dict) or not isinstance(counts, dict):
        raise InputError(f"{raw}: action dictionary and split file must be JSON objects")
    _check_id_keys(names, raw / "EPIC-Tent-O_action_dict.json")
    if not counts:
        raise InputError(f"{raw / f'{split}_split.json'}: names no video")
    labels_path = raw / "Synchronised_action_label.txt"
    rows = repaired_epic_rows(labels_path)
    by_subject: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_subject.setdefault(f"annotations_{row['subject_id']}", []).append(row)
    annotations: dict[str, Any] = {}
    for video, count in counts.items():
        if video not in by_subject:
            raise InputError(f"{raw / f'{split}_split.json'}: video {video!r} has no rows in the label file")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise InputError(f"{raw / f'{split}_split.json'}: video {video!r}: {count!r} is not a number of steps >= 1")
        segments: list[dict[str, Any]] = []
        previous: int | None = None
        where = f"{labels_path}: {video}"
        for row in by_subject[video]:
            text = row["action_label"]
            if not is_decimal_digits((text or "").strip()) or str(int(text) + 1) not in names:
                raise InputError(
                    f"{where}: action_label {text!r} is not an action of "
                    f"{raw / 'EPIC-Tent-O_action_dict.json'}"
                )
            label = int(text)
            if label == previous:
                # A repeated label continues the segment before it (the source splits long actions).
                segments[-1]["end_time"] = _timecode_at(row["end_GoPro_ts"], where)
                continue
            if len(segments) < count:
                name = names[str(label + 1)]
                start, end = _timecode_at(row["str_GoPro_ts"], where), _timecode_at(row["end_GoPro_ts"], where)
                segments.append(_segment(label, start, end, name, False))
                previous = label
            else:
                segments[-1]["has_errors"] = True
                break
        annotations[video] = {"scenario": EPIC_SCENARIO, "recording_id": video, "segments": segments}
    taxonomy = {str(int(k) - 1): _taxonomy_entry(int(k) - 1, v) for k, v in names.items()}
    return {"annotations": annotations, "taxonomy": {EPIC_SCENARIO: taxonomy}}


def prepare_all(config: PrepareConfig) -> list[Path]:
    """Write ``train.json`` / ``test.json`` of each requested dataset under ``config.out``.

    Every file is built before the first one is written, and they are written as one set (`write_files`), so a raw
    source that turns out to be broken, or a write that fails part way, leaves the files already in ``config.out``
    as they were.

    Returns:
        The files written.
    """
    jobs = [
        ("assembly101-o", config.assembly101, build_assembly101),
        ("epic-tent-o", config.epic_tent, build_epic_tent),
    ]
    out = check_output(config.out, "data folder", folder=True, option="--out")
    for folder, raw, _ in jobs:
        if raw is not None and out.is_dir():  # in a new folder nothing can stand in the way
            check_output(out / folder, "data folder", folder=True)
    contents = {
        out / folder / f"{split}.json": dump_annotations(build(Path(raw), split))
        for folder, raw, build in jobs
        if raw is not None
        for split in SPLITS
    }
    # One set: a write that fails part way (a full disk) leaves every file as it was, never a train.json of this
    # run beside a test.json of an older one.
    return write_files([(path, text.encode("utf-8"), "annotation file", None) for path, text in contents.items()])
