"""veloz-pingpong, veloz-pktgen and the LD_PRELOAD shim, over 127.0.0.1 only.

The apps run with --stack kernel (no root, no poller) and with --stack veloz
against the loopback poller of test-sock-preload (libveloz-sock's real server,
its transmit rings fed back to its receive rings). The shim runs unmodified
python3 programs.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from veloz.core import paths
from waits import wait_until

APPS = paths.build_dir() / "src/sock/apps"
PRELOAD_DIR = paths.build_dir() / "src/sock/preload"
SHIM = PRELOAD_DIR / "libveloz-preload.so"
POLLER = PRELOAD_DIR / "test-sock-preload"
NO_POLLER = "/nonexistent/veloz/udpd.sock"
GEN_MAGIC = 0x565A5047  # "VZPG": the header of veloz-pktgen's payloads


def app(name: str) -> str:
    path = APPS / name
    if not path.exists():
        pytest.skip(f"{path} is not built")
    return str(path)


def run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 30):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)  # fmt: skip


class Ready:
    """A server app started in the background, once it printed its ready line."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)  # fmt: skip
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        m = re.search(r"on 127\.0\.0\.1:(\d+) ", line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"no ready line: {line!r}")
        self.port = int(m.group(1))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> dict:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, err
        return json.loads(out)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----- veloz-pingpong -----


def check_rtt(rtt: dict) -> None:
    order = [rtt[k] for k in ("min", "p50", "p90", "p99", "p999", "max")]
    assert order == sorted(order) and order[0] > 0
    assert rtt["min"] <= rtt["mean"] <= rtt["max"]
    # a standard deviation is at most half the range (printed to 1 ns), and
    # zero exactly when every round trip took the same time
    spread = rtt["max"] - rtt["min"]
    assert rtt["stddev"] <= spread / 2 + 0.001, rtt
    assert (rtt["stddev"] > 0) == (spread > 0), rtt


def test_pingpong_kernel_end_to_end():
    server = Ready([app("veloz-pingpong"), "--stack", "kernel", "--server",
                    "--bind", "127.0.0.1:0", "--json"])  # fmt: skip
    try:
        r = run([app("veloz-pingpong"), "--stack", "kernel", "--client", "--connect",
                 f"127.0.0.1:{server.port}", "--count", "300", "--warmup", "20",
                 "--size", "18", "--json"])  # fmt: skip
    finally:
        srv = server.stop()
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["sent"], out["received"], out["lost"]) == (300, 300, 0)
    assert out["late"] == out["malformed"] == out["refused"] == out["warmup_lost"] == 0
    assert out["stack"] == "kernel" and out["size"] == 18
    check_rtt(out["rtt_us"])
    assert srv["echoed"] == srv["received"] == 320 and srv["bytes"] == 320 * 18


def test_pingpong_sizes_and_pacing():
    server = Ready([app("veloz-pingpong"), "--stack", "kernel", "--server",
                    "--bind", "127.0.0.1:0", "--count", "60", "--json"])  # fmt: skip
    t0 = time.monotonic()
    for size in ("1472", "9000"):
        r = run([app("veloz-pingpong"), "--stack", "kernel", "--client", "--connect",
                 f"127.0.0.1:{server.port}", "--count", "30", "--size", size,
                 "--interval-us", "2000", "--busy-poll", "--json"])  # fmt: skip
        out = json.loads(r.stdout)
        assert r.returncode == 0 and out["received"] == 30, r.stderr
        check_rtt(out["rtt_us"])
    assert time.monotonic() - t0 >= 2 * 30 * 0.002  # paced
    # the server stops by itself after --count echoes
    assert server.proc.wait(timeout=10) == 0
    assert json.loads(server.proc.stdout.read())["echoed"] == 60


def test_pingpong_without_a_server_counts_losses():
    r = run([app("veloz-pingpong"), "--stack", "kernel", "--client", "--connect",
             f"127.0.0.1:{free_port()}", "--count", "3", "--timeout-ms", "200",
             "--json"])  # fmt: skip
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert (out["sent"], out["received"], out["lost"]) == (3, 0, 3)
    assert out["rtt_us"] is None
    assert r.stderr.count("\n") == 1 and "no echo" in r.stderr


