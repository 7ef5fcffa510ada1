"""The router's DIR-24-8 table (include/veloz/abi.h, nf/router.c): its updates.

router_tbl24 has one u32 entry per /24; router_tbl8 holds 256-entry groups
for the /24s that carry longer prefixes; router_tbl8_owner says which /24
owns a group (0: free). A route entry carries the length of the prefix that
wrote it, so adding P/len rewrites the entries in P's range whose length is
at most len (controlled prefix expansion), and deleting P/len gives exactly
the entries of length len to the longest prefix that covers P.

Changes are computed on a model of the maps (numpy arrays, read from the
running NF only where a change lands) and written as runs (`fill`), in an
order that keeps every lookup right while they are applied: a new group is
filled before the /24 entry that points to it is written; a group folded back
into its /24 entry is freed only after that entry no longer points to it,
and a group freed in a transaction is not reused in the same one. Each entry
is written atomically, so any address sees its old route or its new one.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from veloz.control import abi
from veloz.control.ops import Op, update
from veloz.core.errors import VelozError

TBL24, TBL8, OWNER = "router_tbl24", "router_tbl8", "router_tbl8_owner"
CHUNK = 1 << 16  # entries per read request


class _Abi(abi.View):
    """The table's geometry and entry bits: router.bpf.o's maps and abi.h."""

    nf = "router"
    SLOTS24 = abi.max_entries(TBL24)
    GROUPS = abi.max_entries(OWNER)
    GROUP = abi.Lazy(lambda a: abi.define("VZ_DIR24_GROUP"))
    ROUTE = abi.Lazy(lambda a: abi.define("VZ_DIR24_ROUTE"))
    INDEX_MASK = abi.Lazy(lambda a: abi.define("VZ_DIR24_INDEX_MASK"))
    DEPTH_SHIFT = abi.Lazy(lambda a: abi.define("VZ_DIR24_DEPTH_SHIFT"))
    KIND_SHIFT = abi.Lazy(lambda a: abi.define("VZ_DIR24_KIND_SHIFT"))
    # the depth's bits: from its shift up to the ROUTE flag
    DEPTH_MASK = abi.Lazy(
        lambda a: (abi.define("VZ_DIR24_ROUTE") >> abi.define("VZ_DIR24_DEPTH_SHIFT")) - 1
    )


ABI = _Abi()
__getattr__ = ABI.module_getattr(__name__)


def entry(kind: int, nexthop: int, depth: int) -> int:
    return ABI.ROUTE | depth << ABI.DEPTH_SHIFT | kind << ABI.KIND_SHIFT | nexthop


def depth_of(values: np.ndarray) -> np.ndarray:
    """Prefix length of route entries; 0 for empty ones (any /0 may replace them)."""
    return (values >> ABI.DEPTH_SHIFT) & ABI.DEPTH_MASK


def _runs(index: np.ndarray, values: np.ndarray) -> Iterable[tuple[int, int, int]]:
    """(first, count, value) for runs of consecutive indices with equal values."""
    if index.size == 0:
        return []
    breaks = np.flatnonzero((np.diff(index) != 1) | (np.diff(values) != 0)) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [index.size]))
    return zip(index[starts].tolist(), (ends - starts).tolist(), values[starts].tolist(),
               strict=True)  # fmt: skip


def _nonzero_runs(values: np.ndarray) -> Iterable[tuple[int, int, int]]:
    """(first, count, value) for runs of equal non-zero entries: _runs() of the
    non-zero entries, without an index as long as the table. A default route
    makes all 2^24 entries of tbl24 non-zero, and that index and its diffs
    took over a second; the runs' edges take one pass."""
    if values.size == 0:
        return []
    starts = np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1))
    counts = np.diff(np.append(starts, values.size))
    firsts = values[starts]
    keep = firsts != 0
    return zip(starts[keep].tolist(), counts[keep].tolist(), firsts[keep].tolist(), strict=True)


