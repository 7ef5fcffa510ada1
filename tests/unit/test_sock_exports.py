"""libveloz-sock exports exactly the API of include/veloz/sock.h: the
version script lists every function the header declares and nothing else,
and the built library (when there is one) exports just those."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from veloz.core import paths

HEADER = paths.REPO_ROOT / "include/veloz/sock.h"
MAP = paths.REPO_ROOT / "src/sock/app/libveloz-sock.map"


def declared() -> set[str]:
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)
    return set(re.findall(r"\b(vz_[a-z0-9_]+)\s*\(", text))


def mapped() -> set[str]:
    text = re.sub(r"/\*.*?\*/", "", MAP.read_text(), flags=re.S)
    glob = text.split("global:")[1].split("local:")[0]
    return {n.strip() for n in glob.split(";") if n.strip()}


def test_version_script_lists_the_header_api():
    assert declared(), "no vz_ function found in sock.h"
    assert mapped() == declared()


def test_built_library_exports_only_the_api():
    lib = paths.build_dir() / "src/sock/app/libveloz-sock.so"
    if not lib.exists() or not shutil.which("nm"):
        pytest.skip("libveloz-sock is not built")
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    exported = {n for n in names if not n.startswith("VELOZ_SOCK")}
    assert exported == declared()
