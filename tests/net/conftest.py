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


@pytest.fixture(autouse=True)
def far_ends_receive(request):
    """Each testbed test starts with the far ends' receive programs in place.

    Without one, XDP_TX into gen-dut is lost (testbed.receivers._ensure_receiver), so
    every later tx capture there came back empty: once in CI, after a run of
    udpd tests, not reproduced since. A test that removed it (a kill -9's
    clean-up, a --replace) must not fail the tests after it."""
    if "testbed" in request.fixturenames and os.geteuid() == 0:
        tb.ensure_receivers()
