"""Reader for the annotation JSON shared by Assembly101-O, EPIC-Tent-O and CaptainCook4D
(format in docs/data-and-citations.md): the one loader of annotation files, with the one segment check every
command that reads annotations shares.

``{"annotations": {video: {"scenario", "recording_id", "segments": [{"step_id", ...}]}},
"taxonomy": {scenario: {"<id>": {"name", "id", ...}}}}``

Every command that reads a user's annotation file (``tgml train``, ``prego-bench --annotations``,
``recognition-features``, ``stream-detect eval``) loads it here with the segment times checked (`check_segments`),
so they accept and refuse the same files: a video without segments, a negative time, a segment that ends before
(or when) it starts are refused, naming the video and the segment. A segment may leave its times out (the learners
read only the order); the commands that need times (features, eval) then say so.

Two things the public files hold are accepted, counted, and reported in one warning line per file on stderr
(`timing_warning`): segments that overlap (people do two things at once; EPIC-Tent-O, CaptainCook4D) and a segment
whose ``start_time`` equals its ``end_time`` below zero (CaptainCook4D's ``-1`` for a step never done, EPIC-Tent-O's
two ``-3661001``), which keeps its place in the order and covers no time. Where frames are labelled, the segment that
started last owns an overlap (`time_order` gives that order; `recognition.feature_folders.segment_targets` applies it).

The published benchmark files are read as published (``check_times=False``): the benchmarks, like the paper, read
only the order of their segments. ``tgml train --order-only`` and ``prego-bench --annotations ... --order-only``
read a file that way too.

The commands that need segment times (features, eval) take them in time order from `time_order`, and pick the
scenario with `choose_scenario`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import numpy as np

from graphs.annotation_csv import (
    COLUMNS,
    DEFAULT_SCENARIO,
    is_table,
    looks_like_table,
    one_left_out,
    parse_time,
    read_annotation_table,
    step_spelling_warning,
    table_text,
)
from graphs.common.errors import InputError, print_stderr
from graphs.common.file_kinds import GRAPH_FORMAT, is_captaincook_graph, mistaken_file
from graphs.common.files import read_json
from graphs.common.safe_text import count_of, first_few, printable, shortened, unknown_name
from graphs.common.settings_files import as_written, json_kind
from graphs.limits import MAX_STEPS, STEP_ID_RULE, is_finite_number, is_step_id, name_fault


def typo_of(name: str, names: set[str]) -> str | None:
    """The one of ``names`` that ``name`` is a slip of the keyboard for: the same but for case or separator
    (``17-3`` for ``17_3``), else one character doubled or dropped (``21_113``, ``21_3`` for ``21_13``); None when
    none is. A near spelling is no evidence: ids differ by one digit (17_19 and 17_49 are two recordings)."""
    def key(text: str) -> str:
        return re.sub(r"[\s_\-.:]+", "_", text.lower())

    same = sorted(n for n in names if key(n) == key(name))
    if same:
        return same[0]
    slips = sorted(n for n in names if one_left_out(n, name))
    return slips[0] if len(slips) == 1 else None


@dataclass(frozen=True)
class Video:
    """One annotated execution.

    Attributes:
        video: the video (recording) key.
        scenario: the procedure it executes.
        steps: key-step ids of its segments in file order, repeats kept. That is the order every benchmark uses;
            ``start_time`` / ``end_time`` are not read (41 of the 194 CaptainCook4D videos list segments out of
            start-time order, and the published figures come from the file order).
        has_errors: per segment, the ``has_errors`` flag (the PREGO test splits mark the mistake).
        spans: per segment, ``(start_time, end_time)`` in seconds, or None where the file gives no times.
    """

    video: str
    scenario: str
    steps: tuple[int, ...]
    has_errors: tuple[bool, ...]
    spans: tuple[tuple[float, float] | None, ...] = ()


@dataclass(frozen=True)
class TrainingVideos:
    """Which labelled executions of a scenario a graph learns from.

    Attributes:
        include_mistakes: also learn from executions with a ``has_errors`` segment. Off, they are left out: a graph
            learned from a mistaken order takes it as allowed and loses exactly the pre-condition the mistake breaks.
            The PREGO training splits hold a few such executions and the paper learned from them, so reproducing it
            keeps them.
        exclude: executions held out by name (test videos), each of which must be an execution of the scenario.
    """

    include_mistakes: bool = False
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(set(self.exclude)) != len(self.exclude):
            twice = sorted({name for name in self.exclude if self.exclude.count(name) > 1})
            raise InputError(f"--exclude-videos: {', '.join(twice)} named twice")


EVERY_VIDEO = TrainingVideos(include_mistakes=True)  # what the benchmarks and `Annotations.training_data` learn from


@dataclass(frozen=True)
class TrainingSelection:
    """The executions a learner trains on, and those it left out.

    Attributes:
        step_ids: the scenario's key-step ids, in taxonomy order.
        step_names: their names.
        sequences: one key-step sequence per kept execution, file order, repeats kept.
        mistakes: executions left out because a segment is marked ``has_errors``.
        excluded: executions left out by name.
        kept: the executions ``sequences`` come from, by name, in the same order.
    """

    step_ids: tuple[int, ...]
    step_names: tuple[str, ...]
    sequences: list[tuple[int, ...]]
    mistakes: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()

    def left_out_info(self) -> dict[str, Any]:
        """What a graph file's ``info["left_out"]`` records: ``{"mistakes": [...], "excluded": [...]}``
        (`read_left_out` reads it back)."""
        return {"mistakes": list(self.mistakes), "excluded": list(self.excluded)}


def read_left_out(record: Any) -> dict[str, tuple[str, ...]] | None:
    """A graph file's ``info["left_out"]`` (`TrainingSelection.left_out_info`) read back: per key, ``"mistakes"`` and
    ``"excluded"``, the names it lists (none where the key holds no list).

    Returns:
        The names per key; None when the record is not a mapping (it comes from a file, so it is not trusted).
    """
    if not isinstance(record, dict):
        return None
    return {key: tuple(str(n) for n in listed) if isinstance(listed := record.get(key), list) else ()
            for key in ("mistakes", "excluded")}


def read_train_videos(record: Any) -> frozenset[str] | None:
    """A file's ``info["train_videos"]`` read back: the videos a graph was learned from (``tgml train``) or a detector
    trained on (``recognition-train``); None when the file records no list (older files; it is not trusted)."""
    return frozenset(str(name) for name in record) if isinstance(record, list) else None


@dataclass(frozen=True)
class Annotations:
    """A whole annotation file: videos in file order and the per-scenario taxonomy."""

    path: str
    videos: dict[str, Video]
    taxonomy: dict[str, dict[int, str]]  # scenario -> step id -> name, in file order
    overlaps: int = 0  # segments that start before an earlier-starting segment of their video ended (checked files)
    overlap_videos: int = 0  # videos holding such a segment
    never_done: int = 0  # segments with start_time = end_time < 0 (a step never done: no time span)
    overlap_names: tuple[str, ...] = ()  # the videos holding an overlapping segment, in file order (for the warning)
    # the videos whose timed segments are not listed in start-time order (checked files): the learners read the file
    # order, the commands that need times the time order, so the two may disagree
    unordered_names: tuple[str, ...] = ()

    def scenario_videos(self, scenario: str) -> list[Video]:
        """Videos of one scenario, in file order; `InputError` if the scenario is unknown."""
        self.check_scenario(scenario)
        return [v for v in self.videos.values() if v.scenario == scenario]

    def steps_of(self, scenario: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """``(ids, names)`` of a scenario's key-steps, in taxonomy order."""
        self.check_scenario(scenario)
        table = self.taxonomy[scenario]
        return tuple(table), tuple(table.values())

    def training_data(self, scenario: str) -> tuple[tuple[int, ...], tuple[str, ...], list[tuple[int, ...]]]:
        """What a learner trains on: ``(step ids, step names, one key-step sequence per video)`` of a scenario.

        Raises:
            InputError: the scenario is unknown, or none of its videos has a segment.
        """
        chosen = self.training_selection(scenario, EVERY_VIDEO)
        return chosen.step_ids, chosen.step_names, chosen.sequences

    def training_selection(self, scenario: str, videos: TrainingVideos) -> TrainingSelection:
        """The sequences a learner trains on, after leaving out mistaken and held-out executions.

        Args:
            scenario: the procedure.
            videos: which executions to keep.

        Returns:
            The kept sequences and the names of those left out.

        Raises:
            InputError: the scenario is unknown or has more key-steps than a graph holds (`MAX_STEPS`), an excluded
                name is not one of its executions, or no kept execution has a segment.
        """
        step_ids, step_names = self.steps_of(scenario)
        if len(step_ids) > MAX_STEPS:  # refused now, not by the graph after learning over N^2 pairs for hours
            raise InputError(f"{self.path}: taxonomy[{scenario!r}] has {len(step_ids)} key-steps; a task graph holds "
                             f"at most {MAX_STEPS} (what can be served live)")
        executions = self.scenario_videos(scenario)
        names = {v.video for v in executions}
        unknown = [name for name in videos.exclude if name not in names]
        if unknown:
            # A features folder's test recordings may be only partly in the graph's file (CaptainCook4D's
            # graph-generation annotations hold its error-free recordings): say which of the names to keep.
            known = [name for name in videos.exclude if name in names]
            hint = (f"of the names given, {first_few(known, 5)} {'is one' if len(known) == 1 else 'are'}: give only "
                    "those" if known else f"none of the names given is, so the graph cannot hold them: leave "
                    f"--exclude-videos out, unless a name is mistyped; its executions: {first_few(sorted(names), 5)}")
            # The execution a name that may be a typo was meant as (21_3 for 21_13). Not for a video of another
            # scenario (spelt right: said to be that scenario's), nor towards a name given already (21_12 and 21_13
            # given, 21_13 in it, got "did you mean '21_13'?"), nor a mere near spelling: CaptainCook4D's
            # recordings with errors are not in its graph-generation file, and 17_49 got "did you mean '17_19'?".
            elsewhere = [name for name in unknown if name in self.videos]
            typo = next((name for name in unknown if name not in self.videos), None)
            meant = typo_of(typo, names - set(videos.exclude)) if typo is not None else None
            said = "".join(f"; {printable(name)} is a video of scenario {printable(self.videos[name].scenario)!r}"
                           for name in elsewhere[:3])
            said += f"; did you mean {printable(meant)!r}?" if meant is not None else ""
            raise InputError(f"--exclude-videos: {', '.join(unknown)} not an execution of {scenario!r} in {self.path} "
                             f"({hint}){said}")
        excluded = tuple(v.video for v in executions if v.video in videos.exclude)
        mistakes = tuple(v.video for v in executions
                         if v.video not in videos.exclude and any(v.has_errors) and not videos.include_mistakes)
        kept = [v for v in executions if v.video not in excluded and v.video not in mistakes]
        if not any(v.steps for v in kept):
            raise InputError(self._nothing_left(scenario, mistakes, excluded))
        return TrainingSelection(step_ids, step_names, [v.steps for v in kept], mistakes, excluded,
                                 tuple(v.video for v in kept))

    def _nothing_left(self, scenario: str, mistakes: Sequence[str], excluded: Sequence[str]) -> str:
        """The error when no execution is left to learn from, saying what removed them."""
        why = []
        if mistakes:
            why.append(f"{len(mistakes)} with an annotated mistake left out (--include-mistakes keeps them)")
        if excluded:
            why.append(f"{len(excluded)} excluded by --exclude-videos")
        reason = f" ({'; '.join(why)})" if why else " (no video with segments)"
        return f"{self.path}: scenario {scenario!r} has no usable sequence{reason}"

    def check_scenario(self, scenario: str, option: str | None = None) -> None:
        """Raise `InputError` naming the known scenarios if ``scenario`` is not one of them.

        Args:
            scenario: the name asked for.
            option: the option the user typed it in (``--scenario``, ``--procedures``), named first in the error;
                None for a name that comes from a file.
        """
        if scenario not in self.taxonomy:
            # A misspelt recipe among CaptainCook4D's 24 was left to be found in the list: the closest is said. All
            # are listed: the user picks one of them.
            raise InputError(unknown_name(f"{f'{option}: ' if option else ''}{self.path}: scenario", scenario,
                                          sorted(self.taxonomy), None))


