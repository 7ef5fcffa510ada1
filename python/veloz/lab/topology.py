# SPDX-License-Identifier: BSD-2-Clause
"""The lab's topology: which host plays each role, through which ports.

Three roles, as in CSIT's topology files (a traffic generator and the device
under test, each a node with its interfaces): the generator sends out of its
port into the DUT's first port; the DUT's NF sends frames back out of that
port (tx) or out of its second port (redirect, router) to the sink. A host is
this machine (`local`), a network namespace on it (`netns`), or another
machine over SSH (`ssh`); two roles may share one host (a generator box that
also sinks). Without a file, the namespace testbed is the topology.

    [hosts.tg]                      # any name; "local" needs no table
    kind = "ssh"                    # local | netns | ssh
    address = "192.0.2.10"
    user = "root"                   # default root
    port = 22                       # default 22
    identity = "~/.ssh/veloz_lab"   # the key (no password prompt, ever)
    known_hosts = "~/.ssh/known_hosts"
    options = ["ProxyJump=bastion"] # more ssh -o options
    veloz = ["veloz"]               # how veloz starts there (default: veloz)
    python = ["python3"]            # veloz's Python there, for the lab's helpers
                                    # (default: veloz's if `PY -m veloz.cli`, else python3)

    [hosts.dut]
    kind = "netns"
    netns = "vz-dut"

    [generator]
    host = "tg"
    iface = "ens1f0"
    mac = "02:00:c6:12:00:01"
    ipv4 = "198.18.0.1"
    ipv6 = "fd00:198:18::1"         # optional

    [dut]
    host = "dut"
    ports = [{ iface = "dut-gen", mac = "02:00:c6:12:00:02", ipv4 = "198.18.0.2" },
             { iface = "dut-sink", mac = "02:00:c6:12:01:01", ipv4 = "198.18.1.1" }]

    [sink]
    host = "tg"
    iface = "ens1f1"
    mac = "02:00:c6:12:01:02"
    ipv4 = "198.18.1.2"

    [addresses]                     # optional: each defaults from the ports'
    prefix_len = 24                 # of the generator's and the DUT's link
    udpd = "198.18.0.3"             # udpd's, beside the DUT's kernel (its port + 1)
    udpd_generator = "198.18.0.4"   # udpd's on the generator (the DUT's port + 2)
    vip = "198.18.0.100"            # lb's service (the link's network + 100)
    backend2 = "198.18.1.3"         # lb's second backend, at the sink (the sink + 1)
    attacker = "198.18.0.200"       # ddos's flood source (the link's network + 200)
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from veloz.core.errors import VelozError
from veloz.lab.hosts import Host, LocalHost, NetnsHost, SshHost

ROLES = ("generator", "dut", "sink")
_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_HOST_KEYS = {
    "local": {"kind"},
    "netns": {"kind", "netns"},
    "ssh": {
        "kind",
        "address",
        "user",
        "port",
        "identity",
        "known_hosts",
        "options",
        "veloz",
        "python",
    },
}
_PORT_KEYS = {"iface", "mac", "ipv4", "ipv6"}


@dataclass(frozen=True)
class Port:
    iface: str
    mac: str
    ipv4: str  # bare address
    ipv6: str | None = None


@dataclass(frozen=True)
class Role:
    name: str
    host: Host
    ports: tuple[Port, ...]

    @property
    def port(self) -> Port:
        return self.ports[0]


@dataclass(frozen=True)
class Addresses:
    """The addresses an experiment uses beyond the ports' own."""

    prefix_len: int  # of the link between the generator and the DUT's first port
    udpd: str  # udpd's on the DUT's first port, beside its kernel's address
    udpd_generator: str  # udpd's on the generator's port (udp-latency)
    vip: str  # lb's virtual service, where the generator sends
    backend2: str  # lb's second backend, reached at the sink's MAC
    attacker: str  # ddos's flood source

    @classmethod
    def derived(cls, dut: Role, sink: Role, given: dict | None = None) -> Addresses:
        """Each address not given, from the ports' (the testbed's own, there)."""
        given = dict(given or {})
        plen = given.get("prefix_len", 24)
        own = ipaddress.IPv4Address(dut.port.ipv4)
        net = ipaddress.IPv4Network(f"{own}/{plen}", strict=False)
        base = {"udpd": own + 1, "udpd_generator": own + 2, "vip": net[100] if
                net.num_addresses > 200 else own + 3, "attacker": net[200] if
                net.num_addresses > 200 else own + 4,
                "backend2": ipaddress.IPv4Address(sink.port.ipv4) + 1}  # fmt: skip
        out = {k: str(given.get(k, v)) for k, v in base.items()}
        return cls(prefix_len=plen, **out)


