# SPDX-License-Identifier: BSD-2-Clause
"""An unmodified DNS server from Debian (Knot DNS's knotd) on veloz's
sockets and on the kernel's: its zone and config, starting and stopping it
in vz-dut on one stack, the answers it gives to a fixed set of queries (raw
bytes, to compare across stacks), and dnsperf against it from vz-gen.

knotd is epoll-based (its fdset), and reads and answers in batches with
recvmmsg/sendmmsg; under LD_PRELOAD=libveloz-preload.so each of those is
veloz's. One UDP worker thread unless told otherwise (udp_workers: then
one socket per worker, all with SO_REUSEPORT on one address and port, and
the stack spreads flows over them), kept in the foreground (knotd never
daemonizes unless told to). Its TCP listener stays the kernel's (the shim
takes UDP only): knotd binds it with IP_FREEBIND, so it starts on an
address the kernel does not own.

knotd and udpd run on the DUT's host, the probes and dnsperf on the
generator's; on a topology file the addresses are the DUT's first port's
(kernel) and its [addresses] udpd (veloz).

Stacks ("arms"):
  kernel        kernel sockets on 198.18.0.2
  veloz         the shim through udpd (poller mode) on 198.18.0.3
  veloz-busy    the same, every socket with SO_BUSY_POLL of BUSY_US
                ($VZ_BUSY_POLL_US): knotd's epoll_wait spins before it sleeps
  veloz-direct  the shim in VZ_MODE=direct on 198.18.0.3: knotd runs the
                stack itself on its own AF_XDP socket (no udpd); its epoll
                set holds the sockets' eventfds, readable while a datagram
                is queued
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from veloz.core.errors import VelozError
from veloz.lab import topology
from veloz.lab.hosts import env_argv, stop

ZONE = "example.test."
PORT = 5300
ARMS = ("kernel", "veloz", "veloz-busy", "veloz-direct")
BUSY_US = 200  # SO_BUSY_POLL of the veloz-busy arm, as udp-latency's
PROBE_ID = 0x5A17
FLOW_ID = 0x1000  # flows()'s first query ID, one more per query
WWW_A = "198.18.0.10"  # the answer to "www A"
# A TXT RRset of one frame (about 1.1 kB, answered whole with EDNS, truncated
# without) and one of about 3 kB: IPv4 fragments from the server's stack.
BIG_TXT = [f"big-{i}-" + "b" * 200 for i in range(5)]
HUGE_TXT = [f"huge-{i}-" + "h" * 240 for i in range(12)]


def zone_text() -> str:
    lines = [
        f"$ORIGIN {ZONE}",
        "$TTL 300",
        "@ 3600 IN SOA ns admin 1 3600 600 86400 300",
        "@ IN NS ns",
        f"ns IN A {arm_ip('veloz')}",
        f"www IN A {WWW_A}",
        "www IN AAAA fd00:198:18::10",
        "alias IN CNAME www",
        "mx IN MX 10 www",
    ]
    lines += [f'big IN TXT "{t}"' for t in BIG_TXT]
    lines += [f'huge IN TXT "{t}"' for t in HUGE_TXT]
    return "\n".join(lines) + "\n"


def knot_conf(workdir: Path, ip: str, *, udp_workers: int = 1) -> str:
    return f"""server:
    rundir: "{workdir}"
    user: root:root
    listen: {ip}@{PORT}
    udp-workers: {udp_workers}
    tcp-workers: 1
    background-workers: 1
    udp-max-payload: 4096
log:
  - target: stderr
    any: notice
database:
    storage: "{workdir}/db"
zone:
  - domain: {ZONE}
    storage: "{workdir}"
    file: "zone"
