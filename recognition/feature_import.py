"""Bring your own features: per-video ``.npy`` arrays of any backbone, at a rate the user names, into the feature
folder ``recognition-train`` reads (what ``recognition-features import`` runs).

Input: a folder of ``<video>.npy`` files, one per recording, each a ``(T, D)`` array of real floating-point numbers
(any width ``D``, the same for every file; float16, float32 or float64), row ``k`` the features of the time
``k / rate`` seconds after the recording's start (a feature computed over the window ``[k / rate, (k + 1) / rate)``
is labelled by the time it starts, as a video frame is by the time it is shown); and the project's annotation file
(`graphs.annotations`), whose video keys are the file stems.

Output: the layout of `recognition.feature_folders` (``rgb_<name>/<video>.npy`` float32,
``target_perframe/<video>.npy``, ``split.json`` with ``fps`` = the rate and ``feature_extractor`` = the name), so a
detector trained on it records that it reads ``<name>`` features at that rate, and the live chain feeds it from
feature files (``stream-detect --features``, `streaming.feature_files`). The targets of a row follow the annotated
segments with the rule every command shares (`recognition.feature_folders.step_targets`: the segment that started
last owns an overlap).

Every file is read and checked before anything is written (no pickle: only plain ``.npy`` arrays are read): a file
that is not a 2-D float array, holds NaN or infinity, has another width than the others (one saved transposed,
``(D, T)``, said to be), or is not annotated is refused with one line naming it. The check keeps each file's shape,
not its values, and the write reads each file again (`plan_import`, then `write_import`): the memory an import needs
is that of its largest file, not of the folder (tens of GB of another backbone's features import as 300 MB do). A
file that changed between the two reads is refused, naming it (`reread_feature_file`). An annotated recording of the
scenario without a feature file, and a feature file of a recording annotated under another scenario, are not imported
and are counted in the summary (the annotation file of a public dataset covers more recordings than one person's
features); an entry of the folder that is no ``<video>.npy`` (an ``.npz``, a sub-folder) is named in a note.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np

from graphs.annotations import choose_scenario, frames_hint, load_annotations, print_timing_warning, time_order
from graphs.common.array_files import FLOAT_KINDS, npy_header_shape, read_npy
from graphs.common.errors import InputError
from graphs.common.files import check_output, not_a_file, not_a_folder
from graphs.common.options import check_fps, check_seed
from graphs.common.safe_text import count_of, first_few, near_name_hint, printable, quoted, unicode_form_hint
from recognition.feature_folders import (
    SPLIT_FILE,
    TARGETS_DIR,
    SplitFile,
    annotated_elsewhere,
    check_feature_folder_out,
    check_segments_fit,
    check_test_split_options,
    choose_test_videos,
    earlier_rate,
    step_targets,
    stored_split,
    stored_width,
    test_split_line,
    write_features,
    write_split,
    write_targets,
)
from recognition.segment_metrics import TimedSegment

DEFAULT_NAME: Final = "imported"  # the extractor name a folder of imported features records unless told
NAME_RULE: Final = "letters, digits, '.', '_' or '-', at most 64 characters, starting with a letter"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,63}")
SHOWN: Final = 5  # names an error or a summary lists; it counts the rest


# Feature files whose median length is this many times the end of their annotated steps were likely written at
# another rate than the one they are read at. A wrong rate stretches every file alike, an idle tail one recording: the
# median of CaptainCook4D's 90 files is 1.05 (each 1.0-1.5), at twice the rate about 2.1.
LONG_FILE_RATIO: Final = 1.8


NO_FRAMES: Final = "--features files hold features, not video frames"  # why a frame option is refused with them


def span_ratio(lengths: Sequence[float], ends: Sequence[float], step: float) -> float:
    """The median over recordings of a feature file's length over the end of its last annotated step.

    About 1 for files read at the rate they were written at, about ``k`` for files written ``k`` times as often as
    they are read (each step then ends early in its file); compared with `LONG_FILE_RATIO`.

    Args:
        lengths: each file's seconds at the rate it is read at.
        ends: the end of each recording's last annotated step, seconds, same order.
        step: one vector's seconds (an end is taken as at least that).

    Returns:
        The median ratio; 0 without recordings.
    """
    ratios = span_ratios(lengths, ends, step)
    return float(np.median(ratios)) if ratios.size else 0.0


def span_ratios(lengths: Sequence[float], ends: Sequence[float], step: float) -> np.ndarray:
    """Each recording's feature-file length over the end of its last annotated step (`span_ratio`'s terms).

    Returns:
        float64 ``(R,)``, one ratio per recording.
    """
    return np.asarray(lengths, dtype=np.float64) / np.maximum(np.asarray(ends, dtype=np.float64), step)


def check_extractor_name(name: object, option: str = "--name") -> str:
    """``name`` as the extractor name of imported features (`NAME_RULE`: it becomes the ``rgb_<name>`` folder).

    Raises:
        InputError: naming ``option`` and the value.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(f"{option} {quoted(name)}: use {NAME_RULE}")
    return name


