"""Helpers for tests that put real frames through a running NF on the testbed."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from scapy.all import rdpcap

from veloz.proc import Runner, in_netns, veloz_argv

# Every backend that runs an NF (linux is a baseline, tested on its own).
BACKENDS = ("xdp", "xdp-generic", "afxdp", "dpdk")


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

    def stop(self) -> list:
        time.sleep(0.5)
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
