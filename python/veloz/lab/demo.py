"""`veloz demo`: the main job, the headline experiment on the built-in testbed.

1. Brings the testbed up (vz-gen -- vz-dut -- vz-sink, veth pairs).
2. Exact phase: the drop NF on dut-gen on every backend (xdp, xdp-generic,
   afxdp, dpdk, and the kernel's nftables drop as the linux baseline), a
   fixed count of frames at a paced rate, every one of which must be counted.
3. Headline: drop and tx at 64 and 1500 bytes on every backend, the
   generator unpaced, trials interleaved across backends (5 by default), and
   the generator into a sink that does nothing, which is the most this
   testbed can offer. Prints each backend's median rate with its 95% CI and
   its ratio to linux, and writes the results and an HTML report.
4. Cost, in the same trials: the drop NF at a fixed offered rate below
   every backend's peak (--cost-rate, 500 kpps), and the generator into a
   null sink at that rate. Prints the DUT's CPU cores and ns per packet
   with 95% CIs, and the ratio of ns per packet to linux with its CI: where
   the generator caps the peak, the cost still shows the difference.

Takes about 8-9 minutes with the defaults (under 2 of them the cost phase).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from rich.console import Console
from rich.table import Table

from veloz import testbed
from veloz.core import paths
from veloz.core.errors import VelozError
from veloz.lab import bench
from veloz.lab.gen import parse_rate

BACKENDS = ("xdp", "xdp-generic", "afxdp", "dpdk", "linux")


# Frames each userspace backend's rx ring holds (src/afxdp, src/dpdk): a
# worker kept off its CPU for longer than they last at the offered rate
# loses the rest to the port.
RX_RING = {"afxdp": 4096, "dpdk": 2048}
# Runs of a backend whose losses other work on the machine explains.
ATTEMPTS = 3


def starved(r: dict, rate: int) -> bool:
    """Whether every frame the run lost was missed by the port while its
    worker waited for a CPU longer than its ring lasts: the machine's other
    work, not the NF, took those frames."""
    lost, missed, wait = (
        r["sent"] - r["counted"],
        r["errors"].get("rx_missed"),
        r.get("worker_wait"),
    )
    ring = RX_RING.get(r["backend"])
    return bool(lost and missed == lost and wait and ring
                and wait["max_ms"] >= 1e3 * ring / rate)  # fmt: skip


def exact_phase(count: int, rate: int) -> list[dict]:
    """Every backend must count every frame of a paced run. A run whose
    losses the machine's other work explains (starved) is made again, up to
    ATTEMPTS runs; each earlier run is kept in the record ("starved_runs")."""
    from veloz.lab import trial

    out = []
    for backend in BACKENDS:
        earlier: list[dict] = []
        while True:
            r = trial.measure("drop", backend, size=64, rate=rate, seconds=None, count=count)
            if len(earlier) + 1 == ATTEMPTS or not starved(r, rate):
                break
            earlier.append(r)
        out.append(r | {"starved_runs": [explain_loss(e) for e in earlier]})
    return out


def run(args: argparse.Namespace) -> int:
    paths.nf("drop")  # fail early if not built
    if args.count < 1:
        raise VelozError("--count must be positive")
    rate = parse_rate(args.rate, 64)
    cost_rate = parse_rate(args.cost_rate, 64, "--cost-rate")
    if cost_rate < 1:
        raise VelozError("--cost-rate must be a positive rate (the cost phase is paced)")
    ns = argparse.Namespace(
        experiment="headline", backends=",".join(BACKENDS), sizes=args.sizes,
        trials=args.trials, seconds=args.seconds, nf=None, rates=None, steps=5, loss=0.005,
        noises="none", accesses="0", repeat=1, out=args.out,
    )  # fmt: skip
    settings = bench.settings_from(ns)  # every option checked before the testbed is touched
    settings["cost_rate"] = cost_rate
    err = Console(stderr=True)
    t0 = time.monotonic()
    try:
        err.print("[bold]testbed up[/]: vz-gen —veth— vz-dut —veth— vz-sink")
        testbed.up()
        err.print(f"[bold]exact phase[/]: {args.count:,} frames at {rate:,} pps, every backend")
        exact = exact_phase(args.count, rate)
        out = bench.out_dir(ns, "headline")
        path = bench.run_experiment(settings, out, console=err)
    except testbed.TestbedError as e:
        raise VelozError(str(e), code=1) from None
    finally:
        if not args.keep_testbed:
            testbed.down()
    result = json.loads(path.read_text())
    from veloz.lab.experiments import headline_cost
    from veloz.lab.report import write_report

    report = write_report(out)
    took = timing(result["records"], time.monotonic() - t0)
    cost = headline_cost.table(result["records"])
    if args.json:
        print(json.dumps({"exact": exact, "headline": result["sections"],
                          "summary": result.get("summary"), "cost": cost, "timing": took,
                          "results": str(path), "report": str(report)}, indent=1))  # fmt: skip
    else:
        print_exact(exact)
        for r in exact:
            for why in r["starved_runs"]:
                print(f"made again: {why}")
        print_headline(result["records"], settings)
        print_cost(cost, settings)
        print_side_by_side(result["records"], cost, settings)
        print(f"took {took['total_s']:.0f} s: peak runs {took['peak_s']:.0f} s, cost runs "
              f"{took['cost_s']:.0f} s, the rest (testbed, exact phase, report) "
              f"{took['total_s'] - took['peak_s'] - took['cost_s']:.0f} s")  # fmt: skip
        print(f"results: {path}\nreport:  {report}")
    lost = [r for r in exact if r["sent"] != r["counted"]]
    if lost:
        print(f"veloz: the exact phase lost frames on {', '.join(map(explain_loss, lost))}",
              file=sys.stderr)  # fmt: skip
    return 1 if lost else 0


def explain_loss(r: dict) -> str:
    """'dpdk (1,452 of 200,000: missed by the port while its worker waited
    9.1 ms for its CPU)': a worker kept off its CPU is the machine's other
    work, one that was not is the NF's own."""
    what = f"{r['backend']} ({r['sent'] - r['counted']:,} of {r['sent']:,}"
    missed, wait = r["errors"].get("rx_missed"), r.get("worker_wait")
    if missed:
        what += f": {missed:,} missed by the port"
        if wait:
            what += (f" while its worker{'s' if wait['workers'] > 1 else ''} waited "
                     f"{wait['max_ms']:.1f} ms for a CPU other work held")  # fmt: skip
    return what + ")"


