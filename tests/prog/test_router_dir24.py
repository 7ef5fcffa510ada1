# SPDX-License-Identifier: BSD-2-Clause
"""The router's two IPv4 tables give the same answers: DIR-24-8 (table =
"dir24") against the kernel's LPM trie (table = "trie"), each on the XDP
build (BPF_PROG_TEST_RUN) and the native one, on random tables that nest
prefixes of every length (/0 to /32, many sharing a /24) and random
addresses, and on every shared vector. Verdicts, ports and the frames sent
must be identical, byte for byte."""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path

import pytest
from scapy.utils import rdpcap

from .conftest import REPO_ROOT, VECTOR_FILES, needs_root
from .test_router import CONFIG, ROUTES_FILE, udp4
from .test_router import replay as replay_router

NEXTHOPS = [("198.18.1.2", 1), ("198.18.1.3", 1), ("198.18.2.2", 2), ("198.18.2.3", 2)]
NEIGHBOURS = "".join(
    f'[[neighbour]]\naddress = "{via}"\nmac = "02:00:00:00:09:{i:02x}"\n'
    for i, (via, _) in enumerate(NEXTHOPS[:3])  # the last stays unresolved: PASS
)
LENGTHS = [0, 1, 7, 8, 12, 15, 16, 18, 20, 22, 23, 24, 24, 24, 25, 26, 27, 29, 31, 32]


def random_table(rng: random.Random, count: int) -> tuple[str, list[tuple[int, int]]]:
    """Route lines nested inside a few /16s, with some short and host routes."""
    bases = [rng.getrandbits(16) << 16 for _ in range(4)]
    routes: dict[tuple[int, int], str] = {}
    while len(routes) < count:
        length = rng.choice(LENGTHS)
        addr = rng.choice(bases) | rng.getrandbits(16) if length >= 16 else rng.getrandbits(32)
        addr &= ~((1 << (32 - length)) - 1) & 0xFFFFFFFF
        kind = rng.random()
        if kind < 0.08:
            routes[(addr, length)] = "blackhole"
        elif kind < 0.12:
            routes[(addr, length)] = "kernel"
        else:
            via, port = rng.choice(NEXTHOPS)
            routes[(addr, length)] = f"{via} {port}"
    text = "".join(f"{ipaddress.IPv4Address(a)}/{n} {what}\n" for (a, n), what in routes.items())
    return text, list(routes)


def replay(tmp: Path, backend: str, frames: list, config: str, name: str):
    records, out = replay_router(tmp, backend, frames, config, name)
    return [{k: v for k, v in r.items() if k != "ns"} for r in records], out


def all_four(tmp: Path, frames: list, config: str, name: str) -> dict:
    return {
        (backend, table): replay(
            tmp, backend, frames, f'table = "{table}"\n' + config, f"{name}-{table}"
        )  # fmt: skip
        for backend in ("xdp", "native")
        for table in ("trie", "dir24")
    }


@needs_root
@pytest.mark.parametrize("seed", [1, 2])
def test_random_tables_and_addresses(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    text, routes = random_table(rng, 3000)
    (tmp_path / "random.routes").write_text(text)
    dsts = [rng.getrandbits(32) for _ in range(500)]
    # inside and at the edges of the routes' ranges
    for addr, length in rng.sample(routes, 1500):
        span = (1 << (32 - length)) - 1
        dsts += [addr | rng.getrandbits(32 - length) if length < 32 else addr, addr | span]
    frames = [udp4(str(ipaddress.IPv4Address(d))) for d in dsts]
    results = all_four(tmp_path, frames, 'routes = "random.routes"\n' + NEIGHBOURS, "random")
    trie = results[("xdp", "trie")]
    verdicts = {r["verdict"] for r in trie[0]}
    assert {"redirect", "pass", "drop"} <= verdicts, verdicts  # the test sees every kind
    assert len(trie[0]) == len(frames)
    for key, got in results.items():
        assert got[0] == trie[0], f"{key} answered otherwise than the trie on xdp"
        assert got[1] == trie[1], f"{key} sent other frames than the trie on xdp"


@needs_root
def test_every_shared_vector_on_both_tables(tmp_path: Path):
    (tmp_path / "extra.routes").write_text(ROUTES_FILE)
    frames = [p for name in VECTOR_FILES for p in rdpcap(str(REPO_ROOT / "tests/vectors" / name))]
    results = all_four(tmp_path, frames, 'routes = "extra.routes"\n' + CONFIG, "vectors")
    trie = results[("xdp", "trie")]
    assert len(trie[0]) == len(frames)
    for key, got in results.items():
        assert got[0] == trie[0], f"{key} answered otherwise than the trie on xdp"
        assert got[1] == trie[1], f"{key} sent other frames than the trie on xdp"


def test_table_names_are_checked(tmp_path: Path):
    import subprocess

    from .test_router import VELOZ

    cfg = tmp_path / "bad.toml"
    for value, complaint in (('"poptrie"', "trie, dir24"), ("7", "table must be")):
        cfg.write_text(f"table = {value}\n")
        done = subprocess.run(
            [str(VELOZ), "replay", "router", "--backend", "native", "--in",
             str(REPO_ROOT / "tests/vectors/l3l4.pcap"), "--config", str(cfg)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        lines = done.stderr.strip().splitlines()
        assert done.returncode != 0 and len(lines) == 1 and complaint in lines[0], done.stderr
