# SPDX-License-Identifier: BSD-2-Clause
"""An unmodified UDP server from Debian on veloz's sockets against kernel
sockets: Knot DNS's knotd (epoll, recvmmsg/sendmmsg, --udp-workers UDP
worker threads, 1 by default: with more, one socket each in a SO_REUSEPORT
group) serving a small authoritative zone in vz-dut, dnsperf driving it
from vz-gen on kernel sockets. Only the server's stack changes between
arms (veloz/lab/dnsapp.py):

  kernel        knotd on kernel sockets (198.18.0.2): the baseline
  veloz         knotd under LD_PRELOAD=libveloz-preload.so, through udpd
                in poller mode (198.18.0.3)
  veloz-busy    the same with $VZ_BUSY_POLL_US=200: SO_BUSY_POLL on its
                sockets, so its epoll_wait spins 200 µs before sleeping
  veloz-direct  knotd under the shim in VZ_MODE=direct (198.18.0.3): it
                runs the stack itself on its own AF_XDP socket, no udpd
                (stopped for it: direct mode takes the interface); its
                epoll_wait spins 200 µs running the stack before it sleeps

There is no busy-polling kernel arm: knotd sets no SO_BUSY_POLL, and
net.core.busy_poll is the whole machine's, shared with other work.

Each trial starts knotd afresh on every arm in turn (interleaved), and
  - sends the same fixed queries (an answer, NXDOMAIN, NODATA, a CNAME,
    an answer truncated without EDNS, a 1.1 kB one, a 3 kB one in IPv4
    fragments, a refused one) and keeps the raw answers: the report says
    whether every arm's answers equal the kernel's, byte for byte;
  - throughput: dnsperf for SECONDS with 100 queries outstanding (answers
    per second, and the latency under that load);
  - latency: dnsperf for SECONDS with one query outstanding (dnsperf's
    mean and standard deviation per query).

This machine has 2 CPUs: udpd's polling, knotd, dnsperf and the kernel's
softirq share them, so every figure is the set-up's, not a NIC's.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from pathlib import Path

from veloz.lab import dnsapp, summary, topology
from veloz.lab.experiments import udp

ARMS = ("kernel", "veloz", "veloz-busy", "veloz-direct")
POLLER_ARMS = ("veloz", "veloz-busy")
LOADED = 100  # dnsperf's outstanding queries for throughput
PROBES = len(dnsapp.PROBES)


def measure(arm: str, seconds: float, qfile: Path, reference: list[str] | None,
            udp_workers: int) -> dict:  # fmt: skip
    """knotd on the arm: its answers, then dnsperf loaded and unloaded."""
    ip = dnsapp.arm_ip(arm)
    with dnsapp.knotd(arm, udp.SOCKET, udp_workers=udp_workers):
        answers = dnsapp.probe_in_gen(ip)
        loaded = dnsapp.dnsperf(ip, seconds, LOADED, qfile)
        single = dnsapp.dnsperf(ip, seconds, 1, qfile)
    same = (
        None
        if reference is None
        else sum(bool(a) and a == b for a, b in zip(answers, reference, strict=True))
    )
    return {
        "stack": arm,
        "udp_workers": udp_workers,
        # the raw answers' digests (the comparison itself is on the bytes)
        "answers": [
            hashlib.sha256(bytes.fromhex(a)).hexdigest()[:16] if a else "" for a in answers
        ],  # fmt: skip
        "_raw": answers,
        "answered": sum(1 for a in answers if a),
        "same_as_kernel": same,
        "qps": loaded["qps"],
        "lost": loaded["lost"],
        "loaded_lat_mean_us": loaded["lat_avg_s"] * 1e6,
        "loaded_lat_stddev_us": loaded["lat_stddev_s"] * 1e6,
        "lat_mean_us": single["lat_avg_s"] * 1e6,
        "lat_stddev_us": single["lat_stddev_s"] * 1e6,
        "lat_max_us": single["lat_max_s"] * 1e6,
        "single_lost": single["lost"],
    }


class UdpApp:
    name = "udp-app"
    title = "An unmodified DNS server (knotd) on veloz sockets against kernel sockets"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(ARMS)

    def needs(self, s: dict) -> tuple[topology.Need, ...]:
        return (
            topology.Need("dut", "command", "knotd", "Debian package knot"),
            topology.Need("dut", "tool", "vz-udpd"),
            topology.Need("dut", "library", "libveloz-preload.so"),
            topology.Need("generator", "command", "dnsperf", "Debian package dnsperf"),
            topology.Need("generator", "python", "veloz.lab.dnsapp"),
        )

    def run(self, ctx) -> None:
        seconds = ctx.settings["seconds"]
        with tempfile.TemporaryDirectory(prefix="veloz-dnsperf-") as d:
            qfile = Path(d) / "queries"
            dnsapp.query_file(qfile)
            for t in range(ctx.settings["trials"]):
                reference = None
                for arm in ARMS:  # kernel first: its answers are the reference
                    # udpd for the poller arms only: direct mode takes the port
                    with (udp.running_udpd(gen=False) if arm in POLLER_ARMS
                          else contextlib.nullcontext()):  # fmt: skip
                        rec = measure(arm, seconds, qfile, reference,
                                      ctx.settings["udp_workers"])  # fmt: skip
                    raw = rec.pop("_raw")
                    if arm == "kernel":
                        reference = raw
                        rec["same_as_kernel"] = sum(1 for a in raw if a)
                    ctx.record(arm, rec, trial=t, experiment=self.name)

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        out = []
        rows = []
        for arm in ARMS:
            recs = [r for r in records if r["stack"] == arm]
            n = PROBES * len(recs)
            rows.append([arm, len(recs), f"{sum(r['answered'] for r in recs)}/{n}",
                         f"{sum(r['same_as_kernel'] or 0 for r in recs)}/{n}"])  # fmt: skip
        workers = s["udp_workers"]
        out.append({
            "title": "Answers: the same queries on each stack, compared byte for byte",
            "text": (f"knotd with {workers} UDP worker thread{'s' if workers > 1 else ''}. "
                     "Per arm: trials, queries answered, answers identical to the kernel arm's "
                     "of the same trial. Queries: " +
                     ", ".join(f"{n} {t}" + ("" if e else " (no EDNS)")
                               for n, t, e in dnsapp.PROBES) + "."),
            "table": {"columns": ["stack", "trials", "answered", "identical to kernel"],
                      "rows": rows},
        })  # fmt: skip
        for metric, title, unit, unit_name, text in (
            ("qps", "Answers per second, 100 queries outstanding", 1e3, "kqps",
             "dnsperf's queries per second (one socket, one thread, in vz-gen)."),
            ("loaded_lat_mean_us", "Mean latency at 100 outstanding (µs)", 1.0, "µs",
             "dnsperf's average latency over the loaded run."),
            ("lat_mean_us", "Mean latency, one query outstanding (µs)", 1.0, "µs",
             "dnsperf's average latency, one query in flight at a time."),
            ("lat_stddev_us", "Latency standard deviation, one outstanding (µs)", 1.0, "µs",
             "dnsperf's latency standard deviation, one query in flight at a time."),
        ):  # fmt: skip
            sec = summary.rate_section(records, title, metric=metric, unit=unit,
                                       unit_name=unit_name, category="stack",
                                       baseline="kernel")  # fmt: skip
            sec["text"] = (f"{text} Median over trials, 95% bootstrap CI; ratio to knotd on "
                           "kernel sockets.")  # fmt: skip
            out.append(sec)
        return out


UDP_APP = UdpApp()
