# SPDX-License-Identifier: BSD-2-Clause
"""lb's health checks on the testbed (python/veloz/control/health.py).

Backends are TCP servers in vz-sink on sink-dut's address and two more the
test adds there (198.18.1.3, .4); `veloz run lb` in vz-dut probes them over
dut-sink, while veloz gen sends paced UDP flows from vz-gen to the VIP and
the encapsulated frames come back to gen-dut, where they are captured: the
outer destination is each frame's backend, the inner source port its flow.

- One server killed: its backend is drained within fall x interval + timeout
  (+ SLACK); every frame of every other backend's flows, before, during and
  after, goes to the backend it had; the killed backend's flows move, each
  to the backend the drained ring names; only its ring slots changed.
  Restarted: it is back within rise x interval + timeout (+ SLACK) under its
  own id, the ring is the one the run started with, new flows reach it again
  (flows that moved stay where they went: the connection table).
- An unreachable target is a backend that is down, one stderr line, not an
  error; a VIP whose only backend is down passes its traffic to the kernel
  with on_all_down = "pass".
- A malformed check config: one line, a non-zero exit, nothing attached.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from scapy.all import IP, UDP
from test_metrics import samples, scrape
from wire import Capture, xdp_attached

from veloz.control import lb
from veloz.control.client import CTL_DIR, Ctl
from veloz.core.proc import Runner, in_netns, run_json, veloz_argv
from waits import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

VIP, VIP_PORT = "198.18.0.100", 9
SERVERS = ("198.18.1.2", "198.18.1.3", "198.18.1.4")  # in vz-sink
ADDED = SERVERS[1:]  # sink-dut has .2; the test adds these (as /32) and removes them
UNREACHABLE = "198.18.1.9"  # on dut-sink's subnet, nobody's: ARP gets no answer
CHECK_PORT = 8080
INTERVAL, TIMEOUT, RISE, FALL = 0.5, 0.25, 2, 3
# On top of the checks' own time: the probe's start and the drain's transaction
# (it reads the VIP's 65537 ring slots first) on two shared cores.
SLACK = 3.0
DOWN_WITHIN = FALL * INTERVAL + TIMEOUT + SLACK
UP_WITHIN = RISE * INTERVAL + TIMEOUT + SLACK
METRICS = "127.0.0.1:9467"
SERVE = (
    "import socket, sys\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(64); print('ready', flush=True)\n"
    "while True:\n    c, _ = s.accept(); c.close()\n"
)


def config(vips: list[tuple[str, list[str], str]]) -> str:
    """lb's config: (VIP address, backends, on_all_down) each, all on port 9/udp."""
    text = '[lb]\nsource4 = "198.18.0.2"\nnext_hop_mac = "02:00:c6:12:00:01"\n'
    check = (f'{{ type = "tcp", port = {CHECK_PORT}, interval = {INTERVAL}, timeout = {TIMEOUT}, '
             f"rise = {RISE}, fall = {FALL} }}")  # fmt: skip
    for address, backends, mode in vips:
        text += (f'[[vip]]\naddress = "{address}"\nport = {VIP_PORT}\nproto = "udp"\n'
                 f'on_all_down = "{mode}"\ncheck = {check}\n'
                 f"backends = {json.dumps(backends)}\n")  # fmt: skip
    return text


class Servers:
    """A TCP server per backend address in vz-sink, killed and restarted at will."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, address: str) -> None:
        argv = in_netns("vz-sink", [sys.executable, "-c", SERVE, address, str(CHECK_PORT)])
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        self.procs[address] = proc
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"

    def kill(self, address: str) -> None:
        proc = self.procs.pop(address)
        proc.kill()
        proc.wait(timeout=10)

    def stop(self) -> None:
        for address in list(self.procs):
            self.kill(address)


@pytest.fixture
def servers(testbed):
    def addr(verb: str, address: str) -> None:
        subprocess.run(["ip", "-n", "vz-sink", "addr", verb, f"{address}/32", "dev", "sink-dut"],
                       check=verb == "add", capture_output=True)  # fmt: skip

    s = Servers()
    try:
        for address in ADDED:
            addr("add", address)
        for address in SERVERS:
            s.start(address)
        yield s
    finally:
        s.stop()
        for address in ADDED:
            addr("del", address)


def run_lb(backend: str, cfg: Path, *extra: str) -> Runner:
    argv = veloz_argv("run", "lb", "--backend", backend, "--iface", "dut-gen", "--json",
                      "--config", str(cfg), *extra)  # fmt: skip
    return Runner(in_netns("vz-dut", argv), attach_timeout=60)


def stop(nf: Runner) -> list[str]:
    """Stop the run as Ctrl-C does; its stderr's health lines."""
    nf.proc.send_signal(signal.SIGINT)
    _, err = nf.proc.communicate(timeout=30)
    assert nf.proc.returncode == 0, err
    return [line for line in err.splitlines() if line.startswith("veloz: health:")]


