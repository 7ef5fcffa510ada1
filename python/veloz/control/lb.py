"""The load balancer's objects: VIPs, backends, Maglev rings (nf/lb.c).

Config file (TOML):

    [lb]
    source4 = "198.18.0.1"            # outer IPv4 source (needed by IPv4 backends)
    source6 = "fd00:198:18::1"        # outer IPv6 source (needed by IPv6 backends)
    next_hop_mac = "02:00:00:00:00:fe" # Ethernet destination of every encapsulated frame
    mac = "02:00:00:00:00:01"         # Ethernet source; default: the MAC of port 0

    [[vip]]
    address = "198.18.100.1"
    port = 80
    proto = "tcp"                     # or "udp"
    backends = ["198.18.1.10", "198.18.1.11:weight=2", {address = "fd00::10", weight = 3}]
    on_all_down = "drop"              # or "pass": with no backend up, to the kernel
    check = {type = "tcp"}            # health checks (health.py), the backends' default;
                                      # a backend table may have its own check

The encapsulated frames go back out of the port they came in on, so their
source MAC is that port's: port 0's unless `mac` says otherwise (a run with
VIP traffic on several ports sets it). Offline (`veloz replay`) port 0's MAC
is 02:00:00:00:00:01.

Each VIP gets an index (its row of lb_ring and its counters); each backend of
each VIP gets its own id in lb_backends, so removing a backend from one VIP
invalidates exactly the connections pinned to it there. A removed backend's
slot keeps its address with VALID cleared (a tombstone) and is reused only
once no never-used id is left. A backend the health checks drained keeps
its id (VALID cleared, DOWN set) until it comes back. The running NF's maps are the only state:
every `veloz ctl` command reads them, computes the VIP's new Maglev ring and
sends only the slots that differ, with the backend entries, as one
transaction.
A reload of an instance's config does the same for the whole file
(lb_reload.py).

Maglev's table is built in maglev.py; the flow hash that picks a slot is
nf/lb.c's own C code (include/veloz/jhash.h, through libveloz-lbhash). Every
struct, map size and counter name comes from lb.bpf.o's BTF (abi.py).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import ipaddress
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from veloz.control import abi, maglev
from veloz.control.client import Ctl, MapInfo, per_cpu_sums
from veloz.control.objects import Ports
from veloz.control.ops import Address, Op, delete, parse_address, parse_mac, parse_u32, update
from veloz.core import paths
from veloz.core.errors import VelozError

KEYS = frozenset({"lb", "vip"})

VIPS = "lb_vips"
RING = "lb_ring"
BACKENDS = "lb_backends"
SELF = "lb_self"
VIP_STATS = "lb_vip_stats"
BACKEND_STATS = "lb_backend_stats"
COUNTERS = "lb_counters"

PROTOS = {"tcp": 6, "udp": 17}
PROTO_NAMES = {v: k for k, v in PROTOS.items()}
ON_ALL_DOWN = ("drop", "pass")


class _Abi(abi.View):
    """nf/lb.c's maps and include/veloz/abi.h's lb section, from lb.bpf.o's BTF."""

    nf = "lb"
    MAX_VIPS = abi.max_entries(VIPS)
    MAX_BACKENDS = abi.max_entries(BACKENDS)  # ids 1..MAX_BACKENDS-1; 0 is "none"
    RING_SIZE = abi.Lazy(lambda a: abi.define("VZ_LB_RING_SIZE"))
    BACKEND_VALID = abi.Lazy(lambda a: abi.define("VZ_LB_BACKEND_VALID"))
    BACKEND_DOWN = abi.Lazy(lambda a: abi.define("VZ_LB_BACKEND_DOWN"))
    VIP_PASS_ALL_DOWN = abi.Lazy(lambda a: abi.define("VZ_LB_VIP_PASS_ALL_DOWN"))
    COUNTER_NAMES = abi.Lazy(lambda a: a.enum_names("vz_lb_counter", "VZ_LB_", ("VZ_LB_COUNTERS",)))
    VIP_KEY = abi.layout("vz_lb_vip_key")
    VIP_VALUE = abi.layout("vz_lb_vip")
    BACKEND = abi.layout("vz_lb_backend")
    SELF_VALUE = abi.layout("vz_lb_self")
    FLOW = abi.layout("vz_lb_flow")
    STAT = abi.layout("vz_stat")
    COUNTER = abi.map_value(COUNTERS)
    MAX_WEIGHT = abi.Lazy(lambda a: a.layout("vz_lb_backend").field("weight").max)


