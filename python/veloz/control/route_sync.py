"""The router's table in step with the kernel's: `sync = "kernel"`.

A routing daemon (BIRD, FRR) installs its routes in the kernel's FIB; with

    sync = "kernel"          # in the router's config
    sync_table = "main"      # optional: the kernel table to follow (a name or number)

the router follows that table on every backend:

  - at start-up, the table as it is becomes the router's, built before the
    NF is attached (router.config_ops);
  - then a companion (companion.py) watches the kernel's changes to routes
    and neighbours (`ip -o monitor`) and applies them through the control
    socket in batches: each batch is one transaction, so the data path never
    sees half of a change (a withdrawn /16 and its replacement /17s land
    together). A batch closes after QUIET seconds without a change, or
    MAX_WAIT after its first one, so a busy feed still lands within MAX_WAIT.

Of several kernel routes for one prefix, the one with the lowest metric
forwards, as in the kernel. Routes of other tables, and local and broadcast
routes (the kernel's `local` table), are not the router's: the addresses of
the run's ports are local routes already (router.py).

If the watch is lost (the kernel drops events when its socket buffer
overflows: ENOBUFS), the companion starts a new one and compares the whole
table again, so nothing is missed for long. Its status file says how far
behind it is (veloz status, the metrics' veloz_router_sync_*).

A reload of a router instance's config (reload_ops, docs/service.md) is the
same kind of batch: the difference between the routes the router holds and
those the file gives, written by change_ops in one transaction.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from veloz.control import companion, router
from veloz.control.client import Ctl, CtlError, socket_path
from veloz.control.objects import Ports
from veloz.control.ops import Op, delete, parse_address, parse_mac, update
from veloz.control.router import ABI, Prefix, Route
from veloz.core.errors import VelozError

if TYPE_CHECKING:
    from veloz.control import dir24

SOURCES = ("kernel",)
KEYS = frozenset({"sync", "sync_table"})
QUIET = 0.01  # s: a batch closes after this long without a change ...
MAX_WAIT = 0.1  # s: ... or this long after its first change
MAX_BATCH = 100_000  # changes: bounds one transaction
RCVBUF = 64 << 20  # the watch's netlink buffer: a full table's burst fits
STATUS = "route-sync"
# `ip route` types that are never the router's (the kernel's local table)
_NOT_OURS = {"local", "broadcast", "multicast", "anycast", "nat"}


@dataclass(frozen=True)
class Source:
    """Where the routes come from: the kernel's table `table` (ip's name or number)."""

    table: str = "main"


def parse_source(values: dict) -> Source | None:
    """The sync keys of a router config; None without `sync`."""
    if "sync" not in values:
        if "sync_table" in values:
            raise VelozError('config: sync_table goes with sync = "kernel"')
        return None
    if values["sync"] not in SOURCES:
        raise VelozError(f"config: sync = {values['sync']!r}: the only source is \"kernel\" "
                         "(the routing table of the run's network namespace)")  # fmt: skip
    if values.get("routes") or values.get("route"):
        raise VelozError("config: sync = \"kernel\" takes the routes from the kernel: drop "
                         "routes and [[route]] (local and [[neighbour]] may stay)")  # fmt: skip
    if values.get("fib"):
        raise VelozError("config: fib = 1 reads the kernel's FIB itself: sync is for "
                         "veloz's tables (fib = 0)")  # fmt: skip
    table = values.get("sync_table", "main")
    if isinstance(table, bool) or not isinstance(table, str | int):
        raise VelozError("config: sync_table must be a table's name or number")
    source = Source(str(table))
    _ip_routes(source, 4)  # an unknown table: refused now, before anything is attached
    return source


# ---- the kernel's table ----------------------------------------------------


def _ip_routes(source: Source, family: int) -> list[str]:
    argv = ["ip", "-o", f"-{family}", "route", "show", "table", source.table]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        raise VelozError(f"sync: cannot read the kernel's table {source.table}: {why}")
    return done.stdout.splitlines()


def _metric(words: list[str]) -> int:
    if "metric" in words:
        i = words.index("metric")
        if i + 1 < len(words) and words[i + 1].isdigit():
            return int(words[i + 1])
    return 0


def _table_of(words: list[str]) -> str | None:
    if "table" in words:
        i = words.index("table")
        return words[i + 1] if i + 1 < len(words) else None
    return None


@dataclass
class KernelTable:
    """The kernel's routes of one table: prefix -> metric -> route."""

    source: Source
    ports: Ports
    routes: dict[Prefix, dict[int, Route]] = field(default_factory=dict)

    def line(self, text: str, monitored: bool = False) -> Prefix | None:
        """Take one line of `ip -o route` (or of `ip -o monitor route`, with
        its "Deleted " lines); the prefix it touched, or None if the line is
        not a route of this table or names a port the run does not have."""
        words = text.replace("\\", " ").split()
        deleted = bool(words) and words[0] == "Deleted"
        words = words[1:] if deleted else words
        if not words or words[0] in _NOT_OURS:
            return None
        table = _table_of(words)
        if (
            monitored
            and table != self.source.table
            and not (table is None and self.source.table in ("main", "254"))
        ):
            return None
        if table is not None:
            i = words.index("table")
            del words[i : i + 2]
        try:
            route = router.parse_route_line(" ".join(words), self.ports)
        except VelozError:
            # e.g. a route through an interface that is not one of the run's
            # ports: the kernel forwards it (a miss PASSes), as before
            route = None
        if route is None:
            return None
        metrics = self.routes.setdefault(route.prefix, {})
        if deleted:
            metrics.pop(_metric(words), None)
        else:
            metrics[_metric(words)] = route
        if not metrics:
            del self.routes[route.prefix]
        return route.prefix

    def load(self) -> set[Prefix]:
        """The whole table again (after a lost watch); every prefix it has or had."""
        before = set(self.routes)
        self.routes = {}
        for family in (4, 6):
            for text in _ip_routes(self.source, family):
                self.line(text)
        return before | set(self.routes)

    def effective(self, prefix: Prefix) -> Route | None:
        metrics = self.routes.get(prefix)
        return metrics[min(metrics)] if metrics else None


