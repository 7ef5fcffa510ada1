# SPDX-License-Identifier: BSD-2-Clause
"""The XDP dispatch stage (src/dispatch/xdp_stage.bpf.c) under BPF_PROG_TEST_RUN.

The dispatcher's object is loaded through libbpf (ctypes), its maps set up
by hand as the loader (src/dispatch/xdp_stage.c) would, and crafted frames run
through it one at a time. The CPU it picked is read back from its
per-target-CPU packet counter (dsp_cpu_pkts), the flow map and the buckets.

The RSS hash is checked against the Microsoft RSS specification's vectors:
the program does not expose it, so it is recovered from what it does with
it: the bucket (hash & 511) and rss-mod's choice for several numbers of
active CPUs (hash % n), which together pin all 32 bits (CRT).
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import struct
import time
from math import prod
from pathlib import Path

import pytest
from scapy.all import ARP, TCP, UDP, Dot1Q, Ether, IPv6, Raw
from scapy.layers.inet import IP

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("VELOZ_BUILD_DIR", REPO_ROOT / "build"))
DISPATCH_OBJ = BUILD / "src" / "dispatch" / "xdp_stage.bpf.o"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="loading BPF programs needs root (BPF_PROG_TEST_RUN)"
)

XDP_PASS, XDP_TX, XDP_REDIRECT = 2, 3, 4
BPF_XDP_CPUMAP = 35  # enum bpf_attach_type
RSS_MOD, FLOW_AFFINITY, BUCKETS, ADAPTIVE = 0, 1, 2, 3  # enum vz_dispatch_policy (policy.h)
FLOWS_NEW, FLOWS_MOVED, FLOWS_AGED, BUCKETS_MOVED, NO_CPU = range(5)  # enum vz_dsp_counter
MAX_CPUS, NBUCKETS = 64, 512
MS = 1_000_000
SEC = 1_000_000_000

RSS_KEY = bytes.fromhex(
    "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa"
)

# Microsoft's "Verifying the RSS Hash Calculation": (source, source port,
# destination, destination port, hash of addresses only, hash with ports).
SPEC_V4 = [
    ("66.9.149.187", 2794, "161.142.100.80", 1766, 0x323E8FC2, 0x51CCC178),
    ("199.92.111.2", 14230, "65.69.140.83", 4739, 0xD718262A, 0xC626B0EA),
    ("24.19.198.95", 12898, "12.22.207.184", 38024, 0xD2D0A5DE, 0x5C2B394A),
    ("38.27.205.30", 48228, "209.142.163.6", 2217, 0x82989176, 0xAFC7327F),
    ("153.39.163.191", 44251, "202.188.127.2", 1303, 0x5D1809C5, 0x10E828A2),
]
SPEC_V6 = [
    ("3ffe:2501:200:1fff::7", 2794, "3ffe:2501:200:3::1", 1766, 0x2CC18CD5, 0x40207D3D),
    ("3ffe:501:8::260:97ff:fe40:efab", 14230, "ff02::1", 4739, 0x0F0C461C, 0xDDE51BBF),
    ("3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, "fe80::200:f8ff:fe21:67cf", 38024,
     0x4B61E985, 0x02D1FEEF),
]  # fmt: skip


def toeplitz(data: bytes, key: bytes = RSS_KEY) -> int:
    """The reference: the spec's algorithm, bit by bit."""
    k = int.from_bytes(key, "big")
    klen = len(key) * 8
    h = 0
    for i, byte in enumerate(data):
        for bit in range(8):
            if byte & (0x80 >> bit):
                h ^= (k >> (klen - 32 - (i * 8 + bit))) & 0xFFFFFFFF
    return h


def test_reference_toeplitz_matches_the_spec():
    # the test's own reference first: a wrong reference proves nothing
    for src, sport, dst, dport, h_addr, h_ports in SPEC_V4 + SPEC_V6:
        addrs = ipaddress.ip_address(src).packed + ipaddress.ip_address(dst).packed
        assert toeplitz(addrs) == h_addr
        assert toeplitz(addrs + struct.pack(">HH", sport, dport)) == h_ports


# ---- libbpf through ctypes ---------------------------------------------------


