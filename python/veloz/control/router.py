"""The router's objects: routes, next hops, neighbours (nf/router.c).

Config file (TOML), next to the NF's own fields (fib):

    routes = "table.txt"             # or a list of files
    sync = "kernel"                  # or: follow the kernel's table (route_sync.py)
    local = ["198.18.0.1"]           # addresses of this host: PASS
    [[route]]
    prefix = "198.18.64.0/18"
    via = "198.18.1.2"
    port = 1                         # a number or one of the run's interfaces
    [[neighbour]]
    address = "198.18.1.2"
    mac = "02:00:00:00:01:02"

A route file holds one route per line, either `PREFIX NEXTHOP [PORT]` or the
output of `ip route` / `ip -6 route` (`via`, `dev`, and the types local,
blackhole, unreachable, prohibit, throw; routes without `via` are left to
the kernel, which resolves connected hosts itself). `#` starts a comment.

A route leads to a next hop: (gateway address, port), with the neighbour's
MAC once known. Next hops live in router_nexthops, one slot each, shared by
all the routes through them. On a live run, neighbours not given in the
config are taken from the kernel's neighbour table, and every address of the
run's ports becomes a local route; a next hop still without a MAC makes its
routes PASS to the kernel, which resolves it (ARP, NDP).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from veloz.control import abi
from veloz.control.client import Ctl, CtlError, per_cpu_sums
from veloz.control.objects import Ports, iface_macs
from veloz.control.ops import Op, delete, parse_address, parse_mac, update
from veloz.core.errors import VelozError

if TYPE_CHECKING:
    from veloz.control import dir24

KEYS = frozenset({"routes", "route", "neighbour", "local", "sync", "sync_table"})


def _dir24() -> ModuleType:
    """dir24 where a DIR-24-8 table is built: it needs numpy, which every
    `veloz` command would otherwise import (the ctl parser loads this module)."""
    from veloz.control import dir24

    return dir24


ROUTES = {4: "router_routes4", 6: "router_routes6"}
NEXTHOPS = "router_nexthops"
COUNTERS = "router_counters"


_KIND_WORDS = {"forward": "via", "local": "local", "kernel": "kernel", "blackhole": "blackhole"}
_IP_ROUTE_TYPES = {
    "unicast": "forward",
    "local": "local",
    "blackhole": "blackhole",
    "unreachable": "kernel",
    "prohibit": "kernel",
    "throw": "kernel",
    "broadcast": "kernel",
    "multicast": "kernel",
    "anycast": "kernel",
}


class _Abi(abi.View):
    """nf/router.c's maps and include/veloz/abi.h's router section, from router.bpf.o's BTF."""

    nf = "router"
    MAX_NEXTHOPS = abi.max_entries(NEXTHOPS)
    COUNTER_NAMES = abi.Lazy(
        lambda a: a.enum_names("vz_router_counter", "VZ_ROUTER_", ("VZ_ROUTER_COUNTERS",))
    )
    # `table = "trie" | "dir24"`: which IPv4 table the NF looks up (both are kept)
    NAMED_FIELDS = abi.Lazy(lambda a: {"table": a.named("vz_router_table", "VZ_ROUTER_TABLE_")})
    USED = abi.Lazy(lambda a: abi.define("VZ_NEXTHOP_USED"))
    RESOLVED = abi.Lazy(lambda a: abi.define("VZ_NEXTHOP_RESOLVED"))
    NEXTHOP = abi.layout("vz_nexthop")
    ROUTE = abi.layout("vz_route")
    COUNTER = abi.map_value(COUNTERS)
    FORWARD = abi.Lazy(lambda a: a.named("vz_route_kind", "VZ_ROUTE_")["forward"])
    LOCAL = abi.Lazy(lambda a: a.named("vz_route_kind", "VZ_ROUTE_")["local"])
    KERNEL = abi.Lazy(lambda a: a.named("vz_route_kind", "VZ_ROUTE_")["kernel"])
    BLACKHOLE = abi.Lazy(lambda a: a.named("vz_route_kind", "VZ_ROUTE_")["blackhole"])
    # kind -> how `veloz ctl route list` and route files name it
    KIND_NAMES = abi.Lazy(lambda a: {v: _KIND_WORDS[k] for k, v in
                                     a.named("vz_route_kind", "VZ_ROUTE_").items()})  # fmt: skip
    # `ip route` types -> kind
    IP_ROUTE_TYPES = abi.Lazy(lambda a: {t: a.named("vz_route_kind", "VZ_ROUTE_")[k]
                                         for t, k in _IP_ROUTE_TYPES.items()})  # fmt: skip