def startup_routes(source: Source, ports: Ports) -> list[Route]:
    """The kernel's table now: what the router starts with."""
    table = KernelTable(source, ports)
    table.load()
    return [r for p in table.routes if (r := table.effective(p)) is not None]


# ---- the router's table, as the sync has written it -------------------------


def covering_entry(prefix: Prefix, held: dict[Prefix, Route], table: router.NexthopTable) -> int:
    """The DIR-24-8 entry of the longest held route shorter than prefix that
    covers it (what a delete uncovers); 0 if none."""
    value = int.from_bytes(prefix.addr, "big")
    for n in range(prefix.length - 1, -1, -1):
        shorter = Prefix(4, (value & ~((1 << (32 - n)) - 1) & 0xFFFFFFFF).to_bytes(4, "big"), n)
        route = held.get(shorter)
        if route is not None:
            return router._dir24().entry(route.kind, _slot(route, table), n)
    return 0


def _slot(route: Route, table: router.NexthopTable) -> int:
    """The router_nexthops slot a held route leads to (a group's for multipath)."""
    if route.kind != ABI.FORWARD:
        return 0
    if route.multipath:
        return table.routes[route.prefix]
    assert route.via is not None
    return table.index[(route.via[0], route.via[1], route.port)]


def change_ops(
    changed: dict[Prefix, Route | None],
    held: dict[Prefix, Route],
    table: router.NexthopTable,
    ports: Ports,
    fib: dir24.Table,
) -> list[Op]:
    """One transaction: routes added or replaced, then deleted. held, table
    and fib become the router's after it: if it fails, read them again."""
    adds = [r for r in changed.values() if r is not None]
    ops = list(router.route_ops(adds, table, ports, fib))
    for prefix, route in changed.items():
        if route is None:
            held.pop(prefix, None)
        else:
            held[prefix] = route
    for prefix in (p for p, r in changed.items() if r is None):
        ops.append(delete(router.ROUTES[prefix.family], prefix.key()))
        table.forget(prefix)  # a multipath route's group loses a route
        if prefix.family == 4:
            addr = int.from_bytes(prefix.addr, "big")
            fib.delete(addr, prefix.length, covering_entry(prefix, held, table))
    # groups no route leads to are zeroed last, once no lookup can reach them
    return ops + fib.ops() + table.count_ops() + table.free_ops()


