# SPDX-License-Identifier: BSD-2-Clause
"""`veloz bench cost` end to end, short: every case of every NF's fixture
table timed on both builds in every trial, in the results JSON and in the
report. It measures; the test checks that every case ran and that the
figures are where the report says, not how fast anything is, so it runs
with the other BPF_PROG_TEST_RUN tests (root, no testbed)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from veloz.core.proc import veloz_argv
from veloz.lab import fixtures

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="BPF_PROG_TEST_RUN needs root")
TRIALS = 1  # the structure of every record; medians over more are the bench's


def test_cost_times_every_fixture_case(tmp_path):
    done = subprocess.run(
        veloz_argv("bench", "cost", "--trials", str(TRIALS), "--repeat", "1000",
                   "--accesses", "0,100", "--out", str(tmp_path)),
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "cost.json").read_text())
    tables = {nf: fixtures.load(nf) for nf in fixtures.names()}
    cases = {(nf, f.name): f for nf, t in tables.items() for f in t.fixtures}
    timed = [r for r in result["records"] if r["kind"] == "fixture"]
    seen = {(r["nf"], r["fixture"], r["backend"], r["trial"]) for r in timed}
    assert len(seen) == len(timed)
    assert seen == {(nf, name, b, t) for nf, name in cases for b in ("xdp", "native")
                    for t in range(TRIALS)}  # fmt: skip
    for r in timed:
        f = cases[(r["nf"], r["fixture"])]
        assert r["verdict"] == f.verdict and r["size"] == len(f.input), r
        assert r["ns_per_packet"] > 0, r
    # each NF's mean over its cases, and the memaccess curve, as before
    per_nf = {(r["nf"], r["backend"], r["accesses"]) for r in result["records"]
              if r["kind"] == "time"}  # fmt: skip
    assert {(nf, b, None) for nf in tables for b in ("xdp", "native")} <= per_nf
    assert {("memaccess", b, n) for b in ("xdp", "native") for n in (0, 100)} <= per_nf
    # the report's table: a row per case, medians of both builds over the trials
    title = "ns per packet of each fixture case"
    section = next(s for s in result["sections"] if s["title"].startswith(title))
    rows = {(row[0], row[1]): row for row in section["table"]["rows"]}
    assert set(rows) == set(cases)
    for row in rows.values():
        assert row[4] > 0 and row[5] > 0 and row[7] == TRIALS, row
    assert "fixture case" in (tmp_path / "report.html").read_text()
