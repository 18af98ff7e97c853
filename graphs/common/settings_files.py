"""Settings files read into typed config dataclasses, the one way every command reads them.

A settings file is TOML (YAML with the same layout where the name ends in ``.yaml`` / ``.yml``). It is either flat,
the fields of one config (``tgml train --config``), or a set of tables, one per part (``[features]`` /
``[model]`` / ``[train]`` of ``recognition-train``, one table per method in ``prego-bench``'s settings). Keys no
config knows are refused (a misspelt key would otherwise be dropped without a word), and a value its config
refuses is reported with the file, and the table, in front of the config's own message.

Each config dataclass declares, beside its fields and their defaults, a table of what each number (and each
choice) may be (``BOUNDS``: `Bound` per number), and checks it with `check_settings` as it is made: one check for
every command, file, ``--set KEY=VALUE`` and flag, before any work starts.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import tomllib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final, NoReturn, TypeVar

import numpy as np

from graphs.common.errors import InputError
from graphs.common.file_kinds import KINDS, looks_like
from graphs.common.files import read_json, read_toml, read_yaml
from graphs.common.options import MAX_EPOCHS, MAX_LEARNING_RATE, MAX_LOSS_WEIGHT, MAX_SEED, MAX_WIDTH
from graphs.common.safe_text import shortened, unknown_name

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
    if path.suffix.lower() == ".json" and path.is_file():  # read as TOML: "invalid TOML: Invalid statement (at ..."
        _refuse_json(path, what)
    data = read_yaml(path, what) if path.suffix in (".yaml", ".yml") else read_toml(path, what, hint)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a table of settings, got {json_kind(data)}")
    return data


def _refuse_json(path: Path, what: str) -> NoReturn:
    """Refuse a ``.json`` file given as a settings file, saying what it is when it is one of the project's files (an
    annotation file, a graph, a split given as ``--config`` beside them)."""
    formats = f"a {what} is TOML (.toml), or YAML named .yaml or .yml"
    try:
        kind = looks_like(read_json(path, what))
    except InputError:  # damaged, or no JSON at all: its name is enough to refuse it
        kind = None
    if kind is not None:
        raise InputError(f"{path}: this looks like {KINDS[kind]}, not a {what} ({formats})")
    raise InputError(f"{path}: a .json file; {formats}")


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
        where = f"[{table_name}] setting" if table_name else "setting"
        raise InputError(unknown_name(f"{path}: {where}", str(unknown), sorted(known), None))


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
            raise InputError(unknown_name(f"{path}: {noun}", str(name), tables, None))
        check_known_keys(body, tables[name], path, name)


# A settings class's field as its checks name it: ``NoisyAndConfig.cut``, ``CheckerSearch.priors`` (a search's grid).
_CONFIG_FIELD: Final = re.compile(r"[A-Z][A-Za-z0-9]*(?:Config|Search)\.([a-z_][a-z0-9_]*)\b")
# A grid's numbers as a check shows them (``[0.5, 1.5]``), said as the comma-separated option takes them.
_NUMBER_LIST: Final = re.compile(r"\[(-?[0-9.e+-]+(?:, -?[0-9.e+-]+)*)\]")


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
def naming_the_flags(given: Collection[str], option: str = "", defaults: Collection[str] = ()) -> Iterator[None]:
    """Inside the block, a config's `InputError` that names a field by its class (``NoisyAndConfig.cut = 1.5``)
    names the command-line option it came from instead (``--cut 1.5``), for the fields in ``given``; with
    ``option`` (``"--set"``), that option and the key (``--set cut=1.5``). Without ``option``, the other fields in
    ``given`` that its reason names are said as options too: ``--min-duration 0.05: expected a number >= --min-run
    (0.1)``, not ``>= min_run``, a name the user never typed.

    A check of two fields (`PairError`) that fails on a field the user left at its default, because of the other
    one, which the user typed, names the one typed: ``--min-run 100: expected a number <= --min-duration (0.5, its
    default)``, not ``--min-duration 0.5: ...``, an option the user never typed. ``defaults``: the fields that are
    options of the command left at their defaults, said as options in a reason, with ``its default`` by their value.
    """
    try:
        yield
    except InputError as err:
        err = on_the_given(err, given)
        message = str(err)
        field = _CONFIG_FIELD.match(message)
        if field is None or field[1] not in given:
            raise err from None
        value = message[field.end():].removeprefix(" = ")
        if not option and (numbers := _NUMBER_LIST.match(value)) is not None:
            value = numbers[1].replace(", ", ",") + value[numbers.end():]
        if option:
            raise InputError(f"{option} {field[1]}={value}") from None
        for name in given:
            if "_" in name:  # a word of prose (``background``) is left alone: only an identifier is surely the field
                value = re.sub(rf"\b{re.escape(name)}\b", _flag(name), value)
        raise InputError(f"{_flag(field[1])} {mark_defaults(value, defaults, _flag)}") from None


def on_the_given(err: InputError, given: Collection[str]) -> InputError:
    """``err`` as the refusal of the field the user gave, where it is a check of a pair (`PairError`) that failed
    on a field left at its default because of the other, which was given (`PairError.turned`); else ``err``."""
    if isinstance(err, PairError) and err.field not in given and err.other in given:
        return err.turned()
    return err


def mark_defaults(reason: str, defaults: Collection[str], shown: Callable[[str], str] = str) -> str:
    """``reason`` with each field of ``defaults`` it names written as ``shown`` writes it, and said to be at its
    default next to its value in brackets: ``min_duration (0.5)`` -> ``--min-duration (0.5, its default)``. Only
    identifiers (a ``_`` in them) are taken for fields: a word of prose (``background``) is left alone."""
    for name in defaults:
        if "_" in name:
            reason = re.sub(rf"\b{re.escape(name)}\b(?: \(([^()]*)\))?", _as_default(shown(name)), reason)
    return reason


def _as_default(flag: str) -> Callable[[re.Match[str]], str]:
    """A `re.sub` replacement of a field's name (and its value in brackets, if any) by ``flag`` left at its
    default: ``min_duration (0.5)`` -> ``--min-duration (0.5, its default)``."""
    return lambda found: f"{flag} ({found[1]}, its default)" if found[1] else flag


def _flag(field: str) -> str:
    """The command-line option of a config's field (``min_run`` -> ``--min-run``)."""
    return f"--{field.replace('_', '-')}"


