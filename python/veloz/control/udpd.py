"""`veloz udpd --config FILE`: the poller of veloz's userspace UDP/IP stack.

The config file (TOML, or INI with the same keys in a [udpd] section) is
checked here, whole, before anything touches the interface; then vz-udpd
runs in this process's place, so SIGINT and SIGTERM reach the program that
detaches.
"""

from __future__ import annotations

import argparse
import configparser
import errno
import ipaddress
import os
import re
import socket
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from veloz.control import metrics
from veloz.core import options, paths, safeio
from veloz.core.errors import VelozError

DEFAULT_SOCKET = "/run/veloz/udpd/udpd.sock"  # include/veloz/sock.h


_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
# the whole-number keys: each is vz-udpd's --KEY-WITH-DASHES, whose limits
# are vz-udpd's own (its option table, read by veloz.core.options)
_INTS = ("mtu", "cpu", "busy_poll_us", "rcvbuf", "sndbuf", "max_apps", "max_sockets",
         "arp_timeout_ms", "reasm_timeout_ms", "reasm_max_bytes")  # fmt: skip
_BOOLS = {"skb_mode": "--skb-mode", "copy": "--copy"}
_STRS = {"interface", "ipv4", "mac", "gateway", "socket", "group", "ipv6", "gateway6"}
KEYS = set(_INTS) | set(_BOOLS) | _STRS | {"neighbour"}


