"""The zero-loss search (python/veloz/lab/zero_loss.py) on a fake NF that
loses frames above a known rate: the answer is the highest rate tried that
passed, within peak / 2^steps of the true limit, never above it."""

from __future__ import annotations

import pytest

from veloz.lab import zero_loss


class _Ctx:
    def __init__(self, steps: int) -> None:
        self.settings = {"steps": steps}
        self.advanced = 0

    def advance(self, label: str, n: int = 1) -> None:
        self.advanced += n


def _nf_limited_at(limit: float, lossy_share: float = 1.0):
    """A measure() whose NF loses `lossy_share` of what is offered above `limit`."""
    tried = []

    def measure(ctx, label, nf, backend, size, rate, **tags):
        tried.append(rate)
        sent = 1_000_000
        lost = int(sent * lossy_share * (rate - limit) / rate) if rate > limit else 0
        return {"offered_pps": float(rate), "sent": sent, "lost": lost, **tags}

    return measure, tried


@pytest.mark.parametrize("limit", [1.0, 123_456.0, 750_000.0, 999_000.0])
def test_zero_loss_rate_within_a_step_below_the_limit(limit: float) -> None:
    steps, peak_rate = 12, 1_000_000.0
    measure, tried = _nf_limited_at(limit)
    peak = {"offered_pps": peak_rate, "sent": 1000, "lost": 10}
    found = zero_loss.search(_Ctx(steps), measure, "drop", "xdp", 64, peak, 0.0, 0.0, {})
    assert len(tried) == steps and found["steps"] == steps
    assert found["rate_pps"] <= limit
    assert limit - found["rate_pps"] <= peak_rate / 2**steps + 1


def test_lossy_search_from_the_zero_loss_floor() -> None:
    # 10% of what is offered above 500 kpps is lost: 0.5% loss is reached
    # at 500k / (1 - 0.05) = 526.3 kpps
    measure, tried = _nf_limited_at(500_000.0, lossy_share=0.1)
    peak = {"offered_pps": 1_000_000.0, "sent": 1000, "lost": 50}
    found = zero_loss.search(_Ctx(14), measure, "drop", "xdp", 64, peak, 0.005, 500_000.0, {})
    assert min(tried) >= 500_000
    assert 500_000 / 0.95 - 1_000_000 / 2**14 - 1 <= found["rate_pps"] <= 500_000 / 0.95


def test_peak_that_passes_is_the_answer_without_a_search() -> None:
    measure, tried = _nf_limited_at(2_000_000.0)
    ctx = _Ctx(8)
    peak = {"offered_pps": 900_000.0, "sent": 1000, "lost": 0}
    found = zero_loss.search(ctx, measure, "drop", "xdp", 64, peak, 0.0, 0.0, {})
    assert found == {"rate_pps": 900_000.0, "steps": 0}
    assert not tried and ctx.advanced == 8
