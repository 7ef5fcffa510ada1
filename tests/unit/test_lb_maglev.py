# SPDX-License-Identifier: BSD-2-Clause
"""The load balancer's control plane (python/veloz/control/lb.py): Maglev's
properties, the config file's objects and errors, and the `veloz ctl`
commands against an in-memory stand-in for a running NF's maps."""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from veloz.cli import ctl_lb
from veloz.control import lb
from veloz.control.client import MapInfo
from veloz.control.objects import Ports
from veloz.control.ops import Op
from veloz.core.errors import VelozError

M = lb.RING_SIZE


def names(n: int, base: str = "198.18.1.") -> list[bytes]:
    return [lb.Backend(ipaddress.ip_address(f"{base}{i + 1}")).name for i in range(n)]


def owners(backends: list[tuple[bytes, int]]) -> list[bytes]:
    """The Maglev table as backend names, whatever order they were given in."""
    return [backends[i][0] for i in lb.maglev_table(backends)]


# ---- Maglev ------------------------------------------------------------------


def test_table_is_full_and_deterministic():
    backends = [(n, 1) for n in names(7)]
    table = lb.maglev_table(backends)
    assert len(table) == M
    assert set(table) == set(range(7))
    assert lb.maglev_table(backends) == table


def test_table_ignores_the_order_backends_come_in():
    backends = [(n, w) for n, w in zip(names(9), [1, 2, 3] * 3, strict=True)]
    shuffled = backends[:]
    random.Random(6).shuffle(shuffled)
    assert owners(shuffled) == owners(backends)


