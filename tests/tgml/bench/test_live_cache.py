"""A bench-live cache entry is read without pickle: one that cannot be read (damaged, of another version or another
fold, or a pickle that would run code) is one error naming the file, never a traceback, never code run."""

from __future__ import annotations

import json
import pickle
import shutil
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from graphs.common.errors import InputError
from tgml.bench.live.cache import SOURCE_ROOT, TrainedFold, load_fold, save_fold, source_digest
from tgml.bench.live.observed import ObservedGraphs

GRAPH = {"format": "tgml-graph", "steps": [{"id": 0, "name": "a"}], "edges": []}


def entry() -> TrainedFold:
    """A fold of 2 classes as a detector with the done head writes it: per second the classes' softmax, then each
    class's done state; the targets one-hot."""
    rng = np.random.default_rng(0)

    def outputs(t: int) -> np.ndarray:
        probs = rng.random((t, 2), dtype=np.float32)
        return np.hstack([probs / probs.sum(axis=1, keepdims=True), rng.random((t, 2), dtype=np.float32)])

    targets = np.eye(2, dtype=np.float32)[rng.integers(0, 2, 5)]
    return TrainedFold(GRAPH, GRAPH | {"edges": [[0, 0]]}, 40, {"v1": (outputs(5), targets)},
                       {"t1": outputs(7), "t2": outputs(3)}, {"v1": outputs(5)}, ObservedGraphs(GRAPH, GRAPH))


