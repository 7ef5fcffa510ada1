"""Where the C build's artifacts live: the NFs and the tools behind `veloz`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from veloz.errors import VelozError

# python/veloz/paths.py -> the repository root
REPO_ROOT = Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    """The meson build directory: $VELOZ_BUILD_DIR, else <repo>/build."""
    return Path(os.environ.get("VELOZ_BUILD_DIR", REPO_ROOT / "build"))


def tool(name: str) -> Path:
    """A C tool of the build, e.g. tool("vz-replay")."""
    for sub in ("src/cli", "src/gen", "src/afxdp", "src/dpdk", "src/sock/udpd", "src/sock/apps"):
        path = build_dir() / sub / name
        if path.exists():
            return path
    raise VelozError(f"{name} is not built; run `make build` in {REPO_ROOT}", code=1)


@dataclass(frozen=True)
class NfArtifacts:
    name: str
    bpf: Path  # NAME.bpf.o, for the xdp backends
    native: Path  # NAME.so, for userspace backends and native replay


def nf_dirs() -> list[Path]:
    """Where NFs are found: $VELOZ_NF_PATH (colon-separated) first, then the build's.

    A directory qualifies by holding NAME.bpf.o and NAME.so side by side, so
    an NF built outside this tree (by a user, or for a test) runs like ours.
    """
    extra = [Path(d) for d in os.environ.get("VELOZ_NF_PATH", "").split(":") if d]
    return [*extra, build_dir() / "nf"]


def available_nfs() -> list[str]:
    names = {
        p.name.removesuffix(".bpf.o")
        for d in nf_dirs()
        for p in d.glob("*.bpf.o")
        if p.with_name(p.name.removesuffix(".bpf.o") + ".so").exists()
    }
    return sorted(names)


def nf(name: str) -> NfArtifacts:
    """The two builds of an NF, or one clear error naming the ones that exist."""
    if not (build_dir() / "nf").is_dir():
        raise VelozError(f"veloz is not built; run `make build` in {REPO_ROOT}", code=1)
    for d in nf_dirs() if "/" not in name else ():
        art = NfArtifacts(name, d / f"{name}.bpf.o", d / f"{name}.so")
        if art.bpf.exists() and art.native.exists():
            return art
    known = ", ".join(available_nfs()) or "none"
    raise VelozError(f"unknown NF '{name}' (available: {known})")
