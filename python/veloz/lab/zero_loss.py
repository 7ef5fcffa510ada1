"""The zero-loss search (RFC 2544, section 26.1): the highest offered rate
at which the DUT loses nothing, or at most a given fraction.

A binary search between a rate known to pass (`floor`) and the peak's
offered rate, in `steps` halvings, so the answer is within peak / 2^steps.
Each probe is one trial at a fixed rate, run by the caller's `probe`; a probe
passes when its lost count is at most `loss` times its sent count. The peak
run itself passing ends the search before it starts.
"""

from __future__ import annotations

from collections.abc import Callable

# probe(rate_pps, step) -> a trial record with "sent", "lost" and "offered_pps"
Probe = Callable[[int, int], dict]


def search(probe: Probe, peak: dict, loss: float, floor: float, steps: int) -> dict:
    """{"rate_pps": the highest passing offered rate, "steps": probes run}."""
    if peak["lost"] <= loss * peak["sent"]:
        return {"rate_pps": peak["offered_pps"], "steps": 0}
    lo, hi, best = floor, peak["offered_pps"], floor
    for step in range(steps):
        mid = (lo + hi) / 2
        rec = probe(max(1, int(mid)), step)
        if rec["lost"] <= loss * rec["sent"]:
            lo, best = mid, max(best, rec["offered_pps"])
        else:
            hi = mid
    return {"rate_pps": best, "steps": steps}
