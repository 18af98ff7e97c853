"""Reading the JSON, TOML and YAML files users hand us, with one-line errors instead of tracebacks;
checking outputs before a run (`check_output`) and writing files atomically (`atomic_path`, `write_text`,
`write_bytes`, and `write_files` for a set of files written whole or not at all): the one writer every output
goes through.

Reading (`open_input`) never blocks on a FIFO, never reads a device, and says "permission denied" for a file it may
not read; a text file larger than `MAX_TEXT_FILE_BYTES` is refused before it is read.

Writing never destroys what stands at the output path and never writes anywhere else:

- only a regular file, or a path where nothing exists yet, is ever replaced; a device node, FIFO, socket or folder
  there is refused with one line (`output_target`);
- a **symbolic link is never written through**, whether it is given directly (``--out link.json``) or planted inside
  an output folder (``features/rgb_x/video.npy``, an eval cache entry, ``--annotate-out DIR/video.mp4``, a key
  file): the write is refused with one line naming the link, like ``install -T`` would not follow it. Write to the
  file the link points to by naming that file. The folders a user names (``--out DIR``, ``$MISTAKE_CACHE``) may be
  links to folders elsewhere; sub-folders a command makes inside them may not (``inside``);
- the file is written in a private temporary folder (mode 0700) beside the output, then renamed onto it, so a
  reader sees the old file or the whole new one, and a crash, a full disk or a signal leaves no half file; the
  rename and the cleanup are never cut by SIGINT or SIGTERM (`graphs.common.interrupts.signals_deferred`);
- secret files are created with ``O_EXCL | O_NOFOLLOW`` and mode 0600 before a byte is written (`write_bytes`).
"""

from __future__ import annotations

import codecs
import errno
import json
import math
import os
import shutil
import stat
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import IO, Any, Final

from graphs.common.errors import InputError, command_began, extra_import_error, install_extra
from graphs.common.file_kinds import KINDS, PROTECTED_KINDS, binary_kind, looks_like
from graphs.common.interrupts import signals_deferred
from graphs.common.safe_text import quoted

MAX_TEXT_FILE_BYTES: Final = 256 * 2**20  # JSON/TOML/YAML inputs: the largest published annotation file is 9 MB
READ_CHUNK: Final = 1 << 20  # what one read reserves of a file whose size was not known beforehand
MAX_FILE_NAME_BYTES: Final = 200  # a name a command turns into a file name: room for its endings under NAME_MAX (255)
FILE_NAME_RULE: Final = (f"a file name without a folder (no '/', no '\\', not '.' or '..', at most "
                         f"{MAX_FILE_NAME_BYTES} bytes)")


def _a(what: str) -> str:
    """``what`` with its indefinite article (``"an annotation file"``, ``"a graph file"``, ``"an RGB features
    file"``): an initialism is read letter by letter, so its article follows the first letter's name."""
    word = what.split(" ", 1)[0]
    if len(word) > 1 and word.isupper():
        return f"{'an' if word[0] in 'AEFHILMNORSX' else 'a'} {what}"
    return f"{'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"


def is_file_name(name: object) -> bool:
    """Whether ``name`` (a video key, a scenario) may become a file name inside an output folder: one non-empty path
    component, never ``.`` or ``..``, no NUL, short enough for the file system once an ending is added.

    Args:
        name: the candidate.

    Returns:
        True if joining it to a folder stays inside that folder.
    """
    if not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        return False
    try:
        return len(name.encode("utf-8")) <= MAX_FILE_NAME_BYTES
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape: no file system name
        return False


NAME_MAX_BYTES: Final = 255  # bytes in one file or folder name on Linux file systems (ext4, xfs, btrfs, tmpfs)
PATH_MAX_BYTES: Final = 4095  # bytes in a whole path the kernel accepts


