"""Seed corpora for the fuzzers: every frame of tests/vectors, one file each,
and config assignments for fuzz-config."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from scapy.all import rdpcap

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
CONFIG_SEEDS = [
    "accesses=0", "accesses=16384", "accesses=16385", "accesses=-1", "accesses=0x10",
    "port=1", "port=63", "port=64", "port=", "=1", "port", "nosuch=1", "port=1=2",
    "accesses=99999999999999999999", "port= 1",
]  # fmt: skip


def write(directory: Path, data: bytes) -> None:
    (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)


def main(out: str) -> int:
    frames, config = Path(out) / "frames", Path(out) / "config"
    frames.mkdir(parents=True, exist_ok=True)
    config.mkdir(parents=True, exist_ok=True)
    for pcap in sorted(VECTORS.glob("*.pcap")):
        for pkt in rdpcap(str(pcap)):
            write(frames, bytes(pkt))
    for text in CONFIG_SEEDS:
        write(config, text.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
