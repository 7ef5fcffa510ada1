"""The headline's cost phase: what each backend costs per packet at one
offered rate below every backend's peak, beside the peak rates.

When the generator is the limit (xdp drops at the generator's own
ceiling), a peak rate understates a fast backend; its CPU cost per packet
at a rate everyone sustains does not. Per trial, the drop NF runs on every
backend at `cost_rate` (the smallest frame size), and the generator runs
into a sink that only counts at the same rate (backend 'generator').

The DUT's cores: the CPU time of the processes that do the DUT's work,
the generator's and the NF's (trial.measure: cpu_gen_process and
cpu_nf_process), and the machine's softirq time, minus the median of the
same for the generator into a sink at that rate. On veth the receiving
side runs in the sender's context: the DUT's XDP program, the skb it
builds and netfilter run in the generator's system call, as its time (on
this kernel /proc/stat shows no softirq time at all). Not the machine's
whole busy CPU, as the cpu experiment takes: on a shared machine other
work's time would count as the DUT's. The floor's sink is itself an XDP
program, so the figure is what a backend costs beyond taking a frame into
XDP and counting it; it is clamped at 0 (a backend cheaper than the
noise). ns per packet = the DUT's cores / frames done per second. Busy-polling
backends (afxdp, dpdk) hold a core whatever the load, and pay it here.

The floor being an XDP program, what XDP itself does per frame cancels out:
the figure says what a backend adds, and an xdp drop adds next to nothing.
What the NF's program itself takes per frame is measured apart, as the
kernel times it (kernel.bpf_stats_enabled, run_time_ns / run_cnt), in a run
of its own at the same rate on each XDP backend (kind "own"): the stats
read the clock twice a frame, which must not count in the cost runs.

A backend that lost more than COST_MAX_LOSS of the offered frames did not
sustain the rate: its row says so, and its cost is not at the offered rate.
"""

from __future__ import annotations

import statistics

from veloz.lab import stats, summary

# pps: the exact phase's rate, which every backend must sustain on a quiet
# testbed. Lower rates give the DUT's cost less signal against the noise of
# process accounting (docs/results/2026-11-24-headline-demo.md, Limits).
# On a loaded machine afxdp and dpdk may not keep up: their rows then say so.
COST_RATE = 500_000
COST_MAX_LOSS = 0.005
COST_NF = "drop"
# The backends whose NF is a BPF program the kernel can time (kind "own").
OWN_BACKENDS = ("xdp", "xdp-generic")
# Of trial.measure's record, in cores: where the DUT's work is counted.
CPU = ("cpu_gen_process", "cpu_nf_process", "cpu_softirq")


def cost_size(s: dict) -> int:
    return min(s["sizes"])


def own(s: dict) -> list[str]:
    """The backends of the run whose NF program's own time is measured."""
    return [b for b in s["backends"] if b in OWN_BACKENDS]


def cost_rate(s: dict) -> int:
    return int(s.get("cost_rate") or COST_RATE)


def _cores(r: dict) -> float:
    return sum(r[k] for k in CPU)


def derive(records: list[dict]) -> list[dict]:
    """The cost records, each with cpu_dut_cores and ns_per_packet filled in
    (against the generator's median at the same rate and size)."""
    cost = [r for r in records if r.get("kind") == "cost"]
    floor = {
        (rate, size): statistics.median(_cores(r) for r in recs)
        for (rate, size, backend), recs in summary.group(
            cost, "target_pps", "size", "backend"
        ).items()
        if backend == "generator"
    }
    for r in cost:
        base = floor.get((r["target_pps"], r["size"]))
        if base is None or r["backend"] == "generator":
            r["cpu_dut_cores"] = r["ns_per_packet"] = None
            continue
        cores = max(0.0, _cores(r) - base)
        r["cpu_dut_cores"] = cores
        r["ns_per_packet"] = cores * 1e9 / r["rate_pps"] if r["rate_pps"] else None
    return [r for r in cost if r["backend"] != "generator"]


def table(records: list[dict]) -> list[dict]:
    """Per backend: median and CI of cores and ns/packet, the ratio of ns per
    packet to linux's with its CI, and the loss at the offered rate."""
    dut = derive(records)
    base = summary.values([r for r in dut if r["backend"] == summary.BASELINE], "ns_per_packet")
    own_runs = [r for r in records if r.get("kind") == "own"]
    rows = []
    for (backend,), recs in summary.group(dut, "backend").items():
        prog = summary.values([r for r in own_runs if r["backend"] == backend],
                              "bpf_ns_per_packet")  # fmt: skip
        ns = summary.values(recs, "ns_per_packet")
        sent = sum(r["sent"] for r in recs)
        lost = sum(max(0, r["lost"]) for r in recs)
        ratio = stats.ratio_of_medians(ns, base) if base and ns else {
            "ratio": None, "low": None, "high": None}  # fmt: skip
        rows.append({
            "backend": backend,
            "trials": len(ns),
            "cores": stats.summarize(summary.values(recs, "cpu_dut_cores")),
            "ns_per_packet": stats.summarize(ns),
            # the NF program's own time per frame (bpf_stats), where there is one
            "prog_ns_per_packet": stats.summarize(prog),
            "vs_linux": ratio,
            "loss": lost / sent if sent else None,
            "sustained": bool(sent) and lost <= COST_MAX_LOSS * sent,
        })  # fmt: skip
    return rows