def check_path_name(path: str | Path, what: str = "output file", option: str = "") -> None:
    """Refuse an output path no file system can hold, before any file-system call on it: an empty name (``--json
    ''`` was silently ignored, ``keys --out ''`` wrote into the current folder), a name longer than
    `NAME_MAX_BYTES` or a path longer than `PATH_MAX_BYTES` (each ended in "File name too long" tracebacks).

    Args:
        path: the output as given.
        what: what the output is, for the message.
        option: the option that gave it, named first in the message.

    Raises:
        InputError: one line naming the option and what is wrong.
    """
    text = str(path) if isinstance(path, Path) else path
    named = f"{option} " if option else ""
    if not text.strip():
        raise InputError(f"{named}{text!r}: an empty name; give the {what} to write")
    try:
        parts = [len(part.encode("utf-8", "surrogateescape")) for part in text.split("/")]
        total = len(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        raise InputError(f"{named}{quoted(text)}: not a name the file system can hold") from None
    longest = max(parts)
    if longest > NAME_MAX_BYTES:
        raise InputError(f"{named}{text[:60]}...: a name of {longest} bytes in this path; the file system holds at "
                         f"most {NAME_MAX_BYTES} per file or folder name")
    if total > PATH_MAX_BYTES:
        raise InputError(f"{named}{text[:60]}...: a path of {total} bytes; at most {PATH_MAX_BYTES}")
    control = next((c for c in text if ord(c) < 32 or ord(c) == 127), None)
    if control is not None:  # a newline in a name breaks every line that names the file (wrote ..., logs)
        raise InputError(f"{named}{quoted(text)}: holds the control character {control!r}; give the {what} a name "
                         "without one")


def open_input(path: str | Path, what: str, hint: str = "", limit: int | None = None) -> IO[bytes]:
    """Open an input file for reading, refusing (one line) anything that is not a readable regular file.

    A FIFO is opened without blocking and refused, as are devices, sockets and folders; a file the process may not
    read is "permission denied", not "not a <what>".

    Args:
        path: the file.
        what: what the file is, for the message (``"graph file"``...).
        hint: appended to the "not found" message (where such a file usually comes from).
        limit: the largest size accepted, in bytes (None: any).

    Returns:
        The open binary file (close it, or use it in a ``with``).

    Raises:
        InputError: naming the file and what is wrong with it.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found{hint}") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied, cannot read the {what}") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read the {what} ({err.strerror or err})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{path}: is a folder, expected {_a(what)}")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: is {_kind(info.st_mode)}, not a regular file; expected {_a(what)}")
        if limit is not None and info.st_size > limit:
            raise InputError(f"{path}: {info.st_size} bytes is too large for {_a(what)} (at most {limit})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | Path, what: str, limit: int, hint: str = "") -> bytes:
    """A whole input file's bytes, at most ``limit`` of them (`open_input` says what else is refused).

    Args:
        path: the file.
        what: what the file is, for the message.
        limit: the largest size accepted, in bytes (checked before reading, and again while reading: a file that
            grows meanwhile is not read past it).
        hint: appended to the "not found" message.

    Returns:
        The content.
    """
    with open_input(path, what, hint, limit) as handle:
        try:
            # read(n) reserves n bytes first: the file's own size, not the limit (256 MiB for a few KiB of JSON,
            # refused outright where memory is not overcommitted). One byte more shows a file grown since, or one
            # whose size says nothing (procfs, some network file systems): the rest is read in bounded chunks, up to
            # the limit.
            size = os.fstat(handle.fileno()).st_size
            chunks = [handle.read(min(size, limit) + 1)]
            total = len(chunks[0])
            while total > size and total <= limit and (chunk := handle.read(min(READ_CHUNK, limit + 1 - total))):
                chunks.append(chunk)
                total += len(chunk)
            data = b"".join(chunks)  # one chunk: that very object, not a copy
        except OSError as err:
            raise InputError(f"{path}: cannot read the {what} ({err.strerror or err})") from None
    if len(data) > limit:
        raise InputError(f"{path}: too large for {_a(what)} (at most {limit} bytes)")
    return data


def output_start(path: str | Path, size: int) -> bytes:
    """The first ``size`` bytes of the regular file an output would replace, to tell its kind (a checkpoint, a task
    graph); ``b""`` when there is none, or it cannot be read: a folder or a FIFO there is `check_output`'s to refuse,
    never opened here, and an unreadable file is said by the write."""
    path = Path(path)
    if not path.is_file():
        return b""
    try:
        with path.open("rb") as handle:
            return handle.read(size)
    except OSError:
        return b""


_WIDE_BOMS: Final = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),  # UTF-32 LE starts as UTF-16 LE
                     (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))
WIDE_PROBE_BYTES: Final = 64  # bytes looked at for the NUL beside each character of UTF-16 text without a mark


def wide_encoding(data: bytes) -> str | None:
    """``"UTF-16"`` or ``"UTF-32"`` when ``data`` is text in one of them (Windows' "Unicode", the default of
    PowerShell 5's ``Out-File`` and ``>``), by its byte-order mark or, without one, by a NUL byte beside every
    character of its start; None otherwise. Without a mark such a file is valid UTF-8 (NUL is a character), so the
    JSON parser said only "Expecting value" at line 1 column 2."""
    named = next((name for bom, name in _WIDE_BOMS if data.startswith(bom)), None)
    if named is not None:
        return named
    head = data[: min(len(data), WIDE_PROBE_BYTES) // 4 * 4]  # whole units: a cut file may end on part of one
    # UTF-32 first: its text has NUL in every odd byte too. A single byte of each four not all NUL (little or big
    # endian); a file of zeros (a damaged disk block) is not text in any encoding.
    if len(head) >= 8 and [any(head[i::4]) for i in range(4)] in ([True, False, False, False],
                                                                  [False, False, False, True]):
        return "UTF-32"
    head = data[: min(len(data), WIDE_PROBE_BYTES) // 2 * 2]
    even, odd = head[0::2], head[1::2]
    # Exactly one half all NUL, as above.
    if len(head) >= 4 and (not any(even)) != (not any(odd)):
        return "UTF-16"
    return None


def _read_text(path: Path, what: str, hint: str = "") -> str:
    """The file's UTF-8 text, a leading byte-order mark dropped (Windows editors write one; JSON's RFC 8259 lets a
    reader ignore it); the I/O failures every reader shares become one-line `InputError`s, and so does text in
    UTF-16 or UTF-32, named as such."""
    data = read_bytes(path, what, MAX_TEXT_FILE_BYTES, hint)
    wide = wide_encoding(data)
    if wide is not None:
        raise InputError(f"{path}: is {wide} text (Windows' \"Unicode\"), expected {_a(what)} in UTF-8: save it as "
                         "UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text, expected {_a(what)}") from None


def read_text_file(path: str | Path, what: str = "file") -> str:
    """A text file's UTF-8 content; a missing file, a folder or unreadable bytes become one-line `InputError`s.

    Args:
        path: the file.
        what: what the file is, for the message.

    Returns:
        The text.
    """
    return _read_text(Path(path), what)


def _unique_keys(path: Path) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """A ``json`` object hook that refuses a key written twice in one object (``json`` keeps the last silently,
    so a duplicated video or step would otherwise vanish without a word)."""

    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise InputError(f"{path}: key {key!r} appears twice in one JSON object")
                seen.add(key)
        return obj

    return build


def read_json(path: str | Path, what: str = "file") -> Any:
    """Load a JSON file; a missing file, a folder, unreadable bytes, bad JSON or a key written twice in one object
    (a duplicated video, say) become one-line `InputError`s.

    Args:
        path: the file.
        what: what the file is, for the message (``"graph file"``, ``"frames file"``...).

    Returns:
        The parsed JSON value.
    """
    path = Path(path)
    text = _read_text(path, what)
    refused: list[_NotAJsonNumber] = []

    def number(token: str) -> float | _NotAJsonNumber:
        value = float(token)
        if math.isfinite(value):
            return value
        refused.append(_NotAJsonNumber(f"number {token[:40]} is out of the float range"))
        return refused[-1]

    def constant(name: str) -> _NotAJsonNumber:
        refused.append(_NotAJsonNumber(f"{name} is not a number JSON allows"))
        return refused[-1]

    try:
        value = json.loads(text, object_pairs_hook=_unique_keys(path), parse_float=number, parse_constant=constant)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: invalid JSON: arrays or objects nested too deeply") from None
    except ValueError as err:  # an integer of thousands of digits
        raise InputError(f"{path}: invalid JSON: {_too_long_number(err)}") from None
    if refused:
        raise InputError(f"{path}: invalid JSON: {refused[0].reason} (at {_json_field(value, refused[0])})")
    return value


class _NotAJsonNumber:
    """Stands where the file holds NaN, Infinity or a number beyond the float range, so that the error can name the
    field rather than only the file (``json`` gives no position for these)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _json_field(value: Any, target: _NotAJsonNumber) -> str:
    """Where ``target`` stands in a parsed JSON value, as ``annotations.video_01.segments[3].start_time``
    (``the top level`` when it is the whole file). Iterative: the parser has already bounded the depth."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, where = stack.pop()
        if node is target:
            return where or "the top level"
        if isinstance(node, dict):
            stack.extend((child, f"{where}.{key}" if where else str(key)) for key, child in node.items())
        elif isinstance(node, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(node))
    return "an unknown place"  # unreachable: the parser put `target` in `value`


def read_toml(path: str | Path, what: str = "config file", hint: str = "") -> dict[str, Any]:
    """Load a TOML file; a missing file, a folder, unreadable bytes or bad TOML become one-line `InputError`s.

    Args:
        path: the file.
        what: what the file is, for the message.
        hint: appended to the "not found" message (where such a file usually comes from).

    Returns:
        The parsed TOML document.
    """
    path = Path(path)
    text = _read_text(path, what, hint)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{path}: invalid TOML: {err}") from None
    except RecursionError:  # 50,000 nested arrays: the parser recurses once per level
        raise InputError(f"{path}: invalid TOML: arrays or tables nested too deeply") from None
    except ValueError as err:  # an integer past Python's 4300-digit conversion limit (tomllib lets it through)
        raise InputError(f"{path}: invalid TOML: {_too_long_number(err)}") from None


def read_yaml(path: str | Path, what: str = "config file") -> Any:
    """Load a YAML file (PyYAML is optional: without it, say so); failures become one-line `InputError`s.

    Args:
        path: the file.
        what: what the file is, for the message.

    Returns:
        The parsed document (an empty file gives ``{}``).
    """
    path = Path(path)
    text = _read_text(path, what)
    try:
        import yaml
    except ImportError as err:
        raise extra_import_error(err, "yaml", str(path), f"{path}: YAML needs the optional 'yaml' extra "
                                 f"({install_extra('yaml')}), or use TOML") from None
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise InputError(f"{path}: invalid YAML ({str(err).splitlines()[0]})") from None
    except RecursionError:  # 50,000 nested lists: the composer recurses once per level
        raise InputError(f"{path}: invalid YAML: lists or mappings nested too deeply") from None
    except ValueError as err:  # an integer past Python's 4300-digit conversion limit
        raise InputError(f"{path}: invalid YAML: {_too_long_number(err)}") from None


def _too_long_number(err: ValueError) -> str:
    """What a parser's ValueError says about the file, in its words (an integer of thousands of digits)."""
    return "an integer of thousands of digits" if "digits" in str(err) else str(err).splitlines()[0][:160]


def check_spares_inputs(path: str | Path, what: str, inputs: Iterable[str | Path | None], option: str = "") -> None:
    """Refuse an output that is one of the run's input files, or an existing file inside an input folder (the part
    of `check_output` a run repeats once it knows more of its inputs: the videos of a folder).

    Args:
        path: the output file.
        what: what the output is, for the message.
        inputs: the files (and folders) the run reads; None entries are skipped.
        option: the command-line option that gave ``path``, named in the message.
    """
    path = Path(path)
    named = f"{option} {path}" if option else str(path)
    sources = [source for source in inputs if source is not None]
    if replaced_input(path, sources) is not None:
        raise InputError(f"{named}: the {what} would overwrite this input file of the run; choose another name")
    if path.is_file():
        inside = path.resolve()
        holder = next((s for s in sources if Path(s).is_dir() and inside.is_relative_to(Path(s).resolve())), None)
        if holder is not None:
            raise InputError(f"{named}: the {what} would overwrite a file of {holder}, which the run reads; choose "
                             "another name")


def check_output(
    path: str | Path,
    what: str = "output file",
    folder: bool = False,
    inputs: Iterable[str | Path | None] = (),
    option: str = "",
    kind: str | None = None,
) -> Path:
    """Refuse, before any work starts, an output the run could not write at its end, or that is one of its inputs.

    A long run that fails only when it saves its result loses the work; this checks up front that ``path`` is
    not a folder (a file output) or not a file (a ``folder`` output), and that the folder it goes into exists and
    can be written to. That folder is never created: a mistyped folder name (``--json reslts/run.json``) would
    otherwise become a new folder holding the results where nobody looks. A ``folder`` output itself may be new
    (the run creates it), its parent may not. An output that is also an input file of the run (``--out`` naming
    the annotation file) would be overwritten by the result, so it is refused too, and so is an existing file of
    one of the kinds runs read that running a command again does not make again (an annotation file, a task graph,
    a split, a checkpoint, an ``.npy`` array: `graphs.common.file_kinds.PROTECTED_KINDS`): ``--json detector.pt``
    replaced the detector without a word. An output of such a kind (``kind``) is its writer's to check.

    Args:
        path: the output file (or folder, with ``folder=True``).
        what: what the output is, for the message (``"results file"``...).
        folder: the output is a folder.
        inputs: the files the run reads (None entries are skipped); a folder stands for every file in it (a data
            set's folder), so an existing file anywhere inside it is refused as the output.
        option: the command-line option that gave ``path`` (``"--json"``), named in the message.
        kind: the output's own kind (a key of `graphs.common.file_kinds.KINDS`: ``"graph"`` for a graph file) when its
            writer refuses every existing file of another kind itself, with its own words (`check_replaces_only`,
            ``check_replaces_a_graph``); None: a results file, a rendering, a plot, which replaces no protected kind.

    Returns:
        ``path`` as a `Path`.
    """
    check_path_name(path, what, option)
    path = Path(path)
    named = f"{option} {path}" if option else str(path)
    check_spares_inputs(path, what, inputs, option)
    if folder and path.exists() and not path.is_dir():  # a FIFO or a device is no file either: say which it is
        # "a folder for the timeline plots folder" said it twice: a ``what`` that is a folder is named as such.
        expected = f"the {what}" if what.endswith("folder") else f"a folder for the {what}"
        raise InputError(f"{named}: is {not_a_file(path) or 'a file'}, expected {expected}")
    if folder and path.is_symlink() and not path.exists():  # a loop or a dangling link: nothing could be made there
        raise InputError(f"{named}: {not_a_folder(path, 'a folder')}, where the {what} would go")
    if not folder and path.is_dir():
        raise InputError(f"{named}: is a folder, expected a file name for the {what}")
    if not folder:
        try:
            output_target(path, what)
        except InputError as err:
            raise InputError(f"{option} {err}" if option else str(err)) from None
    parent = path.parent
    existing = parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{named}: cannot write the {what}: {existing} is a file, not a folder")
    if existing != parent:
        raise InputError(f"{named}: cannot write the {what}: folder {parent} does not exist")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{named}: cannot write the {what}: folder {existing} is not writable")
    why = unreplaceable(path) if not folder and path.is_file() else None
    if why is not None:
        raise InputError(f"{named}: cannot replace the {what}: {path} {why}; choose another name")
    found = None if folder or kind is not None else existing_kind(path)
    if found in PROTECTED_KINDS:
        raise InputError(f"{named}: exists and is {KINDS[found]}, not {_a(what)}: the run would replace it; choose "
                         "another name, or remove the file first")
    return path


def check_replaces_only(path: str | Path, kind: str, what: str, option: str = "--out") -> None:
    """Refuse an output that names an existing file other than one of ``kind`` (a key of
    `graphs.common.file_kinds.KINDS`): a run replaces the file it makes again, not a task graph or a checkpoint given
    its name by mistake. An empty file is none.

    Raises:
        InputError: naming ``option``, the path and the kind of file it is when it is a project file.
    """
    if not output_start(path, 1):
        return
    found = existing_kind(path)
    if found != kind:
        holds = f"is {KINDS[found]}" if found is not None else f"is not {_a(what)}"
        raise InputError(f"{option} {path}: exists and {holds}; a run replaces only {_a(what)}: choose another name, "
                         "or remove the file first")


KIND_PROBE_BYTES: Final = 64  # enough to see a binary file's magic, or the bracket a JSON file opens with
# A JSON file larger than this is not parsed to tell its kind: a 143 MB results file given as --json cost the check
# 13.6 s and 2 GB. Protected kinds are far smaller (the largest shipped annotation file is 9 MB, CaptainCook4D's).
KIND_PARSE_BYTES: Final = 32 * 2**20


def existing_kind(path: str | Path) -> str | None:
    """The kind of project file (a key of `graphs.common.file_kinds.KINDS`) the regular file at ``path`` is, or None:
    nothing there, no project file, or one that cannot be read. A file that does not open as JSON does (an ``.mp4``,
    a PNG), or a JSON file larger than `KIND_PARSE_BYTES`, is never read past its first bytes."""
    start = output_start(path, KIND_PROBE_BYTES)
    if not start:
        return None
    binary = binary_kind(start)
    if binary is not None:
        return binary
    if start.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] not in (b"{", b"["):
        return None
    try:
        if Path(path).stat().st_size > KIND_PARSE_BYTES:
            return None
    except OSError:
        return None
    try:
        return looks_like(read_json(path))
    except InputError:  # damaged, too large or not UTF-8: not a file any command reads as a project file
        return None


