"""Reading NumPy ``.npy`` arrays from files users hand us: the header is checked before a byte of data is allocated.

``np.load`` trusts the header: a shape of ``(10^12, 24)`` asks for terabytes (`MemoryError`), a negative one ends in
`OverflowError`, an ``.npz`` archive saved under an ``.npy`` name comes back as an archive object, and a file cut
short is found only after the allocation. `read_npy` reads the header with ``numpy.lib.format`` first and refuses,
with one line naming the file, anything but a plain array of real numbers whose announced size is exactly the data
the file holds; `npy_shape` answers from the header alone (a resumed run asking how many rows a file has).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import IO, Final

import numpy as np
from numpy.lib import format as npy_format

from graphs.common.errors import InputError
from graphs.common.file_kinds import NPY_MAGIC, ZIP_MAGIC, written_by_torch_save, zip_member_names
from graphs.common.files import open_input
from graphs.common.safe_text import quoted

MAX_HEADER_BYTES: Final = 10_000  # numpy's own default limit on the header's text
MAX_ARRAY_BYTES: Final = 8 * 2**30  # an hour of 4096-wide float32 features at 30 fps is 1.8 GB
MAX_DIMENSIONS: Final = 32  # numpy's own limit on an array's number of dimensions (64 from numpy 2)
MAX_DIMENSION: Final = 2**62  # one dimension's length: beyond what numpy's indices hold, even of an empty array
REAL_KINDS: Final = "iuf"  # signed and unsigned integers, floats; "b" (bool) where a caller allows it
# Features are floats wherever they are read (an import, a folder recognition-train reads, a live feature file): an
# integer array given as features is more likely labels or frame indices than quantised features, and a folder that
# trained on one must not hold a detector whose own kind of file stream-detect --features then refuses.
FLOAT_KINDS: Final = "f"


def _archive_kind(handle: IO[bytes]) -> str:
    """What a zip archive given as an ``.npy`` file is, from its members' names: a detector checkpoint given as
    ``--features`` was called "an .npz archive (np.savez)", which it is not."""
    names = zip_member_names(handle)
    if written_by_torch_save(names):
        return "a torch file (torch.save: a detector checkpoint, or weights)"
    if names and all(name.endswith(".npy") for name in names):
        return "an .npz archive (np.savez)"
    return "a zip archive"


def _header(handle: IO[bytes], where: str, what: str) -> tuple[tuple[int, ...], np.dtype, bool, int]:
    """``(shape, dtype, fortran_order, data offset)`` of an ``.npy`` stream, every field checked."""
    start = handle.read(len(NPY_MAGIC))
    if start[: len(ZIP_MAGIC)] == ZIP_MAGIC:
        raise InputError(f"{where}: is {_archive_kind(handle)}, not an .npy array; save the {what} with np.save")
    if start != NPY_MAGIC:
        raise InputError(f"{where}: not a NumPy .npy file (expected the {what} as written by np.save)")
    # The header's length, read as numpy will: one too long for numpy to read safely is said to be that, not
    # "damaged" with numpy's advice to trust the file.
    version_and_length = handle.read(6)  # major, minor, then 2 bytes of length (version 1) or 4 (versions 2, 3)
    major = version_and_length[0] if version_and_length else 0
    size = {1: 2, 2: 4, 3: 4}.get(major, 0)  # another version: numpy's own error names it
    length = int.from_bytes(version_and_length[2 : 2 + size], "little")
    if size and len(version_and_length) >= 2 + size and length > MAX_HEADER_BYTES:
        raise InputError(f"{where}: an .npy header of {length} bytes, more than the {MAX_HEADER_BYTES} read "
                         f"(np.save writes the {what} with a header of about a hundred)")
    handle.seek(0)
    try:
        version = npy_format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(handle, max_header_size=MAX_HEADER_BYTES)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = npy_format.read_array_header_2_0(handle, max_header_size=MAX_HEADER_BYTES)
        else:
            raise ValueError(f"unknown .npy format version {version}")
    except Exception as err:  # numpy's parser raises what its tokenizer or literal_eval meet (TokenError...)
        detail = (str(err).strip().splitlines() or [type(err).__name__])[0]
        detail = re.sub(r"<[\w.]+ object at 0x[0-9a-fA-F]+>", "an expression", detail)[:120]  # literal_eval's reprs
        raise InputError(f"{where}: damaged .npy header ({detail})") from None
    if (not isinstance(shape, tuple) or len(shape) > MAX_DIMENSIONS
            or not all(isinstance(n, int) and 0 <= n <= MAX_DIMENSION for n in shape)):
        raise InputError(f"{where}: damaged .npy header (shape {quoted(shape, 60)})")
    return shape, dtype, bool(fortran), handle.tell()


KIND_NAMES: Final = {"f": "floats (float16, float32, float64, ...)", "i": "integers", "u": "unsigned integers",
                     "b": "booleans"}


def kinds_text(kinds: str) -> str:
    """The dtype kinds a reader takes, in words: ``"f"`` -> "floats (float16, float32, float64, ...)"; integers are real
    numbers too, so "real numbers" alone did not say why an int32 file was refused."""
    names = [KIND_NAMES[k] for k in "fiub" if k in kinds]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _check(shape: tuple[int, ...], dtype: np.dtype, data_bytes: int, where: str, what: str, ndim: int | None,
           kinds: str, max_bytes: int) -> None:
    """Refuse a shape, a dtype or a size the caller cannot use, before anything is allocated."""
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in kinds:
        raise InputError(f"{where}: the {what} have dtype {dtype}, expected {kinds_text(kinds)}")
    if ndim is not None and len(shape) != ndim:
        raise InputError(f"{where}: the {what} have shape {shape}, expected {ndim} dimensions")
    announced = math.prod(shape) * dtype.itemsize  # Python integers: no overflow whatever the header says
    if announced > max_bytes:
        raise InputError(f"{where}: the {what} announce shape {shape} ({announced} bytes), more than the "
                         f"{max_bytes} bytes accepted")
    if announced != data_bytes:
        state = "cut short (a damaged or half-copied file?)" if announced > data_bytes else "followed by extra bytes"
        raise InputError(f"{where}: the {what} announce shape {shape} ({announced} bytes of data) but the file holds "
                         f"{data_bytes}: {state}")


def read_npy_stream(
    handle: IO[bytes],
    size: int,
    where: str,
    what: str = "array",
    ndim: int | None = 2,
    kinds: str = REAL_KINDS,
    max_bytes: int = MAX_ARRAY_BYTES,
) -> np.ndarray:
    """An ``.npy`` array from an open binary stream of ``size`` bytes (a file, a member of an ``.npz`` archive).

    Args:
        handle: the stream, at its start.
        size: its length in bytes.
        where: what errors name (the file).
        what: what the array is (``"RGB features"``), for the messages.
        ndim: the number of dimensions required (None: any).
        kinds: the dtype kinds accepted (numpy's ``dtype.kind`` letters).
        max_bytes: the largest array accepted.

    Returns:
        The array.

    Raises:
        InputError: not an ``.npy`` stream, a damaged header, another dtype or number of dimensions, a size the data
            does not match, or more than ``max_bytes``.
    """
    shape, dtype, fortran, offset = _header(handle, where, what)
    _check(shape, dtype, size - offset, where, what, ndim, kinds, max_bytes)
    data = bytearray(size - offset)  # writable, unlike the bytes read() returns: callers may change the array
    view, got = memoryview(data), 0
    try:
        while got < len(data) and (count := handle.readinto(view[got:])):  # type: ignore[attr-defined]
            got += count
    except OSError as err:
        raise InputError(f"{where}: cannot read the {what} ({err.strerror or err})") from None
    if got != len(data):
        raise InputError(f"{where}: the {what} are cut short (the file changed while it was read?)")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def read_npy(
    path: str | Path,
    what: str = "array",
    ndim: int | None = 2,
    kinds: str = REAL_KINDS,
    max_bytes: int = MAX_ARRAY_BYTES,
) -> np.ndarray:
    """Load the ``.npy`` file ``path``, its header checked before the data is read: `read_npy_stream` on the opened
    file (the other arguments are its own); the file is opened by `graphs.common.files.open_input` (no FIFO, no device,
    "permission denied")."""
    with open_input(path, what + " file") as handle:
        size = _size(handle)
        return read_npy_stream(handle, size, str(path), what, ndim, kinds, max_bytes)


def npy_shape(path: str | Path, what: str = "array", ndim: int | None = 2, kinds: str = REAL_KINDS) -> tuple[int, ...]:
    """The shape an ``.npy`` file holds, from its header, after the same checks as `read_npy` (data not read).

    Args:
        path: the file.
        what: what the array is, for the messages.
        ndim: the number of dimensions required (None: any).
        kinds: the dtype kinds accepted.

    Returns:
        The shape.
    """
    with open_input(path, what + " file") as handle:
        size = _size(handle)
        shape, dtype, _, offset = _header(handle, str(path), what)
        _check(shape, dtype, size - offset, str(path), what, ndim, kinds, MAX_ARRAY_BYTES)
        return shape


def npy_header_shape(path: str | Path, what: str = "array") -> tuple[int, ...]:
    """The shape an ``.npy`` file's header announces, the header read and its shape checked as `read_npy` does (the
    dtype and the data's length are not: a file cut short, or still being written, still tells its shape). What
    refuses a file by its shape alone (another width) needs no more, and reads a hundred bytes of it.

    Raises:
        InputError: not an ``.npy`` file, or a damaged or over-long header.
    """
    with open_input(path, what + " file") as handle:
        return _header(handle, str(path), what)[0]


def _size(handle: IO[bytes]) -> int:
    handle.seek(0, 2)
    size = handle.tell()
    handle.seek(0)
    return size