def parse_set_options(items: Iterable[str], option: str = "--set") -> dict[str, Any]:
    """``--set KEY=VALUE`` options as ``{key: value}``, each VALUE read as a TOML value (``300``, ``1e-3``,
    ``true``, ``"1/n"``); a bare word that is no TOML value is taken as a string (``--set early_stop=none``).

    Raises:
        InputError: an item without ``=`` or without a key, or a key given twice, naming the option.
    """
    values: dict[str, Any] = {}
    for item in items:
        key, equals, text = item.partition("=")
        key = key.strip()
        if not equals or not key:
            raise InputError(f"{option} {item}: expected KEY=VALUE (a setting's name, =, a TOML value)")
        if key in values:
            raise InputError(f"{option} {item}: {key} is set twice")
        try:
            values[key] = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            values[key] = text.strip()  # refused by the setting's own check where it is no string setting
        except (ValueError, RecursionError):  # a value nested thousands deep, or of thousands of digits
            raise InputError(f"{option} {item}: not a value a setting takes") from None
    return values


def load_config_file(
    make: Callable[..., C], path: str | Path, defaults: Mapping[str, Any], overrides: Mapping[str, Any],
    option: str = "",
) -> C:
    """A flat settings file of one config's fields (``tgml train --config``), with overrides that win over it.

    Args:
        make: the config dataclass (it validates the values).
        path: TOML (or YAML) file with top-level keys named like the fields.
        defaults: values of the fields the file does not set (all of them: the keys the file may hold).
        overrides: field values that win over the file (None values are ignored).
        option: the option the overrides came from (``"--set"``), for their messages; empty: each is its own
            flag (``--beta``).

    Returns:
        The validated config; an error names the file, or the option, that gave the value.
    """
    path = Path(path)
    data = read_settings(path)
    check_known_keys(data, defaults.keys(), path)
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = next((key for key in given if key not in defaults), None)
    if unknown is not None:
        raise InputError(unknown_name(f"{option or 'override'}: setting", unknown, sorted(defaults), None))
    # One check of the values that will run, the file's and the overrides' together: checked apart, a file's
    # heads = 3 was refused under the default width 64 though --set width=96 made it divide. Each refusal names
    # where its field came from: a bad --set or flag value was blamed on the file, a file's value on the class.
    try:
        return make(**{**defaults, **data, **given})
    except InputError as err:
        field = _CONFIG_FIELD.match(str(err))
        by_option = field is not None and field[1] in given
        with naming_the_flags(given, option) if by_option else naming_the_file(path, tables={"": defaults.keys()}):
            raise err from None


