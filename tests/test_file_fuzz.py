"""Property-based fuzzing of every file loader: any bytes give the loaded object or one `InputError`, nothing else.

One loader per file kind (detector checkpoints, ``.npy`` feature arrays, split files, task graphs, annotation
files, eval cache entries, CURVE key files) is fed random bytes, truncations and byte flips of a valid file, and
changes of its structure: for the JSON kinds, a field replaced by a value of another type or an absurd one (nested
100,000 deep, 10^30, NaN, a huge string); for ``.npy``, a header announcing another shape or dtype; for checkpoints,
a changed field of the stored dictionary. Before the loaders were hardened such inputs ended in KeyError,
IndexError, struct.error, AttributeError, MemoryError, OverflowError and RecursionError.

Every profile is derandomised with a bounded example count (the same inputs every run), and the whole file runs in
a few seconds.
"""

from __future__ import annotations

import copy
import io
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import zmq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from graphs.annotations import load_annotations
from graphs.common.array_files import npy_shape, read_npy
from graphs.common.errors import InputError
from graphs.task_graph import load_graph
from recognition.checkpoint import load_detector, save_detector
from recognition.feature_folders import load_split
from recognition.model import MiniROAD, MiniROADConfig
from streaming.curve_keys import certificate, read_key_file
from streaming.demo.paths import DEMO_DIR, default_demo_paths
from streaming.messages import Heartbeat, KeyStepEvent, KeyStepOnset
from streaming.offline.eval_run import DetectorRecord, EvalVideo, load_cache_entry, record_json
from streaming.offline.eval_scores import AnnotatedSegment

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
GRAPH, _ = default_demo_paths()
DEEP = "[" * 100_000 + "]" * 100_000
ODD_VALUES: list[Any] = [None, True, -1, 0, 2**31, 10**30, -(10**30), 1.5, 1e308, -1e308, "", "x" * 100_000,
                         "\x1b[2J", "../../etc/passwd", [], [None], [[[]]], {}, {"a": 1}, [1] * 1000,
                         {"": None}, ["a", "a"], [-1], ["x" * 600]]


