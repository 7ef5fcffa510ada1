"""The `linux` backend: the kernel's own way of doing an NF's job, as a baseline.

drop: the XDP paper's baseline, a drop in nftables' prerouting hook at raw
priority (before connection tracking), matching the port's interface.

lb: this kernel has no IPVS (no ip_vs in /proc/kallsyms), so the kernel's
own load balancer is nftables: DNAT of each VIP to its backends by a jhash
of the flow (weights repeat a backend in the map), then IP forwarding, with
connection tracking keeping a flow on its backend.

tx, redirect, router and lb: the kernel's IP forwarding. Frames arriving on the port
are routed by the namespace's routing table; those routed back out of the
port are counted as tx, those routed out of another interface as redirect
(per interface), those delivered to the host as pass, and the rest (no
route, TTL expired, reverse-path check) as drop, the kernel's verdict on
them. Forwarding is switched on for the run and the sysctls restored after;
for tx, ICMP redirects are switched off, since a router that forwards out of
the ingress interface would otherwise also tell the sender about it.

Counters come from nftables rule counters and are printed in the same
JSON-lines shape as the other backends, so the lab compares like with like.
Bytes are whole frames, as on XDP (nftables counts from the network header).

One table per interface, `inet vz_<ifname>`; a table left by a killed run
is reported and removed with --replace, exactly like a stale XDP program,
and the sysctls that run changed are restored from its record.
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

from veloz.core.errors import VelozError

RUN_DIR = Path("/run/veloz")
BASELINES = {"drop", "tx", "redirect", "router", "lb"}
ETH_HLEN = 14
FORWARDING = ("net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding")


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


def _counters(table: str) -> dict[str, tuple[int, int]]:
    """(packets, frame bytes) of each counting rule, by the rule's comment.

    nftables counts from the network header; XDP counts whole frames. The
    Ethernet header is added back so `bytes` means the same on every backend.
    """
    found = {}
    for item in json.loads(_nft("-j", "list", "table", "inet", table))["nftables"]:
        rule = item.get("rule", {})
        for expr in rule.get("expr", []):
            if "counter" in expr and "comment" in rule:
                packets = expr["counter"]["packets"]
                found[rule["comment"]] = (packets, expr["counter"]["bytes"] + ETH_HLEN * packets)
    if "rx" not in found:
        raise VelozError(f"table inet {table} has no rx counter", code=1)
    return found


def _egress_ports(ifname: str) -> list[str]:
    """Every other interface of the namespace: where a forwarded frame may go."""
    names = sorted(p.name for p in Path("/sys/class/net").iterdir())
    return [n for n in names if n not in (ifname, "lo")]


def _lb_chain(vips: list) -> str:
    """DNAT of every VIP to its backends: nftables' jhash load balancing."""
    rules = ""
    for vip, backends in vips:
        ip = "ip" if vip.address.version == 4 else "ip6"
        l4 = {6: "tcp", 17: "udp"}[vip.proto]
        targets = [b for b in backends for _ in range(b.weight)]
        if not targets:
            continue
        if any(b.address.version != vip.address.version for b in targets):
            raise VelozError(f"the linux lb baseline cannot DNAT {vip} to the other family")
        table = ", ".join(f"{i} : {b.address}" for i, b in enumerate(targets))
        rules += (
            f"    {ip} daddr {vip.address} {l4} dport {vip.port} dnat {ip} to jhash "
            f"{ip} saddr . {l4} sport mod {len(targets)} map {{ {table} }}\n"
        )
    return (
        f"  chain lb {{\n    type nat hook prerouting priority dstnat; policy accept;\n"
        f"{rules}  }}\n"
    )


