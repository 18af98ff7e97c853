"""Settings files read into typed config dataclasses, the one way every command reads them.

A settings file is TOML (YAML with the same layout where the name ends in ``.yaml`` / ``.yml``). It is either flat,
the fields of one config (``tgml train --config``), or a set of tables, one per part (``[features]`` /
``[model]`` / ``[train]`` of ``recognition-train``, one table per method in ``prego-bench``'s settings). Keys no
config knows are refused (a misspelt key would otherwise be dropped without a word), and a value its config
refuses is reported with the file, and the table, in front of the config's own message.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any, Final, TypeVar

import numpy as np

from graphs.common.errors import InputError
from graphs.common.files import read_toml, read_yaml

C = TypeVar("C")


def field_names(config_type: type) -> frozenset[str]:
    """The field names of a config dataclass: the keys a settings table for it may hold."""
    return frozenset(f.name for f in fields(config_type))


def read_settings(path: str | Path, what: str = "config file", hint: str = "") -> dict[str, Any]:
    """Load a settings file: TOML, or YAML for a ``.yaml`` / ``.yml`` name; the document must be a table.

    Args:
        path: the file.
        what: what the file is, for the messages.
        hint: appended to the "not found" message of a TOML file (where such a file comes from).

    Returns:
        The document as a dict.
    """
    path = Path(path)
    if path.parent in (Path("."), Path("configs")) and not path.exists():  # as the docs write it, or a bare name
        hint = hint or _checkout_hint(path)
    data = read_yaml(path, what) if path.suffix in (".yaml", ".yml") else read_toml(path, what, hint)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a table of settings, got {json_kind(data)}")
    return data


# The settings files the docs name (`configs/...`) live in the project's checkout, beside the packages (the layout
# keeps them at the root, with benchmarks/ and docs/); an installed wheel has no such folder.
CHECKOUT_CONFIGS: Final = Path(__file__).resolve().parents[2] / "configs"
NO_CHECKOUT_HINT: Final = (" here; the settings files the docs name (configs/) come with the project's source "
                           "checkout, not with an installed package: --config the checkout's copy")


def _checkout_hint(path: Path) -> str:
    """Where the checkout's file of that name is, for a relative path not found here (the docs' ``--config
    configs/x.toml`` typed outside the checkout, or the bare name ``x``); for an installed package, which has no
    checkout beside it, where the docs' ``configs/`` comes from; empty for a name the checkout does not hold."""
    if not CHECKOUT_CONFIGS.is_dir():
        return NO_CHECKOUT_HINT if path.parent == Path("configs") else ""
    for name in (path.name, f"{path.name}.toml"):
        bundled = CHECKOUT_CONFIGS / name
        if bundled.is_file():
            return f" here; the project's configs/ is in its checkout: --config {bundled}"
    return ""


def check_known_keys(table: Mapping[str, Any], known: Collection[str], path: Path, table_name: str = "") -> None:
    """Refuse the first key of ``table`` that is not in ``known``.

    Args:
        table: the settings as read.
        known: the keys the config takes.
        path: the file, for the message.
        table_name: the table the keys sit in (empty for a flat file).
    """
    unknown = next((key for key in table if key not in known), None)
    if unknown is not None:
        where = f"[{table_name}] has unknown" if table_name else "unknown"
        raise InputError(f"{path}: {where} setting {unknown!r} (known: {', '.join(sorted(known))})")


def check_tables(
    document: Mapping[str, Any], tables: Mapping[str, Collection[str]], path: Path, kind: str = ""
) -> None:
    """Refuse a settings file of tables with a key outside any table, an unknown table, or an unknown key in one.

    Args:
        document: the file as read.
        tables: ``{table name: keys it may hold}``.
        path: the file, for the message.
        kind: what a table stands for, for the message (``"method"`` reads "unknown method table").
    """
    noun = f"{kind} table" if kind else "table"
    for name, body in document.items():
        if not isinstance(body, dict):  # it would apply to no table, silently
            known = ", ".join(f"[{t}]" for t in tables)
            raise InputError(f"{path}: setting {name!r} is outside any {noun} ({known})")
        if name not in tables:
            raise InputError(f"{path}: unknown {noun} [{name}] (known: {', '.join(tables)})")
        check_known_keys(body, tables[name], path, name)


_CONFIG_FIELD: Final = re.compile(r"[A-Z][A-Za-z0-9]*Config\.([a-z_][a-z0-9_]*)\b")


@contextmanager
def naming_the_file(path: Path, table_name: str = "", tables: Mapping[str, Collection[str]] | None = None
                    ) -> Iterator[None]:
    """Inside the block, a config's `InputError` is raised again with the file (and table) in front of it.

    A message that names the field by its class (``MiniROADConfig.dropout = 2``) names it as the file writes it
    (``[model] dropout = 2``) when ``tables`` says which table holds that key: the user never wrote the class.

    Args:
        path: the settings file the values came from.
        table_name: the table they came from (empty for a flat file, or when ``tables`` says it per key).
        tables: ``{table: keys it may hold}`` (``""`` for a flat file's keys); None keeps the class's name.
    """
    try:
        yield
    except InputError as err:
        message = str(err)
        field = _CONFIG_FIELD.match(message)
        table = next((t for t, keys in (tables or {}).items() if field and field[1] in keys), None)
        if field is not None and table is not None:
            message = field[1] + message[field.end():]
            table_name = table_name or table
        where = f" [{table_name}]" if table_name else ""
        raise InputError(f"{path}:{where} {message}") from None


