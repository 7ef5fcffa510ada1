"""The headline's cost phase and summary, from synthetic records (no testbed):
the DUT's cores over the generator's floor, ns per packet, ratios to linux,
and a report that shows every trial and the summary at the top."""

from __future__ import annotations

import base64
import re

import pytest

from veloz.lab import report, summary
from veloz.lab.experiments import headline_cost, throughput

BACKENDS = ["xdp", "afxdp", "linux"]
SETTINGS = {"sizes": [64, 1500], "nfs": ["drop", "tx"], "trials": 5, "seconds": 2.0,
            "backends": BACKENDS, "cost_rate": 500_000}  # fmt: skip
# busy CPU per backend at the cost rate (the generator's is the floor)
BUSY = {"generator": 0.30, "xdp": 0.32, "afxdp": 1.30, "linux": 0.80}
PEAK = {"generator": 5.4e6, "xdp": 5.2e6, "afxdp": 1.1e6, "linux": 1.8e6}


def _rec(kind, nf, backend, size, trial, rate_pps, busy=0.5, lost=0):
    sent = int(rate_pps * 2) + lost
    return {"kind": kind, "nf": nf, "backend": backend, "size": size, "trial": trial,
            "target_pps": 500_000 if kind == "cost" else 0, "sent": sent, "lost": lost,
            "rate_pps": rate_pps, "cpu_gen_process": busy, "cpu_nf_process": 0.0,
            "cpu_softirq": 0.0, "wall_s": 3.0}  # fmt: skip


def records(afxdp_lost: int = 0) -> list[dict]:
    out = []
    for t in range(5):
        wobble = 1 + 0.01 * t  # trials differ, so the CIs have width
        for size in SETTINGS["sizes"]:
            out.append(_rec("peak", "drop", "generator", size, t, PEAK["generator"] * wobble))
            for nf in SETTINGS["nfs"]:
                for b in BACKENDS:
                    out.append(_rec("peak", nf, b, size, t, PEAK[b] * wobble))
        for b in ["generator", *BACKENDS]:
            lost = afxdp_lost if b == "afxdp" else 0
            out.append(_rec("cost", "drop", b, 64, t, 500_000 - lost / 2, BUSY[b] * wobble,
                            lost=lost))  # fmt: skip
    return out


def test_cost_is_the_dut_cpu_over_the_generator_floor_per_packet():
    rows = {r["backend"]: r for r in headline_cost.table(records())}
    assert list(rows) == BACKENDS  # the generator is the floor, not a row
    floor = 0.30 * 1.02  # the median of the generator's trials
    for b in BACKENDS:
        r = rows[b]
        assert r["trials"] == 5 and r["sustained"] and r["loss"] == 0
        assert r["cores"]["median"] == pytest.approx(BUSY[b] * 1.02 - floor, abs=1e-9)
        assert r["ns_per_packet"]["median"] == pytest.approx(
            (BUSY[b] * 1.02 - floor) * 1e9 / 500_000, rel=1e-6)  # fmt: skip
        assert r["ns_per_packet"]["low"] <= r["ns_per_packet"]["median"]
        assert r["ns_per_packet"]["median"] <= r["ns_per_packet"]["high"]
    assert rows["linux"]["vs_linux"]["ratio"] == 1.0
    x = rows["xdp"]["vs_linux"]
    assert x["ratio"] == pytest.approx((0.32 - 0.30) / (0.80 - 0.30), rel=1e-3)
    assert x["low"] <= x["ratio"] <= x["high"] < 1
    assert rows["afxdp"]["vs_linux"]["ratio"] > 1  # a busy-polled core costs more here


def test_a_backend_that_loses_at_the_cost_rate_is_marked_not_sustained():
    rows = {r["backend"]: r for r in headline_cost.table(records(afxdp_lost=100_000))}
    assert not rows["afxdp"]["sustained"] and rows["afxdp"]["loss"] > 0.05
    assert rows["xdp"]["sustained"]
    s = headline_cost.headline_summary(records(afxdp_lost=100_000), SETTINGS)
    assert any("not sustained" in row[0] and row[1] == "afxdp" for row in s["rows"])


def test_a_cost_cheaper_than_the_noise_is_zero_not_negative():
    recs = records()
    for r in recs:
        if r["kind"] == "cost" and r["backend"] == "xdp":
            r["cpu_gen_process"] = 0.1  # below the generator's floor
    rows = {r["backend"]: r for r in headline_cost.table(recs)}
    assert rows["xdp"]["cores"]["median"] == 0.0
    assert rows["xdp"]["vs_linux"]["ratio"] == 0.0


