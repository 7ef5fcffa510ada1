# SPDX-License-Identifier: BSD-2-Clause
"""A reload of lb's config (docs/service.md): from what the running NF's maps
hold to what the file says, in one transaction.

A backend is known by its VIP and address. One that stays keeps its id, so
the connections pinned to it in lb_conns stay with it; a changed weight
rewrites its entry under the same id. A VIP whose backends (addresses and
weights) changed gets Maglev's table of its new backends, and only the ring
slots that differ are written, as `veloz ctl backend add` and `del` do. A
VIP whose backends did not change keeps its ring as it is (a drain by the
health checks included). A backend the health checks drained stays drained:
the checker brings it back.

The order keeps the NF's invariants at every step: new backend entries
before a ring names them, a removed backend's slots moved before its
entry is cleared (its pinned flows then re-hash), a new VIP's key after
its ring. New VIP indexes and backend ids are taken while the removed
ones still count as used, so no id changes hands within one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from veloz.control import lb
from veloz.control.client import Ctl
from veloz.control.lb import ABI, BACKENDS, SELF, VIPS, State, VipConfig, u32
from veloz.control.objects import Ports
from veloz.control.ops import Op, delete, update


@dataclass
class _Plan:
    """A VIP's share of the transaction, in order: before, ring, after."""

    before: list[Op]
    index: int
    new_ring: list[int] | None  # None: the ring stays as it is
    after: list[Op]


def _vip_value(index: int, flags: int) -> bytes:
    return ABI.VIP_VALUE.pack(index=index, flags=flags)


def _added(state: State, item: VipConfig) -> _Plan:
    """A VIP the NF does not have: its backends, its ring, then its key."""
    index = state.new_vip_index(item.vip)
    state.vips[item.vip], state.flags[item.vip] = index, item.flags
    ops, members = lb.add_backends(state, item.vip, item.backends)
    key = update(VIPS, item.vip.key(), _vip_value(index, item.flags))
    return _Plan(ops, index, lb.ring_ids(members), [key])


def _kept(state: State, item: VipConfig) -> _Plan:
    """A VIP both have: its flags, new backends and weights, then its ring if
    its backends changed, then the removed backends' tombstones."""
    index = state.vips[item.vip]
    before: list[Op] = []
    if state.flags.get(item.vip, 0) != item.flags:
        state.flags[item.vip] = item.flags
        before.append(update(VIPS, item.vip.key(), _vip_value(index, item.flags)))
    have = {b.address: (i, b) for i, b in (state.members(index) | state.drained(index)).items()}
    want = {b.address: b for b in item.backends}
    new = [b for a, b in want.items() if a not in have]
    ops, _ = lb.add_backends(state, item.vip, new)
    before += ops
    changed = bool(new)
    for address, (bid, backend) in have.items():
        weight = want[address].weight if address in want else None
        if weight is not None and weight != backend.weight:
            backend.weight = weight
            before.append(update(BACKENDS, u32(bid), backend.value()))
            changed = changed or backend.valid  # a drained one is in no ring
    after: list[Op] = []
    for address, (bid, backend) in have.items():
        if address not in want:
            changed = changed or backend.valid
            backend.valid = backend.down = False
            after.append(update(BACKENDS, u32(bid), backend.value()))
    ring = lb.ring_ids(state.members(index)) if changed else None
    return _Plan(before, index, ring, after)


def _removed(state: State, vip: lb.Vip) -> list[Op]:
    """A VIP the file no longer has: its key, then its backends' tombstones
    (as `veloz ctl vip del`)."""
    index = state.vips[vip]
    ops = [delete(VIPS, vip.key())]
    for bid, backend in (state.members(index) | state.drained(index)).items():
        backend.valid = backend.down = False
        ops.append(update(BACKENDS, u32(bid), backend.value()))
    return ops


def diff_ops(ctl: Ctl, state: State, own: lb.Self | None, vips: list[VipConfig]) -> list[Op]:
    """From state (what the NF holds; updated) to [lb] own and vips. Rings
    are read from ctl for the VIPs whose backends changed."""
    ops: list[Op] = []
    own = own or lb.Self()
    if own != state.self:
        state.self = own
        ops.append(update(SELF, u32(0), own.value()))
    wanted = {item.vip for item in vips}
    gone = [vip for vip in state.vips if vip not in wanted]
    # first what is added (ids taken while the removed ones still hold theirs)
    plans = [_kept(state, i) if i.vip in state.vips else _added(state, i) for i in vips]
    for plan in plans:
        ops += plan.before
        if plan.new_ring is not None:
            ops += lb.ring_ops(plan.index, lb.read_ring(ctl, plan.index), plan.new_ring)
        ops += plan.after
    for vip in gone:
        ops += _removed(state, vip)
    return ops


def reload_ops(ctl: Ctl, values: dict, ports: Ports, base: Path) -> list[Op]:
    """What a reload of an lb config sends to the running NF, read and checked
    in full before anything is sent."""
    del base  # lb's config names no files
    own, vips = lb.parse_config(values, ports)
    from veloz.control import health  # it builds on lb

    health.targets(values)
    return diff_ops(ctl, State.read(ctl), own, vips)
