"""The veloz testbed: three network namespaces joined by two veth pairs.

    vz-gen [gen-dut] <--veth--> [dut-gen] vz-dut [dut-sink] <--veth--> [sink-dut] vz-sink

vz-gen generates traffic, vz-dut runs the network function under test (and
forwards like a router when none is attached), vz-sink receives. MACs and
addresses are fixed so tests can predict every frame. Addresses come only
from 198.18.0.0/15 (RFC 2544 benchmarking) and fd00:198:18::/48, and no
namespace ever gets a default route: nothing can leave the testbed.

`PLAN` is the single source of truth; `up()` converges the machine to it,
whatever state it starts from, and `down()` removes it.
"""

from __future__ import annotations

import argparse
import json

from veloz.core.errors import VelozError
from veloz.testbed.namespaces import QUIET_S, QUIET_TIMEOUT_S, RTN_UNICAST, UP_TIMEOUT_S, down, up
from veloz.testbed.plan import (
    FAR_ENDS,
    LOCK_PATH,
    MTU,
    NAMESPACES,
    NETNS_DIR,
    PLAN,
    RECEIVER_PROG,
    ROUTER,
    ROUTES,
    Endpoint,
    Route,
    TestbedError,
    endpoint,
)
from veloz.testbed.reachability import ping
from veloz.testbed.receivers import ensure_receivers
from veloz.testbed.show import format_status, status

__all__ = [
    "Endpoint",
    "FAR_ENDS",
    "LOCK_PATH",
    "MTU",
    "NAMESPACES",
    "NETNS_DIR",
    "PLAN",
    "QUIET_S",
    "QUIET_TIMEOUT_S",
    "RECEIVER_PROG",
    "ROUTER",
    "ROUTES",
    "RTN_UNICAST",
    "Route",
    "TestbedError",
    "UP_TIMEOUT_S",
    "down",
    "endpoint",
    "ensure_receivers",
    "format_status",
    "ping",
    "status",
    "up",
    "run",
]


def run(args: argparse.Namespace) -> int:
    """`veloz testbed up|down|status` (its parser: veloz/cli/testbed.py)."""
    try:
        if args.action == "up":
            up()
        elif args.action == "down":
            down()
            if not args.json:
                print("testbed removed")
            return 0
        st = status()
    except TestbedError as e:
        raise VelozError(str(e), code=1) from None
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        print(format_status(st))
    return 0
