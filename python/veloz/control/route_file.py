"""Routes as text: prefixes, route files and `ip route` lines (nf/router.c's routes).

A route file holds one route per line, either `PREFIX NEXTHOP [PORT]` or the
output of `ip route` / `ip -6 route` (`via`, `dev`, and the types local,
blackhole, unreachable, prohibit, throw; routes without `via` are left to
the kernel, which resolves connected hosts itself). `#` starts a comment.

A multipath route is read as `ip route` prints it, its members on the lines
after the prefix's:

    198.18.64.0/18 proto static
    \tnexthop via 198.18.1.2 dev eth1 weight 1
    \tnexthop via 198.18.2.2 dev eth2 weight 1

or on one line as `ip -o route` and `ip -o monitor route` print it, the line
breaks turned into backslashes. A member's weight is how many of the group's
buckets it takes (weights are divided by their greatest common divisor
first); a member without `via` leaves the route to the kernel.
"""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass
from pathlib import Path

from veloz.control import abi
from veloz.control.objects import Ports
from veloz.control.ops import parse_address
from veloz.core.errors import VelozError

_KIND_WORDS = {"forward": "via", "local": "local", "kernel": "kernel", "blackhole": "blackhole"}
_IP_ROUTE_TYPES = {
    "unicast": "forward",
    "local": "local",
    "blackhole": "blackhole",
    "unreachable": "kernel",
    "prohibit": "kernel",
    "throw": "kernel",
    "broadcast": "kernel",
    "multicast": "kernel",
    "anycast": "kernel",
}
# words that mark a line as `ip route` output when they follow the prefix
_IP_ROUTE_WORDS = ("via", "dev", "proto", "scope", "metric", "nexthop")


def _kinds(a: abi.View) -> dict[str, int]:
    return a.named("vz_route_kind", "VZ_ROUTE_")


class _Abi(abi.View):
    """Route kinds and group limits, from router.bpf.o's BTF and abi.h."""

    nf = "router"
    FORWARD = abi.Lazy(lambda a: _kinds(a)["forward"])
    LOCAL = abi.Lazy(lambda a: _kinds(a)["local"])
    KERNEL = abi.Lazy(lambda a: _kinds(a)["kernel"])
    BLACKHOLE = abi.Lazy(lambda a: _kinds(a)["blackhole"])
    # kind -> how `veloz ctl route list` and route files name it
    KIND_NAMES = abi.Lazy(lambda a: {v: _KIND_WORDS[k] for k, v in _kinds(a).items()})
    # `ip route` types -> kind
    IP_ROUTE_TYPES = abi.Lazy(lambda a: {t: _kinds(a)[k] for t, k in _IP_ROUTE_TYPES.items()})
    GROUP_MEMBERS = abi.Lazy(lambda a: abi.define("VZ_ROUTER_GROUP_MEMBERS"))
    GROUP_BUCKETS = abi.Lazy(lambda a: abi.define("VZ_ROUTER_GROUP_BUCKETS"))


ABI = _Abi()


@dataclass(frozen=True)
class Prefix:
    family: int  # 4 or 6
    addr: bytes  # network order, host bits zero
    length: int

    def key(self) -> bytes:
        """struct vz_lpm4_key / vz_lpm6_key."""
        return self.length.to_bytes(4, "little") + self.addr

    def __str__(self) -> str:
        fam = socket.AF_INET if self.family == 4 else socket.AF_INET6
        return f"{socket.inet_ntop(fam, self.addr)}/{self.length}"


def parse_prefix(text: str) -> Prefix:
    """A prefix (a bare address is a host route); host bits set is an error.

    Hand-rolled rather than ipaddress.ip_network: a full table is 750k lines.
    """
    addr_text, slash, len_text = text.partition("/")
    family = 6 if ":" in addr_text else 4
    try:
        addr = socket.inet_pton(socket.AF_INET6 if family == 6 else socket.AF_INET, addr_text)
    except (OSError, ValueError):  # ValueError: a NUL in the text
        raise VelozError(f"bad prefix '{text}': '{addr_text}' is not an address") from None
    bits = 32 if family == 4 else 128
    if not slash:
        length = bits
    elif len_text.isascii() and len_text.isdigit() and int(len_text) <= bits:
        length = int(len_text)
    else:
        raise VelozError(f"bad prefix '{text}': the length must be 0 to {bits}")
    value = int.from_bytes(addr, "big")
    if value & ((1 << (bits - length)) - 1):
        raise VelozError(f"bad prefix '{text}': host bits are set (did you mean a /{bits}?)")
    return Prefix(family, addr, length)


def parse_gateway(text: str) -> tuple[int, bytes]:
    addr = parse_address(text, "next hop")
    return addr.version, addr.packed


