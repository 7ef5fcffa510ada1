# SPDX-License-Identifier: BSD-2-Clause
"""The router NF offline: what it does to each kind of packet, the same on the
XDP build (BPF_PROG_TEST_RUN) and the native one, with a few routes and with
a full internet-sized table checked against a reference longest-prefix match."""

from __future__ import annotations

import ipaddress
import random
import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.utils import RawPcapReader, rdpcap, wrpcap

from veloz.control import router
from veloz.control.objects import Ports
from veloz.lab import fixtures, route_table

from .conftest import BACKENDS, REPO_ROOT, VECTOR_FILES, needs_root, parse_json_lines

VELOZ = REPO_ROOT / ".venv" / "bin" / "veloz"
# The cases, the config and the frame builders: the router's fixture table.
TABLE = fixtures.load("router")
_table = fixtures.module("router")
CONFIG, ROUTES_FILE, PORT_MAC = _table.CONFIG, _table.ROUTES_FILE, _table.PORT_MAC
udp4 = _table.udp4


def replay(tmp: Path, backend: str, frames: list, config: str, name: str) -> tuple[list, list]:
    pcap_in, pcap_out = tmp / f"{name}-in.pcap", tmp / f"{name}-{backend}-out.pcap"
    cfg = tmp / f"{name}.toml"
    cfg.write_text(config)
    wrpcap(str(pcap_in), frames, linktype=1)  # Packets or their bytes
    done = subprocess.run(
        [str(VELOZ), "replay", "router", "--backend", backend, "--in", pcap_in,
         "--out", pcap_out, "--config", cfg, "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records, _ = parse_json_lines(done.stdout)
    # the bytes as written: no dissection (tens of thousands of frames)
    out = [p for p, _ in RawPcapReader(str(pcap_out))] if pcap_out.stat().st_size > 24 else []
    return records, out


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("router")
    (tmp / "extra.routes").write_text(ROUTES_FILE)
    return tmp


def full_config(tmp: Path) -> str:
    return 'routes = "extra.routes"\n' + CONFIG


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_kind_of_packet(config_dir: Path, backend: str):
    frames = [Ether(f.input) for f in TABLE.fixtures]
    records, out = replay(config_dir, backend, frames, full_config(config_dir), "cases")
    sent = iter(out)
    for f, frame, rec in zip(TABLE.fixtures, frames, records, strict=True):
        name = f.name
        assert rec["verdict"] == f.verdict, f"{name}: {rec}"
        if f.verdict != "redirect":
            continue
        assert rec["port"] == f.port, name
        raw = next(sent)
        assert raw == f.output, f"{name}: not the fixture's output"
        got = Ether(raw)
        assert got.src == PORT_MAC[f.port] and got.dst != frame.dst, name
        if IP in frame:
            assert got[IP].ttl == frame[IP].ttl - 1, name
            # the incrementally updated checksum equals a full recomputation
            check = got[IP].chksum
            del got[IP].chksum
            assert IP(bytes(got[IP]))[IP].chksum == check, f"{name}: bad IPv4 checksum"
            assert bytes(got[IP].payload) == bytes(frame[IP].payload), name
        else:
            assert got[IPv6].hlim == frame[IPv6].hlim - 1, name
            assert bytes(got[IPv6].payload) == bytes(frame[IPv6].payload), name


@needs_root
def test_xdp_and_native_agree_on_every_case(config_dir: Path):
    frames = [Ether(f.input) for f in TABLE.fixtures]
    xdp = replay(config_dir, "xdp", frames, full_config(config_dir), "agree")
    native = replay(config_dir, "native", frames, full_config(config_dir), "agree")
    strip = [{k: v for k, v in r.items() if k != "ns"} for r in xdp[0]]
    assert strip == [{k: v for k, v in r.items() if k != "ns"} for r in native[0]]
    assert xdp[1] == native[1]


def test_bad_route_file_is_one_clear_line(config_dir: Path):
    cfg = config_dir / "bad.toml"
    for text, complaint in (
        ('[[route]]\nprefix = "198.18.0.1/24"\nvia = "198.18.1.2"\n', "host bits"),
        ('[[route]]\nprefix = "198.18.0.0/33"\nvia = "198.18.1.2"\n', "length"),
        ('[[route]]\nprefix = "198.18.0.0/24"\nvia = "fd00::1"\n', "family"),
        ('[[route]]\nprefix = "198.18.0.0/24"\nvia = "nowhere"\n', "next hop"),
        ('[[route]]\nprefix = "198.18.0.0/24"\nvia = "198.18.1.2"\nport = 64\n', "port"),
        ('[[neighbour]]\naddress = "198.18.1.2"\nmac = "02:00"\n', "MAC"),
        ('routes = "missing.txt"\n', "missing.txt"),
        (
            '[[neighbour]]\naddress = "198.18.1.2"\nmac = "02:00:00:00:00:01"\nroutes = "x"\n',
            "routes",
        ),
    ):
        cfg.write_text(text)
        done = subprocess.run(
            [str(VELOZ), "replay", "router", "--backend", "native", "--in",
             str(REPO_ROOT / "tests/vectors/l3l4.pcap"), "--config", str(cfg)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode != 0, text
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and complaint in lines[0], (text, done.stderr)


# ---- the full table ---------------------------------------------------------

NEXTHOPS = [("198.18.1.2", 1), ("198.18.1.3", 1), ("198.18.2.2", 2), ("198.18.2.3", 2)]
NH_MACS = {via: f"02:00:00:00:09:{i:02x}" for i, (via, _) in enumerate(NEXTHOPS)}


def reference_lookup(by_length: dict[int, dict[int, int]], addr: int) -> int | None:
    for length in range(32, -1, -1):
        hit = by_length.get(length, {}).get(addr >> (32 - length) if length else 0)
        if hit is not None:
            return hit
    return None


@pytest.fixture(scope="module")
def full_table(config_dir: Path) -> tuple[Path, dict[int, dict[int, int]]]:
    """The paper-sized table, each route through one of four next hops."""
    routes = route_table.generate(route_table.PAPER_ROUTES, seed=7)
    rng = random.Random(7)
    by_length: dict[int, dict[int, int]] = {}
    path = config_dir / "full.routes"
    with path.open("w") as f:
        for value, length in routes:
            nh = rng.randrange(len(NEXTHOPS))
            via, port = NEXTHOPS[nh]
            f.write(f"{ipaddress.IPv4Address(value)}/{length} {via} {port}\n")
            by_length.setdefault(length, {})[value >> (32 - length) if length else 0] = nh
    return path, by_length


@pytest.fixture(scope="module")
def full_runs(config_dir: Path, full_table) -> tuple[list[int], list, dict]:
    """One replay per build with the full table loaded (loading it is most
    of the time): lookups of addresses from all over the table, then every
    shared vector. The addresses, the vectors, and each build's records and
    frames sent."""
    path, by_length = full_table
    config = f'routes = "{path.name}"\n' + "".join(
        f'[[neighbour]]\naddress = "{via}"\nmac = "{mac}"\n' for via, mac in NH_MACS.items()
    )
    rng = random.Random(11)
    dsts = [int(route_table.BENCH_RANGE.network_address) + rng.getrandbits(15) for _ in range(1000)]
    # also addresses from all over the table, which the testbed never sends
    # on a wire but which must be looked up right
    prefixes = [(v << (32 - n), n) for n, d in by_length.items() for v in list(d)[:200]]
    dsts += [
        v | rng.getrandbits(32 - n) if n < 32 else v
        for v, n in rng.sample(prefixes, min(3000, len(prefixes)))
    ]
    vectors = [p for name in VECTOR_FILES for p in rdpcap(str(REPO_ROOT / "tests/vectors" / name))]
    frames = [bytes(udp4(str(ipaddress.IPv4Address(d)))) for d in dsts]
    frames += [bytes(p) for p in vectors]
    results = {b: replay(config_dir, b, frames, config, "full") for b in ("xdp", "native")}
    return dsts, vectors, results


@needs_root
def test_full_table_xdp_native_and_reference_agree(full_table, full_runs):
    _, by_length = full_table
    dsts, _, results = full_runs
    assert results["xdp"][1] == results["native"][1], "xdp and native wrote different frames"
    xdp_records = results["xdp"][0][: len(dsts)]
    assert [r["verdict"] for r in xdp_records] == [
        r["verdict"] for r in results["native"][0][: len(dsts)]
    ]
    out = iter(results["xdp"][1])  # the lookups' frames come first
    for dst, rec in zip(dsts, xdp_records, strict=True):
        nh = reference_lookup(by_length, dst)
        if nh is None:
            assert rec["verdict"] == "pass"
            continue
        via, port = NEXTHOPS[nh]
        assert rec["verdict"] == "redirect" and rec["port"] == port, ipaddress.IPv4Address(dst)
        assert Ether(next(out)).dst == NH_MACS[via], ipaddress.IPv4Address(dst)


def test_route_table_is_internet_like():
    routes = route_table.generate(100_000, seed=3)
    assert len(set(routes)) == len(routes) == 100_000
    share24 = sum(1 for _, n in routes if n == 24) / len(routes)
    assert 0.5 < share24 < 0.7
    testbed = ipaddress.ip_network("198.18.0.0/15")
    nets = [(v, n, ipaddress.ip_network(f"{ipaddress.IPv4Address(v)}/{n}")) for v, n in routes]
    inside = [(v, n) for v, n, net in nets if net.overlaps(testbed)]
    # only the benchmark range's own hierarchy is inside the testbed range
    assert sorted(inside) == sorted(route_table.bench_prefixes())
    assert route_table.generate(1000, seed=3) == route_table.generate(1000, seed=3)


def test_route_table_cli_writes_route_files(tmp_path: Path):
    out = tmp_path / "t.txt"
    done = subprocess.run([str(VELOZ), "route-table", "--count", "500", "--out", str(out)],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    routes = router.read_route_file(out, Ports())
    assert len(routes) == 500
    assert {(r.kind, r.via, r.port) for r in routes} == {
        (router.FORWARD, (4, ipaddress.IPv4Address("198.18.1.2").packed), 1)
    }


@needs_root
def test_every_shared_vector_through_the_full_table(full_runs):
    """Any pcap: the shared vectors (garbage, runts, fragments, jumbo...) all
    at once, xdp against native, with the full table loaded."""
    dsts, vectors, results = full_runs
    xdp, native = results["xdp"], results["native"]
    assert len(xdp[0]) == len(dsts) + len(vectors)
    strip = [{k: v for k, v in r.items() if k != "ns"} for r in xdp[0][len(dsts) :]]
    assert strip == [{k: v for k, v in r.items() if k != "ns"} for r in native[0][len(dsts) :]]
    assert xdp[1] == native[1]
