"""The veloz testbed: three network namespaces joined by two veth pairs.

    vz-gen [gen-dut] <--veth--> [dut-gen] vz-dut [dut-sink] <--veth--> [sink-dut] vz-sink

vz-gen generates traffic, vz-dut runs the network function under test (and
forwards like a router when none is attached), vz-sink receives. MACs and
addresses are fixed so tests can predict every frame. Addresses come only
from 198.18.0.0/15 (RFC 2544 benchmarking) and fd00:198:18::/48, and no
namespace ever gets a default route: nothing can leave the testbed.

`PLAN` is the single source of truth; `up()` converges the machine to it,
whatever state it starts from, and `down()` removes it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import io
import ipaddress
import json
import os
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from veloz.core.errors import VelozError

# pyroute2 and rich are imported where they are used: every `veloz`
# command imports this module for the testbed's plan (endpoint()), and
# pyroute2 alone would add a tenth of a second to each.

NAMESPACES: tuple[str, ...] = ("vz-gen", "vz-dut", "vz-sink")

# The namespace that forwards between the other two.
ROUTER = "vz-dut"

# up() resets the MTU too: a test that raised it for jumbo frames must not
# leak that into the next one (and veth native XDP refuses large MTUs).
MTU = 1500

# The far ends, where frames an NF sends out of the DUT arrive.
FAR_ENDS = ("gen-dut", "sink-dut")
# What up() attaches there (see _ensure_receiver); `veloz run` replaces it.
RECEIVER_PROG = "vz_tb_rx"

NETNS_DIR = "/run/netns"
# Serialises up()/down() between processes (two pytest runs, CLI + tests):
# interleaved creation would otherwise fail with EEXIST half-way.
LOCK_PATH = "/run/lock/veloz-testbed.lock"

# How long up() waits for the kernel to report the links operationally up
# (linkwatch applies carrier changes asynchronously, up to ~1 s later).
UP_TIMEOUT_S = 5.0
# up() returns only after the veths have been silent this long (see _sysctls).
QUIET_S = 0.2
QUIET_TIMEOUT_S = 5.0


class TestbedError(Exception):
    """The testbed could not be built, inspected or removed; the message says why."""

    __test__ = False  # not a pytest test class, despite the name


@dataclass(frozen=True)
class Endpoint:
    """One veth end: where it lives, what it is called, and how it is addressed."""

    netns: str
    ifname: str
    mac: str
    ipv4: str  # address/24
    ipv6: str  # address/64, canonical (compressed) form
    peer: str  # ifname of the other end of the veth pair


PLAN: tuple[Endpoint, ...] = (
    Endpoint("vz-gen", "gen-dut", "02:00:c6:12:00:01", "198.18.0.1/24",
             "fd00:198:18::1/64", "dut-gen"),
    Endpoint("vz-dut", "dut-gen", "02:00:c6:12:00:02", "198.18.0.2/24",
             "fd00:198:18::2/64", "gen-dut"),
    Endpoint("vz-dut", "dut-sink", "02:00:c6:12:01:01", "198.18.1.1/24",
             "fd00:198:18:1::1/64", "sink-dut"),
    Endpoint("vz-sink", "sink-dut", "02:00:c6:12:01:02", "198.18.1.2/24",
             "fd00:198:18:1::2/64", "dut-sink"),
)  # fmt: skip


@dataclass(frozen=True)
class Route:
    netns: str
    dst: str
    gateway: str


# The end hosts reach the far subnet through the DUT; nothing else is routed.
ROUTES: tuple[Route, ...] = (
    Route("vz-gen", "198.18.1.0/24", "198.18.0.2"),
    Route("vz-gen", "fd00:198:18:1::/64", "fd00:198:18::2"),
    Route("vz-sink", "198.18.0.0/24", "198.18.1.1"),
    Route("vz-sink", "fd00:198:18::/64", "fd00:198:18:1::1"),
)

RTN_UNICAST = 1  # <linux/rtnetlink.h>: an ordinary route (not local, blackhole, ...)

# IFLA_XDP_ATTACHED as decoded by pyroute2 -> the names status() reports.
_XDP_MODES = {"xdp": "native", "xdpgeneric": "generic", "xdpoffload": "offload",
              "xdpmulti": "multi"}  # fmt: skip
# In "multi" mode the kernel reports one id per mode instead of IFLA_XDP_PROG_ID.
_XDP_MODE_IDS = (("native", "IFLA_XDP_DRV_PROG_ID"), ("generic", "IFLA_XDP_SKB_PROG_ID"),
                 ("offload", "IFLA_XDP_HW_PROG_ID"))  # fmt: skip


# ---------------------------------------------------------------- the plan


def endpoint(ifname: str) -> Endpoint:
    """The planned endpoint called `ifname`; TestbedError if there is none."""
    for ep in PLAN:
        if ep.ifname == ifname:
            return ep
    known = ", ".join(ep.ifname for ep in PLAN)
    raise TestbedError(f"no testbed interface {ifname!r} (known: {known})")


def _pairs() -> list[tuple[Endpoint, Endpoint]]:
    """Each veth pair once, as (end created first, peer)."""
    seen: set[str] = set()
    pairs = []
    for ep in PLAN:
        if ep.ifname not in seen:
            seen |= {ep.ifname, ep.peer}
            pairs.append((ep, endpoint(ep.peer)))
    return pairs


def _bare(cidr: str) -> str:
    return str(ipaddress.ip_interface(cidr).ip)


def _neighbours(ep: Endpoint) -> list[tuple[str, str]]:
    """(address, MAC) entries pinned on `ep`: its peer's addresses, so no ARP/ND is sent."""
    peer = endpoint(ep.peer)
    return [(_bare(peer.ipv4), peer.mac), (_bare(peer.ipv6), peer.mac)]