def load(path: str) -> dict[str, Any]:
    """The config file as a dict: TOML, or INI with a [udpd] section."""
    p = Path(path)
    text = safeio.read_text(p, "--config")  # bounded: not /dev/zero whole
    if p.suffix in (".ini", ".conf", ".cfg"):
        return _load_ini(text, path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise VelozError(f"{path}: not valid TOML: {e}", code=2) from None
    except RecursionError:  # tomllib recurses into nested arrays and tables
        raise VelozError(f"{path}: not valid TOML: nested too deeply", code=2) from None


def _load_ini(text: str, path: str) -> dict[str, Any]:
    cp = configparser.ConfigParser(interpolation=None)
    try:
        cp.read_string(text, source=path)
    except configparser.Error as e:
        raise VelozError(f"{path}: not valid INI: {str(e).splitlines()[0]}", code=2) from None
    if cp.sections() != ["udpd"]:
        raise VelozError(f"{path}: an INI config has one section, [udpd]", code=2)
    out: dict[str, Any] = {}
    for key, value in cp["udpd"].items():
        if key == "neighbours":
            out["neighbour"] = [_ini_neigh(item.strip(), path)
                                for item in value.split(",") if item.strip()]  # fmt: skip
        elif key in _INTS:
            out[key] = _int(key, value, path)
        elif key in _BOOLS:
            if value.lower() not in ("true", "false", "yes", "no", "1", "0"):
                raise VelozError(f"{path}: {key} must be true or false, not {value!r}", code=2)
            out[key] = value.lower() in ("true", "yes", "1")
        else:
            out[key] = value
    return out


def _ini_neigh(item: str, path: str) -> dict[str, str]:
    ip, sep, mac = item.partition("=")
    if not sep:
        raise VelozError(f"{path}: neighbours: expected IP=MAC, not {item!r}", code=2)
    return {"ip": ip.strip(), "mac": mac.strip()}


def _int(key: str, value: str, path: str) -> int:
    try:
        return int(value, 10)
    except ValueError:
        raise VelozError(f"{path}: {key} must be a whole number, not {value!r}", code=2) from None


def _unicast(key: str, text: Any, path: str) -> ipaddress.IPv4Address:
    try:
        addr = ipaddress.IPv4Address(str(text))
    except ValueError:
        raise VelozError(f"{path}: {key}: not an IPv4 address: {text!r}", code=2) from None
    if addr.is_multicast or addr.is_loopback or addr.is_unspecified or int(addr) == 0xFFFFFFFF:
        raise VelozError(f"{path}: {key}: {addr} is not a unicast address", code=2)
    return addr


def _mac(key: str, text: Any, path: str) -> str:
    if not isinstance(text, str) or not _MAC.fullmatch(text):
        raise VelozError(f"{path}: {key}: not a MAC address: {text!r}", code=2)
    if int(text[:2], 16) & 1:
        raise VelozError(f"{path}: {key}: {text} is a multicast MAC address", code=2)
    return text.lower()


def _unicast6(key: str, text: Any, path: str) -> ipaddress.IPv6Address:
    try:
        addr = ipaddress.IPv6Address(str(text))
    except ValueError:
        raise VelozError(f"{path}: {key}: not an IPv6 address: {text!r}", code=2) from None
    if addr.is_multicast or addr.is_loopback or addr.is_unspecified or addr.ipv4_mapped:
        raise VelozError(f"{path}: {key}: {addr} is not a unicast address", code=2)
    return addr


def _ipv6_argv(cfg: dict[str, Any], path: str) -> list[str]:
    """--ip6 and --gateway6 for the ipv6 and gateway6 keys."""
    if "ipv6" not in cfg:
        if "gateway6" in cfg:
            raise VelozError(f"{path}: gateway6 needs ipv6", code=2)
        return []
    try:
        iface = ipaddress.IPv6Interface(cfg["ipv6"])
    except ValueError:
        raise VelozError(f"{path}: ipv6: expected an address and prefix, as "
                         f"fd00:198:18::3/64: {cfg['ipv6']!r}", code=2) from None  # fmt: skip
    if "/" not in cfg["ipv6"]:
        raise VelozError(f"{path}: ipv6: give the prefix length too, as {iface.ip}/64", code=2)
    _unicast6("ipv6", iface.ip, path)
    if iface.ip.is_link_local:
        raise VelozError(f"{path}: ipv6: {iface.ip} is link-local; the stack makes its own "
                         "from the MAC", code=2)  # fmt: skip
    if cfg.get("mtu", 1500) < 1280:
        raise VelozError(f"{path}: mtu: IPv6 needs at least 1280", code=2)
    argv = ["--ip6", str(iface)]
    if "gateway6" in cfg:
        gw = _unicast6("gateway6", cfg["gateway6"], path)
        if not gw.is_link_local and gw not in iface.network:
            raise VelozError(f"{path}: gateway6 {gw} is neither link-local nor on "
                             f"{iface.network}", code=2)  # fmt: skip
        argv += ["--gateway6", str(gw)]
    return argv


def flag_of(key: str) -> str:
    """vz-udpd's option for a config key: busy_poll_us -> --busy-poll-us."""
    return "--" + key.replace("_", "-")


def to_argv(cfg: dict[str, Any], path: str) -> list[str]:
    """vz-udpd's arguments for a config, every value checked first."""
    unknown = sorted(set(cfg) - KEYS)
    if unknown:
        raise VelozError(f"{path}: unknown key {unknown[0]!r} (see `veloz udpd --help`)", code=2)
    for key in ("interface", "ipv4"):
        if key not in cfg:
            raise VelozError(f"{path}: {key} is required", code=2)
    argv: list[str] = []
    for key in _STRS & set(cfg):
        if not isinstance(cfg[key], str):
            raise VelozError(f"{path}: {key} must be a string", code=2)
        if "\0" in cfg[key]:  # no argument of vz-udpd can hold one
            raise VelozError(f"{path}: {key} has a NUL character", code=2)
    if not _IFNAME.fullmatch(cfg["interface"]):
        raise VelozError(f"{path}: interface: not an interface name: {cfg['interface']!r}",
                         code=2)  # fmt: skip
    argv += ["--iface", cfg["interface"]]
    try:
        iface = ipaddress.IPv4Interface(cfg["ipv4"])
    except ValueError:
        raise VelozError(f"{path}: ipv4: expected an address and prefix, as 198.18.0.3/24: "
                         f"{cfg['ipv4']!r}", code=2) from None  # fmt: skip
    if "/" not in cfg["ipv4"]:
        raise VelozError(f"{path}: ipv4: give the prefix length too, as {iface.ip}/24", code=2)
    _unicast("ipv4", iface.ip, path)
    net = iface.network
    if net.prefixlen < 31 and iface.ip in (net.network_address, net.broadcast_address):
        raise VelozError(f"{path}: ipv4: {iface.ip} is the network or broadcast address of "
                         f"{net}", code=2)  # fmt: skip
    argv += ["--ip", str(iface)]
    if "mtu" in cfg and (not isinstance(cfg["mtu"], int) or isinstance(cfg["mtu"], bool)):
        low, high = options.limits("vz-udpd", "--mtu")
        raise VelozError(f"{path}: mtu must be a whole number in {low}..{high}", code=2)
    argv += _ipv6_argv(cfg, path)
    if "mac" in cfg:
        argv += ["--mac", _mac("mac", cfg["mac"], path)]
    if "gateway" in cfg:
        gw = _unicast("gateway", cfg["gateway"], path)
        if gw not in iface.network:
            raise VelozError(f"{path}: gateway {gw} is not on {iface.network}", code=2)
        argv += ["--gateway", str(gw)]
    if "socket" in cfg:
        if not cfg["socket"].startswith("/") or len(cfg["socket"]) > 107:
            raise VelozError(f"{path}: socket: an absolute path of at most 107 bytes", code=2)
        argv += ["--socket", cfg["socket"]]
    if "group" in cfg:
        argv += ["--group", cfg["group"]]
    for key in _INTS:
        if key in cfg:
            v, flag = cfg[key], flag_of(key)
            low, high = options.limits("vz-udpd", flag)
            if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
                raise VelozError(f"{path}: {key} must be a whole number in {low}..{high}",
                                 code=2)  # fmt: skip
            argv += [flag, str(v)]
    for key, flag in _BOOLS.items():
        if key in cfg:
            if not isinstance(cfg[key], bool):
                raise VelozError(f"{path}: {key} must be true or false", code=2)
            if cfg[key]:
                argv.append(flag)
    neighbours = cfg.get("neighbour", [])
    if not isinstance(neighbours, list) or len(neighbours) > 64:
        raise VelozError(f"{path}: neighbour: a list of at most 64 [[neighbour]] tables", code=2)
    for n in neighbours:
        if not isinstance(n, dict) or set(n) != {"ip", "mac"}:
            raise VelozError(f"{path}: each [[neighbour]] has ip and mac, nothing else", code=2)
        ip = _unicast("neighbour ip", n["ip"], path)
        argv += ["--neigh", f"{ip}={_mac('neighbour mac', n['mac'], path)}"]
    return argv


def check_host(cfg: dict[str, Any], path: str) -> None:
    """What --check can know of this machine besides the file: the
    interface, the group and the CPU exist (a config that would fail at
    start is not `ok`)."""
    import grp

    iface = cfg["interface"]
    if not Path(f"/sys/class/net/{iface}").exists():
        raise VelozError(f"{path}: interface: no interface {iface} here", code=2)
    if "group" in cfg:
        group = cfg["group"]
        try:
            if group.isdigit():
                grp.getgrgid(int(group))
            else:
                grp.getgrnam(group)
        except (KeyError, OverflowError):
            raise VelozError(f"{path}: group: no group {group}", code=2) from None
    if "cpu" in cfg and cfg["cpu"] not in os.sched_getaffinity(0):
        raise VelozError(f"{path}: cpu: CPU {cfg['cpu']} is not online or not allowed here",
                         code=2)  # fmt: skip
    mtu = _link_mtu(iface)
    if mtu is not None and cfg.get("mtu", 1500) > mtu:
        raise VelozError(f"{path}: mtu: {cfg.get('mtu', 1500)} is above {iface}'s MTU {mtu} "
                         "(larger frames would not leave it)", code=2)  # fmt: skip
    for key, family in (("ipv4", socket.AF_INET), ("ipv6", socket.AF_INET6)):
        if key in cfg:
            addr = str(ipaddress.ip_interface(cfg[key]).ip)
            if _kernel_holds(family, addr):
                raise VelozError(f"{path}: {key}: the kernel has {addr} already; the stack "
                                 "needs an address of its own", code=2)  # fmt: skip
    _check_socket_path(cfg.get("socket", DEFAULT_SOCKET), path)
    paths.tool("vz-udpd")  # a config for a program that is not built is not ok


def _link_mtu(iface: str) -> int | None:
    try:
        return int(Path(f"/sys/class/net/{iface}/mtu").read_text())
    except (OSError, ValueError):
        return None


def _kernel_holds(family: int, addr: str) -> bool:
    """Whether addr is one of this namespace's own addresses: only a local
    address can be bound without IP_FREEBIND."""
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        try:
            s.bind((addr, 0))
        except OSError as e:
            return e.errno != errno.EADDRNOTAVAIL
    return True


def _check_socket_path(sock: str, path: str) -> None:
    """What vz-udpd's listen_bind() and make_dir() would refuse: a path
    under a file, a file that is not a socket, a live poller's socket."""
    target = Path(sock)
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise VelozError(f"{path}: socket: {parent} is not a directory", code=2)
            break
    if target.is_symlink() or (target.exists() and not target.is_socket()):
        raise VelozError(f"{path}: socket: {sock} exists and is not a socket", code=2)
    if target.is_socket():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(sock)
            except OSError:
                return  # a dead poller's: vz-udpd replaces it
        raise VelozError(f"{path}: socket: another poller listens on {sock}", code=2)


def command(config_path: str, json_out: bool = False, interval_ms: int | None = None,
            replace: bool = False) -> list[str]:  # fmt: skip
    """vz-udpd's command line for a config file (checked first)."""
    return command_for(load(config_path), config_path, json_out, interval_ms, replace)


def command_for(cfg: dict[str, Any], where: str, json_out: bool = False,
                interval_ms: int | None = None, replace: bool = False) -> list[str]:  # fmt: skip
    """vz-udpd's command line for a config (checked first); where names it
    in errors (its file, or the instance file holding it)."""
    argv = to_argv(cfg, where)
    cmd = [str(paths.tool("vz-udpd")), *argv]
    if json_out:
        cmd.append("--json")
    if replace:
        cmd.append("--replace")
    if interval_ms is not None:
        cmd += ["--interval-ms", str(interval_ms)]
    return cmd


def config_of(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The config and what names it: --config's file, or the table an
    instance file holds (set by `veloz udpd --instance`)."""
    table = getattr(args, "config_table", None)
    if table is not None:
        return table, args.config_where
    return load(args.config), args.config


def stats_file(cfg: dict[str, Any]) -> str:
    """Where vz-udpd keeps its latest stats line (`veloz status`, --metrics)."""
    return str(cfg.get("socket", DEFAULT_SOCKET)) + ".stats.json"


def run(args: argparse.Namespace,
        before_exec: Callable[[Path], object] | None = None) -> int:  # fmt: skip
    """`veloz udpd`; before_exec(stats file), if given, runs last before
    vz-udpd takes this process's place (an instance's companion)."""
    if args.interval_ms is not None:
        options.check("vz-udpd", "--interval-ms", args.interval_ms)
    if args.check:
        # --check runs nothing: options that shape a run are a mistake here
        for given, option in ((args.json, "--json"), (args.replace, "--replace"),
                              (args.interval_ms is not None, "--interval-ms"),
                              (args.metrics is not None, "--metrics")):  # fmt: skip
            if given:
                raise VelozError(f"{option} does not go with --check (nothing runs)", code=2)
        cfg, where = config_of(args)
        to_argv(cfg, where)
        check_host(cfg, where)
        print(f"{where}: ok")
        return 0
    cfg, where = config_of(args)
    cmd = command_for(cfg, where, args.json, args.interval_ms, args.replace)
    if args.metrics is not None:
        metrics.parse_listen(args.metrics)
    if os.geteuid() != 0:
        raise VelozError("udpd needs root (it attaches an XDP program)", code=1)
    stats = stats_file(cfg)
    cmd += ["--stats-file", stats]
    if args.metrics is not None:
        # bound now: a busy address is refused before anything is attached
        sock = metrics.listen(args.metrics)
        metrics.fork_server(sock, lambda pid: metrics.UdpdCollector(Path(stats), pid))
        sock.close()
    if before_exec is not None:
        before_exec(Path(stats))
    os.execv(cmd[0], cmd)
    return 1  # not reached
