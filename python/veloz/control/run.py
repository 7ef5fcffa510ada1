"""`veloz run`: an NF on live interfaces, with per-second counters."""

from __future__ import annotations

import argparse
import functools
import math
import os
from pathlib import Path
from typing import Any, NamedTuple

from veloz.control import linux_backend, metrics, objects
from veloz.core import config, options, paths, safeio
from veloz.core.errors import VelozError

# backend -> the XDP attach mode vz-xdp uses
XDP_MODES = {"xdp": "native", "xdp-generic": "skb"}
# backend -> the C tool that runs it; linux is the kernel's own (linux_backend)
TOOLS = {"xdp": "vz-xdp", "xdp-generic": "vz-xdp", "afxdp": "vz-afxdp", "dpdk": "vz-dpdk"}
# The tools' options that `veloz run` sets itself from its own arguments (the
# NF's builds, its config, its ports); vz-xdp's --mode is chosen by --backend.
SET_BY_RUN = {"bpf", "native", "set", "iface", "ops"}
# afxdp's --mode (its steering program's) is --xdp-mode here: --backend
# already says which XDP mode an NF runs in.
RENAMED = {"mode": "xdp-mode"}
# What the linux baseline (linux_backend.py) takes of the tools' options.
LINUX_TAKES = {"json", "interval", "duration", "replace"}

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


class Offered(NamedTuple):
    """A tool option as `veloz run` offers it."""

    tool: str  # the first tool whose table has it: its row, its bounds
    row: dict[str, Any]
    backends: tuple[str, ...]  # the backends whose tool has it


# the order in which the tables are read: the userspace runners' rows first
_READ_ORDER = ("afxdp", "dpdk", "xdp", "xdp-generic")


@functools.cache
def offered() -> dict[str, Offered]:
    """`veloz run`'s name of each backend option -> where it comes from,
    read from the tools' option tables (src/common/options.h)."""
    found: dict[str, tuple[str, dict[str, Any], list[str]]] = {}
    for backend in _READ_ORDER:
        tool = TOOLS[backend]
        for name, row in options.table(tool).items():
            if name in SET_BY_RUN or (name == "mode" and backend in XDP_MODES):
                continue
            found.setdefault(RENAMED.get(name, name), (tool, row, []))[2].append(backend)
    order = (*TOOLS, "linux")
    out = {}
    for name, (tool, row, backends) in found.items():
        backends += ["linux"] if name in LINUX_TAKES else []
        out[name] = Offered(tool, row, tuple(sorted(backends, key=order.index)))
    return out


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
        row, kw = o.row, {}
        default = row["default"] if everyone else argparse.SUPPRESS
        text = row["help"]
        if row["default"] not in (None, False):
            text += f" (default {row['default']})"
        if row["type"] == "flag":
            where.add_argument(f"--{name}", action="store_true", default=default, help=text)
            continue
        if row["type"] == "u64":
            kw["type"] = safeio.Bounded(int, o.tool, f"--{row['name']}")
        elif row["type"] == "seconds":
            kw["type"] = float  # safeio.bound_numbers bounds it
        if "choices" in row:
            kw["choices"] = row["choices"]
        where.add_argument(f"--{name}", default=default, metavar=row["metavar"], help=text, **kw)


def _ports(args: argparse.Namespace, values: dict) -> list[str]:
    ports = list(dict.fromkeys(args.iface))  # a port once, in order
    # A port field may name an interface not given with --iface: it becomes a port.
    for key in config.PORT_FIELDS & values.keys():
        value = values[key]
        if isinstance(value, str) and not config.is_integer(value) and value not in ports:
            ports.append(value)
    return ports


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The backend options on the command line (and the defaults of those
    every backend takes), by `veloz run`'s name."""
    out = {}
    for name in offered():
        value = getattr(args, name.replace("-", "_"), None)
        if value is not None and value is not False:
            out[name] = value
    return out


def _refuse_foreign_options(args: argparse.Namespace) -> None:
    """An option of another backend is a mistake worth one line, not silence:
    the same line its tool would print."""
    for name in _given(args):
        if args.backend not in offered()[name].backends:
            raise VelozError(f"--{name} is not an option of the {args.backend} backend")
    if args.backend == "linux" and args.metrics is not None:
        raise VelozError("--metrics is not an option of the linux backend")
    if args.backend != "dpdk" and args.passthrough:
        raise VelozError(f"EAL arguments is not an option of the {args.backend} backend")


