"""`--metrics ADDR:PORT`: a running NF's counters as a Prometheus text endpoint.

The design, and why: `veloz run` exec()s the C runner, so that signals and
kill -9 reach the program that detaches. --metrics keeps that: before the
exec, the front end binds the listening socket (a bad or busy address is
refused before anything is attached) and forks one small Python process,
which serves GET /metrics and dies with the runner (PR_SET_PDEATHSIG). Each
scrape asks the runner's control socket for its latest counters line (the
`counters` request: the same JSON `--json` prints, with the dispatch stage's
figures) and the NF's own counters (router, ddos, lb: their maps; lb's per
VIP and backend too), so no counter is computed twice, the data path
gains no thread and no lock, and stdout stays the user's. prometheus_client
writes the exposition format.

Names follow Prometheus' conventions: a veloz_ prefix, _total on counters,
frames and bytes as units, one metric per meaning with labels for its
dimensions (worker, verdict, error, port, cpu, outcome, vip, backend).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

from veloz.control import companion
from veloz.control.ctl import ABI  # the verdict names, from the NFs' BTF
from veloz.core.errors import VelozError

# Where --metrics may listen: this machine, or the testbed's own networks.
ALLOWED = [ipaddress.ip_network(n) for n in
           ("127.0.0.0/8", "::1/128", "198.18.0.0/15", "fd00:198:18::/48")]  # fmt: skip
ERRORS = ("rx_invalid", "tx_failed", "pass_failed")


def parse_listen(value: str) -> tuple[str, int]:
    """ADDR:PORT ([ADDR]:PORT for IPv6) -> (address, port), or one clear error."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise VelozError(f"--metrics {value!r}: expected ADDR:PORT, e.g. 127.0.0.1:9464")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        host = "127.0.0.1"
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise VelozError(f"--metrics {value!r}: {host!r} is not an IP address") from None
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise VelozError(f"--metrics {value!r}: the port must be 1-65535")
    if not any(addr in net for net in ALLOWED):
        raise VelozError(
            f"--metrics {value!r}: veloz serves metrics only on loopback or testbed addresses "
            "(127.0.0.0/8, ::1, 198.18.0.0/15, fd00:198:18::/48)"
        )
    return str(addr), int(port_text)


def listen(value: str) -> socket.socket:
    """The bound, listening socket for --metrics (not inherited by an exec)."""
    host, port = parse_listen(value)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(16)
    except OSError as e:
        sock.close()
        raise VelozError(f"--metrics {value}: cannot listen: {e.strerror}", code=1) from None
    return sock


# ---- what a scrape shows ------------------------------------------------------


