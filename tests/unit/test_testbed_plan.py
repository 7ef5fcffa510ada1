"""The testbed plan's invariants and the pure parts of veloz.testbed; no root needed."""

import ipaddress
import os

import pytest

from veloz import testbed
from veloz.testbed.reachability import _icmp_echo

IPV4_RANGE = ipaddress.ip_network("198.18.0.0/15")
IPV6_RANGE = ipaddress.ip_network("fd00:198:18::/48")


def test_namespaces_are_the_three_vz_hosts():
    assert testbed.NAMESPACES == ("vz-gen", "vz-dut", "vz-sink")
    assert {ep.netns for ep in testbed.PLAN} == set(testbed.NAMESPACES)


def test_plan_is_the_documented_topology():
    got = [(ep.netns, ep.ifname, ep.peer) for ep in testbed.PLAN]
    assert got == [
        ("vz-gen", "gen-dut", "dut-gen"),
        ("vz-dut", "dut-gen", "gen-dut"),
        ("vz-dut", "dut-sink", "sink-dut"),
        ("vz-sink", "sink-dut", "dut-sink"),
    ]


def test_ifnames_are_unique_and_valid():
    names = [ep.ifname for ep in testbed.PLAN]
    assert len(set(names)) == len(names)
    # IFNAMSIZ is 16 including the NUL.
    assert all(0 < len(n) <= 15 and "/" not in n and " " not in n for n in names)


def test_interface_names_say_where_they_lead():
    # "<this host>-<peer host>", so a name alone tells both ends.
    for ep in testbed.PLAN:
        here, there = ep.ifname.split("-")
        assert ep.netns == f"vz-{here}"
        assert testbed.endpoint(ep.peer).netns == f"vz-{there}"


def test_ipv4_inside_benchmarking_range():
    for ep in testbed.PLAN:
        iface = ipaddress.ip_interface(ep.ipv4)
        assert iface.version == 4 and iface.network.prefixlen == 24
        assert iface.network.subnet_of(IPV4_RANGE), ep


def test_ipv6_inside_testbed_range_and_canonical():
    for ep in testbed.PLAN:
        iface = ipaddress.ip_interface(ep.ipv6)
        assert iface.version == 6 and iface.network.prefixlen == 64
        assert iface.network.subnet_of(IPV6_RANGE), ep
        # status() reports kernel (compressed) form; the plan must compare equal.
        assert str(iface) == ep.ipv6


def test_addresses_unique():
    for attr in ("ipv4", "ipv6"):
        addrs = [ipaddress.ip_interface(getattr(ep, attr)).ip for ep in testbed.PLAN]
        assert len(set(addrs)) == len(addrs)


def test_macs_unique_unicast_and_locally_administered():
    macs = [ep.mac for ep in testbed.PLAN]
    assert len(set(macs)) == len(macs)
    for mac in macs:
        octets = mac.split(":")
        assert len(octets) == 6 and mac == mac.lower()
        first = int(octets[0], 16)
        assert first & 0x02, f"{mac} is not locally administered"
        assert not first & 0x01, f"{mac} is multicast"


def test_peers_symmetric_share_a_subnet_and_cross_namespaces():
    for ep in testbed.PLAN:
        peer = testbed.endpoint(ep.peer)
        assert peer.peer == ep.ifname
        assert peer.netns != ep.netns
        for attr in ("ipv4", "ipv6"):
            mine = ipaddress.ip_interface(getattr(ep, attr)).network
            assert mine == ipaddress.ip_interface(getattr(peer, attr)).network


def test_links_use_distinct_subnets():
    nets = {ipaddress.ip_interface(ep.ipv4).network for ep in testbed.PLAN}
    assert len(nets) == 2


