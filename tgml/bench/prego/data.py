"""PREGO datasets on disk: the data-folder layout, its checks, the splits and key-step sequence files."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from graphs.annotations import load_annotations
from graphs.common.errors import InputError
from graphs.common.file_kinds import mistaken_sequences
from graphs.common.files import FOLDER_NOT_FOUND, not_a_folder, read_json
from graphs.common.safe_text import quoted, unknown_name
from graphs.common.settings_files import as_written
from graphs.task_graph import TaskGraph

MODES: Final = ("gt", "pred")
MODE_MARKS: Final = {"gt": "*", "pred": "+"}
PREPARE_HINT: Final = "build it with `prego-bench prepare --assembly101 RAW --epic-tent RAW --out DIR`"


@dataclass(frozen=True)
class DatasetSpec:
    """Where a PREGO dataset lives inside a data folder and which annotation scenario it uses."""

    name: str
    scenario: str
    raw_flag: str  # the `prepare` option that builds it


DATASETS: Final[dict[str, DatasetSpec]] = {
    "assembly101-o": DatasetSpec("assembly101-o", "assembly101", "--assembly101"),
    "epic-tent-o": DatasetSpec("epic-tent-o", "epic-tent", "--epic-tent"),
}


@dataclass(frozen=True)
class DataLayout:
    """Paths of a data folder laid out like ``shared/data`` (``assembly101-o/``, ``epic-tent-o/``,
    ``prego-miniroad/``). Use `resolve_data` to get one whose files were checked."""

    root: Path

    def train_file(self, dataset: str) -> Path:
        """``<root>/<dataset>/train.json``."""
        return self.root / dataset / "train.json"

    def test_file(self, dataset: str) -> Path:
        """``<root>/<dataset>/test.json``."""
        return self.root / dataset / "test.json"

    def segments_file(self, dataset: str) -> Path:
        """MiniROAD key-step sequences: ``<root>/prego-miniroad/<dataset>_segments.json``."""
        return self.root / "prego-miniroad" / f"{dataset}_segments.json"

    def frames_file(self, dataset: str) -> Path:
        """MiniROAD per-frame labels: ``<root>/prego-miniroad/<dataset>_frames.json``."""
        return self.root / "prego-miniroad" / f"{dataset}_frames.json"


def resolve_data(
    root: str | Path, datasets: Iterable[str], splits: bool = True, segments: bool = False, frames: bool = False
) -> DataLayout:
    """Check that a data folder holds what a command needs; errors say what is missing and how to get it.

    Args:
        root: the ``--data`` folder.
        datasets: dataset names (keys of `DATASETS`).
        splits: require ``<dataset>/train.json`` and ``test.json``.
        segments: require ``prego-miniroad/<dataset>_segments.json``.
        frames: require ``prego-miniroad/<dataset>_frames.json``.

    Returns:
        The layout of the folder.
    """
    root = Path(root)
    why = not_a_folder(root, "a folder")
    if why == FOLDER_NOT_FOUND:
        raise InputError(f"data folder {root} not found; {PREPARE_HINT}")
    if why is not None:  # there, but no folder (an archive): said as such, not sent to be built again
        raise InputError(f"data folder {root}: {why}")
    layout = DataLayout(root)
    if splits and not any((root / name).is_dir() for name in DATASETS):
        # Most likely the wrong folder (a dataset's own folder, or its parent), not one to rebuild from raw files.
        raise InputError(f"data folder {root} holds none of {', '.join(f'{name}/' for name in DATASETS)}: give the "
                         f"folder that holds them (the public data folder), or {PREPARE_HINT}")
    for dataset in datasets:
        if dataset not in DATASETS:
            raise InputError(unknown_name("dataset", dataset, DATASETS, None))
        needed: list[tuple[Path, str]] = []
        if splits:
            hint = PREPARE_HINT.replace("--assembly101 RAW --epic-tent RAW", f"{DATASETS[dataset].raw_flag} RAW")
            needed += [(layout.train_file(dataset), hint), (layout.test_file(dataset), hint)]
        if segments:
            hint = "it is the MiniROAD output shipped in shared/data/prego-miniroad (or give --sequences FILE)"
            needed.append((layout.segments_file(dataset), hint))
        if frames:
            hint = "per-frame MiniROAD labels (shared/data/prego-miniroad has them for epic-tent-o); give --frames FILE"
            needed.append((layout.frames_file(dataset), hint))
        for path, hint in needed:
            # Only a file not there at all is missing: a folder or a link loop in its place was told to be built
            # anew; its reader (read_json) says what it is instead.
            if not path.exists() and not path.is_symlink():
                raise InputError(f"missing {path}; {hint}")
    return layout


# -- datasets and sequence files ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchData:
    """One PREGO dataset, ready to learn and score.

    Attributes:
        name: dataset name (``assembly101-o``).
        scenario: its annotation scenario.
        step_ids / step_names: the taxonomy, in matrix order.
        train: raw key-step sequences of the training videos (repeats kept), file order.
        test: GT-mode sequences ``{video: steps}``, each ending with its mistake.
        pred: PRED-mode sequences ``{video: steps}`` (empty when PRED mode is not requested).
        correct_videos: test videos without a mistake, kept whole: all their steps are correct (only a dataset of
            the user's, `tgml.bench.prego.own_dataset`, has them; the built-in test sets all end with a mistake).
    """

    name: str
    scenario: str
    step_ids: tuple[int, ...]
    step_names: tuple[str, ...]
    train: tuple[tuple[int, ...], ...]
    test: dict[str, tuple[int, ...]]
    pred: dict[str, tuple[int, ...]] = field(default_factory=dict)
    correct_videos: frozenset[str] = frozenset()


def load_sequence_file(
    path: str | Path, step_ids: Iterable[int], fields: Sequence[str] = ("pred",)
) -> dict[str, dict[str, tuple[int, ...]]]:
    """Read a ``{video: {"pred": [...], "gt": [...]}}`` key-step sequence file (MiniROAD output or a user's own).

    Args:
        path: the JSON file.
        step_ids: the dataset taxonomy; every id must belong to it.
        fields: fields every video must have; other list fields present are checked too.

    Returns:
        ``{video: {field: steps}}`` in file order.
    """
    data = read_json(path, "sequence file")
    known = set(int(s) for s in step_ids)
    # Another project file's top-level fields would be read as videos too: named as the kind it is.
    wrong = mistaken_sequences(data, str(path), 'a sequence file {video: {"pred": [...], "gt": [...]}}')
    if wrong is not None:
        raise InputError(wrong)
    if not isinstance(data, dict) or not data:
        raise InputError(f'{path}: expected a non-empty object {{video: {{"pred": [...], "gt": [...]}}}}')
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    for video, record in data.items():
        if not isinstance(record, dict):
            raise InputError(f"{path}: video {video!r}: expected an object with field {fields[0]!r}")
        parsed: dict[str, tuple[int, ...]] = {}
        for name in dict.fromkeys([*fields, *(k for k in ("pred", "gt") if k in record)]):
            steps = record.get(name)
            if steps is None:
                raise InputError(f"{path}: video {video!r}: missing field {name!r}")
            if not isinstance(steps, list):
                raise InputError(f"{path}: video {video!r}: field {name!r} must be a list of key-step ids")
            if not steps:
                raise InputError(f"{path}: video {video!r}: field {name!r} is an empty sequence")
            for k, step in enumerate(steps):
                if not isinstance(step, int) or isinstance(step, bool):
                    raise InputError(f"{path}: video {video!r}: field {name!r}[{k}] = {as_written(step)}"
                                     " is not an integer id")
                if step not in known:
                    raise InputError(f"{path}: video {video!r}: field {name!r}[{k}] = {step} is not in the taxonomy")
            parsed[name] = tuple(steps)
        out[str(video)] = parsed
    return out


def load_dataset(layout: DataLayout, dataset: str, pred: bool = True, sequences: str | Path | None = None) -> BenchData:
    """Read one dataset's splits and, if asked, its PRED-mode sequences.

    Args:
        layout: a resolved data folder.
        dataset: ``assembly101-o`` or ``epic-tent-o``.
        pred: also read PRED-mode sequences.
        sequences: a ``{video: {"pred": [...]}}`` file replacing the MiniROAD one.

    Returns:
        The dataset.
    """
    spec = DATASETS[dataset]
    # The published files, read as published: only the order of their segments counts (graphs.annotations).
    train = load_annotations(layout.train_file(dataset), check_times=False)
    test = load_annotations(layout.test_file(dataset), check_times=False)
    step_ids, step_names = train.steps_of(spec.scenario)
    test.check_scenario(spec.scenario)
    if test.steps_of(spec.scenario)[0] != step_ids:
        raise InputError(f"{layout.test_file(dataset)}: taxonomy differs from {layout.train_file(dataset)}")
    test_seqs = {v.video: v.steps for v in test.scenario_videos(spec.scenario)}
    empty = [video for video, steps in test_seqs.items() if not steps]
    if empty:
        raise InputError(f"{layout.test_file(dataset)}: video {empty[0]!r} has no segments")
    pred_seqs: dict[str, tuple[int, ...]] = {}
    if pred:
        source = Path(sequences) if sequences is not None else layout.segments_file(dataset)
        pred_seqs = {video: rec["pred"] for video, rec in load_sequence_file(source, step_ids).items()}
        # Scores are over the test videos: one left out was dropped silently (Avg F1 46.3 instead of 44.8), one of
        # another split was scored as a mistaken test video.
        missing = [video for video in test_seqs if video not in pred_seqs]
        extra = [video for video in pred_seqs if video not in test_seqs]
        if missing or extra:
            which = (f"no sequence for test video {', '.join(map(repr, missing[:3]))}" if missing
                     else f"video {', '.join(map(repr, extra[:3]))} is not a test video")
            more = len(missing or extra) - 3
            raise InputError(f"{source}: {which}{f' (and {more} more)' if more > 0 else ''} of {dataset} "
                             f"({layout.test_file(dataset)}); the file needs exactly the {len(test_seqs)} test videos")
    return BenchData(
        dataset,
        spec.scenario,
        step_ids,
        step_names,
        tuple(v.steps for v in train.scenario_videos(spec.scenario)),
        test_seqs,
        pred_seqs,
    )



def mode_sequences(data: BenchData, mode: str) -> list[tuple[int, ...]]:
    """Test sequences of a mode: annotated (``gt``) or recognised (``pred``)."""
    return list((data.test if mode == "gt" else data.pred).values())


def mode_has_mistake(data: BenchData, mode: str) -> list[bool]:
    """Per sequence of `mode_sequences`, whether its last step is the mistake (False for a correct video)."""
    return [video not in data.correct_videos for video in (data.test if mode == "gt" else data.pred)]



def check_graph_matches(graph: TaskGraph, data: BenchData, source: str | Path) -> None:
    """A given graph must describe the dataset's key-steps (same taxonomy ids)."""
    if set(graph.step_ids) != set(data.step_ids):
        extra = sorted(set(graph.step_ids) - set(data.step_ids))
        what = f"step {extra[0]} is not in" if extra else "its steps do not cover"
        raise InputError(f"{source}: {what} the {data.name} taxonomy")
    renamed = graph.renamed_step(data.step_ids, data.step_names)
    if renamed is not None:
        step, here, there = renamed
        raise InputError(f"{source}: step {step} is {quoted(here, 60)} there and {quoted(there, 60)} in the "
                         f"{data.name} taxonomy: a graph of another procedure")