ABI = _Abi()
__getattr__ = ABI.module_getattr(__name__)


@dataclass(frozen=True)
class Prefix:
    family: int  # 4 or 6
    addr: bytes  # network order, host bits zero
    length: int

    def key(self) -> bytes:
        """struct vz_lpm4_key / vz_lpm6_key."""
        return self.length.to_bytes(4, "little") + self.addr

    def __str__(self) -> str:
        fam = socket.AF_INET if self.family == 4 else socket.AF_INET6
        return f"{socket.inet_ntop(fam, self.addr)}/{self.length}"


def parse_prefix(text: str) -> Prefix:
    """A prefix (a bare address is a host route); host bits set is an error.

    Hand-rolled rather than ipaddress.ip_network: a full table is 750k lines.
    """
    addr_text, slash, len_text = text.partition("/")
    family = 6 if ":" in addr_text else 4
    try:
        addr = socket.inet_pton(socket.AF_INET6 if family == 6 else socket.AF_INET, addr_text)
    except (OSError, ValueError):  # ValueError: a NUL in the text
        raise VelozError(f"bad prefix '{text}': '{addr_text}' is not an address") from None
    bits = 32 if family == 4 else 128
    if not slash:
        length = bits
    elif len_text.isascii() and len_text.isdigit() and int(len_text) <= bits:
        length = int(len_text)
    else:
        raise VelozError(f"bad prefix '{text}': the length must be 0 to {bits}")
    value = int.from_bytes(addr, "big")
    if value & ((1 << (bits - length)) - 1):
        raise VelozError(f"bad prefix '{text}': host bits are set (did you mean a /{bits}?)")
    return Prefix(family, addr, length)


def parse_gateway(text: str) -> tuple[int, bytes]:
    addr = parse_address(text, "next hop")
    return addr.version, addr.packed


@dataclass(frozen=True)
class Route:
    prefix: Prefix
    kind: int
    via: tuple[int, bytes] | None = None  # (family, address)
    port: int = 0


def _parse_ip_route(words: list[str], ports: Ports) -> Route | None:
    kind = ABI.FORWARD
    if words[0] in ABI.IP_ROUTE_TYPES:
        kind = ABI.IP_ROUTE_TYPES[words.pop(0)]
    if not words:
        raise VelozError("a route type without a prefix")
    dest = words.pop(0)
    via_text, dev = _ip_route_option(words, "via"), _ip_route_option(words, "dev")
    via = parse_gateway(via_text) if via_text is not None else None
    if dest == "default":
        if via is None:
            # `ip -6 route` prints `default dev wg0` and `unreachable default`
            # with no address to tell the family by. Left to the kernel, such
            # a route is what a miss already gets (PASS); taken as IPv4 it
            # would replace the IPv4 default of the same file.
            if kind in (ABI.FORWARD, ABI.KERNEL):
                return None
            raise VelozError("'default' without 'via' names no address family: "
                             "write 0.0.0.0/0 or ::/0")  # fmt: skip
        dest = "::/0" if via[0] == 6 else "0.0.0.0/0"
    prefix = parse_prefix(dest)
    if kind == ABI.FORWARD and via is None:
        kind = ABI.KERNEL  # connected: the kernel resolves each host
    port = ports.number(dev) if dev is not None and kind == ABI.FORWARD else 0
    return Route(prefix, kind, via if kind == ABI.FORWARD else None, port)


def _ip_route_option(words: list[str], key: str) -> str | None:
    """The word after key: found by position, not by pairing words, as `ip route`
    also prints flags without a value (onlink, linkdown, ...)."""
    if key not in words:
        return None
    i = words.index(key)
    if i + 1 == len(words):
        raise VelozError(f"'{key}' without a value")
    return words[i + 1]


