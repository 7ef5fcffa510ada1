# SPDX-License-Identifier: BSD-2-Clause
"""nf/lb.c through `veloz replay` on both builds, with VIPs from a config file.

Expectations come from the frames and from python/veloz/control/lb.py's own
Maglev table and flow hash, never from either build: every encapsulated frame
is taken apart field by field, its backend must be the one Python's ring
names for the flow, and xdp and native must agree byte for byte.
"""

from __future__ import annotations

import functools
import ipaddress
import random
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from scapy.packet import Packet

from veloz.control import lb, ops
from veloz.control.objects import Ports
from veloz.core import paths
from veloz.lab import fixtures

from .conftest import (
    BACKENDS,
    NFS,
    TIMEOUT,
    VECTOR_DIR,
    VECTOR_FILES,
    Replay,
    needs_root,
    parse_json_lines,
    parse_pcap,
    read_vector,
    run_veloz,
    vectors,
)

pytestmark = pytest.mark.skipif("lb" not in NFS, reason="this build has no lb NF")

# The main cases, their VIPs and the frame builders: lb's fixture table.
TABLE = fixtures.load("lb")
_table = fixtures.module("lb")
LB_MAC, NEXT_HOP, CLIENT_MAC = _table.LB_MAC, _table.NEXT_HOP, _table.CLIENT_MAC
SOURCE4, SOURCE6, V4, V6, VIPS = _table.SOURCE4, _table.SOURCE6, _table.V4, _table.V6, _table.VIPS
eth, tcp, udp, flow_of = _table.eth, _table.tcp, _table.udp, _table.flow_of
python_ring = _table.python_ring

# The shared vectors' destinations and ports (tests/vectors/build.py) as VIPs.
VECTOR_VIPS = [
    (vectors.IP4_B, 80, "tcp", ["198.18.1.50", "fd00:198:18:1::51"]),
    (vectors.IP4_B, 9, "udp", ["198.18.1.52"]),
    (vectors.IP6_B, 80, "tcp", ["fd00:198:18:1::53", "198.18.1.54:weight=3"]),
    (vectors.IP6_B, 9, "udp", ["fd00:198:18:1::55"]),
]
CONFIGS = {"main": VIPS, "vectors": VECTOR_VIPS}


def config_values(name: str = "main") -> dict:
    vips = [{"address": a, "port": p, "proto": pr, "backends": b} for a, p, pr, b in CONFIGS[name]]
    for vip in vips:
        if (vip["address"], vip["port"], vip["proto"]) in _table.PASS_ALL_DOWN:
            vip["on_all_down"] = "pass"
    lb_table = {"source4": SOURCE4, "source6": SOURCE6, "next_hop_mac": NEXT_HOP}
    return {"lb": lb_table, "vip": vips}


def config_toml(name: str = "main") -> str:
    return _table.config_toml(CONFIGS[name])


# every VIP of every config: (address, port, proto) -> its ring (None: no backends)
RINGS = {vip: ring for vips in CONFIGS.values() for vip, ring in _table.rings(vips).items()}


def expected_backend(frame: bytes) -> str:
    return _table.ring_backend(frame, RINGS)


@dataclass
class Case:
    name: str
    frame: bytes
    verdict: str  # tx, pass or drop
    backend: str | None = None  # tx: the backend Python's ring names


LINEAR_MAX = 3520  # what vz_header() reaches of a frame (include/veloz/abi.h)


