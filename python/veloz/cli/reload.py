"""`veloz reload`'s command line; the work is veloz.control.instance's."""

from __future__ import annotations

import argparse
import json

from veloz.control import instance

DESCRIPTION = """\
Read a running instance's NF config again and apply what changed as one
control-socket transaction; the NF then holds what the file says:
  ddos    the rules and allow-list (an unchanged rule keeps its slot,
          counters and token buckets)
  router  the routes (route files, [[route]], local) and [[neighbour]] MACs;
          with sync = "kernel" the routes are the kernel's: neighbours only
  lb      [lb], the VIPs and their backends and weights; a backend that stays
          keeps its connections, a changed VIP's Maglev ring moves only the
          slots that differ, a backend the health checks drained stays so
A file that does not parse or check, or a change only a restart applies
(the instance's nf, backend, ports, metrics, ctl_group, persist, options,
the NF config's fields, lb's health checks, a synced router's routes), is
one line on stderr, a non-zero exit, and nothing changes. `systemctl reload
veloz@NAME` runs this; SIGHUP to the instance's runner does the same. Run it
in the instance's network namespace.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reload", help="apply a running instance's changed NF config",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--instance", required=True, metavar="NAME|PATH",
                   help="the instance (/etc/veloz/instances/NAME.toml, or a path)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="the outcome as one JSON object")
    p.set_defaults(func=_reload)


def _reload(args: argparse.Namespace) -> int:
    changes = instance.reload(args.instance)
    name = instance.path_of(args.instance).stem
    if args.json:
        print(json.dumps({"instance": name, "changes": changes}))
    else:
        print(instance.describe(name, changes))
    return 0
