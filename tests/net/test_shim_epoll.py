"""Epoll servers under the LD_PRELOAD shim, in both modes: direct
(VZ_MODE=direct: the process runs the stack on dut-gen's AF_XDP socket) and
poller (udpd runs it; the process's sockets are rings shared with it). A
veloz socket's eventfd is readable while it holds a datagram, so the
kernel's epoll works on it. In vz-dut, on 198.18.0.3: an asyncio
DatagramProtocol echo server, a server whose threads each epoll_wait on
their own set holding their own dup() of one UDP socket, and one whose
threads each have their own socket in a SO_REUSEPORT group. From vz-gen,
kernel sockets send 2000 requests one in flight over 16 source ports and
check every answer; the
same servers on kernel sockets (198.18.0.2) are the reference; once more in
direct mode with no spin, so the background thread wakes the server on
every request. A probe checks edge-triggered epoll and EPOLLONESHOT against
the kernel's, dup of a closed descriptor (EBADF), a close under a thread
blocked in recvfrom or epoll_wait, and a forked child's calls. The threaded
server, ended by SIGINT, SIGTERM or SIGKILL while it serves, leaves
nothing: no steering program (direct), no socket or ring in udpd (poller).
On a veth of its own with two queues, direct mode runs an engine per
queue: each SO_REUSEPORT thread serves one queue's requests, and every
server's answers leave on the queue their requests came on. Idle, a direct
server wakes a few times a second."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_direct import direct_env, stop, xdp_attached
from test_udpd import SOCKET as UDPD_SOCKET
from test_udpd import udpd  # noqa: F401  (a fixture)
from test_udpd_load import Stats

from veloz.core import paths
from veloz.core.proc import in_netns

SHIM_IP, KERNEL_IP, GEN_IP = "198.18.0.3", "198.18.0.2", "198.18.0.1"
APPS = ["-m", "veloz.lab.epoll_apps"]
REQUESTS = 2000
FLOWS = 16  # the client's source ports, round robin: a SO_REUSEPORT group spreads them
MODES = ["direct", "poller"]


def shim_env(mode: str) -> dict[str, str]:
    """The server's environment in a mode (poller: udpd must be running)."""
    preload = {"LD_PRELOAD": str(paths.library("libveloz-preload.so"))}
    if mode == "direct":
        return {**direct_env("dut-gen", SHIM_IP), **preload}
    return {**os.environ, **preload, "VZ_UDPD_SOCKET": UDPD_SOCKET, "VZ_PRELOAD_STRICT": "1"}


def shim_mode(request: pytest.FixtureRequest, mode: str) -> dict[str, str]:
    """shim_env(mode), with udpd started first for poller mode."""
    if mode == "poller":
        request.getfixturevalue("udpd")
    return shim_env(mode)


def start(netns: str, args: list[str], env: dict[str, str] | None) -> subprocess.Popen:
    """One of udp_epoll_apps' programs, once it said it is ready."""
    proc = subprocess.Popen(in_netns(netns, [sys.executable, *APPS, *args]), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    line = proc.stdout.readline()
    if "ready" not in line:
        proc.kill()
        raise AssertionError(line + proc.communicate(timeout=10)[1])
    return proc


def run_app(netns: str, args: list[str], env: dict[str, str] | None = None) -> dict:
    """Its JSON summary, with what it said on stderr as "stderr"."""
    done = subprocess.run(in_netns(netns, [sys.executable, *APPS, *args]), env=env,
                          capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}


def serve_and_query(server: list[str], ip: str, port: int, env: dict[str, str] | None) -> dict:
    """The server's and the client's summaries for REQUESTS requests."""
    proc = start("vz-dut", [*server[:1], ip, str(port), *server[1:]], env)
    try:
        got = run_app("vz-gen", ["client", ip, str(port), str(REQUESTS), str(FLOWS)])
    finally:
        out = stop(proc)
    return {"client": got, "server": json.loads(out.strip().splitlines()[-1])}


def check_answers(result: dict, arm: str) -> None:
    c, s = result["client"], result["server"]
    assert c["wrong"] == 0, (arm, result)
    assert c["answered"] >= REQUESTS * 0.999, (arm, result)  # at most 0.1% lost
    # every answer came from the server, and nothing was echoed twice
    assert c["answered"] <= s["echoed"] <= REQUESTS, (arm, result)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "server", [["asyncio"], ["threads", "4"], ["reuseport", "4"]],
    ids=["asyncio", "threads-dup-epoll", "threads-reuseport"],
)  # fmt: skip
def test_epoll_echo_servers_on_veloz_and_kernel(testbed, request, server, mode):
    subprocess.run(in_netns("vz-gen", ["ip", "neigh", "flush", "dev", "gen-dut"]), check=True)
    veloz = serve_and_query(server, SHIM_IP, 7200, shim_mode(request, mode))
    check_answers(veloz, mode)
    if mode == "direct":
        assert not xdp_attached("vz-dut", "dut-gen"), "the direct server left its program"
    kernel = serve_and_query(server, KERNEL_IP, 7200, dict(os.environ))
    check_answers(kernel, "kernel")
    if server[0] == "threads":
        assert len(veloz["server"]["per_thread"]) == 4
    if server[0] == "reuseport":
        # the group spreads the client's 16 flows over its members, as the
        # kernel's does (by hash: at least two of the four get some)
        for arm, got in ((mode, veloz), ("kernel", kernel)):
            assert sum(n > 0 for n in got["server"]["per_thread"]) >= 2, (arm, got)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=lambda s: s.name)  # fmt: skip
