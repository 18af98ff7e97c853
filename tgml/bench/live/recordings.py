"""The recordings `tgml bench-live` runs: per-second features of real CaptainCook4D recordings, their annotated steps
and errors, their recipe and its taxonomy (docs/live-benchmark.md).

A features folder holds one ``<recording_id>.npy`` per recording, ``(T, D)`` (any float dtype, any ``D``), one
vector per second: vector ``t`` covers seconds ``[t, t + 1)`` (``captaincook4d-pe/features``, DERIVATION.md). Each
recording's annotated steps and errors come from ``captaincook4d/error_annotations.json``
(`tgml.bench.error_annotations`); its recipe is the ``scenario`` of its ``activity_id`` in the graph-generation
annotations, whose taxonomy gives the recipe's steps. Labels: second ``t`` belongs to the performed step whose
annotated ``[start, end]`` covers it (the one that starts last, where two overlap); the other seconds are
background, class 0. Class ``k >= 1`` is the ``k``-th step of the recipe's taxonomy.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from graphs.annotations import Annotations, load_annotations, seconds_shown
from graphs.common.errors import InputError, print_warning
from graphs.common.files import read_json, read_text_file
from graphs.common.safe_text import count_of, first_few, meant_name, quoted
from graphs.edge_metrics import load_reference_graph
from graphs.task_graph import TaskGraph
from recognition.feature_folders import ANNOTATION_SLACK_S
from recognition.feature_import import LONG_FILE_RATIO, check_widths, read_feature_file, span_ratio, span_ratios
from recognition.feature_import import feature_files as import_feature_files
from tgml.bench.captaincook import ANNOTATIONS, GT_FOLDER
from tgml.bench.error_annotations import ErrorRecording, load_error_annotations, recording_entries
from tgml.bench.mistake_bench import ERROR_ANNOTATIONS

FEATURES_SUBFOLDER: Final = Path("captaincook4d-pe") / "features"
SOURCES: Final = "SOURCES.tsv"  # beside FEATURES_SUBFOLDER: each recording's `seconds`, one vector per second of video
HASHES: Final = "SHA256SUMS"  # beside FEATURES_SUBFOLDER: each file's published sha256 (`check_published_hashes`)
# One line of a `sha256sum` listing: the digest, a space, then a space (text mode) or '*' (binary mode), the name.
HASH_LINE: Final = re.compile(r"([0-9a-fA-F]{64}) [ *](.+)")
FPS: Final = 1.0  # one feature vector per second (DERIVATION.md)
# How far a file may run past its recording's length in seconds, for a backbone whose windows fall otherwise than
# captaincook4d-pe's (a clip of 32 frames a second apart, a last window padded): a share of the length and a few rows.
LENGTH_SHARE: Final = 0.1
LENGTH_ROWS: Final = 5
MAX_SECONDS_DIGITS: Final = 9  # a `seconds` value longer than this (over 31 years) is no video's length: refused


@dataclass(frozen=True)
class Recipe:
    """One procedure of the benchmark: its taxonomy and hand-made graph.

    Attributes:
        scenario: the procedure's name.
        step_ids: taxonomy ids, in taxonomy order (class ``k`` is ``step_ids[k - 1]``).
        step_names: their names.
        ground_truth: the hand-made graph (``ground_truth_task_graphs/``), matched by step name.
    """

    scenario: str
    step_ids: tuple[int, ...]
    step_names: tuple[str, ...]
    ground_truth: TaskGraph

    @property
    def class_step_ids(self) -> tuple[int | None, ...]:
        """The detector's class -> step id map (class 0: background)."""
        return (None, *self.step_ids)

    @property
    def class_names(self) -> tuple[str, ...]:
        """The detector's class names."""
        return ("background", *self.step_names)


@dataclass(frozen=True)
class LiveRecording:
    """One recording: its features file, annotation and per-second labels.

    Attributes:
        recording_id: the dataset's id (``"1_36"``).
        recipe: its procedure.
        path: its features file.
        annotation: its annotated steps and errors.
        labels: ``(T,)`` class per second (0: background).
        features: ``(T, D)`` float32 features, checked finite.
    """

    recording_id: str
    recipe: str
    path: Path
    annotation: ErrorRecording
    labels: np.ndarray
    features: np.ndarray

    @property
    def error_free(self) -> bool:
        """The file says the person made no error (``is_error`` false; without the flag: no tag at all)."""
        if self.annotation.is_error is not None:
            return not self.annotation.is_error
        return not self.annotation.missing and not any(p.tags for p in self.annotation.performed)