def test_pingpong_tells_late_and_malformed_echoes():
    """A server that answers garbage first, then the echo after the timeout."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    srv.settimeout(10)

    def serve() -> None:
        for i in range(3):
            data, peer = srv.recvfrom(2048)
            if i == 0:
                srv.sendto(b"garbage", peer)
                time.sleep(0.45)  # past the first timeout, before the second
            srv.sendto(data, peer)

    t = threading.Thread(target=serve)
    t.start()
    r = run([app("veloz-pingpong"), "--stack", "kernel", "--client", "--connect",
             f"127.0.0.1:{srv.getsockname()[1]}", "--count", "3", "--timeout-ms",
             "300", "--json"])  # fmt: skip
    t.join()
    srv.close()
    out = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    assert (out["sent"], out["received"], out["lost"]) == (3, 2, 1)
    assert out["late"] == 1 and out["malformed"] == 1


# ----- veloz-pktgen -----


def test_pktgen_paced_into_sink_loses_nothing():
    sink = Ready([app("veloz-pktgen"), "--stack", "kernel", "--sink", "--bind",
                  "127.0.0.1:0", "--duration", "1.5", "--json"])  # fmt: skip
    r = run([app("veloz-pktgen"), "--stack", "kernel", "--connect",
             f"127.0.0.1:{sink.port}", "--size", "200", "--rate", "2000",
             "--count", "400", "--json"])  # fmt: skip
    got = json.loads(sink.proc.communicate(timeout=10)[0])  # it stops by itself
    assert r.returncode == 0, r.stderr
    sent = json.loads(r.stdout)
    assert sent["sent"] == 400 and sent["bytes"] == 400 * 200
    assert 1400 < sent["pps"] < 2600  # paced: 400 datagrams take ~0.2 s
    assert sent["bps"] == pytest.approx(sent["pps"] * 200 * 8, rel=1e-3)
    assert sent["wire_bps"] > sent["bps"]
    assert (got["received"], got["lost"], got["reordered"]) == (400, 0, 0)
    assert got["bytes"] == 400 * 200 and got["malformed"] == 0 and got["streams"] == 1


def test_pktgen_duration_bounds_the_run():
    sink = Ready([app("veloz-pktgen"), "--stack", "kernel", "--sink", "--bind",
                  "127.0.0.1:0", "--duration", "5", "--json"])  # fmt: skip
    r = run([app("veloz-pktgen"), "--stack", "kernel", "--connect",
             f"127.0.0.1:{sink.port}", "--rate", "1000", "--duration", "0.3",
             "--json"])  # fmt: skip
    got = sink.stop()  # SIGTERM ends the sink early, with its report
    sent = json.loads(r.stdout)
    assert 0.29 < sent["elapsed_s"] < 0.6 and 250 < sent["sent"] < 350
    assert got["received"] == sent["sent"] and got["lost"] == 0


def gen_payload(stream: int, seq: int, size: int = 32) -> bytes:
    head = struct.pack(">IIQ", GEN_MAGIC, stream, seq)
    return head + bytes(i & 0xFF for i in range(16, size))


def test_sink_counts_gaps_reordering_and_malformed():
    sink = Ready([app("veloz-pktgen"), "--stack", "kernel", "--sink", "--bind",
                  "127.0.0.1:0", "--duration", "5", "--json"])  # fmt: skip
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for seq in (0, 1, 2, 4, 3, 7):
            s.sendto(gen_payload(77, seq), ("127.0.0.1", sink.port))
        s.sendto(b"not a veloz-pktgen datagram", ("127.0.0.1", sink.port))
        s.sendto(gen_payload(78, 10), ("127.0.0.1", sink.port))
        time.sleep(0.3)
    got = sink.stop()
    assert got["received"] == 8 and got["malformed"] == 1 and got["streams"] == 2
    assert got["lost"] == 2  # 5 and 6
    assert got["reordered"] == 1  # 3, behind 4


# ----- argument errors -----


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("veloz-pingpong", []),
        ("veloz-pingpong", ["--server", "--client", "--bind", "127.0.0.1:1"]),
        ("veloz-pingpong", ["--server"]),
        ("veloz-pingpong", ["--client", "--connect", "127.0.0.1"]),
        ("veloz-pingpong", ["--client", "--connect", "127.0.0.1:1", "--size", "17"]),
        ("veloz-pingpong", ["--client", "--connect", "127.0.0.1:1", "--size", "65508"]),
        ("veloz-pingpong", ["--client", "--connect", "127.0.0.1:1", "--count", "0"]),
        ("veloz-pingpong", ["--client", "--connect", "300.0.0.1:1"]),
        ("veloz-pingpong", ["--client", "--connect", "127.0.0.1:1", "--stack", "dpdk"]),
        ("veloz-pingpong", ["--client", "--connect", "127.0.0.1:1", "--bogus"]),
        ("veloz-pingpong", ["--client", "--connect"]),
        ("veloz-pingpong", ["--client", "--connect", "127.0.0.1:1", "extra"]),
        ("veloz-pktgen", []),
        ("veloz-pktgen", ["--connect", "127.0.0.1:1"]),
        ("veloz-pktgen", ["--connect", "127.0.0.1:1", "--duration", "-1"]),
        ("veloz-pktgen", ["--connect", "127.0.0.1:1", "--duration", "1", "--rate", "0"]),
        ("veloz-pktgen", ["--connect", "127.0.0.1:70000", "--duration", "1"]),
        ("veloz-pktgen", ["--sink", "--bind", "127.0.0.1:1"]),
        ("veloz-pktgen", ["--sink", "--duration", "1"]),
        ("veloz-pktgen", ["--sink", "--bind", "127.0.0.1:1", "--duration", "1",
                          "--rate", "5"]),
    ],
)  # fmt: skip
def test_argument_errors_are_one_line_and_exit_2(name, argv):
    r = run([app(name), *argv], timeout=10)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    # the option table's line (src/common/options.c), or the app's own check's
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith(("veloz: ", f"{name}: ")), r.stderr


def test_help_is_not_an_error():
    for name in ("veloz-pingpong", "veloz-pktgen"):
        r = run([app(name), "--help"], timeout=10)
        assert r.returncode == 0 and r.stdout.startswith("usage: ")


# ----- the LD_PRELOAD shim -----


def shim_env(socket_path: str, **extra: str) -> dict[str, str]:
    """The environment that preloads the shim (and, for a sanitized build,
    the sanitizer runtime first, as it requires)."""
    if not SHIM.exists():
        pytest.skip(f"{SHIM} is not built")
    preload = [str(SHIM)]
    ldd = subprocess.run(["ldd", str(SHIM)], capture_output=True, text=True, check=False)
    asan = re.search(r"(\S*libasan\.so\S*) => (\S+)", ldd.stdout)
    env = {k: v for k, v in os.environ.items() if k != "VZ_PRELOAD_STRICT"}
    env.update(VZ_UDPD_SOCKET=socket_path, **extra)
    if asan:
        preload.insert(0, asan.group(2))
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    env["LD_PRELOAD"] = ":".join(preload)
    return env


# An unmodified program: UDP over 127.0.0.1 with the calls Python makes
# (socket, bind, sendto, recvfrom, sendmsg, recvmsg, poll for timeouts,
# ioctl FIONBIO, select). Prints whether its sockets were veloz's.
UDP_PROGRAM = r"""
import ctypes, select, socket, sys
try:
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
except OSError as e:
    print("socket failed", e.errno)
    sys.exit(3)
