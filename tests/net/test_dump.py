"""`veloz dump`: an NF's frames and verdicts, captured while it runs on the testbed.

On xdp the dump build swaps in for the NF and back (src/dump/xdp_swap.c);
on afxdp and dpdk the run sends its frames while the capture is on
(src/ctl/capture.c). The tests check the frames and verdicts in the
file, that the NF's own program is back afterwards (same id), and that its
counters counted straight through (the maps are shared).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
from pathlib import Path

import pytest
from scapy.all import IP, UDP, Ether, rdpcap, wrpcap
from wire import run_nf, send_from_gen

from veloz.control.client import CTL_DIR, Ctl
from veloz.control.ctl import stats
from veloz.core.proc import in_netns, veloz_argv
from waits import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

SRC = "02:00:c6:12:dd:01"  # our frames' source: the filter keeps nothing else
FILTER = [f"ether src {SRC}", "and", "udp dst port 9"]


def frames() -> tuple[list[bytes], list[tuple[bytes, str]]]:
    """Frames to send, and those a dump filtered on UDP port 9 holds, in
    order, each with the verdict nf/ddos.c gives it: with no rules a
    well-formed packet passes, one whose IP total length runs past the
    frame is dropped as malformed."""
    sent, expect = [], []
    for i in range(4):
        base = Ether(src=SRC, dst="02:00:c6:12:dd:02") / IP(src="198.18.0.1", dst="198.18.1.1")
        good = bytes(base / UDP(sport=1000 + i, dport=9) / (b"g" * (20 + i)))
        bad = bytearray(good)
        bad[16:18] = (1000).to_bytes(2, "big")  # IP total length: past the frame
        other = bytes(base / UDP(sport=2000 + i, dport=7) / b"o")
        sent += [good, bytes(bad), other]
        expect += [(good, "pass"), (bytes(bad), "drop")]
    return sent, expect


def ctl() -> Ctl:
    return Ctl(CTL_DIR / f"net{os.stat('/run/netns/vz-dut').st_ino}-dut-gen.sock")


def drops() -> int:
    with ctl() as c:
        return stats(c)["drop"]["packets"]


def prog_id() -> int | None:
    out = subprocess.run(["ip", "-n", "vz-dut", "-j", "-d", "link", "show", "dut-gen"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    xdp = json.loads(out)[0].get("xdp") or {}
    prog = xdp.get("prog") or (xdp.get("attached") or [{}])[0].get("prog") or {}
    return prog.get("id")


def dump_argv(*args: str) -> list[str]:
    return in_netns("vz-dut", veloz_argv("dump", "--iface", "dut-gen", *args))


def start_dump(*args: str) -> subprocess.Popen:
    proc = subprocess.Popen(dump_argv("--json", *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline() if ready else ""
    if not line:
        proc.kill()
        pytest.fail(f"veloz dump did not start: {proc.communicate()[1]}")
    assert json.loads(line)["event"] == "capturing"
    return proc


def send(tmp_path: Path, sent: list[bytes], name: str) -> None:
    pcap = tmp_path / f"{name}.pcap"
    wrpcap(str(pcap), sent, linktype=1)
    send_from_gen(pcap)


def verdicts(path: Path) -> list[str]:
    out = []
    for p in rdpcap(str(path)):
        text = " ".join(c.decode() if isinstance(c, bytes) else c for c in p.comments or [])
        out.append(text.split()[0].removeprefix("verdict="))
    return out


DISPATCH = ["--workers", "2", "--dispatch", "flow-affinity"]


@pytest.mark.parametrize(
    ("backend", "extra"),
    [("xdp", []), ("xdp-generic", []), ("afxdp", []), ("dpdk", []), ("afxdp", DISPATCH)],
)
def test_dump_with_a_filter_has_each_frame_and_its_verdict(testbed, backend, extra, tmp_path):
    sent, expect = frames()
    bad = sum(v == "drop" for _, v in expect)
    out = tmp_path / "dump.pcapng"
    with run_nf("ddos", backend, *extra) as runner:
        before = prog_id()
        send(tmp_path, sent, "before")  # counted by the NF alone
        dropped = wait_until(drops, 10, until=lambda n: n >= bad, interval=0.02, what="drops")
        assert dropped == bad
        dump = start_dump("-w", str(out), "-c", str(len(expect)), *FILTER)
        # xdp: the dump build is attached now; afxdp, dpdk: the run sends
        # its frames, its steering program stays
        assert (prog_id() != before) == backend.startswith("xdp")
        send(tmp_path, sent, "during")
        # -c: the dump ends by itself once it holds every expected frame
        stdout, stderr = dump.communicate(timeout=60)
        assert dump.returncode == 0, stderr
        assert prog_id() == before  # the NF's own program, back
        send(tmp_path, sent, "after")
        # the counters went on through both swaps: nothing reset, none lost
        dropped = wait_until(drops, 10, until=lambda n: n >= 3 * bad, interval=0.02, what="drops")
        assert dropped == 3 * bad
        runner.stop()
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["event"] == "summary"
    assert summary["kept"] == len(expect)
    assert summary["dropped"] == 0 and summary["truncated"] == 0
    # the port-7 frames before the last kept one ran through it, filtered
    # out; with two workers, the other worker may not have reached its share
    # of them when the dump's count is reached and it stops
    if extra:
        assert 0 <= summary["filtered"] <= len(sent) - len(expect)
    else:
        assert summary["filtered"] >= len(sent) - len(expect) - 1
    assert summary["seen"] == summary["kept"] + summary["filtered"]
    got = list(zip([bytes(p) for p in rdpcap(str(out))], verdicts(out), strict=True))
    # in order within one CPU (xdp's perf buffers are per CPU: veth's NAPI
    # may run a frame on the other one) or one worker; two workers keep
    # each flow in order, the flows interleaved
    got, expect = sorted(got), sorted(expect)
    assert got == expect


def test_dump_to_pcap_and_signal_stops_it(testbed, tmp_path):
    """-w x.pcap: classic pcap (no verdicts); SIGTERM ends the dump, the NF
    is back."""
    sent, expect = frames()
    out = tmp_path / "dump.pcap"
    with run_nf("ddos", "xdp") as runner:
        before = prog_id()
        dump = start_dump("-w", str(out), *FILTER)
        send(tmp_path, sent, "during")
        assert wait_until(drops, 10, until=lambda n: n >= 4, interval=0.02, what="drops") == 4
        dump.send_signal(signal.SIGTERM)
        stdout, stderr = dump.communicate(timeout=30)
        assert dump.returncode == 0, stderr
        assert prog_id() == before
        runner.stop()
    # sorted: in order only within one CPU, as above (xdp's perf buffers)
    assert sorted(bytes(p) for p in rdpcap(str(out))) == sorted(f for f, _ in expect)
    assert json.loads(stdout.strip().splitlines()[-1])["kept"] == len(expect)


def test_status_shows_a_killed_dump_and_restore_puts_the_nf_back(testbed, tmp_path):
    with run_nf("drop", "xdp") as runner:
        before = prog_id()
        dump = start_dump("-w", str(tmp_path / "x.pcapng"))
        dump.kill()
        dump.communicate(timeout=30)
        try:
            assert prog_id() != before  # the dump build stays: nobody swapped back
            status = json.loads(subprocess.run(veloz_argv("status", "--json"), capture_output=True,
                                               text=True, check=True).stdout)  # fmt: skip
            left = [s for s in status["stale"] if s["kind"] == "dump"]
            assert len(left) == 1, status["stale"]
            assert left[0]["remove"].endswith("veloz dump --iface dut-gen --restore")
        finally:
            done = subprocess.run(dump_argv("--restore"), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert prog_id() == before
        status = json.loads(subprocess.run(veloz_argv("status", "--json"), capture_output=True,
                                           text=True, check=True).stdout)  # fmt: skip
        assert not [s for s in status["stale"] if s["kind"] == "dump"]
        runner.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["udp", "port", "x"], "veloz: bad filter 'udp port x'"),
        (["-w", "/nonexistent/x.pcapng"], "veloz: -w /nonexistent/x.pcapng: directory"),
    ],
)
def test_dump_refuses_bad_input_in_one_line(testbed, args, message):
    with run_nf("drop", "xdp") as runner:
        before = prog_id()
        done = subprocess.run(dump_argv(*args), capture_output=True, text=True, timeout=30)
        assert prog_id() == before
        runner.stop()
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_dump_refuses_an_interface_without_an_nf(testbed):
    done = subprocess.run(dump_argv("-c", "1"), capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.startswith("veloz: no veloz run has dut-gen here")
