"""The testbed itself: built, idempotent, self-repairing, forwarding, removable (root)."""

import contextlib
import ctypes
import json
import os
import struct
import subprocess
import time

import pytest
from pyroute2 import IPRoute

from veloz import testbed
from waits import wait_until

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="the testbed needs root (namespaces, veth)"),
]

LINK_NAMES = {ep.ifname for ep in testbed.PLAN}


@pytest.fixture(scope="module", autouse=True)
def own_testbed():
    """This module builds and tears down the testbed itself, so start clean and
    leave nothing behind; if the session `testbed` fixture had it up, give it back."""
    was_up = testbed.status()["up"]
    testbed.down()
    try:
        yield
    finally:
        testbed.down()
        if was_up:
            testbed.up()


@pytest.fixture
def built():
    """The testbed, repaired if an earlier test left it broken; its status."""
    testbed.up()
    return testbed.status()


def sh(*argv: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr.strip()}"
    return proc.stdout


def ip_json(ns: str, *argv: str) -> list:
    return json.loads(sh("ip", "-j", "-n", ns, *argv) or "[]")


def host_netns() -> set[str]:
    return {line.split()[0] for line in sh("ip", "netns", "list").splitlines() if line}


def sysctl(ns: str, key: str) -> str:
    return sh("ip", "netns", "exec", ns, "sysctl", "-n", key).strip()


def comparable(st: dict) -> dict:
    """status() without program ids: a rebuilt far end gets a new receiver."""
    out = json.loads(json.dumps(st))
    for i in out["interfaces"]:
        if i["xdp"]:
            i["xdp"].pop("prog_id", None)
            i["xdp"].pop("prog_ids", None)
    return out


def assert_as_planned(st: dict) -> None:
    assert st["up"], st["problems"]
    assert st["problems"] == []
    assert st["namespaces"] == list(testbed.NAMESPACES)
    ifaces = {i["ifname"]: i for i in st["interfaces"]}
    assert set(ifaces) == LINK_NAMES
    for ep in testbed.PLAN:
        i = ifaces[ep.ifname]
        assert (i["netns"], i["mac"], i["state"], i["mtu"]) == (ep.netns, ep.mac, "UP", 1500)
        assert i["ipv4"] == [ep.ipv4]
        assert ep.ipv6 in i["ipv6"]
        assert i["gro"] is True and i["tx_csum"] is False
        if ep.ifname in testbed.FAR_ENDS:
            assert i["xdp"]["mode"] == "native"
            assert i["xdp"].get("prog_name", testbed.RECEIVER_PROG) == testbed.RECEIVER_PROG
        else:
            assert i["xdp"] is None


# ---------------------------------------------------------------- building


def test_up_twice_is_idempotent():
    testbed.up()
    first = testbed.status()
    testbed.up()
    second = testbed.status()
    assert_as_planned(first)
    assert second == first


def test_veth_pairs_join_the_planned_namespaces(built):
    for ep in testbed.PLAN:
        (link,) = ip_json(ep.netns, "-d", "link", "show", "dev", ep.ifname)
        assert link["linkinfo"]["info_kind"] == "veth"
        peer = testbed.endpoint(ep.peer)
        assert link["link_netnsid"] is not None
        # ip names the peer's namespace when it has an id for it.
        assert link.get("link_netns", peer.netns) == peer.netns


def test_no_default_route_anywhere(built):
    for ns in testbed.NAMESPACES:
        for family in ("-4", "-6"):
            routes = ip_json(ns, family, "route", "show", "table", "all")
            assert not [r for r in routes if r["dst"] == "default"], (ns, routes)


def test_routes_through_the_dut(built):
    for route in testbed.ROUTES:
        family = "-6" if ":" in route.dst else "-4"
        (got,) = ip_json(route.netns, family, "route", "show", route.dst)
        assert got["gateway"] == route.gateway


