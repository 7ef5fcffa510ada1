"""The objects an NF's control plane manages (routes, rules, VIPs, ...).

An NF whose state is more than scalar config fields has a module here
(router.py, ddos.py, lb.py) that turns objects into map operations. The same
module serves two paths, so an object means the same thing in both:

  - start-up: tables in the NF's TOML config file (e.g. [[route]]) become an
    ops file the C tools apply before anything is attached (`veloz run`,
    `veloz replay`);
  - live: `veloz ctl OBJECT VERB ...` sends the ops to the running NF's
    control socket as one transaction.

A module defines:

    KEYS: frozenset[str]
        top-level config keys that hold objects, not config fields
    def config_ops(values: dict, ports: Ports, base: Path) -> list[Op]
        the objects of a config file (relative file names are relative to base)
    def reload_ops(ctl: Ctl, values: dict, ports: Ports, base: Path) -> list[Op]
        a reload (instance.py): from what the running NF holds to the file's
        objects, as one transaction; the whole file checked before anything is sent
    def reload_fixed(values: dict) -> dict[str, object]   (optional)
        what a reload cannot change, by name: a change of it asks for a restart
    ctl_VERB(args, ctl: Ctl) -> int
        the work of its `veloz ctl` subcommands, whose parser is
        veloz/cli/ctl_NF.py's add_ctl_commands (func=ctl_VERB)
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from veloz.control import abi
from veloz.core.errors import VelozError

# NF name -> module under veloz.control
MODULES = {"router": "router", "ddos": "ddos", "lb": "lb"}


@dataclass
class Ports:
    """The ports of a run, in order: port i is names[i] with MAC macs[i]."""

    names: list[str] = field(default_factory=list)
    macs: list[bytes] = field(default_factory=list)

    def number(self, text: str | int) -> int:
        """A port given as a number or as one of the run's interface names."""
        from veloz.control.ops import parse_u32
        from veloz.core.errors import VelozError

        if isinstance(text, str) and text in self.names:
            return self.names.index(text)
        if isinstance(text, str) and not text.lstrip("-").isdigit():
            known = ", ".join(self.names) or "none"
            raise VelozError(f"port '{text}' is neither a number nor a port of this run ({known})")
        port = parse_u32(text, "port", 0, abi.max_port())
        if self.names and port >= len(self.names):
            raise VelozError(f"port {port}: this run has ports 0 to {len(self.names) - 1}")
        return port

    def mac(self, port: int) -> bytes:
        """The port's MAC; offline (replay) ports get 02:00:00:00:00:<port+1>."""
        if port < len(self.macs) and self.macs[port]:
            return self.macs[port]
        return bytes([2, 0, 0, 0, 0, (port + 1) & 0xFF])


def module(nf: str) -> ModuleType | None:
    name = MODULES.get(nf)
    return importlib.import_module(f"veloz.control.{name}") if name else None


def nf_stats(ctl: object, nf: str) -> tuple[dict[str, int] | None, list | None]:
    """The NF's own counters (router, ddos, lb: frames per outcome) and lb's
    per VIP and backend (lb.stats()'s "vips"), read through the control
    socket, for --metrics and `veloz status`; (None, None) for other NFs."""
    mod = module(nf)
    if mod is None or not hasattr(mod, "counters"):
        return None, None
    if nf == "lb":
        full = mod.stats(ctl)
        return full["counters"], full["vips"]
    return mod.counters(ctl), None


def split_config(nf: str, values: dict[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """(config fields, objects) of a config file's top-level keys."""
    mod = module(nf)
    keys: frozenset[str] = getattr(mod, "KEYS", frozenset()) if mod else frozenset()
    fields = {k: v for k, v in values.items() if k not in keys}
    objects = {k: v for k, v in values.items() if k in keys}
    # fields that take a name in the config (router: table = "dir24")
    for key, names in getattr(mod, "NAMED_FIELDS", {}).items():
        value = fields.get(key)
        if isinstance(value, str) and value in names:
            fields[key] = names[value]
        elif isinstance(value, str) and not value.isdigit():
            raise VelozError(f"config key '{key}': '{value}' is not one of {', '.join(names)}")
    return fields, objects


def iface_macs(names: list[str]) -> list[bytes]:
    """The MAC of each interface in this network namespace (b"" if unknown)."""
    macs = []
    for name in names:
        try:
            text = Path(f"/sys/class/net/{name}/address").read_text().strip()
            macs.append(bytes(int(b, 16) for b in text.split(":")))
        except (OSError, ValueError):
            macs.append(b"")
    return macs


def ops_fd(nf: str, objects: dict[str, object], ports: Ports, base: Path) -> int | None:
    """The start-up ops of a config's objects in an inheritable memfd, or None.

    A memfd rather than a file: `veloz run` execs the C tool, and nothing would
    be left to remove the file afterwards. The tool reads /proc/self/fd/N.
    """
    mod = module(nf)
    if not objects or mod is None:
        return None
    from veloz.control.ops import Op

    ops: list[Op] = mod.config_ops(objects, ports, base)
    fd = os.memfd_create(f"veloz-{nf}-ops", 0)
    with os.fdopen(os.dup(fd), "w") as f:
        for op in ops:
            f.write(op.line())
            f.write("\n")
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd
