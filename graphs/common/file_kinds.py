"""Which of the project's JSON files a file given in the place of another looks like.

Every command reads several kinds of JSON file (annotations, task graphs, feature-folder splits, eval results), often
side by side on one command line, and a user swaps two of them easily. The loader of one kind then fails on the first
field it misses (``missing field 'train'``), which names the field, not the mistake. The loaders ask `looks_like`
first, and name the kind they were given instead (`mistaken_file`), as ``--graph labels.json`` has long said "this
looks like an annotation file".
"""

from __future__ import annotations

import zipfile
from typing import IO, Any, Final

# How the binary files the commands read begin: a torch checkpoint is a zip archive (as is an .npz), an array np.save.
ZIP_MAGIC: Final = b"PK\x03\x04"
NPY_MAGIC: Final = b"\x93NUMPY"
# The video endings the commands read (recognition-features, eval) and name a folder of videos by.
VIDEO_SUFFIXES: Final = (".mp4", ".avi", ".mkv", ".mov", ".webm")

# The task graph's file format (`graphs.task_graph`, which imports it from here: the shapes of the files are this
# module's, and the loaders below it ask it).
GRAPH_FORMAT: Final = "task-graph"

# What each kind is called in a message, with how the user recognises it.
KINDS: Final = {
    "annotations": "an annotation file (its 'annotations' and 'taxonomy' give each video's key-steps)",
    "graph": "a task graph (tgml train writes them)",
    "split": "a split file (the 'train' and 'test' videos of a feature folder: its split.json)",
    "captaincook-errors": "CaptainCook4D's error annotations (tgml captaincook-labels writes an annotation file from "
                          "them)",
    "eval": "the results of stream-detect eval --json",
    "sequences": "a key-step sequence file ({video: {\"pred\": [...], \"gt\": [...]}}, prego-bench --sequences)",
    "checkpoint": "a detector checkpoint (recognition-train writes them) or another zip archive",
    "array": "a NumPy array (.npy: a recording's features or targets)",
}

# The kinds an output never replaces unless it is one itself (`graphs.common.files.check_output`): what a user labelled
# by hand or a long run made, each an input of some command. Results, renderings and plots are made again by running
# the command again, and are replaced as before.
PROTECTED_KINDS: Final = frozenset({"annotations", "graph", "split", "captaincook-errors", "sequences", "checkpoint",
                                    "array"})


def looks_like(data: Any) -> str | None:
    """The kind of project file parsed JSON content has the shape of (a key of `KINDS`), or None.

    Args:
        data: the file's parsed content.

    Returns:
        ``"annotations"``, ``"graph"``, ``"split"``, ``"captaincook-errors"``, ``"eval"``, ``"sequences"``, or None
        when it is none of them (a damaged file, or another program's).
    """
    if isinstance(data, list):
        first = data[0] if data else None
        if isinstance(first, dict) and {"recording_id", "step_annotations"} <= first.keys():
            return "captaincook-errors"
        return None
    if not isinstance(data, dict):
        return None
    if data.get("format") == GRAPH_FORMAT or is_captaincook_graph(data):
        return "graph"
    if isinstance(data.get("annotations"), dict):
        return "annotations"
    if {"settings", "videos", "total"} <= data.keys():
        return "eval"
    if any(isinstance(data.get(key), list) for key in ("train", "test", "train_session_set", "test_session_set")):
        return "split"
    if _is_sequences(data):
        return "sequences"
    return None


def _is_sequences(data: Any) -> bool:
    """Whether parsed content has the shape of ``{video: {"pred": [...], "gt": [...]}}``."""
    return isinstance(data, dict) and bool(data) and all(
        isinstance(record, dict) and any(isinstance(record.get(k), list) for k in ("pred", "gt"))
        for record in data.values())


def is_captaincook_graph(data: object) -> bool:
    """Whether file content has the shape of a CaptainCook4D hand-made graph (``{"steps": {id: name}, "edges":
    [...]}``, no ``format``): read as it is by ``tgml show`` and ``tgml eval --gt``, with its own step numbers."""
    return isinstance(data, dict) and "format" not in data and isinstance(data.get("steps"), dict) and "edges" in data


def mistaken_file(data: Any, expected: str, source: str, hint: str = "") -> str | None:
    """The error line for a file of another kind than the loader's, or None when it does not look like one.

    Args:
        data: the file's parsed content.
        expected: the kind the loader reads (a key of `KINDS`); a file of that kind is not a mistake.
        source: how the file is named (``--split labels.json``).
        hint: said after the kinds: what the option takes, or how to make it.

    Returns:
        e.g. ``--split labels.json: this looks like an annotation file (...), not a split file (...)``.
    """
    kind = looks_like(data)
    if kind is None or kind == expected:
        return None
    return f"{source}: this looks like {KINDS[kind]}, not {KINDS[expected]}{hint}"


def mistaken_sequences(data: Any, source: str, expected: str) -> str | None:
    """The error line for another project file given where a ``{video: {"pred": [...], "gt": [...]}}`` file goes
    (prego-bench --sequences, replay --frames), or None: read as one, its top-level fields were taken for videos
    ("video 'format': field 'pred' must be a non-empty list").

    Args:
        data: the file's parsed content.
        source: how the file is named.
        expected: what the option takes (``'a frames file {video: ...}'``).
    """
    if _is_sequences(data):  # first: a video named "annotations" or "train" does not make another kind of file
        return None
    kind = looks_like(data)
    if kind is not None:
        return f"{source}: this looks like {KINDS[kind]}, not {expected}"
    if isinstance(data, dict) and isinstance(data.get("format"), str):  # another program's own file (settings...)
        return f"{source}: its field 'format' says it is a {data['format'][:60]!r} file, not {expected}"
    return None


def binary_kind(start: bytes) -> str | None:
    """The kind of binary project file whose first bytes are ``start`` (``"checkpoint"``, ``"array"``), or None."""
    if start.startswith(ZIP_MAGIC):
        return "checkpoint"
    if start.startswith(NPY_MAGIC):
        return "array"
    return None


def zip_member_names(handle: IO[bytes]) -> list[str]:
    """The member names of the zip archive ``handle`` holds (read from its start), or ``[]`` where it is no archive
    that can be read (a damaged one: its members are not known)."""
    try:
        handle.seek(0)
        with zipfile.ZipFile(handle) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return []


def written_by_torch_save(names: list[str]) -> bool:
    """Whether a zip archive's members are those torch.save writes (``<archive>/data.pkl``; torch.jit.save writes
    that too, with ``constants.pkl`` and the module's code beside it)."""
    return any(name.endswith("/data.pkl") for name in names)
