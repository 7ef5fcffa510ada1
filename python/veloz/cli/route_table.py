"""`veloz route-table`'s command line; the work is veloz.lab.route_table's."""

from __future__ import annotations

import argparse

from veloz.lab import route_table
from veloz.lab.route_table import PAPER_ROUTES, run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "route-table",
        help="write a synthetic internet-sized IPv4 routing table",
        description=route_table.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--count", type=int, default=PAPER_ROUTES, help="routes (default: the paper's)")
    p.add_argument("--seed", type=int, default=1, help="the same seed gives the same table")
    p.add_argument("--via", default="198.18.1.2", help="next hop of every route")
    p.add_argument("--port", type=int, default=1, help="egress port of every route")
    p.add_argument("--out", metavar="FILE", help="default: stdout")
    p.set_defaults(func=run)