def test_static_neighbours_are_permanent(built):
    for ep in testbed.PLAN:
        peer = testbed.endpoint(ep.peer)
        neigh = ip_json(ep.netns, "neigh", "show", "dev", ep.ifname, "nud", "permanent")
        got = {(n["dst"], n["lladdr"]) for n in neigh}
        assert got == {(peer.ipv4.split("/")[0], peer.mac), (peer.ipv6.split("/")[0], peer.mac)}


def test_only_the_dut_forwards(built):
    for ns in testbed.NAMESPACES:
        want = "1" if ns == "vz-dut" else "0"
        assert sysctl(ns, "net.ipv4.ip_forward") == want, ns
        assert sysctl(ns, "net.ipv6.conf.all.forwarding") == want, ns


def test_loopback_up_everywhere(built):
    for ns in testbed.NAMESPACES:
        (lo,) = ip_json(ns, "link", "show", "dev", "lo")
        assert "UP" in lo["flags"], ns


def test_nothing_leaks_into_the_host_namespace(built):
    host_links = {link["ifname"] for link in json.loads(sh("ip", "-j", "link", "show"))}
    assert not host_links & LINK_NAMES


def tx_frames() -> dict[str, int]:
    """Frames each planned veth end has sent, per the kernel's counters."""
    counts = {}
    for ep in testbed.PLAN:
        (link,) = ip_json(ep.netns, "-s", "link", "show", "dev", ep.ifname)
        counts[ep.ifname] = link["stats64"]["tx"]["packets"]
    return counts


def test_testbed_is_silent_once_up():
    # Tests count frames exactly; IPv6 left alone would add router
    # solicitations (every ~4 s, forever), DAD probes and MLD reports.
    testbed.down()
    testbed.up()
    before = tx_frames()
    testbed.up()  # an idempotent up() must not stir anything either
    time.sleep(5)  # longer than the RS interval (4 s)
    assert tx_frames() == before


# ---------------------------------------------------------------- traffic


@pytest.mark.parametrize(
    ("src_ns", "dst_if", "family"),
    [
        ("vz-gen", "sink-dut", "ipv4"),
        ("vz-gen", "sink-dut", "ipv6"),
        ("vz-sink", "gen-dut", "ipv4"),
        ("vz-sink", "gen-dut", "ipv6"),
        ("vz-gen", "dut-gen", "ipv4"),
        ("vz-gen", "dut-gen", "ipv6"),
    ],
)
def test_ping_through_the_dut(built, src_ns, dst_if, family):
    # This host has no ping binary; testbed.ping sends one echo from a raw
    # socket opened inside src_ns.
    dst = getattr(testbed.endpoint(dst_if), family).split("/")[0]
    assert testbed.ping(src_ns, dst), f"{src_ns} -> {dst}"


def test_ping_reports_silence(built):
    assert not testbed.ping("vz-gen", "198.18.1.99", timeout=0.5)
    assert not testbed.ping("vz-gen", "fd00:198:18:1::99", timeout=0.5)


def test_traffic_really_crosses_the_dut(built):
    # Stop the DUT forwarding: the ends must no longer reach each other.
    sh("ip", "netns", "exec", "vz-dut", "sysctl", "-qw", "net.ipv4.ip_forward=0")
    try:
        assert not testbed.ping("vz-gen", "198.18.1.2", timeout=0.5)
    finally:
        testbed.up()  # and up() turns it back on
    assert sysctl("vz-dut", "net.ipv4.ip_forward") == "1"
    assert testbed.ping("vz-gen", "198.18.1.2")


# ---------------------------------------------------------------- XDP in status

BPF_PROG_LOAD = 5
BPF_PROG_TYPE_XDP = 6
XDP_FLAGS_SKB_MODE = 2
SYS_BPF = {"x86_64": 321, "aarch64": 280}


