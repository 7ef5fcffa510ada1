"""`veloz run`'s command line; the work is veloz.control.run's."""

from __future__ import annotations

import argparse

from veloz.cli import tool_options
from veloz.control.run import TOOLS, Offered, offered, run
from veloz.core.errors import VelozError

DESCRIPTION = """\
Load the NF, attach it to each --iface (port 0, 1, ... in the order given) and
print counters every --interval: packets, bytes, pps and the count per verdict,
in total and per worker (a CPU on xdp, a thread or lcore in userspace). Stops
on Ctrl-C, SIGTERM, after --duration or when an interface disappears, and
removes everything it set up. A program left behind by a run that was killed
is reported; --replace removes it. Needs root.

Backends:
  xdp          the NF in the kernel, at the driver's XDP hook
  xdp-generic  the NF in the kernel, at the generic XDP hook (after the skb)
  afxdp        the NF in userspace on AF_XDP sockets; a small XDP program
               steers the --queues into the sockets. Zero-copy where the
               driver offers it (veth: copy only, said on stderr).
  dpdk         the NF in userspace on DPDK lcores; each --iface becomes a
               net_af_xdp port (--pmd af_packet: net_af_packet; --pmd eal:
               any port EAL probes, e.g. `-- -a 0000:3b:00.0`). DPDK runs
               --in-memory (no hugepage files); 2 MiB hugepages are reserved
               by veloz when too few are free and given back at exit, or
               --no-huge uses ordinary memory. EAL arguments go after `--`.
  linux        the kernel's own baseline: drop = nftables raw prerouting
               drop; tx and redirect = kernel IP forwarding

On afxdp and dpdk, PASS hands the frame to the kernel through a TAP device
(vzt-IFNAME) that wears the port's MAC address, so the kernel answers and
forwards as if the frame had arrived on the port.

Every backend prints the same counters: packets (frames the NF ran on), the
count per verdict, rx, errors (rx_invalid, tx_failed, pass_failed, and
rx_missed: frames the port dropped before a worker saw them, null where only
the driver knows) and from_kernel (frames the host sent out through the TAP).

--dispatch spreads flows over --workers through a dispatch stage (afxdp: a
dispatcher thread and rings; dpdk: a dispatcher lcore and rte_rings; xdp,
xdp-generic: a cpumap redirect to --workers CPUs): rss-mod is hash modulo
active workers (Shenango), flow-affinity keeps each busy flow on its worker
(Calisto) and moves idle ones to the least loaded, buckets moves the fewest
hash buckets to even the load (RSS++), adaptive hashes until queues build
(src/dispatch/policy.h). --alloc grows and shrinks the active workers with
queueing delay. --ctl-group lets a group's members use `veloz ctl` on the run
(the control socket becomes root:GROUP 0660); --ctl-idle-timeout closes a
session whose client sends nothing for that long, rolling back its open
transaction. The options below are the backends' tools' own, with their
help and defaults; each group is titled with the backends that take it.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run an NF on interfaces until stopped",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_options(p)
    try:
        _add_backend_options(p, offered())
    except VelozError as e:
        # a checkout not built yet: `veloz run` says so when it runs
        p.epilog = f"(the backends' options are read from their tools: {e})"
    else:
        p.epilog = "dpdk: EAL arguments go after `--`, e.g. `-- -a 0000:3b:00.0 -l 2-3`."
    # What follows `--` on the command line (cli.parse_args puts it here).
    p.set_defaults(func=run, passthrough=[])


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """What runs, on which ports, and who may read its counters."""
    p.add_argument("nf", help="NF name (see `veloz nfs`)")
    p.add_argument("--backend", required=True, choices=(*TOOLS, "linux"), help="see above")
    p.add_argument(
        "--iface", action="append", required=True, metavar="IF", help="a port (repeatable)"
    )
    p.add_argument("--config", metavar="FILE", help="NF config (TOML)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="config override")
    p.add_argument(
        "--metrics",
        metavar="ADDR:PORT",
        help="serve the counters as Prometheus text on http://ADDR:PORT/metrics "
        "(loopback or testbed addresses; see veloz/control/metrics.py; not on linux)",
    )


def _title(backends: tuple[str, ...]) -> str:
    return backends[0] if len(backends) == 1 else f"{', '.join(backends[:-1])} and {backends[-1]}"


def _add_backend_options(p: argparse.ArgumentParser, table: dict[str, Offered]) -> None:
    """Each option as its tool's table declares it: help, type, choices,
    bounds and default. One that only some backends take sits in a group
    titled with them, and is absent from the namespace unless given."""
    groups: dict[tuple[str, ...], argparse._ActionsContainer] = {}
    for name, o in table.items():
        everyone = len(o.backends) == len(TOOLS) + 1
        if everyone:
            where: argparse._ActionsContainer = p
        elif o.backends not in groups:
            where = groups[o.backends] = p.add_argument_group(_title(o.backends))
        else:
            where = groups[o.backends]
        default = o.row["default"] if everyone else argparse.SUPPRESS
        tool_options.add(where, o.tool, o.row, flags=(f"--{name}",), default=default)