Gateway = tuple[int, bytes]  # (family, address)
Member = tuple[Gateway, int]  # (gateway, port)


@dataclass(frozen=True)
class Route:
    prefix: Prefix
    kind: int
    via: Gateway | None = None
    port: int = 0
    # a multipath route's members, a member k times for weight k; via is None
    # and port 0 then
    multipath: tuple[Member, ...] = ()


def format_gateway(family: int, addr: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if family == 4 else socket.AF_INET6, addr)


def check_multipath(route: Route) -> None:
    """A group the NF can hold: members of the prefix's family, within the limits."""
    members = route.multipath
    if not members:
        return
    if route.via is not None or route.port:
        raise VelozError(f"route {route.prefix}: a multipath route has no via or port of its own")
    if any(gw[0] != route.prefix.family for gw, _ in members):
        raise VelozError(f"route {route.prefix}: next hop of the other address family")
    if len(set(members)) > ABI.GROUP_MEMBERS:
        raise VelozError(
            f"route {route.prefix}: {len(set(members))} next hops; "
            f"a multipath route takes at most {ABI.GROUP_MEMBERS}"
        )
    if len(members) > ABI.GROUP_BUCKETS:
        raise VelozError(
            f"route {route.prefix}: weights add up to {len(members)}; "
            f"at most {ABI.GROUP_BUCKETS} (after dividing by their common divisor)"
        )


def _option(words: list[str], key: str) -> str | None:
    """The word after key: found by position, not by pairing words, as `ip route`
    also prints flags without a value (onlink, linkdown, ...)."""
    if key not in words:
        return None
    i = words.index(key)
    if i + 1 == len(words):
        raise VelozError(f"'{key}' without a value")
    if key == "via" and words[i + 1] in ("inet", "inet6"):  # `via inet6 ADDR` (RFC 5549)
        return _option(words[i + 1 :], words[i + 1])
    return words[i + 1]


def _members(words: list[str], ports: Ports) -> list[tuple[Member | None, int]] | None:
    """The `nexthop ...` parts of a line, as (member or None without via, weight)."""
    if "nexthop" not in words:
        return None
    first = words.index("nexthop")
    starts = [i for i, w in enumerate(words) if w == "nexthop"] + [len(words)]
    out: list[tuple[Member | None, int]] = []
    for a, b in zip(starts, starts[1:], strict=False):
        part = words[a + 1 : b]
        via_text, dev, weight = _option(part, "via"), _option(part, "dev"), _option(part, "weight")
        if weight is not None and not (weight.isascii() and weight.isdigit() and
                                       1 <= int(weight) <= 256):  # fmt: skip
            raise VelozError(f"nexthop weight '{weight}': must be 1 to 256")
        port = ports.number(dev) if dev is not None else 0
        member = (parse_gateway(via_text), port) if via_text is not None else None
        out.append((member, int(weight) if weight is not None else 1))
    del words[first:]
    return out


