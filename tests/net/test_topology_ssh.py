# SPDX-License-Identifier: BSD-2-Clause
"""The lab across hosts, for real: the DUT reached over SSH.

OpenSSH's sshd runs inside vz-dut, key only (a key made for the test, its own
config, no PAM, no password), listening only on a management link into the
namespace (198.18.254.0/30, apart from the measured veths, as a lab's
management network is apart from its test links). The same measurements run
on the namespace testbed and on a topology whose DUT is that SSH host, and
must agree: exact counts equal, the same records, rates within a wide margin.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from veloz.core.proc import veloz_argv
from veloz.lab import topology, trial
from veloz.testbed import status
from waits import wait_until

MGMT_HOST, MGMT_DUT = "vz-mgmt", "dut-mgmt"
MGMT_HOST_IP, MGMT_DUT_IP = "198.18.254.1", "198.18.254.2"
SSHD = "/usr/sbin/sshd"
PRIVSEP = Path("/run/sshd")  # sshd refuses to start without it
START_S = 20.0

pytestmark = pytest.mark.skipif(
    not (os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-keygen")),
    reason="openssh-server/openssh-client not installed (scripts/bootstrap installs them)",
)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def _listening(address: str, port: int, proc: subprocess.Popen) -> bool:
    if proc.poll() is not None:
        raise AssertionError(f"sshd exited: {proc.stderr.read()}")
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def sshd(testbed, tmp_path_factory):
    """sshd in vz-dut; yields the directory with the client's key and known_hosts."""
    tmp = tmp_path_factory.mktemp("sshd")
    os.chmod(tmp, 0o700)
    for key in ("client", "host"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"veloz-{key}",
                        "-f", str(tmp / key)], check=True, timeout=30)  # fmt: skip
    (tmp / "authorized_keys").write_text((tmp / "client.pub").read_text())
    host_pub = (tmp / "host.pub").read_text().split()
    (tmp / "known_hosts").write_text(f"{MGMT_DUT_IP} {host_pub[0]} {host_pub[1]}\n")
    (tmp / "sshd_config").write_text(
        f"ListenAddress {MGMT_DUT_IP}\nPort 22\nHostKey {tmp / 'host'}\n"
        f"AuthorizedKeysFile {tmp / 'authorized_keys'}\nPidFile none\n"
        "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nPermitRootLogin prohibit-password\nAllowUsers root\n"
        "X11Forwarding no\nAllowTcpForwarding no\nAllowAgentForwarding no\nPermitTTY no\n"
        "MaxSessions 32\nLogLevel ERROR\n"
        # the keys live under /tmp, which is world-writable (sticky): the
        # strict check of every parent directory would refuse them
        "StrictModes no\n"
    )
    made_privsep = not PRIVSEP.exists()
    if made_privsep:
        PRIVSEP.mkdir(mode=0o755)
    _ip("link", "add", MGMT_HOST, "type", "veth", "peer", "name", MGMT_DUT, "netns", "vz-dut")
    proc = None
    try:
        _ip("addr", "add", f"{MGMT_HOST_IP}/30", "dev", MGMT_HOST)
        _ip("link", "set", MGMT_HOST, "up")
        _ip("-n", "vz-dut", "addr", "add", f"{MGMT_DUT_IP}/30", "dev", MGMT_DUT)
        _ip("-n", "vz-dut", "link", "set", MGMT_DUT, "up")
        subprocess.run([SSHD, "-t", "-f", str(tmp / "sshd_config")], check=True, timeout=30)
        proc = subprocess.Popen(["ip", "netns", "exec", "vz-dut", SSHD, "-D", "-e", "-f",
                                 str(tmp / "sshd_config")], stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        wait_until(lambda: _listening(MGMT_DUT_IP, 22, proc), START_S, interval=0.05,
                   what="sshd listening")  # fmt: skip
        yield tmp
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        subprocess.run(["ip", "link", "del", MGMT_HOST], capture_output=True, check=False)
        if made_privsep:
            shutil.rmtree(PRIVSEP, ignore_errors=True)


def _topology_file(tmp: Path, identity: str = "client") -> Path:
    """The testbed, with the DUT over SSH; generator and sink stay namespaces."""
    tb = topology.testbed_topology()

    def port(p: topology.Port) -> str:
        return f'{{ iface = "{p.iface}", mac = "{p.mac}", ipv4 = "{p.ipv4}" }}'

    veloz = json.dumps([sys.executable, "-m", "veloz.cli"])  # this checkout, over there
    path = tmp / f"ssh-{identity}.toml"
    path.write_text(
        'name = "dut over ssh"\n'
        '[hosts.gen]\nkind = "netns"\nnetns = "vz-gen"\n'
        '[hosts.sink]\nkind = "netns"\nnetns = "vz-sink"\n'
        f'[hosts.dut]\nkind = "ssh"\naddress = "{MGMT_DUT_IP}"\nuser = "root"\n'
        f'identity = "{tmp / identity}"\nknown_hosts = "{tmp / "known_hosts"}"\n'
        f"veloz = {veloz}\n"
        f'[generator]\nhost = "gen"\nports = [{port(tb.generator.port)}]\n'
        f'[dut]\nhost = "dut"\nports = [{", ".join(port(p) for p in tb.dut.ports)}]\n'
        f'[sink]\nhost = "sink"\nports = [{port(tb.sink.port)}]\n'
    )
    return path


def _xdp_on(netns: str, ifname: str) -> str | None:
    for i in status()["interfaces"]:
        if (i["netns"], i["ifname"]) == (netns, ifname):
            return (i["xdp"] or {}).get("prog_name")
    raise AssertionError(f"{netns}/{ifname} not in the testbed")


def _veloz_runs_in_dut() -> list[str]:
    """veloz processes left in vz-dut (by their network namespace)."""
    dut = os.stat("/run/netns/vz-dut").st_ino
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino != dut:
                continue
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "veloz" in cmd or "vz-" in cmd.split(" ")[0]:
            left.append(cmd)
    return [c for c in left if "sshd" not in c]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # the "remote" machine is this one: its pids are ours
    except ProcessLookupError:
        return False
    return True


def test_the_ssh_host_runs_spawns_signals_reads_and_writes(sshd):
    topo = topology.load(_topology_file(sshd))
    host = topo.dut.host
    try:
        # in vz-dut: its interfaces, not this namespace's
        done = host.run(["cat", "/sys/class/net/dut-gen/address"])
        assert done.returncode == 0 and done.stdout.strip() == topo.dut.ports[0].mac
        # words with spaces and shell syntax arrive as they were
        done = host.run(["printf", "%s|", "a b", "$HOME;x"], env={"V": "1"})
        assert done.stdout == "a b|$HOME;x|"
        path = str(sshd / "written")
        host.write_file(path, "over ssh\n")
        assert host.read_file(path) == "over ssh\n"
        with pytest.raises(OSError, match="cannot read"):
            host.read_file(str(sshd / "absent"))
        done, cpu = host.run_measured(
            [sys.executable, "-c", "import time\nt=time.process_time()\n"
             "while time.process_time()-t<0.2: pass\nprint('ok')"], timeout=60)  # fmt: skip
        assert done.stdout == "ok\n" and done.stderr == "" and cpu >= 0.15
        # a background command gets SIGINT itself, as at a terminal
        script = ("import signal,sys\nprint('up', flush=True)\n"
                  "signal.sigwait([signal.SIGINT])\nprint('stopped cleanly')")  # fmt: skip
        proc = host.spawn([sys.executable, "-c", script])
        assert proc.stdout.readline() == "up\n" and _alive(proc.remote_pid)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert out == "stopped cleanly\n" and proc.returncode == 0
        # kill(): the command over there, not only the client here
        proc = host.spawn(["sleep", "600"])
        assert _alive(proc.remote_pid)
        proc.kill()
        proc.wait(timeout=30)
        wait_until(lambda: not _alive(proc.remote_pid), 10, interval=0.05,
                   what="the remote command gone")  # fmt: skip
        # a client gone (a lost connection): sshd hangs up on the command,
        # which does not outlive it; kill() afterwards is harmless
        proc = host.spawn(["sleep", "600"])
        subprocess.Popen.kill(proc)
        proc.wait(timeout=10)
        wait_until(lambda: not _alive(proc.remote_pid), 10, interval=0.05,
                   what="the remote command gone")  # fmt: skip
        proc.kill()
    finally:
        topo.close()
    assert not any(Path(tempfile.gettempdir()).glob("vz-ssh-*"))


COUNT, RATE = 20_000, 100_000
CASES = [("drop", "xdp"), ("tx", "xdp"), ("redirect", "xdp"), ("drop", "afxdp")]


def test_the_dut_over_ssh_counts_what_the_local_run_counts(sshd):
    """Exact counts: every frame sent is the NF's work, there and here."""
    topo = topology.load(_topology_file(sshd))
    with topology.use(topo):
        topology.check(topo)
        remote = [trial.measure(nf, be, rate=RATE, seconds=None, count=COUNT) for nf, be in CASES]
    local = [trial.measure(nf, be, rate=RATE, seconds=None, count=COUNT) for nf, be in CASES]
    for (nf, be), there, here in zip(CASES, remote, local, strict=True):
        assert there.keys() == here.keys(), (nf, be)
        for rec in (there, here):
            assert rec["sent"] == rec["counted"] == rec["done"] == COUNT, (nf, be, rec)
            assert rec["lost"] == 0 and rec["errors"].get("rx_missed") in (0, None)
        if be == "afxdp":  # a polling worker: its CPU time, read on its host by its pid
            assert there["cpu_nf_process"] > 0 and here["cpu_nf_process"] > 0
    # nothing left behind in the DUT: no program on its port, no process
    assert _xdp_on("vz-dut", "dut-gen") is None
    assert _veloz_runs_in_dut() == []


def _bench(tmp: Path, out: str, *extra: str) -> dict:
    argv = veloz_argv("bench", "drop", "--backends", "xdp", "--trials", "1", "--seconds", "0.5",
                      "--steps", "1", "--no-report", "--out", str(tmp / out), *extra)  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads((tmp / out / "drop.json").read_text())


def test_veloz_bench_topology_matches_the_testbed_run(sshd):
    remote = _bench(sshd, "ssh", "--topology", str(_topology_file(sshd)))
    local = _bench(sshd, "local")
    assert remote["topology"]["dut"]["host"]["kind"] == "ssh"
    assert local["topology"]["name"] == "testbed"

    # The same experiment: the same peaks and results, each with the same
    # fields. (How many search steps ran depends on the loss each run saw.)
    def shape(d: dict) -> list:
        return [(r["kind"], r["backend"], r.get("criterion"), sorted(r))
                for r in d["records"] if r["kind"] in ("peak", "result")]  # fmt: skip

    assert shape(remote) == shape(local)
    assert [r["backend"] for r in local["records"] if r["kind"] == "peak"] == ["generator", "xdp"]
    assert [s["title"] for s in remote["sections"]] == [s["title"] for s in local["sections"]]
    # Rates: the same machine, the same path for the frames, only the control
    # over SSH; the 2 shared cores make single runs noisy, so the bound is wide
    # (a factor of 3): it catches a broken path, not a few percent.
    for backend in ("generator", "xdp"):
        ssh, here = (next(r["rate_pps"] for r in d["records"]
                          if (r["kind"], r["backend"]) == ("peak", backend))
                     for d in (remote, local))  # fmt: skip
        assert here > 0 and 1 / 3 < ssh / here < 3, (backend, ssh, here)


def test_an_unknown_key_is_refused_in_one_line(sshd):
    """A key sshd does not know: one clear line, a non-zero exit, no prompt."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(sshd / "stranger")],
                   check=True, timeout=30)  # fmt: skip
    argv = veloz_argv("bench", "drop", "--backends", "xdp", "--trials", "1", "--no-report",
                      "--out", str(sshd / "refused"),
                      "--topology", str(_topology_file(sshd, "stranger")))  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach host dut over ssh" in lines[0], done.stderr
    assert "Permission denied" in lines[0]
