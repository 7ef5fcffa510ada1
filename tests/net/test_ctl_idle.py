# SPDX-License-Identifier: BSD-2-Clause
"""A `veloz ctl` client STOPPED mid-transaction (issue 22): SIGSTOP, not a
kill, so its socket stays open and, before the idle timeout, it held the
NF's one control session for ever.

With `--ctl-idle-timeout 2` the NF closes the silent session after 2 s and
rolls its transaction back, exactly as for a killed client: another client
gets the session, the map holds none of the stopped client's writes, and
the runner keeps no descriptor of it. Continued (SIGCONT), the stopped
client's commit gets one clear error, not a hang and not a commit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from test_ctl import CONFIG, ok
from test_ctl_load import TRAFFIC, held_fds, killed_writes

from veloz.control.client import Ctl
from veloz.core.proc import Runner, in_netns, veloz_argv
from waits import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

IDLE = 2.0

# Opens a transaction through veloz's own client, says when its writes are
# applied, waits for a line on stdin (it is stopped meanwhile), then commits
# and prints what the commit got.
STOPPED = """
import sys
from pathlib import Path
from veloz.control.client import Ctl, CtlError
ctl = Ctl(Path(sys.argv[1]))
print(" ".join(ctl.requests(["begin", *sys.argv[2:]])), flush=True)
sys.stdin.readline()
try:
    ctl.request("commit")
    print("committed", flush=True)
except CtlError as e:
    print(f"error: {e}", flush=True)
"""


def idle_closed(path: str) -> int:
    """ctl_idle_closed of the runner's latest counters line (published each second)."""
    with Ctl(path) as c:
        return (c.counters() or {}).get("ctl_idle_closed", -1)


@pytest.mark.parametrize("backend", ["xdp", "afxdp"])
def test_stopped_client_is_dropped_and_rolled_back(testbed, tmp_path, backend):
    cfg = tmp_path / "router.toml"
    cfg.write_text(CONFIG)
    argv = veloz_argv("run", "router", "--backend", backend, "--iface", "dut-gen", "--iface",
                      "dut-sink", "--config", str(cfg), "--json", "--ctl-idle-timeout",
                      str(IDLE))  # fmt: skip
    with Runner(in_netns("vz-dut", argv), attach_timeout=60) as nf:
        path = nf.attached["ctl"]
        before = ok("route", "list", "--json")
        fds_before = held_fds(nf.proc.pid, path)
        writes = killed_writes()
        stopped = subprocess.Popen([sys.executable, "-c", STOPPED, path, *writes],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True)  # fmt: skip
        try:
            assert stopped.stdout is not None and stopped.stdin is not None
            assert stopped.stdout.readline().split() == ["ok"] * (1 + len(writes))
            os.kill(stopped.pid, signal.SIGSTOP)
            t0 = time.monotonic()
            # another client: served once the silent session is closed
            listed = ok("route", "list", "--json")
            waited = time.monotonic() - t0
            assert listed == before, "the stopped client's writes are still there"
            assert TRAFFIC not in listed
            assert waited < IDLE + 15, waited
            # the runner holds nothing of the closed session
            assert held_fds(nf.proc.pid, path) == fds_before
            closed = wait_until(lambda: idle_closed(path), 10, until=lambda n: n >= 1,
                                interval=0.1, what="the idle session counted")  # fmt: skip
            assert closed == 1
            # continued, its commit gets a clear error, and commits nothing
            os.kill(stopped.pid, signal.SIGCONT)
            out, _ = stopped.communicate("go\n", timeout=30)
        finally:
            if stopped.poll() is None:
                os.kill(stopped.pid, signal.SIGCONT)
                stopped.kill()
                stopped.wait(timeout=10)
        assert out.strip() == ("error: the running NF closed this control session: no request "
                               f"for {IDLE:.1f} s; its transaction was rolled back")  # fmt: skip
        assert ok("route", "list", "--json") == before
        assert held_fds(nf.proc.pid, path) == fds_before
