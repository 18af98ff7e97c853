"""``stream-detect eval``: the live chain over annotated videos, scored against their annotations.

Each video goes through exactly what ``stream-detect`` runs live: the same reader (read as fast as the CPU allows), the
detector's feature extractor, MiniROAD stepped frame by frame, the online segmenter, and a `CheckerCore` receiving
every message the detector publishes (encoded and decoded as on the wire, in-process instead of over ZeroMQ). What the
checker sends back (key-steps, alerts, retractions) is kept with the video time at which it came, and scored by
`streaming.offline.eval_scores`.

Each video's result is cached under ``$MISTAKE_CACHE/eval`` keyed by everything that shapes it (the video file, its
annotations, the graph, the detector, the backbone, the segmenter settings, the alert mode): a run stopped half-way
resumes with the videos not done yet, and a second run with other settings recomputes only what they change.
``--demo`` evaluates the three demo executions, rendered with their annotations (``has_errors`` marks the steps done
before their true pre-conditions).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from graphs.annotations import (
    choose_scenario,
    frames_hint,
    load_annotations,
    never_done,
    seconds_shown,
    time_order,
)
from graphs.checker_settings import CheckerSettings
from graphs.common.errors import InputError, print_note
from graphs.common.files import (
    check_output,
    check_spares_inputs,
    is_file_name,
    read_json,
    replaced_input,
    write_text,
)
from graphs.common.safe_text import count_of, first_few, meant_name, printable, unknown_name
from graphs.limits import is_finite_number
from graphs.task_graph import TaskGraph, load_graph
from graphs.training_sources import (
    TrainingSources,
    execution_identity,
    features_identity,
    file_identity,
)
from recognition.checkpoint import DetectorCheckpoint
from recognition.feature_folders import ANNOTATION_SLACK_S, load_split
from recognition.feature_import import LONG_FILE_RATIO, NO_FRAMES, is_npy_name, span_ratio, unread_line
from recognition.model import MiniROAD, scale_mismatch
from recognition.segment_metrics import TimedSegment
from recognition.segmenter import SegmenterConfig, SegmenterOverrides
from streaming.alert_modes import DEFAULT_ALERT_ON, check_alert_on
from streaming.checker.core import CheckerCore
from streaming.demo.procedure import DEMO_EXECUTIONS, PRECONDITIONS, STEP_IDS
from streaming.demo.synthetic_video import cache_dir, demo_video
from streaming.detector import (
    DetectorConfig,
    LoadedParts,
    PipelineConfig,
    build_pipeline,
    check_measured_rates,
    detector_for_graph,
    live_segmenter_config,
    load_detector_for_stream,
    print_warning,
)
from streaming.extractors import FeatureExtractor
from streaming.feature_files import (
    annotated_feature_files,
    feature_file_for,
    feature_files_of,
    is_feature_file,
    load_detector_for_features,
    open_feature_file,
)
from streaming.local_checker import CheckerLink
from streaming.messages import (
    Alert,
    Heartbeat,
    KeyStepEvent,
    KeyStepOnset,
    Message,
    MessageError,
    MissingSteps,
    Retraction,
    Status,
    StepEvent,
    decode,
    encode,
)
from streaming.offline.eval_plots import draw_timelines, plot_path, pyplot
from streaming.offline.eval_scores import (
    AnnotatedSegment,
    RaisedAlert,
    RuleDisagreement,
    VideoRun,
    VideoScores,
    disagreement_lines,
    node_name,
    rule_disagreements,
    score_video,
    scores_json,
    step_check,
    total,
    video_detail,
)
from streaming.offline.features import (
    VIDEO_SUFFIXES,
    find_video,
    unannotated_videos,
    unclaimed_videos,
    video_candidates,
)
from streaming.overlay import FrameAnnotator, OverlayWriter, check_preview, drawing_options
from streaming.readers import (
    MAX_SAMPLES,
    Frame,
    ReaderConfig,
    check_first_frame,
    frames_read_again,
    named_error,
    open_named,
)
from streaming.session_verdict import ended_text, retraction_reason, session_verdict

EVAL_VERSION = 4  # bump when what a cached record holds changes (3: the detector's messages; 4: repeated onsets)
STREAM_ID = "eval"


@dataclass(frozen=True)
class EvalConfig:
    """One ``stream-detect eval`` run.

    Args:
        graph: task graph file.
        detector: detector checkpoint file.
        videos: folder of the videos, named as in the annotation file (None with ``demo``).
        annotations: annotation JSON (None with ``demo``).
        names: videos to evaluate (``--videos-list``); empty: ``split`` or every annotated video of the scenario.
        split: a ``split.json`` whose ``test`` list names the videos to evaluate.
        demo: evaluate the demo executions (graph, detector and videos bundled).
        backbone: TorchScript backbone, for detectors trained on its features.
        alert_on: ``"end"`` (alert once the step is confirmed) or ``"onset"`` (alert on its provisional announcement).
        segmenter: command-line changes to the checkpoint's segmenter settings.
        once: send each key-step once (``--once``, `streaming.detector.config.DetectorConfig`).
        json_out: where to write the figures as JSON (checked before any video runs).
        threads: torch threads.
        device: where the extractor and the detector run.
        reader: file reader.
        ignore_names: run even if the detector and the graph name the steps differently.
        use_cache: reuse cached per-video results.
        annotate_out: a folder to write each video with what the system saw drawn over it (``<video>.mp4``).
        preview: show the same in a window while the videos run (needs a display and an OpenCV with a GUI).
        plots: a folder to draw each video's timeline in (``<video>.png``; ``--plots``).
        checking: the pre-condition checker (``--checker``, ``--alert-threshold``).
        default_rates: a detector without measured rates sends evidence with the default ones (``--default-rates``).
        features: feature files (``.npy``) or folders of them, replayed instead of videos (``--features``): each
            vector goes straight into the detector (`streaming.feature_files`: no reader, no extractor).
        rate: the feature files' vectors per second (``--rate``; None: the detector's), checked against the detector.
    """

    graph: str
    detector: str
    videos: str | None = None
    annotations: str | None = None
    names: tuple[str, ...] = ()
    split: str | None = None
    demo: bool = False
    backbone: str | None = None
    alert_on: str = DEFAULT_ALERT_ON
    segmenter: SegmenterOverrides = field(default_factory=SegmenterOverrides)
    once: bool = False
    json_out: str | None = None
    threads: int = 1
    device: str = "auto"
    reader: str = "auto"
    ignore_names: bool = False
    use_cache: bool = True
    annotate_out: str | None = None
    preview: bool = False
    plots: str | None = None
    checking: CheckerSettings = field(default_factory=CheckerSettings)
    default_rates: bool = False
    features: tuple[str, ...] = ()
    rate: float | None = None

    def __post_init__(self) -> None:
        check_alert_on(self.alert_on)
        if self.features and (self.videos is not None or self.demo):
            raise InputError("stream-detect eval: --features replays feature files instead of videos: give it without "
                             "--videos and --demo")
        drawn = drawing_options(self.annotate_out is not None, self.preview)
        if self.features and drawn:
            raise InputError(f"stream-detect eval: {drawn} over video frames; {NO_FRAMES}")
        if not self.demo and ((self.videos is None and not self.features) or self.annotations is None):
            raise InputError("stream-detect eval: --videos (or --features) and --annotations are required (or --demo)")
        if self.names and self.split:
            raise InputError("stream-detect eval: give --videos-list or --split, not both")
        if self.demo:  # the demo's videos and annotations are bundled: an option that names others would be ignored
            mine = next((f"--{name} {value}" for name, value in (("videos", self.videos),
                                                                  ("annotations", self.annotations),
                                                                  ("split", self.split)) if value is not None), None)
            if mine is not None:
                raise InputError(f"stream-detect eval: {mine}: --demo evaluates the bundled demo executions "
                                 f"({', '.join(DEMO_NAMES)}; --videos-list picks some); leave --demo out to "
                                 "evaluate your own videos")


@dataclass(frozen=True)
class EvalVideo:
    """One video to evaluate: its name, file and annotated segments (time order), and how errors name the file
    (``--videos videos: video_07.mp4``; ``eval`` has no ``--video`` option, which the readers' errors name).
    ``never_done``: the steps annotated never done (`graphs.annotations.never_done`), None when the annotation file
    marks no step of the scenario so (then the end report's missing steps have nothing to be scored against).
    ``annotation_identity``: its annotated segments' `graphs.training_sources.execution_identity` (None for the demo's),
    which a graph learned from that execution records."""

    name: str
    path: Path
    annotated: tuple[AnnotatedSegment, ...]
    label: str = ""
    never_done: tuple[int, ...] | None = None
    annotation_identity: str | None = None

    @property
    def named(self) -> str:
        """The file as errors name it."""
        return self.label or str(self.path)


DEMO_NAMES = tuple(f"demo:{name}" for name in DEMO_EXECUTIONS)  # how eval names the demo executions


def demo_videos(names: Sequence[str] = ()) -> list[EvalVideo]:
    """The demo executions, rendered on first use, annotated with the steps done before their true pre-conditions
    and with the steps they never do.

    Args:
        names: the executions to evaluate, as ``demo:<name>`` (``--videos-list``); empty: all three.

    Returns:
        The videos, in ``names`` order (or the demo's).
    """
    _check_unique(names)
    unknown = [n for n in names if n not in DEMO_NAMES]
    if unknown:
        raise InputError(unknown_name("--videos-list: demo execution", unknown[0], DEMO_NAMES, None))
    out = []
    for name in [n.removeprefix("demo:") for n in names] or DEMO_EXECUTIONS:
        path, segments = demo_video(name)
        done: set[int] = set()
        annotated = []
        for step, start, end in segments:
            annotated.append(AnnotatedSegment(step, start, end, not set(PRECONDITIONS[step]) <= done))
            done.add(step)
        skipped = tuple(s for s in STEP_IDS if s not in done)  # the demo knows what it left out (add_milk)
        out.append(EvalVideo(f"demo:{name}", path, tuple(annotated), f"demo video demo:{name} ({path})", skipped))
    return out


def graph_numbering(named: dict[int, str], graph: TaskGraph, annotations: str, graph_path: str) -> dict[int, int]:
    """The graph's step id of each annotated step id whose number differs, the steps matched by name; empty when the
    annotation file numbers its steps as the graph does.

    An annotation table numbers its steps in sorted name order, a JSON file as its taxonomy says: a graph learned
    from one and the annotation of the other number the same steps two ways, and the scores compared one step's
    detections with another's annotations without a word. Steps of the graph numbered otherwise are matched by
    name (`graphs.task_graph.TaskGraph.ids_by_name`, as the detector's classes are: `detector_for_graph`); where
    the annotation also holds a step the graph lacks (its number may be one of the graph's), a step named alike
    under two numbers is refused, naming it.

    Args:
        named: the annotation file's taxonomy of the graph's scenario (step id -> name).
        graph: the task graph.
        annotations: the annotation file, for the error.
        graph_path: the graph file, for the error.

    Returns:
        Annotated step id -> the graph's, for the ids that differ.
    """
    names = dict(zip(graph.step_ids, graph.step_names, strict=True))
    if all(names.get(step, name) == name for step, name in named.items()):
        return {}  # numbered alike (a step named twice in a recipe included)
    matched = graph.ids_by_name(named)
    if matched is not None:  # every annotated step is one of the graph's: its number there is the one scored
        return {step: other for step, other in matched.items() if other != step}
    ids = dict(zip(graph.step_names, graph.step_ids, strict=True))
    moved = {step: ids[name] for step, name in named.items() if name in ids and ids[name] != step}
    if not moved:
        return {}
    step, other = next(iter(moved.items()))
    raise InputError(f"--annotations {annotations} and --graph {graph_path} number the steps differently: "
                     f"{printable(named[step])!r} is step {step} in the annotation, step {other} in the graph (an "
                     "annotation table numbers its steps in sorted name order: learn the graph from the annotation "
                     "file of all the procedure's steps)")


def annotated_videos(config: EvalConfig, graph: TaskGraph, warn: Callable[[str], None] = print_warning,
                     note: Callable[[str], None] = print_note) -> list[EvalVideo]:
    """The videos the run evaluates, found and read before any of them runs.

    Args:
        config: the run (``videos``, ``annotations``, ``names`` / ``split``).
        graph: the task graph (its scenario picks the annotation file's, when it records one).
        warn: told of the feature files of another scenario's recordings, which are not evaluated.
        note: told of the entries of a ``--features`` folder that are not read (`unread_line`, as ``tgml
            bench-live`` and ``recognition-features import`` say it).

    Returns:
        The videos in annotation-file order (or ``--videos-list`` order).
    """
    assert config.annotations is not None and (config.videos is not None or config.features)
    # The graph's scenario: the one judged. Its steps never done are the Missing Steps eval scores against.
    annotations = load_annotations(config.annotations, scenario_read=graph.scenario, learns_graph=False)
    scenario = choose_scenario(annotations, graph.scenario if graph.scenario in annotations.taxonomy else None)
    known = {v.video: v for v in annotations.scenario_videos(scenario)}
    chosen = bool(config.names or config.split)
    files = annotated_feature_files(config.features, annotations, config.annotations, chosen) if config.features else {}
    for line in filter(None, (unread_line(spec) for spec in config.features)):  # an .npz: read by nothing, said
        note(line)
    names = list(config.names) or _split_names(config.split, scenario) or [n for n in (files or known) if n in known]
    if not names:  # every file of another scenario: scores over no video would look like a run
        raise InputError(f"--features: none of the {len(files)} feature files is of a recording of scenario "
                         f"{scenario!r} (the graph's) in {config.annotations}")
    elsewhere = sorted(n for n in files if n not in known)
    if elsewhere and not (config.names or config.split):  # said, as import says it: never a file left out unsaid
        warn(f"--features: {count_of(len(elsewhere), 'feature file')} {'is' if len(elsewhere) == 1 else 'are'} of "
             f"recordings of another scenario than {scenario!r}, not evaluated ({first_few(elsewhere, 5)})")
    # The default is every annotated video of the scenario; a folder that lacks some of them was evaluated on the
    # others without a word, so the totals looked like the whole set's. Files named one by one are a choice.
    lacking = [n for n in known if n not in files]
    if lacking and not (config.names or config.split) and any(Path(spec).is_dir() for spec in config.features):
        warn(f"--features: {count_of(len(lacking), 'annotated recording')} of scenario {scenario!r} in "
             f"{config.annotations} {'has' if len(lacking) == 1 else 'have'} no feature file, not evaluated "
             f"({first_few(lacking, 5)})")
    _check_unique(names)
    unknown = [n for n in names if n not in known]
    if unknown:
        where = f"--split {config.split}" if config.split else "--videos-list"
        other = [n for n in unknown if n in annotations.videos]  # annotated, as a recording of another scenario
        what = (f"not a recording of scenario {scenario!r} (the graph's) in {config.annotations}" if other == unknown
                else f"not annotated in {config.annotations} (scenario {scenario})")
        # The closest recording of the scenario to the first name that may be a typo: a typo was left to be found in
        # the file. Not for a recording of another scenario (it is spelt right: "did you mean" sent the user to a
        # neighbour of its name), nor towards a name already listed.
        # Nor for a name with a feature file in --features: spelt as its file, it lacks the annotation ("did you
        # mean 'video_05'?" was said of video_06, the split's test recording the labels had lost).
        on_disk = feature_files_of(config.features) if config.features else {}
        typo = next((n for n in unknown if n not in annotations.videos and n not in on_disk), None)
        hint = meant_name(typo, set(known) - set(names), 0) if typo is not None else ""
        raise InputError(f"{where}: {', '.join(unknown)} {what}{hint}")
    # Unchosen, every annotated recording is asked for (with --features: only augmented copies, <video>.aug<k>.npy,
    # were given).
    asked = (f"--split {config.split} names" if config.split else "--videos-list names" if config.names
             else f"annotated in {config.annotations}")
    absent = [n for n in names if n not in files] if config.features else []
    if absent:  # every one at once, and where they were looked for: one per try, the folder unsaid, before
        which = "the recording" if len(names) == 1 else f"{len(absent)} of the {len(names)} recordings"
        raise InputError(f"--features {' '.join(config.features)}: no <recording>.npy file for {which} {asked} "
                         f"({first_few(absent, 5)})")
    folder = Path(config.videos or ".")
    if not config.features and not folder.is_dir():
        raise InputError(f"--videos {folder}: not a folder")
    # Every missing video at once, as for feature files: `find_video` names one a try (one: its details; a key that
    # is no file name: its refusal, which comes first).
    plain = not config.features and all(is_file_name(n) for n in names)
    nothing = [n for n in names if not video_candidates(folder, n)] if plain else []
    if len(nothing) > 1:
        tried = "/".join(VIDEO_SUFFIXES)
        raise InputError(f"--videos {folder}: no video file ({tried}) for {len(nothing)} of the {len(names)} "
                         f"recordings {asked} ({first_few(nothing, 5)}){unclaimed_videos(folder, annotations.videos)}")
    if not config.features and not (config.names or config.split):  # said, as recognition-features says it
        unannotated = unannotated_videos(folder, annotations.videos)
        if unannotated:
            warn(f"--videos {folder}: {count_of(len(unannotated), 'video file')} that {config.annotations} does not "
                 f"annotate ({first_few(list(unannotated), 3)}): not evaluated")
    # A file that marks one step never done marks them all (CaptainCook4D's Missing Steps): only then is a video
    # without such a step one where nothing was left out.
    marks_missing = any(never_done(span) for video in known.values() for span in video.spans)
    renumber = graph_numbering(annotations.taxonomy.get(scenario, {}), graph, config.annotations, config.graph)
    out = []
    for name in names:
        video = known[name]
        identity = execution_identity(video, annotations.taxonomy[scenario])
        timed = time_order(video, config.annotations)
        steps = [renumber.get(step, step) for step in video.steps]
        annotated = tuple(AnnotatedSegment(steps[k], start, end, video.has_errors[k]) for k, start, end in timed)
        done = {steps[k] for k, _, _ in timed}
        skipped = [s for s, span in zip(steps, video.spans, strict=True) if never_done(span) and s not in done]
        missing = tuple(dict.fromkeys(skipped)) if marks_missing else None
        if config.features:
            path = feature_file_for(files, name)
            out.append(EvalVideo(name, path, annotated, f"--features {path} (annotated video {name!r})", missing,
                                 identity))
            continue
        path = find_video(folder, name, annotations.videos)
        out.append(EvalVideo(name, path, annotated, f"--videos {folder}: {path.name} (annotated video {name!r})",
                             missing, identity))
    return out


def check_annotation_fits(video: EvalVideo, duration: float, slack: float, annotations: str | None) -> None:
    """Refuse a feature file that ends before its recording's annotated steps do (beyond one vector): a file cut
    short, or features at another rate than the one they are read at, which would score every later step as missed.

    Args:
        video: the recording, its feature file and annotated steps.
        duration: seconds the file covers at the rate it is read at.
        slack: seconds the steps may run past the file (`ANNOTATION_SLACK_S` and one vector's time).
        annotations: the annotation file, named in the error.
    """
    last = max((segment.end for segment in video.annotated), default=0.0)
    if last > duration + slack:
        raise InputError(f"{video.named}: covers {duration:.1f} s at the rate it is read at, but its annotated steps "
                         f"in {annotations} run to {seconds_shown(last)} s (a file cut short, or features at another "
                         f"--rate{frames_hint(last, duration)}?)")


def warn_long_files(videos: Sequence[EvalVideo], lengths: Sequence[float], fps: float,
                    warn: Callable[[str], None]) -> None:
    """Warn when the feature files last far longer than their annotated steps at the detector's rate (features
    written at a higher rate: every step would be recognised, and scored, early in its file). A file too short is
    refused (`check_annotation_fits`); this is the other direction, which an idle tail can also explain."""
    timed = [(length, max(s.end for s in video.annotated))
             for video, length in zip(videos, lengths, strict=True) if video.annotated]
    ratio = span_ratio([length for length, _ in timed], [end for _, end in timed], 1 / fps)
    if ratio > LONG_FILE_RATIO:
        warn(f"--features: at the detector's rate ({fps:g} a second) the feature files last a median {ratio:.1f} "
             "times as long as their annotated steps (each step would be recognised, and scored, early in its "
             "file): were they written at that rate?")


def check_outputs_spare_inputs(config: EvalConfig, videos: Sequence[EvalVideo]) -> None:
    """Refuse, before the first video runs, a ``--json`` that is one of the videos, or an ``--annotate-out`` /
    ``--plots`` folder where a file the run writes (``<video>.mp4``, a video's timeline plot) would replace a file it
    reads: a video it draws over (the videos' own folder), the graph, the detector, the annotations, the split."""
    paths = [video.path for video in videos]
    if config.json_out is not None:  # the rest of `check_output` ran before the chain loaded: not twice
        check_spares_inputs(config.json_out, "results file", paths, option="--json")
    read = [*paths, config.graph, config.detector, config.annotations, config.split, config.backbone]
    planned = [("--annotate-out", config.annotate_out, annotated_path), ("--plots", config.plots, plot_path)]
    for option, folder, name_of in planned:
        if folder is None:
            continue
        for video in videos:
            target = name_of(folder, video.name)
            hit = replaced_input(target, read)
            if hit is not None:
                raise InputError(f"{option} {folder}: its {target.name} would replace {hit}, which the run reads; "
                                 "choose another folder")


def check_videos_open(videos: Sequence[EvalVideo], config: EvalConfig, fps: float,
                      warn: Callable[[str], None] = print_warning) -> None:
    """Open every video and decode its first frame before the first one runs: a damaged or unreadable file is refused
    at once, not after the videos before it ran (their results would be cached, but the person waited for nothing).
    A video of fewer frames a second than the detector's is said, as the live run says it (`frames_read_again`).

    Args:
        videos: the videos of the run.
        config: the reader to use.
        fps: the detector's rate.
        warn: told of each video whose frames are read more than once.
    """
    for video in videos:
        source_fps = check_first_frame(video.path, ReaderConfig(reader=config.reader, realtime=False, fps=fps),
                                       video.named)
        slow = frames_read_again(str(video.path), source_fps, fps)
        if slow is not None:  # the reader's words name it as --video PATH, an option eval does not have
            warn(named_error(slow, str(video.path), video.named))


def _split_names(split: str | None, scenario: str) -> list[str]:
    """The test videos of ``--split``; a split that records another scenario than the videos' is refused (another
    procedure's video names can be this one's too: ``video_03``)."""
    if split is None:
        return []
    read = load_split(split, "--split")
    if read.scenario is not None and read.scenario != scenario:
        raise InputError(f"--split {split}: is the split of scenario {read.scenario!r}; these videos are of "
                         f"{scenario!r}")
    test = list(read.test)
    if not test:
        raise InputError(f"--split {split}: field 'test' must be a non-empty list of video names")
    return test


@dataclass
class LoadedChain:
    """The parts every video shares, loaded once: graph, detector, extractor, segmenter settings, and the digests of
    the graph, detector and backbone files (part of every video's cache key)."""

    graph: TaskGraph
    model: MiniROAD
    checkpoint: DetectorCheckpoint
    extractor: FeatureExtractor
    segmenter: SegmenterConfig
    file_digests: dict[str, str | None]
    detector_sources: TrainingSources  # what the detector was trained on (`trained_on`)
    graph_sources: TrainingSources  # what the graph was learned from


def trained_on(sources: TrainingSources, kind: str, videos: Sequence[EvalVideo],
               identity: Callable[[EvalVideo], str | None]) -> dict[str, str]:
    """The videos a detector was trained on, or a graph learned from, among ``videos``, each with the name it was
    learned under (``recognition-train`` and ``tgml train`` record them as ``train_videos`` in the checkpoint's or
    graph's ``info``, and what each was as ``train_identities``; older files record neither, or names alone).

    Matched by content where the file records an identity of ``kind`` (`graphs.training_sources.learned_from`: a
    renamed copy of a training video is one, new footage under a training video's name is not), by name otherwise.

    Args:
        sources: what the detector's checkpoint or the task graph records (`LoadedChain`).
        kind: the identity ``identity`` gives (``"video"``, ``"features"`` or ``"annotation"``).
        videos: the videos of the run.
        identity: a video's identity of ``kind`` (None: it has none); asked only when the file records some.

    Returns:
        Judged name -> training name, in ``videos`` order.
    """
    recorded = sources.records(kind)
    return sources.matches(kind, [(v.name, identity(v) if recorded else None) for v in videos])


def seen_names(matches: dict[str, str], alike: str) -> list[str]:
    """The judged videos of `trained_on`, one under another name with the name it was learned under, after ``alike``
    (``"a copy of"``)."""
    return [name if name == learned else f"{name} ({alike} {learned})" for name, learned in matches.items()]


def load_chain(config: EvalConfig, warn: Callable[[str], None] = print_warning) -> LoadedChain:
    """Load and cross-check the graph and the detector (names included; the detector numbered as the graph,
    `detector_for_graph`), and settle the segmenter settings."""
    graph = load_graph(config.graph)
    if config.features:  # the vectors go straight into the detector: a pass-through extractor of its width
        model, checkpoint, extractor = load_detector_for_features(config.detector, config.threads, config.device,
                                                                  config.rate)
    else:
        model, checkpoint, extractor = load_detector_for_stream(config.detector, config.backbone, config.threads,
                                                                config.device)
    checkpoint, lines = detector_for_graph(checkpoint, graph, config.detector, config.graph, config.ignore_names)
    for line in lines:
        warn(line)
    # Read here, so that damaged provenance is refused before a video is opened, not once they all were.
    detector_sources = TrainingSources.read(checkpoint.info, str(config.detector))
    graph_sources = TrainingSources.read(graph.info, str(config.graph))
    check_measured_rates(checkpoint, config.detector, config.checking.kind, config.default_rates)
    segmenter = live_segmenter_config(checkpoint, config.segmenter, config.alert_on)
    digests = {name: _digest(path) for name, path in
               (("graph", config.graph), ("detector", config.detector), ("backbone", config.backbone))}
    return LoadedChain(graph, model, checkpoint, extractor, segmenter, digests, detector_sources, graph_sources)


@dataclass(frozen=True)
class DetectorRecord:
    """What the detector published on one video (what the eval cache stores): every message it sent the checker,
    with the video time it was sent at, and the frames it read.

    The checker's answers are not stored: `check_record` replays the messages through a checker with the run's
    settings, so a change of ``--checker``, ``--alert-threshold``, ``--order-rule`` or of the graph reruns only the
    checker, in milliseconds, and never the detector.

    Attributes:
        video: the video's name.
        frames: frames read.
        messages: ``(video time, message)`` in the order sent (`KeyStepEvent`, `KeyStepOnset`, `Heartbeat`).
    """

    video: str
    frames: int
    messages: tuple[tuple[float, Message], ...]


def record_video(video: EvalVideo, chain: LoadedChain, config: EvalConfig, on_frame: Callable[[], None],
                 on_length: Callable[[int | None], None] | None = None) -> DetectorRecord:
    """Run the live chain over one video and record what the detector published (drawn with ``--annotate-out`` or
    ``--preview`` as the checker answers it).

    Args:
        video: the video and its annotations.
        chain: the loaded parts.
        config: the run (reader, threads, checker, drawing).
        on_frame: called after every frame (the progress bar).
        on_length: told, once the video is open, how many frames it will give (None: its container does not say).

    Returns:
        The `DetectorRecord`.
    """
    fps = chain.checkpoint.fps
    reader = (open_feature_file(video.path, chain.checkpoint, config.detector, name=video.named) if config.features
              else open_named(video.path, ReaderConfig(reader=config.reader, realtime=False, fps=fps), video.named))
    if on_length is not None:
        on_length(None if reader.duration is None else math.floor(reader.duration * fps + 1e-9))
    link = CheckerLink(CheckerCore(chain.graph, checking=config.checking))
    settings = DetectorConfig(stream_id=STREAM_ID, threads=config.threads, alert_on=config.alert_on,
                              once=config.once, default_rates=config.default_rates)
    overlay = None
    if config.annotate_out is not None or config.preview:
        path = None if config.annotate_out is None else annotated_path(config.annotate_out, video.name)
        if path is not None:
            path.parent.mkdir(exist_ok=True)  # the --annotate-out folder, checked up front: only its parent must exist
        overlay = OverlayWriter(path, fps, config.preview)
    annotator = FrameAnnotator(overlay, link, chain.checkpoint) if overlay is not None else None

    def seen(frame: Frame, features: Any, probs: Any) -> None:
        if annotator is not None:
            annotator.seen(frame, features, probs)
        link.now = frame.time + 1.0 / fps  # an event caused by this frame is known once the frame is over
        on_frame()

    parts = LoadedParts(chain.graph, chain.model, chain.checkpoint, chain.extractor)
    try:
        # The detector's messages go to the checker beside it only; `seen` keeps its clock at the frame's video time.
        pipeline = build_pipeline(PipelineConfig(detector=settings, publish=False), parts=parts, readers=[reader],
                                  sinks=[lambda _: link], observers=[lambda _: seen], segmenter=chain.segmenter)
        with pipeline, overlay if overlay is not None else contextlib.nullcontext():
            stats = pipeline.run()[0]
            if annotator is not None:
                annotator.finish()
    finally:
        reader.close()
    if stats.error:  # decoded to its first frame up front, damaged further on: the videos before it are cached
        raise InputError(f"{named_error(stats.error, str(video.path), video.named)}; the results of the videos "
                         "before it are cached")
    return DetectorRecord(video.name, stats.frames, tuple(link.sent))


def check_record(record: DetectorRecord, video: EvalVideo, graph: TaskGraph, checking: CheckerSettings,
                 shortest: int | None = None) -> VideoRun:
    """What the checker says about a video: the detector's recorded messages served to a fresh checker, each at its
    video time, and its answers collected.

    Args:
        record: what the detector published on the video.
        video: the video and its annotations.
        graph: the task graph.
        checking: the checker's settings.
        shortest: the frames of the shortest step the segmenter can confirm (`SegmenterConfig.shortest_step`), for
            the verdict of a video too short for any step; None: not known.

    Returns:
        The `VideoRun` that `streaming.offline.eval_scores` scores.
    """
    link = CheckerLink(CheckerCore(graph, checking=checking))
    link.replay(record.messages)
    steps = {m.index: m for _, m in link.received if isinstance(m, StepEvent)}
    # The live view's end-of-stream rule decides which alerts stand: eval counts what the person was told.
    session = session_verdict((m for _, m in link.received if isinstance(m, Alert)),
                              (m for _, m in link.received if isinstance(m, Retraction)),
                              next((m for _, m in reversed(link.received) if isinstance(m, MissingSteps)), None))
    withdrawn = {a.alert_id for a in session.retracted}
    reasons = {m.alert_id: retraction_reason(m) for _, m in link.received if isinstance(m, Retraction)}
    latest = {a.alert_id: a for a in (*session.mistakes, *session.retracted)}  # the copy received last wins
    alerts: dict[str, RaisedAlert] = {}
    for t, m in link.received:
        if not isinstance(m, Alert) or m.alert_id in alerts:
            continue  # a confirmed step's alert repeats its early alert's id: one alert for the person
        step = steps.get(m.index)
        if step is not None and step.step == m.step:  # confirmed: the alert names the recognised segment
            start, end = step.start, step.end
        else:  # an early alert never confirmed: its run, from the step's start to when the alert came
            start, end = m.video_time if m.video_time is not None else link.onset_starts.get(m.index, t), t
        final = latest[m.alert_id]
        alerts[m.alert_id] = RaisedAlert(m.step, min(start, end), end, t, m.alert_id in withdrawn, final.missing,
                                         final.probability, reasons.get(m.alert_id, ""))
    ordered = [s for _, s in sorted(steps.items())]
    recognised = tuple(TimedSegment(s.step, s.start, s.end) for s in ordered)
    state = link.core.streams.get(STREAM_ID)
    history = state.checker.history if state is not None else []
    known = all(s.index < len(history) for s in ordered)
    checks = tuple(step_check(history[s.index]) for s in ordered) if known else ()
    # The verdict in the view's words: it reads the checker's last status of the stream, as the view does.
    status = next((m for _, m in reversed(link.received) if isinstance(m, Status) and m.stream_id == STREAM_ID), None)
    done, frames, counted = ((len(status.done), status.frames, status.alerts) if status is not None
                             else (len({s.step for s in ordered}), record.frames, 0))
    verdict, _ = ended_text(session, lambda step: node_name(graph, step), recognised=done, steps=len(graph.step_ids),
                            frames=frames, counted=counted, shortest=shortest)
    return VideoRun(video.name, video.annotated, recognised, tuple(alerts.values()), record.frames,
                    tuple(s.confidence for s in ordered), checks, session.never_done, verdict, video.never_done)


def annotated_path(folder: str | Path, video: str) -> Path:
    """Where ``--annotate-out`` writes a video: ``<folder>/<video>.mp4`` (``demo:x`` becomes ``demo-x``)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in video)[:120]
    return Path(folder) / f"{safe}.mp4"


def _digest(path: str | Path | None) -> str | None:
    if path is None:
        return None
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha1").hexdigest()


def cache_key(video: EvalVideo, config: EvalConfig, chain: LoadedChain) -> str:
    """Hash of everything that shapes what the detector publishes on a video (not the graph, the annotations or the
    checker's settings: `check_record` replays the checker under those; but the step ids the graph gives the
    detector's classes, which its messages carry)."""
    stat = video.path.stat()
    # A video is known by its size and time, as make knows a file: hashing gigabytes per run would cost more than
    # the run it saves. A feature file is small, and rewritten in place by scripts that keep the time: its content.
    content: list[object] = ([_digest(video.path)] if is_feature_file(video.path)
                             else [stat.st_size, stat.st_mtime_ns])
    settings = {
        "version": EVAL_VERSION,
        "video": [str(video.path.resolve()), *content],
        "detector": chain.file_digests["detector"],
        # The step ids its messages carry: the file's, or a graph's that numbers the steps otherwise
        # (`detector_for_graph`), which the graph left out of the key would otherwise replay under the other's.
        "steps": list(chain.checkpoint.class_step_ids),
        "backbone": chain.file_digests["backbone"],
        "segmenter": asdict(chain.segmenter),
        "alert_on": config.alert_on,
        "once": config.once,
        "reader": config.reader,
        "default_rates": config.default_rates,
    }
    return hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def _cache_file(video: EvalVideo, key: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in video.name)[:80]
    return cache_dir() / "eval" / f"{safe}-{key}.json"


RECORD_FIELDS = frozenset(f.name for f in fields(DetectorRecord))
MESSAGE_FIELDS = frozenset({"time", "topic", "payload"})
DETECTOR_KINDS = (KeyStepEvent, KeyStepOnset, Heartbeat)  # what a detector sends the checker


def record_json(record: DetectorRecord) -> dict[str, Any]:
    """A record as the cache stores it: each message as its two wire frames, the topic as text and the payload as the
    JSON object it is."""
    messages = []
    for t, message in record.messages:
        topic, payload = encode(message)
        messages.append({"time": t, "topic": topic.decode("ascii"), "payload": json.loads(payload)})
    return {"video": record.video, "frames": record.frames, "messages": messages}


def load_cache_entry(path: Path, video: EvalVideo) -> DetectorRecord:
    """A cached `DetectorRecord` of ``video``: the one loader of eval cache entries, every field checked, each
    message as the checker checks one arriving on its socket (`streaming.messages.decode`).

    Args:
        path: the entry (`_cache_file`).
        video: the video it must be the record of.

    Returns:
        The record.

    Raises:
        InputError: the entry cannot be read (any bytes: too large, not JSON, nested too deeply), is not the record
            of this video, a field has the wrong type, a message is malformed or is not one a detector sends, the
            video times go backwards, or it does not end as a finished run does; the caller runs the video again.
    """
    raw = read_json(path, "eval cache entry")
    src = str(path)
    if not isinstance(raw, dict) or set(raw) != RECORD_FIELDS:
        raise InputError(f"{src}: not an eval cache entry (expected the fields {', '.join(sorted(RECORD_FIELDS))})")
    if raw["video"] != video.name:
        raise InputError(f"{src}: holds the record of another video")
    frames = raw["frames"]
    if isinstance(frames, bool) or not isinstance(frames, int) or not 0 <= frames <= MAX_SAMPLES:
        # 10^30 was trusted and reported; no video yields more than a reader samples from one file.
        raise InputError(f"{src}: field 'frames' must be a count of frames in 0..{MAX_SAMPLES}")
    items = raw["messages"]
    if not isinstance(items, list):
        raise InputError(f"{src}: field 'messages' must be a list")
    messages: list[tuple[float, Message]] = []
    for k, item in enumerate(items):
        where = f"{src}: messages[{k}]"
        if not isinstance(item, dict) or set(item) != MESSAGE_FIELDS:
            raise InputError(f"{where} must be an object with the fields payload, time, topic")
        t, topic, payload = item["time"], item["topic"], item["payload"]
        if not is_finite_number(t) or t < (messages[-1][0] if messages else 0.0):
            raise InputError(f"{where}.time must be a number of seconds >= 0, not before the message before it")
        if not isinstance(topic, str) or not isinstance(payload, dict):
            raise InputError(f"{where}: topic must be text and payload an object (the message's wire frames)")
        try:
            message = decode([topic.encode("utf-8"), json.dumps(payload).encode("utf-8")])
        except MessageError as err:
            raise InputError(f"{where}: {err}") from None
        if not isinstance(message, DETECTOR_KINDS) or message.stream_id != STREAM_ID:
            raise InputError(f"{where}: a {message.kind} message of stream {message.stream_id!r}, not one the "
                             f"detector sends on stream {STREAM_ID!r}")
        messages.append((float(t), message))
    # A finished run ends with the stream's last heartbeat, which counts its frames: an entry cut short or edited
    # (its messages emptied, its frame count raised) was served as the video's result.
    last = messages[-1][1] if messages else None
    if not isinstance(last, Heartbeat) or not last.ended or last.frames != frames:
        raise InputError(f"{src}: not the record of a finished run (it must end with the stream's last heartbeat, "
                         f"counting its {frames} frames)")
    if last.stopped:  # a run stopped half-way ends with a last heartbeat too, but says so: not the video's record
        raise InputError(f"{src}: not the record of a finished run (its detector was stopped before the video's end)")
    # Each step of the history was sent as a key-step with its times: an entry cut to its last heartbeat kept only
    # the history, and its alerts came back without a video time.
    indices = {m.index for _, m in messages if isinstance(m, KeyStepEvent)}
    if indices != set(range(len(last.history))):
        raise InputError(f"{src}: not the record of a finished run ({len(indices)} key-steps sent for the "
                         f"{len(last.history)} of its history)")
    return DetectorRecord(video.name, frames, tuple(messages))


def _load_cached(path: Path, video: EvalVideo, warn: Callable[[str], None]) -> DetectorRecord | None:
    """The cached record, or None when there is none or it is damaged (said with ``warn``: the video runs again)."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return load_cache_entry(path, video)
    except InputError as err:
        warn(f"{err}; running {video.name} again")
        return None


def _store(path: Path, record: DetectorRecord, warn: Callable[[str], None]) -> None:
    # A cache that cannot be written costs a recomputation next time, never this run's result: said, not fatal.
    try:
        write_text(path, json.dumps(record_json(record)), "eval cache entry", inside=cache_dir())
    except InputError as err:
        warn(f"{err}; the detector's output on {record.video} is not cached")


@dataclass
class EvalResult:
    """Per-video runs and scores of one ``stream-detect eval``, with the settings they were measured with."""

    runs: list[VideoRun]
    scores: list[VideoScores]
    settings: dict[str, Any]
    cached: int = 0
    disagreements: list[RuleDisagreement] = field(default_factory=list)
    graph: TaskGraph | None = None  # what the alerts were checked against (names in the JSON detail)


def evaluate(config: EvalConfig, progress: bool = True, warn: Callable[[str], None] = print_warning,
             note: Callable[[str], None] = print_note) -> EvalResult:
    """What ``stream-detect eval`` does: check everything, run (or reuse) each video, score, write ``--json``.

    Args:
        config: the run.
        progress: show progress bars on stderr.
        warn: called with warnings (``--ignore-names``; an annotated ``has_errors`` the graph disagrees with, one per
            segment, and a video slower than the detector's rate, one per video, before any video runs).
        note: called with notes (entries of a ``--features`` folder that are not read).

    Returns:
        The runs and their scores.
    """
    if config.json_out is not None:
        features = [f for entry in map(Path, config.features)
                    for f in ([p for p in entry.iterdir() if is_npy_name(p)] if entry.is_dir() else [entry])]
        check_output(config.json_out, "results file", option="--json",
                     inputs=(config.graph, config.detector, config.annotations, config.split, config.backbone,
                             *features))
    if config.annotate_out is not None:
        check_output(config.annotate_out, "annotated videos folder", folder=True, option="--annotate-out")
    if config.preview:
        check_preview()
    if config.plots is not None:
        check_output(config.plots, "timeline plots folder", folder=True, option="--plots")
        pyplot()  # the plot extra is there, before any video runs
    chain = load_chain(config, warn)
    videos = demo_videos(config.names) if config.demo else annotated_videos(config, chain.graph, warn, note)
    feature_identities: dict[str, str] = {}  # each feature file's identity, known to a detector trained on it
    # hashed while the arrays are in memory, and only when the detector records identities to match them with
    hash_features = chain.detector_sources.records("features")
    if config.features:  # every file read and checked (floats, finite, the detector's width) before the first runs
        lengths = []
        trained_scale = chain.checkpoint.training_scale()  # read once, compared with every file
        for video in videos:
            reader = open_feature_file(video.path, chain.checkpoint, config.detector, name=video.named)
            if hash_features:
                feature_identities[video.name] = features_identity(reader.features)
            far = scale_mismatch(reader.features, trained_scale, video.named)
            if far is not None:  # once per recording, here: the runs read the file again
                warn(far)
            lengths.append(len(reader.features) / chain.checkpoint.fps)
            check_annotation_fits(video, lengths[-1], ANNOTATION_SLACK_S + 1 / chain.checkpoint.fps,
                                  config.annotations)
        warn_long_files(videos, lengths, chain.checkpoint.fps, warn)
    else:
        check_videos_open(videos, config, chain.checkpoint.fps, warn)
    check_outputs_spare_inputs(config, videos)
    # Said before the runs: a graph learned from the evaluated videos makes the graph-rule figures meaningless.
    graph_seen = trained_on(chain.graph_sources, "annotation", videos, lambda v: v.annotation_identity)
    lists = chain.graph_sources.names is not None
    disagreements = [d for video in videos for d in rule_disagreements(
        chain.graph, video.name, video.annotated, (video.name in graph_seen) if lists else None)]
    for line in disagreement_lines(disagreements):
        warn(line)

    def read_as(video: EvalVideo) -> str | None:  # what the detector reads of it, as recognition-train identified it
        return feature_identities.get(video.name) if config.features else file_identity(video.path)

    seen_in_training = trained_on(chain.detector_sources, "features" if config.features else "video", videos,
                                  read_as)
    if seen_in_training:
        copies = first_few(seen_names(seen_in_training, "a copy of"), 5)
        warn(f"{config.detector}: the detector was trained on {len(seen_in_training)} of these videos ({copies}): "
             "their figures say how well it learned them, not how well it recognises new ones "
             + (f"(--split {config.split} is not the split it was trained with: give that one, whose test videos it "
                "never saw)" if config.split else "(--split or --videos-list picks held-out videos)"))
    if graph_seen:
        alike = first_few(seen_names(graph_seen, "annotated exactly as"), 5)
        warn(f"{config.graph}: the task graph was learned from {len(graph_seen)} of these videos ({alike}): an order "
             "it learned from them is never a mistake under it, so their figures are optimistic (tgml train "
             "--exclude-videos leaves the judged videos out)")
    runs: list[VideoRun] = []
    cached = 0
    shortest = chain.segmenter.shortest_step(chain.checkpoint.class_step_ids)  # the chain's, the same for every video
    bars = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), disable=not progress)
    with bars:
        task = bars.add_task("videos", total=len(videos))
        frames = bars.add_task("frames", total=None, visible=False)  # shown once a video runs (not all cached)
        for video in videos:
            path = _cache_file(video, cache_key(video, config, chain))
            # An annotated video is drawn while the video runs: that needs the run, not its cached record.
            drawn = config.annotate_out is not None or config.preview
            record = _load_cached(path, video, warn) if config.use_cache and not drawn else None
            if record is None:
                bars.update(frames, description=f"frames of {video.name}", completed=0, visible=True)
                record = record_video(video, chain, config, lambda: bars.advance(frames),
                                      lambda length: bars.update(frames, total=length))
                _store(path, record, warn)
            else:
                cached += 1
            runs.append(check_record(record, video, chain.graph, config.checking, shortest))
            bars.advance(task)
    settings = {
        "graph": config.graph,
        "detector": config.detector,
        "alert_on": config.alert_on,
        "once": config.once,
        "checker": config.checking.in_effect(),
        "segmenter": asdict(chain.segmenter),
        "videos": [v.name for v in videos],
    }
    result = EvalResult(runs, [score_video(r, chain.graph) for r in runs], settings, cached, disagreements,
                        chain.graph)
    if config.json_out is not None:
        write_text(config.json_out, json.dumps(result_json(result), indent=1) + "\n", "results file")
    if config.plots is not None:
        Path(config.plots).mkdir(exist_ok=True)  # checked up front: only its parent must exist
        draw_timelines(runs, chain.graph, config.plots)
    return result


def result_json(result: EvalResult) -> dict[str, Any]:
    """The figures of a run as JSON: settings, one entry per video (with its rule disagreements), the total."""
    videos = []
    for score, run in zip(result.scores, result.runs, strict=True):
        disagreements = [asdict(d) for d in result.disagreements if d.video == score.video]
        detail = video_detail(run, result.graph) if result.graph is not None else {}
        videos.append(scores_json(score) | {"rule_disagreements": disagreements} | detail)
    return {"settings": result.settings, "videos": videos, "total": scores_json(total(result.scores))}


def _check_unique(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(f"--videos-list: {name!r} is named twice")
        seen.add(name)

