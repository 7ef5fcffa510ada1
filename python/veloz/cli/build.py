"""`veloz build`'s command line; the work is veloz.control.build_nf's."""

from __future__ import annotations

import argparse

from veloz.control.build_nf import run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build",
        help="build an NF of your own (NAME.c) for every backend",
        description=(
            "Compile NAME.c, an NF written against <veloz/nf.h>, into NAME.bpf.o, "
            "NAME.cpumap.bpf.o and NAME.dump.bpf.o (clang -target bpf: the xdp backends, "
            "--dispatch, `veloz dump --object`) and NAME.so (the "
            "host compiler: afxdp, dpdk, native replay), with the headers of this "
            "install. Run it with `veloz run ./NAME.bpf.o ...` or `veloz replay "
            "./NAME.bpf.o ...`. $CLANG and $CC name the compilers."
        ),
    )
    p.add_argument("source", metavar="NAME.c", help="the NF's source")
    p.add_argument(
        "-o", "--outdir", metavar="DIR", default=".", help="where the objects go (default: .)"
    )
    p.add_argument(
        "--cflags", default="", metavar="FLAGS", help="more compiler flags, for both builds"
    )
    p.add_argument("--json", action="store_true", help="the objects built, as one JSON object")
    p.set_defaults(func=run)