def test_a_threaded_server_ended_by_a_signal_leaves_nothing(testbed, request, mode, sig):
    """The server whose threads epoll on dups of one socket, ended while it
    serves: by SIGINT or SIGTERM (its own stop, as a service's or a user's
    Ctrl-C) or by SIGKILL (nothing of it runs). In direct mode its steering
    program goes with it; in poller mode udpd frees its sockets and rings."""
    env = shim_mode(request, mode)
    stats = Stats(request.getfixturevalue("udpd")) if mode == "poller" else None
    proc = start("vz-dut", ["threads", SHIM_IP, "7203", "4"], env)
    try:
        got = run_app("vz-gen", ["client", SHIM_IP, "7203", "200", str(FLOWS)])
        if stats:  # udpd's records from before the server are read past
            stats.wait(lambda r: r["sockets"]["apps"] >= 1)
    finally:
        out = stop(proc, sig)
    assert got["wrong"] == 0 and got["answered"] >= 199, got
    assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 0), out
    if sig != signal.SIGKILL:
        assert json.loads(out.strip().splitlines()[-1])["echoed"] >= got["answered"]
    if stats:
        stats.wait(lambda r: r["sockets"]["apps"] == 0 and r["sockets"]["sockets"] == 0)
    assert not xdp_attached("vz-dut", "dut-gen") or mode == "poller"


