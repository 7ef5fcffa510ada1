"""Latency: one-way percentiles through the DUT at a low and a high rate
(the XDP paper's Table 1 measured the same at 100 pps and 1 Mpps).

The tx NF sends each frame back out of the port it came in on, so the sink
on vz-gen's own interface sees the full path generator -> DUT -> generator.
Each frame carries its transmit time; generator and sink read the same
CLOCK_MONOTONIC, so the figure is exact to the clock, with no offset to
estimate. The generator writes the time when it builds the frame and sends
frames in bursts of up to a millisecond's worth, so a frame's latency
includes waiting behind its burst: at high rates that is part of what is
measured, for every backend alike. Percentiles come from the sink's
HDR-style histogram (3% buckets), merged over trials; the CI is of the
median of per-trial p99s.
"""

from __future__ import annotations

from veloz.lab import stats, summary, trial


class Latency:
    name = "latency"
    title = "Latency percentiles through the DUT at a low and a high rate"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(s["rates"]) * len(s["backends"])

    def run(self, ctx) -> None:
        s = ctx.settings
        nf = s["nf"] if s["nf"] in ("tx", "redirect") else "tx"
        for t in range(s["trials"]):
            for rate in s["rates"]:
                for backend in s["backends"]:
                    rec = trial.measure(nf, backend, size=s["sizes"][0], rate=rate,
                                        seconds=s["seconds"])  # fmt: skip
                    lat = rec.get("latency_ns") or {}
                    for q in ("p50", "p90", "p99", "p999", "max", "mean", "stddev"):
                        rec[f"lat_{q}_us"] = lat[q] / 1e3 if lat.get(q) is not None else None
                    ctx.record(f"{nf} {backend} at {rate:,} pps", rec, trial=t, rate=rate,
                               experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        rows = []
        for (rate, backend), recs in summary.group(records, "rate", "backend").items():
            merged = stats.histogram_percentiles(
                stats.merge_histograms(r.get("histogram") or [] for r in recs)
            )
            worst = max((r["latency_ns"]["max"] for r in recs if r.get("latency_ns")), default=None)
            sent = sum(r["sent"] for r in recs)
            rows.append([
                f"{rate:,}", backend, len(recs), *(_us(merged.get(k)) for k in
                ("p50", "p90", "p99", "p999")), _us(worst), _us(merged.get("mean")),
                _us(merged.get("stddev")), round(sum(r["lost"] for r in recs) / sent, 6)
                if sent else None,
            ])  # fmt: skip
        out = [{
            "title": "Latency percentiles, all trials' frames together (µs)",
            "text": self.doc,
            "table": {"columns": ["offered pps", "backend", "trials", "p50", "p90", "p99",
                                  "p99.9", "max", "mean", "stddev", "loss"], "rows": rows},
        }]  # fmt: skip
        for q, name in (("lat_p50_us", "p50"), ("lat_p99_us", "p99")):
            sec = summary.rate_section(
                records,
                f"{name} latency per trial (µs), by offered rate",
                metric=q,
                unit=1.0,
                unit_name="µs",
                series="rate",
            )
            sec["text"] = ("Median over trials of each trial's percentile, 95% bootstrap CI; "
                           "ratio to linux (lower is better).")  # fmt: skip
            out.append(sec)
        return out


def _us(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e3, 2)


LATENCY = Latency()