def as_written(value: object, limit: int = 80) -> str:
    """A settings value as a TOML or JSON file writes it (``true``, ``null``, ``"0.1"``, ``[1, nan]``,
    ``2020-01-01``), cut to ``limit`` characters (at least 4) with ``...`` and made `printable` (`shortened`; a
    string is spelt as `quoted` spells it).

    The messages name values the user wrote; Python's spelling (``True``, ``'0.1'``) is not what they wrote.
    """
    return shortened(_written(value, 0), limit)


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


@dataclass(frozen=True)
class Bound:
    """The values a numeric setting may take: ``low``..``high``, either end left out with ``open_low`` /
    ``open_high``. ``high`` may be a function of no arguments, for a bound this machine sets (threads per core).

    Every int or float field of a settings dataclass has one (`check_settings` refuses a field without), so that no
    number a file can write (``9223372036854775807``, ``nan``, ``inf``, ``-1``) reaches a training loop unchecked:
    ``beta = 1e19`` trained to a loss of 1e21 and a nonsense graph, ``ensemble_size = 9223372036854775807`` hung.
    """

    low: float
    high: float | Callable[[], float]
    open_low: bool = False
    open_high: bool = False
    note: str = ""  # what some values mean, added to the rule ("0: off")

    def top(self) -> float:
        """The upper end, computed where it depends on the machine."""
        return self.high() if callable(self.high) else self.high

    def holds(self, value: float) -> bool:
        """Whether ``value`` (a finite number or any int) is in the range."""
        low, high = self.low, self.top()
        return (low < value if self.open_low else low <= value) and (value < high if self.open_high else value <= high)

    def rule(self, integer: bool) -> str:
        """The range as the messages and docs/ write it: ``an integer in 1..100000``, ``a number in (0, 1e+06]``."""
        low, high = self.low, self.top()
        if integer:  # integer ranges are written closed, ends included
            text = f"an integer in {int(low) + self.open_low}..{int(high) - self.open_high}"
        else:
            text = f"a number in {'(' if self.open_low else '['}{low:g}, {high:g}{')' if self.open_high else ']'}"
        return f"{text} ({self.note})" if self.note else text


