"""The bash completion and the man page, both generated from the argparse parser.

meson builds and installs them (install/meson.build runs
`python -m veloz.cli.docs`), so they can never disagree with `--help`:
shtab writes the completion, argparse-manpage the man page.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def completion(parser: argparse.ArgumentParser) -> str:
    import shtab

    return shtab.complete(parser, shell="bash")


def manpage(parser: argparse.ArgumentParser) -> str:
    from argparse_manpage.manpage import Manpage

    from veloz.core import version

    return str(
        Manpage(
            parser,
            _data={
                "project_name": "veloz",
                "version": version.version(),
                "manual_title": "veloz manual",
                "description": "fast packet processing on Linux",
            },
        )
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m veloz.cli.docs", description=__doc__)
    p.add_argument("--completion", metavar="FILE", help="write the bash completion here")
    p.add_argument("--man", metavar="FILE", help="write the man page (section 1) here")
    args = p.parse_args(argv)
    from veloz.cli import build_parser

    parser = build_parser()
    if args.completion:
        Path(args.completion).write_text(completion(parser))
    if args.man:
        Path(args.man).write_text(manpage(parser))
    return 0


if __name__ == "__main__":
    sys.exit(main())
