# SPDX-License-Identifier: BSD-2-Clause
"""deploy/'s Grafana dashboard and Prometheus alerting rules, offline:
promtool checks the rules and runs their unit tests (veloz-rules-test.yml),
and parses every dashboard query; the dashboard's shape and its use of
rate() are checked here. tests/net/test_dashboard.py checks the metric
names against live scrapes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from test_metrics_text import USERSPACE_LINE, XDP_LINE

from promql import (
    PROMTOOL,
    REPO,
    RULES,
    all_names,
    check_exprs,
    dashboard,
    dashboard_exprs,
    metric_names,
    panels,
    promtool,
    rule_exprs,
    substitute,
)
from veloz.control import metrics

needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is missing: ./scripts/bootstrap installs prometheus"
)
RULE_TESTS = Path(__file__).with_name("veloz-rules-test.yml")
SELECTOR = re.compile(r"[a-zA-Z_:][\w:]*\{([^}]*)\}")


def without_annotations(text: str) -> str:
    """The rules file with each alert's annotations block left out."""
    out, block = [], None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if block is not None and (not line.strip() or indent > block):
            continue
        block = indent if line.strip() == "annotations:" else None
        if block is None:
            out.append(line)
    return "\n".join(out) + "\n"


def alert_blocks(text: str) -> dict[str, list[str]]:
    """Alert name -> the lines of its rule."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.strip().startswith("- alert:"):
            current = blocks.setdefault(line.split(":", 1)[1].strip(), [])
        elif line.strip().startswith("- name:"):
            current = None
        elif current is not None:
            current.append(line.strip())
    return blocks


@needs_promtool
def test_rules_pass_promtool_check():
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rule_exprs())} rules found" in done.stdout


def test_every_alert_waits_has_a_severity_and_says_what_to_do():
    blocks = alert_blocks(RULES.read_text())
    assert set(blocks) == {name for name, _ in rule_exprs()}
    assert {"VelozTargetDown", "VelozTargetsAbsent", "VelozRxMissedRising",
            "VelozLbVipNoHealthyBackend", "VelozRouterSyncBehind"} <= set(blocks)  # fmt: skip
    for name, lines in blocks.items():
        assert any(re.fullmatch(r"for: \d+[smh]", x) for x in lines), f"{name}: no for:"
        assert any(re.fullmatch(r"severity: (warning|critical)", x) for x in lines), name
        assert "summary:" in " ".join(lines) and "description: >-" in lines, name


@needs_promtool
def test_alerts_fire_on_their_series_after_their_for(tmp_path: Path):
    # promtool compares annotations whole; the cases check labels and timing
    rules = tmp_path / "rules.yml"
    rules.write_text(without_annotations(RULES.read_text()))
    cases = tmp_path / "cases.yml"
    cases.write_text(RULE_TESTS.read_text().replace("  - RULES\n", f"  - {rules}\n"))
    done = promtool("test", "rules", str(cases))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_dashboard_has_its_variables_and_every_panel_a_query():
    dash = dashboard()
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["job"]["multi"] and variables["instance"]["multi"]
    ids = [p["id"] for p in panels(dash)]
    assert len(ids) == len(set(ids))
    shown = [p for p in panels(dash) if p["type"] != "row"]
    assert len(shown) >= 20
    for p in shown:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"] and p["title"] and p.get("description"), p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)) and all(t["expr"] for t in p["targets"]), p["title"]


def test_dashboard_panels_do_not_overlap():
    taken: set[tuple[int, int]] = set()
    for p in panels(dashboard()):
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                 for y in range(g["y"], g["y"] + g["h"])}  # fmt: skip
        assert not cells & taken, p["title"]
        taken |= cells


def test_every_dashboard_selector_follows_job_and_instance():
    for where, expr in dashboard_exprs(dashboard()):
        if where.startswith("variable"):
            continue
        for labels in SELECTOR.findall(expr):
            assert 'job=~"$job"' in labels and 'instance=~"$instance"' in labels, where


@needs_promtool
def test_every_dashboard_query_parses(tmp_path: Path):
    exprs = [(w, substitute(e)) for w, e in dashboard_exprs(dashboard())]
    done = check_exprs(exprs, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout


@needs_promtool
def test_a_broken_query_is_refused(tmp_path: Path):
    """check_exprs is a real parse: a query that is not PromQL fails it."""
    done = check_exprs([("bad", "sum by (instance) (rate(veloz_frames_total[5m])")], tmp_path)
    assert done.returncode != 0


def test_rate_only_over_counters_and_counters_only_through_rate():
    """rate(), irate() and increase() take a _total counter; a counter is
    never shown raw, only how fast it grows."""
    for where, expr in dashboard_exprs(dashboard()) + rule_exprs():
        text = substitute(expr)
        for m in re.finditer(r"\b(rate|irate|increase)\(\s*([a-zA-Z_:][\w:]*)", text):
            assert m.group(2).endswith("_total"), f"{where}: {m.group()}"
        for name in metric_names(text):
            if name.endswith("_total"):
                uses = len(re.findall(rf"\b{name}\b", text))
                through = len(re.findall(rf"\b(?:rate|irate|increase)\(\s*{name}\b", text))
                assert uses == through, f"{where}: {name} outside rate()"


def test_metric_names_are_read_from_promql():
    assert metric_names(
        'sum by (instance, verdict) (rate(veloz_frames_total{job=~"veloz", verdict="drop"}[5m]))'
    ) == {"veloz_frames_total"}
    assert metric_names("a / (b + on (x) group_left (y) c) > bool 0 unless absent(d)") \
        == {"a", "b", "c", "d"}  # fmt: skip
    assert metric_names('up{job=~"veloz.*"} == 0') == {"up"}
    names = all_names()
    assert "up" in names and "veloz_frames_total" in names
    assert all(n.startswith("veloz_") for n in names if n != "up"), sorted(names)


def udpd_line() -> dict:
    """A stats line with every key vz-udpd writes (src/sock/udpd/stats.c)."""
    text = (REPO / "src/sock/udpd/stats.c").read_text()
    line: dict[str, dict[str, int]] = {}
    section = None
    for m in re.finditer(r'\\"(\w+)\\": (\{|%llu)', text):
        if m.group(2) == "{":
            section = line.setdefault(m.group(1), {})
        elif section is not None:
            section[m.group(1)] = 1
    return line


@needs_promtool
def test_every_exported_name_passes_promtool_lint():
    """Each shape a run or udpd exports, with every key, through promtool's
    lint: the names a scrape may show (tests/net/test_dashboard.py lints
    live ones)."""
    line = udpd_line()
    assert {"stack", "stack6", "sockets", "poller", "port"} <= set(line)
    assert len(line["stack"]) > 20 and "rx_not_for_us" in line["stack"]
    vips = [{"vip": "198.18.0.100:9/udp", "packets": 1, "bytes": 64,
             "backends": [{"address": "198.18.1.2", "packets": 1, "bytes": 64}]}]  # fmt: skip
    shapes = [metrics.udpd_families(line),
              metrics.families(USERSPACE_LINE, "ddos", "afxdp", {"passed": 1}),
              metrics.families(XDP_LINE, "lb", "xdp", {"ring": 1}, vips)]  # fmt: skip
    for families in shapes:
        families = list(families)

        class Fixed:
            def collect(self, families=families):
                yield from families

        registry = CollectorRegistry(auto_describe=False)
        registry.register(Fixed())  # type: ignore[arg-type]
        text = generate_latest(registry).decode()
        lint = promtool("check", "metrics", stdin=text)
        assert lint.returncode == 0, lint.stderr + text
