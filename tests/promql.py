# SPDX-License-Identifier: BSD-2-Clause
"""The PromQL in deploy/: the Grafana dashboard's queries and the alerting
rules' expressions, the metric names they use, and promtool's parse of
them. Shared by tests/unit/test_monitoring.py and
tests/net/test_dashboard.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DASHBOARD = REPO / "deploy/grafana/veloz.json"
RULES = REPO / "deploy/prometheus/veloz-rules.yml"
PROMTOOL = shutil.which("promtool")

# Grafana's variables, each replaced by a value of its kind, so that a
# query is plain PromQL for promtool (ranges: a duration; labels: a regex).
GRAFANA_VARS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h",
                "job": "veloz", "instance": "127.0.0.1:9464"}  # fmt: skip

# What looks like a metric name but is not one, once strings, label
# matchers, ranges and grouping lists are out.
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on",
                      "ignoring", "group_left", "group_right", "inf", "nan", "atan2"})  # fmt: skip
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"(?<![\w.:])[a-zA-Z_:][\w:]*")
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*(\w+)\)$", re.S)


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(dash: dict) -> list[dict]:
    """Every panel, those inside collapsed rows too."""
    out = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def dashboard_exprs(dash: dict) -> list[tuple[str, str]]:
    """(where, query) for every panel target and query variable."""
    out = []
    for p in panels(dash):
        for t in p.get("targets", []):
            out.append((f"panel {p['title']!r} {t.get('refId')}", t.get("expr", "")))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = _LABEL_VALUES.match(query)
            assert m, f"variable {v['name']}: not label_values(SELECTOR, LABEL): {query}"
            out.append((f"variable {v['name']}", m.group(1)))
    return out


def rule_exprs(text: str | None = None) -> list[tuple[str, str]]:
    """(alert, expr) of each alerting rule; the file is block YAML, written
    one key a line, so its expressions are read without a YAML library."""
    out: list[tuple[str, str]] = []
    alert = None
    for line in (text if text is not None else RULES.read_text()).splitlines():
        key, _, value = line.strip().lstrip("- ").partition(": ")
        if key == "alert":
            alert = value
        elif key == "expr" and alert:
            out.append((alert, value))
    return out


def substitute(expr: str) -> str:
    """A dashboard query with Grafana's variables replaced; an unknown one fails."""

    def value(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        assert name in GRAFANA_VARS, f"unknown dashboard variable ${name} in {expr}"
        return GRAFANA_VARS[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for m in _NAME.finditer(text):
        if m.group() in KEYWORDS or re.match(r"\s*\(", text[m.end() :]):
            continue  # a keyword, or a function or aggregation called
        names.add(m.group())
    return names


def all_names() -> dict[str, set[str]]:
    """Metric name -> where it is used (dashboard panels, alerts)."""
    out: dict[str, set[str]] = {}
    for where, expr in dashboard_exprs(dashboard()) + rule_exprs():
        for name in metric_names(substitute(expr)):
            out.setdefault(name, set()).add(where)
    return out


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    assert PROMTOOL, "promtool is missing: ./scripts/bootstrap installs Debian's prometheus"
    return subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def check_exprs(exprs: list[tuple[str, str]], tmp: Path) -> subprocess.CompletedProcess:
    """promtool's own PromQL parser over each expression: one recording rule
    each (a JSON string is a YAML double-quoted scalar)."""
    lines = ["groups:", "  - name: parse", "    rules:"]
    for i, (_, expr) in enumerate(exprs):
        lines += [f"      - record: veloz:parse_{i}", f"        expr: {json.dumps(expr)}"]
    path = tmp / "exprs.yml"
    path.write_text("\n".join(lines) + "\n")
    return promtool("check", "rules", str(path))
