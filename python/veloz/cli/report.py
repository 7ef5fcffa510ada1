"""`veloz report`'s command line; the work is veloz.lab.report's."""

from __future__ import annotations

import argparse

from veloz.lab import report
from veloz.lab.report import run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write an HTML report of a results directory",
                       description=report.__doc__)  # fmt: skip
    p.add_argument("directory", metavar="DIR", help="a `veloz bench` results directory")
    p.set_defaults(func=run)
