"""`veloz run`: an NF on live interfaces, with per-second counters."""

from __future__ import annotations

import argparse
import os

from veloz import config, linux_backend, paths
from veloz.errors import VelozError

# backend -> the XDP attach mode vz-xdp uses
XDP_MODES = {"xdp": "native", "xdp-generic": "skb"}
LATER = ("afxdp", "dpdk")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run an NF on interfaces until stopped",
        description=(
            "Load the NF, attach it to each --iface (port 0, 1, ... in the order "
            "given) and print per-second counters: packets, bytes, pps and the "
            "count per verdict. Stops on Ctrl-C, SIGTERM, after --duration or when "
            "an interface disappears, and detaches everything. A program left "
            "behind by a run that was killed is reported; --replace removes it. "
            "afxdp and dpdk are listed but not built yet. Needs root."
        ),
    )
    p.add_argument("nf", help="NF name (see `veloz nfs`)")
    p.add_argument(
        "--backend",
        required=True,
        choices=(*XDP_MODES, "linux", *LATER),
        help="xdp: native driver hook; xdp-generic: after the skb is built; linux: the "
        "kernel's own baseline (drop: nftables raw prerouting drop)",
    )
    p.add_argument(
        "--iface", action="append", required=True, metavar="IF", help="a port (repeatable)"
    )
    p.add_argument("--config", metavar="FILE", help="NF config (TOML)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="config override")
    p.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    p.add_argument("--duration", type=float, metavar="SECONDS", help="stop after this long")
    p.add_argument(
        "--interval", type=float, default=1.0, metavar="SECONDS", help="between counter lines"
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="remove a stale veloz program left on an interface by a killed run",
    )
    p.set_defaults(func=run)


def command(args: argparse.Namespace) -> list[str]:
    if args.backend in LATER:
        raise VelozError(f"backend '{args.backend}' is not available in this build yet")
    nf = paths.nf(args.nf)
    values = config.load(args.config) | config.parse_sets(args.set)
    ports = list(dict.fromkeys(args.iface))  # a port once, in order
    # A port field may name an interface not given with --iface: it becomes a port.
    for key in config.PORT_FIELDS & values.keys():
        value = values[key]
        if isinstance(value, str) and not config.is_integer(value) and value not in ports:
            ports.append(value)
    if args.duration is not None and args.duration <= 0:
        raise VelozError("--duration must be positive")
    if args.interval <= 0:
        raise VelozError("--interval must be positive")
    cmd = [
        str(paths.tool("vz-xdp")), "run",
        "--bpf", str(nf.bpf),
        "--native", str(nf.native),
        "--mode", XDP_MODES[args.backend],
        "--interval", str(args.interval),
    ]  # fmt: skip
    for port in ports:
        cmd += ["--iface", port]
    for assignment in config.to_assignments(values, ports):
        cmd += ["--set", assignment]
    if args.json:
        cmd.append("--json")
    if args.duration is not None:
        cmd += ["--duration", str(args.duration)]
    if args.replace:
        cmd.append("--replace")
    return cmd


def run(args: argparse.Namespace) -> int:
    if args.backend == "linux":
        if args.config or args.set:
            raise VelozError("the linux baseline takes no NF config")
        if args.interval <= 0 or (args.duration is not None and args.duration <= 0):
            raise VelozError("--interval and --duration must be positive")
        return linux_backend.run(args.nf, list(dict.fromkeys(args.iface)), args.json,
                                 args.duration, args.interval, args.replace)  # fmt: skip
    cmd = command(args)
    # exec: SIGINT and SIGTERM reach the tool that must detach, not a wrapper.
    os.execv(cmd[0], cmd)
    return 1  # not reached
