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

Route files and `ip route` lines: veloz.control.route_file.

A route leads to a next hop: (gateway address, port), with the neighbour's
MAC once known. Next hops live in router_nexthops, one slot each, shared by
all the routes through them. A multipath route leads to a group of next hops
(router_groups, at a slot of router_nexthops flagged VZ_NEXTHOP_GROUP),
shared by all the routes with the same members; its refs count them, and a
group is freed when its last route leaves it, after that route's new entry is
written. On a live run, neighbours not given in the config are taken from the
kernel's neighbour table, and every address of the run's ports becomes a
local route; a next hop still without a MAC makes its
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

from veloz.control import abi, route_file
from veloz.control.client import Ctl, CtlError, per_cpu_sums
from veloz.control.objects import Ports, iface_macs
from veloz.control.ops import Op, delete, parse_address, parse_mac, update
from veloz.control.route_file import Member as Member
from veloz.control.route_file import Prefix as Prefix
from veloz.control.route_file import Route as Route
from veloz.control.route_file import parse_gateway as parse_gateway
from veloz.control.route_file import parse_ip_route_words as parse_ip_route_words
from veloz.control.route_file import parse_prefix as parse_prefix
from veloz.control.route_file import parse_route_line as parse_route_line
from veloz.control.route_file import read_route_file as read_route_file
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
GROUPS = "router_groups"
COUNTERS = "router_counters"


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
    GROUP_FLAG = abi.Lazy(lambda a: abi.define("VZ_NEXTHOP_GROUP"))
    GROUP = abi.layout("vz_nexthop_group")
    FORWARD = abi.Lazy(lambda a: route_file.ABI.FORWARD)
    LOCAL = abi.Lazy(lambda a: route_file.ABI.LOCAL)
    KERNEL = abi.Lazy(lambda a: route_file.ABI.KERNEL)
    BLACKHOLE = abi.Lazy(lambda a: route_file.ABI.BLACKHOLE)
    KIND_NAMES = abi.Lazy(lambda a: route_file.ABI.KIND_NAMES)
    IP_ROUTE_TYPES = abi.Lazy(lambda a: route_file.ABI.IP_ROUTE_TYPES)
    GROUP_BUCKETS = abi.Lazy(lambda a: route_file.ABI.GROUP_BUCKETS)


ABI = _Abi()
__getattr__ = ABI.module_getattr(__name__)


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
        if not flags & ABI.USED or flags & ABI.GROUP_FLAG:
            return None
        addr = addr[:4] if family == 4 else addr
        return cls(family, addr, port, smac, dmac if flags & ABI.RESOLVED else None)


@dataclass
class Group:
    """struct vz_nexthop_group: a multipath route's buckets (next-hop slots)."""

    buckets: tuple[int, ...]
    refs: int = 0

    def value(self) -> bytes:
        member = b"".join(s.to_bytes(2, "little") for s in self.buckets)
        member = member.ljust(2 * ABI.GROUP_BUCKETS, b"\0")
        return ABI.GROUP.pack(buckets=len(self.buckets), refs=self.refs, member=member)

    @classmethod
    def unpack(cls, raw: bytes) -> Group | None:
        g = ABI.GROUP.unpack(raw)
        if not 0 < g.buckets <= ABI.GROUP_BUCKETS:
            return None
        member = g.member[: 2 * g.buckets]
        return cls(tuple(int.from_bytes(member[i : i + 2], "little")
                         for i in range(0, len(member), 2)), g.refs)  # fmt: skip


def group_mark() -> bytes:
    """router_nexthops' entry at a group's slot: flagged, all else zero."""
    return ABI.NEXTHOP.pack(flags=ABI.USED | ABI.GROUP_FLAG, port=0, dmac=bytes(6),
                            smac=bytes(6), family=0, addr=bytes(16))  # fmt: skip


