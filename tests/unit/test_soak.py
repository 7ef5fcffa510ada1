"""`veloz bench soak`'s arithmetic, without the testbed: where every frame
went, the RSS trend, the settings it defaults to, and the report."""

from __future__ import annotations

import argparse
import os

import pytest

from veloz.cli import bench as bench_cli
from veloz.lab import bench
from veloz.lab.experiments import EXPERIMENTS, soak

SUMMARY = {"drop": 990, "pass": 3, "tx": 0, "redirect": 0, "aborted": 1,
           "errors": {"rx_missed": 5, "rx_invalid": 1, "tx_failed": None}}  # fmt: skip


def test_balance_accounts_for_every_frame():
    b = soak.balance(1000, SUMMARY)
    assert b["taken"] == 994 and b["rx_missed"] == 5 and b["rx_invalid"] == 1
    assert b["unaccounted"] == 0


def test_balance_shows_what_no_counter_has():
    assert soak.balance(1010, SUMMARY)["unaccounted"] == 10
    # more taken than sent (frames from elsewhere on the link) is negative
    assert soak.balance(990, SUMMARY)["unaccounted"] == -10


def test_balance_of_a_backend_without_rx_missed():
    # xdp has no ring that can miss: null counters count as none
    s = {**SUMMARY, "errors": {"rx_missed": None, "rx_invalid": 0}}
    assert soak.balance(994, s)["unaccounted"] == 0


def samples(kib_at: list[tuple[float, int]]) -> list[dict]:
    return [{"t": t, "rss_kib": k, "hugetlb_kib": 0} for t, k in kib_at]


def test_flat_rss_has_a_zero_slope_and_warmup_is_left_out():
    # grows during the first minute (first touches), then flat with noise
    pts = [(t, 1000 + t * 10) for t in range(0, 60, 5)]
    pts += [(t, 1600 + (4 if t % 10 else 0)) for t in range(60, 600, 5)]
    trend = soak.rss_trend(samples(pts), warmup=60)
    assert trend["rss_first_kib"] == 1000 and trend["rss_after_warmup_kib"] == 1600
    assert trend["rss_max_kib"] == 1604
    assert trend["slope_low"] <= 0 <= trend["slope_high"]
    assert abs(trend["slope_kib_per_min"]) < 1


def test_a_leak_shows_as_a_slope():
    # 1 KiB a second: 60 KiB a minute, one outlier does not hide or tilt it
    pts = [(t, 2000 + t) for t in range(0, 600, 5)]
    pts[50] = (pts[50][0], 90_000)
    trend = soak.rss_trend(samples(pts), warmup=60)
    assert trend["slope_kib_per_min"] == pytest.approx(60, rel=0.01)
    assert trend["slope_low"] > 50


def test_a_short_run_fits_every_sample():
    trend = soak.rss_trend(samples([(0, 10), (5, 10), (10, 10)]), warmup=60)
    assert trend["samples"] == 3 and trend["slope_kib_per_min"] == 0


def test_memory_of_this_process_and_of_none():
    mem = soak.proc_memory_kib(os.getpid())
    assert mem is not None and mem["rss_kib"] > 1000
    assert soak.proc_memory_kib(2**22 + 12345) is None


def settings(*argv: str) -> dict:
    p = argparse.ArgumentParser()
    bench_cli.add_parser(p.add_subparsers())
    return bench.settings_from(p.parse_args(["bench", *argv]))


def test_soak_defaults_and_registration():
    s = settings("soak")
    assert s["backends"] == ["xdp", "xdp-generic", "afxdp", "dpdk"] and s["seconds"] == 600
    assert not s["rates_given"]
    assert soak.SOAK._rates(s) == list(soak.PROBE_RATES)
    assert soak.SOAK.count(s) == 4 * (len(soak.PROBE_RATES) + 1)
    given = settings("soak", "--rates", "100k,300k", "--backends", "afxdp")
    assert given["rates_given"] and soak.SOAK._rates(given) == [300_000, 100_000]
    assert EXPERIMENTS["soak"] is soak.SOAK
    # the other experiments keep all five backends
    assert len(settings("drop")["backends"]) == 5


def test_report_rows_and_plot():
    rss = samples([(t, 3000) for t in range(0, 120, 5)])
    rec = {"kind": "soak", "backend": "afxdp", "target_pps": 200_000, "seconds": 600.0,
           **soak.balance(1000, SUMMARY), **soak.rss_trend(rss, 60), "rss": rss}  # fmt: skip
    secs = soak.SOAK.sections([rec], settings("soak"))
    row = secs[0]["table"]["rows"][0]
    cols = secs[0]["table"]["columns"]
    assert row[cols.index("unaccounted")] == 0 and row[cols.index("counted lost")] == 6
    assert row[cols.index("RSS slope (KiB/min)")] == 0
    line = secs[1]["plot"]["series"][0]
    assert line["label"] == "afxdp" and len(line["x"]) == len(rss)


UDPD = {
    "stack": {"udp_bad_len": 1, "udp_bad_csum": 2, "udp_no_port": 0},
    "sockets": {"rx_ring_full": 110},
    "port": {"xsk_rx_dropped": 3919, "xsk_rx_ring_full": 5572},
}


def test_udp_balance_counts_xdp_redirect_failures_once():
    # veth's rx_dropped already holds the frames XDP could not hand to the
    # AF_XDP socket (9491 = 3919 + 5572): they are not lost twice
    b = soak.udp_balance(600_004, 590_400, UDPD, veth_dropped=9491)
    assert b["counted_lost"]["veth_rx_dropped"] == 0
    assert b["counted_lost"]["udp_bad"] == 3 and b["unaccounted"] == 0
    # drops of the veth's own come on top
    assert soak.udp_balance(600_014, 590_400, UDPD, veth_dropped=9501)["unaccounted"] == 0
    assert soak.udp_balance(600_020, 590_400, UDPD, veth_dropped=9491)["unaccounted"] == 16
    # the sender's veth dropped 16 while sendto() succeeded: counted too
    b = soak.udp_balance(600_020, 590_400, UDPD, veth_dropped=9491, sender_dropped=16)
    assert b["counted_lost"]["sender_tx_dropped"] == 16 and b["unaccounted"] == 0


def test_udp_soak_registration_and_report():
    s = settings("udp-soak")
    assert s["seconds"] == 600 and EXPERIMENTS["udp-soak"] is soak.UDP_SOAK
    assert soak.UDP_SOAK.count(s) == len(soak.UDP_PROBE_RATES) + 1
    rss = samples([(t, 19_000) for t in range(0, 120, 5)])
    rec = {"kind": "soak", "backend": "udpd", "target_pps": 100_000, "seconds": 600.0,
           **soak.udp_balance(600_004, 590_400, UDPD, 9491), **soak.rss_trend(rss, 60),
           "rss": rss}  # fmt: skip
    secs = soak.UDP_SOAK.sections([rec], s)
    cols, row = secs[0]["table"]["columns"], secs[0]["table"]["rows"][0]
    assert cols[4] == "received by the sink" and row[4] == 590_400
    assert row[cols.index("counted lost")] == 3919 + 5572 + 3 + 110
    assert row[cols.index("unaccounted")] == 0