OVERLAP_SLACK_S: Final = 1e-6  # touching segments (one ends where the next starts) do not overlap
OVERLAP_RULE: Final = "where frames are labelled, the segment that started last owns the overlap"


FRAME_TIMES_RATIO: Final = 10.0  # steps running this many times past a file's end were timed in frames, not seconds


def frames_hint(last_end: float, covered: float) -> str:
    """The end of a question in an error line (before its ``?``) for annotated steps that run to ``last_end`` s, past
    a file covering ``covered`` s: at ten times as far or more (a rate or a cut explains less), the times were most
    likely written in frames."""
    if last_end < FRAME_TIMES_RATIO * covered:
        return ""
    return ", or are the annotation's times frame numbers (they must be seconds)"


def seconds_shown(seconds: float) -> str:
    """An annotated time for an error line: one decimal, or six significant digits past 10^9 s (``{:.1f}`` wrote an
    end of 1e300 s from a file as its 301 digits)."""
    return f"{seconds:.1f}" if abs(seconds) < 1e9 else f"{seconds:.6g}"


def never_done(span: tuple[float, float] | None) -> bool:
    """Whether a segment's times mark a step never done: ``start_time == end_time < 0`` (CaptainCook4D writes -1)."""
    return span is not None and span[0] == span[1] < 0


