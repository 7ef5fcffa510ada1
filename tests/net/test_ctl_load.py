# SPDX-License-Identifier: BSD-2-Clause
"""The control plane under load and faults (issue 22): a running router, on
xdp and on afxdp, under paced generator traffic, changed by many `veloz ctl`
clients at once, while one client is SIGKILLed in the middle of its
transaction.

The NF serves one control session at a time (src/ctl/ctl_server.c), so the
clients' commands interleave in whatever order their connections are
accepted, and each command's read-modify-write (next-hop slots, the route
trie) is one session. Afterwards:

- every frame the generator sent is counted by a verdict (the traffic goes
  to prefixes the clients are changing, so frames are forwarded, dropped by
  a blackhole or passed while it happens);
- the routes are exactly those the committed commands wrote, read back
  through `veloz ctl`;
- the killed client's transaction is rolled back, in the map and on the
  wire;
- the runner holds as many file descriptors as before the clients came:
  no session or socket is leaked.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_ctl import CONFIG  # the router's config, as test_ctl runs it

from veloz.control import dir24, router
from veloz.control.client import Ctl
from veloz.core.proc import Runner, in_netns, run_json, veloz_argv
from waits import wait_until

CLIENTS = 4
COMMANDS = 4  # per client
# Each client owns one /24 inside the traffic's range: 198.18.(140+i).0/24
TRAFFIC = "198.18.140.0/22"
FRAMES = 60_000
RATE = "10k"

# A client that opens a transaction, writes a blackhole for all of the
# traffic's range (the trie and the DIR-24-8 entries the data path reads),
# says so once its writes are applied, and waits to be killed.
KILLED = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
f = s.makefile("rw")
lines = ["begin", *sys.argv[2:]]
f.write("".join(line + "\\n" for line in lines))
f.flush()
print(" ".join(f.readline().strip() for _ in lines), flush=True)
sys.stdin.read()  # until killed
"""


def killed_writes() -> list[str]:
    """The killed client's transaction: a /22 blackhole over TRAFFIC."""
    net = ipaddress.ip_network(TRAFFIC)
    key = net.prefixlen.to_bytes(4, "little") + net.network_address.packed
    value = router.BLACKHOLE.to_bytes(4, "little") + bytes(4)
    lines = [f"update {router.ROUTES[4]} {key.hex()} {value.hex()}"]
    entry = dir24.entry(router.BLACKHOLE, 0, net.prefixlen).to_bytes(4, "little")
    first = int(net.network_address) >> 8
    for index in range(first, first + (1 << (24 - net.prefixlen))):
        lines.append(f"update router_tbl24 {index.to_bytes(4, 'little').hex()} {entry.hex()}")
    return lines