@dataclass(frozen=True)
class LiveData:
    """Everything the benchmark reads.

    Attributes:
        data_dir: the ``captaincook4d`` folder.
        features_dir: the features folder.
        recipes: the recipes of the recordings, by name, in taxonomy order.
        recordings: the recordings, by recipe then id.
        annotations: the graph-generation annotations (what the graphs are learned from).
        width: the features' width ``D``.
    """

    data_dir: Path
    features_dir: Path
    recipes: dict[str, Recipe]
    recordings: tuple[LiveRecording, ...]
    annotations: Annotations
    width: int

    def of(self, recipe: str) -> list[LiveRecording]:
        """The recordings of one recipe."""
        return [r for r in self.recordings if r.recipe == recipe]


def second_labels(annotation: ErrorRecording, step_ids: tuple[int, ...], length: int) -> np.ndarray:
    """Per-second classes of one recording: the performed step covering each second, 0 elsewhere.

    Second ``t`` covers ``[t, t + 1)``; a step ``[start, end]`` covers the seconds whose window overlaps it by more
    than half (``round(start) <= t < round(end)``), so a step of one second or more is never lost. A window it
    overlaps by exactly half goes by Python's rounding of halves to even: kept for a start at 2.5, lost for one at
    3.5 (5 step boundaries of the 90 recordings). Left so: the published figures were measured with these labels.

    Returns:
        ``(length,)`` int64 classes.
    """
    labels = np.zeros(length, dtype=np.int64)
    column = {s: k + 1 for k, s in enumerate(step_ids)}
    for step in annotation.performed:  # sorted by start: a later step wins where two overlap
        if step.end <= step.start:
            continue
        a, b = round(step.start), max(round(step.end), round(step.start) + 1)
        labels[max(a, 0) : min(b, length)] = column[step.step]
    return labels


def load_live_data(data_dir: Path, features_dir: Path | None = None, recipes: Sequence[str] = ()) -> LiveData:
    """Read the recordings of a features folder, their annotations, recipes and graphs.

    Args:
        data_dir: the data folder holding ``captaincook4d/`` (and ``captaincook4d-pe/``), or ``captaincook4d/``.
        features_dir: the features folder (default ``<data>/captaincook4d-pe/features``).
        recipes: only these recipes' recordings (``--recipes``; empty: every recipe). The files of the others are
            not read, so a damaged one does not stop a run that does not use it.

    Returns:
        The `LiveData`.

    Raises:
        InputError: a folder or file missing; a features folder with no recording of the data set; a features file
            with no annotation; a recipe of ``recipes`` with no recording there; unreadable or non-finite features;
            widths that differ; a file of the data set that is not the one it publishes (`check_published_hashes`);
            files that last far longer than their steps at one vector a second (`check_one_vector_a_second`).
    """
    data_dir = Path(data_dir)
    cc = captaincook_dir(data_dir)
    given = features_dir is not None
    features_dir = features_folder(data_dir, features_dir)
    if not given and not features_dir.is_dir():  # the --features error named an option never given
        raise InputError(f"--data {data_dir}: no {FEATURES_SUBFOLDER} beside {cc.name}/, the data set's features; "
                         "give a folder of <recording_id>.npy files with --features")
    files = feature_files(features_dir)
    activity = recording_activities(cc)
    if not any(name in activity for name in files):
        raise InputError(f"--features {features_dir}: none of its {len(files)} .npy files is a recording of "
                         f"{cc / ERROR_ANNOTATIONS} (files are named <recording_id>.npy, e.g. 1_36.npy)")
    annotations, taxonomies, by_id = annotated_recordings(cc, activity, {name: str(p) for name, p in files.items()})
    if recipes:
        unknown = [r for r in recipes if r not in taxonomies]
        if unknown:
            raise InputError(f"--recipes {unknown[0]}: no recording of it in {features_dir} "
                             f"(recipes there: {', '.join(taxonomies)})"
                             f"{meant_name(unknown[0], set(taxonomies) - set(recipes), 0)}")  # not one named already
        taxonomies = {s: steps for s, steps in taxonomies.items() if s in recipes}
        files = {name: path for name, path in files.items() if by_id[name].scenario in taxonomies}
    chosen: dict[str, Recipe] = {}
    for scenario, (ids, names) in taxonomies.items():
        like = TaskGraph(ids, names, np.zeros((len(ids) + 2, len(ids) + 2), bool), scenario=scenario)
        graph = load_reference_graph(cc / GT_FOLDER / f"{scenario}.json", like)
        chosen[scenario] = Recipe(scenario, ids, names, graph)
    features = {name: read_feature_file(path) for name, path in files.items()}  # all checked before any training
    check_published_hashes(features_dir, files)
    # Widths before lengths: a file saved transposed, (D, T), is said to be, not taken for one cut short. The width
    # most files share is the folder's: the file named is the odd one out, not whichever was read first.
    check_widths({name: x.shape for name, x in features.items()}, files, f"--features {features_dir}")
    recordings = []
    for name, path in files.items():
        annotation = by_id[name]
        check_covers_steps(path, len(features[name]), annotation, cc / ERROR_ANNOTATIONS)
        recipe = chosen[annotation.scenario]
        recordings.append(LiveRecording(name, recipe.scenario, path, annotation,
                                        second_labels(annotation, recipe.step_ids, len(features[name])),
                                        features[name]))
    width = recordings[0].features.shape[1]
    check_one_vector_a_second(features_dir, recordings, features_folder(data_dir).parent / SOURCES)
    order = list(chosen)
    recordings.sort(key=lambda r: (order.index(r.recipe), r.recording_id))
    return LiveData(cc, features_dir, chosen, tuple(recordings), annotations, width)