def parse_neighbour(text: str, ports: Ports) -> tuple[tuple[int, bytes], bytes | None] | None:
    """A line of `ip -o neigh` or `ip -o monitor neigh` on one of the run's
    ports: ((family, address), MAC), the MAC None when the neighbour is lost
    (deleted, failed); None for lines that say nothing to the router."""
    words = text.split()
    deleted = bool(words) and words[0] == "Deleted"
    words = words[1:] if deleted else words
    if len(words) < 3 or words[1] != "dev" or words[2] not in ports.names:
        return None
    try:
        addr = parse_address(words[0])
    except VelozError:
        return None
    key = (addr.version, addr.packed)
    if not deleted and "lladdr" in words and not {"FAILED", "INCOMPLETE"} & set(words):
        i = words.index("lladdr")
        try:
            return key, parse_mac(words[i + 1]) if i + 1 < len(words) else None
        except VelozError:
            return None
    return (key, None) if deleted or "FAILED" in words else None


def neighbour_ops(
    key: tuple[int, bytes], mac: bytes | None, table: router.NexthopTable
) -> list[Op]:
    """The next hops through a neighbour, with its MAC, or without (lost: their
    routes PASS until the kernel resolves it again)."""
    if mac is not None:
        changed = table.resolve(key[0], key[1], mac)
    else:
        changed = [i for i, nh in table.slots.items()
                   if (nh.family, nh.addr) == key and nh.dmac is not None]  # fmt: skip
        for i in changed:
            table.slots[i].dmac = None
    return [update(router.NEXTHOPS, i.to_bytes(4, "little"), table.slots[i].value())
            for i in changed]  # fmt: skip


def held_routes(ctl: Ctl, table: router.NexthopTable) -> dict[Prefix, Route]:
    """The routes the running router holds (its tries): prefix -> route."""
    out = {}
    for family, name in router.ROUTES.items():
        for key, value in ctl.dump(name):
            prefix = Prefix(family, key[4:], int.from_bytes(key[:4], "little"))
            raw = ABI.ROUTE.unpack(value)
            group = table.groups.get(raw.nexthop) if raw.kind == ABI.FORWARD else None
            if group is not None:
                table.routes[prefix] = raw.nexthop  # its group counts it
                members = tuple(((table.slots[b].family, table.slots[b].addr),
                                 table.slots[b].port) for b in group.buckets)  # fmt: skip
                out[prefix] = Route(prefix, raw.kind, multipath=members)
                continue
            nh = table.slots.get(raw.nexthop) if raw.kind == ABI.FORWARD else None
            via = (nh.family, nh.addr) if nh else None
            out[prefix] = Route(prefix, raw.kind, via, nh.port if nh else 0)
    return out


def resolve_new(adds: Iterable[Route], table: router.NexthopTable, ports: Ports,
                neighbours: dict[tuple[int, bytes], bytes]) -> list[Op]:  # fmt: skip
    """The new next hops of adds, with the MACs neighbours already know,
    written first (the routes through them then forward from the start)."""
    ops = []
    for route in adds:
        if route.kind != ABI.FORWARD:
            continue
        members = route.multipath or (((route.via, route.port),) if route.via else ())
        for via, port in dict.fromkeys(members):
            slot, new = table.slot(via, port, ports)
            if new:
                table.slots[slot].dmac = neighbours.get(via)
                value = table.slots[slot].value()
                ops.append(update(router.NEXTHOPS, slot.to_bytes(4, "little"), value))
    return ops


