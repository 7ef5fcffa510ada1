"""`veloz gen`'s command line; the work is veloz.lab.gen's."""

from __future__ import annotations

import argparse

from veloz.lab.gen import BATCH, run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gen",
        help="send generated traffic out of an interface",
        description=(
            "Transmit UDP or TCP frames, over IPv4 or IPv6, out of IF at a paced rate "
            "using XDP live frames (BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES): the "
            "kernel sends the frames without building skbs. On a testbed interface the "
            "addresses default to the testbed's; elsewhere give --dst-mac and --dst-ip. "
            "With --afxdp the frames go through an AF_XDP socket's TX ring instead "
            "(for drivers without XDP transmit); the transmit time is taken as a frame "
            "enters the ring, so latency then includes the generator's own queue. "
            "Every frame carries a sequence number and its transmit time, and valid "
            "checksums. With --sink, count the generator's frames arriving on IF instead "
            "(in XDP, then dropped): received, duplicates, reordered, and one-way "
            "latency percentiles (p50 p90 p99 p99.9 max) from an HDR-style histogram, "
            "until Ctrl-C or --duration. Needs root."
        ),
    )
    p.add_argument("--iface", required=True, metavar="IF")
    p.add_argument("--size", type=int, default=64, help="frame size in bytes (60-3520)")
    p.add_argument("--rate", default="100k", help="pps (100k, 2M) or bit/s (1Gbps); 0 = max")
    p.add_argument("--flows", type=int, default=1, help="distinct source ports")
    p.add_argument(
        "--dsts",
        type=int,
        default=1,
        help="distinct destination addresses, spread over --dst-range (IPv4 live frames; "
        "frame k goes to destination k mod N and source port k mod --flows)",
    )
    p.add_argument("--dst-range", metavar="CIDR", help="where --dsts come from")
    p.add_argument(
        "--dst-port", type=int, default=9, help="UDP/TCP destination port (9, discard; the sink's)"
    )
    p.add_argument("--tcp", action="store_true", help="TCP segments (ACK) instead of UDP")
    p.add_argument("--ipv6", action="store_true", help="IPv6 (testbed addresses; else give them)")
    p.add_argument(
        "--afxdp", action="store_true", help="send through an AF_XDP socket, not live frames"
    )
    p.add_argument("--queue", type=int, default=0, help="the AF_XDP socket's queue")
    p.add_argument("--batch", type=int, default=BATCH,
                   help=f"live frames per kernel batch, 1-256 (default {BATCH})")  # fmt: skip
    p.add_argument("--threads", type=int, default=1,
                   help="live-frames transmit threads, each pinned to a CPU of its own "
                        "(frames numbered 0, 1, 2, ... across all of them)")  # fmt: skip
    p.add_argument("--batch-stamp", action="store_true",
                   help="one clock read per kernel batch: a batch's frames carry the time "
                        "its first was made (they leave together, at its flush)")  # fmt: skip
    p.add_argument("--static", action="store_true",
                   help="every frame the same, built once: no sequence number, timestamp or "
                        "flows (for receivers that only count: the cheapest frame)")  # fmt: skip
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--count", type=int, help="packets to send")
    stop.add_argument("--duration", type=float, default=None, help="seconds to send")
    p.add_argument("--src-mac")
    p.add_argument("--dst-mac")
    p.add_argument("--src-ip")
    p.add_argument("--dst-ip")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    sink = p.add_argument_group("sink mode")
    sink.add_argument("--sink", action="store_true", help="count arriving frames, send nothing")
    sink.add_argument("--generic", action="store_true", help="sink in generic XDP mode")
    sink.add_argument("--replace", action="store_true", help="remove a killed run's program")
    sink.add_argument(
        "--count-only", action="store_true", help="count every frame, unread: the cheapest sink"
    )
    p.set_defaults(func=run)
