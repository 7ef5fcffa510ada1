"""`veloz run`: an NF on live interfaces, with per-second counters."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from veloz import config, linux_backend, metrics, options, paths, sim
from veloz.control import objects
from veloz.errors import VelozError

# backend -> the XDP attach mode vz-xdp uses
XDP_MODES = {"xdp": "native", "xdp-generic": "skb"}
# backend -> the C tool that runs it in userspace
USERSPACE = {"afxdp": "vz-afxdp", "dpdk": "vz-dpdk"}

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
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run an NF on interfaces until stopped",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_options(p)
    _add_ctl_options(p)
    _add_dispatch_options(p)
    _add_backend_options(p)
    # What follows `--` on the command line (cli.parse_args puts it here).
    p.set_defaults(func=run, passthrough=[])
    p.epilog = "dpdk: EAL arguments go after `--`, e.g. `-- -a 0000:3b:00.0 -l 2-3`."


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """What runs, on which ports, and what it prints."""
    p.add_argument("nf", help="NF name (see `veloz nfs`)")
    p.add_argument(
        "--backend", required=True, choices=(*XDP_MODES, *USERSPACE, "linux"), help="see above"
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


def _add_ctl_options(p: argparse.ArgumentParser) -> None:
    """Who may reach the run while it runs: veloz ctl, Prometheus."""
    p.add_argument(
        "--ctl-group",
        metavar="GROUP",
        help="let this group's members use `veloz ctl` on the run (else root only): "
        "the control socket becomes root:GROUP 0660",
    )
    p.add_argument(
        "--ctl-idle-timeout",
        type=float,
        metavar="SECONDS",
        help="close a `veloz ctl` session whose client sends nothing for this long, rolling "
        "back its open transaction, so a stopped client cannot hold the NF (default 30)",
    )
    p.add_argument(
        "--metrics",
        metavar="ADDR:PORT",
        help="serve the counters as Prometheus text on http://ADDR:PORT/metrics "
        "(loopback or testbed addresses; see veloz/metrics.py)",
    )


def _add_dispatch_options(p: argparse.ArgumentParser) -> None:
    """A dispatch stage in front of the workers."""
    p.add_argument(
        "--dispatch",
        choices=sim.policy_choices(),
        help="spread flows over --workers through a dispatch stage (afxdp: a dispatcher "
        "thread and rings; dpdk: a dispatcher lcore and rte_rings; xdp, xdp-generic: a "
        "cpumap redirect): rss-mod is hash modulo active workers (Shenango), flow-affinity "
        "keeps each busy flow on its worker (Calisto) and moves idle ones to the least "
        "loaded, buckets moves the fewest hash buckets to even the load (RSS++), adaptive "
        "hashes until queues build (src/dispatch/policy.h)",
    )
    p.add_argument(
        "--alloc",
        action="store_true",
        help="with --dispatch: grow and shrink the active workers with queueing delay "
        "(xdp, xdp-generic: the CPUs' cpumap queues, checked every millisecond)",
    )


def _add_backend_options(p: argparse.ArgumentParser) -> None:
    """The options of the userspace backends: afxdp and dpdk."""
    us = p.add_argument_group("afxdp and dpdk")
    us.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="threads (xdp --dispatch: CPUs) running the NF",
    )
    us.add_argument(
        "--queues", type=int, metavar="N", help="receive queues per port (default: --workers)"
    )
    us.add_argument("--batch", type=int, default=64, metavar="N", help="frames per burst (1-256)")
    xsk = p.add_argument_group("afxdp")
    copy = xsk.add_mutually_exclusive_group()
    copy.add_argument("--copy", action="store_true", help="force copy mode")
    copy.add_argument("--zero-copy", action="store_true", help="require zero-copy")
    xsk.add_argument("--busy-poll", action="store_true", help="SO_PREFER_BUSY_POLL sockets")
    xsk.add_argument(
        "--xdp-mode",
        choices=("native", "skb"),
        default="native",
        help="attach mode of the steering program",
    )
    dpdk = p.add_argument_group("dpdk")
    dpdk.add_argument(
        "--pmd",
        choices=("af_xdp", "af_packet", "eal"),
        default="af_xdp",
        help="how each --iface becomes a DPDK port: a net_af_xdp or net_af_packet vdev on "
        "it, or (eal) a port EAL probes from the arguments after `--`, named by its DPDK "
        "name or PCI address, or by the kernel interface it drives",
    )
    dpdk.add_argument("--no-huge", action="store_true", help="ordinary memory, no hugepages")


def _ports(args: argparse.Namespace, values: dict) -> list[str]:
    ports = list(dict.fromkeys(args.iface))  # a port once, in order
    # A port field may name an interface not given with --iface: it becomes a port.
    for key in config.PORT_FIELDS & values.keys():
        value = values[key]
        if isinstance(value, str) and not config.is_integer(value) and value not in ports:
            ports.append(value)
    return ports


def _userspace_options(args: argparse.Namespace) -> list[str]:
    tool = USERSPACE[args.backend]  # its own limits, checked before it runs
    options.check(tool, "--workers", args.workers)
    if args.queues is not None:
        options.check(tool, "--queues", args.queues)
    options.check(tool, "--batch", args.batch)
    opts = ["--workers", str(args.workers), "--batch", str(args.batch)]
    if args.dispatch:
        opts += ["--dispatch", args.dispatch] + (["--alloc"] if args.alloc else [])
    if args.queues is not None:
        opts += ["--queues", str(args.queues)]
    if args.backend == "afxdp":
        opts += ["--mode", args.xdp_mode]
        opts += ["--copy"] if args.copy else ["--zero-copy"] if args.zero_copy else []
        opts += ["--busy-poll"] if args.busy_poll else []
    else:
        opts += ["--pmd", args.pmd] + (["--no-huge"] if args.no_huge else [])
    return opts


def _refuse_foreign_options(args: argparse.Namespace) -> None:
    """An option of another backend is a mistake worth one line, not silence."""
    given = {
        "--workers": args.workers != 1,
        "--dispatch": args.dispatch is not None,
        "--alloc": args.alloc,
        "--queues": args.queues is not None,
        "--batch": args.batch != 64,
        "--copy": args.copy,
        "--zero-copy": args.zero_copy,
        "--busy-poll": args.busy_poll,
        "--xdp-mode": args.xdp_mode != "native",
        "--pmd": args.pmd != "af_xdp",
        "--no-huge": args.no_huge,
        "--ctl-group": args.ctl_group is not None,
        "--ctl-idle-timeout": args.ctl_idle_timeout is not None,
        "--metrics": args.metrics is not None,
        "EAL arguments": bool(args.passthrough),
    }
    ctl = ("--ctl-group", "--ctl-idle-timeout", "--metrics")  # runs with a control socket
    accepted = {
        "afxdp": {"--workers", "--queues", "--batch", "--copy", "--zero-copy", "--busy-poll",
                  "--xdp-mode", "--dispatch", "--alloc", *ctl},
        "xdp": {"--dispatch", "--alloc", "--workers", *ctl},
        "xdp-generic": {"--dispatch", "--alloc", "--workers", *ctl},
        "dpdk": {"--workers", "--queues", "--batch", "--pmd", "--no-huge", "EAL arguments",
                 "--dispatch", "--alloc", *ctl},
    }.get(args.backend, set())  # fmt: skip
    for option, is_given in given.items():
        if is_given and option not in accepted:
            raise VelozError(f"{option} is not an option of the {args.backend} backend")


def _check_idle(seconds: float) -> None:
    """--ctl-idle-timeout within the runners' own bounds (their option table)."""
    row = options.row("vz-xdp", "--ctl-idle-timeout")
    if not (math.isfinite(seconds) and row["min_exclusive"] < seconds <= row["max"]):
        raise VelozError(f"--ctl-idle-timeout must be positive seconds, at most {row['max']}")