class NexthopTable:
    """Slots of router_nexthops by (family, gateway, port), and the groups
    (router_groups) of multipath routes by their buckets, in the same slots.

    routes maps the prefixes known to point to a group to that group's slot:
    route_ops() keeps it, a live caller first fills in the prefixes it is
    about to change (current_groups()), so a replaced route releases its group.
    """

    def __init__(
        self, existing: dict[int, Nexthop] | None = None, groups: dict[int, Group] | None = None
    ) -> None:
        self.slots: dict[int, Nexthop] = dict(existing or {})
        self.index = {(n.family, n.addr, n.port): i for i, n in self.slots.items()}
        self.groups: dict[int, Group] = dict(groups or {})
        self.group_index = {g.buckets: i for i, g in self.groups.items()}
        self.routes: dict[Prefix, int] = {}
        self.freed: list[int] = []  # no route left: to be zeroed after the routes move
        self.counted: set[int] = set()  # groups whose refs changed: to be written

    def _free(self) -> int:
        taken = self.slots.keys() | self.groups.keys() | set(self.freed)
        free = next((i for i in range(ABI.MAX_NEXTHOPS) if i not in taken), None)
        if free is None:
            raise VelozError(
                f"the next-hop table is full ({ABI.MAX_NEXTHOPS} next hops and groups)"
            )
        return free

    def slot(self, via: tuple[int, bytes], port: int, ports: Ports) -> tuple[int, bool]:
        """The slot of a next hop, allocated if new: (slot, is_new)."""
        key = (via[0], via[1], port)
        if key in self.index:
            return self.index[key], False
        free = self._free()
        self.slots[free] = Nexthop(via[0], via[1], port, ports.mac(port))
        self.index[key] = free
        return free, True

    def group(self, buckets: tuple[int, ...]) -> tuple[int, bool]:
        """The slot of the group of these buckets (next-hop slots), allocated if new."""
        if buckets in self.group_index:
            return self.group_index[buckets], False
        free = self._free()
        self.groups[free] = Group(buckets)
        self.group_index[buckets] = free
        return free, True

    def point(self, prefix: Prefix, slot: int) -> None:
        """prefix's route now leads to slot: count it in a group, release its old one."""
        if self.routes.get(prefix) == slot:
            return
        self.forget(prefix)
        if slot in self.groups:
            self.routes[prefix] = slot
            self.groups[slot].refs += 1
            self.counted.add(slot)

    def forget(self, prefix: Prefix) -> None:
        """prefix's route is gone or leads elsewhere: its group loses a route."""
        old = self.routes.pop(prefix, None)
        if old is None or old not in self.groups:
            return
        group = self.groups[old]
        group.refs = max(group.refs - 1, 0)
        self.counted.add(old)
        if group.refs == 0:
            del self.groups[old], self.group_index[group.buckets]
            self.freed.append(old)

    def count_ops(self) -> list[Op]:
        """The groups whose refs changed, written again (the NF reads no refs)."""
        ops = [update(GROUPS, _u32(i), self.groups[i].value()) for i in sorted(self.counted)
               if i in self.groups]  # fmt: skip
        self.counted.clear()
        return ops

    def free_ops(self) -> list[Op]:
        """Zero the groups no route leads to any more: after every op that moves
        a route off them (the DIR-24-8 ops included), so no lookup finds one half
        gone. The marker goes first: a lookup that still reaches it passes."""
        ops = []
        for i in self.freed:
            ops.append(update(NEXTHOPS, _u32(i), bytes(ABI.NEXTHOP.size)))
            ops.append(update(GROUPS, _u32(i), bytes(ABI.GROUP.size)))
        self.freed.clear()
        return ops

    def resolve(self, family: int, addr: bytes, mac: bytes) -> list[int]:
        """Give every next hop through addr its MAC; the slots that changed."""
        changed = []
        for i, nh in self.slots.items():
            if nh.family == family and nh.addr == addr and nh.dmac != mac:
                nh.dmac = mac
                changed.append(i)
        return changed


def _u32(n: int) -> bytes:
    return n.to_bytes(4, "little")


def _check_route(route: Route) -> None:
    if route.via and route.via[0] != route.prefix.family:
        raise VelozError(f"route {route.prefix}: next hop of the other address family")
    route_file.check_multipath(route)


def _group_ops(route: Route, table: NexthopTable, ports: Ports) -> Iterator[Op | int]:
    """A multipath route's members, then its group, then its slot (an int, last)."""
    buckets = []
    for via, port in route.multipath:
        slot, new = table.slot(via, port, ports)
        if new:
            yield update(NEXTHOPS, _u32(slot), table.slots[slot].value())
        buckets.append(slot)
    slot, new = table.group(tuple(buckets))
    if new:
        # the group before the marker that makes a route's slot lead to it
        yield update(GROUPS, _u32(slot), table.groups[slot].value())
        yield update(NEXTHOPS, _u32(slot), group_mark())
    yield slot


