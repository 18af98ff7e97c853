"""Annotations as a table: one row per segment, ``video,step,start,end`` (docs/data-and-citations.md).

A researcher's labels often come out of a labelling tool or a spreadsheet as such a table, not as the JSON of the
public data sets; `read_annotation_table` turns a ``.csv`` (or tab-separated ``.tsv``) file into the same structure
(``{"taxonomy": ..., "annotations": ...}``) that `graphs.annotations.load_annotations` then checks as it checks a JSON
file, so every command that reads annotations reads it. What only a table can get wrong (a row of too few fields, a
time that is not one, a step written two ways) is refused here, naming the file, the line and the column, because
the JSON-shaped names of the later checks (``annotations['v'].segments[3]``) point at nothing in a table.

The scenario is `DEFAULT_SCENARIO` unless a ``scenario`` column names it: not the file's name, which a copy renames
(a detector trained from ``labels.csv`` was then refused beside a graph learned from its copy ``eggs.csv``). Step ids
are the step names in sorted order, numbers by their value (`step_order`), so two tables of the same steps (one for
the detector, one for the graph) number them alike whatever order their rows come in.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from graphs.common.errors import InputError
from graphs.common.files import MAX_TEXT_FILE_BYTES, read_bytes, wide_encoding
from graphs.common.safe_text import printable
from graphs.limits import name_fault

TABLE_SUFFIXES: Final = frozenset({".csv", ".tsv"})
DEFAULT_SCENARIO: Final = "procedure"  # the scenario of a table without a scenario column
COLUMNS: Final = ("video", "step", "start", "end")  # the order of a table without a header row
# The names a header may give each column: those of labelling tools' exports and of the JSON fields, the more
# telling first (a header of both "file" and "video" columns names the recording in "video").
_ALIASES: Final = {
    "video": ("video", "video_id", "recording", "recording_id", "video_name", "file"),
    "step": ("step", "step_name", "key_step", "keystep", "label", "action", "activity", "name"),
    "start": ("start", "start_time", "start_s", "start_sec", "start_seconds", "begin", "begin_time", "from"),
    "end": ("end", "end_time", "end_s", "end_sec", "end_seconds", "stop", "stop_time", "to"),
    "has_errors": ("has_errors", "has_error", "mistake", "error", "errors"),
    "scenario": ("scenario", "procedure", "task", "recipe"),
}
_TIME: Final = re.compile(r"(?:(\d+):)?(\d{1,2}):(\d{1,2}(?:[.,]\d*)?)")  # [h:]mm:ss[.fff]
# A video column often holds the file's name (a labelling tool exports it): its recording is the name without these.
FILE_ENDINGS: Final = (".npy", ".mp4", ".avi", ".mkv", ".mov", ".webm")
# 1.0 and 0.0: a flag column that pandas wrote as floats (an integer column with an empty cell becomes one).
# correct and mistake: the words of Assembly101's own label column.
_TRUE: Final = frozenset({"1", "1.0", "true", "yes", "y", "x", "mistake", "wrong"})
_FALSE: Final = frozenset({"", "0", "0.0", "false", "no", "n", "correct"})


def is_table(path: str | Path) -> bool:
    """Whether an annotation file is read as a table (its name ends in ``.csv`` or ``.tsv``, in any case)."""
    return Path(path).suffix.lower() in TABLE_SUFFIXES


def looks_like_table(text: str) -> bool:
    """Whether text that is not JSON reads as a table's first line (a comma, semicolon or tab in it): said to a user
    who gave a table a name that does not end in ``.csv``."""
    first = text.lstrip("\ufeff").splitlines()[0] if text.strip() else ""
    return not first.lstrip().startswith(("{", "[")) and any(sep in first for sep in ",;\t")


def _column_name(field: str) -> str:
    """A header field as a column name: lower case, a unit in brackets dropped (``Start (s)``), spaces as ``_``."""
    return re.sub(r"[\s-]+", "_", re.sub(r"[(\[].*$", "", field).strip().lower())


def _header(path: Path, fields: list[str], line: int) -> dict[str, int] | None:
    """The columns a header row names, or None when the row is data (a segment row has a time in it). A column named
    twice is refused: which of the two holds the times is not for a reader to guess."""
    if any(parse_time(field) is not None for field in fields):
        return None
    names = [_column_name(field) for field in fields]
    found: dict[str, int] = {}
    for column, aliases in _ALIASES.items():
        alias = next((name for name in aliases if name in names), None)
        if alias is None:
            continue
        twice = [k for k, name in enumerate(names) if name == alias]
        if len(twice) > 1:  # "Start (frame)" and "Start (s)" too: the unit is not read
            shown = " and ".join(f"{printable(fields[k].strip())[:40]!r} (column {k + 1})" for k in twice[:2])
            raise InputError(f"{path} line {line}: the header names the {column} twice, {shown}: rename or remove "
                             f"one, so that one column holds the {column} in seconds")
        found[column] = names.index(alias)
    return found or None


def _numbered_header(fields: list[str]) -> dict[str, int] | None:
    """The columns of a header that numbers them (``0,1,2,3``, after an empty field for the index: pandas' ``to_csv``
    of a frame without column names), in the order of a table without a header; None for any other row. It has
    times in it, so it was read as a segment: video '0', step '1', from 2 s to 3 s, a step learned into the graph."""
    names = [field.strip() for field in fields]
    index = 1 if names[:1] == [""] else 0
    if len(names) - index < len(COLUMNS) or names[index:] != [str(k) for k in range(len(names) - index)]:
        return None
    return {column: k + index for k, column in enumerate((*COLUMNS, "has_errors")) if k + index < len(names)}


def _delimiter(path: Path, first: str) -> str:
    """The table's separator, by the first line: a tab in a ``.tsv`` file, and in a ``.csv`` one whose first line
    has three (tab-separated text saved under ``.csv``, as Excel's "Unicode text" often is renamed); a semicolon
    where the first line has one and no comma outside quotes (the export of a spreadsheet set to a language that
    writes decimal commas); else a comma (a ``.tsv`` file without a tab is comma-separated text under that name)."""
    unquoted = re.sub(r'"[^"]*"', "", first)
    if "\t" in unquoted and (path.suffix.lower() == ".tsv" or unquoted.count("\t") >= len(COLUMNS) - 1):
        return "\t"
    return ";" if ";" in unquoted and "," not in unquoted else ","


def _wide_codec(data: bytes, wide: str) -> str:
    """The codec of UTF-16 or UTF-32 ``data``: by its byte-order mark, else by which byte of each character is not
    NUL (ASCII text: the first in little-endian order)."""
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE) if wide == "UTF-32"
                       else (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return wide.lower()  # the mark says the byte order, and is dropped
    order = "be" if data[:1] == b"\0" else "le"
    return f"{wide.lower()}-{order}"


def table_text(path: Path) -> str:
    """The table's text: UTF-8 (a byte-order mark dropped), or UTF-16 / UTF-32, which Excel writes as "Unicode
    text" and is read whole without a guess. Other bytes are refused naming the line of the first that is not
    UTF-8, and what it reads as in Windows-1252, the encoding of Excel's plain "CSV" on most Windows systems."""
    data = read_bytes(path, "annotation table", MAX_TEXT_FILE_BYTES)
    wide = wide_encoding(data)
    if wide is not None:
        try:
            return data.decode(_wide_codec(data, wide)).lstrip("\ufeff")
        except UnicodeDecodeError as err:
            raise InputError(f"{path}: {wide} text with bytes that are not {wide} (at byte {err.start}): save it as "
                             "UTF-8") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        start = data.rfind(b"\n", 0, err.start) + 1
        end = data.find(b"\n", err.start)
        shown = data[start:end if end >= 0 else len(data)].rstrip(b"\r").decode("cp1252", errors="replace")
        line = data.count(b"\n", 0, err.start) + 1
        raise InputError(f"{path} line {line}: not UTF-8 text (in Windows-1252 it "
                         f"reads {printable(shown)[:80]!r}): save the table as UTF-8 (Excel: \"CSV UTF-8\")") from None


def parse_time(text: str, decimal_comma: bool = False) -> float | None:
    """Seconds from a table's time field: ``65.5``, or ``1:05.5`` (m:ss) or ``1:01:05`` (h:mm:ss); None if not one."""
    text = text.strip()
    if decimal_comma:
        text = text.replace(",", ".")
    clock = _TIME.fullmatch(text)
    if clock is not None:
        hours, minutes, seconds = clock.groups()
        if int(minutes) > 59 and hours is not None or float(seconds.replace(",", ".")) >= 60:
            return None
        return int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds.replace(",", "."))
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


