"""`veloz dump`: the frames an NF runs on, each with the verdict it gave, as pcapng.

The NF is found through its run's control socket (its NF and backend). On
xdp and xdp-generic, vz-dump (src/dump/) loads the NF's dump build
(NAME.dump.bpf.o: the NF with a capture around it, include/veloz/nf_dump.h)
over the running NF's own maps and swaps it in for the attached program,
atomically; at the end it swaps the NF back. The normal build has no hook
at all, so an NF nobody captures pays nothing. On afxdp and dpdk, vz-dump
asks the run through that socket to send it each frame and verdict
(src/ctl/capture.h).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from veloz.control.client import CTL_DIR, Ctl, CtlError, running_ifaces, socket_path
from veloz.core import options, paths, safeio
from veloz.core.errors import VelozError

STATE_DIR = Path("/run/veloz/dump")  # src/dump/xdp_swap.h: VZ_DUMP_STATE_DIR
XDP_BACKENDS = ("xdp", "xdp-generic")
USERSPACE_BACKENDS = ("afxdp", "dpdk")


def find_run(iface: str) -> tuple[str, str, Path]:
    """(NF, backend, control socket) of the run here that has IFACE as a port."""
    candidates = [socket_path(iface)]
    candidates += [socket_path(i) for i in running_ifaces() if i != iface]
    for path in candidates:
        if not path.exists():
            continue
        try:
            with Ctl(path) as ctl:
                if iface in ctl.ports():
                    return (*ctl.info(), path)
        except CtlError:
            continue
    raise VelozError(f"no veloz run has {iface} here (`veloz status` lists them; {CTL_DIR})",
                     code=2)  # fmt: skip


def dump_object(nf: str, given: str | None = None) -> Path:
    """The running NF's dump build: --object, or NAME.dump.bpf.o among veloz's NFs.

    The run tells only the NF's name, so an NF of the user's own (run by
    path) needs --object; its name must be the running NF's, since the dump
    build takes over that NF's maps."""
    name = f"{Path(nf).name.removesuffix('.bpf.o')}.dump.bpf.o"
    if given is not None:
        obj = Path(given)
        if obj.name != name:
            raise VelozError(f"--object {given}: the NF on this interface is {nf}, "
                             f"its dump build is {name}", code=2)  # fmt: skip
        if not obj.is_file():
            raise VelozError(f"--object {given}: no such file", code=2)
        return obj
    for d in paths.nf_dirs():
        if (d / name).is_file():
            return d / name
    raise VelozError(f"NF {nf} has no dump build here: for an NF of your own, "
                     f"`veloz build` makes {name} beside it; pass --object PATH/{name}",
                     code=2)  # fmt: skip


def command(args: argparse.Namespace, source: list[str]) -> list[str]:
    cmd = [str(paths.tool("vz-dump")), "--iface", args.iface, *source]
    if args.restore:
        return cmd
    if args.write:
        if args.write != "-":
            safeio.check_output(args.write, "-w")
        cmd += ["-w", args.write]
    for flag, value in (("-c", args.count), ("-s", args.snaplen), ("--ring-size", args.ring_size)):
        if value is not None:
            cmd += [flag, str(value)]
    if args.json:
        cmd.append("--json")
    if args.filter:
        cmd += ["--", *args.filter]
    return cmd


def run(args: argparse.Namespace) -> int:
    # vz-dump's own limits (its option table), checked before anything runs
    for option, value in (("--count", args.count), ("--snaplen", args.snaplen),
                          ("--ring-size", args.ring_size)):  # fmt: skip
        if value is not None:
            options.check("vz-dump", option, value)
    source = ["--restore"]
    if args.restore and args.object:
        raise VelozError("--object does not apply to --restore", code=2)
    if not args.restore:
        nf, backend, ctl = find_run(args.iface)
        if backend in XDP_BACKENDS:
            source = ["--object", str(dump_object(nf, args.object))]
        elif backend in USERSPACE_BACKENDS:
            if args.object:
                raise VelozError(
                    f"--object applies to xdp and xdp-generic; {args.iface} runs {nf} "
                    f"on {backend}, captured through its run",
                    code=2,
                )
            source = ["--ctl", str(ctl)]
        else:
            raise VelozError(f"{args.iface} runs {nf} on {backend}: nothing to capture "
                             "(tcpdump sees the kernel's own path)", code=2)  # fmt: skip
    cmd = command(args, source)
    # vz-dump in this process's place: SIGTERM and SIGINT reach it directly,
    # so it swaps the NF back; nothing is left to forward them
    sys.stdout.flush()
    os.execv(cmd[0], cmd)


def stale_dumps() -> list[tuple[str, int, str]]:
    """(state file, pid, iface) of dumps whose process is gone: the dump build
    may still be attached in place of the NF (src/dump/xdp_swap.c writes them)."""
    out = []
    try:
        files = sorted(STATE_DIR.glob("net*.state"))
    except OSError:
        return []
    for f in files:
        try:
            words = f.read_text().split()
            pid, iface = int(words[1]), words[3]
        except (OSError, ValueError, IndexError):
            continue
        if not Path(f"/proc/{pid}").exists():
            out.append((str(f), pid, iface))
    return out


def netns_inode_of(state_file: str) -> int:
    return int(os.path.basename(state_file).removeprefix("net").split("-")[0])