def unreplaceable(path: Path) -> str | None:
    """Why this process may not replace the existing file ``path`` by renaming another over it (a write that fails
    only at the end of a run would lose its work), for a message; None when it may. Not when the file is immutable
    or append-only (``chattr +i``, which stops root too); in a sticky folder (``/tmp``) only the file's owner, the
    folder's owner or root may."""
    if _locked(path):
        return "is immutable or append-only (chattr)"
    if not hasattr(os, "geteuid"):  # no POSIX ownership to check
        return None
    folder = path.parent.stat()
    if not folder.st_mode & stat.S_ISVTX or os.geteuid() in (0, path.stat().st_uid, folder.st_uid):
        return None
    return "belongs to another user, in a folder where only a file's owner may replace it (such as /tmp)"


def replaced_input(target: str | Path, inputs: Iterable[str | Path | None]) -> Path | None:
    """The input file that writing ``target`` would replace: the one ``target`` already is (however named: a link,
    ``a/../b``, a hard link), or None. For outputs a run names itself inside an output folder (an annotated video, a
    saved graph), which `check_output`'s ``inputs`` cannot see before the folder is known to hold them."""
    target = Path(target)
    if not target.is_file():
        return None
    return next((Path(p) for p in inputs if p is not None and Path(p).is_file() and target.samefile(p)), None)


