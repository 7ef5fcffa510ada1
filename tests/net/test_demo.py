"""The README's main job, end to end, in a short form."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from veloz.proc import veloz_argv

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def test_demo_counts_every_packet_of_the_exact_phase(testbed):
    done = subprocess.run(
        veloz_argv("demo", "--count", "50000", "--rate", "200k", "--peak-seconds", "0.5",
                   "--keep-testbed", "--json"),
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    backends = ("xdp", "xdp-generic", "afxdp", "dpdk", "linux")
    assert [(r["backend"], r["phase"]) for r in results] == [
        (b, phase) for b in backends for phase in ("exact", "peak")
    ]
    for r in results:
        assert r["counted"] <= r["sent"]
        if r["phase"] == "exact":
            assert r["sent"] == r["counted"] == 50000
            assert r["errors"]["rx_missed"] in (0, None)
        else:
            # frames the NF did not count were missed by the port, and said so
            assert r["sent"] > 0 and r["offered_pps"] > 0
            if r["backend"] in ("afxdp", "dpdk"):
                assert r["sent"] == r["counted"] + r["errors"]["rx_missed"]
