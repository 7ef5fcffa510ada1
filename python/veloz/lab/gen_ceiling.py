"""The generator's ceiling, by variant: the generator unpaced into the lab's
XDP sink on the DUT's port (backend 'generator', the sink only counts),
trials interleaved across variants, medians with 95% bootstrap CIs and each
one's ratio to the first variant's (the baseline).

A variant is a comma-separated list of settings ('' or 'base': none):

    batch=N    live frames per kernel batch (vz-gen --batch; default 64)
    threads=N  transmit threads, one per CPU (vz-gen --threads; default 1)
    rxq=N      receive queues on the DUT's port for the trial (ethtool -L
               rx N): veth puts a frame on the queue of the sending CPU, so
               each thread's frames then have a queue, and a NAPI, of
               their own; put back to 1 after the trial
    afxdp      through an AF_XDP socket's TX ring, not live frames
    static     every frame the template as built (vz-gen --static): no
               sequence number, timestamp or checksum written per frame
    batch-stamp one clock read per kernel batch (vz-gen --batch-stamp)

    flock /tmp/veloz-testbed.lock .venv/bin/python -m veloz.lab.gen_ceiling \\
        --variant base --variant threads=2 --variant threads=2,rxq=2 \\
        --trials 7 --seconds 2

`--batches 64,128,256` is short for one batch=N variant each. Needs the
testbed up. A benchmark, not a test: run it under the lock.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from veloz.core.errors import VelozError
from veloz.lab import stats, topology, trial

DEFAULT_VARIANTS = ["base", "threads=2", "threads=2,rxq=2"]
INTS = {"batch": (1, 256), "threads": (1, 64), "rxq": (1, 64)}
FLAGS = ("afxdp", "static", "batch-stamp")  # vz-gen's --FLAG


def parse_variant(text: str) -> dict:
    """'threads=2,rxq=2' -> {'threads': 2, 'rxq': 2}; 'base' or '' -> {}."""
    out: dict = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        if item == "base":
            continue
        if item in FLAGS:
            out[item] = True
            continue
        key, _, value = item.partition("=")
        if key not in INTS or not value.isdigit():
            raise VelozError(f"variant '{text}': '{item}' is not batch=, threads=, rxq= or a flag")
        lo, hi = INTS[key]
        if not lo <= int(value) <= hi:
            raise VelozError(f"variant '{text}': {key} must be between {lo} and {hi}")
        out[key] = int(value)
    if out.get("afxdp") and ({"batch", "threads", "static", "batch-stamp"} & out.keys()):
        raise VelozError(f"variant '{text}': that is for live frames, not afxdp")
    return out


def name(variant: dict) -> str:
    return ",".join(k if v is True else f"{k}={v}" for k, v in variant.items()) or "base"


def gen_extra(variant: dict) -> list[str]:
    extra = [f"--{k}" for k in FLAGS if variant.get(k)]
    for key in ("batch", "threads"):
        if key in variant:
            extra += [f"--{key}", str(variant[key])]
    return extra


@contextmanager
def rx_queues(n: int) -> Iterator[None]:
    """The DUT's port receives on n queues for the block, then on one again.
    Only the receive side: veth refuses more transmit queues than its peer,
    which carries an XDP program, has receive queues."""
    if n == 1:
        yield
        return
    dut = topology.current().dut
    iface = dut.ports[0].iface

    def channels(rx: int) -> None:
        done = dut.host.run(["ethtool", "-L", iface, "rx", str(rx), "tx", "1"], timeout=30)
        if done.returncode != 0:
            raise VelozError(f"ethtool -L {iface} rx {rx}: {done.stderr.strip()}")

    channels(n)
    try:
        yield
    finally:
        channels(1)


def measure(variants: list[dict], trials: int, seconds: float, size: int,
            backends: list[str] | None = None) -> list[dict]:  # fmt: skip
    out = []
    for t in range(trials):
        for backend in backends or ["generator"]:
            for v in variants:  # interleaved: drift spreads over every variant
                with rx_queues(v.get("rxq", 1)):
                    rec = trial.measure("drop", backend, size=size, rate=0, seconds=seconds,
                                        gen_extra=gen_extra(v))  # fmt: skip
                out.append({"trial": t, "backend": backend, "variant": name(v),
                            "rate_pps": rec["rate_pps"], "offered_pps": rec["offered_pps"],
                            "lost": rec["lost"], "cpu_busy": rec["cpu_busy"]})  # fmt: skip
    return out


def summarize(records: list[dict]) -> list[dict]:
    """Per backend and variant; each ratio against the same backend's first
    variant, measured in the same trials."""
    by: dict[tuple[str, str], list[float]] = {}
    for r in records:
        by.setdefault((r.get("backend", "generator"), r["variant"]), []).append(r["rate_pps"])
    base = {}
    for (backend, _), xs in by.items():
        base.setdefault(backend, xs)
    return [
        {"backend": b, "variant": v, "trials": len(xs), **stats.summarize(xs),
         "vs_base": stats.ratio_of_medians(xs, base[b])}
        for (b, v), xs in by.items()
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--variant", action="append", help="repeat; the first is the baseline")
    p.add_argument("--batches", help="short for --variant batch=N for each N")
    p.add_argument("--trials", type=int, default=7)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--backends", default="generator",
                   help="the drop NF on these backends too (e.g. generator,xdp,linux): "
                        "what each variant gives a DUT")  # fmt: skip
    args = p.parse_args(argv)
    texts = list(args.variant or [])
    if args.batches:
        texts += [f"batch={b.strip()}" for b in args.batches.split(",")]
    try:
        variants = [parse_variant(t) for t in texts or DEFAULT_VARIANTS]
    except VelozError as e:
        print(f"veloz: {e}", file=sys.stderr)
        return 2
    if args.trials < 1:
        print("veloz: --trials must be at least 1", file=sys.stderr)
        return 2
    recs = measure(variants, args.trials, args.seconds, args.size, args.backends.split(","))
    rows = summarize(recs)
    print(json.dumps({"records": recs, "summary": rows}, indent=1))
    for r in rows:
        v = r["vs_base"] or {"ratio": 0, "low": 0, "high": 0}
        print(f"{r['backend']:>9} {r['variant']:>18}: median {r['median'] / 1e6:.3f} Mpps "
              f"(95% CI {r['low'] / 1e6:.3f}-{r['high'] / 1e6:.3f}, {r['trials']} trials), "
              f"vs the first: {v['ratio']:.3f}x ({v['low']:.3f}-{v['high']:.3f})",
              file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
