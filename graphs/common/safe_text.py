"""Text from files and peers, made safe to show: on a terminal, in rich markup, on one error line.

Step names come from graph files, detector checkpoints and the wire; stream ids, paths and values come from users
and peers. None of them is trusted: a name holding ``[/]`` breaks rich markup, an escape sequence (``\\x1b[2J``, an
OSC title) reaches the terminal raw, a newline splits the one-line error. `printable` replaces every character that
is not plain visible text by its escape, so it is shown, never obeyed.
"""

from __future__ import annotations

import difflib
import json
import textwrap
import time
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Final

# Unicode categories that are not plain text: controls (C0, DEL, C1: ESC and CSI included), format characters
# (bidirectional overrides, zero-width joiners), surrogates, private use, unassigned, and line/paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


# What draws nothing by itself: controls, format characters, separators and spaces, and combining marks with nothing to
# combine with; and letters and symbols drawn as empty space (the Hangul fillers, the braille blank, the musical null
# notehead). Not unassigned or private-use characters: an emoji newer than this Python's tables, or a font's own
# symbol, is drawn (and `printable` shows it escaped at worst).
_DRAWS_NOTHING: Final = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"})
_BLANK_GLYPHS: Final = frozenset("\u115f\u1160\u3164\uffa0\u2800\U0001d159")
# Characters of those categories that are drawn all the same: the Ogham space mark and the prepended concatenation
# marks of Arabic, Syriac and Kaithi (the end of an ayah, U+06DD).
_DRAWN_ANYWAY: Final = frozenset("\u1680\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u08e2\U000110bd\U000110cd")


def shows_nothing(text: str) -> bool:
    """Whether ``text`` would show as blank (a name that is no name: an empty row in a table, an alert on nothing):
    empty, or only spaces, invisible characters, lone combining marks and glyphs drawn blank."""
    return all(c not in _DRAWN_ANYWAY and (c.isspace() or c in _BLANK_GLYPHS
                                           or unicodedata.category(c) in _DRAWS_NOTHING) for c in text)


@lru_cache(maxsize=4096)
def _safe_char(char: str) -> str:
    if unicodedata.category(char) not in _UNSAFE_CATEGORIES:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: object) -> str:
    """``text`` as plain visible characters: controls, escape sequences and invisible formatting become escapes.

    The result holds no newline, no escape character and no bidirectional override, so it can be printed on one
    line of a terminal. Brackets are kept: in rich, show it with `rich.text.Text`, never as a markup string.

    Args:
        text: any value; non-strings are converted with ``str``.

    Returns:
        The safe text (unchanged when it was already plain).
    """
    value = text if isinstance(text, str) else str(text)
    if value.isprintable():  # the common case, in C: no control, format or separator character at all
        return value
    return "".join(map(_safe_char, value))


def shortened(text: str, limit: int) -> str:
    """``text`` made `printable` and cut to ``limit`` characters (at least 4), ending in ``...`` where it was cut.

    The one cut of a value an error or warning line quotes: Python's ``{value!r:.80}`` cut the text with no mark and
    left its quote open, so a long name cut mid-word read as whole (``'Spread-Spread nut butter onto the tortilla,
    leaving 1/2-inc``). The cut comes after the escapes, so the line stays within ``limit`` however hostile the text.
    """
    shown = printable(text)
    limit = max(limit, 4)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


def quoted(value: object, limit: int = 80) -> str:
    """A value the user or a peer gave (a name, a key, an option's value), as a message quotes it: a string, a number,
    true, false or null as JSON writes it (``"video 1"``, ``null``: what a file or a peer's message held, not
    Python's ``None``), anything else as Python writes it (``(3, 'x')``); `printable` and cut with ``...`` to
    ``limit`` characters (`shortened`).

    One spelling for every quoted string: it is how `graphs.common.settings_files.as_written` writes one (use that for
    a settings value of any type), the way the user typed it in a JSON or TOML file or a shell, and a cut one is
    marked, never read as whole.
    """
    scalar = value is None or isinstance(value, str | int | float)  # bool is an int
    return shortened(json.dumps(value, ensure_ascii=False) if scalar else repr(value), limit)


