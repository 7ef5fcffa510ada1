"""`veloz bench EXPERIMENT`: run one of the lab's experiments on the testbed,
write its results (JSON) into a directory, and the HTML report beside them.

Experiments: drop, tx, redirect (peak, zero-loss and 0.5%-loss rates, loss
against offered load), latency, cpu, cost, sizes, noisy, headline, router,
lb, ddos, dispatch, udp-latency, udp-throughput, udp-app, udp-servers, soak,
udp-soak.
Trials are interleaved across backends, 5 by default; every result carries
the environment it was measured in. Each runs on the namespace testbed, or
on the hosts of a --topology file (each command on its role's host).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,  # fmt: skip
    TimeRemainingColumn,
)

from veloz import testbed
from veloz.core import safeio
from veloz.core.errors import VelozError
from veloz.lab import bpf_stats, route_table
from veloz.lab.gen import parse_rate

# Names only: `veloz gen` and `veloz run` build the same parser, and must not
# pay for importing scipy and matplotlib (the experiments) each time.
EXPERIMENTS = ("drop", "tx", "redirect", "latency", "cpu", "cost", "sizes", "noisy", "headline",
               "router", "bgp", "lb", "ddos", "dispatch", "udp-latency",
               "udp-throughput", "udp-app", "udp-servers", "soak", "udp-soak")  # fmt: skip
NOISES = ("none", "cpu", "disk", "net")

BACKENDS = ("xdp", "xdp-generic", "afxdp", "dpdk", "linux")
MAX_SIZE = 3520  # the generator's single-buffer live frames
# 400 Gbit/s of 64-byte frames (84 bytes on the wire with preamble and gap)
MAX_PPS = 595_238_095
# Per experiment, what differs from the common defaults.
DEFAULTS: dict[str, dict] = {
    "headline": {"sizes": "64,1500", "seconds": 2.0},
    "sizes": {"sizes": "64,128,256,512,1024,1500"},
    "latency": {"nf": "tx", "rates": "10k,1M"},
    "cpu": {"rates": "100k,500k,1M,2M,3M"},
    "ddos": {"rates": "1M,4M"},
    "dispatch": {"rates": "25k,50k,65k,80k,100k", "seconds": 2.0},
    # ten minutes per backend; rates: found by probing unless given
    "soak": {"backends": "xdp,xdp-generic,afxdp,dpdk", "seconds": 600.0},
    "udp-soak": {"seconds": 600.0},
    "bgp": {"backends": "xdp,afxdp,dpdk"},
}


def _list(text: str, what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise VelozError(f"--{what} is empty")
    return items


def _ints(text: str, what: str, low: int, high: int) -> list[int]:
    out = []
    for item in _list(text, what):
        if not item.isdigit() or not low <= int(item) <= high:
            raise VelozError(f"--{what}: '{item}' is not a whole number in {low}..{high}")
        out.append(int(item))
    return out


def settings_from(args: argparse.Namespace) -> dict:
    """Every option checked, before the testbed is touched."""
    name = args.experiment
    if name not in EXPERIMENTS:
        raise VelozError(f"no experiment '{name}' (known: {', '.join(EXPERIMENTS)})")
    d = DEFAULTS.get(name, {})

    def given(value: str | None, default: str) -> str:
        return default if value is None else value  # "" is given, and empty

    backends = _list(given(args.backends, d.get("backends", ",".join(BACKENDS))), "backends")
    for b in backends:
        if b not in BACKENDS:
            raise VelozError(f"--backends: no backend '{b}' (known: {', '.join(BACKENDS)})")
    sizes = _list(given(args.sizes, d.get("sizes", "64")), "sizes")
    # udp-*: --sizes are UDP payloads (checked below), not frames
    udp_sizes = name.startswith("udp-") and args.sizes is not None
    for item in [] if udp_sizes else sizes:
        if item.isdigit() and MAX_SIZE < int(item) <= 9000:
            raise VelozError(f"--sizes: {item} B needs multi-buffer frames, which the "
                             f"generator does not make yet (at most {MAX_SIZE})")  # fmt: skip
    if args.trials < 1:
        raise VelozError("--trials must be at least 1")
    seconds = args.seconds if args.seconds is not None else d.get("seconds", 2.0)
    if not 0.1 <= seconds <= 3600:
        raise VelozError("--seconds must be between 0.1 and 3600")
    if not 1 <= args.steps <= 20:
        raise VelozError("--steps must be between 1 and 20")
    if not 0 < args.loss < 1:
        raise VelozError("--loss is a fraction between 0 and 1 (0.005 = 0.5%)")
    size_list = [64] if udp_sizes else _ints(",".join(sizes), "sizes", 64, MAX_SIZE)
    rates = []
    for r in _list(given(args.rates, d.get("rates", "1M")), "rates"):
        pps = parse_rate(r, size_list[0], "--rates")
        if pps > MAX_PPS:
            raise VelozError(f"--rates: {r} is more than a 400 Gbit/s link carries "
                             f"({MAX_PPS:,} pps of 64-byte frames)")  # fmt: skip
        rates.append(pps)
    noises = _list(args.noises, "noises")
    for n in noises:
        if n not in NOISES:
            raise VelozError(f"--noises: no neighbour '{n}' (known: {', '.join(NOISES)})")
    if args.repeat < 1:
        raise VelozError("--repeat must be positive")
    udp_workers = getattr(args, "udp_workers", None)  # `veloz demo` has no --udp-workers
    udp_workers = 1 if udp_workers is None else udp_workers
    if udp_workers < 1:
        raise VelozError("--udp-workers must be at least 1")
    least = len(route_table.bench_prefixes())  # the generator's range is routed
    routes = getattr(args, "routes", None)  # `veloz demo` has no --routes
    if routes is not None and not least <= routes <= route_table.PAPER_ROUTES:
        raise VelozError(f"--routes must be {least} to {route_table.PAPER_ROUTES}")
    return {
        "experiment": name,
        "backends": backends,
        "sizes": size_list,
        "trials": args.trials,
        "seconds": seconds,
        "nf": args.nf or d.get("nf", "drop"),
        "nfs": ["drop", "tx"],
        "rates": rates,
        "rates_given": args.rates is not None,
        "steps": args.steps,
        "loss": args.loss,
        "noises": noises,
        "accesses": _ints(args.accesses, "accesses", 0, 4096),
        "repeat": args.repeat,
        "routes": routes or route_table.PAPER_ROUTES,
        "udp_workers": udp_workers,
        # udp-latency/udp-throughput: --sizes are UDP payloads (UDPDK's 18..1472)
        "udp_payloads": (
            _ints(",".join(sizes), "sizes", 18, 1472)
            if args.sizes and name.startswith("udp-")
            else None
        ),  # fmt: skip
    }


def out_dir(args: argparse.Namespace, name: str) -> Path:
    if args.out:
        out = Path(args.out)
    else:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = Path("veloz-results") / f"{name}-{stamp}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / ".write-test").touch()
        (out / ".write-test").unlink()
    except OSError as e:
        raise VelozError(f"cannot write results into {out}: {e.strerror}") from None
    return out


def require_testbed() -> None:
    try:
        st = testbed.status()
    except testbed.TestbedError as e:
        raise VelozError(str(e), code=1) from None
    if not st["up"]:
        why = st["problems"][0] if st["problems"] else "not built"
        raise VelozError(f"the testbed is not up ({why}): run `veloz testbed up` first", code=1)


def run_experiment(settings: dict, out: Path, console: Console | None = None) -> Path:
    """Run, with a progress bar; write DIR/NAME.json; return its path."""
    from veloz.lab import environment, topology
    from veloz.lab.experiments import EXPERIMENTS as BY_NAME
    from veloz.lab.experiments import Context

    exp = BY_NAME[settings["experiment"]]
    console = console or Console(stderr=True)
    started = dt.datetime.now(dt.UTC)
    env = environment.record()
    total = exp.count(settings)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())  # fmt: skip
    with (
        Progress(*columns, console=console, transient=False) as progress,
        bpf_stats.Enabled(exp.name == "cpu"),
    ):
        task = progress.add_task(exp.name, total=total)

        def advance(label: str, n: int = 1) -> None:
            progress.update(task, advance=n, description=f"{exp.name}: {label}")

        ctx = Context(settings=settings, advance=advance)
        exp.run(ctx)
    result = {
        "experiment": exp.name,
        "title": exp.title,
        "topology": topology.current().describe(),
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "environment": env,
        "settings": settings,
        "records": ctx.records,
        "sections": exp.sections(ctx.records, settings),
    }
    if hasattr(exp, "summary"):  # the figures the report puts at the top of its page
        result["summary"] = exp.summary(ctx.records, settings)
    path = out / f"{exp.name}.json"
    safeio.write_text(path, json.dumps(result, indent=1) + "\n", "--out")  # checked, not assumed
    return path


def needs(settings: dict) -> tuple:
    """What the experiment runs on its roles' hosts besides veloz (topology.Need)."""
    from veloz.lab.experiments import EXPERIMENTS as BY_NAME

    exp = BY_NAME[settings["experiment"]]
    return tuple(exp.needs(settings)) if hasattr(exp, "needs") else ()


def run(args: argparse.Namespace) -> int:
    from veloz.lab import topology

    settings = settings_from(args)
    topo = None
    if getattr(args, "topology", None):
        topo = topology.load(args.topology)
    try:
        if settings["experiment"] == "cost":  # cost needs no network
            pass
        elif topo is not None:
            # every host answers, has its ports, and what the experiment runs there
            topology.check(topo, needs(settings))
        else:
            require_testbed()
        out = out_dir(args, settings["experiment"])
        with topology.use(topo or topology.testbed_topology()):
            path = run_experiment(settings, out)
    finally:
        if topo is not None:
            topo.close()  # also when check() failed: an SSH connection may be open
    print(f"results: {path}")
    if not args.no_report:
        from veloz.lab.report import write_report

        print(f"report: {write_report(out)}")
    return 0