@dataclass(frozen=True)
class Topology:
    name: str
    generator: Role
    dut: Role
    sink: Role
    addresses: Addresses | None = None  # None: derived from the ports

    def __post_init__(self) -> None:
        if self.addresses is None:
            object.__setattr__(self, "addresses", Addresses.derived(self.dut, self.sink))

    @property
    def addr(self) -> Addresses:
        assert self.addresses is not None
        return self.addresses

    def role(self, name: str) -> Role:
        if name not in ROLES:
            raise VelozError(f"no role '{name}' (known: {', '.join(ROLES)})")
        return getattr(self, name)

    def hosts(self) -> list[Host]:
        seen: list[Host] = []
        for r in ROLES:
            h = self.role(r).host
            if not any(h is s for s in seen):
                seen.append(h)
        return seen

    def describe(self) -> dict:
        """What a result records about where it was measured."""
        return {
            "name": self.name,
            **{r: {"host": self.role(r).host.describe(),
                   "ports": [p.__dict__ for p in self.role(r).ports]} for r in ROLES},
            "addresses": self.addr.__dict__,
        }  # fmt: skip

    def close(self) -> None:
        for h in self.hosts():
            h.close()


def testbed_topology() -> Topology:
    """The namespace testbed (veloz testbed up), as a topology."""
    from veloz import testbed

    def port(ifname: str) -> Port:
        ep = testbed.endpoint(ifname)
        return Port(ep.ifname, ep.mac, ep.ipv4.split("/")[0], ep.ipv6.split("/")[0])

    gen, dut, sink = (NetnsHost(ns) for ns in testbed.NAMESPACES)
    return Topology(
        name="testbed",
        generator=Role("generator", gen, (port("gen-dut"),)),
        dut=Role("dut", dut, (port("dut-gen"), port("dut-sink"))),
        sink=Role("sink", sink, (port("sink-dut"),)),
    )


# ---------------------------------------------------------------- the file


