"""The userspace UDP/IP stack on the testbed: `veloz udpd` owns 198.18.0.3 on
vz-dut's dut-gen beside the kernel's 198.18.0.2. Kernel sockets in vz-gen
talk to applications on veloz both ways; ping and ARP from vz-gen are
answered by the stack; the checksums it sends are valid (vz-gen's kernel
counts no UDP checksum error); an unmodified program runs on it through
LD_PRELOAD; hostile input is counted and dropped while the others are
served; and nothing is left behind when it stops.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from veloz.core import paths
from veloz.core.proc import Runner, in_netns, veloz_argv
from waits import wait_until

UDPD_IP = "198.18.0.3"
UDPD_IP6 = "fd00:198:18::3"
GEN_IP = "198.18.0.1"
SOCKET = "/run/veloz/udpd/test-udpd.sock"
CONFIG = f"""
interface = "dut-gen"
ipv4 = "{UDPD_IP}/24"
ipv6 = "{UDPD_IP6}/64"
socket = "{SOCKET}"
skb_mode = false
"""

# A kernel-socket client in vz-gen: each datagram's echo must come back whole.
ECHO_CLIENT = """
import json, socket, sys
host, port, sizes = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3].split(",")]
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
ok = bad = lost = 0
for i, n in enumerate(sizes):
    data = bytes((i + k) % 251 for k in range(n))
    s.sendto(data, (host, port))
    try:
        got, peer = s.recvfrom(70000)
    except socket.timeout:
        lost += 1
        continue
    if got == data and peer[:2] == (host, port):
        ok += 1
    else:
        bad += 1
print(json.dumps({"ok": ok, "bad": bad, "lost": lost}))
"""

# ICMP echo from vz-gen through a raw socket (the machine has no ping(8)):
# each reply must carry the request's id, sequence and data, and a valid
# checksum.
PING = """
import json, socket, struct, sys, time
def csum(b):
    b += b"\\0" * (len(b) % 2)
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    return ~(s + (s >> 16)) & 0xFFFF
dst, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(1)
ok = 0
for seq in range(count):
    data = bytes(i % 256 for i in range(size))
    head = struct.pack("!BBHHH", 8, 0, 0, 0x4242, seq)
    s.sendto(struct.pack("!BBHHH", 8, 0, csum(head + data), 0x4242, seq) + data, (dst, 0))
    end = time.time() + 1
    while time.time() < end:
        try:
            r, _ = s.recvfrom(70000)
        except socket.timeout:
            break
        ihl = (r[0] & 15) * 4
        kind, _, _, ident, q = struct.unpack("!BBHHH", r[ihl:ihl + 8])
        if (kind, ident, q) == (0, 0x4242, seq) and r[ihl + 8:] == data and not csum(r[ihl:]):
            ok += 1
            break
print(json.dumps({"sent": count, "answered": ok}))
"""

# A kernel echo server in vz-gen, for a veloz client; stops after `count`.
ECHO_SERVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(10)
print("ready", flush=True)
for _ in range(int(sys.argv[3])):
    try:
        data, peer = s.recvfrom(70000)
    except socket.timeout:
        break
    s.sendto(data, peer)
"""