def check_covers_steps(path: Path, vectors: int, annotation: ErrorRecording, annotations: Path) -> None:
    """Refuse a features file that ends before its recording's annotated steps do (beyond `ANNOTATION_SLACK_S` and
    one vector), as eval and import do: a file cut short, or features at another rate than one a second, would
    label every later second background and score every later step as missed."""
    last = max((p.end for p in annotation.performed), default=0.0)
    covered = vectors / FPS
    if last > covered + ANNOTATION_SLACK_S + 1 / FPS:
        raise InputError(f"{path}: covers {covered:.0f} s at one vector a second, but its annotated steps in "
                         f"{annotations} run to {seconds_shown(last)} s (a file cut short, or features at another "
                         "rate?)")


def video_seconds(sources: Path) -> dict[str, int]:
    """Each recording's length in whole seconds, as the data set's own features give it (``captaincook4d-pe/
    SOURCES.tsv``: its ``recording_id`` and ``seconds`` columns, one vector per second of the video); empty when the
    data folder has no such file.

    Raises:
        InputError: the file is there but is not such a table (no ``recording_id`` and ``seconds`` columns: empty,
            UTF-16, another file), or a row gives no length (a file cut short mid-row, a value that is no count of
            seconds). Such rows were skipped in silence, and with them the length check of their recordings.
    """
    if not sources.is_file():
        return {}
    # Tab-separated, never quoted: a stray '"' would otherwise swallow the rows after it in silence.
    rows = csv.DictReader(io.StringIO(read_text_file(sources, "sources table")), delimiter="\t",
                          quoting=csv.QUOTE_NONE)
    seconds = {}
    try:
        columns = rows.fieldnames or []
        if not {"recording_id", "seconds"} <= set(columns):
            raise InputError(f"{sources}: not the data set's sources table (its first line names no recording_id and "
                             "seconds columns, tab-separated); restore it from the data set, or remove it")
        for row in rows:
            recording, value = row.get("recording_id"), row.get("seconds")
            # ASCII digits only: str.isdigit takes '\u00b2', which int() refuses, and int() refuses 5,000 digits.
            if not (recording and value and value.isascii() and value.isdigit() and len(value) <= MAX_SECONDS_DIGITS):
                what = f"{quoted(recording, 40)} has no length in seconds" if recording else "no recording_id"
                # A row cut short has no seconds cell at all (None): said so, not as a value someone wrote.
                cell = "no seconds cell" if value is None else f"seconds = {quoted(value, 40)}"
                raise InputError(f"{sources}: line {rows.line_num}: {what} ({cell}; a damaged table? restore it from "
                                 "the data set)")
            seconds[recording] = int(value)
    except csv.Error as err:  # a field longer than csv's limit (128 KiB): a damaged file
        raise InputError(f"{sources}: not a table of tab-separated columns ({err})") from None
    return seconds


def check_video_lengths(recordings: Sequence[LiveRecording], seconds: Mapping[str, int], sources: Path) -> None:
    """Refuse a features file far longer than its recording lasts in seconds, where the data set says how long that is
    (`video_seconds`): features written at another rate than one a second. A folder's median length over its steps
    let rates up to 1.8 a second through (a 25 fps backbone's 16-frame clips are 1.5625 a second), every step then
    scored early in its file, since the recordings' own tails after their last step vary from 1.0 to 1.5 times it;
    the length of the video itself varies only by a backbone's windows (`LENGTH_SHARE`, `LENGTH_ROWS`)."""
    for r in recordings:
        length = seconds.get(r.recording_id)
        rows = len(r.features)
        if length and rows > length * (1 + LENGTH_SHARE) + LENGTH_ROWS:
            raise InputError(f"{r.path}: {rows} vectors, but recording {r.recording_id} lasts {length} s ({sources}): "
                             f"written at {rows / length:.2f} vectors a second? bench-live reads one a second "
                             "(recognition-features import --rate and stream-detect eval --features take other rates)")


