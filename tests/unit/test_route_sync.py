# SPDX-License-Identifier: BSD-2-Clause
"""The router's sync with the kernel's table (control/route_sync.py) without
a kernel: lines of `ip -o monitor route` and `ip -o monitor neigh` as the
kernel prints them, batched into transactions against a model of the running
NF's maps. After every batch the router's trie must hold exactly the kernel's
effective routes (lowest metric per prefix), and its DIR-24-8 table must
answer every address as the trie does."""

from __future__ import annotations

import random

import pytest
from test_router_dir24 import FakeCtl, check_same_answers, text

from veloz.control import dir24, route_sync, router
from veloz.control.objects import Ports
from veloz.core.errors import VelozError

PORTS = Ports(["p0", "p1"], [bytes.fromhex("020000000001"), bytes.fromhex("020000000002")])
VIAS = ["10.255.0.1", "10.255.0.2", "10.255.0.3"]


class GroupsCtl(FakeCtl):
    """FakeCtl with router_groups, for multipath routes."""

    def __init__(self) -> None:
        super().__init__()
        self.groups: dict[bytes, bytes] = {}

    def apply(self, ops) -> int:
        ops = list(ops)
        for op in ops:
            if op.map == router.GROUPS:
                self.groups[op.key] = op.value
        return super().apply([op for op in ops if op.map != router.GROUPS])


def kernel() -> route_sync.KernelTable:
    return route_sync.KernelTable(route_sync.Source(), PORTS)


def test_monitor_lines():
    k = kernel()
    p = k.line("198.18.64.0/24 via 198.18.1.2 dev p1 proto bird metric 32 ", monitored=True)
    assert p is not None and str(p) == "198.18.64.0/24"
    route = k.effective(p)
    assert route is not None and route.kind == router.ABI.FORWARD and route.port == 1
    # a second route for the prefix with a lower metric forwards; deleting it
    # gives the prefix back to the first
    k.line("198.18.64.0/24 via 198.18.1.3 dev p0 proto static metric 10", monitored=True)
    assert k.effective(p).port == 0
    k.line("Deleted 198.18.64.0/24 via 198.18.1.3 dev p0 proto static metric 10", monitored=True)
    assert k.effective(p).port == 1
    k.line("Deleted 198.18.64.0/24 via 198.18.1.2 dev p1 proto bird metric 32", monitored=True)
    assert k.effective(p) is None and not k.routes
    # other tables, the local table's types, and ports the run lacks: not ours
    assert k.line("198.18.9.0/24 via 198.18.1.2 dev p1 table 100", monitored=True) is None
    assert k.line("local 198.18.1.1 dev p0 table local proto kernel", monitored=True) is None
    assert k.line("broadcast 198.18.1.255 dev p0 table local", monitored=True) is None
    assert k.line("198.18.9.0/24 via 198.18.1.2 dev eth9", monitored=True) is None
    assert k.effective(route_sync.router.parse_prefix("198.18.9.0/24")) is None
    # connected routes go to the kernel, blackholes drop
    connected = k.line("198.18.1.0/24 dev p0 proto kernel scope link src 198.18.1.1")
    assert k.effective(connected).kind == router.ABI.KERNEL
    hole = k.line("blackhole 198.18.66.0/24 proto bird")
    assert k.effective(hole).kind == router.ABI.BLACKHOLE


def test_a_followed_table_that_is_not_main():
    k = route_sync.KernelTable(route_sync.Source("100"), PORTS)
    assert k.line("198.18.9.0/24 via 198.18.1.2 dev p1 table 100", monitored=True) is not None
    assert k.line("198.18.8.0/24 via 198.18.1.2 dev p1", monitored=True) is None


def test_neighbour_lines():
    parse = route_sync.parse_neighbour
    key = (4, bytes([198, 18, 1, 2]))
    mac = bytes.fromhex("02000000aa02")
    assert parse("198.18.1.2 dev p1 lladdr 02:00:00:00:aa:02 REACHABLE", PORTS) == (key, mac)
    assert parse("198.18.1.2 dev p1 FAILED", PORTS) == (key, None)
    assert parse("Deleted 198.18.1.2 dev p1 lladdr 02:00:00:00:aa:02 STALE", PORTS) == (key, None)
    assert parse("198.18.1.2 dev p1 INCOMPLETE", PORTS) is None
    assert parse("198.18.1.2 dev eth9 lladdr 02:00:00:00:aa:02 REACHABLE", PORTS) is None
    assert parse("garbage", PORTS) is None
    assert parse("198.18.1.2 dev p1 lladdr zz REACHABLE", PORTS) is None


def test_sync_config_refused_with_one_line():
    with pytest.raises(VelozError, match="the only source is"):
        route_sync.parse_source({"sync": "bgp"})
    with pytest.raises(VelozError, match="drop routes"):
        route_sync.parse_source({"sync": "kernel", "routes": "t.txt"})
    with pytest.raises(VelozError, match="fib = 1"):
        route_sync.parse_source({"sync": "kernel", "fib": 1})
    with pytest.raises(VelozError, match="goes with sync"):
        route_sync.parse_source({"sync_table": "main"})
    with pytest.raises(VelozError, match="cannot read the kernel's table nosuchtable"):
        route_sync.parse_source({"sync": "kernel", "sync_table": "nosuchtable"})
    assert route_sync.parse_source({}) is None


