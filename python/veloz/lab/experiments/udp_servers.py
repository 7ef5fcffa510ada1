# SPDX-License-Identifier: BSD-2-Clause
"""Unmodified epoll servers on veloz's sockets against kernel sockets: the
two kinds of UDP server people run most (veloz/lab/epoll_apps.py), echoing
in vz-dut, a client on kernel sockets in vz-gen sending REQUESTS requests
one in flight, round robin over FLOWS source ports, and checking every
answer:

  asyncio    Python's asyncio DatagramProtocol: one thread, epoll, a
             self-pipe socketpair in the same set
  threads    four threads, each in epoll_wait on its own set holding its
             own dup() of one UDP socket (libevent servers' pattern)
  reuseport  four threads, each in epoll_wait on its own socket, the four
             bound to one port with SO_REUSEPORT (knotd's, nginx's)

Only the server's stack changes between arms (the same environments as
udp-app's, veloz/lab/dnsapp.py):

  kernel        kernel sockets (198.18.0.2): the baseline
  veloz         under LD_PRELOAD=libveloz-preload.so, through udpd in
                poller mode (198.18.0.3)
  veloz-direct  under the shim in VZ_MODE=direct (198.18.0.3): the server
                runs the stack on its own AF_XDP socket, no udpd

Each trial runs every server on every arm in turn (interleaved). A round
trip includes the client's own kernel path both ways, the same for every
arm; this machine has 2 CPUs, shared by client, server, udpd and softirq.
"""

from __future__ import annotations

import contextlib
import json

from veloz.core.errors import VelozError
from veloz.lab import dnsapp, summary, topology
from veloz.lab.experiments import udp
from veloz.lab.hosts import stop

ARMS = ("kernel", "veloz", "veloz-direct")
SERVERS = {"asyncio": ("asyncio",), "threads": ("threads", "4"),
           "reuseport": ("reuseport", "4")}  # fmt: skip
FLOWS = 16  # the client's source ports, round robin
REQUESTS = 5000
PORT = 7400
MODULE = "veloz.lab.epoll_apps"


def measure(arm: str, server: str) -> dict:
    """One server on one arm: the client's summary, and the server's."""
    topo = topology.current()
    dut, gen = topo.dut.host, topo.generator.host
    ip = dnsapp.arm_ip(arm)
    kind, *extra = SERVERS[server]
    argv = dut.python_argv(MODULE, kind, ip, str(PORT), *extra)
    proc = dut.spawn(argv, env=dnsapp.arm_env(arm, udp.SOCKET))
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if "ready" not in line:
            raise VelozError(f"the {server} server ({arm}) did not start: {line.strip()}", code=1)
        done = gen.run(gen.python_argv(MODULE, "client", ip, str(PORT), str(REQUESTS),
                                       str(FLOWS)),
                       timeout=REQUESTS * 0.5 + 60)  # fmt: skip
    finally:
        stop(proc)
    if done.returncode != 0:
        raise VelozError(f"the {server} client ({arm}) failed: {done.stderr.strip()[-300:]}",
                         code=1)  # fmt: skip
    client = json.loads(done.stdout.strip().splitlines()[-1])
    return {"stack": arm, "server": server, **client}


class UdpServers:
    name = "udp-servers"
    title = "Unmodified epoll UDP servers on veloz sockets against kernel sockets"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(ARMS) * len(SERVERS)

    def needs(self, s: dict) -> tuple[topology.Need, ...]:
        return (
            topology.Need("dut", "tool", "vz-udpd"),
            topology.Need("dut", "library", "libveloz-preload.so"),
            topology.Need("dut", "python", MODULE),
            topology.Need("generator", "python", MODULE),
        )

    def run(self, ctx) -> None:
        for t in range(ctx.settings["trials"]):
            for server in SERVERS:
                for arm in ARMS:
                    # udpd for poller mode only: direct mode takes the port
                    with (udp.running_udpd(gen=False) if arm == "veloz"
                          else contextlib.nullcontext()):  # fmt: skip
                        rec = measure(arm, server)
                    ctx.record(f"{arm} {server}", rec, trial=t, experiment=self.name)

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        rows = []
        for server in SERVERS:
            for arm in ARMS:
                recs = [r for r in records if r["stack"] == arm and r["server"] == server]
                rows.append([server, arm, len(recs), sum(r["sent"] for r in recs),
                             sum(r["answered"] for r in recs),
                             sum(r["wrong"] for r in recs)])  # fmt: skip
        out = [{
            "title": "Answers: every request checked",
            "text": (f"{REQUESTS} requests per run, one in flight, each answer compared with "
                     "its request; a request unanswered within 0.5 s is lost."),
            "table": {"columns": ["server", "stack", "trials", "sent", "answered", "wrong"],
                      "rows": rows},
        }]  # fmt: skip
        for metric, name in (("rtt_p50_us", "p50"), ("rtt_p99_us", "p99")):
            sec = summary.rate_section(records, f"Round-trip {name} (µs) by server",
                                       metric=metric, unit=1.0, unit_name="µs",
                                       category="stack", series="server",
                                       baseline="kernel")  # fmt: skip
            sec["text"] = ("Median over trials, 95% bootstrap CI; ratio to the same server on "
                           "kernel sockets (below 1: veloz faster).")  # fmt: skip
            out.append(sec)
        return out


UDP_SERVERS = UdpServers()
