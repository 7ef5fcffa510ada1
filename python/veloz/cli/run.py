"""`veloz run`'s command line; the work is veloz.control.run's."""

from __future__ import annotations

import argparse
from typing import NoReturn

from veloz.cli import tool_options
from veloz.control import instance
from veloz.control.run import TOOLS, Offered, offered, run
from veloz.core.errors import VelozError

PERSIST_MISSING = "persist needs a veloz with --persist"

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

--instance NAME runs the instance file /etc/veloz/instances/NAME.toml (or a
path): its NF, backend, ports, NF config and options, as veloz@NAME.service
does (docs/service.md). SIGHUP then reloads the NF's config instead of
stopping the run.
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
    p.set_defaults(func=_run, passthrough=[])
    # the parser itself: an instance's command line is checked by it
    p.set_defaults(run_parser=p)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """What runs, on which ports, and who may read its counters."""
    p.add_argument("nf", nargs="?", help="NF name (see `veloz nfs`)")
    p.add_argument("--backend", choices=(*TOOLS, "linux"), help="see above (required)")
    p.add_argument("--iface", action="append", metavar="IF", help="a port (repeatable; required)")
    p.add_argument(
        "--instance",
        metavar="NAME|PATH",
        help="run an instance file (/etc/veloz/instances/NAME.toml) in place of "
        "NF, --backend, --iface and --config",
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


def _run(args: argparse.Namespace) -> int:
    if args.instance is None:
        missing = [what for what, value in (("NF", args.nf), ("--backend", args.backend),
                                            ("--iface", args.iface)) if not value]  # fmt: skip
        if missing:
            raise VelozError(f"`veloz run` needs {', '.join(missing)} (or --instance NAME)")
        return run(args)
    return _run_instance(args)


def has_persist(parser: argparse.ArgumentParser) -> bool:
    """Whether this veloz's `run` takes --persist (its parser says)."""
    return any("--persist" in a.option_strings for a in parser._actions)


def instance_args(inst: instance.Instance, parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The instance as `veloz run`'s arguments, checked by its own parser:
    a bad value is one line naming the instance file."""
    if inst.persist and not has_persist(parser):
        raise VelozError(PERSIST_MISSING)

    def refuse(message: str) -> NoReturn:
        raise VelozError(f"{inst.path}: {message}")

    error, parser.error = parser.error, refuse  # type: ignore[method-assign]
    try:
        return parser.parse_args(instance.run_argv(inst)[1:])
    finally:
        parser.error = error  # type: ignore[method-assign]


def _run_instance(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.run_parser
    # --take-over says how the run starts (from a running one), not what it runs
    for action in parser._actions:
        if action.dest in ("instance", "help", "take_over") or (
            not action.option_strings and action.dest != "nf"
        ):
            continue
        if getattr(args, action.dest, action.default) not in (action.default, None):
            what = action.option_strings[0] if action.option_strings else "an NF name"
            raise VelozError(f"--instance names everything a run needs; not {what} too")
    if args.passthrough:
        raise VelozError("--instance takes no EAL arguments after --: its options do")
    inst = instance.load(args.instance)
    run_args = instance_args(inst, parser)
    run_args.take_over = getattr(args, "take_over", False)
    values = inst.config_values()  # read once: what runs is what the companion records
    run_args.config_table, run_args.config_base = values, inst.base
    run_args.passthrough = []
    return run(run_args, before_exec=instance.before_exec(inst, values))
