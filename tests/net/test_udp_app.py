"""An unmodified DNS server from Debian (knotd: epoll, recvmmsg/sendmmsg)
on veloz's stack through the LD_PRELOAD shim and udpd, against the same
server on kernel sockets: the same queries from vz-gen get the same answers,
byte for byte (an answer, NXDOMAIN, NODATA, a CNAME, truncation without
EDNS, a 1.1 kB answer, a 3 kB one in IPv4 fragments, REFUSED). Nothing is
left behind: knotd stopped and its files gone, udpd's program and socket
gone (the udpd fixture checks). And knotd in direct mode (no udpd), ended
by each signal, answering the same and leaving nothing attached; with two
UDP workers (a SO_REUSEPORT group), the same again, and many flows all
answered, by both workers."""

from __future__ import annotations

import glob
import os
import platform
import re
import shutil
import signal
import socket
import struct
import tempfile
import time
from pathlib import Path

import pytest
from test_udpd import UDPD_IP, xdp_attached

from veloz.core.proc import Runner, in_netns, veloz_argv
from veloz.lab import dnsapp

SOCKET = "/run/veloz/udpd/test-udp-app.sock"

pytestmark = pytest.mark.skipif(
    not shutil.which("knotd") and not Path("/usr/sbin/knotd").exists(),
    reason="knotd is not installed (scripts/bootstrap installs Debian's knot)",
)


@pytest.fixture
def udpd(testbed, tmp_path):
    cfg = tmp_path / "udpd.toml"
    cfg.write_text(f'interface = "dut-gen"\nipv4 = "{UDPD_IP}/24"\nsocket = "{SOCKET}"\n')
    argv = veloz_argv("udpd", "--config", str(cfg), "--json", "--interval-ms", "60000")
    with Runner(in_netns("vz-dut", argv), attach_timeout=30, what="udpd") as r:
        yield r
    assert not xdp_attached("vz-dut", "dut-gen"), "udpd left its program attached"
    assert not Path(SOCKET).exists(), "udpd left its control socket"


def knot_dirs() -> set[str]:
    return set(glob.glob(str(Path(tempfile.gettempdir()) / "veloz-knot-*")))


def answers(arm: str, udp_workers: int = 1) -> tuple[list[str], int]:
    """The probes' answers from knotd on the arm, and knotd's exit code."""
    with dnsapp.knotd(arm, SOCKET, udp_workers=udp_workers) as proc:
        got = dnsapp.probe_in_gen(dnsapp.arm_ip(arm))
    return got, proc.returncode


def test_knotd_answers_the_same_on_veloz_and_kernel_sockets(udpd):
    before = knot_dirs()
    kernel, krc = answers("kernel")
    veloz, vrc = answers("veloz")
    assert knot_dirs() == before, "knotd's working directory was left behind"
    assert krc is not None and vrc is not None, "knotd still running"
    names = [f"{n} {t}" + ("" if e else " (no EDNS)") for n, t, e in dnsapp.PROBES]
    assert all(kernel), dict(zip(names, kernel, strict=True))
    differ = [n for n, k, v in zip(names, kernel, veloz, strict=True) if k != v]
    assert not differ, f"answers differ on veloz: {differ}"
    by_name = dict(zip(names, veloz, strict=True))
    # what the server said is what the zone says, not just the same twice
    assert dnsapp.rcode(by_name["www A"]) == 0
    assert dnsapp.rcode(by_name["nope A"]) == 3  # NXDOMAIN
    assert dnsapp.rcode(by_name["example.org. A"]) == 5  # REFUSED: not our zone
    flags = int(by_name["big TXT (no EDNS)"][4:8], 16)
    assert flags & 0x0200, "1.1 kB without EDNS is truncated (TC)"
    assert len(bytes.fromhex(by_name["big TXT"])) > 1000
    assert len(bytes.fromhex(by_name["huge TXT"])) > 1472, "the fragmented answer"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL],
                         ids=["SIGTERM", "SIGINT", "SIGKILL"])  # fmt: skip
def test_knotd_in_direct_mode_answers_as_on_kernel_sockets(testbed, sig):
    """knotd running the stack itself (VZ_MODE=direct, no udpd): the same
    answers, byte for byte; ended by a signal, it leaves no steering
    program on the interface, so the next direct server starts at once."""
    kernel, _ = answers("kernel")
    with dnsapp.knotd("veloz-direct") as proc:
        direct = dnsapp.probe_in_gen(dnsapp.arm_ip("veloz-direct"))
        proc.send_signal(sig)
        proc.wait(timeout=20)
    names = [f"{n} {t}" + ("" if e else " (no EDNS)") for n, t, e in dnsapp.PROBES]
    assert all(kernel), dict(zip(names, kernel, strict=True))
    differ = [n for n, k, v in zip(names, kernel, direct, strict=True) if k != v]
    assert not differ, f"answers differ in direct mode: {differ}"
    assert not xdp_attached("vz-dut", "dut-gen"), f"knotd left its program after {sig.name}"