def _tool_options(args: argparse.Namespace) -> list[str]:
    """The given options, as the backend's tool names them, each checked
    against that tool's own limits before it runs."""
    tool, back = TOOLS[args.backend], {v: k for k, v in RENAMED.items()}
    out: list[str] = []
    for name, value in _given(args).items():
        option = f"--{back.get(name, name)}"
        if offered()[name].row["type"] == "flag":
            out.append(option)
            continue
        if offered()[name].row["type"] == "u64":
            options.check(tool, option, value, f"--{name}")
        out += [option, str(value)]
    return out


def _check_idle(seconds: float) -> None:
    """--ctl-idle-timeout within the runners' own bounds (their option table)."""
    row = options.row("vz-xdp", "--ctl-idle-timeout")
    if not (math.isfinite(seconds) and row["min_exclusive"] < seconds <= row["max"]):
        raise VelozError(f"--ctl-idle-timeout must be positive seconds, at most {row['max']}")


def command(args: argparse.Namespace) -> list[str]:
    _refuse_foreign_options(args)
    given = _given(args)
    if "alloc" in given and "dispatch" not in given:
        raise VelozError("--alloc goes with --dispatch")
    if args.backend in XDP_MODES and "workers" in given and "dispatch" not in given:
        raise VelozError("--workers on xdp goes with --dispatch (the NIC's RSS spreads otherwise)")
    if args.metrics is not None:
        metrics.parse_listen(args.metrics)  # refused before anything is attached
    nf = paths.nf(args.nf)
    values = config.load(args.config) | config.parse_sets(args.set)
    values, nf_objects = objects.split_config(args.nf, values)
    ports = _ports(args, values)
    # routes, rules, VIPs...: checked here, applied by the tool before attaching
    base = Path(args.config).parent if args.config else Path.cwd()
    ops = objects.ops_fd(args.nf, nf_objects, objects.Ports(ports, objects.iface_macs(ports)), base)
    if args.duration is not None and args.duration <= 0:
        raise VelozError("--duration must be positive")
    if args.interval <= 0:
        raise VelozError("--interval must be positive")
    if "ctl-idle-timeout" in given:
        _check_idle(given["ctl-idle-timeout"])
    cmd = [str(paths.tool(TOOLS[args.backend])), "run"]
    if args.backend in XDP_MODES:
        cmd += ["--mode", XDP_MODES[args.backend]]
    cmd += ["--bpf", str(nf.bpf), "--native", str(nf.native), *_tool_options(args)]
    for port in ports:
        cmd += ["--iface", port]
    for assignment in config.to_assignments(values, ports):
        cmd += ["--set", assignment]
    if ops is not None:
        cmd += ["--ops", f"/proc/self/fd/{ops}"]
    if args.passthrough:
        cmd += ["--", *args.passthrough]
    return cmd


def lb_vips(values: dict) -> list:
    """The [[vip]] tables of an lb config: (VIP, backends) for nftables."""
    from veloz.control import lb

    out = []
    for n, item in enumerate(values.get("vip", []), 1):
        if not isinstance(item, dict) or not {"address", "port", "proto"} <= item.keys():
            raise VelozError(f"config: vip {n} needs address, port and proto")
        vip = lb.parse_vip(item["address"], item["port"], item["proto"])
        backends = item.get("backends", [])
        if not isinstance(backends, list):
            raise VelozError(f"config: vip {vip} backends must be a list")
        out.append((vip, [lb.parse_backend(b, f"vip {vip} backend") for b in backends]))
    return out


def _start_metrics(args: argparse.Namespace) -> None:
    """Bind --metrics now (busy: refused before the NF is attached) and fork
    its server, which reads this run's control socket (see metrics.py)."""
    from veloz.control.client import socket_path

    sock = metrics.listen(args.metrics)
    first = args.iface[0]
    metrics.fork_server(sock, lambda pid: metrics.RunCollector(lambda: socket_path(first), pid))
    sock.close()


def run(args: argparse.Namespace) -> int:
    if args.backend == "linux":
        _refuse_foreign_options(args)
        vips = None
        if args.nf == "lb" and args.config and not args.set:
            vips = lb_vips(config.load(args.config))
        elif args.config or args.set:
            raise VelozError("the linux baseline takes no NF config (lb: its VIPs only)")
        if args.interval <= 0 or (args.duration is not None and args.duration <= 0):
            raise VelozError("--interval and --duration must be positive")
        return linux_backend.run(args.nf, list(dict.fromkeys(args.iface)), args.json,
                                 args.duration, args.interval, args.replace, vips)  # fmt: skip
    cmd = command(args)
    if args.metrics is not None:
        _start_metrics(args)
    # exec: SIGINT and SIGTERM reach the tool that must detach, not a wrapper.
    os.execv(cmd[0], cmd)
    return 1  # not reached
