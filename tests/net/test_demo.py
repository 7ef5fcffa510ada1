"""The README's main job, end to end, in a short form."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from veloz.core.proc import veloz_argv

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

BACKENDS = ["xdp", "xdp-generic", "afxdp", "dpdk", "linux"]


def test_demo_counts_every_frame_then_compares_every_backend_with_linux(testbed, tmp_path):
    done = subprocess.run(
        veloz_argv("demo", "--count", "20000", "--rate", "200k", "--trials", "1", "--seconds",
                   "0.3", "--sizes", "64", "--cost-rate", "100k", "--keep-testbed", "--json",
                   "--out", str(tmp_path)),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [r["backend"] for r in out["exact"]] == BACKENDS
    for r in out["exact"]:
        assert r["sent"] == r["counted"] == 20000
        assert r["errors"]["rx_missed"] in (0, None)
        # busy-polling workers are found and their time off CPU measured
        busy = r["backend"] in ("afxdp", "dpdk")
        assert (r["worker_wait"] is not None) == busy, r
        assert not busy or r["worker_wait"]["workers"] == 1
    titles = [s["title"] for s in out["headline"]]
    assert titles == ["drop, 64 B: peak rate against linux", "tx, 64 B: peak rate against linux",
                      "Cost: drop, 64 B at 0.1 Mpps offered: ns per packet",
                      "Cost: drop, 64 B at 0.1 Mpps offered: the DUT's CPU cores",
                      "drop, 64 B at 0.1 Mpps: the NF program's own time"]  # fmt: skip
    # the cost at a fixed rate: every backend, ns/packet and cores with CIs, ratio to linux
    assert [r["backend"] for r in out["cost"]] == BACKENDS
    for r in out["cost"]:
        assert r["trials"] == 1 and r["sustained"], r
        for m in (r["ns_per_packet"], r["cores"]):
            assert m["median"] is not None, r
            assert m["low"] <= m["median"] <= m["high"]
        # ns per packet: the DUT's cores (0 when within the noise of the
        # generator's own) over the rate it ran, the 0.1 Mpps offered (give
        # or take the pacing of a 0.3 s run; a sustained one lost < 0.5 %)
        cores, ns = r["cores"]["median"], r["ns_per_packet"]["median"]
        assert ns == pytest.approx(cores * 1e9 / 100_000, rel=0.25, abs=1e-9), r
        ratio = r["vs_linux"]
        # one trial: linux's cost may be within the noise (0, and then no ratio)
        assert ratio["ratio"] is None or ratio["low"] <= ratio["ratio"] <= ratio["high"]
    assert out["cost"][-1]["vs_linux"]["ratio"] in (1.0, None)
    # the XDP program's own time per frame, from the kernel, beside the differential cost
    for r in out["cost"]:
        own = r["prog_ns_per_packet"]
        if r["backend"] in ("xdp", "xdp-generic"):
            assert own["n"] == 1 and 0 < own["median"] < 100_000, r
        else:
            assert own["median"] is None, r
    # the summary at the top of the report: each backend's peak per NF and its cost
    figures = {(row[0], row[1]) for row in out["summary"]["rows"]}
    for b in BACKENDS:
        assert {
            ("drop 64 B peak", b),
            ("tx 64 B peak", b),
            ("drop 64 B cost at 0.1 Mpps", b),
        } <= figures
    assert ("drop 64 B peak", "generator") in figures
    assert out["timing"]["peak_s"] > 0 and out["timing"]["cost_s"] > 0
    assert out["timing"]["total_s"] > out["timing"]["peak_s"] + out["timing"]["cost_s"]
    html = open(out["report"]).read()
    assert html.index('class="summary"') < html.index("<h2>Headline")
    for section in out["headline"][:2]:
        # every trial is in the plot beside its median
        assert all(len(p) == 1 for s in section["plot"]["series"] for p in s["points"])
        rows = section["table"]["rows"]
        assert [row[0] for row in rows] == ["generator", *BACKENDS]
        linux = rows[-1]
        assert linux[-2] == 1.0  # linux against itself
        assert all(row[2] > 0 for row in rows)  # every median rate measured
    assert out["report"] == str(tmp_path / "report.html") and os.path.exists(out["report"])
    assert (tmp_path / "headline.json").exists()