def parse_route_line(line: str, ports: Ports) -> Route | None:
    """One line of a route file; None for blank lines and comments."""
    words = line.split("#", 1)[0].split()
    if not words:
        return None
    if (
        words[0] in ABI.IP_ROUTE_TYPES
        or words[0] == "default"
        or any(w in ("via", "dev", "proto", "scope", "metric") for w in words[1:2])
    ):
        return _parse_ip_route(words, ports)
    if len(words) not in (2, 3):
        raise VelozError("expected PREFIX NEXTHOP [PORT] or a line of `ip route`")
    prefix = parse_prefix(words[0])
    if words[1] in ("local", "blackhole", "kernel"):
        if len(words) == 3:  # neither a next hop nor a port: not to be dropped quietly
            raise VelozError(f"PREFIX {words[1]} takes nothing after it, not '{words[2]}'")
        kind = {"local": ABI.LOCAL, "blackhole": ABI.BLACKHOLE, "kernel": ABI.KERNEL}[words[1]]
        return Route(prefix, kind)
    via = parse_gateway(words[1])
    port = ports.number(words[2]) if len(words) == 3 else 0
    return Route(prefix, ABI.FORWARD, via, port)


def read_route_file(path: Path, ports: Ports) -> list[Route]:
    from veloz.core import safeio

    text = safeio.read_text(path, "route file")  # bounded: not /dev/zero whole
    routes = []
    for lineno, line in enumerate(text.splitlines(), 1):
        try:
            route = parse_route_line(line, ports)
        except VelozError as e:
            raise VelozError(f"{path} line {lineno}: {e}") from None
        if route is not None:
            routes.append(route)
    return routes


def _check_families(route: Route) -> None:
    if route.via and route.via[0] != route.prefix.family:
        raise VelozError(f"route {route.prefix}: next hop of the other address family")


# ---- next hops -------------------------------------------------------------


@dataclass
class Nexthop:
    family: int
    addr: bytes
    port: int
    smac: bytes
    dmac: bytes | None = None

    def value(self) -> bytes:
        flags = ABI.USED | (ABI.RESOLVED if self.dmac else 0)
        dmac = self.dmac or bytes(6)
        addr = self.addr.ljust(16, b"\0")
        return ABI.NEXTHOP.pack(flags=flags, port=self.port, dmac=dmac, smac=self.smac,
                                family=self.family, addr=addr)  # fmt: skip

    @classmethod
    def unpack(cls, raw: bytes) -> Nexthop | None:
        nh = ABI.NEXTHOP.unpack(raw)
        flags, port, dmac, smac, family, addr = (
            nh.flags,
            nh.port,
            nh.dmac,
            nh.smac,
            nh.family,
            nh.addr,
        )
        if not flags & ABI.USED:
            return None
        addr = addr[:4] if family == 4 else addr
        return cls(family, addr, port, smac, dmac if flags & ABI.RESOLVED else None)


class NexthopTable:
    """Slots of router_nexthops by (family, gateway, port)."""

    def __init__(self, existing: dict[int, Nexthop] | None = None) -> None:
        self.slots: dict[int, Nexthop] = dict(existing or {})
        self.index = {(n.family, n.addr, n.port): i for i, n in self.slots.items()}

    def slot(self, via: tuple[int, bytes], port: int, ports: Ports) -> tuple[int, bool]:
        """The slot of a next hop, allocated if new: (slot, is_new)."""
        key = (via[0], via[1], port)
        if key in self.index:
            return self.index[key], False
        free = next((i for i in range(ABI.MAX_NEXTHOPS) if i not in self.slots), None)
        if free is None:
            raise VelozError(f"the next-hop table is full ({ABI.MAX_NEXTHOPS} next hops)")
        self.slots[free] = Nexthop(via[0], via[1], port, ports.mac(port))
        self.index[key] = free
        return free, True

    def resolve(self, family: int, addr: bytes, mac: bytes) -> list[int]:
        """Give every next hop through addr its MAC; the slots that changed."""
        changed = []
        for i, nh in self.slots.items():
            if nh.family == family and nh.addr == addr and nh.dmac != mac:
                nh.dmac = mac
                changed.append(i)
        return changed


def route_ops(
    routes: Iterable[Route], table: NexthopTable, ports: Ports, fib: dir24.Table | None = None
) -> Iterator[Op]:
    """Ops for routes; new next hops are written before the routes using them.

    IPv4 routes also go into fib, the DIR-24-8 model; its ops come after
    (fib.ops()), once every route is in."""
    pack_route = ABI.ROUTE.packer("kind", "nexthop")  # a full table: 750k of them
    forward = ABI.FORWARD
    for route in routes:
        _check_families(route)
        slot = 0
        if route.kind == forward:
            assert route.via is not None
            slot, new = table.slot(route.via, route.port, ports)
            if new:
                yield update(NEXTHOPS, slot.to_bytes(4, "little"), table.slots[slot].value())
        yield update(ROUTES[route.prefix.family], route.prefix.key(), pack_route(route.kind, slot))
        if fib is not None and route.prefix.family == 4:
            addr = int.from_bytes(route.prefix.addr, "big")
            fib.add(
                addr, route.prefix.length, _dir24().entry(route.kind, slot, route.prefix.length)
            )