def command(args: argparse.Namespace) -> list[str]:
    _refuse_foreign_options(args)
    if args.alloc and not args.dispatch:
        raise VelozError("--alloc goes with --dispatch")
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
    if args.ctl_idle_timeout is not None:
        _check_idle(args.ctl_idle_timeout)
    if args.backend in USERSPACE:
        cmd = [str(paths.tool(USERSPACE[args.backend])), "run", *_userspace_options(args)]
    else:
        cmd = [str(paths.tool("vz-xdp")), "run", "--mode", XDP_MODES[args.backend]]
        if args.dispatch:
            # the userspace runner's bound: vz-xdp's own is looser
            options.check("vz-afxdp", "--workers", args.workers)
            cmd += ["--dispatch", args.dispatch, "--workers", str(args.workers)]
            cmd += ["--alloc"] if args.alloc else []
        elif args.workers != 1:
            raise VelozError(
                "--workers on xdp goes with --dispatch (the NIC's RSS spreads otherwise)"
            )
    cmd += ["--bpf", str(nf.bpf), "--native", str(nf.native), "--interval", str(args.interval)]
    for port in ports:
        cmd += ["--iface", port]
    for assignment in config.to_assignments(values, ports):
        cmd += ["--set", assignment]
    if ops is not None:
        cmd += ["--ops", f"/proc/self/fd/{ops}"]
    if args.json:
        cmd.append("--json")
    if args.duration is not None:
        cmd += ["--duration", str(args.duration)]
    if args.replace:
        cmd.append("--replace")
    if args.ctl_group is not None:
        cmd += ["--ctl-group", args.ctl_group]
    if args.ctl_idle_timeout is not None:
        cmd += ["--ctl-idle-timeout", repr(args.ctl_idle_timeout)]
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
