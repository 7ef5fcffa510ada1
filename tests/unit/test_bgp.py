# SPDX-License-Identifier: BSD-2-Clause
"""The testbed's BGP feed (testbed/bgp.py): BIRD takes both configs as they
are written (`bird -p` parses and exits), and `veloz bench bgp`'s table says
what its records hold."""

from __future__ import annotations

import subprocess
from pathlib import Path

from veloz.lab.experiments import bgp as bgp_experiment
from veloz.testbed import bgp


def parses(config: str, tmp_path: Path) -> subprocess.CompletedProcess:
    conf = tmp_path / "bird.conf"
    conf.write_text(config)
    return subprocess.run(["bird", "-p", "-c", str(conf)], capture_output=True, text=True,
                          check=False)  # fmt: skip


def test_the_configs_parse(tmp_path: Path):
    feed = bgp.feed_file(tmp_path / "feed.routes", ["198.19.0.0/24", "198.19.1.0/24"])
    assert "route 198.19.1.0/24 blackhole;" in feed.read_text()
    for config in (bgp.receiver_config(), bgp.announcer_config(feed, ["198.18.200.0/24"]),
                   bgp.announcer_config(None, [])):  # fmt: skip
        done = parses(config, tmp_path)
        assert done.returncode == 0, done.stderr + config
    # and a broken one does not: the check can fail
    assert parses("protocol static feed { ipv4; route nonsense; }", tmp_path).returncode != 0


def test_the_table_of_a_run():
    record = {"backend": "xdp", "routes": 752_158, "converge_s": 50.0, "kernel_s": 5.0,
              "withdraw_s": [0.06, 0.07], "withdraw_kernel_s": [0.01, 0.02],
              "announce_s": [0.03, 0.04], "churn_lost": 0, "churn_missed": 2,
              "churn_sent": 1_000_000, "ecmp_per_hop": [5_010, 4_990]}  # fmt: skip
    (section,) = bgp_experiment.BGP.sections([record, record | {"converge_s": 54.0}], {})
    row = dict(zip(section["table"]["columns"], section["table"]["rows"][0], strict=True))
    assert row["trials"] == 2 and row["converge s (CI)"].startswith("52.0 (50.0")
    assert row["withdraw p50 ms (CI)"].startswith("65.0") and row["withdraw p99 ms"] == 70.0
    assert row["kernel FIB withdraw p50 ms"].startswith("15.0")
    assert (row["churn lost"], row["churn missed"], row["churn sent"]) == (0, 4, 2_000_000)
    assert "752,158 routes" in section["text"]
    assert row["ECMP flows per next hop"] == "10,020 / 9,980"
    assert 0.7 < row["ECMP chi-square p"] < 0.8  # chi2 = 0.08 on 1 degree of freedom