def udp_csum_errors(netns: str) -> int:
    text = subprocess.run(in_netns(netns, ["cat", "/proc/net/snmp"]), capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    rows = [ln.split() for ln in text.splitlines() if ln.startswith("Udp:")]
    return int(rows[1][rows[0].index("InCsumErrors")])


def app(name: str) -> str:
    return str(paths.tool(name))


def xdp_attached(netns: str, ifname: str) -> bool:
    out = subprocess.run(in_netns(netns, ["ip", "-d", "link", "show", ifname]),
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return "prog/xdp" in out or " xdp" in out


@pytest.fixture
def udpd(testbed, tmp_path):
    cfg = tmp_path / "udpd.toml"
    cfg.write_text(CONFIG)
    argv = veloz_argv("udpd", "--config", str(cfg), "--json", "--interval-ms", "200")
    with Runner(in_netns("vz-dut", argv), attach_timeout=30, what="udpd") as r:
        assert r.attached["event"] == "ready" and r.attached["ip"] == f"{UDPD_IP}/24"
        yield r
    assert not xdp_attached("vz-dut", "dut-gen"), "udpd left its program attached"
    assert not Path(SOCKET).exists(), "udpd left its control socket"


def env() -> dict[str, str]:
    return {**os.environ, "VZ_UDPD_SOCKET": SOCKET}


def start_veloz_echo(port: int) -> subprocess.Popen:
    argv = in_netns("vz-dut", [app("veloz-pingpong"), "--server", "--stack", "veloz",
                                "--bind", f"{UDPD_IP}:{port}"])  # fmt: skip
    proc = subprocess.Popen(argv, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    # its ready line, once the socket is bound through udpd (or its error)
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], 15)
    line = proc.stderr.readline() if ready else ""
    assert "echoing on" in line, line + (proc.communicate()[1] if proc.poll() is not None else "")
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def echo_from_gen(port: int, sizes: list[int], host: str = UDPD_IP) -> dict:
    done = subprocess.run(in_netns("vz-gen", [sys.executable, "-c", ECHO_CLIENT, host,
                                              str(port), ",".join(map(str, sizes))]),
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return json.loads(done.stdout)


def test_ping_and_arp_answered_by_the_stack(udpd):
    subprocess.run(in_netns("vz-gen", ["ip", "neigh", "flush", "dev", "gen-dut"]), check=True)
    for size in (56, 2000):  # 2000: two fragments each way
        done = subprocess.run(in_netns("vz-gen", [sys.executable, "-c", PING, UDPD_IP, "3",
                                                  str(size)]),
                              capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        assert json.loads(done.stdout) == {"sent": 3, "answered": 3}, size
    mac = subprocess.run(in_netns("vz-dut", ["cat", "/sys/class/net/dut-gen/address"]),
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    neigh = subprocess.run(in_netns("vz-gen", ["ip", "neigh", "show", UDPD_IP]),
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert mac in neigh, neigh
    s = udpd.stop()["stack"]
    assert s["arp_requests_in"] >= 1 and s["arp_replies_out"] >= 1
    assert s["icmp_echo_out"] >= 6 and s["frag_reassembled"] >= 3


def test_kernel_client_and_veloz_server_both_ways(udpd):
    errors = udp_csum_errors("vz-gen")
    echo = start_veloz_echo(7000)
    try:
        # 18..1472 bytes in one frame, and 3000 and 9000 in fragments
        got = echo_from_gen(7000, [18, 64, 512, 1472, 3000, 9000] * 20)
    finally:
        stop(echo)
    assert got == {"ok": 120, "bad": 0, "lost": 0}
    assert udp_csum_errors("vz-gen") == errors, "the stack sent bad UDP checksums"
    # the other way: a veloz client, a kernel echo server in vz-gen
    server = subprocess.Popen(in_netns("vz-gen", [sys.executable, "-c", ECHO_SERVER, GEN_IP,
                                                  "7001", "50"]),
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert server.stdout.readline().strip() == "ready"
        done = subprocess.run(in_netns("vz-dut", [app("veloz-pingpong"), "--client", "--stack",
                                                  "veloz", "--connect", f"{GEN_IP}:7001",
                                                  "--size", "64", "--count", "50", "--json"]),
                              env=env(), capture_output=True, text=True, timeout=60,
                              check=False)  # fmt: skip
    finally:
        stop(server)
    assert done.returncode == 0, done.stderr
    rtt = json.loads(done.stdout.strip().splitlines()[-1])
    assert rtt["received"] == 50 and rtt["lost"] == 0
    s = udpd.stop()
    assert s["stack"]["rx_delivered"] >= 170
    # both applications came and went; none of their sockets outlived them
    assert s["sockets"]["apps_total"] >= 2 and s["sockets"]["apps"] == 0
    assert s["sockets"]["sockets"] == 0


def test_burst_over_32_frames_leaves_in_one_round(udpd):
    """A datagram of 60,000 bytes is 41 IPv4 fragments: more than one copy-mode
    kick sends (32). Its echo must come back whole, within the client's 2 s,
    each time: with one kick per round the tail waited for the next
    transmission, so every such echo was lost."""
    echo = start_veloz_echo(7002)
    try:
        got = echo_from_gen(7002, [60000, 65507, 48000] * 3)
    finally:
        stop(echo)
    assert got == {"ok": 9, "bad": 0, "lost": 0}
    s = udpd.stop()
    assert s["stack"]["tx_fragments"] >= 9 * 33
    # the burst needed more than one kick, and none left frames behind
    assert s["port"]["tx_kicks"] > 9 and s["port"]["tx_kick_stalls"] == 0


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stats_line(r: Runner) -> dict | None:
    """udpd's next line if it comes within 0.1 s and is a counters record."""
    ready, _, _ = select.select([r.proc.stdout], [], [], 0.1)
    if not ready:
        return None
    rec = json.loads(r.proc.stdout.readline())
    return rec if rec.get("event") == "stats" else None


def _next_stats(r: Runner, deadline: float) -> dict:
    return wait_until(lambda: _stats_line(r), deadline - time.monotonic(), interval=0,
                      what="udpd's next counters")  # fmt: skip


def test_idle_poller_sleeps_and_wakes_at_once(udpd):
    """need_wakeup: after its busy-poll time with nothing to do, udpd sleeps
    (the stats say how often) and an idle second costs it next to no CPU;
    a datagram from the wire or from an application still gets through at
    once (the echo client gives each 2 s)."""
    deadline = time.monotonic() + 20
    while _next_stats(udpd, deadline)["poller"]["sleeps"] < 3:
        pass
    cpu0, t0 = _cpu_s(udpd.proc.pid), time.monotonic()
    for _ in range(5):  # 5 intervals of 200 ms
        rec = _next_stats(udpd, deadline)
    busy = (_cpu_s(udpd.proc.pid) - cpu0) / (time.monotonic() - t0)
    assert busy < 0.1, f"idle udpd used {busy:.0%} of a CPU"
    assert rec["poller"]["sleeps"] >= 5
    echo = start_veloz_echo(7003)
    try:
        # the wire wakes udpd, the application's reply rings the doorbell
        got = echo_from_gen(7003, [64, 1472, 9000] * 5)
    finally:
        stop(echo)
    assert got == {"ok": 15, "bad": 0, "lost": 0}


def test_unmodified_program_under_the_shim(udpd):
    shim = paths.build_dir() / "src/sock/preload/libveloz-preload.so"
    server = (
        "import socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"s.bind(('{UDPD_IP}', 7002))\n"
        "print('ready', flush=True)\n"
        "for _ in range(20):\n"
        "    d, p = s.recvfrom(65535)\n"
        "    s.sendto(d, p)\n"
    )  # fmt: skip
    proc = subprocess.Popen(in_netns("vz-dut", [sys.executable, "-c", server]),
                            env={**env(), "LD_PRELOAD": str(shim), "VZ_PRELOAD_STRICT": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        got = echo_from_gen(7002, [100] * 5)
    finally:
        stop(proc)
    # the kernel has no 198.18.0.3: only veloz's socket could bind it
    assert got == {"ok": 5, "bad": 0, "lost": 0}
    assert udpd.stop()["stack"]["rx_delivered"] >= 5


def test_socat_echo_server_under_the_shim(udpd):
    # socat as UDPDK's users would run it: a UDP echo server (recvfrom with
    # MSG_PEEK, connect to the first peer, then a poll/select loop over the
    # socket and a pipe), none of it written for veloz.
    socat = shutil.which("socat")
    assert socat, "socat is missing: scripts/bootstrap installs it"
    shim = paths.build_dir() / "src/sock/preload/libveloz-preload.so"
    argv = [socat, "-d", "-d", "-T", "30", f"UDP4-LISTEN:7003,bind={UDPD_IP}", "PIPE"]
    proc = subprocess.Popen(in_netns("vz-dut", argv),
                            env={**env(), "LD_PRELOAD": str(shim), "VZ_PRELOAD_STRICT": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        # socat logs "listening" once its socket is bound (through veloz)
        assert "listening" in proc.stderr.readline(), proc.stderr.read()
        got = echo_from_gen(7003, [18, 64, 1472, 3000] * 5)
    finally:
        stop(proc)
    assert got == {"ok": 20, "bad": 0, "lost": 0}
    assert udpd.stop()["stack"]["rx_delivered"] >= 20


# An epoll event loop as servers write them: a non-blocking socket in an
# edge-triggered set, drained to EAGAIN on each event, beside a pipe (a
# kernel descriptor) that tells it to stop.
EPOLL_SERVER = """
import os, select, socket, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setblocking(False)
s.bind((host, port))
r, w = os.pipe()
ep = select.epoll()
ep.register(s.fileno(), select.EPOLLIN | select.EPOLLET)
ep.register(r, select.EPOLLIN)
echoed = wakeups = empty = 0
print("ready", flush=True)
while True:
    events = ep.poll(5)
    if not events:
        sys.exit("epoll_wait timed out")
    for fd, ev in events:
        if fd == r:
            print(f"echoed {echoed} wakeups {wakeups} empty {empty}", flush=True)
            sys.exit(0)
        wakeups += 1
        got = 0
        while True:
            try:
                d, peer = s.recvfrom(65535)
            except BlockingIOError:
                break
            s.sendto(d, peer)
            echoed += 1
            got += 1
            if echoed == int(sys.argv[3]):
                os.write(w, b"x")
        empty += got == 0
"""


def test_epoll_echo_server_under_the_shim(udpd):
    shim = paths.build_dir() / "src/sock/preload/libveloz-preload.so"
    sizes = [18, 64, 1472, 3000] * 5
    proc = subprocess.Popen(in_netns("vz-dut", [sys.executable, "-c", EPOLL_SERVER, UDPD_IP,
                                                "7004", str(len(sizes))]),
                            env={**env(), "LD_PRELOAD": str(shim), "VZ_PRELOAD_STRICT": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        got = echo_from_gen(7004, sizes)
        out, err = proc.communicate(timeout=30)
    finally:
        stop(proc)
    # only veloz's socket could bind 198.18.0.3. The client waits for each
    # echo, so a lost edge would stall it: epoll_wait would time out and the
    # server exit non-zero. A datagram that lands while the loop still drains
    # the one before is read in that drain (its edge may then wake the loop
    # to find nothing): so between 1 and 20 wakeups found datagrams.
    assert got == {"ok": 20, "bad": 0, "lost": 0}
    assert proc.returncode == 0, err
    words = out.split()
    assert words[:2] == ["echoed", "20"] and words[2] == "wakeups" and words[4] == "empty", out
    assert 1 <= int(words[3]) - int(words[5]) <= 20, out
    assert udpd.stop()["stack"]["rx_delivered"] >= 20


def test_ipv6_ndp_ping_and_port_unreachable(udpd):
    # vz-gen's kernel finds fd00:198:18::3 by NDP (the testbed's static
    # neighbours are the kernel's addresses only), pings it whole and in
    # fragments both ways, and a UDP datagram to a closed port comes back
    # as ICMPv6 port unreachable: the stack checked its UDP checksum.
    subprocess.run(in_netns("vz-gen", ["ip", "-6", "neigh", "flush", "to", UDPD_IP6]),
                   check=False)  # fmt: skip
    for size in (56, 2000):
        done = subprocess.run(in_netns("vz-gen", ["ping", "-6", "-c", "3", "-i", "0.2", "-W",
                                                  "2", "-s", str(size), UDPD_IP6]),
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0 and " 0% packet loss" in done.stdout, done.stdout
    mac = subprocess.run(in_netns("vz-dut", ["cat", "/sys/class/net/dut-gen/address"]),
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    neigh = subprocess.run(in_netns("vz-gen", ["ip", "-6", "neigh", "show", UDPD_IP6]),
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert mac in neigh, neigh
    refused = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
        "s.settimeout(2)\n"
        f"s.connect(('{UDPD_IP6}', 9))\n"
        "s.send(b'anyone?')\n"
        "try:\n"
        "    s.recv(100)\n"
        "except ConnectionRefusedError:\n"
        "    print('refused')\n"
    )  # fmt: skip
    done = subprocess.run(in_netns("vz-gen", [sys.executable, "-c", refused]),
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert done.stdout.strip() == "refused", done.stderr
    s = udpd.stop()
    assert s["stack6"]["nd_solicits_in"] >= 1 and s["stack6"]["nd_adverts_out"] >= 1
    assert s["stack6"]["icmp6_echo_out"] >= 6 and s["stack"]["frag_reassembled"] >= 3
    assert s["stack6"]["icmp6_unreach_out"] == 1 and s["stack"]["udp_no_port"] == 1
    assert s["stack6"]["nd_bad"] == 0 and s["stack6"]["ip6_bad_header"] == 0


def udp6_csum_errors(netns: str) -> int:
    text = subprocess.run(in_netns(netns, ["cat", "/proc/net/snmp6"]), capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    return int(dict(ln.split() for ln in text.splitlines())["Udp6InCsumErrors"])


def start_shim_echo6(port: int) -> subprocess.Popen:
    """An unmodified AF_INET6 echo loop under the shim, on udpd's IPv6."""
    shim = paths.build_dir() / "src/sock/preload/libveloz-preload.so"
    server = (
        "import socket\n"
        "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
        f"s.bind(('{UDPD_IP6}', {port}))\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    d, p = s.recvfrom(65535)\n"
        "    s.sendto(d, p)\n"
    )  # fmt: skip
    proc = subprocess.Popen(in_netns("vz-dut", [sys.executable, "-c", server]),
                            env={**env(), "LD_PRELOAD": str(shim), "VZ_PRELOAD_STRICT": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    if proc.stdout.readline().strip() != "ready":
        stop(proc)
        pytest.fail(f"the IPv6 echo server did not start: {proc.stderr.read()}")
    return proc


def test_ipv6_echo_through_the_shim(udpd):
    # The same unmodified echo loop as over IPv4, on an AF_INET6 socket:
    # whole datagrams and fragments both ways, checksums the kernel accepts.
    errors = udp6_csum_errors("vz-gen")
    proc = start_shim_echo6(7005)
    try:
        got = echo_from_gen(7005, [18, 64, 512, 1452, 3000, 9000] * 5, UDPD_IP6)
    finally:
        stop(proc)
    # the kernel has no fd00:198:18::3: only veloz's socket could bind it
    assert got == {"ok": 30, "bad": 0, "lost": 0}
    assert udp6_csum_errors("vz-gen") == errors, "the stack sent bad UDP checksums"
    s = udpd.stop()
    assert s["stack"]["rx_delivered"] >= 30 and s["stack"]["frag_reassembled"] >= 10
    assert s["stack"]["tx_fragments"] >= 20 and s["stack"]["udp_bad_csum"] == 0


def test_ping8_answered_by_the_stack(udpd):
    # iputils ping, as a user would check the address first
    for size in ("56", "3000"):
        done = subprocess.run(in_netns("vz-gen", ["ping", "-c", "3", "-i", "0.2", "-W", "2",
                                                  "-s", size, UDPD_IP]),
                              capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "3 received" in done.stdout, done.stdout


HOSTILE = """
from scapy.all import IP, UDP, Ether, Raw, conf, sendp
conf.verb = 0
dst = "{dst}"


def ip(**kw):
    return Ether() / IP(src="198.18.0.1", dst=dst, **kw)


frames = [ip() / UDP(sport=9, dport=7000, chksum=0x1234) / Raw(b"x" * 32)] * 50
frames += [ip(len=2000) / UDP(sport=9, dport=7000) / Raw(b"y")] * 50
# overlapping fragments: two parts of one datagram that cover the same bytes
frames += [ip(id=77, flags="MF", frag=0, proto=17) / Raw(b"a" * 64),
           ip(id=77, flags="MF", frag=4, proto=17) / Raw(b"b" * 64),
           ip(id=77, frag=16, proto=17) / Raw(b"c" * 16)]
# a fragment flood: 2000 first fragments that never complete
frames += [ip(id=1000 + i, flags="MF", proto=17) / Raw(b"f" * 1000) for i in range(2000)]
# a flood to a closed port
frames += [ip() / UDP(sport=9, dport=9999) / Raw(b"z" * 18)] * 1000
sendp(frames, iface="gen-dut")
"""


def test_hostile_input_counted_and_dropped_while_serving(udpd):
    echo = start_veloz_echo(7000)
    try:
        script = HOSTILE.replace("{dst}", UDPD_IP)
        subprocess.run(in_netns("vz-gen", [sys.executable, "-c", script]), check=True,
                       timeout=120)  # fmt: skip
        got = echo_from_gen(7000, [64, 3000] * 10)
    finally:
        stop(echo)
    assert got == {"ok": 20, "bad": 0, "lost": 0}
    s = udpd.stop()["stack"]
    assert s["udp_bad_csum"] >= 50
    assert s["ip_bad_header"] >= 50
    assert s["frag_overlap"] >= 1
    # 2000 partial datagrams against a bound of 256 (reasm_max_datagrams):
    # the oldest make room, so the echo's own fragments above got through
    assert s["frag_evicted"] >= 1000
    assert s["udp_no_port"] >= 1000 and s["icmp_unreach_out"] <= 200


HOSTILE6 = """
from scapy.all import (IPv6, UDP, Ether, Raw, ICMPv6ND_NS, ICMPv6NDOptSrcLLAddr,
                       IPv6ExtHdrFragment, conf, sendp)
conf.verb = 0
us, dst, mac = "fd00:198:18::1", "{dst}", "{mac}"
snm = "ff02::1:ff" + dst.split(":")[-1].zfill(6)[-6:-4] + ":" + dst.split(":")[-1].zfill(4)[-4:]
group = Ether(dst="33:33:ff:00:00:03")
lla = ICMPv6NDOptSrcLLAddr(lladdr="02:00:c6:12:00:01")
frames = [group / IPv6(src=us, dst=snm, hlim=254) / ICMPv6ND_NS(tgt=dst) / lla] * 20
frames += [group / IPv6(src=us, dst=snm, hlim=255) / ICMPv6ND_NS(tgt=dst)
           / Raw(bytes([1, 2]) + bytes(6))] * 20  # claims 16 bytes, 8 there
frames += [group / IPv6(src=us, dst=snm, hlim=255) / ICMPv6ND_NS(tgt=dst)
           / Raw(bytes([1, 0]) + bytes(6))] * 20  # an option of length 0
frames += [group / IPv6(src=us, dst=snm, hlim=255) / ICMPv6ND_NS(tgt=dst, cksum=0x1234)
           / lla] * 20
unicast = Ether(dst=mac) / IPv6(src=us, dst=dst)
frames += [unicast / UDP(sport=9, dport=7006, chksum=0) / Raw(b"x" * 32)] * 50
frames += [unicast / IPv6ExtHdrFragment(id=77, m=1, offset=0, nh=17) / Raw(b"a" * 64),
           unicast / IPv6ExtHdrFragment(id=77, m=1, offset=4, nh=17) / Raw(b"b" * 64),
           unicast / IPv6ExtHdrFragment(id=77, m=0, offset=16, nh=17) / Raw(b"c" * 16)]
frames += [unicast / IPv6ExtHdrFragment(id=1000 + i, m=1, nh=17) / Raw(b"f" * 1000)
           for i in range(2000)]
frames += [unicast / UDP(sport=9, dport=9999) / Raw(b"z" * 18)] * 1000
sendp(frames, iface="gen-dut")
"""


def test_ipv6_hostile_input_counted_and_dropped_while_serving(udpd):
    mac = subprocess.run(in_netns("vz-dut", ["cat", "/sys/class/net/dut-gen/address"]),
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    echo = start_shim_echo6(7006)
    try:
        script = HOSTILE6.replace("{dst}", UDPD_IP6).replace("{mac}", mac)
        subprocess.run(in_netns("vz-gen", [sys.executable, "-c", script]), check=True,
                       timeout=120)  # fmt: skip
        got = echo_from_gen(7006, [64, 3000] * 10, UDPD_IP6)
    finally:
        stop(echo)
    assert got == {"ok": 20, "bad": 0, "lost": 0}
    st = udpd.stop()
    s, s6 = st["stack"], st["stack6"]
    assert s6["nd_bad"] >= 60, s6  # hop limit, truncated and empty options
    assert s6["icmp6_bad"] >= 20, s6  # the checksum
    assert s["udp_bad_csum"] >= 50  # IPv6 UDP without a checksum
    assert s["frag_overlap"] >= 1 and s["frag_evicted"] >= 1000
    assert s["udp_no_port"] >= 1000 and s6["icmp6_unreach_out"] <= 200