def _console() -> Console:
    # Not a terminal (CI, a pipe): rich would squeeze tables to 80 columns.
    return Console() if sys.stdout.isatty() else Console(width=120)


def print_exact(rows: list[dict]) -> None:
    table = Table(title="exact phase: drop NF, 64 B, paced; every frame must be counted")
    for col in ("backend", "sent", "counted", "missed", "lost", "worker off CPU"):
        table.add_column(col, justify="left" if col == "backend" else "right")
    for r in rows:
        missed, wait = r["errors"].get("rx_missed"), r.get("worker_wait")
        table.add_row(r["backend"], f"{r['sent']:,}", f"{r['counted']:,}",
                      "-" if missed is None else f"{missed:,}",
                      f"{r['sent'] - r['counted']:,}",
                      "-" if wait is None else f"{wait['total_ms']:.1f} ms")  # fmt: skip
    _console().print(table)
    print(
        "missed: frames the port's rx ring had no room for. worker off CPU: how long the\n"
        "busy-polling worker waited while other work held its CPU; its ring holds 8 ms (afxdp)\n"
        "or 4 ms (dpdk) of frames at 500 kpps, so a wait longer than that loses frames; a run\n"
        "that lost frames only so is made again (up to 3 runs), and the earlier one shown."
    )


def print_headline(records: list[dict], settings: dict) -> None:
    from veloz.lab import stats, summary

    for size in settings["sizes"]:
        for nf in settings["nfs"]:
            gen = [r for r in records if r["size"] == size and r["backend"] == "generator"
                   and r.get("kind") == "peak"]  # fmt: skip
            at = [r for r in records if r["size"] == size and r["nf"] == nf
                  and r["backend"] != "generator" and r.get("kind") == "peak"]  # fmt: skip
            base = summary.values([r for r in at if r["backend"] == "linux"], "rate_pps")
            table = Table(title=f"{nf}, {size} B: median of {settings['trials']} trials of "
                                f"{settings['seconds']:g} s, Mpps")  # fmt: skip
            for col in ("backend", "median", "95% CI", "vs linux", "ratio 95% CI", "lost"):
                table.add_column(col, justify="left" if col == "backend" else "right")
            for (backend,), recs in summary.group(gen + at, "backend").items():
                xs = summary.values(recs, "rate_pps")
                m = stats.summarize(xs)
                ratio = stats.ratio_of_medians(xs, base) if base else {"ratio": None}
                table.add_row(
                    backend if backend != "generator" else "generator (ceiling)",
                    f"{m['median'] / 1e6:.3f}",
                    f"{m['low'] / 1e6:.3f}–{m['high'] / 1e6:.3f}",
                    "" if ratio["ratio"] is None else f"{ratio['ratio']:.2f}x",
                    "" if ratio["ratio"] is None else f"{ratio['low']:.2f}–{ratio['high']:.2f}",
                    f"{sum(r['lost'] for r in recs):,}",
                )
            _console().print(table)
    print(
        "drop: frames the NF dropped (linux: nftables raw prerouting drop). tx: frames that came\n"
        "back to vz-gen (linux: IP forwarding out of the same port). generator (ceiling): the\n"
        "generator into a sink that only counts, the most this testbed offers; a backend near\n"
        "it was limited by the generator. Generator, DUT and veths share this machine's CPUs:\n"
        "these are testbed figures, not the NFs' ceilings. lost: sent but not done, all trials\n"
        "(on afxdp and dpdk, missed by the port before a worker saw them)."
    )


