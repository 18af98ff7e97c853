"""What a detector loads and checks before it reads a frame: the graph, the detector checkpoint and the feature
extractor it names, checked against each other (`detector_for_graph`, `check_measured_rates`), the
segmenter settings a stream runs with, the stream ids, and every video opened (`open_streams`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import torch

from graphs.checker_settings import CHECKERS, checker_entry
from graphs.common.errors import InputError, print_warning
from graphs.common.safe_text import first_few
from graphs.task_graph import TaskGraph, load_graph
from recognition.checkpoint import DetectorCheckpoint, load_detector
from recognition.evidence import DEFAULT_FALSE_RATE, DEFAULT_MISS_RATE, EvidenceModel, EvidenceReporter
from recognition.model import MiniROAD, scale_mismatch
from recognition.segmenter import SegmenterConfig, SegmenterOverrides
from streaming.alert_modes import DEFAULT_ONSET_FRAMES
from streaming.demo.paths import default_demo_paths, is_demo_video, resolve_video
from streaming.detector.batching import BatchedExtractor
from streaming.detector.config import StreamSource
from streaming.devices import resolve_device
from streaming.extractors import FeatureExtractor, make_extractor
from streaming.feature_files import FeatureFileReader, is_feature_file, load_detector_for_features
from streaming.messages import MAX_STREAM_ID, STREAM_ID_RULE, is_stream_id
from streaming.readers import VideoReader, frames_read_again, open_reader, parse_source, source_identity


def detector_for_graph(
    checkpoint: DetectorCheckpoint, graph: TaskGraph, detector: str, graph_path: str, ignore_names: bool = False
) -> tuple[DetectorCheckpoint, list[str]]:
    """The detector as the graph numbers its key-steps, refused when it does not speak of them: the one place a
    detector is fitted to a graph, before its step ids reach a segmenter, a message, a checker or a score.

    An annotation table numbers its steps in sorted name order, a JSON file as its taxonomy does: a graph learned from
    one and a detector trained on the other name the same steps under other numbers. Such a detector's classes are
    matched to the graph's steps by name (`graphs.task_graph.TaskGraph.ids_by_name`, as ``stream-detect eval``
    matches an annotation file's) and renumbered (`recognition.checkpoint.DetectorCheckpoint.renumbered`), said in one
    line, unless the two record different scenarios. Two of its classes of one name cannot be matched: refused.

    Then the step ids must be exactly the graph's (the checker refuses any other id, so nothing overrides that), each
    step's name the graph's, and the scenarios equal when both record one (checkpoints written before they recorded
    it have none): a graph whose ``boil_water`` became ``cut_bread`` would otherwise run with the detector's idea of
    step 2 and alert in the graph's words.

    Args:
        checkpoint: the detector's description.
        graph: the task graph.
        detector: detector path (named in the lines).
        graph_path: graph path (named in the lines).
        ignore_names: run despite differing names or scenarios (``--ignore-names``); they come back as a warning.

    Returns:
        ``(the detector numbered as the graph, the warnings to show)``: the renumbering, the differences
        ``ignore_names`` let through; the same checkpoint and no warning when everything agrees.

    Raises:
        InputError: the step ids differ, a step name is two classes' (when matching by name), or (without
            ``ignore_names``) a name or the scenario differs, listing every differing step in one line.
    """
    named = {s: n for s, n in zip(checkpoint.class_step_ids, checkpoint.class_names, strict=True) if s is not None}
    graph_steps = dict(zip(graph.step_ids, graph.step_names, strict=True))
    lines = []
    other = checkpoint.scenario and graph.scenario and checkpoint.scenario != graph.scenario
    # Steps of one name in two procedures are not one step: such a pair is refused below, as any other procedure's.
    if named != graph_steps and set(named.values()) == set(graph.step_names) and not other:
        matched = graph.ids_by_name(named)
        if matched is None:  # the graph's names are its own (`TaskGraph`): one of the detector's names is two classes'
            name = next(n for n in named.values() if list(named.values()).count(n) > 1)
            twice = " and ".join(str(s) for s, n in named.items() if n == name)
            raise InputError(f"{detector_named(detector)} and --graph {graph_path} number the same steps two ways, and "
                             f"the detector's steps {twice} are both named {name!r}: its classes cannot be matched "
                             "to the graph's steps by name (learn the graph and train the detector from the same "
                             "annotation file)")
        moved = [f"{name!r} {step} -> {matched[step]}" for step, name in named.items() if matched[step] != step]
        lines.append(f"{detector_named(detector)} and --graph {graph_path} number the same steps two ways (an "
                     "annotation table numbers its steps in sorted name order, a JSON file as its taxonomy does): the "
                     f"detector's classes are matched to the graph's steps by name ({first_few(moved, 3)}), and every "
                     "step id is the graph's")
        checkpoint = checkpoint.renumbered(matched)
    return checkpoint, lines + _check_same_steps(checkpoint, graph, detector, graph_path, ignore_names)


def _check_same_steps(
    checkpoint: DetectorCheckpoint, graph: TaskGraph, detector: str, graph_path: str, ignore_names: bool
) -> list[str]:
    """`detector_for_graph`'s refusals of a detector numbered as the graph where the names allow: its warnings."""
    classes = {s for s in checkpoint.class_step_ids if s is not None}
    steps = set(graph.step_ids)
    if classes != steps:
        extra, missing = sorted(classes - steps), sorted(steps - classes)
        parts = []
        if extra:
            parts.append(f"classes {extra} are not key-steps of {graph_path}")
        if missing:
            parts.append(f"key-steps {missing} of {graph_path} are not among its classes")
        pairs = zip(checkpoint.class_step_ids, checkpoint.class_names, strict=True)
        known = [(s, n) for s, n in pairs if s is not None]  # the background class has no step
        graph_steps = list(zip(graph.step_ids, graph.step_names, strict=True))
        raise InputError(f"{detector_named(detector)} and --graph {graph_path} are not for the same procedure: "
                         + "; ".join(parts) + f" (the detector: {procedure_summary(checkpoint.scenario, known)}; "
                         f"the graph: {procedure_summary(graph.scenario, graph_steps)})")
    differences = name_differences(checkpoint, graph)
    if not differences:
        return []
    listed = "; ".join(differences)
    named = [n for s, n in zip(checkpoint.class_step_ids, checkpoint.class_names, strict=True) if s is not None]
    if sorted(named) == sorted(graph.step_names) and not ignore_names:  # and another scenario: not matched by name
        # Not offered --ignore-names: it would alert in the graph's words about the detector's idea of each number.
        raise InputError(f"{detector_named(detector)} and --graph {graph_path} number the same steps two ways: "
                         f"{listed} (an annotation table numbers its steps in sorted name order, a JSON file as its "
                         "taxonomy does: learn the graph and train the detector from the same annotation file)")
    if not ignore_names:
        raise InputError(f"{detector_named(detector)} and --graph {graph_path} name different steps: {listed} "
                         "(retrain the detector on this procedure, or run anyway with --ignore-names)")
    return [f"--ignore-names: {detector_named(detector)} and --graph {graph_path} name different steps ({listed}); "
            "alerts use the graph's names"]


