# SPDX-License-Identifier: BSD-2-Clause
"""The shared vectors themselves: reproducible, well-formed, covering what
they claim, and addressed only inside the benchmarking ranges."""

from __future__ import annotations

import ipaddress
import struct

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import NoPayload, Packet

from .conftest import VECTOR_DIR, VECTOR_FILES, read_vector, vectors

IP4_NET = ipaddress.ip_network("198.18.0.0/15")
IP6_NET = ipaddress.ip_network("fd00:198:18::/48")
MAC_PREFIX = "02:00:c6:12:"
UNSET = {"0.0.0.0", "::", "00:00:00:00:00:00"}  # empty slots (ARP target MAC, RR option)
ADDRESS_FIELDS = ("src", "dst", "psrc", "pdst", "hwsrc", "hwdst", "addresses", "routers")


def test_vectors_are_reproducible(tmp_path):
    """The committed vectors are exactly what build.py writes."""
    counts = vectors.build(tmp_path)
    assert list(counts) == VECTOR_FILES
    for name in [*VECTOR_FILES, vectors.MANIFEST]:
        committed = VECTOR_DIR / name
        assert committed.exists(), f"{name} is not committed: run tests/vectors/build.py"
        assert (tmp_path / name).read_bytes() == committed.read_bytes(), (
            f"{name} differs from what build.py writes: rerun tests/vectors/build.py"
        )


@pytest.mark.parametrize("vector", VECTOR_FILES)
def test_pcap_format(vector: str):
    pcap = read_vector(vector)
    magic, major, minor, _, _, snaplen, linktype = struct.unpack("<IHHiIII", pcap.header)
    assert (magic, major, minor, snaplen, linktype) == (0xA1B2C3D4, 2, 4, 65535, 1)
    assert pcap.records
    for i, rec in enumerate(pcap.records):
        assert rec.caplen == rec.wirelen == len(rec.data) > 0
        assert (rec.sec, rec.frac) == (vectors.TS_SEC, i)


def addresses(layer: Packet) -> list[tuple[str, str]]:
    found = []
    while not isinstance(layer, NoPayload):
        for option in layer.fields.get("options", []):
            if isinstance(option, Packet):  # IPv4 options: record route
                found += addresses(option)
        for name in ADDRESS_FIELDS:
            if name not in layer.fields:
                continue
            value = layer.fields[name]
            for item in value if isinstance(value, list) else [value]:
                found.append((f"{layer.name}.{name}", str(item)))
        layer = layer.payload
    return found


def in_ranges(text: str) -> bool:
    if text in UNSET:
        return True
    if text.startswith(MAC_PREFIX) and len(text) == 17:
        return True
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return False
    return addr in (IP4_NET if addr.version == 4 else IP6_NET)


@pytest.mark.parametrize("vector", ["l3l4.pcap", "encap.pcap", "options.pcap", "fragments.pcap"])
def test_addresses_in_benchmark_ranges(vector: str):
    for i, frame in enumerate(read_vector(vector).frames):
        found = addresses(Ether(frame))
        assert any(name.endswith(".src") for name, _ in found), i
        bad = [(name, value) for name, value in found if not in_ranges(value)]
        assert not bad, f"{vector} frame {i}: addresses outside the ranges: {bad}"


def test_garbage_macs_in_range():
    for i, frame in enumerate(read_vector("garbage.pcap").frames):
        assert frame[0:4] == frame[6:10] == bytes.fromhex("0200c612"), i


def test_coverage():
    """What the vector README promises."""
    names = {f: [n for n, _ in make()] for f, make in vectors.FILES.items()}
    sizes = {f: [len(d) for d in read_vector(f).frames] for f in vectors.FILES}
    l3l4 = names["l3l4.pcap"]
    for proto in ("ipv4-udp", "ipv4-tcp", "ipv4-icmp", "ipv6-udp", "ipv6-tcp", "ipv6-icmpv6-echo"):
        assert any(n.startswith(proto) for n in l3l4), proto
    assert {"arp-request", "arp-reply"} <= set(l3l4)
    assert 60 in sizes["l3l4.pcap"] and 1514 in sizes["l3l4.pcap"]
    assert any(n.startswith("vlan-") for n in names["encap.pcap"])
    assert any(n.startswith("qinq-") for n in names["encap.pcap"])
    frags = names["fragments.pcap"]
    for family in ("ipv4-udp-frag", "ipv6-udp-frag"):
        for part in ("first", "middle1", "last"):
            assert f"{family}-{part}" in frags
    opts = " ".join(names["options.pcap"])
    for ext in ("ipv4-opt", "hbh", "routing", "fragment", "dstopt"):
        assert ext in opts, ext
    assert sorted(set(sizes["runts.pcap"])) == list(range(1, 14))
    assert 9000 in sizes["jumbo.pcap"]
    assert all(14 <= n <= 1514 for n in sizes["garbage.pcap"])
    truncated = sizes["truncated.pcap"]
    assert {13, 14, 15} <= set(truncated), "Ethernet boundary cuts"
    assert len(truncated) > 500
