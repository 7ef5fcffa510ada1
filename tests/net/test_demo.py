"""The README's main job, end to end, in a short form."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from veloz.proc import veloz_argv

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

BACKENDS = ["xdp", "xdp-generic", "afxdp", "dpdk", "linux"]


def test_demo_counts_every_frame_then_compares_every_backend_with_linux(testbed, tmp_path):
    done = subprocess.run(
        veloz_argv("demo", "--count", "20000", "--rate", "200k", "--trials", "1", "--seconds",
                   "0.3", "--sizes", "64", "--keep-testbed", "--json", "--out", str(tmp_path)),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [r["backend"] for r in out["exact"]] == BACKENDS
    for r in out["exact"]:
        assert r["sent"] == r["counted"] == 20000
        assert r["errors"]["rx_missed"] in (0, None)
    titles = [s["title"] for s in out["headline"]]
    assert titles == ["drop, 64 B: peak rate against linux", "tx, 64 B: peak rate against linux"]
    for section in out["headline"]:
        rows = section["table"]["rows"]
        assert [row[0] for row in rows] == ["generator", *BACKENDS]
        linux = rows[-1]
        assert linux[-2] == 1.0  # linux against itself
        assert all(row[2] > 0 for row in rows)  # every median rate measured
    assert out["report"] == str(tmp_path / "report.html") and os.path.exists(out["report"])
    assert (tmp_path / "headline.json").exists()
