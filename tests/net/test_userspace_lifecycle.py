"""The userspace backends' life on the testbed: what they hold, what they leave.

While afxdp or dpdk runs on vz-dut's dut-gen it holds a steering XDP program,
AF_XDP sockets, a TAP device for PASS and (dpdk) hugepages it reserved. After
SIGTERM or SIGINT none of it may be left; after kill -9 the next run says what
is stale and --replace cleans it. And frames a stalled worker could not take
are counted, not lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from wire import link_packets, nf_packets, run_nf, settle_nf, xdp_attached

from veloz import testbed as tb
from veloz.core.proc import in_netns, veloz_argv
from waits import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

USERSPACE = ("afxdp", "dpdk")
NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")
RUN_DIR = Path("/run/veloz")


def xsk_sockets(netns: str) -> int:
    """AF_XDP sockets open in the namespace: /proc/net/protocols counts them
    per namespace (ss --xdp needs xsk_diag, which this kernel may lack)."""
    out = subprocess.run(in_netns(netns, ["cat", "/proc/net/protocols"]),
                         capture_output=True, text=True, check=True, timeout=10).stdout  # fmt: skip
    return next(int(line.split()[2]) for line in out.splitlines() if line.startswith("XDP "))


def taps(netns: str) -> list[str]:
    out = subprocess.run(["ip", "-n", netns, "-j", "link", "show"],
                         capture_output=True, text=True, check=True, timeout=10).stdout  # fmt: skip
    return [link["ifname"] for link in json.loads(out) if link["ifname"].startswith("vzt")]


def hugepage_records() -> list[Path]:
    return sorted(RUN_DIR.glob("dpdk-hugepages-*"))


def hugepages_return_to(baseline: int) -> None:
    """nr_hugepages back to baseline within 20 s: the kernel unpins a UMEM's
    pages lazily."""
    wait_until(lambda: int(NR_HUGEPAGES.read_text()), 20, until=lambda n: n == baseline,
               interval=0.5, what=f"nr_hugepages back to {baseline}")  # fmt: skip


def held(backend: str) -> dict:
    """What a running backend holds on vz-dut, by kind."""
    return {
        "xdp": xdp_attached("vz-dut", "dut-gen"),
        "xsk": bool(xsk_sockets("vz-dut")),
        "tap": bool(taps("vz-dut")),
        "hugepage record": bool(hugepage_records()) if backend == "dpdk" else False,
    }


@pytest.fixture
def hugepage_baseline():
    baseline = int(NR_HUGEPAGES.read_text())
    yield baseline
    # whatever the test did, the machine gets its pool back
    try:
        hugepages_return_to(baseline)
    except AssertionError:
        NR_HUGEPAGES.write_text(str(baseline))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("backend", USERSPACE)
def test_signal_leaves_nothing_behind(testbed, hugepage_baseline, backend, sig):
    runner = run_nf("pass", backend)
    try:
        holding = held(backend)
        assert all(holding.values() if backend == "dpdk" else
                   [v for k, v in holding.items() if k != "hugepage record"]), holding  # fmt: skip
    finally:
        runner.proc.send_signal(sig)
        out, err = runner.proc.communicate(timeout=30)
    assert runner.proc.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["summary"] is True
    assert not any(held(backend).values()), held(backend)
    assert not list(Path("/dev/hugepages").glob("rtemap_*"))
    hugepages_return_to(hugepage_baseline)


@pytest.mark.parametrize("backend", USERSPACE)
def test_killed_run_is_reported_stale_and_replace_cleans_it(testbed, hugepage_baseline, backend):
    runner = run_nf("drop", backend)
    # kill -9 reaches the C tool itself: `ip netns exec` and the front end exec().
    runner.proc.kill()
    runner.proc.communicate(timeout=20)
    try:
        # The kernel closed the sockets and the TAP with the process; the
        # steering program and a raised hugepage pool outlive it.
        assert xdp_attached("vz-dut", "dut-gen")
        assert not xsk_sockets("vz-dut") and not taps("vz-dut")
        if backend == "dpdk":
            assert hugepage_records()
        again = subprocess.run(in_netns("vz-dut", veloz_argv(
            "run", "drop", "--backend", backend, "--iface", "dut-gen", "--duration", "0.5")),
            capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
        assert again.returncode != 0
        assert again.stderr.count("\n") == 1, again.stderr
        assert "stale veloz program" in again.stderr and "--replace" in again.stderr
        cleaned = subprocess.run(in_netns("vz-dut", veloz_argv(
            "run", "drop", "--backend", backend, "--iface", "dut-gen", "--duration", "0.5",
            "--replace", "--json")), capture_output=True, text=True, check=False,
            timeout=60)  # fmt: skip
        assert cleaned.returncode == 0, cleaned.stderr
        assert "removed stale" in cleaned.stderr
        if backend == "dpdk":
            assert "gave back" in cleaned.stderr and "killed vz-dpdk run" in cleaned.stderr
    finally:
        subprocess.run(["ip", "-n", "vz-dut", "link", "set", "dut-gen", "xdp", "off"],
                       check=False, timeout=10)  # fmt: skip
        subprocess.run(["ip", "-n", "vz-dut", "link", "set", "dut-gen", "xdpgeneric", "off"],
                       check=False, timeout=10)  # fmt: skip
        for record in hugepage_records():
            record.unlink()
    assert not any(held(backend).values())
    hugepages_return_to(hugepage_baseline)


@pytest.mark.parametrize("backend", USERSPACE)
def test_frames_a_stalled_worker_could_not_take_are_counted(testbed, backend):
    """Every frame is run by the NF or counted as missed by the port."""
    with run_nf("drop", backend, "--interval", "0.5") as runner:
        gen = subprocess.Popen(in_netns("vz-gen", veloz_argv(
            "gen", "--iface", "gen-dut", "--count", "400000", "--rate", "400k", "--json")),
            stdout=subprocess.PIPE, text=True)  # fmt: skip
        # traffic is flowing through it
        wait_until(nf_packets, 10, interval=0.02, what="a frame through the NF")
        # The whole process stops, as a descheduled worker would: the
        # receive ring fills and the kernel (or the PMD) drops the rest.
        os.kill(runner.proc.pid, signal.SIGSTOP)
        stopped_at = link_packets("vz-gen", "gen-dut", "tx")
        # far more frames than any receive ring holds come while it sleeps
        wait_until(lambda: link_packets("vz-gen", "gen-dut", "tx") - stopped_at, 10,
                   until=lambda n: n >= 50000, interval=0.02,
                   what="50000 frames sent to the stopped NF")  # fmt: skip
        os.kill(runner.proc.pid, signal.SIGCONT)
        out, _ = gen.communicate(timeout=60)
        sent = json.loads(out.strip().splitlines()[-1])
        settle_nf(sent["xmit"])
        summary = runner.stop()
    assert sent["xmit"] == 400000
    missed = summary["errors"]["rx_missed"]
    assert missed > 0, summary
    assert summary["drop"] + missed == sent["xmit"]
    assert summary["rx"] == summary["packets"] + summary["errors"]["rx_invalid"]


def test_ping_is_answered_through_pass_on_every_userspace_backend(testbed):
    """PASS hands frames to the host's stack, which answers through the TAP."""
    for backend in USERSPACE:
        with run_nf("pass", backend) as runner:
            answered = [
                tb.ping("vz-gen", address, timeout=2)
                for address in ("198.18.0.2", "fd00:198:18::2")
                for _ in range(3)
            ]
            summary = runner.stop()
        assert all(answered), (backend, answered)
        # each echo request went up to the kernel through the TAP; the
        # kernel answers out of the port's own netdev
        assert summary["pass"] >= 6
        assert summary["errors"]["pass_failed"] == 0
