"""Per-packet cost: each case of each NF's fixture table (nf/fixtures/NF.py),
and memaccess with N memory accesses per packet (the seed cost study's
curve), through BPF_PROG_TEST_RUN (the kernel's JIT, what xdp and
xdp-generic run) and natively (the same source built as a shared object,
what afxdp and dpdk run), with no veth and no generator in the way:
`veloz replay --repeat N` of the table under its config, which times every
case N times in a row (the kernel's loop and clock for xdp, a loop over the
.so's entry point for native); the curve on one 64-byte UDP frame. Trials
interleaved across NFs and builds; the figures are medians over trials.

A case is timed after the table's earlier cases and its own first run, so
an NF with state is timed in the state its repeats leave: a rate-limited
source's case costs what a source with an empty bucket costs.

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
import statistics
import subprocess
import tempfile
from pathlib import Path

from veloz.core.errors import VelozError
from veloz.core.proc import veloz_argv
from veloz.lab import fixtures, replay, summary

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


def timed_replay(nf: str, args: list[str], build: str, pcap: Path, repeat: int) -> list[dict]:
    """`veloz replay --json --repeat` records: one per packet, then the summary."""
    argv = ["replay", nf, "--backend", build, "--in", str(pcap), "--json", "--repeat",
            str(repeat), *args]  # fmt: skip
    done = subprocess.run(veloz_argv(*argv), capture_output=True, text=True, timeout=1800,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise VelozError(f"replay of {nf} on {build} failed: {done.stderr.strip()}", code=1)
    return [json.loads(line) for line in done.stdout.splitlines()]


def ns_per_packet(nf: str, sets: list[str], build: str, pcap: Path, repeat: int) -> float:
    args = [a for s in sets for a in ("--set", s)]
    return float(timed_replay(nf, args, build, pcap, repeat)[-1]["ns_per_packet"])


CALLGRIND_RUNS = (1_000, 11_000)
TABLE_CALLGRIND_RUNS = (10, 110)  # per case: a table has up to ~150


def native_instructions(
    nf: str,
    sets: list[str],
    pcap: Path,
    config: Path | None = None,
    packets: int = 1,
    runs: tuple[int, int] = CALLGRIND_RUNS,
) -> float | None:
    """Instructions per packet of the native build (callgrind) over the
    pcap's packets, or None where valgrind is missing."""
    if not shutil.which("valgrind"):
        return None
    totals = []
    for repeat in runs:
        args = argparse.Namespace(nf=nf, config=config and str(config), set=sets,
                                  input=str(pcap), out=None, backend="native", json=True,
                                  repeat=repeat)  # fmt: skip
        with tempfile.NamedTemporaryFile(prefix="veloz-callgrind-") as out:
            argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out.name}",
                    *replay.command(args)]  # fmt: skip
            # a config's map entries reach vz-replay through an inherited fd
            fds = [int(a.rsplit("/", 1)[1]) for a in argv if a.startswith("/proc/self/fd/")]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                                  check=False, pass_fds=fds)  # fmt: skip
            if done.returncode != 0:
                raise VelozError(f"callgrind of {nf} failed: {done.stderr.strip()[-300:]}", 1)
            text = Path(out.name).read_text()
        found = re.search(r"^(?:summary|totals): (\d+)", text, re.MULTILINE)
        if not found:
            raise VelozError(f"callgrind wrote no instruction count for {nf}", code=1)
        totals.append(int(found.group(1)))
    return (totals[1] - totals[0]) / ((runs[1] - runs[0]) * packets)


def table_args(config: Path | None) -> list[str]:
    return ["--config", str(config)] if config is not None else []


