"""`veloz build nf.c`: a user's NF, built for every backend from one source, as ours.

NAME.bpf.o (clang -target bpf) for the xdp backends, NAME.cpumap.bpf.o for
xdp with --dispatch, NAME.dump.bpf.o for `veloz dump --object` on xdp, and
NAME.so (the host compiler) for the userspace backends and native replay,
all against the installed headers (or the checkout's). `veloz run
./NAME.bpf.o` then runs it, with NAME.so beside it.
The flags are those of nf/meson.build; `pkg-config --cflags --libs veloz`
gives the same to a user's own build system.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path

from veloz.core import paths
from veloz.core.errors import VelozError


def _compiler(env: str, default: str) -> str:
    name = os.environ.get(env) or default
    if shutil.which(name) is None:
        raise VelozError(f"{name}: compiler not found (set ${env})")
    return name


def _multiarch(cc: str) -> list[str]:
    """-I/usr/include/MULTIARCH: <asm/types.h> for -target bpf, as meson.build does."""
    done = subprocess.run([cc, "-print-multiarch"], capture_output=True, text=True, check=False)
    arch = done.stdout.strip()
    return [f"-I/usr/include/{arch}"] if done.returncode == 0 and arch else []


def commands(source: Path, outdir: Path, extra: list[str]) -> dict[str, list[str]]:
    """The compiler command of each object, by its path."""
    name = source.name.removesuffix(".c")
    clang, cc = _compiler("CLANG", "clang"), _compiler("CC", "cc")
    inc = f"-I{paths.include_dir()}"
    rt = paths.library("libveloz-rt.so").parent
    bpf = [clang, "-target", "bpf", "-O2", "-g", "-Wall", "-Wextra", inc, *_multiarch(cc), *extra]
    obj = outdir / f"{name}.bpf.o"
    return {
        str(obj): [*bpf, "-c", str(source), "-o", str(obj)],
        str(outdir / f"{name}.cpumap.bpf.o"): [
            *bpf, "-DVZ_CPUMAP", "-include", "veloz/nf_cpumap.h",
            "-c", str(source), "-o", str(outdir / f"{name}.cpumap.bpf.o"),
        ],
        str(outdir / f"{name}.dump.bpf.o"): [
            *bpf, "-DVZ_DUMP", "-include", "veloz/nf_dump.h",
            "-c", str(source), "-o", str(outdir / f"{name}.dump.bpf.o"),
        ],
        str(outdir / f"{name}.so"): [
            cc, "-std=gnu11", "-D_GNU_SOURCE", "-O2", "-g", "-Wall", "-Wextra", "-fPIC",
            "-shared", inc, *extra, str(source), "-o", str(outdir / f"{name}.so"),
            f"-L{rt}", f"-Wl,-rpath,{rt}", "-lveloz-rt",
        ],
    }  # fmt: skip


def run(args: argparse.Namespace) -> int:
    source = Path(args.source)
    if source.suffix != ".c" or source.name == ".c":
        raise VelozError(f"{args.source}: an NF source is NAME.c")
    if not source.is_file():
        raise VelozError(f"{args.source}: no such file")
    outdir = Path(args.outdir)
    if not outdir.is_dir():
        raise VelozError(f"--outdir {args.outdir}: no such directory")
    built = []
    for out, cmd in commands(source, outdir, args.cflags.split()).items():
        # the compiler's own diagnostics go to stderr as they are
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            raise VelozError(f"{args.source}: building {Path(out).name} failed ({cmd[0]})")
        built.append(out)
    if args.json:
        print(json.dumps({"source": str(source), "objects": built}))
    else:
        for out in built:
            print(out)
    return 0