"""


# (name, type, EDNS buffer size or None): an answer, NXDOMAIN, NODATA, a
# CNAME chase, an answer too large without EDNS (TC), a frame-sized answer,
# a fragmented one, and a query out of the zone (REFUSED).
PROBES = (
    ("www", "A", 1232), ("www", "AAAA", 1232), ("nope", "A", 1232),
    ("www", "TXT", 1232), ("alias", "A", 1232), ("mx", "MX", None),
    ("@", "SOA", None), ("@", "NS", 1232), ("big", "TXT", None), ("big", "TXT", 1232),
    ("huge", "TXT", 4096), ("example.org.", "A", 1232),
)  # fmt: skip
QTYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "MX": 15, "TXT": 16, "AAAA": 28}


def qname(name: str) -> str:
    if name.endswith("."):
        return name
    return ZONE if name == "@" else f"{name}.{ZONE}"


def query(name: str, qtype: str, edns: int | None, qid: int = PROBE_ID) -> bytes:
    """One DNS query in wire format (RFC 1035), with an EDNS OPT RR (RFC
    6891) when edns is a buffer size."""
    labels = [x for x in qname(name).split(".") if x]
    body = b"".join(bytes([len(x)]) + x.encode() for x in labels) + b"\0"
    msg = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 1 if edns else 0)
    msg += body + struct.pack("!HH", QTYPES[qtype], 1)
    if edns:
        msg += b"\0" + struct.pack("!HHIH", 41, edns, 0, 0)
    return msg


def probe(ip: str, port: int = PORT, timeout: float = 2.0, tries: int = 3) -> list[str]:
    """Every PROBES query to ip:port, one at a time; each answer as hex
    ("" if none came). Run where the server is reachable (vz-gen)."""
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        for i, (name, qtype, edns) in enumerate(PROBES):
            q = query(name, qtype, edns, PROBE_ID + i)
            got = ""
            for _ in range(tries):
                s.sendto(q, (ip, port))
                try:
                    data, _ = s.recvfrom(65535)
                except TimeoutError:
                    continue
                got = data.hex()
                break
            out.append(got)
    return out


def flows(ip: str, port: int, count: int, per_flow: int, gap_s: float = 0.0,
          timeout: float = 1.0, tries: int = 3) -> list[str]:  # fmt: skip
    """www A from `count` sockets (as many source ports: flows), `per_flow`
    rounds over all of them, one query at a time, `gap_s` after each answer;
    each as "SOURCE-PORT QUERY-ID ANSWER-HEX" ("" if none came). Run where
    the server is reachable (vz-gen)."""
    out = []
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
                 for _ in range(count)]  # fmt: skip
        for s in socks:
            s.bind(("0.0.0.0", 0))
            s.settimeout(timeout)
        for r in range(per_flow):
            for i, s in enumerate(socks):
                qid = (FLOW_ID + r * count + i) & 0xFFFF
                q = query("www", "A", None, qid)
                got = ""
                for _ in range(tries):
                    s.sendto(q, (ip, port))
                    try:
                        got = s.recv(65535).hex()
                    except TimeoutError:
                        continue
                    break
                out.append(f"{s.getsockname()[1]} {qid} {got}")
                time.sleep(gap_s)
    return out


def flows_in_gen(ip: str, count: int, per_flow: int, gap_s: float = 0.0
                 ) -> list[tuple[int, int, str]]:  # fmt: skip
    """flows() run on the generator's host: (source port, query ID, answer
    hex) per query."""
    gen = topology.current().generator.host
    argv = gen.python_argv("veloz.lab.dnsapp", ip, str(PORT), str(count), str(per_flow),
                           f"{gap_s:g}")  # fmt: skip
    done = gen.run(argv, timeout=60 + count * per_flow * (gap_s + 3))
    if done.returncode:
        raise VelozError(f"the DNS flows failed: {done.stderr.strip()[-300:]}", code=1)
    out = []
    for line in done.stdout.splitlines()[: count * per_flow]:
        sport, qid, *answer = line.split()
        out.append((int(sport), int(qid), answer[0] if answer else ""))
    return out


def probe_in_gen(ip: str) -> list[str]:
    """probe() run on the generator's host, through this module as a script."""
    gen = topology.current().generator.host
    done = gen.run(gen.python_argv("veloz.lab.dnsapp", ip, str(PORT)), timeout=60)
    if done.returncode:
        raise VelozError(f"the DNS probe failed: {done.stderr.strip()[-300:]}", code=1)
    return done.stdout.split("\n")[: len(PROBES)]


