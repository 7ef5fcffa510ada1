#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""No C or Python function over 80 lines, no source file over 800.

A function that long does several things; a file that long holds several
concerns. lizard (the field's function-metrics tool) finds the functions,
so a brace in a string or a macro does not fool a hand-written counter.
Tests and scripts are held to it as the rest: a test is code to read too.
`make lint` runs this; tests/unit/test_layers.py checks that it fails a C
and a Python function one line too long.

    python3 scripts/check_sizes.py [ROOT]      # exit 1 and one line per excess
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lizard

MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 800
SOURCE_SUFFIXES = {".c", ".h", ".py", ".sh"}
# Generated or vendored text is nobody's design: fuzz corpora, test vectors.
SKIP_PREFIXES = ("tests/fuzz/corpus/", "tests/vectors/")


def tracked_sources(root: Path) -> list[str]:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard"],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        out = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    return sorted(
        p
        for p in out
        if Path(p).suffix in SOURCE_SUFFIXES
        and not p.startswith(SKIP_PREFIXES)
        and (root / p).is_file()
    )


def problems_in(root: Path, rel: str) -> list[str]:
    text = (root / rel).read_text(errors="replace")
    out = []
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if lines > MAX_FILE_LINES:
        out.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES}: split it by concern)")
    if rel.endswith((".c", ".h", ".py")):
        for fn in lizard.analyze_file.analyze_source_code(rel, text).function_list:
            if fn.length > MAX_FUNCTION_LINES:
                out.append(
                    f"{rel}:{fn.start_line}: {fn.name}() is {fn.length} lines"
                    f" (at most {MAX_FUNCTION_LINES})"
                )
    return out


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    problems = [p for rel in tracked_sources(root) for p in problems_in(root, rel)]
    for line in problems:
        print(f"sizes: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