def procedure_summary(scenario: str | None, steps: Iterable[tuple[int, str]], shown: int = 3) -> str:
    """A procedure in a few words for an error line: its scenario and its first steps.

    Args:
        scenario: the scenario recorded in the file (None: none recorded).
        steps: ``(step id, name)`` pairs in file order.
        shown: how many steps to name.

    Returns:
        Text like ``"scenario 'demo-tea', steps 1 fill_kettle, 2 boil_water, 3 get_cup, ... (6 in all)"``.
    """
    steps = list(steps)
    named = ", ".join(f"{step} {name}" for step, name in steps[:shown])
    more = f", ... ({len(steps)} in all)" if len(steps) > shown else ""
    where = f"scenario {scenario!r}" if scenario else "no scenario recorded"
    return f"{where}, steps {named}{more}"


def name_differences(checkpoint: DetectorCheckpoint, graph: TaskGraph) -> list[str]:
    """How a detector and a graph with the same step ids disagree: the scenario, then each step whose name differs.

    Args:
        checkpoint: the detector's description (its class names, its scenario if recorded).
        graph: the task graph.

    Returns:
        One phrase per difference, in graph order (``"step 2 is 'boil_water' in the detector, 'cut_bread' in the
        graph"``); empty when they agree.
    """
    found = []
    if checkpoint.scenario and graph.scenario and checkpoint.scenario != graph.scenario:
        found.append(f"scenario {checkpoint.scenario!r} in the detector, {graph.scenario!r} in the graph")
    named = {s: n for s, n in zip(checkpoint.class_step_ids, checkpoint.class_names, strict=True) if s is not None}
    for step, name in zip(graph.step_ids, graph.step_names, strict=True):
        if named[step] != name:
            found.append(f"step {step} is {named[step]!r} in the detector, {name!r} in the graph")
    return found