class Cost:
    name = "cost"
    title = "Per-packet cost: NFs' fixture cases and memory accesses, kernel JIT against native"
    doc = __doc__

    def _curve(self, s: dict) -> list[tuple[str, list[str], int]]:
        return [("memaccess", [f"accesses={n}"], n) for n in s["accesses"]]

    def count(self, s: dict) -> int:
        tables = [fixtures.load(nf) for nf in fixtures.names()]
        per_trial = sum(len(t.fixtures) + 1 for t in tables) + len(self._curve(s))
        return len(tables) + len(self._curve(s)) + s["trials"] * len(BUILDS) * per_trial

    def run(self, ctx) -> None:
        s = ctx.settings
        with tempfile.TemporaryDirectory() as tmp:
            pcap = _frame_pcap(Path(tmp))
            tables = {nf: fixtures.load(nf) for nf in fixtures.names()}
            written = {nf: t.write(Path(tmp) / nf) for nf, t in tables.items()}
            for nf, (in_pcap, config) in written.items():
                ins = native_instructions(nf, [], in_pcap, config, len(tables[nf].fixtures),
                                          TABLE_CALLGRIND_RUNS)  # fmt: skip
                ctx.record(f"{nf}: instructions (callgrind)",
                           {"nf": nf, "backend": "native", "accesses": None,
                            "instructions_per_packet": ins, "size": None},
                           kind="instructions", experiment=self.name)  # fmt: skip
            for nf, sets, accesses in self._curve(s):
                ins = native_instructions(nf, sets, pcap)
                ctx.record(f"{nf} {' '.join(sets)}: instructions (callgrind)",
                           {"nf": nf, "backend": "native", "accesses": accesses,
                            "instructions_per_packet": ins, "size": 64},
                           kind="instructions", experiment=self.name)  # fmt: skip
            for t in range(s["trials"]):
                for nf, (in_pcap, config) in written.items():
                    for build in BUILDS:
                        self._time_table(ctx, tables[nf], build, in_pcap, config, t)
                for nf, sets, accesses in self._curve(s):
                    for build in BUILDS:
                        ns = ns_per_packet(nf, sets, build, pcap, s["repeat"])
                        ctx.record(f"{nf} {' '.join(sets)} {build}",
                                   {"nf": nf, "backend": build, "accesses": accesses,
                                    "ns_per_packet": ns, "size": 64},
                                   kind="time", trial=t, experiment=self.name)  # fmt: skip

    def _time_table(self, ctx, table: fixtures.Table, build: str, pcap: Path,
                    config: Path | None, trial: int) -> None:  # fmt: skip
        """One trial of every case of a table: a record per case, and the
        table's mean (what `veloz replay` reports) as the NF's figure."""
        out = timed_replay(table.nf, table_args(config), build, pcap, ctx.settings["repeat"])
        *records, summary_line = out
        if len(records) != len(table.fixtures):
            raise VelozError(f"replay of {table.nf} on {build}: {len(records)} records "
                             f"for {len(table.fixtures)} cases", code=1)  # fmt: skip
        for f, rec in zip(table.fixtures, records, strict=True):
            ctx.record(f"{table.nf}/{f.name} {build}",
                       {"nf": table.nf, "fixture": f.name, "verdict": f.verdict,
                        "backend": build, "ns_per_packet": float(rec["ns"]),
                        "size": len(f.input)},
                       kind="fixture", trial=trial, experiment=self.name)  # fmt: skip
        ctx.record(f"{table.nf} {build}",
                   {"nf": table.nf, "backend": build, "accesses": None,
                    "ns_per_packet": float(summary_line["ns_per_packet"]), "size": None,
                    "cases": len(table.fixtures)},
                   kind="time", trial=trial, experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        times = [r for r in records if r["kind"] == "time"]
        nfs = [r for r in times if r["accesses"] is None]
        mem = [r for r in times if r["accesses"] is not None]
        ins = [r for r in records if r["kind"] == "instructions"]
        out = [summary.rate_section(
            nfs, "ns per packet of each NF (mean over its fixture cases)",
            metric="ns_per_packet", unit=1.0, unit_name="ns", category="backend", series="nf",
            baseline="native",
            text=self.doc + f" {s['repeat']:,} runs per case per trial, {s['trials']} trials.",
        )]  # fmt: skip
        out.append(fixture_section([r for r in records if r["kind"] == "fixture"], s))
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
                "are included; an NF's row is the mean over its fixture cases.",
                "table": {"columns": ["nf", "accesses", "instructions per packet"],
                          "rows": [[r["nf"], r["accesses"], r["instructions_per_packet"]]
                                   for r in ins]},
            })  # fmt: skip
        return out


def fixture_section(records: list[dict], s: dict) -> dict:
    """A row per fixture case: its median ns per packet on each build over
    the trials, and xdp's over native's."""
    rows = []
    for (nf, name), recs in summary.group(records, "nf", "fixture").items():
        by_build = {b: summary.values([r for r in recs if r["backend"] == b], "ns_per_packet")
                    for b in BUILDS}  # fmt: skip
        medians = {b: statistics.median(v) if v else None for b, v in by_build.items()}
        ratio = (medians["xdp"] / medians["native"]
                 if medians["xdp"] is not None and medians["native"] else None)  # fmt: skip
        rows.append([nf, name, recs[0]["verdict"], recs[0]["size"],
                     *(_round(medians[b]) for b in BUILDS), _round(ratio, 3),
                     min(len(v) for v in by_build.values())])  # fmt: skip
    return {
        "title": "ns per packet of each fixture case (median over trials)",
        "text": "Every case of every NF's fixture table (nf/fixtures/NF.py), timed "
        f"{s['repeat']:,} times in a row per trial. A case of an NF with state is timed in "
        "the state the cases before it and its own repeats leave.",
        "table": {"columns": ["nf", "case", "verdict", "bytes", "xdp ns", "native ns",
                              "xdp / native", "trials"], "rows": rows},
    }  # fmt: skip


def _round(v: float | None, digits: int = 1) -> float | None:
    return None if v is None else round(v, digits)


COST = Cost()
