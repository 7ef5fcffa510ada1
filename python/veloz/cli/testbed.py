"""`veloz testbed up|down|status`: the network namespaces tests and the lab use."""

from __future__ import annotations

import argparse

from veloz.testbed import run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "testbed",
        help="create, remove or show the namespace testbed",
        description=(
            "Three network namespaces joined by veth pairs: vz-gen (gen-dut) <-> "
            "vz-dut (dut-gen, dut-sink) <-> vz-sink (sink-dut), with addresses "
            "from 198.18.0.0/15 and fd00:198:18::/48. `up` is idempotent and "
            "repairs a half-built testbed; `down` removes everything."
        ),
    )
    p.add_argument("action", choices=("up", "down", "status"))
    p.add_argument("--json", action="store_true", help="machine-readable status")
    p.set_defaults(func=run)
