"""`veloz run --metrics`: scrape a live run's endpoint on the testbed and parse it
with prometheus_client's own parser, as Prometheus would read it.

The endpoint listens on vz-dut's loopback, so it is scraped from inside
vz-dut; each namespace has its own loopback, so the port is free there.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scapy.all import IP, UDP, Ether, Raw, wrpcap
from wire import run_nf, send_from_gen, xdp_attached

from veloz import testbed as tb
from veloz.control import lb
from veloz.core.proc import in_netns, veloz_argv
from waits import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

ADDR = "127.0.0.1:9464"
SCRAPE = ("import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
          "'http://' + sys.argv[1] + '/metrics', timeout=5).read().decode())")  # fmt: skip


def scrape(addr: str = ADDR) -> subprocess.CompletedProcess:
    return subprocess.run(in_netns("vz-dut", [sys.executable, "-c", SCRAPE, addr]),
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip


def samples(text: str) -> dict[str, list]:
    """Sample name -> its samples, parsed by prometheus_client."""
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("veloz_"), family.name
        for s in family.samples:
            if family.type == "counter":
                assert s.name == family.name + "_total" or s.name.endswith("_created"), s.name
            out.setdefault(s.name, []).append(s)
    return out


def frames(n: int) -> list:
    gen, dut = tb.endpoint("gen-dut"), tb.endpoint("dut-gen")
    return [Ether(src=gen.mac, dst=dut.mac) / IP(src=gen.ipv4.split("/")[0], dst="198.18.1.1")
            / UDP(sport=42000 + i, dport=9) / Raw(b"metrics") for i in range(n)]  # fmt: skip


def scrape_until(ready, what: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Scrape until ready(samples) holds (within 20 s): the scrape and its samples."""

    def scraped() -> tuple[subprocess.CompletedProcess, dict]:
        done = scrape()
        return done, samples(done.stdout) if done.returncode == 0 else {}

    return wait_until(scraped, 20, until=lambda s: ready(s[1]), interval=0.2, what=what)


def verdict_frames(got: dict, verdict: str) -> float:
    return sum(s.value for s in got.get("veloz_frames_total", []) if s.labels["verdict"] == verdict)


def drops(got: dict) -> float:
    return verdict_frames(got, "drop")


def dispatched(got: dict) -> tuple[float, float]:
    """A userspace dispatcher's frames handed to workers, and those they hold now."""
    handed = sum(s.value for s in got.get("veloz_dispatch_frames_total", [])
                 if "worker" in s.labels)  # fmt: skip
    return handed, sum(s.value for s in got.get("veloz_dispatch_in_flight_frames", []))


@pytest.mark.parametrize("backend, extra", [
    ("xdp", ("--workers", "2", "--dispatch", "rss-mod")),
    ("afxdp", ()),
    ("afxdp", ("--workers", "2", "--dispatch", "flow-affinity")),
    ("dpdk", ("--workers", "2", "--dispatch", "rss-mod", "--alloc")),
])  # fmt: skip
def test_scrape_parses_and_counts_what_was_sent(testbed, tmp_path: Path, backend, extra):
    runner = run_nf("drop", backend, "--metrics", ADDR, *extra)
    with runner:
        pcap = tmp_path / "in.pcap"
        sent = frames(30)
        wrpcap(str(pcap), sent)
        send_from_gen(pcap)
        # with a dispatcher: until every frame is handed over and none held
        waits = backend != "xdp" and "--dispatch" in extra
        done, got = scrape_until(lambda g: drops(g) >= 30
                                 and (not waits or dispatched(g) == (30, 0)),
                                 "30 drops scraped")  # fmt: skip
        assert drops(got) == 30, done.stdout
        assert [s.value for s in got["veloz_up"]] == [1.0]
        info = got["veloz_run_info"][0].labels
        assert info == {"nf": "drop", "backend": backend}
        others = [s for s in got["veloz_frames_total"] if s.labels["verdict"] != "drop"]
        assert others and all(s.value == 0 for s in others)
        workers = {s.labels["worker"] for s in got["veloz_frames_total"]}
        assert workers and {s.labels["worker"] for s in got["veloz_bytes_total"]} == workers
        assert sum(s.value for s in got["veloz_bytes_total"]) == sum(len(f) for f in sent)
        if backend == "xdp":
            # dispatch figures: every frame went to one of the 2 CPUs
            assert len(got["veloz_dispatch_frames_total"]) == 2
            assert sum(s.value for s in got["veloz_dispatch_frames_total"]) == 30
            assert got["veloz_dispatch_workers"][0].value == 2
            assert "veloz_rx_missed_frames_total" not in got  # XDP cannot tell: not a 0
        elif "--dispatch" in extra:
            # the dispatcher's own, per worker: all 30 handed over, none held now
            assert dispatched(got) == (30, 0), done.stdout
            workers = {s.labels["worker"] for s in got["veloz_dispatch_frames_total"]}
            assert workers == {"0", "1"}
            assert got["veloz_dispatch_workers"][0].value == 2
            assert 1 <= got["veloz_dispatch_active_workers"][0].value <= 2
            assert got["veloz_dispatch_ring_full_frames_total"][0].value == 0
            assert ("veloz_dispatch_reallocations_total" in got) == ("--alloc" in extra)
            assert sum(s.value for s in got["veloz_rx_frames_total"]) == 30
        else:
            # 30 frames, paced by scapy, into an idle port: none missed (and
            # every one was run: drops == 30 above)
            assert got["veloz_rx_missed_frames_total"][0].value == 0, done.stdout
            assert sum(s.value for s in got["veloz_rx_frames_total"]) == 30
            kinds = {s.labels["error"] for s in got["veloz_errors_total"]}
            assert kinds == {"rx_invalid", "tx_failed", "pass_failed"}
        runner.stop()
    # the server goes with the run
    wait_until(scrape, 10, until=lambda d: d.returncode != 0, interval=0.1,
               what="the metrics server gone")  # fmt: skip


