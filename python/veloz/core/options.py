"""The C tools' option tables, as `TOOL --describe-options --json` prints them.

Each limit of a C tool's option is written once, in its table (src/common/
options.h); the `veloz` command reads it from there to check a value before
it starts anything, so the two never disagree. meson writes each tool's
table beside it (TOOL.options.json) as it builds the tool; it is read once
per process.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from veloz.core import paths
from veloz.core.errors import VelozError


def _parse(text: str, source: str) -> dict[str, dict[str, Any]]:
    try:
        table = json.loads(text)
    except json.JSONDecodeError:
        table = None
    if not isinstance(table, dict) or not isinstance(table.get("options"), list):
        raise VelozError(f"{source} holds no option table", code=1)
    return {row["name"]: row for row in table["options"]}


@functools.cache
def _load(path: str, _mtime_ns: int) -> dict[str, dict[str, Any]]:
    """The build's TOOL.options.json (written by meson beside the tool),
    else the tool's own answer (an install without the file)."""
    saved = Path(path + ".options.json")
    try:
        if saved.stat().st_mtime_ns >= _mtime_ns:
            return _parse(saved.read_text(), str(saved))
    except OSError:
        pass
    try:
        done = subprocess.run([path, "--describe-options", "--json"], capture_output=True,
                              text=True, timeout=30, check=False)  # fmt: skip
    except OSError as e:
        raise VelozError(f"cannot run {path}: {e.strerror}", code=1) from None
    return _parse(done.stdout if done.returncode == 0 else "", f"{path} --describe-options")


def table(tool: str) -> dict[str, dict[str, Any]]:
    """Option name (without --) -> its row: type, min, max, default, help..."""
    path = paths.tool(tool)
    return _load(str(path), os.stat(path).st_mtime_ns)


def row(tool: str, option: str) -> dict[str, Any]:
    name = option.removeprefix("--")
    try:
        return table(tool)[name]
    except KeyError:
        raise VelozError(f"{tool} has no option --{name}", code=1) from None


def limits(tool: str, option: str) -> tuple[int | float, int | float]:
    """(min, max) of a numeric option, inclusive."""
    r = row(tool, option)
    if "min" not in r or "max" not in r:
        raise VelozError(f"{tool} --{r['name']} is not a bounded number", code=1)
    return r["min"], r["max"]


def check(tool: str, option: str, value: int | float, what: str | None = None) -> None:
    """Refuse VALUE for TOOL's OPTION, as TOOL would, before running it."""
    lo, hi = limits(tool, option)
    if not lo <= value <= hi:
        raise VelozError(f"{what or option} must be between {lo} and {hi}", code=2)
