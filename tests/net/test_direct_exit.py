"""Nothing outlives a process on veloz's stack, however it ends: a normal
exit, abort(), or death by SIGTERM, SIGINT or SIGKILL (no handler runs).

Direct mode: an unmodified python3 echo server under the shim owns
198.18.0.3 on vz-dut's dut-gen (native and generic XDP). After it ends, no
XDP program is left on the interface (the steering program hangs on a BPF
link only the process held), no file of it in /dev/shm, and in /run/veloz
at most its unheld interface lock, which the next claimant reuses; vz-udpd
then starts there at once, without --replace. While it lives, its program
is refused to a claimant that cannot see its interface lock (another
/run/veloz). (test_direct.py: a program attached through netlink whose
owner is gone is still taken over.)

Poller mode: a shimmed application ended each way leaves no socket and no
ring mapping (memfd) in udpd.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_direct import SERVER_IP, client, direct_env

from veloz.core import paths
from veloz.core.proc import Runner, in_netns, veloz_argv
from waits import wait_until

SERVER_IP6 = "fd00:198:18::3"  # udpd's, as in test_udpd.py
SOCKET = "/run/veloz/udpd/test-direct-exit.sock"
RUN_DIR = Path("/run/veloz")
SHM_DIR = Path("/dev/shm")

# Echoes datagrams; on stdin, "exit" exits normally (atexit handlers run)
# and "abort" aborts. SIGINT is left to kill it, as SIGTERM does.
ECHO = """
import os, select, signal, socket, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", file=sys.stderr, flush=True)
while True:
    r, _, _ = select.select([s, sys.stdin], [], [])
    if s in r:
        data, peer = s.recvfrom(65535)
        s.sendto(data, peer)
    if sys.stdin in r:
        cmd = sys.stdin.readline().strip()
        if cmd == "exit":
            sys.exit(0)
        if cmd == "abort":
            os.abort()
