"""Direct mode (VZ_MODE=direct): an application runs veloz's stack on its
own AF_XDP socket, no udpd. On the testbed: an echo server in vz-dut owns
198.18.0.3 on dut-gen; vz-gen's kernel answers and pings it (ARP and ICMP
from the same loop); a direct client in vz-gen (198.18.0.4 on gen-dut)
talks to it, datagrams of 41+ fragments included; the steering program
goes when the process exits, and with it when it is killed (a BPF link);
one attached through netlink whose owner is gone is taken over by the next
direct process (the interface lock is free). test_direct_exit.py ends the
process every way."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from veloz.core import paths
from veloz.core.proc import in_netns
from waits import wait_until

SERVER_IP, CLIENT_IP = "198.18.0.3", "198.18.0.4"


def direct_env(iface: str, addr: str) -> dict[str, str]:
    return {**os.environ, "VZ_MODE": "direct", "VZ_DIRECT_IFACE": iface,
            "VZ_DIRECT_ADDR": f"{addr}/24"}  # fmt: skip


def xdp_attached(netns: str, ifname: str) -> bool:
    out = subprocess.run(in_netns(netns, ["ip", "-d", "link", "show", ifname]),
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return "prog/xdp" in out or " xdp" in out


def start_server(port: int) -> subprocess.Popen:
    argv = [str(paths.tool("veloz-pingpong")), "--server", "--stack", "veloz", "--bind",
            f"{SERVER_IP}:{port}", "--json"]  # fmt: skip
    proc = subprocess.Popen(in_netns("vz-dut", argv), env=direct_env("dut-gen", SERVER_IP),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    said = []
    while True:  # notices (a stale program taken over), then the ready line
        line = proc.stderr.readline()
        said.append(line)
        if not line or "echoing" in line:
            break
    if "echoing" not in line:
        proc.kill()
        raise AssertionError("".join(said) + proc.communicate(timeout=10)[1])
    return proc


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> str:
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def client(netns: str, stack: str, port: int, size: int, count: int,
           env: dict[str, str] | None = None) -> dict:  # fmt: skip
    argv = [str(paths.tool("veloz-pingpong")), "--client", "--stack", stack,
            "--connect", f"{SERVER_IP}:{port}", "--size", str(size),
            "--count", str(count), "--json"]  # fmt: skip
    done = subprocess.run(in_netns(netns, argv), env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_direct_echo_arp_icmp_and_cleanup(testbed):
    subprocess.run(in_netns("vz-gen", ["ip", "neigh", "flush", "dev", "gen-dut"]), check=True)
    server = start_server(7100)
    try:
        ping = subprocess.run(in_netns("vz-gen", ["ping", "-c", "3", "-i", "0.2", "-W", "2",
                                                  SERVER_IP]),
                              capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        assert ping.returncode == 0, ping.stdout + ping.stderr
        k = client("vz-gen", "kernel", 7100, 64, 200)
        assert k["received"] == 200 and k["lost"] == 0
        # 60,000 bytes: 41 fragments each way
        big = client("vz-gen", "kernel", 7100, 60000, 20)
        assert big["received"] == 20 and big["lost"] == 0
        # direct on both ends
        d = client("vz-gen", "veloz", 7100, 64, 500, direct_env("gen-dut", CLIENT_IP))
        assert d["received"] == 500 and d["lost"] == 0
        assert not xdp_attached("vz-gen", "gen-dut"), "the direct client left its program"
    finally:
        out = stop(server)
    assert json.loads(out.strip().splitlines()[-1])["echoed"] >= 720
    assert not xdp_attached("vz-dut", "dut-gen"), "the direct server left its program"


def test_direct_kill9_leaves_nothing_and_a_netlink_leftover_is_taken_over(testbed):
    server = start_server(7101)
    stop(server, signal.SIGKILL)
    assert not xdp_attached("vz-dut", "dut-gen"), "a kill -9 left the steering program"
    # what an owner that attached through netlink (as veloz did before BPF
    # links) leaves when it is killed: the same program, no lock held
    obj = paths.build_dir() / "src/sock/udpd/udpd_steer.bpf.o"
    subprocess.run(in_netns("vz-dut", ["ip", "link", "set", "dev", "dut-gen", "xdpdrv", "obj",
                                       str(obj), "sec", "xdp"]), check=True)  # fmt: skip
    try:
        assert xdp_attached("vz-dut", "dut-gen")
        server = start_server(7101)  # the lock is free: stale, replaced
        try:
            k = client("vz-gen", "kernel", 7101, 64, 50)
            assert k["received"] == 50
        finally:
            stop(server)
        wait_until(lambda: not xdp_attached("vz-dut", "dut-gen"), 10, interval=0.1,
                   what="the program detached")  # fmt: skip
    finally:
        subprocess.run(in_netns("vz-dut", ["ip", "link", "set", "dev", "dut-gen", "xdp", "off"]),
                       check=False)  # fmt: skip


def test_direct_bad_config_one_line(testbed):
    argv = [str(paths.tool("veloz-pingpong")), "--server", "--stack", "veloz", "--bind",
            f"{SERVER_IP}:7102"]  # fmt: skip
    env = {**os.environ, "VZ_MODE": "direct", "VZ_DIRECT_IFACE": "dut-gen",
           "VZ_DIRECT_ADDR": "not-an-address"}  # fmt: skip
    done = subprocess.run(in_netns("vz-dut", argv), env=env, capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip
    assert done.returncode == 1
    assert "VZ_DIRECT_ADDR" in done.stderr and len(done.stderr.strip().splitlines()) <= 2
    assert not xdp_attached("vz-dut", "dut-gen")