def model_verdict(frame: bytes) -> str:
    """nf/lb.c's rules (its header comment), written again from the frame."""
    linear = min(len(frame), LINEAR_MAX)
    ethertype = frame[12:14]
    if ethertype == b"\x08\x00":
        if linear < 34:
            return "drop"
        ihl, tot_len = (frame[14] & 0xF) * 4, int.from_bytes(frame[16:18], "big")
        if frame[14] >> 4 != 4 or ihl < 20 or not ihl <= tot_len <= len(frame) - 14:
            return "drop"
        if 14 + ihl > linear:
            return "drop"
        proto = frame[23]
        if proto not in (6, 17):
            return "pass"
        if int.from_bytes(frame[20:22], "big") & 0x3FFF:
            return "pass"  # a fragment
        l4, l4_len, dst = 14 + ihl, tot_len - ihl, frame[30:34]
    elif ethertype == b"\x86\xdd":
        if linear < 54:
            return "drop"
        payload_len = int.from_bytes(frame[18:20], "big")
        if frame[14] >> 4 != 6 or payload_len > len(frame) - 54:
            return "drop"
        proto = frame[20]
        if proto not in (6, 17):
            return "pass"  # fragment header (44) and every other one
        l4, l4_len, dst = 54, payload_len, frame[38:54]
    else:
        return "pass"
    need = 20 if proto == 6 else 8
    if l4 + need > linear or l4_len < need:
        return "drop"
    vip = (str(ipaddress.ip_address(dst)), int.from_bytes(frame[l4 + 2 : l4 + 4], "big"))
    key = (*vip, lb.PROTO_NAMES[proto])
    if key not in RINGS:
        return "pass"
    if RINGS[key]:
        return "tx"
    return "pass" if key in _table.PASS_ALL_DOWN else "drop"  # no backend: on_all_down


def balanced(name: str, pkt: Packet | bytes) -> Case:
    frame = bytes(pkt)
    return Case(name, frame, "tx", expected_backend(frame))


@functools.cache
def spread_cases(n: int = 3000) -> list[Case]:
    """New connections to one VIP from many clients."""
    rng = random.Random(0x5EED)
    out = []
    for i in range(n):
        client = f"198.18.{4 + i // 250}.{1 + i % 250}"
        out.append(balanced(f"spread{i}", tcp(client, V4, rng.randrange(1024, 65536), 80)))
    return out


# ---- running both builds ----------------------------------------------------------


@dataclass
class Run:
    cases: list[Case]
    result: Replay

    def sent(self) -> dict[int, bytes]:
        """Input index -> the frame the NF sent for it."""
        assert self.result.out is not None, self.result.describe()
        indexes = [r["index"] for r in self.result.records if r["verdict"] == "tx"]
        assert len(indexes) == len(self.result.out.frames), self.result.describe()
        return dict(zip(indexes, self.result.out.frames, strict=True))


def read_result(argv: list[str], proc: subprocess.CompletedProcess[str], out: Path) -> Replay:
    result = Replay(argv, proc.returncode, proc.stdout, proc.stderr)
    result.records, result.summary = parse_json_lines(proc.stdout)
    if out.exists():
        result.out_raw = out.read_bytes()
        result.out = parse_pcap(result.out_raw)
    return result


class Runner:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.configs = {}
        for name in CONFIGS:
            self.configs[name] = workdir / f"{name}.toml"
            self.configs[name].write_text(config_toml(name))
        self.cache: dict[tuple[str, str], Run] = {}

    def pcap(self, name: str, cases: list[Case]) -> Path:
        path = self.workdir / f"{name}.pcap"
        if not path.exists():
            vectors.write_pcap(path, [c.frame for c in cases])
        return path

    def replay(
        self,
        name: str,
        cases: list[Case],
        backend: str,
        config: str = "main",
        src: Path | None = None,
    ) -> Run:
        """`veloz replay lb --config`, as a user runs it."""
        if (name, backend) not in self.cache:
            src = src or self.pcap(name, cases)
            out = self.workdir / f"{name}-{backend}.out.pcap"
            args = ["replay", "lb", "--backend", backend, "--in", str(src), "--out", str(out)]
            args += ["--config", str(self.configs[config]), "--json"]
            proc = run_veloz(*args)
            self.cache[(name, backend)] = Run(cases, read_result(args, proc, out))
        return self.cache[(name, backend)]

    def replay_ops(self, name: str, cases: list[Case], extra: list[ops.Op], backend: str) -> Run:
        """vz-replay with the config's ops plus extra ones (e.g. pinned flows)."""
        if (name, backend) not in self.cache:
            src = self.pcap(name, cases)
            out = self.workdir / f"{name}-{backend}.out.pcap"
            ops_file = self.workdir / f"{name}.ops"
            ops.write_file(lb.config_ops(config_values(), Ports(), self.workdir) + extra, ops_file)
            nf = paths.nf("lb")
            argv = [str(paths.tool("vz-replay")), "--bpf", str(nf.bpf), "--native", str(nf.native)]
            argv += ["--backend", backend, "--in", str(src), "--out", str(out)]
            argv += ["--ops", str(ops_file), "--json"]
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=TIMEOUT, check=False
            )
            self.cache[(name, backend)] = Run(cases, read_result(argv, proc, out))
        return self.cache[(name, backend)]