def rcode(answer_hex: str) -> int | None:
    return int(answer_hex[7], 16) if len(answer_hex) >= 24 else None


def arm_ip(arm: str) -> str:
    """The DUT's address on the arm's stack."""
    topo = topology.current()
    return topo.dut.port.ipv4 if arm == "kernel" else topo.addr.udpd


# Every variable an arm may set: what the arm does not set is taken away
_ARM_VARS = ("LD_PRELOAD", "VZ_PRELOAD_STRICT", "VZ_UDPD_SOCKET", "VZ_BUSY_POLL_US", "VZ_MODE",
             "VZ_DIRECT_IFACE", "VZ_DIRECT_ADDR")  # fmt: skip


def arm_env(arm: str, udpd_socket: str) -> dict[str, str | None]:
    """The arm's environment for knotd on the DUT's host."""
    env: dict[str, str | None] = dict.fromkeys(_ARM_VARS)
    if arm == "kernel":
        return env
    topo = topology.current()
    env["LD_PRELOAD"] = topo.dut.host.library("libveloz-preload.so")
    # fail rather than fall back to kernel sockets unnoticed
    env["VZ_PRELOAD_STRICT"] = "1"
    env["VZ_UDPD_SOCKET"] = udpd_socket
    if arm == "veloz-busy":
        env["VZ_BUSY_POLL_US"] = str(BUSY_US)
    if arm == "veloz-direct":
        env.update(VZ_MODE="direct", VZ_DIRECT_IFACE=topo.dut.port.iface,
                   VZ_DIRECT_ADDR=f"{arm_ip(arm)}/{topo.addr.prefix_len}")  # fmt: skip
    return env


@contextlib.contextmanager
def knotd(arm: str, udpd_socket: str = "", ready_s: float = 20.0, *, udp_workers: int = 1
          ) -> Iterator[subprocess.Popen]:  # fmt: skip
    """knotd serving the zone on the DUT's host on the arm's stack with
    `udp_workers` UDP threads, answering (a query from the generator has been
    answered) when this yields; stopped (then killed) and its files removed
    whatever happens."""
    host = topology.current().dut.host
    knotd_bin = host.which("knotd")
    if knotd_bin is None:
        raise VelozError(f"knotd is not installed on {host.name} (Debian package knot)", code=1)
    ip = arm_ip(arm)
    with host.temp_dir("veloz-knot-") as work:
        host.write_file(f"{work}/zone", zone_text())
        host.write_file(f"{work}/knot.conf", knot_conf(Path(work), ip, udp_workers=udp_workers))
        log = f"{work}/knotd.log"
        # its log into a file there (a pipe nobody reads could fill); only
        # knotd gets the arm's environment, not the shell that starts it
        argv = [
            "sh",
            "-c",
            'exec "$@" >"$0" 2>&1',
            log,
            *env_argv([knotd_bin, "-c", f"{work}/knot.conf"], arm_env(arm, udpd_socket)),
        ]
        proc = host.spawn(argv)
        try:
            _wait_answering(proc, arm, ip, ready_s, lambda: _tail(host, log))
            yield proc
        finally:
            stop(proc)


def _tail(host, path: str) -> str:
    try:
        return host.read_file(path).strip()[-400:]
    except OSError:
        return ""