def _span(seg: dict[str, Any], where: str, check: bool) -> tuple[float, float] | None:
    """A segment's ``(start, end)`` in seconds, None without times; each time a finite number (>= 0 when checked)."""
    for key in ("start_time", "end_time"):
        if key in seg and not is_finite_number(seg[key]):
            clock = parse_time(seg[key]) if isinstance(seg[key], str) else None
            # "1:05.5" is a time a user reads off a player; JSON holds it as seconds, a number.
            hint = "" if clock is None else f" (write {as_written(seg[key], 30)} as the number of seconds, {clock:g})"
            raise InputError(f"{where}.{key} = {as_written(seg[key], 60)} is not a number{hint}")
    present = [key in seg for key in ("start_time", "end_time")]
    if not any(present):
        return None
    if not all(present):
        missing = "end_time" if present[0] else "start_time"
        raise InputError(f"{where} has {'start_time' if present[0] else 'end_time'} but no {missing}")
    start, end = float(seg["start_time"]), float(seg["end_time"])
    if check and not never_done((start, end)):
        for key, value in (("start_time", start), ("end_time", end)):
            if value < 0:
                raise InputError(f"{where}.{key} = {value:g} must be a number of seconds >= 0 (a step never done has "
                                 "start_time = end_time < 0)")
        if end < start:
            raise InputError(f"{where} ends at {end:g} s, before it starts ({start:g} s)")
        if end == start:
            raise InputError(f"{where} has no duration (it starts and ends at {start:g} s)")
    return start, end


