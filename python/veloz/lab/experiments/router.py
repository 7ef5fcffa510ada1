"""Router: forwarding rate with one route and with a full internet-sized
table (752,138 IPv4 routes, `veloz route-table`), against the kernel's own
IP forwarding holding the same routes (the XDP paper's Figure 6: 2.5x with
the full table, 3x with one route).

As in the paper, the generator spreads its frames over 4,000 random
destinations; here they come from 198.18.128.0/17, which the table carves
into nested /17../24 routes (the testbed carries no other addresses), all
via vz-sink. The router NF forwards them out of dut-sink with the sink's
MAC; the kernel baseline has the same routes in vz-dut's FIB (added with
`ip -batch`, protocol 250, flushed afterwards) and forwards them itself.
Every backend runs with an unpaced generator; the sink counts what arrives.
Backend "generator" is the most the testbed offers (no NF at all).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from veloz.errors import VelozError
from veloz.lab import route_table, summary, trial
from veloz.lab.experiments import throughput

SINK_ADDRESS, SINK_MAC = "198.18.1.2", "02:00:c6:12:01:02"  # vz-sink's sink-dut
DSTS = 4000
ROUTE_PROTO = "250"  # marks our kernel routes, so exactly they are flushed
TABLES = ("one route", "full table")
ATTACH_TIMEOUT = 300.0  # loading 752k routes takes a while on slow machines


def _write_configs(tmp: Path) -> dict[str, Path]:
    neighbour = f'[[neighbour]]\naddress = "{SINK_ADDRESS}"\nmac = "{SINK_MAC}"\n'
    one = tmp / "one.toml"
    one.write_text(
        f'[[route]]\nprefix = "{route_table.BENCH_RANGE}"\nvia = "{SINK_ADDRESS}"\n'
        f"port = 1\n{neighbour}"
    )
    table = tmp / "full.txt"
    with table.open("w") as f:
        route_table.write(route_table.generate(route_table.PAPER_ROUTES, seed=1),
                          SINK_ADDRESS, 1, f)  # fmt: skip
    full = tmp / "full.toml"
    full.write_text(f'routes = "{table}"\n{neighbour}')
    return {"one route": one, "full table": full}


@contextmanager
def kernel_routes(config: Path) -> Iterator[None]:
    """The same routes in vz-dut's FIB, for the linux baseline."""
    text = config.read_text()
    if "routes = " in text:
        table = Path(text.split('"')[1])
        prefixes = (line.split()[0] for line in table.read_text().splitlines())
    else:
        prefixes = iter([str(route_table.BENCH_RANGE)])
    batch = "".join(
        f"route replace {p} via {SINK_ADDRESS} dev {trial.DUT_OUT} proto {ROUTE_PROTO}\n"
        for p in prefixes
    )
    try:
        done = subprocess.run(["ip", "-n", "vz-dut", "-batch", "-"], input=batch, text=True,
                              check=False, capture_output=True)  # fmt: skip
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["ip failed"])[-1]
            raise VelozError(f"cannot give vz-dut's kernel the routes: {why}")
        yield
    finally:
        subprocess.run(["ip", "-n", "vz-dut", "route", "flush", "proto", ROUTE_PROTO],
                       check=False, capture_output=True)  # fmt: skip


class Router:
    name = "router"
    title = "Router: one route and a full table (752,138 routes) against Linux forwarding"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(TABLES) * (len(s["backends"]) + 1)

    def run(self, ctx) -> None:
        s = ctx.settings
        gen_extra = ["--dsts", str(DSTS), "--dst-range", str(route_table.BENCH_RANGE)]
        with tempfile.TemporaryDirectory(prefix="veloz-router-") as tmp:
            configs = _write_configs(Path(tmp))
            for table in TABLES:
                with kernel_routes(configs[table]):
                    for t in range(s["trials"]):
                        for backend in ["generator", *s["backends"]]:
                            nf_extra = ([] if backend in ("linux", "generator")
                                        else ["--config", str(configs[table])])  # fmt: skip
                            rec = trial.measure("router", backend, size=s["sizes"][0], rate=0,
                                                seconds=s["seconds"], nf_extra=nf_extra,
                                                gen_extra=gen_extra,
                                                attach_timeout=ATTACH_TIMEOUT)  # fmt: skip
                            ctx.record(f"router {table} {backend}", rec, trial=t, table=table,
                                       experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        sec = summary.rate_section(
            records,
            "Router forwarding rate (Mpps), one route and the full table",
            series="table",
        )
        sec["text"] = (
            "Frames that reached vz-sink per second, unpaced generator, "
            f"{DSTS} destinations; median over trials with a 95% bootstrap CI, ratio to "
            "linux (kernel forwarding with the same routes). " + throughput.SPEED_NOTE
        )
        return [sec]


ROUTER = Router()
