# SPDX-License-Identifier: BSD-2-Clause
"""What `veloz ctl` checks before it connects (issue 22).

A bad value must give one line and a non-zero exit whether or not an NF
runs: a user who types 198.18.0.0/33 should hear about the /33, not that no
NF listens. Each command's values are parsed here with the same functions
the command itself uses once connected, so the two cannot disagree; what
only the running NF knows (its ports' names, which routes or rules it
holds, how full its maps are) is still checked by the command.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from veloz.control import abi
from veloz.core.errors import VelozError

# The kernel's IFNAMSIZ less the NUL.
IFNAME_MAX = 15


def check_iface(name: str | None, option: str = "--iface") -> None:
    if name is None:
        return
    if not name or len(name) > IFNAME_MAX or "/" in name or any(c.isspace() for c in name):
        raise VelozError(f"{option}: '{name}' is not an interface name (1 to {IFNAME_MAX} "
                         "characters, no '/' or space)")  # fmt: skip
    if name in (".", ".."):
        raise VelozError(f"{option}: '{name}' is not an interface name")


def _port(text: str | None) -> None:
    """A port as a number (0-63) or an interface name; which names the run
    has is known only to the run."""
    from veloz.control.ops import parse_u32

    if text is None:
        return
    if text.lstrip("-").isdigit():
        parse_u32(text, "--port", 0, abi.max_port())
    else:
        check_iface(text, "--port")


def _route_add(args: argparse.Namespace) -> None:
    from veloz.control import route_file, router

    router.parse_prefix(args.prefix)
    if args.kind == "via" or (args.kind is None and args.via is None):
        if args.via is None:
            raise VelozError("route add needs `via ADDRESS` or one of local, blackhole, kernel")
        prefix = router.parse_prefix(args.prefix)
        hops = route_file.parse_via_words(args.via, getattr(args, "more", None) or [])
        for via, port in hops:
            family, _ = router.parse_gateway(via)
            if family != prefix.family:
                raise VelozError(f"route {prefix}: next hop of the other address family")
            _port(port)
        if len(hops) > route_file.ABI.GROUP_MEMBERS:
            raise VelozError(f"route {prefix}: at most {route_file.ABI.GROUP_MEMBERS} next hops")
        _port(args.port)
        return
    if args.via is not None or getattr(args, "more", None):
        raise VelozError(f"route add {args.prefix} {args.kind} takes no address")
    if args.port is not None:
        raise VelozError(f"--port: a {args.kind} route has no egress port")


def _route_del(args: argparse.Namespace) -> None:
    from veloz.control import router

    router.parse_prefix(args.prefix)


def _route_load(args: argparse.Namespace) -> None:
    from pathlib import Path

    from veloz.control import router

    # the whole file, bounded: the port names are the run's, so a line that
    # names a port by interface is checked as a name only
    router.read_route_file(Path(args.file), _AnyPorts())  # type: ignore[arg-type]


class _AnyPorts:
    """Ports before connecting: any well-formed number or name."""

    names: list[str] = []

    def number(self, text: str | int) -> int:
        from veloz.control.ops import parse_u32

        if isinstance(text, str) and not text.lstrip("-").isdigit():
            check_iface(text, "port")
            return 0
        return parse_u32(text, "port", 0, abi.max_port())


def _neigh_add(args: argparse.Namespace) -> None:
    from veloz.control.ops import parse_address, parse_mac

    parse_address(args.address)
    parse_mac(args.mac)


def _address(args: argparse.Namespace) -> None:
    from veloz.control.ops import parse_address

    parse_address(args.address)


def _rule_add(args: argparse.Namespace) -> None:
    from veloz.control import ddos
    from veloz.control.ops import parse_u32

    item = {
        "action": args.action, "src": args.src, "proto": args.proto, "dport": args.dport,
        "tcp_flags": args.tcp_flags, "rate": args.rate, "burst": args.burst,
    }  # fmt: skip
    ddos.parse_rule({k: v for k, v in item.items() if v is not None})
    if args.slot is not None:
        parse_u32(args.slot, "--slot", 0, ddos.RULES_MAX - 1)


def _rule_del(args: argparse.Namespace) -> None:
    from veloz.control import ddos
    from veloz.control.ops import parse_u32

    parse_u32(args.id, "rule id", 0, ddos.RULES_MAX - 1)


def _allow(args: argparse.Namespace) -> None:
    from veloz.control.ops import parse_prefix

    for p in args.prefixes:
        parse_prefix(p, "allow-list prefix")


def _vip(args: argparse.Namespace) -> None:
    from veloz.control import lb

    lb.parse_vip(args.address, args.port, args.proto)
    for b in getattr(args, "backend", None) or []:
        lb.parse_backend(b)


def _backend_add(args: argparse.Namespace) -> None:
    from veloz.control import lb
    from veloz.control.ops import parse_u32

    lb.parse_vip(args.address, args.port, args.proto)
    lb.parse_backend(args.backend)
    if args.weight is not None:
        parse_u32(args.weight, "--weight", 1, lb.MAX_WEIGHT)


def _backend_del(args: argparse.Namespace) -> None:
    from veloz.control import lb
    from veloz.control.ops import parse_address

    lb.parse_vip(args.address, args.port, args.proto)
    parse_address(args.backend, "backend address")


def _lb_set(args: argparse.Namespace) -> None:
    from veloz.control import lb
    from veloz.control.objects import Ports

    new = {
        k: v
        for k, v in (
            ("source4", args.source4),
            ("source6", args.source6),
            ("next_hop_mac", args.next_hop_mac),
            ("mac", args.mac),
        )  # fmt: skip
        if v is not None
    }
    if not new:
        raise VelozError("lb set: give at least one of --source4, --source6, --next-hop-mac, --mac")
    lb.parse_self(new, Ports())


def _dump(args: argparse.Namespace) -> None:
    # a map name is one word of the protocol: a space or newline in it
    # would be a second request
    name = args.map
    if not name or len(name) > 63 or not all(c.isalnum() or c in "_." for c in name):
        raise VelozError(f"bad map name '{name}': letters, digits, '_' and '.' only, "
                         "at most 63")  # fmt: skip


# (command, verb) -> its check; verb None for a command without verbs
CHECKS: dict[tuple[str, str | None], Callable[[argparse.Namespace], None]] = {
    ("route", "add"): _route_add,
    ("route", "del"): _route_del,
    ("route", "load"): _route_load,
    ("neigh", "add"): _neigh_add,
    ("neigh", "del"): _address,
    ("rule", "add"): _rule_add,
    ("rule", "del"): _rule_del,
    ("allow", "add"): _allow,
    ("allow", "del"): _allow,
    ("vip", "add"): _vip,
    ("vip", "del"): _vip,
    ("backend", "add"): _backend_add,
    ("backend", "del"): _backend_del,
    ("lb", "set"): _lb_set,
    ("dump", None): _dump,
}


def check(args: argparse.Namespace) -> None:
    """Every value of a parsed `veloz ctl` command line; raises VelozError."""
    check_iface(args.iface)
    fn = CHECKS.get((args.ctl_command, getattr(args, "verb", None)))
    if fn is not None:
        fn(args)