# ---- what the kernel knows about a live run's ports ------------------------


def _ip_json(*args: str) -> list[dict]:
    done = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        return []
    return json.loads(done.stdout)


def kernel_neighbours(ifaces: list[str]) -> dict[tuple[int, bytes], bytes]:
    """(family, address) -> MAC from the kernel's neighbour table on ifaces."""
    out = {}
    for entry in _ip_json("neigh", "show"):
        if entry.get("dev") not in ifaces or "lladdr" not in entry:
            continue
        if set(entry.get("state", [])) & {"FAILED", "INCOMPLETE"}:
            continue
        addr = parse_address(entry["dst"])
        out[(addr.version, addr.packed)] = parse_mac(entry["lladdr"])
    return out


def port_addresses(ifaces: list[str]) -> list[Prefix]:
    """Every address of the ports, as host routes."""
    out = []
    for iface in ifaces:
        for link in _ip_json("addr", "show", "dev", iface):
            for a in link.get("addr_info", []):
                out.append(parse_prefix(a["local"]))
    return out


# ---- start-up: a config file's objects ------------------------------------


TABLE_FIELDS = {"route": {"prefix", "via", "port"}, "neighbour": {"address", "mac"}}


def _table(values: dict, key: str) -> list[dict]:
    items = values.get(key, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise VelozError(f"config: [[{key}]] must be a list of tables")
    for i, item in enumerate(items):
        unknown = set(item) - TABLE_FIELDS[key]
        if unknown:
            # e.g. a top-level key written after a [[table]] lands inside it
            raise VelozError(
                f"config: {key} {i + 1} has no field {', '.join(sorted(unknown))} "
                f"(fields: {', '.join(sorted(TABLE_FIELDS[key]))})"
            )
    return items


def _require(item: dict, field: str, where: str) -> str:
    if field not in item:
        raise VelozError(f"config: {where} needs '{field}'")
    return str(item[field])


def config_ops(values: dict, ports: Ports, base: Path) -> list[Op]:
    from veloz.control import route_sync

    routes: list[Route] = []
    source = route_sync.parse_source(values)
    if source is not None:  # the kernel's table now; the sync companion follows it
        routes += route_sync.startup_routes(source, ports)
    files = values.get("routes", [])
    names = [files] if isinstance(files, str) else files
    if not isinstance(names, list) or not all(isinstance(n, str) and "\0" not in n for n in names):
        raise VelozError("config: routes must be a file name or a list of file names")
    for name in names:
        path = Path(name) if Path(name).is_absolute() else base / name
        routes += read_route_file(path, ports)
    for i, item in enumerate(_table(values, "route")):
        where = f"route {i + 1}"
        prefix = parse_prefix(_require(item, "prefix", where))
        via = parse_gateway(_require(item, "via", where))
        port = item.get("port", 0)
        if isinstance(port, bool) or not isinstance(port, int | str):
            raise VelozError(f"config: {where}: port must be a number or a port's name")
        routes.append(Route(prefix, ABI.FORWARD, via, ports.number(port)))
    local = values.get("local", [])
    if not isinstance(local, list):
        raise VelozError("config: local must be a list of addresses")
    routes += [Route(parse_prefix(str(a)), ABI.LOCAL) for a in local]
    live = [n for n in ports.names if n]
    routes += [Route(p, ABI.LOCAL) for p in port_addresses(live)]

    table = NexthopTable()
    fib = _dir24().Table()
    ops = list(route_ops(routes, table, ports, fib))
    ops += fib.ops()
    neighbours = kernel_neighbours(live) if live else {}
    for i, item in enumerate(_table(values, "neighbour")):
        where = f"neighbour {i + 1}"
        addr = parse_address(_require(item, "address", where))
        neighbours[(addr.version, addr.packed)] = parse_mac(_require(item, "mac", where))
    for (family, addr), mac in neighbours.items():
        table.resolve(family, addr, mac)
    # next hops again, now with their MACs (the last write of a slot wins)
    ops += [update(NEXTHOPS, i.to_bytes(4, "little"), nh.value()) for i, nh in table.slots.items()]
    return ops


# ---- live: `veloz ctl route|neigh|router-stats` -----------------------------


def _live_ports(ctl: Ctl) -> Ports:
    names = ctl.ports()
    return Ports(names, iface_macs(names))


def _nexthops(ctl: Ctl) -> NexthopTable:
    slots = {}
    for key, value in ctl.dump(NEXTHOPS):
        nh = Nexthop.unpack(value)
        if nh is not None:
            slots[int.from_bytes(key, "little")] = nh
    return NexthopTable(slots)


def _reader(ctl: Ctl):
    """Live entries of an array map, for dir24.Table."""

    def read(name: str, first: int, count: int) -> bytes:
        key = first.to_bytes(4, "little").hex()
        return bytes.fromhex(ctl.request(f"read {name} {key} {count}"))

    return read


def _holds(ctl: Ctl, prefixes: list[Prefix]) -> list[bool]:
    """Whether the trie holds exactly each prefix (one round trip)."""
    replies = ctl.requests([f"holds {ROUTES[p.family]} {p.key().hex()}" for p in prefixes])
    for reply in replies:
        if reply.startswith("error"):
            raise CtlError(reply.removeprefix("error").strip())
    return [reply == "ok 1" for reply in replies]


def _covering(ctl: Ctl, prefix: Prefix) -> int:
    """The DIR-24-8 entry of the longest route that covers prefix, shorter than
    it (what a delete uncovers); 0 if none."""
    value = int.from_bytes(prefix.addr, "big")
    shorter = [
        Prefix(4, (value & ~((1 << (32 - n)) - 1) & 0xFFFFFFFF).to_bytes(4, "big"), n)
        for n in range(prefix.length - 1, -1, -1)
    ]
    for p, held in zip(shorter, _holds(ctl, shorter), strict=True):
        if held:
            raw = ctl.lookup(ROUTES[4], p.key())
            assert raw is not None
            route = ABI.ROUTE.unpack(raw)
            kind, slot = route.kind, route.nexthop
            return _dir24().entry(kind, slot, p.length)
    return 0


def _route_from_args(args: argparse.Namespace, ports: Ports) -> Route:
    prefix = parse_prefix(args.prefix)
    if args.kind:
        return Route(
            prefix,
            {"local": ABI.LOCAL, "blackhole": ABI.BLACKHOLE, "kernel": ABI.KERNEL}[args.kind],
        )
    if not args.via:
        raise VelozError("route add needs `via ADDRESS` or one of local, blackhole, kernel")
    return Route(prefix, ABI.FORWARD, parse_gateway(args.via), ports.number(args.port or 0))


def ctl_route_add(args: argparse.Namespace, ctl: Ctl) -> int:
    ports = _live_ports(ctl)
    route = _route_from_args(args, ports)
    table = _nexthops(ctl)
    fib = _dir24().Table(_reader(ctl))
    ops = list(route_ops([route], table, ports, fib))
    ops += fib.ops()
    if route.via is not None:
        # a new next hop may already have a MAC in the kernel's table
        mac = kernel_neighbours(ports.names).get(route.via)
        slot = table.index[(route.via[0], route.via[1], route.port)]
        if mac and table.slots[slot].dmac is None:
            table.slots[slot].dmac = mac
            ops.insert(0, update(NEXTHOPS, slot.to_bytes(4, "little"), table.slots[slot].value()))
    ctl.apply(ops)
    print(f"route {route.prefix} added")
    return 0


def ctl_route_del(args: argparse.Namespace, ctl: Ctl) -> int:
    prefix = parse_prefix(args.prefix)
    ops = [delete(ROUTES[prefix.family], prefix.key())]
    if prefix.family == 4 and _holds(ctl, [prefix])[0]:
        fib = _dir24().Table(_reader(ctl))
        addr = int.from_bytes(prefix.addr, "big")
        fib.delete(addr, prefix.length, _covering(ctl, prefix))
        ops += fib.ops()
    try:
        ctl.apply(ops)
    except CtlError as e:
        # a lookup would answer a covering route; the delete is exact
        if "no such entry" in str(e):
            raise VelozError(f"no route {prefix}") from None
        raise
    print(f"route {prefix} deleted")
    return 0


def ctl_route_load(args: argparse.Namespace, ctl: Ctl) -> int:
    ports = _live_ports(ctl)
    routes = read_route_file(Path(args.file), ports)
    table = _nexthops(ctl)
    fib = _dir24().Table(_reader(ctl))
    ops = list(route_ops(routes, table, ports, fib))
    ops += fib.ops()
    known = kernel_neighbours(ports.names)
    for (family, addr), mac in known.items():
        for slot in table.resolve(family, addr, mac):
            ops.append(update(NEXTHOPS, slot.to_bytes(4, "little"), table.slots[slot].value()))
    count = ctl.apply(ops)
    print(f"{len(routes)} routes loaded ({count} map operations)")
    return 0


def _format_gateway(nh: Nexthop) -> str:
    fam = socket.AF_INET if nh.family == 4 else socket.AF_INET6
    return socket.inet_ntop(fam, nh.addr)


def ctl_route_list(args: argparse.Namespace, ctl: Ctl) -> int:
    table = _nexthops(ctl)
    rows = []
    for family, name in ROUTES.items():
        for key, value in ctl.dump(name):
            length = int.from_bytes(key[:4], "little")
            prefix = Prefix(family, key[4:], length)
            route = ABI.ROUTE.unpack(value)
            kind, slot = route.kind, route.nexthop
            row = {"prefix": str(prefix), "kind": ABI.KIND_NAMES.get(kind, str(kind))}
            nh = table.slots.get(slot) if kind == ABI.FORWARD else None
            if nh:
                row |= {"via": _format_gateway(nh), "port": nh.port, "resolved": bool(nh.dmac)}
            rows.append(row)
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows[: args.limit] if args.limit else rows:
        via = f" via {row['via']} port {row['port']}" if "via" in row else ""
        unresolved = "" if row.get("resolved", True) else " (no MAC yet: PASS)"
        kind = "" if via else f" {row['kind']}"
        print(f"{row['prefix']}{kind}{via}{unresolved}")
    if args.limit and len(rows) > args.limit:
        print(f"... {len(rows) - args.limit} more ({len(rows)} routes)")
    return 0


def ctl_neigh_add(args: argparse.Namespace, ctl: Ctl) -> int:
    addr = parse_address(args.address)
    mac = parse_mac(args.mac)
    table = _nexthops(ctl)
    changed = table.resolve(addr.version, addr.packed, mac)
    if not changed:
        raise VelozError(f"no next hop goes through {addr}: add a route via it first")
    ctl.apply(update(NEXTHOPS, i.to_bytes(4, "little"), table.slots[i].value()) for i in changed)
    print(f"neighbour {addr} is {args.mac} ({len(changed)} next hops)")
    return 0


def ctl_neigh_del(args: argparse.Namespace, ctl: Ctl) -> int:
    addr = parse_address(args.address)
    table = _nexthops(ctl)
    target = (addr.version, addr.packed)
    slots = [i for i, nh in table.slots.items() if (nh.family, nh.addr) == target]
    if not slots:
        raise VelozError(f"no next hop goes through {addr}")
    for i in slots:
        table.slots[i].dmac = None
    ctl.apply(update(NEXTHOPS, i.to_bytes(4, "little"), table.slots[i].value()) for i in slots)
    print(f"neighbour {addr} forgotten: its routes PASS to the kernel")
    return 0


def ctl_neigh_list(args: argparse.Namespace, ctl: Ctl) -> int:
    rows = [
        {
            "slot": i,
            "via": _format_gateway(nh),
            "port": nh.port,
            "mac": nh.dmac.hex(":") if nh.dmac else None,
        }
        for i, nh in sorted(_nexthops(ctl).slots.items())
    ]
    if args.json:
        print(json.dumps(rows))
    for row in [] if args.json else rows:
        print(f"{row['via']} port {row['port']} {row['mac'] or '(unresolved)'}")
    return 0


def counters(ctl: Ctl) -> dict[str, int]:
    info = ctl.maps()[COUNTERS]
    out = {}
    for index, name in enumerate(ABI.COUNTER_NAMES):
        value = ctl.lookup(COUNTERS, index.to_bytes(4, "little")) or b""
        out[name] = per_cpu_sums(value, info, ABI.COUNTER)[0]
    return out


def ctl_stats(args: argparse.Namespace, ctl: Ctl) -> int:
    stats = counters(ctl)
    if args.json:
        print(json.dumps(stats))
    else:
        for name, value in stats.items():
            print(f"{name:12} {value}")
    return 0


def _route_add_dispatch(args: argparse.Namespace, ctl: Ctl) -> int:
    """`route add P via A` reads as words; map them onto the parsed fields."""
    if args.kind == "via":
        args.kind = None
    elif args.kind and args.via:
        raise VelozError(f"route add {args.prefix} {args.kind} takes no address")
    return ctl_route_add(args, ctl)