def check_one_vector_a_second(folder: Path, recordings: Sequence[LiveRecording], sources: Path) -> None:
    """Refuse a folder whose files last far longer than their recordings' annotated steps at one vector a second
    (`recognition.feature_import.span_ratio` over `LONG_FILE_RATIO`): features written at a higher rate. The benchmark
    has no rate to give (its data set's is one a second), and at the wrong one it scored every step early in its
    file, in silence; import and eval, which take ``--rate``, warn of the same files. Then each file of a recording
    whose length the data set gives (``sources``, `check_video_lengths`) is held to it. The other files that last far
    longer than their steps in a folder whose median does not (some written at another rate, or a recording filmed
    long after its last step) are named in a warning: one file's steps prove less than a folder's."""
    timed = [r for r in recordings if r.annotation.performed]
    lengths = [len(r.features) / FPS for r in timed]
    ends = [max(p.end for p in r.annotation.performed) for r in timed]
    ratio = span_ratio(lengths, ends, 1 / FPS)
    if ratio > LONG_FILE_RATIO:
        raise InputError(f"--features {folder}: its files last a median {ratio:.1f} times as long as their "
                         "recordings' annotated steps at one vector a second, the rate bench-live reads (the data "
                         "set's): were they written at another? (recognition-features import --rate and stream-detect "
                         "eval --features take other rates)")
    seconds = video_seconds(sources)
    check_video_lengths(recordings, seconds, sources)
    over = span_ratios(lengths, ends, 1 / FPS) > LONG_FILE_RATIO
    named = [r.path.name for r, is_long in zip(timed, over.tolist(), strict=True)
             if is_long and r.recording_id not in seconds]
    if named:  # the data set's own files: 1.0 to 1.5 each
        verb = "lasts" if len(named) == 1 else "last"
        print_warning(f"--features {folder}: {count_of(len(named), 'file')} {verb} more than {LONG_FILE_RATIO:g} "
                      f"times as long as its recording's annotated steps at one vector a second "
                      f"({first_few(named, 5)}): written at another rate?")


def published_hashes(sums: Path) -> dict[str, str]:
    """``{file name relative to the listing's folder: sha256 hex digest}`` of a ``sha256sum`` listing.

    Raises:
        InputError: a line that is no ``<sha256>  <name>`` (a damaged listing: one skipped would leave its file
            unchecked in silence).
    """
    hashes = {}
    for number, line in enumerate(read_text_file(sums, "hash listing").splitlines(), start=1):
        if not line.strip():
            continue
        match = HASH_LINE.fullmatch(line)
        if match is None:
            raise InputError(f"{sums}: line {number}: not '<sha256>  <file>' (a damaged listing? restore it from the "
                             "data set)")
        hashes[match[2]] = match[1].lower()
    return hashes


def check_published_hashes(folder: Path, files: Mapping[str, Path]) -> None:
    """Refuse a features file whose sha256 is not the one the data set publishes for it (`HASHES` beside ``folder``,
    as ``captaincook4d-pe/SHA256SUMS`` lists ``features/<recording_id>.npy``). A flipped bit in a float16 vector
    passes every check of the values (finite, the folder's width, one vector a second) and moved the benchmark's
    figures in silence. Files the listing does not name (a user's own features) are not checked.

    Raises:
        InputError: a listed file differs, naming it; a damaged listing (`published_hashes`).
    """
    # `--features .` from inside the folder: named '', its listing was looked for in the folder itself, and a
    # changed file passed unchecked (`_folder_holding`'s rule).
    named = folder if folder.name not in ("", ".", "..") else folder.resolve()
    sums = _folder_holding(folder) / HASHES
    if not sums.is_file():
        return
    listed = published_hashes(sums)
    for path in files.values():
        want = listed.get(f"{named.name}/{path.name}")
        if want is None:
            continue
        with path.open("rb") as handle:
            got = hashlib.file_digest(handle, "sha256").hexdigest()
        if got != want:
            raise InputError(f"{path}: not the file {sums} lists (its sha256 differs: a damaged or changed copy); "
                             "restore it from the data set, or give your own features in a folder of their own "
                             "with --features")