def bounded_option(bound: Bound, integer: bool = True, listed: bool = False) -> Callable[[str], Any]:
    """argparse ``type=`` of a flag that sets a config's number under another name (``--ensemble``: a DO ensemble's
    ``ensemble_size``): refused as the command line is read, with the rule the settings file's key gets. A flag
    passed straight to a config is checked there instead (`naming_the_flags`). The benchmarks' numeric flags
    (``benchmarks/*.py``) take it too, with `graphs.common.command_line.ArgumentParser` for the one-line error.

    With ``listed``, the flag takes comma-separated numbers (``--rates 5,10,15``), at least one, each in range: the
    list as a Python list."""

    def number(text: str, shown: str) -> int | float:
        refused = argparse.ArgumentTypeError(f"{shown}: expected {'comma-separated numbers, each ' * listed}"
                                             f"{bound.rule(integer)}")
        try:
            value: int | float = int(text) if integer else float(text)
        except ValueError:  # not a number, or an integer of thousands of digits
            raise refused from None
        if isinstance(value, float) and not math.isfinite(value) or not bound.holds(value):
            raise refused
        return value

    def parse(text: str) -> int | float | list[int | float]:
        shown = text if len(text) <= 40 else text[:37] + "..."  # as typed, cut: it may be thousands of digits
        if not listed:
            return number(text, shown)
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not items:
            number("", shown)  # refused, with the rule
        return [number(item, shown) for item in items]

    return parse


# Ranges several configs share (graphs.common.options says why each end is where it is).
EPOCHS: Final = Bound(1, MAX_EPOCHS)
LEARNING_RATE: Final = Bound(0, MAX_LEARNING_RATE, open_low=True)
SEED: Final = Bound(0, MAX_SEED)
LOSS_WEIGHT: Final = Bound(0, MAX_LOSS_WEIGHT)
SHARE: Final = Bound(0, 1, open_high=True)  # a probability or fraction that may not be 1 (dropout, noise)
WIDTH: Final = Bound(1, MAX_WIDTH)
# The benchmarks' flags (benchmarks/*.py), far beyond any run that measures something, so that a typo, a sign or a
# NaN is refused before the run: unchecked, checker_load.py --streams 0 and wire_speed.py --repeats -3 ended in
# ValueError tracebacks, and view_draw.py --widths 0 timed a view of no columns (a figure of nothing).
RUN_SECONDS: Final = Bound(0, 7 * 86400, open_low=True, note="seconds")  # a run's or a trial's length: a week at most
WAIT_SECONDS: Final = Bound(0, 86400, note="seconds")  # a warm-up or a pause that may be none
COUNT: Final = Bound(1, 10**6)  # streams, pages, runs, repeats, events, files: at least one
EVENT_RATE: Final = Bound(0, 10**6, open_low=True, note="per second")  # key-steps, events or frames a second


# The field types a settings table may hold, by the annotation's text (configs use ``from __future__ import
# annotations``), and what a file writes for each. A float field takes an integer (``beta = 0``); an int field takes
# no float (``epochs = 10.0``: a typo, or a fraction that would be cut without a word), and no number takes true or
# false (Python's ``True`` is an int 1).
_NUMBER_TYPES: Final = {"int": (True, False), "float": (False, False), "int | None": (True, True),
                        "float | None": (False, True)}
_OTHER_TYPES: Final[dict[str, tuple[type, str]]] = {"bool": (bool, "true or false"), "str": (str, "a string")}


def check_settings(config: Any) -> None:
    """Check every field of a settings dataclass against its type and the class's table of allowed values: the one
    check that every settings file, ``--set KEY=VALUE`` and command-line flag goes through, before any work starts.

    The table is the class's ``BOUNDS`` (``{field: Bound}`` for numbers, ``{field: (choice, ...)}`` for strings),
    declared beside the fields and their defaults. Fields of other types (a list of names, a nested config) are the
    class's own to check, after this.

    Raises:
        InputError: ``"<Config>.<field> = <value>: expected <what is allowed>"`` (`naming_the_file` and
            `naming_the_flags` then name the file and key, or the option, instead of the class).
        TypeError: an int or float field without a `Bound` (a bug: the table must cover every number).
    """
    table: Mapping[str, Bound | tuple[str, ...]] = getattr(type(config), "BOUNDS", {})
    for f in fields(config):
        value, kind, allowed = getattr(config, f.name), str(f.type), table.get(f.name)
        if kind in _NUMBER_TYPES:
            if not isinstance(allowed, Bound):
                raise TypeError(f"{type(config).__name__}.{f.name}: no Bound in {type(config).__name__}.BOUNDS")
            integer, optional = _NUMBER_TYPES[kind]
            if value is None and optional:
                continue
            number = (int,) if integer else (int, float)
            ok = isinstance(value, number) and not isinstance(value, bool)
            # An int is never infinite, and math.isfinite(10**400) would raise OverflowError.
            if not ok or (isinstance(value, float) and not math.isfinite(value)) or not allowed.holds(value):
                _refuse(config, f.name, allowed.rule(integer))
        elif kind in _OTHER_TYPES:
            expected, words = _OTHER_TYPES[kind]
            if not isinstance(value, expected):
                _refuse(config, f.name, words)
            if isinstance(allowed, tuple) and value not in allowed:
                _refuse(config, f.name, f"one of {', '.join(as_written(choice) for choice in allowed)}")


