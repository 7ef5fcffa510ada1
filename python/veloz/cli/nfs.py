"""`veloz nfs`'s command line; the work is veloz.control.nfs's."""

from __future__ import annotations

import argparse

from veloz.control.nfs import run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "nfs",
        help="list the NFs of this build and the config each takes",
        description=(
            "Every NF with its XDP program, its config fields (names, sizes and "
            "defaults, read from the BPF object's BTF: the struct is defined once, "
            "in include/veloz/abi.h) and its own maps."
        ),
    )
    p.add_argument("nf", nargs="?", help="only this NF")
    p.add_argument("--json", action="store_true", help="one JSON object per NF, a list")
    p.set_defaults(func=run)
