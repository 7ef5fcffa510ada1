"""`veloz ctl`'s command line; the work is veloz.control.ctl's."""

from __future__ import annotations

import argparse

from veloz.control import ctl, objects
from veloz.control.ctl import cmd_dump, cmd_maps, cmd_stats


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ctl",
        help="change a running NF: routes, rules, VIPs, backends; its counters",
        description=ctl.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--iface",
        metavar="IF",
        help="the running NF's first port (default: the only NF running in this netns)",
    )
    cmds = p.add_subparsers(dest="ctl_command", metavar="COMMAND", required=True)
    s = cmds.add_parser("stats", help="packets per verdict and the NF's own counters")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_stats, owner=None)
    m = cmds.add_parser("maps", help="the NF's maps")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=cmd_maps, owner=None)
    d = cmds.add_parser("dump", help="every entry of one map, as hex")
    d.add_argument("map")
    d.set_defaults(func=cmd_dump, owner=None)
    for nf in objects.MODULES:
        mod = objects.module(nf)
        if mod is None:
            continue
        before = set(cmds.choices)
        mod.add_ctl_commands(cmds)
        for name in set(cmds.choices) - before:
            cmds.choices[name].set_defaults(owner=nf)
    # cli.main hands these to run(), which connects and calls func(args, ctl)
    p.set_defaults(needs_ctl=True)
