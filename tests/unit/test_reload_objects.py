# SPDX-License-Identifier: BSD-2-Clause
"""A reload of a router's or lb's config (docs/service.md) against in-memory
stand-ins for their maps: the difference between what the NF holds and the
file, in one transaction, that reaches what a fresh start of the file holds;
the order of its operations keeps every lookup whole at every step; what
stays keeps its slots and ids; refusals change nothing."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path

import numpy as np
import pytest
from test_instance import FakeSession
from test_lb_maglev import LB, M
from test_lb_maglev import FakeCtl as LbCtl
from test_route_sync import GroupsCtl
from test_router_dir24 import check_same_answers

from veloz.control import companion, dir24, instance, lb, lb_reload, route_sync, router
from veloz.control.objects import Ports, iface_macs
from veloz.control.ops import Op
from veloz.core.errors import VelozError

# ---- router ----------------------------------------------------------------------

MACS = [bytes.fromhex("020000000001"), bytes.fromhex("020000000002")]
PORTS = Ports(["", ""], MACS)  # offline ports: no kernel neighbours, no addresses


class RouterCtl(GroupsCtl):
    """The router's maps with both tries and its groups, read as Ctl reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.trie6: dict[bytes, bytes] = {}

    def dump(self, name: str) -> list[tuple[bytes, bytes]]:
        if name == router.ROUTES[4]:
            return [(n.to_bytes(4, "little") + a, v) for (n, a), v in self.trie.items()]
        if name == router.ROUTES[6]:
            return list(self.trie6.items())
        return super().dump(name)

    def lookup(self, name: str, key: bytes) -> bytes | None:
        if name == router.GROUPS:
            return self.groups.get(key)
        if name == router.ROUTES[6]:
            return self.trie6.get(key)
        return super().lookup(name, key)

    def apply(self, ops) -> int:
        ops = list(ops)
        for op in ops:
            if op.map == router.ROUTES[6] and op.verb == "delete":
                del self.trie6[op.key]
            elif op.map == router.ROUTES[6]:
                self.trie6[op.key] = op.value
        return super().apply([op for op in ops if op.map != router.ROUTES[6]])


ROUTE_FILE = """\
198.18.64.0/18 proto static
\tnexthop via 198.18.1.2 dev 1 weight 1
\tnexthop via 198.18.2.2 dev 0 weight 1
198.18.128.0/24 198.18.1.2 1
198.18.129.0/24 blackhole
fd00:198:18:64::/64 fd00:198:18:1::2 1
"""
ROUTER_OLD = """\
routes = "table.txt"
local = ["198.18.0.1"]
[[route]]
prefix = "198.18.96.0/20"
via = "198.18.2.2"
port = 0
[[route]]
prefix = "198.18.130.0/24"
via = "198.18.3.2"
port = 1
[[neighbour]]
address = "198.18.1.2"
mac = "02:00:00:00:01:02"
"""
# the /18's group changes members, the /24 a multipath group of its own, the
# /20 is gone (a route under the /18 uncovered), a new /26 inside a held /24,
# the blackhole becomes a forward, the IPv6 route moves port, a MAC changes
ROUTE_FILE_NEW = """\
198.18.64.0/18 proto static
\tnexthop via 198.18.1.2 dev 1 weight 2
\tnexthop via 198.18.3.2 dev 1 weight 1
198.18.128.0/24 proto static
\tnexthop via 198.18.1.2 dev 1 weight 1
\tnexthop via 198.18.2.2 dev 0 weight 1
198.18.128.64/26 198.18.2.2 0
198.18.129.0/24 198.18.3.2 1
fd00:198:18:64::/64 fd00:198:18:1::2 0
"""
ROUTER_NEW = ROUTER_OLD.replace(
    '[[route]]\nprefix = "198.18.96.0/20"\nvia = "198.18.2.2"\nport = 0\n', ""
).replace("02:00:00:00:01:02", "02:00:00:00:01:09")


def router_holding(tmp_path: Path, config: str, table: str) -> RouterCtl:
    (tmp_path / "table.txt").write_text(table)
    fake = RouterCtl()
    fake.apply(router.config_ops(tomllib.loads(config), PORTS, tmp_path))
    fake.applied.clear()
    return fake


def routes_of(fake: RouterCtl) -> dict[str, tuple]:
    """prefix -> (kind, members with their MACs): what lookups find."""
    table = router._nexthops(fake)
    out = {}
    for prefix, route in route_sync.held_routes(fake, table).items():
        members = route.multipath or (((route.via, route.port),) if route.via else ())
        macs = tuple(table.slots[table.index[(v[0], v[1], p)]].dmac for v, p in members)
        out[str(prefix)] = (route.kind, members, macs)
    return out


