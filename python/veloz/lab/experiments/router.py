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

import ipaddress
import json
import random
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from veloz.control import objects
from veloz.control import router as router_ctl
from veloz.control.ops import write_file
from veloz.core import config, paths
from veloz.core.errors import VelozError
from veloz.lab import route_table, stats, summary, topology, trial
from veloz.lab.experiments import throughput

DSTS = 4000
ROUTE_PROTO = "250"  # marks our kernel routes, so exactly they are flushed
TABLES = ("one route", "full table")
# The router's IPv4 table (config `table`): the kernel's LPM trie, DIR-24-8 in
# arrays. Each NF backend runs with both; linux and the generator once.
KINDS = ("trie", "dir24")  # in enum vz_router_table's order
COST_FRAMES, COST_REPEAT = 256, 2000
ATTACH_TIMEOUT = 300.0  # loading 752k routes takes a while on slow machines


def _write_configs(tmp: Path, routes: int) -> dict[str, Path]:
    """Both tables' configs, every route via the sink's port (its address
    and MAC from the topology); the full one names its table relatively,
    so the two files work wherever they are copied together."""
    sink = topology.current().sink.port
    neighbour = f'[[neighbour]]\naddress = "{sink.ipv4}"\nmac = "{sink.mac}"\n'
    one = tmp / "one.toml"
    one.write_text(
        f'[[route]]\nprefix = "{route_table.BENCH_RANGE}"\nvia = "{sink.ipv4}"\n'
        f"port = 1\n{neighbour}"
    )
    table = tmp / "full.txt"
    with table.open("w") as f:
        route_table.write(route_table.generate(routes, seed=1),
                          sink.ipv4, 1, f)  # fmt: skip
    full = tmp / "full.toml"
    full.write_text(f'routes = "{table.name}"\n{neighbour}')
    return {"one route": one, "full table": full}


@contextmanager
def kernel_routes(config: Path) -> Iterator[None]:
    """The same routes in the DUT's FIB, for the linux baseline."""
    topo = topology.current()
    dut = topo.dut
    text = config.read_text()
    if "routes = " in text:
        table = config.parent / text.split('"')[1]
        prefixes = (line.split()[0] for line in table.read_text().splitlines())
    else:
        prefixes = iter([str(route_table.BENCH_RANGE)])
    batch = "".join(
        f"route replace {p} via {topo.sink.port.ipv4} dev {dut.ports[1].iface} "
        f"proto {ROUTE_PROTO}\n"
        for p in prefixes
    )
    try:
        done = dut.host.run(["ip", "-batch", "-"], input=batch, timeout=600)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["ip failed"])[-1]
            raise VelozError(f"cannot give the DUT's kernel the routes: {why}")
        yield
    finally:
        dut.host.run(["ip", "route", "flush", "proto", ROUTE_PROTO])