@dataclass
class _Table:
    """What the rows built so far: the steps by name and the videos' segments, in the file's order."""

    scenario_default: str
    steps: dict[str, dict[str, int]]  # scenario -> step name -> first line naming it
    spelled: dict[str, dict[str, tuple[str, int]]]  # scenario -> folded name -> (name, line)
    videos: dict[str, dict[str, Any]]


def _fold(name: str) -> str:
    """A step name with case, spaces, ``_`` and ``-`` ignored: two names equal this way are one step written twice."""
    return re.sub(r"[\s_\-]+", "", name.casefold())


def read_annotation_table(path: str | Path, check_times: bool = True) -> dict[str, Any]:
    """A ``.csv`` / ``.tsv`` annotation table as the annotation JSON's structure.

    Rows: ``video, step, start, end`` (a header row may name them in any order, beside ``has_errors`` and
    ``scenario``; without one, the columns are in that order, a fifth one ``has_errors``). Times are seconds, or
    ``m:ss`` / ``h:mm:ss``. Blank lines and lines starting with ``#`` are skipped; a byte-order mark and Windows line
    endings are read as a spreadsheet writes them.

    Args:
        path: the file.
        check_times: refuse a negative time and a segment that ends before it starts (False: ``--order-only``, which
            reads only the order of the segments, as `graphs.annotations.load_annotations` reads a JSON file).

    Returns:
        ``{"taxonomy": {scenario: {"<id>": {"id", "name"}}}, "annotations": {video: {"scenario", "recording_id",
        "segments": [...]}}}``.

    Raises:
        InputError: a row that is not a segment, naming the file, the line and the column.
    """
    path = Path(path)
    # A byte-order mark inside the text too: tables saved with one and joined (cat a.csv b.csv) start a line with it,
    # and the recording or the repeated header was not matched for an invisible character.
    text = table_text(path).replace("\ufeff", "")
    first = next((line for line in io.StringIO(text) if line.strip() and not line.lstrip().startswith("#")), "")
    first = first.rstrip("\r\n")
    sep = _delimiter(path, first)
    named_sep = re.fullmatch(r" *sep=(.)\s*", first)
    if named_sep is not None:  # Excel's "sep=;" line, which names the separator of the rows after it
        sep = named_sep.group(1)
        text = text.replace(first, "#" + first, 1)  # read as a comment line from here on
    table = _Table(DEFAULT_SCENARIO, {}, {}, {})
    columns: dict[str, int] | None = None
    header: list[str] = []
    width = len(COLUMNS) + 1  # a row's fields at most: without a header, the fifth is has_errors
    positional = dict(zip((*COLUMNS, "has_errors"), range(5), strict=True))
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
    line = 1
    try:
        while True:
            line = rows.line_num + 1  # where the row starts: a quoted field may run over several lines
            fields = next(rows, None)
            if fields is None:
                break
            if not any(field.strip() for field in fields) or fields[0].lstrip().startswith("#"):
                continue
            try:
                _check_quotes(path, fields, line, rows.line_num, sep)
                if columns is None:
                    numbered = _numbered_header(fields)
                    if numbered is not None:
                        columns, width, header = numbered, len(fields), [field.strip() for field in fields]
                        continue
                    named = _header(path, fields, line)
                    if named is not None:
                        missing = [col for col in COLUMNS if col not in named]
                        if missing:
                            raise InputError(f"{path} line {line}: the header names no {' and no '.join(missing)} "
                                             f"column (it has {printable(', '.join(fields))[:200]}; expected "
                                             f"{','.join(COLUMNS)}, optionally has_errors and scenario)")
                        columns, width, header = named, len(fields), [field.strip() for field in fields]
                        continue
                    if all(parse_time(field) is None for field in fields):
                        raise InputError(f"{path} line {line}: neither a header naming the columns "
                                         f"{','.join(COLUMNS)} nor a segment row, which has a time in it (it has "
                                         f"{printable(', '.join(fields))[:200]})")
                    columns = positional
                if header and fields[0].strip() == header[0] and [field.strip() for field in fields] == header:
                    continue  # the header again: tables joined one after the other (cat a.csv b.csv)
                if any(field.strip() for field in fields[width:]):
                    # A step name with an unquoted comma ("add salt, pepper") shifts every field after it, and so
                    # does a decimal comma in a comma-separated file.
                    most = f"the header has {width}" if columns is not positional else f"a row has at most {width}"
                    raise InputError(f"{path} line {line}: {len(fields)} fields, {most}: a step name holding the "
                                     f"separator {sep!r} must be in double quotes{_decimal_comma_hint(sep)}")
                _add_row(path, table, columns, fields, line, sep, check_times)
            except InputError as err:
                if rows.line_num > line:  # a field of several lines: most often a double quote never closed
                    raise InputError(f"{err} (the row runs from line {line} to line {rows.line_num}: is a double "
                                     f"quote on line {line} never closed?)") from None
                raise
    except csv.Error as err:
        if "field larger than field limit" in str(err):  # every row after an unclosed quote, in a long table
            raise InputError(f"{path} line {line}: a field runs on past {csv.field_size_limit()} characters: is a "
                             f"double quote on line {line} never closed?") from None
        raise InputError(f"{path} line {line}: not a table this can read ({err})") from None
    if not table.videos:
        raise InputError(f"{path}: no segment rows (expected one row per segment: {','.join(COLUMNS)})")
    taxonomy = {scenario: {str(k): {"id": k, "name": name} for k, name in enumerate(sorted(names, key=step_order))}
                for scenario, names in table.steps.items()}
    ids = {scenario: {entry["name"]: entry["id"] for entry in steps.values()} for scenario, steps in taxonomy.items()}
    for record in table.videos.values():
        for seg in record["segments"]:
            seg["step_id"] = ids[record["scenario"]][seg["step_name"]]
    return {"taxonomy": taxonomy, "annotations": table.videos}