def _forward_slots(entries: np.ndarray) -> set[int]:
    """The next-hop slots DIR-24-8 entries of forwarding routes lead to."""
    e = entries[(entries & dir24.ROUTE) != 0] & 0x00FFFFFF  # kind << 16 | slot
    return set((e[(e >> 16) == router.ABI.FORWARD] & 0xFFFF).tolist())


def _dir24_slots(fake: RouterCtl) -> set[int]:
    tbl24 = fake.tbl24[(fake.tbl24 & dir24.GROUP) == 0]
    return _forward_slots(tbl24) | _forward_slots(fake.tbl8)


def _slot_whole(fake: RouterCtl, slot: int) -> bool:
    """A used next hop, or a group whose members are used next hops."""
    key = slot.to_bytes(4, "little")
    flags = router.NEXTHOP.unpack(fake.nexthops.get(key, bytes(router.NEXTHOP.size))).flags
    if not flags & router.ABI.USED:
        return False
    if not flags & router.ABI.GROUP_FLAG:
        return True
    group = router.Group.unpack(fake.groups.get(key, bytes(router.GROUP.size)))
    return group is not None and all(
        router.Nexthop.unpack(fake.nexthops.get(b.to_bytes(4, "little"), b""))
        for b in group.buckets
    )


def whole_at_every_step(fake: RouterCtl, ops: list[Op]) -> None:
    """Apply ops one at a time: after each, every route the tries or the
    DIR-24-8 tables hold leads somewhere whole (_slot_whole)."""
    for op in ops:
        fake.apply([op])
        if op.map in (dir24.TBL24, dir24.TBL8):
            slots = _forward_slots(np.array([int.from_bytes(op.value, "little")], np.uint32))
        elif op.map in (router.NEXTHOPS, router.GROUPS):
            slots = _dir24_slots(fake)
        else:
            slots = set()
        for value in [*fake.trie.values(), *fake.trie6.values()]:
            route = router.ROUTE.unpack(value)
            if route.kind == router.ABI.FORWARD:
                slots.add(route.nexthop)
        assert all(_slot_whole(fake, s) for s in slots), op


def test_router_reload_reaches_a_fresh_start_in_order(tmp_path: Path):
    fake = router_holding(tmp_path, ROUTER_OLD, ROUTE_FILE)
    held = {str(p) for p in route_sync.held_routes(fake, router._nexthops(fake))}
    kept_key = next(k for k, v in fake.trie.items() if k[0] == 24 and v and k[1][2] == 130)
    kept_value = fake.trie[kept_key]
    (tmp_path / "table.txt").write_text(ROUTE_FILE_NEW)
    ops = router.reload_ops(fake, tomllib.loads(ROUTER_NEW), PORTS, tmp_path)
    assert ops and all(op.map != router.ROUTES[4] or op.key != router.parse_prefix(
        "198.18.130.0/24").key() for op in ops)  # fmt: skip
    whole_at_every_step(fake, ops)
    fresh = router_holding(tmp_path, ROUTER_NEW, ROUTE_FILE_NEW)
    assert routes_of(fake) == routes_of(fresh)
    assert "198.18.96.0/20" in held and "198.18.96.0/20" not in routes_of(fake)
    assert fake.trie[kept_key] == kept_value  # an unchanged route keeps its next hop
    check_same_answers(fake, random.Random(1), [0xC6124000, 0xC6126001, 0xC6128041])
    # no group is left that no route leads to
    live = {int.from_bytes(v[4:8], "little") for v in fake.trie.values()}
    assert {int.from_bytes(k, "little") for k, v in fake.groups.items() if any(v)} <= live
    # the same file again: nothing to do
    assert router.reload_ops(fake, tomllib.loads(ROUTER_NEW), PORTS, tmp_path) == []


def test_router_reload_of_a_broken_file_sends_nothing(tmp_path: Path):
    fake = router_holding(tmp_path, ROUTER_OLD, ROUTE_FILE)
    before = routes_of(fake)
    (tmp_path / "table.txt").write_text(ROUTE_FILE + "198.18.200.0/33 198.18.1.2\n")
    with pytest.raises(VelozError, match="table.txt line 7: bad prefix"):
        router.reload_ops(fake, tomllib.loads(ROUTER_OLD), PORTS, tmp_path)
    assert fake.applied == [] and routes_of(fake) == before