# Linux's FS_IOC_GETFLAGS, and its immutable and append-only flags (linux/fs.h).
_GET_FLAGS: Final = 0x80086601
_LOCKED_FLAGS: Final = 0x10 | 0x20


def _locked(path: Path) -> bool:
    """Whether the file's attributes forbid replacing it (immutable, append-only); False where they cannot be read
    (another system, a file system without them)."""
    try:
        import array
        import fcntl

        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            flags = array.array("l", [0])
            fcntl.ioctl(fd, _GET_FLAGS, flags, True)
        finally:
            os.close(fd)
    except (ImportError, OSError):
        return False
    return bool(flags[0] & _LOCKED_FLAGS)


def write_text(path: str | Path, text: str, what: str = "output file", inside: str | Path | None = None) -> Path:
    """Write a text file atomically (`atomic_path`), parents created; an OS failure is a one-line `InputError`.

    Args:
        path: the file.
        text: its whole content.
        what: what the file is, for the message.
        inside: the output folder the user named, when ``path`` lies in sub-folders a command makes in it.

    Returns:
        ``path`` as a `Path`.
    """
    return write_bytes(path, text.encode("utf-8"), what, inside=inside)


def write_bytes(
    path: str | Path,
    data: bytes,
    what: str = "output file",
    inside: str | Path | None = None,
    mode: int | None = None,
    replace: bool = True,
) -> Path:
    """Write a file atomically (`atomic_path`); the file is created with ``O_EXCL | O_NOFOLLOW`` before it is written.

    Args:
        path: the file.
        data: its whole content.
        what: what the file is, for the message.
        inside: the output folder the user named, when ``path`` lies in sub-folders a command makes in it.
        mode: permission bits the file is created with and keeps (`SECRET_MODE` for a key: never readable by
            others, not even half written); None: the default for a new file, those of the file it replaces.
        replace: replace a regular file at ``path``; False refuses one that exists (found only at the last moment,
            when another process made it meanwhile: it is never overwritten).

    Returns:
        ``path`` as a `Path`.
    """
    path = Path(path)
    with atomic_path(path, what=what, inside=inside, mode=mode, replace=replace) as tmp:
        _create(tmp, data, mode)
    return path


