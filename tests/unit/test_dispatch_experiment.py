"""`veloz bench dispatch`'s report, without the testbed: its tables from
records, the direction test between testbed and simulator, and the
simulator half run for real on a short ramp."""

from __future__ import annotations

import pytest

from veloz.lab.experiments import Context, dispatch

pytest.importorskip("scipy")


def bed(policy: str, rate: int, p99: float, trial: int, **kw: object) -> dict:
    return {"kind": "testbed", "policy": policy, "rate": rate, "trial": trial,
            "lat_p99_us": p99, "lat_p999_us": p99 * 2, "reordered": kw.get("reordered", 0),
            "flows_moved": 1, "buckets_moved": 0, "reallocations": 2, "mean_active": 1.5,
            "sent": 1000, "lost": kw.get("lost", 0)}  # fmt: skip


def sections_by_title(records: list[dict]) -> dict[str, dict]:
    return {s["title"]: s for s in dispatch.DISPATCH.sections(records, {})}


def test_direction_needs_a_ci_that_excludes_one():
    records = []
    for t in range(5):
        records += [bed("rss-mod", 100_000, 100 + t, t), bed("flow-affinity", 100_000, 500 + t, t),
                    bed("buckets", 100_000, 98 + 2 * t, t, lost=10, reordered=3)]  # fmt: skip
    rows = sections_by_title(records)[
        "Simulator and testbed at 2 cores: each policy's p99 against rss-mod's"
    ]["table"]["rows"]
    way = {r[2]: r[5] for r in rows}
    assert way == {"flow-affinity": "higher", "buckets": "no clear difference"}
    moves = sections_by_title(records)["Testbed: what each policy did (sums over trials)"]
    row = [r for r in moves["table"]["rows"] if r[1] == "buckets"][0]
    assert row[3] == 15 and row[-1] == 0.01  # reordered summed; loss 50 of 5000


def test_simulator_half_runs_the_real_policies():
    ctx = Context(settings={"trials": 1, "rates": [], "sizes": [64], "seconds": 1.0})
    saved = dispatch.SIM_CORES, dispatch.SIM_LOADS, dispatch.SIM_STEP_MS
    dispatch.SIM_CORES, dispatch.SIM_LOADS, dispatch.SIM_STEP_MS = (2,), (0.3, 0.9), 5
    try:
        dispatch.DISPATCH.run(ctx)
    finally:
        dispatch.SIM_CORES, dispatch.SIM_LOADS, dispatch.SIM_STEP_MS = saved
    sims = [r for r in ctx.records if r["kind"] == "sim"]
    assert {r["policy"] for r in sims} == set(dispatch.POLICIES)
    assert all(r["frames"] > 0 and r["lat_p99_us"] > 0 for r in sims)
    assert sum(r["reordered"] for r in sims if r["policy"] == "flow-affinity") == 0
    titles = sections_by_title(ctx.records)
    assert "Simulator, 2 cores: p99 latency (µs) by load" in titles
