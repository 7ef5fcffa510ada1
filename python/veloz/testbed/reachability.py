"""Reachability inside the testbed: one ICMP echo from a namespace."""

from __future__ import annotations

import ipaddress
import os
import socket
import time

from veloz.testbed.plan import _require_root, _step


def ping(ns: str, address: str, timeout: float = 2.0) -> bool:
    """Send one ICMP/ICMPv6 echo from namespace `ns`; True if the reply came back.

    A raw socket opened inside the namespace, because this host has no ping
    binary (and ping_group_range forbids unprivileged ICMP sockets).
    """
    from pyroute2 import netns

    _require_root()
    v6 = ipaddress.ip_address(address).version == 6
    family, proto = (
        (socket.AF_INET6, socket.IPPROTO_ICMPV6) if v6 else (socket.AF_INET, socket.IPPROTO_ICMP)
    )
    request, reply = (128, 129) if v6 else (8, 0)
    ident = os.getpid() & 0xFFFF
    with _step(f"{ns}: opening an ICMP socket"):
        sock = netns.create_socket(ns, family, socket.SOCK_RAW, proto, flags=0)
    with sock:
        echo = _icmp_echo(request, ident)
        sock.sendto(echo, (address, 0))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                data, peer = sock.recvfrom(2048)
            except TimeoutError:
                return False
            if not v6:
                data = data[(data[0] & 0x0F) * 4 :]  # IPv4 raw sockets include the IP header
            if peer[0] == address and data[:1] == bytes([reply]) and data[4:6] == echo[4:6]:
                return True
    return False


def _icmp_echo(icmp_type: int, ident: int) -> bytes:
    """An echo request with sequence 1 and the ICMPv4 checksum; for ICMPv6 the
    kernel overwrites the checksum (it covers the pseudo-header)."""
    body = ident.to_bytes(2, "big") + (1).to_bytes(2, "big") + b"veloz-testbed"
    data = bytes([icmp_type, 0, 0, 0]) + body
    data += b"\0" * (len(data) % 2)
    total = sum(int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    checksum = ~total & 0xFFFF
    return bytes([icmp_type, 0]) + checksum.to_bytes(2, "big") + body