class RunsCode:
    """What a hostile cache file holds: unpickling it touches a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (str(self.marker),))


def test_an_entry_reads_back_as_it_was_written(tmp_path: Path) -> None:
    written = entry()
    save_fold(tmp_path, "e.npz", written)
    read = load_fold(tmp_path, "e.npz", ["t1", "t2"], ["v1", "x"])
    assert read is not None
    assert (read.graph, read.val_graph, read.kept_epoch, read.observed) == (
        written.graph, written.val_graph, written.kept_epoch, written.observed)
    for got, want in ((read.test_outputs, written.test_outputs), (read.validation_outputs, written.validation_outputs)):
        assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    assert all(np.array_equal(a, b) for k in written.trainer_validation
               for a, b in zip(read.trainer_validation[k], written.trainer_validation[k], strict=True))
    assert load_fold(tmp_path, "absent.npz") is None


def test_a_pickle_in_the_cache_is_refused_without_running_it(tmp_path: Path) -> None:
    # A cache folder travels with its data folder: unpickling a shared entry ran whatever code it named.
    marker = tmp_path / "ran"
    (tmp_path / "e.npz").write_bytes(pickle.dumps(RunsCode(marker)))
    with pytest.raises(InputError, match=rf"--cache {tmp_path}: e.npz does not read as a cached fold .*; remove it"):
        load_fold(tmp_path, "e.npz")
    assert not marker.exists()
    # ... nor inside an archive, as an array of objects.
    np.savez(tmp_path / "o.npz", meta=np.array([RunsCode(marker)], dtype=object))
    with pytest.raises(InputError, match="o.npz does not read as a cached fold"):
        load_fold(tmp_path, "o.npz")
    assert not marker.exists()


@pytest.mark.parametrize(
    "content",
    [b"PK\x03\x04 cut short", b"\x80\x05\x95 damaged", b""],
    ids=["cut-zip", "damaged", "empty"],
)
def test_an_unreadable_entry_is_one_error_naming_the_file(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "e.npz").write_bytes(content)
    with pytest.raises(InputError, match=rf"--cache {tmp_path}: e.npz does not read as a cached fold .*; remove it"):
        load_fold(tmp_path, "e.npz")


def test_a_damaged_entry_is_refused_not_read_as_other_figures(tmp_path: Path) -> None:
    # Bytes flipped inside an array: read as it was, the run printed other figures with exit 0.
    save_fold(tmp_path, "e.npz", entry())
    data = bytearray((tmp_path / "e.npz").read_bytes())
    with zipfile.ZipFile(tmp_path / "e.npz") as z:
        info = z.getinfo("test_outputs.0.npy")
    middle = info.header_offset + 30 + len(info.filename) + info.file_size // 2
    data[middle:middle + 8] = bytes(8)
    (tmp_path / "e.npz").write_bytes(bytes(data))
    with pytest.raises(InputError, match="e.npz does not read as a cached fold"):
        load_fold(tmp_path, "e.npz")


def test_an_entry_of_another_kind_version_or_fold_is_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "other.npz", meta=np.array(json.dumps({"not": "a fold"})))
    with pytest.raises(InputError, match="other.npz does not read as a cached fold \\(not an entry of this cache\\)"):
        load_fold(tmp_path, "other.npz")
    np.savez(tmp_path / "bare.npz", x=np.zeros(3))
    with pytest.raises(InputError, match="bare.npz is not a cached fold"):
        load_fold(tmp_path, "bare.npz")
    save_fold(tmp_path, "e.npz", entry())
    # Another fold's entry copied under this fold's name: a traceback (KeyError) further on, before.
    with pytest.raises(InputError, match="e.npz holds the outputs of other recordings than its fold's"):
        load_fold(tmp_path, "e.npz", ["t1", "t3"], ["v1"])
    with pytest.raises(InputError, match="e.npz holds the outputs of other recordings"):
        load_fold(tmp_path, "e.npz", ["t1", "t2"], ["v2"])


def test_a_folder_where_an_entry_goes_is_refused_before_the_fold_trains(tmp_path: Path) -> None:
    (tmp_path / "e.npz").mkdir()
    with pytest.raises(InputError, match=rf"--cache {tmp_path}: e.npz is not a regular file; remove it"):
        load_fold(tmp_path, "e.npz")


def test_a_record_whose_compression_method_was_flipped_is_refused(tmp_path: Path) -> None:
    # zipfile raised NotImplementedError ("That compression method is not supported"): a traceback.
    save_fold(tmp_path, "e.npz", entry())
    data = bytearray((tmp_path / "e.npz").read_bytes())
    directory = data.index(b"PK\x01\x02")  # the first record's entry in the archive's central directory
    data[directory + 10:directory + 12] = (99).to_bytes(2, "little")
    (tmp_path / "e.npz").write_bytes(bytes(data))
    with pytest.raises(InputError, match="e.npz does not read as a cached fold"):
        load_fold(tmp_path, "e.npz")


def test_an_entry_whose_validation_outputs_are_of_other_recordings_is_refused(tmp_path: Path) -> None:
    written = entry()
    mixed = TrainedFold(written.graph, written.val_graph, 40, written.trainer_validation, written.test_outputs,
                        {"v2": written.validation_outputs["v1"]})
    save_fold(tmp_path, "e.npz", mixed)
    with pytest.raises(InputError, match="of different validation recordings"):
        load_fold(tmp_path, "e.npz")


def test_tables_cut_short_or_edited_are_refused_though_their_crcs_hold(tmp_path: Path) -> None:
    # Saved again after editing, an archive's CRCs hold: a cut table gave an IndexError traceback, a shorter test
    # output other figures with exit 0.
    good = entry()
    (p, y), = good.trainer_validation.values()
    cases = {
        "few-rows": replace(good, trainer_validation={"v1": (p[:2], y[:2])}),
        "narrow": replace(good, test_outputs={"t1": good.test_outputs["t1"][:, :3], "t2": good.test_outputs["t2"]}),
        "negative": replace(good, validation_outputs={"v1": good.validation_outputs["v1"] - 2}),
        "nan": replace(good, test_outputs={"t1": good.test_outputs["t1"] * np.nan, "t2": good.test_outputs["t2"]}),
    }
    for name, damaged in cases.items():
        save_fold(tmp_path, f"{name}.npz", damaged)
    with pytest.raises(InputError, match=r"few-rows.npz does not read as a cached fold \(the tables of validation "
                                         r"recording v1 differ in length \(\[2, 5\] rows\)\); remove it"):
        load_fold(tmp_path, "few-rows.npz")
    with pytest.raises(InputError, match="narrow.npz does not read as a cached fold .tables of different widths"):
        load_fold(tmp_path, "narrow.npz")
    for name in ("negative", "nan"):
        with pytest.raises(InputError, match=f"{name}.npz does not read as a cached fold .* no probabilities"):
            load_fold(tmp_path, f"{name}.npz")
    # Consistent, but not of the fold's recordings as they are: the rows against each recording's features.
    shorter = replace(good, test_outputs={"t1": good.test_outputs["t1"][:5], "t2": good.test_outputs["t2"]})
    save_fold(tmp_path, "shorter.npz", shorter)
    with pytest.raises(InputError, match=f"--cache {tmp_path}: shorter.npz holds 5 rows for t1, whose features have "
                                         "7; remove it"):
        load_fold(tmp_path, "shorter.npz", ["t1", "t2"], ["v1"], {"t1": 7, "t2": 3, "v1": 5}, 2)
    save_fold(tmp_path, "e.npz", good)
    with pytest.raises(InputError, match="holds targets of another number of classes than the recipe's 3"):
        load_fold(tmp_path, "e.npz", ["t1", "t2"], ["v1"], {"t1": 7, "t2": 3, "v1": 5}, 3)
    assert load_fold(tmp_path, "e.npz", ["t1", "t2"], ["v1"], {"t1": 7, "t2": 3, "v1": 5}, 2, 4) is not None
    # Zeroed, or every table narrowed alike to the classes alone (the done states dropped): consistent, not genuine.
    zeroed = replace(good, test_outputs={"t1": good.test_outputs["t1"] * 0, "t2": good.test_outputs["t2"]})
    save_fold(tmp_path, "zeroed.npz", zeroed)
    with pytest.raises(InputError, match="zeroed.npz does not read .* rows whose class probabilities do not sum to 1"):
        load_fold(tmp_path, "zeroed.npz")
    narrowed = replace(good, trainer_validation={"v1": (p[:, :2], y)},
                       test_outputs={k: a[:, :2] for k, a in good.test_outputs.items()},
                       validation_outputs={k: a[:, :2] for k, a in good.validation_outputs.items()})
    save_fold(tmp_path, "narrowed.npz", narrowed)
    with pytest.raises(InputError, match="narrowed.npz holds outputs of another width than the detector's 4 .its done "
                                         "head on or off.."):
        load_fold(tmp_path, "narrowed.npz", ["t1", "t2"], ["v1"], {"t1": 7, "t2": 3, "v1": 5}, 2, 4)


def test_editing_the_code_that_computes_an_entry_misses_the_cache_and_the_checkers_code_keeps_it(
    tmp_path: Path,
) -> None:
    # The key held settings, not code: a trainer or learner edited to beat the figures was scored on the cached
    # outputs of the one before it, silently. Copies of the real packages, edited as a researcher would.
    for package in ("graphs", "recognition", "streaming", "tgml"):
        shutil.copytree(SOURCE_ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    before = source_digest(tmp_path)
    assert source_digest(tmp_path) == before  # the same files, the same key
    for kept in ("graphs/probabilistic_checker.py", "recognition/evidence_calibration.py", "tgml/bench/live/scores.py",
                 "tgml/bench/live/selection.py", "tgml/bench/live/bench.py", "recognition/position_prior.py",
                 "streaming/transport.py"):
        with (tmp_path / kept).open("a") as handle:
            handle.write("\n# an experiment on what reads an entry\n")
        assert source_digest(tmp_path) == before, kept
    # The default learner is imported by name (the registry's strings), its queries by the learner: both found.
    for missed in ("recognition/train.py", "recognition/model.py", "recognition/segmenter.py",
                   "tgml/learners/noisy_and/train.py", "graphs/procedure_queries.py", "graphs/postprocess.py",
                   "tgml/bench/live/fold_training.py", "tgml/bench/live/observed.py", "tgml/bench/live/detector.py"):
        with (tmp_path / missed).open("a") as handle:
            handle.write("\n# an edit of what computes an entry\n")
        after = source_digest(tmp_path)
        assert after != before, missed
        before = after
