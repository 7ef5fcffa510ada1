# SPDX-License-Identifier: BSD-2-Clause
"""scripts/check_layers.py and check_sizes.py catch what they are for.

`make lint` runs both over the tree; here each runs over a small tree made to
break one rule, so a checker that stopped looking would fail here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def check(script: str, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / script), str(root)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_lower_layer_including_a_higher_one_is_refused(tmp_path):
    write(tmp_path, "src/common/errors.h", "#pragma once\n")
    write(tmp_path, "src/maps/maps.c", '#include "common/errors.h"\n#include <stdio.h>\n')
    write(tmp_path, "src/ctl/ctl.h", '#include "maps/lpm.h"\n')
    write(tmp_path, "src/maps/lpm.h", "#pragma once\n")
    write(tmp_path, "src/runner/runner.c", '#include "ctl/ctl.h"\n')
    write(tmp_path, "src/xdp/attach.h", "#pragma once\n")
    write(tmp_path, "python/veloz/__init__.py", "")
    write(tmp_path, "python/veloz/core/errors.py", "")
    write(tmp_path, "python/veloz/cli/__init__.py", "from veloz.core.errors import X\n")
    assert check("check_layers.py", tmp_path).returncode == 0

    write(tmp_path, "src/ctl/ctl.c", '#include "xdp/attach.h"\n')
    done = check("check_layers.py", tmp_path)
    assert done.returncode == 1
    assert "src/ctl/ctl.c uses src/xdp/attach.h: src/xdp (rank 5) is above" in done.stderr


def test_the_sides_of_the_socket_layer_are_layered(tmp_path):
    # src/sock's folders are layers of their own: the application's side does
    # not reach into direct mode (its table is found at link time), nor the
    # poller's side into the application's; direct mode may use both below it
    write(tmp_path, "src/sock/ring/ring.h", "#pragma once\n")
    write(tmp_path, "src/sock/app/mode.h", '#include "sock/ring/ring.h"\n')
    write(tmp_path, "src/sock/port/port.h", "#pragma once\n")
    write(tmp_path, "src/sock/direct/direct.h", "#pragma once\n")
    write(tmp_path, "src/sock/direct/direct_mode.c",
          '#include "sock/app/mode.h"\n#include "sock/port/port.h"\n')  # fmt: skip
    assert check("check_layers.py", tmp_path).returncode == 0

    write(tmp_path, "src/sock/app/socket.c", '#include "sock/direct/direct.h"\n')
    write(tmp_path, "src/sock/poller/server.c", '#include "sock/app/mode.h"\n')
    done = check("check_layers.py", tmp_path)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert any("src/sock/app/socket.c uses src/sock/direct/direct.h: src/sock/direct (rank 8)"
               " is above src/sock/app" in x for x in lines), lines  # fmt: skip
    assert any("src/sock/poller/server.c uses src/sock/app/mode.h: src/sock/app is a sibling"
               in x for x in lines), lines  # fmt: skip
    assert len(lines) == 2


def test_maps_ctl_runner_are_layered_in_that_order(tmp_path):
    # common < maps < ctl < runner: each of these reaches one step up
    write(tmp_path, "src/ctl/ctl.h", "#pragma once\n")
    write(tmp_path, "src/runner/userspace.h", "#pragma once\n")
    write(tmp_path, "src/maps/maps.c", '#include "ctl/ctl.h"\n')
    write(tmp_path, "src/ctl/capture.c", '#include "runner/userspace.h"\n')
    write(tmp_path, "src/common/parse.c", '#include "maps/maps.c"\n')
    done = check("check_layers.py", tmp_path)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert any("src/maps/maps.c uses src/ctl/ctl.h: src/ctl (rank 3) is above" in x for x in lines)
    assert any("src/ctl/capture.c uses src/runner/userspace.h" in x for x in lines)
    assert any("src/common/parse.c uses src/maps/maps.c" in x for x in lines)
    assert len(lines) == 3


def test_siblings_and_python_upward_imports_are_refused(tmp_path):
    write(tmp_path, "src/afxdp/afxdp.h", "#pragma once\n")
    write(tmp_path, "src/dpdk/dpdk.c", '#include "afxdp/afxdp.h"\n')
    write(tmp_path, "python/veloz/__init__.py", "")
    write(tmp_path, "python/veloz/cli/__init__.py", "")
    write(tmp_path, "python/veloz/core/errors.py", "from veloz import cli\n")
    annotation_only = "import typing\nif typing.TYPE_CHECKING:\n    from veloz.cli import H\n"
    write(tmp_path, "python/veloz/core/proc.py", annotation_only)
    done = check("check_layers.py", tmp_path)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert any("src/dpdk/dpdk.c uses src/afxdp/afxdp.h" in x and "sibling" in x for x in lines)
    assert any("veloz.core.errors uses veloz.cli" in x for x in lines)
    # an annotation-only import is not a dependency
    assert not any("veloz.core.proc" in x for x in lines) and len(lines) == 2


def test_a_file_outside_every_layer_is_named(tmp_path):
    write(tmp_path, "src/newthing/x.c", "int x;\n")
    done = check("check_layers.py", tmp_path)
    assert done.returncode == 1 and "src/newthing/x.c: in no layer" in done.stderr


def function(name: str, body_lines: int) -> str:
    return f"int {name}(void)\n{{\n" + "\tx++;\n" * body_lines + "\treturn 0;\n}\n"


def test_sizes_allow_80_lines_and_refuse_81(tmp_path):
    # 80 lines in all: the signature, two braces, the return and 76 statements
    write(tmp_path, "src/a.c", "static int x;\n" + function("fits", 76))
    assert check("check_sizes.py", tmp_path).returncode == 0
    write(tmp_path, "src/b.c", "static int x;\n" + function("too_long", 77))
    done = check("check_sizes.py", tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "sizes: src/b.c:2: too_long() is 81 lines (at most 80)"


def py_function(name: str, body_lines: int) -> str:
    return f"def {name}() -> int:\n    x = 0\n" + "    x += 1\n" * body_lines + "    return x\n"


def test_sizes_allow_80_lines_of_python_and_refuse_81(tmp_path):
    # 80 lines in all: the def, the first and last statements and 77 between
    write(tmp_path, "python/veloz/a.py", "import os\n\n\n" + py_function("fits", 77))
    assert check("check_sizes.py", tmp_path).returncode == 0
    write(tmp_path, "tests/unit/b.py", "import os\n\n\n" + py_function("too_long", 78))
    done = check("check_sizes.py", tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "sizes: tests/unit/b.py:4: too_long() is 81 lines (at most 80)"


def test_sizes_refuse_a_file_over_800_lines(tmp_path):
    write(tmp_path, "python/ok.py", "x = 1\n" * 800)
    assert check("check_sizes.py", tmp_path).returncode == 0
    write(tmp_path, "python/big.py", "x = 1\n" * 801)
    done = check("check_sizes.py", tmp_path)
    assert done.returncode == 1 and "python/big.py: 801 lines" in done.stderr