def test_router_diff_replaces_and_deletes_only_what_differs():
    a = router.Route(
        router.parse_prefix("198.18.1.0/24"), router.ABI.FORWARD, (4, b"\xc6\x12\x01\x02"), 1
    )
    b = router.Route(router.parse_prefix("198.18.2.0/24"), router.ABI.BLACKHOLE)
    b2 = router.Route(b.prefix, router.ABI.LOCAL)
    held = {a.prefix: a, b.prefix: b}
    assert route_sync.diff(held, [a, b]) == {}
    assert route_sync.diff(held, [a, b2]) == {b.prefix: b2}
    assert route_sync.diff(held, [b, b2]) == {a.prefix: None, b.prefix: b2}  # the later wins


# ---- lb --------------------------------------------------------------------------

LB_OLD = {"lb": LB, "vip": [
    {"address": "198.18.100.1", "port": 80, "proto": "tcp",
     "backends": ["198.18.1.1", "198.18.1.2", "198.18.1.3:weight=2"]},
    {"address": "198.18.100.2", "port": 53, "proto": "udp", "backends": ["198.18.1.4"]},
    {"address": "198.18.100.4", "port": 80, "proto": "tcp", "backends": ["198.18.1.7"]},
]}  # fmt: skip
# vip 1: .3 removed, .2's weight changed, .5 added, on_all_down changed;
# vip 2 removed; vip 3 new; vip 4 as it was
LB_NEW = {"lb": LB | {"mac": "02:aa:00:00:00:01"}, "vip": [
    {"address": "198.18.100.1", "port": 80, "proto": "tcp", "on_all_down": "pass",
     "backends": ["198.18.1.1", "198.18.1.2:weight=3", "198.18.1.5"]},
    {"address": "198.18.100.3", "port": 443, "proto": "tcp", "backends": ["198.18.1.6"]},
    {"address": "198.18.100.4", "port": 80, "proto": "tcp", "backends": ["198.18.1.7"]},
]}  # fmt: skip


def lb_holding(values: dict, ports: Ports | None = None) -> LbCtl:
    fake = LbCtl()
    fake.apply(lb.config_ops(values, ports or Ports(), Path(".")))
    fake.applied.clear()
    return fake


def lb_view(fake: LbCtl) -> dict:
    """VIP -> (on_all_down, backends and weights, ring as addresses): ids aside."""
    state = lb.State.read(fake)  # type: ignore[arg-type]
    out = {}
    for vip, index in state.vips.items():
        members = state.members(index)
        ring = [str(members[b].address) if b else None for b in fake.ring(index)]
        backends = sorted((str(b.address), b.weight) for b in members.values())
        out[str(vip)] = (lb.on_all_down(state.flags[vip]), backends, ring)
    return out | {"self": state.self}


def ring_names_valid_ids_at_every_step(fake: LbCtl, ops: list[Op]) -> None:
    """Apply ops one at a time: after each, the ring row of every VIP the NF
    holds names only valid backends of that VIP (or none). A ring op changes
    one slot: that slot is checked; any other op, every row."""
    valid: dict[int, set[int]] = {}
    for op in ops:
        fake.apply([op])
        if op.map == lb.RING:
            row = int.from_bytes(op.key, "little") // M
            assert row not in valid or int.from_bytes(op.value, "little") in valid[row], op
            continue
        state = lb.State.read(fake)  # type: ignore[arg-type]
        valid = {i: {0, *state.members(i)} for i in state.vips.values()}
        for index, ids in valid.items():
            assert set(fake.ring(index)) <= ids, op


def test_lb_reload_reaches_a_fresh_start_and_keeps_what_stays():
    fake = lb_holding(LB_OLD)
    old = lb.State.read(fake)  # type: ignore[arg-type]
    ids = {(b.vip, str(b.address)): i for i, b in old.backends.items()}
    ring4 = fake.ring(2)
    ops = lb_reload.reload_ops(fake, LB_NEW, Ports(), Path("."))  # type: ignore[arg-type]
    ring_names_valid_ids_at_every_step(fake, ops)
    assert lb_view(fake) == lb_view(lb_holding(LB_NEW))
    new = lb.State.read(fake)  # type: ignore[arg-type]
    # the backends that stay keep their ids, valid: the flows pinned to them stay
    for key in ((0, "198.18.1.1"), (0, "198.18.1.2"), (2, "198.18.1.7")):
        assert new.backends[ids[key]].valid and new.backends[ids[key]].vip == key[0]
    assert new.backends[ids[(0, "198.18.1.2")]].weight == 3
    # the removed ones are tombstones (their pinned flows re-hash); no id changed hands
    for key in ((0, "198.18.1.3"), (1, "198.18.1.4")):
        assert not new.backends[ids[key]].valid and str(new.backends[ids[key]].address) == key[1]
    # an unchanged VIP's ring is not written
    assert fake.ring(2) == ring4
    assert not [
        op for op in ops if op.map == lb.RING and 2 * M <= int.from_bytes(op.key, "little") < 3 * M
    ]
    # the same config again: nothing to do
    assert lb_reload.reload_ops(fake, LB_NEW, Ports(), Path(".")) == []  # type: ignore[arg-type]


