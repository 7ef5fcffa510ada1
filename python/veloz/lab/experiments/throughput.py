"""Throughput: peak rate, zero-loss rate (RFC 2544 binary search), the rate
at a small loss, loss against offered load; the same against packet size and
beside a noisy neighbour; and the headline comparison.

Each (trial, size, backend) starts with a peak run (the generator unpaced);
the searches then look for the highest offered rate in [0, peak offered]
with no loss, and with at most `loss` lost, in `steps` halvings each (so the
answer is within peak/2^steps). A point passes when the generator's
transmitted count minus the NF's work (dropped, or arrived at the sink) is
within the threshold. Trials are interleaved across backends (A B C A B C),
so drift in the machine's load spreads over all of them. Backend
"generator" puts the generator's frames into a sink that does nothing but
count them on the DUT's port: the most this testbed can offer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from veloz.lab import bpf_stats, summary, topology, trial, zero_loss
from veloz.lab.experiments import headline_cost
from veloz.lab.hosts import stop

SPEED_NOTE = (
    "Testbed figures: the generator, the DUT and the veth pairs share this machine's CPUs, "
    "so a rate near the generator's own maximum (backend 'generator') says the generator "
    "was the limit, not the NF."
)


def _peak_backends(settings: dict) -> list[str]:
    return ["generator", *settings["backends"]]


def _measure(ctx, label: str, nf: str, backend: str, size: int, rate: int, **tags) -> dict:
    t0 = time.monotonic()
    rec = trial.measure(nf, backend, size=size, rate=rate, seconds=ctx.settings["seconds"])
    # the run's wall time with the NF's start and stop: what a phase costs the demo
    rec["wall_s"] = time.monotonic() - t0
    return ctx.record(label, rec, **tags)


def search(
    ctx, nf: str, backend: str, size: int, peak: dict, loss: float, floor: float, tags: dict
) -> dict:
    """The zero-loss search (veloz.lab.zero_loss) with trials of this NF."""
    steps = ctx.settings["steps"]
    if peak["lost"] <= loss * peak["sent"]:
        ctx.advance(f"{backend}: peak passes, no search", steps)

    def probe(rate: int, step: int) -> dict:
        return _measure(ctx, f"{nf} {backend} {size} B: search {loss:.1%} at {rate / 1e6:.3f} Mpps",
                        nf, backend, size, rate, kind="search",
                        criterion=loss, step=step, **tags)  # fmt: skip

    return zero_loss.search(probe, peak, loss, floor, steps)


class Throughput:
    """drop, tx or redirect: peak, zero-loss and 0.5%-loss rates, loss curve."""

    def __init__(self, nf: str) -> None:
        self.name = nf
        self.nf = nf
        self.title = f"Throughput of the {nf} NF: peak, zero-loss (RFC 2544) and at 0.5% loss"
        self.doc = __doc__

    def count(self, s: dict) -> int:
        per_size = len(s["backends"]) * (1 + 2 * s["steps"]) + 1  # + the generator's ceiling
        return s["trials"] * len(s["sizes"]) * per_size

    def run(self, ctx) -> None:
        s = ctx.settings
        for t in range(s["trials"]):
            for size in s["sizes"]:
                for backend in _peak_backends(s):
                    tags = {"trial": t, "experiment": self.name}
                    peak = _measure(ctx, f"{self.nf} {backend} {size} B: peak", self.nf, backend,
                                    size, 0, kind="peak", **tags)  # fmt: skip
                    if backend == "generator":
                        continue
                    floor = 0.0  # the zero-loss rate is a floor for the lossy search
                    for loss in (0.0, s["loss"]):
                        found = search(ctx, self.nf, backend, size, peak, loss, floor, tags)
                        floor = found["rate_pps"]
                        ctx.records.append({**tags, "kind": "result", "criterion": loss,
                                            "nf": self.nf, "backend": backend, "size": size,
                                            **found})  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        out = []
        for size in s["sizes"]:
            at = [r for r in records if r["size"] == size]
            peak = [r for r in at if r["kind"] == "peak"]
            out.append(summary.rate_section(
                peak, f"{self.nf}, {size} B: peak rate (generator unpaced)",
                text=f"{s['trials']} interleaved trials of {s['seconds']} s; median and 95% "
                     "bootstrap CI; ratio of medians to linux with its bootstrap CI. " + SPEED_NOTE,
            ))  # fmt: skip
            for loss, name in (
                (0.0, "zero-loss rate (RFC 2544)"),
                (s["loss"], f"rate at {s['loss']:.1%} loss"),
            ):
                res = [r for r in at if r["kind"] == "result" and r["criterion"] == loss]
                out.append(summary.rate_section(
                    res, f"{self.nf}, {size} B: {name}",
                    text=f"Binary search over offered load, {s['steps']} halvings of [0 (or "
                         "the zero-loss rate, for the lossy search), peak offered] per trial, "
                         f"{s['seconds']} s per step; no search when the peak already passes.",
                ))  # fmt: skip
            pts = [r for r in at if r["kind"] in ("peak", "search") and r["backend"] != "generator"]
            out.append(summary.curve_section(
                pts, f"{self.nf}, {size} B: loss against offered load", x="offered_pps",
                y="loss", xlabel="offered Mpps", ylabel="loss (fraction)", x_scale=1e6,
                x_of=lambda r: round(r["offered_pps"], -4),
                text="Every peak and search run; loss = (sent - done) / sent.",
            ))  # fmt: skip
        return out


class Sizes(Throughput):
    """Peak rate against frame size, per backend."""

    def __init__(self) -> None:
        super().__init__("drop")
        self.name = "sizes"
        self.title = "Peak rate against frame size"

    def count(self, s: dict) -> int:
        return s["trials"] * len(s["sizes"]) * len(_peak_backends(s))

    def run(self, ctx) -> None:
        s = ctx.settings
        for t in range(s["trials"]):
            for size in s["sizes"]:
                for backend in _peak_backends(s):
                    _measure(ctx, f"{s['nf']} {backend} {size} B: peak", s["nf"], backend, size,
                             0, kind="peak", trial=t, experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        for r in records:
            r["gbps"] = r["rate_pps"] * r["size"] * 8 / 1e9
        return [
            summary.curve_section(
                records,
                f"{s['nf']}: peak Mpps against frame size",
                x="size",
                y="rate_pps",
                xlabel="frame bytes",
                ylabel="Mpps",
                y_scale=1e6,
                xscale="log",
                text=SPEED_NOTE,
            ),  # fmt: skip
            summary.curve_section(
                records,
                f"{s['nf']}: peak Gbit/s against frame size",
                x="size",
                y="gbps",
                xlabel="frame bytes",
                ylabel="Gbit/s",
                xscale="log",
            ),  # fmt: skip
        ]


NOISES = {
    "none": None,
    "cpu": ["stress-ng", "--cpu", "1", "--cpu-method", "matrixprod"],
    "disk": ["stress-ng", "--hdd", "1", "--hdd-bytes", "256M"],
    # a second traffic flow through the same kernel: UDP over loopback
    "net": ["stress-ng", "--udp", "1"],
}


@contextmanager
def neighbour(kind: str) -> Iterator[None]:
    """A noisy neighbour on the DUT's host for the duration of the block
    (stress-ng): it competes with the NF, wherever that runs."""
    argv = NOISES[kind]
    if argv is None:
        yield
        return
    host = topology.current().dut.host
    with host.temp_dir("veloz-noise-") as tmp:
        proc = host.spawn([*argv, "--temp-path", tmp, "--quiet"])
        try:
            yield
        finally:
            stop(proc, timeout=20)


class Noisy(Throughput):
    """Peak rate with a neighbour loading the CPU, the disk or the network."""

    def __init__(self) -> None:
        super().__init__("drop")
        self.name = "noisy"
        self.title = "Peak rate beside a noisy neighbour (stress-ng)"

    def needs(self, s: dict) -> tuple[topology.Need, ...]:
        if all(n == "none" for n in s["noises"]):
            return ()
        return (topology.Need("dut", "command", "stress-ng", "Debian package stress-ng"),)

    def count(self, s: dict) -> int:
        return s["trials"] * len(s["noises"]) * len(s["sizes"]) * len(s["backends"])

    def run(self, ctx) -> None:
        s = ctx.settings
        for t in range(s["trials"]):
            for noise in s["noises"]:
                with neighbour(noise):
                    for size in s["sizes"]:
                        for backend in s["backends"]:
                            _measure(ctx, f"{s['nf']} {backend} {size} B beside {noise}", s["nf"],
                                     backend, size, 0, kind="peak", trial=t, noise=noise,
                                     experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        out = []
        for size in s["sizes"]:
            at = [r for r in records if r["size"] == size]
            out.append(summary.rate_section(
                at, f"{s['nf']}, {size} B: peak rate by neighbour", series="noise",
                text="Neighbours: cpu = stress-ng matrix multiply on one CPU; disk = stress-ng "
                     "hdd writer; net = stress-ng UDP over loopback. " + SPEED_NOTE,
            ))  # fmt: skip
        return out


class Headline(Throughput):
    """The README's main job: drop and tx, 64 and 1500 B, every backend, vs linux;
    and the cost of each backend per packet at a fixed rate (headline_cost)."""

    def __init__(self) -> None:
        super().__init__("drop")
        self.name = "headline"
        self.title = "Headline: drop and tx on every backend against the Linux kernel"

    def count(self, s: dict) -> int:
        peaks = s["trials"] * len(s["sizes"]) * (len(s["nfs"]) * len(s["backends"]) + 1)
        # + the cost phase, and the XDP programs' own time
        return peaks + s["trials"] * (len(_peak_backends(s)) + len(headline_cost.own(s)))

    def run(self, ctx) -> None:
        s = ctx.settings
        rate, size_c = headline_cost.cost_rate(s), headline_cost.cost_size(s)
        for t in range(s["trials"]):
            for size in s["sizes"]:
                _measure(ctx, f"generator {size} B", "drop", "generator", size, 0, kind="peak",
                         trial=t, experiment=self.name)  # fmt: skip
                for nf in s["nfs"]:
                    for backend in s["backends"]:
                        _measure(ctx, f"{nf} {backend} {size} B", nf, backend, size, 0,
                                 kind="peak", trial=t, experiment=self.name)  # fmt: skip
            # in the same trial, so drift spreads over peaks and costs alike
            for backend in _peak_backends(s):
                nf = headline_cost.COST_NF
                _measure(ctx, f"cost: {nf} {backend} {size_c} B at {rate / 1e6:g} Mpps", nf,
                         backend, size_c, rate, kind="cost", trial=t,
                         experiment=self.name)  # fmt: skip
            # apart from the cost runs: the stats' clock reads would add to their CPU
            with bpf_stats.Enabled():
                for backend in headline_cost.own(s):
                    nf = headline_cost.COST_NF
                    _measure(ctx, f"own: {nf} {backend} {size_c} B at {rate / 1e6:g} Mpps", nf,
                             backend, size_c, rate, kind="own", trial=t,
                             experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        out = []
        peaks = [r for r in records if r.get("kind", "peak") == "peak"]
        for size in s["sizes"]:
            gen = [r for r in peaks if r["size"] == size and r["backend"] == "generator"]
            for nf in s["nfs"]:
                at = [r for r in peaks if r["size"] == size and r["nf"] == nf
                      and r["backend"] != "generator"]  # fmt: skip
                out.append(summary.rate_section(
                    gen + at, f"{nf}, {size} B: peak rate against linux",
                    text=("drop: frames the NF dropped (linux: nftables raw prerouting drop). "
                          if nf == "drop" else
                          "tx: frames that came back to vz-gen (linux: IP forwarding out of the "
                          "same port). ") + SPEED_NOTE,
                ))  # fmt: skip
        return out + headline_cost.sections(records, s)

    def summary(self, records: list[dict], s: dict) -> dict:
        return headline_cost.headline_summary(records, s)


DROP, TX, REDIRECT = Throughput("drop"), Throughput("tx"), Throughput("redirect")
SIZES, NOISY, HEADLINE = Sizes(), Noisy(), Headline()
