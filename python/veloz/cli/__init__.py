"""The `veloz` command: one entry point, a subcommand per job."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import NoReturn

from veloz.core import safeio
from veloz.core.errors import VelozError


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr, like every other veloz error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"veloz: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from veloz.cli import (
        bench,
        build,
        ctl,
        demo,
        dump,
        gen,
        nfs,
        reload,
        replay,
        report,
        route_table,
        run,
        sim,
        status,
        testbed,
        udpd,
    )
    from veloz.core import version

    parser = OneLineParser(
        prog="veloz",
        description="Fast packet processing on Linux: one NF, written once, on XDP "
        "(native and generic) and in userspace, and a lab that measures it.",
    )
    parser.add_argument("--version", action=version.VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    testbed.add_parser(sub)
    run.add_parser(sub)
    reload.add_parser(sub)
    replay.add_parser(sub)
    gen.add_parser(sub)
    demo.add_parser(sub)
    bench.add_parser(sub)
    report.add_parser(sub)
    nfs.add_parser(sub)
    build.add_parser(sub)
    route_table.add_parser(sub)
    ctl.add_parser(sub)
    sim.add_parser(sub)
    udpd.add_parser(sub)
    status.add_parser(sub)
    dump.add_parser(sub)
    safeio.bound_numbers(parser)  # every number finite and in range
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """argv, where what follows a `--` is passed through untouched (EAL arguments).

    argparse alone cannot do this: an optional positional after the NF name
    is matched, empty, before the `--` is reached.
    """
    parser = build_parser()
    head, tail = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    args = parser.parse_args(head)
    if tail and not hasattr(args, "passthrough"):
        parser.error(f"`veloz {args.command}` takes no arguments after --")
    if hasattr(args, "passthrough"):
        args.passthrough = tail
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        try:
            if getattr(args, "needs_ctl", False):
                from veloz.control import ctl

                code = ctl.run(args)
            else:
                code = int(args.func(args) or 0)
        except VelozError as e:
            # one line, even when the message quotes input that holds a newline
            print("veloz: " + " ".join(str(e).splitlines()), file=sys.stderr)
            code = e.code
        except KeyboardInterrupt:
            code = 130
        _flush_stdout()
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except OSError as e:
        if e.errno == errno.EPIPE:
            return _quiet_broken_pipe()
        # mostly a print() to a full or broken stdout: one line, not a traceback
        if e.filename:
            print(f"veloz: {e.filename}: {e.strerror}", file=sys.stderr)
        else:
            _discard_stdout()
            print(f"veloz: cannot write the output: {e.strerror}", file=sys.stderr)
        return 1


def _flush_stdout() -> None:
    """What was printed is on stdout, or the run fails: `> /dev/full` is
    not a success."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        _discard_stdout()
        print(f"veloz: cannot write the output: {e.strerror}", file=sys.stderr)
        raise SystemExit(1) from None


def _discard_stdout() -> None:
    # what is still buffered would fail again when the interpreter exits
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _quiet_broken_pipe() -> int:
    """`veloz ... | head -1`: the reader left; stop as a C tool would on
    SIGPIPE, with no traceback and no message (Python's documented way)."""
    _discard_stdout()
    return 128 + 13  # the shell's status for a death by SIGPIPE
