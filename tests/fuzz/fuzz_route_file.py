"""Fuzz the router's route-file parser (python/veloz/control/router.py).

Each input is a whole route file, read from disk as `veloz run` and
`veloz ctl route load` read one: `PREFIX NEXTHOP [PORT]` lines, `ip route`
and `ip -6 route` output, comments, seeded from real lines of each. The
parser either refuses it with a VelozError or returns routes that hold
together: prefixes of their family with the host bits clear, a next hop
exactly when the route forwards, of the prefix's family once the ops are
made, a port of the run; a line that names a gateway with `via` never
quietly loses it; and each route printed back as a route-file line parses
to itself.

    python tests/fuzz/fuzz_route_file.py [--seconds S] [--seeds DIR] [LIBFUZZER-ARGS] [CORPUS]
"""

from __future__ import annotations

import io
from pathlib import Path

import atheris
import pyfuzz

with atheris.instrument_imports(include=["veloz", "ipaddress"]):
    from veloz.control import route_file, router
    from veloz.control.objects import Ports
    from veloz.core.errors import VelozError
    from veloz.lab import route_table

PORTS = Ports(["eth0", "eth1", "dut-gen"], [bytes([2, 0, 0, 0, 0, i]) for i in (1, 2, 3)])

SEEDS = [
    # `ip route` and `ip -6 route`, as printed
    """default via 192.0.2.1 dev eth0
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
198.18.64.0/18 via 198.18.1.2 dev eth1 proto static metric 100
10.0.0.0/8 via 192.0.2.254 dev eth0 proto bgp metric 20 onlink
blackhole 203.0.113.0/24 proto static
unreachable 198.51.100.0/24 proto static metric 1024
prohibit 198.51.100.128/25
throw 100.64.0.0/10
""",
    """fd00::/64 dev eth0 proto kernel metric 256 pref medium
fe80::/64 dev eth0 proto kernel metric 256 pref medium
default via fd00::1 dev eth0 metric 1024 pref medium
fd00:198:18:5::/64 via fd00:198:18:1::2 dev eth1 proto static metric 1024 pref medium
unreachable 2001:db8::/32 dev lo proto static metric 1024 pref medium
""",
    # multipath, as `ip route` and `ip -o route` print it
    """198.18.64.0/18 proto static
\tnexthop via 198.18.1.2 dev eth1 weight 1
\tnexthop via 198.18.2.2 dev dut-gen weight 3
fd00:198:18:100::/56 metric 1024 pref medium\\\tnexthop via fd00:198:18:1::2 dev eth1 weight 1 \\\tnexthop via fd00:198:18:2::2 dev eth0 weight 1
""",  # noqa: E501
    # `ip route show table local`
    """local 198.18.1.1 dev eth1 table local proto kernel scope host src 198.18.1.1
broadcast 198.18.1.255 dev eth1 table local proto kernel scope link src 198.18.1.1
local ::1 dev lo table local proto kernel metric 0 pref medium
multicast ff00::/8 dev eth0 table local proto kernel metric 256 pref medium
""",
    # PREFIX NEXTHOP [PORT], the kinds, comments
    """# the table the router bench loads
198.18.0.0/24 198.18.1.2 1
198.18.4.0/22 198.18.1.2 eth1
198.18.8.0/22 198.18.1.3
198.18.9.9 local
198.18.10.0/24 blackhole   # a null route
198.18.11.0/24 kernel
fd00:198:18:2::/64 fd00:198:18:1::2 dut-gen

  \t
0.0.0.0/0 198.18.1.254 0
::/0 fd00::1 2
""",
]


# words the mutator splices in whole
TOKENS = [
    *router.IP_ROUTE_TYPES, "via", "dev", "default", "proto", "scope", "metric", "table",
    "src", "onlink", "linkdown", "kernel", "nexthop", "weight", "\\", "inet6", "pref", "medium",
    "#", "/", "::",
    "::/0", "0.0.0.0/0", "/32", "/128", "eth0", "eth1", "dut-gen", "fe80::1", "198.18.1.2",
    "\t", "\r", "\x00", "\u00b2", "\u0663", "\u2028", "-1", "64",
]  # fmt: skip