def test_routes_never_default_and_gateways_are_direct_peers():
    for route in testbed.ROUTES:
        dst = ipaddress.ip_network(route.dst)
        assert dst.prefixlen > 0, "a default route would let traffic leave the testbed"
        assert dst.subnet_of(IPV4_RANGE if dst.version == 4 else IPV6_RANGE)
        gateway = ipaddress.ip_address(route.gateway)
        # The gateway is the address of the peer of an interface in this namespace.
        local = [ep for ep in testbed.PLAN if ep.netns == route.netns]
        peers = [testbed.endpoint(ep.peer) for ep in local]
        assert any(gateway == ipaddress.ip_interface(p.ipv4 if gateway.version == 4
                                                     else p.ipv6).ip for p in peers)  # fmt: skip


def test_routes_make_the_ends_reach_each_other():
    # vz-gen and vz-sink each have a v4 and a v6 route to the far link.
    for ns, far in (("vz-gen", "sink-dut"), ("vz-sink", "gen-dut")):
        ep = testbed.endpoint(far)
        for attr in ("ipv4", "ipv6"):
            target = ipaddress.ip_interface(getattr(ep, attr)).ip
            assert any(target in ipaddress.ip_network(r.dst)
                       for r in testbed.ROUTES if r.netns == ns), (ns, target)  # fmt: skip


def test_endpoint_lookup():
    for ep in testbed.PLAN:
        assert testbed.endpoint(ep.ifname) is ep


@pytest.mark.parametrize("name", ["eth0", "", "vz-gen", "GEN-DUT"])
def test_endpoint_unknown_raises_testbed_error(name):
    with pytest.raises(testbed.TestbedError, match="no testbed interface"):
        testbed.endpoint(name)


def test_endpoint_is_frozen():
    ep = testbed.endpoint("gen-dut")
    with pytest.raises(AttributeError):
        ep.mac = "02:00:00:00:00:00"  # type: ignore[misc]


@pytest.mark.parametrize("func", [testbed.up, testbed.down, testbed.status])
def test_needs_root(monkeypatch, func):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(testbed.TestbedError, match="needs root"):
        func()


def test_icmp_echo_checksum_verifies():
    packet = _icmp_echo(8, 0x1234)
    padded = packet + b"\0" * (len(packet) % 2)
    total = sum(int.from_bytes(padded[i : i + 2], "big") for i in range(0, len(padded), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    assert total == 0xFFFF
    assert packet[0] == 8 and packet[4:6] == b"\x12\x34"


def _fake_status(up: bool) -> dict:
    interfaces = []
    for i, ep in enumerate(testbed.PLAN):
        interfaces.append({
            "netns": ep.netns, "ifname": ep.ifname, "mac": ep.mac, "state": "UP",
            "mtu": 1500, "ipv4": [ep.ipv4], "ipv6": [ep.ipv6, "fe80::1/64"], "gro": True,
            "tx_csum": False,
            "xdp": {"mode": "native", "prog_id": 42, "prog_name": "drop"} if i == 1 else None,
        })  # fmt: skip
    problems = [] if up else ["namespace vz-sink missing"]
    return {"up": up, "namespaces": list(testbed.NAMESPACES), "problems": problems,
            "interfaces": interfaces}  # fmt: skip


def test_format_status_lists_every_interface_without_a_tty():
    text = testbed.format_status(_fake_status(up=True))
    assert text.splitlines()[0] == "testbed: up"
    for ep in testbed.PLAN:
        assert ep.ifname in text and ep.mac in text and ep.ipv4 in text and ep.ipv6 in text
    assert "native id 42 (drop)" in text
    assert "\x1b[" not in text  # no colour codes when not on a terminal
    assert all(line == line.rstrip() for line in text.splitlines())


def test_format_status_says_why_it_is_down():
    text = testbed.format_status(_fake_status(up=False))
    assert text.startswith("testbed: DOWN")
    assert "vz-sink missing" in text


def test_format_status_of_nothing():
    text = testbed.format_status({"up": False, "namespaces": [], "problems": [],
                                  "interfaces": []})  # fmt: skip
    assert text == "testbed: DOWN"