def timing(records: list[dict], total_s: float) -> dict:
    """Where the demo's time went: its runs by kind (each with the NF's start
    and stop), and the whole."""

    def spent(kind: str) -> float:
        return sum(r.get("wall_s", 0.0) for r in records if r.get("kind") == kind)

    return {"total_s": total_s, "peak_s": spent("peak"), "cost_s": spent("cost")}


def print_cost(rows: list[dict], settings: dict) -> None:
    from veloz.lab.experiments import headline_cost

    rate, size = headline_cost.cost_rate(settings), headline_cost.cost_size(settings)
    table = Table(title=f"cost: {headline_cost.COST_NF}, {size} B at {rate / 1e6:g} Mpps offered: "
                        f"the DUT's CPU, median of {settings['trials']} trials")  # fmt: skip
    for col in ("backend", "ns/packet", "95% CI", "vs linux", "ratio 95% CI", "cores", "95% CI ",
                "NF program ns", "lost"):  # fmt: skip
        table.add_column(col, justify="left" if col == "backend" else "right")

    def ci(m: dict, digits: int) -> str:
        return "–" if m["low"] is None else f"{m['low']:.{digits}f}–{m['high']:.{digits}f}"

    for r in rows:
        ns, cores, ratio = r["ns_per_packet"], r["cores"], r["vs_linux"]
        prog = r["prog_ns_per_packet"]
        table.add_row(
            r["backend"],
            "–" if ns["median"] is None else f"{ns['median']:.0f}",
            ci(ns, 0),
            "" if ratio["ratio"] is None else f"{ratio['ratio']:.3f}x",
            "" if ratio["ratio"] is None else f"{ratio['low']:.3f}–{ratio['high']:.3f}",
            "–" if cores["median"] is None else f"{cores['median']:.3f}",
            ci(cores, 3),
            "–" if prog["median"] is None else f"{prog['median']:.0f} ({ci(prog, 0)})",
            "–" if r["loss"] is None else f"{r['loss']:.2%}" + ("" if r["sustained"] else " (!)"),
        )
    _console().print(table)
    print(
        "cost: the generator's and the NF's CPU (on veth the receiver runs in the sender's\n"
        "system call) and softirq, minus the same for the generator into a null XDP sink at\n"
        "that rate (medians): what a backend costs beyond taking a frame into XDP;\n"
        "ns/packet = cores / frames done per second. NF program ns: the XDP program's own time\n"
        "per frame as the kernel times it (bpf_stats, in runs of their own), which the floor\n"
        "leaves out of xdp's ns/packet. afxdp and dpdk busy-poll a core at any\n"
        f"load. (!): more than {headline_cost.COST_MAX_LOSS:.1%} lost: the rate was not sustained."
    )


def print_side_by_side(records: list[dict], cost: list[dict], settings: dict) -> None:
    """The headline in one table: each backend's peak ratio to linux (drop,
    the smallest size) beside its cost ratio, both with their CIs."""
    from veloz.lab import stats, summary
    from veloz.lab.experiments import headline_cost

    size, rate = headline_cost.cost_size(settings), headline_cost.cost_rate(settings)
    peak = [r for r in records if r.get("kind") == "peak" and r["size"] == size
            and r["nf"] == headline_cost.COST_NF]  # fmt: skip
    base = summary.values([r for r in peak if r["backend"] == "linux"], "rate_pps")
    by_cost = {r["backend"]: r for r in cost}
    table = Table(title=f"headline: {headline_cost.COST_NF}, {size} B, against linux: the peak "
                        f"rate, and the cost per packet at {rate / 1e6:g} Mpps")  # fmt: skip
    for col in ("backend", "peak vs linux", "95% CI", "cost vs linux", "95% CI "):
        table.add_column(col, justify="left" if col == "backend" else "right")

    def fmt(r: dict | None) -> tuple[str, str]:
        if not r or r.get("ratio") is None:
            return "–", "–"
        return f"{r['ratio']:.3g}x", f"{r['low']:.3g}–{r['high']:.3g}"

    for (backend,), recs in summary.group(peak, "backend").items():
        xs = summary.values(recs, "rate_pps")
        p = stats.ratio_of_medians(xs, base) if base and xs else None
        c = by_cost.get(backend)
        cost_ratio = fmt(c["vs_linux"]) if c else ("–", "–")
        if c and not c["sustained"]:
            cost_ratio = (cost_ratio[0] + " (!)", cost_ratio[1])
        name = "generator (ceiling)" if backend == "generator" else backend
        table.add_row(name, *fmt(p), *cost_ratio)
    _console().print(table)
