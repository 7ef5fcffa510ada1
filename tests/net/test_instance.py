# SPDX-License-Identifier: BSD-2-Clause
"""A ddos instance on xdp as systemd would run it (docs/service.md): READY=1
on a test $NOTIFY_SOCKET only once the NF is attached and its control socket
answers; an edited rules file and SIGHUP to the runner apply the new rules
as one transaction (no state between old and new is ever read back, and the
new rule counts the generator's frames); a broken file is one line on stderr
and the old rules stay; SIGTERM detaches and leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from test_ctl_load import ok

from veloz.control import companion
from veloz.core.proc import in_netns, run_json, veloz_argv
from waits import wait_until

DUT_IP = "198.18.0.2"  # vz-dut's dut-gen
OLD = '[[rule]]\nsrc = "198.18.200.0/24"\naction = "drop"\n'
PORT9 = '[[rule]]\nproto = "udp"\ndport = 9\naction = "drop"\n'  # the generator's frames
NEW = 'allow = ["198.18.210.0/24"]\n' + OLD + PORT9
BROKEN = OLD + '[[rule]]\nproto = "udp"\naction = "explode"\n'
INSTANCE = """\
nf = "ddos"
backend = "xdp"
ports = ["dut-gen"]
config = "rules.toml"
[options]
json = true
interval = 0.2
"""


def rules() -> list[dict]:
    counts = ("id", "packets", "bytes", "dropped")
    return [{k: v for k, v in r.items() if k not in counts}
            for r in json.loads(ok("rule", "list", "--json"))]  # fmt: skip


def expect(text: str) -> list[dict]:
    import tomllib

    return tomllib.loads(text)["rule"]


def notes_until(notes: socket.socket, prefix: bytes, seen: list[bytes]) -> bytes:
    """The next datagram that starts with prefix; every one read lands in seen."""
    while True:
        note = notes.recv(4096)
        seen.append(note)
        if note.startswith(prefix):
            return note


def xdp_attached() -> bool:
    done = subprocess.run(["ip", "-n", "vz-dut", "-d", "link", "show", "dut-gen"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return "prog/xdp" in done.stdout


@dataclass
class Service:
    """The running instance as a test sees it: the process, the notify
    socket and every datagram on it, its stderr, its rules file."""

    proc: subprocess.Popen
    notes: socket.socket
    err: Path
    rules_file: Path
    seen: list[bytes] = field(default_factory=list)

    def hup(self, text: str) -> str:
        """Write the rules file, SIGHUP the runner: the READY=1 that ends the reload."""
        self.rules_file.write_text(text)
        os.kill(self.proc.pid, signal.SIGHUP)
        return notes_until(self.notes, b"READY=1", self.seen).decode()


def reload_is_one_transaction(svc: Service) -> None:
    """A changed file and SIGHUP: a poller sees the old rules or the new, never between."""
    polled: list[list[dict]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            polled.append(rules())

    poller = threading.Thread(target=poll)
    poller.start()
    done = svc.hup(NEW)
    stop.set()
    poller.join()
    assert "map changes applied in one transaction" in done, done
    assert rules() == expect(NEW) and svc.proc.poll() is None
    assert polled and all(p in (expect(OLD), expect(NEW)) for p in polled), polled
    assert any(n.startswith(b"RELOADING=1") for n in svc.seen)
    assert json.loads(ok("allow", "list", "--json")) == ["198.18.210.0/24"]
    # the new rule applies to traffic: the generator's UDP to port 9 is dropped by it
    sent = run_json(in_netns("vz-gen", veloz_argv(
        "gen", "--iface", "gen-dut", "--json", "--count", "2000", "--rate", "20k",
        "--dst-ip", DUT_IP)), 120)["sent"]  # fmt: skip
    assert sent > 0
    wait_until(lambda: json.loads(ok("rule", "list", "--json"))[1]["dropped"], 10,
               until=lambda n: n >= sent, what=f"{sent} frames dropped by rule 1")  # fmt: skip


def veloz_reload(inst: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(in_netns("vz-dut", veloz_argv("reload", "--instance", str(inst),
                          *extra)), capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip


def broken_changes_nothing(svc: Service, inst: Path) -> None:
    """A broken file: one line on stderr, the rules as they were, still running."""
    lines_before = len(svc.err.read_text().splitlines())
    done = svc.hup(BROKEN)
    assert "reload refused" in done and "explode" in done
    new_lines = svc.err.read_text().splitlines()[lines_before:]
    assert len(new_lines) == 1 and "explode" in new_lines[0], new_lines
    assert rules() == expect(NEW) and svc.proc.poll() is None
    # the same through `veloz reload`: one line, non-zero, nothing changed
    cli = veloz_reload(inst)
    assert cli.returncode != 0 and len(cli.stderr.splitlines()) == 1, cli.stderr
    assert rules() == expect(NEW)
    svc.rules_file.write_text(OLD)
    cli = veloz_reload(inst, "--json")
    assert cli.returncode == 0 and json.loads(cli.stdout)["changes"] > 0, cli.stderr
    assert rules() == expect(OLD)


def test_ddos_instance_ready_reload_and_broken_file(testbed, tmp_path):
    (tmp_path / "rules.toml").write_text(OLD)
    inst = tmp_path / "edge.toml"
    inst.write_text(INSTANCE)
    notes = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notes.bind(str(tmp_path / "notify"))
    notes.settimeout(60)
    out, err = (tmp_path / "stdout").open("w+"), (tmp_path / "stderr").open("w+")
    env = {**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify")}
    proc = subprocess.Popen(in_netns("vz-dut", veloz_argv("run", "--instance", str(inst))),
                            stdout=out, stderr=err, env=env)  # fmt: skip
    svc = Service(proc, notes, Path(err.name), tmp_path / "rules.toml")
    try:
        ready = notes_until(notes, b"READY=1", svc.seen).decode()
        # ready: attached (its line is out), the control socket answers, and it is the runner
        assert f"MAINPID={proc.pid}" in ready.splitlines()
        attached = json.loads(Path(out.name).read_text().splitlines()[0])
        assert attached["event"] == "attached"
        ctl_path = Path(attached["ctl"])
        assert xdp_attached() and rules() == expect(OLD)
        status = companion.beside(ctl_path, "instance")
        assert json.loads(status.read_text())["pid"] == proc.pid

        reload_is_one_transaction(svc)
        broken_changes_nothing(svc, inst)

        # stop: detached, the socket and the companion's record gone
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, svc.err.read_text()
        assert not xdp_attached()
        assert not ctl_path.exists() and not status.exists()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        notes.close()
        out.close()
        err.close()
        if xdp_attached():  # a run that died attached: leave the testbed clean
            subprocess.run(["ip", "-n", "vz-dut", "link", "set", "dut-gen", "xdp", "off"],
                           check=False)  # fmt: skip
