# SPDX-License-Identifier: BSD-2-Clause
"""Waiting for something to happen, the one way every test tier does it.

As the kernel's selftests (tools/testing/selftests/net/lib/py: ksft_busy_wait,
wait_file): poll a condition until it holds, against a deadline that says
how long is too long, never a fixed sleep that guesses how long it takes.
pyproject.toml puts tests/ on pytest's path: `from waits import wait_until`
works in tests/unit, tests/net and tests/cli alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    value: Callable[[], T],
    timeout: float,
    *,
    until: Callable[[T], object] = bool,
    interval: float = 0.1,
    what: str = "the condition",
) -> T:
    """Call value() every `interval` seconds until until(it) holds (by
    default: until it is truthy) and return it. Once `timeout` seconds have
    passed (value() is called once more at the deadline), raise
    AssertionError naming `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        got = value()
        if until(got):
            return got
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{what}: not within {timeout:g} s (last: {got!r})")
        time.sleep(min(interval, left))


def settle(
    value: Callable[[], int], done: Callable[[int], bool], timeout: float = 10.0, quiet: float = 0.3
) -> int:
    """A count, once done(it) holds, or once it has stopped moving for
    `quiet` seconds (everything on its way has arrived: a run that may count
    fewer frames than were sent still ends), or at `timeout`; never raises.
    For a count whose final value is the answer, checked by the caller."""
    start = time.monotonic()
    last, moved = value(), start
    while not done(last) and time.monotonic() - start < timeout:
        time.sleep(0.02)
        now = value()
        if now != last:
            last, moved = now, time.monotonic()
        elif time.monotonic() - moved >= quiet:
            break
    return last
