"""What makes the testbed's far ends behave: the XDP_PASS receivers that let
XDP_TX and redirected frames arrive, each namespace's sysctls, and the
offloads and XDP programs status reports."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import struct
import subprocess
from typing import Any

from veloz.testbed.plan import (
    FAR_ENDS,
    PLAN,
    RECEIVER_PROG,
    ROUTER,
    Endpoint,
    TestbedError,
    _ipr,
    _link,
    _step,
    endpoint,
)

# IFLA_XDP_ATTACHED as decoded by pyroute2 -> the names status() reports.
_XDP_MODES = {"xdp": "native", "xdpgeneric": "generic", "xdpoffload": "offload",
              "xdpmulti": "multi"}  # fmt: skip


# In "multi" mode the kernel reports one id per mode instead of IFLA_XDP_PROG_ID.
_XDP_MODE_IDS = (("native", "IFLA_XDP_DRV_PROG_ID"), ("generic", "IFLA_XDP_SKB_PROG_ID"),
                 ("offload", "IFLA_XDP_HW_PROG_ID"))  # fmt: skip


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
