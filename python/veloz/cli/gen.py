"""`veloz gen`'s command line; the work is veloz.lab.gen's."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from veloz.cli import tool_options
from veloz.core import options
from veloz.core.errors import VelozError
from veloz.lab.gen import run


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
    try:
        _add_options(p)
    except VelozError as e:
        # a checkout not built yet: `veloz gen` says so when it runs
        p.epilog = f"(the options are read from vz-gen and vz-sink: {e})"
        p.set_defaults(func=_unbuilt(e))
        return
    p.set_defaults(func=run)


def _unbuilt(error: VelozError) -> Callable[[argparse.Namespace], int]:
    def refuse(args: argparse.Namespace) -> int:
        raise error

    return refuse


def _both(gen: dict, sink: dict, name: str) -> str:
    """The help of an option vz-gen and vz-sink share."""
    return f"{gen[name]['help']}; with --sink: {sink[name]['help']}"


def _add_options(p: argparse.ArgumentParser) -> None:
    """vz-gen's and vz-sink's options from their tables (help, type, bounds,
    default); what veloz itself decides (rate units, testbed addresses,
    IPv6, JSON, sink or generator) here. --batch, --threads and --count
    stay plain ints to argparse: veloz.lab.gen.command checks them against
    the same table, beside the rules that tie them to other options."""
    gen, sink = options.table("vz-gen"), options.table("vz-sink")
    tool_options.add(p, "vz-gen", gen["iface"], text=_both(gen, sink, "iface"))
    tool_options.add_from(p, "vz-gen", ("size",))
    p.add_argument("--rate", metavar="RATE",
                   help="pps (100k, 2M) or bit/s (1Gbps); 0: flat out "
                        f"(default {gen['rate']['default']} pps)")  # fmt: skip
    tool_options.add_from(p, "vz-gen", ("flows", "dsts", "dst-range", "dst-port", "tcp"))
    p.add_argument("--ipv6", action="store_true", help="IPv6 (testbed addresses; else give them)")
    tool_options.add_from(p, "vz-gen", ("afxdp", "queue"))
    tool_options.add_from(p, "vz-gen", ("batch", "threads"), bounded=False)
    tool_options.add_from(p, "vz-gen", ("batch-stamp", "static"))
    stop = p.add_mutually_exclusive_group()
    tool_options.add(stop, "vz-gen", gen["count"], bounded=False)
    tool_options.add(stop, "vz-gen", gen["duration"], text=_both(gen, sink, "duration"))
    # vz-gen's own help for the addresses, and where veloz finds them
    for name in ("src-mac", "dst-mac", "src-ip", "dst-ip"):
        text = f"{gen[name]['help']}; on a testbed interface, the testbed's by default"
        p.add_argument(f"--{name}", metavar=gen[name]["metavar"], help=text)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    group = p.add_argument_group("sink mode")
    group.add_argument("--sink", action="store_true", help="count arriving frames, send nothing")
    tool_options.add_from(group, "vz-sink", ("generic", "replace", "count-only"))