def test_table_is_stable_across_interpreters():
    """No use of Python's randomized hash(): another process, another seed."""
    code = (
        "import hashlib, ipaddress; from veloz.control import lb;"
        "b = [(lb.Backend(ipaddress.ip_address(f'198.18.1.{i}')).name, i) for i in range(1, 6)];"
        "print(hashlib.sha256(str(lb.maglev_table(b)).encode()).hexdigest())"
    )
    digests = set()
    for seed in ("1", "2"):
        env = os.environ | {"PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        digests.add(done.stdout.strip())
    assert len(digests) == 1


def test_equal_weights_give_equal_shares():
    for n in (1, 2, 3, 10, 64):
        counts = Counter(lb.maglev_table([(x, 1) for x in names(n)]))
        assert max(counts.values()) - min(counts.values()) <= 1, (n, counts)


@pytest.mark.parametrize("weights", [[1, 2], [1, 2, 3], [5, 1, 1, 1], [1, 1000], [3, 3, 7]])
def test_weights_give_proportional_shares(weights: list[int]):
    table = lb.maglev_table([(x, w) for x, w in zip(names(len(weights)), weights, strict=True)])
    counts = Counter(table)
    for i, w in enumerate(weights):
        assert abs(counts[i] - M * w / sum(weights)) <= 2, (weights, counts)


@pytest.mark.parametrize("n", [2, 5, 10, 50])
def test_removing_one_of_n_moves_about_one_nth(n: int):
    backends = [(x, 1) for x in names(n)]
    before = owners(backends)
    for removed in range(0, n, max(1, n // 5)):
        after = owners(backends[:removed] + backends[removed + 1 :])
        gone = backends[removed][0]
        assert gone not in after
        changed = sum(a != b for a, b in zip(before, after, strict=True))
        between = sum(a != b and a != gone for a, b in zip(before, after, strict=True))
        # every slot of the removed backend moves; the survivors' barely do
        assert before.count(gone) <= changed <= before.count(gone) + 0.01 * M
        assert between <= 0.01 * M, (n, removed, between)
        assert abs(changed / M - 1 / n) <= 0.01 + 1 / M


def test_adding_one_moves_slots_mostly_to_it():
    backends = [(x, 1) for x in names(11)]
    before = owners(backends[:10])
    after = owners(backends)
    new = backends[10][0]
    moved = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    to_new = sum(b == new for _, b in moved)
    assert abs(to_new - M / 11) <= 1
    assert len(moved) - to_new <= 0.01 * M


def test_weight_change_moves_only_a_share():
    backends = [(x, 1) for x in names(4)]
    before = owners(backends)
    after = owners([backends[0], backends[1], backends[2], (backends[3][0], 2)])
    changed = sum(a != b for a, b in zip(before, after, strict=True))
    # backend 3 goes from 1/4 to 2/5 of the table
    assert changed <= (2 / 5 - 1 / 4) * M + 0.01 * M


def test_empty_and_bad_input():
    assert lb.maglev_table([]) == [-1] * M
    with pytest.raises(ValueError):
        lb.maglev_table([(b"a", 1), (b"a", 2)])
    with pytest.raises(ValueError):
        lb.maglev_table([(b"a", 0)])


def test_small_prime_table():
    table = lb.maglev_table([(b"a", 1), (b"b", 1), (b"c", 2)], size=13)
    assert sorted(Counter(table).values()) in ([3, 3, 7], [3, 4, 6], [4, 3, 6])
    assert -1 not in table


# ---- the flow hash: same words as nf/lb.c ---------------------------------------


def test_flow_key_layout():
    key = lb.flow_key(
        ipaddress.ip_address("198.18.2.1"), ipaddress.ip_address("198.18.100.1"), 40000, 80, 6
    )
    assert len(key) == 40
    assert key[:4] == bytes([198, 18, 2, 1]) and key[4:16] == bytes(12)
    assert key[32:34] == (40000).to_bytes(2, "big") and key[34:36] == (80).to_bytes(2, "big")
    assert key[36:] == bytes([6, 4, 0, 0])
    with pytest.raises(ValueError):
        lb.flow_key(ipaddress.ip_address("198.18.2.1"), ipaddress.ip_address("fd00::1"), 1, 2, 6)


def test_flow_hash_spreads_and_depends_on_every_field():
    src, dst = ipaddress.ip_address("198.18.2.1"), ipaddress.ip_address("198.18.100.1")
    base = lb.flow_hash(lb.flow_key(src, dst, 40000, 80, 6))
    assert base != lb.flow_hash(lb.flow_key(src + 1, dst, 40000, 80, 6))
    assert base != lb.flow_hash(lb.flow_key(src, dst + 1, 40000, 80, 6))
    assert base != lb.flow_hash(lb.flow_key(src, dst, 40001, 80, 6))
    assert base != lb.flow_hash(lb.flow_key(src, dst, 40000, 81, 6))
    assert base != lb.flow_hash(lb.flow_key(src, dst, 40000, 80, 17))
    slots = Counter(lb.flow_slot(lb.flow_key(src, dst, p, 80, 6)) % 8 for p in range(8000))
    assert min(slots.values()) > 800


def test_flow_hash_is_the_one_runs_used_before():
    """Known answers of jhash2 over the ten words, seeded as nf/lb.c seeds it:
    the C code (include/veloz/jhash.h) gives what the Python copy it replaced
    gave, so pinned flows and rings keep their backends."""
    assert lb.flow_hash(bytes(40)) == 0x332443FA
    assert lb.flow_hash(bytes(range(40))) == 0xD32A6C48
    assert lb.flow_hash(bytes(range(200, 240))) == 0x6CB1E5ED
    with pytest.raises(ValueError, match="40 bytes"):
        lb.flow_hash(bytes(39))


def test_maglev_table_is_the_one_runs_installed_before():
    """A digest of the table the builder gave before it moved to maglev.py."""
    backends = [(lb.Backend(ipaddress.ip_address(f"198.18.1.{i}")).name, i) for i in range(1, 6)]
    backends.append((lb.Backend(ipaddress.ip_address("fd00::7")).name, 2))
    digest = hashlib.sha256(str(lb.maglev_table(backends)).encode()).hexdigest()
    assert digest == "fa74fe1269ed56d12ccd78610b4b5abfa53b2f458ffc293901d37dae7bbf8415"


# ---- config files -------------------------------------------------------------------

LB = {"source4": "198.18.0.1", "source6": "fd00:198:18::1", "next_hop_mac": "02:00:00:00:00:fe"}


def vip(**kw: object) -> dict:
    return {"address": "198.18.100.1", "port": 80, "proto": "tcp"} | kw


def config(*vips: dict, lb_table: dict | None = None) -> dict:
    return {"lb": LB if lb_table is None else lb_table, "vip": list(vips)}


def by_map(ops: list[Op]) -> dict[str, list[Op]]:
    out: dict[str, list[Op]] = {}
    for op in ops:
        out.setdefault(op.map, []).append(op)
    return out


def test_config_ops():
    ops = lb.config_ops(
        config(
            vip(backends=["198.18.1.10", "198.18.1.11:weight=2", {"address": "fd00::12"}]),
            vip(address="fd00:198:18:100::1", port=53, proto="udp"),
        ),
        Ports(),
        Path("."),
    )
    assert all(op.verb == "update" for op in ops)
    maps = by_map(ops)
    own = lb.Self.unpack(maps[lb.SELF][0].value)
    assert own.mac == Ports().mac(0) == bytes.fromhex("020000000001")
    assert own.next_hop_mac == bytes.fromhex("0200000000fe")
    assert own.source4 == bytes([198, 18, 0, 1])
    assert own.source6 == ipaddress.ip_address("fd00:198:18::1").packed

    keys = [lb.Vip.unpack(op.key) for op in maps[lb.VIPS]]
    assert [str(k) for k in keys] == ["198.18.100.1:80/tcp", "[fd00:198:18:100::1]:53/udp"]
    assert [lb.VIP_VALUE.unpack(op.value)[0] for op in maps[lb.VIPS]] == [0, 1]
    assert maps[lb.VIPS][0].key == bytes([198, 18, 100, 1]) + bytes(12) + b"\x00\x50\x06\x04"

    backends = {
        int.from_bytes(op.key, "little"): lb.Backend.unpack(op.value) for op in maps[lb.BACKENDS]
    }
    assert sorted(backends) == [1, 2, 3]
    assert [(str(b.address), b.weight, b.vip, b.valid) for b in backends.values()] == [
        ("198.18.1.10", 1, 0, True),
        ("198.18.1.11", 2, 0, True),
        ("fd00::12", 1, 0, True),
    ]
    # the whole ring of VIP 0, nothing for the backend-less VIP 1
    ring = {
        int.from_bytes(op.key, "little"): int.from_bytes(op.value, "little") for op in maps[lb.RING]
    }
    assert sorted(ring) == list(range(M))
    shares = Counter(ring.values())
    assert abs(shares[2] - M / 2) <= 2 and abs(shares[1] - M / 4) <= 2
    expected = lb.ring_ids(backends)
    assert [ring[s] for s in range(M)] == expected
    # the ring names a backend only once the backend entry is written
    first_ring = ops.index(maps[lb.RING][0])
    assert all(ops.index(op) < first_ring for op in maps[lb.BACKENDS])


def test_config_without_vips_or_lb():
    assert lb.config_ops({}, Ports(), Path(".")) == []
    ops = lb.config_ops({"lb": LB}, Ports(), Path("."))
    assert [op.map for op in ops] == [lb.SELF]
    ops = lb.config_ops({"lb": LB | {"mac": "02:aa:00:00:00:01"}}, Ports(), Path("."))
    assert lb.Self.unpack(ops[0].value).mac == bytes.fromhex("02aa00000001")
    ops = lb.config_ops({"lb": LB}, Ports(["eth0"], [bytes.fromhex("020000c0ffee")]), Path("."))
    assert lb.Self.unpack(ops[0].value).mac == bytes.fromhex("020000c0ffee")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (config(vip(address="198.18.100")), "bad VIP address '198.18.100'"),
        (config(vip(port=0)), "VIP port must be between 1 and 65535, not 0"),
        (config(vip(port=65536)), "VIP port must be between 1 and 65535, not 65536"),
        (config(vip(port="http")), "VIP port must be a whole number, not 'http'"),
        (config(vip(port=True)), "VIP port must be a whole number"),
        (config(vip(proto="icmp")), "bad protocol 'icmp': expected tcp or udp"),
        (config(vip(colour="red")), "config: vip 1 has no key 'colour'"),
        (config({"address": "198.18.100.1", "port": 80}), "config: vip 1 needs 'proto'"),
        (config(vip(), vip()), "VIP 198.18.100.1:80/tcp exists already"),
        (config(vip(backends="198.18.1.1")), "backends must be a list"),
        (config(vip(backends=["198.18.1.300"])), "bad vip 198.18.100.1:80/tcp backend address"),
        (config(vip(backends=["198.18.1.1:weight=0"])), "weight must be between 1 and 65535"),
        (config(vip(backends=["198.18.1.1:weight=x"])), "weight must be a whole number"),
        (config(vip(backends=[{"address": "198.18.1.1", "w": 2}])), "address and weight"),
        (config(vip(backends=[7])), "a backend is an address string or a table"),
        (
            config(vip(backends=["198.18.1.1", "198.18.1.1:weight=2"])),
            "198.18.1.1 is a backend of 198.18.100.1:80/tcp already",
        ),
        ({"vip": [vip()]}, "VIPs need an [lb] table"),
        ({"vip": vip(), "lb": LB}, "[[vip]] must be a list of tables"),
        ({"lb": "x"}, "[lb] must be a table"),
        ({"lb": LB | {"source": "1.2.3.4"}}, "[lb] has no key 'source'"),
        ({"lb": LB | {"source4": "fd00::1"}}, "[lb] source4 must be an IPv4 address"),
        ({"lb": LB | {"source6": "198.18.0.1"}}, "[lb] source6 must be an IPv6 address"),
        ({"lb": LB | {"next_hop_mac": "02:00"}}, "bad MAC address '02:00'"),
        (
            config(
                vip(backends=["198.18.1.1"]),
                lb_table={"source6": "fd00::1", "next_hop_mac": "02:00:00:00:00:01"},
            ),
            "needs an outer IPv4 source: set [lb] source4",
        ),
        (
            config(
                vip(backends=["fd00::1"]),
                lb_table={"source4": "198.18.0.1", "next_hop_mac": "02:00:00:00:00:01"},
            ),
            "set [lb] source6",
        ),
        (
            config(vip(backends=["198.18.1.1"]), lb_table={"source4": "198.18.0.1"}),
            "backends need [lb] next_hop_mac",
        ),
        (
            config(*[vip(port=p) for p in range(1, lb.MAX_VIPS + 2)]),
            "the VIP table is full (64 VIPs)",
        ),
        (
            config(
                *[
                    vip(port=p, backends=[f"fd00:198:18:{p}::{i + 1:x}" for i in range(1000)])
                    for p in range(1, 6)
                ]
            ),
            "the backend table is full (4095 backends)",
        ),
    ],
)
def test_config_errors(values: dict, message: str):
    with pytest.raises(VelozError) as err:
        lb.config_ops(values, Ports(), Path("."))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_backend_strings():
    b = lb.parse_backend("fd00:198:18:1::10:weight=3")
    assert (str(b.address), b.weight) == ("fd00:198:18:1::10", 3)
    b = lb.parse_backend("fd00:198:18:1::10")
    assert (str(b.address), b.weight) == ("fd00:198:18:1::10", 1)
    b = lb.parse_backend({"address": "198.18.1.1", "weight": 65535})
    assert b.weight == 65535
    # found by tests/fuzz/fuzz_py_config.py: these failed an assert in the parser
    for text in ("", "198.18.1.1\n2", "\n:weight=2"):
        with pytest.raises(VelozError, match="bad backend address"):
            lb.parse_backend(text)


# ---- `veloz ctl` against maps in memory -------------------------------------------


class FakeCtl:
    """The maps of a running lb and the requests lb.py makes of them."""

    def __init__(self, copies: int = 2) -> None:
        self.maps_: dict[str, dict[bytes, bytes]] = {
            lb.VIPS: {},
            lb.BACKENDS: {},
            lb.SELF: {},
            lb.RING: {},
            lb.VIP_STATS: {},
            lb.BACKEND_STATS: {},
            lb.COUNTERS: {},
        }
        self.copies = copies
        self.applied: list[list[Op]] = []

    def info(self) -> tuple[str, str]:
        return "lb", "native"

    def ports(self) -> list[str]:
        return ["vz-fake0"]  # no health status file beside it

    def peer_pid(self) -> int:
        return os.getpid()

    def maps(self) -> dict[str, MapInfo]:
        return {
            lb.VIP_STATS: MapInfo(lb.VIP_STATS, 6, 4, 16, lb.MAX_VIPS, self.copies),
            lb.BACKEND_STATS: MapInfo(lb.BACKEND_STATS, 6, 4, 16, lb.MAX_BACKENDS, self.copies),
            lb.COUNTERS: MapInfo(lb.COUNTERS, 6, 4, 8, len(lb.COUNTER_NAMES), self.copies),
        }

    def dump(self, name: str) -> list[tuple[bytes, bytes]]:
        return sorted(self.maps_[name].items())

    def lookup(self, name: str, key: bytes) -> bytes | None:
        return self.maps_[name].get(key)

    def requests(self, lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            verb, name, key = line.split()
            assert verb == "lookup" and name == lb.RING
            out.append("ok " + self.maps_[name].get(bytes.fromhex(key), bytes(4)).hex())
        return out

    def apply(self, ops: list[Op]) -> int:
        ops = list(ops)
        for op in ops:
            if op.verb == "delete":
                del self.maps_[op.map][op.key]
            else:
                self.maps_[op.map][op.key] = op.value
        self.applied.append(ops)
        return len(ops)

    def ring(self, index: int) -> list[int]:
        base = index * M
        table = self.maps_[lb.RING]
        return [int.from_bytes(table.get(lb.u32(base + s), bytes(4)), "little") for s in range(M)]


def ctl_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="veloz ctl")
    ctl_lb.add_ctl_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def run(ctl: FakeCtl, *argv: str) -> int:
    args = ctl_parser().parse_args(argv)
    return args.func(args, ctl)


@pytest.fixture
def ctl() -> FakeCtl:
    fake = FakeCtl()
    fake.apply(lb.config_ops({"lb": LB}, Ports(), Path(".")))
    fake.applied.clear()
    return fake


def test_ctl_vip_and_backends(ctl: FakeCtl, capsys: pytest.CaptureFixture[str]):
    run(ctl, "vip", "add", "198.18.100.1", "80", "tcp", "-b", "198.18.1.1", "-b", "198.18.1.2")
    assert len(ctl.applied) == 1
    state = lb.State.read(ctl)  # type: ignore[arg-type]
    vip = lb.parse_vip("198.18.100.1", 80, "tcp")
    assert state.vips == {vip: 0}
    members = state.members(0)
    assert sorted(str(b.address) for b in members.values()) == ["198.18.1.1", "198.18.1.2"]
    assert ctl.ring(0) == lb.ring_ids(members)

    # adding a third backend sends only the slots that move to it
    before = ctl.ring(0)
    run(ctl, "backend", "add", "198.18.100.1", "80", "tcp", "198.18.1.3", "--weight", "2")
    ops = ctl.applied[-1]
    assert ops[0].map == lb.BACKENDS
    new_id = int.from_bytes(ops[0].key, "little")
    after = ctl.ring(0)
    moved = [s for s in range(M) if before[s] != after[s]]
    assert len(ops) == 1 + len(moved)
    to_new = [s for s in moved if after[s] == new_id]
    assert abs(len(to_new) - M / 2) <= 2  # weight 2 of 4
    assert len(moved) - len(to_new) <= 0.01 * M  # Maglev's small disruption

    # removing one: its slots move, the ring first, then its tombstone
    before = after
    victim = next(i for i, b in members.items() if str(b.address) == "198.18.1.1")
    run(ctl, "backend", "del", "198.18.100.1", "80", "tcp", "198.18.1.1")
    ops = ctl.applied[-1]
    assert ops[-1].map == lb.BACKENDS and int.from_bytes(ops[-1].key, "little") == victim
    tomb = lb.Backend.unpack(ops[-1].value)
    assert tomb is not None and not tomb.valid and str(tomb.address) == "198.18.1.1"
    assert all(op.map == lb.RING for op in ops[:-1])
    after = ctl.ring(0)
    assert victim not in after
    changed = {s for s in range(M) if before[s] != after[s]}
    assert {s for s in range(M) if before[s] == victim} <= changed
    assert len(changed) - before.count(victim) <= 0.01 * M
    assert len(ops) - 1 == len(changed)

    capsys.readouterr()
    run(ctl, "vip", "list", "--json")
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["vip"] == "198.18.100.1:80/tcp"
    assert [(b["address"], b["weight"]) for b in rows[0]["backends"]] == [
        ("198.18.1.2", 1),
        ("198.18.1.3", 2),
    ]

    # a new backend takes a never-used id before the tombstone
    run(ctl, "backend", "add", "198.18.100.1", "80", "tcp", "198.18.1.4")
    assert int.from_bytes(ctl.applied[-1][0].key, "little") == 4


def test_ctl_vip_del_invalidates_its_backends(ctl: FakeCtl):
    run(ctl, "vip", "add", "fd00::1", "443", "tcp", "-b", "fd00::10", "-b", "198.18.1.1")
    run(ctl, "vip", "add", "198.18.100.2", "53", "udp", "-b", "198.18.1.1")
    run(ctl, "vip", "del", "fd00::1", "443", "tcp")
    ops = ctl.applied[-1]
    assert ops[0].verb == "delete" and ops[0].map == lb.VIPS
    state = lb.State.read(ctl)  # type: ignore[arg-type]
    assert [str(v) for v in state.vips] == ["198.18.100.2:53/udp"]
    assert [b.valid for _, b in sorted(state.backends.items())] == [False, False, True]
    # the freed index is reused; its old ring row is compared, not assumed empty
    run(ctl, "vip", "add", "fd00::2", "80", "udp", "-b", "fd00::20")
    state = lb.State.read(ctl)  # type: ignore[arg-type]
    assert state.index(lb.parse_vip("fd00::2", 80, "udp")) == 0
    assert set(ctl.ring(0)) == {4}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["vip", "add", "198.18.100.1", "80", "tcp"], "VIP 198.18.100.1:80/tcp exists already"),
        (["vip", "add", "198.18.100.9", "99999", "tcp"], "VIP port must be between 1 and 65535"),
        (["vip", "add", "198.18.100.9", "80", "sctp"], "bad protocol 'sctp'"),
        (["vip", "add", "198.18.100.9", "80", "tcp", "-b", "nope"], "bad backend address 'nope'"),
        (["vip", "del", "198.18.100.9", "80", "tcp"], "unknown VIP 198.18.100.9:80/tcp"),
        (["backend", "add", "198.18.100.9", "80", "tcp", "198.18.1.5"], "unknown VIP"),
        (["backend", "add", "198.18.100.1", "80", "tcp", "198.18.1.1"], "is a backend of"),
        (["backend", "add", "198.18.100.1", "80", "tcp", "198.18.1.5", "-w", "0"], "weight"),
        (["backend", "del", "198.18.100.1", "80", "tcp", "198.18.1.9"], "is not a backend of"),
        (["backend", "del", "198.18.100.1", "80", "tcp", "198.18.1"], "bad backend address"),
        (["lb", "set"], "give at least one of"),
        (["lb", "set", "--source4", "fd00::1"], "must be an IPv4 address"),
    ],
)
def test_ctl_errors_change_nothing(ctl: FakeCtl, argv: list[str], message: str):
    run(ctl, "vip", "add", "198.18.100.1", "80", "tcp", "-b", "198.18.1.1")
    snapshot = {name: dict(m) for name, m in ctl.maps_.items()}
    applied = len(ctl.applied)
    with pytest.raises(VelozError) as err:
        run(ctl, *argv)
    assert message in str(err.value)
    assert len(ctl.applied) == applied
    assert ctl.maps_ == snapshot