def _create(tmp: Path, data: bytes, mode: int | None) -> None:
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666 if mode is None else mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def write_files(files: Sequence[tuple[str | Path, bytes, str, int | None]], replace: bool = True) -> list[Path]:
    """Write several files as one output: all of them or, when one cannot be written, none (a set of key files
    that is only half there is refused by the next run and useless to this one).

    Each file is written as `write_bytes` writes one, to its temporary path (`atomic_path`); only once every file is
    written whole (last file first) are they moved into place, in the order given, as one step that SIGINT and
    SIGTERM wait for. A write that fails (a full disk) leaves every output as it was. A move that fails removes
    the files moved before it that did not exist before the call; a file it replaced (``replace``) stays replaced.

    Args:
        files: ``(path, data, what, mode)`` per file, as `write_bytes` takes them; a file is in place before any
            listed after it.
        replace: replace regular files at the paths; False refuses one that exists (found at the move).

    Returns:
        The paths, in the order given.

    Raises:
        InputError: one line naming the file that could not be written or moved.
    """
    paths = [Path(path) for path, *_ in files]
    new = {path for path in paths if not os.path.lexists(path)}
    moved: list[Path] = []
    with ExitStack() as stack:
        for path, data, what, mode in reversed(files):  # the stack leaves the last entered first: moves in order
            _create(stack.enter_context(_moved_on_success(Path(path), what, mode, replace, moved)), data, mode)
        with signals_deferred():
            try:
                stack.close()
            except BaseException:
                for path in moved:
                    if path in new:
                        with suppress(OSError):  # the error that stopped the moves is the one to report
                            path.unlink()
                raise
    return paths


