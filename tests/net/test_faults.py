"""Faults injected from outside, as they happen on a real server: the UDP
poller or an application killed with SIGKILL, the interface deleted under
udpd, the locked-memory limit too low for a UMEM, and no hugepages to be had.
Each must end in one clear line and a non-zero exit, leave nothing that the
next start cannot clean, and the next start must work.

The data plane's own cells of the matrix (kill -9 of xdp/afxdp/dpdk runs,
the interface removed under each backend) are in test_run.py and
test_userspace_lifecycle.py; the LRU tables overflowing are in
tests/prog/test_ddos.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_udpd import (
    CONFIG,
    SOCKET,
    UDPD_IP,
    app,
    echo_from_gen,
    env,
    start_veloz_echo,
    stop,
    xdp_attached,
)
from wire import drop_counts_every_frame, run_nf

from veloz import testbed as tb
from veloz.core.proc import Runner, in_netns, veloz_argv
from waits import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

RUN_DIR = Path("/run/veloz")
HUGEPAGES_2M = "/sys/kernel/mm/hugepages/hugepages-2048kB"
NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")


def udpd_argv(cfg: Path, *extra: str) -> list[str]:
    return in_netns("vz-dut", veloz_argv("udpd", "--config", str(cfg), "--json",
                                         "--interval-ms", "200", *extra))  # fmt: skip


@pytest.fixture
def udpd_config(testbed, tmp_path) -> Path:
    cfg = tmp_path / "udpd.toml"
    cfg.write_text(CONFIG)
    yield cfg
    # whatever happened, the next test finds dut-gen bare
    for mode in ("xdp", "xdpgeneric"):
        subprocess.run(["ip", "-n", "vz-dut", "link", "set", "dut-gen", mode, "off"],
                       check=False, capture_output=True, timeout=10)  # fmt: skip


def locks() -> list[Path]:
    return sorted(RUN_DIR.glob("xdp-*.lock"))


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_killed_udpd_leaves_no_program_and_the_next_starts_at_once(udpd_config):
    runner = Runner(udpd_argv(udpd_config), attach_timeout=30, what="udpd")
    with runner:
        runner.proc.kill()  # reaches vz-udpd itself: the front end exec()s it
        runner.proc.communicate(timeout=20)
    # the steering program was on a link only udpd held: gone with it
    assert not xdp_attached("vz-dut", "dut-gen")
    with Runner(udpd_argv(udpd_config), attach_timeout=30, what="udpd") as r:
        echo = start_veloz_echo(7100)
        try:
            assert echo_from_gen(7100, [64, 3000] * 5) == {"ok": 10, "bad": 0, "lost": 0}
        finally:
            stop(echo)
        r.stop()
    assert not xdp_attached("vz-dut", "dut-gen") and not locks()
    assert not Path(SOCKET).exists()


def test_a_killed_application_is_cleaned_up_while_the_others_are_served(udpd_config):
    with Runner(udpd_argv(udpd_config), attach_timeout=30, what="udpd") as udpd:
        survivor = start_veloz_echo(7101)
        victim = start_veloz_echo(7102)
        try:
            assert echo_from_gen(7102, [64] * 3)["ok"] == 3
            victim.kill()
            victim.communicate(timeout=10)
            # its port is free again: a new application binds it at once
            victim = start_veloz_echo(7102)
            assert echo_from_gen(7102, [64] * 5) == {"ok": 5, "bad": 0, "lost": 0}
            assert echo_from_gen(7101, [64] * 5) == {"ok": 5, "bad": 0, "lost": 0}
        finally:
            stop(victim)
            stop(survivor)
        s = udpd.stop()["sockets"]
    assert s["apps_died"] >= 1 and s["apps"] == 0 and s["sockets"] == 0


def test_a_hung_udpd_times_requests_out_and_serves_again_when_it_resumes(udpd_config):
    """udpd stopped (SIGSTOP, or stuck): an application's socket() waits a
    bounded time ($VZ_UDPD_TIMEOUT_MS), then fails with one line; once udpd
    runs again, a new application is served and the timed-out one left
    nothing behind."""
    with Runner(udpd_argv(udpd_config), attach_timeout=30, what="udpd") as udpd:
        echo = start_veloz_echo(7103)  # a socket made before the hang
        udpd.proc.send_signal(signal.SIGSTOP)
        try:
            argv = in_netns("vz-dut", [app("veloz-pingpong"), "--server", "--stack", "veloz",
                                        "--bind", f"{UDPD_IP}:7104"])  # fmt: skip
            start = time.monotonic()
            short = {**env(), "VZ_UDPD_TIMEOUT_MS": "500"}
            hung = subprocess.run(argv, env=short, capture_output=True, text=True, timeout=30,
                                  check=False)  # fmt: skip
            took = time.monotonic() - start
        finally:
            udpd.proc.send_signal(signal.SIGCONT)
        assert hung.returncode != 0
        line = one_line(hung.stderr)
        assert line == (f"veloz-pingpong: cannot reach the veloz poller at {SOCKET}: "
                        "Connection timed out")  # fmt: skip
        assert 0.4 < took < 10, took
        try:
            # the echo made before the hang never noticed it
            assert echo_from_gen(7103, [64] * 5) == {"ok": 5, "bad": 0, "lost": 0}
            again = start_veloz_echo(7104)
            try:
                assert echo_from_gen(7104, [64] * 5) == {"ok": 5, "bad": 0, "lost": 0}
            finally:
                stop(again)
        finally:
            stop(echo)
        s = udpd.stop()["sockets"]
    assert s["apps"] == 0 and s["sockets"] == 0


def test_interface_removed_under_udpd_stops_it_cleanly(udpd_config):
    runner = Runner(udpd_argv(udpd_config), attach_timeout=30, what="udpd")
    try:
        with runner:
            subprocess.run(["ip", "-n", "vz-dut", "link", "del", "dut-gen"], check=True,
                           timeout=10)  # fmt: skip
            out, err = runner.proc.communicate(timeout=30)
        assert runner.proc.returncode == 1
        assert one_line(err) == "veloz: dut-gen disappeared while running; stopped"
        assert json.loads(out.strip().splitlines()[-1])["event"] == "summary"
        assert not locks() and not Path(SOCKET).exists()
    finally:
        tb.up()  # the testbed repairs itself; udpd starts again on it
    with Runner(udpd_argv(udpd_config), attach_timeout=30, what="udpd") as again:
        assert again.attached["event"] == "ready"


def without_ipc_lock(argv: list[str], memlock: int = 64 << 10) -> list[str]:
    """What a service user has: no CAP_IPC_LOCK, a small RLIMIT_MEMLOCK (the
    kernel then charges a UMEM to the limit). The netns comes first: `ip
    netns exec` needs the capabilities it drops nothing of."""
    assert argv[:4] == ["ip", "netns", "exec", "vz-dut"], argv
    return [*argv[:4], "prlimit", f"--memlock={memlock}", "setpriv",
            "--bounding-set=-ipc_lock", *argv[4:]]  # fmt: skip


@pytest.mark.parametrize("who", ["afxdp", "udpd"])
def test_umem_over_the_locked_memory_limit_is_one_line(udpd_config, who):
    if who == "udpd":
        argv = udpd_argv(udpd_config)
    else:
        argv = in_netns("vz-dut", veloz_argv("run", "drop", "--backend", "afxdp", "--iface",
                                             "dut-gen", "--duration", "1"))  # fmt: skip
    done = subprocess.run(without_ipc_lock(argv), capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode != 0
    line = one_line(done.stderr)
    assert "cannot register AF_XDP memory" in line and "locked-memory limit is 64 KiB" in line
    assert not xdp_attached("vz-dut", "dut-gen") and not locks()
    assert not Path(SOCKET).exists()
    # with the limit lifted, the same command works
    if who == "udpd":
        with Runner(argv, attach_timeout=30, what="udpd") as r:
            assert r.attached["event"] == "ready"
    else:
        ok = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert ok.returncode == 0, ok.stderr


# A private mount namespace in which the 2 MiB hugepage pool cannot be had:
# sysfs without the pool (a kernel without hugetlbfs), or the pool's files
# read-only (a container).
NO_HUGEPAGES = {
    "no pool": f"mount -t tmpfs -o size=64k vz-nohp {HUGEPAGES_2M}",
    "read-only": f"""mount -t tmpfs -o size=64k vz-nohp {HUGEPAGES_2M}