def test_lb_reload_leaves_a_drained_backend_to_the_health_checks():
    fake = lb_holding(LB_OLD)
    state = lb.State.read(fake)  # type: ignore[arg-type]
    vip = lb.parse_vip("198.18.100.1", 80, "tcp")
    fake.apply(lb.drain_ops(state, vip, lb.parse_address("198.18.1.1"), fake.ring(0)))
    drained_ring = fake.ring(0)
    # another VIP's change: this VIP's ring (a drain's, not Maglev's own) stays
    other = {**LB_OLD, "vip": LB_OLD["vip"][:2]}
    ops = lb_reload.reload_ops(fake, other, Ports(), Path("."))  # type: ignore[arg-type]
    assert ops and all(op.map != lb.RING for op in ops)
    fake.apply(ops)
    assert fake.ring(0) == drained_ring
    # a backend added to it: Maglev's table of the backends up; .1 stays down
    more = {**other, "vip": [{**other["vip"][0], "backends": [
        *other["vip"][0]["backends"], "198.18.1.9"]}, other["vip"][1]]}  # fmt: skip
    fake.apply(lb_reload.reload_ops(fake, more, Ports(), Path(".")))  # type: ignore[arg-type]
    state = lb.State.read(fake)  # type: ignore[arg-type]
    assert [str(b.address) for b in state.drained(0).values()] == ["198.18.1.1"]
    assert fake.ring(0) == lb.ring_ids(state.members(0))


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"vip": LB_OLD["vip"]}, "VIPs need an \\[lb\\] table"),
        ({"lb": LB, "vip": [LB_OLD["vip"][0], LB_OLD["vip"][0]]}, "exists already"),
        (
            {"lb": LB, "vip": [{**LB_OLD["vip"][0], "backends": ["198.18.1.1", "198.18.1.1"]}]},
            "198.18.1.1 is a backend of 198.18.100.1:80/tcp already",
        ),
        (
            {"lb": LB, "vip": [{**LB_OLD["vip"][0], "backends": ["198.18.1.1:weight=0"]}]},
            "weight must be between",
        ),
        ({"lb": LB, "vip": [{**LB_OLD["vip"][0], "check": {"type": "ping"}}]}, "type must be"),
    ],
)
def test_lb_reload_of_a_broken_config_sends_nothing(values: dict, complaint: str):
    fake = lb_holding(LB_OLD)
    before = lb_view(fake)
    with pytest.raises(VelozError, match=complaint):
        lb_reload.reload_ops(fake, values, Ports(), Path("."))  # type: ignore[arg-type]
    assert fake.applied == [] and lb_view(fake) == before


# ---- instance.reload: what only a restart applies ----------------------------------


def start(tmp_path: Path, monkeypatch, nf: str, config: str, fake: object) -> Path:
    """An instance of nf on lo with config.toml, recorded as started, its
    control socket the fake."""
    monkeypatch.setattr(instance, "socket_path", lambda iface: tmp_path / f"{iface}.sock")
    monkeypatch.setattr(companion, "status_path", lambda iface, name: tmp_path / "status.json")
    (tmp_path / "config.toml").write_text(config)
    path = tmp_path / "edge.toml"
    path.write_text(f'nf = "{nf}"\nbackend = "xdp"\nports = ["lo"]\nconfig = "config.toml"\n')
    inst = instance.load(str(path))
    companion.write_status(tmp_path / "status.json",
                           {**instance.record(inst, inst.config_values()), "pid": 42})  # fmt: skip
    monkeypatch.setattr(instance, "Ctl", FakeSession(fake, 42))  # type: ignore[arg-type]
    return path


CHECKED = """\
[lb]
source4 = "198.18.0.1"
next_hop_mac = "02:00:00:00:00:fe"
[[vip]]
address = "198.18.100.1"
port = 80
proto = "tcp"
check = { type = "tcp" }
backends = ["198.18.1.1", "198.18.1.2"]
"""


