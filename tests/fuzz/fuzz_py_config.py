"""Fuzz the Python config checks: the stateful NFs' TOML configs
(python/veloz/core/config.py, python/veloz/control/{router,ddos,lb}.py) and the
UDP poller's TOML or INI config (python/veloz/control/udpd.py).

An input's first byte picks the reader (router, ddos, lb, udpd TOML, udpd
INI); the rest is the file, read from disk as `veloz replay --config` and
`veloz udpd --config` read it, and checked the same way: the NF's objects
become map operations, its fields `--set` assignments; the poller's config
becomes vz-udpd's arguments. Seeds are the valid configs of the modules'
documentation and of tests/fuzz/ops.py. Each is refused with a VelozError or
gives a result that holds together: operations on the NF's own maps with
keys and values of their structs' sizes, prefixes within their length and
host bits clear, ports, protocols and weights in range, Maglev rings naming
only backends that were written; integer assignments; vz-udpd arguments it
knows, with values in their bounds.

    python tests/fuzz/fuzz_py_config.py [--seconds S] [--seeds DIR] [LIBFUZZER-ARGS] [CORPUS]
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import atheris
import pyfuzz

# Two modules are left uninstrumented. maglev.py: its loops run once per ring
# slot (65537 per VIP) and no input steers a branch in them but the weights.
# dir24.py (the router's DIR-24-8, checked against a trie by
# tests/unit/test_router_dir24.py): atheris 3.0.0 keeps a reference to the
# result of every instrumented comparison that is not a bool, and dir24's
# are numpy arrays of up to 2^24 entries: 16 MB leaked per router config,
# out of memory (2 GB) after ~12,000 inputs.
with atheris.instrument_imports(
    include=["veloz", "tomllib", "configparser", "ipaddress"],
    exclude=["veloz.control.maglev", "veloz.control.dir24"],
):
    import ops as fuzz_ops  # tests/fuzz/ops.py: the configs the C fuzzers start from

    from veloz.cli.udpd import DESCRIPTION as UDPD_DESCRIPTION  # its config's keys, documented
    from veloz.control import ddos, dir24, lb, maglev, objects, router, udpd
    from veloz.control.ops import Op
    from veloz.core import config, options
    from veloz.core.errors import VelozError


def _memo_table(table: Callable[[Sequence[tuple[bytes, int]], int], list[int]]):
    """maglev.table remembered by its arguments: it is pure (tests/unit/
    test_lb_maglev.py checks it), so building a ring again for the same
    backends checks nothing new, and it was ~40% of this target's time (an
    lb config's VIP: 65537 slots, every input the mutator derives from it).
    Each caller still gets its own list, and check_lb checks every slot."""
    cached = functools.lru_cache(maxsize=64)(lambda backends, size: table(backends, size))

    def memo(backends: Sequence[tuple[bytes, int]], size: int) -> list[int]:
        return list(cached(tuple(backends), size))

    return memo


maglev.table = _memo_table(maglev.table)


def _memo_ring_ops(ring_ops: Callable[[int, Sequence[int], Sequence[int]], list[Op]]):
    """lb.ring_ops remembered by its arguments, for the same reason: it is
    pure, and its 65537 instrumented update() calls per VIP were ~80% of
    this target's time (224 ms an lb config), which kept it at ~1,400
    inputs/s. check_lb still checks every op it returns."""
    cached = functools.lru_cache(maxsize=16)(
        lambda index, old, new: tuple(ring_ops(index, old, new))
    )

    def memo(index: int, old: Sequence[int], new: Sequence[int]) -> list[Op]:
        return list(cached(index, tuple(old), tuple(new)))

    return memo


lb.ring_ops = _memo_ring_ops(lb.ring_ops)

READERS = ["router", "ddos", "lb", "udpd.toml", "udpd.ini"]
ROUTE_FILES = {
    "table.txt": "198.18.64.0/18 198.18.1.2 1\n198.18.9.9 local\n",
    "table6.txt": "fd00:198:18:2::/64 via fd00:198:18:1::2 dev 1\nblackhole 2001:db8::/32\n",
}


# words the mutator splices in whole: every key, the tables, TOML's and INI's syntax
TOKENS = [
    *router.KEYS, *ddos.KEYS, *lb.KEYS, *udpd.KEYS, *ddos.RULE_FIELDS, "neighbours", "prefix",
    "via", "port", "address", "mac", "weight", "backends", "source4", "source6",
    "next_hop_mac", "fib", "[[route]]\n", "[[neighbour]]\n", "[[rule]]\n", "[[vip]]\n",
    "[lb]\n", "[udpd]\n", " = ", "true", "false", "1.5", "inf", "nan", "[", "]", "{", "}",
    '"', "'", '"""', "\\u0000", "\\n", "0x", "-1", "65536", "1979-05-27", ":weight=",
    "tcp", "udp", "icmp", "any", "drop", "limit", "allow", "syn,!ack", "table.txt",
    "table6.txt", "02:00:00:00:00:01", "198.18.0.1", "fd00::1", "/24", ",", "=", "yes",
]  # fmt: skip