FLOWS, PER_FLOW = 32, 4
# 1 ms between queries, longer than direct mode's 200 µs spin before a wait
# sleeps ($VZ_BUSY_POLL_US): each query finds its worker asleep and wakes it
GAP_S = 0.001
# A worker with two of the flows (one of two members gets fewer with odds
# of about 1e-8) wakes for 8 queries; knotd's own timer wakes it once a second
MIN_WAKES = 2 * PER_FLOW
# /proc/PID/task/TID/syscall's numbers of epoll_wait, epoll_pwait, epoll_pwait2
EPOLL_WAITS = {"x86_64": {"232", "281", "441"}, "aarch64": {"22", "441"}}


def udp_workers(pid: int) -> dict[int, tuple[int, ...]]:
    """knotd's threads asleep in epoll_wait on a set of direct sockets only
    (eventfds, in direct mode), each with its set's members: its UDP workers
    (the TCP worker's set holds a kernel socket)."""
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            call = Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()
            if len(call) < 2 or call[0] not in EPOLL_WAITS[platform.machine()]:
                continue
            info = Path(f"/proc/{pid}/fdinfo/{int(call[1], 16)}").read_text()
            members = tuple(int(fd) for fd in re.findall(r"^tfd:\s*(\d+)", info, re.M))
            if members and all(os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[eventfd]"
                               for fd in members):  # fmt: skip
                found[int(tid)] = members
        except OSError:  # a thread or a descriptor gone meanwhile
            continue
    return found


def asleep_workers(pid: int, want: int, within_s: float = 5.0) -> dict[int, tuple[int, ...]]:
    """udp_workers() once `want` of them sleep (they wake once a second)."""
    deadline = time.monotonic() + within_s
    while len(found := udp_workers(pid)) != want and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


def wakes(pid: int, tid: int) -> int:
    status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
    return int(re.search(r"^voluntary_ctxt_switches:\s*(\d+)", status, re.M).group(1))


def www_a(answer: str, qid: int) -> bool:
    """flows()'s query `qid` answered: its ID, NOERROR, one A record, www's."""
    msg = bytes.fromhex(answer)
    return (len(msg) > 16 and struct.unpack("!H", msg[:2])[0] == qid and bool(msg[2] & 0x80)
            and dnsapp.rcode(answer) == 0 and struct.unpack("!H", msg[6:8])[0] == 1
            and msg[-4:] == socket.inet_aton(dnsapp.WWW_A))  # fmt: skip


def test_knotd_with_two_udp_workers_in_direct_mode(testbed):
    """Two UDP workers: two sockets on one port, both with SO_REUSEPORT, a
    group that direct mode spreads flows over by source address and port.
    The same answers as two workers on kernel sockets; then every query of
    32 flows answered, and each worker woke for its own: a worker's epoll
    set holds its socket only, so its wake-ups are its queries'."""
    before = knot_dirs()
    kernel, _ = answers("kernel", udp_workers=2)
    ip = dnsapp.arm_ip("veloz-direct")
    with dnsapp.knotd("veloz-direct", udp_workers=2) as proc:
        direct = dnsapp.probe_in_gen(ip)
        assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "knotd"
        workers = asleep_workers(proc.pid, 2)
        woke = {tid: wakes(proc.pid, tid) for tid in workers}
        got = dnsapp.flows_in_gen(ip, FLOWS, PER_FLOW, GAP_S)
        woke = {tid: wakes(proc.pid, tid) - n for tid, n in woke.items()}
    assert proc.returncode is not None, "knotd still running"
    assert knot_dirs() == before, "knotd's working directory was left behind"
    assert not xdp_attached("vz-dut", "dut-gen"), "knotd left its program attached"
    names = [f"{n} {t}" + ("" if e else " (no EDNS)") for n, t, e in dnsapp.PROBES]
    assert all(kernel), dict(zip(names, kernel, strict=True))
    differ = [n for n, k, v in zip(names, kernel, direct, strict=True) if k != v]
    assert not differ, f"answers differ with two workers in direct mode: {differ}"
    assert len(got) == FLOWS * PER_FLOW and len({sport for sport, _, _ in got}) == FLOWS
    wrong = [(sport, qid, a) for sport, qid, a in got if not www_a(a, qid)]
    assert not wrong, f"{len(wrong)} of {len(got)} not answered right, e.g. {wrong[:3]}"
    # one socket each, not one shared: knotd bound two, and both joined the group
    assert sorted(len(m) for m in workers.values()) == [1, 1], workers
    assert len(set(workers.values())) == 2, workers
    assert all(n >= MIN_WAKES for n in woke.values()), f"wake-ups per worker: {woke}"