def byte_mutation(valid: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes, a truncation, byte flips or an insertion in ``valid``."""
    size = len(valid)

    @st.composite
    def mutate(draw: st.DrawFn) -> bytes:
        rng = random.Random(draw(st.integers(0, 2**32 - 1)))
        kind = rng.randrange(4)
        if kind == 0:
            return rng.randbytes(rng.randrange(4096))
        if kind == 1:
            return valid[: rng.randrange(size)]
        data = bytearray(valid)
        if kind == 2:
            for _ in range(rng.randint(1, 16)):
                data[rng.randrange(size)] = rng.randrange(256)
            return bytes(data)
        at = rng.randrange(size)
        return bytes(data[:at] + rng.randbytes(rng.randrange(64)) + data[at:])

    return mutate()


def json_mutation(valid: Any) -> st.SearchStrategy[bytes]:
    """``valid`` with 1-3 values anywhere in it replaced, dropped or given a sibling, as JSON text."""

    def paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        found = [here]
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in children:
            found += paths(child, (*here, key))
        return found

    @st.composite
    def mutate(draw: st.DrawFn) -> bytes:
        rng = random.Random(draw(st.integers(0, 2**32 - 1)))
        data = json.loads(json.dumps(valid))
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(paths(data)[1:] or [()])
            if not path:
                break
            parent = data
            for key in path[:-1]:
                parent = parent[key]
            action = rng.randrange(3)
            value = copy.deepcopy(rng.choice(ODD_VALUES))  # a copy: a later change must not reach the pool
            if action == 0 or isinstance(parent, list):
                parent[path[-1]] = value
            elif action == 1:
                parent.pop(path[-1])
            else:
                parent[rng.choice(["extra", "", "version", "format"])] = value
        return json.dumps(data).encode()

    return mutate()


def refuses_or_loads(load: Callable[[Path], object], path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and load it: the object, or one `InputError` (any other exception fails)."""
    path.write_bytes(data)
    try:
        load(path)
    except InputError as err:
        assert "\n" not in str(err) and str(err)


# -- JSON kinds -------------------------------------------------------------------------------------------------------
GRAPH_JSON = json.loads(GRAPH.read_text())
ANNOTATIONS_JSON = json.loads((DEMO_DIR / "demo_annotations.json").read_text())
SPLIT_JSON = {"train": ["a", "b"], "test": ["c"], "class_names": ["background", "x"], "class_step_ids": [None, 3],
              "fps": 5.0, "feature_extractor": "light-v1", "scenario": "tea"}
EVAL_VIDEO = EvalVideo("v", Path("v.mp4"), (AnnotatedSegment(1, 0.0, 2.0, False), AnnotatedSegment(2, 2.0, 3.5, True)))
CACHE_JSON = record_json(DetectorRecord("v", 17, (
    (0.0, Heartbeat("eval", 0, 1.0, "s1", (), None, 0, 0, 0.0, False)),
    (2.2, KeyStepOnset("eval", 1, 1.1, "s1", (), 2, "b", 2.0, 0.8, 0, (), False, (1, 2), (0.2, 0.1), 0.9)),
    (3.4, KeyStepEvent("eval", 2, 1.2, 2, "b", 2.1, 3.4, 0.9, 0, "s1", (2,), (1, 2), (0.2, 0.1), 0.95)),
    (3.4, Heartbeat("eval", 3, 1.3, "s1", (2,), None, 17, 0, 5.0, True)),
)))
JSON_KINDS: dict[str, tuple[Callable[[Path], object], Any]] = {
    "graph": (load_graph, GRAPH_JSON),
    "annotations": (load_annotations, ANNOTATIONS_JSON),
    "split": (load_split, SPLIT_JSON),
    "eval-cache": (lambda p: load_cache_entry(p, EVAL_VIDEO), CACHE_JSON),
}


@pytest.mark.parametrize("kind", JSON_KINDS)
def test_the_valid_json_files_load(kind: str, tmp_path: Path) -> None:
    load, valid = JSON_KINDS[kind]
    path = tmp_path / "f.json"
    path.write_text(json.dumps(valid))
    load(path)  # the fuzzing starts from files that load


@pytest.mark.parametrize("kind", JSON_KINDS)
def test_json_loaders_refuse_mutated_bytes_in_one_line(kind: str, tmp_path: Path) -> None:
    load, valid = JSON_KINDS[kind]

    @FUZZ
    @given(byte_mutation(json.dumps(valid).encode()))
    @example(DEEP.encode())
    @example(b"\xff\xfe")
    @example(b"")
    def check(data: bytes) -> None:
        refuses_or_loads(load, tmp_path / "f.json", data)

    check()


@pytest.mark.parametrize("kind", JSON_KINDS)
def test_json_loaders_refuse_mutated_fields_in_one_line(kind: str, tmp_path: Path) -> None:
    load, valid = JSON_KINDS[kind]

    @FUZZ
    @given(json_mutation(valid))
    def check(data: bytes) -> None:
        refuses_or_loads(load, tmp_path / "f.json", data)

    check()


def test_a_deeply_nested_eval_cache_entry_is_refused(tmp_path: Path) -> None:
    # It gave RecursionError on every later eval of that video, until --no-cache.
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(CACHE_JSON | {"messages": []})[:-1] + ', "deep": ' + DEEP + "}")
    with pytest.raises(InputError, match="nested too deeply"):
        load_cache_entry(path, EVAL_VIDEO)


def test_an_eval_cache_entry_claiming_10_to_the_30_frames_is_refused(tmp_path: Path) -> None:
    # It was trusted: eval reported a video of 10^30 frames.
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(CACHE_JSON | {"frames": 10**30}))
    with pytest.raises(InputError, match=r"field 'frames' must be a count of frames in 0\.\.10000000"):
        load_cache_entry(path, EVAL_VIDEO)


