"""The ddos NF's control plane without root: parsing, struct bytes, map operations.

A fake control socket stands in for a running NF, so every `veloz ctl rule|allow`
path is run, and every refusal is checked to send nothing.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
from pathlib import Path

import pytest

from veloz.cli import ctl_ddos
from veloz.control import abi, ddos
from veloz.control.client import MapInfo
from veloz.control.objects import Ports
from veloz.control.ops import Op
from veloz.core.errors import VelozError

REPO = Path(__file__).resolve().parents[2]
ABI = REPO / "include" / "veloz" / "abi.h"
BPF_OBJ = REPO / "build" / "nf" / "ddos.bpf.o"

ARRAY, PERCPU_ARRAY, LPM = 2, 6, 11
COPIES = 3


def le32(n: int) -> bytes:
    return n.to_bytes(4, "little")


# ---- a running NF's maps, faked ------------------------------------------------


class FakeCtl:
    """The parts of client.Ctl the ddos module uses, over dicts."""

    def __init__(self, allow_max: int = ddos.ALLOW_MAX) -> None:
        self.info = {
            ddos.RULES: MapInfo(ddos.RULES, ARRAY, 4, ddos.RULE.size, ddos.RULES_MAX, 1),
            ddos.META: MapInfo(ddos.META, ARRAY, 4, 4, 1, 1),
            ddos.RULE_STATS: MapInfo(
                ddos.RULE_STATS, PERCPU_ARRAY, 4, ddos.RULE_STAT.size, ddos.RULES_MAX, COPIES
            ),
            ddos.TOTALS: MapInfo(ddos.TOTALS, PERCPU_ARRAY, 4, 16, 4, COPIES),
            ddos.ALLOW[4]: MapInfo(ddos.ALLOW[4], LPM, 8, 4, allow_max, 1),
            ddos.ALLOW[6]: MapInfo(ddos.ALLOW[6], LPM, 20, 4, allow_max, 1),
        }
        self.maps_: dict[str, dict[bytes, bytes]] = {name: {} for name in self.info}
        for name, m in self.info.items():
            if m.type in (ARRAY, PERCPU_ARRAY):
                for i in range(m.max_entries):
                    self.maps_[name][le32(i)] = bytes(m.stride * m.copies)
        self.applied: list[list[Op]] = []

    def maps(self) -> dict[str, MapInfo]:
        return self.info

    def lookup(self, name: str, key: bytes) -> bytes | None:
        return self.maps_[name].get(key)

    def dump(self, name: str) -> list[tuple[bytes, bytes]]:
        return sorted(self.maps_[name].items())

    def apply(self, ops) -> int:
        ops = list(ops)
        self.applied.append(ops)
        for op in ops:
            m = self.info[op.map]
            if op.verb == "delete":
                del self.maps_[op.map][op.key]
                continue
            value = op.value.ljust(m.stride, b"\0")
            self.maps_[op.map][op.key] = value * m.copies
        return len(ops)

    # test helpers
    def set_stat(self, name: str, index: int, fmt, per_copy: list[tuple[int, ...]]) -> None:
        stride = self.info[name].stride
        self.maps_[name][le32(index)] = b"".join(
            fmt.pack(*v).ljust(stride, b"\0") for v in per_copy
        )

    def rule_bytes(self, slot: int) -> bytes:
        return self.maps_[ddos.RULES][le32(slot)][: ddos.RULE.size]

    def end(self) -> int:
        return int.from_bytes(self.maps_[ddos.META][le32(0)][:4], "little")


def ctl_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="veloz ctl")
    ctl_ddos.add_ctl_commands(parser.add_subparsers(dest="cmd", required=True))
    return parser


def run_ctl(fake: FakeCtl, *argv: str) -> int:
    args = ctl_parser().parse_args(list(argv))
    return args.func(args, fake)


# ---- parsing and struct bytes --------------------------------------------------


def test_udp_drop_rule_bytes():
    rule = ddos.parse_rule(
        {"src": "198.18.128.0/17", "proto": "udp", "dport": 53, "action": "drop"}
    )
    expected = (
        bytes([1, 4, 17, 17, 1, 0, 0, 0])  # used family prefixlen proto action mask value pad
        + b"\x00\x35"  # dport 53, network order
        + b"\0\0"  # pad
        + le32(7)  # gen
        + le32(0)  # rate
        + le32(0)  # burst
        + bytes([198, 18, 128, 0])
        + bytes(12)  # fmt: skip
    )
    assert rule.encode(True, 7) == expected
    assert len(expected) == ddos.RULE.size == 40


def test_syn_limit_rule_bytes():
    rule = ddos.parse_rule(
        {"proto": "tcp", "tcp_flags": "syn,!ack", "action": "limit", "rate": 1000, "burst": 100}
    )
    assert (rule.tcp_mask, rule.tcp_value) == (0x12, 0x02)
    raw = rule.encode(False, 1)
    assert raw[:8] == bytes([0, 0, 0, 6, 2, 0x12, 0x02, 0])
    assert raw[8:12] == bytes(4)
    assert raw[12:24] == le32(1) + le32(1000) + le32(100)
    assert raw[24:] == bytes(16)


def test_ipv6_allow_rule_bytes():
    rule = ddos.parse_rule({"src": "fd00:198:18::/64", "proto": 58, "action": "allow"})
    raw = rule.encode(True, 2)
    assert raw[:5] == bytes([1, 6, 64, 58, 3])
    assert raw[24:] == ipaddress.IPv6Address("fd00:198:18::").packed


@pytest.mark.parametrize(
    ("text", "mask", "value"),
    [("syn", 0x02, 0x02), ("syn,!ack", 0x12, 0x02), (" SYN , !Ack ", 0x12, 0x02),
     ("!syn,!ack,!rst", 0x16, 0), ("fin,syn,rst,psh,ack,urg,ece,cwr", 0xFF, 0xFF)],
)  # fmt: skip
def test_tcp_flags(text, mask, value):
    assert ddos.parse_tcp_flags(text) == (mask, value)
    assert ddos.parse_tcp_flags(ddos.format_tcp_flags(mask, value)) == (mask, value)


@pytest.mark.parametrize(
    "table",
    [{"action": "drop"},
     {"src": "198.18.0.0/15", "proto": "tcp", "dport": 443, "tcp_flags": "syn,!ack",
      "action": "limit", "rate": 0, "burst": 1},
     {"src": "fd00:198:18:1::/64", "proto": "udp", "action": "allow"},
     {"src": "198.18.7.7/32", "proto": 253, "action": "limit", "rate": 4294967295,
      "burst": 1000000000}],
)  # fmt: skip
def test_encode_decode_round_trip(table):
    rule = ddos.parse_rule(table)
    decoded, used, gen = ddos.Rule.decode(rule.encode(True, 0xDEADBEEF))
    assert (decoded, used, gen) == (rule, True, 0xDEADBEEF)
    assert ddos.parse_rule(decoded.table()) == rule


def test_protocol_names():
    assert [ddos.parse_proto(p) for p in ("tcp", "UDP", "icmp", "icmp6", "icmpv6", "any")] == [
        6, 17, 1, 58, 58, 0,
    ]  # fmt: skip
    assert ddos.parse_proto("47") == ddos.parse_proto(47) == 47


# ---- bad input: one clear line ---------------------------------------------------


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"src": "198.18.0.1/24", "action": "drop"}, "host bits set"),
        ({"src": "198.18.0.0/33", "action": "drop"}, "bad source prefix"),
        ({"src": "not-a-prefix", "action": "drop"}, "bad source prefix"),
        ({"src": "fd00::1::/64", "action": "drop"}, "bad source prefix"),
        ({"src": 1234, "action": "drop"}, "bad source prefix"),
        ({"proto": "sctpx", "action": "drop"}, "unknown protocol 'sctpx'"),
        ({"proto": 256, "action": "drop"}, "proto must be between 0 and 255"),
        ({"proto": "-1", "action": "drop"}, "unknown protocol"),
        ({"proto": True, "action": "drop"}, "unknown protocol"),
        ({"proto": "udp", "dport": 65536, "action": "drop"}, "dport must be between 1 and 65535"),
        ({"proto": "udp", "dport": 0, "action": "drop"}, "dport must be between 1 and 65535"),
        ({"proto": "udp", "dport": "http", "action": "drop"}, "dport must be a whole number"),
        ({"proto": "udp", "dport": True, "action": "drop"}, "dport must be a whole number"),
        ({"dport": 53, "action": "drop"}, "dport needs proto = tcp or udp"),
        ({"proto": "icmp", "dport": 53, "action": "drop"}, "dport needs proto"),
        ({"tcp_flags": "syn", "action": "drop"}, "tcp_flags needs proto = tcp"),
        ({"proto": "udp", "tcp_flags": "syn", "action": "drop"}, "tcp_flags needs proto = tcp"),
        ({"proto": "tcp", "tcp_flags": "syn,foo", "action": "drop"}, "bad TCP flag 'foo'"),
        ({"proto": "tcp", "tcp_flags": "!!syn", "action": "drop"}, "bad TCP flag"),
        ({"proto": "tcp", "tcp_flags": "syn,!syn", "action": "drop"}, "given twice"),
        ({"proto": "tcp", "tcp_flags": "", "action": "drop"}, "tcp_flags must be"),
        ({"proto": "tcp", "tcp_flags": 2, "action": "drop"}, "tcp_flags must be"),
        ({"src": "198.18.0.0/16"}, "needs an action"),
        ({"action": "reject"}, "unknown action 'reject'"),
        ({"action": "limit", "rate": 10}, "needs rate"),
        ({"action": "limit", "burst": 10}, "needs rate"),
        ({"action": "limit", "rate": 10, "burst": 0}, "burst must be between 1 and"),
        ({"action": "limit", "rate": 10, "burst": 1_000_000_001}, "burst must be between"),
        ({"action": "limit", "rate": -1, "burst": 5}, "rate must be between 0 and"),
        ({"action": "limit", "rate": 2**32, "burst": 5}, "rate must be between 0 and"),
        ({"action": "limit", "rate": 1.5, "burst": 5}, "rate must be a whole number"),
        ({"action": "drop", "rate": 10}, "rate and burst belong to action limit"),
        ({"action": "drop", "dst": "198.18.0.0/16"}, "unknown rule key 'dst'"),
    ],
)
def test_bad_rules_are_refused(table, message):
    with pytest.raises(VelozError) as e:
        ddos.parse_rule(table)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


# ---- start-up: config files -------------------------------------------------------


def test_config_ops():
    values = {
        "allow": ["198.18.0.0/24", "fd00:198:18::/64"],
        "rule": [
            {"src": "198.18.128.0/17", "proto": "udp", "dport": 53, "action": "drop"},
            {"proto": "tcp", "tcp_flags": "syn,!ack", "action": "limit", "rate": 10, "burst": 5},
        ],
    }
    ops = ddos.config_ops(values, Ports(), Path("."))
    assert [op.line() for op in ops[:2]] == [
        "update ddos_allow4 18000000c6120000 01000000",
        "update ddos_allow6 40000000fd000198001800000000000000000000 01000000",
    ]
    rules = [op for op in ops if op.map == ddos.RULES]
    assert [op.key for op in rules] == [le32(0), le32(1)]
    assert [ddos.Rule.decode(op.value)[1] for op in rules] == [True, True]
    assert ddos.Rule.decode(rules[1].value)[0].rate == 10
    assert ops[-1].line() == "update ddos_meta 00000000 02000000"
    assert all(op.verb == "update" for op in ops)


def test_config_without_rules_writes_no_meta():
    ops = ddos.config_ops({"allow": "198.18.0.0/24"}, Ports(), Path("."))
    assert [op.map for op in ops] == [ddos.ALLOW[4]]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"allow": "198.18.0.1/24"}, "bad allow-list prefix '198.18.0.1/24'"),
        ({"allow": [17]}, "bad allow-list prefix '17'"),
        ({"allow": {"a": 1}}, "allow must be a list"),
        ({"rule": {"action": "drop"}}, "[[rule]] must be a list of tables"),
        ({"rule": [{"action": "drop"}, {"action": "drop", "proto": "gre"}]},
         "rule 2: unknown protocol 'gre'"),
        ({"rule": [{"action": "drop"}] * 65}, "65 rules, at most 64"),
    ],
)  # fmt: skip
def test_bad_configs_are_refused(values, message):
    with pytest.raises(VelozError) as e:
        ddos.config_ops(values, Ports(), Path("."))
    assert message in str(e.value)


def test_config_allow_list_limit():
    many = [str(ipaddress.IPv4Network((i << 8, 24))) for i in range(ddos.ALLOW_MAX + 1)]
    with pytest.raises(VelozError, match="allow-list prefixes, at most 16384"):
        ddos.config_ops({"allow": many}, Ports(), Path("."))


# ---- live: veloz ctl rule|allow ---------------------------------------------------


def test_rule_add_writes_then_flips_then_raises_end(capsys):
    fake = FakeCtl()
    assert run_ctl(fake, "rule", "add", "drop", "--src", "198.18.128.0/17", "--proto", "udp",
                   "--dport", "53") == 0  # fmt: skip
    [ops] = fake.applied
    assert [(op.map, op.key) for op in ops] == [
        (ddos.RULE_STATS, le32(0)),
        (ddos.RULES, le32(0)),
        (ddos.RULES, le32(0)),
        (ddos.META, le32(0)),
    ]
    assert ops[0].value == bytes(24)
    first, second = ops[1].value, ops[2].value
    assert first[0] == 0 and second[0] == 1 and first[1:] == second[1:]
    assert ops[3].value == le32(1)
    assert (
        "rule 0 added: src=198.18.128.0/17 proto=udp dport=53 action=drop"
        in capsys.readouterr().out
    )

    run_ctl(fake, "rule", "add", "limit", "--proto", "tcp", "--tcp-flags", "syn,!ack",
            "--rate", "0", "--burst", "3")  # fmt: skip
    assert fake.end() == 2
    rule, used, gen = ddos.Rule.decode(fake.rule_bytes(1))
    assert used and gen == 1 and (rule.rate, rule.burst, rule.tcp_mask) == (0, 3, 0x12)


def test_rule_add_appends_after_the_last_rule():
    fake = FakeCtl()
    for _ in range(3):
        run_ctl(fake, "rule", "add", "drop")
    run_ctl(fake, "rule", "del", "0")
    run_ctl(fake, "rule", "add", "allow")
    slots, end = ddos.read_rules(fake)
    assert sorted(i for i, s in slots.items() if s.used) == [1, 2, 3] and end == 4
    run_ctl(fake, "rule", "add", "allow", "--slot", "0")
    assert ddos.read_rules(fake)[0][0].used and fake.end() == 4
    # a slot written again gets the next generation: old buckets do not carry over
    assert ddos.read_rules(fake)[0][0].gen == 2


def test_rule_del_clears_used_then_lowers_end():
    fake = FakeCtl()
    for _ in range(3):
        run_ctl(fake, "rule", "add", "drop", "--proto", "udp")
    before = fake.rule_bytes(1)
    run_ctl(fake, "rule", "del", "1")
    [ops] = fake.applied[-1:]
    assert len(ops) == 1 and ops[0].value == b"\0" + before[1:]  # only used changes
    assert fake.end() == 3
    run_ctl(fake, "rule", "del", "2")
    ops = fake.applied[-1]
    assert [op.map for op in ops] == [ddos.RULES, ddos.META]
    assert fake.end() == 1
    run_ctl(fake, "rule", "del", "0")
    assert fake.end() == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rule", "add", "drop", "--src", "198.18.0.1/16"], "host bits set"),
        (["rule", "add", "drop", "--proto", "xtp"], "unknown protocol 'xtp'"),
        (["rule", "add", "drop", "--proto", "udp", "--dport", "70000"], "between 1 and 65535"),
        (["rule", "add", "limit", "--rate", "5"], "needs rate"),
        (["rule", "add", "nuke"], "unknown action 'nuke'"),
        (["rule", "add", "drop", "--slot", "64"], "--slot must be between 0 and 63"),
        (["rule", "add", "drop", "--slot", "2"], "rule slot 2 is in use"),
        (["rule", "del", "5"], "no rule 5 (rules in use: 0, 1, 2)"),
        (["rule", "del", "64"], "rule id must be between 0 and 63"),
        (["rule", "del", "x"], "rule id must be a whole number"),
        (["allow", "add", "198.18.0.0/24", "198.18.0.1/24"], "bad allow-list prefix"),
        (["allow", "del", "198.18.9.0/24"], "198.18.9.0/24 is not in the allow-list"),
        (["allow", "del", "bogus"], "bad allow-list prefix 'bogus'"),
    ],
)
def test_bad_ctl_input_sends_nothing(argv, message):
    fake = FakeCtl()
    for _ in range(3):
        run_ctl(fake, "rule", "add", "drop")
    sent = len(fake.applied)
    with pytest.raises(VelozError) as e:
        run_ctl(fake, *argv)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert len(fake.applied) == sent


def test_full_rule_table():
    fake = FakeCtl()
    for _ in range(ddos.RULES_MAX):
        run_ctl(fake, "rule", "add", "drop")
    sent = len(fake.applied)
    with pytest.raises(VelozError, match=r"the rule table is full \(64 rules\)"):
        run_ctl(fake, "rule", "add", "drop")
    run_ctl(fake, "rule", "del", "5")
    run_ctl(fake, "rule", "del", "9")
    sent = len(fake.applied)
    with pytest.raises(VelozError, match=r"no free slot after rule 63.*--slot \(free: 5, 9\)"):
        run_ctl(fake, "rule", "add", "drop")
    assert len(fake.applied) == sent
    run_ctl(fake, "rule", "add", "drop", "--slot", "9")
    assert ddos.read_rules(fake)[0][9].used


def test_allow_add_del_list(capsys):
    fake = FakeCtl(allow_max=3)
    run_ctl(fake, "allow", "add", "198.18.0.0/24", "fd00:198:18::/64", "198.18.0.0/24")
    assert sorted(fake.maps_[ddos.ALLOW[4]]) == [bytes.fromhex("18000000c6120000")]
    assert len(fake.maps_[ddos.ALLOW[6]]) == 1
    capsys.readouterr()
    run_ctl(fake, "allow", "list", "--json")
    assert capsys.readouterr().out.strip() == '["198.18.0.0/24", "fd00:198:18::/64"]'
    run_ctl(fake, "allow", "add", "198.18.1.0/24", "198.18.2.0/24")
    sent = len(fake.applied)
    with pytest.raises(VelozError, match="IPv4 allow-list is full: 4 prefixes, at most 3"):
        run_ctl(fake, "allow", "add", "198.18.3.0/24")
    assert len(fake.applied) == sent
    run_ctl(fake, "allow", "del", "198.18.0.0/24")
    assert fake.applied[-1][0].line() == "delete ddos_allow4 18000000c6120000"
    assert [str(n) for n in ddos.read_allow(fake)][:1] == ["198.18.1.0/24"]


def test_rule_list_and_stats_sum_every_copy(capsys):
    fake = FakeCtl()
    run_ctl(fake, "rule", "add", "drop", "--proto", "udp")
    run_ctl(fake, "rule", "add", "limit", "--src", "fd00:198:18::/48", "--rate", "5",
            "--burst", "2")  # fmt: skip
    fake.set_stat(ddos.RULE_STATS, 1, ddos.RULE_STAT, [(1, 100, 0), (2, 200, 1), (4, 400, 2)])
    fake.set_stat(ddos.TOTALS, 3, ddos.STAT, [(1, 60), (0, 0), (2, 120)])
    capsys.readouterr()
    run_ctl(fake, "rule", "list", "--json")
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {"id": 0, "proto": "udp", "action": "drop", "packets": 0, "bytes": 0, "dropped": 0},
        {"id": 1, "src": "fd00:198:18::/48", "action": "limit", "rate": 5, "burst": 2,
         "packets": 7, "bytes": 700, "dropped": 3},
    ]  # fmt: skip
    counters = ddos.counters(fake)
    assert counters["malformed"] == 3 and counters["rule_matched"] == 7
    assert counters["rule_dropped"] == 3
    run_ctl(fake, "ddos-stats", "--json")
    stats = json.loads(capsys.readouterr().out)
    assert stats["totals"]["malformed"] == {"packets": 3, "bytes": 180}
    assert stats["rules"]["1"]["dropped"] == 3


# ---- one ABI: abi.h and the BPF object's BTF agree with the Python side -------------


def abi_define(name: str) -> int:
    m = re.search(rf"#define {name} (\d+)u?\b", ABI.read_text())
    assert m, name
    return int(m.group(1))


def abi_enum(name: str) -> int:
    m = re.search(rf"\b{name} = (\d+)", ABI.read_text())
    assert m, name
    return int(m.group(1))


def test_constants_match_abi_h():
    assert ddos.RULES_MAX == abi_define("VZ_DDOS_RULES_MAX")
    assert ddos.ALLOW_MAX == abi_define("VZ_DDOS_ALLOW_MAX")
    assert ddos.BURST_MAX == abi_define("VZ_DDOS_BURST_MAX")
    assert ddos.ALLOWED == abi_define("VZ_DDOS_ALLOWED")
    for name, value in ddos.ACTIONS.items():
        assert abi_enum(f"VZ_DDOS_{name.upper()}") == value
    for index, name in enumerate(ddos.TOTAL_NAMES):
        abi_name = "ALLOWLISTED" if name == "allowlisted" else name.upper()
        assert abi_enum(f"VZ_DDOS_{abi_name}") == index
    assert abi_enum("VZ_DDOS_TOTAL_COUNT") == len(ddos.TOTAL_NAMES)
    for name, bit in ddos.TCP_FLAGS.items():
        m = re.search(rf"#define VZ_TCP_{name.upper()} 0x([0-9a-f]+)", ABI.read_text())
        assert m and int(m.group(1), 16) == bit


def test_layouts_match_the_bpf_object():
    """ddos's structs where abi.h puts their fields (test_abi.py checks the
    reader itself against bpftool, for every struct of every NF)."""
    if not BPF_OBJ.exists():
        pytest.skip("needs the C build (build/nf/ddos.bpf.o)")
    obj = abi.nf_abi("ddos")
    rule = obj.layout("vz_ddos_rule")
    assert rule.size == ddos.RULE.size == 40
    offsets = {"used": 0, "family": 1, "prefixlen": 2, "proto": 3, "action": 4,
               "tcp_mask": 5, "tcp_value": 6, "dport": 8, "gen": 12, "rate": 16,
               "burst": 20, "addr": 24}  # fmt: skip
    assert {f.name: f.offset for f in rule.fields if f.name in offsets} == offsets
    assert obj.layout("vz_ddos_rule_stat").size == ddos.RULE_STAT.size == 24
    assert obj.layout("vz_ddos_meta").size == ddos.META_VALUE.size == 4
    assert obj.layout("vz_stat").size == ddos.STAT.size == 16