def _effective(k: route_sync.KernelTable) -> dict[tuple[int, bytes], tuple]:
    """The kernel's routes as the trie should hold them: (length, net) ->
    (kind, ((gateway, port), ...))."""
    out = {}
    for prefix in k.routes:
        route = k.effective(prefix)
        members = route.multipath or (((route.via, route.port),) if route.via else ())
        out[(prefix.length, prefix.addr)] = (route.kind, members)
    return out


def _held(ctl: FakeCtl, table: router.NexthopTable) -> dict[tuple[int, bytes], tuple]:
    """What the fake NF's trie holds, its next hops and groups read back."""
    groups = {int.from_bytes(k, "little"): router.Group.unpack(v)
              for k, v in ctl.groups.items()}  # fmt: skip
    out = {}
    for (length, net), value in ctl.trie.items():
        kind, slot = router.ROUTE.unpack(value)
        members = ()
        if kind == router.ABI.FORWARD:
            buckets = groups[slot].buckets if groups.get(slot) else (slot,)
            hops = [router.Nexthop.unpack(ctl.nexthops[b.to_bytes(4, "little")]) for b in buckets]
            members = tuple(((h.family, h.addr), h.port) for h in hops)
        out[(length, net)] = (kind, members)
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_batches_keep_the_router_equal_to_the_kernel(seed: int):
    rng = random.Random(seed)
    ctl, k = GroupsCtl(), kernel()
    table = router.NexthopTable()
    fib = dir24.Table(_reader(ctl))  # one model for every batch, as the companion keeps
    held: dict = {}
    installed: dict[tuple[int, int], str] = {}  # (addr, len) -> the line that added it
    for _batch in range(60):
        touched = set()
        for _ in range(rng.randint(1, 40)):
            if installed and rng.random() < 0.35:
                p = rng.choice(sorted(installed))
                line = "Deleted " + installed.pop(p)
            else:
                addr, length = _random_prefix(rng)
                metric = rng.choice([0, 0, 20])
                kind = rng.choice(["", "", "", "blackhole ", "multipath"])
                line = f"{text(addr, length)} proto bird metric {metric}"
                if kind == "blackhole ":
                    line = kind + line
                elif kind == "multipath":  # as `ip -o monitor route` prints one
                    for via in rng.sample(VIAS, rng.randint(2, 3)):
                        line += f" \\\tnexthop via {via} dev p{rng.randint(0, 1)} weight 1"
                else:
                    line = line.replace(" proto", f" via {rng.choice(VIAS)} dev p1 proto")
                installed[(addr, length)] = line
            prefix = k.line(line, monitored=True)
            assert prefix is not None
            touched.add(prefix)
        changed = {p: k.effective(p) for p in touched if k.effective(p) != held.get(p)}
        ctl.apply(route_sync.change_ops(changed, held, table, PORTS, fib))
        fib.committed()
        assert _held(ctl, table) == _effective(k)
        # no group is left that no route leads to
        live = {int.from_bytes(v[4:8], "little") for v in ctl.trie.values()}
        groups = {int.from_bytes(key, "little") for key, v in ctl.groups.items() if any(v)}
        assert groups <= live
        check_same_answers(ctl, rng, [a for a, _ in installed])


def _random_prefix(rng: random.Random) -> tuple[int, int]:
    length = rng.choice([8, 12, 16, 20, 22, 24, 24, 25, 28, 32])
    addr = 0x0A000000 | rng.getrandbits(16) << 4
    return addr & ~((1 << (32 - length)) - 1) & 0xFFFFFFFF, length


def _reader(ctl: FakeCtl):
    def read(name: str, first: int, count: int) -> bytes:
        return bytes.fromhex(ctl.request(f"read {name} {first.to_bytes(4, 'little').hex()} "
                                         f"{count}"))  # fmt: skip

    return read


def test_neighbour_ops_resolve_and_lose_a_next_hop():
    table = router.NexthopTable()
    slot, _ = table.slot((4, bytes([10, 255, 0, 1])), 1, PORTS)
    mac = bytes.fromhex("02000000aa01")
    ops = route_sync.neighbour_ops((4, bytes([10, 255, 0, 1])), mac, table)
    assert [op.key for op in ops] == [slot.to_bytes(4, "little")]
    assert router.Nexthop.unpack(ops[0].value).dmac == mac
    assert route_sync.neighbour_ops((4, bytes([10, 255, 0, 1])), mac, table) == []  # unchanged
    lost = route_sync.neighbour_ops((4, bytes([10, 255, 0, 1])), None, table)
    assert router.Nexthop.unpack(lost[0].value).dmac is None  # its routes PASS again
    assert route_sync.neighbour_ops((4, bytes([10, 255, 0, 9])), mac, table) == []


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        ('sync = "bgp"', "the only source is"),
        ('sync = "kernel"\nsync_table = "nosuchtable"', "cannot read the kernel's table"),
        (
            'sync = "kernel"\n[[route]]\nprefix = "198.18.64.0/24"\nvia = "198.18.1.2"',
            "drop routes",
        ),
    ],
)
def test_veloz_run_refuses_a_bad_sync_before_anything_runs(tmp_path, extra, complaint):
    from veloz import cli
    from veloz.control import run

    cfg = tmp_path / "router.toml"
    cfg.write_text(extra + "\n")
    args = cli.parse_args(["run", "router", "--backend", "xdp", "--iface", "lo", "--config",
                           str(cfg)])  # fmt: skip
    with pytest.raises(VelozError, match=complaint) as e:
        run.command(args)
    assert "\n" not in str(e.value)