def _expand(members: list[tuple[Member | None, int]]) -> tuple[Member, ...] | None:
    """Members repeated by weight; None when one has no gateway (the kernel's).
    A next hop listed twice is one member with the weights added, in the place
    it first appears, so that a route reads the same however it is written."""
    weights: dict[Member, int] = {}
    for m, w in members:
        if m is None:
            return None
        weights[m] = weights.get(m, 0) + w
    divisor = math.gcd(*weights.values())
    return tuple(m for m, w in weights.items() for _ in range(w // divisor))


def parse_ip_route_words(words: list[str], ports: Ports) -> Route | None:
    """A route from the words of one `ip route` line, a multipath route's members
    joined onto it (`ip -o route`); None for a route with no family to tell."""
    words = " ".join(words).replace("\\", " ").split()
    if not words:
        return None
    kind = ABI.FORWARD
    if words[0] in ABI.IP_ROUTE_TYPES:
        kind = ABI.IP_ROUTE_TYPES[words.pop(0)]
    if not words:
        raise VelozError("a route type without a prefix")
    dest = words.pop(0)
    members = _members(words, ports)
    multipath = _expand(members) if members else None
    via_text, dev = _option(words, "via"), _option(words, "dev")
    via = parse_gateway(via_text) if via_text is not None else None
    if members is not None and via is not None:
        raise VelozError("a route with both 'via' and 'nexthop'")
    if multipath and len(set(multipath)) == 1:  # one next hop: a plain route
        via, port_of_one, multipath = multipath[0][0], multipath[0][1], ()
    else:
        port_of_one = None
    gateway = via or (multipath[0][0] if multipath else None)
    if dest == "default":
        if gateway is None:
            # `ip -6 route` prints `default dev wg0` and `unreachable default`
            # with no address to tell the family by. Left to the kernel, such
            # a route is what a miss already gets (PASS); taken as IPv4 it
            # would replace the IPv4 default of the same file.
            if kind in (ABI.FORWARD, ABI.KERNEL):
                return None
            raise VelozError("'default' without 'via' names no address family: "
                             "write 0.0.0.0/0 or ::/0")  # fmt: skip
        dest = "::/0" if gateway[0] == 6 else "0.0.0.0/0"
    prefix = parse_prefix(dest)
    if kind == ABI.FORWARD and gateway is None:
        kind = ABI.KERNEL  # connected: the kernel resolves each host
    if kind != ABI.FORWARD:
        return Route(prefix, kind)
    if multipath:
        return Route(prefix, kind, multipath=multipath)
    if port_of_one is not None:
        return Route(prefix, kind, via, port_of_one)
    return Route(prefix, kind, via, ports.number(dev) if dev is not None else 0)


def parse_route_line(line: str, ports: Ports) -> Route | None:
    """One line of a route file; None for blank lines and comments."""
    words = line.split("#", 1)[0].replace("\\", " ").split()
    if not words:
        return None
    if (
        words[0] in ABI.IP_ROUTE_TYPES
        or words[0] == "default"
        or any(w in _IP_ROUTE_WORDS for w in words[1:2])
    ):
        return parse_ip_route_words(words, ports)
    if len(words) not in (2, 3):
        raise VelozError("expected PREFIX NEXTHOP [PORT] or a line of `ip route`")
    prefix = parse_prefix(words[0])
    if words[1] in ("local", "blackhole", "kernel"):
        if len(words) == 3:  # neither a next hop nor a port: not to be dropped quietly
            raise VelozError(f"PREFIX {words[1]} takes nothing after it, not '{words[2]}'")
        kind = {"local": ABI.LOCAL, "blackhole": ABI.BLACKHOLE, "kernel": ABI.KERNEL}[words[1]]
        return Route(prefix, kind)
    via = parse_gateway(words[1])
    port = ports.number(words[2]) if len(words) == 3 else 0
    return Route(prefix, ABI.FORWARD, via, port)


def _is_continuation(line: str) -> bool:
    """A multipath member's line, as `ip route` prints it under its prefix."""
    words = line.split("#", 1)[0].split()
    return bool(words) and words[0] == "nexthop" and line[:1].isspace()


def read_route_file(path: Path, ports: Ports) -> list[Route]:
    from veloz.core import safeio

    text = safeio.read_text(path, "route file")  # bounded: not /dev/zero whole
    # (first line number, the line with its members' lines joined on)
    lines: list[tuple[int, str]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if _is_continuation(line):
            if not lines or not lines[-1][1].split("#", 1)[0].strip():
                raise VelozError(f"{path} line {lineno}: a nexthop line without a route above it")
            lines[-1] = (lines[-1][0], lines[-1][1].split("#", 1)[0] + " " + line)
        else:
            lines.append((lineno, line))
    routes = []
    for lineno, line in lines:
        try:
            route = parse_route_line(line, ports)
            if route is not None:
                check_multipath(route)
        except VelozError as e:
            raise VelozError(f"{path} line {lineno}: {e}") from None
        if route is not None:
            routes.append(route)
    return routes


def format_route(route: Route, ports: Ports | None = None) -> str:
    """A route as a line parse_route_line() reads back (multipath: `ip -o route`'s form)."""

    def dev(port: int) -> str:
        return ports.names[port] if ports and port < len(ports.names) else str(port)

    if route.multipath:
        weights: dict[Member, int] = {}
        for m in route.multipath:
            weights[m] = weights.get(m, 0) + 1
        hops = " ".join(f"nexthop via {format_gateway(*gw)} dev {dev(port)} weight {w}"
                        for (gw, port), w in weights.items())  # fmt: skip
        return f"{route.prefix} {hops}"
    if route.via is not None:
        return f"{route.prefix} {format_gateway(*route.via)} {route.port}"
    return f"{route.prefix} {ABI.KIND_NAMES[route.kind]}"


def parse_via_words(via: str, more: list[str]) -> list[tuple[str, str | None]]:
    """`via A [port P] [via B [port Q]]...` of `veloz ctl route add`, the first
    `via` already taken: (address, port or None) per next hop, unchecked."""
    hops: list[tuple[str, str | None]] = [(via, None)]
    words = list(more)
    while words:
        word = words.pop(0)
        if not words:
            raise VelozError(f"'{word}' without a value")
        if word == "via":
            hops.append((words.pop(0), None))
        elif word in ("port", "dev") and hops[-1][1] is None:
            hops[-1] = (hops[-1][0], words.pop(0))
        else:
            raise VelozError(f"route add: expected `via ADDRESS [port P]`, not '{word}'")
    return hops
