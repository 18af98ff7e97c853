"""Replay of recorded per-frame recogniser output through the whole online path (minus the camera).

Per video: labels frame by frame -> `OnlineSegmenter` -> every confirmed segment, as soon as it is
emitted, to the pre-condition checker the live checker process runs -> alert flags. The checker is the binary
`graphs.PreconditionChecker`, or the probabilistic `graphs.probabilistic_checker.ProbabilisticChecker` fed the
evidence (`recognition.evidence.recording_evidence`) a detector would send with each segment: with label input the
labels are the detector's one-hot probabilities, so the evidence is what the labels, their durations and their
flicker say.
The flags of all videos are scored with the PREGO protocol (the last segment of each video
is the mistake) by `graphs.mistake_metrics.mistake_scores`.

Frames file (``prego-miniroad/epic-tent-o_frames.json``)::

    {video: {"pred": [label, ...], "gt": [label, ...]}}     # one key-step id per frame, ~60 per second

Result JSON written by ``prego-bench replay --json FILE`` (``format: "prego-replay-results"``, version 1)::

    {"format": "prego-replay-results", "version": 1,
     "settings": {"frames": str, "field": "pred", "graph": str, "segmenter": {SegmenterConfig fields},
                  "checker": {"kind", "alert_threshold", "prior_skip", "settings_file"}},
     "metrics": MistakeScores.to_dict(),                 # avg_f1, correct/mistake {precision, recall, f1}, counts
     "videos": {video: {"steps": [...], "alerts": [...], "probabilities": [...]}},
     "sweep": [{"parameter": "min_duration", "value": float, "metrics": MistakeScores.to_dict()}]}

Precision and recall are the true ones (the published PREGO tables swap them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import numpy as np
from rich.table import Table

from graphs.checker import NO_EVIDENCE
from graphs.checker_settings import CheckerSettings
from graphs.common.errors import InputError
from graphs.common.file_kinds import mistaken_sequences
from graphs.common.files import read_json
from graphs.limits import is_step_id
from graphs.mistake_metrics import MistakeScores, mistake_scores
from graphs.precision_recall import shown
from graphs.task_graph import TaskGraph
from recognition.evidence import EvidenceModel, recording_evidence
from recognition.segmenter import SegmenterConfig, segment_labels

RESULT_FORMAT: Final = "prego-replay-results"
RESULT_VERSION: Final = 1
# Seconds of confirmation swept by the ablation: from a quarter second to several seconds.
DEFAULT_SWEEP: Final = (0.25, 0.5, 1.0, 2.0, 4.0)


def load_frames_file(
    path: str | Path, field: str, graph: TaskGraph, background: int | None = None
) -> dict[str, np.ndarray]:
    """Read per-frame labels of every video and check them against the graph's key-steps.

    Args:
        path: ``{video: {"pred": [...], "gt": [...]}}`` JSON file.
        field: which label list to read (``"pred"`` or ``"gt"``).
        graph: the task graph; every label must be one of its key-steps, or ``background``.
        background: the label of frames showing no key-step (None: every frame shows one).

    Returns:
        ``{video: labels (T,) int64}`` in file order.

    Raises:
        InputError: naming the file, video and problem (missing field, non-integer or unknown label).
    """
    path = Path(path)
    data = read_json(path, "frames file")
    wrong = mistaken_sequences(data, str(path), 'a frames file {video: {"pred": [...], "gt": [...]}}')
    if wrong is not None:
        raise InputError(wrong)
    if not isinstance(data, dict) or not data:
        raise InputError(f'{path}: expected a non-empty object {{video: {{"pred": [...], "gt": [...]}}}}')
    if background is not None and background in graph.step_ids:
        raise InputError(f"--background {background}: is a key-step of the graph ({graph.name_of(background)!r})")
    known = np.array(sorted([*graph.step_ids, *([] if background is None else [background])]), dtype=np.int64)
    out: dict[str, np.ndarray] = {}
    for video, record in data.items():
        labels = record.get(field) if isinstance(record, dict) else None
        if not isinstance(labels, list) or not labels:
            raise InputError(f"{path}: video {video!r}: field {field!r} must be a non-empty list of per-frame labels")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in labels):
            raise InputError(f"{path}: video {video!r}: field {field!r} holds a label that is not an integer")
        # Both lists label the same frames: lengths that differ mean one of them is of another video or cut.
        other = record.get("gt" if field == "pred" else "pred")
        if isinstance(other, list) and len(other) != len(labels):
            raise InputError(f"{path}: video {video!r}: 'pred' holds {len(record['pred'])} frames and 'gt' "
                             f"{len(record['gt'])}; both label the same frames")
        unknown = np.zeros(len(labels), dtype=bool)
        if all(map(is_step_id, labels)):  # else a label like 10**30 does not even fit an int64
            arr = np.asarray(labels, dtype=np.int64)
            unknown = ~np.isin(arr, known)
        else:
            unknown[[not is_step_id(x) for x in labels]] = True
        if unknown.any():
            frame = int(np.flatnonzero(unknown)[0])
            raise InputError(
                f"{path}: video {video!r}: frame {frame} has label {str(labels[frame])[:40]}, "
                f"which is not a key-step of the graph ({graph.scenario or 'task graph'})"
            )
        out[str(video)] = arr
    return out


@dataclass(frozen=True)
class ReplayChecker:
    """The checker a replay runs.

    Attributes:
        settings: binary or probabilistic, with the threshold and prior of the latter.
        evidence: the detector evidence's calibration the probabilistic checker weighs (None: no evidence, each
            confirmed step taken as certain; unused by a checker whose entry of
            `graphs.checker_settings.CHECKERS` does not weigh evidence, such as the binary one).
    """

    settings: CheckerSettings = CheckerSettings("binary")
    evidence: EvidenceModel | None = None


BINARY: Final = ReplayChecker()


@dataclass(frozen=True)
class VideoReplay:
    """What the online path did on one video: confirmed steps in order, the checker's alerts and their
    probabilities (1 / 0 from the binary checker)."""

    steps: tuple[int, ...]
    alerts: tuple[bool, ...]
    probabilities: tuple[float, ...] = ()


@dataclass(frozen=True)
class ReplayResult:
    """Pooled PREGO scores of a replay and the per-video detail."""

    metrics: MistakeScores
    videos: dict[str, VideoReplay]


def label_probabilities(labels: np.ndarray, classes: Sequence[int]) -> np.ndarray:
    """Per-frame labels as a detector's probabilities: ``(T, K)`` one-hot over ``classes`` (other labels, such as a
    background, are all-zero rows)."""
    ids = np.asarray(classes, dtype=np.int64)
    order = np.argsort(ids)
    labels = np.asarray(labels, dtype=np.int64)
    column = order[np.minimum(np.searchsorted(ids[order], labels), len(ids) - 1)]  # (T,)
    known = ids[column] == labels
    out = np.zeros((len(labels), len(ids)))
    out[np.flatnonzero(known), column[known]] = 1.0
    return out


def replay_video(
    labels: np.ndarray, graph: TaskGraph, config: SegmenterConfig, checker: ReplayChecker = BINARY
) -> VideoReplay:
    """Run one video's labels through segmenter and checker, online.

    The segmenter's events (`segment_labels`, in the order it emits them) are checked in that order, each with the
    evidence as it stood before its first frame; the checker never feeds back into the segmenter, so this is what
    the live pipeline computes event by event.

    Args:
        labels: ``(T,)`` per-frame key-step ids.
        graph: the task graph.
        config: segmenter settings (``background`` should be None: these labels have no background).
        checker: which checker, and the evidence calibration of the probabilistic one.

    Returns:
        The confirmed steps and their alert flags.
    """
    events = segment_labels(labels, config)
    steps = tuple(event.step for event in events)
    # Evidence is worked out only for a checker that weighs it (its entry of the checker table says so); the others
    # take every confirmed step as certain, and get none.
    if checker.evidence is None or not checker.settings.entry.weighs_evidence:
        evidence = [NO_EVIDENCE] * len(events)
    else:
        classes = list(graph.step_ids)
        onehot = label_probabilities(labels, classes)
        evidence = recording_evidence(
            onehot, [e.start_frame for e in events],
            [(e.step, e.confidence, e.end_frame - e.start_frame) for e in events], checker.evidence, classes,
            config.fps,
        )
    state = checker.settings.new(graph)
    verdicts = [state.observe(step, ev) for step, ev in zip(steps, evidence, strict=True)]
    return VideoReplay(steps, tuple(v.is_mistake for v in verdicts), tuple(float(v.probability) for v in verdicts))


class NoStepConfirmed(InputError):
    """A video in which the segmenter confirmed no key-step at all: too short for its settings, or labels at another
    rate. A command says which of its options (or files) set them (`naming`): a user who typed ``--min-duration``
    must not read ``min_duration``, a name they never typed.

    Args:
        video: the video's name in the frames file.
        frames: its number of labels.
        config: the segmenter settings it was replayed with.
    """

    def __init__(self, video: str, frames: int, config: SegmenterConfig) -> None:
        self.video, self.frames, self.config = video, frames, config
        super().__init__(self.naming(f"a key-step of {config.min_duration:g} s", f"{config.fps:g} per second"))

    def naming(self, duration: str, rate: str) -> str:
        """The message, with the minimum duration and the frame rate said as ``duration`` and ``rate``."""
        return (f"video {self.video!r}: the segmenter confirmed no key-step at all in its {self.frames} frames "
                f"(a video too short for {duration}, or labels at another rate than {rate}?)")


def replay(
    frames: dict[str, np.ndarray], graph: TaskGraph, config: SegmenterConfig, checker: ReplayChecker = BINARY
) -> ReplayResult:
    """Replay every video and score the alerts under the PREGO protocol.

    Args:
        frames: ``{video: labels}`` from `load_frames_file`.
        graph: the task graph.
        config: segmenter settings.
        checker: which checker (default binary).

    Returns:
        Pooled metrics and per-video detail.

    Raises:
        NoStepConfirmed: a video in which no key-step was confirmed.
    """
    videos = {video: replay_video(labels, graph, config, checker) for video, labels in frames.items()}
    empty = [v for v, r in videos.items() if not r.steps]
    if empty:
        raise NoStepConfirmed(empty[0], len(frames[empty[0]]), config)
    return ReplayResult(mistake_scores(r.alerts for r in videos.values()), videos)


def sweep_config(config: SegmenterConfig, parameter: str, value: float) -> SegmenterConfig:
    """``config`` with one duration changed, the others widened just enough to stay valid."""
    if parameter == "min_duration":
        return replace(
            config,
            min_duration=value,
            min_run=min(config.min_run, value),
            max_delay=max(config.max_delay, 2 * value),
        )
    if parameter == "min_run":
        return replace(
            config,
            min_run=value,
            min_duration=max(config.min_duration, value),
            max_delay=max(config.max_delay, 2 * max(config.min_duration, value)),
        )
    if parameter == "max_delay":
        return replace(config, max_delay=value)
    raise InputError(f"cannot sweep {parameter!r} (choose min_duration, min_run or max_delay)")


def sweep(
    frames: dict[str, np.ndarray],
    graph: TaskGraph,
    config: SegmenterConfig,
    values: Sequence[float] = DEFAULT_SWEEP,
    parameter: str = "min_duration",
    base: ReplayResult | None = None,
) -> list[tuple[float, ReplayResult]]:
    """Ablation over one segmenter parameter; each distinct setting is replayed once.

    Args:
        frames: per-video labels.
        graph: the task graph.
        config: the base settings.
        values: values of ``parameter`` (seconds).
        parameter: ``min_duration`` (default), ``min_run`` or ``max_delay``.
        base: `replay` of ``config`` if the caller already ran it; the value equal to the base setting
            (the default is usually among the swept values) then reuses it instead of replaying again.

    Returns:
        ``[(value, result)]`` in the order given.
    """
    # Replays are deterministic in their config, so equal configs share one result.
    done: dict[SegmenterConfig, ReplayResult] = {} if base is None else {config: base}
    rows: list[tuple[float, ReplayResult]] = []
    for value in values:
        varied = sweep_config(config, parameter, float(value))
        if varied not in done:
            done[varied] = replay(frames, graph, varied)
        rows.append((float(value), done[varied]))
    return rows


def result_json(
    result: ReplayResult,
    settings: dict[str, Any],
    sweep_rows: Sequence[tuple[float, ReplayResult]] = (),
    parameter: str = "min_duration",
) -> dict[str, Any]:
    """The JSON document of a replay (see the module docstring)."""
    return {
        "format": RESULT_FORMAT,
        "version": RESULT_VERSION,
        "settings": settings,
        "metrics": result.metrics.to_dict(),
        "videos": {v: {"steps": list(r.steps), "alerts": list(r.alerts), "probabilities": list(r.probabilities)}
                   for v, r in result.videos.items()},
        "sweep": [{"parameter": parameter, "value": v, "metrics": r.metrics.to_dict()} for v, r in sweep_rows],
    }


def _metric_cells(m: MistakeScores) -> list[str]:
    figures = (m.avg_f1, m.correct.f1, m.correct.precision, m.correct.recall, m.mistake.f1, m.mistake.precision,
               m.mistake.recall)
    return [*(shown(value) for value in figures), str(m.n_steps)]


# Short headers keep the table readable in an 80-column terminal: C = correct class, M = mistake class.
_HEADERS: Final = ("Avg F1", "C F1", "C P", "C R", "M F1", "M P", "M R", "steps")


def replay_scores_table(
    result: ReplayResult | Sequence[tuple[str, ReplayResult]], title: str, published: float | None = None
) -> Table:
    """Rich table of the replay scores (true P/R), with the published figure beside them when given.

    Args:
        result: one replay (row "replay"), or ``(row label, replay)`` pairs (checkers side by side).
        title: the table's title.
        published: the published Avg F1 to show under them.

    Returns:
        The table.
    """
    rows = [("replay", result)] if isinstance(result, ReplayResult) else list(result)
    table = Table(
        title=title, caption="C = correct, M = mistake; P/R are true precision/recall (the published tables swap them)"
    )
    table.add_column("run", no_wrap=True)
    for header in _HEADERS:
        table.add_column(header, justify="right")
    for label, scores in rows:
        table.add_row(label, *_metric_cells(scores.metrics))
    if published is not None:
        table.add_row("published", f"{published:.1f}", *[""] * (len(_HEADERS) - 1))
    return table


def sweep_table(rows: Sequence[tuple[float, ReplayResult]], parameter: str, default: float) -> Table:
    """Rich ablation table: one row per value of the swept parameter (the default marked)."""
    table = Table(title=f"Segmenter ablation: {parameter} (seconds)")
    table.add_column(parameter, justify="right")
    for header in _HEADERS:
        table.add_column(header, justify="right")
    for value, result in rows:
        mark = " (default)" if abs(value - default) < 1e-9 else ""
        table.add_row(f"{value:g}{mark}", *_metric_cells(result.metrics))
    return table
