"""Multipath routes in the router's control plane: `ip route`'s multipath forms
(several lines, `ip -o route`, `ip -o monitor route`), the refusals, `veloz
ctl route add`'s words, and the order of the ops: members, then the group,
then the route, and a changed group never seen half written."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from veloz.control import lb, route_file, router
from veloz.control.objects import Ports
from veloz.core.errors import VelozError

PORTS = Ports(["eth0", "eth1", "eth2"], [bytes([2, 0, 0, 0, 0, i]) for i in (1, 2, 3)])


def v4(text: str) -> tuple[int, bytes]:
    return 4, socket.inet_pton(socket.AF_INET, text)


def v6(text: str) -> tuple[int, bytes]:
    return 6, socket.inet_pton(socket.AF_INET6, text)


A, B = (v4("198.18.1.2"), 1), (v4("198.18.2.2"), 2)
MULTILINE = """198.18.64.0/18 proto static
\tnexthop via 198.18.1.2 dev eth1 weight 1
\tnexthop via 198.18.2.2 dev eth2 weight 1
"""
# as this machine's iproute2 (6.1) prints them with -o, and `ip -o monitor route`
ONE_LINE_V4 = (
    "198.18.64.0/18 proto static \\\tnexthop via 198.18.1.2 dev eth1 weight 1 "
    "\\\tnexthop via 198.18.2.2 dev eth2 weight 1 "
)
ONE_LINE_V6 = (
    "fd00:198:18:100::/56 metric 1024 pref medium\\\tnexthop via fd00:198:18:1::2 dev eth1 "
    "weight 1 \\\tnexthop via fd00:198:18:2::2 dev eth2 weight 1 "
)


def test_multiline_and_one_line_forms_agree(tmp_path: Path):
    path = tmp_path / "t.routes"
    path.write_text("# ip route\n" + MULTILINE + "198.18.70.0/24 via 198.18.1.2 dev eth1\n")
    routes = route_file.read_route_file(path, PORTS)
    expected = router.Route(router.parse_prefix("198.18.64.0/18"), router.FORWARD,
                            multipath=(A, B))  # fmt: skip
    assert routes[0] == expected
    assert routes[1] == router.Route(router.parse_prefix("198.18.70.0/24"), router.FORWARD, *A)
    assert router.parse_route_line(ONE_LINE_V4, PORTS) == expected
    assert router.parse_ip_route_words(ONE_LINE_V4.split(), PORTS) == expected
    # with no proto, the backslash follows the prefix
    bare = (
        "198.18.128.0/24 \\\tnexthop via 198.18.1.2 dev eth1 weight 1 "
        "\\\tnexthop via 198.18.2.2 dev eth2"
    )
    assert router.parse_route_line(bare, PORTS).multipath == (A, B)  # type: ignore[union-attr]
    six = router.parse_route_line(ONE_LINE_V6, PORTS)
    assert six is not None and six.multipath == (
        (v6("fd00:198:18:1::2"), 1),
        (v6("fd00:198:18:2::2"), 2),
    )


def test_weights_repeat_members_and_one_member_is_a_plain_route():
    line = (
        "198.18.64.0/18 nexthop via 198.18.1.2 dev eth1 weight 20 "
        "nexthop via 198.18.2.2 dev eth2 weight 10"
    )
    assert router.parse_route_line(line, PORTS).multipath == (A, A, B)  # type: ignore[union-attr]
    one = "198.18.64.0/18 nexthop via 198.18.1.2 dev eth1 weight 3"
    assert router.parse_route_line(one, PORTS) == router.Route(
        router.parse_prefix("198.18.64.0/18"), router.FORWARD, *A
    )
    # a member with no gateway: the kernel's route
    dev = "198.18.64.0/18 nexthop dev eth1 nexthop via 198.18.2.2 dev eth2"
    assert router.parse_route_line(dev, PORTS).kind == router.KERNEL  # type: ignore[union-attr]
    # what route_file.format_route prints reads back
    route = router.parse_route_line(line, PORTS)
    assert route is not None
    assert router.parse_route_line(route_file.format_route(route, PORTS), PORTS) == route


def test_a_next_hop_listed_twice_is_one_member_with_its_weights_added():
    twice = (
        "198.18.64.0/18 nexthop via 198.18.1.2 dev eth1 nexthop via 198.18.2.2 dev eth2 "
        "nexthop via 198.18.1.2 dev eth1 weight 2"
    )
    route = router.parse_route_line(twice, PORTS)
    assert route is not None and route.multipath == (A, A, A, B)
    assert router.parse_route_line(route_file.format_route(route, PORTS), PORTS) == route


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("\tnexthop via 198.18.1.2 dev eth1\n", "without a route above"),
        ("198.18.0.0/24 198.18.1.2\n\tnexthop via 198.18.2.2 dev eth1\n", "expected PREFIX"),
        ("198.18.0.0/24 nexthop via 198.18.1.2 weight 0 nexthop via 198.18.2.2\n", "weight"),
        ("198.18.0.0/24 nexthop via 198.18.1.2 weight x nexthop via 198.18.2.2\n", "weight"),
        ("198.18.0.0/24 nexthop via 198.18.1.2 nexthop via fd00::1\n", "other address family"),
        ("198.18.0.0/24 via 198.18.3.3 nexthop via 198.18.1.2 nexthop via 198.18.2.2\n",
         "both 'via' and 'nexthop'"),
        ("198.18.0.0/24 nexthop via 198.18.1.2 dev eth9 nexthop via 198.18.2.2\n", "eth9"),
        ("198.18.0.0/24 nexthop via 198.18.1.2 weight 64 nexthop via 198.18.2.2 weight 1\n",
         "weights add up to 65"),
        ("198.18.0.0/24 " + " ".join(f"nexthop via 198.18.1.{i}" for i in range(1, 18)) + "\n",
         "at most 16"),
        ("198.18.0.0/24 nexthop via\n", "'via' without a value"),
    ],
)  # fmt: skip
def test_bad_multipath_lines_give_one_line(tmp_path: Path, text: str, complaint: str):
    path = tmp_path / "bad.routes"
    path.write_text("# ok\n" + text)
    with pytest.raises(VelozError, match=complaint) as err:
        route_file.read_route_file(path, PORTS)
    message = str(err.value)
    assert "\n" not in message and "line 2" in message, message


def test_ctl_route_add_words():
    assert route_file.parse_via_words("198.18.1.2", ["port", "1", "via", "198.18.2.2"]) == [
        ("198.18.1.2", "1"),
        ("198.18.2.2", None),
    ]
    for words, complaint in ((["port"], "without a value"), (["port", "1", "port", "2"], "not"),
                             (["weight", "2"], "not 'weight'")):  # fmt: skip
        with pytest.raises(VelozError, match=complaint):
            route_file.parse_via_words("198.18.1.2", words)


def _prefix_route(prefix: str, *members) -> router.Route:
    return router.Route(router.parse_prefix(prefix), router.FORWARD, multipath=tuple(members))


def test_members_then_group_then_route():
    table = router.NexthopTable()
    ops = list(router.route_ops([_prefix_route("198.18.64.0/18", A, B)], table, PORTS))
    where = [(o.map, int.from_bytes(o.key, "little") if len(o.key) == 4 else None) for o in ops]
    (group_slot,) = table.groups
    first_group = where.index((router.GROUPS, group_slot))
    marker = where.index((router.NEXTHOPS, group_slot))
    route = where.index(("router_routes4", None))
    members = [where.index((router.NEXTHOPS, s)) for s in table.groups[group_slot].buckets]
    assert max(members) < first_group < marker < route
    assert router.ABI.ROUTE.unpack(ops[route].value).nexthop == group_slot
    assert router.Nexthop.unpack(ops[marker].value) is None  # a group, not a next hop
    # the refs written after the route: 1
    final = router.Group.unpack([o for o in ops if o.map == router.GROUPS][-1].value)
    assert final == router.Group(table.groups[group_slot].buckets, 1)


def test_a_changed_group_is_written_anew_and_the_old_freed_last():
    table = router.NexthopTable()
    prefix = "198.18.64.0/18"
    list(router.route_ops([_prefix_route(prefix, A, B)], table, PORTS))
    (old,) = table.groups
    old_buckets = table.groups[old].buckets
    c = (v4("198.18.2.3"), 2)
    fib = router._dir24().Table()
    ops = list(router.route_ops([_prefix_route(prefix, A, B, c)], table, PORTS, fib))
    ops += fib.ops()
    ops += table.free_ops()
    (new,) = table.groups
    assert new != old and table.groups[new].buckets != old_buckets
    # nothing rewrites the old group before every route entry leads elsewhere
    keyed = [(o.map, o.key) for o in ops]
    last_route = max(i for i, o in enumerate(ops) if o.map in ("router_routes4", "router_tbl24",
                                                               "router_tbl8"))  # fmt: skip
    old_key = old.to_bytes(4, "little")
    touched_old = [i for i, k in enumerate(keyed) if k in ((router.GROUPS, old_key),
                                                           (router.NEXTHOPS, old_key))]  # fmt: skip
    assert touched_old and min(touched_old) > last_route
    # the new group is whole before its marker, its marker before the route
    new_key = new.to_bytes(4, "little")
    assert keyed.index((router.GROUPS, new_key)) < keyed.index((router.NEXTHOPS, new_key))
    route_key = ("router_routes4", router.parse_prefix(prefix).key())
    assert keyed.index((router.NEXTHOPS, new_key)) < keyed.index(route_key)
    # freed: zeroed, marker first
    assert [keyed[i][0] for i in touched_old] == [router.NEXTHOPS, router.GROUPS]
    assert all(ops[i].value == bytes(len(ops[i].value)) for i in touched_old)


def test_groups_are_shared_and_freed_with_their_last_route():
    table = router.NexthopTable()
    routes = [_prefix_route("198.18.64.0/18", A, B), _prefix_route("198.18.128.0/18", A, B)]
    list(router.route_ops(routes, table, PORTS))
    (slot,) = table.groups
    assert table.groups[slot].refs == 2
    list(router.route_ops([router.Route(routes[0].prefix, router.FORWARD, *A)], table, PORTS))
    assert table.groups[slot].refs == 1 and not table.free_ops()
    table.forget(routes[1].prefix)
    assert slot not in table.groups
    # a freed slot is not taken again before it is zeroed
    assert table._free() != slot
    assert len(table.free_ops()) == 2 and table._free() == slot


def test_members_resolve_like_next_hops():
    table = router.NexthopTable()
    list(router.route_ops([_prefix_route("198.18.64.0/18", A, B)], table, PORTS))
    changed = table.resolve(4, A[0][1], b"\x02" * 6)
    assert changed == [table.index[(4, A[0][1], 1)]]


def test_group_limits_refused_in_route_ops():
    members = [(v4(f"198.18.1.{i}"), 1) for i in range(1, 18)]
    with pytest.raises(VelozError, match="at most 16"):
        list(router.route_ops([_prefix_route("198.18.0.0/24", *members)], router.NexthopTable(),
                              PORTS))  # fmt: skip


def test_ten_thousand_flows_spread_evenly_over_four_members():
    """nf/lb.c's flow hash modulo the group's buckets, as nf/router.c takes it:
    each of 4 equal members gets 25% +- 3% of 10,000 random flows."""
    rng = random.Random(1)
    counts = [0] * 4
    import ipaddress

    for _ in range(10_000):
        src = ipaddress.ip_address(rng.getrandbits(32))
        dst = ipaddress.ip_address((198 << 24) | (18 << 16) | rng.getrandbits(14))
        key = lb.flow_key(src, dst, rng.randrange(65536), rng.randrange(65536), rng.choice((6, 17)))
        counts[lb.flow_hash(key) % 4] += 1
    assert all(abs(c / 10_000 - 0.25) <= 0.03 for c in counts), counts
