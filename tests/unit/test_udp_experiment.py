"""`veloz bench udp-latency|udp-throughput`'s report from records, without
the testbed: one row per payload and stack, ratios against kernel sockets."""

from __future__ import annotations

import pytest

from veloz.lab.experiments import EXPERIMENTS, udp

pytest.importorskip("scipy")


def ping_record(stack: str, payload: int, mean: float, trial: int) -> dict:
    return {"stack": stack, "payload": payload, "trial": trial, "sent": 2000,
            "received": 2000, "lost": 0, "rtt_mean_us": mean, "rtt_stddev_us": mean / 10,
            "rtt_p99_us": mean * 2}  # fmt: skip


def test_latency_ratio_against_kernel_sockets():
    records = [ping_record("veloz", p, 10.0 + t, t) for p in (18, 1472) for t in range(3)]
    records += [ping_record("kernel", p, 40.0 + t, t) for p in (18, 1472) for t in range(3)]
    sections = udp.UDP_LATENCY.sections(records, {})
    mean = sections[0]
    assert mean["title"].startswith("Round-trip mean")
    rows = {(r[0], r[1]): r for r in mean["table"]["rows"]}
    assert set(rows) == {(18, "veloz"), (18, "kernel"), (1472, "veloz"), (1472, "kernel")}
    veloz = rows[(18, "veloz")]
    assert veloz[3] == 11.0 and veloz[-2] == pytest.approx(11 / 41, abs=0.01)


def test_throughput_rows_and_registration():
    records = [{"stack": s, "payload": 18, "trial": t, "rate_pps": r * 1e6}
               for t in range(3) for s, r in (("veloz", 0.5), ("kernel", 0.25))]  # fmt: skip
    sec = udp.UDP_THROUGHPUT.sections(records, {})[0]
    rows = {r[1]: r for r in sec["table"]["rows"]}
    assert rows["veloz"][3] == 0.5 and rows["veloz"][-2] == 2.0
    assert EXPERIMENTS["udp-latency"] is udp.UDP_LATENCY
    assert EXPERIMENTS["udp-throughput"] is udp.UDP_THROUGHPUT
