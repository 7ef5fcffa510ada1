"""Dispatch: Calisto's experiment. The offered load rises in steps; at each
step, the latency percentiles, the frames reordered within their flow, the
flows and buckets moved and the reallocations of three dispatch policies:

  - rss-mod: hash modulo active workers (Shenango's IOKernel);
  - flow-affinity: a flow table keeps each flow on its worker, new flows go
    to the least-loaded one (Calisto);
  - buckets: 512 hash buckets owned by workers, rebalanced by moving the
    fewest buckets (RSS++-style; veloz's own).

All with the core allocator (--alloc: a worker is added when a frame has
queued 5 µs, parked after 50 µs idle), as Calisto ran on Shenango.

Testbed: the afxdp backend with a dispatcher thread and 2 workers; the NF is
memaccess with reflect=1 (a tx that costs a set number of memory accesses
per frame, so the workers are what saturates: one handles about 200k pps
here); 256 UDP flows from the
generator; one-way latency from the sink on vz-gen (the generator's
timestamps). Each (rate, policy) is one run, the policies interleaved
within each trial. This machine has 2 cores shared by generator,
dispatcher and workers: the testbed's direction, not its absolute figures,
is what carries over.

Simulator: vz-sim runs the same policy and allocator code (the runtime's
libveloz_dispatch) on a generated trace: Poisson arrivals, exponential
service of 1 µs, 1000 uniform flows, load as a fraction of the cores'
capacity, for 2, 16 and 64 cores; one seed per trial.
"""

from __future__ import annotations

from veloz.lab import stats, summary, trial

POLICIES = ("rss-mod", "flow-affinity", "buckets")
WORKERS = 2
FLOWS = 256
ACCESSES = 4000  # per frame: one worker saturates near 200k pps on this machine
SIM_CORES = (2, 16, 64)
SIM_LOADS = (0.2, 0.5, 0.8, 0.95)
SIM_STEP_MS = 50


class Dispatch:
    name = "dispatch"
    title = "Dispatch policies under a rising load: p99, reordering, migrations"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(POLICIES) * (len(s["rates"]) + len(SIM_CORES))

    def run(self, ctx) -> None:
        from veloz.sim import run_sim

        s = ctx.settings
        for t in range(s["trials"]):
            for rate in s["rates"]:
                for policy in POLICIES:
                    extra = ["--workers", str(WORKERS), "--dispatch", policy, "--alloc",
                             "--set", f"accesses={ACCESSES}", "--set", "reflect=1"]  # fmt: skip
                    rec = trial.measure("memaccess", "afxdp", size=s["sizes"][0], rate=rate,
                                        seconds=s["seconds"], flows=FLOWS, nf_extra=extra,
                                        arrive=trial.GEN, work="tx")  # fmt: skip
                    rec.update(_latency(rec.get("latency_ns")) | _moves(rec.get("dispatch")))
                    ctx.record(f"testbed {policy} at {rate:,} pps", rec, trial=t, rate=rate,
                               policy=policy, kind="testbed", experiment=self.name)  # fmt: skip
            for cores in SIM_CORES:
                for policy in POLICIES:
                    out = run_sim(policy=policy, cores=cores, ramp=list(SIM_LOADS),
                                  step_ms=SIM_STEP_MS, alloc=True, seed=t + 1)  # fmt: skip
                    for step in out["steps"]:
                        lat = step["latency_us"]
                        rec = {
                            "kind": "sim", "cores": cores, "policy": policy,
                            "load": step["load"], "frames": step["frames"],
                            "lat_p50_us": lat["p50"], "lat_p99_us": lat["p99"],
                            "lat_p999_us": lat["p999"], "reordered": step["reordered"],
                            "flows_moved": step["flows_moved"],
                            "buckets_moved": step["buckets_moved"],
                            "reallocations": step["reallocations"],
                            "mean_active": step["active_mean"],
                        }  # fmt: skip
                        ctx.records.append({**rec, "trial": t, "experiment": self.name})
                    ctx.advance(f"sim {policy} on {cores} cores")

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        out = []
        bed = [r for r in records if r.get("kind") == "testbed"]
        for metric, name in (("lat_p99_us", "p99"), ("lat_p999_us", "p99.9")):
            sec = summary.rate_section(bed, f"Testbed: {name} latency (µs) by offered rate",
                                       metric=metric, unit=1.0, unit_name="µs",
                                       category="policy", series="rate",
                                       baseline="rss-mod")  # fmt: skip
            sec["text"] = ("Median over trials of each trial's percentile, 95% bootstrap CI; "
                           "ratio to rss-mod (lower is better). " + _NOTE)  # fmt: skip
            out.append(sec)
        out.append(_moves_table("Testbed: what each policy did (sums over trials)", bed, "rate"))
        for cores in sorted({r["cores"] for r in records if r.get("kind") == "sim"}):
            sim = [r for r in records if r.get("kind") == "sim" and r["cores"] == cores]
            sec = summary.rate_section(sim, f"Simulator, {cores} cores: p99 latency (µs) by load",
                                       metric="lat_p99_us", unit=1.0, unit_name="µs",
                                       category="policy", series="load",
                                       baseline="rss-mod")  # fmt: skip
            sec["text"] = "Median over seeds, 95% bootstrap CI; ratio to rss-mod."
            out.append(sec)
            out.append(_moves_table(f"Simulator, {cores} cores: what each policy did", sim,
                                    "load"))  # fmt: skip
        out.append(_agreement(records))
        return out


