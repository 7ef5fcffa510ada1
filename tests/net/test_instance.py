# SPDX-License-Identifier: BSD-2-Clause
"""A ddos instance on xdp as systemd would run it (docs/service.md): READY=1
on a test $NOTIFY_SOCKET only once the NF is attached and its control socket
answers; an edited rules file and SIGHUP to the runner apply the new rules
as one transaction (no state between old and new is ever read back, and the
new rule counts the generator's frames); a broken file is one line on stderr
and the old rules stay; SIGTERM detaches and leaves nothing behind.
A router instance's edited route file is applied by `veloz reload` (routes
added, replaced by a multipath one, removed; the unchanged route keeps its
next hop), and a switch to sync = "kernel" is refused; an lb instance's
edited backends are applied with the flows of the backends that stay still
pinned to them (lb_conns, read through `veloz ctl dump`), a removed
backend's flows re-pinned, and an added health check refused."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
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


# ---- router and lb instances: a reload applies their objects -------------------

SINK_MAC = "02:00:c6:12:01:02"  # vz-sink's sink-dut, the router's next hop


@contextlib.contextmanager
def instance_running(tmp_path: Path, text: str, ports: tuple[str, ...]) -> Iterator[Path]:
    """An instance file of text, run as its service runs it, until READY=1;
    stopped with SIGTERM afterwards, nothing left attached."""
    inst = tmp_path / "inst.toml"
    inst.write_text(text)
    notes = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notes.bind(str(tmp_path / "notify"))
    notes.settimeout(60)
    err = (tmp_path / "stderr").open("w+")
    env = {**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify")}
    proc = subprocess.Popen(in_netns("vz-dut", veloz_argv("run", "--instance", str(inst))),
                            stdout=subprocess.DEVNULL, stderr=err, env=env)  # fmt: skip
    try:
        notes_until(notes, b"READY=1", [])
        yield inst
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, Path(err.name).read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        notes.close()
        err.close()
        for port in ports:
            subprocess.run(["ip", "-n", "vz-dut", "link", "set", port, "xdp", "off"],
                           check=False, capture_output=True)  # fmt: skip


def refused(inst: Path, *words: str) -> None:
    """`veloz reload`: one line on stderr naming words, a non-zero exit."""
    done = veloz_reload(inst)
    assert done.returncode != 0 and len(done.stderr.splitlines()) == 1, done.stderr
    assert all(w in done.stderr for w in words), done.stderr


def applied(inst: Path) -> int:
    done = veloz_reload(inst, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["changes"]


ROUTER = """\
nf = "router"
backend = "xdp"
ports = ["dut-gen", "dut-sink"]
config = "router.toml"
"""
ROUTER_CONFIG = f'routes = "table.txt"\n[[neighbour]]\naddress = "198.18.1.2"\nmac = "{SINK_MAC}"\n'
TABLE_OLD = "198.18.128.0/17 198.18.1.2 dut-sink\n198.18.96.0/20 198.18.1.2 dut-sink\n"
# the /17 stays, the /20 goes, a multipath /19 and a blackhole /24 come
TABLE_NEW = ("198.18.128.0/17 198.18.1.2 dut-sink\n198.18.64.0/19 proto static\n"
             "\tnexthop via 198.18.1.2 dev dut-sink weight 1\n"
             "\tnexthop via 198.18.1.3 dev dut-sink weight 1\n"
             "198.18.100.0/24 blackhole\n")  # fmt: skip


def routes() -> dict[str, dict]:
    """The router's routes in 198.18.64.0/18 and above /16 (not the ports' own)."""
    rows = json.loads(ok("route", "list", "--json"))
    return {r["prefix"]: r for r in rows if r["prefix"].split("/")[1] in ("17", "19", "20", "24")}


def test_router_instance_reload_applies_routes(testbed, tmp_path):
    (tmp_path / "table.txt").write_text(TABLE_OLD)
    (tmp_path / "router.toml").write_text(ROUTER_CONFIG)
    with instance_running(tmp_path, ROUTER, ("dut-gen", "dut-sink")) as inst:
        before = routes()
        assert set(before) == {"198.18.128.0/17", "198.18.96.0/20"}, before
        hops = json.loads(ok("neigh", "list", "--json"))
        (tmp_path / "table.txt").write_text(TABLE_NEW)
        assert applied(inst) > 0
        after = routes()
        assert set(after) == {"198.18.128.0/17", "198.18.64.0/19", "198.18.100.0/24"}, after
        # the unchanged route: the same next hop, resolved, in the same slot
        assert after["198.18.128.0/17"] == before["198.18.128.0/17"]
        assert after["198.18.128.0/17"]["resolved"] is True
        assert [h for h in json.loads(ok("neigh", "list", "--json")) if h in hops] == hops
        multipath = after["198.18.64.0/19"]["multipath"]
        assert sorted((h["via"], h["port"]) for h in multipath) == [("198.18.1.2", 1),
                                                                     ("198.18.1.3", 1)]  # fmt: skip
        assert after["198.18.100.0/24"]["kind"] == "blackhole"
        assert applied(inst) == 0  # the same file again: nothing to do
        # a broken file, a switch to the kernel's table: one line, nothing changes
        (tmp_path / "table.txt").write_text(TABLE_NEW + "198.18.7.0/33 198.18.1.2\n")
        refused(inst, "table.txt line", "bad prefix")
        (tmp_path / "table.txt").write_text(TABLE_NEW)
        (tmp_path / "router.toml").write_text('sync = "kernel"\n' + ROUTER_CONFIG.split("\n", 1)[1])
        refused(inst, 'sync = "kernel"', "restart")
        assert routes() == after


LB = """\
nf = "lb"
backend = "xdp"
ports = ["dut-gen"]
config = "lb.toml"
"""
LB_VIP = "198.18.0.100"


def lb_config(backends: list[str], check: str = "") -> str:
    return ('[lb]\nsource4 = "198.18.0.2"\nnext_hop_mac = "02:00:c6:12:00:01"\n'
            f'[[vip]]\naddress = "{LB_VIP}"\nport = 9\nproto = "udp"\n{check}'
            f"backends = {json.dumps(backends)}\n")  # fmt: skip


def conns() -> dict[str, int]:
    """lb_conns: flow (hex) -> the backend id it is pinned to."""
    lines = ok("dump", "lb_conns").splitlines()
    return {
        k: int.from_bytes(bytes.fromhex(v)[:4], "little") for k, v in (x.split() for x in lines)
    }


def lb_backends() -> dict[str, tuple[int, int]]:
    """address -> (id, weight) of the VIP's backends."""
    (row,) = json.loads(ok("vip", "list", "--json"))
    return {b["address"]: (b["id"], b["weight"]) for b in row["backends"]}


