"""A full BGP table drives the router: bird2 in vz-gen announces 752,138
routes (route_table's synthetic internet table) to bird2 in vz-dut, which
installs them in vz-dut's kernel table; the router there follows it
(`sync = "kernel"`, route_sync.py). Each trial, on each backend, measures:

  - convergence: from the BGP session coming up to the router holding the
    whole table (and, beside it, to the kernel's FIB holding it);
  - withdrawal and announcement latency: from `birdc disable` (`enable`) of
    one prefix's static protocol to the router's table obeying it, for each
    of CHURN prefixes, polled through the control socket; beside it, to the
    kernel's FIB obeying it (the sync's own share is the difference);
  - loss during churn: a paced flow to prefixes that do not change, while
    the churn prefixes come and go; every frame sent must reach the sink or
    be counted as missed by the port;
  - ECMP: ECMP_FLOWS flows to a kernel multipath route over two next hops,
    counted per next hop at the sink, with a chi-square test against an
    even split.

It runs on the built-in testbed (vz-gen, vz-dut, vz-sink).
"""

from __future__ import annotations

import ipaddress
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from veloz.control import companion, route_sync
from veloz.control.client import Ctl
from veloz.control.router import parse_prefix
from veloz.core.errors import VelozError
from veloz.core.proc import Runner, in_netns, run_json, veloz_argv
from veloz.lab import route_table, stats, topology
from veloz.testbed import bgp

CHURN = [f"198.19.{i}.0/24" for i in range(20)]  # outside the table: only BGP has them
POLL_S = 0.002
CONVERGE_TIMEOUT_S = 900.0
LATENCY_TIMEOUT_S = 30.0
CHURN_RATE = 100_000  # pps to unchanged prefixes while the churn prefixes flap
CHURN_S = 10.0
STABLE_DSTS = ("--dsts", "1000", "--dst-range", str(route_table.BENCH_RANGE))


def _holds(ctl_path: str, prefix: str) -> bool:
    """Whether the router holds exactly prefix: a session of its own each
    time, as the NF serves one session at a time and the sync needs one."""
    p = parse_prefix(prefix)
    with Ctl(Path(ctl_path)) as c:
        key = p.length.to_bytes(4, "little").hex() + p.addr.hex()
        return c.requests([f"holds router_routes4 {key}"])[0] == "ok 1"


def _wait(value, timeout: float, interval: float, what: str):
    deadline = time.monotonic() + timeout
    while not (got := value()):
        if time.monotonic() > deadline:
            raise VelozError(f"bgp experiment: {what} not within {timeout:g} s")
        time.sleep(interval)
    return got


