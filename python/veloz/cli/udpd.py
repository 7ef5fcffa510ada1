"""`veloz udpd`'s command line; the work is veloz.control.udpd's."""

from __future__ import annotations

import argparse

from veloz.control import instance, service
from veloz.control.udpd import run
from veloz.core.errors import VelozError

DESCRIPTION = """\
Run the UDP/IP stack's poller on one interface. It takes an IPv4 address of
its own beside the kernel's, and optionally an IPv6 one: a small XDP program
hands it the frames for those addresses (ARP, NDP, ICMP and ICMPv6 echo,
UDP), and everything else stays with the kernel.
Applications link libveloz-sock (or run under LD_PRELOAD=libveloz-preload.so)
and connect to its control socket.

Config (TOML; INI: the same keys under [udpd], neighbours as
"neighbours = IP=MAC, IP=MAC"):

  interface = "dut-gen"            # required
  ipv4 = "198.18.0.3/24"           # required: the stack's address and prefix
  mac = "02:00:00:00:00:03"        # default: the interface's
  gateway = "198.18.0.254"         # for off-link destinations
  ipv6 = "fd00:198:18::3/64"       # the stack's IPv6 address and prefix
  gateway6 = "fe80::1"             # an IPv6 router (link-local or on-link)
  mtu = 1500                       # 576..9000
  socket = "/run/veloz/udpd/udpd.sock"
  group = "veloz"                  # may connect besides root
  cpu = 1                          # pin the poller
  busy_poll_us = 1000              # spin this long idle, then sleep (0..1000000)
  skb_mode = false                 # generic XDP (any interface)
  copy = false                     # force AF_XDP copy mode
  rcvbuf = 262144                  # default ring bytes per socket
  sndbuf = 262144
  max_apps = 64
  max_sockets = 1024
  arp_timeout_ms = 60000
  reasm_timeout_ms = 30000
  reasm_max_bytes = 4194304
  [[neighbour]]                    # static ARP entries
  ip = "198.18.0.1"
  mac = "c6:12:00:00:00:01"
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("udpd", help="the UDP/IP stack's poller (libveloz-sock)",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--config", metavar="FILE", help="TOML or INI config (required)")
    p.add_argument("--instance", metavar="NAME|PATH",
                   help="an instance file with kind = \"udpd\" "
                   "(/etc/veloz/instances/NAME.toml) in place of --config and --metrics, "
                   "as veloz-udpd@NAME.service runs it")  # fmt: skip
    p.add_argument("--check", action="store_true", help="check the config and stop")
    p.add_argument("--interval-ms", type=int, metavar="MS", help="counters every MS (1000)")
    p.add_argument("--json", action="store_true", help="JSON lines: ready, stats, summary")
    p.add_argument("--replace", action="store_true",
                   help="remove a veloz program a killed udpd or run left attached")  # fmt: skip
    p.add_argument("--metrics", metavar="ADDR:PORT",
                   help="serve the counters as Prometheus text on http://ADDR:PORT/metrics "
                   "(loopback or testbed addresses)")  # fmt: skip
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.instance is None:
        if args.config is None:
            raise VelozError("`veloz udpd` needs --config FILE (or --instance NAME)", code=2)
        return run(args)
    if args.config is not None or args.metrics is not None:
        raise VelozError("--instance names the config and metrics; not --config or --metrics too",
                         code=2)  # fmt: skip
    inst = instance.load(args.instance, kind="udpd")
    args.config_table, args.config_where = inst.config_values(), str(inst.config_file or inst.path)
    args.metrics = inst.metrics
    return run(args, before_exec=service.start_udpd)