def _fill(map_name: str, first: int, count: int, value: int) -> Op:
    return Op("fill", map_name, first.to_bytes(4, "little"), value.to_bytes(4, "little"), count)


class Table:
    """The DIR-24-8 maps as they are and as they will be after the changes.

    reader(map, first, count) returns the live entries (None: a new, empty
    table, as at start-up).
    """

    def __init__(self, reader=None) -> None:
        self.reader = reader
        self.tbl24 = np.zeros(ABI.SLOTS24, np.uint32)
        self.loaded = np.zeros(ABI.SLOTS24 // CHUNK, bool)
        self.old24: dict[int, np.ndarray] = {}  # chunk -> entries as read
        self.groups: dict[int, np.ndarray] = {}  # group -> entries now
        self.old_groups: dict[int, np.ndarray] = {}
        self.owner: np.ndarray | None = None
        self.old_owner: np.ndarray | None = None
        self.freed: set[int] = set()
        self.pending: list[tuple[int, int, int]] = []
        # what changes may have touched since the last commit: only these can
        # differ from the live maps, so only these are compared and copied
        self.touched24: set[int] = set()  # chunks
        self.touched_groups: set[int] = set()

    # ---- reading the live maps, lazily ----

    def _read(self, name: str, first: int, count: int) -> np.ndarray:
        if self.reader is None:
            return np.zeros(count, np.uint32)
        return np.frombuffer(self.reader(name, first, count), "<u4").astype(np.uint32)

    def _span(self, lo: int, hi: int) -> np.ndarray:
        for c in range(lo // CHUNK, (hi - 1) // CHUNK + 1):
            self.touched24.add(c)
            if not self.loaded[c]:
                self.tbl24[c * CHUNK : (c + 1) * CHUNK] = self._read(TBL24, c * CHUNK, CHUNK)
                self.old24[c] = self.tbl24[c * CHUNK : (c + 1) * CHUNK].copy()
                self.loaded[c] = True
        return self.tbl24[lo:hi]

    def _group(self, g: int) -> np.ndarray:
        self.touched_groups.add(g)
        if g not in self.groups:
            self.groups[g] = self._read(TBL8, g * 256, 256)
            self.old_groups[g] = self.groups[g].copy()
        return self.groups[g]

    def _owners(self) -> np.ndarray:
        if self.owner is None:
            self.owner = self._read(OWNER, 0, ABI.GROUPS)
            self.old_owner = self.owner.copy()
        return self.owner

    # ---- changes ----

    def add(self, addr: int, length: int, value: int) -> None:
        """Route addr/length (IPv4, host order) to entry value."""
        if self.reader is None:
            self.pending.append((length, addr, value))  # built at once in ops()
            return
        self._set(
            addr, length, value, lambda old: (old & ABI.ROUTE == 0) | (depth_of(old) <= length)
        )

    def delete(self, addr: int, length: int, replacement: int) -> None:
        """addr/length is gone; its entries go to replacement (0: no route)."""
        self._set(addr, length, replacement,
                  lambda old: (old & ABI.ROUTE != 0) & (depth_of(old) == length))  # fmt: skip

    def _set(self, addr: int, length: int, value: int, owned) -> None:
        if length <= 24:
            lo = addr >> 8
            span = self._span(lo, lo + (1 << (24 - length)))
            plain = span & ABI.GROUP == 0
            span[plain & owned(span)] = value
            for g in (span[~plain] & ABI.INDEX_MASK).tolist():
                group = self._group(g)
                group[owned(group)] = value
            return
        i = addr >> 8
        cur = int(self._span(i, i + 1)[0])
        lo, hi = addr & 0xFF, (addr & 0xFF) + (1 << (32 - length))
        if cur & ABI.GROUP:
            g = cur & ABI.INDEX_MASK
            group = self._group(g)
        else:
            if value & ABI.ROUTE == 0:
                return  # a delete where no longer prefix was: nothing to do
            g = self._allocate(i)
            group = self.groups[g]
            group[:] = cur
        part = group[lo:hi]
        part[owned(part)] = value
        first = int(group[0])
        if first & ABI.GROUP == 0 and (group == first).all() and int(depth_of(group[:1])[0]) <= 24:
            # nothing longer than /24 left: fold the group into its /24 entry
            self.tbl24[i] = first
            self._owners()[g] = 0
            self.freed.add(g)
        else:
            self.tbl24[i] = ABI.GROUP | g

    def _allocate(self, slot24: int) -> int:
        owner = self._owners()
        free = np.flatnonzero(owner == 0)
        free = free[~np.isin(free, list(self.freed))] if self.freed else free
        if free.size == 0:
            raise VelozError(f"the router's DIR-24-8 table has no free group ({ABI.GROUPS} /24s "
                             "hold prefixes longer than /24)")  # fmt: skip
        g = int(free[0])
        self.touched_groups.add(g)
        owner[g] = slot24 + 1
        self.groups[g] = np.zeros(256, np.uint32)
        self.old_groups[g] = np.full(256, 0xFFFFFFFF, np.uint32)  # write all of it
        return g

    def committed(self) -> None:
        """The ops were applied: the live maps are now what the model says, and
        the next changes start from it (a long-lived model reads each part of
        the live maps once, not once per transaction)."""
        assert self.reader is not None, "a model of live maps: a new table has no ops applied"
        for c in self.touched24:
            self.old24[c] = self.tbl24[c * CHUNK : (c + 1) * CHUNK].copy()
        for g in self.freed:
            self.groups.pop(g, None)
            self.old_groups.pop(g, None)
        for g in self.touched_groups - self.freed:
            self.old_groups[g] = self.groups[g].copy()
        if self.owner is not None:
            self.old_owner = self.owner.copy()
        self.freed = set()
        self.touched24, self.touched_groups = set(), set()

    # ---- the ops that make the live maps the model ----

    def _build(self) -> None:
        """A new table from many routes: shorter prefixes first, each simply
        overwriting its range, is what add() would make of them one by one
        (and a later route of the same prefix wins, as in the trie)."""
        self.loaded[:] = True
        self.pending.sort(key=lambda r: r[0])  # stable: file order within a length
        tbl24 = self.tbl24
        for length, addr, value in self.pending:
            if length > 24:
                self._set(addr, length, value, lambda old, n=length: depth_of(old) <= n)
            else:
                lo = addr >> 8
                tbl24[lo : lo + (1 << (24 - length))] = value
        self.pending = []

    def ops(self) -> list[Op]:
        if self.pending:
            self._build()
        out: list[Op] = []
        for g in sorted(self.touched_groups):
            group = self.groups.get(g)
            if group is None or g in self.freed:
                continue
            index = np.flatnonzero(group != self.old_groups[g])
            out += [_fill(TBL8, g * 256 + i, n, v) for i, n, v in _runs(index, group[index])]
        owner, old_owner = self.owner, self.old_owner
        taken = [] if owner is None else np.flatnonzero((owner != old_owner) & (owner != 0))
        out += [update(OWNER, int(g).to_bytes(4, "little"), int(owner[g]).to_bytes(4, "little"))
                for g in taken]  # fmt: skip
        if self.reader is None:
            out += [_fill(TBL24, i, n, v) for i, n, v in _nonzero_runs(self.tbl24)]
        else:
            for c in sorted(self.touched24):
                now = self.tbl24[c * CHUNK : (c + 1) * CHUNK]
                index = np.flatnonzero(now != self.old24[c])
                out += [_fill(TBL24, c * CHUNK + i, n, v) for i, n, v in _runs(index, now[index])]
        out += [update(OWNER, g.to_bytes(4, "little"), bytes(4)) for g in sorted(self.freed)]
        return out
