# SPDX-License-Identifier: BSD-2-Clause
"""tests/waits.py: a wait returns what it waited for, or fails saying what
it waited for and what it last saw; a settle ends once a count stops."""

from __future__ import annotations

import itertools
import time

import pytest

from waits import settle, wait_until


def test_wait_until_returns_the_first_value_that_holds():
    counter = itertools.count()
    assert wait_until(lambda: next(counter), 5, interval=0) == 1  # 0 is falsy
    counter = itertools.count()
    got = wait_until(lambda: next(counter), 5, until=lambda n: n >= 3, interval=0)
    assert got == 3


def test_wait_until_a_value_of_zero_can_be_the_answer():
    assert wait_until(lambda: 0, 5, until=lambda n: n == 0) == 0


def test_wait_until_fails_with_what_and_the_last_value():
    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"^the count: not within 0.2 s \(last: 7\)$"):
        wait_until(lambda: 7, 0.2, until=lambda n: n > 7, interval=0.05, what="the count")
    assert 0.2 <= time.monotonic() - start < 2


def test_settle_ends_when_done_or_when_the_count_stops_moving():
    assert settle(lambda: 5, lambda n: n >= 5) == 5
    start = time.monotonic()
    assert settle(lambda: 3, lambda n: n >= 5, timeout=10, quiet=0.1) == 3
    assert time.monotonic() - start < 5  # the quiet period ended it, not the timeout
