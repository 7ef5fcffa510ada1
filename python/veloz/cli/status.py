"""`veloz status`'s command line; the work is veloz.control.status's."""

from __future__ import annotations

import argparse

from veloz.control import status
from veloz.control.status import run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="what veloz runs on this machine, and what killed runs left",
        description=status.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=run)
