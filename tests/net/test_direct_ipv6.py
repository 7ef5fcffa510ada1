"""Direct mode (VZ_MODE=direct) over IPv6, IPv4 beside it: an unmodified
python3 echo server under the shim in vz-dut owns 198.18.0.3 and
fd00:198:18::3 on dut-gen (VZ_DIRECT_ADDR, VZ_DIRECT_ADDR6). vz-gen's
kernel finds fd00:198:18::3 by NDP and pings it, whole and in fragments;
its kernel sockets send datagrams of every size over both families,
interleaved, to three server sockets: AF_INET6 on [::] (IPV6_V6ONLY off, so
IPv4 comes to it as v4-mapped addresses), AF_INET6 IPv6-only (answering
with recvmsg/sendmsg), and AF_INET.
Each answer is checked: its bytes, the peer address the server saw, the
address and port it came from, and that none is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_direct import SERVER_IP, xdp_attached

from veloz.core import paths
from veloz.core.proc import in_netns

SERVER_IP6 = "fd00:198:18::3"  # beside the kernel's fd00:198:18::2 on dut-gen
DUAL, ONLY6, ONLY4 = 7300, 7301, 7302

# Three sockets; each answer is the datagram, "|", and the peer as the
# server saw it ("ADDR PORT"), so the client checks both ends' view.
ECHO = f"""
import select, socket, sys
dual = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
dual.bind(("::", {DUAL}))
only6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
only6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
only6.bind(("::", {ONLY6}))
only4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
only4.bind(("{SERVER_IP}", {ONLY4}))
names = [s.getsockname()[:2] for s in (dual, only6, only4)]
flags = [dual.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY),
         only6.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY)]
print("ready", names, flags, file=sys.stderr, flush=True)
while True:
    for s in select.select([dual, only6, only4, sys.stdin], [], [])[0]:
        if s is sys.stdin:
            sys.exit(0)
        if s is only6:  # the message calls, two parts gathered
            data, _, _, peer = s.recvmsg(65535)
            s.sendmsg([data, f"|{{peer[0]}} {{peer[1]}}".encode()], [], 0, peer)
            continue
        data, peer = s.recvfrom(65535)
        s.sendto(data + f"|{{peer[0]}} {{peer[1]}}".encode(), peer)
"""

# vz-gen's side: kernel sockets, one per family, interleaved rounds.
CLIENT = f"""
import json, socket
SIZES = [18, 64, 512, 1452, 3000, 9000, 30000]
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s6.bind(("::", 0))
s4.bind(("0.0.0.0", 0))
s6.settimeout(2)
s4.settimeout(2)
me6, me4 = s6.getsockname()[1], s4.getsockname()[1]
res = {{"ok": 0, "bad": [], "lost": 0}}
# (socket, server address, server port, the peer the server must see)
paths = [(s6, "{SERVER_IP6}", {DUAL}, f"fd00:198:18::1 {{me6}}"),
         (s4, "{SERVER_IP}", {DUAL}, f"::ffff:198.18.0.1 {{me4}}"),
         (s6, "{SERVER_IP6}", {ONLY6}, f"fd00:198:18::1 {{me6}}"),
         (s4, "{SERVER_IP}", {ONLY4}, f"198.18.0.1 {{me4}}")]
for rnd in range(3):
    for size in SIZES:
        for i, (s, ip, port, peer) in enumerate(paths):
            data = (f"{{rnd}}.{{size}}.{{i}}:".encode() * size)[:size]
            s.sendto(data, (ip, port))
            try:
                got, src = s.recvfrom(65535)
            except socket.timeout:
                res["lost"] += 1
                continue
            want = data + f"|{{peer}}".encode()
            if got == want and src[:2] == (ip, port):
                res["ok"] += 1
            else:
                res["bad"].append([i, size, len(got), str(src), got[-40:].decode("latin1")])
# IPv4 to the IPv6-only socket's port: nobody, so port unreachable
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.settimeout(2)
c.connect(("{SERVER_IP}", {ONLY6}))
c.send(b"anyone?")
try:
    c.recv(100)
    res["v4_to_only6"] = "answered"
except ConnectionRefusedError:
    res["v4_to_only6"] = "refused"
except socket.timeout:
    res["v4_to_only6"] = "timeout"