@contextmanager
def naming_the_flags(given: Collection[str]) -> Iterator[None]:
    """Inside the block, a config's `InputError` that names a field by its class (``NoisyAndConfig.cut = 1.5``)
    names the command-line option it came from instead (``--cut 1.5``), for the fields in ``given``."""
    try:
        yield
    except InputError as err:
        message = str(err)
        field = _CONFIG_FIELD.match(message)
        if field is None or field[1] not in given:
            raise
        value = message[field.end():].removeprefix(" = ")
        raise InputError(f"--{field[1].replace('_', '-')} {value}") from None


def load_config_file(
    make: Callable[..., C], path: str | Path, defaults: Mapping[str, Any], overrides: Mapping[str, Any]
) -> C:
    """A flat settings file of one config's fields (``tgml train --config``), with overrides that win over it.

    Args:
        make: the config dataclass (it validates the values).
        path: TOML (or YAML) file with top-level keys named like the fields.
        defaults: values of the fields the file does not set (all of them: the keys the file may hold).
        overrides: field values that win over the file (None values are ignored).

    Returns:
        The validated config; errors name the file.
    """
    path = Path(path)
    data = read_settings(path)
    check_known_keys(data, defaults.keys(), path)
    merged = {**defaults, **data, **{k: v for k, v in overrides.items() if v is not None}}
    with naming_the_file(path, tables={"": defaults.keys()}):
        return make(**merged)


_FIELD_TYPES: dict[str, tuple[type, ...]] = {"float": (int, float), "int": (int,), "bool": (bool,), "str": (str,)}
_TYPE_WORDS = {"float": "a number", "int": "an integer", "bool": "true or false", "str": "a string"}


def as_written(value: object, limit: int = 80) -> str:
    """A settings value as a TOML or JSON file writes it (``true``, ``null``, ``"0.1"``, ``[1, nan]``,
    ``2020-01-01``), cut to ``limit`` characters (at least 4) with ``...``.

    The messages name values the user wrote; Python's spelling (``True``, ``'0.1'``) is not what they wrote.
    """
    text = _written(value, 0)
    limit = max(limit, 4)
    return text if len(text) <= limit else text[:limit - 3] + "..."


WRITTEN_DEPTH: Final = 8  # nesting shown before "..." (a value nested 100,000 deep is a message, not a crash)
WRITTEN_ITEMS: Final = 20  # items of a list or table shown before "..." (the line is cut at its limit anyway)


def _written(value: object, depth: int) -> str:
    if depth > WRITTEN_DEPTH:
        return "..."
    if isinstance(value, np.generic):  # a numpy scalar: its Python value
        value = value.item()
    if value is None or isinstance(value, bool | int | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        if math.isfinite(value):
            return json.dumps(value)
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")  # TOML's words (JSON has none)
    if isinstance(value, datetime.date | datetime.time):  # TOML's dates and times, written unquoted
        return value.isoformat()
    if isinstance(value, list | tuple):
        shown = [_written(v, depth + 1) for v in value[:WRITTEN_ITEMS]]
        return "[" + ", ".join(shown + ["..."] * (len(value) > WRITTEN_ITEMS)) + "]"
    if isinstance(value, dict):
        pairs = [f"{json.dumps(str(k), ensure_ascii=False)}: {_written(v, depth + 1)}"
                 for k, v in list(value.items())[:WRITTEN_ITEMS]]
        return "{" + ", ".join(pairs + ["..."] * (len(value) > WRITTEN_ITEMS)) + "}"
    return repr(value)


def json_kind(value: object) -> str:
    """What a JSON (or TOML/YAML) value is, in the file's words: ``null``, ``a list``, ``an object``, ``a string``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    kinds = ((int | float, "a number"), (str, "a string"), (list | tuple, "a list"), (dict, "an object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def check_field_types(config: Any) -> None:
    """Refuse a config dataclass field whose value is not of its declared type (a bool is not a number here).

    Run first in ``__post_init__``: the value checks compare numbers, which a string from a settings file would break.

    Raises:
        InputError: ``"<Config>.<field> = <value>: expected <type>"``.
    """
    for f in fields(config):
        value = getattr(config, f.name)
        if not isinstance(value, _FIELD_TYPES[str(f.type)]) or (str(f.type) != "bool" and isinstance(value, bool)):
            raise InputError(f"{type(config).__name__}.{f.name} = {as_written(value)}: expected "
                             f"{_TYPE_WORDS[str(f.type)]}")


def check_values(config: Any, checks: Iterable[tuple[str, bool, str]]) -> None:
    """Refuse the first failed value check of a config dataclass.

    Args:
        config: the config being validated.
        checks: ``(field, holds, what the field must be)``, in the order they are reported.

    Raises:
        InputError: ``"<Config>.<field> = <value>: expected <what>"``.
    """
    for name, ok, what in checks:
        if not ok:
            raise InputError(f"{type(config).__name__}.{name} = {as_written(getattr(config, name))}: expected {what}")

