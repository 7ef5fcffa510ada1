"""`veloz gen --threads N`: N live-frames transmit threads, one per CPU, whose
frames together are numbered 0, 1, 2, ... once each, on the wire and at the
sink; with as many receive queues on the DUT's port, each thread's frames
land on a queue of their own. `--static`: the template, frame after frame,
still valid. `--batch-stamp`: one clock read per kernel batch."""

from __future__ import annotations

import struct
import subprocess
from collections import Counter
from contextlib import contextmanager

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from wire import Capture

from veloz.core.proc import Runner, in_netns, run_json, veloz_argv


def gen(*argv: str) -> dict:
    return run_json(in_netns("vz-gen", veloz_argv("gen", "--iface", "gen-dut", "--json", *argv)),
                    120)  # fmt: skip


def test_two_threads_number_every_frame_once(testbed, tmp_path):
    cap = Capture("vz-dut", "dut-gen", tmp_path / "threads.pcap", "ip")
    # an odd count: the threads' shares differ by one
    sent = gen("--count", "601", "--rate", "20000", "--flows", "7", "--size", "100",
               "--threads", "2")  # fmt: skip
    frames = [f for f in cap.stop() if IP in f]
    assert sent["sent"] == 601 and sent["threads"] == 2 and len(frames) == 601
    seqs = [struct.unpack_from("<Q", bytes(f[UDP].payload))[0] for f in frames]
    assert sorted(seqs) == list(range(601)), Counter(seqs).most_common(3)
    for n, f in zip(seqs, frames, strict=True):
        assert f[UDP].sport == 1024 + n % 7  # frame k: source port k mod flows


def test_two_threads_send_exactly_the_count_to_the_sink(testbed):
    argv = veloz_argv("gen", "--sink", "--replace", "--iface", "dut-gen", "--json")
    with Runner(in_netns("vz-dut", argv), what="the sink") as sink:
        sent = gen("--count", "100001", "--rate", "200k", "--flows", "8", "--threads", "2")
        got = sink.stop()
    assert sent["sent"] == 100_001
    assert got["received"] == got["unique"] == 100_001 and got["duplicates"] == 0


@contextmanager
def dut_rx_queues(n: int):
    def channels(rx: int) -> None:
        subprocess.run(["ip", "netns", "exec", "vz-dut", "ethtool", "-L", "dut-gen", "rx",
                        str(rx), "tx", "1"], check=True, capture_output=True)  # fmt: skip

    channels(n)
    try:
        yield
    finally:
        channels(1)


def rx_queue_xdp_packets() -> list[int]:
    out = subprocess.run(["ip", "netns", "exec", "vz-dut", "ethtool", "-S", "dut-gen"],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    stats = dict(line.strip().split(": ") for line in out.splitlines()[1:] if ": " in line)
    return [int(stats[f"rx_queue_{q}_xdp_packets"]) for q in range(2)]


def test_each_thread_fills_a_receive_queue_of_its_own(testbed):
    # veth puts a frame on the receive queue of the CPU that sent it: two
    # threads pinned to two CPUs reach both queues, each a share of the count
    argv = veloz_argv("gen", "--sink", "--replace", "--count-only", "--iface", "dut-gen", "--json")
    with dut_rx_queues(2):
        with Runner(in_netns("vz-dut", argv), what="the sink") as sink:
            before = rx_queue_xdp_packets()
            sent = gen("--count", "40000", "--rate", "200k", "--threads", "2")
            got = sink.stop()
            after = rx_queue_xdp_packets()
    per_queue = sorted(a - b for a, b in zip(after, before, strict=True))
    assert sent["sent"] == got["received"] == 40_000
    assert per_queue == [20_000, 20_000], per_queue


@pytest.mark.parametrize("ipv6", [False, True], ids=["ipv4", "ipv6"])
@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_static_frames_are_the_valid_template(testbed, tmp_path, ipv6, tcp):
    flags = (["--ipv6"] if ipv6 else []) + (["--tcp"] if tcp else [])
    cap = Capture("vz-dut", "dut-gen", tmp_path / "static.pcap", "ip or ip6")
    sent = gen("--count", "40", "--rate", "4000", "--static", "--threads", "2", "--size", "120",
               *flags)  # fmt: skip
    frames = [f for f in cap.stop() if (IPv6 if ipv6 else IP) in f]
    assert sent["sent"] == 40 and len(frames) == 40
    assert len({bytes(f) for f in frames}) == 1  # one frame, over and over
    l4 = frames[0][TCP if tcp else UDP]
    assert l4.sport == 1024 and l4.dport == 9 and bytes(l4.payload)[:16] == bytes(16)
    again = frames[0].copy()
    del again[TCP if tcp else UDP].chksum  # scapy computes it afresh from the bytes
    if tcp or ipv6:
        assert again.__class__(bytes(again))[TCP if tcp else UDP].chksum == l4.chksum


def test_batch_stamp_reads_the_clock_once_a_kernel_batch(testbed, tmp_path):
    # 20 kpps: calls of 20 frames (a millisecond's), which batches of 8 cut
    # into 8, 8 and 4; each batch's frames carry one time, read afresh
    cap = Capture("vz-dut", "dut-gen", tmp_path / "stamp.pcap", "ip")
    gen("--count", "200", "--rate", "20000", "--batch", "8", "--batch-stamp")
    frames = [f for f in cap.stop() if IP in f]
    payloads = sorted(struct.unpack_from("<QQ", bytes(f[UDP].payload)) for f in frames)
    assert [seq for seq, _ in payloads] == list(range(200))
    batches: dict[int, list[int]] = {}
    for seq, stamp in payloads:
        batches.setdefault(stamp, []).append(seq)
    assert [len(b) for b in batches.values()] == [8, 8, 4] * 10
    assert all(b == list(range(b[0], b[0] + len(b))) for b in batches.values())
    assert sorted(batches) == list(batches)  # later batches, later times


def test_bad_thread_counts_are_refused(testbed):
    for argv, complaint in (
        (["--threads", "2", "--count", "1"], "at least --threads"),
        (["--threads", "3", "--rate", "2", "--count", "5"], "at least --threads"),
        (["--threads", "2", "--afxdp", "--count", "5"], "not --afxdp"),
        (["--static", "--flows", "4", "--count", "5"], "no --afxdp, --flows or --dsts"),
        (["--batch-stamp", "--afxdp", "--count", "5"], "not --afxdp"),
    ):
        done = subprocess.run(in_netns("vz-gen", veloz_argv("gen", "--iface", "gen-dut", *argv)),
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and complaint in lines[0], done.stderr
