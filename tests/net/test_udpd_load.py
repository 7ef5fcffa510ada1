# SPDX-License-Identifier: BSD-2-Clause
"""udpd under load and faults (issue 22): while paced traffic from vz-gen
flows to one application's socket, many applications open, bind and close
sockets on udpd in a loop, and one of them is SIGKILLed holding sockets.
Afterwards:

- every datagram the generator sent was received by the application or
  counted by udpd as dropped (a full socket ring, a full AF_XDP ring);
- udpd's own table is empty again (no app, no socket), the killed app is
  counted as died, and udpd holds exactly the file descriptors it held
  before the applications came: no socket, ring or memfd is leaked.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from veloz.core import paths
from veloz.core.proc import Runner, in_netns, run_json, veloz_argv
from waits import wait_until

UDPD_IP = "198.18.0.3"
SOCKET = "/run/veloz/udpd/test-udpd-load.sock"
CONFIG = f"""
interface = "dut-gen"
ipv4 = "{UDPD_IP}/24"
socket = "{SOCKET}"
"""
PORT = 7100
FRAMES = 20_000
RATE = "5k"
CHURNERS = 4

# Counts what arrives on PORT until stdin closes, then what is still queued.
RECEIVER = f"""
import select, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("{UDPD_IP}", {PORT}))
print("ready", flush=True)
n = 0
while True:
    r, _, _ = select.select([s, sys.stdin], [], [])
    if s in r:
        s.recvfrom(65535)
        n += 1
    elif sys.stdin in r:
        break
while select.select([s], [], [], 0)[0]:
    s.recvfrom(65535)
    n += 1
print(n, flush=True)
"""

# Opens, binds and closes sockets in a loop, a few open at a time; says
# "holding" in round 10, with its sockets open: the moment to kill one.
CHURNER = f"""
import socket, sys
base, rounds = int(sys.argv[1]), int(sys.argv[2])
for i in range(rounds):
    socks = []
    for k in range(4):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("{UDPD_IP}", base + k))
        socks.append(s)
    if i == 10:
        print("holding", flush=True)
    for s in socks:
        s.close()
print("done", flush=True)
"""


def shim_env() -> dict[str, str]:
    shim = paths.build_dir() / "src/sock/preload/libveloz-preload.so"
    return {**os.environ, "VZ_UDPD_SOCKET": SOCKET, "LD_PRELOAD": str(shim),
            "VZ_PRELOAD_STRICT": "1"}  # fmt: skip


def app(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(in_netns("vz-dut", [sys.executable, "-c", script, *args]),
                            env=shim_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def fd_kinds(pid: int) -> dict[str, int]:
    """udpd's open files by kind: sockets, memfds, anything else."""
    kinds: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        kind = target.split(":")[0] if ":" in target else "file"
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


class Stats:
    """udpd's interval counters (--json --interval-ms), read as they come."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.last: dict = {}
        self.count = 0  # records read so far

    def read(self) -> tuple[int, dict]:
        """Read udpd's next line if one comes within 0.1 s; the count of
        records read and the latest."""
        out = self.runner.proc.stdout
        assert out is not None
        ready, _, _ = select.select([out], [], [], 0.1)
        if ready:
            line = out.readline()
            assert line, f"udpd's output ended; its last counters: {self.last}"
            rec = json.loads(line)
            if rec.get("event") == "stats":
                self.last, self.count = rec, self.count + 1
        return self.count, self.last

    def wait(self, pred, timeout: float = 20.0) -> dict:
        """The first record (read from udpd's stdout here) that pred holds for."""
        seen = self.count  # a record an earlier wait read is not an answer
        _, rec = wait_until(self.read, timeout, until=lambda r: r[0] > seen and pred(r[1]),
                            interval=0, what="udpd's counters getting there")  # fmt: skip
        return rec


@pytest.fixture
def udpd(testbed, tmp_path):
    cfg = tmp_path / "udpd.toml"
    cfg.write_text(CONFIG)
    argv = veloz_argv("udpd", "--config", str(cfg), "--json", "--interval-ms", "100")
    with Runner(in_netns("vz-dut", argv), attach_timeout=30, what="udpd") as r:
        yield r
    assert not Path(SOCKET).exists(), "udpd left its control socket"


def test_apps_churn_under_traffic_and_one_is_killed(udpd):
    stats = Stats(udpd)
    idle = stats.wait(lambda r: r["sockets"]["apps"] == 0)
    pid = udpd.proc.pid
    fds_before = fd_kinds(pid)
    mac = subprocess.run(in_netns("vz-dut", ["cat", "/sys/class/net/dut-gen/address"]),
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip

    receiver = app(RECEIVER)
    assert receiver.stdout is not None
    assert receiver.stdout.readline().strip() == "ready", receiver.stderr.read()
    sent: list[dict] = []
    gen = threading.Thread(target=lambda: sent.append(run_json(in_netns("vz-gen", veloz_argv(
        "gen", "--iface", "gen-dut", "--json", "--count", str(FRAMES), "--rate", RATE,
        "--dst-ip", UDPD_IP, "--dst-mac", mac, "--dst-port", str(PORT))), 120)))  # fmt: skip
    gen.start()
    churners = [app(CHURNER, str(7200 + 10 * i), "200") for i in range(CHURNERS)]
    victim = app(CHURNER, "7300", "1000000")
    assert victim.stdout is not None
    assert victim.stdout.readline().strip() == "holding", victim.stderr.read()
    victim.kill()
    victim.wait(timeout=10)
    for c in churners:
        out, err = c.communicate(timeout=120)
        assert c.returncode == 0 and "done" in out, err
    gen.join(timeout=120)
    assert sent, "the generator failed"

    # every datagram delivered to the receiver's ring or counted as dropped
    def accounted(r: dict) -> int:
        s, p = r["sockets"], r["port"]
        i, j = idle["sockets"], idle["port"]
        return (s["rx_queued"] - i["rx_queued"] + s["rx_ring_full"] - i["rx_ring_full"]
                + p["xsk_rx_dropped"] - j["xsk_rx_dropped"]
                + p["xsk_rx_ring_full"] - j["xsk_rx_ring_full"])  # fmt: skip

    stats.wait(lambda r: accounted(r) >= sent[0]["sent"])
    receiver.stdin.close()
    got = int(receiver.stdout.readline())
    receiver.wait(timeout=10)
    # udpd's table is empty again, the killed app counted as died
    final = stats.wait(lambda r: r["sockets"]["apps"] == 0 and r["sockets"]["sockets"] == 0)
    s = final["sockets"]
    assert s["apps_died"] - idle["sockets"]["apps_died"] >= 1
    assert s["apps_total"] - idle["sockets"]["apps_total"] == CHURNERS + 2
    ring_full = s["rx_ring_full"] - idle["sockets"]["rx_ring_full"]
    port = {k: final["port"][k] - idle["port"][k] for k in final["port"]}
    assert got + ring_full + port["xsk_rx_dropped"] + port["xsk_rx_ring_full"] \
        == sent[0]["sent"], (got, s, port, sent)  # fmt: skip
    # and nothing leaked: udpd's sockets, memfds and other files as before
    assert fd_kinds(pid) == fds_before
    print(json.dumps({"sent": sent[0]["sent"], "received": got, "ring_full": ring_full,
                      "port": port}), file=sys.stderr)  # fmt: skip
