"""The router's control plane without a kernel: route files in both formats,
next-hop slots, the bytes of keys and values, and every refusal."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest

from veloz.control import router
from veloz.control.objects import Ports
from veloz.core.errors import VelozError

PORTS = Ports(["eth0", "eth1"], [bytes.fromhex("020000000001"), bytes.fromhex("020000000002")])


def v4(text: str) -> tuple[int, bytes]:
    return 4, socket.inet_pton(socket.AF_INET, text)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("198.18.0.0/24 198.18.1.2 1", router.Route(router.parse_prefix("198.18.0.0/24"),
                                                    router.FORWARD, v4("198.18.1.2"), 1)),
        ("198.18.0.0/24 198.18.1.2 eth1", router.Route(router.parse_prefix("198.18.0.0/24"),
                                                       router.FORWARD, v4("198.18.1.2"), 1)),
        ("198.18.0.0/24 198.18.1.2", router.Route(router.parse_prefix("198.18.0.0/24"),
                                                  router.FORWARD, v4("198.18.1.2"), 0)),
        ("198.18.0.5 blackhole", router.Route(router.parse_prefix("198.18.0.5/32"),
                                              router.BLACKHOLE)),
        ("default via 198.18.1.254 dev eth1 proto static",
         router.Route(router.parse_prefix("0.0.0.0/0"), router.FORWARD, v4("198.18.1.254"), 1)),
        ("198.18.1.0/24 dev eth1 proto kernel scope link src 198.18.1.1",
         router.Route(router.parse_prefix("198.18.1.0/24"), router.KERNEL)),
        ("local 198.18.1.1 dev eth1 table local proto kernel scope host src 198.18.1.1",
         router.Route(router.parse_prefix("198.18.1.1/32"), router.LOCAL)),
        ("unreachable 198.18.9.0/24", router.Route(router.parse_prefix("198.18.9.0/24"),
                                                   router.KERNEL)),
        ("fd00:198:18:5::/64 via fd00:198:18:1::2 dev eth0",
         router.Route(router.parse_prefix("fd00:198:18:5::/64"), router.FORWARD,
                      (6, socket.inet_pton(socket.AF_INET6, "fd00:198:18:1::2")), 0)),
        ("   # a comment", None),
        ("", None),
    ],
)  # fmt: skip
def test_route_lines(line: str, expected: router.Route | None):
    assert router.parse_route_line(line, PORTS) == expected


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("198.18.0.1/24 198.18.1.2", "host bits"),
        ("198.18.0.0/40 198.18.1.2", "length"),
        ("198.18.0.0/x 198.18.1.2", "length"),
        ("198.300.0.0/16 198.18.1.2", "not an address"),
        ("198.18.0.0/16 gateway", "next hop"),
        ("198.18.0.0/16 198.18.1.2 eth9", "eth9"),
        ("198.18.0.0/16 198.18.1.2 5", "ports 0 to 1"),
        ("198.18.0.0/16 198.18.1.2 1 extra", "PREFIX NEXTHOP"),
        ("blackhole", "without a prefix"),
        # found by tests/fuzz/fuzz_route_file.py: a NUL was a ValueError, a
        # non-ASCII digit an int() ValueError or a length, a `via` without a
        # value a kernel route
        ("198.18.0.0\0/24 198.18.1.2", "not an address"),
        ("198.18.0.0/\u00b2 198.18.1.2", "length"),
        ("198.18.0.0/\u0662\u0664 198.18.1.2", "length"),
        ("default via", "'via' without a value"),
        ("198.18.0.0/24 dev eth1 via", "'via' without a value"),
        ("198.18.0.0/24 via 198.18.1.2 dev", "'dev' without a value"),
        ("198.18.0.0/24 blackhole via", "takes nothing after it"),
        ("198.18.0.0/24 local 198.18.1.2", "takes nothing after it"),
    ],
)
def test_bad_route_lines(line: str, complaint: str):
    with pytest.raises(VelozError, match=complaint):
        router.parse_route_line(line, PORTS)


def test_ip_route_options_found_by_position():
    # a flag without a value (onlink, linkdown, ...) before `via` once paired the
    # words off by one: the gateway was lost and the route went to the kernel
    route = router.parse_route_line("198.18.0.0/24 proto static onlink via 198.18.1.2 dev eth1",
                                    PORTS)  # fmt: skip
    assert route == router.Route(router.parse_prefix("198.18.0.0/24"), router.FORWARD,
                                 v4("198.18.1.2"), 1)  # fmt: skip


def test_default_without_a_gateway_takes_no_family(tmp_path: Path):
    # `ip -6 route` lines with no address in them were read as the IPv4
    # default, replacing the real one when both outputs share a file
    path = tmp_path / "both.routes"
    path.write_text(
        "default via 198.18.1.2 dev eth1 proto static\n"
        "default dev wg0 proto static metric 1024 pref medium\n"
        "unreachable default dev lo proto kernel metric 4294967295 pref medium\n"
    )
    routes = router.read_route_file(path, PORTS)
    assert routes == [router.Route(router.parse_prefix("0.0.0.0/0"), router.FORWARD,
                                   v4("198.18.1.2"), 1)]  # fmt: skip
    with pytest.raises(VelozError, match="no address family"):
        router.parse_route_line("blackhole default", PORTS)


def test_route_file_not_utf8_is_refused(tmp_path: Path):
    path = tmp_path / "t.routes"
    path.write_bytes(b"198.18.0.0/24 198.18.1.2 1\n# caf\xe9\n")
    with pytest.raises(VelozError, match="not UTF-8"):
        router.read_route_file(path, PORTS)


def test_route_file_errors_name_the_line(tmp_path: Path):
    path = tmp_path / "t.routes"
    path.write_text("198.18.0.0/24 198.18.1.2 1\n\n198.18.0.0/33 198.18.1.2\n")
    with pytest.raises(VelozError, match=r"t.routes line 3: .*length"):
        router.read_route_file(path, PORTS)


def test_ops_bytes_and_shared_next_hops():
    routes = [router.parse_route_line(t, PORTS) for t in
              ("198.18.0.0/24 198.18.1.2 1", "198.18.4.0/22 198.18.1.2 1",
               "198.18.8.0/22 198.18.1.3 0", "198.18.9.9 local")]  # fmt: skip
    table = router.NexthopTable()
    ops = list(router.route_ops(routes, table, PORTS))
    nh, r4 = "router_nexthops", "router_routes4"
    assert [o.map for o in ops] == [nh, r4, r4, nh, r4, r4]
    # struct vz_lpm4_key: prefix length (host order), then the address
    assert ops[1].key == struct.pack("<I", 24) + bytes([198, 18, 0, 0])
    # struct vz_route {kind, nexthop}: both routes via .2 share slot 0
    assert ops[1].value == ops[2].value == struct.pack("<II", router.FORWARD, 0)
    assert ops[4].value == struct.pack("<II", router.FORWARD, 1)
    assert ops[5].value == struct.pack("<II", router.LOCAL, 0)
    # struct vz_nexthop: flags, port, dmac, smac (the port's), family, addr
    flags, port, dmac, smac, family, addr = router.NEXTHOP.unpack(ops[0].value)
    assert (flags, port, dmac, smac, family) == (router.USED, 1, bytes(6), PORTS.macs[1], 4)
    assert addr == bytes([198, 18, 1, 2]) + bytes(12)
    assert table.resolve(4, bytes([198, 18, 1, 2]), b"\x02" * 6) == [0]
    assert router.Nexthop.unpack(table.slots[0].value()).dmac == b"\x02" * 6


def test_next_hop_table_full_is_refused_before_anything_is_sent():
    table = router.NexthopTable()
    for i in range(router.MAX_NEXTHOPS):
        table.slot((4, i.to_bytes(4, "big")), 0, PORTS)
    with pytest.raises(VelozError, match="next-hop table is full"):
        table.slot((4, b"\xff" * 4), 0, PORTS)


def test_mixed_families_refused():
    route = router.Route(router.parse_prefix("198.18.0.0/24"), router.FORWARD,
                         (6, bytes(16)), 0)  # fmt: skip
    with pytest.raises(VelozError, match="other address family"):
        list(router.route_ops([route], router.NexthopTable(), PORTS))


def test_config_objects(tmp_path: Path):
    (tmp_path / "a.routes").write_text("198.18.64.0/18 198.18.1.2 1\n")
    ops = router.config_ops(
        {"routes": "a.routes", "local": ["198.18.0.1"],
         "route": [{"prefix": "fd00:198:18:2::/64", "via": "fd00:198:18:1::2", "port": 1}],
         "neighbour": [{"address": "198.18.1.2", "mac": "02:00:00:00:01:02"}]},
        Ports(), tmp_path,
    )  # fmt: skip
    nexthops = [router.Nexthop.unpack(o.value) for o in ops if o.map == "router_nexthops"]
    resolved = {nh.addr: nh.dmac for nh in nexthops if nh}
    assert resolved[bytes([198, 18, 1, 2])] == bytes.fromhex("020000000102")
    # IPv4 routes also fill the DIR-24-8 table; the local /32 takes a group
    assert {o.map for o in ops} == {"router_nexthops", "router_routes4", "router_routes6",
                                    "router_tbl24", "router_tbl8", "router_tbl8_owner"}  # fmt: skip
    with pytest.raises(VelozError, match="has no field"):
        router.config_ops({"route": [{"prefix": "198.18.0.0/24", "via": "198.18.1.2",
                                      "gw": "x"}]}, Ports(), tmp_path)  # fmt: skip


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        # found by tests/fuzz/fuzz_py_config.py: TypeError, ValueError, or a
        # float or boolean port taken as a number
        ({"routes": 5}, "routes must be a file name"),
        ({"routes": [1]}, "routes must be a file name"),
        ({"routes": {"a.routes": 1}}, "routes must be a file name"),
        ({"routes": ["a\0.routes"]}, "routes must be a file name"),
        ({"route": [{"prefix": "198.18.0.0/24", "via": "198.18.1.2", "port": 1.5}]}, "port must"),
        ({"route": [{"prefix": "198.18.0.0/24", "via": "198.18.1.2", "port": True}]}, "port must"),
    ],
)
def test_bad_config_values_refused(tmp_path: Path, values: dict, complaint: str):
    (tmp_path / "a.routes").write_text("198.18.64.0/18 198.18.1.2 1\n")
    with pytest.raises(VelozError, match=complaint):
        router.config_ops(values, Ports(), tmp_path)
