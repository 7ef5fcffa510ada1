"""The DDoS filter's objects: allow-lists and rules (nf/ddos.c).

Config file (TOML):

    allow = ["198.18.0.0/24", "fd00:198:18::/64"]   # sources never filtered
    [[rule]]                       # rules run in order, the first match wins
    src = "198.18.128.0/17"        # optional: any source
    proto = "udp"                  # tcp, udp, icmp, icmp6, any or 0..255
    dport = 53                     # needs proto tcp or udp
    action = "drop"                # drop | allow | limit
    [[rule]]
    proto = "tcp"
    tcp_flags = "syn,!ack"         # these set, those clear
    action = "limit"
    rate = 1000                    # packets per second per source (0: no refill)
    burst = 100                    # bucket size: packets a source may send at once

A rule's id is its slot in ddos_rules (0 to 63): the config's rules take
slots 0, 1, ... in order; `veloz ctl rule add` appends after the last rule,
or takes the free slot --slot names. The running NF's maps are the only
state: every command reads them first.

A live add writes the rule with used = 0, then the same bytes with used = 1,
then raises ddos_meta.end; a delete clears used, then lowers end (the order
nf/ddos.c relies on). Each rule written to a slot gets the slot's next
generation, so the sources' token buckets of an earlier rule there are
not inherited.

A reload of an instance's config (docs/service.md) is diff_ops: the rules
and allow-list the file says, reached from what the NF holds in one
transaction, each changed slot written as a live delete and add are.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path

from veloz.control import abi
from veloz.control.client import Ctl, per_cpu_sums
from veloz.control.objects import Ports
from veloz.control.ops import Network, Op, delete, lpm_key, parse_prefix, parse_u32, update
from veloz.core.errors import VelozError

KEYS = frozenset({"allow", "rule"})

ALLOW = {4: "ddos_allow4", 6: "ddos_allow6"}
RULES = "ddos_rules"
META = "ddos_meta"
RULE_STATS = "ddos_rule_stats"
TOTALS = "ddos_totals"

PROTOS = {"any": 0, "icmp": 1, "tcp": 6, "udp": 17, "icmp6": 58, "icmpv6": 58}
PROTO_NAMES = {0: "any", 1: "icmp", 6: "tcp", 17: "udp", 58: "icmp6"}
PORT_PROTOS = (6, 17)


class _Abi(abi.View):
    """nf/ddos.c's maps and include/veloz/abi.h's ddos section, from ddos.bpf.o's BTF."""

    nf = "ddos"
    RULES_MAX = abi.max_entries(RULES)
    ALLOW_MAX = abi.max_entries(ALLOW[4])
    BURST_MAX = abi.Lazy(lambda a: abi.define("VZ_DDOS_BURST_MAX"))
    RATE_MAX = abi.Lazy(lambda a: a.layout("vz_ddos_rule").field("rate").max)
    ALLOWED = abi.Lazy(lambda a: abi.define("VZ_DDOS_ALLOWED"))
    ACTIONS = abi.Lazy(lambda a: a.named("vz_ddos_action", "VZ_DDOS_"))
    ACTION_NAMES = abi.Lazy(
        lambda a: {v: k for k, v in a.named("vz_ddos_action", "VZ_DDOS_").items()}
    )
    # "fin" -> 0x01 ... in bit order
    TCP_FLAGS = abi.Lazy(lambda a: {k.removeprefix("VZ_TCP_").lower(): v for k, v in
                                    sorted(abi.defines().items(), key=lambda kv: kv[1])
                                    if k.startswith("VZ_TCP_")})  # fmt: skip
    TOTAL_NAMES = abi.Lazy(
        lambda a: a.enum_names("vz_ddos_total", "VZ_DDOS_", ("VZ_DDOS_TOTAL_COUNT",))
    )
    RULE = abi.layout("vz_ddos_rule")
    RULE_STAT = abi.layout("vz_ddos_rule_stat")
    STAT = abi.map_value(TOTALS)
    META_VALUE = abi.layout("vz_ddos_meta")
    ALLOW_VALUE = abi.map_value(ALLOW[4])


ABI = _Abi()
__getattr__ = ABI.module_getattr(__name__)
RULE_FIELDS = ("src", "proto", "dport", "tcp_flags", "action", "rate", "burst")