a.bind(("127.0.0.1", 0))
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
a.settimeout(5)
b.settimeout(5)
b.sendto(b"hello", a.getsockname())
data, src = a.recvfrom(100)
assert data == b"hello", data
a.sendto(b"back", src)
assert b.recv(100) == b"back"
b.sendmsg([b"ab", b"cd"], [], 0, a.getsockname())
r, _, _ = select.select([a], [], [], 5)
assert r == [a]
msg, anc, flags, peer = a.recvmsg(100)
assert msg == b"abcd" and peer[1] == b.getsockname()[1], (msg, peer)
is_veloz = getattr(ctypes.CDLL(None), "vz_is_socket", None)
print("OK", "veloz" if is_veloz and is_veloz(a.fileno()) else "kernel")
"""

OTHER_SOCKETS_PROGRAM = r"""
import socket
x, y = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
x.send(b"unix")
assert y.recv(10) == b"unix"
srv = socket.create_server(("127.0.0.1", 0))
c = socket.create_connection(srv.getsockname())
s, _ = srv.accept()
c.sendall(b"tcp")
assert s.recv(10) == b"tcp"
# IPv6 TCP is the kernel's; IPv6 UDP is veloz's when udpd has IPv6
t6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
print("OK")
"""


def test_preload_falls_back_to_the_kernel_and_warns_once():
    r = run([sys.executable, "-c", UDP_PROGRAM], env=shim_env(NO_POLLER))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "OK kernel"
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("veloz-preload: no poller at " + NO_POLLER)
    assert "kernel" in lines[0]


def test_preload_strict_fails_cleanly():
    r = run([sys.executable, "-c", UDP_PROGRAM],
            env=shim_env(NO_POLLER, VZ_PRELOAD_STRICT="1"))  # fmt: skip
    assert r.returncode == 3, r.stderr
    assert r.stdout.strip() == f"socket failed {errno.ENOENT}"
    assert r.stderr.count("\n") == 1 and "VZ_PRELOAD_STRICT=1" in r.stderr


def test_preload_leaves_unix_and_tcp_sockets_alone():
    # strict: any socket wrongly taken for veloz would fail loudly
    r = run([sys.executable, "-c", OTHER_SOCKETS_PROGRAM],
            env=shim_env(NO_POLLER, VZ_PRELOAD_STRICT="1"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "OK" and r.stderr == ""


@pytest.fixture
def loop_poller(tmp_path: Path):
    """libveloz-sock's server with its transmit rings looped back."""
    if not POLLER.exists():
        pytest.skip(f"{POLLER} is not built")
    path = tmp_path / "udpd" / "udpd.sock"
    proc = subprocess.Popen([str(POLLER), "poller", str(path)])
    wait_until(path.exists, 2, interval=0.01, what="the loopback poller's socket")
    yield str(path)
    proc.terminate()
    assert proc.wait(timeout=10) == 0