ABI = _Abi()
__getattr__ = ABI.module_getattr(__name__)


def addr16(addr: Address) -> bytes:
    """The 16-byte form of every lb struct: IPv4 first, then zeros."""
    return addr.packed.ljust(16, b"\0")


def unpack_addr(raw: bytes, family: int) -> Address:
    return ipaddress.ip_address(raw[:4] if family == 4 else raw[:16])


def u32(n: int) -> bytes:
    return n.to_bytes(4, "little")


# ---- the NF's flow hash and Maglev ------------------------------------------


def flow_key(src: Address, dst: Address, sport: int, dport: int, proto: int) -> bytes:
    """struct vz_lb_flow: the key of lb_conns."""
    if src.version != dst.version:
        raise ValueError("source and destination of different families")
    return ABI.FLOW.pack(src=addr16(src), dst=addr16(dst), sport=sport, dport=dport,
                         proto=proto, family=src.version)  # fmt: skip


@functools.cache
def _hash_lib() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(paths.library("libveloz-lbhash.so")))
    lib.vz_lb_flow_hash_bytes.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.vz_lb_flow_hash_bytes.restype = ctypes.c_uint32
    return lib


def flow_hash(key: bytes) -> int:
    """nf/lb.c's flow hash of a vz_lb_flow: the NF's own C code (jhash.h)."""
    if len(key) != ABI.FLOW.size:
        raise ValueError(f"a flow key is {ABI.FLOW.size} bytes, not {len(key)}")
    return int(_hash_lib().vz_lb_flow_hash_bytes(key, len(key)))


def flow_slot(key: bytes) -> int:
    return flow_hash(key) % ABI.RING_SIZE


def maglev_table(backends: Sequence[tuple[bytes, int]], size: int | None = None) -> list[int]:
    """maglev.table() on lb_ring's row size (VZ_LB_RING_SIZE) unless told."""
    return maglev.table(backends, ABI.RING_SIZE if size is None else size)


# ---- objects ----------------------------------------------------------------


@dataclass(frozen=True)
class Vip:
    address: Address
    port: int
    proto: int

    def key(self) -> bytes:
        """struct vz_lb_vip_key."""
        return ABI.VIP_KEY.pack(addr=addr16(self.address), port=self.port, proto=self.proto,
                                family=self.address.version)  # fmt: skip

    @classmethod
    def unpack(cls, key: bytes) -> Vip:
        k = ABI.VIP_KEY.unpack(key)
        return cls(unpack_addr(k.addr, k.family), k.port, k.proto)

    def __str__(self) -> str:
        host = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        return f"{host}:{self.port}/{PROTO_NAMES.get(self.proto, self.proto)}"


@dataclass
class Backend:
    address: Address
    weight: int = 1
    vip: int = 0  # index of its VIP
    valid: bool = True
    down: bool = False  # drained by the health checks: kept for its return

    @property
    def name(self) -> bytes:
        """What Maglev hashes: family and address."""
        return bytes([self.address.version]) + addr16(self.address)

    def value(self) -> bytes:
        flags = (ABI.BACKEND_VALID if self.valid else 0) | (ABI.BACKEND_DOWN if self.down else 0)
        return ABI.BACKEND.pack(addr=addr16(self.address), vip=self.vip, weight=self.weight,
                                family=self.address.version, flags=flags)  # fmt: skip

    @classmethod
    def unpack(cls, raw: bytes) -> Backend | None:
        """None for an id that was never used."""
        b = ABI.BACKEND.unpack(raw)
        if b.family not in (4, 6):
            return None
        return cls(unpack_addr(b.addr, b.family), b.weight, b.vip,
                   bool(b.flags & ABI.BACKEND_VALID), bool(b.flags & ABI.BACKEND_DOWN))  # fmt: skip

    def __str__(self) -> str:
        return f"{self.address}" + (f":weight={self.weight}" if self.weight != 1 else "")