def test_headline_sections_keep_peaks_and_costs_apart():
    recs = records()
    secs = throughput.HEADLINE.sections(recs, SETTINGS)
    titles = [s["title"] for s in secs]
    assert titles[:4] == [f"{nf}, {size} B: peak rate against linux"
                          for size in (64, 1500) for nf in ("drop", "tx")]  # fmt: skip
    assert titles[4:] == ["Cost: drop, 64 B at 0.5 Mpps offered: ns per packet",
                          "Cost: drop, 64 B at 0.5 Mpps offered: the DUT's CPU cores"]  # fmt: skip
    peak = secs[0]
    assert [row[0] for row in peak["table"]["rows"]] == ["generator", *BACKENDS]
    assert all(row[1] == 5 for row in peak["table"]["rows"])  # the cost runs are not peaks
    # every trial is in the plot, beside the median it gives
    for s in peak["plot"]["series"]:
        assert len(s["points"]) == len(s["x"])
        for pts, med in zip(s["points"], s["y"], strict=True):
            assert len(pts) == 5 and min(pts) <= med <= max(pts)
    cost = secs[4]
    assert [row[0] for row in cost["table"]["rows"]] == BACKENDS
    assert cost["table"]["columns"][-2:] == ["vs linux", "ratio 95% CI"]
    # every ratio has an interval around it
    for row in cost["table"]["rows"]:
        lo, hi = map(float, row[-1].split("–"))
        assert lo <= row[-2] <= hi or row[0] == "linux"


def test_summary_lists_peaks_and_costs_with_intervals():
    s = headline_cost.headline_summary(records(), SETTINGS)
    assert s["columns"] == ["figure", "backend", "unit", "median", "95% CI", "vs linux",
                            "ratio 95% CI"]  # fmt: skip
    figures = list(dict.fromkeys(row[0] for row in s["rows"]))
    assert figures == ["drop 64 B peak", "tx 64 B peak", "drop 1500 B peak", "tx 1500 B peak",
                       "drop 64 B cost at 0.5 Mpps"]  # fmt: skip
    by = {(row[0], row[1], row[2]): row for row in s["rows"]}
    xdp = by[("drop 64 B peak", "xdp", "Mpps")]
    assert xdp[3] == pytest.approx(5.2 * 1.02, rel=1e-3) and xdp[5] == pytest.approx(2.89, 0.01)
    assert re.fullmatch(r"\d+\.\d{3}–\d+\.\d{3}", xdp[4])
    assert by[("drop 64 B peak", "generator", "Mpps")][5] == pytest.approx(3.0, 0.01)
    ns = by[("drop 64 B cost at 0.5 Mpps", "xdp", "ns/packet")]
    assert ns[3] == pytest.approx(40.8, 0.01) and ns[5] == pytest.approx(0.04, 0.01)
    assert re.fullmatch(r"\d+\.\d{2}–\d+\.\d{2}", ns[6])
    assert by[("drop 64 B cost at 0.5 Mpps", "linux", "cores")][3] == pytest.approx(0.51, 0.01)


def test_report_puts_the_summary_first_and_draws_every_trial(tmp_path):
    import json

    recs = records()
    result = {"experiment": "headline", "title": "Headline", "records": recs,
              "settings": SETTINGS, "sections": throughput.HEADLINE.sections(recs, SETTINGS),
              "summary": throughput.HEADLINE.summary(recs, SETTINGS)}  # fmt: skip
    (tmp_path / "headline.json").write_text(json.dumps(result))
    html = report.write_report(tmp_path).read_text()
    top = html.index('<section class="summary" id="summary-headline">')
    assert top < html.index("<h2>Headline</h2>")  # above the experiment's own part
    assert "drop 64 B cost at 0.5 Mpps" in html[top : html.index("</section>")]
    images = re.findall(r'<img src="data:image/png;base64,([^"]+)"', html)
    assert len(images) == 6  # four peak plots and two cost plots
    for img in images:
        assert base64.b64decode(img).startswith(b"\x89PNG\r\n\x1a\n")


def test_plots_with_trial_points_draw_boxes_and_dots():
    """The box-and-whisker plot carries the points; without points, the bars
    of older results are still drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sec = summary.rate_section(records(), "x")
    drawn = {}
    real = plt.subplots

    def spy(*a, **kw):
        fig, ax = real(*a, **kw)
        drawn["ax"] = ax
        return fig, ax

    plt.subplots = spy
    try:
        assert report.plot_png(sec["plot"], "x")
        ax = drawn["ax"]
        from matplotlib.collections import PathCollection  # what scatter draws

        dots = sum(len(c.get_offsets()) for c in ax.collections if type(c) is PathCollection)
        assert dots == len(records())  # every record is one dot
        bare = {**sec["plot"], "series": [{k: v for k, v in s.items() if k != "points"}
                                          for s in sec["plot"]["series"]]}  # fmt: skip
        assert report.plot_png(bare, "x")
        assert len(drawn["ax"].patches) == len(sec["plot"]["series"][0]["x"])  # bars
    finally:
        plt.subplots = real


def test_demo_prints_the_cost_and_the_peak_beside_it(capsys):
    from veloz.lab import demo

    recs = records(afxdp_lost=100_000)
    cost = headline_cost.table(recs)
    demo.print_cost(cost, SETTINGS)
    demo.print_side_by_side(recs, cost, SETTINGS)
    out = capsys.readouterr().out
    assert "cost: drop, 64 B at 0.5 Mpps offered" in out
    assert "headline: drop, 64 B, against linux" in out
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "0.04x" in lines["xdp"] and "2.89x" in lines["xdp"]  # cost beside peak
    assert "(!)" in lines["afxdp"] and "(!)" not in lines["xdp"]
    assert "–" in lines["generator (ceiling)"]  # a ceiling, no cost of its own
    assert "1x" in lines["linux"] or "1.000x" in lines["linux"]
