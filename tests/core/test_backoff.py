"""``Backoff``: the one retry policy (camera reopen, Triton reconnect, remote swap sessions,
model downloads)."""

from __future__ import annotations

import math

import pytest

from livecam.core.backoff import Backoff


def test_waits_double_up_to_the_longest_and_start_over_after_a_success() -> None:
    waits = Backoff(0.5, 5.0)
    assert [waits.next_s() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    waits.reset()
    assert waits.next_s() == 0.5


def test_slowest_jumps_to_the_longest_wait_and_stays() -> None:
    waits = Backoff(0.5, 10.0)
    waits.next_s()
    waits.slowest()
    assert [waits.next_s() for _ in range(3)] == [10.0, 10.0, 10.0]


def test_a_longest_wait_below_the_first_is_the_first() -> None:
    waits = Backoff(2.0, 1.0)
    assert [waits.next_s() for _ in range(3)] == [2.0, 2.0, 2.0]


@pytest.mark.parametrize(("initial_s", "max_s"), [(0.0, 1.0), (1.0, -1.0)])
def test_waits_must_be_positive(initial_s: float, max_s: float) -> None:
    with pytest.raises(ValueError, match="waits must be positive"):
        Backoff(initial_s, max_s)


def test_without_a_longest_wait_the_waits_keep_doubling() -> None:
    waits = Backoff(0.5, math.inf)  # the model download's bounded tries
    assert [waits.next_s() for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, 8.0]
