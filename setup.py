# SPDX-License-Identifier: BSD-2-Clause
"""Only what pyproject.toml cannot say: bake the commit into the wheel.

`veloz --version` names the commit a wheel was built from, though the wheel
is installed far from any checkout: build_py writes veloz/_build.py into the
build tree (never into the sources). $VELOZ_COMMIT overrides git (a build
from an sdist or a tarball); neither gives "unknown".
"""

import importlib.util
import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _commit() -> str:
    if os.environ.get("VELOZ_COMMIT"):
        return os.environ["VELOZ_COMMIT"]
    # one definition of how a commit is named: veloz/core/version.py's
    spec = importlib.util.spec_from_file_location(
        "_vz_version", HERE / "python/veloz/core/version.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.git_commit(HERE) or mod.UNKNOWN


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # an editable install asks git at run time
        target = Path(self.build_lib) / "veloz" / "_build.py"
        doc = '"""Written by setup.py when the wheel was built."""\n'
        target.write_text(f"{doc}\nCOMMIT = {_commit()!r}\n")


# setuptools' build/ would land in meson's build directory; keep it apart.
setup(cmdclass={"build_py": BuildPy}, options={"build": {"build_base": "build/python-wheel"}})