def test_busy_metrics_address_is_refused_before_attaching(testbed):
    hold = subprocess.Popen(in_netns("vz-dut", [sys.executable, "-c",
        "import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 9465)); s.listen(); "
        "print('ready', flush=True); sys.stdin.read()"]),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert hold.stdout is not None and hold.stdout.readline().strip() == "ready"
        done = subprocess.run(in_netns("vz-dut", veloz_argv(
            "run", "drop", "--backend", "xdp", "--iface", "dut-gen", "--json",
            "--metrics", "127.0.0.1:9465")), capture_output=True, text=True, timeout=60,
            check=False)  # fmt: skip
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "cannot listen" in done.stderr, done.stderr
        assert not xdp_attached("vz-dut", "dut-gen")
    finally:
        hold.communicate(input="", timeout=10)


LB_VIP = "198.18.0.100"
LB_BACKENDS = ("198.18.1.2", "198.18.1.3")
LB_CONFIG = f"""
[lb]
source4 = "198.18.0.2"
next_hop_mac = "02:00:c6:12:00:01"
[[vip]]
address = "{LB_VIP}"
port = 9
proto = "udp"
backends = ["{LB_BACKENDS[0]}", "{LB_BACKENDS[1]}"]
"""


def lb_expected(sent: list) -> dict[str, int]:
    """Each frame's backend, as nf/lb.c picks it: the VIP's Maglev ring
    (control/maglev.py) at the slot of the flow's hash (the NF's own C)."""
    members = {i + 1: lb.Backend(ipaddress.ip_address(a)) for i, a in enumerate(LB_BACKENDS)}
    ring = lb.ring_ids(members)
    out = dict.fromkeys(LB_BACKENDS, 0)
    for f in sent:
        key = lb.flow_key(ipaddress.ip_address(f[IP].src), ipaddress.ip_address(LB_VIP),
                          f[UDP].sport, 9, 17)  # fmt: skip
        out[str(members[ring[lb.flow_slot(key)]].address)] += 1
    return out


def vip_frames(got: dict) -> list[float]:
    return [s.value for s in got.get("veloz_lb_vip_frames_total", [])]


@pytest.mark.parametrize("backend", ["xdp", "afxdp"])
def test_lb_counts_per_vip_and_backend(testbed, tmp_path: Path, backend):
    cfg = tmp_path / "lb.toml"
    cfg.write_text(LB_CONFIG)
    gen, dut = tb.endpoint("gen-dut"), tb.endpoint("dut-gen")
    sent = [Ether(src=gen.mac, dst=dut.mac) / IP(src=gen.ipv4.split("/")[0], dst=LB_VIP)
            / UDP(sport=43000 + i, dport=9) / Raw(b"lb") for i in range(40)]  # fmt: skip
    expected = lb_expected(sent)
    assert all(expected.values()), expected  # both backends take some: a real split
    with run_nf("lb", backend, "--config", str(cfg), "--metrics", ADDR):
        pcap = tmp_path / "in.pcap"
        wrpcap(str(pcap), sent)
        send_from_gen(pcap)
        # lb's own counters are its maps, read at the scrape; the verdicts
        # come from the runner's latest counters line, up to an interval
        # behind (metrics.py): wait for both
        done, got = scrape_until(
            lambda g: sum(vip_frames(g)) >= 40 and verdict_frames(g, "tx") >= 40,
            "lb's 40 frames scraped")  # fmt: skip
    assert vip_frames(got) == [40], done.stdout
    assert got["veloz_lb_vip_frames_total"][0].labels == {"vip": f"{LB_VIP}:9/udp"}
    assert got["veloz_lb_vip_bytes_total"][0].value == sum(len(f) for f in sent)
    per = {s.labels["backend"]: s.value for s in got["veloz_lb_backend_frames_total"]}
    assert per == expected
    outcomes = {s.labels["outcome"]: s.value for s in got["veloz_lb_frames_total"]}
    assert outcomes["ring"] == 40 and outcomes["conn_hit"] == 0 and outcomes["malformed"] == 0
    assert verdict_frames(got, "tx") == 40
