"""An unmodified DNS server from Debian (knotd: epoll, recvmmsg/sendmmsg)
on veloz's stack through the LD_PRELOAD shim and udpd, against the same
server on kernel sockets: the same queries from vz-gen get the same answers,
byte for byte (an answer, NXDOMAIN, NODATA, a CNAME, truncation without
EDNS, a 1.1 kB answer, a 3 kB one in IPv4 fragments, REFUSED). Nothing is
left behind: knotd stopped and its files gone, udpd's program and socket
gone (the udpd fixture checks). And knotd in direct mode (no udpd), ended
by each signal, answering the same and leaving nothing attached."""

from __future__ import annotations

import glob
import shutil
import signal
import tempfile
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


def answers(arm: str) -> tuple[list[str], int]:
    """The probes' answers from knotd on the arm, and knotd's exit code."""
    with dnsapp.knotd(arm, SOCKET) as proc:
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
