"""Peak drop rate on the testbed: xdp, xdp-generic and the nftables baseline.

    .venv/bin/python bench/drop_rate.py [--trials 5] [--seconds 3] [--size 64]

Per trial and backend: the drop NF on vz-dut's dut-gen (or, for linux, an
nftables raw prerouting drop on the same veth), the generator unpaced from
vz-gen for --seconds; the rate is what was counted over the generator's
sending time. Trials alternate backends (A B C A B C ...). Prints medians,
min-max and each backend's ratio to linux. Generator and DUT share this machine's CPUs
and a veth pair, so these are testbed figures. A benchmark: asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics

from veloz import testbed
from veloz.demo import measure

BACKENDS = ("xdp", "xdp-generic", "linux")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--size", type=int, default=64)
    args = ap.parse_args()
    rates: dict[str, list[float]] = {b: [] for b in BACKENDS}
    lost: dict[str, int] = {b: 0 for b in BACKENDS}
    testbed.up()
    try:
        for _ in range(args.trials):
            for backend in BACKENDS:
                r = measure(backend, ["--size", str(args.size), "--rate", "0",
                                      "--duration", str(args.seconds)], timeout=120)  # fmt: skip
                rates[backend].append(r["counted_pps"])
                lost[backend] += r["sent"] - r["counted"]
    finally:
        testbed.down()
    print(f"drop NF, {args.size}-byte frames, {args.trials} trials of {args.seconds} s, Mpps")
    for b in BACKENDS:
        xs = rates[b]
        print(f"{b:<12} median {statistics.median(xs) / 1e6:6.2f}  "
              f"min {min(xs) / 1e6:6.2f}  max {max(xs) / 1e6:6.2f}  lost {lost[b]}")  # fmt: skip
    base = statistics.median(rates["linux"])
    for b in ("xdp", "xdp-generic"):
        print(f"{b} / linux (nftables raw drop): {statistics.median(rates[b]) / base:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
