"""Seeds for fuzz-stack (tests/fuzz/fuzz_stack.c): records of frames, sends
and ticks that reach each part of the engine (ARP, ICMP echo, UDP, two
fragments; NDP, ICMPv6 echo, UDP and fragments over IPv6, malformed NDP),
built with the standard library only."""

from __future__ import annotations

import hashlib
import struct
import sys
from pathlib import Path

US_MAC = bytes.fromhex("020000000001")
PEER_MAC = bytes.fromhex("020000000002")
OTHER_MAC = bytes.fromhex("020000000003")
US = bytes([10, 0, 0, 1])
PEER = bytes([10, 0, 0, 2])
OTHER = bytes([10, 0, 0, 3])


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def eth(dst: bytes, src: bytes, ethertype: int, payload: bytes) -> bytes:
    return dst + src + struct.pack("!H", ethertype) + payload


def arp(op: int, sha: bytes, spa: bytes, tha: bytes, tpa: bytes) -> bytes:
    return struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + sha + spa + tha + tpa


def ipv4(proto: int, payload: bytes, ident: int = 1, frag: int = 0) -> bytes:
    hdr = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, frag, 64, proto, 0, PEER, US
    )
    return hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:] + payload


def udp(sport: int, dport: int, data: bytes) -> bytes:
    length = 8 + len(data)
    pseudo = PEER + US + struct.pack("!BBH", 0, 17, length)
    hdr = struct.pack("!HHHH", sport, dport, length, 0)
    check = csum(pseudo + hdr + data) or 0xFFFF
    return hdr[:6] + struct.pack("!H", check) + data


def echo(ident: int, seq: int, data: bytes) -> bytes:
    hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    return hdr[:2] + struct.pack("!H", csum(hdr + data)) + hdr[4:] + data


US6 = bytes.fromhex("fd000000000000000000000000000001")
PEER6 = bytes.fromhex("fd000000000000000000000000000002")
US_SNM = bytes.fromhex("ff0200000000000000000001ff000001")
PEER_SNM = bytes.fromhex("ff0200000000000000000001ff000002")
UNSPEC = bytes(16)


def mcast_mac(group: bytes) -> bytes:
    return b"\x33\x33" + group[12:]


def ipv6(nh: int, payload: bytes, src: bytes = PEER6, dst: bytes = US6, hops: int = 64) -> bytes:
    return struct.pack("!IHBB", 0x60000000, len(payload), nh, hops) + src + dst + payload


def csum6(src: bytes, dst: bytes, nh: int, msg: bytes) -> int:
    return csum(src + dst + struct.pack("!IxxxB", len(msg), nh) + msg)


def icmp6(kind: int, body: bytes, src: bytes = PEER6, dst: bytes = US6) -> bytes:
    msg = struct.pack("!BBH", kind, 0, 0) + body
    return msg[:2] + struct.pack("!H", csum6(src, dst, 58, msg)) + msg[4:]


def udp6(sport: int, dport: int, data: bytes) -> bytes:
    hdr = struct.pack("!HHHH", sport, dport, 8 + len(data), 0)
    check = csum6(PEER6, US6, 17, hdr + data) or 0xFFFF
    return hdr[:6] + struct.pack("!H", check) + data


def nd(kind: int, target: bytes, opt: int, flags: int = 0) -> bytes:
    """NS (135) or NA (136) body: flags, target, a link-layer option (0: none)."""
    body = struct.pack("!I", flags << 24) + target
    return body + (bytes([opt, 1]) + PEER_MAC if opt else b"")


def frag6(nh: int, ident: int, off: int, more: bool, piece: bytes) -> bytes:
    return struct.pack("!BBHI", nh, 0, off | int(more), ident) + piece


def frame_rec(frame: bytes, fix: bool = True) -> bytes:
    """A frame record; fix: the harness makes its checksums right first."""
    return (b"\x04" if fix else b"\x00") + struct.pack("!H", len(frame)) + frame


def send_rec(dst_sel: int, port: int, data: bytes, length: int | None = None) -> bytes:
    n = len(data) if length is None else length
    return b"\x01" + struct.pack("!BHH", dst_sel, port, n) + data


def tick_rec(ms: int) -> bytes:
    return b"\x02" + bytes([ms])


