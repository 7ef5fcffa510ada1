"""`veloz ctl`'s command line; the work is veloz.control.ctl's."""

from __future__ import annotations

import argparse

from veloz.cli import ctl_ddos, ctl_lb, ctl_router
from veloz.control import ctl, objects
from veloz.control.ctl import cmd_dump, cmd_maps, cmd_stats

# NF (objects.MODULES) -> its `veloz ctl` commands' parser
NF_COMMANDS = {"router": ctl_router, "ddos": ctl_ddos, "lb": ctl_lb}


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
    for nf in objects.MODULES:  # each NF with objects has its commands' parser
        before = set(cmds.choices)
        NF_COMMANDS[nf].add_ctl_commands(cmds)
        for name in set(cmds.choices) - before:
            cmds.choices[name].set_defaults(owner=nf)
    # cli.main hands these to run(), which connects and calls func(args, ctl)
    p.set_defaults(needs_ctl=True)
