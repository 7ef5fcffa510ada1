"""`veloz report DIR`: one self-contained HTML file from a results directory.

Every `*.json` in DIR written by `veloz bench` becomes a part of the report:
its environment and settings, then each section (text, plot, table, tests).
A result with a `summary` (the headline's figures) has it at the top of the
page. Plots show every trial: categories as box-and-whisker plots (CSIT's
style: the box holds the middle half, whiskers reach min and max) with each
trial's point and the median's 95% CI, curves as the median's line and band
with each trial's point. They are drawn with matplotlib and embedded as PNG
data, so the file opens in any browser with nothing else beside it.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import io
import json
from pathlib import Path

from veloz.core import safeio
from veloz.core.errors import VelozError

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>veloz lab report</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
table.kv td { text-align: left; }
img { max-width: 100%; display: block; margin: 0.5em 0; }
h2 { border-top: 2px solid #444; padding-top: 0.6em; margin-top: 2em; }
p.text { white-space: pre-line; }
</style></head>
<body>
<h1>veloz lab report</h1>
<p>Generated {{ generated }} from {{ directory }}.</p>
{% for r in results if r.summary %}
<section class="summary" id="summary-{{ r.experiment }}">
<h2>Summary: {{ r.summary.title }}</h2>
{% if r.summary.text %}<p class="text">{{ r.summary.text }}</p>{% endif %}
<table><tr>{% for c in r.summary.columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for row in r.summary.rows %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table></section>
{% endfor %}
{% for r in results %}
<h2>{{ r.title }}</h2>
<p>Experiment <code>{{ r.experiment }}</code>, {{ r.started }} – {{ r.finished }};
{{ r.nrecords }} measurements.</p>
<details open><summary>Environment and settings</summary>
<table class="kv">
{% for k, v in r.context %}<tr><td>{{ k }}</td><td>{{ v }}</td></tr>
{% endfor %}</table></details>
{% for s in r.sections %}
<h3>{{ s.title }}</h3>
{% if s.text %}<p class="text">{{ s.text }}</p>{% endif %}
{% if s.image %}<img src="data:image/png;base64,{{ s.image }}" alt="{{ s.title }}">{% endif %}
{% if s.table %}<table><tr>{% for c in s.table.columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for row in s.table.rows %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>{% endif %}
{% if s.tests %}<table><tr><th>test</th><th>groups</th><th>statistic</th><th>p</th>
<th>effect</th></tr>
{% for t in s.tests %}<tr><td>{{ t.name }}</td><td>{{ t.groups }}</td><td>{{ t.statistic }}</td>
<td>{{ t.p }}</td><td>{{ t.effect }}</td></tr>
{% endfor %}</table>{% endif %}
{% endfor %}
<details><summary>Measurements ({{ r.nrecords }})</summary>
{% if r.records is none %}<p>Too many to show here: they are in {{ r.file }}.</p>
{% elif r.records %}<table><tr>{% for c in r.record_columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for row in r.records %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>{% else %}<p>None.</p>{% endif %}
</details>
{% endfor %}
<script>
// For a headless browser to check that the plots render.
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  document.body.dataset.plotsTotal = imgs.length;
  document.body.dataset.plotsLoaded =
    imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
});
</script>
</body></html>
"""
MAX_RECORD_ROWS = 500
# Raw record fields too bulky or nested for the table.
HIDDEN_FIELDS = {"histogram", "errors", "latency_ns"}


def run(args: argparse.Namespace) -> int:
    print(write_report(Path(args.directory)))
    return 0


def load_results(directory: Path) -> list[dict]:
    if not directory.is_dir():
        raise VelozError(f"{directory} is not a directory")
    results = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(safeio.read_text(path, "result"))  # bounded
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise VelozError(f"{path}: not readable JSON ({e})") from None
        if isinstance(data, dict) and "experiment" in data:
            results.append({**data, "_file": path.name})
    if not results:
        raise VelozError(f"{directory} holds no veloz results (no *.json with an experiment)")
    return sorted(results, key=lambda r: str(r.get("started", "")))


