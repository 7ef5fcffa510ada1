"""Maglev's lookup table (Eisenbud et al., NSDI'16), as nf/lb.c's lb_ring holds it.

nf/lb.c only reads the table: slot = flow hash % M in the VIP's row of
lb_ring. The control plane builds it here and lb.py writes it.

Each backend has an offset and a skip from two independent hashes (keyed
BLAKE2b) of its name, so its preference list through the table's M slots is
the same on every run and on every VIP; backends take turns claiming their
next free preferred slot until the table is full. A backend of weight w
takes w turns for every max-weight turns of the heaviest, interleaved, so
shares follow weights. Backends take their turns in name order, so the
table depends only on the set of (name, weight), never on the order they
were added in.

Why Python and not C: the table is built by the control plane only, a few
times per change, and BLAKE2b (hashlib) is what fixes every backend's
permutation; the table must stay byte-identical to the one runs installed
before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def _permutation(name: bytes, size: int) -> tuple[int, int]:
    """(offset, skip) of a backend: two independent keyed hashes of its name."""
    h1 = hashlib.blake2b(name, digest_size=8, person=b"veloz-lb-offset").digest()
    h2 = hashlib.blake2b(name, digest_size=8, person=b"veloz-lb-skip").digest()
    return int.from_bytes(h1, "little") % size, int.from_bytes(h2, "little") % (size - 1) + 1


def table(backends: Sequence[tuple[bytes, int]], size: int) -> list[int]:
    """Maglev's lookup table: for each slot, the index in backends of its owner.

    backends are (name, weight) with distinct names and weights >= 1; size
    must be prime. An empty list gives a table of -1. Pure and deterministic:
    the table depends only on the set of backends.
    """
    if not backends:
        return [-1] * size
    names = [name for name, _ in backends]
    if len(set(names)) != len(names):
        raise ValueError("backend names must be distinct")
    if any(w < 1 for _, w in backends):
        raise ValueError("weights must be at least 1")
    order = sorted(range(len(backends)), key=lambda i: backends[i][0])
    perms = [_permutation(backends[i][0], size) for i in order]
    weights = [backends[i][1] for i in order]
    heaviest = max(weights)
    pos = [offset for offset, _ in perms]
    skips = [skip for _, skip in perms]
    credit = [0] * len(order)
    slots = [-1] * size
    filled = 0
    while True:
        for n, owner in enumerate(order):
            # interleaved weighted turns: w turns per `heaviest` rounds
            credit[n] += weights[n]
            if credit[n] < heaviest:
                continue
            credit[n] -= heaviest
            p, skip = pos[n], skips[n]
            while slots[p] >= 0:
                p += skip
                if p >= size:
                    p -= size
            slots[p] = owner
            p += skip
            pos[n] = p - size if p >= size else p
            filled += 1
            if filled == size:
                return slots