def test_an_eval_cache_entry_that_is_no_finished_run_is_refused(tmp_path: Path) -> None:
    # Its messages emptied, or its frame count raised to 9,999,999 for a 393-row file: served as the video's result.
    path = tmp_path / "entry.json"
    changes: tuple[dict[str, object], ...] = ({"messages": []}, {"frames": 9_999_999},
                                              {"messages": CACHE_JSON["messages"][:-1]},
                                              {"messages": CACHE_JSON["messages"][-1:]})
    for changed in changes:
        path.write_text(json.dumps(CACHE_JSON | changed))
        with pytest.raises(InputError, match=r"not the record of a finished run \((it must end with the stream's "
                                             r"last heartbeat, counting its \d+ frames|0 key-steps sent for the 1 of "
                                             r"its history)\)"):
            load_cache_entry(path, EVAL_VIDEO)


def test_an_eval_cache_entry_of_a_run_stopped_half_way_is_refused(tmp_path: Path) -> None:
    # Its last heartbeat ends the session as a video's end does: only `stopped` tells that the video was not seen whole.
    *before, last = CACHE_JSON["messages"]
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(CACHE_JSON | {"messages": [*before, last | {"payload": last["payload"] |
                                                                            {"stopped": True}}]}))
    with pytest.raises(InputError, match=r"not the record of a finished run \(its detector was stopped before the "
                                         r"video's end\)"):
        load_cache_entry(path, EVAL_VIDEO)


# -- .npy feature arrays ----------------------------------------------------------------------------------------------
def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def npy_with_header(header: str, data: bytes) -> bytes:
    """An ``.npy`` file of format 1.0 with the given header text (any text: numpy's writer is bypassed)."""
    text = header.encode("latin1")
    text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data


FEATURES = np.arange(40 * 6, dtype=np.float32).reshape(40, 6)
DESCRS = ["'<f4'", "'<f8'", "'|b1'", "'<i8'", "'|O'", "'<c8'", "'<U5'", "'V8'", "[('a', '<f4')]", "'>f4'", "'x'",
          "('<f4', (2,))", "7"]
SHAPES = ["(40, 6)", "(6, 40)", "(-5, 6)", "(10**12, 24)", "(1000000000000, 24)", "(240,)", "()", "(2, 3, 40)",
          "(40, 6.0)", "(40, -6)", "None", "(0, 6)", "(99999999999999999999999999, 0)", "'x'"]


