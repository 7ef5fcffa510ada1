"""`veloz gen --dsts N --dst-range CIDR`: frames spread over N destination
addresses (the XDP paper's router test used 4,000), each with valid IPv4 and
TCP checksums, on the wire."""

from __future__ import annotations

import ipaddress
import struct
import subprocess
from collections import Counter

import pytest
from scapy.layers.inet import IP, TCP, UDP
from wire import Capture

from veloz.core.proc import in_netns, run_json, veloz_argv

RANGE = ipaddress.ip_network("198.18.128.0/17")


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_frames_spread_over_the_destinations(testbed, tmp_path, tcp):
    cap = Capture("vz-dut", "dut-gen", tmp_path / "gen.pcap", "ip")
    sent = run_json(in_netns("vz-gen", veloz_argv(
        "gen", "--iface", "gen-dut", "--json", "--count", "600", "--rate", "20000",
        "--flows", "7", "--size", "100", "--dsts", "200", "--dst-range", str(RANGE),
        *(["--tcp"] if tcp else []),
    )), 60)  # fmt: skip
    frames = [f for f in cap.stop() if IP in f]
    assert sent["dsts"] == 200 and len(frames) == 600
    # Frame k carries sequence number k, and goes to destination k mod N
    # from source port base + k mod flows. The generator counts per thread,
    # wherever the thread runs: every number once. Match by number, never by
    # position in the capture.
    l4 = TCP if tcp else UDP
    seqs = [struct.unpack_from("<Q", bytes(f[l4].payload))[0] for f in frames]
    assert sorted(seqs) == list(range(600)), Counter(seqs).most_common(3)
    dst_of: dict[int, ipaddress.IPv4Address] = {}
    for n, f in zip(seqs, frames, strict=True):
        dst = ipaddress.ip_address(f[IP].dst)
        assert dst in RANGE
        assert dst_of.setdefault(n % 200, dst) == dst  # frame k: destination k mod N
        assert f[l4].sport == 1024 + n % 7
        check = f[IP].chksum
        again = f.copy()
        del again[IP].chksum
        assert IP(bytes(again[IP]))[IP].chksum == check, "bad IPv4 header checksum"
        if tcp:
            sent_l4 = f[TCP].chksum
            del again[TCP].chksum
            assert again.__class__(bytes(again))[TCP].chksum == sent_l4, "bad TCP checksum"
    assert sorted(dst_of) == list(range(200)) and len(set(dst_of.values())) == 200


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--dsts", "0"], "between 1 and 65536"),
        (["--dsts", "65537", "--dst-range", "198.18.0.0/15"], "between 1 and 65536"),
        (["--dsts", "5"], "--dst-range"),
        (["--dsts", "5", "--dst-range", "198.18.128.0/17", "--afxdp"], "no --afxdp"),
        (["--dsts", "300", "--dst-range", "198.18.128.0/24"], "more than"),
        (["--dsts", "5", "--dst-range", "198.18.128.1/17"], "not an IPv4 prefix"),
        (["--dsts", "5", "--dst-range", "fd00::/64"], "not an IPv4 prefix"),
        (["--dst-port", "0"], "between 1 and 65535"),
        (["--dst-port", "65536"], "between 1 and 65535"),
    ],
)
def test_bad_destination_spreads_are_refused(testbed, args, complaint):
    done = subprocess.run(in_netns("vz-gen", veloz_argv("gen", "--iface", "gen-dut", "--count",
                                                        "5", *args)),
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and complaint in lines[0], done.stderr


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_destination_port(testbed, tmp_path, tcp):
    """--dst-port aims the frames at a service (the ddos experiment floods one)."""
    cap = Capture("vz-dut", "dut-gen", tmp_path / "port.pcap", "ip")
    run_json(in_netns("vz-gen", veloz_argv(
        "gen", "--iface", "gen-dut", "--json", "--count", "50", "--rate", "10000",
        "--dst-port", "7007", "--size", "100", *(["--tcp"] if tcp else []),
    )), 60)  # fmt: skip
    frames = [f for f in cap.stop() if IP in f]
    assert len(frames) == 50 and {f[TCP if tcp else UDP].dport for f in frames} == {7007}