def evidence_reporter(
    checkpoint: DetectorCheckpoint, segmenter: SegmenterConfig, default_rates: bool
) -> EvidenceReporter | None:
    """What a stream of this detector reports about its evidence (None: nothing, the checkpoint measured no rates).

    Args:
        checkpoint: the detector (its ``evidence``, measured by ``recognition-train``).
        segmenter: the stream's segmenter settings (the default calibration's window is its ``min_duration``).
        default_rates: without measured rates, use the default ones (``--default-rates``).
    """
    model = checkpoint.evidence
    if model is None and default_rates:
        steps = [s for s in checkpoint.class_step_ids if s is not None]
        model = EvidenceModel.default(steps, segmenter.min_duration)
    return None if model is None else EvidenceReporter(model, checkpoint.class_step_ids, checkpoint.fps)


def check_measured_rates(checkpoint: DetectorCheckpoint, detector: str, checker: str, default_rates: bool) -> None:
    """Refuse to run a checker that weighs the detector's evidence (the probabilistic one: its entry of
    `graphs.checker_settings.CHECKERS` says so) on a detector whose miss and false-detection rates were never measured,
    unless the user accepts the defaults (``--default-rates``).

    Raises:
        InputError: one line naming the file, the defaults that ``--default-rates`` applies, and the other ways out.
    """
    refuse_unused_default_rates(checkpoint, detector, default_rates)
    if not checker_entry(checker).weighs_evidence or default_rates or checkpoint.evidence is not None:
        return
    others = " or ".join(f"--checker {e.name}" for e in CHECKERS.values() if not e.weighs_evidence)
    raise InputError(
        f"{detector}: holds no measured miss and false-detection rates, which the {checker} checker needs "
        f"(retrain it with recognition-train, which measures them on a validation split); or run with "
        f"{others}, or with --default-rates to assume a miss rate of {DEFAULT_MISS_RATE:.0%} and a "
        f"false-detection rate of {DEFAULT_FALSE_RATE:.0%} for every step"
    )


def refuse_unused_default_rates(checkpoint: DetectorCheckpoint, detector: str | Path, default_rates: bool) -> None:
    """Refuse ``--default-rates`` for a detector that holds measured rates: `evidence_reporter` uses the measured
    ones and the option would change nothing, so a run that ends well would leave the user believing the defaults
    were weighed (the rule of `streaming.stream_detect_cli._refuse_idle_options`, here because the rates are known
    only once the checkpoint is read: they are a field of the one pickled dictionary, beside the weights).

    Raises:
        InputError: one line naming the option and the detector.
    """
    if default_rates and checkpoint.evidence is not None:
        raise InputError(f"--default-rates: {detector_named(detector, option=False)} holds measured miss and "
                         "false-detection rates, and those are used; the option stands in for a detector without "
                         "them (leave it out)")


def detector_named(detector: str | Path, option: bool = True) -> str:
    """How a message names a detector: ``--detector PATH``, or "the bundled demo detector" for the one ``--video
    demo`` and ``eval --demo`` take when ``--detector`` is not given (naming an option the user never gave, with a
    path inside the installed package, sent them looking for it on their command line).

    Args:
        detector: the checkpoint's path.
        option: name the option before a path (``--detector det.pt``); False: the path alone.
    """
    if Path(detector).resolve() == default_demo_paths()[1].resolve():
        return "the bundled demo detector"
    return f"--detector {detector}" if option else str(detector)


