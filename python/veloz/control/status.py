"""`veloz status`: every veloz run and udpd on this machine, and what killed ones left.

What runs is found where runs leave their marks, in every network namespace
at once (`ip netns exec` shares /run):

- each run's control socket, /run/veloz/ctl/net<netns inode>-<IF>.sock: the
  socket's server (SO_PEERCRED) is the run; it answers with its NF, backend,
  ports and latest counters line (the `counters` request, src/ctl/ctl_session.c);
- the lock each run takes per interface, /run/veloz/xdp-<netns inode>-<ifindex>.lock:
  the kernel's table of file locks (/proc/locks) names the process that
  holds it, so udpd and the linux baseline, which have no control socket,
  are found too, and a lock nobody holds is stale;
- the XDP programs attached in each named namespace and the host's: one
  whose interface lock nobody holds was left by a killed run; it is
  adoptable, not stale, when the run was started with --persist (its record,
  /run/veloz/persist/net<netns inode>-<IF>.json, persist.py, names it).

Nothing here changes anything: stale state is reported with the command
that removes it.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from veloz.control import companion, dump, objects, persist
from veloz.control.client import CTL_DIR, Ctl, CtlError
from veloz.control.ctl import ABI  # the verdict names, from the NFs' BTF

RUN_DIR = Path(os.environ.get("VELOZ_RUN_DIR", "/run/veloz"))
UDPD_DIR = Path("/run/veloz/udpd")  # include/veloz/sock.h: VZ_UDPD_DEFAULT_SOCKET's
UDPD_FILES = (".sock", ".stats.json", ".stats.json.tmp")
NETNS_DIR = Path("/run/netns")
BPFFS = Path("/sys/fs/bpf")
PROG_PREFIX = "vz_xdp_"  # src/runner/xdp_attach.h: VZ_XDP_PROG_PREFIX
TESTBED_PROG = "vz_tb_rx"  # the testbed's own receive program, not a run's
RUNNERS = {"vz-xdp", "vz-afxdp", "vz-dpdk"}
SOCK_NAME = re.compile(r"^net(\d+)-(.+)\.sock$")
# the companions whose status a run shows (companion.py)
COMPANIONS = ("route-sync",)
LOCK_NAME = re.compile(r"^xdp-(\d+)-(\d+)\.lock$")
LINUX_RECORD = re.compile(r"^linux-(\d+)-(\d+)\.sysctl\.json$")


@dataclass
class Run:
    pid: int
    netns: str
    netns_inode: int
    kind: str  # "run" or "udpd"
    nf: str | None = None
    backend: str | None = None
    ports: list[dict] = field(default_factory=list)
    workers: int | None = None
    ctl: str | None = None
    uptime_s: float | None = None
    counters: dict | None = None
    nf_counters: dict | None = None  # router, ddos, lb: frames per outcome
    lb_vips: list | None = None  # lb: frames and bytes per VIP and backend
    companions: dict = field(default_factory=dict)  # name -> its status file (companion.py)
    note: str | None = None


@dataclass
class Stale:
    kind: str
    what: str
    remove: list[str]  # the command that removes it

    def as_dict(self) -> dict:
        return {"kind": self.kind, "what": self.what, "remove": shlex.join(self.remove)}


# ---- what the kernel says --------------------------------------------------


def namespaces() -> dict[int, str]:
    """Network namespace inode -> name ("" for the host's)."""
    out: dict[int, str] = {}
    try:
        entries = sorted(NETNS_DIR.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        try:
            out.setdefault(entry.stat().st_ino, entry.name)
        except OSError:
            continue  # a name whose namespace is gone (or a stray file)
    try:
        out[os.stat("/proc/1/ns/net").st_ino] = ""
    except OSError:
        pass
    return out


def lock_holders() -> dict[tuple[int, int, int], int]:
    """(major, minor, inode) of a flock()ed file -> the pid holding it (/proc/locks)."""
    holders: dict[tuple[int, int, int], int] = {}
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return holders
    for line in lines:
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF"; blocked
        # waiters have "->" after the number and hold nothing
        if len(parts) < 6 or parts[1] != "FLOCK" or parts[1] == "->":
            continue
        try:
            major, minor, inode = parts[5].split(":")
            holders[(int(major, 16), int(minor, 16), int(inode))] = int(parts[4])
        except ValueError:
            continue
    return holders


def proc_comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def proc_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def uptime_of(pid: int) -> float | None:
    """Seconds since the process started (its start time in clock ticks)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = float(Path("/proc/uptime").read_text().split()[0])
    except OSError:
        return None
    # comm, in parentheses, may hold spaces: count fields after the last ")"
    start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
    return max(0.0, boot - start_ticks / os.sysconf("SC_CLK_TCK"))


def _ip(netns: str, *args: str) -> list:
    cmd = ["ip", *(["-n", netns] if netns else []), "-j", "-d", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        return []
    try:
        value = json.loads(done.stdout)
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def _bpftool(*args: str) -> list:
    try:
        done = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True,
                              timeout=10, check=False)  # fmt: skip
        value = json.loads(done.stdout) if done.returncode == 0 else []
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return []
    return value if isinstance(value, list) else []


@dataclass
class XdpProg:
    ifname: str
    ifindex: int
    mode: str  # native, skb, hw
    prog_id: int
    names: list[str]  # the program, or the programs behind libxdp's dispatcher


class BpfNames:
    """Program names and libxdp dispatchers' components, read once."""

    def __init__(self) -> None:
        self.names = {p["id"]: p.get("name", "") for p in _bpftool("prog", "show")
                      if isinstance(p, dict) and "id" in p}  # fmt: skip
        # libxdp attaches each component to its dispatcher with an freplace
        # (tracing) link whose target is the dispatcher
        self.components: dict[int, list[int]] = {}
        for link in _bpftool("link", "show"):
            if not isinstance(link, dict):
                continue
            target = link.get("target_obj_id", link.get("target_prog_id"))
            if target and "prog_id" in link:
                self.components.setdefault(int(target), []).append(int(link["prog_id"]))

    def of(self, prog_id: int, fallback: str) -> list[str]:
        parts = self.components.get(prog_id)
        if parts:
            return [self.names.get(p, f"id {p}") for p in parts]
        return [self.names.get(prog_id) or fallback]


# `ip -j -d link`'s xdp.mode: the kernel's XDP_ATTACHED_* (4: several, see "attached")
MODES = {1: "native", 2: "skb", 3: "hw"}


# `ip link set dev IF <this> off` detaches a program of each attach mode
OFF = {"native": "xdpdrv", "skb": "xdpgeneric", "hw": "xdpoffload"}


def xdp_programs(netns: str, bpf: BpfNames) -> dict[str, XdpProg]:
    """ifname -> the XDP program attached to it, in one namespace."""
    out = {}
    for link in _ip(netns, "link", "show"):
        xdp = link.get("xdp") if isinstance(link, dict) else None
        if not isinstance(xdp, dict):
            continue
        prog = xdp.get("prog") or {}
        attached = xdp.get("attached") or []
        if not prog and attached:  # several modes at once: the first
            prog = attached[0].get("prog") or {}
        if "id" not in prog:
            continue
        mode_id = xdp.get("mode")
        if mode_id not in MODES and attached:
            mode_id = attached[0].get("mode")
        mode = MODES.get(mode_id, "?")
        prog_id = int(prog["id"])
        names = bpf.of(prog_id, prog.get("name", ""))
        out[link["ifname"]] = XdpProg(link["ifname"], int(link["ifindex"]), mode, prog_id, names)
    return out


def ifname_of(netns: str, ifindex: int) -> str | None:
    for link in _ip(netns, "link", "show"):
        if isinstance(link, dict) and link.get("ifindex") == ifindex:
            return str(link.get("ifname"))
    return None


def netns_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def ns_label(ns_names: dict[int, str], ino: int) -> str:
    name = ns_names.get(ino)
    if name is None:
        return f"net:[{ino}]"
    return name or "(host)"


def in_ns(ns_names: dict[int, str], ino: int, argv: list[str]) -> list[str]:
    """argv run in the namespace with this inode (by name: what a user types)."""
    name = ns_names.get(ino, "")
    if not name:
        return argv
    if argv[0] == "ip":
        return ["ip", "-n", name, *argv[1:]]
    return ["ip", "netns", "exec", name, *argv]


# ---- runs -----------------------------------------------------------------


def _ctl_run(path: Path, ino: int, ns_names: dict[int, str]) -> Run | Stale | None:
    """A live run behind a control socket, or the stale socket."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        return Stale("socket", f"control socket {path}: no run listens on it (killed)",
                     ["rm", "-f", str(path)])  # fmt: skip
    except OSError as e:
        if e.errno == errno.ENOENT:
            return None  # removed meanwhile: the run stopped
        return Run(0, ns_label(ns_names, ino), ino, "run", ctl=str(path),
                   note=f"cannot read its control socket: {e.strerror} (root?)")  # fmt: skip
    finally:
        probe.close()
    run = Run(0, ns_label(ns_names, ino), ino, "run", ctl=str(path))
    try:
        with Ctl(path) as ctl:
            run.pid = ctl.peer_pid()
            run.nf, run.backend = ctl.info()
            run.ports = [{"port": i, "iface": name} for i, name in enumerate(ctl.ports())]
            run.counters = ctl.counters()
            if run.counters is not None and run.nf:
                run.nf_counters, run.lb_vips = objects.nf_stats(ctl, run.nf)
            if run.lb_vips is not None:
                from veloz.control import health

                # the health companion's file beside the socket: net<ns>-<IF>.health.json
                beside = companion.beside(path, health.NAME)
                health.annotate(run.lb_vips, health.read(beside, run.pid))
    except (CtlError, OSError, ValueError, KeyError) as e:
        run.note = f"its control socket did not answer: {e}"
    if run.counters is not None and isinstance(run.counters.get("workers"), list):
        run.workers = len(run.counters["workers"])
    if run.pid:
        run.uptime_s = uptime_of(run.pid)
    for name in COMPANIONS:
        status = companion.read_status(companion.beside(path, name))
        if status is not None:
            run.companions[name] = status
    return run


def _summary(counters: dict | None) -> dict | None:
    """The counters line, without the per-worker and per-CPU detail."""
    if counters is None:
        return None
    keep = ("t", "packets", "bytes", *ABI.VERDICTS, "rx", "errors", "from_kernel", "pps", "bps")
    return {k: counters[k] for k in keep if k in counters}


def collect() -> dict:
    ns_names = namespaces()
    holders = lock_holders()
    bpf = BpfNames()
    runs: list[Run] = []
    stale: list[Stale] = []
    adoptable: list[dict] = []
    _add_ctl_runs(ns_names, runs, stale)
    owned, linux_records, udpd_files = _add_lock_holders(ns_names, holders, runs, stale)
    _add_stale_linux_records(ns_names, linux_records, owned, stale)
    _add_stale_udpd_files(udpd_files, stale)
    recs = persist.records()
    _add_xdp_programs(ns_names, bpf, runs, owned, stale, (recs, adoptable))
    _add_stale_records(ns_names, recs, stale)
    _add_stale_pins(stale)
    _add_stale_dumps(ns_names, stale)
    return {
        "runs": [_as_dict(r) for r in runs if r.kind == "run"],
        "udpd": [_as_dict(r) for r in runs if r.kind == "udpd"],
        "adoptable": adoptable,
        "stale": [s.as_dict() for s in stale],
    }


def _add_ctl_runs(ns_names: dict[int, str], runs: list[Run], stale: list[Stale]) -> None:
    """The runs behind the control sockets, and the sockets no run listens on."""
    try:
        socks = sorted(CTL_DIR.iterdir())
    except OSError:
        socks = []
    for path in socks:
        m = SOCK_NAME.match(path.name)
        if not m:
            continue
        found = _ctl_run(path, int(m.group(1)), ns_names)
        if isinstance(found, Stale):
            stale.append(found)
        elif found is not None:
            runs.append(found)


def _add_lock_holders(
    ns_names: dict[int, str],
    holders: dict[tuple[int, int, int], int],
    runs: list[Run],
    stale: list[Stale],
) -> tuple[set[tuple[int, int]], dict[tuple[int, int], Path], set[str]]:
    """The interface locks: who holds each, and which are held by nobody.

    Returns the (netns inode, ifindex) pairs a live process holds, the linux
    baseline's records by the same key, and the files of the live udpds.
    """
    by_pid = {r.pid: r for r in runs if r.pid}
    owned: set[tuple[int, int]] = set()  # (netns inode, ifindex) a live process holds
    try:
        locks = sorted(RUN_DIR.iterdir())
    except OSError:
        locks = []
    linux_records = {}
    udpd_files: set[str] = set()  # the sockets and stats files of live udpds
    for path in locks:
        m = LINUX_RECORD.match(path.name)
        if m:
            linux_records[(int(m.group(1)), int(m.group(2)))] = path
    for path in locks:
        m = LOCK_NAME.match(path.name)
        if not m:
            continue
        ino, ifindex = int(m.group(1)), int(m.group(2))
        try:
            st = path.stat()
            pid = holders.get((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
        except OSError:
            continue
        if pid is None or not Path(f"/proc/{pid}").exists():
            stale.append(Stale("lock", f"interface lock {path}: held by no process",
                               ["rm", "-f", str(path)]))  # fmt: skip
            continue
        owned.add((ino, ifindex))
        if pid in by_pid:
            continue
        run = _lock_holder_run(ns_names, pid, ino, ifindex, linux_records, udpd_files)
        runs.append(run)
        by_pid[pid] = run
    return owned, linux_records, udpd_files


def _lock_holder_run(
    ns_names: dict[int, str],
    pid: int,
    ino: int,
    ifindex: int,
    linux_records: dict[tuple[int, int], Path],
    udpd_files: set[str],
) -> Run:
    """A process that holds an interface lock but has no control socket:
    udpd (its files are added to udpd_files), the linux baseline, or a run
    not listening yet."""
    comm = proc_comm(pid)
    ifname = ifname_of(ns_names.get(ino, ""), ifindex) if ino in ns_names else None
    run = Run(pid, ns_label(ns_names, ino), ino, "udpd" if comm == "vz-udpd" else "run",
              ports=[{"port": 0, "iface": ifname or f"ifindex {ifindex}"}],
              uptime_s=uptime_of(pid))  # fmt: skip
    if run.kind == "udpd":
        argv = proc_cmdline(pid)
        run.ctl = _option(argv, "--socket") or str(UDPD_DIR / "udpd.sock")
        run.backend = "afxdp"
        run.counters = _udpd_summary(_option(argv, "--stats-file"))
        udpd_files.update(f for f in (run.ctl, _option(argv, "--stats-file")) if f)
    elif (ino, ifindex) in linux_records:
        run.backend = "linux"
        run.nf = _linux_nf(proc_cmdline(pid))
    else:
        run.note = f"{comm or 'a process'} holds the interface (no control socket yet)"
    return run


def _add_stale_linux_records(
    ns_names: dict[int, str],
    linux_records: dict[tuple[int, int], Path],
    owned: set[tuple[int, int]],
    stale: list[Stale],
) -> None:
    for (ino, ifindex), path in linux_records.items():
        if (ino, ifindex) not in owned:
            stale.append(Stale("linux", f"linux baseline record {path}: its run is gone; "
                               "its nftables table and sysctls may remain",
                               in_ns(ns_names, ino, ["veloz", "run", "drop", "--backend", "linux",
                                     "--iface", ifname_of(ns_names.get(ino, ""), ifindex) or "IF",
                                     "--replace", "--duration", "0.1"])))  # fmt: skip


def _add_stale_udpd_files(udpd_files: set[str], stale: list[Stale]) -> None:
    """udpd's socket and stats file: a live udpd's, or left by a killed one."""
    try:
        udpd_left = sorted(p for p in UDPD_DIR.iterdir() if p.name.endswith(UDPD_FILES))
    except OSError:
        udpd_left = []
    for path in udpd_left:
        if str(path) not in udpd_files and str(path).removesuffix(".tmp") not in udpd_files:
            stale.append(Stale("udpd", f"{path}: left by a udpd that is gone",
                               ["rm", "-f", str(path)]))  # fmt: skip


def _add_xdp_programs(
    ns_names: dict[int, str],
    bpf: BpfNames,
    runs: list[Run],
    owned: set[tuple[int, int]],
    stale: list[Stale],
    persisted: tuple[dict[tuple[int, str], persist.Record], list[dict]],
) -> None:
    """XDP programs: the runs' own, those a --persist run left (adoptable),
    and those nobody's lock covers. A record matched here is not stale."""
    recs, adoptable = persisted
    for ino, name in ns_names.items():
        for prog in xdp_programs(name, bpf).values():
            rec = recs.get((ino, prog.ifname))
            if rec is not None and rec.attached_id == prog.prog_id:
                recs.pop((ino, prog.ifname))
            if persist.adoptable(rec, prog.prog_id) and rec is not None:
                adoptable.append(rec.as_dict() | {"netns": ns_label(ns_names, ino),
                                                  "iface": prog.ifname,
                                                  "xdp_mode": prog.mode})  # fmt: skip
                continue
            holder = [r for r in runs if r.netns_inode == ino
                      and any(p["iface"] == prog.ifname for p in r.ports)]  # fmt: skip
            for run in holder:
                for p in run.ports:
                    if p["iface"] == prog.ifname:
                        p.update(xdp_mode=prog.mode, prog_id=prog.prog_id, programs=prog.names)
            if holder or (ino, prog.ifindex) in owned:
                continue
            if not any(n.startswith(PROG_PREFIX) for n in prog.names):
                continue  # not veloz's (the testbed's, or a user's own program)
            off = OFF.get(prog.mode, "xdp")
            stale.append(Stale(
                "xdp",
                f"XDP program {', '.join(prog.names)} (id {prog.prog_id}, {prog.mode} mode) on "
                f"{prog.ifname} in {ns_label(ns_names, ino)}: the run that attached it is gone",
                in_ns(ns_names, ino, ["ip", "link", "set", "dev", prog.ifname, off, "off"]),
            ))  # fmt: skip
            if rec is not None and rec.attached_id == prog.prog_id:
                # its record goes with it: one pass of the remove commands cleans up
                stale.append(Stale("record", f"record {rec.path} of {rec.nf} on {prog.ifname} in "
                                   f"{ns_label(ns_names, ino)}: the run that wrote it is gone",
                                   persist.remove_command(rec)))  # fmt: skip


def _add_stale_records(
    ns_names: dict[int, str], recs: dict[tuple[int, str], persist.Record], stale: list[Stale]
) -> None:
    """Records whose program is no longer attached, their runs gone."""
    for (ino, iface), rec in recs.items():
        if rec.run_alive():
            continue
        what = (f"record {rec.path} of {rec.nf} on {iface} in {ns_label(ns_names, ino)}: "
                f"its program (id {rec.attached_id}) is no longer attached")  # fmt: skip
        stale.append(Stale("record", what, persist.remove_command(rec)))


def _add_stale_pins(stale: list[Stale]) -> None:
    """Pins left in the host's bpffs (runs pin nothing there; a hand-run
    libxdp might)."""
    try:
        pins = sorted(p for p in BPFFS.rglob("*") if p.name.startswith(("vz_", "vz-")))
    except OSError:
        pins = []
    for pin in pins:
        stale.append(Stale("pin", f"pinned BPF object {pin}", ["rm", "-rf", str(pin)]))


def _add_stale_dumps(ns_names: dict[int, str], stale: list[Stale]) -> None:
    """A dump killed before it swapped the NF back (veloz/control/dump.py)."""
    for path, pid, iface in dump.stale_dumps():
        ino = dump.netns_inode_of(path)
        where = f"{iface} in {ns_label(ns_names, ino)}"
        restore = ["veloz", "dump", "--iface", iface, "--restore"]
        what = f"veloz dump (pid {pid}) on {where} was killed: the NF may still be swapped out"
        stale.append(Stale("dump", what, in_ns(ns_names, ino, restore)))


def _udpd_summary(stats_file: str | None) -> dict | None:
    """udpd's latest stats line (vz-udpd --stats-file), its headline figures."""
    if not stats_file:
        return None
    try:
        line = json.loads(Path(stats_file).read_text())
    except (OSError, ValueError):
        return None  # before the first interval
    if not isinstance(line, dict):
        return None
    stack, socks = line.get("stack") or {}, line.get("sockets") or {}
    return {"t": line.get("t"), "rx_frames": stack.get("rx_frames"),
            "rx_delivered": stack.get("rx_delivered"), "tx_frames": stack.get("tx_frames"),
            "udp_no_port": stack.get("udp_no_port"), "apps": socks.get("apps"),
            "sockets": socks.get("sockets"), "rx_ring_full": socks.get("rx_ring_full")}  # fmt: skip


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _linux_nf(argv: list[str]) -> str | None:
    # `veloz run NF --backend linux ...`, as the Python process's argv
    if "run" in argv:
        i = argv.index("run")
        if i + 1 < len(argv):
            return argv[i + 1]
    return None


def _as_dict(run: Run) -> dict:
    out = {
        "pid": run.pid or None,
        "netns": run.netns,
        "nf": run.nf,
        "backend": run.backend,
        "ports": run.ports,
        "workers": run.workers,
        "ctl": run.ctl,
        "uptime_s": None if run.uptime_s is None else round(run.uptime_s, 1),
        "counters": _summary(run.counters) if run.kind == "run" else run.counters,
    }
    if run.nf_counters is not None:
        out["nf_counters"] = run.nf_counters
    if run.lb_vips is not None:
        out["lb"] = run.lb_vips
    if run.counters is not None and isinstance(run.counters.get("dispatch"), dict):
        out["dispatch"] = run.counters["dispatch"]  # since the start, per worker or CPU
    if run.companions:
        out["companions"] = run.companions
    if run.note:
        out["note"] = run.note
    return out


# ---- the command ------------------------------------------------------------


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    return f"{s // 86400}d{s // 3600 % 24}h" if s >= 86400 else time.strftime(
        "%H:%M:%S", time.gmtime(s))  # fmt: skip


def _port_text(p: dict) -> str:
    text = p["iface"]
    if "prog_id" in p:
        text += f" (xdp {p['xdp_mode']} prog {p['prog_id']}: {', '.join(p['programs'])})"
    return text


def format_status(st: dict) -> str:
    lines = []
    for title, items in (("runs", st["runs"]), ("udpd", st["udpd"])):
        lines.append(f"{title}: {len(items) or 'none'}")
        for r in items:
            head = f"  {r['nf'] or r['backend'] or '?'}" if title == "runs" else "  udpd"
            if title == "runs" and r["backend"]:
                head += f" on {r['backend']}"
            lines.append(f"{head}  netns {r['netns']}  pid {r['pid'] or '?'}  "
                         f"up {_duration(r['uptime_s'])}")  # fmt: skip
            lines.append("    ports: " + ", ".join(_port_text(p) for p in r["ports"]))
            if r["workers"] is not None:
                lines.append(f"    workers: {r['workers']}")
            if r["ctl"]:
                lines.append(f"    {'ctl' if title == 'runs' else 'socket'}: {r['ctl']}")
            c = r["counters"]
            if c and title == "udpd":
                lines.append("    counters: " + "  ".join(f"{k} {v}" for k, v in c.items()
                                                         if k != "t"))  # fmt: skip
            elif c:
                verdicts = "  ".join(f"{v} {c[v]}" for v in ABI.VERDICTS if v in c)
                errors = c.get("errors") or {}
                errs = "  ".join(f"{k} {'-' if v is None else v}" for k, v in errors.items())
                lines.append(f"    counters at {c.get('t', 0):.0f}s: packets {c.get('packets')}  "
                             f"{verdicts}  pps {c.get('pps', 0):.0f}")  # fmt: skip
                if errs:
                    lines.append(f"    errors: {errs}")
            lines += _nf_lines(r)
            if r.get("note"):
                lines.append(f"    note: {r['note']}")
    if st.get("adoptable"):
        lines.append(f"adoptable: {len(st['adoptable'])}")
    for a in st.get("adoptable", []):
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(a["since"]))
        lines.append(f"  {a['nf']} on {a['iface']} in {a['netns']} ({a['xdp_mode']} prog "
                     f"{a['prog_id']}; ports {', '.join(a['ports'])}): running since {since}, "
                     f"its run (pid {a['pid']}) gone")  # fmt: skip
        lines.append(f"    the next `veloz run {a['nf']}` on {', '.join(a['ports'])} adopts it")
    lines.append(f"stale: {len(st['stale']) or 'none'}")
    for s in st["stale"]:
        lines.append(f"  {s['what']}")
        lines.append(f"    remove: {s['remove']}")
    return "\n".join(lines)


def _nf_lines(r: dict) -> list[str]:
    """The NF's own counters, lb's per VIP and backend, the dispatch stage's."""
    lines = []
    if r.get("nf_counters"):
        own = "  ".join(f"{k} {v}" for k, v in r["nf_counters"].items())
        lines.append(f"    {r['nf']}: {own}")
    for vip in r.get("lb") or []:
        per = ", ".join(f"{b['address']} {b['packets']}" + (" (down)" if b.get("down") else "")
                        for b in vip["backends"]) or "none"  # fmt: skip
        lines.append(f"    vip {vip['vip']}: {vip['packets']} frames; backends: {per}")
        if vip.get("up") == 0:
            from veloz.control.lb import all_down_text

            lines.append(
                f"    vip {vip['vip']}: no backend up: its traffic is {all_down_text(vip)}"
            )
        for b in vip["backends"]:
            if b.get("health"):
                lines.append(f"      {b['address']}: {b['health']}")
    sync = (r.get("companions") or {}).get("route-sync")
    if sync:
        lines.append(_sync_line(sync))
    d = r.get("dispatch")
    if d:
        active = len(d["active"]) if isinstance(d.get("active"), list) else d.get("active")
        if "cpu_packets" in d:
            per, where = d["cpu_packets"], "CPU"
        else:
            per, where = d.get("frames_per_worker", []), "worker"
        text = (f"    dispatch {d.get('policy')}: {active} of {d.get('workers')} active; "
                f"frames per {where}: {' '.join(str(n) for n in per)}")  # fmt: skip
        if "in_flight_per_worker" in d:
            text += "; in flight: " + " ".join(str(n) for n in d["in_flight_per_worker"])
        alloc = d.get("alloc")
        if isinstance(alloc, dict):
            text += f"; grows {alloc.get('grows')} shrinks {alloc.get('shrinks')}"
        lines.append(text)
    return lines


def _sync_line(s: dict) -> str:
    pending = s.get("pending_since")
    lag = f"behind by {max(0.0, time.time() - pending):.1f} s" if pending else "in step"
    text = (f"    route sync: kernel table {s.get('table')}, {s.get('routes')} prefixes, "
            f"{lag}; {s.get('transactions')} transactions, {s.get('errors')} errors")  # fmt: skip
    if s.get("last_error"):
        text += f" (last: {s['last_error']})"
    return text


def run(args: argparse.Namespace) -> int:
    st = collect()
    if args.json:
        print(json.dumps(st))
    else:
        print(format_status(st))
    return 0
