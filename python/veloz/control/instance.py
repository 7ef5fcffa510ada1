"""Instances: an NF, or udpd, as a service, described by one TOML file.

/etc/veloz/instances/NAME.toml (or any path ending in .toml) says what
`veloz run --instance NAME` runs, and `veloz@NAME.service` runs it:

    nf = "ddos"                      # required: an NF `veloz nfs` lists
    backend = "xdp"                  # required: xdp, xdp-generic, afxdp, dpdk
    ports = ["eth1"]                 # required: the interfaces, port 0, 1, ...
    config = "ddos.toml"             # the NF's config: a file (relative to
                                     # this one's folder) or an inline table
    metrics = "127.0.0.1:9464"       # --metrics
    ctl_group = "veloz"              # --ctl-group
    persist = false                  # true: the data path outlives the process
    [options]                        # more of `veloz run`'s backend options
    workers = 2

A udpd instance says kind = "udpd" and holds only config (udpd's, a file
or a table) and metrics; `veloz udpd --instance NAME` runs it under
`veloz-udpd@NAME.service`. Both kinds share the folder: one name, one
service.

Every key is checked, and unknown ones refused, before anything is
attached; the NF's config is read once and handed to the run as a table.
A reload (`veloz reload --instance NAME`, or SIGHUP to the runner) reads
the NF's config again and applies what changed as one control-socket
transaction; see reload().
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veloz.control import companion, objects, run, service
from veloz.control.client import Ctl, socket_path
from veloz.core import config, paths, safeio
from veloz.core.errors import VelozError

INSTANCE_DIR = Path("/etc/veloz/instances")
NF_KEYS = ("kind", "nf", "backend", "ports", "config", "metrics", "ctl_group", "persist",
           "options")  # fmt: skip
UDPD_KEYS = ("kind", "config", "metrics")
KINDS = ("nf", "udpd")
# a systemd instance name as %i gives it, and nothing that leaves the folder
_NAME = re.compile(r"^[A-Za-z0-9_@:-][A-Za-z0-9_.@:-]{0,127}$")
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
# What a reload cannot change in a running instance: a restart applies it.
RESTART_KEYS = ("nf", "backend", "ports", "metrics", "ctl_group", "persist", "options", "fields")


@dataclass
class Instance:
    path: Path
    kind: str = "nf"
    nf: str = ""
    backend: str = ""
    ports: list[str] = field(default_factory=list)
    config_file: Path | None = None  # the NF's config, a file...
    config_table: dict[str, Any] | None = None  # ... or a table of this file
    metrics: str | None = None
    ctl_group: str | None = None
    persist: bool = False
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def base(self) -> Path:
        """Where the NF config's relative file names start."""
        return self.config_file.parent if self.config_file else self.path.parent

    def config_values(self) -> dict[str, Any]:
        """The NF's (or udpd's) config as it is now in its file."""
        if self.config_file is not None:
            return config.load(str(self.config_file))
        return dict(self.config_table or {})


def path_of(name: str) -> Path:
    """NAME -> /etc/veloz/instances/NAME.toml; a path (a '/' or .toml) as is."""
    if "/" in name or name.endswith(".toml"):
        return Path(name)
    if not _NAME.fullmatch(name):
        raise VelozError(f"instance name {name!r}: letters, digits and _.@:- only")
    return INSTANCE_DIR / f"{name}.toml"


def load(name: str, kind: str = "nf") -> Instance:
    """The instance file, every key checked; one line on the first fault."""
    path = path_of(name)
    text = safeio.read_text(path, "instance")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise VelozError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise VelozError(f"{path}: not valid TOML: nested too deeply") from None
    found = data.get("kind", "nf")
    if found not in KINDS:
        raise VelozError(f"{path}: kind must be one of {', '.join(KINDS)}, not {found!r}")
    if found != kind:
        command = "veloz udpd --instance" if found == "udpd" else "veloz run --instance"
        raise VelozError(f"{path}: a {found} instance: `{command}` runs it")
    known = NF_KEYS if kind == "nf" else UDPD_KEYS
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise VelozError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(known)})")
    inst = Instance(path, kind)
    _read_config(inst, data)
    inst.metrics = _string(data, "metrics", path)
    if kind == "nf":
        _read_nf(inst, data)
    return inst


