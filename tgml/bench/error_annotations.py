"""CaptainCook4D's error annotations (``captaincook4d/error_annotations.json``): which steps of each recording were
done, in time order, and which error tags the dataset's authors gave each step.

Format (a JSON list, one object per recording)::

    {"recording_id": "1_36", "activity_id": 1, "is_error": true,
     "step_annotations": [{"description": "<step name>", "step_id": 3, "start_time": 2.5, "end_time": 51.0,
                           "errors": [{"tag": "Order Error", "description": "..."}]}, ...]}

A step tagged ``Missing Step`` was never done (``start_time`` -1; in four annotations of the public file the tag and
a start time disagree, and four untagged steps have no time: the time says whether a step was done, the tag whether
it counts as missing). The annotations are not in time order: performed steps are sorted by ``start_time``. A
recording's procedure is the ``scenario`` of its ``activity_id`` in the graph-generation annotations; a step is
matched to the procedure's taxonomy by its name (the ``step_id`` is CaptainCook4D-wide and disagrees with the name in
five annotations). A name that matches no step of the procedure is the data's fault (two do in the public file):
that step is skipped, counted and reported, never silently.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from graphs.common.errors import InputError
from graphs.common.files import read_json
from graphs.common.safe_text import count_of, first_few, printable
from graphs.common.settings_files import as_written, json_kind

ORDER_ERROR: Final = "Order Error"
MISSING_STEP: Final = "Missing Step"
NO_END: Final = -1.0  # a performed step's end where the file gives none (null, absent or -1)
# The tags of the dataset (its README); any other is refused.
TAGS: Final = (ORDER_ERROR, MISSING_STEP, "Preparation Error", "Measurement Error", "Timing Error", "Technique Error",
               "Temperature Error", "Other")


@dataclass(frozen=True)
class PerformedStep:
    """One step a recording did, matched to its procedure's taxonomy.

    Attributes:
        step: taxonomy id of the step.
        name: its name.
        start: start time in seconds.
        tags: the error tags of the step (empty: done correctly).
        end: end time in seconds (-1 where the file gives none).
    """

    step: int
    name: str
    start: float
    tags: tuple[str, ...]
    end: float = -1.0

    @property
    def order_error(self) -> bool:
        """The annotators tagged this step an order error."""
        return ORDER_ERROR in self.tags


@dataclass(frozen=True)
class ErrorRecording:
    """One recording: its performed steps in time order and the steps tagged as missing.

    Attributes:
        recording_id: the dataset's id (``"1_36"``).
        scenario: its procedure.
        performed: the performed steps whose name matches the procedure, sorted by start time.
        missing: taxonomy ids of the steps tagged Missing Step.
        unmatched: names of annotated steps that match no step of the procedure (skipped).
        untimely: names of steps tagged Missing Step with a start time, or untagged without one (start -1): the time
            decides whether a step was done, the tag whether it counts as missing.
        is_error: the file's ``is_error`` flag (None where it gives none).
    """

    recording_id: str
    scenario: str
    performed: tuple[PerformedStep, ...]
    missing: frozenset[int]
    unmatched: tuple[str, ...]
    untimely: tuple[str, ...] = ()
    is_error: bool | None = None

    @property
    def sequence(self) -> tuple[int, ...]:
        """The performed steps' ids in time order (what a detector would report)."""
        return tuple(p.step for p in self.performed)


@dataclass(frozen=True)
class ErrorAnnotations:
    """The recordings to score, and what was left out of them.

    Attributes:
        path: the file read.
        recordings: the recordings scored, in file order.
        training: how many recordings of the file were left out because graphs are learned from them.
    """

    path: Path
    recordings: tuple[ErrorRecording, ...]
    training: int

    @property
    def unmatched(self) -> tuple[tuple[str, str], ...]:
        """``(recording_id, name)`` of every skipped step whose name matches no step of its procedure."""
        return unmatched_steps(self.recordings)

    @property
    def untimely(self) -> tuple[tuple[str, str], ...]:
        """``(recording_id, name)`` of every step whose Missing Step tag and start time disagree."""
        return untimely_steps(self.recordings)