_NOTE = "Each trial is one run per rate and policy; the allocator starts from one worker."


def _latency(lat: dict | None) -> dict:
    lat = lat or {}
    return {f"lat_{q}_us": (lat[q] / 1e3 if lat.get(q) is not None else None)
            for q in ("p50", "p99", "p999", "max")}  # fmt: skip


def _moves(d: dict | None) -> dict:
    d = d or {}
    keys = ("reordered", "flows_moved", "buckets_moved", "reallocations", "mean_active",
            "ring_full")  # fmt: skip
    return {k: d.get(k) for k in keys}


def _moves_table(title: str, records: list[dict], series: str) -> dict:
    rows = []
    for (x, policy), recs in sorted(summary.group(records, series, "policy").items()):

        def total(key: str, recs: list[dict] = recs) -> int:
            return sum(r.get(key) or 0 for r in recs)

        active = [r["mean_active"] for r in recs if r.get("mean_active") is not None]
        sent = total("sent")
        rows.append([x, policy, len(recs), total("reordered"), total("flows_moved"),
                     total("buckets_moved"), total("reallocations"),
                     round(sum(active) / len(active), 2) if active else None,
                     round(total("lost") / sent, 4) if sent else None])  # fmt: skip
    return {
        "title": title,
        "text": ("reordered: frames completed behind a later frame of their flow. loss: "
                 "frames sent and never back (testbed); latency percentiles are of the "
                 "frames that came back, so a policy that loses more can show a lower p99."),
        "table": {"columns": [series, "policy", "runs", "reordered", "flows moved",
                              "buckets moved", "reallocations", "mean active", "loss"],
                  "rows": rows},
    }  # fmt: skip


def _agreement(records: list[dict]) -> dict:
    """At 2 cores and the highest load each side ran: each policy's p99
    against rss-mod's, as a ratio of medians with its bootstrap CI; a
    direction counts only when the CI excludes 1."""
    rows = []
    for kind, x in (("testbed", "rate"), ("sim", "load")):
        sub = [r for r in records if r.get("kind") == kind and r.get("cores", 2) == 2]
        if not sub:
            continue
        top = max(r[x] for r in sub)

        def p99s(policy: str, sub: list[dict] = sub, top: float = top, x: str = x) -> list:
            return [r["lat_p99_us"] for r in sub if r["policy"] == policy and r[x] == top
                    and r["lat_p99_us"] is not None]  # fmt: skip

        for policy in POLICIES[1:]:
            q = stats.ratio_of_medians(p99s(policy), p99s("rss-mod"))
            if q["ratio"] is None:
                way = None
            elif q["low"] > 1:
                way = "higher"
            elif q["high"] < 1:
                way = "lower"
            else:
                way = "no clear difference"
            ci = None if q["ratio"] is None else f"{q['low']:.2f}–{q['high']:.2f}"
            rows.append([kind, top, policy, _r(q["ratio"]), ci, way])
    return {
        "title": "Simulator and testbed at 2 cores: each policy's p99 against rss-mod's",
        "text": ("At the highest load each side ran (the testbed's top rate overloads "
                 "one worker, as the simulator's 0.95 does). A direction counts when the "
                 "ratio's 95% CI excludes 1."),
        "table": {"columns": ["where", "load or rate", "policy", "p99 / rss-mod p99", "95% CI",
                              "direction"], "rows": rows},
    }  # fmt: skip


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


DISPATCH = Dispatch()