class Router:
    name = "router"
    title = "Router: one route and a full table (752,138 routes) against Linux forwarding"
    doc = __doc__

    def count(self, s: dict) -> int:
        rates = len(list(_arms(s["backends"])))
        return s["trials"] * len(TABLES) * (rates + 2 * len(KINDS))

    def run(self, ctx) -> None:
        gen_extra = ["--dsts", str(DSTS), "--dst-range", str(route_table.BENCH_RANGE)]
        dut = topology.current().dut.host
        with tempfile.TemporaryDirectory(prefix="veloz-router-") as tmp:
            (Path(tmp) / "nf").mkdir()
            routes = ctx.settings.get("routes") or route_table.PAPER_ROUTES
            configs = _write_configs(Path(tmp) / "nf", routes)
            self.cost(ctx, configs, Path(tmp))
            # the configs where the DUT's NF reads them (copied over SSH)
            with dut.staged(Path(tmp) / "nf") as there:
                self.rates(ctx, configs, gen_extra, there)

    def rates(self, ctx, configs: dict[str, Path], gen_extra: list[str], there: str) -> None:
        """Each table, each arm: the rate that reached the sink."""
        s = ctx.settings
        for table in TABLES:
            with kernel_routes(configs[table]):
                for t in range(s["trials"]):
                    for backend, kind in _arms(s["backends"]):
                        nf_extra = ([] if kind is None else
                                    ["--config", f"{there}/{configs[table].name}", "--set",
                                     f"table={kind}"])  # fmt: skip
                        rec = trial.measure("router", backend, size=s["sizes"][0], rate=0,
                                            seconds=s["seconds"], nf_extra=nf_extra,
                                            gen_extra=gen_extra,
                                            attach_timeout=ATTACH_TIMEOUT)  # fmt: skip
                        arm = backend if kind is None else f"{backend} {kind}"
                        ctx.record(f"router {table} {arm}", rec, trial=t, table=table,
                                   arm=arm, lookup=kind, experiment=self.name)  # fmt: skip

    def cost(self, ctx, configs: dict[str, Path], tmp: Path) -> None:
        """ns per packet through BPF_PROG_TEST_RUN (xdp) and the native build:
        what the lookup costs, which no generator caps."""
        from scapy.layers.inet import IP, UDP  # slow to import: only here
        from scapy.layers.l2 import Ether
        from scapy.packet import Raw
        from scapy.utils import wrpcap

        rng = random.Random(5)
        base = int(route_table.BENCH_RANGE.network_address)
        frames = [
            Ether(src="02:00:00:00:00:99", dst="02:00:00:00:00:01")
            / IP(src="198.18.0.9", dst=str(ipaddress.IPv4Address(base + rng.getrandbits(15))))
            / UDP(sport=1000, dport=9)
            / Raw(b"x" * 18)
            for _ in range(COST_FRAMES)
        ]
        pcap = tmp / "cost.pcap"
        wrpcap(str(pcap), frames)
        nf = paths.nf("router")
        ops = {}
        for table in TABLES:  # the ops once per table: building them takes seconds
            values = config.load(str(configs[table]))
            _, objs = objects.split_config("router", values)
            ops[table] = tmp / f"{table.replace(' ', '-')}.ops"
            write_file(router_ctl.config_ops(objs, objects.Ports(), configs[table].parent),
                       ops[table])  # fmt: skip
        for t in range(ctx.settings["trials"]):
            for table in TABLES:
                for backend in ("xdp", "native"):
                    for kind in KINDS:
                        cmd = [str(paths.tool("vz-replay")), "--bpf", str(nf.bpf), "--native",
                               str(nf.native), "--backend", backend, "--in", str(pcap),
                               "--set", f"table={KINDS.index(kind)}", "--ops", str(ops[table]),
                               "--json", "--repeat", str(COST_REPEAT)]  # fmt: skip
                        done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                                              timeout=ATTACH_TIMEOUT)  # fmt: skip
                        lines = [json.loads(x) for x in done.stdout.splitlines() if x.strip()]
                        summary_rec = next((x for x in lines if x.get("summary")), None)
                        if done.returncode != 0 or not summary_rec:
                            why = (done.stderr.strip().splitlines() or ["no summary"])[-1]
                            raise VelozError(f"router cost run failed: {why}")
                        ctx.record(f"router cost {table} {backend} {kind}",
                                   {"ns_per_packet": summary_rec["ns_per_packet"]}, trial=t,
                                   table=table, arm=f"{backend} {kind}", backend=backend,
                                   lookup=kind, cost=True, experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        cost = [r for r in records if r.get("cost")]
        records = [r for r in records if not r.get("cost")]
        for r in records:  # results from before the table arms: the trie
            r.setdefault("arm", r["backend"] if r["backend"] in ("linux", "generator")
                         else f"{r['backend']} trie")  # fmt: skip
        sec = summary.rate_section(
            records,
            "Router forwarding rate (Mpps), one route and the full table",
            series="table",
            category="arm",
        )
        sec["text"] = (
            "Frames that reached vz-sink per second, unpaced generator, "
            f"{DSTS} destinations; median over trials with a 95% bootstrap CI, ratio to "
            "linux (kernel forwarding with the same routes). " + throughput.SPEED_NOTE
        )
        out = [sec, _full_vs_one(records)]
        if cost:
            c = summary.rate_section(
                cost,
                "Per-packet cost (ns), BPF_PROG_TEST_RUN (xdp) and native",
                metric="ns_per_packet",
                unit=1.0,
                unit_name="ns",
                series="table",
                category="arm",
                baseline=None,
            )
            c["text"] = (
                f"{COST_FRAMES} frames to random addresses of {route_table.BENCH_RANGE}, each "
                f"run {COST_REPEAT} times; median ns per packet over trials, 95% bootstrap CI."
            )
            out.append(c)
        return out


def _arms(backends: list[str]) -> Iterator[tuple[str, str | None]]:
    """(backend, table kind) in trial order; kind None: no NF (linux, generator)."""
    yield "generator", None
    for backend in backends:
        if backend == "linux":
            yield backend, None
        else:
            yield from ((backend, kind) for kind in KINDS)


def _full_vs_one(records: list[dict]) -> dict:
    """Each arm's full-table rate as a share of its one-route rate."""
    rows = []
    for arm in dict.fromkeys(r["arm"] for r in records):
        full = [r["rate_pps"] for r in records if r["arm"] == arm and r["table"] == TABLES[1]
                and r.get("rate_pps") is not None]  # fmt: skip
        one = [r["rate_pps"] for r in records if r["arm"] == arm and r["table"] == TABLES[0]
               and r.get("rate_pps") is not None]  # fmt: skip
        if not full or not one:
            continue
        ratio = stats.ratio_of_medians(full, one)
        ci = None if ratio["low"] is None else f"{ratio['low']:.2f}–{ratio['high']:.2f}"
        rows.append([arm, len(full), round(ratio["ratio"], 3), ci])
    return {
        "title": "Full table against one route (rate ratio)",
        "text": "Median full-table rate over median one-route rate of the same arm, "
        "with a 95% bootstrap CI: 1.0 means the table costs nothing.",
        "table": {"columns": ["arm", "trials", "full / one", "ratio 95% CI"], "rows": rows},
    }


ROUTER = Router()
