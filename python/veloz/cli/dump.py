"""`veloz dump`'s command line; the work is veloz.control.dump's."""

from __future__ import annotations

import argparse

from veloz.cli import tool_options
from veloz.control.dump import run
from veloz.core import options
from veloz.core.errors import VelozError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dump",
        help="capture the frames an NF runs on, with their verdicts (pcapng)",
        description=(
            "Capture the frames the NF on IFACE runs on, as they arrived, each with "
            "the verdict the NF gave it (drop, pass, tx, redirect PORT, aborted). "
            "On xdp and xdp-generic the NF's dump build is swapped in for it, "
            "atomically, sharing all of its maps (counters, routes and connections "
            "carry on), and the NF is swapped back at the end: so an NF costs "
            "nothing while nobody captures. -w FILE writes pcapng, the verdict in "
            "each packet's comment ('verdict=drop queue=0'); -w FILE.pcap writes "
            "classic pcap, which has no room for verdicts: they are lost. Without "
            "-w, one line per frame. FILTER is a tcpdump expression (libpcap). "
            "Stops at -c COUNT frames, SIGINT, SIGTERM or SIGHUP, then prints frames "
            "seen, kept, dropped (the capture buffer was full: the NF never waits) "
            "and filtered out. Run it in the NF's network namespace. If it is "
            "killed (-9) `veloz status` shows the dump build still attached and "
            "`veloz dump --restore --iface IF` puts the NF back. On afxdp and "
            "dpdk the run sends its workers' frames to the dump while it runs "
            "(switched on and off through its control socket; the workers look "
            "once per burst), through a socket buffer: a full one drops and counts."
        ),
    )
    try:
        _add_options(p)
    except VelozError as e:
        # a checkout not built yet: `veloz dump` says so when it runs
        p.epilog = f"(the options are read from vz-dump: {e})"
    p.set_defaults(func=run)


def _add_options(p: argparse.ArgumentParser) -> None:
    """vz-dump's options from its table (help, type, bounds, default): absent
    (None) unless given, so vz-dump's own default applies."""
    table = options.table("vz-dump")
    tool_options.add(p, "vz-dump", table["iface"])
    p.add_argument("filter", nargs="*", default=[], metavar="FILTER",
                   help="tcpdump filter expression")  # fmt: skip
    for name, flags in (("write", ("-w",)), ("count", ("-c",)), ("snaplen", ("-s", "--snaplen")),
                        ("ring-size", ("--ring-size",))):  # fmt: skip
        tool_options.add(p, "vz-dump", table[name], flags=flags, default=None)
    tool_options.add(p, "vz-dump", table["json"])
    # where veloz finds a dump build by itself: its own NFs
    text = (f"{table['object']['help']}; found by itself for veloz's own NFs "
            "(`veloz build` makes one beside NAME.bpf.o)")  # fmt: skip
    tool_options.add(p, "vz-dump", table["object"], text=text)
    tool_options.add(p, "vz-dump", table["restore"])
