"""`veloz --version`: the version, and the commit it was built from.

The commit is baked into a wheel when it is built (setup.py writes
veloz/_build.py); a checkout asks git; anything else says "unknown".
"""

from __future__ import annotations

import argparse
import subprocess
from importlib import metadata
from pathlib import Path

UNKNOWN = "unknown"


def git_commit(tree: Path) -> str | None:
    """tree's HEAD as 12 hex digits, with -dirty for uncommitted changes; None
    when tree is not a git checkout or git is missing.

    --exclude='*': always the hash, never a tag's name, so it says exactly
    which tree was built.
    """
    try:
        done = subprocess.run(
            ["git", "-C", str(tree), "describe", "--always", "--dirty", "--abbrev=12",
             "--exclude=*"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def version() -> str:
    try:
        return metadata.version("veloz")
    except metadata.PackageNotFoundError:
        return UNKNOWN


def commit() -> str:
    try:
        from veloz import _build  # type: ignore[attr-defined]

        return str(_build.COMMIT)
    except ImportError:
        pass
    from veloz.core import paths

    if paths.in_checkout():
        return git_commit(paths.REPO_ROOT) or UNKNOWN
    return UNKNOWN


def line() -> str:
    return f"veloz {version()} (commit {commit()})"


class VersionAction(argparse.Action):
    """--version, computed only when asked for (a checkout runs git for it)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: object):
        what = "print the version and the commit it was built from, and exit"
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=what)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(line())  # stdout, as argparse's own version action does
        parser.exit(0)