@dataclass(frozen=True)
class ImportConfig:
    """One ``recognition-features import`` run.

    Args:
        features: folder of ``<video>.npy`` feature files.
        annotations: annotation JSON (the ``tgml train`` format).
        rate: feature vectors per second of recording.
        out: the feature folder to write.
        name: the extractor name recorded (``rgb_<name>/``, ``split.json``, every checkpoint trained on it).
        scenario: which scenario of the annotation file; None when it holds exactly one with feature files.
        test_fraction: share of the recordings held out for testing, when ``test_videos`` is empty (None:
            `recognition.feature_folders.DEFAULT_TEST_FRACTION` for a new folder, the folder's split for one written
            before).
        test_videos: the test recordings by name.
        seed: draws the ``test_fraction`` recordings.
    """

    features: str
    annotations: str
    rate: float
    out: str
    name: str = DEFAULT_NAME
    scenario: str | None = None
    test_fraction: float | None = None
    test_videos: tuple[str, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        check_fps(self.rate, "--rate", "vectors")
        check_extractor_name(self.name)
        check_test_split_options(self.test_fraction, self.test_videos, "recording")
        check_seed(self.seed)

    @property
    def rgb(self) -> str:
        """The feature folder's sub-folder, ``rgb_<name>``."""
        return f"rgb_{self.name}"


def header_shape(path: str | Path) -> tuple[int, int] | None:
    """``(rows, width)`` of a 2-D ``.npy`` file from its header alone (`npy_header_shape`: the data is not read), so
    that a file of another backbone is refused without reading gigabytes of it; None for anything else (a missing
    file, a damaged header, another shape), which the full read (`read_feature_file`) then names."""
    try:
        shape = npy_header_shape(path, "features")
    except InputError:
        return None
    return (shape[0], shape[1]) if len(shape) == 2 else None


def read_feature_file(path: str | Path, what: str = "features") -> np.ndarray:
    """One user's feature file: a 2-D array of finite real floats, at least one row (read without pickle).

    Args:
        path: the ``.npy`` file.
        what: how errors name its content.

    Returns:
        ``(T, D)`` float32.

    Raises:
        InputError: naming the file: unreadable, not an ``.npy`` array, not 2-D, not floats, empty, NaN or infinity
            (with the first row that holds one).
    """
    array = read_npy(path, what, ndim=2, kinds=FLOAT_KINDS)
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise InputError(f"{path}: the {what} have shape {array.shape}, expected (rows, width) with both > 0")
    finite = np.isfinite(array).all(axis=1)  # (T,)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise InputError(f"{path}: the {what} hold NaN or infinite values (first in row {row})")
    wider = array.dtype.itemsize > np.dtype(np.float32).itemsize
    with np.errstate(over="ignore"):
        features = np.ascontiguousarray(array, dtype=np.float32)
    del array  # the file's bytes, when the cast copied them: not held beside the copy's check below
    # A float64 beyond float32's range becomes infinite in the cast: it would reach the detector as inf, its
    # probabilities as NaN, and end the stream (eval: a traceback; live: the stream lost). A float16 or float32 one
    # cannot (its finite values are float32's), and its (T, D) check would be memory spent for nothing.
    if not wider:
        return features
    fits = np.isfinite(features).all(axis=1)
    if not fits.all():
        row = int(np.flatnonzero(~fits)[0])
        limit = float(np.finfo(np.float32).max)
        raise InputError(f"{path}: the {what} hold values beyond float32's range (|x| > {limit:.3g}; first in row "
                         f"{row})")
    return features


@dataclass(frozen=True)
class ImportedVideo:
    """A recording to import, as the check left it: its name, feature file, the file's ``(rows, width)`` and its
    segments in time order.

    The shape, not the features: holding every file's values from the check to the write needed the whole folder in
    memory (369 MB for a 332 MB folder, 70 MB since; tens of GB of features could not be imported). The write reads
    the file again (`reread_feature_file`), held to this shape.
    """

    name: str
    path: Path
    shape: tuple[int, int]
    segments: tuple[TimedSegment, ...]

    @property
    def rows(self) -> int:
        """The file's feature vectors, ``T``."""
        return self.shape[0]


@dataclass(frozen=True)
class ImportPlan:
    """What `plan_import` checked and `write_import` writes.

    Attributes:
        scenario: the scenario imported.
        step_ids: its key-steps in taxonomy order (the targets' classes after background).
        step_names: their names, same order.
        videos: the recordings imported, in the annotation file's order.
        test: the test recordings among them.
    """

    scenario: str
    step_ids: tuple[int, ...]
    step_names: tuple[str, ...]
    videos: tuple[ImportedVideo, ...]
    test: frozenset[str]


@dataclass
class ImportReport:
    """What an import wrote and what it left out.

    Attributes:
        folder: the feature folder.
        train: training recordings.
        test: test recordings.
        rows: feature vectors written.
        width: their width.
        no_features: annotated recordings of the scenario that have no feature file.
        other_scenario: feature files of recordings annotated under another scenario.
        span_ratio: the median over the recordings of a file's length at the rate over the end of its last annotated
            step (CaptainCook4D's: 1.0-1.5); 0 when no recording has a timed step.
        earlier_rate: the rate the folder was imported at before, when this import rewrites it at another.
        unread: the note on the ``--features`` entries that are no ``<video>.npy`` and are not read (`unread_line`),
            or None; the command prints it on stderr, beside its warnings, not in the summary.
        before: the folder's split before this import (`stored_split`), None for a new folder
            (`extractor_change_note`).
        annotations: the annotation file read (the summary's ``tgml train --exclude-videos`` is for a graph of it).
    """

    folder: Path
    train: list[str] = field(default_factory=list)
    test: list[str] = field(default_factory=list)
    rows: int = 0
    width: int = 0
    no_features: list[str] = field(default_factory=list)
    other_scenario: list[str] = field(default_factory=list)
    span_ratio: float = 0.0
    earlier_rate: float | None = None
    unread: str | None = None
    before: SplitFile | None = None
    annotations: str | None = None

    def rate_warnings(self, rate: float) -> list[str]:
        """Warnings (without their ``warning:``) about ``rate``: features written at a higher rate than ``--rate``
        says (the files last far longer than their annotated steps; a file too short at its rate is refused, this is
        the other direction), and a folder imported before at another rate, whose targets are now rewritten."""
        warnings = []
        if self.span_ratio > LONG_FILE_RATIO:
            warnings.append(f"at --rate {rate:g} the feature files last a median {self.span_ratio:.1f} times "
                            "as long as their recordings' annotated steps (every step would end early in its file, "
                            "the rest labelled background): is that the rate they were written at?")
        if self.earlier_rate is not None:
            warnings.append(f"{self.folder} was imported at {self.earlier_rate:g} per second; its targets and "
                            f"split.json are rewritten at --rate {rate:g}, and a detector trained on it before "
                            f"expects {self.earlier_rate:g}: train it again")
        return warnings

    def summary(self, rate: float, name: str) -> str:
        """The closing lines of the command."""
        videos = len(self.train) + len(self.test)
        lines = [f"{count_of(videos, 'recording')} imported into {self.folder} ({len(self.train)} train, "
                 f"{len(self.test)} test): {self.rows} feature vectors of width {self.width} at {rate:g} per second, "
                 f"extractor {name!r}"]
        if self.test:  # what tgml train --exclude-videos must leave out of the graph, said without opening split.json
            lines.append(test_split_line(self.test, self.folder, "recordings", SHOWN, self.annotations))
        if self.no_features:
            lines.append(f"not imported: {count_of(len(self.no_features), 'annotated recording')} "
                         f"{'has' if len(self.no_features) == 1 else 'have'} no feature file "
                         f"({first_few(sorted(self.no_features), SHOWN)})")
        if self.other_scenario:
            lines.append(f"not imported: {count_of(len(self.other_scenario), 'feature file')} "
                         f"{'is' if len(self.other_scenario) == 1 else 'are'} of recordings of another "
                         f"scenario ({first_few(sorted(self.other_scenario), SHOWN)})")
        return "\n".join(printable(line) for line in lines)


def feature_files(folder: str | Path, option: str = "--features", name: str = "video") -> dict[str, Path]:
    """The ``<video>.npy`` files of a folder (the suffix in any case: ``1_36.NPY``), by video name.

    Args:
        folder: the folder.
        option: the option that named it, for the messages.
        name: what a file is named after (``"video"``, ``"recording_id"``), for the messages.

    Raises:
        InputError: the folder is missing or holds no ``.npy`` file; an entry named like one is no file (a folder, a
            link to no file), said rather than counted as a recording without features; two files of one name (the
            suffix in two cases).
    """
    root = Path(folder)
    why = not_a_folder(root, f"a folder of <{name}>.npy files")
    if why is not None:
        raise InputError(f"{option} {root}: {why}")
    found: dict[str, Path] = {}
    for path in sorted(root.iterdir()):
        if not is_npy_name(path):
            continue
        if path.stem in found:  # 12_10.npy beside 12_10.NPY: one of them was dropped unsaid
            raise InputError(f"{option} {root}: two feature files of {name} {path.stem!r} ({found[path.stem].name} "
                             f"and {path.name}); keep one")
        found[path.stem] = path
    for path in found.values():
        odd = not_a_file(path)
        if odd is not None:
            raise InputError(f"{option} {root}: {path.name} is {odd}, not a feature file")
    if not found:
        raise InputError(f"{option} {root}: holds no .npy feature file (one <{name}>.npy per recording)"
                         + held_instead(root, unread_entries(root), name))
    return found


def held_instead(root: Path, entries: Sequence[str], name: str = "video") -> str:
    """What a features folder with no ``<name>.npy`` file holds instead, as the tail of its error (``""`` when it is
    empty): the folder a feature command wrote (its features are one folder down), archives saved with ``np.savez``
    (CaptainCook4D's published features are ``.npz`` files), or the entries it holds. A folder of a dozen ``.npz``
    files was refused as if it were empty, and the user had to guess that the format, not the folder, was wrong.

    Args:
        root: the folder, named in the advice.
        entries: its entries (`unread_entries`: sub-folders end in ``/``).
        name: what a file is named after (``"video"``, ``"recording_id"``).
    """
    features = [e for e in entries if e.startswith(("rgb_", "flow_")) and e.endswith("/")]
    if SPLIT_FILE in entries and features:
        where = ", ".join(printable(root / e.rstrip("/")) for e in features)
        return f"; it is a feature folder (its {SPLIT_FILE}): give its features, {where}"
    archives = [e for e in entries if e.lower().endswith(".npz")]
    if archives:
        return (f"; it holds {count_of(len(archives), '.npz archive')} ({first_few(printable_all(archives), SHOWN)}): "
                f"save each one's array with np.save as <{name}>.npy")
    if entries:
        return f"; it holds {first_few(printable_all(entries), SHOWN)}"
    return ""


def printable_all(names: Sequence[str]) -> list[str]:
    """Each of ``names`` `printable`: file names come from outside."""
    return [printable(n) for n in names]


def is_npy_name(path: Path) -> bool:
    """``path`` is named like a feature file: ``<name>.npy``, the suffix in any case."""
    return path.suffix.lower() == ".npy" and path.stem != ""


def feature_file_fault(path: str | Path, label: str) -> InputError | None:
    """The error of a ``--features`` source that is no file at all (missing, a folder, a FIFO), checked by the path
    alone: the live command says it before any model loads. None when it is a file (its content is read later)."""
    source = Path(path)
    why = not_a_file(source)
    if why is None:
        return None
    return InputError(f"{label}: {'file ' if why == 'not found' else ''}{why}, expected a .npy feature file"
                      + _what_to_give(source, why))


def _what_to_give(source: Path, why: str) -> str:
    """The tail of `feature_file_fault`'s line that says what to give instead: a newcomer gave a recording's name
    without its suffix (``features/17_49``), or the folder `stream-detect eval --features` takes, and the line said
    only what was wrong."""
    if why == "not found":
        named = source.with_name(source.name + ".npy")
        return f"; did you mean {printable(named)!r}?" if not is_npy_name(source) and named.is_file() else ""
    if why != "a folder":
        return ""
    try:
        files = sorted(p.name for p in source.iterdir() if is_npy_name(p))
    except OSError:  # unreadable: the line still says it is a folder
        return ""
    if not files:
        return ""
    return (f" (it holds {count_of(len(files), 'feature file')}: give one, as {printable(source / files[0])}; "
            "stream-detect eval --features reads a whole folder)")


def unread_entries(folder: str | Path) -> list[str]:
    """The names in a features folder that are not ``<name>.npy`` files (sub-folders, ``.npz``...), which
    `feature_files` does not read: said, never skipped in silence."""
    return sorted(p.name + ("/" if p.is_dir() else "") for p in Path(folder).iterdir() if not is_npy_name(p))


def unread_line(folder: str | Path, option: str = "--features", name: str = "video") -> str | None:
    """The note (without its ``note:``) naming the entries of a features folder that are not read
    (`unread_entries`), the one ``tgml bench-live``, ``recognition-features import`` and ``stream-detect eval
    --features`` give; None when every entry is read, or ``folder`` is no folder.

    Args:
        folder: the features folder.
        option: the option that named it.
        name: what a file is named after (``"video"``, ``"recording_id"``).
    """
    unread = unread_entries(folder) if Path(folder).is_dir() else []
    if not unread:
        return None
    return printable(f"{option} {folder}: {len(unread)} entr{'y is' if len(unread) == 1 else 'ies are'} not "
                     f"<{name}>.npy and not read: {first_few(unread, 5, and_more=', and ')}")


def check_widths(shapes: Mapping[str, tuple[int, int]], files: Mapping[str, Path], option: str) -> None:
    """Refuse feature files of differing widths (every file must come from one backbone), naming the odd one, and
    say when the difference is a file saved transposed, ``(D, T)``: checked before the files' lengths, which a
    transposed file would otherwise fail as if written at another rate.

    A transposed file's rows are the backbone's width and its width is its length: when every file is transposed,
    they share one row count and no two share a width (recordings' lengths rarely agree to the vector, while files
    of one length and two backbones share widths); when one is, its rows are the others' width.

    Args:
        shapes: ``(rows, width)`` of each recording's file.
        files: each recording's file, named in the error.
        option: how the folder is named (``--features DIR``), when every file is at fault.

    Raises:
        InputError: naming the odd file (or the folder, every file transposed) and its ``(rows, width)``.
    """
    if not shapes:  # no recording of the scenario: refused by the caller, naming the scenario
        return
    rows = {r for r, _ in shapes.values()}
    widths = Counter(w for _, w in shapes.values())
    # Two files of one length and two widths could be either transposed, or two backbones: three or more say which.
    if len(shapes) > 2 and len(rows) == 1 and len(widths) == len(shapes):
        first = next(iter(shapes))
        raise InputError(f"{option}: every file has {next(iter(rows))} rows and their widths differ "
                         f"({first_few([str(w) for w in sorted(widths)], SHOWN)}): saved transposed? (rows, width) "
                         f"= {shapes[first]} in {files[first].name}; a file is (time, width), one row per vector")
    # The width most files share is the backbone's, so the file named is the odd one, not the first read.
    if len(widths) == 1:
        return
    (width, most), (other, second) = widths.most_common(2)
    if most == second:  # no width is the folder's: the two files are named, and neither is called the odd one
        a, b = (next(name for name, (_, w) in shapes.items() if w == value) for value in (width, other))
        hint = " (one saved transposed?)" if shapes[a][0] == other or shapes[b][0] == width else ""
        raise InputError(f"{files[a]} is {width} wide and {files[b]} {other}: every file must come from the same "
                         f"backbone{hint}; a file is (time, width), one row per vector")
    odd = next(name for name, (_, w) in shapes.items() if w != width)
    odd_rows, odd_width = shapes[odd]
    why = (f"saved transposed? (rows, width) = ({odd_rows}, {odd_width}); a file is (time, width), one row per "
           "vector" if odd_rows == width else "every file must come from the same backbone")
    raise InputError(f"{files[odd]}: the features are {odd_width} wide, those of the folder's other files {width}: "
                     f"{why}")


def same_place(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one place, links followed; never raises (``Path.resolve`` does on a link loop, which
    `feature_files` then names as such)."""
    return os.path.realpath(a) == os.path.realpath(b)


def plan_import(config: ImportConfig, report: ImportReport) -> ImportPlan:
    """Read and check everything before anything is written: a bad file anywhere leaves ``--out`` as it was.

    Each feature file is read whole and checked (`read_feature_file`), and only its shape is kept: one file's values
    are in memory at a time, whatever the folder's size.

    Args:
        config: the run.
        report: filled with what is left out (``no_features``, ``other_scenario``, ``unread``), ``span_ratio`` and
            ``earlier_rate``.

    Returns:
        What `write_import` writes.

    Raises:
        InputError: the first fault found, naming its file or option.
    """
    check_output(config.out, "feature folder", folder=True, inputs=[config.annotations], option="--out")
    stored = stored_split(config.out)
    report.earlier_rate = earlier_rate(config.out, config.rgb, stored, config.rate, "--rate", "import")
    report.before = stored
    for written in (config.rgb, TARGETS_DIR):  # the import rewrites these folders' files: never the ones it reads
        if same_place(Path(config.out) / written, config.features):
            raise InputError(f"--out {config.out}: its {written}/ is the --features folder, whose files the import "
                             "would rewrite as it reads them; choose another --out or --name")
    if same_place(config.out, config.features):  # the recordings' folder keeps only them
        raise InputError(f"--out {config.out}: it is the --features folder; the feature folder (its {config.rgb}/, "
                         f"{TARGETS_DIR}/ and split.json) goes beside it, in another --out")
    check_feature_folder_out(config.out)  # after the two above, which say more of the same mistake
    files = feature_files(config.features)
    report.unread = unread_line(config.features)
    # Without --scenario the feature files choose it (below): the file's warning then counts that scenario's videos,
    # not those of every recipe of a data set's file.
    annotations = load_annotations(config.annotations, scenario_read=config.scenario, scenario_required=True,
                                   learns_graph=False, warn_timing=config.scenario is not None)
    unannotated = [name for name in files if name not in annotations.videos]
    if unannotated:
        raise InputError(f"--features {config.features}: {count_of(len(unannotated), 'feature file')} with no "
                         f"annotation in {config.annotations} ({first_few(sorted(unannotated), SHOWN)}): annotate "
                         "them (a file annotated under another scenario than --scenario's is left out, so an "
                         "annotation file of every recording of a data set's folder imports one scenario of it), or "
                         "move them out of the folder" + unicode_form_hint(unannotated, annotations.videos)
                         + near_name_hint(unannotated, [name for name in annotations.videos if name not in files]))
    if config.scenario is None:  # the scenario of the recordings that have features, when they share one
        scenarios = Counter(annotations.videos[name].scenario for name in files)
        if len(scenarios) > 1:  # name the folder's scenarios, not every one of a public dataset's annotation file
            counts = ", ".join(f"{name}: {count}" for name, count in sorted(scenarios.items()))
            raise InputError(f"--features {config.features}: its recordings are of {len(scenarios)} scenarios of "
                             f"{config.annotations} ({counts} files); choose one with --scenario")
        scenario = choose_scenario(annotations, next(iter(scenarios)))
        print_timing_warning(annotations, scenario, learns_graph=False)
    else:
        scenario = choose_scenario(annotations, config.scenario)
    step_ids, step_names = annotations.steps_of(scenario)
    # Widths from the headers first (those that read: a damaged one is named by its full read, and every file read
    # below has a readable header, so this is the whole check), and against an earlier import's: a folder of another
    # backbone is refused before gigabytes of it are read. Widths before lengths: a file saved transposed is short at
    # any rate, and said to be transposed, not mistimed.
    headers = {v.video: header_shape(files[v.video]) for v in annotations.scenario_videos(scenario) if v.video in files}
    readable = {name: shape for name, shape in headers.items() if shape is not None}
    check_widths(readable, files, f"--features {config.features}")
    earlier = stored_width(Path(config.out) / config.rgb)
    width = next(iter(readable.values()))[1] if readable else None
    if width is not None and earlier is not None and earlier != width:
        # The files of recordings this import does not rewrite would stay beside its own, of another width.
        raise InputError(f"--out {config.out}: its {config.rgb}/ holds features {earlier} wide from an earlier import, "
                         f"and those of --features {config.features} are {width}: one folder, one backbone; import "
                         "into another --out")
    videos: list[ImportedVideo] = []
    for video in annotations.scenario_videos(scenario):
        path = files.get(video.video)
        if path is None:
            report.no_features.append(video.video)
            continue
        segments = tuple(TimedSegment(video.steps[k], start, end) for k, start, end in
                         time_order(video, config.annotations))
        rows, width = read_feature_file(path).shape  # checked, then dropped: the write reads it again
        videos.append(ImportedVideo(video.video, path, (rows, width), segments))
    for imported in videos:
        rows = imported.rows
        # Row k covers [k / rate, (k + 1) / rate): a segment may end up to one row after the last row starts.
        try:
            check_segments_fit(imported.segments, rows / config.rate, 1 / config.rate, config.annotations,
                               imported.name)
        except InputError as err:  # a short file, or one read at another rate than it was written at
            raise InputError(f"{err}: {files[imported.name]} has {rows} vectors, {rows / config.rate:.2f} s at "
                             f"--rate {config.rate:g}; is that the rate it was written at"
                             f"{frames_hint(max(seg.end for seg in imported.segments), rows / config.rate)}?") from None
    report.other_scenario = [name for name in files if annotations.videos[name].scenario != scenario]
    if not videos:
        raise InputError(f"--features {config.features}: no feature file of a recording of scenario {scenario!r}")
    report.span_ratio = videos_span_ratio(videos, config.rate)
    if (report.earlier_rate is not None and report.span_ratio > LONG_FILE_RATIO
            and fits_rate(videos_span_ratio(videos, report.earlier_rate))):
        # A rate the files' lengths say is wrong, over a folder imported at one they fit: its targets and split.json
        # would be rewritten at it, and the detector trained on the folder no longer match it. Refused, not warned
        # (where the folder's rate does not fit either, the lengths prove nothing: warned, as into a new folder).
        raise InputError(rate_refusal(config, report.span_ratio, report.earlier_rate))
    names = [v.name for v in videos]

    def absent(name: str) -> str:  # why a recording of the folder's split is not imported this time
        if name not in annotations.videos:
            return f"are no longer annotated in {config.annotations}"
        if annotations.videos[name].scenario != scenario:
            return f"are annotated under another scenario than {scenario!r} in {config.annotations}"
        return f"have no feature file in --features {config.features}"

    test = choose_test_videos(names, stored, config.test_videos, config.test_fraction, config.seed, config.annotations,
                              "recording", "an imported recording (a feature file of the scenario with an annotation)",
                              absent, annotated_elsewhere(annotations, scenario, "recording", "imported"))
    return ImportPlan(scenario, step_ids, step_names, tuple(videos), test)


def videos_span_ratio(videos: Sequence[ImportedVideo], rate: float) -> float:
    """`span_ratio` of the recordings with a timed step, their files read at ``rate``."""
    timed = [v for v in videos if v.segments]
    return span_ratio([v.rows / rate for v in timed], [max(s.end for s in v.segments) for v in timed], 1 / rate)


def fits_rate(ratio: float) -> bool:
    """Whether files whose `span_ratio` at a rate is ``ratio`` fit it: neither far longer than their annotated steps
    (`LONG_FILE_RATIO`) nor shorter (a file may end up to one vector before its steps: CaptainCook4D's, 0.95 s)."""
    return 0.9 <= ratio <= LONG_FILE_RATIO


def rate_refusal(config: ImportConfig, ratio: float, earlier: float) -> str:
    """The error of a ``--rate`` into a folder imported at ``earlier``, a rate the files fit, at which they last
    ``ratio`` times their annotated steps (`LONG_FILE_RATIO`)."""
    return (f"--rate {config.rate:g}: {config.out} was imported at {earlier:g} per second, which the feature files "
            f"fit, and at --rate {config.rate:g} they last a median {ratio:.1f} times as long as their recordings' "
            f"annotated steps (every step would end early in its file): import at --rate {earlier:g}, or into "
            f"another --out ({config.out} is left as it was)")


def import_features(config: ImportConfig) -> ImportReport:
    """What ``recognition-features import`` does: check every input (`plan_import`), then write the feature folder
    (`write_import`), one file in memory at a time.

    Args:
        config: the run.

    Returns:
        What was imported, and what was left out.
    """
    report = ImportReport(Path(config.out), annotations=config.annotations)
    write_import(config, report, plan_import(config, report))
    return report


def write_import(config: ImportConfig, report: ImportReport, plan: ImportPlan) -> None:
    """Write the feature folder `plan_import` checked: each recording's file read again (`reread_feature_file`),
    written as float32 with its targets, and dropped before the next is read; ``split.json`` last, so a folder without
    one was never finished.

    Args:
        config: the run.
        report: filled with the train and test recordings, the vectors written and their width.
        plan: what `plan_import` returned for ``config``.

    Raises:
        InputError: ``--out`` cannot be created, or a file changed since it was checked (the recordings written
            before it stay written: the error says the folder is half-written).
    """
    out = Path(config.out)
    report.train = [v.name for v in plan.videos if v.name not in plan.test]
    report.test = [v.name for v in plan.videos if v.name in plan.test]
    try:
        out.mkdir(exist_ok=True)
    except OSError as err:
        raise InputError(f"--out {out}: cannot create the feature folder ({err.strerror or err})") from None
    for done, video in enumerate(plan.videos):
        features = reread_feature_file(video, out, done, len(plan.videos))
        times = np.arange(video.rows, dtype=np.float64) / config.rate  # (T,) when each row starts
        write_features(out, config.rgb, video.name, features)
        del features  # before the next file is read: one file's values in memory at a time
        write_targets(out, video.name, step_targets(times, video.segments, plan.step_ids))
        report.rows += video.rows
        report.width = video.shape[1]
    write_split(out, report.train, report.test, ["background", *plan.step_names], [None, *plan.step_ids],
                config.rate, config.name, plan.scenario)


def reread_feature_file(video: ImportedVideo, out: Path, done: int, total: int) -> np.ndarray:
    """``video``'s features read again for the write, with every check of the first read (`read_feature_file`) and
    the shape that read found: a file changed since (rewritten by another program, still being copied) would give
    features its targets, written from the first shape, do not match.

    Args:
        video: the recording as `plan_import` checked it.
        out: the feature folder being written, named in the error.
        done: the recordings written before this one in this run.
        total: the recordings of the run.

    Returns:
        ``(T, D)`` float32, the shape checked.

    Raises:
        InputError: naming the file and what changed, and saying what the folder holds now.
    """
    # A folder imported into before keeps its old split.json until this import's is written: it would look finished.
    split = ("split.json still the earlier import's" if (out / SPLIT_FILE).exists() else "split.json not yet written")
    state = (f"{out} is half-written ({done} of {total} recordings written before it, {split}): run the import "
             "again" if done else f"nothing was written into {out}: run the import again")
    try:
        features = read_feature_file(video.path)
    except InputError as err:  # a change, or a disk or permission fault since: either way, not what was checked
        raise InputError(f"{err}; it read whole when checked, and {state}") from None
    if features.shape != video.shape:
        raise InputError(f"{video.path}: the features are now (rows, width) = {features.shape}, {video.shape} when "
                         f"checked: the file changed while it was imported, and {state}")
    return features