def vector_cases(vector: str) -> list[Case]:
    frames = read_vector(vector).frames
    cases = []
    for i, frame in enumerate(frames):
        if not 14 <= len(frame) <= vectors.FRAME_MAX:
            cases.append(Case(f"{vector}[{i}]", frame, "drop"))  # never reaches the NF
            continue
        verdict = model_verdict(frame)
        backend = expected_backend(frame) if verdict == "tx" else None
        cases.append(Case(f"{vector}[{i}]", frame, verdict, backend))
    return cases


def replay_vector(runner: Runner, vector: str, backend: str) -> Run:
    return runner.replay(vector, vector_cases(vector), backend, "vectors", VECTOR_DIR / vector)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    return Runner(tmp_path_factory.mktemp("lb"))


MAIN = [
    Case(f.name, f.input, f.verdict, expected_backend(f.input) if f.verdict == "tx" else None)
    for f in TABLE.fixtures
]


def ok(run: Run) -> Run:
    run.result.check_ok()
    assert len(run.result.records) == len(run.cases), run.result.describe()
    return run


# ---- checking an encapsulated frame ------------------------------------------------


def ipv4_checksum_ok(header: bytes) -> bool:
    total = sum(int.from_bytes(header[i : i + 2], "big") for i in range(0, len(header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


def check_encapsulated(case: Case, out: bytes) -> str:
    """Every field of the outer headers; returns the backend it went to."""
    inner = case.frame[14:]
    inner_v4 = case.frame[12:14] == b"\x08\x00"
    if inner_v4:
        inner_len = int.from_bytes(inner[2:4], "big")
        tos, df, ip_id = inner[1], inner[6] & 0x40, inner[4:6]
    else:
        inner_len = 40 + int.from_bytes(inner[4:6], "big")
        tos = (int.from_bytes(inner[0:4], "big") >> 20) & 0xFF
    assert out[0:6] == bytes.fromhex(NEXT_HOP.replace(":", "")), case.name
    assert out[6:12] == LB_MAC, case.name
    ethertype = out[12:14]
    if ethertype == b"\x08\x00":
        outer = out[14:34]
        assert outer[0] == 0x45 and outer[1] == tos, case.name
        assert int.from_bytes(outer[2:4], "big") == inner_len + 20, case.name
        if inner_v4:  # RFC 2003: DF and ID from the inner header
            assert outer[4:6] == ip_id and outer[6:8] == bytes([df, 0]), case.name
        else:  # IPv6 inside: never fragmented on the way
            assert outer[4:8] == b"\x00\x00\x40\x00", case.name
        assert outer[8] == 64 and outer[9] == (4 if inner_v4 else 41), case.name
        assert ipv4_checksum_ok(outer), f"{case.name}: outer IPv4 checksum"
        assert outer[12:16] == ipaddress.ip_address(SOURCE4).packed, case.name
        backend = ipaddress.ip_address(outer[16:20])
        assert out[34:] == inner, f"{case.name}: inner packet changed"
    else:
        assert ethertype == b"\x86\xdd", case.name
        outer = out[14:54]
        first = int.from_bytes(outer[0:4], "big")
        _, key = flow_of(case.frame)
        assert first >> 28 == 6 and (first >> 20) & 0xFF == tos, case.name
        assert first & 0xFFFFF == lb.flow_hash(key) & 0xFFFFF, f"{case.name}: flow label"
        assert int.from_bytes(outer[4:6], "big") == inner_len, case.name
        assert outer[6] == (4 if inner_v4 else 41) and outer[7] == 64, case.name
        assert outer[8:24] == ipaddress.ip_address(SOURCE6).packed, case.name
        backend = ipaddress.ip_address(outer[24:40])
        assert out[54:] == inner, f"{case.name}: inner packet changed"
    return str(backend)


# ---- the tests ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_verdicts(runner: Runner, backend: str):
    run = ok(runner.replay("main", MAIN, backend))
    got = {c.name: r["verdict"] for c, r in zip(run.cases, run.result.records, strict=True)}
    want = {c.name: c.verdict for c in run.cases}
    assert got == want
    for case, rec in zip(run.cases, run.result.records, strict=True):
        assert rec["len_in"] == len(case.frame), case.name
        if case.verdict == "pass":
            assert rec["len_out"] == len(case.frame), case.name


def test_model_agrees_with_the_listed_verdicts():
    assert [model_verdict(c.frame) for c in MAIN] == [c.verdict for c in MAIN]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector", VECTOR_FILES)
def test_shared_vectors_with_vips(runner: Runner, vector: str, backend: str):
    """Every shared vector (VLAN, options, fragments, truncated, jumbo, garbage)
    with its destinations as VIPs: the verdicts of nf/lb.c's rules, and every
    frame sent is the input, encapsulated towards Python's choice."""
    run = ok(replay_vector(runner, vector, backend))
    sent = run.sent()
    wrong = [
        f"{c.name}: {r['verdict']} (want {c.verdict})"
        for c, r in zip(run.cases, run.result.records, strict=True)
        if r["verdict"] != c.verdict
    ]
    assert not wrong, "\n".join(wrong[:10])
    for index, case in enumerate(run.cases):
        if case.verdict == "tx":
            assert check_encapsulated(case, sent[index]) == case.backend, case.name
    if vector == "l3l4.pcap":
        assert Counter(c.verdict for c in run.cases) == {"tx": 13, "pass": 8, "drop": 1}


@pytest.mark.parametrize("backend", BACKENDS)
def test_encapsulation_and_backend_choice(runner: Runner, backend: str):
    run = ok(runner.replay("main", MAIN, backend))
    sent = run.sent()
    for index, case in enumerate(run.cases):
        if case.verdict != "tx":
            continue
        out = sent[index]
        assert run.result.records[index]["len_out"] == len(out), case.name
        got = check_encapsulated(case, out)
        assert got == case.backend, f"{case.name}: sent to {got}, Python's ring says {case.backend}"
    families = Counter(
        (c.frame[12:14], sent[i][12:14]) for i, c in enumerate(run.cases) if c.verdict == "tx"
    )
    assert len(families) == 4, f"not every inner/outer family pair was exercised: {families}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_flows_spread_by_weight(runner: Runner, backend: str):
    cases = spread_cases()
    run = ok(runner.replay("spread", cases, backend))
    sent = run.sent()
    assert len(sent) == len(cases)
    got = Counter(check_encapsulated(c, sent[i]) for i, c in enumerate(cases))
    assert got == Counter(c.backend for c in cases)  # each one as Python's ring says
    # weights 1, 2, 1
    shares = {a: got[a] / len(cases) for a in got}
    assert shares.keys() == {"198.18.1.10", "198.18.1.11", "fd00:198:18:1::12"}
    for address, share in {
        "198.18.1.10": 0.25,
        "198.18.1.11": 0.5,
        "fd00:198:18:1::12": 0.25,
    }.items():
        assert abs(shares[address] - share) < 0.04, shares


# ---- the connection table: pinned flows, SYN, removed backends -------------------------


def backend_ids() -> dict[tuple[tuple[str, int, str], str], int]:
    """(VIP, backend address) -> the id config_ops gives it."""
    index_of = {}
    ids = {}
    for op in lb.config_ops(config_values(), Ports(), Path(".")):
        if op.map == lb.VIPS:
            vip = lb.Vip.unpack(op.key)
            index_of[lb.VIP_VALUE.unpack(op.value)[0]] = (
                str(vip.address),
                vip.port,
                lb.PROTO_NAMES[vip.proto],
            )
        elif op.map == lb.BACKENDS:
            b = lb.Backend.unpack(op.value)
            assert b is not None
            ids[(index_of[b.vip], str(b.address))] = int.from_bytes(op.key, "little")
    return ids


def other_backend(frame: bytes) -> str:
    """A valid backend of the frame's VIP that its ring slot does not name."""
    vip, _ = flow_of(frame)
    ring_choice = expected_backend(frame)
    return next(str(b.address) for b in RINGS[vip] or [] if str(b.address) != ring_choice)


def pin(frame: bytes, backend_id: int) -> ops.Op:
    _, key = flow_of(frame)
    return ops.update("lb_conns", key, lb.u32(backend_id))


@functools.cache
def conn_scenario() -> tuple[list[Case], list[ops.Op]]:
    ids = backend_ids()
    vip80, vip53u6, vip53u4 = (V4, 80, "tcp"), (V6, 53, "udp"), (V4, 53, "udp")
    a = bytes(tcp("198.18.5.1", V4, 41000, 80, "PA"))
    a_syn = bytes(tcp("198.18.5.1", V4, 41000, 80, "S"))
    b = bytes(udp("fd00:198:18:5::1", V6, 41001, 53))
    c = bytes(tcp("198.18.5.3", V4, 41002, 80, "A"))
    d = bytes(tcp("198.18.5.4", V4, 41003, 80, "A"))
    e = bytes(tcp("198.18.5.5", V4, 41004, 80, "A"))
    pinned_a, pinned_b = other_backend(a), other_backend(b)
    tomb = 4000  # a removed backend of VIP 0: VALID cleared
    tomb_value = lb.Backend(ipaddress.ip_address("198.18.1.99"), 1, 0, False).value()
    extra = [
        ops.update(lb.BACKENDS, lb.u32(tomb), tomb_value),
        pin(a, ids[(vip80, pinned_a)]),
        pin(b, ids[(vip53u6, pinned_b)]),
        pin(c, tomb),
        pin(d, ids[(vip53u4, "198.18.1.20")]),  # valid, but another VIP's
        pin(e, 4001),  # never used
    ]
    ring = expected_backend
    cases = [
        Case("established-keeps-pinned-backend", a, "tx", pinned_a),
        Case("established-again", a, "tx", pinned_a),
        Case("udp-keeps-pinned-backend", b, "tx", pinned_b),
        Case("syn-takes-the-ring", a_syn, "tx", ring(a_syn)),
        Case("after-syn-the-ring-is-pinned", a, "tx", ring(a)),
        Case("removed-backend-falls-back", c, "tx", ring(c)),
        Case("removed-backend-repinned", c, "tx", ring(c)),
        Case("other-vips-backend-ignored", d, "tx", ring(d)),
        Case("unknown-id-ignored", e, "tx", ring(e)),
    ]
    assert pinned_a != ring(a) and pinned_b != ring(b)
    return cases, extra


@pytest.mark.parametrize("backend", BACKENDS)
def test_connection_table(runner: Runner, backend: str):
    cases, extra = conn_scenario()
    run = ok(runner.replay_ops("conns", cases, extra, backend))
    sent = run.sent()
    for index, case in enumerate(cases):
        assert run.result.records[index]["verdict"] == "tx", case.name
        got = check_encapsulated(case, sent[index])
        assert got == case.backend, f"{case.name}: sent to {got}, expected {case.backend}"


# ---- xdp and native: the same bytes -------------------------------------------------------


def strip(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("ns", "backend")}


SCENARIOS: dict[str, Callable[[Runner, str], Run]] = {
    "main": lambda r, backend: r.replay("main", MAIN, backend),
    "spread": lambda r, backend: r.replay("spread", spread_cases(), backend),
    "conns": lambda r, backend: r.replay_ops("conns", *conn_scenario(), backend),
} | {vector: functools.partial(replay_vector, vector=vector) for vector in VECTOR_FILES}


@needs_root
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_xdp_matches_native(runner: Runner, scenario: str):
    xdp = ok(SCENARIOS[scenario](runner, backend="xdp")).result
    native = ok(SCENARIOS[scenario](runner, backend="native")).result
    assert [strip(r) for r in xdp.records] == [strip(r) for r in native.records]
    assert xdp.summary is not None and native.summary is not None
    assert strip(xdp.summary) == strip(native.summary)
    assert xdp.out_raw == native.out_raw


def test_config_errors_are_one_line(runner: Runner):
    bad = runner.workdir / "bad.toml"
    bad.write_text(config_toml("main").replace('proto = "udp"', 'proto = "sctp"', 1))
    src = runner.pcap("main", MAIN)
    proc = run_veloz("replay", "lb", "--backend", "native", "--in", src, "--config", bad)
    assert proc.returncode == 2, proc
    assert proc.stderr.strip().count("\n") == 0 and "bad protocol 'sctp'" in proc.stderr
    assert proc.stdout == ""
