"""Per-packet cost: each NF, and memaccess with N memory accesses per packet
(the seed cost study's curve), through BPF_PROG_TEST_RUN (the kernel's JIT,
what xdp and xdp-generic run) and natively (the same source built as a
shared object, what afxdp and dpdk run), with no veth and no generator in
the way: `veloz replay --repeat N` on one 64-byte UDP frame, the kernel's
loop and clock for xdp, a loop over the .so's entry point for native.
Trials interleaved across cases and builds.

Hardware counters are not exposed to these VMs, so instead of perf stat the
native build's instructions per packet are counted exactly, once per case,
with valgrind's callgrind: two runs of different lengths, and the
difference in instructions over the difference in packets, which cancels
start-up.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from veloz import replay
from veloz.errors import VelozError
from veloz.lab import summary
from veloz.proc import veloz_argv

NFS = ("drop", "pass", "tx", "redirect")
BUILDS = ("xdp", "native")


def _frame_pcap(directory: Path) -> Path:
    from scapy.all import IP, UDP, Ether, Raw, wrpcap

    frame = (
        Ether(src="02:00:c6:12:00:01", dst="02:00:c6:12:00:02")
        / IP(src="198.18.0.1", dst="198.18.1.2")
        / UDP(sport=1024, dport=9)
        / Raw(bytes(22))
    )
    path = directory / "one.pcap"
    wrpcap(str(path), [frame], linktype=1)
    return path


def ns_per_packet(nf: str, sets: list[str], build: str, pcap: Path, repeat: int) -> float:
    argv = ["replay", nf, "--backend", build, "--in", str(pcap), "--json", "--repeat",
            str(repeat)]  # fmt: skip
    for s in sets:
        argv += ["--set", s]
    done = subprocess.run(veloz_argv(*argv), capture_output=True, text=True, timeout=600,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise VelozError(f"replay of {nf} on {build} failed: {done.stderr.strip()}", code=1)
    return float(json.loads(done.stdout.splitlines()[-1])["ns_per_packet"])


CALLGRIND_RUNS = (1_000, 11_000)


def native_instructions(nf: str, sets: list[str], pcap: Path) -> float | None:
    """Instructions per packet of the native build (callgrind), or None
    where valgrind is missing."""
    if not shutil.which("valgrind"):
        return None
    totals = []
    for repeat in CALLGRIND_RUNS:
        args = argparse.Namespace(nf=nf, config=None, set=sets, input=str(pcap), out=None,
                                  backend="native", json=True, repeat=repeat)  # fmt: skip
        with tempfile.NamedTemporaryFile(prefix="veloz-callgrind-") as out:
            argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out.name}",
                    *replay.command(args)]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
            if done.returncode != 0:
                raise VelozError(f"callgrind of {nf} failed: {done.stderr.strip()[-300:]}", 1)
            text = Path(out.name).read_text()
        found = re.search(r"^(?:summary|totals): (\d+)", text, re.MULTILINE)
        if not found:
            raise VelozError(f"callgrind wrote no instruction count for {nf}", code=1)
        totals.append(int(found.group(1)))
    return (totals[1] - totals[0]) / (CALLGRIND_RUNS[1] - CALLGRIND_RUNS[0])


class Cost:
    name = "cost"
    title = "Per-packet cost: NFs and memory accesses, kernel JIT against native"
    doc = __doc__

    def _cases(self, s: dict) -> list[tuple[str, list[str], int | None]]:
        return [(nf, [], None) for nf in NFS] + [
            ("memaccess", [f"accesses={n}"], n) for n in s["accesses"]
        ]

    def count(self, s: dict) -> int:
        return (s["trials"] * len(BUILDS) + 1) * len(self._cases(s))

    def run(self, ctx) -> None:
        s = ctx.settings
        with tempfile.TemporaryDirectory() as tmp:
            pcap = _frame_pcap(Path(tmp))
            for nf, sets, accesses in self._cases(s):
                ins = native_instructions(nf, sets, pcap)
                ctx.record(f"{nf} {' '.join(sets)}: instructions (callgrind)",
                           {"nf": nf, "backend": "native", "accesses": accesses,
                            "instructions_per_packet": ins, "size": 64},
                           kind="instructions", experiment=self.name)  # fmt: skip
            for t in range(s["trials"]):
                for nf, sets, accesses in self._cases(s):
                    for build in BUILDS:
                        ns = ns_per_packet(nf, sets, build, pcap, s["repeat"])
                        ctx.record(f"{nf} {' '.join(sets)} {build}",
                                   {"nf": nf, "backend": build, "accesses": accesses,
                                    "ns_per_packet": ns, "size": 64},
                                   kind="time", trial=t, experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        times = [r for r in records if r["kind"] == "time"]
        nfs = [r for r in times if r["accesses"] is None]
        mem = [r for r in times if r["accesses"] is not None]
        ins = [r for r in records if r["kind"] == "instructions"]
        out = [summary.rate_section(
            nfs, "ns per packet of each NF", metric="ns_per_packet", unit=1.0,
            unit_name="ns", category="backend", series="nf", baseline="native",
            text=self.doc + f" {s['repeat']:,} runs per trial, {s['trials']} trials.",
        )]  # fmt: skip
        if mem:
            out.append(summary.curve_section(
                mem, "ns per packet against memory accesses per packet (memaccess)",
                x="accesses", y="ns_per_packet", xlabel="accesses per packet",
                ylabel="ns per packet",
                text="The seed study's shape: cost grows linearly with the work per packet; "
                     "the fixed overhead of the hook shows where the lines meet N = 0.",
            ))  # fmt: skip
        if any(r["instructions_per_packet"] is not None for r in ins):
            out.append({
                "title": "Instructions per packet of the native build (callgrind, exact)",
                "text": "Counted, not timed: the same on any x86-64 machine for this build. "
                "Per packet through vz-replay's loop, so the loop's own few instructions "
                "are included.",
                "table": {"columns": ["nf", "accesses", "instructions per packet"],
                          "rows": [[r["nf"], r["accesses"], r["instructions_per_packet"]]
                                   for r in ins]},
            })  # fmt: skip
        return out


COST = Cost()
