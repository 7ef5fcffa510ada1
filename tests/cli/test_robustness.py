# SPDX-License-Identifier: BSD-2-Clause
"""The CLI robustness tier (issue 22).

Every subcommand and every option is found in the parser itself (argparse),
and bad values are generated per class, not listed case by case:

- numbers: not a number, empty, NaN, infinities, negative, below and above
  the option's own bounds, overflow (every int/float option);
- choices: a word that is not one of them;
- options that do not apply: the option groups of `run` (each names the
  backends it belongs to), `gen`'s sink-mode group against its sending
  options, `udpd --check` against the options that shape a run;
- files: an input that is /dev/zero, a 1 GiB (sparse) file, missing, a
  directory; an output that is the input itself (by path, symlink, hard
  link) or /dev/full; stdout that is /dev/full or a pipe closed early;
- host names that do not exist: an interface, a group, a CPU (`--check`).

Each case asserts: exactly one line on stderr and it starts with `veloz:`
(and names the option when there is one), the right exit status (2: bad
input; 1: a failed write), no traceback, no input file changed, nothing
left in this tier's own TMPDIR; and at the end, no new namespace, XDP
program, /dev/shm or /run/veloz entry.

Parse-level and Python-level cases run in-process, with every way out to a
C tool (exec, subprocess) replaced by one that fails the case: a bad value
that reaches a tool was not refused. Cases that need a real process (stdout,
signals, the C tools' own files) run as subprocesses, in parallel.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import veloz.lab.hosts  # noqa: F401  before _in_process patches Popen: it subclasses it
from veloz import cli
from veloz.control.client import Ctl
from veloz.core import paths

REPO = Path(__file__).resolve().parents[2]
PCAP = REPO / "tests" / "vectors" / "l3l4.pcap"
BIG_PCAP = REPO / "tests" / "vectors" / "garbage.pcap"

# Values for required arguments, so that a case differs from a good
# invocation in one argument only. Keyed by argparse dest; {name} is a file
# of the `files` fixture.
BASE = {
    "nf": "drop",
    "iface": "lo",
    "input": "{pcap}",
    "experiment": "drop",
    "directory": "{results}",
    "config": "{udpd_config}",
}
# Subcommands that need the testbed, a running NF or root even to refuse
# some input after parsing: only their parse-level classes run here.
PARSE_ONLY = ("testbed", "demo", "ctl", "report")
# Options whose numbers are strings to argparse (rates with units, lists),
# checked after parsing: they get the number classes too.
NUMBER_TEXT = {("gen",): ["--rate"], ("bench",): ["--rates", "--sizes"], ("sim",): ["--ramp"]}


class ReachedTool(Exception):  # noqa: N818 - a verdict, not an error of the code
    """A bad value got past every check and would have run a C tool."""


@dataclass
class Case:
    id: str
    argv: list[str]
    code: int
    names: str | None = None  # the option the message must name
    real: bool = False  # run as a process (stdout, signals, C tools' files)
    stdout: str | None = None  # "full" or "pipe"
    expect: str | None = None  # a phrase the one line must hold
    skip_unless_root: bool = False
    tags: set = field(default_factory=set)


# ---- discovery ---------------------------------------------------------------


def commands(parser: argparse.ArgumentParser, path: tuple = ()) -> list:
    """(path, parser) of every command that takes arguments, nested ones too."""
    out = []
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if path and not subs:
        out.append((path, parser))
    for s in subs:
        for name, sub in s.choices.items():
            out += commands(sub, (*path, name))
    return out


def valued(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if not isinstance(a, argparse._HelpAction) and a.nargs != 0]  # fmt: skip


# Arguments a command needs unless it runs an instance file (--instance):
# argparse cannot say so, the command checks them itself.
NEEDED = {("run",): ("nf", "backend", "iface")}


def base_argv(path: tuple, parser: argparse.ArgumentParser, skip: str | None = None) -> list:
    """A good invocation of the command: its required arguments only."""
    argv = list(path)
    for a in parser._actions:
        required = a.required or a.dest in NEEDED.get(path, ())
        if not required or a.dest == skip or isinstance(a, argparse._HelpAction):
            continue
        if a.dest in BASE:
            value = BASE[a.dest]
        elif a.choices:
            value = list(a.choices)[0]
        else:
            pytest.fail(f"`veloz {' '.join(path)}`: no base value for {a.dest}: add it to BASE")
        argv += [value] if not a.option_strings else [a.option_strings[-1], value]
    return argv


def bad_numbers(kind: type, lo: float | None, hi: float | None) -> dict[str, str]:
    """Values of one option that every numeric option must refuse."""
    bad = {"word": "abc", "empty": "", "nan": "nan", "inf": "inf", "-inf": "-inf",
           "overflow": "1e400", "huge": "9" * 40}  # fmt: skip
    if kind is int:
        bad["fraction"] = "1.5"
    if lo is not None:
        bad["negative"] = "-1" if lo >= 0 else str(lo * 10)
        if lo > 0:
            bad["below"] = str(lo - 1) if kind is int else "0"
    if hi is not None:
        bad["above"] = str(hi + 1) if kind is int else repr(hi * 2)
    return bad


def one_good_value(action: argparse.Action) -> list[str]:
    """The option given with a value it accepts, not its default."""
    if action.nargs == 0:
        return [action.option_strings[-1]]
    if action.choices:
        choices = [c for c in action.choices if c != action.default]
        return [action.option_strings[-1], str(choices[0])]
    bounds = getattr(action.type, "bounds", None)
    if bounds:
        kind, lo, hi = bounds
        value = lo + 1 if kind is int and lo + 1 <= hi else lo if lo else 1
        if value == action.default:
            value = hi
        return [action.option_strings[-1], str(value)]
    return [action.option_strings[-1], "x"]


def generate() -> list[Case]:
    parser = cli.build_parser()
    cases: list[Case] = []
    by_path = dict(commands(parser))
    for path, p in by_path.items():
        label = " ".join(path)
        for a in valued(p):
            bounds = getattr(a.type, "bounds", None)
            option = a.option_strings[-1] if a.option_strings else None
            if a.type in (int, float):
                pytest.fail(f"`veloz {label} {option}` has an unbounded {a.type.__name__}")
            if bounds:
                for cls, value in bad_numbers(*bounds).items():
                    argv = base_argv(path, p) + [option, value]
                    cases.append(Case(f"{label} {option} {cls}", argv, 2, names=option))
            if option in NUMBER_TEXT.get(path, ()):
                for cls in ("word", "empty", "nan", "inf", "negative", "huge"):
                    value = {"word": "abc", "empty": "", "nan": "nan", "inf": "inf",
                             "negative": "-1", "huge": "9" * 400}[cls]  # fmt: skip
                    argv = base_argv(path, p) + [option, value]
                    cases.append(Case(f"{label} {option} {cls}", argv, 2, names=option))
            if a.choices and option:
                argv = base_argv(path, p) + [option, "no-such-choice"]
                cases.append(Case(f"{label} {option} choice", argv, 2, names=option))
    cases += inapplicable(by_path)
    cases += files(by_path)
    cases += streams()
    cases += hosts()
    cases += ctl_values(by_path)
    return cases


def _group_backends(title: str, backends: list[str]) -> set[str]:
    words = title.replace(",", " ").split()
    return {b for b in backends if b in words}


def inapplicable(by_path: dict) -> list[Case]:
    cases = []
    # run: each option group is titled with the backends it belongs to
    run = by_path[("run",)]
    backend = next(a for a in run._actions if a.dest == "backend")
    for group in run._action_groups:
        owners = _group_backends(group.title or "", list(backend.choices))
        if not owners:
            continue
        for a in group._group_actions:
            for b in backend.choices:
                if b in owners:
                    continue
                argv = ["run", "drop", "--backend", b, "--iface", "lo", *one_good_value(a)]
                cases.append(Case(f"run {b} {a.option_strings[-1]} inapplicable", argv, 2,
                                  names=a.option_strings[-1]))  # fmt: skip
    # gen: the sink-mode group without --sink; the sending options with it
    gen = by_path[("gen",)]
    sink = next(g for g in gen._action_groups if g.title == "sink mode")
    sink_opts = {a.dest for a in sink._group_actions}
    shared = {"iface", "duration", "json", "help", "sink"}
    for a in gen._actions:
        if a.dest in shared or not a.option_strings:
            continue
        with_sink = a.dest not in sink_opts
        argv = ["gen", "--iface", "lo", *one_good_value(a)] + (["--sink"] if with_sink else [])
        cases.append(Case(f"gen {a.option_strings[-1]} {'with' if with_sink else 'without'} "
                          "--sink", argv, 2, names=a.option_strings[-1]))  # fmt: skip
    # udpd --check runs nothing: the options that shape a run do not apply
    udpd = by_path[("udpd",)]
    for a in udpd._actions:
        if a.option_strings and not a.required and a.dest not in ("check", "help"):
            argv = ["udpd", "--config", "{udpd_config}", "--check", *one_good_value(a)]
            cases.append(Case(f"udpd --check {a.option_strings[-1]}", argv, 2,
                              names=a.option_strings[-1]))  # fmt: skip
    # sim: options of a model that was not chosen
    for option, value in (("--burst-us", "5"), ("--zipf-s", "1.2"), ("--wake-us", "5")):
        cases.append(Case(f"sim {option} inapplicable", ["sim", option, value], 2, names=option))
    return cases


def files(by_path: dict) -> list[Case]:
    """Inputs that are endless, huge, missing or a directory; outputs that
    are an input or cannot be written."""
    cases = []
    bad_inputs = {"/dev/zero": "{zero}", "1GiB": "{huge}", "missing": "/nonexistent/veloz",
                  "directory": "{tmp}"}  # fmt: skip
    inputs = [(("run",), "--config"), (("replay",), "--config"), (("replay",), "--in"),
              (("udpd",), "--config")]  # fmt: skip
    for path, option in inputs:
        p = by_path[path]
        dest = next(a.dest for a in p._actions if option in a.option_strings)
        for cls, value in bad_inputs.items():
            argv = base_argv(path, p, skip=dest) + [option, value]
            if path == ("udpd",):
                argv.append("--check")
            # replay's pcap is read by vz-replay: a real process
            real = option == "--in"
            cases.append(Case(f"{' '.join(path)} {option} {cls}", argv, 2, names=option,
                              real=real))  # fmt: skip
    # an instance file: the message names the instance and what is wrong with it
    for path in (("run",), ("udpd",), ("reload",)):
        for cls, value in bad_inputs.items():
            argv = [*path, "--instance", value]
            cases.append(Case(f"{' '.join(path)} --instance {cls}", argv, 2, names="instance"))
    # build: a source that is not NAME.c or is missing, an --outdir that is not a directory
    for cls, value, expect in (("missing", "/nonexistent/veloz.c", "no such file"),
                               ("directory", "{tmp}", "NAME.c"),
                               ("/dev/zero", "{zero}", "NAME.c")):  # fmt: skip
        cases.append(Case(f"build source {cls}", ["build", value], 2, expect=expect))
    for cls, value in (("missing", "/nonexistent/veloz"), ("a file", "{pcap}")):
        argv = ["build", str(REPO / "nf" / "drop.c"), "--outdir", value]
        cases.append(Case(f"build --outdir {cls}", argv, 2, names="--outdir"))
    # an output that is an input: refused before it is opened (and truncated)
    for cls, out in (
        ("same path", "{pcap}"),
        ("symlink", "{pcap_link}"),
        ("hard link", "{pcap_hard}"),
    ):
        argv = ["replay", "tx", "--backend", "native", "--in", "{pcap}", "--out", out]
        cases.append(Case(f"replay --out is --in ({cls})", argv, 2, names="--out"))
        # and the C tool refuses it alone too
        cases.append(Case(f"vz-replay --out is --in ({cls})", ["@vz-replay", "--in", "{pcap}",
                          "--out", out], 2, names="--out", real=True))  # fmt: skip
    argv = ["replay", "tx", "--backend", "native", "--in", "{pcap}", "--config", "{nf_config}",
            "--out", "{nf_config}"]  # fmt: skip
    cases.append(Case("replay --out is --config", argv, 2, names="--out"))
    # an output that cannot be written: a failure, never "wrote N packets"
    cases.append(Case("replay --out /dev/full", ["replay", "tx", "--backend", "native", "--in",
                      "{pcap}", "--out", "/dev/full"], 1, names="--out", real=True))  # fmt: skip
    cases.append(
        Case(
            "route-table --out /dev/full",
            ["route-table", "--count", "1000", "--out", "/dev/full"],
            1,
            names="--out",
        )
    )
    cases.append(
        Case(
            "route-table --out directory",
            ["route-table", "--count", "1000", "--out", "{tmp}"],
            2,
            names="--out",
        )
    )
    return cases


def streams() -> list[Case]:
    """stdout that is full, or a reader that leaves early."""
    cases = []
    printing = [["nfs"], ["nfs", "--json"], ["sim", "--json", "--cores", "2"],
                ["route-table", "--count", "5000"],
                ["udpd", "--config", "{udpd_config}", "--check"],
                ["replay", "tx", "--backend", "native", "--in", "{pcap}", "--json"]]  # fmt: skip
    for argv in printing:
        cases.append(Case(f"{' '.join(argv[:2])} > /dev/full", argv, 1, real=True,
                          stdout="full", expect="cannot write"))  # fmt: skip
    for argv in (["route-table"], ["replay", "tx", "--backend", "native", "--in", "{big_pcap}",
                                   "--json", "--repeat", "20"]):  # fmt: skip
        cases.append(Case(f"{argv[0]} | head -1", argv, 141, real=True, stdout="pipe"))
    return cases


def _kernel_address() -> str | None:
    """A unicast IPv4 address (with its prefix) of this namespace, not loopback."""
    done = subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True,
                          check=False)  # fmt: skip
    for link in json.loads(done.stdout or "[]"):
        for a in link.get("addr_info", []):
            if not a["local"].startswith("127."):
                return f"{a['local']}/{a['prefixlen']}"
    return None


def hosts() -> list[Case]:
    """Names of things the host does not have, which --check and run refuse."""
    cases = []
    for cls, line in (("interface", 'interface = "vz-nope0"'), ("group", 'group = "vz-nogroup"'),
                      ("cpu", "cpu = 1023")):  # fmt: skip
        cases.append(Case(f"udpd --check no such {cls}", ["udpd", "--config", f"@cfg:{line}",
                          "--check"], 2, expect=cls))  # fmt: skip
    # what vz-udpd would refuse at start, or get wrong: its socket under a
    # file, on a file, or on a live poller's socket; an address the kernel
    # has already (it would answer ARP for it too)
    for cls, line, expect in (
        ("socket under a file", 'socket = "{pcap}/udpd.sock"', "not a directory"),
        ("socket on a file", 'socket = "{pcap}"', "not a socket"),
        ("socket served", 'socket = "{live_sock}"', "another poller"),
    ):
        cases.append(Case(f"udpd --check {cls}", ["udpd", "--config", f"@cfg:{line}", "--check"],
                          2, expect=expect))  # fmt: skip
    held = _kernel_address()
    if held:
        cases.append(Case("udpd --check ipv4 the kernel's", ["udpd", "--config",
                          f'@cfg:ipv4 = "{held}"', "--check"], 2, expect="kernel"))  # fmt: skip
    for backend in ("xdp", "xdp-generic", "afxdp", "dpdk", "linux"):
        argv = ["run", "drop", "--backend", backend, "--iface", "vz-nope0", "--duration", "1"]
        cases.append(Case(f"run {backend} no such interface", argv, 2, real=True,
                          expect="vz-nope0", skip_unless_root=True))  # fmt: skip
    for argv in (["gen", "--iface", "vz-nope0", "--count", "1", "--dst-mac",
                  "02:00:00:00:00:01", "--dst-ip", "198.18.0.9"],
                 ["gen", "--iface", "vz-nope0", "--sink", "--duration", "1"]):  # fmt: skip
        cases.append(Case(f"gen{' --sink' * ('--sink' in argv)} no such interface", argv, 2,
                          real=True, expect="vz-nope0", skip_unless_root=True))  # fmt: skip
    cases.append(Case("run --ctl-group no such group", ["run", "drop", "--backend", "xdp",
                      "--iface", "lo", "--ctl-group", "vz-nogroup", "--duration", "1"], 2,
                      real=True, names="--ctl-group", skip_unless_root=True))  # fmt: skip
    return cases


# ---- veloz ctl: values checked before connecting -------------------------------

# A good invocation of each `veloz ctl` command that takes values, as (dest,
# tokens) pairs, so a case swaps exactly one value for a bad one. Every one
# passes the checks (test_ctl_good_values_pass) and would then connect.
CTL_GOOD: dict[tuple, list[tuple[str, list[str]]]] = {
    ("ctl", "dump"): [("map", ["router_routes4"])],
    ("ctl", "route", "add"): [("prefix", ["198.18.5.0/24"]), ("kind", ["via"]),
                              ("via", ["198.18.1.2"]), ("more", ["via", "198.18.1.3"]),
                              ("port", ["--port", "1"])],
    ("ctl", "route", "del"): [("prefix", ["198.18.5.0/24"])],
    ("ctl", "route", "load"): [("file", ["{routes}"])],
    ("ctl", "route", "list"): [("limit", ["--limit", "5"])],
    ("ctl", "neigh", "add"): [("address", ["198.18.1.2"]), ("mac", ["02:00:00:00:00:02"])],
    ("ctl", "neigh", "del"): [("address", ["198.18.1.2"])],
    ("ctl", "rule", "add"): [("action", ["limit"]), ("src", ["--src", "198.18.0.0/16"]),
                             ("proto", ["--proto", "tcp"]), ("dport", ["--dport", "80"]),
                             ("tcp_flags", ["--tcp-flags", "syn,!ack"]),
                             ("rate", ["--rate", "100"]), ("burst", ["--burst", "10"]),
                             ("slot", ["--slot", "3"])],
    ("ctl", "rule", "del"): [("id", ["3"])],
    ("ctl", "allow", "add"): [("prefixes", ["198.18.0.0/16"])],
    ("ctl", "allow", "del"): [("prefixes", ["198.18.0.0/16"])],
    ("ctl", "vip", "add"): [("address", ["198.18.100.1"]), ("port", ["80"]), ("proto", ["tcp"]),
                            ("backend", ["--backend", "198.18.1.10:weight=2"])],
    ("ctl", "vip", "del"): [("address", ["198.18.100.1"]), ("port", ["80"]), ("proto", ["tcp"])],
    ("ctl", "backend", "add"): [("address", ["198.18.100.1"]), ("port", ["80"]),
                                ("proto", ["tcp"]), ("backend", ["198.18.1.10"]),
                                ("weight", ["--weight", "3"])],
    ("ctl", "backend", "del"): [("address", ["198.18.100.1"]), ("port", ["80"]),
                                ("proto", ["tcp"]), ("backend", ["198.18.1.10"])],
    ("ctl", "lb", "set"): [("source4", ["--source4", "198.18.0.1"]),
                           ("source6", ["--source6", "fd00:198:18::1"]),
                           ("next_hop_mac", ["--next-hop-mac", "02:00:00:00:00:fe"]),
                           ("mac", ["--mac", "02:00:00:00:00:01"])],
}  # fmt: skip
# What kind of value each dest is; its bad values are generated per kind.
CTL_KIND = {"prefix": "prefix", "prefixes": "prefix", "src": "prefix", "via": "address",
            "address": "address", "source4": "address", "source6": "address", "mac": "mac",
            "next_hop_mac": "mac", "dport": "number", "rate": "number", "burst": "number",
            "slot": "number", "weight": "number", "id": "number", "proto": "word",
            "action": "word", "kind": "word", "tcp_flags": "word", "file": "file",
            "map": "map", "limit": "bounded"}  # fmt: skip
# A dest whose kind depends on the command
CTL_KIND_OF = {(("ctl", "route", "add"), "port"): "egress",
               (("ctl", "route", "add"), "more"): "address",
               (("ctl", "vip", "add"), "port"): "number",
               (("ctl", "vip", "del"), "port"): "number",
               (("ctl", "backend", "add"), "port"): "number",
               (("ctl", "backend", "del"), "port"): "number",
               (("ctl", "vip", "add"), "backend"): "backend",
               (("ctl", "backend", "add"), "backend"): "backend",
               (("ctl", "backend", "del"), "backend"): "address"}  # fmt: skip
CTL_BAD = {
    "number": {"word": "abc", "empty": "", "nan": "nan", "inf": "inf", "-inf": "-inf",
               "fraction": "1.5", "negative": "-1", "huge": "9" * 40, "overflow": "1e400",
               "above u32": "4294967296"},
    "prefix": {"word": "abc", "empty": "", "host bits": "198.18.0.1/24",
               "long": "198.18.0.0/33", "long6": "fd00::/129", "no length": "198.18.0.0/",
               "nan length": "198.18.0.0/nan", "short address": "198.18/16"},
    "address": {"word": "abc", "empty": "", "octet": "198.18.0.256", "hex": "fd00::g",
                "prefix": "198.18.0.1/32", "short": "198.18.0"},
    "mac": {"word": "abc", "empty": "", "short": "02:00:00:00:00", "hex": "02:00:00:00:00:0g",
            "long": "02:00:00:00:00:01:02", "dotted": "0200.0000.0001"},
    "word": {"word": "no-such-thing", "empty": ""},
    "backend": {"word": "abc", "empty": "", "weight 0": "198.18.1.10:weight=0",
                "weight nan": "198.18.1.10:weight=nan", "weight huge": "198.18.1.10:weight=65536"},
    "egress": {"negative": "-1", "above": "64", "empty": "", "slash": "a/b",
               "long name": "x" * 16},
    "file": {"/dev/zero": "{zero}", "1GiB": "{huge}", "missing": "/nonexistent/veloz",
             "directory": "{tmp}", "bad line": "{bad_routes}"},
    "map": {"empty": "", "space": "a b", "newline": "a\nb", "long": "x" * 64},
    "bounded": {},  # a number bounded in argparse: bad_numbers() covers it
}  # fmt: skip


def ctl_kind(path: tuple, dest: str) -> str:
    return CTL_KIND_OF.get((path, dest)) or CTL_KIND[dest]


def ctl_argv(path: tuple, good: list, dest: str | None = None, value: str = "") -> list[str]:
    argv = list(path)
    for d, tokens in good:
        argv += tokens if d != dest else [*tokens[:-1], value]
    return argv


def ctl_values(by_path: dict) -> list[Case]:
    """Every value of every `veloz ctl` command, bad in each way its kind can
    be: refused before connecting (nothing runs, and no NF is asked)."""
    cases = []
    for path, good in CTL_GOOD.items():
        for dest, _ in good:
            for cls, value in CTL_BAD[ctl_kind(path, dest)].items():
                cases.append(Case(f"{' '.join(path)} {dest} {cls}",
                                  ctl_argv(path, good, dest, value), 2, tags={"ctl"}))  # fmt: skip
    for cls, value in (("empty", ""), ("slash", "a/b"), ("long", "x" * 16), ("space", "a b"),
                       ("dot", "..")):  # fmt: skip
        cases.append(Case(f"ctl --iface {cls}", ["ctl", "--iface", value, "stats"], 2,
                          names="--iface", tags={"ctl"}))  # fmt: skip
    return cases


CASES = generate()


# ---- fixtures ----------------------------------------------------------------


# What the testbed lane (tests/net), running beside this tier in `make test`,
# makes and removes as it goes: namespaces, and under /run/veloz the files
# of runs in those namespaces, named by their namespace's inode.
TESTBED_LANE_NETNS = ("vz-gen", "vz-dut", "vz-sink", "vz-mgmt", "vz-ssh-")
NETNS_INODE = re.compile(r"(?:^|[/-])(?:net)?(\d{9,})-")
OWNER_PID = re.compile(r"-(\d+)$")  # a record named for its process


def _ours(path: Path) -> bool:
    """A /run/veloz entry of this network namespace, or of none; not one
    named for a live process in another (the testbed lane's dpdk record,
    dpdk-hugepages-PID)."""
    here = os.stat("/proc/self/ns/net").st_ino
    found = NETNS_INODE.search(path.name)
    if found is not None:
        return int(found.group(1)) == here
    pid = OWNER_PID.search(path.name)
    try:
        return pid is None or os.stat(f"/proc/{pid.group(1)}/ns/net").st_ino == here
    except OSError:
        return True  # its process is gone: a leftover


def _snapshot() -> dict[str, set]:
    """What this tier must not leave behind, on the whole machine."""
    state: dict[str, set] = {}
    ns = Path("/run/netns")
    names = {p.name for p in ns.iterdir()} if ns.is_dir() else set()
    state["netns"] = {n for n in names if not n.startswith(TESTBED_LANE_NETNS)}
    state["shm"] = {p.name for p in Path("/dev/shm").iterdir()}
    run = Path("/run/veloz")
    state["run"] = {str(p) for p in run.rglob("*") if _ours(p)} if run.is_dir() else set()
    done = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True,
                          check=False)  # fmt: skip
    links = json.loads(done.stdout or "[]")
    state["xdp"] = {link["ifname"] for link in links if "xdp" in link}
    return state


@pytest.fixture(scope="module")
def files_(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    work = tmp / "work"  # the tier's own TMPDIR: must stay empty
    work.mkdir()
    f = {"tmp": str(tmp / "adir"), "work": str(work)}
    Path(f["tmp"]).mkdir()
    shutil.copy(PCAP, tmp / "in.pcap")
    shutil.copy(BIG_PCAP, tmp / "big.pcap")
    f["pcap"], f["big_pcap"] = str(tmp / "in.pcap"), str(tmp / "big.pcap")
    os.symlink(tmp / "in.pcap", tmp / "link.pcap")
    os.link(tmp / "in.pcap", tmp / "hard.pcap")
    f["pcap_link"], f["pcap_hard"] = str(tmp / "link.pcap"), str(tmp / "hard.pcap")
    huge = tmp / "huge.toml"
    with huge.open("wb") as h:
        h.truncate(1 << 30)  # sparse: a 1 GiB file that costs no disk
    f["huge"], f["zero"] = str(huge), "/dev/zero"
    (tmp / "nf.toml").write_text("")
    f["nf_config"] = str(tmp / "nf.toml")
    (tmp / "udpd.toml").write_text('interface = "lo"\nipv4 = "198.18.0.3/24"\n')
    f["udpd_config"] = str(tmp / "udpd.toml")
    results = tmp / "results"
    results.mkdir()
    f["results"] = str(results)
    (tmp / "routes").write_text("198.18.5.0/24 198.18.1.2 1\n198.18.6.0/24 blackhole\n")
    (tmp / "bad_routes").write_text("198.18.5.0/24 198.18.1.2 1\n198.18.6.0/24 nope\n")
    f["routes"], f["bad_routes"] = str(tmp / "routes"), str(tmp / "bad_routes")
    # a live poller's socket, as far as anyone connecting can tell
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(str(tmp / "live.sock"))
    live.listen(64)
    f["live_sock"] = str(tmp / "live.sock")
    before = _snapshot()
    yield f
    live.close()
    after = _snapshot()
    for key in before:
        new = {x for x in after[key] - before[key] if "vz" in x or "veloz" in x}
        assert not new, f"left behind in {key}: {sorted(new)}"


def _checksums(f: dict) -> dict[str, str]:
    out = {}
    for key in ("pcap", "big_pcap", "nf_config", "udpd_config"):
        out[key] = hashlib.sha256(Path(f[key]).read_bytes()).hexdigest()
    return out


def _expand(argv: list[str], f: dict, tmp: Path) -> list[str]:
    out = []
    for arg in argv:
        if arg.startswith("@cfg:"):  # the udpd config with one key set
            key = arg[5:].split("=")[0].strip()
            lines = [x for x in Path(f["udpd_config"]).read_text().splitlines()
                     if x.split("=")[0].strip() != key]  # fmt: skip
            cfg = tmp / "host.toml"
            cfg.write_text("\n".join([*lines, arg[5:].format(**f)]) + "\n")
            arg = str(cfg)
        out.append(arg.format(**f))
    return out


def _in_process(argv: list[str], monkeypatch) -> tuple[int, str]:
    def reached(*a, **k):
        raise ReachedTool(f"a bad value reached a tool: {a[0] if a else k}")

    parse = cli.parse_args

    def parse_only(av: list[str]) -> argparse.Namespace:
        args = parse(av)
        if av[0] == "ctl":  # its values are checked, then it would connect
            return args
        if av[0] in PARSE_ONLY:  # past the parser these would touch the testbed
            args.func, args.needs_ctl = reached, False
        return args

    monkeypatch.setattr(cli, "parse_args", parse_only)
    monkeypatch.setattr(Ctl, "for_iface", reached)
    monkeypatch.setattr(os, "execv", reached)
    monkeypatch.setattr(os, "execvp", reached)
    monkeypatch.setattr(subprocess, "Popen", reached)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, err.getvalue()


def _real(case: Case, argv: list[str], env: dict) -> tuple[int, str]:
    if argv[0] == "@vz-replay":
        nf = paths.nf("tx")
        cmd = [str(paths.tool("vz-replay")), "--bpf", str(nf.bpf), "--native", str(nf.native),
               "--backend", "native", *argv[1:]]  # fmt: skip
    else:
        cmd = [sys.executable, "-m", "veloz.cli", *argv]
    if case.stdout == "pipe":
        # the reader takes one line and leaves, as `| head -1`
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert p.stdout is not None
        p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode() if p.stderr else ""
        return p.wait(timeout=120), err
    with open("/dev/full", "w") if case.stdout == "full" else open(os.devnull, "w") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, env=env, timeout=120,
                              check=False)  # fmt: skip
    return done.returncode, done.stderr.decode()


def _check(case: Case, code: int, err: str) -> None:
    assert "Traceback" not in err, err
    lines = err.splitlines()
    if case.stdout == "pipe":  # a reader that left is no error: silence
        assert lines == [] and code in (0, 128 + signal.SIGPIPE), (code, err)
        return
    assert len(lines) == 1 and lines[0].startswith("veloz: "), err
    assert code == case.code, (code, err)
    if case.names:
        assert case.names in lines[0], f"the message does not name {case.names}: {err}"
    if case.expect:
        assert case.expect in lines[0], err


# ---- the tier ----------------------------------------------------------------


IN_PROCESS = [c for c in CASES if not c.real]
REAL = [c for c in CASES if c.real]


@pytest.mark.parametrize("case", IN_PROCESS, ids=[c.id for c in IN_PROCESS])
def test_bad_input_in_process(case, files_, monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", files_["work"])
    before = _checksums(files_)
    code, err = _in_process(_expand(case.argv, files_, tmp_path), monkeypatch)
    _check(case, code, err)
    assert _checksums(files_) == before, "an input changed"
    assert not os.listdir(files_["work"]), "temporary files left behind"


def test_bad_input_in_processes(files_, tmp_path):
    """The cases that need a real process, in parallel: all of them, every
    failure reported at once."""
    env = {**os.environ, "TMPDIR": files_["work"]}
    root = os.geteuid() == 0
    todo = [c for c in REAL if root or not c.skip_unless_root]
    before = _checksums(files_)

    def one(case: Case) -> str | None:
        argv = _expand(case.argv, files_, tmp_path)
        code, err = _real(case, argv, env)
        try:
            _check(case, code, err)
        except AssertionError as e:
            return f"{case.id}: {e}"
        return None

    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = [f for f in pool.map(one, todo) if f]
    assert not failures, "\n".join(failures)
    assert _checksums(files_) == before, "an input changed"
    assert not os.listdir(files_["work"]), "temporary files left behind"


def test_the_tier_covers_every_command():
    """Every command with a value-taking option has generated cases."""
    covered = {c.argv[0] for c in CASES}
    for path, p in commands(cli.build_parser()):
        if any(a.option_strings and a.nargs != 0 for a in valued(p)):
            assert path[0] in covered, f"no case for `veloz {' '.join(path)}`"
    assert len(CASES) > 300


@pytest.mark.parametrize("path", list(CTL_GOOD), ids=[" ".join(p) for p in CTL_GOOD])
def test_ctl_good_values_pass(path, files_, monkeypatch, tmp_path):
    """The checks refuse bad values only: a good command line gets as far as
    connecting (which is the tool here)."""
    with pytest.raises(ReachedTool):
        _in_process(_expand(ctl_argv(path, CTL_GOOD[path]), files_, tmp_path), monkeypatch)


def test_ctl_tier_covers_every_value():
    """A new `veloz ctl` command or value must join the generated cases."""
    for path, p in commands(cli.build_parser()):
        if path[0] != "ctl" or not valued(p):
            continue
        assert path in CTL_GOOD, f"`veloz {' '.join(path)}`: add a good invocation to CTL_GOOD"
        dests = {d for d, _ in CTL_GOOD[path]}
        for a in valued(p):
            assert a.dest in dests, f"`veloz {' '.join(path)}`: {a.dest} is not in CTL_GOOD"
            assert ctl_kind(path, a.dest) in CTL_BAD