def _synthetic_table() -> str:
    out = io.StringIO()
    route_table.write(route_table.generate(240, 1)[-40:], "198.18.1.2", 1, out)
    return out.getvalue()


def check(route: router.Route, line: str) -> None:
    """A returned route holds together (see the module docstring)."""
    prefix = route.prefix
    bits = {4: 32, 6: 128}[prefix.family]
    assert len(prefix.addr) == bits // 8, (route, line)
    assert 0 <= prefix.length <= bits, (route, line)
    assert int.from_bytes(prefix.addr, "big") & ((1 << (bits - prefix.length)) - 1) == 0, route
    assert route.kind in router.KIND_NAMES, (route, line)
    assert (route.via is not None or bool(route.multipath)) == (route.kind == router.FORWARD), (
        route,
        line,
    )
    assert 0 <= route.port < len(PORTS.names), (route, line)
    assert not (route.multipath and route.via is not None), (route, line)
    for (family, addr), port in [
        *route.multipath,
        *([(route.via, route.port)] if route.via else []),
    ]:
        assert len(addr) == {4: 4, 6: 16}[family], (route, line)
        assert 0 <= port < len(PORTS.names), (route, line)
    words = route_words(line)
    if (
        "via" in words[1:]
        and words[0] not in router.IP_ROUTE_TYPES.keys() - {"unicast"}
        and not _member_without_gateway(words)
    ):
        # an ip-route line with a gateway forwards through it, or is refused
        # (a multipath route with a member on a link alone is the kernel's)
        assert route.kind == router.FORWARD, (route, line)
    # printed back as PREFIX NEXTHOP PORT, PREFIX KIND or `ip -o route`'s
    # multipath line, it parses to itself
    text = route_file.format_route(route, PORTS)
    assert router.parse_route_line(text, PORTS) == route, (route, line, text)


def route_words(line: str) -> list[str]:
    """The line's words as the parser reads them: no comment, and the
    backslashes that separate `ip -o route`'s multipath members are blanks."""
    return line.split("#", 1)[0].replace("\\", " ").split()


def _member_without_gateway(words: list[str]) -> bool:
    starts = [i for i, w in enumerate(words) if w == "nexthop"] + [len(words)]
    return any("via" not in words[a:b] for a, b in zip(starts, starts[1:], strict=False))


def joined_lines(text: str) -> list[str]:
    """The file's routes, a multipath route's member lines joined onto its first."""
    lines: list[str] = []
    for ln in text.splitlines():
        words = route_words(ln)
        if words and words[0] == "nexthop" and ln[:1].isspace() and lines:
            lines[-1] = lines[-1].split("#", 1)[0] + " " + ln
        elif words:
            lines.append(ln)
    return lines


def familyless_default(line: str) -> bool:
    words = route_words(line)
    if words and words[0] in router.IP_ROUTE_TYPES:
        words = words[1:]
    # a multipath member on a link alone makes the route the kernel's: no gateway either
    return (
        bool(words)
        and words[0] == "default"
        and ("via" not in words or _member_without_gateway(words))
    )


def make_target(path: Path) -> pyfuzz.Target:
    def target(data: bytes) -> str:
        path.write_bytes(data)
        try:
            routes = router.read_route_file(path, PORTS)
            lines = joined_lines(data.decode())
            # a `default` with no gateway has no family: it is left to the
            # kernel (what a miss gets), and makes no route
            lines = [ln for ln in lines if not familyless_default(ln)]
            assert len(lines) == len(routes), (lines, routes)
            for route, line in zip(routes, lines, strict=True):
                check(route, line)
            ops = list(router.route_ops(routes, router.NexthopTable(), PORTS))
        except VelozError:
            return "refused"
        for route in routes:
            # route_ops refuses a next hop of the other family
            assert route.via is None or route.via[0] == route.prefix.family, route
        assert len(ops) >= len(routes)
        return "accepted"

    return target


def main() -> None:
    seeds = [s.encode() for s in [*SEEDS, _synthetic_table()]]
    tmp = pyfuzz.workdir("fuzz-route-file-")
    target = make_target(tmp / "t.routes")
    pyfuzz.run("fuzz-route-file", target, seeds, "files", TOKENS, workdir=tmp)


if __name__ == "__main__":
    main()