@contextmanager
def _moved_on_success(path: Path, what: str, mode: int | None, replace: bool, moved: list[Path]) -> Iterator[Path]:
    """`atomic_path`, recording ``path`` in ``moved`` once the file is in place."""
    with atomic_path(path, what=what, mode=mode, replace=replace) as tmp:
        yield tmp
    moved.append(path)


SECRET_MODE: Final = 0o600  # a secret key: its owner reads and writes it, nobody else

_FILE_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "a special file")


def _mode_or_why(path: str | Path, dangling: str, missing: str) -> int | str:
    """The mode of what ``path`` names (links followed), or why there is none: ``dangling`` for a link to nothing,
    ``missing`` for nothing there, a link loop, or the error."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return dangling if os.path.islink(path) else missing
    except OSError as err:  # a link loop, a name too long...
        return "a link loop" if err.errno == errno.ELOOP else f"unreadable ({err.strerror or err})"


def not_a_file(path: str | Path) -> str | None:
    """Why ``path`` is not a regular file to read, for a message (``"a folder"``, ``"a link to no file"``,
    ``"a FIFO (named pipe)"``, ``"not found"``...); None when it is one (links followed)."""
    mode = _mode_or_why(path, "a link to no file", "not found")
    if isinstance(mode, str):
        return mode
    return None if stat.S_ISREG(mode) else _kind(mode)


FOLDER_NOT_FOUND: Final = "folder not found"  # `not_a_folder`'s answer for a path where nothing is


def not_a_folder(path: str | Path, expected: str) -> str | None:
    """Why ``path`` is not a folder to read, for a message (`FOLDER_NOT_FOUND`, ``"a file, expected <expected>"``,
    ``"a link loop"``, ``"a link to no folder"``...); None when it is one (links followed)."""
    mode = _mode_or_why(path, "a link to no folder", FOLDER_NOT_FOUND)
    if isinstance(mode, str):
        return mode
    if stat.S_ISDIR(mode):
        return None
    return f"{'a file' if stat.S_ISREG(mode) else _kind(mode)}, expected {expected}"


def output_target(path: str | Path, what: str = "output file") -> Path:
    """``path``, refused unless it is a regular file or nothing exists there yet.

    A symbolic link is refused (never followed: it may have been planted to send the write elsewhere), like a device
    node, FIFO, socket or folder (renaming a file over ``/dev/full`` replaces the device itself).

    Args:
        path: the output path as the user gave it (or as a command made it inside an output folder).
        what: what the output is, for the message.

    Returns:
        ``path`` as a `Path`.

    Raises:
        InputError: the path is something other than a regular file, or cannot be examined.
    """
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # nothing there yet (a file as a parent fails when writing)
        return path
    except OSError as err:
        raise InputError(f"{path}: cannot examine the {what} path ({err.strerror or err})") from None
    if stat.S_ISLNK(mode):
        try:
            to = f" (to {os.readlink(path)})"
        except OSError:
            to = ""
        raise InputError(f"{path}: is a symbolic link{to}, not a regular file; refusing to write the {what} "
                         "through it (name the file itself)")
    if not stat.S_ISREG(mode):
        raise InputError(f"{path}: is {_kind(mode)}, not a regular file; refusing to replace it with the {what}")
    return path


def make_folders(folder: str | Path, inside: str | Path | None = None, what: str = "output file") -> Path:
    """Make ``folder`` (and its parents); below ``inside``, every part must be a real folder, never a link.

    Args:
        folder: the folder to make.
        inside: the output folder the user named (made with its parents if missing, and may itself be a link); the
            sub-folders between it and ``folder`` are a command's own and are refused if a link or a file stands
            where one goes. None: ``folder`` is made as named.
        what: what will be written there, for the message.

    Returns:
        ``folder`` as a `Path`.

    Raises:
        InputError: a link or a file where a sub-folder goes, or an OS error (naming the folder).
    """
    folder = Path(folder)
    try:
        _make_folders(folder, inside, what)
    except OSError as err:
        raise InputError(f"{folder}: cannot make the folder for the {what} ({err.strerror or err})") from None
    return folder


def _make_named_folder(folder: Path, what: str) -> None:
    """Make a folder the user named (and its parents), a file in the way named as such."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # mkdir says only "File exists" or "Not a directory"
        blocking = next((p for p in (folder, *folder.parents) if os.path.lexists(p)), folder)
        mode = os.lstat(blocking).st_mode
        kind = "a file" if stat.S_ISREG(mode) else _kind(mode)
        if stat.S_ISLNK(mode):  # a link to a folder would do: where this one leads ("a symbolic link" read as refused)
            target = _mode_or_why(blocking, "a link to nothing", "a link to nothing")
            if not isinstance(target, str):
                target = f"a link to {'a file' if stat.S_ISREG(target) else _kind(target)}"
            kind = target
        raise InputError(f"{blocking}: is {kind}, not a folder; cannot write the {what} in it") from None