def count_overlaps(spans: Sequence[tuple[float, float] | None]) -> int:
    """How many timed segments of one video start before an earlier-starting segment has ended (beyond touching).

    Segments are taken in `time_order`'s order (start, then file index); segment ``k`` overlaps when
    ``start_k < max(end_0..end_{k-1}) - OVERLAP_SLACK_S``. Segments without times or never done are not compared.

    Args:
        spans: the video's segment spans in file order (None: a segment without times).

    Returns:
        The number of overlapping segments (0 when they follow one another).
    """
    timed = sorted((span[0], k, span[1]) for k, span in enumerate(spans) if span is not None and span[1] > span[0])
    if len(timed) < 2:
        return 0
    times = np.array([(start, end) for start, _, end in timed])  # (S, 2) in time order
    ended_by = np.maximum.accumulate(times[:-1, 1])  # (S-1,) latest end among the segments begun before each
    return int(np.count_nonzero(times[1:, 0] < ended_by - OVERLAP_SLACK_S))


def of_scenario(annotations: Annotations, scenario: str) -> Annotations:
    """The file's videos of one scenario, their oddities counted again over them alone (a command that reads one
    scenario of CaptainCook4D's 24 was warned of all 384 recordings' overlaps)."""
    videos = {name: v for name, v in annotations.videos.items() if v.scenario == scenario}
    # Only what the reading counted is counted again: a file read with its times unchecked (--order-only) has none.
    overlapping = {name: count_overlaps(videos[name].spans) for name in annotations.overlap_names if name in videos}
    skipped = sum(never_done(span) for v in videos.values() for span in v.spans) if annotations.never_done else 0
    return replace(annotations, videos=videos, overlaps=sum(overlapping.values()),
                   overlap_videos=sum(found > 0 for found in overlapping.values()),
                   never_done=skipped,
                   overlap_names=tuple(name for name in annotations.overlap_names if name in videos),
                   unordered_names=tuple(name for name in annotations.unordered_names if name in videos))


