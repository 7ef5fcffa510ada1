# SPDX-License-Identifier: BSD-2-Clause
"""What each NF must do, whatever builds it: checked on both backends against
expectations computed here from the input frames, not from either build."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether

from .conftest import (
    BACKENDS,
    NFS,
    REDIRECT_DEFAULT_PORT,
    VECTOR_FILES,
    Pcap,
    Replay,
    Replayer,
    config_id,
    nf_config_params,
    read_vector,
    vectors,
)

ETH_HLEN = vectors.ETH_HLEN
FRAME_MAX = vectors.FRAME_MAX
VERDICTS = ("aborted", "drop", "pass", "tx", "redirect")


def reaches_nf(frame: bytes) -> bool:
    return ETH_HLEN <= len(frame) <= FRAME_MAX


def skip_reason(frame: bytes) -> str | None:
    if len(frame) < ETH_HLEN:
        return "runt"
    if len(frame) > FRAME_MAX:
        return "oversize"
    return None


def mac_swapped(frame: bytes) -> bytes:
    return frame[6:12] + frame[0:6] + frame[12:]


def requires_nf(nf: str) -> None:
    if nf not in NFS:
        pytest.skip(f"this build has no {nf} NF")


def ok(result: Replay) -> Replay:
    result.check_ok()
    return result


def sent_input_records(vector: Pcap, result: Replay) -> list[int]:
    """Indexes of the input packets the NF sent (tx or redirect)."""
    return [
        r["index"]
        for r in result.records
        if r["verdict"] in ("tx", "redirect") and "reason" not in r
    ]


# ---- every NF, every vector: records, summary and output agree with each other ----


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector", VECTOR_FILES)
@pytest.mark.parametrize(("nf", "config"), nf_config_params())
def test_records_and_summary_consistent(
    replay: Replayer, nf: str, config: dict, vector: str, backend: str
):
    frames = read_vector(vector)
    result = ok(replay(nf, backend, vector, config))
    assert len(result.records) == len(frames.records)
    for i, (rec, frame) in enumerate(zip(result.records, frames.frames, strict=True)):
        assert rec["index"] == i
        assert rec["len_in"] == len(frame), rec
        assert rec["verdict"] in VERDICTS, rec
        assert "ns" not in rec, f"ns without --repeat: {rec}"
        assert ("port" in rec) == (rec["verdict"] == "redirect"), rec
        assert rec.get("reason") == skip_reason(frame), rec
        if not reaches_nf(frame):
            assert rec["verdict"] == "drop" and rec["len_out"] == 0, rec

    summary = result.summary
    assert summary is not None
    assert summary["nf"] == nf and summary["backend"] == backend
    assert summary["packets"] == len(frames.records)
    assert summary["skipped"] == sum(1 for f in frames.frames if not reaches_nf(f))
    for verdict in VERDICTS:
        assert summary[verdict] == sum(1 for r in result.records if r["verdict"] == verdict), (
            verdict,
            summary,
        )
    assert sum(summary[v] for v in VERDICTS) == summary["packets"]
    assert "repeat" not in summary and "ns_per_packet" not in summary

    # the output: the sent frames, in input order, with the input's timestamps
    sent = sent_input_records(frames, result)
    assert result.out is not None
    assert summary["written"] == len(sent) == len(result.out.records)
    assert result.out.header[:20] == frames.header[:20], "pcap magic/version/snaplen differ"
    assert result.out.header[20:24] == frames.header[20:24], "output linktype is not Ethernet"
    for index, out in zip(sent, result.out.records, strict=True):
        rec = result.records[index]
        inp = frames.records[index]
        assert (out.sec, out.frac) == (inp.sec, inp.frac), f"timestamp of packet {index}"
        assert out.caplen == out.wirelen == rec["len_out"] == len(out.data), (index, rec)


# ---- per NF ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector", VECTOR_FILES)
def test_drop_drops_everything(replay: Replayer, vector: str, backend: str):
    requires_nf("drop")
    result = ok(replay("drop", backend, vector))
    assert {r["verdict"] for r in result.records} <= {"drop"}
    assert result.summary is not None and result.summary["written"] == 0
    assert result.out is not None and result.out.records == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector", VECTOR_FILES)
def test_pass_passes_every_frame(replay: Replayer, vector: str, backend: str):
    requires_nf("pass")
    frames = read_vector(vector).frames
    result = ok(replay("pass", backend, vector))
    for rec, frame in zip(result.records, frames, strict=True):
        if reaches_nf(frame):
            assert rec["verdict"] == "pass" and rec["len_out"] == len(frame), rec
        else:
            assert rec["verdict"] == "drop", rec
    assert result.out is not None and result.out.records == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector", VECTOR_FILES)
def test_tx_swaps_macs(replay: Replayer, vector: str, backend: str):
    requires_nf("tx")
    frames = read_vector(vector).frames
    result = ok(replay("tx", backend, vector))
    expected = [mac_swapped(f) for f in frames if reaches_nf(f)]
    for rec, frame in zip(result.records, frames, strict=True):
        if reaches_nf(frame):
            assert rec["verdict"] == "tx" and rec["len_out"] == len(frame), rec
        else:
            assert rec["verdict"] == "drop", rec
    assert result.out is not None
    assert len(result.out.frames) == len(expected)
    for i, (got, want) in enumerate(zip(result.out.frames, expected, strict=True)):
        assert got == want, f"tx output frame {i} is not the input with MACs swapped"


@pytest.mark.parametrize("backend", BACKENDS)
def test_tx_jumbo_bytes(replay: Replayer, backend: str):
    """The 9000-byte jumbo comes back whole: MACs swapped (scapy), the
    fragments past the linear 3520 bytes unchanged."""
    requires_nf("tx")
    names = [name for name, _ in vectors.jumbo()]
    index = names.index("jumbo-9000-ipv4-udp")
    frame = read_vector("jumbo.pcap").frames[index]
    assert len(frame) == 9000
    want = Ether(frame)
    want.src, want.dst = want.dst, want.src
    expected = bytes(want)
    assert len(expected) == 9000 and expected[14:] == frame[14:]

    result = ok(replay("tx", backend, "jumbo.pcap"))
    rec = result.records[index]
    assert rec == {"index": index, "verdict": "tx", "len_in": 9000, "len_out": 9000}
    sent = sent_input_records(read_vector("jumbo.pcap"), result)
    assert result.out is not None
    got = result.out.frames[sent.index(index)]
    assert got == expected
    assert Ether(got).src == vectors.MAC_B and Ether(got).dst == vectors.MAC_A


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector", VECTOR_FILES)
@pytest.mark.parametrize(
    "config",
    [pytest.param(c, id=config_id(c)) for c in ({}, {"port": 0}, {"port": 1}, {"port": 63})],
)
def test_redirect_to_configured_port(replay: Replayer, config: dict, vector: str, backend: str):
    requires_nf("redirect")
    port = config.get("port", REDIRECT_DEFAULT_PORT)
    frames = read_vector(vector).frames
    result = ok(replay("redirect", backend, vector, config))
    for rec, frame in zip(result.records, frames, strict=True):
        if reaches_nf(frame):
            assert rec["verdict"] == "redirect" and rec.get("port") == port, rec
            assert rec["len_out"] == len(frame), rec
        else:
            assert rec["verdict"] == "drop" and "port" not in rec, rec
    assert result.out is not None
    assert result.out.frames == [f for f in frames if reaches_nf(f)], "redirect changed bytes"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector", VECTOR_FILES)
@pytest.mark.parametrize("accesses", [0, 1, 100, 4096])
def test_memaccess_drops(replay: Replayer, accesses: int, vector: str, backend: str):
    requires_nf("memaccess")
    result = ok(replay("memaccess", backend, vector, {"accesses": accesses}))
    assert {r["verdict"] for r in result.records} <= {"drop"}
    assert result.out is not None and result.out.records == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("nf", NFS)
def test_runts_never_reach_the_nf(replay: Replayer, nf: str, backend: str):
    frames = read_vector("runts.pcap").frames
    assert frames and all(len(f) < ETH_HLEN for f in frames)
    result = ok(replay(nf, backend, "runts.pcap"))
    for rec, frame in zip(result.records, frames, strict=True):
        assert rec == {
            "index": rec["index"],
            "verdict": "drop",
            "len_in": len(frame),
            "len_out": 0,
            "reason": "runt",
        }
    assert result.summary is not None
    assert result.summary["skipped"] == result.summary["drop"] == len(frames)
    assert result.summary["written"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("nf", NFS)
def test_oversize_never_reaches_the_nf(replay: Replayer, nf: str, backend: str):
    frames = read_vector("jumbo.pcap").frames
    result = ok(replay(nf, backend, "jumbo.pcap"))
    oversize = [r for r, f in zip(result.records, frames, strict=True) if len(f) > FRAME_MAX]
    assert len(oversize) == 2
    assert all(r["verdict"] == "drop" and r.get("reason") == "oversize" for r in oversize)


# ---- --repeat ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector", ["l3l4.pcap", "jumbo.pcap", "runts.pcap"])
@pytest.mark.parametrize(("nf", "config"), nf_config_params())
def test_repeat_reports_cost(replay: Replayer, nf: str, config: dict, vector: str, backend: str):
    plain = ok(replay(nf, backend, vector, config))
    timed = replay(nf, backend, vector, config, repeat=100)
    timed.check_ok()
    assert len(timed.records) == len(plain.records)
    costs = []
    for rec, ref in zip(timed.records, plain.records, strict=True):
        assert {k: v for k, v in rec.items() if k != "ns"} == ref, "--repeat changed a verdict"
        if "reason" in rec:
            assert "ns" not in rec, rec
        else:
            assert rec.get("ns", 0) > 0, f"no positive ns: {rec}"
            costs.append(rec["ns"])
    summary = timed.summary
    assert summary is not None
    assert {k: v for k, v in summary.items() if k not in ("repeat", "ns_per_packet")} == (
        plain.summary
    )
    if costs:
        assert summary["repeat"] == 100
        assert summary["ns_per_packet"] > 0
        assert summary["ns_per_packet"] == pytest.approx(sum(costs) / len(costs), rel=0.01)
    else:
        assert "ns_per_packet" not in summary
    assert timed.out is not None and plain.out is not None
    assert timed.out_raw == plain.out_raw, "--repeat changed the output"
