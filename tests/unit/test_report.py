"""`veloz report`: a results directory becomes one self-contained HTML file."""

from __future__ import annotations

import argparse
import base64
import json
import re

import pytest

from veloz.core.errors import VelozError
from veloz.lab import report

RESULT = {
    "experiment": "drop",
    "title": "Throughput of the drop NF",
    "started": "2026-11-22T10:00:00+00:00",
    "finished": "2026-11-22T10:05:00+00:00",
    "environment": {"kernel": "6.18", "cpus": 2, "veloz_commit": "abc123"},
    "settings": {"trials": 5, "backends": ["xdp", "linux"]},
    "records": [{"trial": 0, "backend": "xdp", "rate_pps": 5.2e6, "histogram": [[1, 2]]}],
    "sections": [
        {
            "title": "peak rate",
            "text": "bold claims need <b>evidence</b>",
            "table": {"columns": ["backend", "median Mpps", "sent"],
                      "rows": [["xdp", 5.23456789, 1234567], ["linux", 1.77, None]]},
            "plot": {"kind": "bar", "xlabel": "backend", "ylabel": "Mpps",
                     "series": [{"label": "Mpps", "x": ["xdp", "linux"], "y": [5.2, 1.8],
                                 "low": [5.0, 1.7], "high": [5.4, None]}]},
            "tests": [{"name": "Mann-Whitney U", "groups": ["xdp", "linux"], "statistic": 25.0,
                       "p": 0.0001, "effect": 1.0, "effect_name": "rank-biserial r"}],
        },
        {
            "title": "cost curve",
            "plot": {"kind": "line", "xlabel": "N", "ylabel": "ns", "xscale": "log",
                     "series": [{"label": "xdp", "x": [1, 10, 100], "y": [30, 60, None],
                                 "low": [28, 55, None], "high": [32, 66, None]},
                                {"label": "native", "x": [1, 10, 100], "y": [3, 9, 80]}]},
        },
        {"title": "nothing to draw", "plot": {"kind": "line", "series": []}},
    ],
}  # fmt: skip


def write(tmp_path, data=RESULT, name="drop.json"):
    (tmp_path / name).write_text(json.dumps(data))


def test_report_embeds_every_plot_and_escapes_text(tmp_path):
    write(tmp_path)
    out = report.write_report(tmp_path)
    html = out.read_text()
    assert out == tmp_path / "report.html"
    images = re.findall(r'<img src="data:image/png;base64,([^"]+)"', html)
    assert len(images) == 2  # the empty plot is left out
    for img in images:
        assert base64.b64decode(img).startswith(b"\x89PNG\r\n\x1a\n")
    assert "&lt;b&gt;evidence&lt;/b&gt;" in html and "<b>evidence" not in html
    assert "&lt;0.001" in html  # p formatted, then escaped
    assert "5.235" in html and "1,234,567" in html and "–" in html
    assert "peak rate" in html and "cost curve" in html and "abc123" in html
    assert "rank-biserial r" in html and "xdp vs linux" in html
    # Self-contained: nothing the browser would fetch.
    assert "<script" in html and not re.search(r'(src|href)="(?!data:)|<link|@import', html)
    # The records table: one row, the bulky histogram field left out.
    assert "Measurements (1)" in html and "histogram" not in html


def test_results_without_sections_still_render(tmp_path):
    write(tmp_path, {"experiment": "cost", "records": []})
    html = report.write_report(tmp_path).read_text()
    assert "<h2>cost</h2>" in html and "<img" not in html and "Too many" not in html


def test_tests_of_more_than_two_groups_are_listed_with_commas(tmp_path):
    kw = {
        "name": "Kruskal-Wallis",
        "groups": ["xdp", "afxdp", "linux"],
        "statistic": 9.5,
        "p": 0.0123,
        "effect": None,
    }
    write(tmp_path, {"experiment": "drop", "sections": [{"title": "all", "tests": [kw]}]})
    html = report.write_report(tmp_path).read_text()
    assert "xdp, afxdp, linux" in html and "0.0123" in html


def test_many_records_are_counted_not_tabulated(tmp_path):
    records = [{"trial": i, "rate_pps": 1.0 * i} for i in range(report.MAX_RECORD_ROWS)]
    write(tmp_path, {"experiment": "drop", "records": records})
    html = report.write_report(tmp_path).read_text()
    assert f"Measurements ({report.MAX_RECORD_ROWS})" in html
    assert "Too many to show here" in html and "<td>499</td>" not in html


def test_malformed_result_names_the_file(tmp_path):
    bad = {"experiment": "drop", "sections": [{"title": "t", "table": {"rows": [[1]]}}]}
    write(tmp_path, bad, "bad.json")
    with pytest.raises(VelozError, match="bad.json: not a valid veloz result"):
        report.write_report(tmp_path)


def test_several_results_in_start_order_other_json_ignored(tmp_path):
    write(tmp_path, {**RESULT, "title": "second", "started": "2026-11-23"}, "b.json")
    write(tmp_path, {**RESULT, "title": "first", "started": "2026-11-21"}, "a2.json")
    write(tmp_path, ["not", "a", "result"], "other.json")
    html = report.write_report(tmp_path).read_text()
    assert html.index("first") < html.index("second")


def test_empty_directory_is_one_clear_error(tmp_path):
    with pytest.raises(VelozError, match="holds no veloz results"):
        report.write_report(tmp_path)
    with pytest.raises(VelozError, match="is not a directory"):
        report.write_report(tmp_path / "missing")


def test_invalid_json_names_the_file(tmp_path):
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(VelozError, match="broken.json"):
        report.write_report(tmp_path)


def test_command_prints_the_path(tmp_path, capsys):
    write(tmp_path)
    assert report.run(argparse.Namespace(directory=str(tmp_path))) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "report.html")