# ---------------------------------------------------------------- plumbing


def _require_root() -> None:
    if os.geteuid() != 0:
        raise TestbedError("the testbed needs root (network namespaces, veth)")


def _netns_live(name: str) -> bool:
    # A live namespace is a bind mount of an nsfs inode; a plain file left by
    # a crash between create and mount is not, and setns() on it fails.
    return os.path.ismount(os.path.join(NETNS_DIR, name))


@contextlib.contextmanager
def _step(what: str) -> Iterator[None]:
    """Turn low-level failures into one TestbedError that says what was being done."""
    from pyroute2.netlink.exceptions import NetlinkError

    try:
        yield
    except TestbedError:
        raise
    except NetlinkError as err:
        raise TestbedError(f"{what}: {os.strerror(err.code)} (netlink error {err.code})") from err
    except (OSError, subprocess.SubprocessError) as err:
        raise TestbedError(f"{what}: {err}") from err


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    os.makedirs(os.path.dirname(LOCK_PATH), exist_ok=True)
    with open(LOCK_PATH, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def _ipr(ns: str) -> Iterator[Any]:
    from pyroute2 import IPRoute

    # flags=0: never create the namespace as a side effect of opening it.
    with _step(f"{ns}: opening an rtnetlink socket"):
        ipr = IPRoute(netns=ns, flags=0)
    try:
        yield ipr
    finally:
        ipr.close()


def _run(argv: list[str], what: str) -> str:
    tool = shutil.which(argv[0])
    if tool is None:
        raise TestbedError(f"{what}: {argv[0]} is not installed")
    proc = subprocess.run([tool, *argv[1:]], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise TestbedError(f"{what}: {' '.join(argv)} failed: {'; '.join(detail)}")
    return proc.stdout


def _in_netns(ns: str, argv: list[str], what: str) -> str:
    return _run(["ip", "netns", "exec", ns, *argv], what)


def _link(ipr: Any, ifname: str) -> Any | None:
    found = ipr.link("get", ifname=ifname) if ipr.link_lookup(ifname=ifname) else ()
    return found[0] if found else None


# ---------------------------------------------------------------- up


def up() -> None:
    """Build the testbed, or repair it: converges to PLAN from any state.

    Returns once every link is up and the kernel has stopped talking on its
    own, so the next frame on a veth is one a test sent.
    """
    _require_root()
    with _lock():
        for ns in NAMESPACES:
            _ensure_netns(ns)
        for a, b in _pairs():
            _ensure_veth(a, b)
        for ns in NAMESPACES:
            # Before the links go up: a new link's first moments are when
            # IPv6 would send RS, DAD and MLD frames.
            _in_netns(ns, ["sysctl", "-q", "-w", *_sysctls(ns)], f"{ns}: setting sysctls")
        for ns in NAMESPACES:
            _configure_netns(ns)
        for ep in PLAN:
            # Without GRO (NAPI) on the receiving veth, frames an XDP program
            # sends into the pair (XDP_TX, redirect) are dropped at once. (On
            # 6.18 native XDP_TX into a GRO-only peer was still lost in our
            # runs; a peer running any XDP program, or generic mode, works.)
            # Without transmit checksum offload, a kernel socket's frames
            # carry complete checksums, as on a real wire: with it, veth
            # passes them on with the checksum left partial, which a
            # userspace backend then hands to its TAP (PASS) or to the UDP
            # stack as bad.
            _in_netns(ep.netns, ["ethtool", "-K", ep.ifname, "gro", "on", "tx", "off"],
                      f"{ep.netns}: GRO on, checksum offload off on {ep.ifname}")  # fmt: skip
        for ifname in FAR_ENDS:
            _ensure_receiver(endpoint(ifname))
        _wait_operational()
        _wait_quiet()


# ---------------------------------------------------------------- receivers

_BPF_PROG_LOAD = 5
_BPF_PROG_TYPE_XDP = 6
_XDP_FLAGS_UPDATE_IF_NOEXIST = 1
_XDP_FLAGS_DRV_MODE = 4
_SYS_BPF = {"x86_64": 321, "aarch64": 280}


def _load_xdp_pass(name: str) -> int:
    """`return XDP_PASS` loaded straight through bpf(2): no compiler, no build."""
    nr = _SYS_BPF.get(os.uname().machine)
    if nr is None:
        raise TestbedError(f"bpf(2) syscall number unknown on {os.uname().machine}")
    insns = bytes.fromhex("b7000000020000009500000000000000")  # r0 = XDP_PASS; exit
    insn_buf = ctypes.create_string_buffer(insns, len(insns))
    license_buf = ctypes.create_string_buffer(b"GPL")
    attr = bytearray(128)
    struct.pack_into("=IIQQ", attr, 0, _BPF_PROG_TYPE_XDP, len(insns) // 8,
                     ctypes.addressof(insn_buf), ctypes.addressof(license_buf))  # fmt: skip
    attr[48 : 48 + len(name)] = name.encode()  # prog_name
    attr_buf = ctypes.create_string_buffer(bytes(attr), len(attr))
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(nr, _BPF_PROG_LOAD, attr_buf, len(attr))
    if fd < 0:
        raise TestbedError(f"cannot load the receive program: {os.strerror(ctypes.get_errno())}")
    return int(fd)


def ensure_receivers() -> None:
    """The far ends' XDP_PASS programs back where a run or test removed them
    (a veloz run's own program is left alone): cheap, one netlink query each."""
    for ifname in FAR_ENDS:
        ep = endpoint(ifname)
        if os.path.exists(f"/run/netns/{ep.netns}"):
            _ensure_receiver(ep)


def _ensure_receiver(ep: Endpoint) -> None:
    """An XDP_PASS program on a far end, unless it already runs XDP.

    A veth delivers frames that XDP sends into it (XDP_TX, redirect) only if
    the receiving end's NAPI runs. GRO is enough for redirects, but on 6.18
    the XDP_TX flush (veth_xdp_flush) wakes the peer only when the peer has
    an XDP program: without one, XDP_TX frames fill its ring and are lost.
    A real NIC has no such condition, so the testbed gives each far end the
    smallest XDP program there is. Attached through netlink, it stays after
    we close the fd, and goes with the namespace.
    """
    with _ipr(ep.netns) as ipr:
        link = _link(ipr, ep.ifname)
        if link is None or _xdp(link) is not None:
            return  # someone's program (a veloz run, a test): leave it
        fd = _load_xdp_pass(RECEIVER_PROG)
        try:
            with _step(f"{ep.netns}: attaching the receive program to {ep.ifname}"):
                flags = _XDP_FLAGS_DRV_MODE | _XDP_FLAGS_UPDATE_IF_NOEXIST
                ipr.link(
                    "set",
                    index=link["index"],
                    xdp={"attrs": [("IFLA_XDP_FD", fd), ("IFLA_XDP_FLAGS", flags)]},
                )
        finally:
            os.close(fd)


def _sysctls(ns: str) -> list[str]:
    """key=value settings for `ns`: forwarding only in the DUT, and a silent IPv6.

    Left alone, IPv6 sends router solicitations forever (with backoff), DAD
    probes and MLD reports on every veth; a test counting frames would count
    those too. With neighbours static and no router advertising, none is needed.
    MLD reports cannot be switched off, so their repeats are squeezed into a
    few ms and up() waits them out (_wait_quiet).
    """
    forward = "1" if ns == ROUTER else "0"
    settings = [f"net.ipv4.ip_forward={forward}", f"net.ipv6.conf.all.forwarding={forward}"]
    quiet = {
        "accept_dad": 0,
        "dad_transmits": 0,
        "router_solicitations": 0,
        "accept_ra": 0,
        "mldv1_unsolicited_report_interval": 10,  # ms
        "mldv2_unsolicited_report_interval": 10,
    }
    # "default" for links created later, each link because they exist already.
    for conf in ("all", "default", *(ep.ifname for ep in PLAN if ep.netns == ns)):
        settings += [f"net.ipv6.conf.{conf}.{key}={value}" for key, value in quiet.items()]
    return settings


def _ensure_netns(ns: str) -> None:
    from pyroute2 import netns

    if _netns_live(ns):
        return
    with _step(f"creating network namespace {ns}"):
        if ns in netns.listnetns():
            netns.remove(ns)  # stale file, not a mount: clear it first
        netns.create(ns)


def _is_pair(ipr_a: Any, a: Endpoint, ipr_b: Any, b: Endpoint) -> bool:
    """Both ends exist, are veth, and point at each other."""
    la, lb = _link(ipr_a, a.ifname), _link(ipr_b, b.ifname)
    if la is None or lb is None:
        return False
    kinds = {la.get(("linkinfo", "kind")), lb.get(("linkinfo", "kind"))}
    # IFLA_LINK of a veth is its peer's ifindex in the peer's namespace.
    return kinds == {"veth"} and la.get("link") == lb["index"] and lb.get("link") == la["index"]


def _ensure_veth(a: Endpoint, b: Endpoint) -> None:
    with _ipr(a.netns) as ipr_a, _ipr(b.netns) as ipr_b:
        if _is_pair(ipr_a, a, ipr_b, b):
            return
        # Anything else under these names is in the way: a lone end, a
        # non-veth, or a veth whose peer is elsewhere.
        for ipr, ep in ((ipr_a, a), (ipr_b, b)):
            with _step(f"{ep.netns}: removing stale {ep.ifname}"):
                for index in ipr.link_lookup(ifname=ep.ifname):
                    ipr.link("del", index=index)
        with _step(f"creating veth {a.netns}/{a.ifname} <-> {b.netns}/{b.ifname}"):
            # Created directly in its namespace, so no host interface with
            # the same name can ever collide with it.
            ipr_a.link("add", ifname=a.ifname, kind="veth", address=a.mac, mtu=MTU,
                       peer={"ifname": b.ifname, "address": b.mac, "mtu": MTU,
                             "net_ns_fd": b.netns})  # fmt: skip


def _configure_netns(ns: str) -> None:
    with _ipr(ns) as ipr:
        with _step(f"{ns}: setting lo up"):
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        for ep in (ep for ep in PLAN if ep.netns == ns):
            _configure_endpoint(ipr, ep)
        _remove_default_routes(ipr, ns)
        for route in (r for r in ROUTES if r.netns == ns):
            with _step(f"{ns}: route {route.dst} via {route.gateway}"):
                ipr.route("replace", dst=route.dst, gateway=route.gateway)


def _configure_endpoint(ipr: Any, ep: Endpoint) -> None:
    from pyroute2.netlink.rtnl.ifaddrmsg import IFA_F_NODAD
    from pyroute2.netlink.rtnl.ndmsg import NUD_PERMANENT

    index = ipr.link_lookup(ifname=ep.ifname)[0]
    with _step(f"{ep.netns}: configuring {ep.ifname}"):
        # veth allows MAC and MTU changes while up; setting them
        # unconditionally is simpler than comparing first.
        ipr.link("set", index=index, address=ep.mac, mtu=MTU, state="up")
    have = {f"{a.get('address')}/{a['prefixlen']}" for a in ipr.addr("dump", index=index)}
    for cidr in (ep.ipv4, ep.ipv6):
        # Only if missing: even a no-op "replace" of an IPv6 address makes the
        # kernel send MLD reports, i.e. stray frames on an idle testbed.
        if cidr in have:
            continue
        iface = ipaddress.ip_interface(cidr)
        with _step(f"{ep.netns}: adding {cidr} to {ep.ifname}"):
            # NODAD: usable at once (IPv4 ignores the flag).
            ipr.addr("add", index=index, address=str(iface.ip),
                     prefixlen=iface.network.prefixlen, flags=IFA_F_NODAD)  # fmt: skip
    for addr, mac in _neighbours(ep):
        with _step(f"{ep.netns}: neighbour {addr} -> {mac} on {ep.ifname}"):
            ipr.neigh("replace", dst=addr, lladdr=mac, ifindex=index, state=NUD_PERMANENT)


def _remove_default_routes(ipr: Any, ns: str) -> None:
    # Nothing in the plan adds one, but a test or a stray RA could; a default
    # route is the one way testbed traffic could head for a real network.
    # Any table, gateway or not: policy routing could use any of them.
    for family in (socket.AF_INET, socket.AF_INET6):
        for route in ipr.route("dump", family=family):
            if route["dst_len"] != 0 or route["type"] != RTN_UNICAST:
                continue
            keys = {"table": route.get("table"), "priority": route.get("priority"),
                    "oif": route.get("oif"), "gateway": route.get("gateway")}  # fmt: skip
            with _step(f"{ns}: removing a default route"):
                ipr.route("del", family=family, dst_len=0,
                          **{k: v for k, v in keys.items() if v is not None})  # fmt: skip


def _wait_operational() -> None:
    """Return once status() says up: operstate follows carrier asynchronously."""
    deadline = time.monotonic() + UP_TIMEOUT_S
    while True:
        st = status()
        if st["up"]:
            return
        if time.monotonic() > deadline:
            raise TestbedError("testbed did not come up: " + "; ".join(st["problems"]))
        time.sleep(0.05)


def _wait_quiet() -> None:
    """Wait until no veth has sent a frame for QUIET_S (the last MLD reports).

    Gives up silently after QUIET_TIMEOUT_S: traffic a test is already sending
    is not up()'s business.
    """
    deadline = time.monotonic() + QUIET_TIMEOUT_S
    last, since = _tx_packets(), time.monotonic()
    while time.monotonic() - since < QUIET_S and time.monotonic() < deadline:
        time.sleep(QUIET_S / 4)
        now = _tx_packets()
        if now != last:
            last, since = now, time.monotonic()


def _tx_packets() -> int:
    total = 0
    for ns in NAMESPACES:
        with _ipr(ns) as ipr, _step(f"{ns}: reading link counters"):
            for ep in (ep for ep in PLAN if ep.netns == ns):
                (link,) = ipr.link("get", ifname=ep.ifname)
                total += link.get("IFLA_STATS64")["tx_packets"]
    return total


# ---------------------------------------------------------------- down


def down() -> None:
    """Remove the testbed's namespaces (and so its veths); fine if already gone."""
    _require_root()
    with _lock():
        for ns in NAMESPACES:
            _remove_netns(ns)


def _remove_netns(ns: str) -> None:
    from pyroute2 import netns
    from pyroute2.netlink.exceptions import NetlinkError

    if _netns_live(ns):
        # Delete the veths explicitly: a process still running inside the
        # namespace keeps it (and its links and XDP programs) alive after
        # the unmount, where nothing could find or clean it any more.
        with _ipr(ns) as ipr:
            for ep in (ep for ep in PLAN if ep.netns == ns):
                with _step(f"{ns}: deleting {ep.ifname}"), contextlib.suppress(NetlinkError):
                    for index in ipr.link_lookup(ifname=ep.ifname):
                        ipr.link("del", index=index)  # ENODEV if the peer went first
    if ns in netns.listnetns():
        with _step(f"removing network namespace {ns}"):
            netns.remove(ns)


# ---------------------------------------------------------------- status


def status() -> dict[str, Any]:
    """What exists now, and whether it matches the plan.

    {"up": bool, "namespaces": [...], "problems": [why not up, ...],
     "interfaces": [{netns, ifname, mac, state, mtu, ipv4, ipv6, gro, tx_csum, xdp}, ...]}
    Interfaces are the plan's (in plan order) followed by any others found in
    the testbed's namespaces; loopback is left out.
    """
    _require_root()
    present = [ns for ns in NAMESPACES if _netns_live(ns)]
    interfaces: list[dict[str, Any]] = []
    for ns in present:
        interfaces += _interfaces(ns)
    order = {(ep.netns, ep.ifname): i for i, ep in enumerate(PLAN)}
    interfaces.sort(key=lambda i: (order.get((i["netns"], i["ifname"]), len(order)),
                                   i["netns"], i["ifname"]))  # fmt: skip
    problems = _problems(present, interfaces)
    return {"up": not problems, "namespaces": present, "problems": problems,
            "interfaces": interfaces}  # fmt: skip


def _interfaces(ns: str) -> list[dict[str, Any]]:
    with _ipr(ns) as ipr, _step(f"{ns}: reading links and addresses"):
        links = [link for link in ipr.link("dump") if link.get("ifname") != "lo"]
        addrs: dict[int, list[str]] = {}
        for msg in ipr.addr("dump"):
            cidr = f"{msg.get('address')}/{msg['prefixlen']}"
            addrs.setdefault(msg["index"], []).append(cidr)
    offloads = _offloads(ns)
    return [_describe(ns, link, addrs.get(link["index"], []), offloads) for link in links]


def _describe(
    ns: str, link: Any, cidrs: list[str], offloads: dict[str, dict[str, bool]]
) -> dict[str, Any]:
    ifname = link.get("ifname")
    by_version: dict[int, list[str]] = {4: [], 6: []}
    for cidr in cidrs:
        by_version[ipaddress.ip_interface(cidr).version].append(cidr)
    return {
        "netns": ns,
        "ifname": ifname,
        "mac": link.get("address"),
        "state": link.get("IFLA_OPERSTATE"),
        "mtu": link.get("mtu"),
        "ipv4": by_version[4],
        "ipv6": by_version[6],
        "gro": offloads.get(ifname, {}).get("gro"),
        "tx_csum": offloads.get(ifname, {}).get("tx_csum"),
        "xdp": _xdp(link),
    }


def _offloads(ns: str) -> dict[str, dict[str, bool]]:
    """GRO and transmit checksum offload of the plan's interfaces in `ns`
    (ethtool; no rtnetlink attribute has them)."""
    result: dict[str, dict[str, bool]] = {}
    if shutil.which("ethtool") is None:
        return result
    for ep in (ep for ep in PLAN if ep.netns == ns):
        proc = subprocess.run(["ip", "netns", "exec", ns, "ethtool", "--json", "-k", ep.ifname],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if proc.returncode == 0:
            features = json.loads(proc.stdout)[0]
            result[ep.ifname] = {
                "gro": bool(features["generic-receive-offload"]["active"]),
                "tx_csum": bool(features["tx-checksumming"]["active"]),
            }
    return result


def _xdp(link: Any) -> dict[str, Any] | None:
    xdp = link.get("IFLA_XDP")
    mode = _XDP_MODES.get(xdp.get("IFLA_XDP_ATTACHED")) if xdp is not None else None
    if mode is None:
        return None
    info: dict[str, Any] = {"mode": mode}
    if mode == "multi":
        ids = {name: xdp.get(attr) for name, attr in _XDP_MODE_IDS if xdp.get(attr)}
        info["prog_ids"] = ids
        info["prog_id"] = next(iter(ids.values()), 0)
    else:
        info["prog_id"] = xdp.get("IFLA_XDP_PROG_ID") or 0
    name = _prog_name(info["prog_id"])
    if name is not None:
        info["prog_name"] = name
    return info


def _prog_name(prog_id: int) -> str | None:
    # BPF program ids are global, so bpftool needs no namespace.
    if not prog_id or shutil.which("bpftool") is None:
        return None
    proc = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog_id)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout).get("name")


def _problems(present: list[str], interfaces: list[dict[str, Any]]) -> list[str]:
    """Every way the current state falls short of the plan; empty means up."""
    problems = [f"namespace {ns} missing" for ns in NAMESPACES if ns not in present]
    found = {(i["netns"], i["ifname"]): i for i in interfaces}
    for ep in PLAN:
        iface = found.get((ep.netns, ep.ifname))
        if iface is None:
            if ep.netns in present:  # else the namespace's line already says it
                problems.append(f"{ep.netns}/{ep.ifname} missing")
            continue
        if iface["state"] != "UP":
            problems.append(f"{ep.ifname} is {iface['state']}, not UP")
        if iface["gro"] is False:
            problems.append(f"{ep.ifname} has GRO off (XDP_TX/redirect into it would be lost)")
        if iface["tx_csum"] is True:
            problems.append(f"{ep.ifname} has checksum offload on (partial checksums on the wire)")
        if iface["mac"] != ep.mac:
            problems.append(f"{ep.ifname} has MAC {iface['mac']}, not {ep.mac}")
        for want, have in ((ep.ipv4, iface["ipv4"]), (ep.ipv6, iface["ipv6"])):
            if want not in have:
                problems.append(f"{ep.ifname} lacks {want}")
    return problems


# ---------------------------------------------------------------- reachability


def ping(ns: str, address: str, timeout: float = 2.0) -> bool:
    """Send one ICMP/ICMPv6 echo from namespace `ns`; True if the reply came back.

    A raw socket opened inside the namespace, because this host has no ping
    binary (and ping_group_range forbids unprivileged ICMP sockets).
    """
    from pyroute2 import netns

    _require_root()
    v6 = ipaddress.ip_address(address).version == 6
    family, proto = (
        (socket.AF_INET6, socket.IPPROTO_ICMPV6) if v6 else (socket.AF_INET, socket.IPPROTO_ICMP)
    )
    request, reply = (128, 129) if v6 else (8, 0)
    ident = os.getpid() & 0xFFFF
    with _step(f"{ns}: opening an ICMP socket"):
        sock = netns.create_socket(ns, family, socket.SOCK_RAW, proto, flags=0)
    with sock:
        echo = _icmp_echo(request, ident)
        sock.sendto(echo, (address, 0))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                data, peer = sock.recvfrom(2048)
            except TimeoutError:
                return False
            if not v6:
                data = data[(data[0] & 0x0F) * 4 :]  # IPv4 raw sockets include the IP header
            if peer[0] == address and data[:1] == bytes([reply]) and data[4:6] == echo[4:6]:
                return True
    return False


def _icmp_echo(icmp_type: int, ident: int) -> bytes:
    """An echo request with sequence 1 and the ICMPv4 checksum; for ICMPv6 the
    kernel overwrites the checksum (it covers the pseudo-header)."""
    body = ident.to_bytes(2, "big") + (1).to_bytes(2, "big") + b"veloz-testbed"
    data = bytes([icmp_type, 0, 0, 0]) + body
    data += b"\0" * (len(data) % 2)
    total = sum(int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    checksum = ~total & 0xFFFF
    return bytes([icmp_type, 0]) + checksum.to_bytes(2, "big") + body


# ---------------------------------------------------------------- output


def format_status(st: dict[str, Any]) -> str:
    """A plain-text table of status(); no colours or TTY needed."""
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("netns", "ifname", "mac", "state", "mtu", "ipv4", "ipv6", "gro", "xdp"):
        table.add_column(column, no_wrap=column != "ipv6")
    for i in st["interfaces"]:
        table.add_row(
            i["netns"], i["ifname"], i["mac"] or "-", i["state"] or "-", str(i["mtu"]),
            "\n".join(i["ipv4"]) or "-", "\n".join(i["ipv6"]) or "-",
            {True: "on", False: "off"}.get(i.get("gro"), "?"), _format_xdp(i["xdp"]),
        )  # fmt: skip
    out = io.StringIO()
    console = Console(file=out, width=160, color_system=None, force_terminal=False)
    headline = "testbed: up" if st["up"] else "testbed: DOWN"
    console.print(headline, markup=False, highlight=False)
    for problem in st.get("problems", []):
        console.print(f"  - {problem}", markup=False, highlight=False)
    if st["interfaces"]:
        console.print(table)
    # rich pads every cell; trailing blanks only get in the way of diffs and tests.
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def _format_xdp(xdp: dict[str, Any] | None) -> str:
    if xdp is None:
        return "-"
    name = xdp.get("prog_name")
    return f"{xdp['mode']} id {xdp['prog_id']}" + (f" ({name})" if name else "")


def run(args: argparse.Namespace) -> int:
    """`veloz testbed up|down|status` (its parser: veloz/cli/testbed.py)."""
    try:
        if args.action == "up":
            up()
        elif args.action == "down":
            down()
            if not args.json:
                print("testbed removed")
            return 0
        st = status()
    except TestbedError as e:
        raise VelozError(str(e), code=1) from None
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        print(format_status(st))
    return 0
