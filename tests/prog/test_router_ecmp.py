# SPDX-License-Identifier: BSD-2-Clause
"""Multipath routes (next-hop groups) in the router NF: on the XDP build
(BPF_PROG_TEST_RUN) and the native one, with the trie and DIR-24-8 tables,
IPv4 and IPv6, every frame takes the member that nf/lb.c's flow hash picks
(include/veloz/jhash.h, called here through libveloz-lbhash), so one flow
always takes one next hop, flows spread evenly over equal members, a member
without a MAC passes to the kernel, and all four runs agree frame by frame."""

from __future__ import annotations

import ipaddress
import random
from collections import Counter

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from veloz.control import lb
from veloz.control import route_file as rf
from veloz.control.objects import Ports

from .conftest import needs_root
from .test_router import PORT_MAC
from .test_router import replay as replay_router

ETH = Ether(src="02:00:00:00:00:99", dst=PORT_MAC[0])
MACS = {
    "198.18.1.2": "02:00:00:00:0a:01",
    "198.18.1.3": "02:00:00:00:0a:02",
    "198.18.2.2": "02:00:00:00:0a:03",
    "198.18.2.3": "02:00:00:00:0a:04",
    "fd00:198:18:1::2": "02:00:00:00:0a:05",
    "fd00:198:18:2::2": "02:00:00:00:0a:06",
}
UNRESOLVED = "198.18.1.9"  # no neighbour: its flows pass
# as `ip route` prints them (members on their own lines), and `ip -o route`
ROUTES = """
198.18.64.0/18 proto static
\tnexthop via 198.18.1.2 dev 1 weight 1
\tnexthop via 198.18.1.3 dev 1 weight 1
\tnexthop via 198.18.2.2 dev 2 weight 1
\tnexthop via 198.18.2.3 dev 2 weight 1
198.18.128.0/24 proto static \\\tnexthop via 198.18.1.2 dev 1 weight 2 \\\tnexthop via 198.18.1.9 dev 1 weight 1
198.18.70.0/24 via 198.18.2.2 dev 2
fd00:198:18:100::/56 metric 1024 pref medium\\\tnexthop via fd00:198:18:1::2 dev 1 weight 1 \\\tnexthop via fd00:198:18:2::2 dev 2 weight 1
"""  # noqa: E501
CONFIG = 'routes = "ecmp.routes"\n' + "".join(
    f'[[neighbour]]\naddress = "{via}"\nmac = "{mac}"\n' for via, mac in MACS.items()
)
PORTS = Ports(["p0", "p1", "p2"], [bytes.fromhex(m.replace(":", "")) for m in PORT_MAC.values()])


def routes() -> list[rf.Route]:
    return [rf.parse_route_line(ln, PORTS) for ln in _joined(ROUTES)]  # type: ignore[misc]


def _joined(text: str) -> list[str]:
    lines: list[str] = []
    for ln in text.splitlines():
        if ln.startswith("\tnexthop"):
            lines[-1] += " " + ln
        elif ln.strip():
            lines.append(ln)
    return lines


def expected(frame: Packet, route: rf.Route) -> tuple[str, int]:
    """The member the NF must pick for frame: (gateway, port)."""
    l3 = frame[IP] if IP in frame else frame[IPv6]
    src, dst = ipaddress.ip_address(l3.src), ipaddress.ip_address(l3.dst)
    proto = l3.proto if IP in frame else l3.nh
    fragment = IP in frame and (l3.flags.MF or l3.frag)
    ports = (0, 0)
    if proto in (6, 17) and not fragment:
        l4 = frame[TCP] if TCP in frame else frame[UDP]
        ports = (l4.sport, l4.dport)
    key = lb.flow_key(src, dst, ports[0], ports[1], proto)
    (family, addr), port = route.multipath[lb.flow_hash(key) % len(route.multipath)]
    return rf.format_gateway(family, addr), port


def flows(rng: random.Random, dsts: list[str], count: int) -> list[Packet]:
    """count frames of distinct flows to random addresses of dsts' networks."""
    out = []
    for _ in range(count):
        net = ipaddress.ip_network(rng.choice(dsts))
        dst = str(net[rng.randrange(1, min(net.num_addresses, 1 << 16))])
        src = "198.18.0.9" if net.version == 4 else "fd00:198:18::9"
        sport, dport = rng.randrange(1024, 65536), rng.choice([53, 80, 443, 9])
        ip = IP(src=src, dst=dst) if net.version == 4 else IPv6(src=src, dst=dst)
        l4 = (
            TCP(sport=sport, dport=dport, flags="S")
            if rng.random() < 0.5
            else UDP(sport=sport, dport=dport)
        )
        out.append(ETH / ip / l4 / Raw(b"z" * 8))
    return out


