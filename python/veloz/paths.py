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
    for sub in ("src/cli", "src/gen"):
        path = build_dir() / sub / name
        if path.exists():
            return path
    raise VelozError(f"{name} is not built; run `make build` in {REPO_ROOT}", code=1)


@dataclass(frozen=True)
class NfArtifacts:
    name: str
    bpf: Path  # NAME.bpf.o, for the xdp backends
    native: Path  # NAME.so, for userspace backends and native replay


def available_nfs() -> list[str]:
    nf_dir = build_dir() / "nf"
    return sorted(p.name.removesuffix(".bpf.o") for p in nf_dir.glob("*.bpf.o"))


def nf(name: str) -> NfArtifacts:
    """The two builds of an NF, or one clear error naming the ones that exist."""
    nf_dir = build_dir() / "nf"
    if not nf_dir.is_dir():
        raise VelozError(f"veloz is not built; run `make build` in {REPO_ROOT}", code=1)
    art = NfArtifacts(name, nf_dir / f"{name}.bpf.o", nf_dir / f"{name}.so")
    if "/" in name or not art.bpf.exists() or not art.native.exists():
        known = ", ".join(available_nfs()) or "none"
        raise VelozError(f"unknown NF '{name}' (available: {known})")
    return art
