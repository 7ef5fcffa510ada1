#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Build the shared packet vectors: tests/vectors/*.pcap and manifest.tsv.

    .venv/bin/python tests/vectors/build.py [OUTDIR]

Frames are made with scapy and written by a small pcap writer of our own, so
that every byte of every file is fixed: classic pcap (little endian, v2.4,
microsecond timestamps, snaplen 65535, linktype Ethernet), timestamps
TS_SEC + index microseconds, random data from fixed seeds, every scapy field
that would otherwise be random or taken from the host set explicitly.
Running the script twice gives identical files; tests/prog checks that the
committed files are what this script writes.

Addresses come only from 198.18.0.0/15, fd00:198:18::/48 and
02:00:c6:12:xx:xx (see DESIGN.md, Testbed).

Importable: `files()` gives {file name: [(frame name, bytes)]} and
`build(outdir)` writes them.
"""

from __future__ import annotations

import random
import struct
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_NOP, IPOption_RR
from scapy.layers.inet6 import (
    ICMPv6EchoReply,
    ICMPv6EchoRequest,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    PadN,
    RouterAlert,
)
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether
from scapy.packet import NoPayload, Packet, Padding, Raw

VECTOR_DIR = Path(__file__).resolve().parent

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
SNAPLEN = 65535
TS_SEC = 1_700_000_000

# Frames the NFs never see (vz-replay drops them before the NF): include/veloz/abi.h
ETH_HLEN = 14
FRAME_MAX = 9216
LINEAR_MAX = 3520

MAC_A = "02:00:c6:12:00:01"
MAC_B = "02:00:c6:12:00:02"
IP4_A = "198.18.0.1"
IP4_B = "198.19.0.2"
IP4_C = "198.18.1.1"
IP4_D = "198.19.1.2"
IP6_A = "fd00:198:18::1"
IP6_B = "fd00:198:18::2"
IP6_C = "fd00:198:18:1::1"
IP6_D = "fd00:198:18:1::2"

ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806
ETH_P_8021Q = 0x8100
ETH_P_8021AD = 0x88A8
ETH_P_IPV6 = 0x86DD

Frame = tuple[str, bytes]


# ---- pcap -------------------------------------------------------------------


def pcap_bytes(frames: Iterable[bytes], linktype: int = LINKTYPE_ETHERNET) -> bytes:
    """A classic pcap file holding frames, timestamps TS_SEC + index us."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, linktype)]
    for i, data in enumerate(frames):
        out.append(
            struct.pack("<IIII", TS_SEC + i // 1_000_000, i % 1_000_000, len(data), len(data))
        )
        out.append(data)
    return b"".join(out)


def write_pcap(path: Path, frames: Iterable[bytes], linktype: int = LINKTYPE_ETHERNET) -> None:
    path.write_bytes(pcap_bytes(frames, linktype))


# ---- building blocks ----------------------------------------------------------


def eth(src: str = MAC_A, dst: str = MAC_B, type: int | None = None) -> Ether:
    return Ether(src=src, dst=dst) if type is None else Ether(src=src, dst=dst, type=type)


def ip4(**kw: object) -> IP:
    kw.setdefault("src", IP4_A)
    kw.setdefault("dst", IP4_B)
    kw.setdefault("id", 0x1234)
    kw.setdefault("ttl", 64)
    return IP(**kw)


def ip6(**kw: object) -> IPv6:
    kw.setdefault("src", IP6_A)
    kw.setdefault("dst", IP6_B)
    kw.setdefault("hlim", 64)
    return IPv6(**kw)


def payload(n: int, seed: int = 0) -> bytes:
    """n bytes of a recognisable pattern (no randomness)."""
    return bytes((seed + i) & 0xFF for i in range(n))


def udp(sport: int = 40000, dport: int = 9) -> UDP:
    return UDP(sport=sport, dport=dport)


def tcp_syn() -> TCP:
    return TCP(
        sport=40001,
        dport=80,
        flags="S",
        seq=1000,
        ack=0,
        window=64240,
        options=[("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None),
                 ("WScale", 7)],
    )  # fmt: skip


def tcp_ack() -> TCP:
    return TCP(sport=40001, dport=80, flags="PA", seq=1001, ack=5001, window=502)


def icmp_echo(type: int = 8) -> ICMP:
    return ICMP(type=type, code=0, id=0x4242, seq=1)


def b(pkt: Packet) -> bytes:
    return bytes(pkt)


def pad_to(data: bytes, size: int) -> bytes:
    assert len(data) <= size, (len(data), size)
    return data + bytes(size - len(data))


# ---- l3l4.pcap ------------------------------------------------------------------


def l3l4() -> list[Frame]:
    e4 = eth()
    e6 = eth()
    frames = [
        ("ipv4-udp", b(e4 / ip4() / udp() / payload(32))),
        ("ipv4-udp-empty", b(e4 / ip4() / udp() / b"")),
        ("ipv4-tcp-syn-options", b(e4 / ip4() / tcp_syn())),
        ("ipv4-tcp-ack-payload", b(e4 / ip4() / tcp_ack() / payload(100, 1))),
        ("ipv4-tcp-rst", b(e4 / ip4() / TCP(sport=40001, dport=80, flags="R", seq=7, ack=0))),
        ("ipv4-icmp-echo-request", b(e4 / ip4() / icmp_echo(8) / payload(56, 2))),
        ("ipv4-icmp-echo-reply", b(e4 / ip4(src=IP4_B, dst=IP4_A) / icmp_echo(0) / payload(56, 2))),
        (
            "ipv4-icmp-port-unreachable",
            b(e4 / ip4(src=IP4_B, dst=IP4_A) / ICMP(type=3, code=3) / ip4() / udp() / payload(8)),
        ),  # fmt: skip
        ("ipv4-df-udp", b(e4 / ip4(flags="DF") / udp() / payload(64, 3))),
        ("ipv4-proto-253", b(e4 / ip4(proto=253) / payload(40, 4))),
        ("ipv6-udp", b(e6 / ip6() / udp() / payload(32))),
        ("ipv6-tcp-syn-options", b(e6 / ip6() / tcp_syn())),
        ("ipv6-tcp-ack-payload", b(e6 / ip6() / tcp_ack() / payload(100, 1))),
        (
            "ipv6-icmpv6-echo-request",
            b(e6 / ip6() / ICMPv6EchoRequest(id=0x4242, seq=1, data=payload(56, 2))),
        ),
        (
            "ipv6-icmpv6-echo-reply",
            b(
                e6
                / ip6(src=IP6_B, dst=IP6_A)
                / ICMPv6EchoReply(id=0x4242, seq=1, data=payload(56, 2))
            ),
        ),  # fmt: skip
        (
            # unicast ARP request (RFC 1122 unicast poll): no broadcast MAC needed
            "arp-request",
            b(
                eth(type=ETH_P_ARP)
                / ARP(op=1, hwsrc=MAC_A, psrc=IP4_A, hwdst="00:00:00:00:00:00", pdst=IP4_B)
            ),
        ),  # fmt: skip
        (
            "arp-reply",
            b(
                eth(src=MAC_B, dst=MAC_A, type=ETH_P_ARP)
                / ARP(op=2, hwsrc=MAC_B, psrc=IP4_B, hwdst=MAC_A, pdst=IP4_A)
            ),
        ),  # fmt: skip
        (
            # the minimum Ethernet frame: a short UDP datagram padded to 60 bytes
            "min-60-ipv4-udp-padded",
            pad_to(b(e4 / ip4() / udp() / payload(4)), 60),
        ),
        ("min-60-ipv4-udp-exact", b(e4 / ip4() / udp() / payload(18))),
        ("max-1514-ipv4-udp", b(e4 / ip4() / udp() / payload(1472, 5))),
        ("max-1514-ipv6-tcp", b(e6 / ip6() / tcp_ack() / payload(1440, 6))),
        ("eth-header-only", b(eth(type=ETH_P_IP))),
    ]
    sizes = {name: len(data) for name, data in frames}
    assert sizes["min-60-ipv4-udp-padded"] == sizes["min-60-ipv4-udp-exact"] == 60
    assert sizes["max-1514-ipv4-udp"] == sizes["max-1514-ipv6-tcp"] == 1514
    return frames


# ---- encap.pcap -------------------------------------------------------------------


def vlan(vid: int = 100, prio: int = 0, dei: int = 0) -> Dot1Q:
    return Dot1Q(vlan=vid, prio=prio, dei=dei)


def qinq(outer: int = 200, inner: int = 100) -> Packet:
    """802.1ad S-tag (0x88a8) then 802.1Q C-tag (0x8100)."""
    return eth(type=ETH_P_8021AD) / Dot1AD(vlan=outer, type=ETH_P_8021Q) / vlan(inner)


def encap() -> list[Frame]:
    frames = [
        ("vlan-ipv4-udp", b(eth() / vlan() / ip4() / udp() / payload(32))),
        ("vlan-ipv4-tcp-syn", b(eth() / vlan() / ip4() / tcp_syn())),
        ("vlan-ipv4-icmp-echo", b(eth() / vlan() / ip4() / icmp_echo() / payload(56, 2))),
        ("vlan-ipv6-udp", b(eth() / vlan() / ip6() / udp() / payload(32))),
        ("vlan-ipv6-tcp-ack", b(eth() / vlan() / ip6() / tcp_ack() / payload(64, 1))),
        (
            "vlan-ipv6-icmpv6-echo",
            b(eth() / vlan() / ip6() / ICMPv6EchoRequest(id=1, seq=1, data=payload(32))),
        ),
        (
            "vlan-arp-request",
            b(
                eth()
                / vlan()
                / ARP(op=1, hwsrc=MAC_A, psrc=IP4_A, hwdst="00:00:00:00:00:00", pdst=IP4_B)
            ),
        ),  # fmt: skip
        ("vlan-prio7-dei-ipv4-udp", b(eth() / vlan(100, prio=7, dei=1) / ip4() / udp())),
        ("vlan-vid0-priority-tagged", b(eth() / vlan(0, prio=5) / ip4() / udp() / payload(8))),
        ("vlan-vid4095", b(eth() / vlan(4095) / ip4() / udp() / payload(8))),
        ("qinq-ipv4-udp", b(qinq() / ip4() / udp() / payload(32))),
        ("qinq-ipv4-tcp-syn", b(qinq() / ip4() / tcp_syn())),
        ("qinq-ipv4-icmp-echo", b(qinq() / ip4() / icmp_echo() / payload(16))),
        ("qinq-ipv6-udp", b(qinq() / ip6() / udp() / payload(32))),
        ("qinq-ipv6-tcp-ack", b(qinq() / ip6() / tcp_ack() / payload(16))),
        (
            "qinq-ipv6-icmpv6-echo",
            b(qinq() / ip6() / ICMPv6EchoRequest(id=1, seq=2, data=payload(16))),
        ),
        (
            "qinq-arp-request",
            b(qinq() / ARP(op=1, hwsrc=MAC_A, psrc=IP4_A, hwdst="00:00:00:00:00:00", pdst=IP4_B)),
        ),
        (
            # pre-802.1ad stacking: two 0x8100 tags
            "double-8021q-ipv4-udp",
            b(eth() / Dot1Q(vlan=300, type=ETH_P_8021Q) / vlan(100) / ip4() / udp() / payload(8)),
        ),
        ("ipip-ipv4-udp", b(eth() / ip4(src=IP4_C, dst=IP4_D) / ip4() / udp() / payload(32))),
        ("ip6ip6-ipv6-udp", b(eth() / ip6(src=IP6_C, dst=IP6_D) / ip6() / udp() / payload(32))),
        ("ipv4-in-ipv6-udp", b(eth() / ip6(src=IP6_C, dst=IP6_D) / ip4() / udp() / payload(32))),
    ]
    return frames


# ---- options.pcap: IPv4 options, IPv6 extension headers ---------------------------------


def options() -> list[Frame]:
    rr = IPOption_RR(routers=[IP4_C, IP4_D, "0.0.0.0"])
    # router alert (RFC 2113), as raw bytes: type 148, length 4, value 0
    router_alert = b"\x94\x04\x00\x00"
    # timestamp option (type 68), 2 slots, pointer at the first: 4 + 8 bytes
    timestamp = bytes([68, 12, 5, 0]) + bytes(8)
    # the largest header: 40 bytes of options (IHL 15)
    max_opts = b(rr) + bytes([1]) * (40 - len(b(rr)))
    hbh = IPv6ExtHdrHopByHop(options=[RouterAlert(value=0), PadN(optdata=b"\x00\x00")])
    route = IPv6ExtHdrRouting(type=0, segleft=1, addresses=[IP6_C])
    dst = IPv6ExtHdrDestOpt(options=[PadN(optdata=b"\x00\x00\x00\x00")])
    atomic = IPv6ExtHdrFragment(offset=0, m=0, id=0xC0FFEE)
    frames = [
        ("ipv4-opt-rr-udp", b(eth() / ip4(options=[rr]) / udp() / payload(32))),
        ("ipv4-opt-router-alert-udp", b(eth() / ip4(options=router_alert) / udp() / payload(32))),
        ("ipv4-opt-timestamp-tcp", b(eth() / ip4(options=timestamp) / tcp_syn())),
        ("ipv4-opt-nop-eol-icmp", b(eth() / ip4(options=b"\x01\x01\x01\x00") / icmp_echo())),
        ("ipv4-opt-max-40-udp", b(eth() / ip4(options=max_opts) / udp() / payload(8))),
        ("ipv4-opt-nop-tcp-ack", b(eth() / ip4(options=[IPOption_NOP()] * 4) / tcp_ack())),
        ("ipv6-hbh-udp", b(eth() / ip6() / hbh / udp() / payload(32))),
        ("ipv6-routing-udp", b(eth() / ip6() / route / udp() / payload(32))),
        ("ipv6-dstopt-tcp-syn", b(eth() / ip6() / dst / tcp_syn())),
        ("ipv6-fragment-atomic-udp", b(eth() / ip6() / atomic / udp() / payload(32))),
        (
            "ipv6-hbh-dst-routing-frag-dst-udp",
            b(eth() / ip6() / hbh / dst / route / atomic / dst / udp() / payload(32)),
        ),
        (
            "ipv6-hbh-icmpv6-echo",
            b(eth() / ip6() / hbh / ICMPv6EchoRequest(id=1, seq=3, data=payload(16))),
        ),
        ("ipv6-dstopt-no-next-header", b(eth() / ip6() / IPv6ExtHdrDestOpt(nh=59))),
        ("vlan-ipv4-opt-rr-udp", b(eth() / vlan() / ip4(options=[rr]) / udp() / payload(8))),
        ("vlan-ipv6-hbh-tcp-ack", b(eth() / vlan() / ip6() / hbh / tcp_ack())),
    ]
    return frames


# ---- fragments.pcap ------------------------------------------------------------------------


def split_fragments(name: str, l4: bytes, sizes: list[int]) -> list[tuple[str, int, bool, bytes]]:
    """(part name, offset in 8-byte units, last?, bytes) for each fragment of l4."""
    parts = []
    off = 0
    for i, size in enumerate(sizes):
        last = i == len(sizes) - 1
        assert last or size % 8 == 0
        part = "first" if i == 0 else "last" if last else f"middle{i}"
        parts.append((f"{name}-{part}", off // 8, last, l4[off : off + size]))
        off += size
    assert off == len(l4), (name, off, len(l4))
    return parts


def ip4_fragments(name: str, proto: int, l4: bytes, sizes: list[int], **kw: object) -> list[Frame]:
    """l4 (an L4 header and payload) in fragments of the given sizes (multiples of 8)."""
    return [
        (part, b(eth() / ip4(proto=proto, frag=off, flags=0 if last else "MF", **kw) / chunk))
        for part, off, last, chunk in split_fragments(name, l4, sizes)
    ]


def ip6_fragments(name: str, nh: int, l4: bytes, sizes: list[int], ident: int) -> list[Frame]:
    return [
        (part, b(eth() / ip6() / IPv6ExtHdrFragment(nh=nh, offset=off, m=0 if last else 1,
                                                    id=ident) / chunk))
        for part, off, last, chunk in split_fragments(name, l4, sizes)
    ]  # fmt: skip


def l4_bytes_v4(l4: Packet) -> bytes:
    """An L4 header with its checksum over the unfragmented datagram."""
    return b(ip4() / l4)[20:]


def l4_bytes_v6(l4: Packet) -> bytes:
    return b(ip6() / l4)[40:]


def fragments() -> list[Frame]:
    udp4 = l4_bytes_v4(udp() / payload(3000, 7))
    icmp4 = l4_bytes_v4(icmp_echo() / payload(2000, 8))
    tcp4 = l4_bytes_v4(tcp_ack() / payload(100, 9))
    udp6 = l4_bytes_v6(udp() / payload(3000, 7))
    icmp6 = l4_bytes_v6(ICMPv6EchoRequest(id=7, seq=7, data=payload(2000, 8)))
    frames: list[Frame] = []
    frames += ip4_fragments("ipv4-udp-frag", 17, udp4, [1480, 1480, len(udp4) - 2960], id=0x0101)
    frames += ip4_fragments("ipv4-icmp-frag", 1, icmp4, [800, 800, len(icmp4) - 1600], id=0x0102)
    # a first fragment too short for the TCP header (RFC 1858 tiny fragment)
    frames += ip4_fragments("ipv4-tcp-tiny-frag", 6, tcp4, [8, len(tcp4) - 8], id=0x0103)
    frames += ip6_fragments("ipv6-udp-frag", 17, udp6, [1448, 1448, len(udp6) - 2896], 0x0201)
    frames += ip6_fragments("ipv6-icmpv6-frag", 58, icmp6, [800, 800, len(icmp6) - 1600], 0x0202)
    first = b(eth() / vlan() / ip4(proto=17, flags="MF", frag=0, id=0x0104) / udp4[:1472])
    frames.append(("vlan-ipv4-udp-frag-first", first))
    frames.append(
        (
            "vlan-ipv6-udp-frag-first",
            b(eth() / vlan() / ip6() / IPv6ExtHdrFragment(nh=17, m=1, id=0x0203) / udp6[:1448]),
        )
    )
    return frames


# ---- truncated.pcap --------------------------------------------------------------------


def header_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every header scapy finds in an Ethernet frame."""
    spans = []
    layer: Packet = Ether(data)
    off = 0
    while not isinstance(layer, (NoPayload, Raw, Padding)):
        size = len(b(layer)) - len(b(layer.payload))
        if isinstance(layer, (ICMPv6EchoRequest, ICMPv6EchoReply)):
            size = 8  # scapy counts the echo data as part of the header
        if size <= 0:
            break
        spans.append((off, off + size))
        off += size
        layer = layer.payload
    return spans


def cut_points(data: bytes) -> list[int]:
    """Every header boundary, one byte either side, and the middle of each header."""
    points = set()
    for start, end in header_spans(data):
        points.update((start, start + 1, (start + end) // 2, end - 1, end, end + 1))
    return sorted(p for p in points if 0 < p < len(data))


def truncated() -> list[Frame]:
    frames = []
    bases = l3l4() + encap() + options()
    bases += [f for f in fragments() if f[0].endswith("-first")]
    for name, data in bases:
        if name.startswith(("min-60", "max-1514", "eth-header-only")):
            continue  # same headers as ipv4-udp / ipv6-tcp-ack-payload
        frames += [(f"{name}@{n}", data[:n]) for n in cut_points(data)]
    return frames


# ---- runts.pcap -------------------------------------------------------------------------


def runts() -> list[Frame]:
    rng = random.Random(0x5255)
    full = b(eth() / ip4() / udp() / payload(32))
    frames = [(f"prefix-{n}", full[:n]) for n in range(1, ETH_HLEN)]
    frames += [(f"random-{n}", rng.randbytes(n)) for n in range(1, ETH_HLEN)]
    return frames


# ---- jumbo.pcap -------------------------------------------------------------------------


def udp4_frame(size: int, seed: int = 0) -> bytes:
    """An IPv4 UDP frame of exactly size bytes."""
    return b(eth() / ip4() / udp() / payload(size - 42, seed))


def jumbo() -> list[Frame]:
    frames = [
        ("jumbo-9000-ipv4-udp", udp4_frame(9000, 11)),
        ("jumbo-9000-ipv6-tcp", b(eth() / ip6() / tcp_ack() / payload(9000 - 74, 12))),
        ("jumbo-9014-ipv4-udp-mtu9000", udp4_frame(9014, 13)),
        ("jumbo-9018-vlan-ipv4-udp", b(eth() / vlan() / ip4() / udp() / payload(9018 - 46, 14))),
        ("linear-3519", udp4_frame(LINEAR_MAX - 1, 15)),
        ("linear-3520", udp4_frame(LINEAR_MAX, 16)),
        ("linear-3521", udp4_frame(LINEAR_MAX + 1, 17)),
        ("page-4096", udp4_frame(4096, 18)),
        ("frame-max-9216", udp4_frame(FRAME_MAX, 19)),
        ("oversize-9217", udp4_frame(FRAME_MAX + 1, 20)),
        ("oversize-16000", udp4_frame(16000, 21)),
    ]
    for name, data in frames:
        digits = [int(s) for s in name.split("-") if s.isdigit()]
        assert len(data) == digits[0], (name, len(data))
    return frames


# ---- garbage.pcap -----------------------------------------------------------------------

GARBAGE_SEED = 0x7E10C
GARBAGE_FRAMES = 256
# Half the frames carry an EtherType a parser acts on, so it reads on into garbage.
PARSED_TYPES = (ETH_P_IP, ETH_P_IPV6, ETH_P_ARP, ETH_P_8021Q, ETH_P_8021AD)


def garbage() -> list[Frame]:
    """Random frames of 14..1514 bytes; only the MACs are kept in 02:00:c6:12:xx:xx."""
    rng = random.Random(GARBAGE_SEED)
    frames = []
    for i in range(GARBAGE_FRAMES):
        size = rng.randint(ETH_HLEN, 1514)
        macs = b"\x02\x00\xc6\x12" + rng.randbytes(2) + b"\x02\x00\xc6\x12" + rng.randbytes(2)
        if i % 2:
            ethertype = struct.pack("!H", rng.choice(PARSED_TYPES))
        else:
            ethertype = rng.randbytes(2)
        frames.append((f"garbage-{i}-{size}", macs + ethertype + rng.randbytes(size - ETH_HLEN)))
    return frames


# ---- all ----------------------------------------------------------------------------------

FILES: dict[str, Callable[[], list[Frame]]] = {
    "l3l4.pcap": l3l4,
    "encap.pcap": encap,
    "options.pcap": options,
    "fragments.pcap": fragments,
    "truncated.pcap": truncated,
    "runts.pcap": runts,
    "jumbo.pcap": jumbo,
    "garbage.pcap": garbage,
}

MANIFEST = "manifest.tsv"


def files() -> dict[str, list[Frame]]:
    return {name: make() for name, make in FILES.items()}


def manifest_text(all_files: dict[str, list[Frame]]) -> str:
    lines = ["# file\tindex\tlength\tname (generated by build.py; do not edit)"]
    for fname, frames in all_files.items():
        lines += [f"{fname}\t{i}\t{len(data)}\t{name}" for i, (name, data) in enumerate(frames)]
    return "\n".join(lines) + "\n"


def build(outdir: Path = VECTOR_DIR) -> dict[str, int]:
    """Write every vector file (and manifest.tsv) into outdir; frame count per file."""
    outdir.mkdir(parents=True, exist_ok=True)
    all_files = files()
    for fname, frames in all_files.items():
        names = [name for name, _ in frames]
        assert len(set(names)) == len(names), f"{fname}: duplicate frame names"
        write_pcap(outdir / fname, (data for _, data in frames))
    (outdir / MANIFEST).write_text(manifest_text(all_files))
    return {fname: len(frames) for fname, frames in all_files.items()}


def main(argv: list[str]) -> int:
    outdir = Path(argv[1]) if len(argv) > 1 else VECTOR_DIR
    for fname, count in build(outdir).items():
        print(f"{outdir / fname}: {count} frames")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