def load_xdp_pass(name: bytes = b"vz_tb_pass") -> int:
    """Load `return XDP_PASS` straight through bpf(2): no compiler or build needed."""
    nr = SYS_BPF.get(os.uname().machine)
    if nr is None:
        pytest.skip("bpf syscall number unknown on this architecture")
    insns = bytes.fromhex("b700000002000000") + bytes.fromhex("9500000000000000")  # r0 = 2; exit
    insn_buf = ctypes.create_string_buffer(insns, len(insns))
    license_buf = ctypes.create_string_buffer(b"GPL")
    attr = bytearray(128)
    struct.pack_into("=IIQQ", attr, 0, BPF_PROG_TYPE_XDP, len(insns) // 8,
                     ctypes.addressof(insn_buf), ctypes.addressof(license_buf))  # fmt: skip
    attr[48 : 48 + len(name)] = name  # prog_name
    attr_buf = ctypes.create_string_buffer(bytes(attr), len(attr))
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(nr, BPF_PROG_LOAD, attr_buf, len(attr))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"BPF_PROG_LOAD: {os.strerror(err)}")
    return fd


def set_xdp(ipr, ifname: str, fd: int, flags: int) -> None:
    index = ipr.link_lookup(ifname=ifname)[0]
    ipr.link("set", index=index, xdp={"attrs": [("IFLA_XDP_FD", fd), ("IFLA_XDP_FLAGS", flags)]})


def test_status_reports_attached_xdp(built):
    fd = load_xdp_pass()
    try:
        with IPRoute(netns="vz-dut", flags=0) as ipr:
            set_xdp(ipr, "dut-gen", fd, 0)
            set_xdp(ipr, "dut-sink", fd, XDP_FLAGS_SKB_MODE)
            try:
                st = testbed.status()
                # XDP_PASS changes nothing: the DUT still forwards.
                assert testbed.ping("vz-gen", "198.18.1.2")
            finally:
                set_xdp(ipr, "dut-gen", -1, 0)
                set_xdp(ipr, "dut-sink", -1, XDP_FLAGS_SKB_MODE)
    finally:
        os.close(fd)
    xdp = {i["ifname"]: i["xdp"] for i in st["interfaces"]}
    assert xdp["gen-dut"]["prog_id"] != xdp["dut-gen"]["prog_id"]  # the receivers
    assert xdp["dut-gen"]["mode"] == "native"
    assert xdp["dut-sink"]["mode"] == "generic"
    assert xdp["dut-gen"]["prog_id"] == xdp["dut-sink"]["prog_id"] > 0
    if "prog_name" in xdp["dut-gen"]:  # only when bpftool is installed
        assert xdp["dut-gen"]["prog_name"] == "vz_tb_pass"
    assert "native id" in testbed.format_status(st)
    assert_as_planned(testbed.status())  # detached again


# ---------------------------------------------------------------- repair


def test_up_repairs_a_deleted_namespace(built):
    sh("ip", "netns", "del", "vz-sink")
    st = testbed.status()
    assert not st["up"]
    assert "namespace vz-sink missing" in st["problems"]
    # The kernel dismantles a deleted namespace asynchronously: dut-sink may
    # still be listed (its peer dying) when up() runs, which is the point.
    testbed.up()
    assert comparable(testbed.status()) == comparable(built)
    assert testbed.ping("vz-gen", "fd00:198:18:1::2")