@dataclass(frozen=True)
class Rule:
    action: int  # enum vz_ddos_action
    src: Network | None = None
    proto: int = 0
    dport: int = 0
    tcp_mask: int = 0
    tcp_value: int = 0
    rate: int = 0
    burst: int = 0

    def encode(self, used: bool, gen: int) -> bytes:
        """struct vz_ddos_rule."""
        family = self.src.version if self.src else 0
        prefixlen = self.src.prefixlen if self.src else 0
        addr = self.src.network_address.packed if self.src else b""
        return ABI.RULE.pack(
            used=int(used), family=family, prefixlen=prefixlen, proto=self.proto,
            action=self.action, tcp_mask=self.tcp_mask, tcp_value=self.tcp_value,
            dport=self.dport, gen=gen, rate=self.rate, burst=self.burst,
            addr=addr.ljust(16, b"\0"),
        )  # fmt: skip

    @classmethod
    def decode(cls, raw: bytes) -> tuple[Rule, bool, int]:
        """(rule, used, gen) of struct vz_ddos_rule's bytes."""
        r = ABI.RULE.unpack(raw)
        src: Network | None = None
        if r.family == 4:
            src = ipaddress.IPv4Network((r.addr[:4], r.prefixlen))
        elif r.family == 6:
            src = ipaddress.IPv6Network((r.addr, r.prefixlen))
        rule = cls(r.action, src, r.proto, r.dport, r.tcp_mask, r.tcp_value, r.rate, r.burst)
        return rule, bool(r.used), r.gen

    def table(self) -> dict[str, object]:
        """The rule as a config table (what `[[rule]]` would say)."""
        out: dict[str, object] = {}
        if self.src is not None:
            out["src"] = str(self.src)
        if self.proto:
            out["proto"] = PROTO_NAMES.get(self.proto, self.proto)
        if self.dport:
            out["dport"] = self.dport
        if self.tcp_mask:
            out["tcp_flags"] = format_tcp_flags(self.tcp_mask, self.tcp_value)
        out["action"] = ABI.ACTION_NAMES.get(self.action, str(self.action))
        if self.action == ABI.ACTIONS["limit"]:
            out["rate"] = self.rate
            out["burst"] = self.burst
        return out

    def __str__(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.table().items())


# ---- parsing ------------------------------------------------------------------


def parse_proto(value: object) -> int:
    if isinstance(value, str) and value.strip().lower() in PROTOS:
        return PROTOS[value.strip().lower()]
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).isdigit()):
        names = ", ".join(PROTOS)
        raise VelozError(f"unknown protocol '{value}' (expected {names} or a number 0-255)")
    return parse_u32(str(value), "proto", 0, 255)


def parse_tcp_flags(text: object) -> tuple[int, int]:
    """'syn,!ack' -> (mask, value): SYN set and ACK clear."""
    if not isinstance(text, str) or not text.strip():
        raise VelozError("tcp_flags must be flags like 'syn,!ack' (names: fin, syn, rst, ...)")
    mask = value = 0
    for word in text.lower().split(","):
        word = word.strip()
        name = word.lstrip("!")
        if name not in ABI.TCP_FLAGS or len(word) - len(name) > 1:
            names = ", ".join(ABI.TCP_FLAGS)
            raise VelozError(f"bad TCP flag '{word}' in '{text}' (flags: {names}; '!' for clear)")
        bit = ABI.TCP_FLAGS[name]
        if mask & bit:
            raise VelozError(f"TCP flag '{name}' given twice in '{text}'")
        mask |= bit
        if not word.startswith("!"):
            value |= bit
    return mask, value


def format_tcp_flags(mask: int, value: int) -> str:
    return ",".join(
        ("" if value & bit else "!") + name for name, bit in ABI.TCP_FLAGS.items() if mask & bit
    )