def families(counters: dict | None, nf: str | None, backend: str | None,
             nf_counters: dict[str, int] | None,
             lb_vips: list | None = None) -> Iterator:  # fmt: skip
    """Metric families from one counters line (as `veloz run --json` prints it),
    the NF's own counters, and lb's per VIP and backend (lb.stats()'s "vips")."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    up = GaugeMetricFamily("veloz_up", "1 when the NF answered on its control socket")
    up.add_metric([], 1.0 if counters is not None else 0.0)
    yield up
    if counters is None:
        return
    info = GaugeMetricFamily("veloz_run_info", "The NF and backend of this run",
                             labels=["nf", "backend"])  # fmt: skip
    info.add_metric([nf or "", backend or ""], 1.0)
    yield info
    workers = [w for w in counters.get("workers", []) if isinstance(w, dict)]
    frames = CounterMetricFamily("veloz_frames", "Frames the NF ran on, by verdict and worker",
                                 labels=["worker", "verdict"])  # fmt: skip
    nbytes = CounterMetricFamily("veloz_bytes", "Bytes of the frames the NF ran on",
                                 labels=["worker"])  # fmt: skip
    rx = CounterMetricFamily("veloz_rx_frames", "Frames taken from the port", labels=["worker"])
    errors = CounterMetricFamily("veloz_errors", "Frames lost to an error, by kind",
                                 labels=["worker", "error"])  # fmt: skip
    from_kernel = CounterMetricFamily("veloz_from_kernel_frames",
                                      "Frames the host sent out through the PASS TAP",
                                      labels=["worker"])  # fmt: skip
    for w in workers:
        label = str(w.get("worker"))
        for v in ABI.VERDICTS:
            if isinstance(w.get(v), int):
                frames.add_metric([label, v], w[v])
        if isinstance(w.get("bytes"), int):
            nbytes.add_metric([label], w["bytes"])
        if isinstance(w.get("rx"), int):
            rx.add_metric([label], w["rx"])
        for e in ERRORS:
            value = (w.get("errors") or {}).get(e)
            if isinstance(value, int):  # null: the backend cannot tell
                errors.add_metric([label, e], value)
        if isinstance(w.get("from_kernel"), int):
            from_kernel.add_metric([label], w["from_kernel"])
    yield from (frames, nbytes, rx, errors, from_kernel)
    missed = (counters.get("errors") or {}).get("rx_missed")
    if isinstance(missed, int):  # a port count, null where only the driver knows
        m = CounterMetricFamily("veloz_rx_missed_frames",
                                "Frames the port dropped before any worker saw them")  # fmt: skip
        m.add_metric([], missed)
        yield m
    redirected = counters.get("redirected") or {}
    if redirected:
        r = CounterMetricFamily("veloz_redirected_frames", "Frames redirected, by output port",
                                labels=["port"])  # fmt: skip
        for port, value in redirected.items():
            if isinstance(value, int):
                r.add_metric([str(port)], value)
        yield r
    if isinstance(counters.get("ctl_refused"), int):
        c = CounterMetricFamily(
            "veloz_ctl_refused_connections",
            "Control socket connections refused: not root or the group",
        )
        c.add_metric([], counters["ctl_refused"])
        yield c
    yield from _dispatch(counters.get("dispatch"))
    if nf and nf_counters:
        name = "veloz_" + "".join(ch if ch.isalnum() else "_" for ch in nf) + "_frames"
        f = CounterMetricFamily(name, f"The {nf} NF's own counters: frames per outcome",
                                labels=["outcome"])  # fmt: skip
        for outcome, value in nf_counters.items():
            if isinstance(value, int):
                f.add_metric([outcome], value)
        yield f
    if lb_vips is not None:
        yield from _lb(lb_vips)


def _lb(vips: list) -> Iterator:
    """lb's frames and bytes per VIP and per backend (lb_vip_stats, lb_backend_stats)."""
    from prometheus_client.core import CounterMetricFamily

    def family(what: str, unit: str, labels: list[str]) -> CounterMetricFamily:
        text = f"{unit.capitalize()} the lb NF counted per {what} (lb_{what}_stats)"
        return CounterMetricFamily(f"veloz_lb_{what}_{unit}", text, labels=labels)

    vf, vb = family("vip", "frames", ["vip"]), family("vip", "bytes", ["vip"])
    pair = ["vip", "backend"]
    bf, bb = family("backend", "frames", pair), family("backend", "bytes", pair)
    for vip in vips:
        vf.add_metric([vip["vip"]], vip["packets"])
        vb.add_metric([vip["vip"]], vip["bytes"])
        # a backend removed and added again has two ids: one series, their sum
        per: dict[str, list[int]] = {}
        for b in vip["backends"]:
            sums = per.setdefault(b["address"], [0, 0])
            sums[0] += b["packets"]
            sums[1] += b["bytes"]
        for address, (packets, nbytes) in per.items():
            bf.add_metric([vip["vip"], address], packets)
            bb.add_metric([vip["vip"], address], nbytes)
    yield from (vf, vb, bf, bb)