def seeds() -> list[bytes]:
    to_us = (US_MAC, PEER_MAC)
    arp_req = eth(b"\xff" * 6, PEER_MAC, 0x0806, arp(1, PEER_MAC, PEER, b"\0" * 6, US))
    arp_reply = eth(US_MAC, OTHER_MAC, 0x0806, arp(2, OTHER_MAC, OTHER, US_MAC, US))
    ping = eth(*to_us, 0x0800, ipv4(1, echo(7, 1, bytes(range(56)))))
    dgram = eth(*to_us, 0x0800, ipv4(17, udp(5000, 8, b"hello")))
    closed = eth(*to_us, 0x0800, ipv4(17, udp(5000, 9, b"anyone?")))
    whole = udp(5000, 8, bytes(range(256)) * 3)
    frag1 = eth(*to_us, 0x0800, ipv4(17, whole[:400], ident=9, frag=0x2000))
    frag2 = eth(*to_us, 0x0800, ipv4(17, whole[400:], ident=9, frag=400 // 8))
    return [
        frame_rec(arp_req),
        frame_rec(ping),
        frame_rec(dgram) + frame_rec(closed),
        frame_rec(frag2) + tick_rec(10) + frame_rec(frag1),
        send_rec(1, 7, b"to be resolved") + tick_rec(5) + frame_rec(arp_reply),
        send_rec(0, 8, b"", 3000) + send_rec(3, 8, b"via the gateway"),
        frame_rec(frag1) + tick_rec(200) + tick_rec(200),
        frame_rec(ping, fix=False) + frame_rec(frag2, fix=False),
        b"\x03" + frame_rec(ping) + b"\x03" + send_rec(0, 8, b"x"),
    ] + seeds6()


def seeds6() -> list[bytes]:
    to_us = (US_MAC, PEER_MAC)
    ns = icmp6(135, nd(135, US6, 1), dst=US_SNM)
    solicit = eth(mcast_mac(US_SNM), PEER_MAC, 0x86DD, ipv6(58, ns, dst=US_SNM, hops=255))
    dad = icmp6(135, nd(135, US6, 0), src=UNSPEC, dst=US_SNM)
    probe = eth(mcast_mac(US_SNM), PEER_MAC, 0x86DD, ipv6(58, dad, UNSPEC, US_SNM, 255))
    na = eth(*to_us, 0x86DD, ipv6(58, icmp6(136, nd(136, PEER6, 2, 0x60)), hops=255))
    far = ipv6(58, ns, dst=US_SNM, hops=254)
    beyond = eth(mcast_mac(US_SNM), PEER_MAC, 0x86DD, far)
    cut = icmp6(135, nd(135, US6, 0) + bytes([1, 2]) + PEER_MAC, dst=US_SNM)
    truncated = eth(mcast_mac(US_SNM), PEER_MAC, 0x86DD, ipv6(58, cut, dst=US_SNM, hops=255))
    ping6 = eth(*to_us, 0x86DD, ipv6(58, icmp6(128, struct.pack("!HH", 7, 1) + bytes(56))))
    dgram6 = eth(*to_us, 0x86DD, ipv6(17, udp6(5000, 8, b"hello six")))
    closed6 = eth(*to_us, 0x86DD, ipv6(17, udp6(5000, 9, b"anyone?")))
    whole = udp6(5000, 8, bytes(range(256)) * 8)
    f1 = eth(*to_us, 0x86DD, ipv6(44, frag6(17, 9, 0, True, whole[:1232])))
    f2 = eth(*to_us, 0x86DD, ipv6(44, frag6(17, 9, 1232, False, whole[1232:])))
    return [
        frame_rec(solicit) + frame_rec(probe),
        send_rec(0x80, 7, b"to be resolved") + tick_rec(2) + frame_rec(na),
        frame_rec(beyond, fix=False) + frame_rec(truncated),
        frame_rec(ping6) + frame_rec(dgram6) + frame_rec(closed6),
        frame_rec(f2, fix=False) + tick_rec(10) + frame_rec(f1, fix=False),
        send_rec(0x83, 8, b"", 3000) + send_rec(0x84, 8, b"via the gateway"),
    ]


def main(out: str) -> int:
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    for seed in seeds():
        (directory / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
