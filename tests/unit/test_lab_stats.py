"""The lab's statistics: known answers, and the sink's histogram read back."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veloz.lab import stats


def test_summary_of_one_value_is_that_value():
    assert stats.summarize([3.0]) == {
        "n": 1, "median": 3.0, "low": 3.0, "high": 3.0, "min": 3.0, "max": 3.0,
    }  # fmt: skip


def test_summary_interval_holds_the_median_and_stays_in_the_sample():
    xs = [5.1, 4.9, 5.3, 5.0, 5.2, 4.8, 5.4, 9.0]
    s = stats.summarize(xs)
    assert s["median"] == pytest.approx(np.median(xs))
    assert min(xs) <= s["low"] <= s["median"] <= s["high"] <= max(xs)
    assert s["high"] < 9.0  # one outlier does not carry the interval with it


def test_summary_is_reproducible():
    xs = [1.0, 2.0, 4.0, 8.0, 16.0]
    assert stats.summarize(xs) == stats.summarize(xs)


def test_empty_sample_has_no_summary():
    assert stats.summarize([])["median"] is None


def test_ratio_of_medians_and_its_interval():
    a, b = [10.0, 11.0, 12.0, 10.5, 11.5], [2.0, 2.2, 2.1, 1.9, 2.05]
    r = stats.ratio_of_medians(a, b)
    assert r["ratio"] == pytest.approx(11.0 / 2.05)
    assert r["low"] <= r["ratio"] <= r["high"]
    assert r["low"] > 4  # every resampled ratio is far above 1
    assert stats.ratio_of_medians(a, [])["ratio"] is None


def test_mann_whitney_separated_samples():
    t = stats.mann_whitney([10, 11, 12, 13, 14], [1, 2, 3, 4, 5])
    assert t["statistic"] == 25.0
    assert t["p"] == pytest.approx(2 / 252)  # the exact two-sided p for 5 vs 5
    assert t["effect"] == 1.0
    assert stats.mann_whitney([1, 2, 3, 4, 5], [10, 11, 12, 13, 14])["effect"] == -1.0


def test_kruskal_wallis_effect_and_degenerate_input():
    k = stats.kruskal_wallis([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    assert k["p"] < 0.05 and 0 < k["effect"] <= 1
    assert stats.kruskal_wallis([[1, 1], [1, 1]])["p"] is None
    assert stats.kruskal_wallis([[1, 2, 3]])["p"] is None


def _bucket_low(ns: int) -> int:
    """The sink's bucketing (src/gen/sink.h), to build histograms like it."""
    if ns < 64:
        return ns
    msb = ns.bit_length() - 1
    return (ns >> (msb - 5)) << (msb - 5)


def test_histogram_percentiles_within_a_bucket_of_the_truth():
    rng = np.random.default_rng(1)
    samples = rng.lognormal(mean=9.5, sigma=0.6, size=50_000).astype(int) + 1
    hist: dict[int, int] = {}
    for v in samples:
        hist[_bucket_low(int(v))] = hist.get(_bucket_low(int(v)), 0) + 1
    got = stats.histogram_percentiles(sorted([k, c] for k, c in hist.items()))
    assert got["count"] == samples.size
    for q, key in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p999")):
        truth = np.quantile(samples, q)
        # never below the truth's bucket, never more than one bucket (~3%) above
        assert truth * 0.97 <= got[key] <= truth * 1.07, key
    assert got["mean"] == pytest.approx(samples.mean(), rel=0.02)
    assert got["stddev"] == pytest.approx(samples.std(ddof=1), rel=0.05)


def test_histograms_merge_by_bucket():
    merged = stats.merge_histograms([[[10, 1], [64, 2]], [[64, 3], [128, 1]]])
    assert merged == [[10, 1], [64, 5], [128, 1]]
    assert stats.histogram_percentiles([])["p50"] is None


def test_lost_frames_count_as_slower_than_any_that_arrived():
    hist = [[10, 990], [40, 10]]  # 990 frames took 10 ns, 10 took 40 ns
    assert stats.histogram_percentiles(hist, (0.99,))["p99"] == 10
    # 5 lost of 1005: the 99th percentile's rank, 995, is now among the
    # slow ones that arrived
    assert stats.histogram_percentiles(hist, (0.99,), lost=5)["p99"] == 40
    # 20 lost of 1020: rank 1010 is beyond every frame that arrived
    got = stats.histogram_percentiles(hist, (0.5, 0.99), lost=20)
    assert got["p50"] == 10 and got["p99"] == math.inf
    assert got["mean"] == pytest.approx(10.3)  # of what arrived
    assert stats.histogram_percentiles([], (0.99,), lost=3)["p99"] == math.inf