def segmenter_config_of(checkpoint: DetectorCheckpoint) -> SegmenterConfig:
    """The segmenter settings a checkpoint asks for (``info["segmenter"]``), at its fps; defaults otherwise.

    Args:
        checkpoint: the detector's description (its settings were checked when it was read, naming the file).

    Returns:
        The validated segmenter config.
    """
    return checkpoint.segmenter_config()


def live_segmenter_config(
    checkpoint: DetectorCheckpoint, overrides: SegmenterOverrides, alert_on: str = "end"
) -> SegmenterConfig:
    """The segmenter settings a stream runs with: the checkpoint's, changed by the command line.

    With ``alert_on="onset"`` a key-step must be announced, so a config without ``onset_frames`` gets
    `DEFAULT_ONSET_FRAMES`; with ``"end"`` nothing is announced (``onset_frames`` 0).

    Args:
        checkpoint: the detector's description.
        overrides: ``--threshold``, ``--min-frames``, ``--onset-frames``.
        alert_on: ``"end"`` or ``"onset"``.

    Returns:
        The validated settings.
    """
    config = overrides.apply(segmenter_config_of(checkpoint))
    if alert_on == "onset" and config.onset_frames == 0:
        return replace(config, onset_frames=DEFAULT_ONSET_FRAMES)
    if alert_on == "end":
        return replace(config, onset_frames=0)
    return config


def load_detector_for_stream(
    detector_path: str | Path, backbone: str | Path | None, threads: int = 1, device: str = "auto"
) -> tuple[MiniROAD, DetectorCheckpoint, FeatureExtractor]:
    """Load a detector checkpoint and the feature extractor it names, checked against each other.

    Args:
        detector_path: checkpoint file.
        backbone: TorchScript backbone file (for checkpoints trained on TorchScript features).
        threads: torch threads.
        device: ``"auto"`` (CUDA when torch sees one), ``"cpu"`` or ``"cuda"``, for the detector and the extractor.

    Returns:
        ``(model, checkpoint, extractor)``.
    """
    torch.set_num_threads(threads)
    model, checkpoint = load_detector(detector_path, resolve_device(device))
    extractor = make_extractor(checkpoint.feature_extractor, backbone, device, source=detector_named(detector_path))
    checkpoint.check_features(extractor.dim, source=detector_named(detector_path))
    return model, checkpoint, extractor


@dataclass
class OpenedStreams:
    """Everything a detector needs for its streams, loaded once, checked against each other, every video open.

    Attributes:
        graph: the task graph.
        model: the MiniROAD detector (eval mode).
        checkpoint: its description.
        extractor: the feature extractor the checkpoint names.
        readers: the open videos, one per source, delivering frames at the detector's rate.
    """

    graph: TaskGraph
    model: MiniROAD
    checkpoint: DetectorCheckpoint
    extractor: FeatureExtractor
    readers: list[VideoReader]


@dataclass
class OpenedStream:
    """Everything one detector stream needs (`OpenedStreams` of one source).

    Attributes:
        graph: the task graph.
        model: the MiniROAD detector (eval mode).
        checkpoint: its description.
        extractor: the feature extractor the checkpoint names.
        reader: the open video, delivering frames at the detector's rate.
    """

    graph: TaskGraph
    model: MiniROAD
    checkpoint: DetectorCheckpoint
    extractor: FeatureExtractor
    reader: VideoReader


NOT_IN_A_STREAM_ID: Final = re.compile(r"[^A-Za-z0-9_.:\-]")  # what `STREAM_ID_RULE` leaves out
UNNAMED_DEFAULTS: Final = "cam0, cam1, ..."  # the streams of sources that name none: cameras, URLs, videos, the demo


def file_stream_ids(paths: Sequence[str]) -> tuple[str, ...]:
    """The stream ids of feature files named by nothing else: each file's name without ``.npy`` (``run1.npy``:
    ``run1``), so that the view, the dashboard and the checker's log name the recording, not its place on the command
    line.

    A character a stream id cannot hold (`STREAM_ID_RULE`: a space, an accented letter) becomes ``_``, and a name too
    long is cut to `MAX_STREAM_ID` characters. Two files of one name (``a/run1.npy``, ``b/run1.npy``) keep it for
    the first and number the others in command-line order: ``run1``, ``run1-2``, ``run1-3``, a number another file's
    own name does not already take.

    Args:
        paths: the feature files, in command-line order.

    Returns:
        One stream id per file, all different.
    """
    names = [NOT_IN_A_STREAM_ID.sub("_", Path(path).stem)[:MAX_STREAM_ID] or "_" for path in paths]
    taken = set(names)  # a file's own name is never given to another file as a numbered copy
    ids: list[str] = []
    for name in names:
        if name not in ids:
            ids.append(name)
            continue
        copy = 2
        while True:
            suffix = f"-{copy}"
            candidate = name[: MAX_STREAM_ID - len(suffix)] + suffix
            if candidate not in taken and candidate not in ids:
                break
            copy += 1
        ids.append(candidate)
    return tuple(ids)