@st.composite
def npy_header_mutation(draw: st.DrawFn) -> bytes:
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    header = (f"{{'descr': {rng.choice(DESCRS)}, 'fortran_order': {rng.choice(['False', 'True', '1', 'None'])}, "
              f"'shape': {rng.choice(SHAPES)}, }}")
    data = FEATURES.tobytes()
    return npy_with_header(header, data[: rng.choice([len(data), len(data) // 2, 0, len(data) + 8])])


@pytest.mark.parametrize("loader", ["read_npy", "npy_shape"])
def test_npy_loaders_check_the_header_before_allocating(loader: str, tmp_path: Path) -> None:
    load = {"read_npy": lambda p: read_npy(p, "features"), "npy_shape": lambda p: npy_shape(p, "features")}[loader]
    assert np.array_equal(read_npy(_write(tmp_path / "ok.npy", npy_bytes(FEATURES)), "features"), FEATURES)

    @FUZZ
    @given(st.one_of(byte_mutation(npy_bytes(FEATURES)), npy_header_mutation()))
    def check(data: bytes) -> None:
        refuses_or_loads(load, tmp_path / "f.npy", data)

    check()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("name", "data", "message"), [
    ("npz", None, "is an .npz archive (np.savez), not an .npy array"),
    # Called "an .npz archive (np.savez)" as well: a checkpoint is a zip archive too.
    ("checkpoint", default_demo_paths()[1].read_bytes(), "is a torch file (torch.save: a detector checkpoint, or "
                                                         "weights), not an .npy array; save the features with np.save"),
    ("zip-of-text", None, "is a zip archive, not an .npy array"),
    ("huge", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (10**12, 24), }", b""),
     "damaged .npy header"),
    ("absurd", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 24), }", b"\0" * 96),
     "announce shape (1000000000000, 24) (96000000000000 bytes), more than"),
    ("negative", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-5, 24), }", b"\0" * 96),
     "damaged .npy header"),
    ("cut", npy_bytes(FEATURES)[:-8], "but the file holds 952: cut short"),
    ("pickled", npy_bytes(np.array([{"a": 1}], dtype=object)),
     "have dtype object, expected floats (float16, float32, float64, ...), integers or unsigned integers"),
    ("text", b"not an array", "not a NumPy .npy file"),
])
def test_each_damaged_array_is_named(name: str, data: bytes | None, message: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.npy"
    if name == "zip-of-text":
        import zipfile

        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("notes.txt", "hello")
    elif data is None:
        with path.open("wb") as handle:
            np.savez(handle, a=FEATURES)
    else:
        path.write_bytes(data)
    with pytest.raises(InputError, match=f"^{path}: .*{message.replace('(', '[(]').replace(')', '[)]')}"):
        read_npy(path, "features")


# -- detector checkpoints ---------------------------------------------------------------------------------------------
def small_checkpoint(path: Path) -> dict[str, Any]:
    """A small real checkpoint (a 6-wide, 3-class MiniROAD), and its stored dictionary."""
    model = MiniROAD(MiniROADConfig(6, 8, 8, 3, 0.0))
    save_detector(path, model, ["background", "a", "b"], [None, 1, 2], "light-v1", 5.0, {"segmenter": {}}, "tea")
    return torch.load(path, weights_only=True)


CHECKPOINT_VALUES: list[Any] = [*ODD_VALUES[:12], torch.zeros(3), torch.full((2,), float("nan")),
                                torch.zeros(2, dtype=torch.int64), {"input_dim": 10**12, "embed_dim": 8,
                                                                    "hidden_dim": 8, "num_classes": 3, "dropout": 0.0}]


@st.composite
def checkpoint_mutation(draw: st.DrawFn, stored: dict[str, Any]) -> bytes:
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    data = {**stored, "state_dict": dict(stored["state_dict"]), "config": dict(stored["config"])}
    for _ in range(rng.randint(1, 3)):
        where = rng.choice([d for d in (data, data.get("state_dict"), data.get("config")) if isinstance(d, dict)])
        key = rng.choice([*where, "extra"])
        if rng.random() < 0.2:
            where.pop(key, None)
        else:
            where[key] = rng.choice(CHECKPOINT_VALUES)
    buffer = io.BytesIO()
    torch.save(data, buffer)
    return buffer.getvalue()


def test_checkpoint_loader_refuses_any_bytes_in_one_line(tmp_path: Path) -> None:
    valid_path = tmp_path / "valid.pt"
    stored = small_checkpoint(valid_path)
    valid = valid_path.read_bytes()

    @FUZZ
    @given(st.one_of(byte_mutation(valid), checkpoint_mutation(stored)))
    @example(b"hello")  # the 5-byte text file that ended in KeyError
    @example(b"")
    def check(data: bytes) -> None:
        refuses_or_loads(load_detector, tmp_path / "d.pt", data)

    check()


def test_a_config_announcing_huge_weights_is_refused_before_the_model_is_built(tmp_path: Path) -> None:
    stored = small_checkpoint(tmp_path / "valid.pt")
    stored["config"] = {**stored["config"], "input_dim": 10**12}
    torch.save(stored, tmp_path / "huge.pt")
    with pytest.raises(InputError, match=r"huge.pt: field 'config' announces a model of 29802.3 GiB"):
        load_detector(tmp_path / "huge.pt")  # building the model first would ask for 32 TB


# -- CURVE key files --------------------------------------------------------------------------------------------------
def test_key_file_loader_refuses_any_bytes_in_one_line(tmp_path: Path) -> None:
    public, secret = zmq.curve_keypair()
    valid = certificate(public, secret)
    assert read_key_file(_write(tmp_path / "ok.key_secret", valid), "--curve-secret").secret == secret

    @FUZZ
    @given(byte_mutation(valid))
    @example(b"public-key = " + b"\xff" * 40)
    @example(b"public-key = \"" + b"#" * 40 + b"\"")
    def check(data: bytes) -> None:
        refuses_or_loads(lambda p: read_key_file(p, "--curve-secret"), tmp_path / "k.key_secret", data)

    check()
