"""--metrics without root: the address check, and a counters line turned into
Prometheus text that prometheus_client's parser reads back (every shape the
runners print: userspace with errors and rx_missed, xdp with null errors and
a dispatch stage with an allocator, an NF's own counters)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from veloz.control import metrics
from veloz.core.errors import VelozError

USERSPACE_LINE = {
    "t": 3.0, "nf": "ddos", "packets": 12, "bytes": 900, "aborted": 0, "drop": 5, "pass": 4,
    "tx": 3, "redirect": 0, "rx": 13,
    "errors": {"rx_invalid": 1, "tx_failed": 0, "pass_failed": 2, "rx_missed": 7},
    "from_kernel": 1, "pps": 0, "bps": 0, "redirected": {"dut-gen": 0}, "ctl_refused": 0,
    "workers": [
        {"worker": 0, "packets": 8, "bytes": 600, "aborted": 0, "drop": 5, "pass": 1, "tx": 2,
         "redirect": 0, "rx": 9, "errors": {"rx_invalid": 1, "tx_failed": 0, "pass_failed": 2,
                                             "rx_missed": None}, "from_kernel": 1},
        {"worker": 1, "packets": 4, "bytes": 300, "aborted": 0, "drop": 0, "pass": 3, "tx": 1,
         "redirect": 0, "rx": 4, "errors": {"rx_invalid": 0, "tx_failed": 0, "pass_failed": 0,
                                             "rx_missed": None}, "from_kernel": 0},
    ],
}  # fmt: skip

XDP_LINE = {
    "t": 1.0, "nf": "tx", "packets": 6, "bytes": 360, "aborted": 0, "drop": 0, "pass": 0,
    "tx": 6, "redirect": 0, "rx": 6,
    "errors": {"rx_invalid": 0, "tx_failed": None, "pass_failed": 0, "rx_missed": None},
    "from_kernel": 0, "redirected": {"dut-gen": 0},
    "workers": [{"worker": 0, "packets": 6, "bytes": 360, "tx": 6, "rx": 6,
                 "errors": {"rx_invalid": 0, "tx_failed": None, "pass_failed": 0,
                            "rx_missed": None}, "from_kernel": 0}],
    "dispatch": {"policy": "rss-mod", "workers": 2, "active": [0], "cpu_packets": [4, 2],
                 "flows_new": 3, "flows_moved": 1, "flows_aged": 0, "flows": 3,
                 "buckets_moved": 0, "bucket_moves_requested": 0, "rebalances": 0, "no_cpu": 0,
                 "alloc": {"mean_active": 1.5, "reallocations": 3, "grows": 2, "shrinks": 1,
                           "written_off": 4}},
}  # fmt: skip


class Fixed:
    def __init__(self, *args) -> None:
        self.args = args

    def collect(self):
        yield from metrics.families(*self.args)


def scrape(*args) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed(*args))
    out: dict = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        assert family.name.startswith("veloz_")
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_userspace_line_with_the_nfs_own_counters():
    got = scrape(USERSPACE_LINE, "ddos", "afxdp", {"passed": 4, "rule_dropped": 5})
    assert got[("veloz_up", ())] == 1
    assert got[("veloz_run_info", (("backend", "afxdp"), ("nf", "ddos")))] == 1
    assert got[("veloz_frames_total", (("verdict", "drop"), ("worker", "0")))] == 5
    assert got[("veloz_frames_total", (("verdict", "pass"), ("worker", "1")))] == 3
    assert got[("veloz_bytes_total", (("worker", "1"),))] == 300
    assert got[("veloz_errors_total", (("error", "pass_failed"), ("worker", "0")))] == 2
    assert got[("veloz_rx_missed_frames_total", ())] == 7
    assert got[("veloz_from_kernel_frames_total", (("worker", "0"),))] == 1
    assert got[("veloz_ddos_frames_total", (("outcome", "rule_dropped"),))] == 5
    per_verdict = sum(v for (name, _), v in got.items() if name == "veloz_frames_total")
    assert per_verdict == USERSPACE_LINE["packets"]


def test_xdp_line_nulls_are_absent_not_zero_and_dispatch_is_there():
    got = scrape(XDP_LINE, "tx", "xdp", None)
    assert not [k for k in got if k[0] == "veloz_rx_missed_frames_total"]
    assert not [k for k in got if k[0] == "veloz_errors_total" and ("error", "tx_failed") in k[1]]
    assert got[("veloz_dispatch_frames_total", (("cpu", "1"),))] == 2
    assert got[("veloz_dispatch_workers", ())] == 2
    assert got[("veloz_dispatch_active_workers", ())] == 1
    assert got[("veloz_dispatch_flow_events_total", (("event", "moved"),))] == 1
    assert got[("veloz_dispatch_reallocations_total", (("direction", "grow"),))] == 2
    assert got[("veloz_dispatch_written_off_frames_total", ())] == 4


# afxdp/dpdk --dispatch --alloc: the dispatcher's object in the counters line
DISPATCHER = {
    "policy": "flow-affinity", "workers": 2, "active": 1, "mean_active": 1.25, "frames": 10,
    "ring_full": 1, "reordered": 0, "flows_new": 4, "flows_moved": 1, "flows_aged": 0,
    "flows": 4, "buckets_moved": 0, "rebalances": 0, "frames_per_worker": [7, 3],
    "in_flight_per_worker": [2, 0],
    "alloc": {"mean_active": 1.25, "reallocations": 3, "grows": 2, "shrinks": 1},
}  # fmt: skip

LB_VIPS = [
    {"vip": "198.18.0.100:80/udp", "packets": 9, "bytes": 900, "backends": [
        {"id": 1, "address": "198.18.1.10", "valid": True, "packets": 5, "bytes": 500},
        {"id": 2, "address": "198.18.1.11", "valid": False, "packets": 1, "bytes": 100},
        {"id": 3, "address": "198.18.1.11", "valid": True, "packets": 3, "bytes": 300}]},
    {"vip": "[fd00:198:18::100]:53/tcp", "packets": 0, "bytes": 0, "backends": []},
]  # fmt: skip


def test_userspace_dispatcher_figures_per_worker():
    line = USERSPACE_LINE | {"dispatch": DISPATCHER}
    got = scrape(line, "ddos", "afxdp", None)
    assert got[("veloz_dispatch_frames_total", (("worker", "0"),))] == 7
    assert got[("veloz_dispatch_frames_total", (("worker", "1"),))] == 3
    assert got[("veloz_dispatch_in_flight_frames", (("worker", "0"),))] == 2
    assert got[("veloz_dispatch_workers", ())] == 2
    assert got[("veloz_dispatch_active_workers", ())] == 1
    assert got[("veloz_dispatch_mean_active_workers", ())] == 1.25
    assert got[("veloz_dispatch_ring_full_frames_total", ())] == 1
    assert got[("veloz_dispatch_reordered_frames_total", ())] == 0
    assert got[("veloz_dispatch_flow_events_total", (("event", "new"),))] == 4
    assert got[("veloz_dispatch_reallocations_total", (("direction", "shrink"),))] == 1
    # the cpumap's write-offs are the XDP stage's: absent, not a 0
    assert not [k for k in got if k[0] == "veloz_dispatch_written_off_frames_total"]
    assert not [k for k in got if ("cpu", "0") in k[1]]


def test_lb_per_vip_and_backend():
    got = scrape(USERSPACE_LINE, "lb", "xdp", {"ring": 9, "conn_hit": 0}, LB_VIPS)
    vip = ("vip", "198.18.0.100:80/udp")
    assert got[("veloz_lb_frames_total", (("outcome", "ring"),))] == 9
    assert got[("veloz_lb_vip_frames_total", (vip,))] == 9
    assert got[("veloz_lb_vip_bytes_total", (vip,))] == 900
    assert got[("veloz_lb_vip_frames_total", (("vip", "[fd00:198:18::100]:53/tcp"),))] == 0
    assert got[("veloz_lb_backend_frames_total", (("backend", "198.18.1.10"), vip))] == 5
    # removed and added again: one series, both ids' frames
    assert got[("veloz_lb_backend_frames_total", (("backend", "198.18.1.11"), vip))] == 4
    assert got[("veloz_lb_backend_bytes_total", (("backend", "198.18.1.11"), vip))] == 400


def test_no_answer_is_up_0_and_nothing_else():
    assert scrape(None, None, None, None) == {("veloz_up", ()): 0}


@pytest.mark.parametrize("value, expected", [
    ("127.0.0.1:9464", ("127.0.0.1", 9464)),
    ("localhost:1", ("127.0.0.1", 1)),
    ("[::1]:9464", ("::1", 9464)),
    ("198.19.255.1:65535", ("198.19.255.1", 65535)),
    ("[fd00:198:18::3]:80", ("fd00:198:18::3", 80)),
])  # fmt: skip
def test_listen_addresses_accepted(value, expected):
    assert metrics.parse_listen(value) == expected


@pytest.mark.parametrize("value, words", [
    ("9464", "ADDR:PORT"),
    (":9464", "ADDR:PORT"),
    ("0.0.0.0:9464", "loopback or testbed"),
    ("10.0.0.1:9464", "loopback or testbed"),
    ("[::]:9464", "loopback or testbed"),
    ("127.0.0.1:0", "1-65535"),
    ("127.0.0.1:65536", "1-65535"),
    ("127.0.0.1:http", "1-65535"),
    ("example.com:80", "not an IP address"),
    ("127.0.0.1:9464\nx", "1-65535"),
])  # fmt: skip
def test_listen_addresses_refused(value, words):
    with pytest.raises(VelozError, match=words):
        metrics.parse_listen(value)