@dataclass
class Self:
    """struct vz_lb_self."""

    mac: bytes = bytes(6)
    next_hop_mac: bytes = bytes(6)
    source4: bytes = bytes(4)
    source6: bytes = bytes(16)

    def value(self) -> bytes:
        return ABI.SELF_VALUE.pack(mac=self.mac, next_hop_mac=self.next_hop_mac,
                                   source4=self.source4, source6=self.source6)  # fmt: skip

    @classmethod
    def unpack(cls, raw: bytes) -> Self:
        v = ABI.SELF_VALUE.unpack(raw)
        return cls(v.mac, v.next_hop_mac, v.source4, v.source6)

    def check_backend(self, backend: Backend, vip: Vip) -> None:
        source = self.source4 if backend.address.version == 4 else self.source6
        if not any(source):
            key = f"source{backend.address.version}"
            raise VelozError(
                f"vip {vip}: backend {backend.address} needs an outer IPv"
                f"{backend.address.version} source: set [lb] {key}"
            )
        if not any(self.next_hop_mac):
            raise VelozError(f"vip {vip}: backends need [lb] next_hop_mac")


# ---- parsing ------------------------------------------------------------------


def parse_proto(text: object) -> int:
    name = str(text).strip().lower()
    if name not in PROTOS:
        raise VelozError(f"bad protocol '{text}': expected tcp or udp")
    return PROTOS[name]


