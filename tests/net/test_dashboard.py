# SPDX-License-Identifier: BSD-2-Clause
"""deploy/'s dashboard and alerting rules against live scrapes: each kind
of run (router, ddos, lb, a userspace dispatcher, udpd) on the testbed with
--metrics and a little traffic; promtool lints each scrape (`promtool check
metrics`), and every metric name the dashboard and rules use must be in the
scrape of the run that exports it (NAMES).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scapy.all import IP, UDP, Ether, Raw, wrpcap
from test_ctl import send
from test_metrics import LB_CONFIG, LB_VIP, scrape
from test_udpd import echo_from_gen, start_veloz_echo, stop
from test_udpd_observe import udpd_config  # noqa: F401 (the udpd run's fixture, by name)
from wire import run_nf, send_from_gen

from promql import all_names, promtool
from veloz import testbed as tb
from veloz.core.proc import Runner, in_netns, veloz_argv
from waits import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

ADDR = "127.0.0.1:9468"

# The runs, and what each is.
RUNS = {
    "router": "router on afxdp, dut-gen to dut-sink, following vz-dut's kernel table",
    "ddos": "ddos on xdp with the XDP dispatch stage: --workers 2 --dispatch rss-mod --alloc",
    "lb": "lb on afxdp, test_metrics' VIP and its two backends",
    "dispatch": "drop on afxdp, --workers 2 --dispatch flow-affinity --alloc",
    "udpd": "veloz udpd, test_udpd's config",
}
COMMON = ("veloz_up", "veloz_run_info", "veloz_frames_total", "veloz_bytes_total",
          "veloz_rx_frames_total", "veloz_errors_total", "veloz_rx_missed_frames_total",
          "veloz_redirected_frames_total", "veloz_from_kernel_frames_total",
          "veloz_ctl_refused_connections_total")  # fmt: skip
DISPATCH = ("frames_total", "in_flight_frames", "workers", "active_workers",
            "mean_active_workers", "ring_full_frames_total", "reordered_frames_total",
            "flow_events_total", "buckets_moved_total", "rebalances_total",
            "reallocations_total")  # fmt: skip
UDPD = ("up", "apps", "sockets", "stack_rx_frames_total", "stack_rx_delivered_total",
        "stack_tx_frames_total", "port_xsk_rx_dropped_total", "port_rx_invalid_total",
        "sockets_rx_ring_full_total", "stack_udp_no_port_total", "stack_udp_bad_csum_total",
        "stack_arp_unresolved_drops_total", "stack_tx_full_total",
        "sockets_tx_errors_total")  # fmt: skip
# Metric name -> the run whose scrape must show it ("up" is Prometheus' own).
NAMES: dict[str, str | None] = {
    "up": None,
    **dict.fromkeys(COMMON, "router"),
    "veloz_router_frames_total": "router",
    **{f"veloz_router_sync_{n}": "router" for n in ("lag_seconds", "routes", "transactions_total",
                                                     "errors_total")},
    "veloz_ddos_frames_total": "ddos",
    "veloz_dispatch_no_cpu_frames_total": "ddos",
    "veloz_dispatch_written_off_frames_total": "ddos",
    **{f"veloz_lb_{n}": "lb" for n in ("frames_total", "vip_frames_total", "vip_bytes_total",
                                       "backend_frames_total", "backend_bytes_total")},
    **{f"veloz_dispatch_{n}": "dispatch" for n in DISPATCH},
    **{f"veloz_udpd_{n}": "udpd" for n in UDPD},
    **{f"veloz_lb_{n}": "lb" for n in ("backend_up", "vip_healthy_backends",
                                       "health_checks_total")},
}  # fmt: skip


def sample_names(text: str) -> set[str]:
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def scrape_until(addr: str, ready) -> str:
    """The endpoint's text once ready(sample names, text) holds."""

    def text() -> str:
        done = scrape(addr)
        return done.stdout if done.returncode == 0 else ""

    return wait_until(text, 30, until=lambda t: bool(t) and ready(sample_names(t), t),
                      interval=0.3, what=f"a scrape of {addr} with traffic")  # fmt: skip


