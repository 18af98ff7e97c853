"""What training one fold of ``tgml bench-live`` gives, kept on disk (``--cache DIR``), so that segmenter and checker
experiments re-run in seconds without training again.

A fold's entry holds its two learned graphs and their observed pre-conditions (`tgml.bench.live.observed`), its
detector's kept epoch, the trainer's causal outputs on the validation recordings (what the evidence is calibrated on)
and the live stepper's per-second outputs on every test and validation recording. Everything after the stepper
(evidence calibration, segmenter, checker) is recomputed from them, so the key holds only what the entry depends on:
the recipe, the fold's training and test recordings (by id and a digest of their features and per-second labels, so
a copy of the data folder keeps its cache and an edited file or step annotation misses it), the detector's training
settings, the seed, the learner, and a digest of the source that computes an entry (`code_digest`:
`tgml.bench.live.fold_training` and every first-party module it imports, at any depth; an edited trainer, model,
stepper, segmenter or learner misses the cache, an edited checker, evidence calibration, position prior or scoring
keeps it). The graph-generation annotations the graphs are learned from are not in the key: after editing them,
start from an empty cache folder.

An entry is a NumPy ``.npz`` archive read without pickle (`np.load` with ``allow_pickle=False``): its arrays, and one
JSON text for the rest. A cache folder is shared like the data folder it goes with, and unpickling a file runs
whatever code it names; an archive also checks each array's CRC, so a damaged entry is refused instead of read as
other figures.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from graphs.common.errors import InputError
from graphs.common.files import atomic_path
from tgml.bench.live.observed import ObservedGraphs
from tgml.bench.live.recordings import LiveRecording

CACHE_VERSION: Final = 3


@dataclass(frozen=True)
class TrainedFold:
    """One fold's training, as cached.

    Attributes:
        graph: the learned graph's file content (test fold left out).
        val_graph: the graph learned with the test fold and the validation recordings left out.
        kept_epoch: the detector's kept epoch.
        trainer_validation: validation recording -> ``(probs, targets)``, the trainer's causal outputs.
        test_outputs: test recording -> the stepper's ``(T, outputs)``.
        validation_outputs: validation recording -> the stepper's ``(T, outputs)``.
        observed: the observed pre-conditions' graphs (`tgml.bench.live.observed`); None when the fold had
            too few recordings for them, or when a run with ``--live-graph learned`` wrote the entry (a later run
            that needs them adds them).
    """

    graph: dict[str, Any]
    val_graph: dict[str, Any]
    kept_epoch: int
    trainer_validation: dict[str, tuple[np.ndarray, np.ndarray]]
    test_outputs: dict[str, np.ndarray]
    validation_outputs: dict[str, np.ndarray]
    observed: ObservedGraphs | None = None


def fold_key(recipe: str, fold: int, train: Sequence[LiveRecording], test: Sequence[LiveRecording],
             settings: Any, seed: int, learner: str) -> str:
    """A file name for the fold's entry: the recipe, the fold and a digest of everything the entry depends on."""
    def files(recordings: Sequence[LiveRecording]) -> list[tuple[str, str, str]]:
        return sorted((r.recording_id, _digest(r.features), _digest(r.labels)) for r in recordings)

    text = repr((CACHE_VERSION, recipe, fold, files(train), files(test), settings, seed, learner, code_digest()))
    return f"{recipe}-fold{fold}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.npz"


# The modules that compute an entry (its graphs, its detector and outputs, its observed pre-conditions): the source
# they and every first-party module they import run, at any depth, is in the key (`code_digest`).
ENTRY_PRODUCERS: Final = ("tgml.bench.live.fold_training",)
FIRST_PARTY: Final = ("graphs", "recognition", "streaming", "tgml")
# Imported on the way, but only by the live chain's checking of the cached outputs, which every run recomputes (the
# checkers, and the evidence they weigh, calibrated anew from the cached validation outputs): editing them, or what
# only they import, keeps the cache, so that experiments with them stay cheap.
READ_ONLY_OF_ENTRIES: Final = ("graphs/checker.py", "graphs/checker_settings.py", "graphs/probabilistic_checker.py",
                               "recognition/evidence.py", "recognition/evidence_calibration.py")