print(json.dumps(res))
"""


def direct_env6() -> dict[str, str]:
    return {**os.environ, "VZ_MODE": "direct", "VZ_DIRECT_IFACE": "dut-gen",
            "VZ_DIRECT_ADDR": f"{SERVER_IP}/24", "VZ_DIRECT_ADDR6": f"{SERVER_IP6}/64",
            "LD_PRELOAD": str(paths.library("libveloz-preload.so")),
            "VZ_PRELOAD_STRICT": "1"}  # fmt: skip


def start_echo() -> subprocess.Popen:
    proc = subprocess.Popen(in_netns("vz-dut", [sys.executable, "-c", ECHO]),
                            env=direct_env6(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    said = []
    while True:  # notices (a stale program taken over), then the ready line
        line = proc.stderr.readline()
        said.append(line)
        if not line or line.startswith("ready"):
            break
    if not line:
        proc.kill()
        pytest.fail("the echo server did not start: " + "".join(said) + proc.communicate()[1])
    # the names each socket was bound to, and IPV6_V6ONLY as set
    assert line.split(None, 1)[1].strip() == (
        f"[('::', {DUAL}), ('::', {ONLY6}), ('{SERVER_IP}', {ONLY4})] [0, 1]"
    ), line
    return proc


def ping(args: list[str], size: int) -> subprocess.CompletedProcess:
    return subprocess.run(in_netns("vz-gen", ["ping", *args, "-c", "3", "-i", "0.2", "-W", "2",
                                              "-s", str(size)]),
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def udp_csum_errors(netns: str) -> tuple[int, int]:
    """The kernel's UDP and UDPv6 checksum errors: the stack's sums checked."""
    v6 = subprocess.run(in_netns(netns, ["cat", "/proc/net/snmp6"]), capture_output=True,
                        text=True, check=True).stdout  # fmt: skip
    v4 = subprocess.run(in_netns(netns, ["cat", "/proc/net/snmp"]), capture_output=True,
                        text=True, check=True).stdout.splitlines()  # fmt: skip
    udp = [ln.split()[1:] for ln in v4 if ln.startswith("Udp:")]
    return (int(dict(zip(udp[0], udp[1], strict=True))["InCsumErrors"]),
            int(dict(ln.split() for ln in v6.splitlines())["Udp6InCsumErrors"]))  # fmt: skip


def end(proc: subprocess.Popen) -> str:
    """A line on stdin ends the server normally: its stderr."""
    try:
        return proc.communicate(input="exit\n", timeout=20)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[1]


def test_direct_ipv6_ndp_ping_echo_beside_ipv4(testbed):
    subprocess.run(in_netns("vz-gen", ["ip", "-6", "neigh", "flush", "to", SERVER_IP6]),
                   check=False)  # fmt: skip
    subprocess.run(in_netns("vz-gen", ["ip", "neigh", "flush", "to", SERVER_IP]), check=False)
    errors = udp_csum_errors("vz-gen")
    server = start_echo()
    try:
        # NDP and ICMPv6 echo, answered while the application sleeps in
        # select (the engine's background thread), whole and fragmented
        for size in (56, 2000):
            done = ping(["-6", SERVER_IP6], size)
            assert done.returncode == 0 and " 0% packet loss" in done.stdout, done.stdout
        done = ping([SERVER_IP], 56)
        assert done.returncode == 0 and " 0% packet loss" in done.stdout, done.stdout
        mac = subprocess.run(in_netns("vz-dut", ["cat", "/sys/class/net/dut-gen/address"]),
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        neigh = subprocess.run(in_netns("vz-gen", ["ip", "-6", "neigh", "show", SERVER_IP6]),
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert mac in neigh, neigh
        done = subprocess.run(in_netns("vz-gen", [sys.executable, "-c", CLIENT]),
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        res = json.loads(done.stdout.strip().splitlines()[-1])
        # 3 rounds x 7 sizes x 4 paths, each answered once, exactly
        assert res["bad"] == [] and res["lost"] == 0 and res["ok"] == 84, res
        assert res["v4_to_only6"] == "refused", res
        assert udp_csum_errors("vz-gen") == errors, "the stack sent bad UDP checksums"
    finally:
        err = end(server)
    assert server.returncode == 0, err
    assert not xdp_attached("vz-dut", "dut-gen"), "the direct server left its program"


def test_direct_ipv6_bad_config_one_line(testbed):
    env = {**direct_env6(), "VZ_DIRECT_ADDR6": "fd00:198:18::3"}  # no prefix
    done = subprocess.run(in_netns("vz-dut", [sys.executable, "-c", ECHO]), env=env,
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert done.returncode != 0
    assert "VZ_DIRECT_ADDR6" in done.stderr, done.stderr
    assert not xdp_attached("vz-dut", "dut-gen")