def counted(name: str, text: str) -> float:
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name)  # fmt: skip


def nf_scrape(nf: str, backend: str, extra: tuple[str, ...], traffic, wants: set[str]) -> str:
    """A run with --metrics, its traffic, and its scrape once it counted it
    (and shows wants, the names known to come once frames have passed)."""
    with run_nf(nf, backend, "--metrics", ADDR, *extra) as runner:
        traffic()
        text = scrape_until(ADDR, lambda names, t: wants <= names
                            and counted("veloz_frames_total", t) > 0)  # fmt: skip
        runner.stop()
    return text


def lb_traffic(tmp: Path) -> None:
    gen, dut = tb.endpoint("gen-dut"), tb.endpoint("dut-gen")
    sent = [Ether(src=gen.mac, dst=dut.mac) / IP(src=gen.ipv4.split("/")[0], dst=LB_VIP)
            / UDP(sport=44000 + i, dport=9) / Raw(b"dash") for i in range(20)]  # fmt: skip
    wrpcap(str(tmp / "lb.pcap"), sent)
    send_from_gen(tmp / "lb.pcap")


def udpd_scrape(config: Path) -> str:
    addr = "127.0.0.1:9469"
    argv = in_netns("vz-dut", veloz_argv("udpd", "--config", str(config), "--json",
                                         "--interval-ms", "200", "--metrics", addr))  # fmt: skip
    with Runner(argv, attach_timeout=30, what="udpd"):
        echo = start_veloz_echo(7111)
        try:
            assert echo_from_gen(7111, [64] * 5)["ok"] == 5
        finally:
            stop(echo)
        return scrape_until(addr, lambda names, t:
                            counted("veloz_udpd_stack_rx_delivered_total", t) >= 5)  # fmt: skip


def live_scrape(run: str, tmp: Path, request) -> str:
    wants = {n for n, r in NAMES.items() if r == run}
    if run == "router":
        cfg = tmp / "router.toml"
        cfg.write_text('sync = "kernel"\n')
        route = ["ip", "-n", "vz-dut", "route", "add", "198.18.128.0/17", "via", "198.18.1.2"]
        subprocess.run(route, check=True)
        try:
            return nf_scrape("router", "afxdp", ("--iface", "dut-sink", "--config", str(cfg)),
                             lambda: send("198.18.128.1", 200), wants)  # fmt: skip
        finally:
            subprocess.run(["ip", "-n", "vz-dut", "route", "del", "198.18.128.0/17"], check=False)
    if run == "ddos":
        return nf_scrape("ddos", "xdp", ("--workers", "2", "--dispatch", "rss-mod", "--alloc"),
                         lambda: send("198.18.0.2", 200), wants)  # fmt: skip
    if run == "lb":
        cfg = tmp / "lb.toml"
        cfg.write_text(LB_CONFIG)
        return nf_scrape("lb", "afxdp", ("--config", str(cfg)), lambda: lb_traffic(tmp), wants)
    if run == "dispatch":
        extra = ("--workers", "2", "--dispatch", "flow-affinity", "--alloc")
        return nf_scrape("drop", "afxdp", extra, lambda: send("198.18.0.2", 200), wants)
    return udpd_scrape(request.getfixturevalue("udpd_config"))


def test_the_table_names_every_metric_the_dashboard_and_rules_use():
    used = all_names()
    assert set(NAMES) == set(used), (
        f"used but not in NAMES: {sorted(set(used) - set(NAMES))}; "
        f"in NAMES but used nowhere: {sorted(set(NAMES) - set(used))}"
    )
    assert set(NAMES.values()) - {None} == set(RUNS)


@pytest.mark.parametrize("run", list(RUNS))
def test_a_live_scrape_passes_promtool_and_has_the_names_used(testbed, tmp_path, request, run):
    text = live_scrape(run, tmp_path, request)
    lint = promtool("check", "metrics", stdin=text)
    assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout + lint.stderr + text
    names = sample_names(text)
    missing = [name for name, where in sorted(NAMES.items()) if where == run and name not in names]
    assert not missing, f"{RUNS[run]}: the scrape lacks {missing}\n{text}"