def _kernel_routes() -> int:
    done = subprocess.run(["ip", "-n", "vz-dut", "-4", "route", "show", "proto", "bird"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return done.stdout.count("\n")


def _convergence(announcer: bgp.Bird, ctl: str, expected: int) -> dict:
    """Seconds from the session's coming up to the kernel's, then the
    router's, holding every route."""
    _wait(lambda: announcer.established("receiver"), 60, 0.02, "the BGP session")
    up = time.monotonic()
    status_file = companion.beside(Path(ctl), route_sync.STATUS)
    kernel_s = router_s = None
    while router_s is None:
        now = time.monotonic() - up
        if now > CONVERGE_TIMEOUT_S:
            raise VelozError(f"bgp experiment: no convergence within {CONVERGE_TIMEOUT_S:g} s")
        if kernel_s is None and _kernel_routes() >= expected:
            kernel_s = now
        st = companion.read_status(status_file) or {}
        if st.get("in_router", 0) >= expected and not st.get("pending_since"):
            router_s = now
        time.sleep(0.2)
    return {"kernel_s": kernel_s if kernel_s is not None else router_s, "converge_s": router_s}


def _in_kernel(prefix: str) -> bool:
    """Whether vz-dut's FIB routes prefix: one lookup (`ip route get`), not a
    dump of the whole table (`ip route show` reads all of it each time).
    CHURN is covered by nothing else, so a route found is prefix's own."""
    addr = str(ipaddress.ip_network(prefix).network_address + 1)
    done = subprocess.run(["ip", "-n", "vz-dut", "-4", "route", "get", addr],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return done.returncode == 0 and "via" in done.stdout


def _obeyed(ctl: str, prefix: str, present: bool, start: float) -> tuple[float, float]:
    """Seconds from start to the kernel's FIB, and to the router's table,
    holding (or not) prefix; each polled in turn, every POLL_S."""
    kernel = router = None
    while router is None:
        if time.monotonic() - start > LATENCY_TIMEOUT_S:
            where = "in" if present else "out of"
            raise VelozError(f"bgp experiment: {prefix} not {where} the router within "
                             f"{LATENCY_TIMEOUT_S:g} s")  # fmt: skip
        if kernel is None and _in_kernel(prefix) == present:
            kernel = time.monotonic() - start  # an upper bound: when the answer came
        if _holds(ctl, prefix) == present:
            router = time.monotonic() - start
        time.sleep(POLL_S)
    return (router if kernel is None else kernel), router


def _latencies(announcer: bgp.Bird, ctl: str) -> dict:
    """Per churn prefix: withdrawn, then announced again; to the kernel's
    FIB and to the router's table."""
    out: dict[str, list[float]] = {k: [] for k in ("withdraw_s", "withdraw_kernel_s",
                                                   "announce_s", "announce_kernel_s")}  # fmt: skip
    for i, prefix in enumerate(CHURN):
        for change, present, what in ((announcer.withdraw, False, "withdraw"),
                                      (announcer.announce, True, "announce")):  # fmt: skip
            start = time.monotonic()
            change(i)
            kernel, router = _obeyed(ctl, prefix, present, start)
            out[f"{what}_kernel_s"].append(kernel)
            out[f"{what}_s"].append(router)
    return out


def _churn_loss(announcer: bgp.Bird, ctl: str) -> dict:
    """A paced flow to unchanged prefixes while every churn prefix flaps."""
    count = int(CHURN_RATE * CHURN_S)
    gen = in_netns("vz-gen", veloz_argv("gen", "--iface", "gen-dut", "--json", "--count",
                                        str(count), "--rate", str(CHURN_RATE),
                                        *STABLE_DSTS))  # fmt: skip
    sink = in_netns("vz-sink", veloz_argv("gen", "--sink", "--replace", "--iface", "sink-dut",
                                          "--json"))  # fmt: skip
    missed0 = _missed(ctl)
    sent: list[dict] = []
    flaps = 0
    with Runner(sink, what="the sink") as s:
        flow = threading.Thread(target=lambda: sent.append(run_json(gen, timeout=CHURN_S + 60)))
        flow.start()
        while flow.is_alive():
            i = flaps % len(CHURN)
            (announcer.withdraw if flaps // len(CHURN) % 2 == 0 else announcer.announce)(i)
            flaps += 1
            time.sleep(0.02)
        flow.join()
        got = s.stop()
    time.sleep(1.5)  # the runner publishes its counters each second
    missed = _missed(ctl) - missed0
    return {"churn_sent": sent[0]["sent"], "churn_received": got["received"],
            "churn_missed": missed, "churn_lost": sent[0]["sent"] - got["received"] - missed,
            "churn_changes": flaps}  # fmt: skip


ECMP_PREFIX = "198.19.250.0/24"
ECMP_HOPS = {"198.18.1.2": "02:00:c6:12:01:02", "198.18.1.3": "02:00:c6:12:01:03"}
ECMP_FLOWS = 10_000


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", "-n", "vz-dut", *args], check=check, capture_output=True)


def _ecmp_spread(ctl: str, tmp: Path) -> dict:
    """A kernel multipath route over two next hops (vz-sink's address and a
    second neighbour on the same link): ECMP_FLOWS flows, one frame each,
    counted per next hop by destination MAC at vz-sink."""
    from scapy.all import Ether, rdpcap

    pcap = tmp / "ecmp.pcap"
    hops = [w for a in ECMP_HOPS for w in ("nexthop", "via", a, "dev", "dut-sink")]
    try:
        for addr, mac in ECMP_HOPS.items():
            _ip("neigh", "replace", addr, "lladdr", mac, "dev", "dut-sink", "nud", "permanent")
        _ip("route", "replace", ECMP_PREFIX, *hops)
        _wait(lambda: _holds(ctl, ECMP_PREFIX), LATENCY_TIMEOUT_S, POLL_S, "the ECMP route")
        dump = subprocess.Popen(in_netns("vz-sink", ["tcpdump", "-n", "-U", "-B", "32768", "-Q",
                                                     "in", "-i", "sink-dut", "-w", str(pcap),
                                                     "udp"]),
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert dump.stderr is not None
        dump.stderr.readline()  # "listening on ...": ready
        flows = str(ECMP_FLOWS)
        gen = in_netns("vz-gen", veloz_argv("gen", "--iface", "gen-dut", "--json", "--dst-ip",
                                            "198.19.250.1", "--flows", flows, "--count", flows,
                                            "--rate", "50k"))  # fmt: skip
        run_json(gen, timeout=120)
        time.sleep(1)
        dump.terminate()
        dump.wait(10)
    finally:
        _ip("route", "del", ECMP_PREFIX, check=False)
        for addr in ECMP_HOPS:
            _ip("neigh", "del", addr, "dev", "dut-sink", check=False)
    per_hop = {mac: 0 for mac in ECMP_HOPS.values()}
    for frame in rdpcap(str(pcap)):
        if frame[Ether].dst in per_hop:
            per_hop[frame[Ether].dst] += 1
    return {"ecmp_per_hop": list(per_hop.values())}


def _missed(ctl: str) -> int:
    with Ctl(Path(ctl)) as c:
        errors = (c.counters() or {}).get("errors") or {}
    return sum(errors.get(k) or 0 for k in ("rx_missed", "tx_failed"))


def one_trial(backend: str, feed: Path, expected: int, tmp: Path) -> dict:
    cfg = tmp / "router.toml"
    cfg.write_text('sync = "kernel"\n')
    argv = veloz_argv("run", "router", "--backend", backend, "--iface", "dut-gen", "--iface",
                      "dut-sink", "--config", str(cfg), "--json")  # fmt: skip
    with (
        bgp.Bird("vz-dut", tmp, bgp.receiver_config()),
        Runner(in_netns("vz-dut", argv), attach_timeout=120) as nf,
        bgp.Bird("vz-gen", tmp, bgp.announcer_config(feed, CHURN)) as announcer,
    ):
        ctl = nf.attached["ctl"]
        rec = _convergence(announcer, ctl, expected)
        rec |= _latencies(announcer, ctl)
        rec |= _churn_loss(announcer, ctl)
        rec |= _ecmp_spread(ctl, tmp)
    return rec


class Bgp:
    name = "bgp"
    title = "A full BGP table drives the router: convergence, withdrawal latency, churn"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(self._backends(s))

    def needs(self, s: dict) -> tuple[topology.Need, ...]:
        return tuple(topology.Need(role, "command", cmd, "Debian package bird2")
                     for role in ("generator", "dut") for cmd in ("bird", "birdc"))  # fmt: skip

    @staticmethod
    def _backends(s: dict) -> list[str]:
        return [b for b in s["backends"] if b != "linux"]

    def run(self, ctx) -> None:
        if topology.current().name != "testbed":
            raise VelozError("bench bgp runs on the built-in testbed (vz-gen, vz-dut, vz-sink)")
        routes = route_table.generate(ctx.settings.get("routes") or route_table.PAPER_ROUTES,
                                      seed=1)  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="veloz-bgp-") as tmp:
            prefixes = [f"{ipaddress.IPv4Address(a)}/{n}" for a, n in routes]
            feed = bgp.feed_file(Path(tmp) / "feed.routes", prefixes)
            expected = len(routes) + len(CHURN)
            for t in range(ctx.settings["trials"]):
                for backend in self._backends(ctx.settings):
                    rec = one_trial(backend, feed, expected, Path(tmp))
                    ctx.record(f"bgp {backend}", rec | {"backend": backend, "routes": expected},
                               trial=t, experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        rows = []
        for backend in dict.fromkeys(r["backend"] for r in records):
            mine = [r for r in records if r["backend"] == backend]
            conv = stats.summarize([r["converge_s"] for r in mine])
            kern = stats.summarize([r["kernel_s"] for r in mine])
            wd = [x for r in mine for x in r["withdraw_s"]]
            an = [x for r in mine for x in r["announce_s"]]
            wdk = [x for r in mine for x in r.get("withdraw_kernel_s", [])]
            rows.append([
                backend, len(mine), _ci(conv, 1), _ci(kern, 1),
                *_pcts(wd), _pcts(wdk)[0], *_pcts(an),
                sum(r["churn_lost"] for r in mine), sum(r["churn_missed"] for r in mine),
                sum(r["churn_sent"] for r in mine), *_ecmp(mine),
            ])  # fmt: skip
        return [{
            "title": self.title,
            "text": (f"{records[0]['routes'] if records else 0:,} routes over BGP. Convergence: "
                     "session up to the whole table in the router (and in the kernel's FIB), "
                     "median over trials with a 95% bootstrap CI. Latency: birdc disable/enable "
                     "of one prefix to the router's table obeying it (and to the kernel's FIB), "
                     f"{len(CHURN)} prefixes per trial, p50 and p99 over all of them (ms). "
                     f"Churn: {CHURN_RATE:,} pps to unchanged prefixes for {CHURN_S:g} s while "
                     "the churn prefixes flap; lost = sent - received - counted as missed by "
                     f"the port. ECMP: {ECMP_FLOWS:,} flows per trial over a two-way kernel "
                     "multipath route, summed over trials; p of a chi-square test against an "
                     "even split (small: uneven)."),
            "table": {"columns": ["backend", "trials", "converge s (CI)", "kernel FIB s (CI)",
                                  "withdraw p50 ms (CI)", "withdraw p99 ms",
                                  "kernel FIB withdraw p50 ms", "announce p50 ms (CI)",
                                  "announce p99 ms", "churn lost", "churn missed", "churn sent",
                                  "ECMP flows per next hop", "ECMP chi-square p"],
                      "rows": rows},
        }]  # fmt: skip


def _ecmp(records: list[dict]) -> list[str | float | None]:
    """Flows per next hop over the trials, and a chi-square test's p against
    an even split."""
    per_trial = [r["ecmp_per_hop"] for r in records if "ecmp_per_hop" in r]
    counts = [sum(c) for c in zip(*per_trial, strict=True)]
    if not counts or not sum(counts):
        return [None, None]
    from scipy.stats import chisquare

    return [" / ".join(f"{c:,}" for c in counts), round(float(chisquare(counts).pvalue), 3)]


def _ci(s: dict, digits: int) -> str:
    if s["median"] is None:
        return "-"
    return f"{s['median']:.{digits}f} ({s['low']:.{digits}f}–{s['high']:.{digits}f})"


def _pcts(values: list[float]) -> list[str | float | None]:
    """p50 in ms with its 95% bootstrap CI, and p99 in ms."""
    if not values:
        return [None, None]
    import numpy as np

    ms = [v * 1e3 for v in values]
    return [_ci(stats.summarize(ms), 1), round(float(np.percentile(ms, 99)), 1)]


BGP = Bgp()