def test_instance_lb_reload_applies_backends_and_refuses_changed_checks(tmp_path, monkeypatch):
    fake = lb_holding(tomllib.loads(CHECKED), Ports(["lo"], iface_macs(["lo"])))
    path = start(tmp_path, monkeypatch, "lb", CHECKED, fake)
    assert instance.reload(str(path)) == 0 and fake.applied == []
    # a changed weight of a checked backend: the checks' targets are the same
    (tmp_path / "config.toml").write_text(
        CHECKED.replace('"198.18.1.2"]', '"198.18.1.2:weight=2"]')
    )
    assert instance.reload(str(path)) > 0 and len(fake.applied) == 1
    for text in (CHECKED.replace('"198.18.1.2"]', '"198.18.1.2", "198.18.1.3"]'),
                 CHECKED.replace('type = "tcp"', 'type = "tcp", port = 8080'),
                 CHECKED.replace('check = { type = "tcp" }\n', "")):  # fmt: skip
        (tmp_path / "config.toml").write_text(text)
        with pytest.raises(VelozError, match="the health checks changed: a restart applies it"):
            instance.reload(str(path))
    (tmp_path / "config.toml").write_text(CHECKED + "[[vip]]\naddress = 1\n")
    with pytest.raises(VelozError, match="bad VIP address|needs"):
        instance.reload(str(path))
    assert len(fake.applied) == 1


SYNCED = """\
sync = "kernel"
local = ["198.18.0.1"]
[[neighbour]]
address = "198.18.1.2"
mac = "02:00:00:00:01:02"
"""


def test_instance_router_reload_with_sync_changes_no_route(tmp_path, monkeypatch):
    fake = RouterCtl()
    path = start(tmp_path, monkeypatch, "router", SYNCED, fake)
    before = routes_of(fake)
    for text in (SYNCED.replace("198.18.0.1", "198.18.0.9"),
                 SYNCED.replace('sync = "kernel"\n', ""),
                 'sync_table = "local"\n' + SYNCED):  # fmt: skip
        (tmp_path / "config.toml").write_text(text)
        with pytest.raises(VelozError, match='follows the kernel \\(sync = "kernel"\\) changed'):
            instance.reload(str(path))
    assert fake.applied == [] and routes_of(fake) == before
    # neighbours are not routes: a reload gives a next hop through one its MAC
    table = router.NexthopTable()
    slot, _ = table.slot((4, bytes([198, 18, 1, 2])), 1, PORTS)
    fake.apply(
        [router.update(router.NEXTHOPS, slot.to_bytes(4, "little"), table.slots[slot].value())]
    )
    (tmp_path / "config.toml").write_text(SYNCED)
    assert instance.reload(str(path)) == 1
    mac = router.Nexthop.unpack(fake.nexthops[slot.to_bytes(4, "little")]).dmac
    assert mac == bytes.fromhex("020000000102")


ON_LO = """\
[[route]]
prefix = "198.18.96.0/20"
via = "198.18.2.2"
[[route]]
prefix = "198.18.130.0/24"
via = "198.18.3.2"
"""
ON_LO_NEW = """\
routes = "table.txt"
[[route]]
prefix = "198.18.130.0/24"
via = "198.18.3.2"
"""


def test_instance_router_reload_without_sync_applies_routes(tmp_path, monkeypatch):
    (tmp_path / "table.txt").write_text("198.18.64.0/18 198.18.1.2\n198.18.129.0/24 blackhole\n")
    lo = Ports(["lo"], iface_macs(["lo"]))
    fake = RouterCtl()
    fake.apply(router.config_ops(tomllib.loads(ON_LO), lo, tmp_path))
    path = start(tmp_path, monkeypatch, "router", ON_LO, fake)
    assert instance.reload(str(path)) == 0
    (tmp_path / "config.toml").write_text(ON_LO_NEW)
    assert instance.reload(str(path)) > 0 and len(fake.applied) == 2
    fresh = RouterCtl()
    fresh.apply(router.config_ops(tomllib.loads(ON_LO_NEW), lo, tmp_path))
    assert routes_of(fake) == routes_of(fresh) and "198.18.129.0/24" in routes_of(fake)
    (tmp_path / "config.toml").write_text('sync = "kernel"\n' + ON_LO_NEW)
    with pytest.raises(VelozError, match="sync"):
        instance.reload(str(path))
    assert len(fake.applied) == 2
