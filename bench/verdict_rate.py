"""Peak rate of the drop and tx NFs on every backend, side by side, on the testbed.

    .venv/bin/python bench/verdict_rate.py [--trials 5] [--seconds 3] [--size 64]
                                           [--nf drop,tx] [--backends xdp,...]

Per trial, NF and backend: the NF on vz-dut's dut-gen, the generator
unpaced from vz-gen for --seconds; the rate is, for drop, the frames the NF
dropped and, for tx, the frames that arrived back at vz-gen, over the
generator's sending time. The linux baseline is the kernel's
way of doing the same job on the same veth: an nftables raw prerouting drop
for drop, IP forwarding back out of the port for tx (the frames are
addressed to vz-gen itself, so the kernel routes them back; every backend
gets the same frames). Backends are interleaved (A B C ... A B C ...) so
drift in the machine's load spreads over all of them.

Prints, per NF: median, min and max in Mpps, frames sent but not dropped
(drop) or not returned (tx): lost, all trials together,
and each backend's median as a ratio to linux's. Generator, DUT and the
veth pairs share this machine's CPUs, so these are testbed figures: the
generator is paced by veth backpressure to what the DUT side takes, and
on two cores the generator and a busy-polling worker compete. A benchmark:
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics

from veloz import testbed
from veloz.demo import measure

BACKENDS = ("xdp", "xdp-generic", "afxdp", "dpdk", "linux")
NFS = ("drop", "tx")
GEN_OWN_ADDRESS = "198.18.0.1"  # tx frames come back to vz-gen on every backend


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--nf", default=",".join(NFS))
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--json", action="store_true", help="print every trial as JSON too")
    args = ap.parse_args()
    nfs, backends = args.nf.split(","), args.backends.split(",")
    rates = {(nf, b): [] for nf in nfs for b in backends}
    lost = dict.fromkeys(rates, 0)
    trials = []
    testbed.up()
    try:
        for trial in range(args.trials):
            for nf in nfs:
                for backend in backends:
                    gen = ["--size", str(args.size), "--rate", "0", "--duration",
                           str(args.seconds), "--dst-ip", GEN_OWN_ADDRESS]  # fmt: skip
                    r = measure(backend, gen, timeout=120, nf=nf)
                    # tx: what made it back to vz-gen; drop: what the NF dropped
                    done = r["delivered"] if nf == "tx" else r["counted"]
                    rates[nf, backend].append(done / r["seconds"])
                    lost[nf, backend] += r["sent"] - done
                    trials.append({"trial": trial, "nf": nf, **r})
    finally:
        testbed.down()
    if args.json:
        print(json.dumps(trials))
    for nf in nfs:
        print(f"\n{nf} NF, {args.size}-byte frames, {args.trials} trials of {args.seconds} s "
              "each, Mpps (testbed: veth, generator on the same 2 cores)")  # fmt: skip
        base = statistics.median(rates[nf, "linux"]) if "linux" in backends else None
        for b in backends:
            xs = rates[nf, b]
            ratio = f"  {statistics.median(xs) / base:5.2f}x linux" if base else ""
            print(f"  {b:<12} median {statistics.median(xs) / 1e6:6.3f}  "
                  f"min {min(xs) / 1e6:6.3f}  max {max(xs) / 1e6:6.3f}  "
                  f"lost {lost[nf, b]}{ratio}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
