# SPDX-License-Identifier: BSD-2-Clause
"""Each NF's fixture table: the packets it is tested and costed on.

The shape is katran's (katran/lib/testing/fixtures/KatranTestFixtures.h:
description, expectedReturnValue, input and expected output packet): a
list of cases, each an input frame, the verdict the NF must return, the
frame it must send and a short description. Where katran repeats the input
as the output of XDP_PASS and XDP_DROP, a case here has no output (replay
writes only the frames an NF sends) and the test checks the length is kept.
Ours live next to the NF they describe, as nf/fixtures/NF.py, and are Python, not base64 data: the
expected frames are built there from what the NF is specified to do (a
TTL one lower, an outer header in front), so a reader sees why each byte is
what it is, and nothing is copied from what a build once printed. The C
side reads them as what the table becomes: a pcap and a config file, through
`veloz replay`, exactly as a user replays any capture.

Two readers: tests/prog replays every table on the XDP build
(BPF_PROG_TEST_RUN; the bytecode xdp and xdp-generic run) and the native
build (the code afxdp, dpdk and the userspace reference run) and checks every
verdict, port and output byte; `veloz bench cost` times every case.

A table's cases run in order through one NF instance: an NF with state (the
ddos token buckets, the lb connection table) sees them as a sequence, and a
case's verdict may depend on the cases before it.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from veloz.core import paths
from veloz.core.errors import VelozError

# Where the tables are: beside the NFs' sources (a checkout only).
FIXTURE_DIR = paths.REPO_ROOT / "nf" / "fixtures"
NF_DIR = paths.REPO_ROOT / "nf"
VERDICTS = ("aborted", "drop", "pass", "tx", "redirect")
SENDS = ("tx", "redirect")  # the verdicts that put a frame on a port


@dataclass(frozen=True)
class Fixture:
    """One case: what goes in, what the NF decides and what comes out."""

    name: str
    description: str
    input: bytes
    verdict: str  # one of VERDICTS
    output: bytes | None = None  # the frame sent (tx, redirect); None: nothing sent
    port: int | None = None  # redirect: the egress port


@dataclass(frozen=True)
class Table:
    """An NF's cases and the config they run under."""

    nf: str
    fixtures: list[Fixture]
    config: str = ""  # TOML; empty: the NF's defaults
    files: dict[str, str] = field(default_factory=dict)  # written beside the config
    # verdicts the NF returns that no replay can reach, and why
    unreachable: dict[str, str] = field(default_factory=dict)

    def write(self, directory: Path) -> tuple[Path, Path | None]:
        """The table as `veloz replay` reads it: IN.pcap and the config."""
        directory.mkdir(parents=True, exist_ok=True)
        pcap = directory / f"{self.nf}.fixtures.pcap"
        pcap.write_bytes(pcap_bytes([f.input for f in self.fixtures]))
        if not self.config:
            return pcap, None
        for name, text in self.files.items():
            (directory / name).write_text(text)
        config = directory / f"{self.nf}.fixtures.toml"
        config.write_text(self.config)
        return pcap, config


def fixture(
    name: str,
    description: str,
    frame: object,
    verdict: str,
    output: object | None = None,
    port: int | None = None,
) -> Fixture:
    """A Fixture from scapy packets or bytes."""
    return Fixture(
        name, description, bytes(frame), verdict, None if output is None else bytes(output), port
    )


def pcap_bytes(frames: list[bytes]) -> bytes:
    """A classic little-endian pcap (linktype Ethernet), frame i at i µs."""
    out = bytearray((0xA1B2C3D4).to_bytes(4, "little"))
    out += (2).to_bytes(2, "little") + (4).to_bytes(2, "little")
    out += bytes(8) + (65535).to_bytes(4, "little") + (1).to_bytes(4, "little")
    for i, frame in enumerate(frames):
        for word in (1_700_000_000, i, len(frame), len(frame)):
            out += word.to_bytes(4, "little")
        out += frame
    return bytes(out)


def names() -> list[str]:
    """Every NF with a table, in name order."""
    return sorted(p.stem for p in FIXTURE_DIR.glob("*.py") if not p.stem.startswith("_"))


def _module(nf: str) -> ModuleType:
    path = FIXTURE_DIR / f"{nf}.py"
    if not path.is_file():
        raise VelozError(f"no fixture table for NF '{nf}' ({path} is missing)", code=1)
    name = f"veloz_fixtures_{nf}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def module(nf: str) -> ModuleType:
    """nf/fixtures/NF.py itself, for the helpers a test shares with it."""
    return _module(nf)


def load(nf: str) -> Table:
    table = _module(nf).TABLE
    if not isinstance(table, Table) or table.nf != nf:
        raise VelozError(f"nf/fixtures/{nf}.py: TABLE is not the Table of '{nf}'", code=1)
    return table


_RETURN = re.compile(r"\bVZ_(DROP|PASS|TX|REDIRECT|ABORTED)\b")


def source_verdicts(nf: str) -> set[str]:
    """The verdicts nf/NF.c can return: the VZ_ verdicts its source names."""
    text = (NF_DIR / f"{nf}.c").read_text()
    return {m.lower() for m in _RETURN.findall(text)}


def basic_frames() -> list[tuple[str, str, bytes]]:
    """(name, description, frame): one of each common kind, for the NFs that
    treat every frame alike (drop, pass, tx, redirect, memaccess)."""
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Dot1Q, Ether

    eth = Ether(src="02:00:c6:12:00:01", dst="02:00:c6:12:00:02")
    ip4 = IP(src="198.18.0.1", dst="198.19.0.2", id=1)
    ip6 = IPv6(src="fd00:198:18::1", dst="fd00:198:19::2", hlim=64)
    udp = UDP(sport=1024, dport=9)
    return [
        ("udp4-64", "IPv4 UDP, the 64-byte frame of the benchmarks (60 without FCS)",
         bytes(eth / ip4 / udp / bytes(18))),
        ("tcp4-syn", "IPv4 TCP SYN", bytes(eth / ip4 / TCP(sport=40000, dport=80, flags="S"))),
        ("icmp4-echo", "IPv4 ICMP echo request", bytes(eth / ip4 / ICMP(id=1, seq=1))),
        ("udp6", "IPv6 UDP", bytes(eth / ip6 / udp / bytes(18))),
        ("arp-request", "ARP request", bytes(eth / ARP(psrc="198.18.0.1", pdst="198.19.0.2"))),
        ("vlan-udp4", "802.1Q VLAN 100 over IPv4 UDP", bytes(eth / Dot1Q(vlan=100) / ip4 / udp)),
        ("udp4-1514", "IPv4 UDP, a full 1514-byte frame", bytes(eth / ip4 / udp / bytes(1472))),
        ("udp4-9014", "IPv4 UDP jumbo frame (multi-buffer at XDP)",
         bytes(eth / ip4 / udp / bytes(8972))),
        ("eth-only", "a bare Ethernet header: the smallest frame an NF sees",
         bytes(eth)[:12] + b"\x08\x00"),
    ]  # fmt: skip


def mac_swapped(frame: bytes) -> bytes:
    return frame[6:12] + frame[0:6] + frame[12:]
