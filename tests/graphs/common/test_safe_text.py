"""One-line lists of names: the first few, and how many more."""

from __future__ import annotations

from graphs.common.safe_text import first_few


def test_first_few_names_the_first_and_counts_the_rest() -> None:
    assert first_few(["a", "b"], 5) == "a, b"
    assert first_few(["a", "b", "c", "d"], 2) == "a, b and 2 more"
    # Some were never named (only counted): the total says how many there are.
    assert first_few(["x; y", "z"], 3, total=4, sep="; ", and_more="; and ") == "x; y; z; and 2 more"