def test_ctl_backend_needs_a_source(capsys: pytest.CaptureFixture[str]):
    fake = FakeCtl()
    fake.apply(
        lb.config_ops(
            {"lb": {"source4": "198.18.0.1", "next_hop_mac": LB["next_hop_mac"]}},
            Ports(),
            Path("."),
        )
    )
    run(fake, "vip", "add", "fd00::1", "80", "tcp")
    with pytest.raises(VelozError, match="set \\[lb\\] source6"):
        run(fake, "backend", "add", "fd00::1", "80", "tcp", "fd00::10")
    run(fake, "lb", "set", "--source6", "fd00::ff")
    run(fake, "backend", "add", "fd00::1", "80", "tcp", "fd00::10")
    own = lb.Self.unpack(fake.maps_[lb.SELF][lb.u32(0)])
    assert own.source4 == bytes([198, 18, 0, 1])  # untouched by lb set
    assert own.source6 == ipaddress.ip_address("fd00::ff").packed


def test_ctl_too_many_vips(ctl: FakeCtl):
    for port in range(1, lb.MAX_VIPS + 1):
        run(ctl, "vip", "add", "198.18.100.1", str(port), "udp")
    with pytest.raises(VelozError, match="the VIP table is full"):
        run(ctl, "vip", "add", "198.18.100.1", "9999", "udp")