def _doc_block(doc: str, after: str) -> str:
    """The indented example in a docstring, from the line after `after`."""
    lines = doc.split(after, 1)[1].splitlines()[1:]
    block = []
    for line in lines:
        if line.strip() and not line.startswith("  "):
            break
        block.append(line.strip())
    return "\n".join(block) + "\n"


# beside the documented ones: the other spellings the readers take
MORE = {
    "router": 'fib = 1\nroutes = ["table.txt", "table6.txt"]\nlocal = ["fd00::1"]\n'
              '[[route]]\nprefix = "0.0.0.0/0"\nvia = "198.18.1.254"\nport = "1"\n',
    "ddos": 'allow = "198.18.1.0/24"\n[[rule]]\nproto = 17\ndport = "0x35"\naction = "limit"\n'
            'rate = 0\nburst = "100"\n[[rule]]\nproto = "icmp6"\naction = "drop"\n',
    "lb": '[lb]\nsource6 = "fd00::2"\nnext_hop_mac = "02:00:00:00:00:fe"\n'
          'mac = "02:00:00:00:00:01"\n'
          '[[vip]]\naddress = "fd00::80"\nport = "443"\nproto = "TCP"\n'
          'backends = [{address = "fd00::10", weight = 3}, "fd00::11:weight=1"]\n',
    "udpd.toml": 'interface = "dut-gen"\nipv4 = "198.18.0.3/24"\nmac = "02:00:00:00:00:03"\n'
                 'socket = "/run/veloz/udpd/udpd.sock"\ngroup = "veloz"\ncopy = true\n'
                 'reasm_max_bytes = 65536\n[[neighbour]]\nip = "198.18.0.1"\n'
                 'mac = "C6:12:00:00:00:01"\n',
    "udpd.ini": "[udpd]\ninterface = dut-gen\nipv4 = 198.18.0.3/24\nmtu = 1400\ncopy = yes\n"
                "gateway = 198.18.0.254\nskb_mode = false\ncpu = 1\n"
                "neighbours = 198.18.0.1=c6:12:00:00:00:01, 198.18.0.9=02:00:00:00:00:09\n",
}  # fmt: skip


def seeds() -> list[bytes]:
    """Each reader's valid configs, its selector byte first."""
    texts: list[tuple[str, str]] = []
    for nf in ("router", "ddos", "lb"):
        mod = objects.module(nf)
        assert mod is not None and mod.__doc__ is not None
        texts += [(nf, _doc_block(mod.__doc__, "Config file (TOML")), (nf, fuzz_ops.CONFIGS[nf])]
    texts.append(("udpd.toml", _doc_block(UDPD_DESCRIPTION, '"neighbours = IP=MAC, IP=MAC"):')))
    texts += MORE.items()
    return [bytes([READERS.index(reader)]) + text.encode() for reader, text in texts]


# ---- what a result must hold to ----------------------------------------------

MAPS = {
    "router": {*router.ROUTES.values(), router.NEXTHOPS, dir24.TBL24, dir24.TBL8, dir24.OWNER},
    "ddos": {*ddos.ALLOW.values(), ddos.RULES, ddos.META, ddos.RULE_STATS},
    "lb": {lb.VIPS, lb.RING, lb.BACKENDS, lb.SELF},
}


# The arrays a config may fill (the router's DIR-24-8), by entries.
FILL_ENTRIES = {dir24.TBL24: dir24.SLOTS24, dir24.TBL8: dir24.GROUPS * 256,
                dir24.OWNER: dir24.GROUPS}  # fmt: skip


def check_lpm_key(key: bytes, family: int) -> None:
    """struct vz_lpm4_key / vz_lpm6_key: a length in range, host bits clear."""
    bits = 32 if family == 4 else 128
    assert len(key) == 4 + bits // 8, key
    length = int.from_bytes(key[:4], "little")
    assert 0 <= length <= bits, key
    assert int.from_bytes(key[4:], "big") & ((1 << (bits - length)) - 1) == 0, key