def captaincook_dir(data_dir: Path) -> Path:
    """The ``captaincook4d`` folder of ``--data`` (the data folder holding it, or the folder itself).

    Raises:
        InputError: neither holds the graph-generation annotations.
    """
    cc = _captaincook(data_dir)
    if not (cc / ANNOTATIONS).is_file():
        raise InputError(f"--data {data_dir}: not a CaptainCook4D data folder (no captaincook4d/{ANNOTATIONS})")
    return cc


def feature_files(folder: Path) -> dict[str, Path]:
    """``{recording_id: file}`` of a features folder's ``<recording_id>.npy`` files, in name order
    (`recognition.feature_import.feature_files`).

    Raises:
        InputError: the folder is missing, is a file, or holds no ``.npy`` file; an entry named like one is no file.
    """
    return import_feature_files(folder, name="recording_id")


def features_folder(data_dir: Path, features_dir: Path | None = None) -> Path:
    """The features folder a run reads: ``features_dir``, or the data set's (``captaincook4d-pe/features`` beside
    ``captaincook4d/``)."""
    if features_dir is not None:
        return Path(features_dir)
    # Beside captaincook4d/, whichever folder --data names: given captaincook4d/ itself (which every command takes),
    # the features were looked for inside it, and the run stopped on a --features the user never gave.
    return _folder_holding(_captaincook(data_dir)) / FEATURES_SUBFOLDER


def _folder_holding(folder: Path) -> Path:
    """The folder ``folder`` is in. ``Path('.').parent`` is ``.`` and ``Path('..').parent`` is ``.``: a path that
    ends in neither a name nor a real parent is resolved first."""
    return folder.parent if folder.name not in ("", ".", "..") else folder.resolve().parent


def _captaincook(data_dir: Path) -> Path:
    return data_dir / "captaincook4d" if (data_dir / "captaincook4d").is_dir() else data_dir


def annotated_recordings(cc: Path, activity: Mapping[str, object], named: Mapping[str, str]) -> tuple[
        Annotations, dict[str, tuple[tuple[int, ...], tuple[str, ...]]], dict[str, ErrorRecording]]:
    """The annotated steps and errors of some recordings, read as the benchmark reads them.

    Args:
        cc: the ``captaincook4d`` folder.
        activity: `recording_activities` of it.
        named: recording id -> how the user named it (a features file, ``--recordings``), for the errors.

    Returns:
        ``(annotations, taxonomies, recordings)``: the graph-generation annotations (as published), ``{recipe: (step
        ids, step names)}`` of the recordings' recipes in taxonomy order, and ``{recording_id: ErrorRecording}``.

    Raises:
        InputError: a recording the error annotations do not hold, or whose activity is no recipe (named).
    """
    unknown = [name for name in named if name not in activity]
    if unknown:
        raise InputError(f"{named[unknown[0]]}: recording {unknown[0]!r} is not in {cc / ERROR_ANNOTATIONS}, so it "
                         f"has no annotation (ids such as 1_36){meant_name(unknown[0], set(activity) - set(named), 0)}")
    annotations = load_annotations(cc / ANNOTATIONS, check_times=False)  # as published
    scenarios = activity_scenarios(cc)
    wanted = {scenarios.get(activity[name]) for name in named} - {None}
    taxonomies = {s: annotations.steps_of(s) for s in annotations.taxonomy if s in wanted}
    activities = {a: s for a, s in scenarios.items() if isinstance(a, int)}
    others = frozenset(activity) - frozenset(named)  # recordings not asked for: not read
    errors = load_error_annotations(cc / ERROR_ANNOTATIONS, taxonomies, activities, others,
                                    restrict=frozenset(taxonomies))
    by_id = {r.recording_id: r for r in errors.recordings}
    for name, where in named.items():
        if name not in by_id:
            raise InputError(f"{where}: recording {name!r} (activity {activity[name]!r}) is of no recipe of "
                             f"{cc / ANNOTATIONS}")
    return annotations, taxonomies, by_id


def recording_activities(cc: Path) -> dict[str, object]:
    """``{recording_id: activity_id}`` of every recording of the error annotations."""
    return {e["recording_id"]: e.get("activity_id") for e in recording_entries(cc / ERROR_ANNOTATIONS)}


def activity_scenarios(cc: Path) -> dict[object, str]:
    """``{activity_id: recipe}`` from the graph-generation annotations (a recording's recipe is its activity's)."""
    return {v.get("activity_id"): str(v.get("scenario")) for v in _records(cc / ANNOTATIONS)}


def _records(path: Path) -> list[dict]:
    raw = read_json(path, "annotation file")
    videos = raw.get("annotations") if isinstance(raw, dict) else None
    return [v for v in videos.values() if isinstance(v, dict)] if isinstance(videos, dict) else []
