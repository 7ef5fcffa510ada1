"""The `veloz` command: one entry point, a subcommand per job."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from veloz.errors import VelozError


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr, like every other veloz error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"veloz: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from veloz import demo, gen, nfs, replay, run, testbed_cli

    parser = OneLineParser(
        prog="veloz",
        description="Fast packet processing on Linux: one NF, written once, on XDP "
        "(native and generic) and in userspace, and a lab that measures it.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    testbed_cli.add_parser(sub)
    run.add_parser(sub)
    replay.add_parser(sub)
    gen.add_parser(sub)
    demo.add_parser(sub)
    nfs.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except VelozError as e:
        print(f"veloz: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
