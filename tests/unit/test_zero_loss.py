"""veloz.lab.zero_loss: the RFC 2544 binary search against a made-up DUT
whose capacity is known, so the answer can be checked exactly."""

from __future__ import annotations

import pytest

from veloz.lab import zero_loss


def dut(capacity: float, sent: int = 1_000_000):
    """A DUT that forwards up to `capacity` pps and loses the excess."""
    probes = []

    def probe(rate: int, step: int) -> dict:
        probes.append((rate, step))
        lost = int(sent * max(0.0, rate - capacity) / rate)
        return {"sent": sent, "lost": lost, "offered_pps": float(rate)}

    return probe, probes


@pytest.mark.parametrize("capacity", [1.0, 123_456.0, 700_000.0, 999_999.0])
def test_zero_loss_lands_within_peak_over_two_to_the_steps(capacity):
    probe, probes = dut(capacity)
    peak = {"sent": 1_000_000, "lost": 1, "offered_pps": 1_000_000.0}
    found = zero_loss.search(probe, peak, loss=0.0, floor=0.0, steps=10)
    assert found["steps"] == 10 and len(probes) == 10
    assert [s for _, s in probes] == list(range(10))
    # never above the capacity (that rate would have lost), never far below
    assert found["rate_pps"] <= capacity
    assert capacity - found["rate_pps"] <= 1_000_000 / 2**10 + 1


def test_a_passing_peak_ends_the_search_before_it_starts():
    probe, probes = dut(2e6)
    peak = {"sent": 10, "lost": 0, "offered_pps": 1e6}
    assert zero_loss.search(probe, peak, 0.0, 0.0, 8) == {"rate_pps": 1e6, "steps": 0}
    assert probes == []


def test_a_loss_criterion_allows_that_fraction_and_the_floor_holds():
    probe, _ = dut(500_000.0)
    peak = {"sent": 1_000_000, "lost": 500_000, "offered_pps": 1_000_000.0}
    strict = zero_loss.search(probe, peak, loss=0.0, floor=0.0, steps=12)["rate_pps"]
    lossy = zero_loss.search(probe, peak, loss=0.05, floor=strict, steps=12)["rate_pps"]
    # 5% of the offered rate may be lost: up to capacity / 0.95
    assert strict <= 500_000 < lossy <= 500_000 / 0.95
    # a floor above every passing probe is what comes back
    assert zero_loss.search(probe, peak, 0.0, floor=450_000.0, steps=1)["rate_pps"] == 450_000.0