def _make_folders(folder: Path, inside: str | Path | None, what: str) -> None:
    if inside is None:
        _make_named_folder(folder, what)
        return
    current = Path(inside)
    # The named folder gets the same words: MISTAKE_CACHE=FILE left eval's cache warning at "(File exists)".
    _make_named_folder(current, what)
    for part in folder.relative_to(current).parts:
        current = current / part
        try:
            current.mkdir()
        except FileExistsError:
            mode = os.lstat(current).st_mode
            if not stat.S_ISDIR(mode):
                raise InputError(f"{current}: is {_kind(mode)}, not a folder; refusing to write the {what} "
                                 "through it") from None


FULL_BELOW_BYTES: Final = 1 << 20  # a folder with less room than this after a failed write is on a full disk


def write_failure(err: BaseException, folder: Path) -> str:
    """Why writing in ``folder`` failed, in words: a full disk is said as such, since numpy's writer reports it as a
    short write (``52480 requested and 39904 written``) and torch's as an internal error (``enforce fail at
    inline_container.cc``), neither with an error number."""
    if isinstance(err, OSError) and err.errno is not None:
        return err.strerror or str(err)
    try:
        if shutil.disk_usage(folder).free < FULL_BELOW_BYTES:
            return os.strerror(errno.ENOSPC)
    except OSError:
        pass
    text = str(err).strip()
    return text.splitlines()[0][:160] if text else type(err).__name__


