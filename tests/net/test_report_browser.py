"""The report opens in headless Chromium and every plot in it renders."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from veloz.lab import report

BAR = {"kind": "bar", "series": [{"label": "Mpps", "x": ["xdp", "linux"], "y": [5.2, 1.8]}]}
LINE = {"kind": "line", "series": [{"label": "ns", "x": [0, 100, 400], "y": [30, 120, 470]}]}
SECTIONS = [{"title": "bars", "plot": BAR}, {"title": "line", "plot": LINE}]
RESULT = {"experiment": "drop", "records": [], "sections": SECTIONS}


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_report_plots_render_in_headless_chromium(tmp_path):
    (tmp_path / "drop.json").write_text(json.dumps(RESULT))
    html = report.write_report(tmp_path)
    done = subprocess.run(
        ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
         "--dump-dom", html.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    total = re.search(r'data-plots-total="(\d+)"', done.stdout)
    loaded = re.search(r'data-plots-loaded="(\d+)"', done.stdout)
    assert total and loaded, "the page's load handler did not run"
    assert int(total.group(1)) == int(loaded.group(1)) == 2