def fmt(v: object) -> str:
    """Cells: ints with separators, floats to 4 significant digits, None as –."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, list):
        return ", ".join(fmt(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v)
    return str(v)


def _p(p: float | None) -> str:
    return "–" if p is None else "<0.001" if p < 0.001 else f"{p:.3g}"


def _box_strip(ax, s: dict, cats: list, offset: float, width: float, color: str) -> None:
    """Every trial of each category: a box-and-whisker plot (whiskers at min
    and max, so no point is an outlier twice), the points themselves spread
    sideways in trial order, and the median with its CI as a red bar beside
    the box."""
    pos, data, med, below, above = [], [], [], [], []
    for x, vals, y, lo, hi in zip(s["x"], s["points"], s["y"], s.get("low") or s["y"],
                                  s.get("high") or s["y"], strict=False):  # fmt: skip
        vals = [v for v in vals or [] if v is not None]
        if not vals:
            continue
        pos.append(cats.index(x) + offset)
        data.append(vals)
        if y is not None:
            med.append((pos[-1], y))
            below.append(max(0.0, y - (lo if lo is not None else y)))
            above.append(max(0.0, (hi if hi is not None else y) - y))
    if not data:
        return
    box = ax.boxplot(data, positions=pos, widths=width * 0.7, whis=(0, 100), showfliers=False,
                     patch_artist=True, manage_ticks=False,
                     medianprops={"color": "black"})  # fmt: skip
    for b in box["boxes"]:
        b.set_facecolor(color)
        b.set_alpha(0.35)
    for i, (p, vals) in enumerate(zip(pos, data, strict=True)):
        step = width * 0.6 / max(len(vals), 1)
        xs = [p + (k - (len(vals) - 1) / 2) * step for k in range(len(vals))]
        ax.scatter(xs, vals, s=14, color=color, edgecolors="black", linewidths=0.4, zorder=3,
                   label=s["label"] if i == 0 else None)  # fmt: skip
    if med:
        # beside the box, in red: not to be read as its whiskers
        ax.errorbar([m[0] + width * 0.42 for m in med], [m[1] for m in med],
                    yerr=[below, above], fmt="D", markersize=3, color="tab:red",
                    elinewidth=1.2, capsize=3, zorder=4)  # fmt: skip


def plot_png(plot: dict, title: str) -> str | None:
    """The section's plot as base64 PNG, or None if it has nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [s for s in plot.get("series", []) if any(y is not None for y in s.get("y", []))]
    if not series:
        return None
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(7, 3.8), dpi=110)
    try:
        if plot["kind"] == "bar":
            cats = list(dict.fromkeys(x for s in series for x in s["x"]))
            width = 0.8 / len(series)
            for i, s in enumerate(series):
                offset = -0.4 + width * (i + 0.5)
                if s.get("points") and len(s["points"]) == len(s["x"]):
                    # every trial: box, whiskers, points, the median's CI
                    _box_strip(ax, s, cats, offset, width, colors[i % len(colors)])
                    continue
                pts = [(cats.index(x), y, lo, hi) for x, y, lo, hi in
                       zip(s["x"], s["y"], s.get("low") or s["y"], s.get("high") or s["y"],
                           strict=False) if y is not None]  # fmt: skip
                xs = [p[0] + offset for p in pts]
                ys = [p[1] for p in pts]
                below = [max(0, p[1] - (p[2] if p[2] is not None else p[1])) for p in pts]
                above = [max(0, (p[3] if p[3] is not None else p[1]) - p[1]) for p in pts]
                # Error bars only where the series has a CI: zero-length caps are noise.
                err = [below, above] if s.get("low") or s.get("high") else None
                ax.bar(xs, ys, width, yerr=err, capsize=3, label=s["label"],
                       color=colors[i % len(colors)])  # fmt: skip
            ax.set_xticks(range(len(cats)), cats, rotation=20)
            ax.set_xlim(-0.6, len(cats) - 0.4)
            if plot.get("yscale", "linear") == "linear":
                ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))  # ratios read off the heights
        else:
            for i, s in enumerate(series):
                color = colors[i % len(colors)]
                pts = [(x, y, lo, hi) for x, y, lo, hi in
                       zip(s["x"], s["y"], s.get("low") or s["y"], s.get("high") or s["y"],
                           strict=False) if y is not None]  # fmt: skip
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s["label"],
                        color=color)  # fmt: skip
                band = [p for p in pts if p[2] is not None and p[3] is not None]
                if band:
                    ax.fill_between([p[0] for p in band], [p[2] for p in band],
                                    [p[3] for p in band], alpha=0.2, color=color)  # fmt: skip
                trials = [p for p in s.get("points") or [] if p[1] is not None]
                if trials:  # every trial, as small dots around the median's line
                    ax.scatter([p[0] for p in trials], [p[1] for p in trials], s=8,
                               color=color, alpha=0.6, zorder=3)  # fmt: skip
            ax.set_xscale(plot.get("xscale", "linear"))
        ax.set_yscale(plot.get("yscale", "linear"))
        ax.set_xlabel(plot.get("xlabel", ""))
        ax.set_ylabel(plot.get("ylabel", ""))
        ax.set_title(title, fontsize=9)
        ax.grid(True, alpha=0.3)
        if len(series) > 1:
            ax.legend(fontsize=8)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _section(s: dict) -> dict:
    table = s.get("table")
    tests = [
        {
            "name": t.get("name", ""),
            "groups": (" vs " if len(t.get("groups", [])) == 2 else ", ").join(
                map(str, t.get("groups", []))
            ),
            "statistic": fmt(t.get("statistic")),
            "p": _p(t.get("p")),
            "effect": "–" if t.get("effect") is None
            else f"{t['effect']:.3g} ({t.get('effect_name', '')})",
        }
        for t in s.get("tests", [])
    ]  # fmt: skip
    return {
        "title": s.get("title", ""),
        "text": s.get("text", ""),
        "image": plot_png(s["plot"], s.get("title", "")) if s.get("plot") else None,
        "table": {"columns": table["columns"],
                  "rows": [[fmt(c) for c in row] for row in table["rows"]]} if table else None,
        "tests": tests,
    }  # fmt: skip


