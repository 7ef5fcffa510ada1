"""`veloz replay`: a pcap through an NF's XDP or native build, offline."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from veloz.control import objects
from veloz.core import config, paths, safeio


def command(args: argparse.Namespace) -> list[str]:
    if args.out:
        # before anything opens --out for writing: that would truncate IN
        safeio.refuse_same_file(args.out, "--out", **{"--in": args.input, "--config": args.config})
        safeio.check_output(args.out, "--out")
    nf = paths.nf(args.nf)
    values = config.load(args.config) | config.parse_sets(args.set)
    values, nf_objects = objects.split_config(args.nf, values)
    base = Path(args.config).parent if args.config else Path.cwd()
    # Offline, port i is just a number with a made-up MAC (see objects.Ports).
    ops = objects.ops_fd(args.nf, nf_objects, objects.Ports(), base)
    cmd = [
        str(paths.tool("vz-replay")),
        "--bpf", str(nf.bpf),
        "--native", str(nf.native),
        "--backend", args.backend,
        "--in", args.input,
    ]  # fmt: skip
    if args.out:
        cmd += ["--out", args.out]
    for assignment in config.to_assignments(values):
        cmd += ["--set", assignment]
    if ops is not None:
        cmd += ["--ops", f"/proc/self/fd/{ops}"]
    if args.json:
        cmd.append("--json")
    if args.repeat is not None:
        cmd += ["--repeat", str(args.repeat)]
    return cmd


def run(args: argparse.Namespace) -> int:
    cmd = command(args)
    fds = [int(c.rsplit("/", 1)[1]) for c in cmd if c.startswith("/proc/self/fd/")]
    code = subprocess.run(cmd, check=False, pass_fds=fds).returncode
    # a tool killed by a signal (SIGPIPE: `| head`) exits as a shell says it
    return 128 - code if code < 0 else code
