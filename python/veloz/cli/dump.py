"""`veloz dump`'s command line; the work is veloz.control.dump's."""

from __future__ import annotations

import argparse

from veloz.control.dump import run


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
    p.add_argument("--iface", required=True, metavar="IF", help="an interface the NF runs on")
    p.add_argument("filter", nargs="*", default=[], metavar="FILTER",
                   help="tcpdump filter expression")  # fmt: skip
    p.add_argument("-w", dest="write", metavar="FILE",
                   help="pcapng (FILE.pcap: pcap, verdicts lost; '-': stdout)")  # fmt: skip
    p.add_argument("-c", dest="count", type=int, metavar="COUNT", help="stop after COUNT frames")
    p.add_argument("-s", "--snaplen", type=int, metavar="BYTES",
                   help="bytes kept of each frame (default and most: 9216)")  # fmt: skip
    p.add_argument("--ring-size", type=int, metavar="BYTES",
                   help="kernel buffer per CPU, a power of two (default 1 MiB)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="JSON lines: capturing, frames, summary")
    p.add_argument("--object", metavar="NAME.dump.bpf.o",
                   help="xdp: the dump build of an NF of your own (`veloz build` makes it "
                        "beside NAME.bpf.o); veloz's own NFs are found without it")  # fmt: skip
    p.add_argument("--restore", action="store_true",
                   help="put back the NF that a killed dump left swapped out on IF")  # fmt: skip
    p.set_defaults(func=run)