def untimely_steps(recordings: Iterable[ErrorRecording]) -> tuple[tuple[str, str], ...]:
    """``(recording_id, name)`` of each step of ``recordings`` whose Missing Step tag and start time disagree."""
    return tuple((r.recording_id, name) for r in recordings for name in r.untimely)


def short_name(name: str, width: int = 40) -> str:
    """A step's name for a note: CaptainCook4D's are sentences, shortened between words with " ..." (never cut
    mid-word)."""
    return textwrap.shorten(printable(name), width, placeholder=" ...")


def untimely_line(untimely: Sequence[tuple[str, str]], treated: str) -> str:
    """The line that names the steps whose Missing Step tag and start time disagree (`untimely_steps`), the first
    five, and how the command treats them (``treated``, said in brackets)."""
    named = first_few([f"{printable(rid)} '{short_name(name)}'" for rid, name in untimely], 5, and_more=", and ")
    steps = count_of(len(untimely), "annotated step")
    return f"{steps} whose Missing Step tag and start time disagree ({treated}): {named}"


def unmatched_steps(recordings: Iterable[ErrorRecording]) -> tuple[tuple[str, str], ...]:
    """``(recording_id, name)`` of every annotated step whose name matches no step of its recording's procedure
    (CaptainCook4D's 17_49 "chat masala" where the recipe says "chaat"): skipped, and said by every command."""
    return tuple((r.recording_id, name) for r in recordings for name in r.unmatched)


def unmatched_line(unmatched: Sequence[tuple[str, str]]) -> str:
    """The line that names the skipped steps of `unmatched_steps`, the first five."""
    named = first_few([f"{printable(rid)} '{short_name(name)}'" for rid, name in unmatched], 5, and_more=", and ")
    steps = count_of(len(unmatched), "annotated step")
    return f"left out {steps} whose name is no step of the recording's recipe: {named}"