def _ruleset(nf: str, ifname: str, table: str, vips: list | None = None) -> str:
    quoted = json.dumps(ifname)
    # Raw priority: before conntrack, as the XDP paper's iptables raw drop.
    rx = f'    iifname {quoted} counter {"drop " if nf == "drop" else ""}comment "rx"\n'
    chains = (
        f"  chain prerouting {{\n"
        f"    type filter hook prerouting priority raw; policy accept;\n{rx}  }}\n"
    )
    if nf != "drop":
        forward = f'    iifname {quoted} oifname {quoted} counter comment "tx"\n'
        for port in _egress_ports(ifname):
            forward += (
                f"    iifname {quoted} oifname {json.dumps(port)} counter "
                f"comment {json.dumps('redirect:' + port)}\n"
            )
        chains += (
            f"  chain input {{\n    type filter hook input priority filter; policy accept;\n"
            f'    iifname {quoted} counter comment "pass"\n  }}\n'
            f"  chain forward {{\n    type filter hook forward priority filter; "
            f"policy accept;\n{forward}  }}\n"
        )
    if nf == "lb":
        chains += _lb_chain(vips or [])
    return f"table inet {table} {{\n{chains}}}\n"


def _sysctls(nf: str, ifname: str) -> dict[str, str]:
    """What the baseline sets, by /proc/sys path."""
    if nf == "drop":
        return {}
    want = dict.fromkeys(FORWARDING, "1")
    if nf == "tx":
        want |= {"net/ipv4/conf/all/send_redirects": "0",
                 f"net/ipv4/conf/{ifname}/send_redirects": "0"}  # fmt: skip
    return want


def _set_sysctls(values: dict[str, str]) -> dict[str, str]:
    """Write values; returns what was there before."""
    before = {}
    for key, value in values.items():
        path = Path("/proc/sys") / key
        before[key] = path.read_text().strip()
        path.write_text(value)
    return before


def _restore_sysctls(record: Path) -> None:
    """Put back what a run recorded before changing it, then drop the record."""
    if record.exists():
        for key, value in json.loads(record.read_text()).items():
            path = Path("/proc/sys") / key
            if path.exists():
                path.write_text(value)
        record.unlink()


def _run_paths(ifname: str) -> tuple[Path, Path]:
    """The lock file vz-xdp takes for this interface (one veloz per
    interface) and the record of the sysctls this baseline changed."""
    ns = os.stat("/proc/self/ns/net").st_ino
    index = Path(f"/sys/class/net/{ifname}/ifindex").read_text().strip()
    return RUN_DIR / f"xdp-{ns}-{index}.lock", RUN_DIR / f"linux-{ns}-{index}.sysctl.json"


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
        replace: bool, vips: list | None = None) -> int:  # fmt: skip
    if nf not in BASELINES:
        raise VelozError(
            f"the linux backend has a kernel baseline for {', '.join(sorted(BASELINES))} "
            f"only, not {nf}"
        )
    if len(ifaces) != 1:
        raise VelozError(f"the linux {nf} baseline takes one --iface (where frames arrive)")
    ifname = ifaces[0]
    if not Path(f"/sys/class/net/{ifname}").exists():
        raise VelozError(f"no interface '{ifname}' in this network namespace")
    if os.geteuid() != 0:
        raise VelozError("the linux backend needs root (CAP_NET_ADMIN) for nftables", code=1)
    lock_path, record = _run_paths(ifname)
    lock = _lock(lock_path, ifname)
    table = table_name(ifname)
    stop: list[int] = []

    def on_signal(sig: int, _frame: FrameType | None) -> None:
        stop.append(sig)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        if _table_exists(table) or record.exists():
            if not replace:
                raise VelozError(
                    f"{ifname} has a stale veloz nftables table (inet {table}) left by a run "
                    "that was killed; rerun with --replace to remove it",
                    code=1,
                )
            if _table_exists(table):
                _nft("delete", "table", "inet", table)
            _restore_sysctls(record)
            print(f"veloz: removed stale nftables table inet {table}", file=sys.stderr)
        # recorded before the change: a kill right after it is still undone
        wanted = _sysctls(nf, ifname)
        record.write_text(json.dumps({k: Path("/proc/sys", k).read_text().strip()
                                      for k in wanted}))  # fmt: skip
        try:
            _set_sysctls(wanted)
            _nft("-f", "-", stdin=_ruleset(nf, ifname, table, vips))
            try:
                return _count(nf, ifname, table, json_out, duration, interval, stop)
            finally:
                _nft("delete", "table", "inet", table)
        finally:
            _restore_sysctls(record)
    finally:
        lock_path.unlink(missing_ok=True)  # as vz-xdp does: nothing left in /run
        os.close(lock)