for f in nr_hugepages free_hugepages resv_hugepages surplus_hugepages; do
    echo 0 > {HUGEPAGES_2M}/$f
done
mount -o remount,ro {HUGEPAGES_2M}""",
}
NO_HUGEPAGES_SAYS = {
    "no pool": "this kernel offers no 2 MiB hugepages",
    "read-only": "cannot raise " + HUGEPAGES_2M + "/nr_hugepages",
}


@pytest.mark.parametrize("fault", NO_HUGEPAGES)
def test_no_hugepages_for_dpdk_is_one_line(testbed, fault):
    baseline = NR_HUGEPAGES.read_text()
    argv = veloz_argv("run", "drop", "--backend", "dpdk", "--iface", "dut-gen", "--duration",
                      "1")  # fmt: skip
    script = f'set -e\n{NO_HUGEPAGES[fault]}\nexec "$@"'
    done = subprocess.run(in_netns("vz-dut", ["unshare", "-m", "sh", "-c", script, "sh", *argv]),
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode != 0
    line = one_line(done.stderr)
    assert NO_HUGEPAGES_SAYS[fault] in line and "--no-huge" in line, line
    # nothing reserved, recorded, attached or left open
    assert NR_HUGEPAGES.read_text() == baseline
    assert not list(RUN_DIR.glob("dpdk-hugepages-*")) and not locks()
    assert not xdp_attached("vz-dut", "dut-gen")
    assert not list(Path("/dev/hugepages").glob("rtemap_*"))
    # where hugepages can be had, the same run works
    with run_nf("drop", "dpdk") as again:
        drop_counts_every_frame(again)
    # the pool is given back lazily
    wait_until(NR_HUGEPAGES.read_text, 20, until=lambda n: n == baseline, interval=0.5,
               what=f"nr_hugepages back to {baseline.strip()}")  # fmt: skip