def _wait_answering(proc: subprocess.Popen, arm: str, ip: str, ready_s: float, log) -> None:
    deadline = time.monotonic() + ready_s
    q = query("www", "A", None)
    while True:
        if proc.poll() is not None:
            raise VelozError(f"knotd ({arm}) exited {proc.returncode}: {log()}", code=1)
        if _answers_in_gen(ip, q):
            return
        if time.monotonic() > deadline:
            raise VelozError(f"knotd ({arm}) did not answer within {ready_s:g} s: {log()}",
                             code=1)  # fmt: skip


def _answers_in_gen(ip: str, q: bytes) -> bool:
    """One query from the generator's host: answered within 0.2 s?"""
    script = ("import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
              "s.settimeout(0.2);s.sendto(bytes.fromhex(sys.argv[1]),(sys.argv[2],int(sys.argv[3])))\n"
              "try:\n s.recv(4096)\nexcept OSError:\n sys.exit(1)")  # fmt: skip
    gen = topology.current().generator.host
    return gen.run([*gen.python, "-c", script, q.hex(), ip, str(PORT)], timeout=10).returncode == 0


def query_file(path: Path) -> None:
    """dnsperf's input: a mix of answers, NXDOMAIN and the 1.1 kB TXT."""
    mix = (("www", "A"), ("nope", "A"), ("www", "AAAA"), ("big", "TXT"), ("alias", "A"),
           ("mx", "MX"))  # fmt: skip
    lines = [f"{qname(n)} {t}" for n, t in mix]
    path.write_text("\n".join(lines) + "\n")


_DNSPERF_FIELDS = {
    "sent": r"Queries sent:\s+(\d+)",
    "completed": r"Queries completed:\s+(\d+)",
    "lost": r"Queries lost:\s+(\d+)",
    "qps": r"Queries per second:\s+([\d.]+)",
    "lat_avg_s": r"Average Latency \(s\):\s+([\d.]+)",
    "lat_min_s": r"Average Latency \(s\):\s+[\d.]+ \(min ([\d.]+)",
    "lat_max_s": r"Average Latency \(s\):\s+[\d.]+ \(min [\d.]+, max ([\d.]+)",
    "lat_stddev_s": r"Latency StdDev \(s\):\s+([\d.]+)",
}


def parse_dnsperf(text: str) -> dict:
    out = {}
    for key, rx in _DNSPERF_FIELDS.items():
        m = re.search(rx, text)
        if not m:
            raise VelozError(f"dnsperf printed no '{key}': {text.strip()[-300:]}", code=1)
        out[key] = float(m.group(1))
    return out


def dnsperf(ip: str, seconds: float, outstanding: int, qfile: Path) -> dict:
    """dnsperf on the generator's host (kernel sockets, one thread, one
    socket) against ip:PORT for `seconds`, at most `outstanding` queries in
    flight; `qfile` (written here) is copied there when it must be."""
    gen = topology.current().generator.host
    exe = gen.which("dnsperf")
    if not exe:
        raise VelozError(f"dnsperf is not installed on {gen.name} (Debian package dnsperf)",
                         code=1)  # fmt: skip
    with gen.staged(qfile.parent) as there:
        argv = [exe, "-s", ip, "-p", str(PORT), "-d", f"{there}/{qfile.name}",
                "-l", f"{seconds:g}", "-q", str(outstanding), "-c", "1", "-T", "1",
                "-t", "1"]  # fmt: skip
        done = gen.run(argv, timeout=seconds + 30)
    if done.returncode:
        raise VelozError(f"dnsperf failed: {(done.stderr or done.stdout).strip()[-300:]}",
                         code=1)  # fmt: skip
    return parse_dnsperf(done.stdout)


if __name__ == "__main__":
    # IP PORT: the probes; IP PORT FLOWS PER-FLOW GAP-S: flows()
    if len(sys.argv) == 6:
        lines = flows(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                      float(sys.argv[5]))  # fmt: skip
    else:
        lines = probe(sys.argv[1], int(sys.argv[2]))
    print("\n".join(lines))