def route_ops(
    routes: Iterable[Route], table: NexthopTable, ports: Ports, fib: dir24.Table | None = None
) -> Iterator[Op]:
    """Ops for routes; new next hops and groups are written before the routes
    using them.

    IPv4 routes also go into fib, the DIR-24-8 model; its ops come after
    (fib.ops()), once every route is in, and table.free_ops() after those."""
    pack_route = ABI.ROUTE.packer("kind", "nexthop")  # a full table: 750k of them
    forward = ABI.FORWARD
    for route in routes:
        _check_route(route)
        slot = 0
        if route.kind == forward and route.multipath:
            for op in _group_ops(route, table, ports):
                if isinstance(op, int):
                    slot = op
                else:
                    yield op
        elif route.kind == forward:
            assert route.via is not None
            slot, new = table.slot(route.via, route.port, ports)
            if new:
                yield update(NEXTHOPS, _u32(slot), table.slots[slot].value())
        yield update(ROUTES[route.prefix.family], route.prefix.key(), pack_route(route.kind, slot))
        if fib is not None and route.prefix.family == 4:
            addr = int.from_bytes(route.prefix.addr, "big")
            fib.add(
                addr, route.prefix.length, _dir24().entry(route.kind, slot, route.prefix.length)
            )
        if table.routes or table.groups:
            table.point(route.prefix, slot)
    yield from table.count_ops()


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


def config_routes(values: dict, ports: Ports, base: Path) -> list[Route]:
    """Every route a config gives the router, in order (of two for one prefix,
    the later is held): the kernel's table with sync, the route files, the
    [[route]] tables, local, and each address of the run's live ports."""
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
    return routes


def config_neighbours(values: dict, ports: Ports) -> dict[tuple[int, bytes], bytes]:
    """(family, address) -> MAC: the kernel's neighbours on the live ports,
    then the config's [[neighbour]] tables over them."""
    live = [n for n in ports.names if n]
    neighbours = kernel_neighbours(live) if live else {}
    for i, item in enumerate(_table(values, "neighbour")):
        where = f"neighbour {i + 1}"
        addr = parse_address(_require(item, "address", where))
        neighbours[(addr.version, addr.packed)] = parse_mac(_require(item, "mac", where))
    return neighbours


def config_ops(values: dict, ports: Ports, base: Path) -> list[Op]:
    routes = config_routes(values, ports, base)
    table = NexthopTable()
    fib = _dir24().Table()
    ops = list(route_ops(routes, table, ports, fib))
    ops += fib.ops()
    ops += table.free_ops()
    for (family, addr), mac in config_neighbours(values, ports).items():
        table.resolve(family, addr, mac)
    # next hops again, now with their MACs (the last write of a slot wins)
    ops += [update(NEXTHOPS, i.to_bytes(4, "little"), nh.value()) for i, nh in table.slots.items()]
    return ops


def reload_ops(ctl: Ctl, values: dict, ports: Ports, base: Path) -> list[Op]:
    """What a reload of a config sends to the running router: route_sync.reload_ops."""
    from veloz.control import route_sync

    return route_sync.reload_ops(ctl, values, ports, base)


def reload_fixed(values: dict) -> dict[str, object]:
    """What a reload leaves as the run started: a router that follows the
    kernel's table takes its routes from there, not from the file."""
    keys = ("sync", "sync_table", "routes", "route", "local")
    synced = {k: values.get(k) for k in keys} if "sync" in values else None
    return {'the routes of a router that follows the kernel (sync = "kernel")': synced}


# ---- live: `veloz ctl route|neigh|router-stats` -----------------------------


def _live_ports(ctl: Ctl) -> Ports:
    names = ctl.ports()
    return Ports(names, iface_macs(names))


def _nexthops(ctl: Ctl) -> NexthopTable:
    slots, groups = {}, {}
    for key, value in ctl.dump(NEXTHOPS):
        slot = int.from_bytes(key, "little")
        if ABI.NEXTHOP.unpack(value).flags & ABI.GROUP_FLAG:
            raw = ctl.lookup(GROUPS, key)
            group = Group.unpack(raw) if raw is not None else None
            if group is not None:
                groups[slot] = group
            continue
        nh = Nexthop.unpack(value)
        if nh is not None:
            slots[slot] = nh
    return NexthopTable(slots, groups)


def current_groups(ctl: Ctl, table: NexthopTable, prefixes: list[Prefix]) -> None:
    """Which of prefixes the NF routes through a group now, into table.routes:
    a route replaced or deleted then releases its group."""
    if not table.groups or not prefixes:
        return
    held = [p for p, h in zip(prefixes, _holds(ctl, prefixes), strict=True) if h]
    for prefix in held:
        raw = ctl.lookup(ROUTES[prefix.family], prefix.key())
        slot = ABI.ROUTE.unpack(raw).nexthop if raw is not None else None
        if slot in table.groups and ABI.ROUTE.unpack(raw).kind == ABI.FORWARD:
            table.routes[prefix] = slot


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
    more = getattr(args, "more", None) or []
    if args.kind:
        if more:
            raise VelozError(f"route add {args.prefix} {args.kind} takes nothing after it")
        return Route(
            prefix,
            {"local": ABI.LOCAL, "blackhole": ABI.BLACKHOLE, "kernel": ABI.KERNEL}[args.kind],
        )
    if not args.via:
        raise VelozError("route add needs `via ADDRESS` or one of local, blackhole, kernel")
    members = [
        (parse_gateway(via), ports.number(port if port is not None else args.port or 0))
        for via, port in route_file.parse_via_words(args.via, more)
    ]
    if len(set(members)) == 1:
        return Route(prefix, ABI.FORWARD, members[0][0], members[0][1])
    return Route(prefix, ABI.FORWARD, multipath=tuple(members))


