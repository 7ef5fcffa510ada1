"""`veloz bench dispatch`'s report, without the testbed: its tables from
records, the direction test between testbed and simulator, and the
simulator half run for real on a short ramp."""

from __future__ import annotations

import pytest

from veloz.lab.experiments import Context, dispatch

pytest.importorskip("scipy")


def bed(policy: str, rate: int, p99: float | None, trial: int, **kw: object) -> dict:
    """A testbed record: p99 None with frames lost is a tail among the lost."""
    lost = int(kw.get("lost", 0))
    return {"kind": "testbed", "policy": policy, "rate": rate, "trial": trial,
            "lat_p99_us": p99 or 30_000.0, "lat_p999_us": (p99 or 30_000.0) * 2,
            "tail_p99_us": p99, "tail_p999_us": None if p99 is None else p99 * 2,
            "reordered": kw.get("reordered", 0), "flows_moved": 1, "buckets_moved": 0,
            "reallocations": 2, "mean_active": 1.5, "sent": 1000, "lost": lost,
            "loss": lost / 1000}  # fmt: skip


def sections_by_title(records: list[dict]) -> dict[str, dict]:
    return {s["title"]: s for s in dispatch.DISPATCH.sections(records, {})}


AGREEMENT = "Simulator and testbed at 2 cores: each policy's p99 against rss-mod's"


def test_direction_at_the_highest_load_rss_mod_carries():
    records = []
    for t in range(5):
        # 100k: rss-mod carries it; flow-affinity loses 5%, its tail among the
        # lost, though the frames that did arrive were faster than rss-mod's
        records += [bed("rss-mod", 100_000, 100 + t, t),
                    bed("flow-affinity", 100_000, None, t, lost=50),
                    bed("buckets", 100_000, 98 + 2 * t, t, lost=1, reordered=3)]  # fmt: skip
        # 150k: rss-mod fails in one trial of five; 200k: in all. Beyond
        # the knee, so not where we compare
        records += [bed(p, 150_000, None if t == 0 else 900.0, t, lost=30 if t == 0 else 0)
                    for p in dispatch.policies()]  # fmt: skip
        records += [bed(p, 200_000, None, t, lost=30) for p in dispatch.policies()]
    rows = sections_by_title(records)[AGREEMENT]["table"]["rows"]
    assert {r[1] for r in rows} == {100_000}
    way = {r[2]: r[-1] for r in rows}
    assert way == {"flow-affinity": "higher", "buckets": "no clear difference"}
    fa = [r for r in rows if r[2] == "flow-affinity"][0]
    assert fa[3] == "lost" and fa[5] == 0.05
    tails = sections_by_title(records)[
        "Testbed: p99 latency (µs) of every frame sent, loss counted"
    ]["table"]["rows"]
    fa100 = [r for r in tails if r[:2] == [100_000, "flow-affinity"]][0]
    assert fa100[3] == "lost" and fa100[4] == 5 and fa100[-1] == "higher"
    moves = sections_by_title(records)["Testbed: what each policy did (sums over trials)"]
    row = [r for r in moves["table"]["rows"] if r[:2] == [100_000, "buckets"]][0]
    assert row[3] == 15 and row[-1] == 0.001  # reordered summed; loss 5 of 5000


def test_no_knee_no_comparison():
    # rss-mod loses at every rate: there is no load it carries to compare at
    records = [bed(p, 100_000, None, t, lost=30) for t in range(3) for p in dispatch.policies()]
    assert sections_by_title(records)[AGREEMENT]["table"]["rows"] == []


def test_tail_from_the_sink_histogram_counts_loss():
    hist = [[1000, 990], [4000, 10]]
    assert dispatch._tail(hist, 0)["tail_p99_us"] == pytest.approx(1.015)  # bucket top
    assert dispatch._tail(hist, 20) == {"tail_p99_us": None, "tail_p999_us": None}
    assert dispatch._tail(None, 5) == {"tail_p99_us": None, "tail_p999_us": None}


def test_simulator_half_runs_the_real_policies():
    ctx = Context(settings={"trials": 1, "rates": [], "sizes": [64], "seconds": 1.0})
    saved = dispatch.SIM_CORES, dispatch.SIM_LOADS, dispatch.SIM_STEP_MS
    dispatch.SIM_CORES, dispatch.SIM_LOADS, dispatch.SIM_STEP_MS = (2,), (0.3, 0.9), 5
    try:
        dispatch.DISPATCH.run(ctx)
    finally:
        dispatch.SIM_CORES, dispatch.SIM_LOADS, dispatch.SIM_STEP_MS = saved
    sims = [r for r in ctx.records if r["kind"] == "sim"]
    assert {r["policy"] for r in sims} == set(dispatch.policies())
    assert all(r["frames"] > 0 and r["lat_p99_us"] > 0 for r in sims)
    # the queues hold SIM_QUEUE frames: what overflows is lost and counted
    assert all(0 <= r["lost"] <= r["frames"] for r in sims)
    assert all(r["tail_p99_us"] is None or r["tail_p99_us"] >= r["lat_p99_us"] for r in sims)
    # only rss-mod reorders but through moves counted as forced
    assert all(r["reordered"] == 0 or r["forced"] > 0 for r in sims if r["policy"] != "rss-mod")
    assert {r["costs"] for r in sims} == set(dispatch.SIM_COSTS)
    titles = sections_by_title(ctx.records)
    assert "Simulator, 2 cores: p99 latency (µs) of every frame offered, loss counted" in titles
