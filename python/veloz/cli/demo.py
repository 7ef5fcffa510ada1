"""`veloz demo`'s command line; the work is veloz.lab.demo's."""

from __future__ import annotations

import argparse

from veloz.lab import demo
from veloz.lab.demo import run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="the main job: the headline experiment on the testbed, with its report",
        description=demo.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--count", type=int, default=200_000, help="frames in the exact phase")
    p.add_argument("--rate", default="500k", help="pps of the exact phase")
    p.add_argument("--trials", type=int, default=5, help="headline trials per backend")
    p.add_argument("--seconds", type=float, default=2.0, help="length of one headline run")
    p.add_argument("--sizes", default="64,1500", help="headline frame sizes")
    p.add_argument(
        "--cost-rate",
        default="500k",
        help="offered pps of the cost phase, below every backend's peak",
    )
    p.add_argument("--out", metavar="DIR", help="results and report (default ./veloz-results/…)")
    p.add_argument("--keep-testbed", action="store_true", help="leave the testbed up")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=run)