def default_stream_ids(videos: Sequence[str]) -> tuple[str, ...]:
    """The stream ids of sources given no ``--stream-id``: feature files' own names (`file_stream_ids`), any other
    source ``cam0``, ``cam1``, ... in order (a camera, a URL or the demo has no name of its own worth showing)."""
    if videos and all(is_feature_file(video) for video in videos):
        return file_stream_ids(videos)
    return tuple(f"cam{k}" for k in range(len(videos)))


def stream_ids_for(videos: Sequence[str], stream_ids: Sequence[str] = (), option: str = "--video") -> tuple[str, ...]:
    """Each ``--video`` source's stream id, checked: one source per stream, one stream per source.

    Args:
        videos: the ``--video`` values, in order.
        stream_ids: the ``--stream-id`` values, one per video in the same order; none: `default_stream_ids` (each
            feature file's name; ``cam0``, ``cam1``, ... for other sources).
        option: the option that gave the sources, for the messages (``--features`` for feature files).

    Returns:
        The stream ids, in the order of ``videos``.

    Raises:
        InputError: a count that differs from the videos', an id that is not a stream id, two sources with one id,
            or one source given twice (the same file, camera, URL or demo video).
    """
    ids = tuple(stream_ids) or default_stream_ids(videos)
    if len(ids) != len(videos):
        given = "once" if len(ids) == 1 else f"{len(ids)} times"
        unnamed = "each file's name" if option == "--features" else UNNAMED_DEFAULTS
        raise InputError(f"--stream-id is given {given} for {len(videos)} {option} sources: give one per "
                         f"{option}, in the same order (or none: {unnamed})")
    seen_ids: dict[str, str] = {}
    seen_sources: dict[tuple[str, object], str] = {}
    for video, sid in zip(videos, ids, strict=True):
        if not is_stream_id(sid):
            raise InputError(f"--stream-id {sid!r}: use {STREAM_ID_RULE}")
        if sid in seen_ids:
            raise InputError(f"--stream-id {sid} is given to two sources ({option} {seen_ids[sid]} and {option} "
                             f"{video}): each stream needs its own id")
        seen_ids[sid] = video
        key = ("demo", video.partition(":")[2] or "mistake") if is_demo_video(video) else source_identity(video)
        if key in seen_sources:
            raise InputError(f"{option} {video} is given twice (streams {seen_sources[key]} and {sid}): each source "
                             "feeds one stream")
        seen_sources[key] = sid
    return ids


@dataclass
class LoadedParts:
    """What every stream of a detector shares, loaded once and checked against each other (`load_parts`).

    Attributes:
        graph: the task graph (None where the caller has no use for it: the checker holds it).
        model: the MiniROAD detector (eval mode).
        checkpoint: its description.
        extractor: the feature extractor the checkpoint names (batched or not).
    """

    graph: TaskGraph | None
    model: MiniROAD
    checkpoint: DetectorCheckpoint
    extractor: FeatureExtractor | BatchedExtractor


def load_parts(source: StreamSource, threads: int = 1, warn: Callable[[str], None] = print_warning) -> LoadedParts:
    """Load the graph and the detector a source names, and check them against each other.

    Args:
        source: names the graph, detector, backbone and device.
        threads: torch threads of the detector.
        warn: called with each warning (names that differ, let through by ``ignore_names``).

    Returns:
        The parts (with the graph).
    """
    graph = load_graph(source.graph)
    if is_feature_file(source.video):  # a recording's own features: they go straight into the detector
        model, checkpoint, extractor = load_detector_for_features(source.detector, threads, source.device)
    else:
        model, checkpoint, extractor = load_detector_for_stream(source.detector, source.backbone, threads,
                                                                source.device)
    checkpoint, lines = detector_for_graph(checkpoint, graph, source.detector, source.graph, source.ignore_names)
    for line in lines:
        warn(line)
    return LoadedParts(graph, model, checkpoint, extractor)


