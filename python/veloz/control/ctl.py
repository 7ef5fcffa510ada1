"""`veloz ctl`: change a running NF (routes, rules, VIPs) without stopping it.

The same commands work on every backend: they become map operations sent to
the control socket every `veloz run` opens (see client.py), applied as one
transaction, so a bad or oversized change leaves the NF as it was.
"""

from __future__ import annotations

import argparse
import json

from veloz.control import abi, checks, objects
from veloz.control.client import Ctl, per_cpu_sums
from veloz.core.errors import VelozError


class _Abi(abi.View):
    """include/veloz/nf.h's maps, the same in every NF: read from the drop NF's BTF."""

    nf = "drop"
    # enum vz_verdict: "aborted", "drop", "pass", "tx", "redirect" (VZ_REDIRECT_VERDICT)
    VERDICTS = abi.Lazy(
        lambda a: [
            n.removesuffix("_verdict")
            for n in a.enum_names("vz_verdict", "VZ_", ("VZ_VERDICT_COUNT",))
        ]
    )
    STAT = abi.map_value("vz_stats")


ABI = _Abi()
__getattr__ = ABI.module_getattr(__name__)


def stats(ctl: Ctl) -> dict[str, dict[str, int]]:
    """The NF's packets and bytes per verdict, summed over CPUs or workers."""
    info = ctl.maps()["vz_stats"]
    out = {}
    for index, name in enumerate(ABI.VERDICTS):
        value = ctl.lookup("vz_stats", index.to_bytes(4, "little")) or b""
        packets, nbytes = per_cpu_sums(value, info, ABI.STAT)
        out[name] = {"packets": packets, "bytes": nbytes}
    return out


def cmd_stats(args: argparse.Namespace, ctl: Ctl) -> int:
    nf, backend = ctl.info()
    result = {"nf": nf, "backend": backend, "verdicts": stats(ctl)}
    mod = objects.module(nf)
    if mod is not None and hasattr(mod, "counters"):
        result["counters"] = mod.counters(ctl)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{nf} on {backend}")
    for name, v in result["verdicts"].items():
        print(f"  {name:9} {v['packets']:>14} packets {v['bytes']:>16} bytes")
    for name, value in result.get("counters", {}).items():
        print(f"  {name:20} {value:>14}")
    return 0


def cmd_maps(args: argparse.Namespace, ctl: Ctl) -> int:
    maps = ctl.maps()
    if args.json:
        print(json.dumps([m.__dict__ for m in maps.values()]))
        return 0
    for m in maps.values():
        print(f"{m.name:24} type {m.type:2} key {m.key_size:3} B value {m.value_size:5} B "
              f"max {m.max_entries:8} copies {m.copies}")  # fmt: skip
    return 0


def cmd_dump(args: argparse.Namespace, ctl: Ctl) -> int:
    for key, value in ctl.dump(args.map):
        print(key.hex(), value.hex())
    return 0


def run(args: argparse.Namespace) -> int:
    # every value first: a bad one is one line, whether or not an NF runs
    checks.check(args)
    with Ctl.for_iface(args.iface) as ctl:
        if args.owner is not None:
            nf, _ = ctl.info()
            if nf != args.owner:
                raise VelozError(
                    f"`veloz ctl {args.ctl_command}` is for the {args.owner} NF; "
                    f"{ctl.ports()[0]} runs {nf}"
                )
        return int(args.func(args, ctl) or 0)