def kill_mid_transaction(path: str, writes: list[str]) -> None:
    """A client whose transaction is applied (each write ok), then SIGKILLed."""
    killed = subprocess.Popen([sys.executable, "-c", KILLED, path, *writes],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    assert killed.stdout is not None
    # its writes are applied (begin and each: ok) once its session is served
    assert killed.stdout.readline().split() == ["ok"] * (1 + len(writes))
    killed.kill()
    killed.wait(timeout=10)


def ctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(in_netns("vz-dut", veloz_argv("ctl", *args)), capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


def ok(*args: str) -> str:
    done = ctl(*args)
    assert done.returncode == 0, f"veloz ctl {' '.join(args)}: {done.stderr}"
    return done.stdout


def client(i: int) -> list[dict]:
    """One client's commands; returns the routes it leaves behind.

    Each adds routes in its own /24 through a next hop of its own (so the
    clients compete for next-hop slots), replaces one, deletes one."""
    via = f"198.18.1.{10 + i}"
    net = f"198.18.{140 + i}"
    ok("route", "add", f"{net}.0/25", "via", via, "--port", "dut-sink")
    ok("route", "add", f"{net}.128/25", "blackhole")
    ok("route", "add", f"{net}.0/26", "via", "198.18.1.2", "--port", "1")
    ok("route", "del", f"{net}.128/25")
    assert COMMANDS == 4
    return [
        {"prefix": f"{net}.0/25", "kind": "via", "via": via, "port": 1},
        {"prefix": f"{net}.0/26", "kind": "via", "via": "198.18.1.2", "port": 1},
    ]


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def held_fds(pid: int, path: str) -> int:
    """The runner's descriptors while this test holds the one control session:
    every earlier session is closed by then (the server serves one at a time),
    so the count does not race with the server closing the last one."""
    with Ctl(Path(path)) as c:
        c.info()
        return fds(pid)


def route_rows(listed: str) -> set[tuple]:
    return {(r["prefix"], r["kind"], r.get("via"), r.get("port")) for r in json.loads(listed)}


def verdict_sum(stats: dict) -> int:
    return sum(v["packets"] for v in stats["verdicts"].values())


@pytest.mark.parametrize("backend", ["xdp", "afxdp"])
def test_ctl_clients_under_load_and_a_kill(testbed, tmp_path, backend):
    cfg = tmp_path / "router.toml"
    cfg.write_text(CONFIG)
    argv = veloz_argv("run", "router", "--backend", backend, "--iface", "dut-gen", "--iface",
                      "dut-sink", "--config", str(cfg), "--json")  # fmt: skip
    sink_argv = veloz_argv("gen", "--sink", "--replace", "--iface", "sink-dut", "--json")
    with Runner(in_netns("vz-dut", argv), attach_timeout=60) as nf, \
            Runner(in_netns("vz-sink", sink_argv), what="the sink") as sink:  # fmt: skip
        path = nf.attached["ctl"]
        before = route_rows(ok("route", "list", "--json"))
        fds_before = held_fds(nf.proc.pid, path)

        sent: list[dict] = []
        gen = threading.Thread(target=lambda: sent.append(run_json(in_netns("vz-gen", veloz_argv(
            "gen", "--iface", "gen-dut", "--json", "--count", str(FRAMES), "--rate", RATE,
            "--dsts", "64", "--dst-range", TRAFFIC)), 120)))  # fmt: skip
        gen.start()
        with ThreadPoolExecutor(max_workers=CLIENTS + 1) as pool:
            futures = [pool.submit(client, i) for i in range(CLIENTS)]
            # the killed client joins in the middle of the others
            kill_mid_transaction(path, killed_writes())
            expected = set(before)
            for f in futures:
                expected |= {(r["prefix"], r["kind"], r["via"], r["port"]) for r in f.result()}
        gen.join(timeout=120)
        assert sent, "the generator failed"

        # the map: exactly what the committed commands wrote; the killed
        # client's /22 blackhole is gone
        assert route_rows(ok("route", "list", "--json")) == expected
        assert "198.18.140.0/22" not in ok("route", "list", "--json")
        # and on the wire: the range forwards again
        stats0 = json.loads(ok("stats", "--json"))
        probe = run_json(in_netns("vz-gen", veloz_argv(
            "gen", "--iface", "gen-dut", "--json", "--count", "1000", "--rate", RATE,
            "--dst-ip", "198.18.140.1")), 60)  # fmt: skip
        assert probe["sent"] == 1000

        # every frame counted: wait for the last in flight, never a fixed sleep
        total = sent[0]["sent"] + probe["sent"]

        def mine(stats: dict) -> int:
            c = stats["counters"]
            return c["forwarded"] + c["unresolved"] + c["blackhole"]

        # each poll is a `veloz ctl` run: no pause between them
        stats = wait_until(lambda: json.loads(ok("stats", "--json")), 10,
                           until=lambda st: mine(st) >= total, interval=0,
                           what=f"{total} frames routed, unresolved or blackholed")  # fmt: skip
        c = stats["counters"]
        # the generator's frames (IPv4 to TRAFFIC, all routed) are exactly
        # those forwarded, passed for want of a MAC, or blackholed; anything
        # else (the namespaces' own IPv6 ND, ...) lands in the other counters,
        # and every frame in exactly one verdict
        assert mine(stats) == total, (c, total)
        v = {name: x["packets"] for name, x in stats["verdicts"].items()}
        assert sum(v.values()) == sum(c.values()), (v, c)
        assert v["redirect"] == c["forwarded"] and v["drop"] == c["blackhole"] + c["malformed"]
        assert v["redirect"] - stats0["verdicts"]["redirect"]["packets"] == 1000
        assert c["blackhole"] > 0, "the blackholes never met the traffic"

        # no session or socket left behind in the runner
        assert held_fds(nf.proc.pid, path) == fds_before
        summary = nf.stop()
        arrived = sink.stop()
    assert not Path(path).exists()
    # what the router redirected is what reached the sink
    assert arrived["received"] == stats["verdicts"]["redirect"]["packets"], (arrived, summary)
    print(json.dumps({"backend": backend, "sent": total, "stats": stats["verdicts"]}),
          file=sys.stderr)  # fmt: skip
