# SPDX-License-Identifier: BSD-2-Clause
"""Helpers for the differential tier: `veloz replay` on both backends.

Every replay goes through the venv's `veloz` entry point, exactly as a user
runs it. Results are cached per session: the semantic tests look at the same
runs the differential test compares, so each (NF, config, vector, backend)
is replayed once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
VELOZ = REPO_ROOT / ".venv" / "bin" / "veloz"
VECTOR_DIR = REPO_ROOT / "tests" / "vectors"
IS_ROOT = os.geteuid() == 0
# NFs that exist for tests (tests/nf) are found like any user's NF.
os.environ["VELOZ_NF_PATH"] = str(
    Path(os.environ.get("VELOZ_BUILD_DIR", REPO_ROOT / "build")) / "tests" / "nf"
)
TIMEOUT = 120


def _load_vector_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("veloz_vectors_build", VECTOR_DIR / "build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


vectors = _load_vector_builder()

VECTOR_FILES = list(vectors.FILES)

needs_root = pytest.mark.skipif(
    not IS_ROOT, reason="the xdp backend needs root (BPF_PROG_TEST_RUN)"
)
BACKENDS = [pytest.param("xdp", marks=needs_root, id="xdp"), pytest.param("native", id="native")]

# Configs worth replaying per NF; an NF not listed runs with its defaults.
NF_CONFIGS: dict[str, list[dict[str, int]]] = {
    "memaccess": [{"accesses": n} for n in (0, 1, 100, 4096)],
    "redirect": [{}, {"port": 0}, {"port": 1}, {"port": 63}],
}
REDIRECT_DEFAULT_PORT = 1


def run_veloz(*args: str | Path, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VELOZ), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO_ROOT,
    )


def list_nfs() -> list[str]:
    proc = run_veloz("nfs", "--json", timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"`veloz nfs` failed ({proc.returncode}): {proc.stderr.strip()}")
    nfs = [nf["name"] for nf in json.loads(proc.stdout)]
    if not nfs:
        raise RuntimeError("`veloz nfs` lists no NF: is the C build done (ninja -C build)?")
    return nfs


NFS = list_nfs()


def config_id(config: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items()) or "default"


def nf_config_params() -> list[pytest.param]:
    """(nf, config) pairs for every NF of the build, with readable ids."""
    return [
        pytest.param(nf, config, id=f"{nf}[{config_id(config)}]")
        for nf in NFS
        for config in NF_CONFIGS.get(nf, [{}])
    ]


def set_args(config: dict[str, int]) -> list[str]:
    args = []
    for key, value in config.items():
        args += ["--set", f"{key}={value}"]
    return args


# ---- pcap ---------------------------------------------------------------------


@dataclass(frozen=True)
class PcapRecord:
    sec: int
    frac: int
    caplen: int
    wirelen: int
    data: bytes


@dataclass(frozen=True)
class Pcap:
    header: bytes
    records: list[PcapRecord]

    @property
    def frames(self) -> list[bytes]:
        return [r.data for r in self.records]


def parse_pcap(raw: bytes) -> Pcap:
    """A classic little-endian pcap (what vz-replay and build.py write)."""
    assert len(raw) >= 24, f"pcap shorter than its header ({len(raw)} bytes)"
    magic = struct.unpack_from("<I", raw)[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), f"not a little-endian pcap: magic {magic:#x}"
    records = []
    off = 24
    while off < len(raw):
        assert off + 16 <= len(raw), f"record header cut at offset {off}"
        sec, frac, caplen, wirelen = struct.unpack_from("<IIII", raw, off)
        off += 16
        assert off + caplen <= len(raw), f"record data cut at offset {off}"
        records.append(PcapRecord(sec, frac, caplen, wirelen, raw[off : off + caplen]))
        off += caplen
    return Pcap(raw[:24], records)


def read_vector(name: str) -> Pcap:
    return parse_pcap((VECTOR_DIR / name).read_bytes())


# ---- replay -------------------------------------------------------------------------


@dataclass
class Replay:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    records: list[dict] = field(default_factory=list)
    summary: dict | None = None
    out: Pcap | None = None
    out_raw: bytes | None = None

    def describe(self) -> str:
        return (
            f"$ {' '.join(self.argv)}\nexit {self.returncode}\n"
            f"stderr: {self.stderr.strip()!r}\nstdout (head): {self.stdout[:600]!r}"
        )

    def check_ok(self) -> None:
        assert self.returncode == 0, self.describe()
        assert self.stderr == "", self.describe()
        assert self.summary is not None, self.describe()


def parse_json_lines(text: str) -> tuple[list[dict], dict | None]:
    """Per-packet records and the summary line of `veloz replay --json`."""
    records: list[dict] = []
    summary = None
    for n, line in enumerate(text.splitlines(), 1):
        assert summary is None, f"line {n} after the summary: {line!r}"
        obj = json.loads(line)
        if obj.get("summary"):
            summary = obj
        else:
            records.append(obj)
    return records, summary


class Replayer:
    """Runs `veloz replay --json --out ...` once per distinct invocation."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.cache: dict[tuple, Replay] = {}

    def __call__(
        self,
        nf: str,
        backend: str,
        vector: str,
        config: dict[str, int] | None = None,
        repeat: int | None = None,
    ) -> Replay:
        config = config or {}
        key = (nf, backend, vector, tuple(sorted(config.items())), repeat)
        if key not in self.cache:
            self.cache[key] = self._run(nf, backend, vector, config, repeat)
        return self.cache[key]

    def _run(
        self, nf: str, backend: str, vector: str, config: dict[str, int], repeat: int | None
    ) -> Replay:
        stem = f"{nf}-{config_id(config)}-{backend}-{vector}-r{repeat}".replace("=", "")
        out = self.workdir / f"{stem.replace(',', '_')}.out.pcap"
        args = ["replay", nf, "--backend", backend, "--in", VECTOR_DIR / vector]
        args += ["--out", out, "--json", *set_args(config)]
        if repeat is not None:
            args += ["--repeat", str(repeat)]
        proc = run_veloz(*args)
        result = Replay([str(VELOZ), *map(str, args)], proc.returncode, proc.stdout, proc.stderr)
        try:
            result.records, result.summary = parse_json_lines(proc.stdout)
        except (json.JSONDecodeError, AssertionError) as e:
            result.stderr += f"\n[test harness: unparsable stdout: {e}]"
        if out.exists():
            result.out_raw = out.read_bytes()
            result.out = parse_pcap(result.out_raw)
        return result


@pytest.fixture(scope="session")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Replayer:
    return Replayer(tmp_path_factory.mktemp("replay"))