def diff(held: dict[Prefix, Route], wanted: Iterable[Route]) -> dict[Prefix, Route | None]:
    """From the routes held to those wanted (of two for one prefix, the
    later): each prefix to change, to its new route or None (deleted)."""
    want = {r.prefix: r for r in wanted}
    changed: dict[Prefix, Route | None] = {p: r for p, r in want.items() if held.get(p) != r}
    changed |= {p: None for p in held if p not in want}
    return changed


def reload_ops(ctl: Ctl, values: dict, ports: Ports, base: Path) -> list[Op]:
    """A reload of a router's config: its routes (route files, [[route]],
    local, the ports' addresses) reached from what the router holds in one
    transaction, as change_ops writes a batch of the kernel's; next hops
    given their MACs by [[neighbour]] or the kernel. With sync the routes
    are the kernel's (instance.py refuses a change of them): neighbours only."""
    neighbours = router.config_neighbours(values, ports)
    table = router._nexthops(ctl)
    ops: list[Op] = []
    if parse_source(values) is None:
        wanted = router.config_routes(values, ports, base)  # the whole file read and checked
        held = held_routes(ctl, table)
        changed = diff(held, wanted)
        fib = router._dir24().Table(router._reader(ctl))
        ops += resolve_new((r for r in changed.values() if r is not None), table, ports,
                           neighbours)  # fmt: skip
        ops += change_ops(changed, held, table, ports, fib)
    for key, mac in neighbours.items():  # the slots in use whose MAC is now another
        ops += neighbour_ops(key, mac, table)
    return ops


# ---- the companion ----------------------------------------------------------


