# SPDX-License-Identifier: BSD-2-Clause
"""The fixture tables of the NFs that treat every frame alike, sent for real
from vz-gen through the NF on every backend: what arrives back at vz-gen
(tx) and at vz-sink (redirect) is, frame for frame and byte for byte, the
table's expected output, and the NF counts the table's verdicts.

tests/prog checks every table offline on both builds; this adds the live
backends (xdp, xdp-generic, afxdp, dpdk) for the tables whose config means
the same on a wire. router, ddos and lb name made-up ports and MACs (the
offline ports'), so their tables stay offline.

As in test_vectors_on_wire: frames a 1500-byte veth cannot carry are left
out, and the Ethernet addresses are replaced by two no testbed host owns,
so no stack answers a reflected frame (the NFs do not read MACs).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from scapy.all import wrpcap
from wire import BACKENDS, Capture, run_nf, send_from_gen, settle_nf, xdp_attached

from veloz.lab import fixtures

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

SRC_MAC, DST_MAC = bytes.fromhex("0200c612ff01"), bytes.fromhex("0200c612ff02")
# NF -> `veloz run` settings meaning what the table's config means offline
RUN_SETS = {
    "drop": (),
    "pass": (),
    "tx": (),
    "redirect": ("port=dut-sink",),
    "memaccess": ("accesses=100", "reflect=1"),
}


def readdressed(frame: bytes) -> bytes:
    return DST_MAC + SRC_MAC + frame[12:]


def on_wire(table: fixtures.Table) -> list[tuple[bytes, fixtures.Fixture]]:
    """(frame as sent, its case) for the cases a veth carries."""
    return [(readdressed(f.input), f) for f in table.fixtures if len(f.input) <= 1514]


def expected(frame: bytes, f: fixtures.Fixture) -> bytes | None:
    """The case's output, for the frame with the wire's addresses."""
    if f.output is None:
        return None
    if f.output[12:] != f.input[12:] or f.verdict != "tx" and f.output != f.input:
        raise AssertionError(f"{f.name}: not a frame this test can readdress")
    if f.output[:12] == f.input[:12]:
        return frame
    assert f.output[:12] == f.input[6:12] + f.input[:6], f.name
    return fixtures.mac_swapped(frame)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("nf", RUN_SETS)
def test_fixtures_on_the_wire(testbed, nf, backend, tmp_path: Path):
    table = fixtures.load(nf)
    cases = on_wire(table)
    assert cases, nf
    pcap = tmp_path / "in.pcap"
    wrpcap(str(pcap), [frame for frame, _ in cases], linktype=1)
    want = {v: [expected(fr, f) for fr, f in cases if f.verdict == v] for v in ("tx", "redirect")}

    extra = [arg for s in RUN_SETS[nf] for arg in ("--set", s)]
    match = f"ether src {SRC_MAC.hex(':')} or ether dst {SRC_MAC.hex(':')}"
    with run_nf(nf, backend, *extra) as runner:
        at_gen = Capture("vz-gen", "gen-dut", tmp_path / "gen.pcap", match)
        at_sink = Capture("vz-sink", "sink-dut", tmp_path / "sink.pcap", match)
        send_from_gen(pcap)
        settle_nf(len(cases))
        got_gen = at_gen.stop(len(want["tx"]))
        got_sink = at_sink.stop(len(want["redirect"]))
        summary = runner.stop()

    assert [bytes(p) for p in got_gen] == want["tx"]
    assert [bytes(p) for p in got_sink] == want["redirect"]
    for verdict in fixtures.VERDICTS:
        assert summary[verdict] == sum(f.verdict == verdict for _, f in cases), verdict
    assert summary["packets"] == len(cases)
    assert not xdp_attached("vz-dut", "dut-gen")
