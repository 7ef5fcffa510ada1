"""Seeds for fuzz-stack (tests/fuzz/fuzz_stack.c): records of frames, sends
and ticks that reach each part of the engine (ARP, ICMP echo, UDP, two
fragments), built with the standard library only."""

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
    ]


def main(out: str) -> int:
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    for seed in seeds():
        (directory / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