"""

# ending -> the return code it gives
ENDINGS = {
    "exit": 0,
    "abort": -signal.SIGABRT,
    "sigterm": -signal.SIGTERM,
    "sigint": -signal.SIGINT,
    "sigkill": -signal.SIGKILL,
}


def shim() -> str:
    return str(paths.library("libveloz-preload.so"))


def start_echo(port: int, env: dict[str, str], prefix: list[str] | None = None,
               ok: bool = True) -> subprocess.Popen:  # fmt: skip
    argv = (prefix or []) + in_netns("vz-dut", [sys.executable, "-c", ECHO, SERVER_IP, str(port)])
    proc = subprocess.Popen(argv, env={**env, "LD_PRELOAD": shim(), "VZ_PRELOAD_STRICT": "1"},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    if ok:
        line = proc.stderr.readline()
        if "ready" not in line:
            proc.kill()
            raise AssertionError(line + proc.communicate(timeout=10)[1])
    return proc


def end(proc: subprocess.Popen, how: str) -> int:
    """End the process the given way; its return code."""
    if how in ("exit", "abort"):
        proc.stdin.write(how + "\n")
        proc.stdin.flush()
    else:
        proc.send_signal(getattr(signal, how.upper()))
    try:
        proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    return proc.returncode


def xdp_on(ifname: str) -> dict | None:
    """The XDP attachment `ip -j link` reports on vz-dut's interface."""
    out = subprocess.run(in_netns("vz-dut", ["ip", "-j", "link", "show", ifname]),
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return json.loads(out)[0].get("xdp")


def entries(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def lock_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def udpd_starts(tmp_path: Path, skb: bool) -> None:
    """vz-udpd takes dut-gen without --replace (its IPv6 address reaches the
    program on its link too), and leaves nothing either."""
    cfg = tmp_path / "udpd.toml"
    cfg.write_text(f'interface = "dut-gen"\nipv4 = "{SERVER_IP}/24"\nipv6 = "{SERVER_IP6}/64"\n'
                   f'socket = "{SOCKET}"\nskb_mode = {"true" if skb else "false"}\n')  # fmt: skip
    argv = veloz_argv("udpd", "--config", str(cfg), "--json", "--interval-ms", "60000")
    with Runner(in_netns("vz-dut", argv), attach_timeout=30, what="udpd") as r:
        assert r.attached["event"] == "ready"
        assert xdp_on("dut-gen"), "udpd attached nothing"
    assert not xdp_on("dut-gen"), "udpd left its program"
    assert not Path(SOCKET).exists(), "udpd left its control socket"


@pytest.mark.parametrize("skb", [False, True], ids=["native", "skb"])
@pytest.mark.parametrize("how", list(ENDINGS))
def test_direct_server_leaves_nothing(testbed, tmp_path, how, skb):
    run_before, shm_before = entries(RUN_DIR), entries(SHM_DIR)
    env = direct_env("dut-gen", SERVER_IP) | ({"VZ_DIRECT_SKB": "1"} if skb else {})
    server = start_echo(7110, env)
    try:
        attached = xdp_on("dut-gen")
        assert attached and attached["mode"] == (2 if skb else 1), attached
        got = client("vz-gen", "kernel", 7110, 64, 5)
        assert got["received"] == 5
    finally:
        rc = end(server, how)
    assert rc == ENDINGS[how], server.stderr
    # the kernel closed the link with the process: no wait, no clean-up
    assert not xdp_on("dut-gen"), f"{how} left the steering program attached"
    assert entries(SHM_DIR) - shm_before == set(), "left in /dev/shm"
    left = entries(RUN_DIR) - run_before
    # a flock dies with its holder; only the file can stay, and only when
    # no exit handler ran
    assert all(n.startswith("xdp-") and n.endswith(".lock") for n in left), left
    assert not left or how != "exit", left
    assert all(lock_free(RUN_DIR / n) for n in left)
    udpd_starts(tmp_path, skb)
    assert entries(RUN_DIR) - run_before == set(), "udpd did not take the lock file over"


def test_direct_live_link_is_refused_without_its_lock(testbed):
    """A live owner whose interface lock is out of sight (its own /run/veloz):
    its program is on a BPF link, so it is refused, not removed as stale,
    even by a direct process (which removes stale programs unasked)."""
    private = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs veloz-private /run/veloz && exec "$@"', "sh"]  # fmt: skip
    owner = start_echo(7111, direct_env("dut-gen", SERVER_IP), prefix=private)
    try:
        other = start_echo(7112, direct_env("dut-gen", SERVER_IP), ok=False)
        _, err = other.communicate(timeout=30)
        assert other.returncode != 0
        assert f"running process (pid {owner.pid}" in err, err
        got = client("vz-gen", "kernel", 7111, 64, 5)
        assert got["received"] == 5, "the owner lost its program"
    finally:
        rc = end(owner, "sigkill")
    assert rc == -signal.SIGKILL
    assert not xdp_on("dut-gen")


# ---- poller mode ------------------------------------------------------------

HOLDER = f"""
import os, select, signal, socket, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(3)]
for i, s in enumerate(socks):
    s.bind(("{SERVER_IP}", 7120 + i))
print("ready", file=sys.stderr, flush=True)
cmd = sys.stdin.readline().strip()
if cmd == "exit":
    sys.exit(0)
os.abort()
"""


def ring_maps(pid: int) -> int:
    """The socket rings udpd has mapped (each a memfd)."""
    return Path(f"/proc/{pid}/maps").read_text().count("memfd:veloz-sock")


@pytest.mark.parametrize("how", list(ENDINGS))
def test_poller_frees_an_ended_application(testbed, tmp_path, how):
    cfg = tmp_path / "udpd.toml"
    cfg.write_text(f'interface = "dut-gen"\nipv4 = "{SERVER_IP}/24"\nsocket = "{SOCKET}"\n')
    argv = veloz_argv("udpd", "--config", str(cfg), "--json", "--interval-ms", "100")
    shm_before = entries(SHM_DIR)
    with Runner(in_netns("vz-dut", argv), attach_timeout=30, what="udpd") as r:
        udpd_pid = r.proc.pid  # veloz udpd execs vz-udpd (ip netns exec too)
        assert ring_maps(udpd_pid) == 0
        app = subprocess.Popen(in_netns("vz-dut", [sys.executable, "-c", HOLDER]),
                               env={**os.environ, "VZ_UDPD_SOCKET": SOCKET, "LD_PRELOAD": shim(),
                                    "VZ_PRELOAD_STRICT": "1"},
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert "ready" in app.stderr.readline()
        assert ring_maps(udpd_pid) == 3
        assert end(app, how) == ENDINGS[how]
        wait_until(lambda: ring_maps(udpd_pid) == 0, 10, interval=0.05,
                   what="udpd unmapping the ended application's rings")  # fmt: skip
        s = r.stop()
    assert s["sockets"]["apps"] == 0 and s["sockets"]["sockets"] == 0
    assert s["sockets"]["apps_total"] == 1
    assert entries(SHM_DIR) - shm_before == set(), "left in /dev/shm"