def lb_health(vips: list, status: dict | None) -> Iterator:
    """lb's backends in service and its health checks: up and healthy from the
    maps (lb.stats()'s rows: a backend the checks drained is down, one never
    checked is up while configured), the probes' results from the health
    companion's status file (health.py; 0 for a backend it does not check)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    up = GaugeMetricFamily("veloz_lb_backend_up", "1 when the backend takes new flows, 0 when "
                           "the health checks drained it", labels=["vip", "backend"])  # fmt: skip
    healthy = GaugeMetricFamily("veloz_lb_vip_healthy_backends",
                                "Backends of the VIP that take new flows",
                                labels=["vip"])  # fmt: skip
    checks = CounterMetricFamily("veloz_lb_health_checks", "Health checks, by result",
                                 labels=["vip", "backend", "result"])  # fmt: skip
    checked = (status or {}).get("vips") or {}
    for vip in vips:
        healthy.add_metric([vip["vip"]], vip.get("up", 0))
        rows = (checked.get(vip["vip"]) or {}).get("backends") or {}
        # an address removed and added again has two ids: its live one counts
        live = {b["address"]: b for b in vip["backends"] if b.get("valid") or b.get("down")}
        for address, b in live.items():
            up.add_metric([vip["vip"], address], 1.0 if b.get("valid") else 0.0)
            counts = (rows.get(address) or {}).get("checks") or {}
            for result in ("ok", "fail", "timeout"):
                checks.add_metric([vip["vip"], address, result], counts.get(result, 0))
    yield from (up, healthy, checks)


def _dispatch(d: object) -> Iterator:
    """The dispatch stage's figures, part of each counters line with --dispatch:
    the XDP stage's (per CPU) or the afxdp and dpdk dispatchers' (per worker)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    if not isinstance(d, dict):
        return
    if "cpu_packets" in d:
        cpu = CounterMetricFamily("veloz_dispatch_frames",
                                  "Frames the dispatch stage sent to each CPU",
                                  labels=["cpu"])  # fmt: skip
        for i, value in enumerate(d["cpu_packets"]):
            cpu.add_metric([str(i)], value)
        yield cpu
    else:
        yield from _dispatch_workers(d)
    for key, help_text in (("workers", "Workers (CPUs) the dispatch stage may use"),
                           ("active", "Workers (CPUs) active now")):  # fmt: skip
        value = d.get(key)
        g = GaugeMetricFamily(f"veloz_dispatch_{key}_workers" if key == "active"
                              else "veloz_dispatch_workers", help_text)  # fmt: skip
        g.add_metric([], len(value) if isinstance(value, list) else value)
        yield g
    flows = CounterMetricFamily("veloz_dispatch_flow_events", "Flows seen, moved and aged out",
                                labels=["event"])  # fmt: skip
    for event in ("new", "moved", "aged"):
        if isinstance(d.get(f"flows_{event}"), int):
            flows.add_metric([event], d[f"flows_{event}"])
    yield flows
    simple = (("buckets_moved", "veloz_dispatch_buckets_moved", "Hash buckets moved"),
              ("rebalances", "veloz_dispatch_rebalances", "Rebalancing rounds"),
              ("no_cpu", "veloz_dispatch_no_cpu_frames", "Frames with no active CPU"))  # fmt: skip
    for key, name, help_text in simple:
        if isinstance(d.get(key), int):
            c = CounterMetricFamily(name, help_text)
            c.add_metric([], d[key])
            yield c
    alloc = d.get("alloc")
    if isinstance(alloc, dict):
        re = CounterMetricFamily("veloz_dispatch_reallocations",
                                 "Workers added (grow) and removed (shrink) by the allocator",
                                 labels=["direction"])  # fmt: skip
        re.add_metric(["grow"], alloc.get("grows", 0))
        re.add_metric(["shrink"], alloc.get("shrinks", 0))
        yield re
        if isinstance(alloc.get("written_off"), int):  # the XDP stage's cpumap queues
            w = CounterMetricFamily("veloz_dispatch_written_off_frames",
                                    "Frames dropped by a full cpumap queue")  # fmt: skip
            w.add_metric([], alloc["written_off"])
            yield w


def _dispatch_workers(d: dict) -> Iterator:
    """A userspace dispatcher's own: per worker, frames handed over and held now."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    frames = CounterMetricFamily("veloz_dispatch_frames",
                                 "Frames the dispatcher handed each worker",
                                 labels=["worker"])  # fmt: skip
    for i, value in enumerate(d.get("frames_per_worker", [])):
        frames.add_metric([str(i)], value)
    yield frames
    held = GaugeMetricFamily("veloz_dispatch_in_flight_frames",
                             "Frames a worker holds now: queued, in service or on the way back",
                             labels=["worker"])  # fmt: skip
    for i, value in enumerate(d.get("in_flight_per_worker", [])):
        held.add_metric([str(i)], value)
    yield held
    for key, name, help_text in (
        ("ring_full", "veloz_dispatch_ring_full_frames",
         "Frames dropped because their worker's queue was full"),
        ("reordered", "veloz_dispatch_reordered_frames",
         "Frames completed behind a later frame of their flow"),
    ):  # fmt: skip
        if isinstance(d.get(key), int):
            c = CounterMetricFamily(name, help_text)
            c.add_metric([], d[key])
            yield c
    if isinstance(d.get("mean_active"), (int, float)):
        g = GaugeMetricFamily("veloz_dispatch_mean_active_workers",
                              "Active workers, averaged over the run")  # fmt: skip
        g.add_metric([], d["mean_active"])
        yield g


class RunCollector:
    """Reads a run's control socket on each scrape."""

    def __init__(self, ctl_path: Callable[[], Path], owner: int) -> None:
        self.ctl_path = ctl_path
        self.owner = owner  # the runner's pid: never report another run's counters

    def collect(self) -> Iterator:
        from veloz.control import objects
        from veloz.control.client import Ctl, CtlError

        counters = nf = backend = nf_counters = lb_vips = None
        path = self.ctl_path()
        try:
            with Ctl(path) as ctl:
                if ctl.peer_pid() == self.owner:
                    nf, backend = ctl.info()
                    counters = ctl.counters()
                    if counters is not None:
                        nf_counters, lb_vips = objects.nf_stats(ctl, nf)
        except (CtlError, OSError, ValueError, KeyError):
            counters = None  # not listening yet, or stopping: veloz_up 0
        yield from families(counters, nf, backend, nf_counters, lb_vips)
        if counters is not None and nf == "router":
            from veloz.control import route_sync

            yield from route_sync_families(
                companion.read_status(companion.beside(path, route_sync.STATUS))
            )
        if counters is not None and nf == "lb":
            from veloz.control import health

            status = health.read(companion.beside(path, health.NAME), self.owner)
            yield from lb_health(lb_vips or [], status)