# A link of its own with two queues each way: the sender's kernel spreads its
# flows over both by hash, and direct mode must take frames from each queue's
# AF_XDP socket. Checksum offload off, as on the testbed: a veth would leave
# the kernel sockets' UDP checksums unfinished.
MQ = {"a": ("vz-mq-a", "mqa", "198.19.200.1"), "b": ("vz-mq-b", "mqb", "198.19.200.2")}
MQ_SERVER_IP = "198.19.200.3"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def queue_counts(netns: str, ifname: str, counter: str) -> list[int]:
    """One of veth's per-queue XDP counters (its receive side), by queue."""
    out = subprocess.run(in_netns(netns, ["ethtool", "-S", ifname]), capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    found = dict(re.findall(rf"rx_queue_(\d+)_{counter}: (\d+)", out))
    return [int(found[q]) for q in sorted(found, key=int)]


# Frames on a queue that are not the flows' datagrams: ARP both ways.
NEIGHBOUR_FRAMES = 8


@pytest.fixture
def two_queue_link(testbed):
    """A veth of its own with two queues each way, between two namespaces of
    its own: the client's end (na, ia) and the server's (nb, ib). An XDP
    program on the client's end makes veth count the answers each of its
    queues receives (the pass NF hands them all on)."""
    (na, ia, _), (nb, ib, _) = MQ["a"], MQ["b"]
    try:
        for ns in (na, nb):
            ip("netns", "add", ns)
        ip("link", "add", ia, "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
           "peer", "name", ib, "numtxqueues", "2", "numrxqueues", "2")  # fmt: skip
        for ns, ifname, addr in (MQ["a"], MQ["b"]):
            ip("link", "set", ifname, "netns", ns)
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", ifname)
            ip("-n", ns, "link", "set", ifname, "up")
            subprocess.run(in_netns(ns, ["ethtool", "-K", ifname, "tx", "off"]), check=True,
                           capture_output=True)  # fmt: skip
        ip("-n", na, "link", "set", "dev", ia, "xdpdrv", "obj", str(paths.nf("pass").bpf),
           "sec", "xdp.frags")  # fmt: skip
        yield na, ia, nb, ib
    finally:
        for ns in (na, nb):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def serve_two_queues(link: tuple[str, str, str, str], server: list[str]) -> tuple[dict, str]:
    """A server in direct mode on the link's server end, 640 requests over 64
    flows from the client's: the client's summary and the server's output.
    Both queues carry requests, and each queue's answers leave on it."""
    na, ia, nb, ib = link
    env = {**shim_env("direct"), **direct_env(ib, MQ_SERVER_IP)}
    proc = start(nb, [server[0], MQ_SERVER_IP, "7204", *server[1:]], env)
    try:
        got = run_app(na, ["client", MQ_SERVER_IP, "7204", "640", "64"])
    finally:
        out = stop(proc)
    assert got["wrong"] == 0 and got["answered"] >= 639, got
    requests = queue_counts(nb, ib, "xdp_redirect")
    answers = queue_counts(na, ia, "xdp_packets")
    assert len(requests) == 2 and all(n > 0 for n in requests), requests
    for queue, (reqs, answered) in enumerate(zip(requests, answers, strict=True)):
        assert abs(answered - reqs) <= NEIGHBOUR_FRAMES, (queue, requests, answers)
    assert not xdp_attached(nb, ib), "the direct server left its program"
    return got, out


def test_a_reuseport_group_on_a_link_with_two_queues(two_queue_link):
    """The SO_REUSEPORT server in direct mode on a two-queue veth, a thread
    and an engine per queue: every request of 64 flows answered right; each
    thread served exactly the requests of one queue, and its answers left
    on that queue, so each queue's flows keep to one engine both ways."""
    got, out = serve_two_queues(two_queue_link, ["reuseport", "2"])
    _, _, nb, ib = two_queue_link
    per_thread = json.loads(out.strip().splitlines()[-1])["per_thread"]
    assert sum(per_thread) >= got["answered"], per_thread
    # thread i (member i) takes queue i's datagrams: a thread taking both
    # queues' shows, as does one taking the other's when the counts differ
    requests = queue_counts(nb, ib, "xdp_redirect")
    for queue, (reqs, served) in enumerate(zip(requests, per_thread, strict=True)):
        assert 0 <= reqs - served <= NEIGHBOUR_FRAMES, (queue, requests, per_thread)


@pytest.mark.parametrize("server", [["asyncio"], ["threads", "2"]], ids=["asyncio", "threads"])
def test_one_socket_for_both_queues(two_queue_link, server):
    """One socket fed by both engines: a single-threaded server, and two
    threads on dups of it, answer every request, each on its queue."""
    serve_two_queues(two_queue_link, server)


def test_the_two_queue_bench_at_a_tiny_size(testbed):
    """bench/direct_queues.py: a row per server and arm, every request
    answered, its link gone after; a bad --build refused in one line."""
    bench = [sys.executable, str(paths.REPO_ROOT / "bench/direct_queues.py")]
    done = subprocess.run([*bench, "--trials", "1", "--requests", "40", "--clients", "1"],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-500:]
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    servers, arms = ("reuseport", "threads", "asyncio"), ("kernel", "veloz-direct")
    assert [r[:2] for r in rows] == [[s, a] for s in servers for a in arms], done.stdout
    assert all(r[2] == "40/40" for r in rows), done.stdout
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert MQ["a"][0] not in netns and MQ["b"][0] not in netns, netns
    bad = subprocess.run([*bench, "--build", "x=/nonexistent"], capture_output=True, text=True,
                         check=False)  # fmt: skip
    assert bad.returncode == 2 and "--build x=/nonexistent" in bad.stderr.splitlines()[-1]


def test_epoll_server_asleep_is_woken_by_the_port(testbed):
    """No spin: the server sleeps in epoll_wait on every request, and the
    background thread, woken by the AF_XDP socket, runs the engine that
    makes it readable. A round trip costs wake-ups, not a timer's tick."""
    direct = serve_and_query(["asyncio"], SHIM_IP, 7201,
                             {**shim_env("direct"), "VZ_BUSY_POLL_US": "0"})  # fmt: skip
    check_answers(direct, "direct, asleep")
    assert direct["client"]["rtt_p50_us"] < 700, direct


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def wake_ups(pid: int) -> int:
    """How many times the process's threads went to sleep, all together."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended
            total += int(re.search(r"voluntary_ctxt_switches:\s+(\d+)",
                                   status.read_text())[1])  # fmt: skip
    return total


def test_idle_direct_server_sleeps(testbed):
    """Idle, in epoll_wait with no timeout: the server spins once, then it
    and the background thread sleep. With no timer of the stack's pending
    the background thread wakes every IDLE_MS (50 ms), not every ms, so a
    second of idling costs a small part of a CPU and few wake-ups."""
    proc = start("vz-dut", ["asyncio", SHIM_IP, "7202"], shim_env("direct"))
    try:
        time.sleep(0.3)
        before, woke, t0 = cpu_seconds(proc.pid), wake_ups(proc.pid), time.monotonic()
        time.sleep(2.0)
        took = time.monotonic() - t0
        used = (cpu_seconds(proc.pid) - before) / took
        per_s = (wake_ups(proc.pid) - woke) / took
    finally:
        stop(proc)
    assert used < 0.25, f"an idle direct server used {used:.0%} of a CPU"
    assert per_s < 100, f"an idle direct server woke {per_s:.0f} times a second"


# A forked child's calls on its parent's socket, and on a socket of its own:
# direct mode refuses both (the port's rings are the parent's), with one
# line on stderr; in poller mode the parent's sockets are not the child's
# (EBADF), and a socket of its own works through udpd.
CHILD = {"direct": ("ENOTSUP", "ENOTSUP"), "poller": ("EBADF", "worked")}


@pytest.mark.parametrize("mode", MODES)
def test_edge_oneshot_dup_and_close_as_kernel(testbed, request, mode):
    env = shim_mode(request, mode)
    reflector = start("vz-gen", ["reflector", GEN_IP, "7210"], None)
    try:
        kernel = run_app("vz-dut", ["probe", KERNEL_IP, "7211", GEN_IP, "7210"])
        veloz = run_app("vz-dut", ["probe", SHIM_IP, "7211", GEN_IP, "7210", "--shim"], env)
    finally:
        stop(reflector)
    expected = {
        "et_first": 1, "et_again": 0, "oneshot_first": 1, "read_a": ["a"],
        "et_after_drain": 1, "oneshot_disarmed": 0, "oneshot_rearmed": 1, "read_b": ["b"],
        "dup_closed": "EBADF", "after_copy_closed": ["c"], "select_missed": 0,
    }  # fmt: skip
    assert {k: v for k, v in kernel.items() if k != "stderr"} == expected
    assert {k: veloz[k] for k in expected} == expected, veloz
    # a close under another thread: the blocked recvfrom ends with EBADF,
    # epoll_wait reports nothing, and the port is free for a new socket
    assert veloz["recv_after_close"] == "EBADF", veloz
    assert veloz["epoll_after_close"] == 0, veloz
    assert veloz["port_reused"] == ["d"], veloz
    # fork: clear errnos in the child; its exit leaves the parent's port working
    assert (veloz["child_recv"], veloz["child_socket"]) == CHILD[mode], veloz
    assert veloz["child_status"] == 0 and veloz["after_child"] == ["e"], veloz
    notes = [line for line in veloz["stderr"].splitlines() if "forked child" in line]
    assert len(notes) == (mode == "direct"), veloz["stderr"]
    assert not xdp_attached("vz-dut", "dut-gen") or mode == "poller"