def _with_kernel_macs(ops: list[Op], route: Route, table: NexthopTable, ports: Ports) -> None:
    """A new next hop may already have a MAC in the kernel's table: written with
    it from the start (its op replaced), an old one's written first."""
    members = route.multipath or (((route.via, route.port),) if route.via else ())
    if not members:
        return
    known = kernel_neighbours(ports.names)
    for via, port in dict.fromkeys(members):
        mac = known.get(via)
        slot = table.index[(via[0], via[1], port)]
        if not mac or table.slots[slot].dmac is not None:
            continue
        table.slots[slot].dmac = mac
        op = update(NEXTHOPS, _u32(slot), table.slots[slot].value())
        at = [n for n, o in enumerate(ops) if (o.map, o.key) == (NEXTHOPS, op.key)]
        if at:
            ops[at[0]] = op
        else:
            ops.insert(0, op)


def ctl_route_add(args: argparse.Namespace, ctl: Ctl) -> int:
    ports = _live_ports(ctl)
    route = _route_from_args(args, ports)
    table = _nexthops(ctl)
    current_groups(ctl, table, [route.prefix])
    fib = _dir24().Table(_reader(ctl))
    ops = list(route_ops([route], table, ports, fib))
    ops += fib.ops()
    ops += table.free_ops()
    _with_kernel_macs(ops, route, table, ports)
    ctl.apply(ops)
    print(f"route {route.prefix} added")
    return 0


def ctl_route_del(args: argparse.Namespace, ctl: Ctl) -> int:
    prefix = parse_prefix(args.prefix)
    ops = [delete(ROUTES[prefix.family], prefix.key())]
    held = _holds(ctl, [prefix])[0]
    if prefix.family == 4 and held:
        fib = _dir24().Table(_reader(ctl))
        addr = int.from_bytes(prefix.addr, "big")
        fib.delete(addr, prefix.length, _covering(ctl, prefix))
        ops += fib.ops()
    table = _nexthops(ctl)
    if held and table.groups:
        current_groups(ctl, table, [prefix])
        table.forget(prefix)
        ops += table.count_ops()
        ops += table.free_ops()
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
    current_groups(ctl, table, list(dict.fromkeys(r.prefix for r in routes)))
    fib = _dir24().Table(_reader(ctl))
    ops = list(route_ops(routes, table, ports, fib))
    ops += fib.ops()
    ops += table.free_ops()
    known = kernel_neighbours(ports.names)
    for (family, addr), mac in known.items():
        for slot in table.resolve(family, addr, mac):
            ops.append(update(NEXTHOPS, _u32(slot), table.slots[slot].value()))
    count = ctl.apply(ops)
    print(f"{len(routes)} routes loaded ({count} map operations)")
    return 0


def _format_gateway(nh: Nexthop) -> str:
    fam = socket.AF_INET if nh.family == 4 else socket.AF_INET6
    return socket.inet_ntop(fam, nh.addr)


def _route_row(table: NexthopTable, slot: int) -> dict:
    """What a forwarding route leads to: its next hop, or its group's members
    (each with its share of the buckets, as weight)."""

    def hop(nh: Nexthop) -> dict:
        return {"via": _format_gateway(nh), "port": nh.port, "resolved": bool(nh.dmac)}

    if slot in table.groups:
        weights: dict[int, int] = {}
        for member in table.groups[slot].buckets:
            weights[member] = weights.get(member, 0) + 1
        return {"multipath": [hop(table.slots[m]) | {"weight": w}
                              for m, w in weights.items() if m in table.slots]}  # fmt: skip
    nh = table.slots.get(slot)
    return hop(nh) if nh else {}


def _hop_text(hop: dict) -> str:
    weight = f" weight {hop['weight']}" if hop.get("weight", 1) != 1 else ""
    unresolved = "" if hop["resolved"] else " (no MAC yet: PASS)"
    return f" via {hop['via']} port {hop['port']}{weight}{unresolved}"


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
            rows.append(row | _route_row(table, slot) if kind == ABI.FORWARD else row)
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows[: args.limit] if args.limit else rows:
        hops = row.get("multipath", [row] if "via" in row else [])
        via = "".join(_hop_text(h) for h in hops)
        kind = "" if via else f" {row['kind']}"
        print(f"{row['prefix']}{kind}{via}")
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
