"""Helpers for tests that put real frames through a running NF on the testbed."""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import sys
from pathlib import Path

from scapy.all import rdpcap

from veloz.control.client import CTL_DIR, Ctl
from veloz.control.ctl import stats
from veloz.core.proc import Runner, in_netns, run_json, veloz_argv
from waits import settle

# Every backend that runs an NF (linux is a baseline, tested on its own).
BACKENDS = ("xdp", "xdp-generic", "afxdp", "dpdk")


def nf_packets(netns: str = "vz-dut", iface: str = "dut-gen") -> int:
    """Frames the NF running on iface has run, through its ctl socket."""
    path = CTL_DIR / f"net{os.stat(f'/run/netns/{netns}').st_ino}-{iface}.sock"
    with Ctl(path) as ctl:
        return sum(v["packets"] for v in stats(ctl).values())


def settle_nf(expect: int, netns: str = "vz-dut", iface: str = "dut-gen") -> int:
    """Wait until the running NF has run `expect` frames (or its count stops
    moving: a userspace port may have missed some, counted on stop)."""
    return settle(lambda: nf_packets(netns, iface), lambda n: n >= expect)


def drop_counts_every_frame(runner: Runner, count: int = 1000) -> None:
    """A running drop NF on dut-gen counts each of `count` frames from vz-gen
    (run, or missed by a userspace port), then stops cleanly."""
    sent = run_json(in_netns("vz-gen", veloz_argv(
        "gen", "--iface", "gen-dut", "--count", str(count), "--rate", "50k", "--json")),
        timeout=60)  # fmt: skip
    settle_nf(count)
    summary = runner.stop()
    assert sent["xmit"] == count
    assert summary["drop"] + (summary["errors"]["rx_missed"] or 0) == count, summary


def counted_run(run, count: int) -> tuple[dict, dict]:
    """`run()` -> (generator record, summary) of `count` frames into a
    dropping NF, made once more if a userspace port missed frames.

    A worker kept off its CPU longer than its ring lasts (the suite's other
    lane beside it) misses a share; every frame must still be accounted for
    (dropped, or missed by the port), and the second run is the one checked.
    """
    sent, summary = run()
    missed = summary["errors"]["rx_missed"] or 0
    if missed:
        assert summary["drop"] + missed == count, summary
        sent, summary = run()
    return sent, summary


def nft_rx_packets(netns: str = "vz-dut", table: str = "vz_dut_gen") -> int:
    """The linux baseline's rx counter (its nftables rule commented "rx")."""
    argv = ["ip", "netns", "exec", netns, "nft", "-j", "list", "table", "inet", table]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=10).stdout
    for item in json.loads(out)["nftables"]:
        rule = item.get("rule", {})
        if rule.get("comment") == "rx":
            return next(e["counter"]["packets"] for e in rule["expr"] if "counter" in e)
    raise AssertionError(f"no rx counter in table inet {table}")


def link_packets(netns: str, ifname: str, direction: str = "rx") -> int:
    out = subprocess.run(["ip", "-n", netns, "-j", "-s", "link", "show", ifname],
                         capture_output=True, text=True, check=True, timeout=10).stdout  # fmt: skip
    return json.loads(out)[0]["stats64"][direction]["packets"]


def pcap_frames(path: Path) -> int:
    """Records in a pcap file tcpdump -U is still writing (a torn last one
    does not count)."""
    data = path.read_bytes() if path.exists() else b""
    n, at = 0, 24
    while at + 16 <= len(data):
        (incl_len,) = struct.unpack_from("<I", data, at + 8)
        if at + 16 + incl_len > len(data):
            break
        n, at = n + 1, at + 16 + incl_len
    return n


def xdp_attached(netns: str, ifname: str) -> bool:
    out = subprocess.run(
        ["ip", "-n", netns, "-j", "-d", "link", "show", ifname],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return "xdp" in json.loads(out)[0]


class Capture:
    """tcpdump in a namespace, incoming frames only, until stop().

    --immediate-mode: otherwise libpcap's TPACKET_V3 ring hands frames to
    tcpdump a block at a time, on a 1 s timer, and a capture stopped sooner
    ends with frames the kernel saw but tcpdump never wrote.

    -B 32 MiB and the "dropped by kernel" check: on two cores, with a
    userspace worker spinning on one, tcpdump can be starved long enough for
    its default ring to overflow. A frame the capture lost must never pass
    for a frame the NF lost, so such a capture fails as what it is.
    """

    def __init__(self, netns: str, ifname: str, path: Path, bpf_filter: str) -> None:
        self.path = path
        self.proc = subprocess.Popen(
            in_netns(netns, ["tcpdump", "-n", "-U", "--immediate-mode", "-B", "32768", "-Q", "in",
                             "-i", ifname, "-w", str(path), bpf_filter]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()  # "listening on ..." once ready
        assert "listening" in line, line

    def stop(self, expect: int | None = None) -> list:
        """The frames captured, once `expect` of them have been written (or
        none has come for a while)."""
        settle(lambda: pcap_frames(self.path), lambda n: expect is not None and n >= expect)
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=10)
        dropped = re.search(r"(\d+) packets? dropped by kernel", err)
        assert dropped and dropped.group(1) == "0", f"the capture itself lost frames: {err}"
        return list(rdpcap(str(self.path))) if self.path.stat().st_size > 24 else []


def send_from_gen(pcap: Path) -> None:
    script = (
        "import sys; from scapy.all import rdpcap, sendp; "
        "sendp(rdpcap(sys.argv[1]), iface='gen-dut', verbose=0)"
    )
    subprocess.run(in_netns("vz-gen", [sys.executable, "-c", script, str(pcap)]), check=True)


def replay_prediction(nf: str, pcap: Path, out: Path, *sets: str) -> list[bytes]:
    args = ["replay", nf, "--backend", "xdp", "--in", str(pcap), "--out", str(out)]
    for s in sets:
        args += ["--set", s]
    subprocess.run(veloz_argv(*args), check=True, capture_output=True)
    return [bytes(p) for p in rdpcap(str(out))] if out.stat().st_size > 24 else []


def run_nf(nf: str, backend: str, *extra: str) -> Runner:
    return Runner(
        in_netns(
            "vz-dut",
            veloz_argv("run", nf, "--backend", backend, "--iface", "dut-gen", "--json", *extra),
        )
    )
