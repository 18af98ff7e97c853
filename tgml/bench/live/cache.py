"""What training one fold of ``tgml bench-live`` gives, kept on disk (``--cache DIR``), so that segmenter and checker
experiments re-run in seconds without training again.

A fold's entry holds its two learned graphs and their observed pre-conditions (`tgml.bench.live.observed`), its
detector's kept epoch, the trainer's causal outputs on the validation recordings (what the evidence is calibrated on)
and the live stepper's per-second outputs on every test and validation recording. Everything after the stepper
(evidence calibration, segmenter, checker) is recomputed from them, so the key holds only what the entry depends on:
the recipe, the fold's training and test recordings (by id and a digest of their features and per-second labels, so
a copy of the data folder keeps its cache and an edited file or step annotation misses it), the detector's training
settings, the seed and the learner. The graph-generation annotations the graphs are learned from are not in the key:
after editing them, start from an empty cache folder.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from graphs.common.errors import InputError, interrupt_behind
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
        observed: the graphs the live chain checks against (`tgml.bench.live.observed`); None when the fold had
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

    text = repr((CACHE_VERSION, recipe, fold, files(train), files(test), settings, seed, learner))
    return f"{recipe}-fold{fold}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.pkl"


def _digest(array: np.ndarray) -> str:
    """A digest of an array's shape, type and values (what the data is, not when its file was written)."""
    a = np.ascontiguousarray(array)
    return hashlib.blake2b(repr((a.shape, a.dtype.str)).encode() + a.tobytes(), digest_size=16).hexdigest()


def load_fold(folder: Path, key: str) -> TrainedFold | None:
    """The cached entry (None when absent; a file that does not read as one is an error naming it)."""
    path = folder / key
    if not path.is_file():
        return None
    try:
        with path.open("rb") as f:
            entry = pickle.load(f)  # noqa: S301 (the user's own cache folder, written by `save_fold`)
    # A damaged file (a frame length of gigabytes: MemoryError) or one of another version of this project (a class
    # since moved: ImportError, AttributeError; changed fields: TypeError) can fail in any way unpickling has.
    except Exception as e:
        if interrupt_behind(e) is not None:  # a signal while the entry's classes were being made: not the file's fault
            raise
        raise InputError(f"--cache {folder}: {path.name} does not read as a cached fold ({e}); remove it") from e
    if not isinstance(entry, TrainedFold):
        raise InputError(f"--cache {folder}: {path.name} is not a cached fold; remove it")
    return entry


def save_fold(folder: Path, key: str, entry: TrainedFold) -> None:
    """Write the entry atomically (a run stopped half-way leaves no broken entry; a full disk is one line naming the
    file, and leaves no temporary file)."""
    with atomic_path(folder / key, what="cached fold") as tmp, tmp.open("wb") as f:
        pickle.dump(entry, f, protocol=pickle.HIGHEST_PROTOCOL)