def _string(data: dict, key: str, path: Path) -> str | None:
    value = data.get(key)
    if value is not None and (not isinstance(value, str) or not value or "\0" in value):
        raise VelozError(f"{path}: {key} must be a non-empty string")
    return value


def _read_config(inst: Instance, data: dict) -> None:
    value = data.get("config")
    if value is None or isinstance(value, dict):
        inst.config_table = value or {}
        return
    if not isinstance(value, str) or not value or "\0" in value:
        raise VelozError(f"{inst.path}: config must be a file name or a table")
    inst.config_file = (inst.path.parent / value).absolute()
    if not inst.config_file.is_file():
        raise VelozError(f"{inst.path}: config: no such file: {inst.config_file}")


def _read_nf(inst: Instance, data: dict) -> None:
    path = inst.path
    for key in ("nf", "backend", "ports"):
        if key not in data:
            raise VelozError(f"{path}: {key} is required")
    inst.nf = _string(data, "nf", path) or ""
    try:
        paths.nf(inst.nf)  # an unknown NF: one line naming the known ones
    except VelozError as e:
        raise VelozError(f"{path}: {e}") from None
    inst.backend = _string(data, "backend", path) or ""
    if inst.backend not in run.TOOLS:
        raise VelozError(f"{path}: backend must be one of {', '.join(run.TOOLS)}, "
                         f"not {inst.backend!r}")  # fmt: skip
    inst.options = _read_options(data.get("options", {}), inst)
    ports = data["ports"]
    if not isinstance(ports, list) or not ports or not all(isinstance(p, str) for p in ports):
        raise VelozError(f"{path}: ports must be a list of interface names")
    eal = inst.backend == "dpdk" and inst.options.get("pmd") == "eal"
    for port in ports:
        if eal:
            continue  # a port EAL probes (a PCI address): no netdev to look for
        if not _IFNAME.fullmatch(port):
            raise VelozError(f"{path}: ports: not an interface name: {port!r}")
        if not Path("/sys/class/net", port).exists():
            raise VelozError(f"{path}: ports: no interface {port} here")
    if len(set(ports)) != len(ports):
        raise VelozError(f"{path}: ports: an interface is named twice")
    inst.ports = ports
    group = data.get("ctl_group")
    if group is not None and (isinstance(group, bool) or not isinstance(group, str | int)):
        raise VelozError(f"{path}: ctl_group must be a group name or number")
    inst.ctl_group = None if group is None else str(group)
    persist = data.get("persist", False)
    if not isinstance(persist, bool):
        raise VelozError(f"{path}: persist must be true or false")
    inst.persist = persist


def _read_options(table: object, inst: Instance) -> dict[str, Any]:
    """[options]: `veloz run`'s backend options by name (dashes or
    underscores), each of the instance's backend; values are checked by
    `veloz run`'s own parser when the run's command line is built."""
    if not isinstance(table, dict):
        raise VelozError(f"{inst.path}: options must be a table")
    out = {}
    offered = run.offered()
    for key, value in table.items():
        name = key.replace("_", "-")
        if name == "ctl-group":
            raise VelozError(f"{inst.path}: options: ctl_group is a key of its own")
        if name not in offered:
            raise VelozError(f"{inst.path}: options: unknown option {key!r} "
                             "(see `veloz run --help`)")  # fmt: skip
        if inst.backend not in offered[name].backends:
            raise VelozError(f"{inst.path}: options: {key} is not an option of the "
                             f"{inst.backend} backend")  # fmt: skip
        if isinstance(value, dict | list) or (isinstance(value, str) and "\0" in value):
            raise VelozError(f"{inst.path}: options: {key} must be a number, string or boolean")
        if offered[name].row["type"] == "flag" and not isinstance(value, bool):
            raise VelozError(f"{inst.path}: options: {key} is a flag: true or false")
        out[name] = value
    return out


def run_argv(inst: Instance) -> list[str]:
    """`veloz run`'s arguments for the instance (the NF config aside, which
    goes to the run as a table)."""
    argv = ["run", inst.nf, "--backend", inst.backend]
    for port in inst.ports:
        argv += ["--iface", port]
    if inst.metrics is not None:
        argv += ["--metrics", inst.metrics]
    if inst.ctl_group is not None:
        argv += ["--ctl-group", inst.ctl_group]
    for name, value in inst.options.items():
        if value is True:
            argv.append(f"--{name}")
        elif value is not False:
            argv += [f"--{name}", str(value)]
    if inst.persist:
        argv.append("--persist")
    return argv


