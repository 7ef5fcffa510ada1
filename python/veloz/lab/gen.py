"""`veloz gen`: the traffic generator (XDP live frames, BPF_PROG_RUN)."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from veloz import testbed
from veloz.core import options, paths
from veloz.core.errors import VelozError

_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgG]?)\s*(pps|bps|bit/s|b/s)?\s*$")
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}


# Past any link (a 1.6 Tbit/s port carries 2.4 G minimum-size frames per
# second): a typo, and beyond it float digits overflow to infinity.
MAX_RATE = 10**10
# vz-gen's length of a run given neither --count nor --duration (its help
# says so); said on its command line, so the argv tells how long it sends
DURATION = 10.0


def parse_rate(text: str, size: int, option: str = "--rate") -> int:
    """'2M' or '2Mpps' -> 2000000 pps; '1Gbps' -> packets of `size` bytes per second."""
    m = _RATE.match(text)
    if not m:
        raise VelozError(f"{option} '{text}' is not a rate (examples: 100k, 2M, 2Mpps, 1Gbps)")
    value = float(m.group(1)) * _SCALE[m.group(2).lower()]
    if m.group(3) in ("bps", "bit/s", "b/s"):
        value /= size * 8
    if value < 1:
        raise VelozError(f"{option} '{text}' is below one packet per second")
    if not value <= MAX_RATE:  # inf too
        raise VelozError(f"{option} '{text}' is more than {MAX_RATE:.0e} packets per second")
    return int(value)


def _iface_mac(iface: str) -> str | None:
    try:
        return Path(f"/sys/class/net/{iface}/address").read_text().strip()
    except OSError:
        return None


def _changed(args: argparse.Namespace, option: str) -> bool:
    """OPTION (vz-gen's) holds other than vz-gen's default: worth passing."""
    value = getattr(args, option.removeprefix("--").replace("-", "_"))
    return value not in (None, options.row("vz-gen", option)["default"])


def command(args: argparse.Namespace) -> list[str]:
    if any(getattr(args, a, False) for a in ("generic", "replace", "count_only")):
        raise VelozError("--generic, --replace and --count-only go with --sink")
    if _changed(args, "--queue") and not args.afxdp:
        raise VelozError("--queue goes with --afxdp (live frames have no queue to choose)")
    # vz-gen's own limits (its option table), checked before anything runs
    for option in ("--batch", "--threads", "--size", "--flows", "--dsts", "--dst-port", "--queue"):
        options.check("vz-gen", option, getattr(args, option[2:].replace("-", "_")))
    for option in ("--batch", "--threads", "--batch-stamp"):
        if _changed(args, option) and args.afxdp:
            raise VelozError(f"{option} is for live frames, not --afxdp")
    if args.duration is not None and args.duration <= 0:
        raise VelozError("--duration must be positive")
    if args.rate is None:
        rate = options.row("vz-gen", "--rate")["default"]
    else:
        rate = 0 if args.rate.strip() == "0" else parse_rate(args.rate, args.size)
    src_mac, dst_mac, src_ip, dst_ip = args.src_mac, args.dst_mac, args.src_ip, args.dst_ip
    try:
        ep = testbed.endpoint(args.iface)
    except (KeyError, testbed.TestbedError):
        ep = None
    if ep is not None:
        # Testbed defaults: to the far side of the DUT, through the DUT's MAC.
        peer = testbed.endpoint(ep.peer)
        sink = testbed.endpoint("sink-dut")
        src_mac = src_mac or ep.mac
        dst_mac = dst_mac or peer.mac
        family = "ipv6" if args.ipv6 else "ipv4"
        src_ip = src_ip or getattr(ep, family).split("/")[0]
        dst_ip = dst_ip or getattr(sink, family).split("/")[0]
    if _iface_mac(args.iface) is None and not Path(f"/sys/class/net/{args.iface}").exists():
        # said first: "give --dst-mac" would mislead a user who gave it
        raise VelozError(f"no interface '{args.iface}' in this network namespace")
    src_mac = src_mac or _iface_mac(args.iface)
    if not (src_mac and dst_mac and src_ip and dst_ip):
        raise VelozError(f"{args.iface} is not a testbed interface: give --dst-mac and --dst-ip")
    cmd = [
        str(paths.tool("vz-gen")),
        "--iface", args.iface,
        "--size", str(args.size),
        "--rate", str(rate),
        "--flows", str(args.flows),
        "--src-mac", src_mac, "--dst-mac", dst_mac,
        "--src-ip", src_ip, "--dst-ip", dst_ip,
    ]  # fmt: skip
    if args.tcp:
        cmd.append("--tcp")
    if _changed(args, "--dst-port"):
        cmd += ["--dst-port", str(args.dst_port)]
    if _changed(args, "--dsts") or args.dst_range:
        cmd += ["--dsts", str(args.dsts)]
        cmd += ["--dst-range", args.dst_range] if args.dst_range else []
    if args.afxdp:
        cmd += ["--afxdp", "--queue", str(args.queue)]
    for option in ("--batch", "--threads"):
        if _changed(args, option):
            cmd += [option, str(getattr(args, option[2:]))]
    if args.static:
        cmd.append("--static")
    if args.batch_stamp:
        cmd.append("--batch-stamp")
    if args.count:  # vz-gen's --count 0: for --duration
        cmd += ["--count", str(args.count)]
    else:
        cmd += ["--duration", str(args.duration if args.duration is not None else DURATION)]
    if args.json:
        cmd.append("--json")
    return cmd


def sink_command(args: argparse.Namespace) -> list[str]:
    # a sink sends nothing: every option that shapes frames is a mistake here
    sink = options.table("vz-sink")
    given = [f"--{name}" for name in options.table("vz-gen")
             if name not in sink and _changed(args, f"--{name}")]  # fmt: skip
    given += ["--ipv6"] if args.ipv6 else []
    if given:
        what = "a sending option" if len(given) == 1 else "sending options"
        raise VelozError(f"{', '.join(given)}: {what}, not one of --sink")
    if args.duration is not None and args.duration <= 0:
        raise VelozError("--duration must be positive")
    cmd = [str(paths.tool("vz-sink")), "--iface", args.iface]
    if args.duration is not None:
        cmd += ["--duration", str(args.duration)]
    flags = ("--generic", "--replace", "--count-only", "--json")
    cmd += [flag for flag in flags if getattr(args, flag[2:].replace("-", "_"))]
    return cmd


def run(args: argparse.Namespace) -> int:
    argv = sink_command(args) if args.sink else command(args)
    # exec: SIGINT and SIGTERM reach the tool, which detaches and reports.
    os.execv(argv[0], argv)
