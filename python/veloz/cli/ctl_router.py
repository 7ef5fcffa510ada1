"""`veloz ctl`'s router commands' command line; the work is veloz.control.router's."""

from __future__ import annotations

import argparse

from veloz.control.router import (
    _route_add_dispatch,
    ctl_neigh_add,
    ctl_neigh_del,
    ctl_neigh_list,
    ctl_route_del,
    ctl_route_list,
    ctl_route_load,
    ctl_stats,
)


def add_ctl_commands(sub: argparse._SubParsersAction) -> None:
    route = sub.add_parser("route", help="router: add, delete, load and list routes")
    verbs = route.add_subparsers(dest="verb", metavar="VERB", required=True)
    add = verbs.add_parser(
        "add",
        help="PREFIX via ADDRESS [port P] [via ADDRESS [port P]]... | "
        "PREFIX local|blackhole|kernel",
    )
    add.add_argument("prefix")
    add.add_argument("kind", nargs="?", choices=("local", "blackhole", "kernel", "via"))
    add.add_argument("via", nargs="?", metavar="ADDRESS")
    add.add_argument(
        "more",
        nargs="*",
        metavar="[port P] via ADDRESS",
        help="more next hops: a multipath route, one flow to one of them",
    )
    add.add_argument(
        "--port", "-p", help="egress port of a next hop without its own: number or interface"
    )
    add.set_defaults(func=_route_add_dispatch)
    d = verbs.add_parser("del", help="delete the route of exactly PREFIX")
    d.add_argument("prefix")
    d.set_defaults(func=ctl_route_del)
    load = verbs.add_parser("load", help="add every route of a route file, all or none")
    load.add_argument("file")
    load.set_defaults(func=ctl_route_load)
    lst = verbs.add_parser("list", help="the routes in the running NF")
    lst.add_argument("--limit", type=int, default=50, help="rows to print (0: all)")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=ctl_route_list)

    neigh = sub.add_parser("neigh", help="router: the MAC of a next hop")
    verbs = neigh.add_subparsers(dest="verb", metavar="VERB", required=True)
    add = verbs.add_parser("add", help="ADDRESS MAC")
    add.add_argument("address")
    add.add_argument("mac")
    add.set_defaults(func=ctl_neigh_add)
    d = verbs.add_parser("del", help="forget a next hop's MAC (its routes PASS)")
    d.add_argument("address")
    d.set_defaults(func=ctl_neigh_del)
    lst = verbs.add_parser("list", help="next hops and their MACs")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=ctl_neigh_list)

    stats = sub.add_parser("router-stats", help="router: why packets went where they went")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=ctl_stats)