def print_timing_warning(annotations: Annotations, scenario: str | None = None, learns_graph: bool = True) -> None:
    """Print `timing_warning`'s line on stderr, when there is one: for `load_annotations`, and for a command that
    learns its scenario only from what it reads after the file (``recognition-features import``)."""
    line = timing_warning(annotations, scenario, learns_graph)
    if line is not None:
        print_stderr(printable(line))


def timing_warning(annotations: Annotations, scenario: str | None = None, learns_graph: bool = True) -> str | None:
    """The one warning line about a checked file's accepted oddities (overlaps, steps never done), or None; with a
    ``scenario`` of the file, about its videos alone. Steps never done are an oddity only to a command that learns a
    graph from the file (``learns_graph``), whose learners take them as done; to the commands that read times they
    are what a Missing Step is written as (``tgml captaincook-labels``), and `stream-detect eval` scores by them."""
    where = annotations.path
    if scenario is not None and scenario in annotations.taxonomy:
        annotations, where = of_scenario(annotations, scenario), f"{annotations.path} (scenario {scenario})"
    parts = []
    if annotations.overlaps:
        one = annotations.overlaps == 1
        parts.append(f"{annotations.overlaps} segment{'' if one else 's'} in {annotations.overlap_videos} "
                     f"video{'' if annotations.overlap_videos == 1 else 's'} overlap{'s' if one else ''} an earlier "
                     f"one ({first_few(list(annotations.overlap_names), 3)}; accepted; {OVERLAP_RULE})")
    if annotations.unordered_names:
        count = len(annotations.unordered_names)
        parts.append(f"{count_of(count, 'video')} list{'s' if count == 1 else ''} segments out of "
                     f"start-time order ({first_few(list(annotations.unordered_names), 3)}): the graph learners read "
                     "the file order, the commands that need times the time order; accepted as they are, the file "
                     "needs no edit (to learn from the time order, give --annotations a copy with each video's "
                     "segments sorted by start_time)")
    if annotations.never_done and learns_graph:
        one = annotations.never_done == 1
        parts.append(f"{annotations.never_done} segment{'' if one else 's'} with start_time = end_time < 0 (a step "
                     "never done: kept in its place, where a graph learner takes it as done, covering no time)")
    return f"warning: {where}: {'; '.join(parts)}" if parts else None


def _reads_as_table(path: str | Path) -> bool:
    """Whether a file that is not JSON reads as an annotation table (in an encoding a table may have)."""
    try:
        return looks_like_table(table_text(Path(path)))
    except InputError:
        return False


def _read_annotation_json(path: str | Path) -> Any:
    """The annotation JSON; a table under another name (``labels.txt``) is refused saying how it is read."""
    try:
        return read_json(path, "annotation file")
    except InputError as err:
        # Excel's "Unicode text" export is a UTF-16 table named .txt: told to rename it, not to convert it first.
        not_json = "invalid JSON at line 1 column 1" in str(err) or "(Windows' \"Unicode\")" in str(err)
        if not_json and _reads_as_table(path):
            raise InputError(f"{path}: not JSON; it reads as a table: name it .csv (rows {','.join(COLUMNS)}, the "
                             "times in seconds), or write the annotation JSON") from None
        raise