def flows() -> None:
    """The same 64 UDP flows to the VIP every time (vz-gen's source ports)."""
    argv = veloz_argv("gen", "--iface", "gen-dut", "--json", "--dst-ip", LB_VIP, "--flows", "64",
                      "--count", "640", "--rate", "2k")  # fmt: skip
    assert run_json(in_netns("vz-gen", argv), 120)["sent"] > 0


def test_lb_instance_reload_keeps_connections_of_backends_that_stay(testbed, tmp_path):
    old = ["198.18.1.2", "198.18.1.3", "198.18.1.4"]
    (tmp_path / "lb.toml").write_text(lb_config(old))
    with instance_running(tmp_path, LB, ("dut-gen",)) as inst:
        flows()
        ids = lb_backends()
        pinned = wait_until(conns, 10, until=lambda c: len(c) >= 64, what="64 flows pinned")
        gone = ids["198.18.1.4"][0]
        assert set(pinned.values()) <= {i for i, _ in ids.values()}
        # .4 goes, .3 weighs 2, .5 comes: one transaction
        (tmp_path / "lb.toml").write_text(lb_config(["198.18.1.2", "198.18.1.3:weight=2",
                                                      "198.18.1.5"]))  # fmt: skip
        assert applied(inst) > 0
        now = lb_backends()
        assert set(now) == {"198.18.1.2", "198.18.1.3", "198.18.1.5"}
        assert now["198.18.1.2"] == ids["198.18.1.2"]
        assert now["198.18.1.3"] == (ids["198.18.1.3"][0], 2)
        # the same flows again: each keeps the backend it had unless that one left
        flows()
        again = conns()
        for flow, bid in pinned.items():
            if bid != gone:
                assert again[flow] == bid, flow
            else:
                assert again[flow] in {i for i, _ in now.values()}, flow
        assert applied(inst) == 0
        # a health check added, or a broken file: one line, nothing changes
        (tmp_path / "lb.toml").write_text(lb_config(list(now), 'check = { type = "tcp" }\n'))
        refused(inst, "the health checks changed", "restart")
        (tmp_path / "lb.toml").write_text(lb_config(["198.18.1.2:weight=0"]))
        refused(inst, "weight")
        assert lb_backends() == now
