"""The testbed's plan (namespaces, veth pairs, addresses, routes) and the
plumbing every step uses: root, the lock, netlink and commands in a namespace."""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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
