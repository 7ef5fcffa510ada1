# SPDX-License-Identifier: BSD-2-Clause
"""Every NF's fixture table (nf/fixtures/NF.py) on both builds: each case's
verdict, port and output bytes exactly as the table says.

The XDP build runs under BPF_PROG_TEST_RUN: the bytecode the xdp and
xdp-generic backends attach. The native build is the code the afxdp and
dpdk backends and the userspace reference run. A case that passes on both
passes, offline, on every backend.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from veloz.lab import fixtures

from .conftest import BACKENDS, NFS, parse_json_lines, parse_pcap, run_veloz

# the build's NFs whose source is in nf/ (not tests/nf's, which test the harness)
NF_SOURCES = sorted(nf for nf in NFS if (fixtures.NF_DIR / f"{nf}.c").is_file())
TABLES = fixtures.names()


def test_every_nf_has_a_table():
    assert NF_SOURCES, "no NF sources found"
    assert TABLES == NF_SOURCES, "an NF without a fixture table, or a table without an NF"
    for nf in TABLES:
        assert fixtures.load(nf).fixtures, f"{nf}: empty fixture table"


@pytest.mark.parametrize("nf", TABLES)
def test_table_is_well_formed(nf: str):
    table = fixtures.load(nf)
    returns = fixtures.source_verdicts(nf)
    assert returns, f"nf/{nf}.c names no verdict"
    names = [f.name for f in table.fixtures]
    assert len(set(names)) == len(names), f"{nf}: repeated case names"
    for f in table.fixtures:
        assert f.name and f.description, f
        assert f.verdict in returns, f"{nf}/{f.name}: {f.verdict} is not one of {sorted(returns)}"
        assert (f.output is not None) == (f.verdict in fixtures.SENDS), f"{nf}/{f.name}"
        assert (f.port is not None) == (f.verdict == "redirect"), f"{nf}/{f.name}"
        assert 14 <= len(f.input) <= 9216, f"{nf}/{f.name}: never reaches the NF"
    # every verdict the NF can return is exercised, or the table says why not
    covered = {f.verdict for f in table.fixtures} | set(table.unreachable)
    assert returns <= covered, f"{nf}: verdicts without a case: {sorted(returns - covered)}"


def replay_table(nf: str, backend: str, directory: Path) -> tuple[list[dict], dict, list[bytes]]:
    pcap, config = fixtures.load(nf).write(directory)
    out = directory / f"{nf}.{backend}.out.pcap"
    args = ["replay", nf, "--backend", backend, "--in", pcap, "--out", out, "--json"]
    if config is not None:
        args += ["--config", config]
    proc = run_veloz(*args)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    records, summary = parse_json_lines(proc.stdout)
    assert summary is not None
    return records, summary, parse_pcap(out.read_bytes()).frames


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("nf", TABLES)
def test_every_case(nf: str, backend: str, tmp_path: Path):
    if nf not in NFS:
        pytest.skip(f"this build has no {nf} NF")
    table = fixtures.load(nf)
    records, summary, sent = replay_table(nf, backend, tmp_path)
    assert len(records) == len(table.fixtures)
    wrong = []
    expected_out = []
    for f, rec in zip(table.fixtures, records, strict=True):
        got = (rec["verdict"], rec.get("port"))
        if got != (f.verdict, f.port):
            wrong.append(f"{f.name}: {got} (want {(f.verdict, f.port)}): {f.description}")
        assert rec["len_in"] == len(f.input), f.name
        if f.output is None:
            assert rec["len_out"] == len(f.input), f"{f.name}: a frame not sent changed length"
        else:
            assert rec["len_out"] == len(f.output), f.name
            expected_out.append((f, rec["index"]))
    assert not wrong, "\n".join(wrong)
    assert len(sent) == len(expected_out) == summary["written"]
    for (f, index), frame in zip(expected_out, sent, strict=True):
        assert frame == f.output, f"{nf}/{f.name} (case {index}): output bytes differ"
    for verdict in fixtures.VERDICTS:
        assert summary[verdict] == sum(f.verdict == verdict for f in table.fixtures), verdict