def recording_entries(path: Path) -> list[dict[str, Any]]:
    """The recordings of an error annotations file, each checked to be an object with a string ``recording_id``.

    Raises:
        InputError: naming the file and the entry at fault.
    """
    data = read_json(path, "error annotations file")
    if isinstance(data, list) and not data:  # "expected a JSON list ..., got a list" said the list was the fault
        raise InputError(f"{path}: an empty list, expected the recordings {{'recording_id', 'activity_id', "
                         f"'step_annotations'}} (CaptainCook4D's error_annotations.json)")
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of recordings {{'recording_id', 'activity_id', "
                         f"'step_annotations'}} (CaptainCook4D's error_annotations.json), got {json_kind(data)}")
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise InputError(f"{path}: recording {i}: expected an object, got {json_kind(entry)}")
        _field(entry, "recording_id", str, f"{path}: recording {i}")
    return data


def _field(entry: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = entry.get(key)
    if value is None or not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(f"{where}: field {key!r} = {as_written(value)}: expected {_kind_name(kind)}")
    return value


def _end_time(step: Mapping[str, Any], where: str) -> float:
    """A performed step's end, -1 where the file gives none (null or absent); a value of another kind is refused."""
    end = step.get("end_time")
    if end is None:
        return NO_END
    if not isinstance(end, int | float) or isinstance(end, bool) or not math.isfinite(end):
        raise InputError(f"{where}: field 'end_time' = {as_written(end)}: expected a finite number")
    return float(end)


def _error_flag(entry: Mapping[str, Any], where: str) -> bool | None:
    """The recording's ``is_error`` flag, None where the file gives none; ``"true"`` is refused, not read as none."""
    flag = entry.get("is_error")
    if flag is not None and not isinstance(flag, bool):
        raise InputError(f"{where}: field 'is_error' = {as_written(flag)}: expected true or false")
    return flag


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({"str": "a string", "int": "an integer", "float": "a number", "list": "a list"}.get(
        k.__name__, k.__name__) for k in kinds)


def _tags(step: Mapping[str, Any], where: str) -> tuple[str, ...]:
    errors = step.get("errors", [])
    if not isinstance(errors, list):
        raise InputError(f"{where}: field 'errors' = {as_written(errors)}: expected a list of {{'tag', 'description'}}")
    tags = []
    for k, error in enumerate(errors):
        tag = error.get("tag") if isinstance(error, dict) else None
        if tag not in TAGS:
            raise InputError(f"{where}: errors[{k}] tag {as_written(tag)}: expected one of {', '.join(TAGS)}")
        tags.append(tag)
    return tuple(tags)


def _step_fields(step: object, at: str) -> tuple[str, float, tuple[str, ...], float]:
    """One entry of ``step_annotations``, checked: ``(description, start_time, tags, end_time)``, the end `NO_END`
    for a step not done (a negative start) or one the file gives no end.

    Raises:
        InputError: naming ``at`` and the field at fault.
    """
    if not isinstance(step, dict):
        raise InputError(f"{at}: expected an object, got {json_kind(step)}")
    name = _field(step, "description", str, at)
    start = float(_field(step, "start_time", (int, float), at))
    if not math.isfinite(start):
        raise InputError(f"{at}: field 'start_time' = {as_written(start)}: expected a finite number")
    tags = _tags(step, at)
    end = _end_time(step, at) if start >= 0 else NO_END
    if end != NO_END and end <= start:  # the public file has none; it became a step of no duration
        raise InputError(f"{at}: field 'end_time' = {as_written(end)}: not after its start_time {as_written(start)}")
    return name, start, tags, end


def load_error_annotations(
    path: str | Path,
    taxonomies: Mapping[str, tuple[Sequence[int], Sequence[str]]],
    activity_scenarios: Mapping[int, str],
    training_recordings: frozenset[str],
    restrict: frozenset[str] | None = None,
) -> ErrorAnnotations:
    """Read the error annotations of the recordings that no graph is learned from.

    Args:
        path: ``error_annotations.json``.
        taxonomies: ``{scenario: (step ids, step names)}`` of every procedure with a graph.
        activity_scenarios: ``{activity_id: scenario}`` (from the graph-generation annotations).
        training_recordings: recording ids the graphs are learned from (left out here, counted).
        restrict: score only the recordings of these procedures (``--procedures``); None: every procedure.

    Returns:
        The `ErrorAnnotations`; a file of another format, a recording of an activity without a procedure, or a
        procedure without a graph is refused with one `InputError` naming the file, recording and field.
    """
    path = Path(path)
    recordings = []
    seen: set[str] = set()
    training = 0
    for entry in recording_entries(path):
        rid = entry["recording_id"]
        where = f"{path}: recording {rid}"
        if rid in seen:
            raise InputError(f"{where}: listed twice")
        seen.add(rid)
        activity = _field(entry, "activity_id", int, where)
        steps = _field(entry, "step_annotations", list, where)
        scenario = activity_scenarios.get(activity)
        if rid in training_recordings:  # counted for the procedures scored only (--procedures coffee: coffee's)
            if restrict is None or scenario in restrict:
                training += 1
                for k, step in enumerate(steps):  # not scored, but damage there is damage to the file
                    _step_fields(step, f"{where}: step_annotations[{k}]")
            continue
        if scenario is None:
            raise InputError(f"{where}: activity_id {activity} is the activity of no procedure of the "
                             "graph-generation annotations")
        if restrict is not None and scenario not in restrict:
            continue
        if scenario not in taxonomies:
            raise InputError(f"{where}: procedure {scenario!r} has no task graph")
        ids, names = taxonomies[scenario]
        by_name = dict(zip(names, ids, strict=True))
        performed, missing, unmatched, untimely = [], set(), [], []
        for k, step in enumerate(steps):
            name, start, tags, end = _step_fields(step, f"{where}: step_annotations[{k}]")
            if name not in by_name:
                unmatched.append(name)
                continue
            if MISSING_STEP in tags:
                missing.add(by_name[name])
            if (MISSING_STEP in tags) != (start < 0):
                untimely.append(name)
            if start >= 0:  # a step with a time was done, whatever its tags say (four are tagged Missing Step too)
                performed.append(PerformedStep(by_name[name], name, start, tags, end))
        performed.sort(key=lambda p: p.start)  # stable: equal start times keep the file's order
        recordings.append(ErrorRecording(rid, scenario, tuple(performed), frozenset(missing), tuple(unmatched),
                                         tuple(untimely), _error_flag(entry, where)))
    if not recordings:
        raise InputError(f"{path}: every recording is one the graphs are learned from: nothing to score")
    return ErrorAnnotations(path, tuple(recordings), training)