def test_preload_routes_an_unmodified_program_through_veloz(loop_poller):
    r = run([sys.executable, "-c", UDP_PROGRAM], env=shim_env(loop_poller))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "OK veloz"
    assert r.stderr == ""


def test_apps_on_the_veloz_stack(loop_poller):
    env = dict(os.environ, VZ_UDPD_SOCKET=loop_poller)
    server = Ready([app("veloz-pingpong"), "--stack", "veloz", "--server",
                    "--bind", "127.0.0.1:7000", "--json"], env=env)  # fmt: skip
    r = run([app("veloz-pingpong"), "--stack", "veloz", "--client", "--connect",
             "127.0.0.1:7000", "--count", "100", "--json"], env=env)  # fmt: skip
    srv = server.stop()
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stack"] == "veloz" and (out["received"], out["lost"]) == (100, 0)
    check_rtt(out["rtt_us"])
    assert srv["echoed"] == 100

    # the sink runs to its own end: stopped early, a loaded machine's poller
    # may not yet have delivered the last datagrams
    sink = Ready([app("veloz-pktgen"), "--stack", "veloz", "--sink", "--bind",
                  "127.0.0.1:7001", "--duration", "3", "--json"], env=env)  # fmt: skip
    r = run([app("veloz-pktgen"), "--stack", "veloz", "--connect", "127.0.0.1:7001",
             "--rate", "2000", "--count", "300", "--json"], env=env)  # fmt: skip
    sink.proc.wait(timeout=30)
    got = sink.stop()
    assert r.returncode == 0 and json.loads(r.stdout)["sent"] == 300, r.stderr
    assert (got["lost"], got["reordered"], got["stack"]) == (0, 0, "veloz")
    assert got["received"] == 300


def test_apps_say_when_the_poller_is_missing():
    if not SHIM.exists():
        pytest.skip("built without libveloz-sock")
    env = dict(os.environ, VZ_UDPD_SOCKET=NO_POLLER)
    r = run([app("veloz-pingpong"), "--stack", "veloz", "--client", "--connect",
             "127.0.0.1:7000"], env=env, timeout=10)  # fmt: skip
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "cannot reach the veloz poller" in r.stderr