def test_ctl_lb_stats_sums_copies(ctl: FakeCtl, capsys: pytest.CaptureFixture[str]):
    run(ctl, "vip", "add", "198.18.100.1", "80", "tcp", "-b", "198.18.1.1", "-b", "198.18.1.2")
    ctl.maps_[lb.VIP_STATS][lb.u32(0)] = lb.STAT.pack(3, 300) + lb.STAT.pack(4, 400)
    ctl.maps_[lb.BACKEND_STATS][lb.u32(1)] = lb.STAT.pack(1, 100) + lb.STAT.pack(2, 200)
    ctl.maps_[lb.COUNTERS][lb.u32(0)] = (5).to_bytes(8, "little") + (6).to_bytes(8, "little")
    ctl.maps_[lb.COUNTERS][lb.u32(6)] = (1).to_bytes(8, "little") + (2).to_bytes(8, "little")
    capsys.readouterr()
    run(ctl, "lb-stats", "--json")
    result = json.loads(capsys.readouterr().out)
    assert result["counters"]["malformed"] == 11 and result["counters"]["ring"] == 3
    assert result["counters"]["fragment"] == 0
    (vip,) = result["vips"]
    assert (vip["vip"], vip["packets"], vip["bytes"]) == ("198.18.100.1:80/tcp", 7, 700)
    assert [(b["address"], b["packets"], b["bytes"]) for b in vip["backends"]] == [
        ("198.18.1.1", 3, 300),
        ("198.18.1.2", 0, 0),
    ]
    run(ctl, "lb-stats")
    text = capsys.readouterr().out
    assert "198.18.100.1:80/tcp" in text and "malformed" in text


def test_ctl_refuses_another_nf():
    fake = FakeCtl()
    fake.info = lambda: ("router", "xdp")  # type: ignore[method-assign]
    with pytest.raises(VelozError, match="the running NF is router, not lb"):
        run(fake, "vip", "list")