def check_router(ops: list[Op]) -> None:
    nexthops = {}
    for op in ops:
        if op.map == router.NEXTHOPS:
            slot = int.from_bytes(op.key, "little")
            assert len(op.key) == 4 and slot < router.MAX_NEXTHOPS, op
            nh = router.Nexthop.unpack(op.value)
            assert nh is not None and len(op.value) == router.NEXTHOP.size, op
            assert nh.family in (4, 6) and 0 <= nh.port <= 63, op
            nexthops[slot] = nh
    for op in ops:
        for family, name in router.ROUTES.items():
            if op.map != name:
                continue
            check_lpm_key(op.key, family)
            kind, slot = router.ROUTE.unpack(op.value)
            assert kind in router.KIND_NAMES, op
            if kind == router.FORWARD:
                # its next hop was written, of the route's family
                assert slot in nexthops and nexthops[slot].family == family, (op, nexthops)


def check_ddos(ops: list[Op]) -> None:
    rules = 0
    for op in ops:
        if op.map in ddos.ALLOW.values():
            check_lpm_key(op.key, 4 if op.map == ddos.ALLOW[4] else 6)
        elif op.map == ddos.RULES:
            rule, used, _ = ddos.Rule.decode(op.value)
            assert used and len(op.value) == ddos.RULE.size, op
            assert int.from_bytes(op.key, "little") == rules, op
            rules += 1
            assert rule.action in ddos.ACTION_NAMES and 0 <= rule.proto <= 255, rule
            assert rule.dport == 0 or (1 <= rule.dport and rule.proto in ddos.PORT_PROTOS), rule
            assert rule.tcp_mask == 0 or rule.proto == ddos.PROTOS["tcp"], rule
            assert rule.tcp_value & ~rule.tcp_mask == 0, rule
            if rule.action == ddos.ACTIONS["limit"]:
                assert 1 <= rule.burst <= ddos.BURST_MAX, rule
            else:
                assert rule.rate == rule.burst == 0, rule
        elif op.map == ddos.META:
            assert ddos.META_VALUE.unpack(op.value) == (rules,), op
    assert rules <= ddos.RULES_MAX


def check_lb(ops: list[Op]) -> None:
    vips, backends = {}, {}
    for op in ops:
        if op.map == lb.VIPS:
            vip = lb.Vip.unpack(op.key)
            assert len(op.key) == 20 and vip.key() == op.key, op
            assert 1 <= vip.port <= 65535 and vip.proto in lb.PROTO_NAMES, vip
            index, _ = lb.VIP_VALUE.unpack(op.value)
            assert index < lb.MAX_VIPS and index not in vips.values(), op
            vips[vip] = index
        elif op.map == lb.BACKENDS:
            backend = lb.Backend.unpack(op.value)
            assert backend is not None and backend.valid, op
            assert 1 <= backend.weight <= lb.MAX_WEIGHT and backend.vip in vips.values(), op
            backends[int.from_bytes(op.key, "little")] = backend
        elif op.map == lb.RING:
            slot = int.from_bytes(op.key, "little")
            owner = int.from_bytes(op.value, "little")
            backend = backends.get(owner)
            # a ring slot names a backend of its own VIP
            assert backend is not None and backend.vip == slot // lb.RING_SIZE, op
        elif op.map == lb.SELF:
            assert len(op.value) == lb.SELF_VALUE.size, op


NUMBERS = {"port", "dport", "rate", "burst", "weight", "proto"}


def check_types(values: object, where: str = "") -> None:
    """What the docs call a number (or a name) is never a float or a boolean,
    and route files are named by strings."""
    if isinstance(values, dict):
        for key, value in values.items():
            if key in NUMBERS:
                assert not isinstance(value, bool | float), (where, key, value)
            if key == "routes":
                names = value if isinstance(value, list) else [value]
                assert all(isinstance(n, str) for n in names), (where, key, value)
            check_types(value, f"{where}.{key}")
    elif isinstance(values, list):
        for item in values:
            check_types(item, where)