def step_order(name: str) -> tuple[tuple[tuple[int, int | str], ...], str]:
    """The sort key of a step name: its runs of digits compared as numbers, so ``step2`` comes before ``step10`` (as
    strings ``step10`` came first, and a table of numbered steps listed them 1, 10, 11, 2); the name itself breaks a
    tie (``cut01`` and ``cut1``), so the order stays total."""
    runs = re.split(r"(\d+)", name)
    return tuple((0, int(run)) if k % 2 else (1, run) for k, run in enumerate(runs) if run), name


def _one_typo_apart(a: str, b: str) -> bool:
    """Whether two different names differ by one letter added, left out, replaced, or two neighbours swapped; a digit
    replaced by another is no typo (``cut1``, ``cut3``: numbered steps)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [k for k in range(len(a)) if a[k] != b[k]]
        if len(diff) == 1:
            return not (a[diff[0]].isdigit() and b[diff[0]].isdigit())
        return len(diff) == 2 and diff[1] == diff[0] + 1 and (a[diff[0]], a[diff[1]]) == (b[diff[1]], b[diff[0]])
    return one_left_out(a, b)


def one_left_out(a: str, b: str) -> bool:
    """Whether one of the two names is the other with one character left out (``21_3``, ``21_13``)."""
    if abs(len(a) - len(b)) != 1:
        return False
    short, long = (a, b) if len(a) < len(b) else (b, a)
    k = next((k for k in range(len(short)) if short[k] != long[k]), len(short))
    return short[k:] == long[k + 1:]


def step_spelling_warning(path: str | Path, data: dict[str, Any]) -> str | None:
    """One ``warning:`` line on the step names of a table that look like another step mistyped, or None.

    A table makes a step of every name it holds, so a typo in one row (``insert_pol``) became a step of its own: a
    class of the detector and a node of the graph, while the step it was meant to be went missing from that video
    (the graph then lost the pre-conditions that video broke). A name is suspected when it is written in one video
    only, has five letters or more and is one typo (`_one_typo_apart`; case, spaces, ``_`` and ``-`` ignored) from a
    step of two videos or more that this video does not hold. Warned of rather than refused: two real steps may be
    named one letter apart.

    Args:
        path: the table (named in the line).
        data: `read_annotation_table`'s result.
    """
    found = []
    for scenario in data["taxonomy"]:
        videos_of: dict[str, set[str]] = {}
        for video, record in data["annotations"].items():
            if record["scenario"] == scenario:
                for seg in record["segments"]:
                    videos_of.setdefault(seg["step_name"], set()).add(video)
        for rare, held in videos_of.items():
            if len(held) != 1 or len(_fold(rare)) < 5:  # pole, hole: short names are often this close
                continue
            near = [name for name, others in videos_of.items() if len(others) >= 2 and not others & held
                    and _one_typo_apart(_fold(rare), _fold(name))]
            if near:
                found.append(f"step {printable(rare)!r} (video {printable(next(iter(held)))!r} only) looks like "
                             f"{printable(near[0])!r} mistyped (in {len(videos_of[near[0]])} other videos, not "
                             "that one)")
    if not found:
        return None
    return (f"warning: {path}: {'; '.join(found[:3])}{f'; and {len(found) - 3} more' if len(found) > 3 else ''}: "
            "each name a table holds is a step of its own (a class of the detector, a node of the graph): write one "
            "step the same way in every row")


def _decimal_comma_hint(sep: str) -> str:
    """The end of a line refusing a comma-separated row of too many fields: a decimal comma splits a time in two."""
    return ", and a time holding a decimal comma (1,5) must be written with a point (1.5)" if sep == "," else ""


def _check_quotes(path: Path, fields: list[str], line: int, last: int, sep: str) -> None:
    """Refuse a row whose field holds whole rows: a double quote never closed, or closed only rows later, reads
    every line up to the next quote as that field (a step of several lines, each a row, was taken silently)."""
    if last == line:
        return
    for field in fields:
        # A row of its own: at least two times among its fields (a cell of two lines listing things is no row).
        if any(sum(parse_time(cell) is not None for cell in part.split(sep)) >= 2 for part in field.splitlines()[1:]):
            raise InputError(f"{path} line {line}: a field holds lines that read as rows of their own")


def _field(path: Path, fields: list[str], columns: dict[str, int], column: str, line: int) -> str:
    """One column's field of a row, stripped; a row too short for it is refused."""
    k = columns[column]
    if k >= len(fields):
        raise InputError(f"{path} line {line}: {len(fields)} field{'' if len(fields) == 1 else 's'}, no {column} "
                         f"(expected {','.join(COLUMNS)}: the video, the step, its start and end in seconds)")
    return fields[k].strip()


