"""Reader for the annotation JSON shared by Assembly101-O, EPIC-Tent-O and CaptainCook4D
(format in docs/data-and-citations.md).

``{"annotations": {video: {"scenario", "recording_id", "segments": [{"step_id", ...}]}},
"taxonomy": {scenario: {"<id>": {"name", "id", ...}}}}``
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphs.errors import InputError
from graphs.files import read_json
from graphs.limits import MAX_NAME, STEP_ID_RULE, is_finite_number, is_step_id


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
    """

    video: str
    scenario: str
    steps: tuple[int, ...]
    has_errors: tuple[bool, ...]


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
    """

    step_ids: tuple[int, ...]
    step_names: tuple[str, ...]
    sequences: list[tuple[int, ...]]
    mistakes: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()

    def left_out_info(self) -> dict[str, Any]:
        """What a graph file's ``info["left_out"]`` records: ``{"mistakes": [...], "excluded": [...]}``."""
        return {"mistakes": list(self.mistakes), "excluded": list(self.excluded)}


@dataclass(frozen=True)
class Annotations:
    """A whole annotation file: videos in file order and the per-scenario taxonomy."""

    path: str
    videos: dict[str, Video]
    taxonomy: dict[str, dict[int, str]]  # scenario -> step id -> name, in file order

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
            InputError: the scenario is unknown, an excluded name is not one of its executions, or no kept execution
                has a segment.
        """
        step_ids, step_names = self.steps_of(scenario)
        executions = self.scenario_videos(scenario)
        names = {v.video for v in executions}
        unknown = [name for name in videos.exclude if name not in names]
        if unknown:
            raise InputError(f"--exclude-videos: {', '.join(unknown)} not an execution of {scenario!r} in {self.path}")
        excluded = tuple(v.video for v in executions if v.video in videos.exclude)
        mistakes = tuple(v.video for v in executions
                         if v.video not in videos.exclude and any(v.has_errors) and not videos.include_mistakes)
        kept = [v.steps for v in executions if v.video not in excluded and v.video not in mistakes]
        if not any(kept):
            raise InputError(self._nothing_left(scenario, mistakes, excluded))
        return TrainingSelection(step_ids, step_names, kept, mistakes, excluded)

    def _nothing_left(self, scenario: str, mistakes: Sequence[str], excluded: Sequence[str]) -> str:
        """The error when no execution is left to learn from, saying what removed them."""
        why = []
        if mistakes:
            why.append(f"{len(mistakes)} with an annotated mistake left out (--include-mistakes keeps them)")
        if excluded:
            why.append(f"{len(excluded)} excluded by --exclude-videos")
        reason = f" ({'; '.join(why)})" if why else " (no video with segments)"
        return f"{self.path}: scenario {scenario!r} has no usable sequence{reason}"

    def check_scenario(self, scenario: str) -> None:
        """Raise `InputError` naming the known scenarios if ``scenario`` is not one of them."""
        if scenario not in self.taxonomy:
            known = ", ".join(sorted(self.taxonomy))
            raise InputError(f"{self.path}: unknown scenario {scenario!r} (known: {known})")


def load_annotations(path: str | Path) -> Annotations:
    """Read and validate an annotation file.

    Every segment's ``step_id`` must be in its scenario's taxonomy; errors name the video,
    segment index and field. The file holds to the live pipeline's limits (`graphs.limits`): step ids in
    ``0..2^31-1``, names of at most `MAX_NAME` characters; ``start_time`` / ``end_time``, when present, are finite
    numbers (they are not read, but a string there is a broken file, not a time).
    """
    data = read_json(path, "annotation file")
    src = str(path)
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), dict):
        raise InputError(f"{src}: missing object field 'annotations'")
    if not isinstance(data.get("taxonomy"), dict):
        raise InputError(f"{src}: missing object field 'taxonomy'")
    taxonomy: dict[str, dict[int, str]] = {}
    for scenario, table in data["taxonomy"].items():
        if not isinstance(table, dict):
            raise InputError(f"{src}: taxonomy[{scenario!r}] must be an object")
        steps: dict[int, str] = {}
        for key, entry in table.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}] needs a string 'name'")
            if len(entry["name"]) > MAX_NAME:
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}].name is {len(entry['name'])} characters "
                                 f"long; at most {MAX_NAME}")
            step_id = entry.get("id", key)
            if isinstance(step_id, str) and step_id.strip().lstrip("-").isdigit():
                step_id = int(step_id)
            if not isinstance(step_id, int) or isinstance(step_id, bool):
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}].id = {step_id!r} is not an integer")
            if not is_step_id(step_id):
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}].id = {step_id} must be {STEP_ID_RULE}")
            if step_id in steps:
                raise InputError(f"{src}: taxonomy[{scenario!r}][{key!r}].id = {step_id} is the id of another step")
            steps[step_id] = entry["name"]
        taxonomy[scenario] = steps
    videos: dict[str, Video] = {}
    for video, record in data["annotations"].items():
        if not isinstance(record, dict):
            raise InputError(f"{src}: annotations[{video!r}] must be an object")
        scenario = record.get("scenario")
        if not isinstance(scenario, str) or scenario not in taxonomy:
            raise InputError(f"{src}: annotations[{video!r}].scenario = {scenario!r} is not in the taxonomy")
        segments = record.get("segments")
        if not isinstance(segments, list):
            raise InputError(f"{src}: annotations[{video!r}].segments must be a list")
        steps_list: list[int] = []
        errors: list[bool] = []
        for k, seg in enumerate(segments):
            step = seg.get("step_id") if isinstance(seg, dict) else None
            if not isinstance(step, int) or isinstance(step, bool):
                raise InputError(f"{src}: annotations[{video!r}].segments[{k}].step_id is missing or not an integer")
            if step not in taxonomy[scenario]:
                raise InputError(
                    f"{src}: annotations[{video!r}].segments[{k}].step_id = {step} "
                    f"is not in the {scenario!r} taxonomy"
                )
            for key in ("start_time", "end_time"):
                if key in seg and not is_finite_number(seg[key]):
                    raise InputError(
                        f"{src}: annotations[{video!r}].segments[{k}].{key} = {seg[key]!r:.60} is not a number"
                    )
            has_errors = seg.get("has_errors", False)
            if not isinstance(has_errors, bool):
                raise InputError(
                    f"{src}: annotations[{video!r}].segments[{k}].has_errors = {has_errors!r} is not true or false"
                )
            steps_list.append(step)
            errors.append(has_errors)
        videos[video] = Video(video, scenario, tuple(steps_list), tuple(errors))
    return Annotations(src, videos, taxonomy)
