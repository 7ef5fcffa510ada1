#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""No layer includes (C) or imports (Python) a layer above it.

The layers, bottom up, are the tables below. A file may use its own concern
(the folder named in the table) and any concern of a lower rank; a concern of
the same rank is a sibling it must not reach into (xdp does not include afxdp),
and one of a higher rank is a loop waiting to happen. `make lint` runs this;
tests/unit/test_layers.py checks that it catches a violation.

    python3 scripts/check_layers.py [ROOT]     # exit 1 and one line per edge
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

# (folder, rank), the longest matching prefix wins. Headers in include/veloz are
# the ABI every NF and backend shares; nf/ is the NFs, which see only that.
C_LAYERS = [
    ("include/veloz", 0),
    ("nf", 1),
    ("src/common", 1),
    ("src/maps", 2),  # native maps, LPM, NF loading; the lb hash for Python
    ("src/dispatch", 2),  # the policies, Toeplitz, the core allocator: no maps
    ("src/ctl", 3),
    ("src/runner", 4),
    ("src/xdp", 5),
    ("src/afxdp", 5),
    ("src/dpdk", 5),
    ("src/gen", 6),
    # the userspace UDP stack (src/sock/README.md): the engine and the socket
    # rings; the port, the poller's and the application's sides of the rings;
    # direct mode and udpd; what sits on libveloz-sock's API
    ("src/sock/stack", 6),
    ("src/sock/ring", 6),
    ("src/sock/port", 7),
    ("src/sock/poller", 7),
    ("src/sock/app", 7),
    ("src/sock/direct", 8),
    ("src/sock/udpd", 8),
    ("src/sock/preload", 9),
    ("src/sock/apps", 9),
    ("src/tools", 10),
    ("src/dump", 10),  # vz-dump: the xdp swap, perf buffers, pcapng
    ("bench", 12),
    ("tests", 12),
]

# Python packages of veloz, by the same rule: the core every layer shares
# (ranked within), then the testbed and the control plane, then the lab, then
# the command line (argparse) over all of them. Within control, the modules
# that drive a running NF sit above the control socket's.
PY_LAYERS = [
    ("veloz.core", 0),  # the package's __init__: a docstring
    ("veloz.core.errors", 0),
    ("veloz.core.paths", 1),
    ("veloz.core.options", 2),  # the C tools' option tables
    ("veloz.core.safeio", 3),  # argparse types and checks, bounded by those tables
    ("veloz.core.version", 3),
    ("veloz.core.proc", 4),
    ("veloz.core.config", 4),
    ("veloz.testbed", 5),
    ("veloz.control", 5),  # NF objects as map operations, the control socket
    ("veloz.control.linux_backend", 6),
    ("veloz.control.nfs", 6),
    ("veloz.control.build_nf", 6),
    ("veloz.control.metrics", 6),
    ("veloz.control.dump", 6),
    ("veloz.control.service", 6),  # sd_notify and the service's companion
    ("veloz.control.status", 7),  # status shows what a killed dump left
    ("veloz.control.run", 7),
    ("veloz.control.udpd", 7),
    ("veloz.control.instance", 8),  # instance files: runs run and udpd, reloads
    ("veloz.lab", 8),
    ("veloz.cli", 9),
    ("veloz", 0),  # the package's __init__: a docstring
]

ROOT_PACKAGE = "veloz"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(name: str, table: list[tuple[str, int]], sep: str) -> tuple[str, int] | None:
    best = None
    for prefix, rank in table:
        if prefix == ROOT_PACKAGE and name != prefix:
            continue  # the package's __init__ is its own layer, not its modules'
        if (name == prefix or name.startswith(prefix + sep)) and (
            best is None or len(prefix) > len(best[0])
        ):
            best = (prefix, rank)
    return best


def c_files(root: Path) -> list[Path]:
    out = []
    for top in ("include", "nf", "src", "bench", "tests"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix in (".c", ".h") and path.is_file():
                out.append(path)
    return out


def resolve_include(root: Path, src: Path, name: str) -> str | None:
    # the build's include directories: the file's own folder, src/, include/
    for base in (src.parent, root / "src", root / "include"):
        cand = (base / name).resolve()
        if cand.is_file() and cand.is_relative_to(root):
            return cand.relative_to(root).as_posix()
    return None


def edge_problem(user: str, used: str, table: list[tuple[str, int]], sep: str) -> str | None:
    a, b = layer_of(user, table, sep), layer_of(used, table, sep)
    if a is None or b is None or a[0] == b[0]:
        return None
    if b[1] > a[1]:
        return f"{user} uses {used}: {b[0]} (rank {b[1]}) is above {a[0]} (rank {a[1]})"
    if b[1] == a[1]:
        return f"{user} uses {used}: {b[0]} is a sibling of {a[0]} (both rank {a[1]})"
    return None


def check_c(root: Path) -> list[str]:
    problems = []
    for path in c_files(root):
        rel = path.relative_to(root).as_posix()
        if layer_of(rel, C_LAYERS, "/") is None:
            problems.append(f"{rel}: in no layer (add its folder to C_LAYERS)")
            continue
        for name in INCLUDE.findall(path.read_text(errors="replace")):
            used = resolve_include(root, path, name)
            if used is None:
                continue  # a generated header (the build's skeletons) or a system one
            problem = edge_problem(rel, used, C_LAYERS, "/")
            if problem:
                problems.append(problem)
    return problems


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root / "python").with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def walk_runtime(tree: ast.AST):
    """ast.walk, less the `if TYPE_CHECKING:` blocks: an annotation names a
    type, it does not make the module depend on the one that defines it."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test).endswith("TYPE_CHECKING"):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def imported(module: str, is_package: bool, tree: ast.AST) -> set[str]:
    names = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in walk_runtime(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.update(f"{target}.{a.name}" for a in node.names)
    return {n for n in names if n == "veloz" or n.startswith("veloz.")}


def check_python(root: Path) -> list[str]:
    problems = []
    modules = {}
    for path in sorted((root / "python" / "veloz").rglob("*.py")):
        modules[module_name(root, path)] = path
    for module, path in modules.items():
        if layer_of(module, PY_LAYERS, ".") is None:
            problems.append(f"{module}: in no layer (add it to PY_LAYERS)")
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for name in sorted(imported(module, path.name == "__init__.py", tree)):
            # `from veloz.lab import hosts` names veloz.lab.hosts; a name that is
            # not a module (a function) counts as its module's use
            used = name if name in modules else name.rpartition(".")[0]
            if used not in modules:
                continue
            problem = edge_problem(module, used, PY_LAYERS, ".")
            if problem:
                problems.append(problem)
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    problems = check_c(root) + check_python(root)
    for line in problems:
        print(f"layers: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