def _refuse(config: Any, name: str, what: str) -> NoReturn:
    raise InputError(f"{type(config).__name__}.{name} = {as_written(getattr(config, name))}: expected {what}")


def settings_rules(config_type: type) -> dict[str, str]:
    """``{field: what it allows}`` for the numbers and choices of a settings dataclass's ``BOUNDS``, as the error
    messages write them (for docs and help texts)."""
    table: Mapping[str, Bound | tuple[str, ...]] = getattr(config_type, "BOUNDS", {})
    kinds = {f.name: str(f.type) for f in fields(config_type)}
    rules: dict[str, str] = {}
    for name, allowed in table.items():
        if isinstance(allowed, Bound):
            rules[name] = allowed.rule(_NUMBER_TYPES[kinds[name]][0])
        else:
            rules[name] = f"one of {', '.join(as_written(choice) for choice in allowed)}"
    return rules


class PairError(InputError):
    """A config's check of one field against another failed (`check_values` with a pair): the message names
    ``field``, and the error keeps what ``other`` must be for the same check to hold, so that a command can name
    the field the user set when ``field`` kept its default (`naming_the_flags`, `PairError.turned`).

    Args:
        message: the message naming ``field`` (``"SegmenterConfig.min_duration = 0.5: expected ..."``).
        config: the config's class name.
        field: the field the message names.
        other: the field it was checked against.
        other_value: that field's value.
        converse: what ``other`` must be, the check read the other way (``"a number <= min_duration (0.5)"``).
    """

    def __init__(self, message: str, config: str, field: str, other: str, other_value: object,
                 converse: str) -> None:
        super().__init__(message)
        self.config, self.field, self.other = config, field, other
        self.other_value, self.converse = other_value, converse

    def turned(self) -> InputError:
        """The same refusal naming ``other``: ``"SegmenterConfig.min_run = 100: expected a number <= min_duration
        (0.5)"`` (a float shown as short as it reads back: ``100``, not ``100.0``)."""
        value = self.other_value
        shown = f"{value:g}" if isinstance(value, float) and float(f"{value:g}") == value else as_written(value)
        return InputError(f"{self.config}.{self.other} = {shown}: expected {self.converse}")


def check_values(config: Any, checks: Iterable[tuple[str, bool, str] | tuple[str, bool, str, str, str]]) -> None:
    """Refuse the first failed value check of a config dataclass.

    Args:
        config: the config being validated.
        checks: ``(field, holds, what the field must be)``, in the order they are reported; a check of ``field``
            against another field is ``(field, holds, what, other, what other must be)``, and refused as a
            `PairError`.

    Raises:
        InputError: ``"<Config>.<field> = <value>: expected <what>"``.
    """
    for check in checks:
        name, ok, what = check[:3]
        if ok:
            continue
        message = f"{type(config).__name__}.{name} = {as_written(getattr(config, name))}: expected {what}"
        if len(check) == 5:
            other, converse = check[3], check[4]
            raise PairError(message, type(config).__name__, name, other, getattr(config, other), converse)
        raise InputError(message)