def route_sync_families(status: dict | None, now: float | None = None) -> Iterator:
    """The router's sync with the kernel's table (route_sync.py's status file);
    nothing when the router does not sync."""
    import time

    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    if status is None:
        return
    pending = status.get("pending_since")
    lag = GaugeMetricFamily(
        "veloz_router_sync_lag_seconds",
        "How long the oldest kernel change not yet in the router has waited",
    )
    lag.add_metric([], max(0.0, (now or time.time()) - pending) if pending else 0.0)
    routes = GaugeMetricFamily("veloz_router_sync_routes", "Prefixes in the followed kernel table")
    routes.add_metric([], status.get("routes", 0))
    done = CounterMetricFamily(
        "veloz_router_sync_transactions", "Batches of kernel changes applied, one transaction each"
    )
    done.add_metric([], status.get("transactions", 0))
    errors = CounterMetricFamily(
        "veloz_router_sync_errors", "Failed batches; the sync then reads the whole table again"
    )
    errors.add_metric([], status.get("errors", 0))
    yield from (lag, routes, done, errors)


def udpd_families(line: dict | None) -> Iterator:
    """Metric families from vz-udpd's stats line: each section's counters as
    veloz_udpd_<section>_<name>_total, the live apps and sockets as gauges."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    up = GaugeMetricFamily("veloz_udpd_up", "1 when udpd's stats are fresh")
    up.add_metric([], 1.0 if line is not None else 0.0)
    yield up
    if line is None:
        return
    gauges = {("sockets", "apps"): "Applications connected now",
              ("sockets", "sockets"): "Sockets open now"}  # fmt: skip
    # a name promtool's lint refuses: "us" reads as microseconds
    renamed = {("stack", "rx_not_for_us"): "rx_not_ours"}
    for section in ("stack", "stack6", "sockets", "poller", "port"):
        values = line.get(section)
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            if not isinstance(value, int):
                continue
            if (section, key) in gauges:
                g = GaugeMetricFamily(f"veloz_udpd_{key}", gauges[(section, key)])
                g.add_metric([], value)
                yield g
                continue
            name = f"veloz_udpd_{section}_{renamed.get((section, key), key)}"
            c = CounterMetricFamily(name, f"udpd {section} counter {key}")
            c.add_metric([], value)
            yield c


class UdpdCollector:
    """Reads the stats line vz-udpd rewrites every interval (--stats-file)."""

    def __init__(self, path: Path, owner: int) -> None:
        self.path = path
        self.owner = owner

    def collect(self) -> Iterator:
        import json

        line = None
        try:
            value = json.loads(self.path.read_text())
            if isinstance(value, dict) and Path(f"/proc/{self.owner}").exists():
                line = value
        except (OSError, ValueError):
            pass  # not written yet (the first interval), or stopping
        yield from udpd_families(line)


# ---- the server -----------------------------------------------------------


def serve(sock: socket.socket, collector: object) -> None:
    """Serve GET /metrics on sock until killed."""
    # here, not at the top: every `veloz` command imports this module
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)  # type: ignore[arg-type]

    class Handler(BaseHTTPRequestHandler):
        timeout = 5  # a client that sends nothing does not hold the server

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # stderr is the run's

    server = HTTPServer(sock.getsockname()[:2], Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.serve_forever()


def fork_server(sock: socket.socket, collector_for: Callable[[int], object]) -> None:
    """Fork the metrics process (a companion); return in the parent, which
    goes on to exec the runner. The child serves until the runner exits."""
    companion.fork("metrics server", lambda parent: serve(sock, collector_for(parent)))
