"""The testbed's status: what exists against the plan, and its text form."""

from __future__ import annotations

import io
import ipaddress
from typing import Any

from veloz.testbed.plan import NAMESPACES, PLAN, _ipr, _netns_live, _require_root, _step
from veloz.testbed.receivers import _offloads, _xdp


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