def _number(value: object, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise VelozError(f"{what} must be a whole number, not '{value}'")
    return parse_u32(value, what, low, high)


def parse_rule(item: dict[str, object]) -> Rule:
    """A rule from a config table or from `veloz ctl rule add`'s options."""
    unknown = sorted(set(item) - set(RULE_FIELDS))
    if unknown:
        raise VelozError(f"unknown rule key '{unknown[0]}' (known: {', '.join(RULE_FIELDS)})")
    action_text = item.get("action")
    if action_text is None:
        raise VelozError("a rule needs an action: drop, limit or allow")
    if not isinstance(action_text, str) or action_text.strip().lower() not in ABI.ACTIONS:
        raise VelozError(f"unknown action '{action_text}' (expected drop, limit or allow)")
    action = ABI.ACTIONS[action_text.strip().lower()]

    src = None
    if item.get("src") is not None:
        if not isinstance(item["src"], str):
            raise VelozError(
                f"bad source prefix '{item['src']}': expected a string like 1.2.0.0/16"
            )
        src = parse_prefix(item["src"], "source prefix")
    proto = parse_proto(item["proto"]) if item.get("proto") is not None else 0

    dport = 0
    if item.get("dport") is not None:
        dport = _number(item["dport"], "dport", 1, 65535)
        if proto not in PORT_PROTOS:
            raise VelozError("dport needs proto = tcp or udp")
    mask = value = 0
    if item.get("tcp_flags") is not None:
        mask, value = parse_tcp_flags(item["tcp_flags"])
        if proto != PROTOS["tcp"]:
            raise VelozError("tcp_flags needs proto = tcp")

    rate = burst = 0
    if action == ABI.ACTIONS["limit"]:
        if item.get("rate") is None or item.get("burst") is None:
            raise VelozError("action limit needs rate (packets/s per source) and burst")
        rate = _number(item["rate"], "rate", 0, ABI.RATE_MAX)
        burst = _number(item["burst"], "burst", 1, ABI.BURST_MAX)
    elif item.get("rate") is not None or item.get("burst") is not None:
        raise VelozError(f"rate and burst belong to action limit, not {action_text}")
    return Rule(action, src, proto, dport, mask, value, rate, burst)


def parse_allow(values: object) -> list[Network]:
    items = [values] if isinstance(values, str) else values
    if not isinstance(items, list):
        raise VelozError("config: allow must be a list of prefixes")
    out = []
    for text in items:
        if not isinstance(text, str):
            raise VelozError(f"bad allow-list prefix '{text}': expected a string")
        out.append(parse_prefix(text, "allow-list prefix"))
    return out


# ---- map operations -----------------------------------------------------------


def slot_key(slot: int) -> bytes:
    return slot.to_bytes(4, "little")


def allow_op(net: Network) -> Op:
    return update(ALLOW[net.version], lpm_key(net), ABI.ALLOW_VALUE.pack(ABI.ALLOWED))


def meta_op(end: int) -> Op:
    return update(META, slot_key(0), ABI.META_VALUE.pack(end=end))


def add_rule_ops(rule: Rule, slot: int, gen: int, end: int) -> list[Op]:
    """Write a rule into a free slot while packets flow (see nf/ddos.c)."""
    ops = [
        update(RULE_STATS, slot_key(slot), bytes(ABI.RULE_STAT.size)),
        update(RULES, slot_key(slot), rule.encode(False, gen)),
        update(RULES, slot_key(slot), rule.encode(True, gen)),
    ]
    if slot >= end:
        ops.append(meta_op(slot + 1))
    return ops


def del_rule_ops(rule: Rule, slot: int, gen: int, new_end: int, end: int) -> list[Op]:
    ops = [update(RULES, slot_key(slot), rule.encode(False, gen))]
    if new_end != end:
        ops.append(meta_op(new_end))
    return ops


def _table_list(values: dict, key: str) -> list[dict]:
    items = values.get(key, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise VelozError(f"config: [[{key}]] must be a list of tables")
    return items


def parse_config(values: dict) -> tuple[list[Network], list[Rule]]:
    """A config's allow-list (each prefix once) and rules, checked."""
    allow = list(dict.fromkeys(parse_allow(values.get("allow", []))))
    for family in (4, 6):
        count = sum(net.version == family for net in allow)
        if count > ABI.ALLOW_MAX:
            raise VelozError(
                f"config: {count} IPv{family} allow-list prefixes, at most {ABI.ALLOW_MAX}"
            )
    items = _table_list(values, "rule")
    if len(items) > ABI.RULES_MAX:
        raise VelozError(f"config: {len(items)} rules, at most {ABI.RULES_MAX}")
    rules = []
    for slot, item in enumerate(items):
        try:
            rules.append(parse_rule(item))
        except VelozError as e:
            raise VelozError(f"config: rule {slot + 1}: {e}") from None
    return allow, rules


def config_ops(values: dict, ports: Ports, base: Path) -> list[Op]:
    """Allow-lists, then the rules in slots 0, 1, ... (nothing runs yet)."""
    del ports, base  # rules name no ports and no files
    allow, rules = parse_config(values)
    ops = [allow_op(net) for net in allow]
    ops += [update(RULES, slot_key(slot), rule.encode(True, 1)) for slot, rule in enumerate(rules)]
    if rules:
        ops.append(meta_op(len(rules)))
    return ops


def diff_ops(slots: dict[int, Slot], end: int, have: list[Network],
             allow: list[Network], rules: list[Rule]) -> list[Op]:  # fmt: skip
    """From what the NF holds (slots, end, allow-list have) to a config's
    allow-list and rules in slots 0, 1, ...: a slot whose rule is the same
    keeps it, with its counters and token buckets; a changed one is written
    as a live delete and add are (used = 0 first, a new generation, zeroed
    counters); slots past the new rules are cleared, and end is set last."""
    ops = [allow_op(net) for net in allow if net not in have]
    ops += [delete(ALLOW[net.version], lpm_key(net)) for net in have if net not in allow]
    for slot, rule in enumerate(rules):
        old = slots.get(slot)
        if old is not None and old.used and old.rule == rule:
            continue
        gen = (old.gen + 1) & 0xFFFF_FFFF if old is not None else 1
        if old is not None and old.used:
            ops.append(update(RULES, slot_key(slot), old.rule.encode(False, old.gen)))
        ops += add_rule_ops(rule, slot, gen, slot + 1)  # end: set once, below
    for slot, old in sorted(slots.items()):
        if slot >= len(rules) and old.used:
            ops.append(update(RULES, slot_key(slot), old.rule.encode(False, old.gen)))
    if end != len(rules):
        ops.append(meta_op(len(rules)))
    return ops


def reload_ops(ctl: Ctl, values: dict, ports: Ports, base: Path) -> list[Op]:
    """What a reload of a config sends to the running NF (diff_ops), read
    and checked in full before anything is sent."""
    del ports, base
    allow, rules = parse_config(values)
    slots, end = read_rules(ctl)
    return diff_ops(slots, end, read_allow(ctl), allow, rules)


# ---- reading the running NF ---------------------------------------------------


@dataclass
class Slot:
    rule: Rule
    used: bool
    gen: int


def read_rules(ctl: Ctl) -> tuple[dict[int, Slot], int]:
    """Every slot of ddos_rules, and ddos_meta.end."""
    slots = {}
    for key, value in ctl.dump(RULES):
        rule, used, gen = Rule.decode(value)
        slots[int.from_bytes(key, "little")] = Slot(rule, used, gen)
    meta = ctl.lookup(META, slot_key(0)) or bytes(ABI.META_VALUE.size)
    return slots, ABI.META_VALUE.unpack(meta).end


def rule_counters(ctl: Ctl) -> dict[int, dict[str, int]]:
    info = ctl.maps()[RULE_STATS]
    out = {}
    for key, value in ctl.dump(RULE_STATS):
        packets, bytes_, dropped = per_cpu_sums(value, info, ABI.RULE_STAT)
        out[int.from_bytes(key, "little")] = {
            "packets": packets,
            "bytes": bytes_,
            "dropped": dropped,
        }
    return out


def totals(ctl: Ctl) -> dict[str, dict[str, int]]:
    info = ctl.maps()[TOTALS]
    out = {}
    for index, name in enumerate(ABI.TOTAL_NAMES):
        value = ctl.lookup(TOTALS, slot_key(index)) or bytes(info.stride * info.copies)
        packets, bytes_ = per_cpu_sums(value, info, ABI.STAT)
        out[name] = {"packets": packets, "bytes": bytes_}
    return out


def counters(ctl: Ctl) -> dict[str, int]:
    """For `veloz ctl stats`: packets per outcome."""
    out = {name: v["packets"] for name, v in totals(ctl).items()}
    per_rule = rule_counters(ctl).values()
    out["rule_matched"] = sum(r["packets"] for r in per_rule)
    out["rule_dropped"] = sum(r["dropped"] for r in per_rule)
    return out


def read_allow(ctl: Ctl) -> list[Network]:
    nets: list[Network] = []
    for family, name in ALLOW.items():
        for key, _ in ctl.dump(name):
            length = int.from_bytes(key[:4], "little")
            if family == 4:
                nets.append(ipaddress.IPv4Network((key[4:8], length)))
            else:
                nets.append(ipaddress.IPv6Network((key[4:20], length)))
    return nets


# ---- live: `veloz ctl rule|allow|ddos-stats` ----------------------------------


def choose_slot(slots: dict[int, Slot], end: int, wanted: int | None) -> int:
    """The slot a new rule goes to: after the last rule, or the free one asked for."""
    used = sorted(i for i, s in slots.items() if s.used)
    if wanted is not None:
        if wanted in used:
            raise VelozError(
                f"rule slot {wanted} is in use ({slots[wanted].rule}); delete it first"
            )
        return wanted
    nxt = max(used, default=-1) + 1
    if nxt >= ABI.RULES_MAX:
        free = [i for i in range(ABI.RULES_MAX) if i not in used]
        if not free:
            raise VelozError(f"the rule table is full ({ABI.RULES_MAX} rules)")
        raise VelozError(
            f"no free slot after rule {ABI.RULES_MAX - 1}; put the rule in a free one "
            f"with --slot (free: {', '.join(map(str, free))})"
        )
    return nxt


def ctl_rule_add(args: argparse.Namespace, ctl: Ctl) -> int:
    item = {
        "action": args.action, "src": args.src, "proto": args.proto, "dport": args.dport,
        "tcp_flags": args.tcp_flags, "rate": args.rate, "burst": args.burst,
    }  # fmt: skip
    rule = parse_rule({k: v for k, v in item.items() if v is not None})
    wanted = None if args.slot is None else parse_u32(args.slot, "--slot", 0, ABI.RULES_MAX - 1)
    slots, end = read_rules(ctl)
    slot = choose_slot(slots, end, wanted)
    gen = (slots[slot].gen + 1) & 0xFFFF_FFFF if slot in slots else 1
    ctl.apply(add_rule_ops(rule, slot, gen, end))
    print(f"rule {slot} added: {rule}")
    return 0


def ctl_rule_del(args: argparse.Namespace, ctl: Ctl) -> int:
    slot = parse_u32(args.id, "rule id", 0, ABI.RULES_MAX - 1)
    slots, end = read_rules(ctl)
    used = sorted(i for i, s in slots.items() if s.used)
    if slot not in used:
        have = ", ".join(map(str, used)) or "none"
        raise VelozError(f"no rule {slot} (rules in use: {have})")
    new_end = max((i for i in used if i != slot), default=-1) + 1
    ctl.apply(del_rule_ops(slots[slot].rule, slot, slots[slot].gen, new_end, end))
    print(f"rule {slot} deleted")
    return 0


def ctl_rule_list(args: argparse.Namespace, ctl: Ctl) -> int:
    slots, _ = read_rules(ctl)
    stats = rule_counters(ctl)
    zero = {"packets": 0, "bytes": 0, "dropped": 0}
    rows = [
        {"id": i, **s.rule.table(), **stats.get(i, zero)}
        for i, s in sorted(slots.items())
        if s.used
    ]
    if args.json:
        print(json.dumps(rows))
        return 0
    for i, s in sorted(slots.items()):
        if s.used:
            c = stats.get(i, zero)
            print(f"{i:2} {s.rule}  [{c['packets']} packets, {c['bytes']} bytes, "
                  f"{c['dropped']} dropped]")  # fmt: skip
    if not rows:
        print("no rules: every packet not malformed passes")
    return 0


def ctl_allow_add(args: argparse.Namespace, ctl: Ctl) -> int:
    nets = [parse_prefix(p, "allow-list prefix") for p in args.prefixes]
    maps = ctl.maps()
    have = read_allow(ctl)
    new = [n for n in dict.fromkeys(nets) if n not in have]
    for family, name in ALLOW.items():
        count = sum(n.version == family for n in have + new)
        if count > maps[name].max_entries:
            raise VelozError(
                f"the IPv{family} allow-list is full: {count} prefixes, "
                f"at most {maps[name].max_entries}"
            )
    ctl.apply(allow_op(n) for n in new)
    print(f"allow-list: {len(new)} added, {len(nets) - len(new)} already there")
    return 0


def ctl_allow_del(args: argparse.Namespace, ctl: Ctl) -> int:
    nets = [parse_prefix(p, "allow-list prefix") for p in args.prefixes]
    have = read_allow(ctl)
    for net in nets:
        if net not in have:
            raise VelozError(f"{net} is not in the allow-list")
    ctl.apply(delete(ALLOW[n.version], lpm_key(n)) for n in dict.fromkeys(nets))
    print(f"allow-list: {len(set(nets))} deleted")
    return 0


def ctl_allow_list(args: argparse.Namespace, ctl: Ctl) -> int:
    nets = read_allow(ctl)
    if args.json:
        print(json.dumps([str(n) for n in nets]))
        return 0
    for net in nets:
        print(net)
    return 0


def ctl_stats(args: argparse.Namespace, ctl: Ctl) -> int:
    slots, _ = read_rules(ctl)
    per_rule = rule_counters(ctl)
    result = {
        "totals": totals(ctl),
        "rules": {str(i): per_rule.get(i, {}) for i, s in sorted(slots.items()) if s.used},
    }
    if args.json:
        print(json.dumps(result))
        return 0
    for name, v in result["totals"].items():
        print(f"{name:12} {v['packets']:>14} packets {v['bytes']:>16} bytes")
    for i, c in result["rules"].items():
        print(f"rule {i:>2}     {c['packets']:>14} packets {c['bytes']:>16} bytes "
              f"{c['dropped']:>14} dropped")  # fmt: skip
    return 0
