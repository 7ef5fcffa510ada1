"""Start-up state for the stateful NFs under the differential fuzzer: routes,
rules and VIPs that the seed frames (tests/vectors: 198.18.0.1 -> 198.19.0.2,
fd00:198:18::1 -> ::2) actually hit, written as ops files (one per NF) by the
same control-plane code `veloz run` and `veloz replay` use. Beside each,
ctl-NF/ holds seeds for the control-protocol fuzzer (fuzz-ctl): the first of
those operations, each turned into a lookup, a delete and a dump as well.

    python tests/fuzz/ops.py OUT_DIR
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from veloz.control import objects

CONFIGS = {
    "router": """
local = ["198.18.0.1", "fd00:198:18::1"]
[[route]]
prefix = "198.19.0.0/16"
via = "198.18.1.2"
port = 1
[[route]]
prefix = "198.19.1.0/24"
via = "198.18.1.3"
port = 2
[[route]]
prefix = "fd00:198:18::/64"
via = "fd00:198:18:1::2"
port = 1
[[neighbour]]
address = "198.18.1.2"
mac = "02:00:c6:12:01:02"
[[neighbour]]
address = "fd00:198:18:1::2"
mac = "02:00:c6:12:01:02"
""",
    "ddos": """
allow = ["198.18.1.0/24"]
[[rule]]
src = "198.18.0.0/24"
proto = "udp"
dport = 9
action = "drop"
[[rule]]
proto = "tcp"
tcp_flags = "syn,!ack"
action = "drop"
[[rule]]
src = "fd00:198:18::/64"
action = "allow"
""",
    "lb": """
[lb]
source4 = "198.18.0.2"
source6 = "fd00:198:18::2"
next_hop_mac = "02:00:c6:12:00:fe"
[[vip]]
address = "198.19.0.2"
port = 9
proto = "udp"
backends = ["198.18.1.10", "198.18.1.11:weight=2"]
[[vip]]
address = "198.19.0.2"
port = 80
proto = "tcp"
backends = ["198.18.1.10", "fd00:198:18:1::10"]
[[vip]]
address = "fd00:198:18::2"
port = 80
proto = "tcp"
backends = ["fd00:198:18:1::10", "198.18.1.11"]
""",
}


SEEDS = 12  # per NF: the fuzzer finds the rest


def main(out: str) -> int:
    Path(out).mkdir(parents=True, exist_ok=True)
    for nf, text in CONFIGS.items():
        _, objs = objects.split_config(nf, tomllib.loads(text))
        ops = objects.module(nf).config_ops(objs, objects.Ports(), Path(out))
        lines = [op.line() for op in ops]
        Path(out, f"{nf}.ops").write_text("".join(line + "\n" for line in lines))
        seeds = Path(out, f"ctl-{nf}")
        seeds.mkdir(exist_ok=True)
        for n, line in enumerate(lines[:SEEDS]):
            _, name, key, *_ = line.split()
            requests = [line, f"lookup {name} {key}", f"delete {name} {key}", f"dump {name}"]
            (seeds / f"seed-{n}").write_text("".join(r + "\n" for r in requests))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