class _Where:
    """Builds the one-line errors: FILE: [table] key: what is wrong."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, why: str) -> VelozError:
        return VelozError(f"{self.path}: [{where}] {why}")


def _unknown(w: _Where, where: str, table: dict, allowed: set[str]) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise w.fail(where, f"unknown key '{extra[0]}' (known: {', '.join(sorted(allowed))})")


def _str(w: _Where, where: str, table: dict, key: str, required: bool = True) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            raise w.fail(where, f"'{key}' is missing")
        return None
    if not isinstance(value, str) or not value.strip():
        raise w.fail(where, f"'{key}' must be a non-empty string")
    return value


def _path(value: str | None, base: Path) -> str | None:
    if value is None:
        return None
    p = Path(os.path.expanduser(value))
    return str(p if p.is_absolute() else base / p)


def _host(w: _Where, name: str, table: object, base: Path) -> Host:
    where = f"hosts.{name}"
    if not isinstance(table, dict):
        raise w.fail(where, "must be a table")
    kind = table.get("kind")
    if kind not in _HOST_KEYS:
        raise w.fail(where, f"'kind' must be one of {', '.join(_HOST_KEYS)}")
    _unknown(w, where, table, _HOST_KEYS[kind])
    if kind == "local":
        return LocalHost(name)
    if kind == "netns":
        netns = _str(w, where, table, "netns")
        assert netns is not None
        if not _NAME.match(netns):
            raise w.fail(where, f"'netns' {netns!r} is not a namespace name")
        return NetnsHost(netns, name)
    address = _str(w, where, table, "address")
    assert address is not None
    if address.startswith("-") or any(c.isspace() for c in address):
        raise w.fail(where, f"'address' {address!r} is not a host name or address")
    user = _str(w, where, table, "user", required=False) or "root"
    if not re.match(r"^[a-z_][a-z0-9_.-]*$", user):
        raise w.fail(where, f"'user' {user!r} is not a user name")
    port = table.get("port", 22)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise w.fail(where, "'port' must be a whole number in 1..65535")
    identity = _path(_str(w, where, table, "identity", required=False), base)
    if identity and not os.path.isfile(identity):
        raise w.fail(where, f"'identity': no file {identity}")
    known = _path(_str(w, where, table, "known_hosts", required=False), base)
    if known and not os.path.isfile(known):
        raise w.fail(where, f"'known_hosts': no file {known}")
    options = table.get("options", [])
    if not isinstance(options, list) or not all(
        isinstance(o, str) and re.match(r"^[A-Za-z]+=\S", o) for o in options
    ):
        raise w.fail(where, "'options' must be a list of \"Name=value\" ssh options")
    veloz = _command(w, where, table, "veloz", ["veloz"])
    python = _command(w, where, table, "python", None)
    return SshHost(address, user=user, port=port, identity=identity, known_hosts=known,
                   options=options, name=name, veloz=veloz,
                   python_cmd=python)  # type: ignore[arg-type]  # fmt: skip


def _command(w: _Where, where: str, table: dict, key: str, default: list[str] | None
             ) -> tuple[str, ...] | None:  # fmt: skip
    """A command: a string or a list of strings (its words)."""
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v
                                                           for v in value):  # fmt: skip
        raise w.fail(where, f"'{key}' must be a command: a string or a list of strings")
    return tuple(value)


_ADDRESS_KEYS = {"prefix_len", "udpd", "udpd_generator", "vip", "backend2", "attacker"}


def _addresses(w: _Where, table: object, roles: dict[str, Role]) -> Addresses:
    """[addresses]: each optional; udpd's two must be on the generator's link."""
    if table is None:
        table = {}
    if not isinstance(table, dict):
        raise w.fail("addresses", "must be a table")
    _unknown(w, "addresses", table, _ADDRESS_KEYS)
    plen = table.get("prefix_len", 24)
    if not isinstance(plen, int) or isinstance(plen, bool) or not 8 <= plen <= 30:
        raise w.fail("addresses", "'prefix_len' must be a whole number in 8..30")
    for key in _ADDRESS_KEYS - {"prefix_len"}:
        if key in table:
            try:
                ipaddress.IPv4Address(_str(w, "addresses", table, key))
            except ValueError as e:
                raise w.fail("addresses", f"'{key}': {e}") from None
    try:
        addr = Addresses.derived(roles["dut"], roles["sink"], table)
    except (ValueError, IndexError):  # + 1 past the end of the address space
        raise w.fail("addresses", "cannot derive the lab's addresses: give them") from None
    link = ipaddress.IPv4Network(f"{roles['dut'].port.ipv4}/{plen}", strict=False)
    for key in ("udpd", "udpd_generator"):
        if ipaddress.IPv4Address(getattr(addr, key)) not in link:
            raise w.fail("addresses", f"'{key}' {getattr(addr, key)} is not on the DUT's "
                         f"first link ({link})")  # fmt: skip
    return addr


def _port(w: _Where, where: str, table: object) -> Port:
    if not isinstance(table, dict):
        raise w.fail(where, "a port must be a table (iface, mac, ipv4, ipv6)")
    _unknown(w, where, table, _PORT_KEYS)
    iface = _str(w, where, table, "iface")
    mac = (_str(w, where, table, "mac") or "").lower()
    ipv4 = _str(w, where, table, "ipv4")
    ipv6 = _str(w, where, table, "ipv6", required=False)
    assert iface is not None and ipv4 is not None
    if not re.match(r"^[A-Za-z0-9_.:@-]{1,15}$", iface):
        raise w.fail(where, f"'iface' {iface!r} is not an interface name")
    if not _MAC.match(mac):
        raise w.fail(where, f"'mac' {mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
    try:
        v4 = ipaddress.IPv4Address(ipv4)
        v6 = ipaddress.IPv6Address(ipv6) if ipv6 else None
    except ValueError as e:
        raise w.fail(where, str(e)) from None
    return Port(iface, mac, str(v4), str(v6) if v6 else None)


def _role(w: _Where, name: str, table: object, hosts: dict[str, Host]) -> Role:
    if not isinstance(table, dict):
        raise w.fail(name, "is missing" if table is None else "must be a table")
    host_name = _str(w, name, table, "host")
    assert host_name is not None
    if host_name not in hosts:
        raise w.fail(name, f"no host '{host_name}' (known: {', '.join(sorted(hosts))})")
    if "ports" in table:
        _unknown(w, name, table, {"host", "ports"})
        ports_t = table["ports"]
        if not isinstance(ports_t, list) or not ports_t:
            raise w.fail(name, "'ports' must be a non-empty list of tables")
        ports = tuple(_port(w, f"{name}.ports[{i}]", p) for i, p in enumerate(ports_t))
    else:
        _unknown(w, name, table, {"host"} | _PORT_KEYS)
        ports = (_port(w, name, {k: v for k, v in table.items() if k != "host"}),)
    if name == "dut" and len(ports) != 2:
        raise w.fail(name, "the DUT has two ports: towards the generator, towards the sink")
    if name != "dut" and len(ports) != 1:
        raise w.fail(name, f"the {name} has one port")
    return Role(name, hosts[host_name], ports)


def load(path: str | os.PathLike) -> Topology:
    """A topology file, checked whole; VelozError names the first fault."""
    w = _Where(str(path))
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise VelozError(f"cannot read topology {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise VelozError(f"{path}: not TOML: {e}") from None
    _unknown(w, "top level", data, {"name", "hosts", "addresses", *ROLES})
    base = Path(path).resolve().parent
    host_tables = data.get("hosts", {})
    if not isinstance(host_tables, dict):
        raise w.fail("hosts", "must be a table of hosts")
    hosts: dict[str, Host] = {"local": LocalHost()}
    for name, table in host_tables.items():
        if not _NAME.match(name):
            raise w.fail("hosts", f"{name!r} is not a host name")
        hosts[name] = _host(w, name, table, base)
    roles = {r: _role(w, r, data.get(r), hosts) for r in ROLES}
    name = data.get("name", Path(path).stem)
    if not isinstance(name, str):
        raise w.fail("top level", "'name' must be a string")
    return Topology(name=name, **roles, addresses=_addresses(w, data.get("addresses"), roles))


@dataclass(frozen=True)
class Need:
    """Something an experiment runs on a role's host besides veloz itself."""

    role: str
    kind: str  # command (on PATH) | tool, library (veloz's own) | python (a module)
    name: str
    hint: str = ""  # where it comes from, e.g. "Debian package knot"


