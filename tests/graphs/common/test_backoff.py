"""The growing wait of a retry (a refused handshake, a signal that landed in a finalizer)."""

from __future__ import annotations

from graphs.common.backoff import capped_doubling


def test_the_wait_doubles_from_the_first_up_to_the_cap_and_stays_there() -> None:
    assert [capped_doubling(0.1, n, 5.0) for n in range(4)] == [0.1, 0.2, 0.4, 0.8]
    assert capped_doubling(0.1, 6, 5.0) == capped_doubling(0.1, 10**9, 5.0) == 5.0  # no overflow however many


def test_a_negative_count_waits_the_first_wait() -> None:
    assert capped_doubling(0.5, -3, 5.0) == 0.5
