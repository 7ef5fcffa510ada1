#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Direct mode on a link with two queues: unmodified epoll servers
(veloz/lab/epoll_apps.py) under the shim in VZ_MODE=direct, side by side
with the same servers on kernel sockets, and with other builds of veloz
given as arms (--build NAME=DIR, e.g. an older commit's build directory).

It builds a veth of its own with two queues each way between two
namespaces of its own (vz-mq-a, the clients' end, and vz-mq-b, the
server's; 198.19.200.0/24), so it needs root and nothing of the testbed.
Each trial runs every server on every arm in turn (interleaved): CLIENTS
clients on kernel sockets at once, each sending REQUESTS requests one in
flight over 64 flows and checking every answer. veth spreads the flows
over its two queues by hash, as a NIC's RSS does.

  python3 bench/direct_queues.py --trials 5 --build other=/path/to/build

Prints, per server and arm: answered/sent over all trials, and the
medians over trials of the clients' median round trip, their p99, and the
requests answered per second (all clients together). This machine has 2
CPUs for clients, server and softirq alike, and both sides are Python:
the figures compare the arms, they do not say how far direct mode scales.
Nothing is left behind: the namespaces go, with the link, even on error.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLIENT_NS, SERVER_NS = "vz-mq-a", "vz-mq-b"
CLIENT_IF, SERVER_IF = "mqa", "mqb"
CLIENT_IP, KERNEL_IP, DIRECT_IP = "198.19.200.1", "198.19.200.2", "198.19.200.3"
PORT = 7500
FLOWS = 64
SERVERS = {"reuseport": ["reuseport", "2"], "threads": ["threads", "2"], "asyncio": ["asyncio"]}
APPS = [sys.executable, "-m", "veloz.lab.epoll_apps"]


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def in_ns(ns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


def link_up() -> None:
    for ns in (CLIENT_NS, SERVER_NS):
        sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", CLIENT_IF, "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
       "peer", "name", SERVER_IF, "numtxqueues", "2", "numrxqueues", "2")  # fmt: skip
    for ns, ifname, addr in ((CLIENT_NS, CLIENT_IF, CLIENT_IP), (SERVER_NS, SERVER_IF, KERNEL_IP)):
        sh("ip", "link", "set", ifname, "netns", ns)
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", ifname)
        sh("ip", "-n", ns, "link", "set", ifname, "up")
        # veth leaves checksums to hardware that is not there: the
        # userspace stack would drop the clients' datagrams as corrupt
        sh(*in_ns(ns, ["ethtool", "-K", ifname, "tx", "off"]))


def link_down() -> None:
    for ns in (CLIENT_NS, SERVER_NS):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def arm_env(build: Path | None) -> tuple[str, dict[str, str]]:
    """The server's address and environment: kernel sockets (None), or the
    shim of a build in direct mode on the server's end."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    if build is None:
        return KERNEL_IP, env
    return DIRECT_IP, {**env, "LD_PRELOAD": str(build / "src/sock/preload/libveloz-preload.so"),
                       "VZ_MODE": "direct", "VZ_DIRECT_IFACE": SERVER_IF,
                       "VZ_DIRECT_ADDR": f"{DIRECT_IP}/24"}  # fmt: skip


def one_run(server: list[str], build: Path | None, clients: int, requests: int) -> dict:
    ip, env = arm_env(build)
    argv = in_ns(SERVER_NS, [*APPS, server[0], ip, str(PORT), *server[1:]])
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if "ready" not in line:
            raise SystemExit(f"direct_queues: the {server[0]} server did not start: {line.strip()}")
        argv = in_ns(CLIENT_NS, [*APPS, "client", ip, str(PORT), str(requests), str(FLOWS)])
        env_client = {**os.environ, "PYTHONPATH": str(REPO / "python")}
        start = time.monotonic()
        with ThreadPoolExecutor(clients) as pool:
            done = list(pool.map(lambda _: subprocess.run(argv, env=env_client, capture_output=True,
                                                          text=True, timeout=600),
                                 range(clients)))  # fmt: skip
        wall = time.monotonic() - start
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    summaries = []
    for d in done:
        if d.returncode != 0:
            raise SystemExit(f"direct_queues: a client failed: {d.stderr.strip()[-300:]}")
        summaries.append(json.loads(d.stdout.strip().splitlines()[-1]))
    answered = sum(s["answered"] - s["wrong"] for s in summaries)
    return {"sent": sum(s["sent"] for s in summaries), "answered": answered,
            "p50": statistics.median(s["rtt_p50_us"] for s in summaries),
            "p99": max(s["rtt_p99_us"] for s in summaries), "rate": answered / wall}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--requests", type=int, default=5000, help="per client")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--build", action="append", default=[], metavar="NAME=DIR",
                    help="another build's directory as an arm (repeatable)")  # fmt: skip
    args = ap.parse_args()
    arms: dict[str, Path | None] = {"kernel": None, "veloz-direct": REPO / "build"}
    for spec in args.build:
        name, sep, path = spec.partition("=")
        if not sep or not (Path(path) / "src/sock/preload/libveloz-preload.so").exists():
            ap.error(f"--build {spec}: give NAME=DIR, DIR a build with libveloz-preload.so")
        arms[name] = Path(path).resolve()
    if args.trials < 1 or args.requests < 1 or args.clients < 1:
        ap.error("--trials, --requests and --clients take a positive number")
    if os.geteuid() != 0:
        ap.error("needs root (it builds namespaces and a veth)")
    runs: dict[tuple[str, str], list[dict]] = {}
    try:
        link_up()
        for trial in range(args.trials):
            for server, argv in SERVERS.items():
                for arm, build in arms.items():
                    r = one_run(argv, build, args.clients, args.requests)
                    runs.setdefault((server, arm), []).append(r)
                    print(f"trial {trial + 1} {server:9} {arm:14} p50 {r['p50']:7.1f} us "
                          f"rate {r['rate']:8.0f}/s", file=sys.stderr, flush=True)  # fmt: skip
    finally:
        link_down()
    print(f"{'server':10} {'arm':14} {'answered':>13} {'p50 us':>8} {'p99 us':>8} "
          f"{'req/s':>8} {'p50 vs kernel':>14} {'req/s vs kernel':>16}")  # fmt: skip
    for server in SERVERS:
        base = runs[(server, "kernel")]
        for arm in arms:
            rs = runs[(server, arm)]
            p50 = statistics.median(r["p50"] for r in rs)
            rate = statistics.median(r["rate"] for r in rs)
            print(f"{server:10} {arm:14} {sum(r['answered'] for r in rs):>6}/"
                  f"{sum(r['sent'] for r in rs):<6} {p50:8.1f} "
                  f"{statistics.median(r['p99'] for r in rs):8.1f} {rate:8.0f} "
                  f"{p50 / statistics.median(r['p50'] for r in base):14.2f} "
                  f"{rate / statistics.median(r['rate'] for r in base):16.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
