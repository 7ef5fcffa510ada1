"""Fixtures for tests that send real packets through the namespace testbed (root only)."""

import os

import pytest

from veloz import testbed as tb


@pytest.fixture(scope="session")
def testbed():
    """The testbed, built once per session and always removed at the end.

    Yields status() as it was right after up(). A test that breaks the
    testbed should call tb.up() when done: up() repairs any drift cheaply.
    """
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root (network namespaces, veth)")
    try:
        tb.up()
        yield tb.status()
    finally:
        tb.down()