def sections(records: list[dict], s: dict) -> list[dict]:
    dut = derive(records)
    if not dut:
        return []
    rate, size = cost_rate(s), cost_size(s)
    where = f"{COST_NF}, {size} B at {rate / 1e6:g} Mpps offered"
    text = (__doc__ or "").split("\n\n", 1)[1]
    ns = summary.rate_section(dut, f"Cost: {where}: ns per packet", metric="ns_per_packet",
                              unit=1.0, unit_name="ns/packet", text=text)  # fmt: skip
    cores = summary.rate_section(dut, f"Cost: {where}: the DUT's CPU cores",
                                 metric="cpu_dut_cores", unit=1.0, unit_name="cores")  # fmt: skip
    own_runs = [r for r in records if r.get("kind") == "own" and r.get("bpf_ns_per_packet")]
    if not own_runs:
        return [ns, cores]
    prog = summary.rate_section(
        own_runs, f"{COST_NF}, {size} B at {rate / 1e6:g} Mpps: the NF program's own time",
        metric="bpf_ns_per_packet", unit=1.0, unit_name="ns/packet",
        text="As the kernel times the XDP program (kernel.bpf_stats_enabled, on for these "
             "runs only): what the NF itself costs per frame, which the cost above leaves out "
             "with the XDP floor it subtracts.",
    )  # fmt: skip
    return [ns, cores, prog]


def headline_summary(records: list[dict], s: dict) -> dict:
    """The figures the report puts at the top of its page: per NF and size,
    each backend's peak and its ratio to linux; then the cost at the fixed
    rate, as ns per packet, cores, and its ratio to linux. Each with its 95%
    bootstrap CI."""
    rows = []

    def ci(m: dict, scale: float, digits: int) -> str:
        if m.get("low") is None:
            return "–"
        return f"{m['low'] / scale:.{digits}f}–{m['high'] / scale:.{digits}f}"

    def rci(r: dict) -> str:
        return "–" if r.get("low") is None else f"{r['low']:.2f}–{r['high']:.2f}"

    peak = [r for r in records if r.get("kind") == "peak"]
    for size in s["sizes"]:
        for nf in s["nfs"]:
            at = [r for r in peak if r["size"] == size and (r["nf"] == nf
                  or r["backend"] == "generator")]  # fmt: skip
            base = summary.values([r for r in at if r["backend"] == summary.BASELINE and
                                   r["nf"] == nf], "rate_pps")  # fmt: skip
            for (backend,), recs in summary.group(at, "backend").items():
                xs = summary.values(recs, "rate_pps")
                m = stats.summarize(xs)
                ratio = stats.ratio_of_medians(xs, base) if base and xs else {}
                rows.append([f"{nf} {size} B peak", backend, "Mpps",
                             None if m["median"] is None else round(m["median"] / 1e6, 3),
                             ci(m, 1e6, 3),
                             None if ratio.get("ratio") is None else round(ratio["ratio"], 2),
                             rci(ratio)])  # fmt: skip
    rate, size = cost_rate(s), cost_size(s)
    for row in table(records):
        what = f"{COST_NF} {size} B cost at {rate / 1e6:g} Mpps"
        if not row["sustained"]:
            what += f" (not sustained: {row['loss']:.1%} lost)"
        ns, cores, ratio = row["ns_per_packet"], row["cores"], row["vs_linux"]
        rows.append([what, row["backend"], "ns/packet",
                     None if ns["median"] is None else round(ns["median"], 1), ci(ns, 1, 1),
                     None if ratio["ratio"] is None else round(ratio["ratio"], 3),
                     rci(ratio)])  # fmt: skip
        rows.append([what, row["backend"], "cores",
                     None if cores["median"] is None else round(cores["median"], 3),
                     ci(cores, 1, 3), None, "–"])  # fmt: skip
        prog = row["prog_ns_per_packet"]
        if prog["median"] is not None:
            rows.append([f"{COST_NF} {size} B: the NF program's own time (bpf_stats)",
                         row["backend"], "ns/packet", round(prog["median"], 1),
                         ci(prog, 1, 1), None, "–"])  # fmt: skip
    return {
        "title": "Headline figures",
        "text": f"Medians of {s['trials']} interleaved trials with 95% percentile-bootstrap "
                "intervals; ratios of medians to linux with bootstrap intervals. The generator "
                "row is its own ceiling (into a sink that only counts). Cost: the DUT's CPU "
                "beyond the generator into a null sink at the same rate (see its section).",
        "columns": ["figure", "backend", "unit", "median", "95% CI", "vs linux",
                    "ratio 95% CI"],
        "rows": rows,
    }  # fmt: skip
