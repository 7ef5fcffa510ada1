"""`veloz replay`: a pcap through an NF's XDP or native build, offline."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from veloz.control import objects
from veloz.core import config, paths, safeio


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="run a pcap through an NF (XDP test run or native build)",
        description=(
            "Run every packet of IN through the NF: on 'xdp' with BPF_PROG_TEST_RUN "
            "on the loaded program (needs root), on 'native' through the userspace "
            "build. Frames the NF sends (tx, redirect) are written to OUT in input "
            "order. Both backends give the same verdicts and bytes: compare them to "
            "test an NF without a testbed."
        ),
    )
    p.add_argument("nf", help="NF name (see `veloz nfs`)")
    p.add_argument("--backend", required=True, choices=("xdp", "native"))
    p.add_argument("--in", dest="input", required=True, metavar="IN.pcap")
    p.add_argument("--out", metavar="OUT.pcap", help="where the sent frames go")
    p.add_argument("--config", metavar="FILE", help="NF config (TOML)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="config override")
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON record per input packet (index, verdict, len_in, len_out, "
        "port, ns), then a summary record",
    )
    p.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="also time each packet over N runs and report ns per packet",
    )
    p.set_defaults(func=run)


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
