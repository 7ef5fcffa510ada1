"""Nonparametric statistics for repeated trials: medians with bootstrap
confidence intervals, ratios of medians, Mann-Whitney U and Kruskal-Wallis
with effect sizes, and percentiles of merged latency histograms.

Throughput and latency samples from a shared, noisy machine are skewed and
have outliers, and there are few of them (5 trials by default): medians and
rank tests say what such samples can support, means and t-tests do not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 10_000
# Fixed, so that a report computed twice from the same results is identical.
SEED = 20181204


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def summarize(values: Sequence[float], confidence: float = CONFIDENCE) -> dict:
    """Median, its percentile-bootstrap confidence interval, min, max, n.

    With one value the interval is that value; with none, everything is None.
    """
    xs = np.asarray([v for v in values if v is not None], dtype=float)
    if xs.size == 0:
        return {"n": 0, "median": None, "low": None, "high": None, "min": None, "max": None}
    low = high = float(np.median(xs))
    if xs.size > 1 and np.ptp(xs) > 0:
        res = stats.bootstrap(
            (xs,), np.median, confidence_level=confidence, n_resamples=RESAMPLES,
            method="percentile", random_state=_rng(),
        )  # fmt: skip
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return {
        "n": int(xs.size),
        "median": float(np.median(xs)),
        "low": low,
        "high": high,
        "min": float(xs.min()),
        "max": float(xs.max()),
    }


def ratio_of_medians(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> dict:
    """median(a) / median(b) and a bootstrap interval, resampling both samples.

    The samples are independent (different backends' trials), so each is
    resampled on its own; the interval is the percentile interval of the
    resampled ratios.
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0 or np.median(xb) == 0:
        return {"ratio": None, "low": None, "high": None}
    ratio = float(np.median(xa) / np.median(xb))
    rng = _rng()
    ma = np.median(rng.choice(xa, size=(RESAMPLES, xa.size)), axis=1)
    mb = np.median(rng.choice(xb, size=(RESAMPLES, xb.size)), axis=1)
    ok = mb != 0
    ratios = ma[ok] / mb[ok]
    alpha = (1 - confidence) / 2
    return {
        "ratio": ratio,
        "low": float(np.quantile(ratios, alpha)),
        "high": float(np.quantile(ratios, 1 - alpha)),
    }


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> dict:
    """Two-sided Mann-Whitney U, and the rank-biserial correlation as effect size.

    r = 2U/(n_a n_b) - 1, in [-1, 1]: 1 when every value of a is above every
    value of b. With 5 against 5 trials the smallest possible p is 0.0079.
    """
    if len(a) == 0 or len(b) == 0:
        return {"name": "Mann-Whitney U", "statistic": None, "p": None, "effect": None,
                "effect_name": "rank-biserial r"}  # fmt: skip
    res = stats.mannwhitneyu(a, b, alternative="two-sided")
    u = float(res.statistic)
    return {
        "name": "Mann-Whitney U",
        "statistic": u,
        "p": float(res.pvalue),
        "effect": 2 * u / (len(a) * len(b)) - 1,
        "effect_name": "rank-biserial r",
    }


def kruskal_wallis(groups: Sequence[Sequence[float]]) -> dict:
    """Kruskal-Wallis H across groups, with epsilon-squared as effect size.

    epsilon² = H / (n - 1), in [0, 1]: the share of rank variance explained
    by the grouping. Identical values everywhere give no test (p is None).
    """
    groups = [list(g) for g in groups if len(g) > 0]
    n = sum(len(g) for g in groups)
    out = {"name": "Kruskal-Wallis H", "statistic": None, "p": None, "effect": None,
           "effect_name": "epsilon²"}  # fmt: skip
    if len(groups) < 2 or n < 3 or len({v for g in groups for v in g}) < 2:
        return out  # nothing to rank: every value the same
    res = stats.kruskal(*groups)
    h = float(res.statistic)
    out.update(statistic=h, p=float(res.pvalue), effect=h / (n - 1))
    return out


def merge_histograms(histograms: Iterable[Sequence[Sequence[int]]]) -> list[list[int]]:
    """Sum [[bucket_low_ns, count], ...] histograms (the sink's) into one."""
    total: dict[int, int] = {}
    for hist in histograms:
        for low, count in hist:
            total[int(low)] = total.get(int(low), 0) + int(count)
    return [[low, total[low]] for low in sorted(total)]


def histogram_percentiles(
    histogram: Sequence[Sequence[int]],
    quantiles: Sequence[float] = (0.5, 0.9, 0.99, 0.999),
    lost: int = 0,
) -> dict:
    """Percentiles, mean and standard deviation of a sink histogram.

    Each bucket is [low, next bucket's low); a percentile is reported as the
    highest value of its bucket (HdrHistogram's convention: never optimistic),
    the mean and deviation from bucket midpoints. Buckets are about 3% wide.

    lost: frames sent that never arrived. They count as slower than any that
    did, so a percentile that falls among them is infinite: an overloaded
    system cannot show a good tail by dropping what would have been slow.
    The mean and deviation stay those of the frames that arrived.
    """
    lost = max(int(lost), 0)
    if not histogram and lost:
        return {f"p{_qname(q)}": math.inf for q in quantiles} | {"mean": None, "stddev": None,
                                                                  "count": 0}  # fmt: skip
    if not histogram:
        return {f"p{_qname(q)}": None for q in quantiles} | {"mean": None, "stddev": None,
                                                              "count": 0}  # fmt: skip
    lows = np.asarray([h[0] for h in histogram], dtype=float)
    counts = np.asarray([h[1] for h in histogram], dtype=float)
    # A bucket's width is its distance to the next possible bucket, which for
    # the sink's scheme is low/32 above 64 ns and 1 below.
    power = 2 ** np.floor(np.log2(np.maximum(lows, 1)))
    widths = np.where(lows < 64, 1.0, np.maximum(1.0, power / 32))
    highs = lows + widths - 1
    mids = (lows + highs) / 2
    n = counts.sum()
    cum = np.cumsum(counts)
    out = {"count": int(n)}
    for q in quantiles:
        rank = np.ceil(q * (n + lost))
        i = int(np.searchsorted(cum, rank))
        out[f"p{_qname(q)}"] = math.inf if rank > n else float(highs[min(i, len(highs) - 1)])
    mean = float((mids * counts).sum() / n)
    out["mean"] = mean
    out["stddev"] = float(np.sqrt(((mids - mean) ** 2 * counts).sum() / max(n - 1, 1)))
    return out


def _qname(q: float) -> str:
    """0.5 -> '50', 0.999 -> '999', as in p50, p99.9 -> p999."""
    return f"{q * 100:g}".replace(".", "")
