"""`veloz demo`: the main job on the built-in testbed.

Brings the testbed up, runs the drop NF on dut-gen (in vz-dut) on every
backend (xdp, xdp-generic, afxdp, dpdk, and the kernel's nftables drop as
the linux baseline), and sends traffic from vz-gen twice per backend:
an exact phase (a fixed count at a paced rate every packet of which must be
counted) and a peak phase (as fast as the generator goes, for a few seconds).
Prints what the generator sent and the NF counted, what the port missed, the
rates, and each backend's peak as a ratio to linux's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table

from veloz import paths, testbed
from veloz.errors import VelozError
from veloz.proc import Runner, in_netns, run_json, veloz_argv

BACKENDS = ("xdp", "xdp-generic", "afxdp", "dpdk", "linux")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="the main job: drop NF on every backend, traffic from vz-gen",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--count", type=int, default=500_000, help="packets in the exact phase")
    p.add_argument("--rate", default="500k", help="pps of the exact phase")
    p.add_argument("--peak-seconds", type=float, default=3.0, help="length of the peak phase")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--keep-testbed", action="store_true", help="leave the testbed up")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=run)


def rx_packets(netns: str, ifname: str) -> int:
    """The interface's received-frames counter, as the kernel keeps it."""
    done = subprocess.run(["ip", "-n", netns, "-j", "-s", "link", "show", ifname],
                          capture_output=True, text=True, check=True, timeout=10)  # fmt: skip
    return json.loads(done.stdout)[0]["stats64"]["rx"]["packets"]


def measure(backend: str, gen_args: list[str], timeout: float, nf: str = "drop") -> dict:
    """One phase: `nf` running in vz-dut, traffic from vz-gen, both counts.

    What is counted is the NF's own verdict (drop for drop, tx for tx, ...);
    for tx, `delivered` is what arrived back at vz-gen, which is what counts.
    """
    nf_argv = veloz_argv("run", nf, "--backend", backend, "--iface", "dut-gen", "--json")
    with Runner(in_netns("vz-dut", nf_argv)) as runner:
        back_before = rx_packets("vz-gen", "gen-dut")
        sent = run_json(
            in_netns("vz-gen", veloz_argv("gen", "--iface", "gen-dut", "--json", *gen_args)),
            timeout,
        )
        time.sleep(0.3)  # the last frames reach the DUT's counters
        counted = runner.stop()
        back = rx_packets("vz-gen", "gen-dut") - back_before
    seconds = sent["seconds"]
    return {
        "backend": backend,
        "sent": sent["xmit"] if sent["xmit"] is not None else sent["sent"],
        "counted": counted[nf],
        "errors": counted["errors"],
        "seconds": seconds,
        "offered_pps": sent["pps"],
        "counted_pps": counted[nf] / seconds if seconds else 0.0,
        "delivered": back if nf == "tx" else None,
        "delivered_pps": back / seconds if nf == "tx" and seconds else None,
    }


def run(args: argparse.Namespace) -> int:
    paths.nf("drop")  # fail early if not built
    if args.count < 1 or args.peak_seconds <= 0:
        raise VelozError("--count and --peak-seconds must be positive")
    err = Console(stderr=True)
    rows = []
    try:
        err.print("[bold]testbed up[/]: vz-gen —veth— vz-dut —veth— vz-sink")
        testbed.up()
        for backend in BACKENDS:
            err.print(f"[bold]{backend}[/]: exact phase, {args.count} packets at {args.rate} pps")
            exact = measure(
                backend,
                ["--size", str(args.size), "--count", str(args.count), "--rate", args.rate],
                timeout=120,
            )
            rows.append({"phase": "exact", **exact})
            err.print(f"[bold]{backend}[/]: peak phase, {args.peak_seconds} s unpaced")
            peak = measure(
                backend,
                ["--size", str(args.size), "--rate", "0", "--duration", str(args.peak_seconds)],
                timeout=120,
            )
            rows.append({"phase": "peak", **peak})
    except testbed.TestbedError as e:
        raise VelozError(str(e), code=1) from None
    finally:
        if not args.keep_testbed:
            testbed.down()
    if args.json:
        print(json.dumps({"nf": "drop", "size": args.size, "results": rows}, indent=2))
    else:
        print_table(rows, args.size)
    exact_ok = all(r["sent"] == r["counted"] for r in rows if r["phase"] == "exact")
    if not exact_ok:
        print("veloz: the exact phase lost packets", file=sys.stderr)
    return 0 if exact_ok else 1


def print_table(rows: list[dict], size: int) -> None:
    table = Table(title=f"drop NF, {size}-byte frames, vz-gen -> vz-dut (veth)")
    cols = ("backend", "phase", "sent", "counted", "missed", "lost", "offered pps", "counted pps",
            "vs linux")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="left" if col in ("backend", "phase") else "right")
    linux = next((r["counted_pps"] for r in rows if r["backend"] == "linux"
                  and r["phase"] == "peak"), None)  # fmt: skip
    for r in rows:
        missed = r["errors"]["rx_missed"]
        ratio = r["counted_pps"] / linux if linux and r["phase"] == "peak" else None
        table.add_row(
            r["backend"],
            r["phase"],
            f"{r['sent']:,}",
            f"{r['counted']:,}",
            "-" if missed is None else f"{missed:,}",
            f"{r['sent'] - r['counted']:,}",
            f"{r['offered_pps']:,.0f}",
            f"{r['counted_pps']:,.0f}",
            "" if ratio is None else f"{ratio:.2f}x",
        )
    # Not a terminal (CI, a pipe): rich would squeeze the table to 80 columns
    # and cut the numbers short.
    console = Console() if sys.stdout.isatty() else Console(width=120)
    console.print(table)
    print(
        "sent: frames the generator's driver transmitted; counted: by the NF's own counters;\n"
        "missed: dropped by the port before a userspace worker saw them (-: not known there).\n"
        "peak: unpaced, as fast as the generator goes. Generator and DUT share this machine's\n"
        "CPUs and a veth pair, so the peak is a testbed figure, not the NF's ceiling."
    )
