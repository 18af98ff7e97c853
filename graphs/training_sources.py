"""What a detector or a task graph records of the videos it learned from, beside their names, so that ``stream-detect
eval`` tells a video it judges from one it learned from by content, not by name.

``recognition-train`` and ``tgml train`` list the videos they learned from by name (``info["train_videos"]``). A name
says little: new footage may be called ``video_00`` too, and a training video copied under another name is the same
video. So they also record, per training video, an identity of its content (``info["train_identities"]``,
``{name: {kind: identity}}``), each identity the 64 hexadecimal digits of a SHA-256:

- ``"video"``: the video file its features were extracted from (`file_identity`; ``recognition-features`` records it
  in ``split.json``'s ``video_identities``, the checkpoint copies it; absent for imported features, which came from
  no video file the project read);
- ``"features"``: its features as the detector read them (`features_identity`), which is what ``eval --features``
  replays;
- ``"annotation"``: its annotated segments, times included (`execution_identity`): a task graph learns from the
  annotation file, never from a video file, so this is all it knows of an execution (recorded for the executions
  whose segments all have times; a re-annotated training video, its times changed, is another execution to it).

Eval computes the same identity of each video it judges and names it with the training video it is a copy of
(`learned_from`); a training video whose entry records no identity of the kind eval reads (files written before the
entry existed, imported features judged as videos) is matched by name, as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from graphs.annotations import Video, read_train_videos
from graphs.common.errors import InputError
from graphs.common.files import open_input
from graphs.common.safe_text import quoted, shortened
from graphs.common.settings_files import as_written

IDENTITY_KINDS: Final = ("video", "features", "annotation")
# A video file is known by its size and its first and last MiB, not by all its bytes: recordings run to gigabytes,
# which eval would hash at every run (its cache knows a video by size and time for the same reason). A copy keeps
# every byte; two recordings differ in their ends, since a container keeps its index of every frame (MP4's moov,
# Matroska's cues) at one end and the first frames' data at the start.
ENDS_BYTES: Final = 1 << 20
_IDENTITY: Final = re.compile(r"[0-9a-f]{64}")


def file_identity(path: str | Path, what: str = "video file") -> str:
    """A file's content identity: SHA-256 of its size (decimal, then a newline) followed by its first and last
    `ENDS_BYTES` bytes (the whole file when it holds no more than twice that).

    Args:
        path: the file.
        what: what the file is, named in an error.

    Raises:
        InputError: the file cannot be read.
    """
    digest = hashlib.sha256()
    try:
        with open_input(path, what) as handle:
            size = os.fstat(handle.fileno()).st_size
            digest.update(f"{size}\n".encode("ascii"))
            if size <= 2 * ENDS_BYTES:
                digest.update(handle.read())
            else:
                digest.update(handle.read(ENDS_BYTES))
                handle.seek(size - ENDS_BYTES)
                digest.update(handle.read(ENDS_BYTES))
    except OSError as err:
        raise InputError(f"{path}: cannot read the {what} ({err.strerror or err})") from None
    return digest.hexdigest()


def features_identity(features: np.ndarray) -> str:
    """The content identity of a video's features, ``(T, D)``: SHA-256 of their shape (``T x D``, then a newline)
    followed by their values as little-endian float32, row by row. The values, not the file's bytes: a folder's copy
    of features imported from float64 files, or saved again, holds the same values in other bytes."""
    values = np.ascontiguousarray(features, dtype="<f4")
    digest = hashlib.sha256(f"{values.shape[0]}x{values.shape[1]}\n".encode("ascii"))
    digest.update(values.tobytes())
    return digest.hexdigest()


def execution_identity(video: Video, names: Mapping[int, str]) -> str | None:
    """The content identity of one annotated execution: SHA-256 of its segments in file order, each as step name,
    start, end and ``has_errors``, written as compact JSON. Step names, not ids: an annotation table numbers its steps
    in sorted name order, the JSON file as its taxonomy says. The times are what tells two executions done in the same
    order apart.

    Args:
        video: the execution (`graphs.annotations.Video`).
        names: its scenario's taxonomy, step id -> name.

    Returns:
        The identity; None when a segment has no times (an order-only file: every execution of one order alike).
    """
    if len(video.spans) != len(video.steps) or any(span is None for span in video.spans):
        return None
    segments = [[names.get(step, str(step)), list(span) if span is not None else None, errors]
                for step, span, errors in zip(video.steps, video.spans, video.has_errors, strict=True)]
    return hashlib.sha256(json.dumps(segments, separators=(",", ":")).encode("utf-8")).hexdigest()


def is_identity(value: object) -> bool:
    """Whether ``value`` is an identity as this module writes them: 64 lowercase hexadecimal digits."""
    return isinstance(value, str) and _IDENTITY.fullmatch(value) is not None


def read_train_identities(record: Any, where: str) -> dict[str, dict[str, str]] | None:
    """A file's ``info["train_identities"]`` read back and checked.

    Args:
        record: the entry (None: the file records none, as files written before it).
        where: how the error names it (``det.pt: info.train_identities``).

    Returns:
        Training video name -> identity kind -> identity; None when the file records none.

    Raises:
        InputError: the entry is not an object of names, each an object of `IDENTITY_KINDS` and 64 hex digits.
    """
    if record is None:
        return None
    expected = f"must map each training video to {{kind: identity}} (kinds {', '.join(IDENTITY_KINDS)}; an identity "
    expected += "is 64 lowercase hexadecimal digits)"
    if not isinstance(record, dict):
        raise InputError(f"{where} = {as_written(record, 40)} {expected}")
    out: dict[str, dict[str, str]] = {}
    for name, entry in record.items():
        if not isinstance(entry, dict):
            raise InputError(f"{where}[{quoted(name)}] = {as_written(entry, 40)} {expected}")
        for kind, identity in entry.items():
            if kind not in IDENTITY_KINDS or not is_identity(identity):
                field = f"{where}[{quoted(name)}].{shortened(str(kind), 40)}"  # a field name, as the path writes it
                raise InputError(f"{field} = {as_written(identity, 40)} {expected}")
        out[name] = dict(entry)
    return out


def learned_from(names: frozenset[str], identities: Mapping[str, Mapping[str, str]] | None, kind: str,
                 judged: Sequence[tuple[str, str | None]]) -> dict[str, str]:
    """The judged videos that are one of the training videos, each with the name it was trained under.

    A training video whose entry records an identity of ``kind`` is matched by content only: a judged video of its
    name but other content is another video, and a copy under another name is it. One that records none (a file
    written before identities were, imported features judged as videos) is matched by name.

    Args:
        names: the training videos (``info["train_videos"]``).
        identities: their identities (`read_train_identities`; None: the file records none).
        kind: the identities the judged videos come with (`IDENTITY_KINDS`).
        judged: ``(name, identity of kind, or None where it has none)`` per judged video.

    Returns:
        Judged name -> training name (its own where one of that name has its content), in ``judged`` order.
    """
    recorded = identities or {}
    by_content: dict[str, list[str]] = {}
    for name, entry in recorded.items():
        if kind in entry:
            by_content.setdefault(entry[kind], []).append(name)
    by_name = {name for name in names if kind not in recorded.get(name, {})}
    out: dict[str, str] = {}
    for name, identity in judged:
        alike = by_content.get(identity, []) if identity is not None else []
        if alike:
            out[name] = name if name in alike else alike[0]
        elif name in by_name:
            out[name] = name
    return out


@dataclass(frozen=True)
class TrainingSources:
    """What a detector was trained on, or a task graph learned from, as its file records it: read and checked once
    (when the file is loaded, so that a damaged entry is refused before any video is opened), matched as often as
    needed.

    Attributes:
        names: ``info["train_videos"]`` (None: the file lists none, as older files; nothing is then matched).
        identities: ``info["train_identities"]`` (`read_train_identities`; None: the file records none).
    """

    names: frozenset[str] | None
    identities: dict[str, dict[str, str]] | None

    @classmethod
    def read(cls, info: Mapping[str, Any], where: str) -> TrainingSources:
        """The entries of a checkpoint's or a graph's ``info``; ``where`` names the file in an error.

        Raises:
            InputError: ``info.train_identities`` is damaged.
        """
        return cls(read_train_videos(info.get("train_videos")),
                   read_train_identities(info.get("train_identities"), f"{where}: info.train_identities"))

    def records(self, kind: str) -> bool:
        """Whether some training video has an identity of ``kind`` (else judged videos need none: names decide)."""
        return self.identities is not None and any(kind in entry for entry in self.identities.values())

    def matches(self, kind: str, judged: Sequence[tuple[str, str | None]]) -> dict[str, str]:
        """`learned_from` over these sources; ``{}`` when the file lists no training videos."""
        return {} if self.names is None else learned_from(self.names, self.identities, kind, judged)