def count_of(n: int, noun: str) -> str:
    """``1 video``, ``2 videos``: a count and its noun (a regular plural)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def first_few(
    items: Sequence[str], limit: int, total: int | None = None, sep: str = ", ", and_more: str = " and "
) -> str:
    """The first ``limit`` of ``items`` joined by ``sep``, then how many of ``total`` were left out, for one line:
    ``video_00, video_01 and 3 more``.

    Args:
        items: what to name (already made `printable` where it comes from outside).
        limit: how many to name at most.
        total: how many there are (default ``len(items)``; more when some were never named).
        sep: between two named items.
        and_more: before the ``N more`` count.

    Returns:
        The text.
    """
    rest = (len(items) if total is None else total) - min(len(items), limit)
    return sep.join(items[:limit]) + (f"{and_more}{rest} more" if rest > 0 else "")


HANG: Final = "  "  # the indent of a wrapped line after the first (`wrap_words`)


def unicode_form_hint(names: Sequence[str], known: Iterable[str]) -> str:
    """The end of an error line for ``names`` (file names) missing from ``known`` (annotated names): when some of
    them differ from a known name only in their Unicode form, what to do about it ("" when none does).

    A name typed on macOS often reaches the disk decomposed (NFD: "e" and a combining accent) while the annotation
    file holds it composed (NFC): both print alike, and "no annotation for vidéo_é" names a file that looks annotated.
    """
    composed = {unicodedata.normalize("NFC", name) for name in known}
    twins = [name for name in names if unicodedata.normalize("NFC", name) in composed]
    if not twins:
        return ""
    differ = ("differs from an annotated name only in its Unicode form" if len(twins) == 1
              else "differ from annotated names only in their Unicode form")
    return (f"; {first_few([printable(n) for n in twins], 3)} {differ} (a file name written decomposed, NFD, as macOS "
            "may write it): rename the files as the annotation file spells them")


NEAR_NAMES_LOOKED_AT: Final = 20  # file names `near_name_hint` looks for an annotated twin of, at least
NEAR_NAME_COMPARISONS: Final = 200_000  # and more while their comparisons stay under this (a fraction of a second)


def near_name_hint(names: Iterable[str], unmatched: Iterable[str]) -> str:
    """The end of an error line for ``names`` (file names) missing from the annotation file, when some of them are
    close to an annotated name that has no file (``unmatched``): one recording named two ways ("" when none is).

    Said because a file without annotation and an annotation without file were two lines far apart (the second only
    a count in the closing summary, after the first had ended the run), and a typo in one of them is why most often.
    """
    spare = sorted(set(unmatched))
    # Each name is compared with every spare one: a folder of thousands of files beside the wrong annotation file of
    # thousands of recordings took a minute to be refused. The first names in order, as many as a bounded number of
    # comparisons allows (every one of a few hundred), for a line showing three pairs at most.
    looked_at = sorted(names)[:max(NEAR_NAMES_LOOKED_AT, NEAR_NAME_COMPARISONS // max(len(spare), 1))]
    pairs = [(name, close[0]) for name in looked_at
             if (close := difflib.get_close_matches(name, spare, n=1, cutoff=0.75))]
    if not pairs:
        return ""
    shown = ", ".join(f"{printable(name)!r} and the annotated {printable(other)!r}" for name, other in pairs[:3])
    return (f"; {shown}{' and more' if len(pairs) > 3 else ''}: one recording named two ways? (the annotated "
            f"{'name has' if len(pairs) == 1 else 'names have'} no feature file): name them alike")


def closest_name(name: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` a mistyped ``name`` most likely meant (difflib's ratio 0.6 or more), or None."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return close[0] if close else None


def meant_name(name: str, names: Iterable[str], limit: int = 5) -> str:
    """The end of an error line for ``name``, which is none of ``names``: the closest of them (``; did you mean
    'video_03'?``), else the first ``limit`` (`` (they are: ...)``); "" when there are none, or none is close and
    ``limit`` is 0 (for a line that lists the names itself).

    Said because a typo in an option naming videos (``--test-videos video_3``) was answered only "is not an
    imported recording", and the name meant had to be looked up in the folder.
    """
    known = sorted(set(names))
    if (close := closest_name(name, known)) is not None:
        return f"; did you mean {printable(close)!r}?"
    return f" (they are: {first_few([printable(n) for n in known], limit)})" if known and limit > 0 else ""


UNKNOWN_NAMES_SHOWN: Final = 12  # known names `unknown_name` lists by default before "and N more"
UNKNOWN_NAME_CHARS: Final = 60  # of the unknown name itself: a key pasted whole from a file keeps the line short


def unknown_name(what: str, name: str, names: Iterable[str], limit: int | None = UNKNOWN_NAMES_SHOWN) -> str:
    """The one wording of "``name`` is not one of the known ``names``", a whole error line:
    ``--recipe 'tea': not one of the 3 known (coffee, tee, pancake); did you mean 'tee'?``.

    Said one way because some thirty sites each had their own ("(known: ...)", "choose from", "expected one of",
    "known:"), and a user met a different sentence for the same mistake in each command.

    Args:
        what: the leading part naming what is at fault, the file, option or field and the kind of name
            (``--config a.toml: setting``); the name follows it.
        name: the name given, which is none of ``names``.
        names: the known names, in the order to list them (repeats are dropped).
        limit: how many of them to list at most (None: all, for a list the user needs whole, as scenarios).

    Returns:
        The message, with the closest known name when one is close.
    """
    given = list(dict.fromkeys(names))
    known = [printable(n) for n in given]
    shown = printable(name)
    if len(shown) > UNKNOWN_NAME_CHARS:
        shown = shown[:UNKNOWN_NAME_CHARS - 3] + "..."
    if not known:
        return f"{what} {shown!r}: unknown (none is known)"
    listed = first_few(known, len(known) if limit is None else limit)
    among = "not the one known" if len(known) == 1 else f"not one of the {len(known)} known"
    return f"{what} {shown!r}: {among} ({listed}){meant_name(name, given, 0)}"


def wrap_words(text: str, width: int, indent: str = HANG) -> list[str]:
    """``text`` in lines of at most ``width`` (a longer word stays whole), broken between words only, the lines
    after the first indented by ``indent`` (a leading indent of ``text`` is kept on its first line).

    Args:
        text: one paragraph; its no-break spaces (U+00A0) never break.
        width: the columns a line may take.
        indent: put before every line after the first.

    Returns:
        The lines (none for an empty text).
    """
    return textwrap.wrap(text, max(width, 1), subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def clock_text(seconds: float) -> str:
    """A wall time as a person reads it on a console, ``HH:MM:SS`` local time (``--:--:--`` for a time beyond what the
    platform's clock functions take: a peer's timestamp may be anything)."""
    try:
        return time.strftime("%H:%M:%S", time.localtime(seconds))
    except (OverflowError, OSError, ValueError):
        return "--:--:--"