def check_nf(nf: str, ops: list[Op], assignments: list[str]) -> None:
    for op in ops:
        assert op.verb in ("update", "delete", "fill") and op.map in MAPS[nf], op
        assert isinstance(op.key, bytes) and isinstance(op.value, bytes), op
        assert op.line().split()[:2] == [op.verb, op.map], op
        if op.verb == "fill":  # a run of array entries: inside the array
            first = int.from_bytes(op.key, "little")
            assert len(op.key) == 4 and len(op.value) == 4 and op.count >= 1, op
            assert first + op.count <= FILL_ENTRIES[op.map], op
    {"router": check_router, "ddos": check_ddos, "lb": check_lb}[nf](ops)
    for text in assignments:
        key, sep, value = text.partition("=")
        assert sep and key, text
        int(value, 0)  # the C tools get integers only


FLAGS = {"--iface", "--ip", "--mac", "--gateway", "--socket", "--group", "--neigh", "--ip6",
         "--gateway6",
         *(udpd.flag_of(key) for key in udpd._INTS)}  # fmt: skip
_MAC = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")


def check_udpd(argv: list[str]) -> None:
    # os.execv refuses a NUL; an interface name is IFNAMSIZ - 1 bytes of these
    assert all("\0" not in a for a in argv), argv
    assert argv[0] == "--iface" and argv[2] == "--ip", argv
    assert re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", argv[1]), argv
    iface = ipaddress.IPv4Interface(argv[3])
    assert not (iface.ip.is_multicast or iface.ip.is_loopback or iface.ip.is_unspecified)
    i = 4
    bounds = {f: options.limits("vz-udpd", f) for f in map(udpd.flag_of, udpd._INTS)}
    while i < len(argv):
        flag = argv[i]
        if flag in udpd._BOOLS.values():
            i += 1
            continue
        assert flag in FLAGS and i + 1 < len(argv), argv
        value = argv[i + 1]
        if flag in bounds:
            low, high = bounds[flag]
            assert value.isdigit() and low <= int(value) <= high, argv
        elif flag == "--gateway":
            assert ipaddress.IPv4Address(value) in iface.network, argv
        elif flag == "--mac":
            assert _MAC.fullmatch(value) and not int(value[:2], 16) & 1, argv
        elif flag == "--neigh":
            ip, mac = value.split("=")
            assert ipaddress.IPv4Address(ip) and _MAC.fullmatch(mac), argv
        elif flag == "--socket":
            assert value.startswith("/") and len(value) <= 107, argv
        elif flag == "--ip6":
            iface6 = ipaddress.IPv6Interface(value)
            assert not (iface6.ip.is_multicast or iface6.ip.is_link_local
                        or iface6.ip.is_unspecified or iface6.ip.is_loopback), argv  # fmt: skip
        elif flag == "--gateway6":
            gw = ipaddress.IPv6Address(value)
            assert "--ip6" in argv and (gw.is_link_local or gw in iface6.network), argv
        i += 2


# ---- the target ---------------------------------------------------------------


def _safe_route_files(values: dict) -> bool:
    """Route files named by a router config stay in the fuzzer's directory
    (no /dev/stdin, no /dev/zero); a value of another type is for the parser.
    Skipped inputs count among the inputs, neither accepted nor refused."""
    files = values.get("routes")
    names = [files] if isinstance(files, str) else files if isinstance(files, list) else []
    return not any(isinstance(n, str) and (n.startswith("/") or ".." in n) for n in names)


def make_target(base: Path) -> pyfuzz.Target:
    for name, text in ROUTE_FILES.items():
        (base / name).write_text(text)

    def target(data: bytes) -> str:
        if not data:
            return "refused"
        reader = READERS[data[0] % len(READERS)]
        path = base / ("udpd.ini" if reader == "udpd.ini" else "config.toml")
        path.write_bytes(data[1:])
        try:
            if reader.startswith("udpd"):
                check_udpd(udpd.to_argv(udpd.load(str(path)), str(path)))
                return "accepted"
            # as `veloz replay` reads an NF's config: offline ports
            values = config.load(str(path))
            if not _safe_route_files(values):
                return "skipped"
            fields, nf_objects = objects.split_config(reader, values)
            mod = objects.module(reader)
            assert mod is not None
            ops = mod.config_ops(nf_objects, objects.Ports(), base)
            assignments = config.to_assignments(fields)
        except VelozError:
            return "refused"
        check_types(nf_objects)
        check_nf(reader, ops, assignments)
        return "accepted"

    return target


def main() -> None:
    tmp = pyfuzz.workdir("fuzz-py-config-")
    pyfuzz.run("fuzz-py-config", make_target(tmp), seeds(), "configs", TOKENS, workdir=tmp)


if __name__ == "__main__":
    main()