class RunOpts(ctypes.Structure):
    _fields_ = [  # noqa: RUF012 (ctypes wants a plain list)
        ("sz", ctypes.c_size_t),
        ("data_in", ctypes.c_void_p),
        ("data_out", ctypes.c_void_p),
        ("data_size_in", ctypes.c_uint32),
        ("data_size_out", ctypes.c_uint32),
        ("ctx_in", ctypes.c_void_p),
        ("ctx_out", ctypes.c_void_p),
        ("ctx_size_in", ctypes.c_uint32),
        ("ctx_size_out", ctypes.c_uint32),
        ("retval", ctypes.c_uint32),
        ("repeat", ctypes.c_int),
        ("duration", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("cpu", ctypes.c_uint32),
        ("batch_size", ctypes.c_uint32),
    ]


def _libbpf() -> ctypes.CDLL:
    lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
    vp = ctypes.c_void_p
    for name in ("bpf_object__open_file", "bpf_object__find_map_by_name",
                 "bpf_object__find_program_by_name", "bpf_object__next_program"):  # fmt: skip
        getattr(lib, name).restype = vp
    lib.bpf_object__open_file.argtypes = [ctypes.c_char_p, vp]
    lib.bpf_object__find_map_by_name.argtypes = [vp, ctypes.c_char_p]
    lib.bpf_object__find_program_by_name.argtypes = [vp, ctypes.c_char_p]
    lib.bpf_object__next_program.argtypes = [vp, vp]
    lib.bpf_object__load.argtypes = [vp]
    lib.bpf_object__close.argtypes = [vp]
    lib.bpf_object__close.restype = None
    lib.bpf_map__fd.argtypes = [vp]
    lib.bpf_program__fd.argtypes = [vp]
    lib.bpf_program__set_expected_attach_type.argtypes = [vp, ctypes.c_int]
    lib.bpf_map_update_elem.argtypes = [ctypes.c_int, vp, vp, ctypes.c_uint64]
    lib.bpf_map_lookup_elem.argtypes = [ctypes.c_int, vp, vp]
    lib.bpf_prog_test_run_opts.argtypes = [ctypes.c_int, ctypes.POINTER(RunOpts)]
    return lib


LIB = _libbpf() if os.geteuid() == 0 else None
NCPUS = LIB.libbpf_num_possible_cpus() if LIB else 1


class BpfObject:
    def __init__(self, path: Path, prepare=None) -> None:
        assert path.exists(), f"{path} is not built (ninja -C {BUILD})"
        self.obj = LIB.bpf_object__open_file(str(path).encode(), None)
        assert self.obj, f"cannot open {path}: errno {ctypes.get_errno()}"
        if prepare:
            prepare(self)
        err = LIB.bpf_object__load(self.obj)
        assert err == 0, f"cannot load {path}: {os.strerror(-err)} (the verifier refused it?)"

    def close(self) -> None:
        LIB.bpf_object__close(self.obj)

    def map_fd(self, name: str) -> int:
        m = LIB.bpf_object__find_map_by_name(self.obj, name.encode())
        assert m, f"no map {name}"
        return LIB.bpf_map__fd(m)

    def prog_fd(self, name: str) -> int:
        p = LIB.bpf_object__find_program_by_name(self.obj, name.encode())
        assert p, f"no program {name}"
        return LIB.bpf_program__fd(p)

    @staticmethod
    def update(fd: int, key: bytes, value: bytes) -> None:
        k, v = ctypes.create_string_buffer(key), ctypes.create_string_buffer(value)
        assert LIB.bpf_map_update_elem(fd, k, v, 0) == 0, os.strerror(ctypes.get_errno())

    @staticmethod
    def lookup(fd: int, key: bytes, size: int) -> bytes | None:
        k, v = ctypes.create_string_buffer(key), ctypes.create_string_buffer(size)
        if LIB.bpf_map_lookup_elem(fd, k, v):
            return None
        return v.raw

    def percpu_u64(self, fd: int, index: int) -> int:
        raw = self.lookup(fd, struct.pack("<I", index), 8 * NCPUS)
        assert raw is not None
        return sum(struct.unpack(f"<{NCPUS}Q", raw))

    @staticmethod
    def test_run(fd: int, frame: bytes) -> tuple[int, bytes]:
        data_in = ctypes.create_string_buffer(frame, len(frame))
        data_out = ctypes.create_string_buffer(len(frame) + 256)
        opts = RunOpts(sz=ctypes.sizeof(RunOpts), repeat=1)
        opts.data_in = ctypes.cast(data_in, ctypes.c_void_p)
        opts.data_size_in = len(frame)
        opts.data_out = ctypes.cast(data_out, ctypes.c_void_p)
        opts.data_size_out = len(data_out)
        err = LIB.bpf_prog_test_run_opts(fd, ctypes.byref(opts))
        assert err == 0, f"BPF_PROG_TEST_RUN: {os.strerror(-err)}"
        return opts.retval, data_out.raw[: opts.data_size_out]


def flow_key(src: str, dst: str, sport: int, dport: int, proto: int) -> bytes:
    s, d = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    return (s.packed.ljust(16, b"\0") + d.packed.ljust(16, b"\0")
            + struct.pack(">HH", sport, dport) + bytes([proto, s.version, 0, 0]))  # fmt: skip


class Dispatcher(BpfObject):
    """The dispatcher, configured as dispatch.c does, one frame at a time."""

    def __init__(self) -> None:
        super().__init__(DISPATCH_OBJ)
        self.prog = self.prog_fd("vz_xdp_dispatch")
        self.fds = {
            n: self.map_fd(n)
            for n in ("cpu_map", "dsp_config", "dsp_flows", "dsp_cpu_pkts",
                      "dsp_counters", "dsp_bkt_cpu", "dsp_bkt_next", "dsp_bkt_seen")
        }  # fmt: skip
        # the CPUs of this machine get a cpumap entry (no program: the
        # stack), so a redirect to them succeeds; others fall back to PASS
        for cpu in range(min(NCPUS, 2)):
            self.update(self.fds["cpu_map"], struct.pack("<I", cpu), struct.pack("<Ii", 64, 0))

    # struct vz_dsp_config: mask, drain, aging, active[], then policy.h's
    # view: policy, nactive, migrate_gap, spread, force_gap, may_force,
    # choices, pad, compared, load[]
    CONFIG = struct.Struct(f"<QQQ{MAX_CPUS}I8IQ{MAX_CPUS}I")

    def configure(self, policy: int, active: list[int], drain_ns: int = 200_000,
                  aging_ns: int = SEC, migrate_gap: int = 1,
                  spread: bool = False) -> None:  # fmt: skip
        assert active == list(range(len(active))), "the stage's active CPUs are 0..n-1"
        mask = sum(1 << c for c in active)
        cpus = active + [0] * (MAX_CPUS - len(active))
        view = (policy, len(active), migrate_gap, int(spread), 0, 0, 0, 0, 0)
        value = self.CONFIG.pack(mask, drain_ns, aging_ns, *cpus, *view, *[0] * MAX_CPUS)
        self.update(self.fds["dsp_config"], b"\0" * 4, value)

    def _config(self) -> list[int]:
        raw = self.lookup(self.fds["dsp_config"], b"\0" * 4, self.CONFIG.size)
        return list(self.CONFIG.unpack(raw))

    def sent(self) -> list[int]:
        return [self.percpu_u64(self.fds["dsp_cpu_pkts"], c) for c in range(MAX_CPUS)]

    def counter(self, index: int) -> int:
        return self.percpu_u64(self.fds["dsp_counters"], index)

    def send(self, frame: bytes) -> tuple[int, int]:
        """(the CPU the frame was sent to, the program's action)"""
        before = self.sent()
        action, _ = self.test_run(self.prog, frame)
        diff = [a - b for a, b in zip(self.sent(), before, strict=True)]
        assert sorted(diff) == [0] * (MAX_CPUS - 1) + [1], diff
        return diff.index(1), action

    def cpu_of(self, frame: bytes) -> int:
        return self.send(frame)[0]

    def load(self, cpu: int) -> int:
        return self._config()[3 + MAX_CPUS + 9 + cpu]

    def set_load(self, cpu: int, value: int) -> None:
        fields = self._config()
        fields[3 + MAX_CPUS + 9 + cpu] = value
        self.update(self.fds["dsp_config"], b"\0" * 4, self.CONFIG.pack(*fields))

    def flow(self, key: bytes) -> tuple[int, int] | None:
        """(cpu, last_seen) of a flow in the flow map"""
        raw = self.lookup(self.fds["dsp_flows"], key, 16)
        if raw is None:
            return None
        last_seen, cpu, _ = struct.unpack("<QII", raw)
        return cpu, last_seen

    def set_flow(self, key: bytes, cpu: int, last_seen: int) -> None:
        self.update(self.fds["dsp_flows"], key, struct.pack("<QII", last_seen, cpu, 0))

    def set_bucket(self, b: int, cpu: int, nxt: int | None = None) -> None:
        key = struct.pack("<I", b)
        self.update(self.fds["dsp_bkt_cpu"], key, struct.pack("<I", cpu))
        self.update(self.fds["dsp_bkt_next"], key, struct.pack("<I", cpu if nxt is None else nxt))

    def set_bucket_seen(self, b: int, ns: int) -> None:
        self.update(self.fds["dsp_bkt_seen"], struct.pack("<I", b), struct.pack("<Q", ns))

    def bucket_cpu(self, b: int) -> int:
        return struct.unpack("<I", self.lookup(self.fds["dsp_bkt_cpu"], struct.pack("<I", b), 4))[0]


@pytest.fixture
def dsp():
    d = Dispatcher()
    yield d
    d.close()


def udp4(src: str, dst: str, sport: int, dport: int, tcp: bool = False) -> bytes:
    l4 = TCP(sport=sport, dport=dport) if tcp else UDP(sport=sport, dport=dport)
    return bytes(Ether() / IP(src=src, dst=dst) / l4 / Raw(b"x" * 18))


def frame_of(src: str, sport: int, dst: str, dport: int, tcp: bool = True) -> bytes:
    ip = IP(src=src, dst=dst) if ":" not in src else IPv6(src=src, dst=dst)
    l4 = TCP(sport=sport, dport=dport) if tcp else UDP(sport=sport, dport=dport)
    return bytes(Ether() / ip / l4 / Raw(b"veloz"))


# moduli whose product with 512 exceeds 2**32: the hash, whole, by CRT
MODULI = [63, 61, 59, 53, 47]


def crt(residues: list[tuple[int, int]]) -> int:
    total = prod(m for _, m in residues)
    x = 0
    for r, m in residues:
        n = total // m
        x += r * n * pow(n, -1, m)
    return x % total


def program_hash(dsp: Dispatcher, frame: bytes) -> int:
    """The RSS hash the program computed for a frame, from its choices."""
    identity = list(range(MAX_CPUS))  # active[i] == i: the CPU is the index
    residues = []
    for m in MODULI:
        dsp.configure(RSS_MOD, identity[:m])
        residues.append((dsp.cpu_of(frame), m))
    # buckets: bucket b on "CPU" b % 64, then its low bits from the two
    dsp.configure(BUCKETS, identity)
    for b in range(NBUCKETS):
        dsp.set_bucket(b, b % MAX_CPUS)
    low6 = dsp.cpu_of(frame)
    for b in range(NBUCKETS):
        dsp.set_bucket(b, b // 8)
    bucket = dsp.cpu_of(frame) * 8 + (low6 & 7)
    assert bucket % 64 == low6
    residues.append((bucket, NBUCKETS))
    h = crt(residues)
    assert h < 2**32, "the program's choices fit no 32-bit hash"
    return h


@pytest.mark.parametrize("vector", SPEC_V4 + SPEC_V6, ids=lambda v: f"{v[0]}:{v[1]}")
def test_rss_hash_is_the_spec_toeplitz(dsp, vector):
    src, sport, dst, dport, h_addr, h_ports = vector
    assert program_hash(dsp, frame_of(src, sport, dst, dport, tcp=True)) == h_ports
    assert program_hash(dsp, frame_of(src, sport, dst, dport, tcp=False)) == h_ports


def test_rss_hash_addresses_only_for_other_protocols_and_fragments(dsp):
    src, sport, dst, dport, h_addr, _ = SPEC_V4[0]
    icmp = bytes(Ether() / IP(src=src, dst=dst, proto=1) / Raw(b"\x08\0\0\0\0\0\0\0"))
    assert program_hash(dsp, icmp) == h_addr
    frag = bytes(Ether() / IP(src=src, dst=dst, flags="MF") / UDP(sport=sport, dport=dport))
    assert program_hash(dsp, frag) == h_addr
    src6, sport6, dst6, dport6, h6_addr, _ = SPEC_V6[0]
    icmp6 = bytes(Ether() / IPv6(src=src6, dst=dst6, nh=58) / Raw(b"\x80\0\0\0"))
    assert program_hash(dsp, icmp6) == h6_addr


def test_rss_hash_sees_through_one_vlan_tag(dsp):
    src, sport, dst, dport, _, h_ports = SPEC_V4[1]
    tagged = bytes(Ether() / Dot1Q(vlan=7) / IP(src=src, dst=dst) / UDP(sport=sport, dport=dport))
    assert program_hash(dsp, tagged) == h_ports


def test_non_ip_and_short_frames_hash_to_zero(dsp):
    arp = bytes(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="198.19.250.1", pdst="198.19.250.2"))
    assert program_hash(dsp, arp) == 0
    cut = frame_of(*SPEC_V4[0][:4])[: 14 + 19]  # an IPv4 header one byte short
    assert program_hash(dsp, cut) == 0


# ---- rss-mod -------------------------------------------------------------------


@pytest.mark.parametrize("active", [[0, 1], [0], [0, 1, 2], [0, 1, 2, 3, 4, 5]])
def test_rss_mod_picks_active_hash_mod_n(dsp, active):
    dsp.configure(RSS_MOD, active)
    for i in range(64):
        src, dst, sport, dport = f"198.18.0.{i + 1}", "198.18.1.1", 1000 + 7 * i, 9
        frame = frame_of(src, sport, dst, dport, tcp=False)
        h = toeplitz(ipaddress.ip_address(src).packed + ipaddress.ip_address(dst).packed
                     + struct.pack(">HH", sport, dport))  # fmt: skip
        cpu, action = dsp.send(frame)
        assert cpu == active[h % len(active)]
        # a CPU with a cpumap entry is redirected to, others passed
        assert action == (XDP_REDIRECT if cpu < min(NCPUS, 2) else XDP_PASS)
    # frames for a CPU without a cpumap entry are counted as such
    assert dsp.counter(NO_CPU) == sum(dsp.sent()[min(NCPUS, 2) :])


# ---- flow-affinity -----------------------------------------------------------


def flows(n: int, base: int = 0) -> list[tuple[bytes, bytes]]:
    """n UDP flows: (frame, flow key)"""
    out = []
    for i in range(base, base + n):
        src, dst, sport, dport = f"198.18.{i // 200}.{i % 200 + 1}", "198.19.0.1", 4000 + i, 53
        out.append((udp4(src, dst, sport, dport), flow_key(src, dst, sport, dport, 17)))
    return out


def test_flow_affinity_keeps_each_flow_on_its_cpu_and_spreads_new_ones(dsp):
    dsp.configure(FLOW_AFFINITY, [0, 1])
    fl = flows(64)
    first = {key: dsp.cpu_of(frame) for frame, key in fl}
    for _ in range(5):  # many frames per flow, interleaved
        for frame, key in fl:
            assert dsp.cpu_of(frame) == first[key]
    for _, key in fl:
        assert dsp.flow(key)[0] == first[key]
    # each new flow went to the least loaded: an even split, flows as load
    assert sorted(first.values()).count(0) == 32
    assert dsp.load(0) == dsp.load(1) == 32
    assert dsp.counter(FLOWS_NEW) == 64
    assert dsp.counter(FLOWS_MOVED) == dsp.counter(FLOWS_AGED) == 0


def test_flow_affinity_new_flows_go_to_the_least_loaded(dsp):
    dsp.configure(FLOW_AFFINITY, [0, 1])
    dsp.set_load(0, 5)
    got = [dsp.cpu_of(frame) for frame, _ in flows(7)]
    # five to CPU 1 until the loads tie, then the first active on a tie
    assert got == [1, 1, 1, 1, 1, 0, 1]
    assert (dsp.load(0), dsp.load(1)) == (6, 6)


def test_flow_affinity_keeps_busy_flows_on_a_deactivated_cpu(dsp):
    dsp.configure(FLOW_AFFINITY, [0, 1], drain_ns=10 * SEC, aging_ns=100 * SEC)
    fl = flows(16)
    placed = {key: dsp.cpu_of(frame) for frame, key in fl}
    on1 = [(f, k) for f, k in fl if placed[k] == 1]
    assert len(on1) == 8
    # CPU 1 leaves the active set: its flows are busy (seen within the drain
    # time, frames may still be queued there) and stay; new flows avoid it
    dsp.configure(FLOW_AFFINITY, [0], drain_ns=10 * SEC, aging_ns=100 * SEC)
    for _ in range(3):
        for frame, key in fl:
            assert dsp.cpu_of(frame) == placed[key]
    assert {dsp.cpu_of(frame) for frame, _ in flows(8, base=100)} == {0}
    assert dsp.counter(FLOWS_MOVED) == 0
    # once idle past the drain time (not aged) a flow moves, and only then
    now = time.monotonic_ns()
    idle_frame, idle_key = on1[0]
    dsp.set_flow(idle_key, 1, now - 11 * SEC)
    assert dsp.cpu_of(idle_frame) == 0
    assert dsp.flow(idle_key)[0] == 0
    assert dsp.counter(FLOWS_MOVED) == 1
    for frame, _ in on1[1:]:
        assert dsp.cpu_of(frame) == 1, "a busy flow moved"
    # flows on an active CPU never move, however idle (short of aging)
    frame0, key0 = next((f, k) for f, k in fl if placed[k] == 0)
    dsp.set_flow(key0, 0, now - 50 * SEC)
    assert dsp.cpu_of(frame0) == 0
    assert dsp.counter(FLOWS_MOVED) == 1


def test_flow_affinity_moves_an_idle_flow_off_a_busier_cpu_and_never_a_busy_one(dsp):
    # policy.h: an idle flow leaves a CPU with more than migrate_gap flows
    # above the least loaded; within the gap, or while busy, it stays
    dsp.configure(FLOW_AFFINITY, [0, 1], drain_ns=10 * SEC, aging_ns=100 * SEC, migrate_gap=2)
    (frame, key), *_ = flows(1)
    assert dsp.cpu_of(frame) == 0
    now = time.monotonic_ns()
    dsp.set_load(0, 3)
    dsp.set_load(1, 1)  # within the gap: stays, busy or idle
    dsp.set_flow(key, 0, now - 11 * SEC)
    assert dsp.cpu_of(frame) == 0
    dsp.set_load(0, 4)  # busy (just seen): stays whatever the gap
    assert dsp.cpu_of(frame) == 0
    assert dsp.counter(FLOWS_MOVED) == 0
    dsp.set_flow(key, 0, now - 11 * SEC)  # idle and 3 above CPU 1: moves
    assert dsp.cpu_of(frame) == 1
    assert dsp.flow(key)[0] == 1
    assert dsp.counter(FLOWS_MOVED) == 1
    assert (dsp.load(0), dsp.load(1)) == (3, 2)


def test_adaptive_hashes_until_the_loads_spread_then_places_by_load(dsp):
    fl = flows(32)
    dsp.configure(ADAPTIVE, [0, 1, 2], spread=False)
    dsp.set_load(0, 100)  # ignored while not spread: rss-mod's placement
    hashed = [dsp.cpu_of(frame) for frame, _ in fl[:16]]
    for (frame, _), cpu in zip(fl[:16], hashed, strict=True):
        ip = IP(frame[14:])
        h = toeplitz(ipaddress.ip_address(ip.src).packed + ipaddress.ip_address(ip.dst).packed
                     + struct.pack(">HH", ip[UDP].sport, ip[UDP].dport))  # fmt: skip
        assert cpu == h % 3
    assert len(set(hashed)) > 1
    dsp.configure(ADAPTIVE, [0, 1, 2], spread=True)
    dsp.set_load(0, 100)
    dsp.set_load(2, 100)
    assert {dsp.cpu_of(frame) for frame, _ in fl[16:]} == {1}


def test_flow_affinity_treats_aged_flows_as_new(dsp):
    dsp.configure(FLOW_AFFINITY, [0, 1], drain_ns=MS, aging_ns=SEC)
    (frame, key), *_ = flows(1)
    assert dsp.cpu_of(frame) == 0
    dsp.set_flow(key, 1, time.monotonic_ns() - 5 * SEC)  # idle past aging
    dsp.set_load(0, 3)  # CPU 1 holds the aged flow's count; CPU 0 is busier
    dsp.set_load(1, 1)
    assert dsp.cpu_of(frame) == 1  # placed afresh on the least loaded
    assert dsp.counter(FLOWS_AGED) == 1 and dsp.counter(FLOWS_NEW) == 2
    assert dsp.counter(FLOWS_MOVED) == 0
    assert (dsp.load(0), dsp.load(1)) == (3, 1)  # one off CPU 1, one on


# ---- buckets -------------------------------------------------------------------


def test_buckets_follow_the_bucket_map(dsp):
    dsp.configure(BUCKETS, [0, 1])
    table = [(b * 7) % 3 for b in range(NBUCKETS)]  # CPUs 0, 1, 2 (2: not active)
    for b, cpu in enumerate(table):
        dsp.set_bucket(b, cpu)
    for frame, _ in flows(200):
        ip = IP(frame[14:])
        h = toeplitz(ipaddress.ip_address(ip.src).packed + ipaddress.ip_address(ip.dst).packed
                     + struct.pack(">HH", ip[UDP].sport, ip[UDP].dport))  # fmt: skip
        assert dsp.cpu_of(frame) == table[h & (NBUCKETS - 1)]


def test_a_bucket_moves_only_once_idle_for_the_drain_time(dsp):
    dsp.configure(BUCKETS, [0, 1], drain_ns=10 * SEC)
    (frame, _), *_ = flows(1)
    ip = IP(frame[14:])
    b = toeplitz(ipaddress.ip_address(ip.src).packed + ipaddress.ip_address(ip.dst).packed
                 + struct.pack(">HH", ip[UDP].sport, ip[UDP].dport)) & (NBUCKETS - 1)  # fmt: skip
    dsp.set_bucket(b, 1)
    assert dsp.cpu_of(frame) == 1
    dsp.set_bucket(b, 1, nxt=0)  # userspace asks for a move; the bucket is busy
    assert dsp.cpu_of(frame) == 1
    assert dsp.counter(BUCKETS_MOVED) == 0
    dsp.set_bucket_seen(b, time.monotonic_ns() - 11 * SEC)  # now idle
    assert dsp.cpu_of(frame) == 0
    assert dsp.bucket_cpu(b) == 0
    assert dsp.counter(BUCKETS_MOVED) == 1


# ---- the NF's cpumap build -----------------------------------------------------


def test_tx_cpumap_build_redirects_where_the_default_build_transmits():
    frame = udp4("198.19.250.1", "198.19.250.2", 1, 2)
    frame = bytes.fromhex("020000000002020000000001") + frame[12:]
    results = {}
    for build in ("tx.bpf.o", "tx.cpumap.bpf.o"):
        obj = BpfObject(BUILD / "nf" / build)
        try:
            action, out = obj.test_run(obj.prog_fd("vz_xdp_tx"), frame)
            tx = obj.lookup(obj.map_fd("vz_stats"), struct.pack("<I", XDP_TX), 16 * NCPUS)
            counted = sum(struct.unpack(f"<{2 * NCPUS}Q", tx)[0::2])
        finally:
            obj.close()
        results[build] = (action, out, counted)
    assert results["tx.bpf.o"][0] == XDP_TX
    # a cpumap program may not XDP_TX: redirect to the ingress interface
    assert results["tx.cpumap.bpf.o"][0] == XDP_REDIRECT
    assert results["tx.bpf.o"][1] == results["tx.cpumap.bpf.o"][1]  # MACs swapped alike
    assert results["tx.cpumap.bpf.o"][1][:12] == frame[6:12] + frame[:6]
    assert results["tx.bpf.o"][2] == results["tx.cpumap.bpf.o"][2] == 1  # counted as tx


@pytest.mark.parametrize(
    "nf", ["drop", "pass", "tx", "redirect", "memaccess", "router", "ddos", "lb"]
)
def test_every_nf_loads_as_a_cpumap_program(nf):
    def as_cpumap(o: BpfObject) -> None:
        prog = LIB.bpf_object__next_program(o.obj, None)
        assert LIB.bpf_program__set_expected_attach_type(prog, BPF_XDP_CPUMAP) == 0

    obj = BpfObject(BUILD / "nf" / f"{nf}.cpumap.bpf.o", prepare=as_cpumap)
    try:
        cpumap = Dispatcher()
        try:
            # the kernel checks the program's attach type on insertion
            fd = obj.prog_fd(f"vz_xdp_{nf}")
            cpumap.update(cpumap.fds["cpu_map"], struct.pack("<I", 0), struct.pack("<Ii", 64, fd))
        finally:
            cpumap.close()
    finally:
        obj.close()