def load_annotations(path: str | Path, check_times: bool = True, scenario_read: str | None = None,
                     scenario_required: bool = False, learns_graph: bool = True,
                     warn_timing: bool = True) -> Annotations:
    """Read and validate an annotation file.

    Every segment's ``step_id`` must be in its scenario's taxonomy; errors name the video,
    segment index and field. The file holds to the live pipeline's limits (`graphs.limits`): step ids in
    ``0..2^31-1``, names of at most `MAX_NAME` characters; ``start_time`` / ``end_time``, when present, are finite
    numbers. Every video has at least one segment.

    Args:
        path: the file.
        check_times: the segment check every command shares (module docstring): no negative time, no segment that
            ends before or when it starts (a step never done, ``start_time == end_time < 0``, excepted); overlaps and
            steps never done are counted and reported in one warning line on stderr (`timing_warning`), a table's
            step names that look mistyped in another (`step_spelling_warning`). False reads a published benchmark
            file as published (only the order of its segments is used), without a warning (the learners read the
            file again this way: the first read had warned).
        scenario_read: the scenario the command reads, when it knows it before reading: the warning counts its
            videos alone (None, or a scenario the file does not have: the whole file's).
        scenario_required: ``scenario_read`` is the user's and must be the file's: one the file does not have is
            refused (`Annotations.check_scenario`) before the warning, which would only precede the error.
        learns_graph: the command learns a graph from the file: the warning names its steps never done
            (`timing_warning`).
        warn_timing: print `timing_warning`'s line; False for a command that learns its scenario from what it reads
            next (`recognition-features import`: from the feature files' recordings) and prints the line of that
            scenario itself, rather than one counting the videos of every scenario of the file.

    Returns:
        The annotations.
    """
    data = read_annotation_table(path, check_times) if is_table(path) else _read_annotation_json(path)
    src = str(path)
    if (isinstance(data, list) and data and isinstance(data[0], dict)
            and {"recording_id", "step_annotations"} <= data[0].keys()):
        raise InputError(f"{src}: this looks like CaptainCook4D's error annotations, not an annotation file (one with "
                         "fields 'annotations' and 'taxonomy'): tgml captaincook-labels writes one from them")
    if not isinstance(data, dict):
        raise InputError(f"{src}: expected a JSON object with fields 'annotations' and 'taxonomy', got "
                         f"{json_kind(data)}")
    if "annotations" not in data and (data.get("format") == GRAPH_FORMAT or is_captaincook_graph(data)):
        # the reverse of from_dict's
        raise InputError(f"{src}: this looks like a task graph, not an annotation file (one with fields "
                         "'annotations' and 'taxonomy', from which tgml train learns a graph)")
    if "annotations" not in data and isinstance(data.get("format"), str):  # a checker settings file was "a graph"
        raise InputError(f"{src}: its field 'format' says it is a {data['format'][:60]!r} file, not an annotation "
                         "file (one with fields 'annotations' and 'taxonomy')")
    wrong = None if "annotations" in data else mistaken_file(data, "annotations", src)  # a split, eval's results...
    if wrong is not None:
        raise InputError(wrong)
    for key in ("annotations", "taxonomy"):
        if key not in data:
            raise InputError(f"{src}: missing object field {key!r}")
        if not isinstance(data[key], dict):  # said "missing" too, of a field that is there with another type
            raise InputError(f"{src}: field {key!r} must be an object, not {json_kind(data[key])}")
    taxonomy: dict[str, dict[int, str]] = {}
    for scenario, table in data["taxonomy"].items():
        if not isinstance(table, dict):
            raise InputError(f"{src}: taxonomy[{scenario!r}] must be an object")
        steps: dict[int, str] = {}
        ids_by_name: dict[str, int] = {}  # the inverse of steps, so a name taken twice is found in one look-up
        for key, entry in table.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}] needs a string 'name'")
            fault = name_fault(entry["name"])
            if fault is not None:  # the graph learned from it would be refused by the graph loader
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}].name {fault}")
            step_id = entry.get("id", key)
            if isinstance(step_id, str) and re.fullmatch(r"\s*-?[0-9]{1,19}\s*", step_id):
                step_id = int(step_id)
            if not isinstance(step_id, int) or isinstance(step_id, bool):
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}].id = {as_written(step_id, 60)}"
                                 " is not an integer")
            if not is_step_id(step_id):
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}].id = {step_id} must be {STEP_ID_RULE}")
            if step_id in steps:
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}].id = {step_id} is the id of another step")
            named = ids_by_name.setdefault(entry["name"], step_id)
            if named != step_id:
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}].name = {as_written(entry['name'], 60)}"
                                 f" is the name of step {named} too")
            steps[step_id] = entry["name"]
        taxonomy[scenario] = steps
    videos: dict[str, Video] = {}
    overlaps = overlap_videos = 0
    overlap_names: list[str] = []
    unordered: list[str] = []
    renamed: list[tuple[str, object]] = []  # (key, recording_id) where the two differ
    for video, record in data["annotations"].items():
        if not isinstance(record, dict):
            raise InputError(f"{src}: annotations[{video!r}] must be an object")
        if "recording_id" in record and record["recording_id"] != video:
            renamed.append((video, record["recording_id"]))
        scenario = record.get("scenario")
        if not isinstance(scenario, str) or scenario not in taxonomy:
            # An absent field read "scenario = null", a value the user never wrote; and which names would do was
            # left to be found in the file.
            known = first_few([printable(name) for name in taxonomy], 5)
            what = (f" has no 'scenario' (the taxonomy's scenarios: {known})" if "scenario" not in record
                    else f".scenario = {as_written(scenario, 60)} is not in the taxonomy (its scenarios: {known})")
            raise InputError(f"{src}: annotations[{video!r}]{what}")
        segments = record.get("segments")
        if segments is None and "segments" not in record:  # "must be a list" read as if one were there
            raise InputError(f"{src}: annotations[{video!r}] has no 'segments' (the list of its key-steps, each with "
                             "step_id, start_time and end_time)")
        if not isinstance(segments, list):
            raise InputError(f"{src}: annotations[{video!r}].segments must be a list, not {json_kind(segments)}")
        if not segments:
            raise InputError(f"{src}: annotations[{video!r}].segments is empty (a video without a key-step)")
        steps_list: list[int] = []
        errors: list[bool] = []
        spans: list[tuple[float, float] | None] = []
        for k, seg in enumerate(segments):
            where = f"{src}: annotations[{video!r}].segments[{k}]"
            if not isinstance(seg, dict):  # "step_id is missing" named a field of an object that is not there
                raise InputError(f"{where} = {as_written(seg, 40)} must be an object with 'step_id', 'start_time' "
                                 "and 'end_time'")
            step = seg.get("step_id")
            if not isinstance(step, int) or isinstance(step, bool):
                raise InputError(f"{where}.step_id is missing or not an integer")
            if step not in taxonomy[scenario]:
                keyed = data["taxonomy"][scenario].get(str(step))  # the entry under that key holds another id
                hint = (f" (its entry {str(step)!r} has id {as_written(keyed.get('id'), 20)})"
                        if isinstance(keyed, dict) else "")
                raise InputError(f"{where}.step_id = {step} is not in the {scenario!r} taxonomy{hint}")
            assert isinstance(seg, dict)
            # step_name is optional and never read for learning; one that names another step means shifted ids
            if "step_name" in seg and seg["step_name"] != taxonomy[scenario][step]:
                raise InputError(f"{where}.step_name = {as_written(seg['step_name'], 60)} is not the name of "
                                 f"step_id {step} ({as_written(taxonomy[scenario][step], 60)} in the {scenario!r} "
                                 "taxonomy)")
            spans.append(_span(seg, where, check_times))
            has_errors = seg.get("has_errors", False)
            if not isinstance(has_errors, bool):
                raise InputError(f"{where}.has_errors = {as_written(has_errors, 60)} is not true or false")
            steps_list.append(step)
            errors.append(has_errors)
        if check_times:
            found = count_overlaps(spans)
            overlaps += found
            overlap_videos += found > 0
            if found:
                overlap_names.append(video)
            starts = [span[0] for span in spans if span is not None and not never_done(span)]
            if any(later < earlier for earlier, later in itertools.pairwise(starts)):
                unordered.append(video)
        videos[video] = Video(video, scenario, tuple(steps_list), tuple(errors), tuple(spans))
    skipped = sum(never_done(span) for v in videos.values() for span in v.spans) if check_times else 0
    annotations = Annotations(src, videos, taxonomy, overlaps, overlap_videos, skipped, tuple(overlap_names),
                              tuple(unordered))
    if scenario_required and scenario_read is not None:
        if is_table(path) and scenario_read not in taxonomy and set(taxonomy) == {DEFAULT_SCENARIO}:
            # The README's commands name a scenario (--scenario tent); a table without the column has none to match.
            raise InputError(f"{src}: a table without a scenario column holds one scenario, {DEFAULT_SCENARIO!r}: "
                             f"leave --scenario out, or add a scenario column naming {printable(scenario_read)!r}")
        annotations.check_scenario(scenario_read, "--scenario")
    if warn_timing:
        print_timing_warning(annotations, scenario_read, learns_graph)
    for line in (step_spelling_warning(src, data) if is_table(path) and check_times else None,
                 recording_id_warning(src, renamed) if check_times else None):
        if line is not None:
            print_stderr(printable(line))
    return annotations


