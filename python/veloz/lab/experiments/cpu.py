"""CPU use against offered load (the XDP paper's Figure 4).

The drop NF at a series of offered rates, per backend, trials interleaved.
Measured per run: the machine's busy CPU (all kinds, from /proc/stat), the
generator's and the NF process's own CPU time, and, on xdp and
xdp-generic, the NF program's own time per frame as the kernel counts it
(kernel.bpf_stats_enabled, set for this experiment only: it adds two clock
reads to every program run, so this experiment's rates are a little lower
than the throughput experiments').

On a veth testbed the receiving side's XDP runs in the sender's context:
the generator's system call that transmits also runs the DUT's veth NAPI.
The DUT's share cannot be read off one counter, so it is estimated as the
machine's busy CPU minus what the same offered load costs into a sink that
does nothing (backend 'generator'), at the same rate, medians of trials.
Busy-polling backends (afxdp, dpdk) hold one core whatever the load.
"""

from __future__ import annotations

import statistics

from veloz.lab import summary, trial


class Cpu:
    name = "cpu"
    title = "CPU use of the DUT against offered load"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(s["rates"]) * (len(s["backends"]) + 1)

    def run(self, ctx) -> None:
        s = ctx.settings
        for t in range(s["trials"]):
            for rate in s["rates"]:
                for backend in ["generator", *s["backends"]]:
                    rec = trial.measure(s["nf"], backend, size=s["sizes"][0], rate=rate,
                                        seconds=s["seconds"])  # fmt: skip
                    ctx.record(f"{s['nf']} {backend} at {rate:,} pps", rec, trial=t, rate=rate,
                               experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        floor = {
            rate: statistics.median(r["cpu_busy"] for r in recs)
            for (rate, backend), recs in summary.group(records, "rate", "backend").items()
            if backend == "generator"
        }
        for r in records:
            base = floor.get(r["rate"])
            r["cpu_dut_marginal"] = None if base is None else max(0.0, r["cpu_busy"] - base)
        kw = dict(x="rate", x_scale=1e6, xlabel="offered Mpps")
        dut = [r for r in records if r["backend"] != "generator"]
        out = [
            summary.curve_section(
                records,
                "Machine busy CPU against offered load",
                y="cpu_busy",
                ylabel="CPU cores busy",
                text=self.doc,
                **kw,
            ),  # fmt: skip
            summary.curve_section(
                dut,
                "The DUT's CPU: busy minus the generator into a null sink",
                y="cpu_dut_marginal",
                ylabel="CPU cores",
                **kw,
            ),  # fmt: skip
            summary.curve_section(
                dut,
                "Delivered rate against offered load",
                y="rate_pps",
                ylabel="Mpps done",
                y_scale=1e6,
                **kw,
            ),  # fmt: skip
        ]
        bpf = [r for r in dut if r.get("bpf_ns_per_packet") is not None]
        if bpf:
            out.append(summary.curve_section(
                bpf, "XDP program time per frame, live (kernel.bpf_stats_enabled)",
                y="bpf_ns_per_packet", ylabel="ns per frame", **kw,
            ))  # fmt: skip
        return out


CPU = Cpu()
