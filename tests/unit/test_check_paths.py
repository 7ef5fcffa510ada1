# SPDX-License-Identifier: BSD-2-Clause
"""scripts/check_paths.py passes a tree whose comments and documents name
files that exist, and fails one that names a file that does not.

`make lint` runs it over the tree; here it runs over a small git repository,
so a checker that stopped looking would fail here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_paths.py"

GOOD = {
    "include/veloz/nf.h": "/* The NF API; nf/NAME.c uses it, tests/unit/test_*.py check it. */\n",
    # a C string and Python code are not comments
    "nf/drop.c": '/* see veloz/nf.h, src/ctl/ctl.h */\nchar *s = "src/gone.c";\n',
    "src/ctl/ctl.h": "// src/ctl/ built into build/src/ctl/libctl.a\n",
    "tests/unit/test_drop.py": '"""Checks nf/drop.c."""\n\nX = "nf/gone.c"  # nf/drop.c\n',
    "meson.build": "# subdir('nf')  ->  nf/drop.c\nx = '# nf/gone.c'\n",
    "README.md": "# veloz\n\nThe NFs are in `nf/`, e.g. `nf/drop.c`; [ctl](src/ctl/ctl.h).\n"
    "\n```\nveloz run drop  # nf/drop.c, built as build/nf/drop.bpf.o\n```\n",
    "docs/ctl.md": "Back to [the index](../README.md) or [the header](../src/ctl/ctl.h#L1).\n",
}


def run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(root)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def make_repo(root: Path, files: dict[str, str]) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)


def test_a_tree_naming_only_what_exists_passes(tmp_path):
    make_repo(tmp_path, GOOD)
    done = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_each_stale_path_is_named_with_its_line(tmp_path):
    stale = {
        "src/ctl/ctl.h": "// one\n/* the socket:\n * src/ctl/ctl.c, gone */\n",
        "tests/unit/test_drop.py": "# nf/NAME.c\n\n\ndef f():\n    # in nf/drop.py\n    pass\n",
        "README.md": GOOD["README.md"] + "\nThe CLI: `src/cli/main.c`.\n",
        "docs/ctl.md": "Back to [the index](../READ.md).\n",
        "Makefile": "lint:\n\techo x  # runs scripts/check.py\n",
    }
    make_repo(tmp_path, GOOD | stale)
    done = run(tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "Makefile:2: names 'scripts/check.py', which does not exist",
        "README.md:9: names 'src/cli/main.c', which does not exist",
        "docs/ctl.md:1: names '../READ.md', which does not exist",
        "src/ctl/ctl.h:3: names 'src/ctl/ctl.c', which does not exist",
        "tests/unit/test_drop.py:5: names 'nf/drop.py', which does not exist",
    ]


def test_an_include_relative_path_resolves_under_include_and_src(tmp_path):
    make_repo(tmp_path, GOOD | {"src/ctl/ctl.h": "/* veloz/gone.h, ctl/ctl.h */\n"})
    done = run(tmp_path)
    assert done.returncode == 1
    assert done.stderr == "src/ctl/ctl.h:1: names 'veloz/gone.h', which does not exist\n"
