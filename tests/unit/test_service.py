# SPDX-License-Identifier: BSD-2-Clause
"""The systemd side of instances without root or systemd: the units' commands
are ones `veloz` takes, `systemd-analyze verify` passes them, READY=1 is one
datagram to $NOTIFY_SOCKET sent only once the runner answers and counts, and
SIGHUP to the companion runs a reload."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from veloz.cli import parse_args, reload, run
from veloz.control import client, companion, service

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "install" / "systemd"
VELOZ = "/usr/bin/veloz"


def unit(name: str) -> dict[str, list[str]]:
    """The [Service] section's directives (each may repeat)."""
    out: dict[str, list[str]] = {}
    section = ""
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def argv_of(command: str, instance: str) -> list[str]:
    argv = shlex.split(command.replace("%i", instance))
    assert argv[0] == VELOZ
    return argv[1:]


def test_the_nf_unit_runs_and_reloads_an_instance():
    s = unit("veloz@.service")
    assert s["Type"] == ["notify"] and s["NotifyAccess"] == ["all"]
    assert s["KillSignal"] == ["SIGTERM"]
    args = parse_args(argv_of(s["ExecStart"][0], "edge"))
    assert args.func is run._run and args.instance == "edge"
    args = parse_args(argv_of(s["ExecReload"][0], "edge"))
    assert args.func is reload._reload and args.instance == "edge"
    assert s["ReadWritePaths"] == ["/run/veloz /sys/fs/bpf"]
    assert s["LimitMEMLOCK"] == ["infinity"]


def test_the_udpd_unit_runs_an_instance():
    s = unit("veloz-udpd@.service")
    assert s["Type"] == ["notify"] and s["NotifyAccess"] == ["all"]
    args = parse_args(argv_of(s["ExecStart"][0], "dns"))
    assert args.instance == "dns" and args.command == "udpd"
    assert "ExecReload" not in s  # udpd has nothing to reload: a restart


def verify(root: Path, *units: str) -> subprocess.CompletedProcess:
    return subprocess.run(["systemd-analyze", "verify", f"--root={root}", "--man=no", *units],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="no systemd-analyze")
def test_systemd_analyze_verify_passes_both(tmp_path):
    """In a root of their own: the host's units (targets), the two under test,
    and a /usr/bin/veloz stub, so verify checks the executable's presence."""
    (tmp_path / "usr/lib/systemd").mkdir(parents=True)
    for base in ("/usr/lib/systemd/system", "/lib/systemd/system"):
        if Path(base).is_dir():
            shutil.copytree(base, tmp_path / "usr/lib/systemd/system", dirs_exist_ok=True,
                            symlinks=True)  # fmt: skip
            break
    etc = tmp_path / "etc/systemd/system"
    etc.mkdir(parents=True)
    for name in ("veloz@.service", "veloz-udpd@.service"):
        shutil.copy(UNITS / name, etc / name)
    names = ("veloz@edge.service", "veloz-udpd@dns.service")
    done = verify(tmp_path, *names)
    assert "not executable" in done.stderr  # no veloz yet: verify looks for it
    stub = tmp_path / "usr/bin/veloz"
    stub.parent.mkdir(parents=True)
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    done = verify(tmp_path, *names)
    assert done.returncode == 0 and done.stderr == "" and done.stdout == "", done.stderr
    # and it would say so about a mistake
    text = (etc / "veloz@.service").read_text().replace("Type=notify", "Type=notifyy")
    (etc / "veloz@.service").write_text(text)
    assert "Failed to parse service type" in verify(tmp_path, names[0]).stderr


# ---- sd_notify ------------------------------------------------------------------


def listen(address: str | bytes) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(address)
    s.settimeout(10)
    return s


def test_notify_sends_one_datagram_to_a_path_or_an_abstract_name(tmp_path):
    with listen(str(tmp_path / "notify")) as s:
        assert service.notify("READY=1\nSTATUS=x", {"NOTIFY_SOCKET": str(tmp_path / "notify")})
        assert s.recv(4096) == b"READY=1\nSTATUS=x"
    name = f"veloz-test-{os.getpid()}"
    with listen(b"\0" + name.encode()) as s:
        assert service.notify("READY=1", {"NOTIFY_SOCKET": "@" + name})
        assert s.recv(4096) == b"READY=1"
    assert not service.notify("READY=1", {})  # not under systemd: nothing
    assert not service.notify("READY=1", {"NOTIFY_SOCKET": "vsock:2:1"})
    assert service.ready_message(7, "up") == "READY=1\nMAINPID=7\nSTATUS=up"


class FakeRunner:
    """A control socket that answers info at once and counters only once
    `counting` is set, as the runner does before its first interval."""

    def __init__(self, path: Path) -> None:
        self.counting = threading.Event()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn, conn.makefile("rw") as f:
                for line in f:
                    if line.strip() == "info":
                        f.write("ok ddos xdp\n")
                    elif self.counting.is_set():
                        f.write('ok 1\n{"packets": 0}\n')
                    else:
                        f.write("ok 0\n")
                    f.flush()


def test_ready_only_once_counting_and_sighup_reloads(tmp_path, monkeypatch):
    monkeypatch.setattr(client, "CTL_DIR", tmp_path)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    runner = FakeRunner(client.socket_path("dut0"))
    marks = tmp_path / "reloads"

    def reload() -> str:
        with marks.open("a") as f:
            f.write("x")
        return "reloaded"

    with listen(str(tmp_path / "notify")) as notes:
        pid = service.start_nf("dut0", "ddos", "xdp", {"instance": "edge"}, reload)
        try:
            notes.settimeout(0.5)
            with pytest.raises(TimeoutError):
                notes.recv(4096)  # answers info, has not counted: not ready
            runner.counting.set()
            notes.settimeout(10)
            ready = notes.recv(4096).decode()
            assert ready.startswith(f"READY=1\nMAINPID={os.getpid()}\n")
            status = companion.read_status(companion.status_path("dut0", "instance"))
            assert status == {"instance": "edge", "pid": os.getpid()}
            os.kill(pid, signal.SIGHUP)
            assert notes.recv(4096).startswith(b"RELOADING=1")
            assert notes.recv(4096) == b"READY=1\nSTATUS=reloaded"
            assert marks.read_text() == "x"
        finally:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
            runner.sock.close()
    # the companion took its status file along
    assert not companion.status_path("dut0", "instance").exists()
