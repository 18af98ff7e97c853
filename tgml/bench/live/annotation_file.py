"""CaptainCook4D recordings' annotated steps and errors in the project's annotation format (``tgml
captaincook-labels``): the file ``recognition-features import``, ``tgml train`` and ``stream-detect eval`` read, so
that a user's own features of CaptainCook4D recordings take the bring-your-own-features path with the labels
`tgml bench-live` scores against.

The steps are read as the benchmark reads them (`tgml.bench.error_annotations`): each recording's recipe is the
``scenario`` of its ``activity_id`` in the graph-generation annotations, a step is that recipe's taxonomy step of
the same name, and the recipe's step ids are the graph-generation annotations' (those of ``tgml train``'s graphs and of
``tgml bench-live --save-graphs``), not CaptainCook4D's own numbering. Per recording, in the file:

- each step done, in time order, ``has_errors`` true where the annotators tagged it Order Error (the mistakes
  ``stream-detect eval`` scores alerts against), the step's tags in its ``description``;
- then each step tagged Missing Step as a segment with ``start_time == end_time == -1`` (the steps eval scores the
  end report against).

A step whose name matches no step of its recipe (two in the public file) is left out and reported, as the benchmark
does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tgml.bench.error_annotations import ErrorRecording, unmatched_steps, untimely_steps
from tgml.bench.live.recordings import annotated_recordings, captaincook_dir, recording_activities
from tgml.bench.mistake_bench import ERROR_ANNOTATIONS

NEVER_DONE_TIME = -1.0  # start_time == end_time < 0: a step annotated never done (`graphs.annotations`)


@dataclass(frozen=True)
class LabelFile:
    """The annotation file of some recordings, and what went into it.

    Attributes:
        content: the file's JSON value (``{"taxonomy": ..., "annotations": ...}``).
        recordings: the recordings written, by recipe.
        done: steps written as done.
        never_done: steps written as never done.
        unmatched: ``(recording_id, name)`` of each annotated step left out (its name is no step of its recipe).
        untimely: ``(recording_id, name)`` of each step whose Missing Step tag and start time disagree: one with a
            time is written as done (and, tagged, as never done too), one with neither is left out.
    """

    content: dict[str, Any]
    recordings: dict[str, list[str]]
    done: int
    never_done: int
    unmatched: tuple[tuple[str, str], ...]
    untimely: tuple[tuple[str, str], ...] = ()


def recording_segments(recording: ErrorRecording, names: dict[int, str]) -> list[dict[str, Any]]:
    """One recording's segments: the steps done in time order, then the steps tagged Missing Step at -1."""
    # A step done whose end the file does not give (-1; none in the public file) is kept as a moment.
    done = [{"step_id": p.step, "start_time": p.start, "end_time": max(p.end, p.start), "step_name": p.name,
             "description": "; ".join(p.tags), "has_errors": p.order_error} for p in recording.performed]
    never = [{"step_id": s, "start_time": NEVER_DONE_TIME, "end_time": NEVER_DONE_TIME, "step_name": names[s],
              "description": "Missing Step", "has_errors": False} for s in sorted(recording.missing)]
    return done + never


def captaincook_labels(data_dir: Path, recordings: Mapping[str, str] | None = None) -> LabelFile:
    """The annotation file of ``recordings`` (None: every recording of the error annotations).

    Args:
        data_dir: the data folder holding ``captaincook4d/``, or that folder.
        recordings: recording id (``"12_10"``) -> where the user named it (``--recordings``, a features file), for
            the error naming one the data does not hold.

    Returns:
        The `LabelFile`.

    Raises:
        InputError: not a CaptainCook4D folder, or a recording the error annotations do not hold or whose activity
            is no recipe (named).
    """
    cc = captaincook_dir(Path(data_dir))
    activity = recording_activities(cc)
    named = dict.fromkeys(activity, str(cc / ERROR_ANNOTATIONS)) if recordings is None else recordings
    _, taxonomies, by_id = annotated_recordings(cc, activity, named)
    taxonomy: dict[str, dict[str, dict[str, Any]]] = {}
    videos: dict[str, dict[str, Any]] = {}
    by_recipe: dict[str, list[str]] = {}
    done = never = 0
    for rid in named:
        recording = by_id[rid]
        ids, step_names = taxonomies[recording.scenario]
        names = dict(zip(ids, step_names, strict=True))
        taxonomy.setdefault(recording.scenario, {str(i): {"id": i, "name": n} for i, n in names.items()})
        segments = recording_segments(recording, names)
        videos[rid] = {"scenario": recording.scenario, "recording_id": rid, "segments": segments}
        by_recipe.setdefault(recording.scenario, []).append(rid)
        done, never = done + len(recording.performed), never + len(recording.missing)
    unmatched = unmatched_steps(by_id[c] for c in named)
    return LabelFile({"taxonomy": taxonomy, "annotations": videos}, by_recipe, done, never, unmatched,
                     untimely_steps(by_id[c] for c in named))