def _add_row(path: Path, table: _Table, columns: dict[str, int], fields: list[str], line: int, sep: str,
             check_times: bool) -> None:
    """One segment row added to ``table``, every field checked."""
    where = f"{path} line {line}"
    decimal_comma = sep != ","
    video = _field(path, fields, columns, "video", line)
    step = _field(path, fields, columns, "step", line)
    if video.lower().endswith(FILE_ENDINGS):  # a file's name, or its path as some tools export it
        video = re.split(r"[\\/]", video)[-1].rsplit(".", 1)[0]
    if not video:
        raise InputError(f"{where}: the video field is empty")
    if "\n" in video or "\r" in video:
        raise InputError(f"{where}: the video field {printable(video)[:60]!r} holds a line break")
    fault = name_fault(step)
    if fault is not None:
        raise InputError(f"{where}: step {fault}")
    times = []
    for column in ("start", "end"):
        raw = _field(path, fields, columns, column, line)
        value = parse_time(raw, decimal_comma)
        if value is None:
            point = (f"; with a point, not a decimal comma: {raw.replace(',', '.')}"
                     if re.fullmatch(r"\d+,\d+", raw) else "")
            raise InputError(f"{where}: {column} = {printable(raw)[:40]!r} is not a time (seconds, such as 65.5, "
                             f"or m:ss, such as 1:05.5){point}")
        times.append(value)
    start, end = times
    if check_times and not start == end < 0:  # a step never done, as the JSON writes it (CaptainCook4D's -1)
        if start < 0 or end < 0:
            raise InputError(f"{where}: a time below zero ({start:g} .. {end:g} s); times are seconds from the start "
                             "of the video")
        if end <= start:
            raise InputError(f"{where}: the segment ends at {end:g} s, {'before' if end < start else 'when'} it "
                             f"starts ({start:g} s)")
    scenario = _field(path, fields, columns, "scenario", line) if "scenario" in columns else table.scenario_default
    if not scenario:
        raise InputError(f"{where}: the scenario field is empty")
    flag = _field(path, fields, columns, "has_errors", line).lower() if (
        "has_errors" in columns and columns["has_errors"] < len(fields)) else ""
    if flag not in _TRUE | _FALSE:
        if parse_time(flag) is not None:  # a number: most often a field shifted into the column (1,5 as 1 and 5)
            raise InputError(f"{where}: has_errors = {printable(flag)[:20]!r} is not true or false: are the fields "
                             f"shifted? A step name holding the separator {sep!r} must be in double quotes"
                             f"{_decimal_comma_hint(sep)}")
        raise InputError(f"{where}: has_errors = {printable(flag)[:20]!r} is not true or false (1/0, yes/no, "
                         "mistake/correct, or empty)")
    known = table.steps.setdefault(scenario, {})
    if step not in known:
        spelled = table.spelled.setdefault(scenario, {})
        other = spelled.get(_fold(step))
        if other is not None:
            raise InputError(f"{where}: step {printable(step)!r} is step {printable(other[0])!r} of line {other[1]} "
                             "written another way: write one step the same way in every row (each spelling would "
                             "be a step of its own)")
        spelled[_fold(step)] = (step, line)
        known[step] = line
    record = table.videos.setdefault(video, {"scenario": scenario, "recording_id": video, "segments": []})
    if record["scenario"] != scenario:
        raise InputError(f"{where}: video {printable(video)!r} is of scenario {printable(scenario)!r} here, "
                         f"{printable(record['scenario'])!r} in an earlier row")
    record["segments"].append({"step_name": step, "start_time": start, "end_time": end,
                               "has_errors": flag in _TRUE, "description": ""})


