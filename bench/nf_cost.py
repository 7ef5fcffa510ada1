"""Per-packet cost of each NF, kernel build vs native build, side by side.

    .venv/bin/python bench/nf_cost.py [--trials 5] [--repeat 200000]

One 64-byte UDP frame, `veloz replay --repeat N` on xdp (BPF_PROG_TEST_RUN:
the kernel's loop and clock) and native (a loop over the .so's entry point),
trials interleaved across NFs and backends (A B C A B C ...). Prints the
median ns/packet of each and the ratio xdp/native. A benchmark, not a test:
it asserts nothing. Needs root for the xdp backend.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from scapy.all import IP, UDP, Ether, Raw, wrpcap

from veloz.proc import veloz_argv

CASES = [
    ("drop", ()), ("pass", ()), ("tx", ()), ("redirect", ()),
    ("memaccess", ("accesses=0",)), ("memaccess", ("accesses=100",)),
    ("memaccess", ("accesses=400",)), ("memaccess", ("accesses=1600",)),
    ("memaccess", ("accesses=3200",)),
]  # fmt: skip


def one(nf: str, sets: tuple[str, ...], backend: str, pcap: Path, repeat: int) -> float:
    args = ["replay", nf, "--backend", backend, "--in", str(pcap), "--json",
            "--repeat", str(repeat)]  # fmt: skip
    for s in sets:
        args += ["--set", s]
    out = subprocess.run(veloz_argv(*args), capture_output=True, text=True, check=True).stdout
    return float(json.loads(out.splitlines()[-1])["ns_per_packet"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=200_000)
    args = ap.parse_args()
    frame = (
        Ether(src="02:00:c6:12:00:01", dst="02:00:c6:12:00:02")
        / IP(src="198.18.0.1", dst="198.18.1.2")
        / UDP(sport=1024, dport=9)
        / Raw(bytes(22))
    )
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "one.pcap"
        wrpcap(str(pcap), [frame], linktype=1)
        samples: dict[tuple[str, str, str], list[float]] = {}
        for _ in range(args.trials):
            for nf, sets in CASES:
                for backend in ("xdp", "native"):
                    key = (nf, ",".join(sets), backend)
                    samples.setdefault(key, []).append(one(nf, sets, backend, pcap, args.repeat))
    print(f"ns per 64-byte packet, median of {args.trials} trials, {args.repeat} runs each")
    print(f"{'nf':<10} {'config':<16} {'xdp':>8} {'native':>8} {'xdp/native':>11}")
    for nf, sets in CASES:
        cfg = ",".join(sets)
        k = statistics.median(samples[(nf, cfg, "xdp")])
        n = statistics.median(samples[(nf, cfg, "native")])
        print(f"{nf:<10} {cfg or '-':<16} {k:8.1f} {n:8.1f} {k / n:11.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
