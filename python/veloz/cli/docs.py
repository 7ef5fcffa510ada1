"""The bash completion and the man pages, all generated from the argparse parser.

meson builds and installs them (install/meson.build runs
`python -m veloz.cli.docs`), so they can never disagree with `--help`:
shtab writes the completion, argparse-manpage the pages: veloz(1) for the
whole command, and veloz-COMMAND(1) for each subcommand, as git has them.
Debian 12's argparse-manpage (1.2, module build_manpages) serves as well as
PyPI's, so the Debian package builds them from Debian's own packages.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def completion(parser: argparse.ArgumentParser) -> str:
    import shtab

    return shtab.complete(parser, shell="bash")


def _manpage(parser: argparse.ArgumentParser, description: str) -> str:
    from veloz.core import version

    try:
        from argparse_manpage.manpage import Manpage
    except ImportError:  # argparse-manpage < 2 (Debian 12): no metadata
        from build_manpages.manpage import Manpage as Old

        return str(Old(parser))
    data = {
        "project_name": "veloz",
        "version": version.version(),
        "manual_title": "veloz manual",
        "description": description,
    }
    return str(Manpage(parser, _data=data))


def manpage(parser: argparse.ArgumentParser) -> str:
    return _manpage(parser, "fast packet processing on Linux")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[Any, str]]:
    """Subcommand name -> (its parser, its one-line help)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (p, helps.get(name, "")) for name, p in action.choices.items()}
    return {}


def subcommand_pages(parser: argparse.ArgumentParser) -> dict[str, str]:
    """veloz-COMMAND.1 -> its page, titled and named veloz-COMMAND (as man
    and whatis look it up), its synopsis still `veloz COMMAND`."""
    pages = {}
    for name, (sub, summary) in subcommands(parser).items():
        page = f"veloz-{name}"
        lines = _manpage(sub, summary).splitlines()
        # .TH TITLE SECTION ...: the title is the subparser's prog ("veloz run")
        head = lines[0].split('"1"', 1)
        lines[0] = f'.TH {page.upper()} "1"{head[1] if len(head) > 1 else ""}'
        at = lines.index(".SH NAME") + 1
        lines[at] = page.replace("-", "\\-") + (f" \\- {summary}" if summary else "")
        pages[f"{page}.1"] = "\n".join(lines) + "\n"
    return pages


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m veloz.cli.docs", description=__doc__)
    p.add_argument("--completion", metavar="FILE", help="write the bash completion here")
    p.add_argument("--man", metavar="FILE", help="write the man page (section 1) here")
    p.add_argument("--subcommand-pages", metavar="DIR", help="write veloz-COMMAND.1 here")
    what = "print the subcommand pages' names, one a line (fails without shtab or argparse-manpage)"
    p.add_argument("--list-pages", action="store_true", help=what)
    args = p.parse_args(argv)
    from veloz.cli import build_parser

    parser = build_parser()
    if args.list_pages:
        completion(parser)
        print("\n".join(subcommand_pages(parser)))
    if args.completion:
        Path(args.completion).write_text(completion(parser))
    if args.man:
        Path(args.man).write_text(manpage(parser))
    if args.subcommand_pages:
        for name, text in subcommand_pages(parser).items():
            (Path(args.subcommand_pages) / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