def _totals(nf: str, counters: dict[str, tuple[int, int]]) -> dict:
    """Packets and bytes per verdict from the rule counters."""
    rx = counters["rx"]
    if nf == "drop":
        return {"rx": rx, "drop": rx, "pass": (0, 0), "tx": (0, 0), "redirected": {}}
    redirected = {k.removeprefix("redirect:"): v for k, v in counters.items()
                  if k.startswith("redirect:")}  # fmt: skip
    taken = [counters["pass"], counters["tx"], *redirected.values()]
    # What the kernel neither delivered nor forwarded, it dropped. A frame
    # between prerouting and forward when the counters are read is briefly
    # counted here; the summary, read after the traffic, is exact.
    drop = tuple(max(0, rx[i] - sum(t[i] for t in taken)) for i in (0, 1))
    return {"rx": rx, "drop": drop, "pass": counters["pass"], "tx": counters["tx"],
            "redirected": redirected}  # fmt: skip


def _delta(now: dict, then: dict) -> dict:
    def sub(a, b):
        return tuple(x - y for x, y in zip(a, b, strict=True))

    out = {k: sub(now[k], then[k]) for k in ("rx", "drop", "pass", "tx")}
    out["redirected"] = {
        port: sub(count, then["redirected"].get(port, (0, 0)))
        for port, count in now["redirected"].items()
    }
    return out


def _record(nf: str, t: float, counts: dict, dt: float, rate: dict, summary: bool) -> dict:
    """One line in the shape every backend prints (see src/runner/counters.c).

    The kernel's work is not split into veloz workers, so `workers` is empty;
    errors the kernel keeps to itself (per-driver drops) are null.
    """
    rec: dict = {"summary": True} if summary else {}
    packets, nbytes = counts["rx"]
    redirect = sum(p for p, _ in counts["redirected"].values())
    rec |= {
        "t": round(t, 3), "nf": nf, "packets": packets, "bytes": nbytes,
        "aborted": 0, "drop": counts["drop"][0], "pass": counts["pass"][0],
        "tx": counts["tx"][0], "redirect": redirect, "rx": packets,
        "errors": {"rx_invalid": 0, "tx_failed": None, "pass_failed": 0, "rx_missed": None},
        "from_kernel": 0,
        "pps": round(rate["rx"][0] / dt) if dt > 0 else 0,
        "bps": round(rate["rx"][1] * 8 / dt) if dt > 0 else 0,
        "redirected": {port: p for port, (p, _) in counts["redirected"].items()},
        "workers": [],
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
                  f"{rec['pps']:10} pps  drop {rec['drop']}  pass {rec['pass']}  tx {rec['tx']}  "
                  f"redirect {rec['redirect']}", flush=True)  # fmt: skip

    how = "nftables raw prerouting drop" if nf == "drop" else "kernel IP forwarding"
    attached = {"event": "attached", "nf": nf, "mode": "linux", "ports": [ifname],
                "nftables": f"inet {table}", "baseline": how}  # fmt: skip
    human = f"{nf} baseline: {how} on {ifname}, counted in nftables (inet {table}); Ctrl-C to stop"
    print(json.dumps(attached) if json_out else human, flush=True)

    def read() -> dict:
        return _totals(nf, _counters(table))

    start = last = time.monotonic()
    first = prev = read()
    while not stop:
        deadline = last + interval
        if duration is not None:
            deadline = min(deadline, start + duration)
        while not stop and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        now, cur = time.monotonic(), read()
        emit(_record(nf, now - start, _delta(cur, first), now - last, _delta(cur, prev), False))
        prev, last = cur, now
        if duration is not None and now - start >= duration - 1e-6:
            break
    now, cur = time.monotonic(), read()
    since = _delta(cur, first)
    emit(_record(nf, now - start, since, now - start, since, True))
    return 0
