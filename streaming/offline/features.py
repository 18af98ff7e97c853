"""From a user's annotated videos to a MiniROAD feature folder: what ``recognition-features`` runs.

The annotation file is the one ``tgml train`` reads (read and checked by `graphs.annotations.load_annotations`, so
both commands accept and refuse the same files); ``start_time`` / ``end_time`` of each segment give the per-frame
targets. Each annotated video of the scenario is looked up in the videos folder by its name (``<name>.mp4``,
``.avi``, ``.mkv``, ``.mov`` or ``.webm``) and read with the live pipeline's own readers at the feature rate, so
that a file gives the same frames, hence the same features, here and in ``stream-detect``.

Everything the user named is checked before the first frame is decoded (`plan_extraction`): the output folder,
the annotations (scenario, key-step ids, the segment check every command shares), that every video exists and
opens and is as long as its segments, and the split. Then each video's features and targets are written atomically
(with ``augment_copies`` the features of that many augmented copies of each training video too,
`streaming.offline.frame_augment`),
and a manifest (``extraction.json``) records the settings each video was extracted with, so a run that is interrupted,
or refused on a damaged video, is resumed by running the same command again: finished videos are skipped, unless a
file written for them is damaged or holds NaN or infinity (`recognition.feature_folders.stored_features_fault`).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from graphs.annotations import Video, choose_scenario, load_annotations, time_order
from graphs.common.errors import InputError, print_note, print_warning
from graphs.common.file_kinds import VIDEO_SUFFIXES
from graphs.common.files import (
    FILE_NAME_RULE,
    check_output,
    is_file_name,
    not_a_file,
    not_a_folder,
    read_json,
    replaced_input,
    write_text,
)
from graphs.common.options import check_fps, check_seed, check_threads
from graphs.common.safe_text import count_of, first_few, printable, quoted, unknown_name
from graphs.training_sources import file_identity
from recognition.feature_folders import (
    MANIFEST,
    MAX_AUGMENT_COPIES,
    SPLIT_FILE,
    SplitFile,
    annotated_elsewhere,
    check_feature_folder_out,
    check_segments_fit,
    check_test_split_options,
    choose_test_videos,
    copy_file_name,
    earlier_rate,
    step_targets,
    stored_features_fault,
    stored_split,
    stored_width,
    test_split_line,
    write_features,
    write_split,
    write_targets,
)
from recognition.segment_metrics import TimedSegment as Segment  # a labelled key-step: id and time span
from streaming.detector.batching import BatchedExtractor, Buckets, default_batch_sizes
from streaming.devices import resolve_device
from streaming.efficientnet_lite import NAME as EFFICIENTNET_NAME
from streaming.extractors import EXTRACTOR_NAMES, FeatureExtractor, make_extractor
from streaming.offline.frame_augment import FrameAugmentation, augment_frames, draw_augmentation
from streaming.readers import (
    READER_NAMES,
    ReaderConfig,
    VideoReader,
    container_header,
    early_end,
    length_is_estimate,
    named_error,
    open_named,
    usable_header,
)


# Every spelling of each ending, as written first: a case-insensitive file system (macOS's) finds run1.Mp4 as
# run1.mp4, and Linux found only .mp4 and .MP4, so the same folder held the video on one and no video on the other
# (said "no video file", and named by no warning: its name without the ending is an annotated one).
def _spellings(ending: str) -> list[str]:
    """Every lower/upper-case spelling of a file ending, the one given first."""
    every = {"".join(chars) for chars in itertools.product(*({c.lower(), c.upper()} for c in ending))}
    return [ending, *sorted(every - {ending})]


SUFFIX_SPELLINGS: Final = tuple(spelling for suffix in VIDEO_SUFFIXES for spelling in _spellings(suffix))
MANIFEST_VERSION: Final = 1
END_SLACK_S: Final = 0.1  # a segment may end this long after the video (annotation times are rounded)
# Two copies raised the validation mAP on the hard footage from 85.6 to 89.0 (docs/recognition.md), for three times
# the extraction time of the training videos.
DEFAULT_COPIES: Final = 2


DEFAULT_FPS: Final = 5.0  # feature frames per second of a new folder (the detector's rate, live as well)


@dataclass(frozen=True)
class FeatureExtractionConfig:
    """One ``recognition-features`` run.

    Args:
        videos: folder holding the videos, named as in the annotation file.
        annotations: annotation JSON (the ``tgml train`` format).
        out: the feature folder to write (created; an existing one is resumed).
        extractor: feature extractor name (`streaming.extractors.EXTRACTOR_NAMES`).
        fps: feature frames per second (the detector's rate, live as well).
        scenario: which scenario of the file; None when the file holds exactly one.
        test_fraction: share of the videos held out for testing, when ``test_videos`` is empty; None: an existing
            folder keeps its split (`stored_split`), a new one holds out
            `recognition.feature_folders.DEFAULT_TEST_FRACTION`.
        test_videos: the test videos by name (overrides ``test_fraction``).
        seed: draws the ``test_fraction`` videos.
        threads: batches computed at once, one CPU core each (None: one per core). Independent batches keep
            busy cores busy; one batch split across cores makes every core wait for the slowest, which on a
            machine shared with other work is slower than one core.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"`` for the extractor.
        reader: file reader, as for ``stream-detect``: ``"auto"``, ``"decord"`` or ``"opencv"``.
        batch: frames per extractor call (a worker's unit of work).
        augment_copies: augmented copies of each training video to extract besides the video itself (0: none).
        augment_flips: whether an augmented copy may be mirrored left to right.
    """

    videos: str
    annotations: str
    out: str
    extractor: str = EFFICIENTNET_NAME
    fps: float = DEFAULT_FPS
    scenario: str | None = None
    test_fraction: float | None = None
    test_videos: tuple[str, ...] = ()
    seed: int = 0
    threads: int | None = None
    device: str = "auto"
    reader: str = "auto"
    batch: int = 8
    augment_copies: int = DEFAULT_COPIES
    augment_flips: bool = False

    def __post_init__(self) -> None:
        copies = self.augment_copies
        if isinstance(copies, bool) or not isinstance(copies, int) or not 0 <= copies <= MAX_AUGMENT_COPIES:
            raise InputError(f"--augment-copies {copies!r}: must be an integer in 0..{MAX_AUGMENT_COPIES}")
        if self.extractor not in EXTRACTOR_NAMES:
            raise InputError(unknown_name("--extractor", self.extractor, EXTRACTOR_NAMES, None))
        check_fps(self.fps)
        check_test_split_options(self.test_fraction, self.test_videos, "video")
        if self.threads is not None:
            check_threads(self.threads)
        resolve_device(self.device)  # --device cuda without a GPU: refused before any work, as stream-detect does
        if self.reader not in READER_NAMES:
            raise InputError(unknown_name("--reader", self.reader, READER_NAMES, None))
        check_seed(self.seed)
        if self.batch < 1:
            raise InputError(f"FeatureExtractionConfig.batch = {self.batch}: must be >= 1")

    @property
    def rgb(self) -> str:
        """The feature folder's RGB sub-folder, ``rgb_<extractor>``."""
        return f"rgb_{self.extractor}"


@dataclass(frozen=True)
class PlannedVideo:
    """An annotated video found in the videos folder, its segments in time order, and its announced length."""

    name: str
    path: Path
    segments: tuple[Segment, ...]
    duration: float | None
    source_fps: float | None = None


@dataclass(frozen=True)
class ExtractionPlan:
    """Everything a run will do, checked before the first frame is decoded.

    Attributes:
        scenario: the scenario extracted.
        step_ids: its key-steps in taxonomy order (detector class ``k + 1`` is ``step_ids[k]``).
        step_names: their names.
        videos: the annotated videos of the scenario, in annotation-file order.
        test: names of the test videos (the others train).
        unannotated: video files in the videos folder that no annotated video names (of any scenario): not used.
    """

    scenario: str
    step_ids: tuple[int, ...]
    step_names: tuple[str, ...]
    videos: tuple[PlannedVideo, ...]
    test: frozenset[str]
    unannotated: tuple[str, ...] = ()

    def repeated_frames_note(self, fps: float) -> str | None:
        """The note on videos whose own frame rate is below ``fps``: the readers deliver some of their frames more
        than once to reach it, so the features hold copies of the same vectors, extracted at that many times the cost
        (a ``--fps 50`` on 10 fps videos: every frame five times, without a word). Not refused: a folder of mixed
        rates needs one feature rate, and a detector may well be wanted at a rate some videos lack.

        Returns:
            One line without its ``note:``; None when every video's rate reaches ``fps`` (or is unknown).
        """
        slow = sorted((v.source_fps, v.name) for v in self.videos if v.source_fps is not None
                      and v.source_fps < fps * (1 - 1e-6))  # a 29.97 fps video at --fps 29.97 is not "below"
        if not slow:
            return None
        lowest = slow[0][0]
        rates = f"{lowest:g} fps" if slow[-1][0] == lowest else f"{lowest:g} to {slow[-1][0]:g} fps"
        return (f"--fps {fps:g} is above the frame rate of {count_of(len(slow), 'video')} ({rates}: "
                f"{first_few([name for _, name in slow], 3)}): each of their frames is extracted up to "
                f"{math.ceil(fps / lowest - 1e-6)} times over (copies of the same features, at as many times the "
                f"cost); --fps {lowest:g} or less reads each frame once")

    @property
    def train_names(self) -> list[str]:
        """Training video names, in file order."""
        return [v.name for v in self.videos if v.name not in self.test]

    @property
    def test_names(self) -> list[str]:
        """Test video names, in file order."""
        return [v.name for v in self.videos if v.name in self.test]


@dataclass
class ExtractionReport:
    """What a run did: videos extracted now and skipped (already there), frames computed, seconds spent.

    Attributes:
        folder: the feature folder.
        extracted: videos extracted by this run.
        skipped: videos whose features were there already.
        repaired: videos extracted again because the files an earlier run wrote for them could not be kept, and why
            (`recognition.feature_folders.stored_features_fault`: non-finite values, cut short...).
        frames: frames of the extracted videos themselves.
        copy_frames: frames of their augmented copies (each copy is a full extraction of its video's frames).
        seconds: extraction time (decoding and features) of the extracted videos.
        test: the test videos of the folder's split.
    """

    folder: Path
    test: tuple[str, ...] = ()
    extracted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    repaired: dict[str, str] = field(default_factory=dict)
    frames: int = 0
    copy_frames: int = 0
    seconds: float = 0.0

    @property
    def all_frames(self) -> int:
        """Frames turned into features: the videos' and their augmented copies'."""
        return self.frames + self.copy_frames

    @property
    def frames_per_second(self) -> float:
        """Frames turned into features (copies included) per second of the run's extraction time."""
        return self.all_frames / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """The closing lines of ``recognition-features``: videos, frames (copies counted apart) and speed, then the
        test videos (`recognition.feature_folders.test_split_line`)."""
        videos = len(self.extracted) + len(self.skipped)
        copies = (f" of the videos + {self.copy_frames} of their augmented copies = {self.all_frames} frames"
                  if self.copy_frames else "")
        work = f": {self.frames} frames{copies} at {self.frames_per_second:.1f} frames/s" if self.extracted else ""
        lines = [f"{videos} videos in {self.folder} ({len(self.extracted)} extracted, {len(self.skipped)} already "
                 f"there){work}{self._repairs()}"]
        if self.test:
            lines.append(test_split_line(self.test, self.folder))
        return "\n".join(lines)

    def _repairs(self) -> str:
        """What the summary says of the videos extracted again over damaged files, by reason: the user who ran the
        command again to repair a folder sees that it was repaired, and which videos were."""
        by_reason: dict[str, list[str]] = {}
        for video, reason in self.repaired.items():
            by_reason.setdefault(reason, []).append(printable(video))
        return "".join(f"; {len(videos)} re-extracted: {reason} ({first_few(videos, 3)})"
                       for reason, videos in by_reason.items())


def read_segments(video: Video, src: str) -> tuple[Segment, ...]:
    """A video's segments with their times, in time order (`time_order`).

    Args:
        video: the annotated video.
        src: the annotation file, named in errors.

    Returns:
        The segments sorted by start time.
    """
    return tuple(Segment(video.steps[k], start, end) for k, start, end in time_order(video, src))


def video_candidates(folder: Path, name: str) -> list[Path]:
    """What in ``folder`` has an annotated video's name with a video ending in any case (files or not, links even
    broken)."""
    return [
        path
        for suffix in SUFFIX_SPELLINGS
        for path in (folder / f"{name}{suffix}",)
        if path.exists() or path.is_symlink()
    ]


def unclaimed_videos(folder: Path, annotated: Collection[str]) -> str:
    """The end of the error of videos with no file: the folder's video files no annotated video names ("" when none,
    or no ``annotated`` names are given). A video saved under another name than its key was refused naming only the
    key, and the warning naming the file nobody claims never came: the run stopped at the error first."""
    others = unannotated_videos(folder, annotated) if annotated else ()
    shown = first_few([printable(n) for n in others], 3)
    return (f"; {count_of(len(others), 'video file')} of the folder no annotated video names ({shown}): name each "
            "file after its annotation key") if others else ""


def find_video(folder: Path, name: str, annotated: Collection[str] = ()) -> Path:
    """The video file of an annotated video: ``<folder>/<name>`` with a common container ending.

    Args:
        folder: the videos folder.
        name: the annotation file's video key.
        annotated: every video key of the annotation file; when the video is missing, the folder's video files that
            none of them names are listed in the error (`unannotated_videos`).

    Returns:
        The one matching file.

    Raises:
        InputError: the key is not a plain file name (``../elsewhere/v``, ``/abs/v``): it names the files written
            for the video too (features, targets), which must stay inside the output folder. Or no regular file
            has the name: what has it (a folder, a device) is named, else the endings looked for.
    """
    if not is_file_name(name):
        raise InputError(f"annotated video {quoted(name)}: a video key names the video's file and the files written "
                         f"for it, so it must be {FILE_NAME_RULE}")
    named = video_candidates(folder, name)
    # One file under two names is one video: a case-insensitive file system (macOS's, Windows') finds run1.mp4 as
    # run1.MP4 too, and said "several files for video 'run1'" beside a single one.
    files: dict[tuple[int, int], Path] = {}  # (device, inode) -> the first name found for it
    for path in named:
        if path.is_file():
            info = path.stat()
            files.setdefault((info.st_dev, info.st_ino), path)
    found = list(files.values())
    if not found and named:  # something has the video's name: say what it is, not that nothing is there
        raise InputError(f"--videos {folder}: {named[0].name} (annotated video {name!r}): {not_a_file(named[0])}, "
                         "expected a video file")
    if not found:
        tried = ", ".join(f"{name}{s}" for s in VIDEO_SUFFIXES)
        raise InputError(f"--videos {folder}: no video file for annotated video {name!r} (looked for {tried})"
                         f"{unclaimed_videos(folder, annotated)}")
    if len(found) > 1:
        raise InputError(
            f"--videos {folder}: several files for video {name!r} ({', '.join(sorted(p.name for p in found))})"
        )
    return found[0]


def _open(path: Path, config: FeatureExtractionConfig) -> VideoReader:
    """The live pipeline's reader for a file, at the feature rate; its errors name the file, not ``--video``."""
    return open_named(path, ReaderConfig(fps=config.fps, reader=config.reader), str(path))


def plan_extraction(config: FeatureExtractionConfig) -> ExtractionPlan:
    """Check everything the run was given, before any frame is decoded.

    Args:
        config: the run.

    Returns:
        The plan: scenario, classes, videos with their segments, split.
    """
    check_output(config.out, "feature folder", folder=True, inputs=[config.annotations], option="--out")
    check_feature_folder_out(config.out)
    for written in (MANIFEST, SPLIT_FILE):  # the annotation file kept in the folder under a name the run writes
        if replaced_input(Path(config.out) / written, [config.annotations]) is not None:
            raise InputError(f"--annotations {config.annotations}: is the {written} that --out {config.out} gets "
                             "written; keep the annotation file under another name or folder")
    videos_dir = Path(config.videos)
    why = not_a_folder(videos_dir, "the folder of the videos")
    if why is not None:
        raise InputError(f"--videos {videos_dir}: {why}")
    annotations = load_annotations(config.annotations, scenario_read=config.scenario, scenario_required=True,
                                   learns_graph=False)
    scenario = choose_scenario(annotations, config.scenario)
    step_ids, step_names = annotations.steps_of(scenario)
    stored = stored_split(config.out)
    refuse_another_rate(config.out, config.rgb, stored, config.fps)  # before any video is opened
    planned = []
    for video in annotations.scenario_videos(scenario):
        segments = read_segments(video, annotations.path)
        path = find_video(videos_dir, video.video, annotations.videos)
        with _open(path, config) as reader:
            duration, source_fps = reader.duration, reader.source_fps
        if duration is not None:
            cut = check_not_cut_short(path, duration)
            try:
                check_segments_fit(segments, duration, END_SLACK_S, annotations.path, video.video)
            except InputError as err:  # the labels are blamed unless the container says the video is cut short
                if not cut:
                    raise
                said = str(err).removeprefix(f"{annotations.path}: ")
                raise InputError(f"{cut}, and {said} of {annotations.path}: a copy cut short?") from None
        planned.append(PlannedVideo(video.video, path, segments, duration, source_fps))
    test = choose_test_videos([v.name for v in planned], stored, config.test_videos, config.test_fraction, config.seed,
                              config.annotations,
                              elsewhere=annotated_elsewhere(annotations, scenario, "video", "extracted"))
    return ExtractionPlan(scenario, step_ids, step_names, tuple(planned), test,
                          unannotated_videos(videos_dir, annotations.videos))


def check_not_cut_short(path: Path, duration: float) -> str:
    """Refuse a video whose frames end well before its container's header says (`streaming.readers.early_end`, the
    judgement stream-detect reads the file by): decord counts the frames it finds, so a copy cut short looked
    complete, and its segments past the cut blamed the annotation file.

    Args:
        path: the video file.
        duration: its length as its reader found it, seconds.

    Returns:
        Where the container stores no frame count (Matroska, WebM) an early end is no proof of damage (an audio
        track may run longer): what was found then (``"FILE: its video ends at ..."``), for a segment past the end
        to cite; else "".

    Raises:
        InputError: naming the file as damaged or truncated, as stream-detect and eval do.
    """
    announced, rate = usable_header(*container_header(str(path)))
    if not announced:
        return ""  # a header that does not say: the segments are checked against what was found
    error, warning = early_end(str(path), round(duration * rate), announced, rate, length_is_estimate(path))
    if error:
        raise InputError(named_error(error, str(path), str(path)))
    return f"{path}: its video ends at {duration:.1f} s, before the {announced / rate:.1f} s its container gives" \
        if warning else ""


def refuse_another_rate(folder: str | Path, rgb: str, stored: SplitFile | None, fps: float) -> None:
    """Refuse a ``--fps`` other than the rate a folder was extracted at: the run would replace every feature file
    (hours of extraction, on a large data set) and leave a detector trained on the folder expecting the old rate.
    A mistyped ``--fps`` did that with one warning line.

    Raises:
        InputError: naming the option, the folder's rate and the ways on.
    """
    earlier_rate(folder, rgb, stored, fps, "--fps", "extract")  # another extractor's rgb_* beside: refused there
    earlier = folder_rate(folder, stored)
    if earlier is not None and not math.isclose(earlier, fps, rel_tol=1e-6):  # 2 and 2.0000001 alike
        raise InputError(f"--fps {fps:g}: {folder} was extracted at {earlier:g} frames per second; leave --fps out "
                         f"(or give {earlier:g}) to go on with it, or extract into another --out (remove the folder to "
                         f"extract it again at {fps:g})")


def unannotated_videos(folder: Path, names: Collection[str]) -> tuple[str, ...]:
    """The video files of ``folder`` (a `VIDEO_SUFFIXES` ending, any case) whose name without it is no annotated
    video: a key misspelt in the annotation file looks exactly like a video left out, so the run names them."""
    suffixes = set(VIDEO_SUFFIXES)
    return tuple(sorted(path.name for path in folder.iterdir()
                        if path.suffix.lower() in suffixes and path.stem not in names and path.is_file()))


def _settings(video: PlannedVideo, config: FeatureExtractionConfig, copies: int) -> dict[str, Any]:
    """What a video's features depend on: the source file (as it is now), the extractor, the rate, and the augmented
    copies (named only when there are some, so that folders written before copies existed stay valid)."""
    stat = video.path.stat()
    settings: dict[str, Any] = {
        "source": video.path.name,
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "extractor": config.extractor,
        "fps": float(config.fps),
    }
    if copies:
        settings |= {"augment_copies": copies, "augment_flips": config.augment_flips, "seed": config.seed}
    return settings


def folder_rate(folder: str | Path, stored: SplitFile | None) -> float | None:
    """The rate a feature folder was extracted at: its ``split.json``'s (``stored``, `stored_split`), else the one its
    manifest records (`manifest_rate`); None for a new folder. A run without ``--fps`` goes on at it, and one with
    another is refused (`refuse_another_rate`)."""
    return stored.fps if stored is not None and stored.fps is not None else manifest_rate(Path(folder))


def manifest_rate(folder: Path) -> float | None:
    """The one rate every video of a folder's manifest was extracted at (None: no manifest, or rates that differ): a
    ``split.json`` written by hand or edited may record none."""
    rates = {entry.get("fps") for entry in read_manifest(folder)[0].values()}
    rate = rates.pop() if len(rates) == 1 else None
    return float(rate) if isinstance(rate, int | float) and not isinstance(rate, bool) and rate > 0 else None


def read_manifest(folder: Path) -> tuple[dict[str, dict[str, Any]], str]:
    """The per-video settings of an earlier run into ``folder``, and what is wrong with the file.

    A damaged manifest only costs a re-extraction of the videos it lost, so it is not refused; but the hours that
    costs are said (the second value, for a ``warning:`` line), not spent without a word.

    Args:
        folder: the feature folder.

    Returns:
        ``(video name -> the settings and frame count its features were extracted with, the damage: "" if none)``;
        the videos are those of the entries still readable.
    """
    path = folder / MANIFEST
    if not path.is_file():
        return {}, ""
    again = "the videos it records are extracted again"
    try:
        data = read_json(path, "extraction manifest")
    except InputError as err:
        return {}, f"{err}; {again}"
    if (
        not isinstance(data, dict)
        or data.get("version") != MANIFEST_VERSION
        or not isinstance(data.get("videos"), dict)
    ):
        return {}, (f"{path}: not an extraction manifest of version {MANIFEST_VERSION} (an object with 'version' "
                    f"and 'videos'); {again}")
    videos = {k: v for k, v in data["videos"].items() if isinstance(v, dict)}
    lost = [k for k in data["videos"] if k not in videos]
    if lost:
        return videos, (f"{path}: {count_of(len(lost), 'video')} whose entry is not an object "
                        f"({first_few([printable(k) for k in lost], 3)}); extracted again")
    return videos, ""


def _write_manifest(folder: Path, videos: dict[str, dict[str, Any]]) -> None:
    write_text(folder / MANIFEST, json.dumps({"version": MANIFEST_VERSION, "videos": videos}, indent=1),
               "extraction manifest")


def _already_extracted(
    folder: Path, rgb: str, video: str, entry: dict[str, Any] | None, settings: dict[str, Any], width: int | None
) -> tuple[int, str]:
    """Frames of a video's existing features (and copies) when they were made with ``settings`` and can be kept (0
    when it must be extracted), and why files made with them cannot be (`stored_features_fault`, against the width
    ``width`` of the folder's files; "" otherwise)."""
    frames = entry.get("frames") if entry else None
    if not entry or {k: entry.get(k) for k in settings} != settings or not isinstance(frames, int) or frames <= 0:
        return 0, ""
    names = [f"{video}.npy", *(copy_file_name(video, k) for k in range(1, settings.get("augment_copies", 0) + 1))]
    fault = next(filter(None, (stored_features_fault(folder / rgb / name, frames, width) for name in names)), "")
    return (0, fault) if fault else (frames, "")


def _batches(reader: VideoReader, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The reader's frames in batches: ``(images (B, H, W, 3), times (B,))``."""
    images: list[np.ndarray] = []
    times: list[float] = []
    for frame in reader:
        images.append(frame.image)
        times.append(frame.time)
        if len(images) == size:
            yield np.stack(images), np.array(times)
            images, times = [], []
    if images:
        yield np.stack(images), np.array(times)


def files_extractor(extractor: FeatureExtractor, batch: int) -> FeatureExtractor:
    """The extractor as recorded videos run it: on a GPU, behind the detector's fixed batch sizes (powers of two up to
    ``batch``, `streaming.detector.batching`), all warmed now, so that each video's last, shorter batch is padded to
    a size the GPU has seen instead of costing seconds as a new shape; on a CPU, as it is."""
    device = getattr(extractor, "device", None)
    if getattr(device, "type", "cpu") == "cpu":
        return extractor
    batched = BatchedExtractor(extractor, Buckets(default_batch_sizes(extractor, batch, on_gpu=True)))
    batched.warm()
    return batched


def features_with_copies(
    extractor: FeatureExtractor, images: np.ndarray, augmentations: tuple[FrameAugmentation, ...]
) -> np.ndarray:
    """A batch's features, then those of each augmented copy of it: ``(K + 1, B, D)``."""
    return np.stack([extractor(images), *(extractor(augment_frames(images, aug)) for aug in augmentations)])


def extract_video(
    video: PlannedVideo,
    extractor: FeatureExtractor,
    config: FeatureExtractionConfig,
    pool: ThreadPoolExecutor,
    workers: int,
    advance: Callable[[int], object] | None = None,
    augmentations: tuple[FrameAugmentation, ...] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """Decode one video at the feature rate and compute its features, batches in parallel on ``pool``.

    Decoding goes on in this thread while the pool computes; at most two batches per worker wait, which bounds
    memory whatever the video's length.

    Args:
        video: the planned video.
        extractor: the feature extractor (called from the pool's threads).
        config: rate, reader and batch size.
        pool: the workers.
        workers: how many threads ``pool`` has.
        advance: called with the number of frames after each batch (a progress bar).
        augmentations: the augmented copies to compute too (`streaming.offline.frame_augment`).

    Returns:
        ``(features (K + 1, L, D) float32, times (L,) seconds)``: the video's features, then each copy's.

    Raises:
        InputError: the file cannot be decoded to its end, or yields no frame at this rate.
    """
    feats: list[np.ndarray] = []
    times: list[np.ndarray] = []
    pending: deque[Future[np.ndarray]] = deque()
    limit = 2 * workers

    def collect(until: int) -> None:
        while len(pending) > until:
            feats.append(pending.popleft().result())
            if advance is not None:
                advance(feats[-1].shape[1])

    with _open(video.path, config) as reader:
        for images, stamps in _batches(reader, config.batch):
            pending.append(pool.submit(features_with_copies, extractor, images, augmentations))
            times.append(stamps)
            collect(limit)
        collect(0)
        if reader.error:
            raise InputError(f"{named_error(reader.error, str(video.path), str(video.path))}; the videos extracted "
                             "before it are kept")
    if not feats:
        raise InputError(f"{video.path}: no frame at {config.fps:g} fps (is the video shorter than one frame?)")
    return np.concatenate(feats, axis=1), np.concatenate(times)


def _progress(enabled: bool) -> Progress:
    console = Console(stderr=True)
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
        transient=not console.is_terminal,  # a log gets a line per video instead, not the bars' last state as well
    )


def extract_feature_folder(config: FeatureExtractionConfig, progress: bool = True) -> ExtractionReport:
    """What ``recognition-features`` does: plan and check, then extract every video not already extracted.

    Args:
        config: the run.
        progress: show progress bars (videos, and frames of the current video) on stderr.

    Returns:
        What was extracted and skipped, and the extraction speed.
    """
    plan = plan_extraction(config)
    repeated = plan.repeated_frames_note(config.fps)
    if repeated is not None:
        print_note(repeated)
    if plan.unannotated:
        print_warning(f"--videos {config.videos}: {count_of(len(plan.unannotated), 'video file')} that "
                      f"{config.annotations} does not annotate ({first_few(list(plan.unannotated), 3)}): not used")
    folder = Path(config.out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out {folder}: cannot create the feature folder ({err.strerror or err})") from None
    # Each video file's identity goes with its name into the checkpoints trained on the folder (eval tells a copy of a
    # training video, and new footage under its name, by it): read from each file's ends, milliseconds a video.
    identities = {video.name: file_identity(video.path) for video in plan.videos}
    write_split(folder, plan.train_names, plan.test_names, ["background", *plan.step_names], [None, *plan.step_ids],
                config.fps, config.extractor, plan.scenario, config.augment_copies,
                identities)  # now: an interrupted run keeps it
    manifest, damage = read_manifest(folder)
    if damage:
        print_warning(damage)
    report = ExtractionReport(folder, tuple(plan.test_names))
    width = stored_width(folder / config.rgb)  # before any file is written: the earlier run's
    extractor: FeatureExtractor | None = None  # loaded only when some video needs it
    workers = config.threads or os.cpu_count() or 1
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)  # each worker on its own core (see FeatureExtractionConfig.threads)
    try:
        with _progress(progress) as bar, ThreadPoolExecutor(workers, thread_name_prefix="features") as pool:
            # A log file gets no progress bar: a line per video, so that it is not empty for minutes.
            log = bar.console.print if progress and not bar.console.is_terminal else None
            videos_task = bar.add_task("videos", total=len(plan.videos))
            for number, video in enumerate(plan.videos, start=1):
                copies = 0 if video.name in plan.test else config.augment_copies
                settings = _settings(video, config, copies)
                frames, fault = _already_extracted(folder, config.rgb, video.name, manifest.get(video.name), settings,
                                                   width)
                if frames:
                    features = None
                    times = np.arange(frames) / config.fps  # the file readers' frame times
                    report.skipped.append(video.name)
                    line = f"{frames} frames, already there"
                else:
                    extractor = extractor or files_extractor(make_extractor(config.extractor, device=config.device),
                                                             config.batch)
                    augmentations = tuple(draw_augmentation(config.seed, video.name, k, config.augment_flips)
                                          for k in range(1, copies + 1))
                    started = time.perf_counter()
                    features, times = _extract_with_bar(bar, video, extractor, config, pool, workers, report,
                                                        augmentations)
                    report.extracted.append(video.name)
                    if fault:
                        report.repaired[video.name] = fault
                    seconds = time.perf_counter() - started
                    line = (f"{len(times)} frames{f' + {copies} augmented copies' if copies else ''} in "
                            f"{seconds:.1f} s ({len(times) * (copies + 1) / max(seconds, 1e-9):.1f} frames/s)"
                            f"{f', re-extracted: {fault}' if fault else ''}")
                _write(folder, config, video.name, features, _targets(video, times, plan, config))
                manifest[video.name] = {**settings, "frames": len(times)}
                _write_manifest(folder, manifest)
                bar.advance(videos_task)
                if log is not None:
                    log(f"video {number}/{len(plan.videos)} {printable(video.name)}: {line}", markup=False,
                        highlight=False)
    finally:
        torch.set_num_threads(threads_before)
    return report


def _targets(
    video: PlannedVideo, times: np.ndarray, plan: ExtractionPlan, config: FeatureExtractionConfig
) -> np.ndarray:
    """The video's one-hot targets ``(L, C)`` at its frame times (class ``k + 1`` is ``plan.step_ids[k]``)."""
    if video.duration is None:  # the container did not say how long it is: check against what was read
        check_segments_fit(video.segments, len(times) / config.fps, 1 / config.fps, config.annotations, video.name)
    return step_targets(times, video.segments, plan.step_ids)


def _extract_with_bar(
    bar: Progress,
    video: PlannedVideo,
    extractor: FeatureExtractor,
    config: FeatureExtractionConfig,
    pool: ThreadPoolExecutor,
    workers: int,
    report: ExtractionReport,
    augmentations: tuple[FrameAugmentation, ...],
) -> tuple[np.ndarray, np.ndarray]:
    """`extract_video` with a frames bar for the video, timing the work into ``report``."""
    expected = int(video.duration * config.fps) if video.duration else None
    task: TaskID = bar.add_task(f"  {video.name}", total=expected)
    started = time.perf_counter()
    try:
        features, times = extract_video(video, extractor, config, pool, workers, lambda n: bar.advance(task, n),
                                        augmentations)
    finally:
        bar.remove_task(task)
    report.seconds += time.perf_counter() - started
    report.frames += len(times)
    report.copy_frames += len(times) * len(augmentations)
    return features, times


def _write(
    folder: Path, config: FeatureExtractionConfig, video: str, features: np.ndarray | None, targets: np.ndarray
) -> None:
    """Write a video's features and its copies' (``(K + 1, L, D)``; None: already there) and targets; a failure names
    the file (`atomic_path`)."""
    if features is not None:
        write_features(folder, config.rgb, video, features[0])
        for k, copy in enumerate(features[1:], start=1):
            write_features(folder, config.rgb, copy_file_name(video, k).removesuffix(".npy"), copy)
    write_targets(folder, video, targets)