def recording_id_warning(src: str, renamed: Sequence[tuple[str, object]]) -> str | None:
    """The warning for videos whose ``recording_id`` is not their key, or None when there is none.

    The key names a video everywhere (its video and feature files, its name in every output); ``recording_id`` is
    never read. One that differs is a copied entry whose key or field was not edited, which the user should hear of
    before a video is labelled with another's steps. None of the public data sets' files has one.
    """
    if not renamed:
        return None
    shown = first_few([f"{shortened(key, 40)}: recording_id {as_written(rid, 40)}" for key, rid in renamed], 3)
    has = "has" if len(renamed) == 1 else "have"
    return (f"warning: {src}: {count_of(len(renamed), 'video')} {has} a recording_id other than its key ({shown}); "
            "the key names the video (its files and its name in every output), recording_id is not read")


def choose_scenario(annotations: Annotations, scenario: str | None) -> str:
    """The scenario a command reads (``recognition-features``, ``stream-detect eval``): the one asked for, or the file's
    only one.

    Args:
        annotations: the read annotation file.
        scenario: ``--scenario`` (None when not given).

    Returns:
        A scenario of the file with at least one annotated video.
    """
    if scenario is None:
        used = sorted({v.scenario for v in annotations.videos.values()})
        if not used:
            raise InputError(f"{annotations.path}: no annotated video (field 'annotations' is empty)")
        if len(used) > 1:
            raise InputError(
                f"{annotations.path}: holds several scenarios ({', '.join(used)}); choose one with --scenario"
            )
        scenario = used[0]
    if not annotations.scenario_videos(scenario):
        raise InputError(f"{annotations.path}: no annotated video of scenario {scenario!r}")
    return scenario


def time_order(video: Video, src: str) -> list[tuple[int, float, float]]:
    """A video's segments in time order, as ``(index in the file, start, end)``; every segment must have its times.

    `load_annotations` has checked them (no negative time, no empty or reversed span), the same check every command
    that reads annotations makes. Segments may overlap: this order (start, then file index) is the one in which the
    segment that started last owns an overlap's frames. A step never done (``start_time == end_time < 0``) covers
    no time and is left out.

    Args:
        video: the annotated video.
        src: the annotation file, named in errors.

    Returns:
        ``(k, start, end)`` per segment, sorted by start time (file order among equal starts).
    """
    timed = [(k, *span) for k, span in enumerate(video.spans) if span is not None and not never_done(span)]
    if any(span is None for span in video.spans):
        untimed = next(k for k, span in enumerate(video.spans) if span is None)
        raise InputError(f"{src}: annotations[{video.video!r}].segments[{untimed}] has no start_time and end_time; "
                         "frame targets and scores need the time of every segment")
    return sorted(timed, key=lambda item: (item[1], item[0]))
