"""`veloz ctl`'s lb commands' command line; the work is veloz.control.lb's."""

from __future__ import annotations

import argparse

from veloz.control.lb import (
    ctl_backend_add,
    ctl_backend_del,
    ctl_lb_set,
    ctl_stats,
    ctl_vip_add,
    ctl_vip_del,
    ctl_vip_list,
)


def _vip_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", help="the VIP's IPv4 or IPv6 address")
    p.add_argument("port", help="the VIP's port, 1-65535")
    p.add_argument("proto", help="tcp or udp")


def add_ctl_commands(sub: argparse._SubParsersAction) -> None:
    vip = sub.add_parser("vip", help="lb: add, delete and list VIPs")
    verbs = vip.add_subparsers(dest="verb", metavar="VERB", required=True)
    add = verbs.add_parser("add", help="ADDRESS PORT PROTO [--backend B]...")
    _vip_args(add)
    add.add_argument(
        "--backend",
        "-b",
        action="append",
        metavar="ADDRESS[:weight=N]",
        help="a backend, added in the same transaction (repeatable)",
    )
    add.set_defaults(func=ctl_vip_add)
    d = verbs.add_parser("del", help="ADDRESS PORT PROTO: its traffic passes to the kernel")
    _vip_args(d)
    d.set_defaults(func=ctl_vip_del)
    lst = verbs.add_parser("list", help="the VIPs and their backends in the running NF")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=ctl_vip_list)

    backend = sub.add_parser("backend", help="lb: add and remove a VIP's backends")
    verbs = backend.add_subparsers(dest="verb", metavar="VERB", required=True)
    add = verbs.add_parser(
        "add", help="VIP-ADDRESS PORT PROTO BACKEND [--weight N]: moves only its share of slots"
    )
    _vip_args(add)
    add.add_argument("backend", metavar="BACKEND", help="ADDRESS or ADDRESS:weight=N")
    add.add_argument("--weight", "-w", help="1 up to what vz_lb_backend.weight holds (default 1)")
    add.set_defaults(func=ctl_backend_add)
    d = verbs.add_parser(
        "del",
        help="VIP-ADDRESS PORT PROTO BACKEND: its flows, established ones too, re-hash",
    )
    _vip_args(d)
    d.add_argument("backend", metavar="BACKEND", help="the backend's address")
    d.set_defaults(func=ctl_backend_del)

    lb = sub.add_parser("lb", help="lb: outer source addresses and MACs")
    verbs = lb.add_subparsers(dest="verb", metavar="VERB", required=True)
    s = verbs.add_parser("set", help="change what encapsulated frames are sent with")
    s.add_argument("--source4", metavar="ADDRESS", help="outer IPv4 source")
    s.add_argument("--source6", metavar="ADDRESS", help="outer IPv6 source")
    s.add_argument("--next-hop-mac", metavar="MAC", help="Ethernet destination")
    s.add_argument("--mac", metavar="MAC", help="Ethernet source")
    s.set_defaults(func=ctl_lb_set)

    st = sub.add_parser("lb-stats", help="lb: packets and bytes per VIP and backend, counters")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=ctl_stats)
