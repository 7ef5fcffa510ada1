"""`veloz demo`: the main job (filled in with the XDP runner)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="testbed up, drop NF on xdp and xdp-generic, table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotImplementedError("demo: in progress")