SOURCE_ROOT: Final = Path(__file__).resolve().parents[3]  # the folder holding the packages
_MODULE_NAME: Final = re.compile(rf"(?:{'|'.join(FIRST_PARTY)})(?:\.\w+)+(?::\w+)?")


def module_file(root: Path, name: str) -> Path | None:
    """The source file of first-party module ``name`` under ``root`` (a package's ``__init__.py``), or None: not
    first-party, or a name imported from a module rather than a module."""
    if name.split(".")[0] not in FIRST_PARTY:
        return None
    path = root.joinpath(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def imported_names(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports, anywhere in it (a function's own imports too), with each
    ``from m import n`` also as ``m.n`` (``n`` may be a module), and every module a string names the way the learner
    registry and the lazy exports import by name (``"tgml.learners.noisy_and.train:train_noisy_and"``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_NAME.fullmatch(node.value):
            names.add(node.value.partition(":")[0])
    return names


def entry_sources(root: Path) -> list[str]:
    """The source files an entry is computed by (POSIX paths from ``root``, sorted): `ENTRY_PRODUCERS` and the
    first-party modules they import at any depth, with their packages' ``__init__.py``, less `READ_ONLY_OF_ENTRIES`
    and what only those import."""
    found: dict[str, Path] = {}
    pending = list(ENTRY_PRODUCERS)
    while pending:
        name = pending.pop()
        parts = name.split(".")
        pending.extend(".".join(parts[:k]) for k in range(1, len(parts)))  # importing a module runs its packages
        path = module_file(root, name)
        if path is None:
            continue
        relative = path.relative_to(root).as_posix()
        if relative in found or relative in READ_ONLY_OF_ENTRIES:
            continue
        found[relative] = path
        pending.extend(imported_names(path))
    return sorted(found)


@functools.cache
def code_digest() -> str:
    """`source_digest` of this installation's packages, read once a run.

    Settings are in the key, and so must the code be: a detector or learner changed to beat the figures would
    otherwise be scored on the outputs of the one before it.
    """
    return source_digest(SOURCE_ROOT)


def source_digest(root: Path) -> str:
    """A digest of the paths and bytes of the source files under ``root`` that compute an entry (`entry_sources`)."""
    digest = hashlib.blake2b(digest_size=16)
    for relative in entry_sources(root):
        digest.update(relative.encode() + b"\0" + (root / relative).read_bytes() + b"\0")
    return digest.hexdigest()


def _digest(array: np.ndarray) -> str:
    """A digest of an array's shape, type and values (what the data is, not when its file was written)."""
    a = np.ascontiguousarray(array)
    return hashlib.blake2b(repr((a.shape, a.dtype.str)).encode() + a.tobytes(), digest_size=16).hexdigest()


META: Final = "meta"  # the archive's JSON text: everything of an entry that is not an array
KIND: Final = "tgml bench-live fold"
_ARRAYS: Final = ("trainer_probs", "trainer_targets", "test_outputs", "validation_outputs")


def entry_arrays(entry: TrainedFold) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """An entry as the archive holds it: the JSON-able part, and the arrays by archive name (``<group>.<k>``, the
    recordings of each group listed in that order in the JSON part)."""
    groups: dict[str, Mapping[str, np.ndarray]] = {
        "trainer_probs": {k: p for k, (p, _) in entry.trainer_validation.items()},
        "trainer_targets": {k: y for k, (_, y) in entry.trainer_validation.items()},
        "test_outputs": entry.test_outputs,
        "validation_outputs": entry.validation_outputs,
    }
    observed = None if entry.observed is None else {"graph": entry.observed.graph,
                                                     "val_graph": entry.observed.val_graph}
    meta = {"kind": KIND, "version": CACHE_VERSION, "graph": entry.graph, "val_graph": entry.val_graph,
            "kept_epoch": entry.kept_epoch, "observed": observed, **{g: list(arrays) for g, arrays in groups.items()}}
    arrays = {f"{g}.{k}": np.asarray(a) for g, group in groups.items() for k, a in enumerate(group.values())}
    return meta, arrays


def entry_from_arrays(meta: object, arrays: Mapping[str, np.ndarray]) -> TrainedFold:
    """The entry an archive holds (`entry_arrays` the other way).

    Raises:
        ValueError: the JSON part or the arrays are not those of an entry (says what is wrong).
    """
    if not isinstance(meta, dict) or meta.get("kind") != KIND:
        raise ValueError("not an entry of this cache")
    if meta.get("version") != CACHE_VERSION:
        raise ValueError(f"an entry of cache version {meta.get('version')!r}, not {CACHE_VERSION}")
    graphs = [meta.get("graph"), meta.get("val_graph")]
    observed = meta.get("observed")
    if observed is not None:
        graphs += [observed.get("graph"), observed.get("val_graph")] if isinstance(observed, dict) else [None]
    if not all(isinstance(g, dict) for g in graphs):
        raise ValueError("a graph that is not a JSON object")
    epoch = meta.get("kept_epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise ValueError("kept_epoch is not an integer")
    groups: dict[str, dict[str, np.ndarray]] = {}
    for group in _ARRAYS:
        ids = meta.get(group)
        if not isinstance(ids, list) or not all(isinstance(k, str) for k in ids):
            raise ValueError(f"{group}: not a list of recording ids")
        names = [f"{group}.{k}" for k in range(len(ids))]
        missing = [n for n in names if n not in arrays]
        if missing:
            raise ValueError(f"no array {missing[0]}")
        groups[group] = {k: arrays[n] for k, n in zip(ids, names, strict=True)}
        if not all(a.ndim == 2 and a.dtype == np.float32 for a in groups[group].values()):
            raise ValueError(f"{group}: an array that is not a (T, C) float32 table")
    if not groups["trainer_probs"].keys() == groups["trainer_targets"].keys() == groups["validation_outputs"].keys():
        raise ValueError("the trainer's outputs and targets and the stepper's are of different validation recordings")
    _check_tables(groups)
    return TrainedFold(
        graph=meta["graph"], val_graph=meta["val_graph"], kept_epoch=epoch,
        trainer_validation={k: (p, groups["trainer_targets"][k]) for k, p in groups["trainer_probs"].items()},
        test_outputs=groups["test_outputs"], validation_outputs=groups["validation_outputs"],
        observed=None if observed is None else ObservedGraphs(observed["graph"], observed["val_graph"]))


def _check_tables(groups: Mapping[str, Mapping[str, np.ndarray]]) -> None:
    """Refuse tables that cannot be one fold's: an archive's CRC holds for arrays cut short or edited and saved again,
    and those gave a traceback further on, or other figures without a word.

    Raises:
        ValueError: the first fault, naming the array.
    """
    outputs = [a for g in ("trainer_probs", "test_outputs", "validation_outputs") for a in groups[g].values()]
    targets = list(groups["trainer_targets"].values())
    widths, classes = {a.shape[1] for a in outputs}, {a.shape[1] for a in targets}
    count = min(classes, default=0)
    for group, arrays in groups.items():
        for rid, table in arrays.items():
            if not (np.isfinite(table).all() and ((table >= 0) & (table <= 1)).all()):
                raise ValueError(f"{group} of {rid}: values that are no probabilities (outside 0-1, or not finite)")
            # Every row a distribution over the classes (the outputs' first columns, a softmax; the targets): a
            # table zeroed or scaled keeps its shape and its range.
            if count and table.shape[1] >= count and not np.allclose(table[:, :count].sum(axis=1), 1.0, atol=1e-3):
                raise ValueError(f"{group} of {rid}: rows whose class probabilities do not sum to 1")
    # The outputs: the classes' probabilities, then (with the done head) each class's done state.
    fits = len(widths) <= 1 and len(classes) <= 1 and all(w in (c, 2 * c) for w in widths for c in classes)
    if not fits:
        raise ValueError("tables of different widths: outputs of other detectors, or cut short")
    for rid, outputs_of in groups["validation_outputs"].items():
        rows = {outputs_of.shape[0], groups["trainer_probs"][rid].shape[0], groups["trainer_targets"][rid].shape[0]}
        if len(rows) > 1:
            raise ValueError(f"the tables of validation recording {rid} differ in length ({sorted(rows)} rows)")


def load_fold(folder: Path, key: str, test: Sequence[str] = (), validation_within: Sequence[str] = (),
              seconds: Mapping[str, int] | None = None, classes: int | None = None,
              width: int | None = None) -> TrainedFold | None:
    """The cached entry (None when absent; a file that does not read as one, or one of another fold, is an error
    naming it).

    Args:
        folder: the cache folder.
        key: the entry's file name (`fold_key`).
        test: the fold's test recordings: the entry must hold outputs of exactly these (empty: not checked).
        validation_within: the fold's training recordings: the entry's validation recordings must be among them.
        seconds: recording -> its feature vectors: each table of a recording must have that many rows (None: not
            checked).
        classes: the recipe's classes (background included): the width of the targets (None: not checked).
        width: the detector's outputs per vector (the classes, then with the done head each one's done state; None:
            not checked).
    """
    path = folder / key
    if not path.is_file():
        if path.exists():  # said before the fold trains, not when its entry cannot be written at the end
            raise InputError(f"--cache {folder}: {path.name} is not a regular file; remove it")
        return None
    try:
        # allow_pickle=False: an array of Python objects is refused, never unpickled.
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):  # a lone .npy array
            raise ValueError("not an archive of arrays")
        with archive:
            arrays = {name: archive[name] for name in archive.files}
        text = arrays.pop(META, None)
        if text is None:  # an archive of arrays, of something else
            raise InputError(f"--cache {folder}: {path.name} is not a cached fold (no JSON part); remove it")
        if text.ndim != 0 or text.dtype.kind != "U":
            raise ValueError("its JSON part is not a text")
        entry = entry_from_arrays(json.loads(str(text[()])), arrays)
    # A damaged archive (a CRC that fails, a cut zip), an array of objects, a JSON part that is not an entry's.
    # A header claiming a huge array: MemoryError; a record's compression method changed by a flipped bit:
    # NotImplementedError or zlib.error; JSON nested too deep: RecursionError.
    except (OSError, EOFError, ValueError, MemoryError, NotImplementedError, RecursionError, zlib.error,
            zipfile.BadZipFile) as e:
        raise InputError(f"--cache {folder}: {path.name} does not read as a cached fold ({e}); remove it") from e
    other = set(entry.test_outputs) != set(test) or not set(entry.validation_outputs) <= set(validation_within)
    if test and other:
        raise InputError(f"--cache {folder}: {path.name} holds the outputs of other recordings than its fold's (an "
                         "entry copied under another name?); remove it")
    tables = [*entry.test_outputs.items(), *entry.validation_outputs.items(),
              *((rid, y) for rid, (_, y) in entry.trainer_validation.items())]
    for rid, table in tables:
        if seconds is not None and rid in seconds and table.shape[0] != seconds[rid]:
            raise InputError(f"--cache {folder}: {path.name} holds {table.shape[0]} rows for {rid}, whose features "
                             f"have {seconds[rid]}; remove it")
    if classes is not None and any(y.shape[1] != classes for _, (_, y) in entry.trainer_validation.items()):
        raise InputError(f"--cache {folder}: {path.name} holds targets of another number of classes than the "
                         f"recipe's {classes}; remove it")
    outputs = [*entry.test_outputs.values(), *entry.validation_outputs.values(),
               *(p for p, _ in entry.trainer_validation.values())]
    if width is not None and any(table.shape[1] != width for table in outputs):
        raise InputError(f"--cache {folder}: {path.name} holds outputs of another width than the detector's {width} "
                         "(its done head on or off?); remove it")
    return entry


def save_fold(folder: Path, key: str, entry: TrainedFold) -> None:
    """Write the entry atomically (a run stopped half-way leaves no broken entry; a full disk is one line naming the
    file, and leaves no temporary file)."""
    meta, arrays = entry_arrays(entry)
    with atomic_path(folder / key, what="cached fold") as tmp, tmp.open("wb") as f:
        contents: dict[str, Any] = {META: np.array(json.dumps(meta, allow_nan=False)), **arrays}
        np.savez(f, **contents)
