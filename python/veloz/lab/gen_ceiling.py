"""The generator's ceiling against its live-frames batch: the generator
unpaced into the lab's XDP sink on the DUT's port (backend 'generator'),
trials interleaved across batch sizes, medians with 95% bootstrap CIs and
each one's ratio to the kernel's default batch (64).

    flock /tmp/veloz-testbed.lock .venv/bin/python -m veloz.lab.gen_ceiling \
        --batches 64,128,256 --trials 7 --seconds 2

Needs the testbed up. A benchmark, not a test: run it under the lock.
"""

from __future__ import annotations

import argparse
import json
import sys

from veloz.lab import stats, trial

DEFAULT_BATCH = 64


def measure(batches: list[int], trials: int, seconds: float, size: int) -> list[dict]:
    out = []
    for t in range(trials):
        for batch in batches:  # interleaved: drift spreads over every batch
            rec = trial.measure("drop", "generator", size=size, rate=0, seconds=seconds,
                                gen_extra=["--batch", str(batch)])  # fmt: skip
            out.append({"trial": t, "batch": batch, "rate_pps": rec["rate_pps"],
                        "offered_pps": rec["offered_pps"], "lost": rec["lost"]})  # fmt: skip
    return out


def summarize(records: list[dict]) -> list[dict]:
    by: dict[int, list[float]] = {}
    for r in records:
        by.setdefault(r["batch"], []).append(r["rate_pps"])
    base = by.get(DEFAULT_BATCH)
    return [
        {"batch": b, "trials": len(xs), **stats.summarize(xs),
         "vs_64": stats.ratio_of_medians(xs, base) if base else None}
        for b, xs in by.items()
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--batches", default="64,128,256")
    p.add_argument("--trials", type=int, default=7)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--size", type=int, default=64)
    args = p.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    if args.trials < 1 or not all(1 <= b <= 256 for b in batches):
        print("veloz: --trials >= 1, --batches each in 1..256", file=sys.stderr)
        return 2
    recs = measure(batches, args.trials, args.seconds, args.size)
    rows = summarize(recs)
    print(json.dumps({"records": recs, "summary": rows}, indent=1))
    for r in rows:
        v = r["vs_64"] or {"ratio": 0, "low": 0, "high": 0}
        print(f"batch {r['batch']:>3}: median {r['median'] / 1e6:.3f} Mpps "
              f"(95% CI {r['low'] / 1e6:.3f}-{r['high'] / 1e6:.3f}, {r['trials']} trials), "
              f"vs 64: {v['ratio']:.3f}x ({v['low']:.3f}-{v['high']:.3f})",
              file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
