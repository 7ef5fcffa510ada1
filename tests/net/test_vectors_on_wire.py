"""The packet vectors, sent for real from vz-gen through every NF on every backend.

What arrives back at vz-gen (TX) and at vz-sink (REDIRECT) must be, frame
for frame and byte for byte, what `veloz replay` predicts for the same
frames, and the NF's counters must hold exactly replay's verdict tally.

The vectors are those of tests/vectors that can cross a veth with a 1500-byte
MTU (14 to 1514 bytes: runts and jumbos cannot be sent) with their Ethernet
addresses replaced by two that no testbed host owns. The NFs do not read
MAC addresses; the hosts' stacks do: with their own addresses, vz-gen's
kernel would answer the reflected ARP requests, echo requests and SYNs, and
those answers would come back through the NF as frames nobody sent. With
others', every stack that sees a frame drops it as another host's.

Frames whose VLAN tags are cut short are left out too: the receiving
kernel removes tags before any packet tap sees a frame (skb_vlan_untag) and
drops one whose tag it cannot read, so no capture at vz-gen or vz-sink can
see them arrive. The prog tier covers them, on both builds.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from scapy.all import rdpcap, wrpcap
from wire import (
    BACKENDS,
    Capture,
    replay_prediction,
    run_nf,
    send_from_gen,
    settle_nf,
    xdp_attached,
)

from veloz.core.proc import veloz_argv

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

VECTORS = Path(__file__).parents[1] / "vectors"
FILES = ("l3l4", "encap", "options", "fragments", "garbage", "truncated")
SRC_MAC, DST_MAC = bytes.fromhex("0200c612ff01"), bytes.fromhex("0200c612ff02")
NFS = {  # NF -> (settings for `veloz run`, the same for `veloz replay`)
    "drop": ((), ()),
    "pass": ((), ()),
    "tx": ((), ()),
    "redirect": (("port=dut-sink",), ("port=1",)),
    "memaccess": (("accesses=64",), ("accesses=64",)),
}


VLAN_TYPES = (0x8100, 0x88A8)


def tags_readable(frame: bytes) -> bool:
    """Would a receiving kernel's VLAN untagging read every tag of this frame?"""
    at = 12
    while int.from_bytes(frame[at : at + 2], "big") in VLAN_TYPES:
        # skb_vlan_untag pulls the tag (TCI, next type) and 2 bytes beyond it
        if len(frame) < at + 2 + 4 + 2:
            return False
        at += 4
    return True


def wire_vectors() -> list[bytes]:
    frames = []
    for name in FILES:
        for packet in rdpcap(str(VECTORS / f"{name}.pcap")):
            raw = bytes(packet)
            if 14 <= len(raw) <= 1514 and tags_readable(raw):
                frames.append(DST_MAC + SRC_MAC + raw[12:])
    return frames


def replay_tally(nf: str, pcap: Path, out: Path, sets: tuple[str, ...]) -> tuple[dict, list]:
    """Replay's summary, and its records (one per frame, with the verdict)."""
    args = ["replay", nf, "--backend", "xdp", "--in", str(pcap), "--out", str(out), "--json"]
    for s in sets:
        args += ["--set", s]
    done = subprocess.run(veloz_argv(*args), check=True, capture_output=True, text=True)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return lines[-1], lines[:-1]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("nf", NFS)
def test_vectors_on_the_wire_are_what_replay_predicts(testbed, nf, backend, tmp_path):
    run_sets, replay_sets = NFS[nf]
    frames = wire_vectors()
    pcap = tmp_path / "vectors.pcap"
    wrpcap(str(pcap), [bytes(f) for f in frames], linktype=1)
    tally, records = replay_tally(nf, pcap, tmp_path / "tally.pcap", replay_sets)
    predicted = replay_prediction(nf, pcap, tmp_path / "expect.pcap", *replay_sets)
    # out.pcap holds the TX and REDIRECT frames in order: split them by verdict
    sent_to = [r["verdict"] for r in records if r["verdict"] in ("tx", "redirect")]
    assert len(sent_to) == len(predicted)
    expect_gen = [f for f, v in zip(predicted, sent_to, strict=True) if v == "tx"]
    expect_sink = [f for f, v in zip(predicted, sent_to, strict=True) if v == "redirect"]

    extra = [arg for s in run_sets for arg in ("--set", s)]
    match = f"ether src {SRC_MAC.hex(':')} or ether dst {SRC_MAC.hex(':')}"
    with run_nf(nf, backend, *extra) as runner:
        at_gen = Capture("vz-gen", "gen-dut", tmp_path / "gen.pcap", match)
        at_sink = Capture("vz-sink", "sink-dut", tmp_path / "sink.pcap", match)
        send_from_gen(pcap)
        settle_nf(len(frames))
        got_gen, got_sink = at_gen.stop(len(expect_gen)), at_sink.stop(len(expect_sink))
        summary = runner.stop()

    assert [bytes(p) for p in got_gen] == expect_gen
    assert [bytes(p) for p in got_sink] == expect_sink
    for verdict in ("drop", "pass", "tx", "redirect", "aborted"):
        assert summary[verdict] == tally[verdict], verdict
    assert summary["packets"] == len(frames)
    # the books balance: every frame received got a verdict or a counted error
    errors = summary["errors"]
    assert summary["rx"] == summary["packets"] + errors["rx_invalid"] == len(frames)
    assert errors["pass_failed"] == 0 and errors["tx_failed"] in (0, None)
    assert errors["rx_missed"] in (0, None)
    assert not xdp_attached("vz-dut", "dut-gen")
