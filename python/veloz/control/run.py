"""`veloz run`: an NF on live interfaces, with per-second counters."""

from __future__ import annotations

import argparse
import functools
import math
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from veloz.control import linux_backend, metrics, objects
from veloz.core import config, options, paths
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


def config_values(args: argparse.Namespace) -> tuple[dict[str, object], Path]:
    """The NF's config (--config's file, or the table an instance file holds,
    with --set over it) and the folder its relative file names start from."""
    table = getattr(args, "config_table", None)
    if table is not None:
        return dict(table) | config.parse_sets(args.set), args.config_base
    values = config.load(args.config) | config.parse_sets(args.set)
    return values, Path(args.config).parent if args.config else Path.cwd()


def command(args: argparse.Namespace) -> list[str]:
    _refuse_foreign_options(args)
    given = _given(args)
    if {"copy", "zero-copy"} <= given.keys():  # the tools take the last one given
        raise VelozError("--copy and --zero-copy exclude each other")
    if "alloc" in given and "dispatch" not in given:
        raise VelozError("--alloc goes with --dispatch")
    if args.backend in XDP_MODES and "workers" in given and "dispatch" not in given:
        raise VelozError("--workers on xdp goes with --dispatch (the NIC's RSS spreads otherwise)")
    if args.metrics is not None:
        metrics.parse_listen(args.metrics)  # refused before anything is attached
    nf = paths.nf(args.nf)
    values, base = config_values(args)
    values, nf_objects = objects.split_config(args.nf, values)
    ports = _ports(args, values)
    # routes, rules, VIPs...: checked here, applied by the tool before attaching
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


def _listen_once_free(value: str, timeout: float = 30.0) -> socket.socket:
    """--metrics for a --take-over: the run taken over serves that port until
    it leaves (its server goes with it), so bind as soon as it is free."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return metrics.listen(value)
        except VelozError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def _start_metrics(args: argparse.Namespace) -> None:
    """Bind --metrics now (busy: refused before the NF is attached) and fork
    its server, which reads this run's control socket (see metrics.py)."""
    from veloz.control import companion
    from veloz.control.client import socket_path

    first = args.iface[0]

    def collector(pid: int) -> metrics.RunCollector:
        return metrics.RunCollector(lambda: socket_path(first), pid)

    if getattr(args, "take_over", False):

        def serve(pid: int) -> None:
            metrics.serve(_listen_once_free(args.metrics), collector(pid))

        companion.fork("metrics server", serve)
        return
    sock = metrics.listen(args.metrics)
    metrics.fork_server(sock, collector)
    sock.close()


def _start_companions(args: argparse.Namespace) -> None:
    """The companions the NF's config asks for (companion.py), forked now to
    start once the runner's control socket appears: the router's sync with
    the kernel's table, lb's health checks (checked by command() already)."""
    if args.nf not in ("lb", "router"):
        return
    values = config_values(args)[0]  # a file's, or an instance's inline table
    if args.nf == "lb":
        from veloz.control import health

        checked = health.targets(values)
        if checked:
            health.start(checked, args.iface[0])
        return
    from veloz.control import route_sync

    source = route_sync.parse_source(objects.split_config(args.nf, values)[1])
    if source is not None:
        route_sync.start(source, args.iface[0])


def run(args: argparse.Namespace, before_exec: Callable[[], None] | None = None) -> int:
    """`veloz run`; before_exec, if given, runs last before the runner takes
    this process's place (an instance's companion: service.py)."""
    if args.backend == "linux":
        _refuse_foreign_options(args)
        vips = None
        if args.nf == "lb" and args.config and not args.set:
            from veloz.control import health

            values = config.load(args.config)
            vips = lb_vips(values)
            if health.targets(values):
                raise VelozError("the linux baseline runs no health checks: drop the check tables")
        elif args.config or args.set:
            raise VelozError("the linux baseline takes no NF config (lb: its VIPs only)")
        if args.interval <= 0 or (args.duration is not None and args.duration <= 0):
            raise VelozError("--interval and --duration must be positive")
        return linux_backend.run(args.nf, list(dict.fromkeys(args.iface)), args.json,
                                 args.duration, args.interval, args.replace, vips)  # fmt: skip
    cmd = command(args)
    if args.metrics is not None:
        _start_metrics(args)
    _start_companions(args)
    if before_exec is not None:
        before_exec()
    # exec: SIGINT and SIGTERM reach the tool that must detach, not a wrapper.
    os.execv(cmd[0], cmd)
    return 1  # not reached
