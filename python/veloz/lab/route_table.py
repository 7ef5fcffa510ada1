"""`veloz route-table`: a synthetic internet-sized IPv4 routing table.

The XDP paper's router test loads a full BGP dump (752,138 routes) and sends
to 4,000 random destinations. We cannot ship a BGP dump, so this writes a
table with the same size and an internet-like prefix-length distribution
(the global table's: about 59% /24, 13% /22, 10% /23, then /21, /20, /19,
/16, ...), clustered as real tables are (most prefixes are more-specifics of
a shorter one).

The testbed only ever carries addresses from 198.18.0.0/15, so the table
never covers that range with random prefixes; instead it carves
198.18.128.0/17 (the range benchmark destinations come from) into a nested
/17 > /20 > /22 > /23 > /24 hierarchy inside the big table, so a lookup
for a benchmark destination walks as deep a trie as one for an internet
address would.

Output: one `PREFIX NEXTHOP PORT` line per route (the router's route-file
format; see python/veloz/control/router.py).
"""

from __future__ import annotations

import argparse
import io
import ipaddress
import random
import sys

from veloz.core import safeio
from veloz.core.errors import VelozError

PAPER_ROUTES = 752_138
BENCH_RANGE = ipaddress.ip_network("198.18.128.0/17")

# Share of prefixes per length in the global IPv4 table (CIDR report, 2018).
LENGTH_SHARES = {
    8: 0.002, 9: 0.002, 10: 0.005, 11: 0.013, 12: 0.04, 13: 0.08, 14: 0.15,
    15: 0.25, 16: 1.75, 17: 1.0, 18: 1.6, 19: 3.0, 20: 4.4, 21: 5.7, 22: 13.0,
    23: 10.2, 24: 58.8,
}  # fmt: skip
# Never generated at random: not routed on the internet, or the testbed's.
EXCLUDED = [
    ipaddress.ip_network(n)
    for n in ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
              "172.16.0.0/12", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/3")
]  # fmt: skip
NESTED_SHARE = 0.7  # prefixes drawn inside an earlier, shorter one


def _excluded(value: int, length: int) -> bool:
    net_lo, net_hi = value, value | ((1 << (32 - length)) - 1)
    for ex in EXCLUDED:
        lo = int(ex.network_address)
        hi = lo | ((1 << (32 - ex.prefixlen)) - 1)
        if net_lo <= hi and lo <= net_hi:
            return True
    return False


def bench_prefixes() -> list[tuple[int, int]]:
    """198.18.128.0/17 as a nested hierarchy: (address, length) pairs."""
    base = int(BENCH_RANGE.network_address)
    out = [(base, 17)]
    for length, count in ((20, 8), (22, 32), (23, 64), (24, 128)):
        step = 1 << (32 - length)
        out += [(base + i * step, length) for i in range(count)]
    return out


def generate(count: int, seed: int) -> list[tuple[int, int]]:
    """count distinct prefixes as (address, length), the bench range included."""
    rng = random.Random(seed)
    lengths = list(LENGTH_SHARES)
    weights = list(LENGTH_SHARES.values())
    routes = bench_prefixes()
    seen = set(routes)
    shorter: list[tuple[int, int]] = []  # candidates to nest inside
    if count < len(routes):
        raise VelozError(f"--count must be at least {len(routes)} (the benchmark range's routes)")
    while len(routes) < count:
        length = rng.choices(lengths, weights)[0]
        parent = rng.choice(shorter) if shorter and rng.random() < NESTED_SHARE else None
        if parent and parent[1] < length:
            addr, plen = parent
            value = addr | rng.getrandbits(32 - plen)
        else:
            value = rng.getrandbits(32)
        value &= ~((1 << (32 - length)) - 1) & 0xFFFFFFFF
        if (value, length) in seen or _excluded(value, length):
            continue
        seen.add((value, length))
        routes.append((value, length))
        if length <= 20:  # room for more-specifics
            shorter.append((value, length))
    return routes


def write(routes: list[tuple[int, int]], via: str, port: int, out) -> None:
    for value, length in routes:
        out.write(f"{ipaddress.IPv4Address(value)}/{length} {via} {port}\n")


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.count <= 2_000_000:
        raise VelozError("--count must be between 1 and 2000000")
    try:
        via = ipaddress.IPv4Address(args.via)
    except ValueError:
        raise VelozError(f"--via '{args.via}' is not an IPv4 address") from None
    if not 0 <= args.port < 64:
        raise VelozError("--port must be between 0 and 63")
    routes = generate(args.count, args.seed)
    if args.out:
        safeio.check_output(args.out, "--out")
        buf = io.StringIO()
        write(routes, str(via), args.port, buf)
        safeio.write_text(args.out, buf.getvalue(), "--out")  # every write checked
    else:
        write(routes, str(via), args.port, sys.stdout)
    return 0