def status_file() -> Path:
    return CTL_DIR / f"net{os.stat('/run/netns/vz-dut').st_ino}-dut-gen.health.json"


def lb_stats() -> dict:
    argv = veloz_argv("ctl", "--iface", "dut-gen", "lb-stats", "--json")
    return run_json(in_netns("vz-dut", argv), 30)


def backend_row(stats: dict, vip: str, address: str) -> dict:
    (row,) = [v for v in stats["vips"] if v["vip"] == f"{vip}:{VIP_PORT}/udp"]
    (b,) = [b for b in row["backends"] if b["address"] == address]
    return b


def gen_argv(seconds: float, src: str | None = None) -> list[str]:
    extra = ["--src-ip", src] if src else []
    return in_netns("vz-gen", veloz_argv(
        "gen", "--iface", "gen-dut", "--json", "--dst-ip", VIP, "--flows", "64", "--rate",
        "500", "--duration", str(seconds), *extra))  # fmt: skip


def generate(seconds: float, src: str | None = None) -> threading.Thread:
    argv = gen_argv(seconds, src)
    t = threading.Thread(target=lambda: run_json(argv, seconds + 60))
    t.start()
    return t


class Traffic:
    """Paced flows until stopped (SIGINT: the generator ends its last batch
    and reports), at most `seconds`; join() stops it, as a thread's."""

    def __init__(self, seconds: float) -> None:
        self.proc = subprocess.Popen(gen_argv(seconds), stdout=subprocess.PIPE, text=True)

    def join(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0 and '"sent"' in out, out


def frames(cap: Capture) -> list[tuple[float, tuple[str, int], str]]:
    """(arrival time, flow (inner source, source port), backend) of each frame."""
    out = []
    for f in cap.stop():
        inner = f[IP].payload
        out.append((float(f.time), (inner.src, inner[UDP].sport), f[IP].dst))
    return out


def slot_owner(ring: list[int], flow: tuple[str, int]) -> int:
    key = lb.flow_key(ipaddress.ip_address(flow[0]), ipaddress.ip_address(VIP), flow[1],
                      VIP_PORT, 17)  # fmt: skip
    return ring[lb.flow_slot(key)]


@contextlib.contextmanager
def ctl(nf: Runner):
    with Ctl(Path(nf.attached["ctl"])) as c:
        yield c


def read_ring(nf: Runner) -> list[int]:
    with ctl(nf) as c:
        return lb.read_ring(c, 0)


def entry(nf: Runner, address: str) -> tuple[int, lb.Backend]:
    with ctl(nf) as c:
        state = lb.State.read(c)
    (found,) = [(i, b) for i, b in state.backends.items() if str(b.address) == address]
    return found


def metric(got: dict, name: str, **labels: str) -> float:
    (value,) = [s.value for s in got.get(name, []) if s.labels == labels]
    return value


# xdp: the checker drains and restores through the control socket with the
# same ops on every backend, and lb's native build is held to the kernel's
# frame by frame in tests/prog; one backend keeps the suite short
@pytest.mark.parametrize("backend", ["xdp"])
def test_a_killed_backend_is_drained_and_comes_back(servers, tmp_path: Path, backend: str):
    cfg = tmp_path / "lb.toml"
    cfg.write_text(config([(VIP, list(SERVERS), "drop")]))
    killed = SERVERS[1]
    vip = f"{VIP}:{VIP_PORT}/udp"
    cap = Capture("vz-gen", "gen-dut", tmp_path / "lb.pcap", "ip proto 4")
    gens: list[threading.Thread | Traffic] = []
    try:
        t_kill, t_drained, t_restored, ring0, ring1, ids, lines = kill_and_restart(
            servers, cfg, backend, killed, gens
        )
        seen = frames(cap)
    finally:
        for g in gens:
            g.join()
        if cap.proc.poll() is None:
            cap.proc.kill()
            cap.proc.wait()
    assert not status_file().exists()
    check_flows(seen, ids, killed, ring0, ring1, (t_kill, t_drained, t_restored))
    assert len(lines) == 2, lines
    assert f"backend {killed} of {vip} is down" in lines[0]
    assert f"backend {killed} of {vip} is up" in lines[1]


def kill_and_restart(servers: Servers, cfg: Path, backend: str, killed: str,
                     gens: list[threading.Thread | Traffic]) -> tuple:  # fmt: skip
    """Under paced traffic: kill, drained, restart, back; then new flows."""
    vip = f"{VIP}:{VIP_PORT}/udp"
    with run_lb(backend, cfg, "--metrics", METRICS) as nf:
        ring0 = read_ring(nf)
        ids = {address: entry(nf, address)[0] for address in SERVERS}
        gen = Traffic(60)
        gens.append(gen)
        time.sleep(3)  # every flow seen on its first backend
        t_kill = time.time()
        servers.kill(killed)
        wait_until(lambda: entry(nf, killed)[1].down, DOWN_WITHIN, interval=0.05,
                   what=f"{killed} drained within {DOWN_WITHIN} s")  # fmt: skip
        t_drained = time.time()
        ring1 = read_ring(nf)
        # only its slots moved, to the others
        moved = {s for s in range(lb.RING_SIZE) if ring1[s] != ring0[s]}
        assert moved == {s for s in range(lb.RING_SIZE) if ring0[s] == ids[killed]}
        assert ids[killed] not in ring1 and 0 not in ring1
        # what status, lb-stats and the metrics say
        row = backend_row(lb_stats(), VIP, killed)
        assert row["down"] and not row["valid"] and row["check"]["up"] is False
        assert row["check"]["last"] == "fail" and row["check"]["failures"] >= FALL
        text = subprocess.run(in_netns("vz-dut", veloz_argv("status")), capture_output=True,
                              text=True, timeout=60, check=True).stdout  # fmt: skip
        assert f"{killed} " in text and "(down)" in text
        got = wait_until(lambda: samples(scrape(METRICS).stdout), 10, interval=0.2,
                         until=lambda g: "veloz_lb_backend_up" in g,
                         what="the health metrics scraped")  # fmt: skip
        assert metric(got, "veloz_lb_backend_up", vip=vip, backend=killed) == 0
        assert metric(got, "veloz_lb_backend_up", vip=vip, backend=SERVERS[0]) == 1
        assert metric(got, "veloz_lb_vip_healthy_backends", vip=vip) == 2
        fails = metric(got, "veloz_lb_health_checks_total", vip=vip, backend=killed, result="fail")
        assert fails >= FALL
        time.sleep(3)  # its flows on their new backends
        servers.start(killed)
        wait_until(lambda: entry(nf, killed)[1].valid, UP_WITHIN, interval=0.05,
                   what=f"{killed} back within {UP_WITHIN} s")  # fmt: skip
        t_restored = time.time()
        assert entry(nf, killed)[0] == ids[killed]  # its own id: its Maglev identity
        assert read_ring(nf) == ring0
        time.sleep(2)  # its flows back on it
        gen.join()
        fresh = generate(3, src="198.18.0.50")  # new flows: the ring decides
        gens.append(fresh)
        fresh.join()
        time.sleep(0.5)
        lines = stop(nf)
    return t_kill, t_drained, t_restored, ring0, ring1, ids, lines


def check_flows(seen: list, ids: dict[str, int], killed: str, ring0: list[int],
                ring1: list[int], times: tuple[float, float, float]) -> None:  # fmt: skip
    """Flow by flow, frame by frame: see the module's docstring."""
    t_kill, t_drained, t_restored = times
    by_flow: dict[tuple[str, int], list[tuple[float, str]]] = defaultdict(list)
    for t, flow, to in seen:
        by_flow[flow].append((t, to))
    old = {f: v for f, v in by_flow.items() if f[0] != "198.18.0.50"}
    new = {f: v for f, v in by_flow.items() if f[0] == "198.18.0.50"}
    assert len(old) == 64 and len(new) == 64, (len(old), len(new))
    first = {f: v[0][1] for f, v in old.items()}
    names = {i: a for a, i in ids.items()}
    # before the kill, every flow went where the start's ring says
    assert all(names[slot_owner(ring0, f)] == to for f, to in first.items())
    mine = {f for f, to in first.items() if to == killed}
    assert mine and len(mine) < len(old)
    for f, v in old.items():
        if f not in mine:  # a surviving backend's flow: every frame on its backend
            assert {to for _, to in v} == {first[f]}, (f, v)
            continue
        assert all(to == killed for t, to in v if t < t_kill), (f, v)
        after = {to for t, to in v if t > t_drained + 0.1}
        # moved once, where the drained ring says, and stays there after the
        # restore (its new backend holds it: the connection table)
        assert after == {names[slot_owner(ring1, f)]}, (f, v)
        assert any(t > t_restored + 0.1 for t, _ in v), "traffic after the restore"
    # new flows follow the restored ring: the killed backend takes its share again
    for f, v in new.items():
        assert {to for _, to in v} == {names[slot_owner(ring0, f)]}, (f, v)
    assert any(v[0][1] == killed for v in new.values())


def test_unreachable_target_is_down_and_on_all_down_pass(servers, tmp_path: Path):
    lone = "198.18.0.101"
    cfg = tmp_path / "lb.toml"
    cfg.write_text(config([(VIP, [SERVERS[0], UNREACHABLE], "drop"),
                           (lone, ["198.18.1.8"], "pass")]))  # fmt: skip
    with run_lb("xdp", cfg) as nf:
        for address in (UNREACHABLE, "198.18.1.8"):
            wait_until(lambda a=address: entry(nf, a)[1].down, DOWN_WITHIN, interval=0.05,
                       what=f"{address} down within {DOWN_WITHIN} s")  # fmt: skip
        assert nf.proc.poll() is None  # not an error of the run
        stats = lb_stats()
        row = backend_row(stats, VIP, UNREACHABLE)
        assert row["down"] and row["check"]["last"] in ("timeout", "fail")
        assert not backend_row(stats, VIP, SERVERS[0])["down"]
        (alone,) = [v for v in stats["vips"] if v["vip"] == f"{lone}:{VIP_PORT}/udp"]
        assert alone["up"] == 0 and alone["on_all_down"] == "pass"
        argv = in_netns("vz-dut", veloz_argv("ctl", "--iface", "dut-gen", "lb-stats"))
        text = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
        assert "no backend up: its traffic is passed to the kernel" in text
        before = stats["counters"]["all_down_pass"]
        sent = run_json(in_netns("vz-gen", veloz_argv(
            "gen", "--iface", "gen-dut", "--json", "--dst-ip", lone, "--count", "200",
            "--rate", "1k", "--flows", "8")), 60)  # fmt: skip
        wait_until(
            lambda: lb_stats()["counters"]["all_down_pass"] - before,
            10,
            until=lambda n: n >= sent["xmit"],
            what="the lone VIP's frames passed",
        )
        assert lb_stats()["counters"]["all_down_pass"] - before == sent["xmit"] == 200
        lines = stop(nf)
    assert len(lines) == 2, lines  # one line per change, not one per failed probe
    assert any(f"backend {UNREACHABLE} of {VIP}:{VIP_PORT}/udp is down" in x for x in lines)


@pytest.mark.parametrize("check, message", [
    ('{ type = "ping" }', "type must be one of tcp, http, udp, not 'ping'"),
    ('{ type = "tcp", fall = 0 }', "fall must be a whole number 1-100, not 0"),
    ('{ type = "http", send = "x" }', "a http check has no key 'send'"),
])  # fmt: skip
def test_a_malformed_check_is_one_line_and_nothing_attached(testbed, tmp_path, check, message):
    cfg = tmp_path / "lb.toml"
    cfg.write_text(config([(VIP, [SERVERS[0]], "drop")]).replace(
        f'{{ type = "tcp", port = {CHECK_PORT}, interval = {INTERVAL}, timeout = {TIMEOUT}, '
        f"rise = {RISE}, fall = {FALL} }}", check))  # fmt: skip
    done = subprocess.run(in_netns("vz-dut", veloz_argv(
        "run", "lb", "--backend", "xdp", "--iface", "dut-gen", "--json", "--config", str(cfg))),
        capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not xdp_attached("vz-dut", "dut-gen")
    assert not status_file().exists()
