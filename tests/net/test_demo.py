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
    assert [(r["backend"], r["phase"]) for r in results] == [
        ("xdp", "exact"), ("xdp", "peak"), ("xdp-generic", "exact"), ("xdp-generic", "peak"),
    ]  # fmt: skip
    for r in results:
        assert r["counted"] <= r["sent"]
        if r["phase"] == "exact":
            assert r["sent"] == r["counted"] == 50000
        else:
            assert r["sent"] > 0 and r["offered_pps"] > 0
