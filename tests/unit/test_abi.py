# SPDX-License-Identifier: BSD-2-Clause
"""One ABI (python/veloz/control/abi.py): every map of every NF, read from the
BTF of the built objects, checked against two independent readers (libbpf,
through vz-nfinfo, and bpftool), and every layout the control plane packs
checked against the map it is written to. A change on the C side then fails
here, not in a running NF."""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from veloz.control import abi, ctl, ddos, dir24, lb, ops, router
from veloz.core import paths
from veloz.core.errors import VelozError

NFS = paths.available_nfs()
ABI_H = Path(__file__).resolve().parents[2] / "include" / "veloz" / "abi.h"

pytestmark = pytest.mark.skipif(not NFS, reason="needs the C build (build/nf)")


def bpftool_structs(path: Path) -> dict[str, tuple[int, dict[str, int]]]:
    """struct name -> (size, {member: byte offset}), as bpftool reads the BTF."""
    if shutil.which("bpftool") is None:
        pytest.skip("needs bpftool")
    raw = subprocess.run(["bpftool", "btf", "dump", "file", str(path), "format", "raw"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    out: dict[str, tuple[int, dict[str, int]]] = {}
    current = None
    for line in raw.splitlines():
        m = re.match(r"\[\d+\] STRUCT '(\w+)' size=(\d+)", line)
        if m:
            current = m.group(1)
            out[current] = (int(m.group(2)), {})
            continue
        m = re.match(r"\s+'(\w+)' type_id=\d+ bits_offset=(\d+)", line)
        if m and current:
            out[current][1][m.group(1)] = int(m.group(2)) // 8
        elif not line.startswith("\t"):
            current = None
    return out


def nfinfo_maps(name: str) -> dict[str, dict]:
    """The NF's own maps as libbpf opens them (vz-nfinfo)."""
    nf = paths.nf(name)
    done = subprocess.run(
        [str(paths.tool("vz-nfinfo")), "--bpf", str(nf.bpf), "--native", str(nf.native)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return {m["name"]: m for m in json.loads(done.stdout)["maps"]}


@pytest.mark.parametrize("name", NFS)
def test_every_map_matches_libbpf(name: str):
    """Type, key and value size and entries of each map, as libbpf sees them."""
    maps = abi.nf_abi(name).maps
    theirs = nfinfo_maps(name)
    for map_name, info in theirs.items():
        ours = maps[map_name]
        assert (ours.type, ours.key.size, ours.value.size, ours.max_entries) == (
            info["type"], info["key_size"], info["value_size"], info["max_entries"]
        ), map_name  # fmt: skip
    # and veloz's own maps (vz_stats...), which vz-nfinfo leaves out
    assert {"vz_stats", "vz_redirects", "vz_ports", "vz_ifports"} <= set(maps)
    assert set(maps) - set(theirs) == {m for m in maps if m.startswith("vz_")}


@pytest.mark.parametrize("name", NFS)
def test_every_struct_matches_bpftool(name: str):
    """Size and every member offset of every named struct a map uses."""
    a = abi.nf_abi(name)
    theirs = bpftool_structs(a.path)
    for m in a.maps.values():
        for layout in (m.key, m.value):
            if layout.name in theirs:
                size, members = theirs[layout.name]
                assert layout.size == size, layout.name
                assert {f.name: f.offset for f in layout.fields} == members, layout.name
            else:  # a bare integer
                assert [f.name for f in layout.fields] == ["value"]
                assert layout.fields[0].size == layout.size in (4, 8)


@pytest.mark.parametrize("name", NFS)
def test_every_nf_carries_the_verdicts(name: str):
    """nf.h exports enum vz_verdict into every NF; vz_stats is indexed by it."""
    a = abi.nf_abi(name)
    assert a.enum("vz_verdict")["VZ_VERDICT_COUNT"] == a.map("vz_stats").max_entries


# ---- each map the control plane writes or reads, with the layout it uses --------

# (NF, map) -> (key layout, value layout) of the Python side; None: a u32 index;
# LPM: ops.lpm_key / Prefix.key(), checked in test_hand_built_keys_follow_btf
LPM = "lpm"
VIEWS: dict = {
    ("lb", lb.VIPS): (lambda: lb.ABI.VIP_KEY, lambda: lb.ABI.VIP_VALUE),
    ("lb", lb.BACKENDS): (None, lambda: lb.ABI.BACKEND),
    ("lb", lb.SELF): (None, lambda: lb.ABI.SELF_VALUE),
    ("lb", lb.VIP_STATS): (None, lambda: lb.ABI.STAT),
    ("lb", lb.BACKEND_STATS): (None, lambda: lb.ABI.STAT),
    ("lb", lb.COUNTERS): (None, lambda: lb.ABI.COUNTER),
    ("lb", "lb_conns"): (lambda: lb.ABI.FLOW, None),
    ("ddos", ddos.RULES): (None, lambda: ddos.ABI.RULE),
    ("ddos", ddos.META): (None, lambda: ddos.ABI.META_VALUE),
    ("ddos", ddos.RULE_STATS): (None, lambda: ddos.ABI.RULE_STAT),
    ("ddos", ddos.TOTALS): (None, lambda: ddos.ABI.STAT),
    ("router", router.NEXTHOPS): (None, lambda: router.ABI.NEXTHOP),
    ("router", router.ROUTES[4]): (LPM, lambda: router.ABI.ROUTE),
    ("router", router.ROUTES[6]): (LPM, lambda: router.ABI.ROUTE),
    ("ddos", ddos.ALLOW[4]): (LPM, lambda: ddos.ABI.ALLOW_VALUE),
    ("ddos", ddos.ALLOW[6]): (LPM, lambda: ddos.ABI.ALLOW_VALUE),
    ("router", router.COUNTERS): (None, lambda: router.ABI.COUNTER),
    ("drop", "vz_stats"): (None, lambda: ctl.ABI.STAT),
}


@pytest.mark.parametrize(("nf", "map_name"), list(VIEWS), ids=[f"{n}-{m}" for n, m in VIEWS])
def test_python_views_are_the_maps_layouts(nf: str, map_name: str):
    m = abi.nf_abi(nf).map(map_name)
    key, value = (f() if callable(f) else f for f in VIEWS[(nf, map_name)])
    if key == LPM:
        assert m.type == "lpm_trie" and m.key.name.startswith("vz_lpm")
    elif key is None:
        assert m.key.size == 4 and m.key.fields[0].code == "I"  # lb.u32, ddos.slot_key...
    else:
        assert (key.name, key.size, key.fields) == (m.key.name, m.key.size, m.key.fields)
    if value is not None:
        assert (value.size, value.fields) == (m.value.size, m.value.fields)
        if m.value.fields != (m.value.fields[0],) or m.value.fields[0].name != "value":
            assert value.name == m.value.name  # a struct: the same one


def test_hand_built_keys_follow_btf():
    """Keys built without a Layout (LPM keys: a route table's hot loop)."""
    for nf, map_name, net in (("router", router.ROUTES[4], "198.18.64.0/18"),
                              ("router", router.ROUTES[6], "fd00:198:18::/48"),
                              ("ddos", ddos.ALLOW[4], "198.18.0.0/24"),
                              ("ddos", ddos.ALLOW[6], "fd00::/16")):  # fmt: skip
        key = abi.nf_abi(nf).map(map_name).key
        n = ipaddress.ip_network(net)
        expected = key.pack(prefixlen=n.prefixlen, addr=n.network_address.packed)
        assert ops.lpm_key(n) == expected
        assert router.parse_prefix(net).key() == expected
    assert ddos.allow_op(ipaddress.ip_network("198.18.0.0/24")).value == abi.nf_abi("ddos").map(
        ddos.ALLOW[4]
    ).value.pack(ddos.ABI.ALLOWED)


def test_map_sizes_and_names_come_from_the_objects():
    assert lb.MAX_VIPS == abi.nf_abi("lb").map(lb.VIPS).max_entries
    assert lb.MAX_VIPS * lb.RING_SIZE == abi.nf_abi("lb").map(lb.RING).max_entries
    assert len(lb.COUNTER_NAMES) == abi.nf_abi("lb").map(lb.COUNTERS).max_entries
    assert len(router.COUNTER_NAMES) == abi.nf_abi("router").map(router.COUNTERS).max_entries
    assert len(ddos.TOTAL_NAMES) == abi.nf_abi("ddos").map(ddos.TOTALS).max_entries
    assert dir24.GROUPS * 256 == abi.nf_abi("router").map(dir24.TBL8).max_entries
    assert ctl.VERDICTS == ["aborted", "drop", "pass", "tx", "redirect"]
    assert router.NAMED_FIELDS == {"table": {"trie": 0, "dir24": 1}}
    assert ddos.ACTIONS == {"drop": 1, "limit": 2, "allow": 3}
    assert lb.MAX_WEIGHT == 0xFFFF and ddos.RATE_MAX == 0xFFFF_FFFF


def test_big_endian_fields_are_numbers_in_network_order():
    vip = lb.Vip(ipaddress.ip_address("198.18.100.1"), 0x1234, 6)
    raw = vip.key()
    assert raw[16:18] == b"\x12\x34" and lb.Vip.unpack(raw) == vip
    rule = ddos.Rule(1, None, 17, 53)
    assert rule.encode(True, 1)[8:10] == (53).to_bytes(2, "big")


# ---- the reader itself: a C change shows up, bad input is refused --------------

CLANG = shutil.which("clang")


def compile_btf(tmp_path: Path, source: str) -> abi.NfAbi:
    src = tmp_path / "t.c"
    src.write_text(source)
    obj = tmp_path / "t.bpf.o"
    subprocess.run([CLANG, "-g", "-O2", "-target", "bpf", "-c", str(src), "-o", str(obj)],
                   check=True)  # fmt: skip
    return abi.NfAbi("t", obj)


@pytest.mark.skipif(CLANG is None, reason="needs clang")
def test_a_reordered_struct_moves_the_python_fields(tmp_path: Path):
    """The same Python pack(), against a struct whose C fields moved."""
    a = compile_btf(tmp_path, """
typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
struct vz_lb_backend { __u8 flags; __u8 family; __u16 weight; __u32 vip; __u8 addr[16]; };
enum e { E_A = 0, E_B = 1, E_COUNT = 2 };
struct { int (*type)[2]; struct vz_lb_backend *value; __u32 *key; int (*max_entries)[9]; }
    m __attribute__((section(".maps"), used));
static enum e x __attribute__((section(".vz_btf"), used));
""")  # fmt: skip
    layout = a.map("m").value
    assert layout.name == "vz_lb_backend" and a.map("m").max_entries == 9
    assert a.map("m").type == "array"
    raw = layout.pack(addr=b"\1" * 16, vip=7, weight=3, family=6, flags=1)
    assert raw == bytes([1, 6, 3, 0, 7, 0, 0, 0]) + b"\1" * 16
    assert layout.unpack(raw).vip == 7
    assert a.enum_names("e", "E_", ("E_COUNT",)) == ["a", "b"]


def test_bad_objects_are_one_clear_error(tmp_path: Path):
    bad = tmp_path / "x.bpf.o"
    bad.write_bytes(b"not an ELF")
    with pytest.raises(VelozError, match="not a little-endian ELF64"):
        abi.NfAbi("x", bad)
    with pytest.raises(VelozError, match="BTF too short"):
        abi.Btf(b"\x9f\xeb")
    with pytest.raises(VelozError, match="no such file|No such file"):
        abi.NfAbi("x", tmp_path / "missing.bpf.o")
    a = abi.nf_abi("drop")
    with pytest.raises(VelozError, match="no map nope"):
        a.map("nope")
    with pytest.raises(VelozError, match="no struct nope"):
        a.layout("nope")


def test_pack_refuses_unknown_and_missing_fields():
    layout = lb.ABI.BACKEND
    with pytest.raises(TypeError, match="no field color"):
        layout.pack(addr=b"", vip=0, weight=1, family=4, flags=1, color=2)
    with pytest.raises(TypeError, match="no value for flags"):
        layout.pack(addr=b"", vip=0, weight=1, family=4)
    with pytest.raises(TypeError, match="give all 5 fields"):
        layout.pack(1, 2)


def test_abi_h_numbers_are_read_not_copied():
    text = ABI_H.read_text()
    assert abi.define("VZ_LB_RING_SIZE") == int(re.search(r"VZ_LB_RING_SIZE (\d+)", text)[1])
    assert abi.define("VZ_ROUTER_TBL24") == 1 << 24
    with pytest.raises(VelozError, match="defines no number VZ_NOPE"):
        abi.define("VZ_NOPE")
