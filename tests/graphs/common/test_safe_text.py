"""One-line lists of names: the first few, and how many more."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from graphs.common.safe_text import first_few, shows_nothing, unknown_name, wrap_words


def test_first_few_names_the_first_and_counts_the_rest() -> None:
    assert first_few(["a", "b"], 5) == "a, b"
    assert first_few(["a", "b", "c", "d"], 2) == "a, b and 2 more"
    # Some were never named (only counted): the total says how many there are.
    assert first_few(["x; y", "z"], 3, total=4, sep="; ", and_more="; and ") == "x; y; z; and 2 more"


def test_wrap_words_breaks_between_words_and_keeps_a_long_word_whole() -> None:
    assert wrap_words("aaa bbb ccc", 7) == ["aaa bbb", "  ccc"]
    assert wrap_words("a-very-long-word b", 4) == ["a-very-long-word", "  b"]
    assert wrap_words("x\u00a0y z", 3) == ["x\u00a0y", "  z"]  # a no-break space holds a figure together
    assert wrap_words("", 10) == []


@pytest.mark.parametrize("text", ["", " ", "\t\n", "\u200b", "\u3000", "\u3164", "\u2800", "\ufe0f", "\u034f", "\x1b",
                                  "\U0001d159"])
def test_text_that_draws_as_blank_shows_nothing(text: str) -> None:
    assert shows_nothing(text)


# Emoji newer than Python 3.11's Unicode tables (unassigned there), a private-use symbol, the Ogham space mark and the
# end of an ayah are drawn: they were refused as names that show nothing.
@pytest.mark.parametrize("text", ["a", " a ", "\u00e9", "\u3164x", "\u2801", "\u4e00", "-", "0", "\U0001fae8",
                                  "\U0001fa77", "\uf8ff", "\u1680", "\u06dd", "\u0e01\u0e34", "\u0915\u094d"])
def test_text_with_a_visible_character_shows_something(text: str) -> None:
    assert not shows_nothing(text)


def test_near_name_hint_looks_at_a_few_names_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # A folder of thousands of files beside the wrong annotation file: each was compared with every annotated name
    # before the error line came (2000 files and 10000 names: seconds), for a line showing three pairs at most.
    import difflib

    from graphs.common.safe_text import near_name_hint

    compared: list[str] = []
    real = difflib.get_close_matches

    def counted(word: str, possibilities: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
        compared.append(word)
        return real(word, possibilities, n, cutoff)

    monkeypatch.setattr(difflib, "get_close_matches", counted)
    files = {f"clip_{k:04d}" for k in range(1000)} | {"eggs_01"}
    assert near_name_hint(files, ["eggs_1", *(f"other_{k}" for k in range(50))]).startswith(
        "; 'eggs_01' and the annotated 'eggs_1': one recording named two ways?")  # a few annotated: every file
    compared.clear()
    assert near_name_hint(files, [f"nusar_{k:05d}" for k in range(10000)]) == ""
    assert len(compared) <= 20


def test_unknown_name_is_one_wording_naming_what_the_count_the_list_and_the_name_meant() -> None:
    assert (unknown_name("--recipe", "tee", ["coffee", "tea", "pancakes"])
            == "--recipe 'tee': not one of the 3 known (coffee, tea, pancakes); did you mean 'tea'?")
    assert (unknown_name("--config a.toml: setting", "zzz", ["cut"])
            == "--config a.toml: setting 'zzz': not the one known (cut)")
    assert unknown_name("learner", "x", []) == "learner 'x': unknown (none is known)"
    # A long list is cut unless the site needs it whole; repeats are listed once, in the order given.
    many = [f"video_{k:02d}" for k in range(30)]
    assert unknown_name("--test-videos", "clip", many, 3) == (
        "--test-videos 'clip': not one of the 30 known (video_00, video_01, video_02 and 27 more)")
    assert unknown_name("--scenario", "zz", [*many, "video_00"], None).endswith("video_28, video_29)")
    # The name typed is shown safe and short: a key pasted whole from a file, an escape sequence.
    line = unknown_name("setting", "\x1b[2J" + "k" * 200, ["a"])
    assert "\x1b" not in line and len(line) < 120
