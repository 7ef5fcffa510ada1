# SPDX-License-Identifier: BSD-2-Clause
"""scripts/check-layers: the include graph of src/ is layered, and the check can fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check-layers"


def _check(tree: Path | None = None) -> subprocess.CompletedProcess:
    args = [sys.executable, str(CHECK)] + ([str(tree)] if tree else [])
    return subprocess.run(args, capture_output=True, text=True, check=False)


def test_the_checkout_is_layered() -> None:
    done = _check()
    assert done.returncode == 0, done.stdout
    assert done.stdout == ""


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_text(text)
    return tmp_path


def test_an_include_from_above_is_named(tmp_path: Path) -> None:
    # the loop issue 20 removed: a runtime header including a tool's
    tree = _tree(
        tmp_path,
        {
            "runtime/counters.h": '#include "common/err.h"\n#include "cli/common.h"\n',
            "common/err.h": "",
        },
    )
    done = _check(tree)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        'src/runtime/counters.h:2: includes cli/ (a layer above): #include "cli/common.h"'
    ]


def test_own_layer_and_below_are_fine(tmp_path: Path) -> None:
    tree = _tree(
        tmp_path,
        {
            "dispatch/afxdp_dispatcher.c": '#include "afxdp/afxdp.h"\n#include "runtime/spsc.h"\n',
            "tools/replay.c": '#include "xdp/x.h"\n#include "common/err.h"\n',
        },
    )
    done = _check(tree)
    assert (done.returncode, done.stdout) == (0, "")
