"""From trial records to report sections: medians with confidence
intervals, ratios to a baseline, rank tests, and the plots that show them.

A section is the report's unit (see veloz.lab.report): a title, a text, a
table, a plot and statistical tests, all plain JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from veloz.lab import stats

BASELINE = "linux"


def group(records: Iterable[dict], *keys: str) -> dict[tuple, list[dict]]:
    """Records by the values of `keys`, in first-seen order."""
    out: dict[tuple, list[dict]] = {}
    for r in records:
        out.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    return out


def values(records: Iterable[dict], metric: str) -> list[float]:
    return [r[metric] for r in records if r.get(metric) is not None]


def rate_section(
    records: Sequence[dict],
    title: str,
    metric: str = "rate_pps",
    text: str = "",
    unit: float = 1e6,
    unit_name: str = "Mpps",
    category: str = "backend",
    series: str | None = None,
    baseline: str | None = BASELINE,
) -> dict:
    """Median and 95% CI of `metric` per category (and per series, if given),
    each category's ratio to the baseline's, and the rank tests: each
    category against the baseline (Mann-Whitney U), all together
    (Kruskal-Wallis). A plot of every trial's value per category (the
    report draws box-and-whisker plots with the points and the median's CI,
    as CSIT does), from which the medians are read."""
    cats = list(group(records, category))
    sers = list(group(records, series)) if series else [(None,)]
    rows, plot_series, tests = [], [], []
    for (s,) in sers:
        sub = [r for r in records if series is None or r.get(series) == s]
        by_cat = {c: values(g, metric) for (c,), g in group(sub, category).items()}
        base = by_cat.get(baseline) if baseline else None
        ys, lows, highs, points = [], [], [], []
        for (c,) in cats:
            xs = by_cat.get(c, [])
            m = stats.summarize(xs)
            ratio = stats.ratio_of_medians(xs, base) if base and xs else None
            row = ([s] if series else []) + [
                c, m["n"], _scaled(m["median"], unit), _scaled(m["low"], unit),
                _scaled(m["high"], unit), _scaled(m["min"], unit), _scaled(m["max"], unit),
            ]  # fmt: skip
            if baseline:
                row += [
                    _r(ratio and ratio["ratio"]),
                    None if not ratio or ratio["low"] is None
                    else f"{ratio['low']:.2f}–{ratio['high']:.2f}",
                ]  # fmt: skip
            rows.append(row)
            ys.append(_scaled(m["median"], unit))
            lows.append(_scaled(m["low"], unit))
            highs.append(_scaled(m["high"], unit))
            points.append([_scaled(v, unit) for v in xs])  # every trial, for the strip
            if base and c != baseline and xs:
                tests.append(stats.mann_whitney(xs, base) | {"groups": _names(s, c, baseline)})
        label = str(s) if series else unit_name
        plot_series.append({"label": label, "x": [str(c) for (c,) in cats], "y": ys,
                            "low": lows, "high": highs, "points": points})  # fmt: skip
        if len([v for v in by_cat.values() if v]) > 2:
            kw = stats.kruskal_wallis([v for v in by_cat.values() if v])
            tests.append(kw | {"groups": [f"{s}: all" if series else "all"]})
    columns = ([series] if series else []) + [
        category, "trials", f"median {unit_name}", "CI low", "CI high", "min", "max",
    ]  # fmt: skip
    if baseline:
        columns += [f"vs {baseline}", "ratio 95% CI"]
    return {
        "title": title,
        "text": text,
        "table": {"columns": columns, "rows": rows},
        "plot": {
            "kind": "bar",
            "xlabel": category,
            "ylabel": f"{metric} ({unit_name})",
            "series": plot_series,
        },  # fmt: skip
        "tests": tests,
    }


def curve_section(
    records: Sequence[dict],
    title: str,
    x: str,
    y: str,
    text: str = "",
    series: str = "backend",
    xscale: str = "linear",
    yscale: str = "linear",
    xlabel: str | None = None,
    ylabel: str | None = None,
    x_of: Callable[[dict], float] | None = None,
    y_scale: float = 1.0,
    x_scale: float = 1.0,
) -> dict:
    """y against x per series: the median of the trials at each x and its CI
    (a line with a band), every trial as a point, and a table of the
    medians."""
    rows, plot_series = [], []
    for (s,), sub in group(records, series).items():
        by_x: dict[float, list[float]] = {}
        for r in sub:
            xv = x_of(r) if x_of else r.get(x)
            if xv is None or r.get(y) is None:
                continue
            by_x.setdefault(xv, []).append(r[y])
        xs = sorted(by_x)
        line = {"label": str(s), "x": [], "y": [], "low": [], "high": [], "points": []}
        for xv in xs:
            m = stats.summarize(by_x[xv])
            # every trial, [x, y], drawn as dots around the median's line
            line["points"] += [[xv / x_scale, _scaled(v, y_scale)] for v in by_x[xv]]
            line["x"].append(xv / x_scale)
            line["y"].append(_scaled(m["median"], y_scale))
            line["low"].append(_scaled(m["low"], y_scale))
            line["high"].append(_scaled(m["high"], y_scale))
            rows.append([s, _r(xv / x_scale, 4), m["n"], _scaled(m["median"], y_scale),
                         _scaled(m["low"], y_scale), _scaled(m["high"], y_scale)])  # fmt: skip
        plot_series.append(line)
    return {
        "title": title,
        "text": text,
        "table": {
            "columns": [
                series,
                xlabel or x,
                "trials",
                f"median {ylabel or y}",
                "CI low",
                "CI high",
            ],
            "rows": rows,
        },  # fmt: skip
        "plot": {
            "kind": "line",
            "xlabel": xlabel or x,
            "ylabel": ylabel or y,
            "xscale": xscale,
            "yscale": yscale,
            "series": plot_series,
        },  # fmt: skip
    }


def _names(s: object, c: str, baseline: str) -> list[str]:
    return [f"{s} {c}" if s is not None else c, f"{s} {baseline}" if s is not None else baseline]


def _scaled(v: float | None, unit: float) -> float | None:
    return None if v is None else round(v / unit, 6)


def _r(v: float | None, digits: int = 2) -> float | None:
    return None if v is None else round(v, digits)
