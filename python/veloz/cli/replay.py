"""`veloz replay`'s command line; the work is veloz.lab.replay's."""

from __future__ import annotations

import argparse

from veloz.lab.replay import run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="run a pcap through an NF (XDP test run or native build)",
        description=(
            "Run every packet of IN through the NF: on 'xdp' with BPF_PROG_TEST_RUN "
            "on the loaded program (needs root), on 'native' through the userspace "
            "build. Frames the NF sends (tx, redirect) are written to OUT in input "
            "order. Both backends give the same verdicts and bytes: compare them to "
            "test an NF without a testbed."
        ),
    )
    p.add_argument("nf", help="NF name (see `veloz nfs`)")
    p.add_argument("--backend", required=True, choices=("xdp", "native"))
    p.add_argument("--in", dest="input", required=True, metavar="IN.pcap")
    p.add_argument("--out", metavar="OUT.pcap", help="where the sent frames go")
    p.add_argument("--config", metavar="FILE", help="NF config (TOML)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="config override")
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON record per input packet (index, verdict, len_in, len_out, "
        "port, ns), then a summary record",
    )
    p.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="also time each packet over N runs and report ns per packet",
    )
    p.set_defaults(func=run)
