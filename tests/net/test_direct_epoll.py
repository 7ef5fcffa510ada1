"""Epoll servers in direct mode (VZ_MODE=direct) under the LD_PRELOAD shim:
a direct socket's eventfd is readable while it holds a datagram, so the
kernel's epoll works on it. In vz-dut, on 198.18.0.3 (dut-gen's AF_XDP
socket): an asyncio DatagramProtocol echo server, and a server whose
threads each epoll_wait on their own set holding their own dup() of one UDP
socket. From vz-gen, kernel sockets send 2000 requests one in flight and
check every answer; the same servers on kernel sockets (198.18.0.2) are the
reference; once more with no spin, so the background thread wakes the
server on every request. A probe checks edge-triggered epoll and EPOLLONESHOT against the
kernel's, dup of a closed descriptor (EBADF), a close under a thread
blocked in recvfrom or epoll_wait, and a forked child's calls (ENOTSUP)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_direct import direct_env, stop, xdp_attached

from veloz.core import paths
from veloz.core.proc import in_netns

DIRECT_IP, KERNEL_IP, GEN_IP = "198.18.0.3", "198.18.0.2", "198.18.0.1"
APPS = str(Path(__file__).with_name("udp_epoll_apps.py"))
REQUESTS = 2000


def shim_env() -> dict[str, str]:
    return {**direct_env("dut-gen", DIRECT_IP),
            "LD_PRELOAD": str(paths.library("libveloz-preload.so"))}  # fmt: skip


def start(netns: str, args: list[str], env: dict[str, str] | None) -> subprocess.Popen:
    """One of udp_epoll_apps' programs, once it said it is ready."""
    proc = subprocess.Popen(in_netns(netns, [sys.executable, APPS, *args]), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    line = proc.stdout.readline()
    if "ready" not in line:
        proc.kill()
        raise AssertionError(line + proc.communicate(timeout=10)[1])
    return proc


def run_app(netns: str, args: list[str], env: dict[str, str] | None = None) -> dict:
    """Its JSON summary, with what it said on stderr as "stderr"."""
    done = subprocess.run(in_netns(netns, [sys.executable, APPS, *args]), env=env,
                          capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}


def serve_and_query(server: list[str], ip: str, port: int, env: dict[str, str] | None) -> dict:
    """The server's and the client's summaries for REQUESTS requests."""
    proc = start("vz-dut", [*server[:1], ip, str(port), *server[1:]], env)
    try:
        got = run_app("vz-gen", ["client", ip, str(port), str(REQUESTS)])
    finally:
        out = stop(proc)
    return {"client": got, "server": json.loads(out.strip().splitlines()[-1])}


def check_answers(result: dict, arm: str) -> None:
    c, s = result["client"], result["server"]
    assert c["wrong"] == 0, (arm, result)
    assert c["answered"] >= REQUESTS * 0.999, (arm, result)  # at most 0.1% lost
    # every answer came from the server, and nothing was echoed twice
    assert c["answered"] <= s["echoed"] <= REQUESTS, (arm, result)


@pytest.mark.parametrize(
    "server", [["asyncio"], ["threads", "4"]], ids=["asyncio", "threads-dup-epoll"]
)
def test_epoll_echo_servers_direct_and_kernel(testbed, server):
    subprocess.run(in_netns("vz-gen", ["ip", "neigh", "flush", "dev", "gen-dut"]), check=True)
    direct = serve_and_query(server, DIRECT_IP, 7200, shim_env())
    check_answers(direct, "direct")
    assert not xdp_attached("vz-dut", "dut-gen"), "the direct server left its program"
    kernel = serve_and_query(server, KERNEL_IP, 7200, dict(os.environ))
    check_answers(kernel, "kernel")
    if server[0] == "threads":
        assert len(direct["server"]["per_thread"]) == 4


def test_epoll_server_asleep_is_woken_by_the_port(testbed):
    """No spin: the server sleeps in epoll_wait on every request, and the
    background thread, woken by the AF_XDP socket, runs the engine that
    makes it readable. A round trip costs wake-ups, not a timer's tick."""
    direct = serve_and_query(["asyncio"], DIRECT_IP, 7201,
                             {**shim_env(), "VZ_BUSY_POLL_US": "0"})  # fmt: skip
    check_answers(direct, "direct, asleep")
    assert direct["client"]["rtt_p50_us"] < 700, direct


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_idle_direct_server_sleeps(testbed):
    """Idle, in epoll_wait with no timeout: the server spins once, then it
    and the background thread sleep (the latter wakes for the stack's
    timers only), so a second of idling costs a small part of a CPU."""
    proc = start("vz-dut", ["asyncio", DIRECT_IP, "7202"], shim_env())
    try:
        time.sleep(0.3)
        before, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(2.0)
        used = (cpu_seconds(proc.pid) - before) / (time.monotonic() - t0)
    finally:
        stop(proc)
    assert used < 0.25, f"an idle direct server used {used:.0%} of a CPU"


def test_edge_oneshot_dup_and_close_direct_as_kernel(testbed):
    reflector = start("vz-gen", ["reflector", GEN_IP, "7210"], None)
    try:
        kernel = run_app("vz-dut", ["probe", KERNEL_IP, "7211", GEN_IP, "7210"])
        direct = run_app("vz-dut", ["probe", DIRECT_IP, "7211", GEN_IP, "7210", "--direct"],
                         shim_env())  # fmt: skip
    finally:
        stop(reflector)
    expected = {
        "et_first": 1, "et_again": 0, "oneshot_first": 1, "read_a": ["a"],
        "et_after_drain": 1, "oneshot_disarmed": 0, "oneshot_rearmed": 1, "read_b": ["b"],
        "dup_closed": "EBADF", "after_copy_closed": ["c"], "select_missed": 0,
    }  # fmt: skip
    assert {k: v for k, v in kernel.items() if k != "stderr"} == expected
    assert {k: direct[k] for k in expected} == expected, direct
    # a close under another thread: the blocked recvfrom ends with EBADF,
    # epoll_wait reports nothing, and the port is free for a new socket
    assert direct["recv_after_close"] == "EBADF", direct
    assert direct["epoll_after_close"] == 0, direct
    assert direct["port_reused"] == ["d"], direct
    # fork: the child's calls fail clearly, with one line on stderr; its
    # exit leaves the parent's port working
    assert direct["child_recv"] == "ENOTSUP" and direct["child_socket"] == "ENOTSUP", direct
    assert direct["child_status"] == 0 and direct["after_child"] == ["e"], direct
    notes = [line for line in direct["stderr"].splitlines() if "forked child" in line]
    assert len(notes) == 1, direct["stderr"]
    assert not xdp_attached("vz-dut", "dut-gen")