def check(topo: Topology, needs: Sequence[Need] = ()) -> None:
    """Every role's host answers and has its ports, and what the experiment
    needs there (`needs`): one clear line if not."""
    for r in ROLES:
        role = topo.role(r)
        for p in role.ports:
            try:
                done = role.host.run(["test", "-e", f"/sys/class/net/{p.iface}"], timeout=30)
            except OSError as e:  # no ip/ssh binary, and the like
                raise VelozError(f"{r}: cannot reach host {role.host.name}: {e}", code=1) from None
            if done.returncode == 255 and isinstance(role.host, SshHost):
                why = (done.stderr.strip().splitlines() or ["ssh failed"])[-1]
                raise VelozError(f"{r}: cannot reach host {role.host.name} over ssh: {why}",
                                 code=1)  # fmt: skip
            if done.returncode != 0:
                why = done.stderr.strip().splitlines()
                raise VelozError(f"{r}: no interface {p.iface} on host {role.host.name}"
                                 + (f" ({why[-1]})" if why else ""), code=1)  # fmt: skip
    for need in needs:
        _check_need(topo.role(need.role).host, need)


def _check_need(host: Host, need: Need) -> None:
    hint = f" ({need.hint})" if need.hint else ""
    if need.kind == "command":
        if host.which(need.name) is None:
            raise VelozError(f"{need.role}: {need.name} is not installed on host {host.name}"
                             + hint, code=1)  # fmt: skip
    elif need.kind in ("tool", "library"):
        try:
            getattr(host, need.kind)(need.name)
        except VelozError as e:
            raise VelozError(f"{need.role}: {e}", code=1) from None
    else:
        done = host.run([*host.python, "-c", f"import {need.name}"], timeout=30)
        if done.returncode != 0:
            raise VelozError(f"{need.role}: {' '.join(host.python)} on host {host.name} cannot "
                             f"import {need.name}{hint}", code=1)  # fmt: skip


# ---------------------------------------------------------------- the current one

_current: Topology | None = None


def current() -> Topology:
    """The topology experiments run on: the one in use(), else the testbed."""
    return _current if _current is not None else testbed_topology()


def on(role: str, argv: Sequence[str]) -> list[str]:
    """`argv` as the current topology's `role` host runs it."""
    return current().role(role).host.argv(argv)


@contextlib.contextmanager
def use(topo: Topology) -> Iterator[Topology]:
    """Run experiments on `topo`; its hosts' connections close afterwards."""
    global _current
    before, _current = _current, topo
    try:
        yield topo
    finally:
        _current = before
        topo.close()