class _Watch:
    """`ip -o monitor route` and `ip -o monitor neigh`: their lines, as they come."""

    def __init__(self) -> None:
        self.procs = {}
        self.selector = selectors.DefaultSelector()
        self.partial: dict[str, bytes] = {}
        for what in ("route", "neigh"):
            proc = subprocess.Popen(["ip", "-o", "-rc", str(RCVBUF), "monitor", what],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
            assert proc.stdout is not None
            os.set_blocking(proc.stdout.fileno(), False)
            self.selector.register(proc.stdout, selectors.EVENT_READ, what)
            self.procs[what] = proc
            self.partial[what] = b""

    def lines(self, timeout: float | None) -> list[tuple[str, str]]:
        """(what, line) pairs that arrived within timeout; raises EOFError if a
        watch ended."""
        out = []
        for key, _ in self.selector.select(timeout):
            what = key.data
            data = os.read(key.fd, 1 << 20)
            if not data:
                raise EOFError(f"ip monitor {what} ended")
            *complete, self.partial[what] = (self.partial[what] + data).split(b"\n")
            out += [(what, line.decode("utf-8", "replace")) for line in complete]
        return out

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait()
        self.selector.close()


class Sync:
    """The companion's state: the kernel's table, and the router's as written."""

    def __init__(self, source: Source, iface: str) -> None:
        self.source, self.iface = source, iface
        self.status_file = companion.status_path(iface, STATUS)
        self.status: dict = {"source": "kernel", "table": source.table, "routes": 0,
                             "transactions": 0, "errors": 0, "resyncs": 0,
                             "pending_since": None, "last_applied": None,
                             "last_batch": None, "last_error": None}  # fmt: skip

    def connect(self) -> Ctl:
        self.ctl = Ctl(socket_path(self.iface))
        return self.ctl

    def _read(self, name: str, first: int, count: int) -> bytes:
        """Live DIR-24-8 entries, for self.fib, on this batch's session."""
        return router._reader(self.ctl)(name, first, count)

    def reload(self) -> set[Prefix]:
        """Read the router and the kernel whole again; every prefix either has."""
        with self.connect() as ctl:
            ports = Ports(ctl.ports(), [])
            ports.macs = router.iface_macs(ports.names)
            self.table = router._nexthops(ctl)
            self.held = held_routes(ctl, self.table)
        self.ports = ports
        # read from the live maps where changes land, then kept (committed)
        self.fib = router._dir24().Table(self._read)
        self.protected = {p for p, r in self.held.items() if r.kind == ABI.LOCAL}
        self.kernel = KernelTable(self.source, ports)
        self.neighbours = router.kernel_neighbours(ports.names)
        return self.kernel.load() | (set(self.held) - self.protected)

    def apply(self, touched: Iterable[Prefix], neighbour_lines: list[str]) -> None:
        start = time.monotonic()
        ops: list[Op] = []
        for text in neighbour_lines:
            event = parse_neighbour(text, self.ports)
            if event is not None:
                key, mac = event
                if mac is None:
                    self.neighbours.pop(key, None)
                else:
                    self.neighbours[key] = mac
                ops += neighbour_ops(key, mac, self.table)
        changed = {}
        for prefix in touched:
            want = self.kernel.effective(prefix)
            if prefix not in self.protected and want != self.held.get(prefix):
                changed[prefix] = want
        if not ops and not changed:
            return
        with self.connect() as ctl:
            adds = (r for r in changed.values() if r is not None)
            ops += resolve_new(adds, self.table, self.ports, self.neighbours)
            ops += change_ops(changed, self.held, self.table, self.ports, self.fib)
            ctl.apply(ops)
        self.fib.committed()
        done = time.time()
        self.status["transactions"] += 1
        self.status["last_applied"] = done
        self.status["last_batch"] = {"changes": len(changed), "ops": len(ops),
                                     "seconds": round(time.monotonic() - start, 6)}  # fmt: skip

    def write_status(self) -> None:
        self.status["routes"] = len(self.kernel.routes)
        self.status["in_router"] = len(self.held) - len(self.protected)
        companion.write_status(self.status_file, self.status)

    def follow(self, watch: _Watch) -> None:
        """Batches of the watch's changes, each applied as one transaction,
        until the watch is lost (EOFError) or overflows (resync)."""
        while True:
            touched: set[Prefix] = set()
            neighbours: list[str] = []
            first = last = None
            while first is None or (
                time.monotonic() - last < QUIET
                and time.monotonic() - first < MAX_WAIT
                and len(touched) + len(neighbours) < MAX_BATCH
            ):
                wait = None if first is None else max(0.0, QUIET - (time.monotonic() - last))
                lines = watch.lines(wait)
                if not lines:
                    if first is None:
                        continue
                    break
                last = time.monotonic()
                if first is None:
                    first = last
                    self.status["pending_since"] = time.time()
                    self.write_status()
                for what, text in lines:
                    if text.startswith("netlink receive error"):
                        return  # events were dropped: compare everything again
                    if what == "neigh":
                        neighbours.append(text)
                    elif (prefix := self.kernel.line(text, monitored=True)) is not None:
                        touched.add(prefix)
            self.apply(touched, neighbours)
            self.status["pending_since"] = None
            self.write_status()

    def run(self) -> None:
        """Follow the kernel until the runner ends (this process is killed)."""
        while True:
            watch = _Watch()  # first: no change between the reads below and it is lost
            try:
                self.status["pending_since"] = time.time()
                self.apply(self.reload(), [])
                self.status["pending_since"] = None
                self.write_status()
                self.follow(watch)
            except (CtlError, VelozError, EOFError) as e:
                self.status["errors"] += 1
                self.status["last_error"] = str(e)
                self.write_status()
                print(f"veloz: route sync: {e}; reading the whole table again", file=sys.stderr)
                time.sleep(1)
            finally:
                watch.close()
            self.status["resyncs"] += 1


def _wait_for_socket(path: Path, runner: int) -> None:
    while not path.exists():
        try:
            os.kill(runner, 0)
        except ProcessLookupError:
            os._exit(0)
        time.sleep(0.05)


def start(source: Source, iface: str) -> None:
    """Fork the sync companion of the run whose first port is iface; it starts
    once the runner's control socket appears (the NF is attached)."""

    def body(runner: int) -> None:
        _wait_for_socket(socket_path(iface), runner)
        Sync(source, iface).run()

    companion.fork("route sync", body, companion.status_path(iface, STATUS))
