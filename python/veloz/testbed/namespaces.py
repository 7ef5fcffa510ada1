"""Bringing the testbed up (namespaces, veth pairs, addresses, routes,
neighbours, waiting until it is operational and quiet) and down."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import time
from typing import Any

from veloz.testbed.plan import (
    FAR_ENDS,
    MTU,
    NAMESPACES,
    PLAN,
    ROUTES,
    Endpoint,
    TestbedError,
    _in_netns,
    _ipr,
    _link,
    _lock,
    _neighbours,
    _netns_live,
    _pairs,
    _require_root,
    _step,
    endpoint,
)
from veloz.testbed.receivers import _ensure_receiver, _sysctls
from veloz.testbed.show import status

# How long up() waits for the kernel to report the links operationally up
# (linkwatch applies carrier changes asynchronously, up to ~1 s later).
UP_TIMEOUT_S = 5.0


# up() returns only after the veths have been silent this long (see _sysctls).
QUIET_S = 0.2


QUIET_TIMEOUT_S = 5.0


RTN_UNICAST = 1  # <linux/rtnetlink.h>: an ordinary route (not local, blackhole, ...)


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