@contextmanager
def atomic_path(
    path: str | Path,
    suffix: str = "",
    what: str = "output file",
    inside: str | Path | None = None,
    mode: int | None = None,
    replace: bool = True,
) -> Iterator[Path]:
    """A temporary path to write the output to, moved onto the output only if the block succeeds.

    The temporary path lies in a private folder (mode 0700, a dot name beside the output) that no other user can
    put anything into, so a writer that opens the path by name (``torch.save``, OpenCV, matplotlib) writes where it
    is told. The move is ``os.replace`` within one file system: readers see the old file or the whole new one,
    never half a file (a crash, a full disk, Ctrl-C); on failure the temporary folder is removed and the output is
    left as it was. The output is checked by `output_target` before the block runs and again just before the move:
    a symbolic link, device, FIFO, socket or folder there is refused.

    Args:
        path: the file to write; its parent folders are made (`make_folders`).
        suffix: ending of the temporary name, for writers that choose the format by it (``".mp4"``).
        what: what the output is, for the messages.
        inside: the output folder the user named, when ``path`` lies in sub-folders a command makes in it.
        mode: permission bits of the result (None: those of the file it replaces, else what the writer made).
        replace: False refuses to replace a file that exists by the time of the move (it is never overwritten).

    Yields:
        The temporary path (nothing exists there yet).

    Raises:
        InputError: the output path is refused (see `output_target`), or an OS error while writing or moving (a
            full disk, say): one line naming the output.
    """
    path = Path(path)
    command_began()  # a command that reads no options through `ArgumentParser` has begun by now
    output_target(path, what)
    scratch: Path | None = None
    try:
        try:
            _make_folders(path.parent, inside, what)
            # Made and named in one step; a signal held meanwhile is raised as the block ends, inside the `try`
            # whose `finally` removes the folder.
            with signals_deferred():
                scratch = Path(tempfile.mkdtemp(prefix=f".{path.name[:64]}.", suffix=".tmp", dir=path.parent))
        except OSError as err:
            raise InputError(f"{path}: cannot write the {what} ({err.strerror or err})") from None
        tmp = scratch / f"{path.name}{suffix}"
        try:
            yield tmp
            with signals_deferred():
                _commit(tmp, path, what, mode, replace)
        except OSError as err:
            raise InputError(f"{path}: cannot write the {what} ({write_failure(err, path.parent)})") from None
    finally:
        if scratch is not None:
            with signals_deferred():
                shutil.rmtree(scratch, ignore_errors=True)


def _commit(tmp: Path, path: Path, what: str, mode: int | None, replace: bool) -> None:
    """Move the finished temporary file onto the output (the last step of `atomic_path`)."""
    if not tmp.is_file() or tmp.is_symlink():
        raise InputError(f"{path}: the {what} was not written")
    output_target(path, what)  # again: something other than a file may have been put there meanwhile
    if mode is None and path.exists():
        mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode is not None:
        os.chmod(tmp, mode)
    if replace:
        os.replace(tmp, path)  # replaces a link planted since the check, never writes through it
        return
    try:
        os.link(tmp, path)  # fails if anything, a link included, exists there
    except FileExistsError:
        raise InputError(f"{path}: exists; refusing to replace it with the {what}") from None
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):  # a file system without hard links
            raise
        if os.path.lexists(path):
            raise InputError(f"{path}: exists; refusing to replace it with the {what}") from None
        os.rename(tmp, path)


def save_figure(figure: Any, path: str | Path, what: str, dpi: int, option: str = "") -> Path:
    """Write a matplotlib figure with `atomic_path` (the format chosen by the file's ending); the caller closes it.

    Args:
        figure: the figure (anything with matplotlib's ``savefig``).
        path: the file.
        what: what the figure is, for the message ("learning curve").
        dpi: resolution.
        option: the option that named the file, put before it in the message ("--plot"); "" for none.

    Raises:
        InputError: the file cannot be written (a full disk, a read-only folder).
    """
    path = Path(path)
    try:
        with atomic_path(path, suffix=path.suffix, what=what) as tmp:
            figure.savefig(tmp, dpi=dpi)
    except OSError as err:
        named = f"{option} {path}" if option else str(path)
        raise InputError(f"{named}: cannot write the {what} ({err.strerror or err})") from None
    return path
