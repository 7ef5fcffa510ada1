"""The `linux` backend: the kernel's own way of doing an NF's job, as a baseline.

For `drop` that is the XDP paper's baseline: a drop in nftables' prerouting
hook at raw priority (before connection tracking), matching the port's
interface. Counters come from the rule's own counter and are printed in the
same JSON-lines shape as the XDP backends, so the lab compares like with like.

One table per interface, `inet vz_<ifname>`; a table left by a killed run is
reported and removed with --replace, exactly like a stale XDP program.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from veloz.errors import VelozError

RUN_DIR = Path("/run/veloz")
BASELINES = {"drop"}
ETH_HLEN = 14


def table_name(ifname: str) -> str:
    return "vz_" + re.sub(r"[^A-Za-z0-9_]", "_", ifname)


def _nft(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["nft", *args], input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise VelozError(f"nft {' '.join(args)}: {done.stderr.strip()}", code=1)
    return done.stdout


def _table_exists(table: str) -> bool:
    tables = json.loads(_nft("-j", "list", "tables"))["nftables"]
    return any(t.get("table", {}).get("name") == table for t in tables)


def _counter(table: str) -> tuple[int, int]:
    """(packets, frame bytes) of the drop rule's counter.

    nftables counts from the network header; XDP counts whole frames. The
    Ethernet header is added back so `bytes` means the same on every backend.
    """
    for item in json.loads(_nft("-j", "list", "table", "inet", table))["nftables"]:
        for expr in item.get("rule", {}).get("expr", []):
            if "counter" in expr:
                packets = expr["counter"]["packets"]
                return packets, expr["counter"]["bytes"] + ETH_HLEN * packets
    raise VelozError(f"table inet {table} has no counter", code=1)


def _lock_path(ifname: str) -> Path:
    """The lock file vz-xdp takes for this interface: one veloz per interface."""
    ns = os.stat("/proc/self/ns/net").st_ino
    index = Path(f"/sys/class/net/{ifname}/ifindex").read_text().strip()
    return RUN_DIR / f"xdp-{ns}-{index}.lock"


def _lock(path: Path, ifname: str) -> int:
    RUN_DIR.mkdir(mode=0o755, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise VelozError(f"veloz is already running on {ifname}", code=1) from None
    return fd


def run(nf: str, ifaces: list[str], json_out: bool, duration: float | None, interval: float,
        replace: bool) -> int:  # fmt: skip
    if nf not in BASELINES:
        raise VelozError(
            f"the linux backend has a kernel baseline for {', '.join(sorted(BASELINES))} "
            f"only so far, not {nf}"
        )
    if len(ifaces) != 1:
        raise VelozError("the linux drop baseline takes one --iface")
    ifname = ifaces[0]
    if not Path(f"/sys/class/net/{ifname}").exists():
        raise VelozError(f"no interface '{ifname}' in this network namespace")
    if os.geteuid() != 0:
        raise VelozError("the linux backend needs root (CAP_NET_ADMIN) for nftables", code=1)
    lock_path = _lock_path(ifname)
    lock = _lock(lock_path, ifname)
    table = table_name(ifname)
    stop: list[int] = []

    def on_signal(sig: int, _frame: FrameType | None) -> None:
        stop.append(sig)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        if _table_exists(table):
            if not replace:
                raise VelozError(
                    f"{ifname} has a stale veloz nftables table (inet {table}) left by a run "
                    "that was killed; rerun with --replace to remove it",
                    code=1,
                )
            _nft("delete", "table", "inet", table)
            print(f"veloz: removed stale nftables table inet {table}", file=sys.stderr)
        # Raw priority: before conntrack, as the XDP paper's iptables raw drop.
        _nft("-f", "-", stdin=(
            f"table inet {table} {{\n"
            f"  chain prerouting {{\n"
            f"    type filter hook prerouting priority raw; policy accept;\n"
            f'    iifname "{ifname}" counter drop\n'
            f"  }}\n"
            f"}}\n"))  # fmt: skip
        try:
            return _count(nf, ifname, table, json_out, duration, interval, stop)
        finally:
            _nft("delete", "table", "inet", table)
    finally:
        lock_path.unlink(missing_ok=True)  # as vz-xdp does: nothing left in /run
        os.close(lock)


def _record(nf: str, t: float, packets: int, nbytes: int, dt: float, dp: int, db: int,
            summary: bool) -> dict:  # fmt: skip
    rec: dict = {"summary": True} if summary else {}
    rec |= {
        "t": round(t, 3), "nf": nf, "packets": packets, "bytes": nbytes,
        "pps": round(dp / dt) if dt > 0 else 0, "bps": round(db * 8 / dt) if dt > 0 else 0,
        "aborted": 0, "drop": packets, "pass": 0, "tx": 0, "redirect": 0, "redirected": {},
    }  # fmt: skip
    return rec


def _count(nf: str, ifname: str, table: str, json_out: bool, duration: float | None,
           interval: float, stop: list[int]) -> int:  # fmt: skip
    def emit(rec: dict) -> None:
        if json_out:
            print(json.dumps(rec), flush=True)
        else:
            label = "total" if rec.get("summary") else ""
            print(f"{label:5} {rec['t']:7.1f}s {rec['packets']:12} pkts {rec['bytes']:14} bytes "
                  f"{rec['pps']:10} pps  drop {rec['drop']}", flush=True)  # fmt: skip

    attached = {"event": "attached", "nf": nf, "mode": "linux", "ports": [ifname],
                "nftables": f"inet {table}"}  # fmt: skip
    human = f"{nf} baseline in nftables (inet {table}) on {ifname}; Ctrl-C to stop"
    print(json.dumps(attached) if json_out else human, flush=True)
    start = last = time.monotonic()
    first = prev = _counter(table)
    while not stop:
        deadline = last + interval
        if duration is not None:
            deadline = min(deadline, start + duration)
        while not stop and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        now, cur = time.monotonic(), _counter(table)
        emit(_record(nf, now - start, cur[0] - first[0], cur[1] - first[1], now - last,
                     cur[0] - prev[0], cur[1] - prev[1], False))  # fmt: skip
        prev, last = cur, now
        if duration is not None and now - start >= duration - 1e-6:
            break
    now, cur = time.monotonic(), _counter(table)
    emit(_record(nf, now - start, cur[0] - first[0], cur[1] - first[1], now - start,
                 cur[0] - first[0], cur[1] - first[1], True))  # fmt: skip
    return 0
