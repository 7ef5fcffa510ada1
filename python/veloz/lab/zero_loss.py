"""The zero-loss search (RFC 2544's binary search), and the same search for
the highest rate at a small loss: used by the throughput experiments
(experiments/throughput.py).

Given a peak run (the generator unpaced), it looks for the highest offered
rate in [floor, peak offered] whose loss is within the threshold, in
`steps` halvings (so the answer is within peak/2^steps). A point passes
when the generator's transmitted count minus the NF's work is within the
threshold; the zero-loss rate is then the floor of the lossy search.
"""

from __future__ import annotations

from collections.abc import Callable


def search(
    ctx,
    measure: Callable[..., dict],
    nf: str,
    backend: str,
    size: int,
    peak: dict,
    loss: float,
    floor: float,
    tags: dict,
) -> dict:
    """Highest offered rate whose loss is at most `loss` (0: none at all),
    between `floor` (known to pass) and the peak's offered rate. `measure`
    runs one point: (ctx, label, nf, backend, size, rate, **tags) -> record."""
    steps = ctx.settings["steps"]
    if peak["lost"] <= loss * peak["sent"]:
        ctx.advance(f"{backend}: peak passes, no search", steps)
        return {"rate_pps": peak["offered_pps"], "steps": 0}
    lo, hi, best = floor, peak["offered_pps"], floor
    for step in range(steps):
        mid = (lo + hi) / 2
        rec = measure(ctx, f"{nf} {backend} {size} B: search {loss:.1%} at {mid / 1e6:.3f} Mpps",
                      nf, backend, size, max(1, int(mid)), kind="search",
                      criterion=loss, step=step, **tags)  # fmt: skip
        if rec["lost"] <= loss * rec["sent"]:
            lo, best = mid, max(best, rec["offered_pps"])
        else:
            hi = mid
    return {"rate_pps": best, "steps": steps}
