"""Where the C build's artifacts live: the NFs and the tools behind `veloz`.

Two layouts, looked up in this order:

- installed (`meson install --prefix P`): the tools and the BPF objects they
  load beside them in P/libexec/veloz, the NFs in P/lib[/MULTIARCH]/veloz/nf;
- the checkout's meson build directory, the developer's fallback.

The prefixes tried are $VELOZ_PREFIX, then the prefix this Python package is
installed in (a wheel installed with `pip install --prefix P`, or into a venv
at P, next to a `meson install --prefix P`), then /usr/local and /usr. A
veloz run from its own checkout skips the last two, so a stale system install
never shadows the build the developer is working on.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from veloz.core.errors import VelozError

# python/veloz/core/paths.py -> the repository root (meaningful in a checkout only)
REPO_ROOT = Path(__file__).resolve().parents[3]

# The build's folders that hold tools, as meson lays them out.
_BUILD_TOOL_DIRS = (
    "src/xdp", "src/tools", "src/gen", "src/afxdp", "src/dpdk", "src/dispatch", "src/dump",
    "src/sock/udpd", "src/sock/apps",
)  # fmt: skip


def in_checkout() -> bool:
    """True when this package is the checkout's python/veloz (editable install)."""
    return (REPO_ROOT / "meson.build").is_file() and (REPO_ROOT / "python" / "veloz").is_dir()


def prefixes() -> list[Path]:
    """Install prefixes to look in, most specific first, without repeats."""
    found: list[Path] = []
    if os.environ.get("VELOZ_PREFIX"):
        found.append(Path(os.environ["VELOZ_PREFIX"]))
    if not in_checkout():
        # P/lib/pythonX.Y/site-packages/veloz/core/paths.py -> P
        found.append(Path(__file__).resolve().parents[5])
        found.append(Path(sys.prefix))
        found += [Path("/usr/local"), Path("/usr")]
    return list(dict.fromkeys(found))


def _lib_dirs(prefix: Path) -> list[Path]:
    """P/lib and its multiarch folders (Debian's meson default libdir)."""
    lib = prefix / "lib"
    return [lib, *sorted(d for d in lib.glob("*-linux-gnu*") if d.is_dir()), prefix / "lib64"]


def build_dir() -> Path:
    """The meson build directory: $VELOZ_BUILD_DIR, else <repo>/build."""
    return Path(os.environ.get("VELOZ_BUILD_DIR", REPO_ROOT / "build"))


def tool_dirs() -> list[Path]:
    """Where tools are found: the installed ones first, then the build's."""
    dirs: list[Path] = []
    for p in prefixes():
        dirs += [p / "libexec" / "veloz", p / "bin"]
    dirs += [build_dir() / sub for sub in _BUILD_TOOL_DIRS]
    return dirs


def _not_found(what: str) -> VelozError:
    if in_checkout():
        return VelozError(f"{what} is not built; run `make build` in {REPO_ROOT}", code=1)
    return VelozError(
        f"{what} is not installed; `meson install` veloz, and set $VELOZ_PREFIX "
        "when its prefix is not the one this Python package is installed in",
        code=1,
    )


def tool(name: str) -> Path:
    """A C tool of the build, e.g. tool("vz-replay")."""
    for d in tool_dirs():
        path = d / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise _not_found(name)


def library(name: str) -> Path:
    """An installed or built shared library, e.g. library("libveloz-preload.so")."""
    for p in prefixes():
        for d in _lib_dirs(p):
            if (d / name).is_file():
                return d / name
    for sub in ("src/maps", "src/sock/app", "src/sock/preload"):
        if (build_dir() / sub / name).is_file():
            return build_dir() / sub / name
    raise _not_found(name)


def include_dir() -> Path:
    """Where <veloz/nf.h> is: P/include, or the checkout's include/."""
    for p in prefixes():
        if (p / "include" / "veloz" / "nf.h").is_file():
            return p / "include"
    if (REPO_ROOT / "include" / "veloz" / "nf.h").is_file():
        return REPO_ROOT / "include"
    raise _not_found("include/veloz/nf.h")


@dataclass(frozen=True)
class NfArtifacts:
    name: str
    bpf: Path  # NAME.bpf.o, for the xdp backends
    native: Path  # NAME.so, for userspace backends and native replay


def nf_dirs() -> list[Path]:
    """Where NFs are found: $VELOZ_NF_PATH (colon-separated) first, then the
    installed ones, then the build's.

    A directory qualifies by holding NAME.bpf.o and NAME.so side by side, so
    an NF built outside this tree (by a user, or for a test) runs like ours.
    """
    extra = [Path(d) for d in os.environ.get("VELOZ_NF_PATH", "").split(":") if d]
    installed = [d / "veloz" / "nf" for p in prefixes() for d in _lib_dirs(p)]
    return [*extra, *(d for d in installed if d.is_dir()), build_dir() / "nf"]


def available_nfs() -> list[str]:
    names = {
        p.name.removesuffix(".bpf.o")
        for d in nf_dirs()
        for p in d.glob("*.bpf.o")
        if not p.name.endswith(".cpumap.bpf.o")
        and p.with_name(p.name.removesuffix(".bpf.o") + ".so").exists()
    }
    return sorted(names)


def is_nf_path(name: str) -> bool:
    """`veloz run ./my.bpf.o`, as `xdp-loader load IF prog.o`: a file, not a name."""
    return "/" in name or name.endswith((".bpf.o", ".so"))


def nf_from_path(path: str) -> NfArtifacts:
    """A user's NF by path: NAME.bpf.o (or NAME.so) with its twin beside it."""
    # absolute: dlopen() searches the library path for a name without a slash
    p = Path(path).absolute()
    stem = p.name.removesuffix(".bpf.o").removesuffix(".so")
    if not p.name.endswith((".bpf.o", ".so")) or not stem:
        raise VelozError(f"{path}: an NF is a NAME.bpf.o with its NAME.so beside it")
    art = NfArtifacts(stem, p.with_name(stem + ".bpf.o"), p.with_name(stem + ".so"))
    for f in (art.bpf, art.native):
        if not f.is_file():
            raise VelozError(
                f"{f}: no such file (an NF is both builds side by side: `veloz build {stem}.c`)"
            )
    return art


def nf(name: str) -> NfArtifacts:
    """The two builds of an NF, or one clear error naming the ones that exist."""
    if is_nf_path(name):
        return nf_from_path(name)
    for d in nf_dirs():
        art = NfArtifacts(name, d / f"{name}.bpf.o", d / f"{name}.so")
        if art.bpf.exists() and art.native.exists():
            return art
    known = available_nfs()
    if not known:
        raise _not_found("veloz")
    raise VelozError(f"unknown NF '{name}' (available: {', '.join(known)})")