def _number(value: object, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise VelozError(f"{what} must be a whole number, not '{value}'")
    return parse_u32(value, what, low, high)


def parse_vip(address: object, port: object, proto: object) -> Vip:
    addr = parse_address(str(address), "VIP address")
    return Vip(addr, _number(port, "VIP port", 1, 65535), parse_proto(proto))


# matches any string (an empty or multi-line one too): the address is checked after
_WEIGHT = re.compile(r"(?P<addr>.*?)(?::weight=(?P<weight>[^:]*))?", re.DOTALL)


def parse_backend(item: object, where: str = "backend") -> Backend:
    """ "ADDRESS", "ADDRESS:weight=N" or {address = "...", weight = N}; a
    config's table may have a check too (health.py reads it)."""
    if isinstance(item, dict):
        unknown = set(item) - {"address", "weight", "check"}
        if unknown or "address" not in item:
            raise VelozError(
                f"{where}: a backend table has address and weight (and check), not {item}"
            )
        text, weight = str(item["address"]), item.get("weight", 1)
    elif isinstance(item, str):
        m = _WEIGHT.fullmatch(item.strip())
        assert m is not None
        text, weight = m["addr"], m["weight"] if m["weight"] is not None else 1
    else:
        raise VelozError(f"{where}: a backend is an address string or a table, not {item!r}")
    addr = parse_address(text, f"{where} address")
    return Backend(addr, _number(weight, f"{where} weight", 1, ABI.MAX_WEIGHT))


def parse_on_all_down(value: object, where: str) -> int:
    """on_all_down -> struct vz_lb_vip's flags."""
    if value not in ON_ALL_DOWN:
        raise VelozError(f'config: {where} on_all_down must be "drop" or "pass", not {value!r}')
    return ABI.VIP_PASS_ALL_DOWN if value == "pass" else 0


def on_all_down(flags: int) -> str:
    return "pass" if flags & ABI.VIP_PASS_ALL_DOWN else "drop"


def all_down_text(row: dict) -> str:
    """What a VIP with no backend up does to its traffic, in words."""
    return "passed to the kernel" if row.get("on_all_down") == "pass" else "dropped"


def _check_unknown(table: dict, known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise VelozError(
            f"config: {where} has no key '{unknown[0]}' (known: {', '.join(sorted(known))})"
        )


def parse_self(table: object, ports: Ports) -> Self:
    if not isinstance(table, dict):
        raise VelozError("config: [lb] must be a table")
    _check_unknown(table, {"source4", "source6", "next_hop_mac", "mac"}, "[lb]")
    out = Self(mac=ports.mac(0))
    if "mac" in table:
        out.mac = parse_mac(str(table["mac"]))
    if "next_hop_mac" in table:
        out.next_hop_mac = parse_mac(str(table["next_hop_mac"]))
    for family in (4, 6):
        key = f"source{family}"
        if key in table:
            addr = parse_address(str(table[key]), f"[lb] {key}")
            if addr.version != family:
                raise VelozError(f"config: [lb] {key} must be an IPv{family} address, not {addr}")
            setattr(out, key, addr.packed)
    return out


# ---- state: what the running NF's maps hold ----------------------------------


@dataclass
class State:
    vips: dict[Vip, int] = field(default_factory=dict)  # -> index
    flags: dict[Vip, int] = field(default_factory=dict)  # -> struct vz_lb_vip's flags
    backends: dict[int, Backend] = field(default_factory=dict)  # id -> every used id
    self: Self = field(default_factory=Self)

    @classmethod
    def read(cls, ctl: Ctl) -> State:
        nf, _ = ctl.info()
        if nf != "lb":
            raise VelozError(f"the running NF is {nf}, not lb")
        state = cls()
        for key, value in ctl.dump(VIPS):
            v = ABI.VIP_VALUE.unpack(value)
            state.vips[Vip.unpack(key)] = v.index
            state.flags[Vip.unpack(key)] = v.flags
        for key, value in ctl.dump(BACKENDS):
            backend = Backend.unpack(value)
            if backend is not None:
                state.backends[int.from_bytes(key, "little")] = backend
        raw = ctl.lookup(SELF, u32(0))
        if raw:
            state.self = Self.unpack(raw)
        return state

    def index(self, vip: Vip) -> int:
        if vip not in self.vips:
            raise VelozError(f"unknown VIP {vip}")
        return self.vips[vip]

    def members(self, index: int) -> dict[int, Backend]:
        """The valid backends of the VIP at index, by id."""
        return {i: b for i, b in self.backends.items() if b.valid and b.vip == index}

    def drained(self, index: int) -> dict[int, Backend]:
        """The backends of the VIP at index the health checks drained, by id."""
        return {i: b for i, b in self.backends.items() if b.down and not b.valid and b.vip == index}

    def new_vip_index(self, vip: Vip) -> int:
        if vip in self.vips:
            raise VelozError(f"VIP {vip} exists already")
        used = set(self.vips.values())
        free = next((i for i in range(ABI.MAX_VIPS) if i not in used), None)
        if free is None:
            raise VelozError(f"the VIP table is full ({ABI.MAX_VIPS} VIPs)")
        return free

    def new_backend_id(self) -> int:
        """A never-used id first; then the oldest-numbered tombstone."""
        free = next((i for i in range(1, ABI.MAX_BACKENDS) if i not in self.backends), None)
        if free is None:
            free = next(
                (i for i, b in sorted(self.backends.items()) if not b.valid and not b.down), None
            )
        if free is None:
            raise VelozError(f"the backend table is full ({ABI.MAX_BACKENDS - 1} backends)")
        return free


def ring_ids(members: dict[int, Backend]) -> list[int]:
    """The VIP's ring: a backend id per slot (0 when it has no backend)."""
    ids = list(members)
    table = maglev_table([(members[i].name, members[i].weight) for i in ids])
    return [ids[owner] if owner >= 0 else 0 for owner in table]


def ring_ops(index: int, old: Sequence[int], new: Sequence[int]) -> list[Op]:
    base = index * ABI.RING_SIZE
    return [
        update(RING, u32(base + s), u32(b))
        for s, (a, b) in enumerate(zip(old, new, strict=True))
        if a != b
    ]


def read_ring(ctl: Ctl, index: int) -> list[int]:
    """The VIP's row of lb_ring as the NF has it (pipelined lookups)."""
    base = index * ABI.RING_SIZE
    replies = ctl.requests([f"lookup {RING} {u32(base + s).hex()}" for s in range(ABI.RING_SIZE)])
    ring = []
    for reply in replies:
        if not reply.startswith("ok"):
            raise VelozError(f"reading {RING}: {reply.removeprefix('error').strip()}")
        ring.append(int.from_bytes(bytes.fromhex(reply[2:].strip())[:4], "little"))
    return ring


def add_backends(
    state: State, vip: Vip, backends: Iterable[Backend]
) -> tuple[list[Op], dict[int, Backend]]:
    """Backend entries for new backends of vip (state updated); the new members."""
    index = state.index(vip)
    members = state.members(index)
    drained = state.drained(index).values()
    ops = []
    for backend in backends:
        if any(b.address == backend.address for b in (*members.values(), *drained)):
            raise VelozError(f"{backend.address} is a backend of {vip} already")
        state.self.check_backend(backend, vip)
        backend.vip, backend.valid, backend.down = index, True, False
        bid = state.new_backend_id()
        state.backends[bid] = members[bid] = backend
        ops.append(update(BACKENDS, u32(bid), backend.value()))
    return ops, members


def drain_ops(state: State, vip: Vip, address: Address, ring: Sequence[int]) -> list[Op]:
    """Take a failed backend out of vip's ring (ring: the row the NF has now):
    only its slots move, each to the owner Maglev gives it among the others;
    then VALID cleared, DOWN set, so its pinned flows re-hash and its id waits
    for its return. [] when it is not an active backend of vip."""
    index = state.index(vip)
    members = state.members(index)
    bid = next((i for i, b in members.items() if b.address == address), None)
    if bid is None:
        return []
    backend = members.pop(bid)
    others = ring_ids(members)
    new = [others[s] if owner == bid else owner for s, owner in enumerate(ring)]
    backend.valid, backend.down = False, True
    # the ring first: it never names an id that is no longer valid
    return [*ring_ops(index, ring, new), update(BACKENDS, u32(bid), backend.value())]


def restore_ops(state: State, vip: Vip, address: Address, ring: Sequence[int]) -> list[Op]:
    """Bring a drained backend back under its own id: vip's ring becomes
    Maglev's table of the backends up, so after one drain exactly the slots
    it had come back. [] when it is not a drained backend of vip."""
    index = state.index(vip)
    bid = next((i for i, b in state.drained(index).items() if b.address == address), None)
    if bid is None:
        return []
    backend = state.backends[bid]
    backend.valid, backend.down = True, False
    # the entry first: the ring never names an id that is not valid yet
    return [update(BACKENDS, u32(bid), backend.value()),
            *ring_ops(index, ring, ring_ids(state.members(index)))]  # fmt: skip


# ---- start-up: a config file's objects ------------------------------------


@dataclass
class VipConfig:
    """A [[vip]] table: the VIP, struct vz_lb_vip's flags, its backends."""

    vip: Vip
    flags: int
    backends: list[Backend]


def parse_config(values: dict, ports: Ports) -> tuple[Self | None, list[VipConfig]]:
    """[lb] (None without it) and the [[vip]] tables of a config, checked."""
    vips = values.get("vip", [])
    if not isinstance(vips, list) or not all(isinstance(v, dict) for v in vips):
        raise VelozError("config: [[vip]] must be a list of tables")
    own = parse_self(values["lb"], ports) if "lb" in values else None
    if own is None and vips:
        raise VelozError("config: VIPs need an [lb] table (source4/source6, next_hop_mac)")
    out: list[VipConfig] = []
    for n, item in enumerate(vips, 1):
        known = {"address", "port", "proto", "backends", "on_all_down", "check"}
        _check_unknown(item, known, f"vip {n}")
        for key in ("address", "port", "proto"):
            if key not in item:
                raise VelozError(f"config: vip {n} needs '{key}'")
        vip = parse_vip(item["address"], item["port"], item["proto"])
        if any(v.vip == vip for v in out):
            raise VelozError(f"VIP {vip} exists already")
        flags = parse_on_all_down(item.get("on_all_down", "drop"), f"vip {vip}")
        items = item.get("backends", [])
        if not isinstance(items, list):
            raise VelozError(f"config: vip {vip}: backends must be a list")
        backends = [parse_backend(b, f"vip {vip} backend") for b in items]
        seen: set[Address] = set()
        for b in backends:
            if b.address in seen:
                raise VelozError(f"{b.address} is a backend of {vip} already")
            seen.add(b.address)
            assert own is not None
            own.check_backend(b, vip)
        out.append(VipConfig(vip, flags, backends))
    return own, out


def config_ops(values: dict, ports: Ports, base: Path) -> list[Op]:
    own, vips = parse_config(values, ports)
    state = State()
    ops: list[Op] = []
    if own is not None:
        state.self = own
        ops.append(update(SELF, u32(0), own.value()))
    for item in vips:
        index = state.new_vip_index(item.vip)
        state.vips[item.vip] = index
        ops.append(update(VIPS, item.vip.key(), ABI.VIP_VALUE.pack(index=index, flags=item.flags)))
        backend_ops, members = add_backends(state, item.vip, item.backends)
        ops += backend_ops
        ops += ring_ops(index, [0] * ABI.RING_SIZE, ring_ids(members))
    from veloz.control import health  # it builds on this module

    health.targets(values)  # the checks: refused here, before anything is attached
    return ops


def reload_ops(ctl: Ctl, values: dict, ports: Ports, base: Path) -> list[Op]:
    """What a reload of a config sends to the running lb: lb_reload.reload_ops."""
    from veloz.control import lb_reload  # it builds on this module

    return lb_reload.reload_ops(ctl, values, ports, base)


def reload_fixed(values: dict) -> dict[str, object]:
    """What a reload leaves as the run started: the health checks, whose
    companion probes the targets it was started with."""
    from veloz.control import health

    return {"the health checks": [(str(t.vip), str(t.address), t.check, t.on_all_down)
                                  for t in health.targets(values)]}  # fmt: skip


# ---- live: `veloz ctl vip|backend|lb|lb-stats` ------------------------------


def _vip_from_args(args: argparse.Namespace) -> Vip:
    return parse_vip(args.address, args.port, args.proto)


def ctl_vip_add(args: argparse.Namespace, ctl: Ctl) -> int:
    vip = _vip_from_args(args)
    backends = [parse_backend(b) for b in args.backend or []]
    state = State.read(ctl)
    index = state.new_vip_index(vip)
    state.vips[vip] = index
    ops = [update(VIPS, vip.key(), ABI.VIP_VALUE.pack(index=index, flags=0))]
    if backends:
        backend_ops, members = add_backends(state, vip, backends)
        # the row may hold ids of a VIP deleted before: compare with what is there
        ops = backend_ops + ring_ops(index, read_ring(ctl, index), ring_ids(members)) + ops
    ctl.apply(ops)
    print(f"vip {vip} added (index {index}, {len(backends)} backends)")
    return 0


def ctl_vip_del(args: argparse.Namespace, ctl: Ctl) -> int:
    vip = _vip_from_args(args)
    state = State.read(ctl)
    index = state.index(vip)
    ops = [delete(VIPS, vip.key())]
    for bid, backend in (state.members(index) | state.drained(index)).items():
        backend.valid = backend.down = False
        ops.append(update(BACKENDS, u32(bid), backend.value()))
    ctl.apply(ops)
    print(f"vip {vip} deleted: its traffic passes to the kernel")
    return 0


def vip_rows(state: State) -> list[dict]:
    rows = []
    for vip, index in sorted(state.vips.items(), key=lambda kv: kv[1]):
        both = state.members(index) | state.drained(index)
        backends = [{"id": bid, "address": str(b.address), "weight": b.weight, "down": b.down}
                    for bid, b in sorted(both.items())]  # fmt: skip
        rows.append({"vip": str(vip), "index": index, "backends": backends,
                     "on_all_down": on_all_down(state.flags.get(vip, 0))})  # fmt: skip
    return rows


def ctl_vip_list(args: argparse.Namespace, ctl: Ctl) -> int:
    rows = vip_rows(State.read(ctl))
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows:
        backends = ", ".join(
            b["address"]
            + (f" (weight {b['weight']})" if b["weight"] != 1 else "")
            + (" (down)" if b["down"] else "")
            for b in row["backends"]
        )
        if not any(not b["down"] for b in row["backends"]):
            backends += f"{', ' if backends else ''}(no backend up: {all_down_text(row)})"
        print(f"{row['vip']} -> {backends}")
    return 0


def ctl_backend_add(args: argparse.Namespace, ctl: Ctl) -> int:
    vip = _vip_from_args(args)
    backend = parse_backend(args.backend)
    if args.weight is not None:
        backend.weight = parse_u32(args.weight, "weight", 1, ABI.MAX_WEIGHT)
    state = State.read(ctl)
    index = state.index(vip)
    # backend entries first: the ring never names an id that is not valid yet
    ops, members = add_backends(state, vip, [backend])
    changed = ring_ops(index, read_ring(ctl, index), ring_ids(members))
    ctl.apply(ops + changed)
    bid = int.from_bytes(ops[0].key, "little")
    mine = sum(op.value == u32(bid) for op in changed)
    print(
        f"backend {backend} added to {vip}: {mine} of {ABI.RING_SIZE} slots, {len(changed)} changed"
    )
    return 0


def ctl_backend_del(args: argparse.Namespace, ctl: Ctl) -> int:
    vip = _vip_from_args(args)
    address = parse_address(args.backend, "backend address")
    state = State.read(ctl)
    index = state.index(vip)
    members = state.members(index)
    bid = next((i for i, b in members.items() if b.address == address), None)
    down = next((i for i, b in state.drained(index).items() if b.address == address), None)
    if bid is None and down is not None:
        # drained: not in the ring; a tombstone now, the health checks leave it
        state.backends[down].down = False
        ctl.apply([update(BACKENDS, u32(down), state.backends[down].value())])
        print(f"backend {address} (down) removed from {vip}")
        return 0
    if bid is None:
        raise VelozError(f"{address} is not a backend of {vip}")
    removed = members.pop(bid)
    removed.valid = False
    # the ring first, then the tombstone: connections pinned to it re-hash
    changed = ring_ops(index, read_ring(ctl, index), ring_ids(members))
    ctl.apply([*changed, update(BACKENDS, u32(bid), removed.value())])
    print(f"backend {address} removed from {vip}: {len(changed)} slots moved to the others")
    return 0


def ctl_lb_set(args: argparse.Namespace, ctl: Ctl) -> int:
    state = State.read(ctl)
    new = dict(
        (k, v)
        for k, v in (
            ("source4", args.source4),
            ("source6", args.source6),
            ("next_hop_mac", args.next_hop_mac),
            ("mac", args.mac),
        )
        if v is not None
    )
    if not new:
        raise VelozError("lb set: give at least one of --source4, --source6, --next-hop-mac, --mac")
    parsed = parse_self(new, Ports())
    for key in new:
        setattr(state.self, key, getattr(parsed, key))
    ctl.apply([update(SELF, u32(0), state.self.value())])
    print("lb settings updated")
    return 0


def _summed(ctl: Ctl, infos: dict[str, MapInfo], name: str) -> dict[int, tuple[int, int]]:
    """key -> (packets, bytes) of a per-CPU vz_stat array, over every copy."""
    info = infos[name]
    out = {}
    for key, value in ctl.dump(name):
        packets, nbytes = per_cpu_sums(value, info, ABI.STAT)
        out[int.from_bytes(key, "little")] = (packets, nbytes)
    return out


def counters(ctl: Ctl, infos: dict[str, MapInfo] | None = None) -> dict[str, int]:
    """lb_counters, summed over every copy: frames per outcome (enum vz_lb_counter)."""
    info = (infos or ctl.maps())[COUNTERS]
    out = {}
    for index, name in enumerate(ABI.COUNTER_NAMES):
        value = ctl.lookup(COUNTERS, u32(index)) or b""
        out[name] = per_cpu_sums(value, info, ABI.COUNTER)[0]
    return out


def stats(ctl: Ctl) -> dict:
    """Per VIP and per backend (packets, bytes), and the counters; for
    `veloz ctl lb-stats` and --metrics."""
    state = State.read(ctl)
    infos = ctl.maps()
    vip_stats = _summed(ctl, infos, VIP_STATS)
    backend_stats = _summed(ctl, infos, BACKEND_STATS)
    counters_now = counters(ctl, infos)
    vips = []
    for vip, index in sorted(state.vips.items(), key=lambda kv: kv[1]):
        packets, nbytes = vip_stats.get(index, (0, 0))
        backends = [
            {
                "id": bid,
                "address": str(b.address),
                "valid": b.valid,
                "down": b.down,
                "packets": backend_stats.get(bid, (0, 0))[0],
                "bytes": backend_stats.get(bid, (0, 0))[1],
            }
            for bid, b in sorted(state.backends.items())
            if b.vip == index and (b.valid or b.down or backend_stats.get(bid, (0, 0))[0])
        ]
        vips.append({"vip": str(vip), "packets": packets, "bytes": nbytes, "backends": backends,
                     "up": len(state.members(index)),
                     "on_all_down": on_all_down(state.flags.get(vip, 0))})  # fmt: skip
    return {"vips": vips, "counters": counters_now}


def ctl_stats(args: argparse.Namespace, ctl: Ctl) -> int:
    from veloz.control import companion, health  # health builds on this module

    result = stats(ctl)
    path = companion.status_path(ctl.ports()[0], health.NAME)
    health.annotate(result["vips"], health.read(path, ctl.peer_pid()))
    if args.json:
        print(json.dumps(result))
        return 0
    for vip in result["vips"]:
        print(f"{vip['vip']:32} {vip['packets']:>12} packets {vip['bytes']:>14} bytes")
        if not vip["up"]:
            print(f"  (no backend up: its traffic is {all_down_text(vip)})")
        for b in vip["backends"]:
            gone = " (down)" if b["down"] else "" if b["valid"] else " (removed)"
            name = f"  -> {b['address']}{gone}"
            check = f"  check: {b['health']}" if b.get("health") else ""
            print(f"{name:32} {b['packets']:>12} packets {b['bytes']:>14} bytes{check}")
    for name, value in result["counters"].items():
        print(f"{name:12} {value}")
    return 0
