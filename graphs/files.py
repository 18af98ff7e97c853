"""Reading the JSON, TOML and YAML files users hand us, with one-line errors instead of tracebacks;
checking outputs before a run (`check_output`) and writing files atomically (`atomic_path`, `write_text`).

Every command writes through `atomic_path`, and a write never destroys what stands at the output path: a symlink is
written through (its target is replaced, atomically), and only a regular file, or a path where nothing exists yet,
is ever replaced. A device node, FIFO, socket or folder there is refused with one line (`output_target`).
"""

from __future__ import annotations

import json
import math
import os
import stat
import tomllib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from graphs.errors import InputError


def _read_text(path: Path, what: str, hint: str = "") -> str:
    """The file's UTF-8 text; the I/O failures every reader shares become one-line `InputError`s."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found{hint}") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a {what}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file, expected a {what}") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read {what} ({err.strerror})") from None


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
    try:
        return json.loads(text, object_pairs_hook=_unique_keys(path), parse_float=_finite_float,
                          parse_constant=_refuse_constant)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: invalid JSON: arrays or objects nested too deeply") from None
    except ValueError as err:  # a number out of range, an integer of thousands of digits, NaN or Infinity
        detail = "an integer of thousands of digits" if "digits" in str(err) else str(err).splitlines()[0][:160]
        raise InputError(f"{path}: invalid JSON: {detail}") from None


def _finite_float(text: str) -> float:
    """A JSON number as a float; one too large for a float (``1e400``) would silently become infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of the float range")
    return value


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


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
    except ImportError:
        raise InputError(f"{path}: YAML needs the optional yaml extra (pip install pyyaml), or use TOML") from None
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise InputError(f"{path}: invalid YAML ({str(err).splitlines()[0]})") from None


def check_output(
    path: str | Path,
    what: str = "output file",
    folder: bool = False,
    inputs: Iterable[str | Path | None] = (),
    option: str = "",
) -> Path:
    """Refuse, before any work starts, an output the run could not write at its end, or that is one of its inputs.

    A long run that fails only when it saves its result loses the work; this checks up front that ``path`` is
    not a folder (a file output) or not a file (a ``folder`` output), and that the folder it goes into exists and
    can be written to. That folder is never created: a mistyped folder name (``--json reslts/run.json``) would
    otherwise become a new folder holding the results where nobody looks. A ``folder`` output itself may be new
    (the run creates it), its parent may not. An output that is also an input file of the run (``--out`` naming
    the annotation file) would be overwritten by the result, so it is refused too.

    Args:
        path: the output file (or folder, with ``folder=True``).
        what: what the output is, for the message (``"results file"``...).
        folder: the output is a folder.
        inputs: the files the run reads (None entries are skipped).
        option: the command-line option that gave ``path`` (``"--json"``), named in the message.

    Returns:
        ``path`` as a `Path`.
    """
    path = Path(path)
    named = f"{option} {path}" if option else str(path)
    for source in inputs:
        if source is not None and path.is_file() and Path(source).is_file() and path.samefile(source):
            raise InputError(f"{named}: the {what} would overwrite this input file of the run; choose another name")
    if folder and path.exists() and not path.is_dir():
        raise InputError(f"{named}: is a file, expected a folder for the {what}")
    if not folder and path.is_dir():
        raise InputError(f"{named}: is a folder, expected a file name for the {what}")
    parent = (path if folder else output_target(path, what)).parent
    existing = parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{named}: cannot write the {what}: {existing} is a file, not a folder")
    if existing != parent:
        raise InputError(f"{named}: cannot write the {what}: folder {parent} does not exist")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{named}: cannot write the {what}: folder {existing} is not writable")
    return path


def write_text(path: str | Path, text: str, what: str = "output file") -> Path:
    """Write a text file atomically (`atomic_path`), parents created; an OS failure is a one-line `InputError`.

    Args:
        path: the file.
        text: its whole content.
        what: what the file is, for the message.

    Returns:
        ``path`` as a `Path`.
    """
    path = Path(path)
    try:
        with atomic_path(path, what=what) as tmp:
            tmp.write_text(text, encoding="utf-8")
    except OSError as err:
        raise InputError(f"{path}: cannot write the {what} ({err.strerror or err})") from None
    return path


_FILE_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def output_target(path: str | Path, what: str = "output file") -> Path:
    """The file that writing ``path`` replaces, refused unless it is a regular file or does not exist yet.

    A symlink is followed to its final target, so a write goes through the link instead of replacing the link;
    a device node, FIFO, socket or folder at the path (or at the end of its links) is refused: renaming a file over
    ``/dev/full`` replaces the device itself.

    Args:
        path: the output path as the user gave it.
        what: what the output is, for the message.

    Returns:
        The path to replace: ``path`` itself, or the end of its symlinks.

    Raises:
        InputError: the path is something other than a regular file, or cannot be examined (a symlink loop).
    """
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):  # nothing there yet (a file as a parent fails when writing)
        return target
    except OSError as err:
        raise InputError(f"{path}: cannot examine the {what} path ({err.strerror or err})") from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _FILE_KINDS if test(mode)), "a special file")
        via = f" (through the link to {target})" if target != path else ""
        raise InputError(f"{path}: is {kind}{via}, not a regular file; refusing to replace it with the {what}")
    return target


@contextmanager
def atomic_path(path: str | Path, suffix: str = "", what: str = "output file") -> Iterator[Path]:
    """A temporary path beside the output to write to, moved onto it only if the block succeeds.

    The move is ``os.replace`` within one folder, so readers see the old file or the whole new one,
    never half a file (a crash, a full disk, Ctrl-C); on failure the temporary file is removed and
    the output is left as it was. The process id in the name keeps two writers of one file apart.
    The output is `output_target` of ``path``: a symlink is written through to its target (which keeps its
    permission bits), and anything but a regular file is refused before the block runs and again just before the
    move.

    Args:
        path: the file to write; its parent folders are created.
        suffix: ending of the temporary name, for writers that choose the format by it (``".mp4"``).
        what: what the output is, for the message of a refusal.

    Yields:
        The temporary path (hidden: a dot name in the same folder).

    Raises:
        InputError: the output path is a device, FIFO, socket or folder (see `output_target`).
    """
    target = output_target(path, what)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp{suffix}")
    try:
        yield tmp
        output_target(target, what)  # again: something other than a file may have been put there meanwhile
        if target.exists():
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
