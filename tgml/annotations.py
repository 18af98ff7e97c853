"""Reader for the annotation JSON shared by Assembly101-O, EPIC-Tent-O and CaptainCook4D
(format in docs/data-and-citations.md).

``{"annotations": {video: {"scenario", "recording_id", "segments": [{"step_id", ...}]}},
"taxonomy": {scenario: {"<id>": {"name", "id", ...}}}}``
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
        step_ids, step_names = self.steps_of(scenario)
        sequences = [v.steps for v in self.scenario_videos(scenario)]
        if not any(sequences):
            raise InputError(f"{self.path}: scenario {scenario!r} has no usable sequence (no video with segments)")
        return step_ids, step_names, sequences

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