def odd_ones() -> list[Packet]:
    """No ports to hash: ICMP, IPv4 fragments (first and later), IPv6 fragments."""
    src, dst = "198.18.0.9", "198.18.77.7"
    first = ETH / IP(src=src, dst=dst, id=7, flags="MF") / UDP(sport=5, dport=6) / Raw(b"a" * 16)
    later = ETH / IP(src=src, dst=dst, id=7, frag=3, proto=17) / Raw(b"b" * 16)
    v6 = IPv6(src="fd00:198:18::9", dst="fd00:198:18:100::7")
    v6_fragment = ETH / v6 / IPv6ExtHdrFragment(m=1) / UDP(sport=5, dport=6) / Raw(b"c" * 16)
    return [ETH / IP(src=src, dst=dst) / ICMP(), first, later, v6_fragment]


def route_for(frame: Packet, table: list[rf.Route]) -> rf.Route:
    dst = ipaddress.ip_address(frame[IP].dst if IP in frame else frame[IPv6].dst)
    hits = [r for r in table if dst in ipaddress.ip_network(str(r.prefix))]
    return max(hits, key=lambda r: r.prefix.length)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Packet], dict]:
    tmp = tmp_path_factory.mktemp("ecmp")
    (tmp / "ecmp.routes").write_text(ROUTES)
    rng = random.Random(5)
    frames = flows(rng, ["198.18.64.0/18"], 10_000)
    frames += flows(rng, ["198.18.128.0/24", "198.18.70.0/24", "fd00:198:18:100::/56"], 1500)
    frames += odd_ones()
    # every flow again, shuffled: the same flow must take the same member
    frames += rng.sample(frames, len(frames))
    out = {}
    raw = [bytes(f) for f in frames]  # built once for the four runs
    for backend in ("xdp", "native"):
        for table in ("trie", "dir24"):
            config = f'table = "{table}"\n' + CONFIG
            records, sent = replay_router(tmp, backend, raw, config, f"ecmp-{table}")
            out[(backend, table)] = ([{k: v for k, v in r.items() if k != "ns"}
                                      for r in records], sent)  # fmt: skip
    return frames, out


@needs_root
def test_builds_and_tables_agree_frame_by_frame(runs):
    frames, results = runs
    first = results[("xdp", "trie")]
    assert len(first[0]) == len(frames)
    for key, got in results.items():
        assert got[0] == first[0], f"{key} answered otherwise than the trie on xdp"
        assert got[1] == first[1], f"{key} sent other frames than the trie on xdp"


@needs_root
def test_each_flow_takes_the_hashed_member(runs):
    # the other builds and tables answered and sent the same, frame for
    # frame (test_builds_and_tables_agree_frame_by_frame): one is checked
    frames, results = runs
    table = routes()
    for key in [("xdp", "trie")]:
        records, sent = results[key]
        out = iter(sent)
        seen: dict[bytes, tuple[str, int]] = {}
        for frame, rec in zip(frames, records, strict=True):
            route = route_for(frame, table)
            if not route.multipath:
                assert rec["verdict"] == "redirect" and rec["port"] == route.port, key
                next(out)
                continue
            via, port = expected(frame, route)
            if via == UNRESOLVED:
                assert rec["verdict"] == "pass", (key, frame.summary())
                continue
            assert rec["verdict"] == "redirect" and rec["port"] == port, (key, frame.summary())
            got = Ether(next(out))
            assert got.dst == MACS[via] and got.src == PORT_MAC[port], (key, frame.summary())
            # the same frame (flow) twice: one next hop
            assert seen.setdefault(bytes(frame), (via, port)) == (via, port), key


@needs_root
def test_flows_spread_over_every_member(runs):
    """10,000 random flows over 4 equal members: each takes 25% +- 3%; the
    weighted group (2:1) and the IPv6 group see all their members too."""
    frames, results = runs
    records, sent = results[("native", "dir24")]
    out = iter(sent)
    share: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    for i, (frame, rec) in enumerate(zip(frames, records, strict=True)):
        if rec["verdict"] != "redirect":
            passed[frame[IP].dst.rsplit(".", 1)[0] if IP in frame else "v6"] += 1
            continue
        mac = Ether(next(out)).dst
        if i < 10_000:
            share[mac] += 1
    members = [MACS[v] for v in ("198.18.1.2", "198.18.1.3", "198.18.2.2", "198.18.2.3")]
    assert set(share) == set(members)
    for mac in members:
        assert abs(share[mac] / 10_000 - 0.25) <= 0.03, share
    # the unresolved member of 198.18.128.0/24 (1 of 3 buckets) passes about a third
    assert set(passed) == {"198.18.128"}, passed
    dsts = [f for f in frames if IP in f and f[IP].dst.startswith("198.18.128.")]
    assert 0.25 < passed["198.18.128"] / len(dsts) < 0.42, (passed, len(dsts))


def test_route_file_reads_the_groups():
    table = {str(r.prefix): r for r in routes()}
    v4 = table["198.18.64.0/18"]
    assert v4.via is None and v4.port == 0 and len(v4.multipath) == 4
    assert len(set(table["198.18.128.0/24"].multipath)) == 2
    assert len(table["198.18.128.0/24"].multipath) == 3  # weight 2 and 1
    assert len(table["fd00:198:18:100::/56"].multipath) == 2
