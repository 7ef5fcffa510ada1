# SPDX-License-Identifier: BSD-2-Clause
"""The router's DIR-24-8 update path without a kernel: `veloz ctl route
add|del|load` run against a model of the running NF's maps (the control
socket's verbs, as src/ctl/ctl_session.c answers them), and after every change
the DIR-24-8 table must answer every address as the LPM trie does; after a
random history of adds, replacements and deletes it must equal the table
built from scratch for the routes that remain, with no group leaked."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import numpy as np
import pytest

from veloz.control import dir24, router
from veloz.control.client import CtlError
from veloz.control.ops import Op
from veloz.core.errors import VelozError

VIAS = ["10.255.0.1", "10.255.0.2", "10.255.0.3"]


class FakeCtl:
    """The maps a running router holds, behind the control socket's verbs."""

    def __init__(self) -> None:
        self.tbl24 = np.zeros(dir24.SLOTS24, np.uint32)
        self.tbl8 = np.zeros(dir24.GROUPS * 256, np.uint32)
        self.owner = np.zeros(dir24.GROUPS, np.uint32)
        self.trie: dict[tuple[int, bytes], bytes] = {}  # (length, addr) -> value
        self.nexthops: dict[bytes, bytes] = {}
        self.applied: list[list[Op]] = []

    def _array(self, name: str) -> np.ndarray:
        return {dir24.TBL24: self.tbl24, dir24.TBL8: self.tbl8, dir24.OWNER: self.owner}[name]

    def ports(self) -> list[str]:
        return ["", ""]

    def request(self, line: str) -> str:
        verb, name, key, count = line.split()
        assert verb == "read"
        first = int.from_bytes(bytes.fromhex(key), "little")
        return self._array(name)[first : first + int(count)].astype("<u4").tobytes().hex()

    def requests(self, lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            verb, name, key = line.split()
            assert verb == "holds" and name == router.ROUTES[4]
            raw = bytes.fromhex(key)
            out.append(f"ok {int((int.from_bytes(raw[:4], 'little'), raw[4:]) in self.trie)}")
        return out

    def lookup(self, name: str, key: bytes) -> bytes | None:
        """As the kernel's LPM trie: the longest prefix covering the key."""
        assert name == router.ROUTES[4]
        length, addr = int.from_bytes(key[:4], "little"), int.from_bytes(key[4:], "big")
        for n in range(length, -1, -1):
            net = (addr & ~((1 << (32 - n)) - 1) & 0xFFFFFFFF).to_bytes(4, "big")
            if (n, net) in self.trie:
                return self.trie[(n, net)]
        return None

    def dump(self, name: str) -> list[tuple[bytes, bytes]]:
        assert name == router.NEXTHOPS
        return list(self.nexthops.items())

    def apply(self, ops) -> int:
        ops = list(ops)
        for op in ops:
            if op.map == router.ROUTES[4]:
                key = (int.from_bytes(op.key[:4], "little"), op.key[4:])
                if op.verb == "delete":
                    if key not in self.trie:
                        raise CtlError("delete router_routes4: no such entry")
                    del self.trie[key]
                else:
                    self.trie[key] = op.value
            elif op.map == router.NEXTHOPS:
                self.nexthops[op.key] = op.value
            else:
                first = int.from_bytes(op.key, "little")
                value = int.from_bytes(op.value, "little")
                self._array(op.map)[first : first + (op.count or 1)] = value
        self.applied.append(ops)
        return len(ops)

    # ---- what the NF would answer ----

    def dir24_lookup(self, addrs: np.ndarray) -> np.ndarray:
        """nf/router.c's dir24_lookup over many addresses: entries, 0 for none."""
        e = self.tbl24[addrs >> 8]
        group = (e & dir24.GROUP) != 0
        e = np.where(group, self.tbl8[((e & dir24.INDEX_MASK) << 8 | (addrs & 0xFF)) * group], e)
        return np.where((e & dir24.ROUTE) != 0, e & 0x00FFFFFF, 0)  # kind, next hop

    def trie_lookup(self, addr: int) -> int:
        raw = self.lookup(router.ROUTES[4], (32).to_bytes(4, "little") + addr.to_bytes(4, "big"))
        if raw is None:
            return 0
        kind, slot = router.ROUTE.unpack(raw)
        return kind << 16 | slot


def add(ctl: FakeCtl, prefix: str, via: str | None, kind: str | None = None) -> None:
    args = argparse.Namespace(prefix=prefix, kind=kind, via=via, port="1")
    router.ctl_route_add(args, ctl)  # type: ignore[arg-type]


def delete(ctl: FakeCtl, prefix: str) -> None:
    router.ctl_route_del(argparse.Namespace(prefix=prefix), ctl)  # type: ignore[arg-type]


def check_same_answers(ctl: FakeCtl, rng: random.Random, extra: list[int]) -> None:
    addrs = [rng.getrandbits(32) for _ in range(300)]
    addrs += [0x0A000000 | rng.getrandbits(20) for _ in range(1500)] + extra
    got = ctl.dir24_lookup(np.array(addrs, np.uint32)).tolist()
    want = [ctl.trie_lookup(a) for a in addrs]
    bad = [(f"{a:08x}", g, w) for a, g, w in zip(addrs, got, want, strict=True) if g != w]
    assert not bad, bad[:5]


def random_prefix(rng: random.Random) -> tuple[int, int]:
    """Clustered in 10.0.0.0/12 so prefixes nest and share /24s; some short."""
    length = rng.choice([0, 4, 8, 12, 14, 16, 18, 20, 22, 23, 24, 24, 24, 25, 26, 28, 30, 32])
    addr = (0x0A000000 | rng.getrandbits(20)) if length >= 12 else rng.getrandbits(32)
    return addr & ~((1 << (32 - length)) - 1) & 0xFFFFFFFF, length


def text(addr: int, length: int) -> str:
    return f"{addr >> 24}.{addr >> 16 & 255}.{addr >> 8 & 255}.{addr & 255}/{length}"


def canonical(tbl24: np.ndarray, tbl8: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """Entries of the /24s in slots, 256 each, groups resolved."""
    out = []
    for i in slots.tolist():
        e = int(tbl24[i])
        if e & dir24.GROUP:
            g = e & dir24.INDEX_MASK
            out.append(tbl8[g * 256 : (g + 1) * 256])
        else:
            out.append(np.full(256, e, np.uint32))
    return np.concatenate(out) if out else np.zeros(0, np.uint32)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_live_changes_keep_dir24_equal_to_the_trie(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    ctl = FakeCtl()
    routes: dict[tuple[int, int], str] = {}
    lines = []
    while len(routes) < 400:
        p = random_prefix(rng)
        routes[p] = rng.choice(VIAS)
        lines.append(f"{text(*p)} {routes[p]} 1")
    table = tmp_path / "t.routes"
    table.write_text("\n".join(lines) + "\n")
    router.ctl_route_load(argparse.Namespace(file=str(table)), ctl)  # type: ignore[arg-type]
    check_same_answers(ctl, rng, [a for a, _ in routes])
    for step in range(250):
        action = rng.random()
        if action < 0.4 and routes:  # delete, often a prefix others nest in
            p = rng.choice(sorted(routes))
            delete(ctl, text(*p))
            del routes[p]
        elif action < 0.6 and routes:  # replace: another next hop or kind
            p = rng.choice(sorted(routes))
            if rng.random() < 0.5:
                routes[p] = rng.choice(VIAS)
                add(ctl, text(*p), routes[p])
            else:
                routes[p] = "blackhole"
                add(ctl, text(*p), None, "blackhole")
        else:
            p = random_prefix(rng)
            routes[p] = rng.choice(VIAS)
            add(ctl, text(*p), routes[p])
        if step % 25 == 0:
            check_same_answers(ctl, rng, [a | rng.getrandbits(32 - n) for a, n in routes][:200])
    check_same_answers(ctl, rng, [a for a, _ in routes])

    # the table after all that equals one built from scratch for what is left
    fresh = FakeCtl()
    fresh.nexthops = dict(ctl.nexthops)
    fresh.trie = dict(ctl.trie)
    scratch = dir24.Table()
    for (length, net), value in ctl.trie.items():
        kind, slot = router.ROUTE.unpack(value)
        scratch.add(int.from_bytes(net, "big"), length, dir24.entry(kind, slot, length))
    fresh.apply(scratch.ops())
    differ = np.flatnonzero(ctl.tbl24 != fresh.tbl24)
    grouped = np.flatnonzero(((ctl.tbl24 | fresh.tbl24) & dir24.GROUP) != 0)
    assert set(differ.tolist()) <= set(grouped.tolist())
    assert np.array_equal(canonical(ctl.tbl24, ctl.tbl8, grouped),
                          canonical(fresh.tbl24, fresh.tbl8, grouped))  # fmt: skip
    # no group leaked or shared: each owner points back at its /24
    used = np.flatnonzero(ctl.owner)
    pointers = ctl.tbl24[(ctl.tbl24 & dir24.GROUP) != 0] & dir24.INDEX_MASK
    assert sorted(pointers.tolist()) == used.tolist()
    assert all(ctl.tbl24[int(ctl.owner[g]) - 1] == dir24.GROUP | g for g in used.tolist())


def test_a_new_group_is_filled_before_it_is_published():
    ctl = FakeCtl()
    add(ctl, "10.1.2.0/24", VIAS[0])
    add(ctl, "10.1.2.128/25", VIAS[1])
    ops = ctl.applied[-1]
    pointer = next(i for i, op in enumerate(ops) if op.map == dir24.TBL24)
    assert pointer == len(ops) - 1  # the /24 entry is the last write
    assert {op.map for op in ops[:pointer]} >= {dir24.TBL8, dir24.OWNER}
    # deleting the /25 folds the group back: the /24 entry first, then the free
    delete(ctl, "10.1.2.128/25")
    ops = ctl.applied[-1]
    names = [op.map for op in ops]
    assert names.index(dir24.TBL24) < names.index(dir24.OWNER)
    assert int.from_bytes(ops[-1].value, "little") == 0 and not ctl.owner.any()
    assert not (ctl.tbl24 & dir24.GROUP).any()


def test_a_table_full_of_groups_is_refused_and_changes_nothing(monkeypatch):
    monkeypatch.setattr(dir24, "GROUPS", 2)
    ctl = FakeCtl()
    add(ctl, "10.0.0.1/32", VIAS[0])
    add(ctl, "10.0.1.1/32", VIAS[0])
    trie = dict(ctl.trie)
    with pytest.raises(VelozError, match="no free group"):
        add(ctl, "10.0.2.1/32", VIAS[0])
    assert ctl.trie == trie


def test_the_default_route_and_its_deletion():
    ctl = FakeCtl()
    add(ctl, "0.0.0.0/0", VIAS[0])
    add(ctl, "10.0.0.0/8", VIAS[1])
    assert (ctl.tbl24 != 0).all()
    delete(ctl, "0.0.0.0/0")
    assert np.count_nonzero(ctl.tbl24) == 1 << 16
    delete(ctl, "10.0.0.0/8")
    assert not ctl.tbl24.any()
