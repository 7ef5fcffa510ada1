"""Map operations: what every change to a running NF (or its start-up state) is.

An NF keeps its state in maps (include/veloz/nf.h), so routes, rules, VIPs and
backends all become map updates and deletes. They travel as text lines, the
same in an ops file given to the C tools at start (applied before anything is
attached) and on a running NF's control socket (src/ctl/ctl_session.c):

    update MAP KEYHEX VALUEHEX
    delete MAP KEYHEX
    fill MAP KEYHEX COUNT VALUEHEX   (arrays: COUNT entries from index KEY on)

A value written to a per-CPU map is one copy; the C side writes it to every
CPU or worker. Keys and values are the C structs' bytes (include/veloz/abi.h),
packed here with `struct` in the host's (little-endian) byte order, with
addresses and ports in network order as the packets carry them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from veloz.core.errors import VelozError


@dataclass(frozen=True)
class Op:
    verb: str  # "update", "delete" or "fill" (count array entries from key on)
    map: str
    key: bytes
    value: bytes = b""
    count: int = 0

    def line(self) -> str:
        if self.verb == "fill":
            return f"fill {self.map} {self.key.hex()} {self.count} {self.value.hex()}"
        if self.verb == "delete":
            return f"delete {self.map} {self.key.hex()}"
        return f"update {self.map} {self.key.hex()} {self.value.hex()}"


def update(map_name: str, key: bytes, value: bytes) -> Op:
    return Op("update", map_name, key, value)


def delete(map_name: str, key: bytes) -> Op:
    return Op("delete", map_name, key)


def write_file(ops: Iterable[Op], path: Path) -> int:
    """Write an ops file; returns the number of operations."""
    n = 0
    with path.open("w") as f:
        for op in ops:
            f.write(op.line())
            f.write("\n")
            n += 1
    return n


# ---- Parsing what users type ------------------------------------------------

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_prefix(text: str, what: str = "prefix") -> Network:
    """A CIDR prefix; host bits set is an error (198.18.0.1/24 is a typo)."""
    try:
        return ipaddress.ip_network(text.strip(), strict=True)
    except ValueError as e:
        raise VelozError(f"bad {what} '{text}': {e}") from None


def parse_address(text: str, what: str = "address") -> Address:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        raise VelozError(f"bad {what} '{text}': not an IPv4 or IPv6 address") from None


_MAC = re.compile(r"^([0-9a-fA-F]{2})(:[0-9a-fA-F]{2}){5}$")


def parse_mac(text: str) -> bytes:
    if not _MAC.match(text.strip()):
        raise VelozError(f"bad MAC address '{text}': expected six hex bytes like 02:00:00:00:00:01")
    return bytes(int(b, 16) for b in text.strip().split(":"))


def lpm_key(net: Network) -> bytes:
    """struct vz_lpm4_key / vz_lpm6_key."""
    return net.prefixlen.to_bytes(4, "little") + net.network_address.packed


def parse_u32(text: str | int, what: str, low: int = 0, high: int = 0xFFFFFFFF) -> int:
    try:
        value = int(text, 0) if isinstance(text, str) else int(text)
    except (TypeError, ValueError):
        raise VelozError(f"{what} must be a whole number, not '{text}'") from None
    if not low <= value <= high:
        raise VelozError(f"{what} must be between {low} and {high}, not {value}")
    return value