def _part(r: dict) -> dict:
    records = r.get("records", [])
    columns = list(dict.fromkeys(k for rec in records for k in rec if k not in HIDDEN_FIELDS))
    context = [(f"environment: {k}", fmt(v)) for k, v in r.get("environment", {}).items()]
    context += [(f"setting: {k}", fmt(v)) for k, v in r.get("settings", {}).items()]
    summary = r.get("summary")
    return {
        "title": r.get("title") or r["experiment"],
        "experiment": r["experiment"],
        "summary": {
            "title": summary.get("title", ""),
            "text": summary.get("text", ""),
            "columns": summary["columns"],
            "rows": [[fmt(c) for c in row] for row in summary["rows"]],
        } if summary else None,
        "started": r.get("started", "?"),
        "finished": r.get("finished", "?"),
        "file": r["_file"],
        "context": context,
        "sections": [_section(s) for s in r.get("sections", [])],
        "nrecords": len(records),
        "record_columns": columns,
        "records": [[fmt(rec.get(c)) for c in columns] for rec in records]
        if len(records) < MAX_RECORD_ROWS else None,
    }  # fmt: skip


def _checked_part(r: dict, directory: Path) -> dict:
    """A result whose shape is wrong is one error naming its file, not a traceback."""
    try:
        return _part(r)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise VelozError(
            f"{directory / r['_file']}: not a valid veloz result ({type(e).__name__}: {e})"
        ) from None


def write_report(directory: Path) -> Path:
    import jinja2

    directory = Path(directory)
    results = load_results(directory)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    html = env.from_string(TEMPLATE).render(
        generated=dt.datetime.now().isoformat(timespec="seconds"),
        directory=str(directory),
        results=[_checked_part(r, directory) for r in results],
    )
    out = directory / "report.html"
    safeio.write_text(out, html, "the report")  # every write and the close checked
    return out
