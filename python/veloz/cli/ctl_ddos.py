"""`veloz ctl`'s ddos commands' command line; the work is veloz.control.ddos's."""

from __future__ import annotations

import argparse

from veloz.control.ddos import (
    ctl_allow_add,
    ctl_allow_del,
    ctl_allow_list,
    ctl_rule_add,
    ctl_rule_del,
    ctl_rule_list,
    ctl_stats,
)


def add_ctl_commands(sub: argparse._SubParsersAction) -> None:
    rule = sub.add_parser("rule", help="ddos: add, delete and list filter rules")
    verbs = rule.add_subparsers(dest="verb", metavar="VERB", required=True)
    add = verbs.add_parser(
        "add",
        help="ACTION [--src P] [--proto P] [--dport N] [--tcp-flags F] [--rate N --burst N]",
        description="Add a rule after the last one (first match wins), or in a free --slot. "
        "ACTION is drop, allow, or limit (a token bucket per source: --rate packets/s, "
        "0 for no refill, and --burst).",
    )
    add.add_argument("action", metavar="ACTION", help="drop, limit or allow")
    add.add_argument("--src", metavar="PREFIX", help="source prefix (default: any)")
    add.add_argument("--proto", help="tcp, udp, icmp, icmp6, any or a number")
    add.add_argument("--dport", help="destination port (proto tcp or udp)")
    add.add_argument("--tcp-flags", metavar="FLAGS", help="e.g. 'syn,!ack' (proto tcp)")
    add.add_argument("--rate", help="limit: packets per second per source")
    add.add_argument("--burst", help="limit: packets a source may send at once")
    add.add_argument("--slot", help="put the rule in this free slot (0-63)")
    add.set_defaults(func=ctl_rule_add)
    d = verbs.add_parser("del", help="delete rule ID (its slot number)")
    d.add_argument("id", metavar="ID")
    d.set_defaults(func=ctl_rule_del)
    lst = verbs.add_parser("list", help="the rules in the running NF, with their counters")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=ctl_rule_list)

    allow = sub.add_parser("allow", help="ddos: source prefixes that bypass every rule")
    verbs = allow.add_subparsers(dest="verb", metavar="VERB", required=True)
    add = verbs.add_parser("add", help="PREFIX...")
    add.add_argument("prefixes", metavar="PREFIX", nargs="+")
    add.set_defaults(func=ctl_allow_add)
    d = verbs.add_parser("del", help="PREFIX... (exactly as added)")
    d.add_argument("prefixes", metavar="PREFIX", nargs="+")
    d.set_defaults(func=ctl_allow_del)
    lst = verbs.add_parser("list", help="the allow-listed prefixes")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=ctl_allow_list)

    stats = sub.add_parser("ddos-stats", help="ddos: packets allow-listed, passed, "
                           "malformed, and per rule")  # fmt: skip
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=ctl_stats)
