"""`veloz bench`'s command line; the work is veloz.lab.bench's."""

from __future__ import annotations

import argparse

from veloz.lab import bench
from veloz.lab.bench import EXPERIMENTS, NOISES, run

NFS = ("drop", "tx", "redirect")


ACCESSES = (0, 25, 50, 100, 200, 400, 800, 1600, 3200)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run a lab experiment, write results and a report",
                       description=bench.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("experiment", metavar="EXPERIMENT", help=", ".join(EXPERIMENTS))
    p.add_argument("--backends",
                   help="comma-separated (default: all five; soak: all but linux)")  # fmt: skip
    p.add_argument("--sizes", help="frame sizes in bytes (default 64; headline 64,1500; "
                   "sizes 64..1500)")  # fmt: skip
    p.add_argument("--trials", type=int, default=5, help="repetitions, interleaved (default 5)")
    p.add_argument("--seconds", type=float, help="length of one run (default 2)")
    p.add_argument("--nf", choices=NFS, help="NF for sizes, noisy, cpu (drop) and latency (tx)")
    p.add_argument("--rates", help="offered rates for latency and cpu (100k, 1M, 2Mpps, 1Gbps)")
    p.add_argument("--steps", type=int, default=5, help="halvings per binary search")
    p.add_argument("--loss", type=float, default=0.005, help="loss of the lossy search")
    p.add_argument("--noises", default=",".join(NOISES), help="neighbours for noisy")
    p.add_argument("--accesses", default=",".join(map(str, ACCESSES)), help="for cost")
    p.add_argument("--repeat", type=int, default=200_000, help="runs per cost trial")
    p.add_argument("--routes", type=int, help="routes in router's and bgp's full table "
                   "(default 752138, the XDP paper's; fewer for a quicker run)")  # fmt: skip
    p.add_argument("--udp-workers", type=int, metavar="N",
                   help="knotd's UDP worker threads in udp-app (default 1)")  # fmt: skip
    p.add_argument("--out", metavar="DIR", help="results directory (default ./veloz-results/…)")
    p.add_argument("--no-report", action="store_true", help="write only the JSON")
    p.add_argument("--topology", metavar="FILE",
                   help="hosts and ports of the generator, DUT and sink (TOML; default: "
                   "the namespace testbed)")  # fmt: skip
    p.set_defaults(func=run)