def open_videos(sources: Sequence[StreamSource], checkpoint: DetectorCheckpoint,
                warn: Callable[[str], None] = print_warning) -> list[VideoReader]:
    """Open every source's video at the detector's rate; if one cannot be opened, those opened before it are closed.

    A camera or stream that does not open stops the run only when it is the only source: among several it must not
    stop the cameras that work. Its reader then retries it as a source lost mid-run is retried (a ``warning:`` line
    now, the stream's ``error`` once the tries are spent, `streaming.readers.LiveReader`), and every live source is
    opened on its reader's own thread, so that none waits for another's open timeout. Files, feature files and
    values that can name no source are refused as ever, and before any live source starts to open: a typo stops
    the run at once.

    A feature file far beyond the scale of the detector's training features
    (`recognition.checkpoint.DetectorCheckpoint.training_scale`; an older checkpoint records none and nothing is
    compared) is warned of as it opens, naming its first vector past the rule (`recognition.model.scale_mismatch`):
    once per file, before the stream starts.

    Args:
        sources: the streams' videos.
        checkpoint: the detector's checkpoint: its rate and the scale of its training features.
        warn: where the readers' warnings go as they read (`streaming.readers.VideoReader.warn`): a service's log.

    Returns:
        The readers (the caller's to close).
    """
    fps, training_scale = checkpoint.fps, checkpoint.training_scale()
    several = len(sources) > 1
    opened: dict[int, VideoReader] = {}
    try:
        kinds = {is_feature_file(source.video) for source in sources}
        if len(kinds) > 1:
            raise InputError("--features files and --video sources cannot share one detector: run them apart")
        reads_features = kinds == {True}
        videos = [source.video if reads_features else resolve_video(source.video) for source in sources]
        live = [not reads_features and parse_source(video).kind != "file" for video in videos]
        for k in sorted(range(len(sources)), key=lambda k: live[k]):  # files first: a typo waits for no camera
            source, config = sources[k], replace(sources[k].reader, fps=fps)
            if reads_features:
                features = FeatureFileReader(source.video, config)
                opened[k] = features
                far = scale_mismatch(features.features, training_scale, features.label)
                if far is not None:
                    warn(far)
            else:
                opened[k] = open_reader(videos[k], config, warn, retry_first_open=several)
            slow = frames_read_again(source.video, opened[k].source_fps, fps)
            if slow is not None:
                warn(slow)
    except BaseException:
        for reader in opened.values():
            reader.close()
        raise
    return [opened[k] for k in range(len(sources))]


def open_streams(
    sources: Sequence[StreamSource], threads: int = 1, warn: Callable[[str], None] = print_warning
) -> OpenedStreams:
    """Load the graph and the detector once, check them against each other, then open every video.

    Every mistake in what the user named (a graph that is not a DAG, a detector whose classes or step names are not
    the graph's, an unopenable video) is refused here, before any frame is read.

    Args:
        sources: the streams' videos; the graph, detector, backbone and device are the first source's (the command
            line gives them once for all).
        threads: torch threads of the detector.
        warn: called with each warning (names that differ, let through by ``ignore_names``; the readers' own).

    Returns:
        The opened streams (their readers are the caller's to close).
    """
    parts = load_parts(sources[0], threads, warn)
    assert parts.graph is not None and isinstance(parts.extractor, FeatureExtractor)
    readers = open_videos(sources, parts.checkpoint, warn)
    return OpenedStreams(parts.graph, parts.model, parts.checkpoint, parts.extractor, readers)


def open_stream(source: StreamSource, threads: int = 1, warn: Callable[[str], None] = print_warning) -> OpenedStream:
    """`open_streams` of one source.

    Returns:
        The opened stream (its reader is the caller's to close).
    """
    opened = open_streams([source], threads, warn)
    return OpenedStream(opened.graph, opened.model, opened.checkpoint, opened.extractor, opened.readers[0])