def _plain(value: object) -> Any:
    """A config value as JSON sees it: what a record compares."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def record(inst: Instance, values: dict[str, Any]) -> dict[str, Any]:
    """What the instance runs with, as a reload compares it."""
    fields, objs = objects.split_config(inst.nf, values)
    mod = objects.module(inst.nf)
    fixed = mod.reload_fixed(objs) if mod is not None and hasattr(mod, "reload_fixed") else {}
    return _plain({
        "instance": str(inst.path), "nf": inst.nf, "backend": inst.backend,
        "ports": inst.ports, "metrics": inst.metrics, "ctl_group": inst.ctl_group,
        "persist": inst.persist, "options": inst.options, "fields": fields,
        "objects": _digest(objs), "fixed": {what: _digest(v) for what, v in fixed.items()},
    })  # fmt: skip


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(_plain(value), sort_keys=True).encode()).hexdigest()


def before_exec(inst: Instance, values: dict[str, Any]) -> Callable[[], None]:
    """What `veloz run --instance` does last before the runner takes its
    place: fork the service companion and name it to the runner."""

    def start() -> None:
        pid = service.start_nf(inst.ports[0], inst.nf, inst.backend, record(inst, values),
                               lambda: describe(inst.name, reload(str(inst.path))))  # fmt: skip
        os.environ[service.RELOAD_PID_ENV] = str(pid)

    return start


def _restart_needed(inst: Instance, started: dict, now: dict) -> None:
    for key in RESTART_KEYS:
        if started.get(key) != now[key]:
            if key == "fields":
                # compiled into the NF: a new run applies them, with the state
                raise VelozError(f"{inst.path}: the NF config's fields changed: a new run "
                                 f"applies them (`veloz run --instance {inst.name} --take-over`, "
                                 f"or systemctl restart veloz@{inst.name})")  # fmt: skip
            raise VelozError(f"{inst.path}: {key} changed: a restart applies it, a reload "
                             f"does not (systemctl restart veloz@{inst.name})")  # fmt: skip
    fixed = started.get("fixed") or {}
    for what, digest in now["fixed"].items():
        if fixed.get(what) != digest:
            raise VelozError(f"{inst.path}: {what} changed: a restart applies it, a reload "
                             f"does not (systemctl restart veloz@{inst.name})")  # fmt: skip


def describe(name: str, changes: int) -> str:
    """A reload's outcome, in one line."""
    if not changes:
        return f"instance {name}: nothing to change"
    return f"instance {name}: {changes} map changes applied in one transaction"


def reload(name: str) -> int:
    """Apply the instance's NF config, as it is now, to its running NF in one
    transaction: the objects that differ from what the NF holds (ddos's rules
    and allow-list, router's routes and neighbours, lb's [lb], VIPs and
    backends). A bad file, or a change only a restart applies (the module's
    reload_fixed: a synced router's routes, lb's health checks), changes
    nothing. Returns the number of map changes applied."""
    inst = load(name)
    values = inst.config_values()
    now = record(inst, values)
    ctl_path = socket_path(inst.ports[0])
    started = companion.read_status(companion.status_path(inst.ports[0], "instance"))
    if started is None or started.get("instance") != now["instance"]:
        raise VelozError(f"instance {inst.name} is not running here (no NF of it on {ctl_path})")
    _restart_needed(inst, started, now)
    objs = objects.split_config(inst.nf, values)[1]
    mod = objects.module(inst.nf)
    with Ctl(ctl_path) as ctl:
        if ctl.peer_pid() != started.get("pid"):
            raise VelozError(f"{ctl_path} is not served by instance {inst.name}'s runner")
        if mod is not None and hasattr(mod, "reload_ops"):
            ports = objects.Ports(inst.ports, objects.iface_macs(inst.ports))
            ops = mod.reload_ops(ctl, objs, ports, inst.base)
        elif started.get("objects") != now["objects"]:
            raise VelozError(f"{inst.path}: {inst.nf}'s objects changed: a restart applies "
                             f"them (systemctl restart veloz@{inst.name})")  # fmt: skip
        else:
            ops = []
        if ops:
            ctl.apply(ops)
    return len(ops)