def test_up_repairs_drift(built):
    # A default route first, while its gateway is still reachable.
    sh("ip", "-n", "vz-gen", "route", "add", "default", "via", "198.18.0.2")
    sh("ip", "-n", "vz-gen", "-6", "route", "add", "default", "dev", "gen-dut", "table", "100")
    sh("ip", "-n", "vz-dut", "link", "set", "dut-gen", "down")
    sh("ip", "-n", "vz-gen", "addr", "del", "198.18.0.1/24", "dev", "gen-dut")
    sh("ip", "-n", "vz-gen", "-6", "addr", "del", "fd00:198:18::1/64", "dev", "gen-dut")
    sh("ip", "-n", "vz-sink", "route", "del", "198.18.0.0/24")
    sh("ip", "-n", "vz-sink", "neigh", "del", "198.18.1.1", "dev", "sink-dut")
    sh("ip", "-n", "vz-sink", "link", "set", "sink-dut", "address", "02:00:00:00:00:99",
       "mtu", "9000")  # fmt: skip
    sh("ip", "netns", "exec", "vz-dut", "ethtool", "-K", "dut-sink", "gro", "off")
    sh("ip", "netns", "exec", "vz-gen", "ethtool", "-K", "gen-dut", "tx", "on")
    sh("ip", "netns", "exec", "vz-dut", "sysctl", "-qw", "net.ipv6.conf.all.forwarding=0")
    assert not testbed.status()["up"]
    testbed.up()
    assert comparable(testbed.status()) == comparable(built)
    for family in ("-4", "-6"):
        assert ip_json("vz-gen", family, "route", "show", "default", "table", "all") == []
    assert sysctl("vz-dut", "net.ipv6.conf.all.forwarding") == "1"
    assert testbed.ping("vz-gen", "198.18.1.2")
    assert testbed.ping("vz-sink", "fd00:198:18::1")


def test_up_replaces_a_stray_link_with_the_veth(built):
    # A lone non-veth under a planned name (its veth pair deleted first);
    # a bridge because this kernel has no dummy driver.
    sh("ip", "-n", "vz-gen", "link", "del", "gen-dut")
    sh("ip", "-n", "vz-gen", "link", "add", "gen-dut", "type", "bridge")
    testbed.up()
    assert comparable(testbed.status()) == comparable(built)
    assert ip_json("vz-gen", "-d", "link", "show", "gen-dut")[0]["linkinfo"]["info_kind"] == "veth"


def test_up_recovers_a_stale_netns_file():
    # /run/netns/<name> that is a plain file, not a mount: what a crash between
    # create and bind-mount leaves behind.
    testbed.down()
    path = os.path.join(testbed.NETNS_DIR, "vz-dut")
    os.makedirs(testbed.NETNS_DIR, exist_ok=True)
    open(path, "w").close()
    try:
        assert "namespace vz-dut missing" in testbed.status()["problems"]
        testbed.up()
        assert_as_planned(testbed.status())
    finally:
        with contextlib.suppress(FileNotFoundError):
            if not os.path.ismount(path):
                os.unlink(path)


# ---------------------------------------------------------------- removal


def test_down_removes_everything(built):
    testbed.down()
    assert not host_netns() & set(testbed.NAMESPACES)
    st = testbed.status()
    assert st == {"up": False, "namespaces": [], "interfaces": [],
                  "problems": st["problems"]}  # fmt: skip
    assert st["problems"] == [f"namespace {ns} missing" for ns in testbed.NAMESPACES]
    host_links = {link["ifname"] for link in json.loads(sh("ip", "-j", "link", "show"))}
    assert not host_links & LINK_NAMES


def test_down_twice_is_fine():
    testbed.down()
    testbed.down()
    assert not host_netns() & set(testbed.NAMESPACES)


def test_down_removes_links_even_if_a_process_pins_the_namespace():
    testbed.up()
    # A process left inside vz-dut keeps the namespace alive after unmount;
    # down() must still have deleted the veths (and anything attached).
    proc = subprocess.Popen(["ip", "netns", "exec", "vz-dut", "sleep", "30"])
    try:
        pinned = f"/proc/{proc.pid}/ns/net"
        # Wait until the child has entered the namespace (ip execs sleep after setns).
        wait_until(lambda: os.readlink(pinned) != os.readlink("/proc/self/ns/net"), 2,
                   interval=0.02, what="the child in vz-dut's namespace")  # fmt: skip
        testbed.down()
        out = sh("nsenter", f"--net={pinned}", "ip", "-j", "link", "show")
        assert {link["ifname"] for link in json.loads(out)} == {"lo"}
    finally:
        proc.kill()
        proc.wait()
